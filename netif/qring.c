/* A process's own TAP queue through restricted io_urings (see qring.h).
 *
 * Receive: RX_DEPTH reads of fixed file 0 stay in flight on the receive ring, which only
 * the thread that holds the caller's lock touches. The ring accepts nothing but reads and
 * writes of its queue, so the wake-up eventfd and the lease are not in it: the stack thread
 * sleeps in poll(2) on the ring's descriptor (readable when completions wait), the eventfd
 * and the lease. Where ulsd registered the eventfd as the ring's fixed file 1 (wake_in_ring),
 * a read of it stays in flight on the ring too, and a wait is one io_uring_enter that
 * submits the re-armed reads and sleeps until a completion (a frame or a wake-up) or the
 * timeout: poll(2) took three system calls for it (the submit; the poll, which the read's
 * completion interrupts, because io_uring runs it as task work of the thread that submitted
 * the read; and its restart). The lease's hang-up is then looked at with a poll(2) of
 * timeout 0 at most every HUP_CHECK_MS. Each read goes into a buffer of a pool (netif/rxpool.h); a consumer that
 * set dev.rx_take may keep a large frame's buffer (lwIP then holds the frame where the
 * kernel wrote it, as a custom pbuf), and the read is re-armed with a fresh buffer.
 * Where the kernel has IORING_OP_READ_MULTISHOT and ulsd allowed it (CTL_HELLO_F_MSHOT),
 * one multishot read replaces the reads of the slots: the slots' buffers are the entries
 * of a provided-buffer ring (the buffer id is the slot), the kernel picks one per frame and
 * completes once per frame, and a buffer goes back into the ring when its frame was
 * handled or, if lwIP kept it, a fresh one of the pool takes its id. One read in flight is
 * one poll entry on the queue (tun wakes every entry per frame) and is not re-armed per
 * frame. The read ends when the ring ran dry (ENOBUFS, counted) or on an error, and is
 * armed again once buffers are back. io_uring completes each frame of it as task work of
 * the thread that submitted it, for as long as it stays armed: it is submitted by a
 * thread that waits on the ring (or spins, or refills: stack/drive.c's drivers), never at
 * open or in q_rx, whose caller may be any thread. Submitted at open, by the thread that
 * opened the lease, every frame woke that thread as well as the waiter: 6x the context
 * switches of a 1- and 8-stream sweep (docs/bench/mshot14).
 * Reads whose submitter exited: io_uring runs a read's completion as task work of the
 * thread that submitted it; once that thread is gone, the kernel ends the read with
 * ECANCELED only at the next event on the queue, through its fallback work a tick later
 * (5-26 ms measured), and until then the frames wait with no read of a live thread posted.
 * So every read's submitter is recorded (a token per thread), a thread that submitted
 * reads reports its exit (a pthread key's destructor, which runs while the thread is still
 * alive: thread_gone), and the next round of the receiving thread (rx, wait, spin_poll or
 * rx_refill: a live thread) replaces those reads with its own (replace_dead_reads). The
 * replaced reads stay in flight until the kernel ends them; a frame one of them still
 * reads is delivered as any other.
 * Transmit: a frame comes either as pieces of the caller's memory (tx_gather: lwIP's
 * segment, referenced until the write completes) written with writev behind the virtio-net
 * header, or copied into a transmit buffer (tx_slot: small frames, and frames whose memory
 * the caller cannot keep unchanged). Both are queued as writes of fixed file 0 on the
 * transmit ring, used only under the caller's lock, and go to the kernel in one
 * io_uring_enter at flush. The kernel's transmit check (filter/datapath.bpf.c) sees every
 * one of them.
 *
 * This file prepares, opens, waits on and closes the device; the receive side is
 * qring_rx.c, the transmit side qring_tx.c (what they share: qring_priv.h).
 */
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

struct qring *nif__qring_of(struct nif_dev *d)
{
	return (struct qring *)d;
}


