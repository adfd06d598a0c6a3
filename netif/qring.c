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
 */
#include "netif/qring.h"
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

#define RX_DEPTH 64
/* Reads kept in flight while frames come one at a time. Every read in flight on the queue
 * is a poll entry on it, and tun wakes them all for each frame: with 64 in flight one frame
 * woke 64 poll handlers, 63 of which found nothing and went to io_uring's worker threads,
 * and a 1-byte round trip took 80 us instead of 27. The count doubles when a round takes
 * every read in flight (a burst) and shrinks by one per quiet round (q_rx). */
#define RX_ARM_MIN 2
#define TX_DEPTH 256
#define TX_SUBMIT_BATCH 64
#define RX_ERROR_BACKOFF_US 10000
/* What may be lent to the consumer at once, in bytes of buffer: with offloads a buffer
 * holds a 64 KiB super-segment, so 16 MiB is 4 MiB receive windows of four connections
 * waiting for their readers; beyond it the consumer copies (rx_pool_empty). */
#define RX_LEND_BYTES (16u << 20)
/* A frame is lent only if it fills at least this share of its buffer: a small frame kept
 * until its reader comes would hold a whole buffer; copying it is cheap. */
#define RX_LEND_MIN_SHARE 4
#define TX_CLOSE_WAIT_MS 1000
/* With the wake-up in the ring, how often a waiter looks at the lease for a hang-up
 * (ulsd gone): the node must fail its sockets within about a second (tests/node). */
#define HUP_CHECK_MS 200
#define WAKE_TAG UINT64_MAX   /* user_data of the wake-up eventfd's read */
#define MSHOT_TAG (UINT64_MAX - 1)   /* user_data of the multishot read of the queue */
#define CANCEL_TAG (UINT64_MAX - 2)  /* user_data of close's cancellation of the reads */
/* The same reads' other user_data: a read that replaces one whose submitter exited takes
 * the tag the replaced one does not have, so that the replaced one's end is told apart. */
#define WAKE_TAG_ALT (UINT64_MAX - 3)
#define MSHOT_TAG_ALT (UINT64_MAX - 4)
/* Exits reported to a device between two of its rounds that it tells apart; beyond, every
 * read not submitted by the thread in the round is replaced (safe: a replaced read that
 * still reads a frame delivers it). */
#define DEAD_MAX 8
/* How long close waits for the receive ring's cancelled reads to end. */
#define RX_CLOSE_WAIT_MS 1000
#define MSHOT_BGID 0

struct txg {
	nif_tx_done_fn *done;
	void *cookie;
	uint8_t vh[16];
	struct iovec iov[NIF_TX_IOV_MAX + 1];
};

struct qring {
	struct nif_dev dev;
	struct io_uring rx, tx;
	int wake_fd, hup_fd;
	bool lease_lost;
	bool wake_in_ring;     /* the eventfd is the receive ring's fixed file 1 */
	bool wake_armed;       /* a read of it is in flight */
	uint64_t wake_buf;     /* where that read puts the eventfd's count */
	uint64_t hup_checked_ns;
	size_t vhl, frame_max, buf_size;
	struct nif_rxpool *pool;
	/* Receive slot i reads into rx_slot[i], a buffer of the pool, or has none while the
	 * consumer holds the one it had (lent) and the pool had no other. */
	struct nif_rxbuf *rx_slot[RX_DEPTH];
	uint8_t *tx_bufs;
	struct txg *txg;   /* per transmit buffer index: a gathered write's state */
	unsigned rx_rearm, rx_errors_in_row;
	unsigned rx_free[RX_DEPTH], rx_nfree;  /* slots with no read in flight */
	unsigned rx_armed, rx_target;          /* reads in flight, and how many to keep */
	/* Multishot: rx_slot[i] is buffer id i of br; rx_free holds the ids with no buffer
	 * in br (their buffer lent, the pool had no other); rx_target is 1, rx_armed 0 or 1. */
	bool mshot;
	struct io_uring_buf_ring *br;
	unsigned br_added;     /* buffers added to br and not yet made visible */
	unsigned *tx_free, tx_nfree, tx_unsubmitted, tx_inflight;
	bool tx_stalled;   /* a wait for transmit space ran out, and half the buffers are not back since */
	pid_t owner;   /* the process that opened it: a fork child holds copies of its rings */
	struct nif_dev_stats st;
	struct nif_wait_stats wst;  /* dev.h */
	/* Who submitted each read in flight (a thread's token, 0: armed and not yet
	 * submitted), and reads armed since the last submission (rx_pend: slots). */
	uint64_t rx_tok[RX_DEPTH], wake_tok, mshot_tok;
	unsigned rx_pend[RX_DEPTH], rx_npend;
	bool wake_pend, mshot_pend;
	/* Reads replaced because their submitter exited, still in flight: per slot (not in
	 * rx_armed), the wake-up's and the multishot read's (tagged with the other tag). */
	bool rx_orphan[RX_DEPTH];
	unsigned rx_orphans;
	bool wake_orphan, mshot_orphan;
	uint64_t wake_tag, mshot_tag;   /* the tags of the current reads */
	/* Threads that exited since the last round (reg_mu): their tokens, or more. */
	uint64_t dead[DEAD_MAX];
	unsigned ndead;
	bool dead_overflow;
	atomic_bool dead_new;
	struct qring *reg_next;   /* the open devices (reg_head, reg_mu) */
};

