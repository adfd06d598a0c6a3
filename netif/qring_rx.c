/* The direct path's device, receive side (qring.c's top comment: reads of the queue, the
 * multishot read, lending buffers), and the reads of threads that exited. */
#include "netif/qring.h"
#include "netif/qring_priv.h"
#include "netif/frame.h"
#include "netif/rxpool.h"
#include "netif/vnet.h"
#include "netif/sys.h"
#include "netif/txwait.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* --- submitters' exits ----------------------------------------------------------------- */

static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;
static bool exit_key_ok;
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct qring *reg_head;   /* open devices of this process */
static atomic_uint_fast64_t next_token;
static __thread uint64_t my_token;   /* 0: this thread submitted nothing since its exit hook */

static void thread_gone(void *v);

/* reg_mu is a leaf: nothing else is taken while it is held. */
static void reg_lock(void) { pthread_mutex_lock(&reg_mu); }
static void reg_unlock(void) { pthread_mutex_unlock(&reg_mu); }

/* A fork child starts with no device of its own (its copies of the parent's are closed by
 * stack/fork.c's child handler, which runs after this one), and with reg_mu free even if
 * another thread of the parent held it. No prepare handler takes reg_mu: it would take it
 * before the core lock (prepare handlers run last registered first), and a thread holding
 * the core lock takes reg_mu (q_close, q_rx): a deadlock at fork (seen: tests/shim's fork
 * cases hung). */
static void reg_child(void)
{
	pthread_mutex_init(&reg_mu, NULL);
	reg_head = NULL;
}

static void reg_register(void)
{
	(void)pthread_atfork(NULL, NULL, reg_child);
}

/* Before libuls registers its own fork handlers (stk__fork_init calls it first): child
 * handlers run in the order registered. */
void nif_qring_fork_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, reg_register);
}

/* At load too, for a program that forks before it has a stack. */
__attribute__((constructor)) static void reg_init(void)
{
	nif_qring_fork_init();
}

static void exit_init(void)
{
	exit_key_ok = pthread_key_create(&exit_key, thread_gone) == 0;
}

/* This thread's token. The first call (again after its exit hook ran) arms the hook;
 * without a key (none left) the kernel's cancellation alone re-arms, as before. */
uint64_t nif__q_token(void)
{
	if (!my_token) {
		my_token = atomic_fetch_add(&next_token, 1) + 1;
		pthread_once(&exit_once, exit_init);
		if (exit_key_ok)
			(void)pthread_setspecific(exit_key, (void *)1);
	}
	return my_token;
}


/* The exit hook of a thread that submitted reads: the thread is still alive (its reads
 * still complete normally), and has no lock of the device's user. Every open device of
 * this process is told, and woken: a waiter on it replaces the reads in its next round.
 * Were the wake-up's read this thread's, the wake-up completes it now, as task work this
 * thread runs on its way out of write(2). */
static void thread_gone(void *v)
{
	uint64_t tok = my_token;

	(void)v;
	my_token = 0;
	if (!tok)
		return;
	pid_t me = getpid();
	reg_lock();
	for (struct qring *q = reg_head; q; q = q->reg_next) {
		if (q->owner != me)
			continue;   /* a fork child's copy: its eventfd is the parent's too */
		if (q->ndead < DEAD_MAX)
			q->dead[q->ndead++] = tok;
		else
			q->dead_overflow = true;
		atomic_store_explicit(&q->dead_new, true, memory_order_release);
		nif__q_wake(&q->dev);
	}
	reg_unlock();
}

void nif__q_reg_add(struct qring *q)
{
	pthread_once(&exit_once, exit_init);
	reg_lock();
	q->reg_next = reg_head;
	reg_head = q;
	reg_unlock();
}

void nif__q_reg_remove(struct qring *q)
{
	reg_lock();
	for (struct qring **pp = &reg_head; *pp; pp = &(*pp)->reg_next)
		if (*pp == q) {
			*pp = q->reg_next;
			break;
		}
	reg_unlock();
}

/* A free submission entry of the receive ring; when the ring is full, what it holds is
 * submitted first. NULL when there is none even then. */
struct io_uring_sqe *nif__q_rx_sqe(struct qring *q)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->rx);

	if (!sqe) {
		nif__q_rx_submit(q);
		sqe = io_uring_get_sqe(&q->rx);
	}
	return sqe;
}