/* After a submission by this thread: the reads armed since the last one are its own. */
static void rx_submitted(struct qring *q)
{
	uint64_t tok = nif__q_token();

	for (unsigned k = 0; k < q->rx_npend; k++)
		q->rx_tok[q->rx_pend[k]] = tok;
	q->rx_npend = 0;
	if (q->wake_pend)
		q->wake_tok = tok;
	if (q->mshot_pend)
		q->mshot_tok = tok;
	q->wake_pend = q->mshot_pend = false;
}

/* Submit what is armed, as this thread's. */
int nif__q_rx_submit(struct qring *q)
{
	int rc = io_uring_submit(&q->rx);

	rx_submitted(q);
	q->rx_rearm = 0;
	return rc;
}

/* liburing 2.3 may leave the SQ index array zeroed (kernel-facts.md): every submission
 * would run slot 0. The identity mapping is what later versions set up. */
static void fill_sq_array(struct io_uring *r)
{
	for (unsigned i = 0; i < *r->sq.kring_entries; i++)
		r->sq.array[i] = i;
}

static size_t br_bytes(void)
{
	return RX_DEPTH * sizeof(struct io_uring_buf);
}

/* Register the provided-buffer ring now, while the receive ring is disabled and the
 * process's own: ulsd's restrictions then need no register operation for it (server/bpf.c).
 * -EOPNOTSUPP where the kernel has no multishot read. */
static int mshot_prepare(struct nif_qring_prep *p)
{
	struct io_uring_probe *probe = io_uring_get_probe_ring(&p->ring[0]);
	bool has = probe && io_uring_opcode_supported(probe, NIF_IORING_OP_READ_MULTISHOT);
	int rc;

	free(probe);
	if (!has)
		return -EOPNOTSUPP;
	/* Shared: a fork child's copy-on-write of the page cannot part the parent's tail
	 * from the page the kernel reads. */
	void *m = mmap(NULL, br_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		       -1, 0);
	if (m == MAP_FAILED)
		return -errno;
	struct io_uring_buf_reg reg = { .ring_addr = (uintptr_t)m, .ring_entries = RX_DEPTH,
					.bgid = MSHOT_BGID };
	rc = io_uring_register_buf_ring(&p->ring[0], &reg, 0);
	if (rc < 0) {
		munmap(m, br_bytes());
		return rc;
	}
	p->br = m;
	io_uring_buf_ring_init(p->br);
	return 0;
}

static void br_free(struct io_uring_buf_ring *br)
{
	if (br)
		munmap(br, br_bytes());
}

/* coop: the receive ring runs task work only when its thread enters the kernel, and says
 * when some waits (IORING_SQ_TASKRUN). A read's completion is task work of the thread that
 * submitted it (see the top of this file). Without COOP_TASKRUN, io_uring interrupts that
 * thread with an IPI when it runs in user space, and on this kind of virtual machine each
 * IPI is a VM exit for the frame's writer, inside its write, and another for the reader:
 * traced 2026-11-27 for spinning readers (docs/benchmarks.md "Two spinning ends"), and
 * 2026-11-28 for one stream, whose receiving application thread (the driver that had
 * submitted the read) was interrupted about 20,000 times per GB while it checked the data
 * it had received: 28% of the stream's CPU, in the writer's wake-up and the reader's
 * interrupt return ("The IPIs of a read's completion"). Cooperative, the frames wait as
 * task work until that thread's next system call, where it takes them in one batch.
 * A thread that sleeps is still woken at once (TWA_SIGNAL_NO_IPI wakes a sleeper), and
 * one that runs in user space without system calls takes its task work at its next
 * interrupt return (the tick, 4 ms at HZ=250). So a thread that is to sleep on the ring
 * first takes over the reads another thread submitted (nif__q_take_over_reads), and a
 * look that finds IORING_SQ_TASKRUN set enters the kernel to run its own (q_ready,
 * q_spin_poll).
 * Deviation: frames for a program that computes between calls wait as its task work until
 * its next call, the tick, or the parked stack thread's wait (stack/drive.c), where the
 * kernel's softirq would take them at once; with an interrupting ring they waited for
 * the park's end anyway, copied. */
