/* The direct path's device, transmit side (qring.c's top comment: writes of the caller's
 * memory or of transmit buffers, queued and handed over at flush). */
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

static void tx_complete(struct qring *q, unsigned i)
{
	struct txg *g = &q->txg[i];

	if (g->done) {
		nif_tx_done_fn *done = g->done;
		g->done = NULL;
		done(g->cookie);
	}
	q->tx_free[q->tx_nfree++] = i;
	q->tx_inflight--;
	/* Writes complete again: tx_reserve may wait again once half the buffers are back, not
	 * after each completion (a peer draining one write per wait would otherwise hold the
	 * core lock in a 500 ms wait nearly all the time). */
	if (q->tx_stalled && q->tx_nfree >= TX_DEPTH / 2)
		q->tx_stalled = false;
}

void nif__q_tx_reap(struct qring *q)
{
	struct io_uring_cqe *cqe;

	while (io_uring_peek_cqe(&q->tx, &cqe) == 0) {
		unsigned i = (unsigned)io_uring_cqe_get_data64(cqe);
		if (cqe->res < 0)
			q->st.tx_errors++;
		io_uring_cqe_seen(&q->tx, cqe);
		if (i < TX_DEPTH && q->tx_inflight)
			tx_complete(q, i);
	}
}

int nif__q_flush(struct nif_dev *d)
{
	struct qring *q = nif__qring_of(d);
	int rc = 0;

	if (q->tx_unsubmitted) {
		rc = io_uring_submit(&q->tx);
		q->tx_unsubmitted = 0;
	}
	nif__q_tx_reap(q);
	return rc < 0 ? rc : 0;
}

static bool tx_reap_any(void *arg)
{
	struct qring *q = arg;

	nif__q_tx_reap(q);
	return q->tx_nfree != 0;
}

/* Make sure a transmit index is free, waiting (bounded) for a completion if all are in
 * flight. The caller holds the stack's core lock, so an untimed wait here would hang the
 * whole process if no write completed (issue 13). Writes to a TAP queue should not wait
 * at all: tun's socket send buffer is INT_MAX unless TUNSETSNDBUF, which ulsd does not
 * use, and the callers, all under the lock, are the only ones who reap this ring. Not
 * counted on: a write can still wait on its file (a queue whose other end stopped reading,
 * as tests/unit/test_qring makes it); one whose submitter exited meanwhile (any
 * application thread sends) completes only at the file's next event, cancelled
 * (test_qring's write_of_an_exited_submitter_completes_at_the_files_next_event); and a
 * submission the kernel refused (-EAGAIN, -ENOMEM; io_uring_submit's result is not looked
 * at) leaves entries in the ring that a wait with nothing to submit never completes. So
 * every slice submits what the ring holds, the wait ends after 500 ms (netif/txwait.c)
 * (counted, tx_reserve_timeouts), and the caller drops the frame (counted: the stack's
 * tx_nobuf); until half the buffers are back, later callers get no index at once rather than a
 * wait each. A gathered write that never completes keeps its segment referenced (lwIP
 * retransmits no segment still held): leaked, never reused under a write. */
static bool tx_reserve(struct qring *q)
{
	if (q->tx_nfree == 0)
		nif__q_tx_reap(q);
	if (q->tx_nfree)
		return true;
	if (q->tx_stalled)
		return false;
	q->st.tx_waits++;
	q->tx_unsubmitted = 0;   /* nif__tx_wait submits them */
	if (nif__tx_wait(&q->tx, tx_reap_any, q))
		return true;
	q->st.tx_reserve_timeouts++;
	q->tx_stalled = true;
	return false;
}

uint8_t *nif__q_tx_slot(struct nif_dev *d, size_t len)
{
	struct qring *q = nif__qring_of(d);

	if (len > q->frame_max || __atomic_load_n(&q->lease_lost, __ATOMIC_RELAXED) ||
	    !tx_reserve(q))
		return NULL;
	/* Taken only when queued: an unused buffer is simply the next one handed out. */
	return q->tx_bufs + (size_t)q->tx_free[q->tx_nfree - 1] * q->buf_size + q->vhl;
}

/* Get an SQE, submitting what is queued if the ring is full. */
static struct io_uring_sqe *tx_sqe(struct qring *q)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->tx);

	if (!sqe) {
		io_uring_submit(&q->tx);
		q->tx_unsubmitted = 0;
		sqe = io_uring_get_sqe(&q->tx);
		if (!sqe)
			q->st.tx_errors++;
	}
	return sqe;
}

