/* The program's signal handlers, seen through a trampoline.
 *
 * A blocking call on a user-level socket drives the stack itself (run to completion,
 * uls_socket_drive): it waits on the device with the program's signal mask, so handlers
 * run during the wait as they run during a kernel recv(). What the kernel would then do,
 * restart the call or fail it with EINTR (signal(7)), depends on the SA_RESTART of the
 * handler that ran, which only the handler's own invocation can tell. So every handler the
 * program installs with sigaction, signal, sysv_signal or siginterrupt is installed behind
 * tramp(), which tells libuls (uls_signal_note: SA_RESTART or not; it also ends the device
 * wait) and calls the program's handler. The program sees its own handler and flags in
 * every answer of sigaction.
 *
 * The trampoline also lets libuls hold signals off without system calls: a signal that
 * arrives while its thread is inside libuls or the descriptor table is noted and
 * delivered again when the thread leaves (stack/sigdefer.c), where blocking every signal
 * around each call took two rt_sigprocmask calls each time. For that, SA_RESETHAND is
 * kept from the kernel and done here, when the handler actually runs. ULS_SIGNAL_DEFER=0
 * blocks signals instead, as before.
 *
 * Deviation: handlers installed without the C library (the rt_sigaction system call
 * itself) are not seen: a signal they catch during a driving wait does not end it, as if
 * the handler had SA_RESTART; such a handler that uses sockets needs ULS_SIGNAL_DEFER=0
 * (with deferral it may run while its thread holds the stack's lock).
 */
#include "shim.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "uls.h"

#ifndef _NSIG
#define _NSIG 65
#endif

/* The program's handler and flags per signal, as it installed them. */
static struct {
	_Atomic uintptr_t handler;
	atomic_int flags;
} installed[_NSIG];

/* signal() without SA_RESTART: the signals siginterrupt(sig, 1) named (as glibc keeps
 * them for its own signal()). */
static sigset_t interrupting;

/* Handlers run on this thread (not deferred): a kernel wait that ends with EINTR when none
 * ran was woken by io_uring's task work, not by a signal (shim__handlers_run). */
static __thread volatile unsigned handlers_run __attribute__((tls_model("initial-exec")));

unsigned shim__handlers_run(void)
{
	return handlers_run;
}

static void tramp(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;

	/* This thread is inside libuls or the descriptor table: the handler runs when it
	 * leaves (stack/sigdefer.c). */
	if (uls_signal_deferred(sig, si)) {
		errno = saved;
		return;
	}
	uintptr_t h = atomic_load(&installed[sig].handler);
	int flags = atomic_load(&installed[sig].flags);

	if (flags & SA_RESETHAND) {
		/* Kept from the kernel (a deferred signal must find its handler): the reset
		 * on entry to the handler is done here (sigaction(2)). */
		struct sigaction dfl;
		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		shim__real.sigaction(sig, &dfl, NULL);
		atomic_store(&installed[sig].handler, (uintptr_t)SIG_DFL);
		atomic_store(&installed[sig].flags, 0);
	}
	handlers_run++;
	uls_signal_note((flags & SA_RESTART) != 0);
	errno = saved;
	if (h == (uintptr_t)SIG_DFL || h == (uintptr_t)SIG_IGN)
		return;  /* not reached: the table names a function whenever tramp is set */
	if (flags & SA_SIGINFO)
		((void (*)(int, siginfo_t *, void *))h)(sig, si, uc);
	else
		((void (*)(int))h)(sig);
}

static bool is_function(const struct sigaction *a)
{
	return a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN;
}

SHIM_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *oact)
{
	struct sigaction mine, prev;
	const struct sigaction *use = act;
	sigset_t all, old;

	shim__real_init();
	if (!shim__enabled() || sig <= 0 || sig >= _NSIG)
		return shim__real.sigaction(sig, act, oact);
	if (act && is_function(act)) {
		mine = *act;
		mine.sa_sigaction = tramp;
		mine.sa_flags |= SA_SIGINFO;
		mine.sa_flags &= ~SA_RESETHAND;  /* done by tramp */
		use = &mine;
	}
	/* This thread must not run tramp while the table and the kernel disagree. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	uintptr_t was_h = atomic_load(&installed[sig].handler);
	int was_flags = atomic_load(&installed[sig].flags);
	if (use == &mine) {
		atomic_store(&installed[sig].handler, (uintptr_t)act->sa_sigaction);
		atomic_store(&installed[sig].flags, act->sa_flags);
	}
	int rc = shim__real.sigaction(sig, use, &prev);
	if (rc < 0 && use == &mine) {
		atomic_store(&installed[sig].handler, was_h);
		atomic_store(&installed[sig].flags, was_flags);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc == 0 && oact) {
		*oact = prev;
		if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction == tramp) {
			oact->sa_sigaction = (void (*)(int, siginfo_t *, void *))was_h;
			oact->sa_flags = was_flags;
		}
	}
	return rc;
}

/* The one body of the signal() family: h for sig through our sigaction(), with flags, and
 * sig itself blocked in the handler when block_self. Returns the previous handler. */
static sighandler_t install(int sig, sighandler_t h, int flags, bool block_self)
{
	struct sigaction a, o;

	if (sig <= 0 || sig >= _NSIG) {
		errno = EINVAL;
		return SIG_ERR;
	}
	memset(&a, 0, sizeof(a));
	a.sa_handler = h;
	sigemptyset(&a.sa_mask);
	if (block_self)
		sigaddset(&a.sa_mask, sig);
	a.sa_flags = flags;
	if (sigaction(sig, &a, &o) < 0)
		return SIG_ERR;
	return o.sa_handler;
}

/* signal() as glibc gives it (BSD semantics): SA_RESTART unless siginterrupt() said
 * otherwise, the signal itself blocked in its handler. */
SHIM_EXPORT sighandler_t signal(int sig, sighandler_t h)
{
	int flags = sig > 0 && sig < _NSIG && sigismember(&interrupting, sig) ? 0 : SA_RESTART;

	return install(sig, h, flags, true);
}

sighandler_t bsd_signal(int sig, sighandler_t h);  /* glibc declares it only for XPG */

SHIM_EXPORT sighandler_t bsd_signal(int sig, sighandler_t h)
{
	return signal(sig, h);
}

/* System V semantics: reset on delivery, not blocked in the handler, no restart. */
SHIM_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t h)
{
	return install(sig, h, SA_RESETHAND | SA_NODEFER, false);
}

SHIM_EXPORT sighandler_t sysv_signal(int sig, sighandler_t h)
{
	return __sysv_signal(sig, h);
}

SHIM_EXPORT int siginterrupt(int sig, int flag)
{
	struct sigaction a;

	if (sigaction(sig, NULL, &a) < 0)
		return -1;
	if (flag) {
		sigaddset(&interrupting, sig);
		a.sa_flags &= ~SA_RESTART;
	} else {
		sigdelset(&interrupting, sig);
		a.sa_flags |= SA_RESTART;
	}
	return sigaction(sig, &a, NULL);
}

/* Deferral on, unless the environment says otherwise (exec.c's constructor asks first). */
void shim__signals_init(void)
{
	const char *v = getenv("ULS_SIGNAL_DEFER");

	if (!v || strcmp(v, "0") != 0)
		uls_signal_defer_enable();
}