static int prepare(struct nif_qring_prep *p, bool coop)
{
	unsigned entries[2] = { RX_DEPTH * 2, TX_DEPTH };
	int rc;

	memset(p, 0, sizeof(*p));
	for (int i = 0; i < 2; i++) {
		struct io_uring_params par = { .flags = IORING_SETUP_R_DISABLED };
		if (i == 0 && coop)
			par.flags |= IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
		rc = io_uring_queue_init_params(entries[i], &p->ring[i], &par);
		if (rc == -EINVAL && i == 0 && coop) {
			/* A kernel before 5.19: the interrupting kind. */
			coop = false;
			par = (struct io_uring_params){ .flags = IORING_SETUP_R_DISABLED };
			rc = io_uring_queue_init_params(entries[i], &p->ring[i], &par);
		}
		if (rc < 0) {
			if (i == 1)
				io_uring_queue_exit(&p->ring[0]);
			return rc;
		}
		fill_sq_array(&p->ring[i]);
	}
	p->made = true;
	p->coop = coop;
	p->nowait = true;
	p->mshot = mshot_prepare(p) == 0;
	return 0;
}

int nif_qring_prepare(struct nif_qring_prep *p)
{
	return prepare(p, true);
}

int nif_qring_prepare_interrupting(struct nif_qring_prep *p)
{
	return prepare(p, false);
}

int nif_qring_fd(const struct nif_qring_prep *p, int i)
{
	return p->made ? p->ring[i].ring_fd : -1;
}

void nif_qring_set_fd(struct nif_qring_prep *p, int i, int fd)
{
	p->ring[i].ring_fd = fd;
	p->ring[i].enter_ring_fd = fd;
}

void nif_qring_discard(struct nif_qring_prep *p)
{
	if (!p->made)
		return;
	io_uring_queue_exit(&p->ring[0]);
	io_uring_queue_exit(&p->ring[1]);
	br_free(p->br);
	p->br = NULL;
	p->made = false;
}


/* The lease hung up (ulsd is gone): report it once. */
/* hup_fd is the receiving thread's alone; lease_lost is also read by senders under the
 * caller's lock (q_tx_slot, q_tx_gather) while the receiving thread may set it in its wait
 * without that lock: atomic (relaxed: a sender that misses it sends one more frame to a
 * queue nobody reads, which the kernel drops). */
int nif__q_lease_lost(struct qring *q)
{
	q->hup_fd = -1;
	__atomic_store_n(&q->lease_lost, true, __ATOMIC_RELAXED);
	return -ECONNRESET;
}

/* For the lease's hang-up check (HUP_CHECK_MS apart), which needs no precision: the
 * coarse clock costs 50 ns here, the precise one 350-420 ns, twice per wait. */
static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Is the next look at the lease due (HUP_CHECK_MS after the last)? Within HUP_SLACK_MS
 * of it counts: the coarse clock lags the wait's timer by up to a tick (4 ms at HZ=250),
 * and a wait that ran out at the look's time found it not yet due and slept 1 ms again,
 * three or four times (an idle process woke about 20 times a second for its 5 looks). */
static bool hup_due(const struct qring *q)
{
	return q->hup_fd >= 0 && mono_ns() + HUP_SLACK_MS * 1000000ull >=
				 q->hup_checked_ns + HUP_CHECK_MS * 1000000ull;
}

/* Look at the lease without waiting: 0, or -ECONNRESET when ulsd hung up. */
static int hup_look(struct qring *q)
{
	struct pollfd p = { .fd = q->hup_fd, .events = POLLRDHUP };

	q->hup_checked_ns = mono_ns();
	if (nif_sys.poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
		return nif__q_lease_lost(q);
	return 0;
}

/* Keep a read of the wake-up eventfd (fixed file 1) in flight on the receive ring. The
 * eventfd is blocking (nif_qring_open): io_uring completes a read of a non-blocking file
 * at once with EAGAIN instead of waiting for it. */
static void arm_wake(struct qring *q)
{
	struct io_uring_sqe *sqe;

	if (q->wake_armed)
		return;
	if (!(sqe = nif__q_rx_sqe(q)))
		return;  /* the wait below still ends at its timeout */
	io_uring_prep_read(sqe, 1, &q->wake_buf, sizeof(q->wake_buf), 0);
	sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, q->wake_tag);
	q->wake_armed = true;
	q->wake_tok = 0;
	q->wake_pend = true;
}


