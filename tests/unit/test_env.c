/* stack/env.c: libuls reads its environment variables once, when it is loaded, and not at
 * the late first uses (the lease on a program's first socket, the node's settings, lwIP's
 * first SYN), when the program's threads may run: glibc's getenv() takes no lock, and a
 * setenv() of another thread may move and free the array it walks (glibc before 2.40).
 * The test runs itself again with a known environment, so that what was there at load is
 * known; main() then changes it, as a program's thread would, before the first uses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "internal.h"
#include "hooks.h"
#include "uls.h"

#define CHILD "TEST_ENV_CHILD"

/* Set at load: ULS_SYN_RETRIES=3, ULS_PMTU_AGE=400. Changed by main() before the first
 * reads. Before (getenv() at first use), the first uses read the changed values, 9 and
 * 500 s. */
static void variables_changed_after_load_are_not_read(void **state)
{
	(void)state;
	assert_int_equal(stk__syn_retries(), 3);
	assert_int_equal(stk__pmtu_age_ms(), 400 * 1000);
}

/* A program that sets a variable for itself after load says so (uls_env_reload(), as
 * ulsbench does for --datapath, apps/netops.c): then it is read, and one it removed is
 * gone. */
static void a_reload_reads_the_environment_again(void **state)
{
	(void)state;
	assert_null(stk__getenv("ULS_DATAPATH"));
	setenv("ULS_DATAPATH", "relay", 1);
	assert_null(stk__getenv("ULS_DATAPATH"));
	uls_env_reload();
	assert_string_equal(stk__getenv("ULS_DATAPATH"), "relay");
	unsetenv("ULS_DATAPATH");
	uls_env_reload();
	assert_null(stk__getenv("ULS_DATAPATH"));
}

/* A name libuls does not know is a programming error: said on the log, and read as unset,
 * never from the environment. */
static void a_name_not_in_the_list_is_not_read(void **state)
{
	(void)state;
	assert_null(stk__getenv(CHILD));
}

int main(int argc, char **argv)
{
	(void)argc;
	if (!getenv(CHILD)) {
		/* The harness's environment stays (CMOCKA_MESSAGE_OUTPUT among it). */
		if (setenv(CHILD, "1", 1) < 0 || setenv("ULS_SYN_RETRIES", "3", 1) < 0 ||
		    setenv("ULS_PMTU_AGE", "400", 1) < 0 || unsetenv("ULS_DATAPATH") < 0)
			return 99;
		execv("/proc/self/exe", argv);
		return 99;   /* a hard error for the harness: the test could not run */
	}
	setenv("ULS_SYN_RETRIES", "9", 1);
	setenv("ULS_PMTU_AGE", "500", 1);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(variables_changed_after_load_are_not_read),
		cmocka_unit_test(a_reload_reads_the_environment_again),
		cmocka_unit_test(a_name_not_in_the_list_is_not_read),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
