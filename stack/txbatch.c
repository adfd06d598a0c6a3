/* A thread's sends batched into one flush (uls_tx_batch, uls_tx_flush): see the comment
 * below and stack/drive.c. */
#include "drive.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "lwip/timeouts.h"

void uls_tx_batch(unsigned sends)
{
	stk__tx_batch_left = sends;
}

/* May this leave keep the frames its call queued for a later flush (uls_tx_batch; core
 * lock held)? Only while sends are still expected in the batch, and only while the stack
 * thread is parked: it wakes within GRACE_MS of its park (park: at most GRACE_MS) and
 * flushes, as every later leave does (this thread's next call, another thread's), so
 * nothing waits longer than that, or 2 x GRACE_MS when the park ran out while a thread
 * held the lock and that holder's unlock missed the round it was left (park()). A thread on the device would not flush before a frame
 * or a timer woke it: then every flush is made at once, as without a batch.
 * Deviation: a program that sends during a batch and then does not call into the stack
 * (its own work, or a wait in the kernel on something else) sends those frames up to
 * GRACE_MS (at worst 2 x GRACE_MS) late; Linux hands each send's segment to the device inside the call. Event
 * loops call epoll_wait next, whose look at the ready list flushes. */
bool stk__flush_deferred(struct stk_node *n)
{
	if (stk__tx_batch_left <= 1) {
		stk__tx_batch_left = 0;
		return false;
	}
	if (!n->dev->ops->tx_pending || !n->dev->ops->tx_pending(n->dev))
		return false;  /* nothing queued: the batch's count is kept for the sends */
	/* A send of the round either way: one flushed at once still counts, or the round's
	 * last send would find sends expected and keep its flush past the round. */
	stk__tx_batch_left--;
	if (!n->rtc || !n->parked || n->dev_waiter != STK_W_NONE) {
		stk__count(STK_CNT_TX_FLUSH_BATCH_AT_ONCE);
		return false;
	}
	stk__tx_deferred = true;
	stk__count(STK_CNT_TX_FLUSH_DEFERRED);
	stk__park_shorten(n);
	return true;
}

/* Before a wait that does not enter the stack (a poll or select answered by the mirrors
 * alone): the batch ends, and frames this thread's batch kept back leave now. Without a
 * deferral since the last flush there is nothing of this thread's to send: no lock. */
int uls_tx_kept(void)
{
	return stk__tx_deferred;
}

void uls_tx_flush(void)
{
	stk__tx_batch_left = 0;
	if (!stk__tx_deferred)
		return;
	stk__tx_deferred = false;
	stk__lock();
	stk__count(STK_CNT_TX_FLUSH_AT_WAIT);
	stk__unlock();  /* stk__leave flushes: the batch is over */
}

/* The process ends without the stack's leave (_exit): frames queued on the device for a
 * later flush (uls_tx_batch's, any thread's) would die with its rings. Hand them to the
 * kernel, which sends what a submitted write carries even if the process is gone at once
 * (a TAP write completes inside the submission). Not from inside the stack: a handler that
 * calls _exit while its thread holds the core lock may have interrupted the device's own
 * transmit (Deviation: that thread's queued frames are lost, as they are on a crash). A
 * lock another thread holds is waited for: that thread's leave would flush them too, but
 * the exit kills it first. At most EXIT_LOCK_MS, long enough for a holder descheduled on
 * a loaded machine (no holder waits long with it), short enough that a program
 * does not hang in its exit. */
#define EXIT_LOCK_MS 1000
void uls_tx_flush_exit(void)
{
	struct stk_node *n = &stk__node;

	stk__tx_batch_left = 0;
	stk__tx_deferred = false;
	if (!stk__node_up_hint() || stk__core_lock_mine())
		return;
	/* The monotonic clock: a step of the wall clock must not stretch the bound. */
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += EXIT_LOCK_MS * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	if (pthread_mutex_clocklock(&n->lock, CLOCK_MONOTONIC, &until) != 0)
		return;
	stk__core_owner_take();
	stk__now_held(true);
	if (n->up && n->dev->ops->tx_pending && n->dev->ops->tx_pending(n->dev))
		n->dev->ops->tx_flush(n->dev);
	stk__unlock_raw();
}