/* A wait with the wake-up in the ring: one io_uring_enter submits what q_rx re-armed and
 * sleeps until a completion, a signal or the timeout. */
static int ring_wait(struct qring *q, int timeout_ms)
{
	int rc = 0;

	nif__q_replace_dead_reads(q);
	nif__q_take_over_reads(q);
	arm_wake(q);
	q->st.ring_waits++;
	q->st.rx_armed_at_wait += q->rx_armed - q->rx_nw_armed;
	uint64_t now = mono_ns();
	if (q->hup_fd >= 0) {
		/* Sleep no longer than the next look at the lease. */
		uint64_t next = q->hup_checked_ns + HUP_CHECK_MS * 1000000ull;
		int until = next <= now ? 0 : (int)((next - now + 999999u) / 1000000u);
		if (timeout_ms < 0 || timeout_ms > until)
			timeout_ms = until;
	}
	if (io_uring_cq_ready(&q->rx)) {
		if (io_uring_sq_ready(&q->rx))
			rc = io_uring_submit(&q->rx);
		rx_submitted(q);
	} else {
		struct io_uring_cqe *cqe;
		if (timeout_ms < 0) {
			rc = io_uring_submit_and_wait(&q->rx, 1);
		} else {
			struct __kernel_timespec ts = { .tv_sec = timeout_ms / 1000,
							.tv_nsec = (timeout_ms % 1000) * 1000000ll };
			rc = io_uring_submit_and_wait_timeout(&q->rx, &cqe, 1, &ts, NULL);
		}
		rx_submitted(q);
		if (io_uring_cq_ready(&q->rx))
			nif__wait_count(&q->wst.rx_wakeups, 1);
	}
	q->rx_rearm = 0;
	if (hup_due(q) && hup_look(q) < 0)
		return -ECONNRESET;
	return rc < 0 && rc != -ETIME && rc != -EINTR ? rc : 0;
}

/* A parked stack thread (stack/drive.c) takes frames without waiting while an application
 * thread sleeps on its socket: without this look, nobody would notice ulsd going away. */
static int q_lease_check(struct nif_dev *d)
{
	struct qring *q = (struct qring *)d;

	return hup_due(q) ? hup_look(q) : 0;
}