/* Post a read into slot i, giving the slot a buffer of the pool first if its own was
 * lent; false if there is no buffer or no submission entry (the slot stays free). nowait:
 * a read that does not wait (RWF_NOWAIT; arm_reads): it ends with EAGAIN where the queue
 * is empty, instead of arming a poll entry on it. */
static bool arm_read(struct qring *q, unsigned i, bool nowait)
{
	struct io_uring_sqe *sqe;

	if (!q->rx_slot[i] && !(q->rx_slot[i] = nif_rxpool_get(q->pool)))
		return false;
	if (!(sqe = nif__q_rx_sqe(q)))
		return false;
	io_uring_prep_read(sqe, 0, q->rx_slot[i]->data, (unsigned)q->buf_size, 0);
	sqe->flags |= IOSQE_FIXED_FILE;
	if (nowait)
		sqe->rw_flags = RWF_NOWAIT;
	io_uring_sqe_set_data64(sqe, i);
	q->rx_nw[i] = nowait;
	q->rx_rearm++;
	q->rx_tok[i] = 0;
	q->rx_pend[q->rx_npend++] = i;
	return true;
}

/* Give buffer id i's buffer to the kernel (made visible by br_publish). */
static void br_add(struct qring *q, unsigned i)
{
	io_uring_buf_ring_add(q->br, q->rx_slot[i]->data, (unsigned)q->buf_size, (unsigned short)i,
			      io_uring_buf_ring_mask(RX_DEPTH), (int)q->br_added);
	q->br_added++;
}

static void br_publish(struct qring *q)
{
	if (q->br_added) {
		io_uring_buf_ring_advance(q->br, (int)q->br_added);
		q->br_added = 0;
	}
}

/* Multishot: ids whose buffer was lent get one of the pool, and the read is armed again
 * if it ended, once the kernel has a buffer to read into. */
static void arm_mshot(struct qring *q)
{
	struct io_uring_sqe *sqe;

	while (q->rx_nfree && q->br_posted < q->br_target) {
		unsigned i = q->rx_free[q->rx_nfree - 1];
		if (!q->rx_slot[i] && !(q->rx_slot[i] = nif_rxpool_get(q->pool)))
			break;
		br_add(q, i);
		q->br_posted++;
		q->rx_nfree--;
	}
	br_publish(q);
	if (q->rx_armed || !q->br_posted)
		return;
	if (!(sqe = nif__q_rx_sqe(q)))
		return;
	io_uring_prep_rw(NIF_IORING_OP_READ_MULTISHOT, sqe, 0, NULL, 0, 0);
	sqe->flags |= IOSQE_FIXED_FILE | IOSQE_BUFFER_SELECT;
	sqe->buf_group = MSHOT_BGID;
	io_uring_sqe_set_data64(sqe, q->mshot_tag);
	q->rx_armed = 1;
	q->rx_rearm++;
	q->mshot_tok = 0;
	q->mshot_pend = true;
	q->st.rx_mshot_arms++;
}

/* Keep rx_target reads in flight, in free slots. Slots whose buffer is lent get one
 * again here once the pool has one.
 * With nowait, only RX_ARM_MIN of them wait for a frame; after a round that took frames
 * as fast as those could (a stream), rx_nw_want more go in as reads that do not wait
 * (RWF_NOWAIT). Every read that waits is a poll entry on the queue, and each frame's
 * arrival (tun's sock_def_readable, in the writer's transmit) wakes all of them: those
 * that then find no frame arm their poll again, per frame. With 64 such reads in flight a
 * one-stream transfer without offloads (a read per 1514-byte frame) spent about a tenth
 * of its CPU in that wake-up, the task work of the woken reads and their re-arms
 * (docs/benchmarks.md, "Stop 37: the per-frame cost"). A read that does not wait takes a
 * frame already queued inline in the io_uring_enter that submits it, or ends at once with
 * EAGAIN; it is never a poll entry. */
void nif__q_arm_reads(struct qring *q)
{
	if (q->mshot) {
		arm_mshot(q);
		return;
	}
	unsigned waiting = q->nowait ? RX_ARM_MIN : q->rx_target;
	while (q->rx_armed - q->rx_nw_armed < waiting && q->rx_nfree) {
		if (!arm_read(q, q->rx_free[q->rx_nfree - 1], false))
			break;
		q->rx_nfree--;
		q->rx_armed++;
	}
	while (q->nowait && q->rx_nw_want && q->rx_nfree) {
		if (!arm_read(q, q->rx_free[q->rx_nfree - 1], true))
			break;
		q->rx_nfree--;
		q->rx_armed++;
		q->rx_nw_armed++;
		q->rx_nw_want--;
	}
}