static struct qring *of(struct nif_dev *d)
{
	return (struct qring *)d;
}

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
static uint64_t token(void)
{
	if (!my_token) {
		my_token = atomic_fetch_add(&next_token, 1) + 1;
		pthread_once(&exit_once, exit_init);
		if (exit_key_ok)
			(void)pthread_setspecific(exit_key, (void *)1);
	}
	return my_token;
}

static void q_wake(struct nif_dev *d);

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
		q_wake(&q->dev);
	}
	reg_unlock();
}

static void reg_add(struct qring *q)
{
	pthread_once(&exit_once, exit_init);
	reg_lock();
	q->reg_next = reg_head;
	reg_head = q;
	reg_unlock();
}

static void reg_remove(struct qring *q)
{
	reg_lock();
	for (struct qring **pp = &reg_head; *pp; pp = &(*pp)->reg_next)
		if (*pp == q) {
			*pp = q->reg_next;
			break;
		}
	reg_unlock();
}

/* After a submission by this thread: the reads armed since the last one are its own. */
static void rx_submitted(struct qring *q)
{
	uint64_t tok = token();

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
static int rx_submit(struct qring *q)
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

int nif_qring_prepare(struct nif_qring_prep *p)
{
	unsigned entries[2] = { RX_DEPTH * 2, TX_DEPTH };
	int rc;

	memset(p, 0, sizeof(*p));
	for (int i = 0; i < 2; i++) {
		struct io_uring_params par = { .flags = IORING_SETUP_R_DISABLED };
		rc = io_uring_queue_init_params(entries[i], &p->ring[i], &par);
		if (rc < 0) {
			if (i == 1)
				io_uring_queue_exit(&p->ring[0]);
			return rc;
		}
		fill_sq_array(&p->ring[i]);
	}
	p->made = true;
	p->mshot = mshot_prepare(p) == 0;
	return 0;
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

/* A free submission entry of the receive ring; when the ring is full, what it holds is
 * submitted first. NULL when there is none even then. */
static struct io_uring_sqe *rx_sqe(struct qring *q)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->rx);

	if (!sqe) {
		rx_submit(q);
		sqe = io_uring_get_sqe(&q->rx);
	}
	return sqe;
}

/* Post a read into slot i, giving the slot a buffer of the pool first if its own was
 * lent; false if there is no buffer or no submission entry (the slot stays free). */
static bool arm_read(struct qring *q, unsigned i)
{
	struct io_uring_sqe *sqe;

	if (!q->rx_slot[i] && !(q->rx_slot[i] = nif_rxpool_get(q->pool)))
		return false;
	if (!(sqe = rx_sqe(q)))
		return false;
	io_uring_prep_read(sqe, 0, q->rx_slot[i]->data, (unsigned)q->buf_size, 0);
	sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, i);
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

	while (q->rx_nfree) {
		unsigned i = q->rx_free[q->rx_nfree - 1];
		if (!q->rx_slot[i] && !(q->rx_slot[i] = nif_rxpool_get(q->pool)))
			break;
		br_add(q, i);
		q->rx_nfree--;
	}
	br_publish(q);
	if (q->rx_armed || q->rx_nfree == RX_DEPTH)
		return;
	if (!(sqe = rx_sqe(q)))
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
 * again here once the pool has one. */
static void arm_reads(struct qring *q)
{
	if (q->mshot) {
		arm_mshot(q);
		return;
	}
	while (q->rx_armed < q->rx_target && q->rx_nfree) {
		if (!arm_read(q, q->rx_free[q->rx_nfree - 1]))
			break;
		q->rx_nfree--;
		q->rx_armed++;
	}
}

/* The lease hung up (ulsd is gone): report it once. */
/* hup_fd is the receiving thread's alone; lease_lost is also read by senders under the
 * caller's lock (q_tx_slot, q_tx_gather) while the receiving thread may set it in its wait
 * without that lock: atomic (relaxed: a sender that misses it sends one more frame to a
 * queue nobody reads, which the kernel drops). */