static int q_wait_fd(struct nif_dev *d, struct pollfd *fds, unsigned n, int timeout_ms)
{
	struct qring *q = nif__qring_of(d);

	if (q->wake_in_ring && !n)
		return ring_wait(q, timeout_ms);
	nif__q_replace_dead_reads(q);
	nif__q_take_over_reads(q);
	/* Reads q_rx re-armed and left for the wait to submit. */
	if (io_uring_sq_ready(&q->rx))
		nif__q_rx_submit(q);

	struct pollfd local[64], *pfd = n <= 61 ? local : malloc((n + 3) * sizeof(*pfd));
	if (!pfd)
		return -ENOMEM;
	pfd[0] = (struct pollfd){ .fd = q->rx.ring_fd, .events = POLLIN };
	/* With a read of the eventfd in flight on the ring, a wake-up completes it and the
	 * ring's descriptor wakes us; the eventfd itself is watched only without one, and
	 * only then read here (poll(2) skips a negative fd). */
	pfd[1] = (struct pollfd){ .fd = q->wake_armed ? -1 : q->wake_fd, .events = POLLIN };
	pfd[2] = (struct pollfd){ .fd = q->hup_fd, .events = POLLRDHUP };
	if (n)
		memcpy(pfd + 3, fds, n * sizeof(*pfd));
	int rc = 0;
	if (!io_uring_cq_ready(&q->rx)) {
		q->st.poll_waits++;
		q->st.rx_armed_at_wait += q->rx_armed - q->rx_nw_armed;
		rc = nif_sys.poll(pfd, n + 3, timeout_ms);
	}
	int err = errno;
	for (unsigned i = 0; i < n; i++)
		fds[i].revents = rc > 0 ? pfd[3 + i].revents : 0;
	short wake_ev = pfd[1].revents, hup_ev = pfd[2].revents;
	if (pfd != local)
		free(pfd);
	errno = err;
	if (rc > 0)
		nif__wait_count(&q->wst.rx_wakeups, 1);
	if (rc > 0 && (wake_ev & POLLIN)) {
		uint64_t v;
		/* One read takes the whole count; a blocking eventfd (wake_in_ring) has no
		 * other reader while no read of it is in flight. */
		if (q->wake_in_ring)
			(void)!nif_sys.read(q->wake_fd, &v, sizeof(v));
		else
			while (nif_sys.read(q->wake_fd, &v, sizeof(v)) > 0)
				;
	}
	if (rc > 0 && q->hup_fd >= 0 && (hup_ev & (POLLRDHUP | POLLHUP | POLLERR)))
		return nif__q_lease_lost(q);
	return rc < 0 && errno != EINTR ? -errno : 0;
}

static int q_wait(struct nif_dev *d, int timeout_ms)
{
	return q_wait_fd(d, NULL, 0, timeout_ms);
}

/* Reads q_rx re-armed and left for the next wait (rx_rearm, counted in rx_armed too):
 * submitted once fewer than half of rx_target are in flight. Fewer system calls than a
 * submit per round; never none in flight (dev.h). */
static void q_rx_refill(struct nif_dev *d)
{
	struct qring *q = nif__qring_of(d);

	nif__q_replace_dead_reads(q);
	if (q->rx_rearm && (q->rx_armed - q->rx_rearm) * 2 < q->rx_target)
		nif__q_rx_submit(q);
}

static bool q_tx_pending(const struct nif_dev *d)
{
	return ((const struct qring *)d)->tx_unsubmitted != 0;
}

/* Frames waiting: completions, or on a cooperative ring task work, which only the thread
 * that submitted the reads can run (one io_uring_enter that waits for nothing; another
 * thread's leaves the flag set, and its frames come at that thread's next entry or to the
 * next waiter, which takes its reads over). Any thread, no lock: the ring's own atomics. */
static bool q_ready(const struct nif_dev *d)
{
	struct qring *q = (struct qring *)d;

	if (io_uring_cq_ready(&q->rx))
		return true;
	if (!q->coop || !(IO_URING_READ_ONCE(*q->rx.sq.kflags) & IORING_SQ_TASKRUN))
		return false;
	(void)io_uring_get_events(&q->rx);
	return io_uring_cq_ready(&q->rx) != 0;
}

/* A spinning thread's look: completions, else reads that q_rx re-armed and no wait has
 * submitted yet, which one io_uring_enter submits (a frame that comes before then waits
 * in tun's queue for them). The read of a frame that comes while we spin completes as
 * task work of the thread that submitted it: io_uring interrupts that thread for it, as
 * the test shows (test_qring spin_poll_sees_frames_whose_reads_it_rearmed_without_a_wait),
 * except on a cooperative ring (coop: nif_qring_prepare), which instead sets
 * IORING_SQ_TASKRUN and leaves it to us to enter the kernel, one io_uring_enter that runs
 * the task work and waits for nothing (test_qring
 * spin_poll_runs_the_task_work_that_a_cooperative_ring_left_to_it): for reads of ours,
 * so the spinner takes over those of another thread first. */