/* Did the thread of token tok exit (dead[0..n), or any but this one after an overflow)?
 * 0: armed, not yet submitted: a live thread submits it. */
static bool tok_dead(uint64_t tok, const uint64_t *dead, unsigned n, bool overflow)
{
	if (!tok)
		return false;
	if (overflow)
		return tok != nif__q_token();
	for (unsigned k = 0; k < n; k++)
		if (dead[k] == tok)
			return true;
	return false;
}

/* A read in flight is left to end on its own, an orphan, not counted as armed: a slot's is
 * re-armed once it ended; the multishot read and the wake-up's are armed again at once
 * with the other tag, so that the two are told apart. */
static void orphan_mshot(struct qring *q)
{
	q->mshot_orphan = true;
	q->mshot_tag = q->mshot_tag == MSHOT_TAG ? MSHOT_TAG_ALT : MSHOT_TAG;
	q->rx_armed = 0;
}

static void orphan_slot(struct qring *q, unsigned i)
{
	q->rx_tok[i] = 0;
	q->rx_orphan[i] = true;
	q->rx_orphans++;
	q->rx_armed--;
}

static void orphan_wake(struct qring *q)
{
	q->wake_orphan = true;
	q->wake_tag = q->wake_tag == WAKE_TAG ? WAKE_TAG_ALT : WAKE_TAG;
	q->wake_armed = false;
}

/* The receiving thread's round, before it takes or waits: reads whose submitter exited
 * (thread_gone) are replaced by reads armed now, which this round submits. A replaced
 * wake-up or multishot read is replaced only once its predecessor with the other tag has
 * ended (one tick, the kernel's fallback; two exits within it are rare): meanwhile the
 * wake-up's eventfd and the queue still end the wait through the kernel's cancellation. */
void nif__q_replace_dead_reads(struct qring *q)
{
	uint64_t dead[DEAD_MAX];
	unsigned n, replaced = 0;
	bool overflow;

	if (!atomic_load_explicit(&q->dead_new, memory_order_acquire))
		return;
	reg_lock();
	n = q->ndead;
	memcpy(dead, q->dead, n * sizeof(dead[0]));
	overflow = q->dead_overflow;
	q->ndead = 0;
	q->dead_overflow = false;
	atomic_store_explicit(&q->dead_new, false, memory_order_relaxed);
	reg_unlock();
	if (!q->mshot) {
		for (unsigned i = 0; i < RX_DEPTH; i++) {
			/* A read that does not wait ended in its submission: its completion
			 * is in the ring already. */
			if (q->rx_orphan[i] || q->rx_nw[i] ||
			    !tok_dead(q->rx_tok[i], dead, n, overflow))
				continue;
			orphan_slot(q, i);
			replaced++;
		}
	} else if (q->rx_armed && !q->mshot_orphan && !q->mshot_pend &&
		   tok_dead(q->mshot_tok, dead, n, overflow)) {
		orphan_mshot(q);
		replaced++;
	}
	if (q->wake_armed && !q->wake_orphan && !q->wake_pend &&
	    tok_dead(q->wake_tok, dead, n, overflow)) {
		orphan_wake(q);
		replaced++;
	}
	if (replaced) {
		nif__wait_count(&q->wst.rx_reads_replaced, replaced);
		nif__q_arm_reads(q);   /* the wake-up's: the wait's arm_wake */
	}
}

/* Queue a cancellation of the receive ring's requests of user_data tag (flags: io_uring's
 * IORING_ASYNC_CANCEL_*; ANY: all of them), for the next submission; its completion is
 * CANCEL_TAG's. False without a submission entry. */
bool nif__q_rx_cancel(struct qring *q, uint64_t tag, unsigned flags)
{
	struct io_uring_sqe *sqe = nif__q_rx_sqe(q);

	if (!sqe)
		return false;
	io_uring_prep_cancel64(sqe, tag, (int)flags);
	sqe->flags |= IOSQE_FIXED_FILE;   /* ulsd requires it of every request; unused here */
	io_uring_sqe_set_data64(sqe, CANCEL_TAG);
	return true;
}

