/* The stack thread (stk__stack_thread): waiting on the device while no application thread
 * drives, and parked while they do (stack/drive.c's top comment says when). */
#include "drive.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "lwip/timeouts.h"

/* The parked stack thread must be up by when (ms; core lock held): lower its deadline and
 * wake it to sleep again until then; or, now, take the core lock (uls_node_stop). */
static void park_signal(struct stk_node *n, uint64_t when, bool now)
{
	__atomic_store_n(&n->park_deadline, when, __ATOMIC_RELEASE);
	pthread_mutex_lock(&n->park_mtx);
	n->park_woken = true;
	if (now)
		n->park_now = true;
	pthread_mutex_unlock(&n->park_mtx);
	/* After the unlock: signalled under park_mtx, the woken thread met it still held
	 * and slept on it once more. The flag is set under park_mtx, which the park reads
	 * it under before each wait, so the wake is not lost. */
	pthread_cond_signal(&n->park_cond);
	stk__count(STK_CNT_RTC_PARK_SIGNALLED);
}

/* Before a thread lets go of lwIP (core lock held): send what its call queued, and wake
 * the waiter on the device (or the parked stack thread) only if the call armed a timer
 * that fires before its planned wake-up. Waking it otherwise costs two context switches
 * for nothing, once per blocking call: a sender that fills its window sleeps on every
 * ACK. */
void stk__leave(void)
{
	struct stk_node *n = &stk__node;

	if (!n->up)
		return;
	if (!stk__flush_deferred(n)) {
		n->dev->ops->tx_flush(n->dev);
		stk__tx_deferred = false;
	}
	if (n->park_idle && n->parked && n->dev_waiter == STK_W_NONE) {
		/* The driver left the device and nobody took it: the park that slept with no
		 * deadline ends within PARK_LONG_MS, as one that ran while the driver waited
		 * would have (park()). One wake-up per idle spell, not 125 a second. */
		n->park_idle = false;
		uint64_t by = stk__now_ms() + PARK_LONG_MS;
		if (by < __atomic_load_n(&n->park_deadline, __ATOMIC_SEQ_CST))
			park_signal(n, by, false);
	}
	if (n->dev_waiter == STK_W_NONE && !n->parked)
		return;
	u32_t sleep = sys_timeouts_sleeptime();
	if (sleep == SYS_TIMEOUTS_SLEEPTIME_INFINITE) {
		if (n->parked && n->dev_waiter != STK_W_APP)
			__atomic_store_n(&n->timer_next, UINT64_MAX, __ATOMIC_RELAXED);
		return;
	}
	uint64_t when = stk__now_ms() + sleep;
	if (n->dev_waiter != STK_W_NONE && when < n->dev_deadline) {
		n->dev_deadline = 0;
		n->dev->ops->wake(n->dev);
	}
	if (n->parked && n->dev_waiter != STK_W_APP) {  /* else the driver's (park()) */
		/* Sequentially consistent, with park()'s store of a handed round's deadline
		 * and its second look at timer_next: of this store and that one, at least one
		 * sees the other, so an earlier timer is never lost to a deadline the park
		 * raises while this thread holds the lock. */
		__atomic_store_n(&n->timer_next, when, __ATOMIC_SEQ_CST);
		if (when < __atomic_load_n(&n->park_deadline, __ATOMIC_SEQ_CST))
			park_signal(n, when, false);
	}
}

void stk__park_wake(void)
{
	park_signal(&stk__node, 0, true);
}

void stk__park_shorten(struct stk_node *n)
{
	n->park_keep_short = true;
	uint64_t when = stk__now_ms() + GRACE_MS;
	if (n->parked && __atomic_load_n(&n->park_deadline, __ATOMIC_SEQ_CST) > when)
		park_signal(n, when, false);
}

/* Are application threads driving the stack, or did one just now? Then the stack thread
 * keeps off the device. */
bool stk__apps_drive(const struct stk_node *n)
{
	return n->rtc && (n->sleepers || n->dev_waiter == STK_W_APP ||
			  stk__now_ms() < n->drive_last_ms + GRACE_MS);
}

/* The parked stack thread's round (core lock held): frames that arrived while no
 * application thread was inside, lwIP's timers, what they sent, and the device for a
 * thread that blocked meanwhile. The stack thread runs it when its park ends, or the
 * thread that held the core lock then runs it at its unlock (stk__drive_owed). */