static bool q_spin_poll(struct nif_dev *d)
{
	struct qring *q = nif__qring_of(d);

	if (io_uring_cq_ready(&q->rx))
		return true;
	nif__q_take_over_reads(q);
	if (q->coop && (IO_URING_READ_ONCE(*q->rx.sq.kflags) & IORING_SQ_TASKRUN)) {
		nif__wait_count(&q->wst.spin_enters, 1);
		(void)io_uring_get_events(&q->rx);
		if (io_uring_cq_ready(&q->rx))
			return true;
	}
	nif__q_replace_dead_reads(q);
	if (!io_uring_sq_ready(&q->rx))
		return false;
	nif__wait_count(&q->wst.spin_enters, 1);
	(void)nif__q_rx_submit(q);
	return io_uring_cq_ready(&q->rx) != 0;
}


void nif__q_wake(struct nif_dev *d)
{
	uint64_t one = 1;

	/* EAGAIN: a wake-up is pending anyway. */
	if (nif_sys.write(nif__qring_of(d)->wake_fd, &one, sizeof(one)) < 0)
		return;
}


static void q_get_stats(const struct nif_dev *d, struct nif_dev_stats *out)
{
	const struct qring *q = (const struct qring *)d;

	nif__wait_stats_get(&q->st, &q->wst, out);
	out->rx_buffers = q->pool ? nif_rxpool_made(q->pool) : 0;
}


/* Receive buffers (and devices, which hold the wake-up read's word) that close left to the
 * kernel because a read of them did not end: nif_qring_rx_leaked. */
static _Atomic uint64_t rx_close_leaked;
/* Those devices themselves, kept reachable for the life of the process: the memory is
 * held on purpose, and a leak checker (the sanitizer builds' LeakSanitizer) should not
 * call it lost. Never walked. */
static struct qring *rx_kept;
static pthread_mutex_t rx_kept_mtx = PTHREAD_MUTEX_INITIALIZER;

uint64_t nif_qring_rx_leaked(void)
{
	return rx_close_leaked;
}

/* One completion at close: what it ends of the reads in flight. */
static void rx_close_cqe(struct qring *q, const struct io_uring_cqe *cqe, int *cancel_res)
{
	uint64_t tag = io_uring_cqe_get_data64(cqe);

	if (tag == CANCEL_TAG)
		*cancel_res = cqe->res;
	else if ((tag == WAKE_TAG || tag == WAKE_TAG_ALT) && tag != q->wake_tag)
		q->wake_orphan = false;
	else if (tag == WAKE_TAG || tag == WAKE_TAG_ALT)
		q->wake_armed = false;
	else if ((tag == MSHOT_TAG || tag == MSHOT_TAG_ALT) && !(cqe->flags & IORING_CQE_F_MORE)) {
		if (tag == q->mshot_tag)
			q->rx_armed = 0;
		else
			q->mshot_orphan = false;
	} else if (tag < RX_DEPTH && !q->mshot && q->rx_orphan[tag]) {
		q->rx_orphan[tag] = false;
		q->rx_orphans--;
	} else if (tag < RX_DEPTH && !q->mshot && q->rx_armed)
		q->rx_armed--;
}

/* The receive ring's reads write into our buffers (and the wake-up read into q) for as
 * long as the ring lives, and ulsd holds its own descriptor of it until the lease ends,
 * which is after the device closes (stack/core.c): io_uring_queue_exit alone ends none of
 * them. So they are cancelled (IORING_OP_ASYNC_CANCEL, which ulsd allows: it reaches only
 * this ring's own requests) and waited for, bounded; whether none is left in flight.
 * Frames that completed meanwhile are dropped with the node. */