static void tx_queued(struct qring *q, struct io_uring_sqe *sqe, unsigned i, size_t len)
{
	sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, i);
	q->st.tx_frames++;
	q->st.tx_bytes += len;
	if (++q->tx_unsubmitted >= TX_SUBMIT_BATCH) {
		io_uring_submit(&q->tx);
		q->tx_unsubmitted = 0;
	}
}

/* The virtio-net header of a frame to send into vh (with offload on the queue), or
 * -EINVAL, counted, for offload the frame asks of a queue without it or cannot have. */
static int tx_header(struct qring *q, uint8_t *vh, const uint8_t *frame, size_t len,
		     uint32_t off)
{
	if (!nif_dev_takes_offload(&q->dev, off) ||
	    (q->vhl && nif_vnet_build(vh, frame, len, off) < 0)) {
		q->st.tx_bad_offload++;
		return -EINVAL;
	}
	if (q->vhl && vh[1] != 0)
		q->st.tx_gso++;
	return 0;
}

int nif__q_tx_gather(struct nif_dev *d, const struct iovec *iov, unsigned n, size_t len,
		       uint32_t off, nif_tx_done_fn *done, void *cookie)
{
	struct qring *q = nif__qring_of(d);

	if (n == 0 || n > NIF_TX_IOV_MAX || len > q->frame_max ||
	    __atomic_load_n(&q->lease_lost, __ATOMIC_RELAXED))
		return -ENOBUFS;
	if (!tx_reserve(q))
		return -ENOBUFS;
	unsigned i = q->tx_free[q->tx_nfree - 1];
	struct txg *g = &q->txg[i];
	/* The headers are all in iov[0] (the op's contract), and nif_vnet_build reads no
	 * further than the transport header. */
	int rc = tx_header(q, g->vh, iov[0].iov_base, len, off);
	if (rc < 0)
		return rc;
	if (q->vhl) {
		g->iov[0].iov_base = g->vh;
		g->iov[0].iov_len = q->vhl;
	}
	struct io_uring_sqe *sqe = tx_sqe(q);
	if (!sqe)
		return -ENOBUFS;
	unsigned k = q->vhl ? 1 : 0;
	for (unsigned j = 0; j < n; j++)
		g->iov[k + j] = iov[j];
	g->done = done;
	g->cookie = cookie;
	q->tx_nfree--;
	q->tx_inflight++;
	io_uring_prep_writev(sqe, 0, g->iov, k + n, 0);
	q->st.tx_gather++;
	tx_queued(q, sqe, i, len);
	return 0;
}

int nif__q_tx_queue(struct nif_dev *d, uint8_t *slot, size_t len, uint32_t off)
{
	struct qring *q = nif__qring_of(d);
	uint8_t *buf = slot - q->vhl;
	unsigned i = (unsigned)((size_t)(buf - q->tx_bufs) / q->buf_size);

	int rc = tx_header(q, buf, slot, len, off);
	if (rc < 0)
		return rc;
	struct io_uring_sqe *sqe = tx_sqe(q);
	if (!sqe)
		return -EAGAIN;
	/* The buffer is the last free one (q_tx_slot). */
	q->tx_nfree--;
	q->tx_inflight++;
	io_uring_prep_write(sqe, 0, buf, (unsigned)(len + q->vhl), 0);
	tx_queued(q, sqe, i, len);
	return 0;
}

/* Writes still in flight read the caller's memory: wait for them (bounded) before the
 * caller may free it. Those that do not complete in time are not reported done: their
 * memory leaks rather than being reused under a write. */
void nif__q_tx_drain(struct qring *q)
{
	struct __kernel_timespec ts = { .tv_nsec = 10 * 1000 * 1000 };
	struct io_uring_cqe *cqe;

	if (q->tx_unsubmitted) {
		io_uring_submit(&q->tx);
		q->tx_unsubmitted = 0;
	}
	nif__q_tx_reap(q);
	for (int t = 0; q->tx_inflight && t < TX_CLOSE_WAIT_MS / 10; t++) {
		if (io_uring_wait_cqe_timeout(&q->tx, &cqe, &ts) == 0)
			nif__q_tx_reap(q);
	}
}