/* A thread about to sleep on a cooperative receive ring (or to spin on it): the reads it
 * is to be woken by must be its own. A read another live thread submitted completes as
 * that thread's task work, which a cooperative ring leaves until that thread enters the
 * kernel (netif/qring.c, prepare): while it computes, up to a tick (4 ms at HZ=250) after
 * the frame. Such reads are cancelled (IORING_OP_ASYNC_CANCEL of their tag, which ulsd
 * allows; it reaches only this ring's requests) and armed again, with the wait's
 * submission, as this thread's; the cancelled ones end as the replaced reads of a thread
 * that exited do (replace_dead_reads: a frame one of them still read is delivered). The
 * multishot read and the wake-up's change hands only once their predecessor with the
 * other tag ended, so at most one of each is cancelled and not yet ended; one thread
 * driving all along (a stream) never gives its reads away. */
void nif__q_take_over_reads(struct qring *q)
{
	unsigned taken = 0;

	if (!q->coop || q->takeover_off)
		return;
	uint64_t me = nif__q_token();
	if (q->mshot) {
		if (q->rx_armed && !q->mshot_pend && !q->mshot_orphan && q->mshot_tok != me &&
		    nif__q_rx_cancel(q, q->mshot_tag, 0)) {
			orphan_mshot(q);
			taken++;
		}
	} else {
		/* A slot's read is in flight and submitted when it has a token; the slot
		 * is armed again only once the cancelled read ended (q_rx frees it). */
		for (unsigned i = 0; i < RX_DEPTH; i++) {
			if (!q->rx_tok[i] || q->rx_tok[i] == me || q->rx_orphan[i] ||
			    q->rx_nw[i] || !nif__q_rx_cancel(q, i, 0))
				continue;
			orphan_slot(q, i);
			taken++;
		}
	}
	if (q->wake_armed && !q->wake_pend && !q->wake_orphan && q->wake_tok != me &&
	    nif__q_rx_cancel(q, q->wake_tag, 0)) {
		orphan_wake(q);
		taken++;
	}
	if (taken) {
		nif__wait_count(&q->wst.rx_reads_taken_over, taken);
		nif__q_arm_reads(q);   /* the wake-up's: the wait's arm_wake */
	}
}

static void rx_error(struct qring *q)
{
	q->st.rx_errors++;
	/* A queue that keeps failing (ulsd detached it) must not become a busy loop. */
	if (++q->rx_errors_in_row > 64)
		usleep(RX_ERROR_BACKOFF_US);
}

/* Offer the frame in rx slot i's buffer to the consumer, lendable if it is large enough
 * and the pool has a buffer to re-arm the slot with. */
static void deliver(struct qring *q, unsigned i, struct nif_rxbuf *b, size_t len, uint32_t off,
		    void *arg)
{
	b->frame = b->data + q->vhl;
	b->len = len;
	b->off = off;
	b->lendable = false;
	if (len * RX_LEND_MIN_SHARE >= q->buf_size) {
		b->lendable = nif_rxpool_can_get(q->pool);
		if (!b->lendable)
			q->st.rx_pool_empty++;
	}
	if (q->dev.rx_take(arg, b)) {
		/* Not NULL: can_get said so, and only this thread takes buffers. */
		q->rx_slot[i] = nif_rxpool_get(q->pool);  /* NULL: arm_reads tries again */
		q->st.rx_lent++;
	}
}


/* The frame that a read of res bytes put in slot (or buffer id) i's buffer: checked and
 * handed to the consumer; whether it was. */
static bool take_frame(struct qring *q, unsigned i, int res, nif_rx_fn *fn, void *arg)
{
	struct nif_rxbuf *b = q->rx_slot[i];
	const uint8_t *buf = b->data;
	size_t len = (size_t)res;
	uint32_t off = 0;

	q->rx_errors_in_row = 0;
	if (q->vhl && (len < q->vhl ||
		       nif_vnet_parse(buf, q->vhl, buf + q->vhl, len - q->vhl, &off) < 0)) {
		q->st.rx_bad_vnet++;
		return false;
	}
	buf += q->vhl;
	len -= q->vhl;
	if (nif_off_gso(off))
		q->st.rx_gso++;
	if (off & NIF_OFF_CSUM_PARTIAL)
		q->st.rx_csum_partial++;
	else if (off & NIF_OFF_CSUM_VALID)
		q->st.rx_csum_valid++;
	q->st.rx_frames++;
	q->st.rx_bytes += len;
	if (q->dev.rx_take)
		deliver(q, i, b, len, off, arg);
	else
		fn(arg, buf, len, off);
	return true;
}