static int lease_lost(struct qring *q)
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

/* Is the next look at the lease due (HUP_CHECK_MS after the last)? */
static bool hup_due(const struct qring *q)
{
	return q->hup_fd >= 0 && mono_ns() >= q->hup_checked_ns + HUP_CHECK_MS * 1000000ull;
}

/* Look at the lease without waiting: 0, or -ECONNRESET when ulsd hung up. */
static int hup_look(struct qring *q)
{
	struct pollfd p = { .fd = q->hup_fd, .events = POLLRDHUP };

	q->hup_checked_ns = mono_ns();
	if (nif_sys.poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
		return lease_lost(q);
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
	if (!(sqe = rx_sqe(q)))
		return;  /* the wait below still ends at its timeout */
	io_uring_prep_read(sqe, 1, &q->wake_buf, sizeof(q->wake_buf), 0);
	sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, q->wake_tag);
	q->wake_armed = true;
	q->wake_tok = 0;
	q->wake_pend = true;
}

/* Did the thread of token tok exit (dead[0..n), or any but this one after an overflow)?
 * 0: armed, not yet submitted: a live thread submits it. */
static bool tok_dead(uint64_t tok, const uint64_t *dead, unsigned n, bool overflow)
{
	if (!tok)
		return false;
	if (overflow)
		return tok != token();
	for (unsigned k = 0; k < n; k++)
		if (dead[k] == tok)
			return true;
	return false;
}

/* The receiving thread's round, before it takes or waits: reads whose submitter exited
 * (thread_gone) are replaced by reads armed now, which this round submits. A replaced
 * wake-up or multishot read is replaced only once its predecessor with the other tag has
 * ended (one tick, the kernel's fallback; two exits within it are rare): meanwhile the
 * wake-up's eventfd and the queue still end the wait through the kernel's cancellation. */
static void replace_dead_reads(struct qring *q)
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
			if (q->rx_orphan[i] || !tok_dead(q->rx_tok[i], dead, n, overflow))
				continue;
			q->rx_tok[i] = 0;
			q->rx_orphan[i] = true;
			q->rx_orphans++;
			q->rx_armed--;
			replaced++;
		}
	} else if (q->rx_armed && !q->mshot_orphan && !q->mshot_pend &&
		   tok_dead(q->mshot_tok, dead, n, overflow)) {
		q->mshot_orphan = true;
		q->mshot_tag = q->mshot_tag == MSHOT_TAG ? MSHOT_TAG_ALT : MSHOT_TAG;
		q->rx_armed = 0;
		replaced++;
	}
	if (q->wake_armed && !q->wake_orphan && !q->wake_pend &&
	    tok_dead(q->wake_tok, dead, n, overflow)) {
		q->wake_orphan = true;
		q->wake_tag = q->wake_tag == WAKE_TAG ? WAKE_TAG_ALT : WAKE_TAG;
		q->wake_armed = false;
		replaced++;
	}
	if (replaced) {
		nif__wait_count(&q->wst.rx_reads_replaced, replaced);
		arm_reads(q);   /* the wake-up's: the wait's arm_wake */
	}
}

/* A wait with the wake-up in the ring: one io_uring_enter submits what q_rx re-armed and
 * sleeps until a completion, a signal or the timeout. */
static int ring_wait(struct qring *q, int timeout_ms)
{
	int rc = 0;

	replace_dead_reads(q);
	arm_wake(q);
	q->st.ring_waits++;
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
	struct qring *q = of(d);

	if (q->wake_in_ring && !n)
		return ring_wait(q, timeout_ms);
	replace_dead_reads(q);
	/* Reads q_rx re-armed and left for the wait to submit. */
	if (io_uring_sq_ready(&q->rx))
		rx_submit(q);

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
		return lease_lost(q);
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
	struct qring *q = of(d);

	replace_dead_reads(q);
	if (q->rx_rearm && (q->rx_armed - q->rx_rearm) * 2 < q->rx_target)
		rx_submit(q);
}

static bool q_tx_pending(const struct nif_dev *d)
{
	return ((const struct qring *)d)->tx_unsubmitted != 0;
}

static bool q_ready(const struct nif_dev *d)
{
	return io_uring_cq_ready(&((const struct qring *)d)->rx) != 0;
}