static bool rx_cancel(struct qring *q)
{
	struct __kernel_timespec ts = { .tv_nsec = 10 * 1000 * 1000 };
	struct io_uring_cqe *cqe;
	int cancel_res = 1;

	/* Reads armed but not yet submitted go in with the cancellation, before it. */
	if (!nif__q_rx_cancel(q, 0, IORING_ASYNC_CANCEL_ANY) || io_uring_submit(&q->rx) < 0)
		return false;
	for (int t = 0; t < RX_CLOSE_WAIT_MS / 10; t++) {
		while (io_uring_peek_cqe(&q->rx, &cqe) == 0) {
			rx_close_cqe(q, cqe, &cancel_res);
			io_uring_cqe_seen(&q->rx, cqe);
		}
		if (!q->rx_armed && !q->wake_armed && !q->rx_orphans && !q->wake_orphan &&
		    !q->mshot_orphan)
			return true;
		/* Refused (a ulsd whose restrictions predate it, EACCES): nothing will end. */
		if (cancel_res < 0 && cancel_res != -ENOENT && cancel_res != -EALREADY)
			return false;
		(void)io_uring_wait_cqe_timeout(&q->rx, &cqe, &ts);
	}
	return false;
}

/* The buffers and the device itself: what q_close and a failed open both give back. */
/* The write slots' descriptors (TX_DEPTH of them, 76 KiB): from calloc, all their pages
 * were cleared and faulted in at open, 19 of a short-lived process's faults, while slots
 * are taken lowest first and reused (tx_free is a stack), so a process that writes little
 * touches one or two pages. Anonymous pages come zeroed (no slot has a done callback) and
 * only as they are first touched. */