static void park_round(struct stk_node *n)
{
	if (n->dev_waiter == STK_W_NONE) {
		stk__take_frames(n);
		/* Nobody waits on the device, where the lease's hang-up is seen. */
		if (n->dev->ops->lease_check && n->dev->ops->lease_check(n->dev) < 0) {
			stk__round_after_wait(n, -ECONNRESET);
			stk__hand_over(n);
			return;
		}
	} else if (n->dev->ops->ready && n->dev->ops->ready(n->dev)) {
		/* Frames wait for the thread on the device, which takes them and then runs
		 * the timers itself (round_after_wait). Timers run now would act on a state
		 * those frames change: a loss probe for data whose ACK is already here. */
		stk__count(STK_CNT_RTC_PARK_TIMERS_LEFT);
		stk__hand_over(n);
		return;
	}
	sys_check_timeouts();
	stk__sock_pay_owed();
	n->dev->ops->tx_flush(n->dev);
	stk__hand_over(n);  /* blocked threads left the device to nobody meanwhile? */
}

/* The stack thread while applications drive: lwIP's timers, and frames that arrived while
 * no application thread was inside, at most GRACE_MS late (2 x GRACE_MS, below; up to
 * PARK_LONG_MS after a driver's long wait, in park()).
 *
 * It sleeps on park_cond with park_mtx, not with the core lock. A condition wait on the
 * core lock takes that lock back when it ends, and while an application thread held it
 * (inside a call, copying 64 KiB) the stack thread slept a second time on the lock and
 * was woken again at the holder's unlock: a wake-up and two context switches for a round
 * that usually found nothing to do (606 of the stack threads' 1,762 wake-ups in 3 s of one
 * stream, docs/bench/cpu12/wakeups; docs/bench/wake12). Now:
 * - A park that runs out with no timer due tries the lock. Held, it leaves its round to
 *   the holder (round_owed, taken at the holder's stk__unlock: stk__drive_owed) and parks
 *   again for GRACE_MS (or until lwIP's next timer as last seen, if sooner), without the
 *   lock. A park that runs out for a due timer does the same, and looks again
 *   TIMER_RECHECK_MS later if no holder took the round by then (it waited for the lock
 *   before: no sooner for the timer, but a convoy behind a thread that takes the lock
 *   back at once).
 * - A thread that arms a timer earlier than the park's deadline (stk__leave) lowers the
 *   deadline and wakes it; it sleeps again until then, without taking the lock (it took
 *   the lock at once before, and met the waker still holding it). uls_node_stop wakes it
 *   to take the lock now (park_now).
 *
 * Races, each a wake-up that must not be lost:
 * - A wake between the core lock's release here and the wait: park_woken and park_now are
 *   set under park_mtx after the waker stored the deadline; the loop clears park_woken
 *   and reads the deadline under park_mtx, which it holds until the wait releases it, so
 *   a later wake ends that wait and the loop reads again. Both are cleared at the park's
 *   start under the core lock, which every waker holds.
 * - The holder's unlock checks round_owed before the stack thread sets it: that holder
 *   does not take the round. The next unlock of any thread does; without one, the
 *   stack thread's next park runs out GRACE_MS later and tries again. Frames that came
 *   while nobody was inside wait at most that long more (2 x GRACE_MS after the last
 *   call, against GRACE_MS plus the holder's hold before). A due timer whose round no
 *   unlock took waits TIMER_RECHECK_MS more. A round handed twice before it is taken is
 *   one round.
 * - park_deadline is stored (release) before round_owed is set; the holder that takes
 *   round_owed (acquire) runs the round and then its stk__leave compares the next timer
 *   against the new deadline. timer_next may be stale: later than the truth only if a
 *   call armed an earlier timer, and that call's stk__leave lowers park_deadline and
 *   wakes the park; earlier than the truth costs a round that finds nothing due.
 * - uls_node_stop: running goes false under the core lock, then stk__park_wake; the
 *   park takes the lock (waiting for it) and returns. */
