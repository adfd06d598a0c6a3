/* Signals held off while a thread is inside the stack, without a system call.
 *
 * A handler that uses sockets must never run on a thread that holds the core lock (or a
 * shim's table lock) on the program's behalf: it would wait for that lock forever. The
 * plain way is to block every signal around each such section, two rt_sigprocmask calls
 * each time; a shim's send or recv took six of them (about twelve system calls per
 * round trip of a small message, more than the data path's own).
 *
 * A shim that runs every handler of the program through a trampoline of its own
 * (apps/preload/signal.c) can do better, as OpenOnload does: it turns deferral on
 * (uls_signal_defer_enable) and asks uls_signal_deferred() first in its trampoline. A
 * thread inside a held section (uls_signal_hold ... uls_signal_release, nested) only
 * counts its depth. A signal that arrives there is noted with its siginfo and the
 * handler returns at once; when the outermost section ends, the thread sends each noted
 * signal to itself again (rt_tgsigqueueinfo, same siginfo), and the kernel delivers it
 * before that call returns, now to the program's handler, with a real context. The
 * program's mask is never changed, so signals it blocks stay blocked.
 *
 * Signals a fault raises (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS) and SIGABRT
 * are never deferred: returning from them would run the faulting instruction again.
 *
 * Deviation: while deferred, a second instance of a signal is merged with the first, as
 * the kernel merges standard signals; a realtime signal queued twice during one held
 * section reaches the handler once. Without deferral (libuls used directly, or a shim
 * that does not trampoline), the sections block every signal but those as before.
 */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "uls.h"

#ifndef _NSIG
#define _NSIG 65
#endif

/* Initial-exec TLS: read and written from signal handlers. */
#define TLS __thread __attribute__((tls_model("initial-exec")))

static atomic_bool deferring;
static atomic_ulong deferred_count, redelivered_count;  /* from handlers: not own[] */
static TLS volatile sig_atomic_t depth;
static TLS volatile uint64_t noted;            /* bit s-1: signal s waits */
static TLS siginfo_t noted_info[_NSIG];
static TLS sigset_t blocked_old[4];           /* without deferral: masks to restore */

static bool fault_signal(int sig)
{
	return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL ||
	       sig == SIGTRAP || sig == SIGSYS || sig == SIGABRT;
}

void uls_signal_defer_enable(void)
{
	atomic_store(&deferring, true);
}

int uls_signal_deferring(void)
{
	return atomic_load_explicit(&deferring, memory_order_relaxed);
}

int uls_signal_deferred(int sig, const siginfo_t *si)
{
	if (depth == 0 || sig <= 0 || sig > 64 || fault_signal(sig))
		return 0;
	if (si)
		noted_info[sig] = *si;
	else {
		memset(&noted_info[sig], 0, sizeof(noted_info[sig]));
		noted_info[sig].si_signo = sig;
		noted_info[sig].si_code = SI_TKILL;
	}
	noted |= UINT64_C(1) << (sig - 1);
	atomic_fetch_add_explicit(&deferred_count, 1, memory_order_relaxed);
	return 1;
}

/* Send the noted signals to this thread again, now that it is outside (depth 0). */
static void redeliver(void)
{
	pid_t pid = getpid(), tid = (pid_t)syscall(SYS_gettid);

	while (noted) {
		int sig = __builtin_ctzll(noted) + 1;
		siginfo_t si = noted_info[sig];

		noted &= ~(UINT64_C(1) << (sig - 1));
		si.si_signo = sig;
		atomic_fetch_add_explicit(&redelivered_count, 1, memory_order_relaxed);
		if (syscall(SYS_rt_tgsigqueueinfo, pid, tid, sig, &si) < 0)
			syscall(SYS_tgkill, pid, tid, sig);  /* the signal, if not its details */
	}
}

void uls_signal_hold(void)
{
	if (uls_signal_deferring()) {
		depth++;
		return;
	}
	if (depth < (sig_atomic_t)(sizeof(blocked_old) / sizeof(blocked_old[0]))) {
		sigset_t all;

		sigfillset(&all);
		sigdelset(&all, SIGSEGV);
		sigdelset(&all, SIGBUS);
		sigdelset(&all, SIGFPE);
		sigdelset(&all, SIGILL);
		sigdelset(&all, SIGTRAP);
		sigdelset(&all, SIGSYS);
		sigdelset(&all, SIGABRT);
		pthread_sigmask(SIG_BLOCK, &all, &blocked_old[depth]);
	}
	depth++;
}

void uls_signal_release(void)
{
	if (depth <= 0)
		return;  /* unbalanced: nothing held */
	depth--;
	if (uls_signal_deferring()) {
		if (depth == 0 && noted)
			redeliver();
		return;
	}
	if (depth < (sig_atomic_t)(sizeof(blocked_old) / sizeof(blocked_old[0])))
		pthread_sigmask(SIG_SETMASK, &blocked_old[depth], NULL);
}

/* A wait open to the program's handlers inside a held section (a driving wait, drive.c):
 * the depth drops to 0 for it, and what was noted so far is delivered now. */
int stk__signal_open(void)
{
	int held = depth;

	depth = 0;
	if (noted)
		redeliver();
	return held;
}

void stk__signal_close(int held)
{
	depth = held;
}

/* In a fork child: the signals this thread noted were sent to the parent, not to it (the
 * thread's depth carries over, as its stack and its locks do). */
void stk__signal_fork_child(void)
{
	noted = 0;
}

void stk__signal_counters(uint64_t *deferred, uint64_t *redelivered)
{
	*deferred = atomic_load(&deferred_count);
	*redelivered = atomic_load(&redelivered_count);
}