/* A spinning thread's look: completions, else reads that q_rx re-armed and no wait has
 * submitted yet, which one io_uring_enter submits (a frame that comes before then waits
 * in tun's queue for them). Nothing else needs the kernel: the read of a frame that
 * comes while we spin completes as task work that io_uring interrupts this thread for
 * (the thread that submitted it), as the test shows
 * (test_qring spin_poll_sees_frames_whose_reads_it_rearmed_without_a_wait). */
static bool q_spin_poll(struct nif_dev *d)
{
	struct qring *q = of(d);

	if (io_uring_cq_ready(&q->rx))
		return true;
	replace_dead_reads(q);
	if (!io_uring_sq_ready(&q->rx))
		return false;
	nif__wait_count(&q->wst.spin_enters, 1);
	(void)rx_submit(q);
	return io_uring_cq_ready(&q->rx) != 0;
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

static void tx_reap(struct qring *q);

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
	if (res > 0) {
		q->st.rx_mshot_cqes++;
		delivered = take_frame(q, i, res, fn, arg);
	}
	/* The buffer back to the kernel, or a fresh one if the consumer kept it. */
	if (q->rx_slot[i])
		br_add(q, i);
	else
		q->rx_free[q->rx_nfree++] = i;
	return delivered;
}

static int q_rx(struct nif_dev *d, nif_rx_fn *fn, void *arg, unsigned budget)
{
	struct qring *q = of(d);
	struct io_uring_cqe *cqe;
	unsigned n = 0;

	/* Completed writes hold the caller's pbufs until reaped, and lwIP will not retransmit
	 * a segment that is still held: reap them every round, before the caller's timers. */
	if (q->txg)
		tx_reap(q);
	replace_dead_reads(q);
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
		if (q->rx_orphan[i]) {
			/* A replaced read: not in rx_armed; a frame it read is delivered. */
			q->rx_orphan[i] = false;
			q->rx_orphans--;
		} else if (!q->rx_armed) {
			continue;
		} else {
			q->rx_armed--;
		}
		q->rx_tok[i] = 0;
		if (res > 0 && q->rx_slot[i]) {
			q->st.rx_read_cqes++;
			if (take_frame(q, i, res, fn, arg))
				n++;
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
	if (q->mshot)
		;  /* one read, however many frames */
	else if (n && n >= q->rx_target)
		q->rx_target = q->rx_target * 2 > RX_DEPTH ? RX_DEPTH : q->rx_target * 2;
	else if (n <= 1 && q->rx_target > RX_ARM_MIN)
		q->rx_target--;
	arm_reads(q);
	/* With the wake-up in the ring, the next wait submits them with its own
	 * io_uring_enter (ring_wait); whoever takes frames waits next, or a driver does. */
	if (q->rx_rearm && !q->wake_in_ring && !q->mshot)
		rx_submit(q);
	return (int)n;
}

static void q_wake(struct nif_dev *d)
{
	uint64_t one = 1;

	/* EAGAIN: a wake-up is pending anyway. */
	if (nif_sys.write(of(d)->wake_fd, &one, sizeof(one)) < 0)
		return;
}

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

static void tx_reap(struct qring *q)
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

static int q_flush(struct nif_dev *d)
{
	struct qring *q = of(d);
	int rc = 0;

	if (q->tx_unsubmitted) {
		rc = io_uring_submit(&q->tx);
		q->tx_unsubmitted = 0;
	}
	tx_reap(q);
	return rc < 0 ? rc : 0;
}

static bool tx_reap_any(void *arg)
{
	struct qring *q = arg;

	tx_reap(q);
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
		tx_reap(q);
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

static uint8_t *q_tx_slot(struct nif_dev *d, size_t len)
{
	struct qring *q = of(d);

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
	if (q->vhl) {
		if (nif_vnet_build(vh, frame, len, off) < 0) {
			q->st.tx_bad_offload++;
			return -EINVAL;
		}
		if (vh[1] != 0)
			q->st.tx_gso++;
	} else if (off) {
		q->st.tx_bad_offload++;
		return -EINVAL;
	}
	return 0;
}

static int q_tx_gather(struct nif_dev *d, const struct iovec *iov, unsigned n, size_t len,
		       uint32_t off, nif_tx_done_fn *done, void *cookie)
{
	struct qring *q = of(d);

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

static int q_tx_queue(struct nif_dev *d, uint8_t *slot, size_t len, uint32_t off)
{
	struct qring *q = of(d);
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

static void q_get_stats(const struct nif_dev *d, struct nif_dev_stats *out)
{
	const struct qring *q = (const struct qring *)d;

	nif__wait_stats_get(&q->st, &q->wst, out);
}

/* Writes still in flight read the caller's memory: wait for them (bounded) before the
 * caller may free it. Those that do not complete in time are not reported done: their
 * memory leaks rather than being reused under a write. */
static void tx_drain(struct qring *q)
{
	struct __kernel_timespec ts = { .tv_nsec = 10 * 1000 * 1000 };
	struct io_uring_cqe *cqe;

	if (q->tx_unsubmitted) {
		io_uring_submit(&q->tx);
		q->tx_unsubmitted = 0;
	}
	tx_reap(q);
	for (int t = 0; q->tx_inflight && t < TX_CLOSE_WAIT_MS / 10; t++) {
		if (io_uring_wait_cqe_timeout(&q->tx, &cqe, &ts) == 0)
			tx_reap(q);
	}
}

/* Receive buffers (and devices, which hold the wake-up read's word) that close left to the
 * kernel because a read of them did not end: nif_qring_rx_leaked. */
static _Atomic uint64_t rx_close_leaked;

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
	struct io_uring_sqe *sqe;
	int cancel_res = 1;

	/* Reads armed but not yet submitted go in with the cancellation, before it. */
	if (!(sqe = rx_sqe(q)))
		return false;
	io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
	sqe->flags |= IOSQE_FIXED_FILE;   /* ulsd requires it of every request; unused here */
	io_uring_sqe_set_data64(sqe, CANCEL_TAG);
	if (io_uring_submit(&q->rx) < 0)
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
static void free_memory(struct qring *q)
{
	for (unsigned i = 0; i < RX_DEPTH; i++)
		if (q->rx_slot[i])
			nif_rxbuf_release(q->rx_slot[i]);
	nif_rxpool_close(q->pool);
	free(q->tx_bufs);
	free(q->txg);
	free(q->tx_free);
	free(q);
}

static void q_close(struct nif_dev *d)
{
	struct qring *q = of(d);

	/* A fork child closing its copy must not touch the rings: their queues are mapped
	 * shared with the parent, and draining would submit the parent's writes and take its
	 * completions (the parent's pbufs then stay held and lwIP never resends them). */
	bool own = q->owner == getpid();
	reg_remove(q);
	if (q->txg && own)
		tx_drain(q);
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
	free(q->txg);
	free(q->tx_free);
}

static const struct nif_dev_ops qring_ops = {
	.wait = q_wait, .rx = q_rx, .wake = q_wake, .tx_slot = q_tx_slot,
	.tx_queue = q_tx_queue, .tx_flush = q_flush, .get_stats = q_get_stats,
	.close = q_close, .tx_gather = q_tx_gather, .ready = q_ready,
	.wait_fd = q_wait_fd, .spin_poll = q_spin_poll, .rx_refill = q_rx_refill,
	.lease_check = q_lease_check, .tx_pending = q_tx_pending,
};

int nif_qring_open(struct nif_dev **out, struct nif_qring_prep *p, unsigned mtu, bool offload,
		   int hup_fd, int wake_fd, bool wake_in_ring)
{
	struct qring *q = calloc(1, sizeof(*q));
	int rc;

	if (!q)
		return -ENOMEM;
	q->dev.ops = &qring_ops;
	q->dev.mtu = mtu;
	q->dev.offload = offload;
	q->hup_fd = hup_fd;
	q->owner = getpid();
	q->vhl = offload ? NIF_VNET_HLEN : 0;
	q->frame_max = offload ? NIF_OFF_FRAME_MAX : (size_t)mtu + WIRE_ETH_HLEN;
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
	for (unsigned i = 0; q->pool && i < RX_DEPTH; i++)
		q->rx_slot[i] = nif_rxpool_get(q->pool);
	q->tx_bufs = malloc(q->buf_size * TX_DEPTH);
	q->txg = calloc(TX_DEPTH, sizeof(*q->txg));
	q->tx_free = malloc(sizeof(*q->tx_free) * TX_DEPTH);
	if (wake_fd < 0 || !q->pool || !q->rx_slot[RX_DEPTH - 1] || !q->tx_bufs || !q->txg ||
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
	p->br = NULL;
	p->made = false;
	for (unsigned i = 0; i < RX_DEPTH; i++)
		q->rx_free[q->rx_nfree++] = RX_DEPTH - 1 - i;
	q->rx_target = q->mshot ? 1 : RX_ARM_MIN;
	q->wake_tag = WAKE_TAG;
	q->mshot_tag = MSHOT_TAG;
	arm_reads(q);
	rc = q->mshot ? 0 : rx_submit(q);
	if (rc < 0) {
		q->wake_fd = -1;  /* the caller's on failure */
		q_close(&q->dev);
		return rc;
	}
	reg_add(q);
	*out = &q->dev;
	return 0;
fail:
	free_memory(q);
	return rc;
}