static void park(struct stk_node *n)
{
	/* A driver on the device runs lwIP's timers after each of its waits, which end at
	 * the next timer (stk__leave wakes it for an earlier one): the park does not wake
	 * for them. Woken for one, it found the frames that ended the driver's wait still
	 * there, left the timers to the driver (rtc_park_timers_left) and parked again
	 * with the timer still due: a loop until the driver ran (37,000 rounds in a 64 MiB
	 * stream).
	 *
	 * Nor does it wake every GRACE_MS while a driver waits there: the driver takes the
	 * frames. A park that runs out and finds a thread still on the device doubles the
	 * next one, up to PARK_LONG_MS; one that finds nobody there is back to GRACE_MS. A
	 * receiver that sleeps in recv between frames woke its stack thread 500 times a
	 * second for nothing: at 64 streams, with 128 processes on 2 vCPUs, half of the
	 * receivers' context switches (docs/bench/s32). Timers a call arms after the driver
	 * left the device wake the park at their time (stk__leave), and frames kept back
	 * for its flush keep it at GRACE_MS (stk__park_shorten). Deviation: if the driver
	 * leaves the device and its program stops calling, frames that arrive meanwhile, and
	 * timers armed while it waited, wait up to PARK_LONG_MS (this park's end).
	 *
	 * A park of PARK_LONG_MS that runs out with the driver still on the device and no
	 * round of it since the park began (an idle process: a listener in accept, a
	 * receiver with nothing coming) makes the next one sleep until woken (park_idle,
	 * rtc_park_idle; PARK_IDLE_MS at most): 125 wake-ups a second for nothing before.
	 * The driver's leaving wakes it (stk__leave, when nobody took the device) to end
	 * within PARK_LONG_MS from then, which keeps the bound above; a busy driver, whose
	 * rounds come in every park, never lets the park go idle, so it wakes no more often
	 * than before. */
	bool driver = n->dev_waiter == STK_W_APP;
	bool idle = driver && n->park_idle;
	uint64_t now = stk__now_ms();
	unsigned rounds = n->drive_rounds;
	if (n->park_ms < GRACE_MS || n->park_ms > PARK_LONG_MS)
		n->park_ms = GRACE_MS;
	int t = idle ? PARK_IDLE_MS : driver ? (int)n->park_ms : stk__timer_timeout(GRACE_MS);
	u32_t sleep = driver ? SYS_TIMEOUTS_SLEEPTIME_INFINITE : sys_timeouts_sleeptime();
	bool take = false, timer_wait = false;

	n->parked = true;
	__atomic_store_n(&n->park_deadline, now + (uint64_t)t, __ATOMIC_RELAXED);
	__atomic_store_n(&n->timer_next, sleep == SYS_TIMEOUTS_SLEEPTIME_INFINITE ? UINT64_MAX :
			 now + sleep, __ATOMIC_RELAXED);
	n->park_woken = n->park_now = false;  /* every waker holds the core lock */
	n->park_keep_short = false;
	n->park_idle = idle;
	if (idle)
		stk__count(STK_CNT_RTC_PARK_IDLE);
	else if (driver && t > GRACE_MS)
		stk__count(STK_CNT_RTC_PARK_LONG);
	stk__unlock_raw();
	pthread_mutex_lock(&n->park_mtx);
	for (;;) {
		if (n->park_now) {
			take = true;
			break;
		}
		/* The deadline, as lowered by any waker so far: a wake that comes after this
		 * reading sets park_woken under park_mtx, which is held from here until the
		 * wait releases it, so the wait returns and the loop reads again. */
		n->park_woken = false;
		uint64_t until = __atomic_load_n(&n->park_deadline, __ATOMIC_ACQUIRE) * 1000000u;
		if (stk__now_ns() < until) {
			struct timespec ts = { .tv_sec = (time_t)(until / 1000000000u),
					       .tv_nsec = (long)(until % 1000000000u) };
			while (!n->park_woken &&
			       pthread_cond_timedwait(&n->park_cond, &n->park_mtx, &ts) != ETIMEDOUT)
				;
			continue;
		}
		/* Run out: the core lock if it is free, for a due timer too. */
		pthread_mutex_unlock(&n->park_mtx);
		uint64_t timer = __atomic_load_n(&n->timer_next, __ATOMIC_RELAXED);
		uint64_t ms = stk__now_ms();
		timer_wait = timer <= ms;
		if (pthread_mutex_trylock(&n->lock) == 0) {
			stk__core_owner_take();
			stk__now_held(true);
			pthread_mutex_lock(&n->park_mtx);
			break;
		}
		/* Held: the holder takes the round at its unlock; back at GRACE_MS, or at
		 * lwIP's next timer as last seen (later than now), if that is sooner, or in
		 * TIMER_RECHECK_MS for a due timer whose round no holder took by then. A due
		 * timer used to wait for the lock: the holder runs it at its unlock no later,
		 * but a sender that takes the lock back at once for its next call had the
		 * waiting stack thread fail, sleep on the futex and be woken again at every
		 * unlock, a wake-up (an IPI) per call: 3,300 futex waits a second in one
		 * stream without offload (docs/benchmarks.md, "Stop 39: the park's convoy"). */
		__atomic_add_fetch(&n->park_handed, 1, __ATOMIC_RELAXED);
		if (timer_wait)
			stk__count(STK_CNT_RTC_PARK_TIMERS_HANDED);
		timer_wait = false;
		uint64_t next = ms + GRACE_MS, d = timer < next ? timer : next;
		if (d <= ms)
			d = ms + TIMER_RECHECK_MS;
		__atomic_store_n(&n->park_deadline, d, __ATOMIC_SEQ_CST);
		/* The holder may have armed an earlier timer after timer_next was read above
		 * and compared it with the deadline that had run out (no wake): look again
		 * (the pairing is in stk__leave). Due timers then take the lock at their time,
		 * not GRACE_MS later. */
		uint64_t again = __atomic_load_n(&n->timer_next, __ATOMIC_SEQ_CST);
		if (again < d && again > ms)
			__atomic_store_n(&n->park_deadline, again, __ATOMIC_SEQ_CST);
		__atomic_store_n(&n->round_owed, true, __ATOMIC_RELEASE);
		pthread_mutex_lock(&n->park_mtx);
	}
	pthread_mutex_unlock(&n->park_mtx);
	if (take)
		stk__lock();
	if (timer_wait)
		stk__count(STK_CNT_RTC_PARK_TIMER_WAITS);
	n->parked = false;
	n->park_idle = false;
	__atomic_store_n(&n->round_owed, false, __ATOMIC_RELAXED);
	stk__count(STK_CNT_RTC_PARK_WAKES);
	if (driver && !timer_wait && !n->park_keep_short && n->dev_waiter == STK_W_APP) {
		n->park_idle = n->park_ms == PARK_LONG_MS && n->drive_rounds == rounds;
		n->park_ms = n->park_ms * 2 > PARK_LONG_MS ? PARK_LONG_MS : n->park_ms * 2;
	} else {
		n->park_ms = GRACE_MS;
	}
	if (!n->running)
		return;
	park_round(n);
}

