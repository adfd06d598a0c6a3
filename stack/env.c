/* libuls's environment variables, read once, when the library is loaded.
 *
 * libuls needs its variables late: the lease on a program's first socket (ULS_CTL,
 * ULS_DATAPATH, stack/socket.c), the node's settings as it comes up (stack/drive.c, tso.c,
 * fixedfd.c) and lwIP's first uses (tcpconf.c, syncookie.c, synshed.c). By then the
 * program's threads may run, and glibc's getenv() walks the environment without a lock:
 * a setenv() or putenv() that adds a name meanwhile may move the array getenv() reads and
 * free the old one (glibc before 2.40, whose getenv() no longer meets a freed array;
 * Debian 12 has 2.36), and a putenv() string the program changes or frees may be read
 * half-written. The loader runs this constructor before main() for a program linked with
 * libuls or run under ulsrun (LD_PRELOAD), while it has no thread of its own that could
 * change the environment, so libuls reads the environment there and keeps copies (a
 * program that dlopen()s libuls while its threads change the environment is on its own).
 * Deviation (uls(3), ENVIRONMENT): a program that sets a ULS_* variable for itself after
 * libuls was loaded (setenv() before its first socket) must call uls_env_reload() after
 * it, before any other of its threads calls libuls; a variable set for a program before it
 * starts (the shell's, ulsrun's) needs nothing.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Every variable libuls reads (a name not here is a programming error: stk__getenv says
 * so and reads none). */
static const char *const names[] = {
	"ULS_CTL", "ULS_DATAPATH", "ULS_IP6", "ULS_GW6", "ULS_RTC", "ULS_SPIN_US",
	"ULS_RX_COOP", "ULS_RX_MULTISHOT", "ULS_RX_NOWAIT", "ULS_FIXED_FILES",
	"ULS_SYN_BACKLOG", "ULS_SYNCOOKIES", "ULS_SYN_SHED", "ULS_SYN_RETRIES",
	"ULS_REASS_TIMEOUT", "ULS_PMTU_AGE", "ULS_TSO",
};
#define NNAMES (sizeof(names) / sizeof(names[0]))

static char *values[NNAMES];   /* copies; NULL: unset (or no memory for the copy) */

static void env_read(void)
{
	for (size_t i = 0; i < NNAMES; i++) {
		const char *v = getenv(names[i]);
		free(values[i]);
		values[i] = v ? strdup(v) : NULL;
	}
}

/* First among the constructors of the object libuls is linked into: the shim (apps/preload)
 * carries libuls in its own object, and its constructor (exec.c's shim_init) attaches the
 * stack right away for connections passed across exec, which reads ULS_RTC and the rest:
 * with the default priority it ran first and read nothing (an exec'd program under
 * ULS_RTC=0 drove its stack anyway; tests/shim's exec-0 case, this stop's CI). */
__attribute__((constructor(101))) static void env_load(void)
{
	env_read();
}

void uls_env_reload(void)
{
	env_read();
}

const char *stk__getenv(const char *name)
{
	for (size_t i = 0; i < NNAMES; i++)
		if (!strcmp(names[i], name))
			return values[i];
	stk__log(0, "%s is not one of libuls's variables (stack/env.c): not read", name);
	return NULL;
}