static struct txg *txg_alloc(void)
{
	void *m = mmap(NULL, TX_DEPTH * sizeof(struct txg), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return m == MAP_FAILED ? NULL : m;
}

static void txg_free(struct txg *g)
{
	if (g)
		munmap(g, TX_DEPTH * sizeof(struct txg));
}

static void free_memory(struct qring *q)
{
	for (unsigned i = 0; i < RX_DEPTH; i++)
		if (q->rx_slot[i])
			nif_rxbuf_release(q->rx_slot[i]);
	nif_rxpool_close(q->pool);
	free(q->tx_bufs);
	txg_free(q->txg);
	free(q->tx_free);
	free(q);
}

static void q_close(struct nif_dev *d)
{
	struct qring *q = nif__qring_of(d);

	/* A fork child closing its copy must not touch the rings: their queues are mapped
	 * shared with the parent, and draining would submit the parent's writes and take its
	 * completions (the parent's pbufs then stay held and lwIP never resends them). */
	bool own = q->owner == getpid();
	nif__q_reg_remove(q);
	if (q->txg && own)
		nif__q_tx_drain(q);
	/* A fork child's buffers are its own copies: the reads write into the parent's. */
	bool rx_ended = !own || rx_cancel(q);
	io_uring_queue_exit(&q->rx);
	io_uring_queue_exit(&q->tx);
	/* The kernel copied the provided-buffer ring's entries as it took them; it holds no
	 * reference to the ring's memory once no read selects from it. */
	if (rx_ended)
		br_free(q->br);
	q->br = NULL;
	if (q->wake_fd >= 0)
		nif_sys.close(q->wake_fd);
	if (rx_ended) {
		free_memory(q);
		return;
	}
	/* Reads still in flight write into the slots' buffers and q->wake_buf: those stay
	 * allocated for good, counted, rather than reused under a write (as tx_drain leaves
	 * writes in flight). */
	unsigned n = 0;
	for (unsigned i = 0; i < RX_DEPTH; i++)
		n += q->rx_slot[i] != NULL;
	rx_close_leaked += n;
	free(q->tx_bufs);
	txg_free(q->txg);
	free(q->tx_free);
	q->tx_bufs = NULL;
	q->txg = NULL;
	q->tx_free = NULL;
	pthread_mutex_lock(&rx_kept_mtx);
	q->kept_next = rx_kept;
	rx_kept = q;
	pthread_mutex_unlock(&rx_kept_mtx);
}

static const struct nif_dev_ops qring_ops = {
	.wait = q_wait, .rx = nif__q_rx, .wake = nif__q_wake, .tx_slot = nif__q_tx_slot,
	.tx_queue = nif__q_tx_queue, .tx_flush = nif__q_flush, .get_stats = q_get_stats,
	.close = q_close, .tx_gather = nif__q_tx_gather, .ready = q_ready,
	.wait_fd = q_wait_fd, .spin_poll = q_spin_poll, .rx_refill = q_rx_refill,
	.lease_check = q_lease_check, .tx_pending = q_tx_pending,
};

int nif_qring_open(struct nif_dev **out, struct nif_qring_prep *p, unsigned mtu, enum nif_offload offload,
		   int hup_fd, int wake_fd, bool wake_in_ring)
{
	struct qring *q = calloc(1, sizeof(*q));
	int rc;

	if (!q)
		return -ENOMEM;
	q->dev.ops = &qring_ops;
	q->dev.mtu = mtu;
	q->dev.offload = offload != NIF_OFFLOAD_NONE;
	q->dev.csum_only = offload == NIF_OFFLOAD_CSUM;
	q->hup_fd = hup_fd;
	q->owner = getpid();
	q->vhl = q->dev.offload ? NIF_VNET_HLEN : 0;
	q->frame_max = offload == NIF_OFFLOAD_FULL ? NIF_OFF_FRAME_MAX : (size_t)mtu + WIRE_ETH_HLEN;
	/* One byte more than the largest frame, to notice truncation; resident only as far
	 * as frames fill them. */
	q->buf_size = (q->vhl + q->frame_max + 1 + 63) & ~(size_t)63;
	q->wake_fd = wake_fd;
	q->wake_in_ring = wake_in_ring;
	q->hup_checked_ns = mono_ns();
	/* Blocking for the ring's read of it (arm_wake), non-blocking for poll(2)'s drain. */
	int fl = wake_fd >= 0 ? nif_sys.fcntl(wake_fd, F_GETFL) : -1;
	if (fl >= 0)
		nif_sys.fcntl(wake_fd, F_SETFL, wake_in_ring ? fl & ~O_NONBLOCK : fl | O_NONBLOCK);
	unsigned lend = RX_LEND_BYTES / q->buf_size;
	q->pool = nif_rxpool_new(q->buf_size, RX_DEPTH + (lend > 64 ? lend : 64));
	/* The slots' buffers in one run, as when all were allocated at open, but faulted
	 * in only as reads and frames reach them; without the mapping, malloc's. */
	if (q->pool)
		(void)nif_rxpool_reserve(q->pool, RX_DEPTH);
	q->tx_bufs = malloc(q->buf_size * TX_DEPTH);
	q->txg = txg_alloc();
	q->tx_free = malloc(sizeof(*q->tx_free) * TX_DEPTH);
	if (wake_fd < 0 || !q->pool || !q->tx_bufs || !q->txg ||
	    !q->tx_free) {
		rc = wake_fd < 0 ? -EBADF : -ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < TX_DEPTH; i++)
		q->tx_free[i] = TX_DEPTH - 1 - i;
	q->tx_nfree = TX_DEPTH;
	q->rx = p->ring[0];
	q->tx = p->ring[1];
	q->br = p->br;
	q->mshot = p->mshot && p->br;
	q->coop = p->coop;
	q->nowait = p->nowait;
	q->rx_nw_target = RX_NW_MIN;
	p->br = NULL;
	p->made = false;
	for (unsigned i = 0; i < RX_DEPTH; i++)
		q->rx_free[q->rx_nfree++] = RX_DEPTH - 1 - i;
	q->rx_target = q->mshot ? 1 : RX_ARM_MIN;
	q->br_target = RX_BR_MIN;
	q->wake_tag = WAKE_TAG;
	q->mshot_tag = MSHOT_TAG;
	/* The slots' buffers come from the pool as they are first armed (none armed: no
	 * memory for them). */
	nif__q_arm_reads(q);
	if (q->mshot)
		rc = q->br_posted ? 0 : -ENOMEM;
	else
		rc = q->rx_armed ? nif__q_rx_submit(q) : -ENOMEM;
	if (rc < 0) {
		q->wake_fd = -1;  /* the caller's on failure */
		q_close(&q->dev);
		return rc;
	}
	nif__q_reg_add(q);
	*out = &q->dev;
	return 0;
fail:
	free_memory(q);
	return rc;
}