void stk__drive_owed(void)
{
	struct stk_node *n = &stk__node;

	if (!__atomic_load_n(&n->round_owed, __ATOMIC_RELAXED) ||
	    !__atomic_exchange_n(&n->round_owed, false, __ATOMIC_ACQUIRE))
		return;
	if (!n->up || !n->running || !n->parked)
		return;
	stk__count(STK_CNT_RTC_OWED_TAKEN);
	/* The round's flush takes what this call queued, before its leave (stk__unlock): for
	 * this thread's batch (uls_tx_batch) a send flushed at once. Its leave, finding
	 * nothing queued, would not count it, and the batch's last send would then find a
	 * send still expected and keep its flush past the round. */
	if (stk__tx_batch_left > 1 && n->dev->ops->tx_pending && n->dev->ops->tx_pending(n->dev)) {
		stk__tx_batch_left--;
		stk__count(STK_CNT_TX_FLUSH_BATCH_AT_ONCE);
	}
	park_round(n);
}

/* The stack thread on the device: no application thread drives. */
static void wait_device(struct stk_node *n)
{
	int timeout = stk__timer_timeout(-1);

	n->dev_deadline = timeout < 0 ? UINT64_MAX : stk__now_ms() + (uint64_t)timeout;
	n->dev_waiter = STK_W_STACK;
	stk__unlock_raw();
	int wrc = n->dev->ops->wait(n->dev, timeout);
	stk__lock();
	n->dev_waiter = STK_W_NONE;
	if (!n->running)
		return;
	stk__round_after_wait(n, wrc);
	n->want_drive = false;
	stk__hand_over(n);  /* a thread blocked meanwhile: the device is its now */
}

void *stk__stack_thread(void *arg)
{
	struct stk_node *n = arg;

	stk__lock();
	while (n->running) {
		if (stk__apps_drive(n))
			park(n);
		else
			wait_device(n);
	}
	stk__unlock_raw();
	return NULL;
}

/* uls_node_stop(), after the stack thread ended (core lock held): no application thread
 * may still be waiting on the device when it closes. Drivers take no new round once
 * running is false, and the one inside is woken. */
void stk__drive_stop(void)
{
	struct stk_node *n = &stk__node;

	while (n->dev_waiter == STK_W_APP) {
		n->dev->ops->wake(n->dev);
		stk__cond_wait_until(&n->idle_cond, stk__now_ns() + 10000000u);
	}
}