/* The multishot read was refused at submission (a ring without the opcode in its
 * restrictions, or a kernel that refuses it on this file): one read per slot from now on.
 * The buffers stay in the provided-buffer ring too, which no read selects from any more. */
static void mshot_give_up(struct qring *q)
{
	q->mshot = false;
	q->st.rx_mshot_refused++;
	q->rx_nfree = 0;
	for (unsigned i = 0; i < RX_DEPTH; i++)
		q->rx_free[q->rx_nfree++] = RX_DEPTH - 1 - i;
	q->rx_armed = 0;
	q->rx_target = RX_ARM_MIN;
}

/* One completion of the multishot read (or of the one it replaced, orphan: its submitter
 * exited); whether it carried a frame that was delivered. */
static bool mshot_cqe(struct qring *q, const struct io_uring_cqe *cqe, nif_rx_fn *fn, void *arg,
		      bool orphan)
{
	int res = cqe->res;
	bool delivered = false;

	if (orphan && !(cqe->flags & IORING_CQE_F_MORE)) {
		q->mshot_orphan = false;
		if (res == -ECANCELED)
			q->st.rx_reads_cancelled++;
	} else if (!(cqe->flags & IORING_CQE_F_MORE)) {
		/* The read ended: armed again at the end of this round (arm_mshot). */
		q->rx_armed = 0;
		q->st.rx_mshot_ends++;
		if (res == -ENOBUFS) {
			q->st.rx_mshot_nobufs++;
			q->br_dry = true;
		} else if (res == -EACCES || res == -EINVAL || res == -EOPNOTSUPP) {
			mshot_give_up(q);
			return false;
		} else if (res == -ECANCELED) {
			q->st.rx_reads_cancelled++;
		} else if (res < 0 && res != -EAGAIN && res != -EINTR) {
			rx_error(q);
		}
	}
	if (!(cqe->flags & IORING_CQE_F_BUFFER))
		return false;
	unsigned i = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
	if (i >= RX_DEPTH || !q->rx_slot[i])
		return false;   /* not an id we gave */
	if (q->br_posted)
		q->br_posted--;
	if (res > 0) {
		q->st.rx_mshot_cqes++;
		delivered = take_frame(q, i, res, fn, arg);
	}
	/* The buffer back to the kernel by arm_mshot, which gives the top of rx_free first
	 * (this buffer, warm), or a fresh one if the consumer kept it. */
	q->rx_free[q->rx_nfree++] = i;
	return delivered;
}

