/* lwIP's port to a Linux process: the clock, randomness, diagnostics and the core-lock
 * check (lwIP doc/sys_arch.txt lists what a NO_SYS port provides). */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "lwip/sys.h"

/* Does this thread hold the core lock (stk__now_held)? Thread-local, so that a thread
 * without the lock never looks at the cache, which the lock guards. */
static __thread __attribute__((tls_model("initial-exec"))) bool lock_held;

void stk__now_held(bool held)
{
	lock_held = held;
	if (held)
		stk__node.now_cached = false;
}

void stk__now_forget(void)
{
	stk__node.now_cached = false;
}

/* The millisecond clock, read once per hold of the core lock: reading CLOCK_MONOTONIC
 * costs 0.35-0.42 us in the 2-vCPU guest we measure on (a null system call 1.5 us), and
 * lwIP asked for it about ten times per 1-byte round trip on each side (timestamp option,
 * RTT, timers' sleep time, stk__leave), about 4 us of a 12-27 us round trip. A hold
 * lasts microseconds, except a batch of frames: whoever runs lwIP's timers after one
 * forgets the reading first (drive.c round_after_wait). Without the lock (tests, the
 * lock's own bookkeeping) every call reads the clock. */
uint64_t stk__now_ms(void)
{
	struct stk_node *n = &stk__node;
	struct timespec ts;

	if (lock_held && n->owned && n->now_cached)
		return n->now_ms;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
	if (lock_held && n->owned) {
		n->now_ms = ms;
		n->now_cached = true;
	}
	return ms;
}

/* lwIP's millisecond clock. It wraps after 49 days, which lwIP's timer code handles by
 * comparing differences. It is also the RFC 7323 timestamp clock (1 ms per tick). */
u32_t sys_now(void)
{
	return (u32_t)stk__now_ms();
}

/* Random values come from a buffer of the calling thread's, filled by one getrandom(2)
 * of RAND_BUF values: lwIP and the stack ask for 4 octets at a time (LWIP_RAND, the ISN
 * secret, the handoff nonces, synshed's and syncookie's keys), about a dozen system calls in
 * a short process's start (strace, docs/benchmarks.md "second round"). A value is used once
 * and then wiped. A fork child must not draw what its parent draws too (a handoff nonce is
 * a capability, ISNs a secret): fork's child handler moves rand_gen on, and a buffer
 * filled in another generation is thrown away. Deviation: a child made by a raw clone(2)
 * or _Fork(), which run no fork handlers, shares its parent's unused values; neither
 * ulstack nor the shim's fork wrapper makes one. */
#define RAND_BUF 16

static _Atomic unsigned rand_gen;
static __thread __attribute__((tls_model("initial-exec"))) struct {
	uint32_t v[RAND_BUF];
	unsigned left, gen;
} rand_buf;

static void rand_forked(void)
{
	rand_gen++;
}

static void rand_handlers(void)
{
	pthread_atfork(NULL, NULL, rand_forked);
}

static void rand_fill(void *to, size_t len)
{
	while (getrandom(to, len, 0) != (ssize_t)len) {
		if (errno == EINTR)
			continue;
		FILE *f = fopen("/dev/urandom", "re");
		size_t n = f ? fread(to, len, 1, f) : 0;
		if (f)
			fclose(f);
		if (n == 1)
			break;
		/* Without the kernel's generator there is no secret to be had (ISNs, handoff
		 * nonces): better no stack than a guessable one. */
		stk__log(0, "no random numbers (getrandom, /dev/urandom): %s", strerror(errno));
		abort();
	}
}

uint32_t stk__random32(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	unsigned gen;
	uint32_t v;

	pthread_once(&once, rand_handlers);
	gen = rand_gen;
	if (!rand_buf.left || rand_buf.gen != gen) {
		rand_fill(rand_buf.v, sizeof(rand_buf.v));
		rand_buf.left = RAND_BUF;
		rand_buf.gen = gen;
	}
	v = rand_buf.v[--rand_buf.left];
	rand_buf.v[rand_buf.left] = 0;
	return v;
}

static void default_log(int level, const char *msg)
{
	(void)level;
	fprintf(stderr, "ulstack: %s\n", msg);
}

static uls_log_fn *log_fn = default_log;

ULS_EXTERN void uls_set_log(uls_log_fn *fn)
{
	log_fn = fn ? fn : default_log;
	nif_set_log(fn ? (nif_log_fn *)fn : NULL);
}

void stk__log(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	nif_vlog(log_fn, level, fmt, ap);
	va_end(ap);
}

void stk__lwip_diag(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	nif_vlog(log_fn, 2, fmt, ap);
	va_end(ap);
}

void stk__lwip_assert(const char *msg, const char *file, int line)
{
	stk__log(0, "lwIP assertion \"%s\" failed at %s:%d", msg, file, line);
	abort();
}

void stk__assert_core_locked(void)
{
	if (!stk__core_lock_mine())
		stk__lwip_assert("core lock held", __FILE__, __LINE__);
}
