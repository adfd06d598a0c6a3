/* stack/sigdefer.c: signals held off inside the stack, by blocking or by deferral.
 *
 * The handler below plays the shim's trampoline (apps/preload/signal.c): it asks
 * uls_signal_deferred() first and returns when the signal was noted. The tests run in
 * order in one process: blocking first, since deferral, once on, stays on.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "uls.h"

int stk__signal_open(void);
void stk__signal_close(int held);

static volatile sig_atomic_t runs, last_value, last_code;

static void tramp(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (uls_signal_deferred(sig, si))
		return;
	runs++;
	last_value = si->si_value.sival_int;
	last_code = si->si_code;
}

static void install(int sig)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = tramp;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(sig, &sa, NULL), 0);
	runs = 0;
	last_value = last_code = 0;
}

static void queue_self(int sig, int value)
{
	union sigval v = { .sival_int = value };

	assert_int_equal(pthread_sigqueue(pthread_self(), sig, v), 0);
}

static void without_deferral_a_hold_blocks_signals_but_not_faults(void **state)
{
	(void)state;
	install(SIGUSR1);
	assert_false(uls_signal_deferring());
	uls_signal_hold();
	sigset_t now;
	pthread_sigmask(SIG_SETMASK, NULL, &now);
	assert_true(sigismember(&now, SIGUSR1));
	assert_false(sigismember(&now, SIGSEGV));
	assert_false(sigismember(&now, SIGABRT));
	queue_self(SIGUSR1, 7);
	assert_int_equal(runs, 0);  /* blocked: pending in the kernel */
	uls_signal_release();
	assert_int_equal(runs, 1);  /* the restored mask delivered it */
	assert_int_equal(last_value, 7);
	pthread_sigmask(SIG_SETMASK, NULL, &now);
	assert_false(sigismember(&now, SIGUSR1));
}

static void a_signal_inside_a_hold_reaches_its_handler_at_release_with_its_siginfo(void **state)
{
	(void)state;
	uls_signal_defer_enable();
	install(SIGUSR1);
	uls_signal_hold();
	sigset_t now;
	pthread_sigmask(SIG_SETMASK, NULL, &now);
	assert_false(sigismember(&now, SIGUSR1));  /* no system call: the mask is the thread's */
	queue_self(SIGUSR1, 42);
	assert_int_equal(runs, 0);                 /* noted, not run */
	uls_signal_release();
	assert_int_equal(runs, 1);
	assert_int_equal(last_value, 42);
	assert_int_equal(last_code, SI_QUEUE);
}

static void nested_holds_deliver_at_the_outermost_release_only(void **state)
{
	(void)state;
	install(SIGUSR2);
	uls_signal_hold();
	uls_signal_hold();
	queue_self(SIGUSR2, 5);
	uls_signal_release();
	assert_int_equal(runs, 0);
	uls_signal_release();
	assert_int_equal(runs, 1);
	assert_int_equal(last_value, 5);
}

static void two_instances_of_a_signal_in_one_hold_reach_the_handler_once(void **state)
{
	(void)state;
	install(SIGUSR1);
	uls_signal_hold();
	queue_self(SIGUSR1, 1);
	queue_self(SIGUSR1, 2);
	uls_signal_release();
	assert_int_equal(runs, 1);      /* Deviation (sigdefer.c): merged */
	assert_int_equal(last_value, 2);  /* the latest details */
}

static void signals_a_fault_raises_are_never_deferred(void **state)
{
	(void)state;
	uls_signal_hold();
	assert_int_equal(uls_signal_deferred(SIGSEGV, NULL), 0);
	assert_int_equal(uls_signal_deferred(SIGBUS, NULL), 0);
	assert_int_equal(uls_signal_deferred(SIGABRT, NULL), 0);
	assert_int_equal(uls_signal_deferred(0, NULL), 0);
	assert_int_equal(uls_signal_deferred(65, NULL), 0);
	uls_signal_release();
}

static void outside_a_hold_a_signal_runs_at_once(void **state)
{
	(void)state;
	install(SIGUSR2);
	queue_self(SIGUSR2, 9);
	assert_int_equal(runs, 1);
	assert_int_equal(last_value, 9);
}

static void an_open_wait_inside_a_hold_delivers_what_was_noted_and_lets_handlers_run(void **state)
{
	(void)state;
	install(SIGUSR1);
	uls_signal_hold();
	queue_self(SIGUSR1, 3);
	assert_int_equal(runs, 0);
	int held = stk__signal_open();  /* a driving wait begins (drive.c) */
	assert_int_equal(held, 1);
	assert_int_equal(runs, 1);      /* what was noted, now */
	queue_self(SIGUSR1, 4);
	assert_int_equal(runs, 2);      /* during the wait, at once */
	stk__signal_close(held);
	queue_self(SIGUSR1, 5);
	assert_int_equal(runs, 2);      /* held again */
	uls_signal_release();
	assert_int_equal(runs, 3);
	assert_int_equal(last_value, 5);
}

static void an_unbalanced_release_is_ignored(void **state)
{
	(void)state;
	install(SIGUSR2);
	uls_signal_release();
	queue_self(SIGUSR2, 8);
	assert_int_equal(runs, 1);  /* not held: the depth did not go negative */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(without_deferral_a_hold_blocks_signals_but_not_faults),
		cmocka_unit_test(a_signal_inside_a_hold_reaches_its_handler_at_release_with_its_siginfo),
		cmocka_unit_test(nested_holds_deliver_at_the_outermost_release_only),
		cmocka_unit_test(two_instances_of_a_signal_in_one_hold_reach_the_handler_once),
		cmocka_unit_test(signals_a_fault_raises_are_never_deferred),
		cmocka_unit_test(outside_a_hold_a_signal_runs_at_once),
		cmocka_unit_test(an_open_wait_inside_a_hold_delivers_what_was_noted_and_lets_handlers_run),
		cmocka_unit_test(an_unbalanced_release_is_ignored),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