int nif__q_rx(struct nif_dev *d, nif_rx_fn *fn, void *arg, unsigned budget)
{
	struct qring *q = nif__qring_of(d);
	struct io_uring_cqe *cqe;
	unsigned n = 0, posted = q->br_posted, nw_ok = 0, nw_again = 0;

	/* Completed writes hold the caller's pbufs until reaped, and lwIP will not retransmit
	 * a segment that is still held: reap them every round, before the caller's timers. */
	if (q->txg)
		nif__q_tx_reap(q);
	nif__q_replace_dead_reads(q);
	while (n < budget && io_uring_peek_cqe(&q->rx, &cqe) == 0) {
		uint64_t tag = io_uring_cqe_get_data64(cqe);
		unsigned i = (unsigned)tag;
		int res = cqe->res;

		if (tag == MSHOT_TAG || tag == MSHOT_TAG_ALT) {
			if (q->mshot && mshot_cqe(q, cqe, fn, arg, tag != q->mshot_tag))
				n++;
			else if (!q->mshot && tag != q->mshot_tag &&
				 !(cqe->flags & IORING_CQE_F_MORE))
				q->mshot_orphan = false;  /* ended after mshot_give_up */
			io_uring_cqe_seen(&q->rx, cqe);
			continue;
		}
		io_uring_cqe_seen(&q->rx, cqe);
		if (tag == CANCEL_TAG) {
			/* A take-over's cancellation (ENOENT, EALREADY: the read had ended or
			 * was ending). Refused (a ulsd whose restrictions predate it): the
			 * cancelled read never ends, so no more are taken over. */
			if (res == -EACCES || res == -EINVAL || res == -EOPNOTSUPP)
				q->takeover_off = true;
			continue;
		}
		if (tag == WAKE_TAG || tag == WAKE_TAG_ALT) {
			/* A wake-up (its count is in wake_buf), or the read failed: the next
			 * wait arms it again. The replaced one's end changes nothing. */
			if (tag != q->wake_tag)
				q->wake_orphan = false;
			else
				q->wake_armed = false;
			if (res == -ECANCELED)
				q->st.rx_reads_cancelled++;
			continue;
		}
		if (q->mshot || i >= RX_DEPTH)
			continue;
		bool nw = q->rx_nw[i];
		q->rx_nw[i] = false;
		if (q->rx_orphan[i]) {
			/* A replaced read: not in rx_armed; a frame it read is delivered. */
			q->rx_orphan[i] = false;
			q->rx_orphans--;
		} else if (!q->rx_armed) {
			continue;
		} else {
			q->rx_armed--;
			if (nw && q->rx_nw_armed)
				q->rx_nw_armed--;
		}
		q->rx_tok[i] = 0;
		if (res > 0 && q->rx_slot[i]) {
			q->st.rx_read_cqes++;
			if (nw) {
				q->st.rx_nowait_cqes++;
				nw_ok++;
			}
			if (take_frame(q, i, res, fn, arg))
				n++;
		} else if (nw && res == -EAGAIN) {
			/* The queue was empty when it was submitted. */
			q->st.rx_nowait_again++;
			nw_again++;
		} else if (nw && (res == -EOPNOTSUPP || res == -EINVAL)) {
			/* A kernel or file that refuses RWF_NOWAIT: reads that wait only. */
			if (q->nowait)
				q->st.rx_nowait_refused++;
			q->nowait = false;
		} else if (res == -ECANCELED) {
			/* Its submitter exited (io_uring cancels a thread's reads at its exit,
			 * at the next event on the file): not the queue failing, so no
			 * rx_error back-off; the slot is armed again below, at once. */
			q->st.rx_reads_cancelled++;
		} else if (res < 0 && res != -EAGAIN && res != -EINTR) {
			rx_error(q);
		}
		q->rx_free[q->rx_nfree++] = i;
	}
	if (q->mshot) {
		/* One read, however many frames; its ring doubles when a round took all it
		 * had (or more: it ran dry and was armed again), so a burst finds as many
		 * again in the ring the next time. */
		if ((q->br_dry || (n && n >= posted)) && q->br_target < RX_DEPTH)
			q->br_target = q->br_target * 2 > RX_DEPTH ? RX_DEPTH : q->br_target * 2;
		q->br_dry = false;
	} else if (q->nowait) {
		/* Reads that do not wait: as many again as took a frame when all did, else
		 * half as many more as did (those that found the queue empty cost a
		 * completion each). Armed after a round that took a frame from every read
		 * that waits, not after one frame of a request and its answer, whose reads
		 * would find nothing and end the next wait at once. */
		if (nw_ok && !nw_again)
			q->rx_nw_target = q->rx_nw_target * 2 > RX_DEPTH - RX_ARM_MIN
						  ? RX_DEPTH - RX_ARM_MIN : q->rx_nw_target * 2;
		else if (nw_again)
			q->rx_nw_target = nw_ok + nw_ok / 2 + 1 < RX_NW_MIN
						  ? RX_NW_MIN : nw_ok + nw_ok / 2 + 1;
		q->rx_nw_want = n >= RX_ARM_MIN && q->rx_nw_target > q->rx_nw_armed
					? q->rx_nw_target - q->rx_nw_armed : 0;
	} else if (n && n >= q->rx_target)
		q->rx_target = q->rx_target * 2 > RX_DEPTH ? RX_DEPTH : q->rx_target * 2;
	else if (n <= 1 && q->rx_target > RX_ARM_MIN)
		q->rx_target--;
	nif__q_arm_reads(q);
	/* With the wake-up in the ring, the next wait submits them with its own
	 * io_uring_enter (ring_wait); whoever takes frames waits next, or a driver does. */
	if (q->rx_rearm && !q->wake_in_ring && !q->mshot)
		nif__q_rx_submit(q);
	return (int)n;
}
