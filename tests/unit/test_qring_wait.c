/* The direct path's device (netif/qring.c) waiting for frames: the wake-up in the receive
 * ring, the lease's hang-up, the multishot read, reads whose submitting thread exited, and
 * close while ulsd still holds the rings (tests/unit/qring_fixture.h: the device on a
 * socket pair). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "netif/qring.h"
#include "netif/rxpool.h"
#include "netif/vnet.h"
#include "tests/unit/qring_fixture.h"

/* --- waiting with the wake-up in the receive ring ---------------------------------------- */


static void *wake_later(void *arg)
{
	struct nif_dev *dev = arg;

	usleep(50000);
	dev->ops->wake(dev);
	return NULL;
}

static void wait_in_ring_ends_on_a_wake_up_from_another_thread(void **state)
{
	struct fx *f = *state;
	struct timespec t0;
	pthread_t th;

	/* The wait would last 10 s (no lease to look at): the wake-up, 50 ms in, ends it.
	 * Twice, so that the read of
	 * the eventfd is seen to be armed again after it completed. */
	for (int round = 0; round < 2; round++) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		assert_int_equal(pthread_create(&th, NULL, wake_later, f->dev), 0);
		double waited = 0;
		while (waited < 5000) {
			assert_int_equal(f->dev->ops->wait(f->dev, 10000), 0);
			f->dev->ops->rx(f->dev, NULL, NULL, 64);  /* takes the wake-up's completion */
			waited = ms_since(&t0);
			if (waited >= 45)
				break;
		}
		pthread_join(th, NULL);
		assert_true(waited >= 45);
		assert_true(waited < 5000);  /* not the 10 s timeout */
	}
}

static void wait_in_ring_ends_at_its_timeout(void **state)
{
	struct fx *f = *state;
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	double waited = 0;
	assert_int_equal(f->dev->ops->wait(f->dev, 120), 0);
	waited = ms_since(&t0);
	assert_true(waited >= 115);   /* nothing ended it early */
	assert_true(waited < 5000);
}

static void wait_in_ring_receives_frames_whose_reads_it_submitted(void **state)
{
	struct fx *f = *state;
	struct taker t = { .len = 1000, .fill = 0x3c };

	f->dev->rx_take = take;
	/* q_rx leaves the re-armed reads to the wait: each frame after the first is read
	 * only because a wait submitted them. */
	for (int i = 0; i < 8; i++) {
		peer_send(f, 1000, 0x3c);
		rx_one(f, &t);
	}
	assert_int_equal(t.offered, 8);
}

/* A caller that takes frames without ever waiting (stack/drive.c: a call's entry while the
 * stack thread parks) has the reads q_rx re-armed submitted by rx_refill once too few are
 * in flight; without it the third frame is never read. */
static void refill_keeps_reads_in_flight_for_a_caller_that_never_waits(void **state)
{
	struct fx *f = *state;
	struct taker t = { .len = 1000, .fill = 0x3c };

	f->dev->rx_take = take;
	assert_non_null(f->dev->ops->rx_refill);
	/* A call's entry refills whether or not it took frames (stk__drive_entry): that
	 * submits the multishot read, which the device leaves at open for a thread that
	 * waits or drives (netif/qring.c). */
	f->dev->ops->rx_refill(f->dev);
	for (int i = 0; i < 8; i++) {
		peer_send(f, 1000, 0x3c);
		/* io_uring completes the read as work of the thread that submitted it, run
		 * when that thread enters the kernel: usleep does. */
		for (int tries = 0; tries < 1000 && !f->dev->ops->ready(f->dev); tries++)
			usleep(1000);
		assert_true(f->dev->ops->ready(f->dev));
		assert_int_equal(f->dev->ops->rx(f->dev, not_taken, &t, 64), 1);
		f->dev->ops->rx_refill(f->dev);
	}
	assert_int_equal(t.offered, 8);
}

struct later_frame {
	struct fx *f;
	size_t len;
	uint8_t fill;
};

static void *send_later(void *arg)
{
	struct later_frame *l = arg;
	struct timespec d = { .tv_nsec = 20 * 1000 * 1000 };

	nanosleep(&d, NULL);
	peer_send(l->f, l->len, l->fill);
	return NULL;
}

/* A thread that spins (ULS_SPIN_US) looks with spin_poll and calls no wait: each frame
 * after the first needs the read that q_rx re-armed, which spin_poll must submit (a read
 * never submitted leaves its frame unread), and the read's completion, task work of this
 * thread, must reach the ring while it spins in user space. How soon is not asserted (a
 * loaded machine preempts the spinner); the benchmarks measure it. */
static void spin_poll_sees_frames_whose_reads_it_rearmed_without_a_wait(void **state)
{
	struct fx *f = *state;
	struct taker t = { .len = 300, .fill = 0x6b };
	struct later_frame l = { .f = f, .len = t.len, .fill = t.fill };
	struct nif_dev_stats st;
	struct timespec t0;
	pthread_t th;

	assert_non_null(f->dev->ops->spin_poll);
	f->dev->rx_take = take;
	for (int i = 0; i < 5; i++) {
		assert_int_equal(pthread_create(&th, NULL, send_later, &l), 0);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		bool seen = false;
		while (!seen && ms_since(&t0) < 2000)
			seen = f->dev->ops->spin_poll(f->dev);
		pthread_join(th, NULL);
		assert_true(seen);
		f->dev->ops->rx(f->dev, not_taken, &t, 64);
		assert_int_equal(t.offered, (unsigned)i + 1);
	}
	f->dev->ops->get_stats(f->dev, &st);
	/* Entered to submit each re-armed read, or to run a frame's read completion that a
	 * cooperative ring left as this thread's task work (at most once a frame: the thread
	 * runs it at any other entry too, e.g. pthread_join's), not per look; the multishot
	 * read is submitted once, by the first look (the device leaves it to a thread that
	 * waits or spins), and stays armed. */
	if (mshot_mode)
		assert_in_range(st.spin_enters, 1, 1 + 5);
	else
		assert_in_range(st.spin_enters, 1, 10 + 5);
}

/* A thread that submitted the reads (a driver that waited) and went back to its own work:
 * on a cooperative ring their completions wait until it next enters the kernel. So the
 * next thread to wait takes them over (cancels them and arms its own), and is woken by
 * the frame itself, not by the other thread's tick; the frame is delivered once. */
struct busy {
	struct fx *f;
	atomic_bool waited, stop;
};

static void *wait_then_compute(void *arg)
{
	struct busy *b = arg;
	volatile unsigned long x = 0;
	struct timespec t0;

	/* Submits the receive reads and the wake-up's as this thread's. */
	assert_int_equal(b->f->dev->ops->wait(b->f->dev, 1), 0);
	atomic_store(&b->waited, true);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!atomic_load(&b->stop) && ms_since(&t0) < 5000)
		x++;   /* user space only, until told (ms_since reads the vDSO clock) */
	return NULL;
}

static void wait_takes_over_the_reads_of_a_thread_that_went_back_to_its_work(void **state)
{
	struct fx *f = *state;
	struct taker t = { .len = 400, .fill = 0x5a };
	struct later_frame l = { .f = f, .len = t.len, .fill = t.fill };
	struct busy b = { .f = f };
	struct nif_dev_stats st;
	pthread_t th, snd;

	f->dev->rx_take = take;
	assert_int_equal(pthread_create(&th, NULL, wait_then_compute, &b), 0);
	while (!atomic_load(&b.waited))
		usleep(1000);
	assert_int_equal(pthread_create(&snd, NULL, send_later, &l), 0);
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (t.offered == 0 && ms_since(&t0) < 3000) {
		assert_int_equal(f->dev->ops->wait(f->dev, 1000), 0);
		f->dev->ops->rx(f->dev, not_taken, &t, 64);
	}
	pthread_join(snd, NULL);
	atomic_store(&b.stop, true);
	pthread_join(th, NULL);
	assert_int_equal(t.offered, 1);
	f->dev->ops->get_stats(f->dev, &st);
	/* The multishot read, or the slots' reads the other thread submitted, and the
	 * wake-up's read. */
	assert_true(st.rx_reads_taken_over >= 2);
	/* The cancelled reads end (ECANCELED) and are counted; a later frame still comes. */
	peer_send(f, t.len, t.fill);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (t.offered == 1 && ms_since(&t0) < 3000) {
		assert_int_equal(f->dev->ops->wait(f->dev, 1000), 0);
		f->dev->ops->rx(f->dev, not_taken, &t, 64);
	}
	assert_int_equal(t.offered, 2);
	f->dev->ops->get_stats(f->dev, &st);
	assert_true(st.rx_reads_cancelled >= 1);
}

/* The interrupting kind (ULS_RX_COOP=0): nothing is taken over, and frames still come. */
static int setup_interrupting(void **state)
{
	struct nif_qring_prep p;

	assert_int_equal(nif_qring_prepare_interrupting(&p), 0);
	assert_false(p.coop);
	choose_rx(&p);
	return open_fx(state, &p, NULL, NULL, true, true);
}

static int setup_interrupting_m(void **state)
{
	mshot_mode = true;
	return setup_interrupting(state);
}

static void interrupting_ring_takes_nothing_over(void **state)
{
	struct fx *f = *state;
	struct taker t = { .len = 400, .fill = 0x5a };
	struct busy b = { .f = f };
	struct nif_dev_stats st;
	pthread_t th;

	f->dev->rx_take = take;
	assert_int_equal(pthread_create(&th, NULL, wait_then_compute, &b), 0);
	while (!atomic_load(&b.waited))
		usleep(1000);
	peer_send(f, t.len, t.fill);
	rx_one(f, &t);
	atomic_store(&b.stop, true);
	pthread_join(th, NULL);
	f->dev->ops->get_stats(f->dev, &st);
	assert_int_equal(st.rx_reads_taken_over, 0);
}

/* The receive ring as nif_qring_prepare made it (setup_spin): a copy of its mapping,
 * to look at the flags and completions that the device's thread sees. */
static struct io_uring spin_ring;

static int setup_spin(void **state)
{
	struct nif_qring_prep p;

	assert_int_equal(nif_qring_prepare(&p), 0);
	assert_true(p.coop);   /* Linux 5.19 and later */
	p.mshot = false;       /* one read per slot: the kind that ulsd allows by default */
	spin_ring = p.ring[0];
	return open_fx(state, &p, NULL, NULL, true, true);
}

struct sender {
	struct fx *f;
	atomic_bool sent;
};

static void *send_now(void *arg)
{
	struct sender *s = arg;

	peer_send(s->f, 120, 0x3c);
	atomic_store(&s->sent, true);
	return NULL;
}

/* A cooperative ring interrupts no thread for a read's completion: the kernel sets
 * IORING_SQ_TASKRUN and the completion waits for the submitter's next entry into the
 * kernel. A spinner that makes none between its looks must make that entry when the flag
 * says so. The rounds count where the frame's task work was found pending (flag set, no
 * completion yet) at the look; a round where something else ran it first (this thread was
 * preempted or interrupted meanwhile: the kernel runs task work on any return to user
 * space once it is flagged) proves nothing and is not counted. On a loaded machine every
 * round can be such a round, so where it may (root), the test runs at SCHED_FIFO, the
 * sender one priority above the spinner (on a shared CPU it preempts the spinner rather
 * than wait behind it), and it looks for up to 20 s. */
static void spin_poll_runs_the_task_work_that_a_cooperative_ring_left_to_it(void **state)
{
	struct fx *f = *state;
	struct taker t = { .len = 120, .fill = 0x3c };
	unsigned pending_rounds = 0;
	pthread_t th;

	struct sched_param spin_prio = { .sched_priority = 1 }, send_prio = { .sched_priority = 2 };
	bool fifo = pthread_setschedparam(pthread_self(), SCHED_FIFO, &spin_prio) == 0;
	pthread_attr_t attr;
	struct timespec start;

	assert_int_equal(pthread_attr_init(&attr), 0);
	if (fifo) {
		assert_int_equal(pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED), 0);
		assert_int_equal(pthread_attr_setschedpolicy(&attr, SCHED_FIFO), 0);
		assert_int_equal(pthread_attr_setschedparam(&attr, &send_prio), 0);
	}
	clock_gettime(CLOCK_MONOTONIC, &start);
	f->dev->rx_take = take;
	for (unsigned i = 0; pending_rounds < 5 && (i < 200 || ms_since(&start) < 20000); i++) {
		struct sender s = { .f = f };
		/* Submits what the last round re-armed: the look below has nothing to submit,
		 * which would enter the kernel anyway. */
		assert_false(f->dev->ops->spin_poll(f->dev));
		assert_int_equal(pthread_create(&th, &attr, send_now, &s), 0);
		while (!atomic_load(&s.sent))
			;  /* no system call here */
		bool pending = (IO_URING_READ_ONCE(*spin_ring.sq.kflags) & IORING_SQ_TASKRUN) &&
			       !io_uring_cq_ready(&spin_ring);
		bool seen = f->dev->ops->spin_poll(f->dev);
		if (pending) {
			pending_rounds++;
			assert_true(seen);
		}
		struct timespec t0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		while (!seen && ms_since(&t0) < 2000)
			seen = f->dev->ops->spin_poll(f->dev);
		pthread_join(th, NULL);
		assert_true(seen);
		f->dev->ops->rx(f->dev, not_taken, &t, 64);
		assert_int_equal(t.offered, i + 1);
	}
	pthread_attr_destroy(&attr);
	if (fifo) {
		struct sched_param normal = { .sched_priority = 0 };
		pthread_setschedparam(pthread_self(), SCHED_OTHER, &normal);
	}
	assert_true(pending_rounds > 0);
}

static void wait_in_ring_reports_the_lease_hang_up_within_a_second(void **state)
{
	struct fx *f = *state;
	struct timespec t0;
	int rc = 0;

	close(f->lease[1]);
	f->lease[1] = -1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (rc == 0 && ms_since(&t0) < 5000)
		rc = f->dev->ops->wait(f->dev, 10000);
	assert_int_equal(rc, -ECONNRESET);
	assert_true(ms_since(&t0) < 1000);
	/* Once. */
	assert_int_equal(f->dev->ops->wait(f->dev, 10), 0);
}

/* A parked stack thread takes frames without waiting (stack/drive.c): lease_check is how it
 * sees ulsd go, without a wait, at most every HUP_CHECK_MS. */
static void lease_check_reports_the_hang_up_without_a_wait(void **state)
{
	struct fx *f = *state;
	struct timespec t0;
	int rc = 0;

	assert_non_null(f->dev->ops->lease_check);
	assert_int_equal(f->dev->ops->lease_check(f->dev), 0);
	close(f->lease[1]);
	f->lease[1] = -1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (rc == 0 && ms_since(&t0) < 5000) {
		rc = f->dev->ops->lease_check(f->dev);
		usleep(1000);
	}
	assert_int_equal(rc, -ECONNRESET);
	assert_true(ms_since(&t0) < 1000);
	/* Once. */
	assert_int_equal(f->dev->ops->lease_check(f->dev), 0);
}

/* --- the multishot read ------------------------------------------------------------------- */

struct seq {
	unsigned got;
	bool in_order;
};

/* Frames whose first byte is their number (mod 256), delivered for copying. */
static void count_seq(void *arg, const uint8_t *frame, size_t len, uint32_t off)
{
	struct seq *s = arg;

	(void)len; (void)off;
	if (frame[0] != (uint8_t)s->got)
		s->in_order = false;
	s->got++;
}

static void rx_until(struct fx *f, struct seq *s, unsigned n)
{
	for (int tries = 0; tries < 1000 && s->got < n; tries++) {
		assert_true(f->dev->ops->wait(f->dev, 100) >= 0);
		f->dev->ops->rx(f->dev, count_seq, s, 64);
	}
	assert_int_equal(s->got, n);
	assert_true(s->in_order);
}

/* The peer sends n frames of len octets; every one arrives, once and in order; *st is
 * the device's counters afterwards. */
static void send_and_take(struct fx *f, unsigned n, size_t len, struct nif_dev_stats *st)
{
	struct seq s = { .in_order = true };

	for (unsigned i = 0; i < n; i++)
		peer_send(f, len, (uint8_t)i);
	rx_until(f, &s, n);
	f->dev->ops->get_stats(f->dev, st);
}

/* Every frame is one completion of the multishot read, or of a read of its own (slots):
 * the two counters say which path carried them. The multishot read's ring starts with
 * RX_BR_MIN (4) buffers and doubles each time a burst empties it, so a first burst of 20
 * ends it for want of buffers (ENOBUFS) at most three times (4, 8, 16), and each end is
 * armed again once. */
static void each_frame_is_one_completion_of_the_path_in_use(void **state)
{
	struct fx *f = *state;
	struct nif_dev_stats st;

	send_and_take(f, 20, 100, &st);
	assert_int_equal(st.rx_frames, 20);
	if (mshot_mode) {
		assert_int_equal(st.rx_mshot_cqes, 20);
		assert_int_equal(st.rx_read_cqes, 0);
		assert_true(st.rx_mshot_nobufs <= 3);
		assert_int_equal(st.rx_mshot_ends, st.rx_mshot_nobufs);
		assert_int_equal(st.rx_mshot_arms, 1 + st.rx_mshot_nobufs);
	} else {
		assert_int_equal(st.rx_read_cqes, 20);
		assert_int_equal(st.rx_mshot_cqes, 0);
		assert_int_equal(st.rx_mshot_arms, 0);
		assert_int_equal(st.rx_mshot_nobufs, 0);
	}
}

/* More frames queued than the provided-buffer ring has buffers (RX_DEPTH, 64), none taken
 * meanwhile: the kernel fills all 64 and ends the read with ENOBUFS at the 65th; the device
 * counts that, gives the buffers back, arms the read again, and every frame arrives once,
 * in order. Each end of the read was followed by one new arm. */
static void burst_beyond_the_buffers_ends_the_read_which_is_armed_again(void **state)
{
	if (!have_mshot)
		skip();
	struct fx *f = *state;
	struct seq s = { .in_order = true };
	struct nif_dev_stats st;
	const unsigned n = 100;

	for (unsigned i = 0; i < n; i++)
		peer_send(f, 60, (uint8_t)i);
	rx_until(f, &s, n);
	f->dev->ops->get_stats(f->dev, &st);
	assert_int_equal(st.rx_frames, n);
	assert_int_equal(st.rx_mshot_cqes, n);
	assert_true(st.rx_mshot_nobufs >= 1);
	assert_int_equal(st.rx_mshot_arms, 1 + st.rx_mshot_nobufs);
	assert_int_equal(st.rx_mshot_ends, st.rx_mshot_nobufs);
	assert_int_equal(st.rx_errors, 0);
	/* and it keeps working after */
	peer_send(f, 60, (uint8_t)n);
	rx_until(f, &s, n + 1);
}

/* ulsd's restrictions for the receive ring (server/bpf.c): with or without the multishot
 * read. The provided buffers were registered by nif_qring_prepare before, as a process
 * does before its HELLO. */
/* ulsd's restriction set for a ring (server/bpf.c) into res: the four data opcodes, fixed
 * files required; with mshot, buffer selection allowed and (last) the multishot read; with
 * cancel, IORING_OP_ASYNC_CANCEL (an older ulsd's set lacks it). Returns the entries. */
#define ULSD_RES_MAX 8
static unsigned ulsd_restrictions(struct io_uring_restriction *res, bool mshot, bool cancel)
{
	static const uint8_t ops[] = { IORING_OP_READ, IORING_OP_WRITE, IORING_OP_READV,
				       IORING_OP_WRITEV };
	unsigned n = 0;

	memset(res, 0, ULSD_RES_MAX * sizeof(*res));
	for (unsigned i = 0; i < sizeof(ops); i++)
		res[n++] = (struct io_uring_restriction){ .opcode = IORING_RESTRICTION_SQE_OP,
							  .sqe_op = ops[i] };
	res[n++] = (struct io_uring_restriction){ .opcode = IORING_RESTRICTION_SQE_FLAGS_REQUIRED,
						  .sqe_flags = IOSQE_FIXED_FILE };
	res[n++] = (struct io_uring_restriction){
		.opcode = IORING_RESTRICTION_SQE_FLAGS_ALLOWED,
		.sqe_flags = IOSQE_FIXED_FILE | (mshot ? IOSQE_BUFFER_SELECT : 0) };
	if (cancel)
		res[n++] = (struct io_uring_restriction){ .opcode = IORING_RESTRICTION_SQE_OP,
							  .sqe_op = IORING_OP_ASYNC_CANCEL };
	if (mshot)
		res[n++] = (struct io_uring_restriction){ .opcode = IORING_RESTRICTION_SQE_OP,
							  .sqe_op = NIF_IORING_OP_READ_MULTISHOT };
	return n;
}

static int open_restricted(void **state, bool allow_mshot)
{
	struct io_uring_restriction res[ULSD_RES_MAX];
	const unsigned all = ulsd_restrictions(res, allow_mshot, false);
	/* The transmit ring's set lacks the multishot read (the last entry). */
	const unsigned nres[2] = { all, allow_mshot ? all - 1 : all };
	struct nif_qring_prep p;

	assert_int_equal(nif_qring_prepare(&p), 0);
	assert_true(p.mshot);   /* the device is told it may: ulsd's reply said so */
	return open_fx(state, &p, res, nres, false, false);
}

static int setup_restricted_mshot(void **state)
{
	return open_restricted(state, true);
}

static int setup_restricted_no_mshot(void **state)
{
	return open_restricted(state, false);
}

/* Under ulsd's restrictions with the opcode and flag allowed, the multishot read runs. */
static void restricted_ring_that_allows_it_reads_multishot(void **state)
{
	if (!have_mshot)
		skip();
	struct fx *f = *state;
	struct nif_dev_stats st;

	send_and_take(f, 5, 100, &st);
	assert_int_equal(st.rx_mshot_cqes, 5);
	assert_int_equal(st.rx_mshot_refused, 0);
}

/* A ring restricted without it (a ulsd that predates it, if a process asked anyway): the
 * kernel refuses the read with EACCES, and the device goes back to one read per slot,
 * losing no frame. */
static void refused_multishot_read_falls_back_to_reads_per_slot(void **state)
{
	if (!have_mshot)
		skip();
	struct fx *f = *state;
	struct nif_dev_stats st;

	send_and_take(f, 5, 100, &st);
	assert_int_equal(st.rx_mshot_refused, 1);
	assert_int_equal(st.rx_mshot_cqes, 0);
	assert_int_equal(st.rx_read_cqes, 5);
}

/* --- reads whose submitter exited ------------------------------------------------------------ */

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Takes frames one at a time, so that every read in flight was (re)armed and submitted
 * by this thread, which then exits. */
static void *take_some_then_exit(void *arg)
{
	struct fx *f = arg;
	struct seq s = { .in_order = true };

	for (unsigned i = 0; i < 4; i++) {
		peer_send(f, 100, (uint8_t)i);
		rx_until(f, &s, i + 1);
	}
	return NULL;
}

/* The kernel cancels the reads of a thread that exited, at the next event on the queue:
 * they are counted as cancelled, not as errors (no back-off), and armed again at once. */
static void reads_of_an_exited_thread_are_rearmed_not_errors(void **state)
{
	struct fx *f = *state;
	struct nif_dev_stats st0, st;
	struct seq s = { .in_order = true, .got = 4 };
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, take_some_then_exit, f), 0);
	pthread_join(t, NULL);
	usleep(20 * 1000);
	f->dev->ops->get_stats(f->dev, &st0);
	double t0 = now_ms();
	for (unsigned i = 4; i < 8; i++) {
		peer_send(f, 100, (uint8_t)i);
		rx_until(f, &s, i + 1);
	}
	double dt = now_ms() - t0;
	/* Reads of the exited thread that a read of ours beat to the frames end later (the
	 * kernel's fallback runs a tick after): take their completions too. */
	usleep(50 * 1000);
	assert_true(f->dev->ops->wait(f->dev, 0) >= 0);
	f->dev->ops->rx(f->dev, count_seq, &s, 64);
	f->dev->ops->get_stats(f->dev, &st);
	print_message("4 frames after the submitter's exit: %.2f ms; cancelled +%llu, errors +%llu\n",
		      dt, (unsigned long long)(st.rx_reads_cancelled - st0.rx_reads_cancelled),
		      (unsigned long long)(st.rx_errors - st0.rx_errors));
	assert_true(st.rx_reads_cancelled > st0.rx_reads_cancelled);
	assert_int_equal(st.rx_errors, st0.rx_errors);
}

/* A thread that drove the device exits with its reads in flight. The kernel would cancel
 * them only at the next event on the queue, a tick later (its fallback work), and until
 * then no read of a live thread is posted: the frame that comes right after the exit
 * would wait for that. The exit is reported (a thread-exit hook), and the next round of a
 * live thread (here a wait with nothing to take: the stack thread's, or a driver's) posts
 * reads of its own, so the frame is taken by the first wait after it comes, before any
 * cancellation. */
static void reads_of_an_exited_thread_are_replaced_at_the_next_live_round(void **state)
{
	struct fx *f = *state;
	struct nif_dev_stats st0, st;
	struct seq s = { .in_order = true, .got = 4 };
	pthread_t t;

	for (int round = 0; round < 3; round++) {
		assert_int_equal(pthread_create(&t, NULL, take_some_then_exit, f), 0);
		pthread_join(t, NULL);
		s.got = 4;
		/* The live thread's round, with nothing to take yet. */
		assert_true(f->dev->ops->wait(f->dev, 0) >= 0);
		f->dev->ops->rx(f->dev, count_seq, &s, 64);
		assert_int_equal(s.got, 4);
		f->dev->ops->get_stats(f->dev, &st0);
		double t0 = now_ms();
		peer_send(f, 100, 4);
		assert_true(f->dev->ops->wait(f->dev, 1000) >= 0);
		f->dev->ops->rx(f->dev, count_seq, &s, 64);
		double dt = now_ms() - t0;
		f->dev->ops->get_stats(f->dev, &st);
		print_message("frame after the submitter's exit: %s in %.2f ms; replaced %llu, "
			      "cancelled +%llu\n", s.got == 5 ? "taken" : "NOT taken", dt,
			      (unsigned long long)st.rx_reads_replaced,
			      (unsigned long long)(st.rx_reads_cancelled - st0.rx_reads_cancelled));
		/* The first wait ended with the frame, not with the exited thread's reads
		 * ending (which come a tick later, and are taken by later rounds). */
		assert_int_equal(s.got, 5);
		assert_true(s.in_order);
		assert_true(st.rx_reads_replaced > 0);
		/* Their cancellations, for the next round's thread to start clean. */
		usleep(30 * 1000);
		assert_true(f->dev->ops->wait(f->dev, 0) >= 0);
		f->dev->ops->rx(f->dev, count_seq, &s, 64);
		assert_int_equal(s.got, 5);
	}
}

/* --- close while ulsd still holds the rings ------------------------------------------------ */

struct fx_ulsd {
	struct fx f;   /* first: the tests take it as a struct fx */
	int keep[2];   /* ulsd's descriptors of the rings, held until the lease ends */
};

/* The rings as ulsd leaves them (server/bpf.c): restricted, the queue as fixed file 0
 * (the wake-up eventfd as file 1 with wake), and a second descriptor of each that outlives
 * the device's close, as ulsd's does until the lease ends (stack/core.c closes the device
 * first). cancel: the restrictions allow IORING_OP_ASYNC_CANCEL (an older ulsd's do not). */
static int open_like_ulsd(void **state, bool cancel, bool wake)
{
	struct io_uring_restriction res[ULSD_RES_MAX];
	const unsigned nres = ulsd_restrictions(res, true, cancel);
	struct fx_ulsd *u = calloc(1, sizeof(*u));
	struct fx *f = &u->f;
	struct nif_qring_prep p;
	int sv[2];
	int efd = eventfd(0, EFD_CLOEXEC | (wake ? 0 : EFD_NONBLOCK));

	assert_true(efd >= 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(nif_qring_prepare(&p), 0);
	choose_rx(&p);
	int files[2] = { sv[0], efd };
	for (int i = 0; i < 2; i++) {
		int fd = nif_qring_fd(&p, i);
		assert_int_equal(uring_register(fd, IORING_REGISTER_RESTRICTIONS, res, nres), 0);
		assert_int_equal(uring_register(fd, IORING_REGISTER_FILES, files,
						i == 0 && wake ? 2 : 1), 0);
		assert_int_equal(uring_register(fd, IORING_REGISTER_ENABLE_RINGS, NULL, 0), 0);
		u->keep[i] = dup(fd);
		assert_true(u->keep[i] >= 0);
	}
	assert_int_equal(nif_qring_open(&f->dev, &p, 1500, true, -1, efd, wake), 0);
	f->peer = sv[1];
	f->own = sv[0];
	f->lease[0] = f->lease[1] = -1;
	*state = u;
	return 0;
}

static int setup_ulsd(void **state) { return open_like_ulsd(state, true, false); }
static int setup_ulsd_wake(void **state) { return open_like_ulsd(state, true, true); }
static int setup_ulsd_old(void **state) { return open_like_ulsd(state, false, true); }
static int setup_ulsd_m(void **state) { mshot_mode = true; return setup_ulsd(state); }
static int setup_ulsd_wake_m(void **state) { mshot_mode = true; return setup_ulsd_wake(state); }
static int setup_ulsd_old_m(void **state) { mshot_mode = true; return setup_ulsd_old(state); }

static int teardown_ulsd(void **state)
{
	struct fx_ulsd *u = *state;

	mshot_mode = false;
	for (int i = 0; i < 2; i++)
		close(u->keep[i]);   /* the lease ends: the rings go */
	return teardown(state);
}

/* The device closes while ulsd still holds its rings: no read of it is left in flight to
 * write into the buffers it gave back, so the next frame stays in the queue, and no buffer
 * had to be left allocated. */
static void close_cancels_the_reads_that_the_ring_kept_alive(void **state)
{
	struct fx *f = *state;
	struct nif_dev_stats st;
	uint8_t buf[NIF_VNET_HLEN + 200];
	uint64_t leaked = nif_qring_rx_leaked();

	send_and_take(f, 3, 100, &st);   /* reads in flight, submitted */
	f->dev->ops->close(f->dev);
	f->dev = NULL;
	assert_int_equal(nif_qring_rx_leaked(), leaked);
	peer_send(f, 100, 0x5a);
	usleep(50 * 1000);
	ssize_t n = recv(f->own, buf, sizeof(buf), MSG_DONTWAIT);
	if (n < 0)
		fail_msg("the frame after close was taken by a read of the closed device (%s)",
			 strerror(errno));
	assert_int_equal(n, NIF_VNET_HLEN + 100);
	assert_int_equal(buf[NIF_VNET_HLEN], 0x5a);
}

/* An older ulsd refuses the cancellation: close does not wait for reads that will not end,
 * and leaves their buffers allocated, counted. */
static void close_under_a_ulsd_that_refuses_cancelling_leaks_the_buffers_counted(void **state)
{
	struct fx *f = *state;
	struct nif_dev_stats st;
	struct timespec t0;
	uint64_t leaked = nif_qring_rx_leaked();

	send_and_take(f, 3, 100, &st);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	f->dev->ops->close(f->dev);
	f->dev = NULL;
	assert_true(ms_since(&t0) < 500);
	assert_true(nif_qring_rx_leaked() > leaked);
}

/* --- reads that do not wait (reads per slot) ------------------------------------------ */

/* As setup_wake_in_ring, with only reads that wait (ULS_RX_NOWAIT=0), for comparison. */
static int setup_wake_in_ring_waiting_only(void **state)
{
	struct nif_qring_prep p;

	assert_int_equal(nif_qring_prepare(&p), 0);
	choose_rx(&p);
	p.nowait = false;
	return open_fx(state, &p, NULL, NULL, true, true);
}

/* Bursts of 8 frames (a socket pair's queue holds 10: net.unix.max_dgram_qlen), each
 * queued before the device looks. A round that took a frame from each of the two reads
 * that wait (qring_priv.h RX_ARM_MIN) arms reads that do not wait (RWF_NOWAIT), which
 * find their frames queued and complete in the submission; so at every wait only the two
 * reads that wait are poll entries on the queue (with only those, their count doubles in
 * such bursts, and every frame wakes each). Every frame once, in order. */
static void bursts(struct fx *f, struct nif_dev_stats *st)
{
	struct seq s = { .in_order = true };

	for (unsigned b = 0; b < 30; b++) {
		for (unsigned i = 0; i < 8; i++)
			peer_send(f, 100, (uint8_t)(b * 8 + i));
		rx_until(f, &s, (b + 1) * 8);
	}
	f->dev->ops->get_stats(f->dev, st);
	assert_int_equal(st->rx_frames, 240);
	assert_int_equal(st->rx_read_cqes, 240);
	assert_int_equal(st->rx_errors, 0);
}

static void bursts_are_taken_by_reads_that_do_not_wait(void **state)
{
	struct nif_dev_stats st;

	bursts(*state, &st);
	assert_true(st.rx_nowait_cqes >= 30);
	assert_int_equal(st.rx_nowait_refused, 0);
	assert_true(st.rx_armed_at_wait <= 2 * (st.ring_waits + st.poll_waits));
}

/* The same bursts with only reads that wait: none that does not, and more than two reads
 * in flight at the waits (what the test above tells apart). */
static void waiting_only_device_arms_no_read_that_does_not_wait(void **state)
{
	struct nif_dev_stats st;

	bursts(*state, &st);
	assert_int_equal(st.rx_nowait_cqes + st.rx_nowait_again, 0);
	assert_true(st.rx_armed_at_wait > 2 * (st.ring_waits + st.poll_waits));
}

/* Frames one at a time (a request and its answer): no round takes a frame from both
 * reads that wait, so no read that does not wait is armed. One that would find the queue
 * empty ends the next wait at once with EAGAIN: a system call and a round more per frame
 * of a ping-pong. */
static void one_frame_at_a_time_arms_no_read_that_does_not_wait(void **state)
{
	struct fx *f = *state;
	struct nif_dev_stats st;
	struct seq s = { .in_order = true };

	for (unsigned i = 0; i < 20; i++) {
		peer_send(f, 100, (uint8_t)i);
		rx_until(f, &s, i + 1);
	}
	f->dev->ops->get_stats(f->dev, &st);
	assert_int_equal(st.rx_frames, 20);
	assert_int_equal(st.rx_nowait_cqes + st.rx_nowait_again, 0);
}

int main(void)
{
	qring_fixture_init();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(each_frame_is_one_completion_of_the_path_in_use, setup, teardown),
		cmocka_unit_test_setup_teardown(each_frame_is_one_completion_of_the_path_in_use, setup_wake_in_ring, teardown),
		cmocka_unit_test_setup_teardown(wait_in_ring_ends_on_a_wake_up_from_another_thread, setup_wake_in_ring_no_lease, teardown),
		cmocka_unit_test_setup_teardown(wait_in_ring_ends_at_its_timeout, setup_wake_in_ring_no_lease, teardown),
		cmocka_unit_test_setup_teardown(wait_in_ring_receives_frames_whose_reads_it_submitted, setup_wake_in_ring, teardown),
		cmocka_unit_test_setup_teardown(wait_in_ring_reports_the_lease_hang_up_within_a_second, setup_wake_in_ring, teardown),
		cmocka_unit_test_setup_teardown(lease_check_reports_the_hang_up_without_a_wait, setup_wake_in_ring, teardown),
		cmocka_unit_test_setup_teardown(refill_keeps_reads_in_flight_for_a_caller_that_never_waits, setup_wake_in_ring, teardown),
		cmocka_unit_test_setup_teardown(spin_poll_sees_frames_whose_reads_it_rearmed_without_a_wait, setup_wake_in_ring, teardown),
		cmocka_unit_test_setup_teardown(spin_poll_sees_frames_whose_reads_it_rearmed_without_a_wait, setup_spin, teardown),
		cmocka_unit_test_setup_teardown(spin_poll_runs_the_task_work_that_a_cooperative_ring_left_to_it, setup_spin, teardown),
		cmocka_unit_test_setup_teardown(wait_takes_over_the_reads_of_a_thread_that_went_back_to_its_work, setup_wake_in_ring, teardown),
		cmocka_unit_test_setup_teardown(wait_takes_over_the_reads_of_a_thread_that_went_back_to_its_work, setup_wake_in_ring_m, teardown_m),
		cmocka_unit_test_setup_teardown(interrupting_ring_takes_nothing_over, setup_interrupting, teardown),
		cmocka_unit_test_setup_teardown(interrupting_ring_takes_nothing_over, setup_interrupting_m, teardown_m),
		cmocka_unit_test_setup_teardown(wait_in_ring_receives_frames_whose_reads_it_submitted, setup_interrupting, teardown),
		cmocka_unit_test_setup_teardown(wait_in_ring_receives_frames_whose_reads_it_submitted, setup_interrupting_m, teardown_m),
		cmocka_unit_test_setup_teardown(each_frame_is_one_completion_of_the_path_in_use, setup_m, teardown_m),
		cmocka_unit_test_setup_teardown(each_frame_is_one_completion_of_the_path_in_use, setup_wake_in_ring_m, teardown_m),
		cmocka_unit_test_setup_teardown(wait_in_ring_ends_on_a_wake_up_from_another_thread, setup_wake_in_ring_no_lease_m, teardown_m),
		cmocka_unit_test_setup_teardown(wait_in_ring_ends_at_its_timeout, setup_wake_in_ring_no_lease_m, teardown_m),
		cmocka_unit_test_setup_teardown(wait_in_ring_receives_frames_whose_reads_it_submitted, setup_wake_in_ring_m, teardown_m),
		cmocka_unit_test_setup_teardown(wait_in_ring_reports_the_lease_hang_up_within_a_second, setup_wake_in_ring_m, teardown_m),
		cmocka_unit_test_setup_teardown(lease_check_reports_the_hang_up_without_a_wait, setup_wake_in_ring_m, teardown_m),
		cmocka_unit_test_setup_teardown(refill_keeps_reads_in_flight_for_a_caller_that_never_waits, setup_wake_in_ring_m, teardown_m),
		cmocka_unit_test_setup_teardown(spin_poll_sees_frames_whose_reads_it_rearmed_without_a_wait, setup_wake_in_ring_m, teardown_m),
		cmocka_unit_test_setup_teardown(burst_beyond_the_buffers_ends_the_read_which_is_armed_again, setup_m, teardown_m),
		cmocka_unit_test_setup_teardown(burst_beyond_the_buffers_ends_the_read_which_is_armed_again, setup_wake_in_ring_m, teardown_m),
		cmocka_unit_test_setup_teardown(restricted_ring_that_allows_it_reads_multishot, setup_restricted_mshot, teardown),
		cmocka_unit_test_setup_teardown(refused_multishot_read_falls_back_to_reads_per_slot, setup_restricted_no_mshot, teardown),
		cmocka_unit_test_setup_teardown(reads_of_an_exited_thread_are_rearmed_not_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(reads_of_an_exited_thread_are_rearmed_not_errors, setup_m, teardown_m),
		cmocka_unit_test_setup_teardown(reads_of_an_exited_thread_are_rearmed_not_errors, setup_wake_in_ring_m, teardown_m),
		cmocka_unit_test_setup_teardown(reads_of_an_exited_thread_are_replaced_at_the_next_live_round, setup, teardown),
		cmocka_unit_test_setup_teardown(reads_of_an_exited_thread_are_replaced_at_the_next_live_round, setup_wake_in_ring, teardown),
		cmocka_unit_test_setup_teardown(reads_of_an_exited_thread_are_replaced_at_the_next_live_round, setup_m, teardown_m),
		cmocka_unit_test_setup_teardown(reads_of_an_exited_thread_are_replaced_at_the_next_live_round, setup_wake_in_ring_m, teardown_m),
		cmocka_unit_test_setup_teardown(close_cancels_the_reads_that_the_ring_kept_alive, setup_ulsd, teardown_ulsd),
		cmocka_unit_test_setup_teardown(close_cancels_the_reads_that_the_ring_kept_alive, setup_ulsd_wake, teardown_ulsd),
		cmocka_unit_test_setup_teardown(close_cancels_the_reads_that_the_ring_kept_alive, setup_ulsd_m, teardown_ulsd),
		cmocka_unit_test_setup_teardown(close_cancels_the_reads_that_the_ring_kept_alive, setup_ulsd_wake_m, teardown_ulsd),
		cmocka_unit_test_setup_teardown(close_under_a_ulsd_that_refuses_cancelling_leaks_the_buffers_counted, setup_ulsd_old, teardown_ulsd),
		cmocka_unit_test_setup_teardown(close_under_a_ulsd_that_refuses_cancelling_leaks_the_buffers_counted, setup_ulsd_old_m, teardown_ulsd),
		cmocka_unit_test_setup_teardown(bursts_are_taken_by_reads_that_do_not_wait, setup_wake_in_ring, teardown),
		cmocka_unit_test_setup_teardown(bursts_are_taken_by_reads_that_do_not_wait, setup, teardown),
		cmocka_unit_test_setup_teardown(waiting_only_device_arms_no_read_that_does_not_wait, setup_wake_in_ring_waiting_only, teardown),
		cmocka_unit_test_setup_teardown(one_frame_at_a_time_arms_no_read_that_does_not_wait, setup_wake_in_ring, teardown),
		cmocka_unit_test_setup_teardown(one_frame_at_a_time_arms_no_read_that_does_not_wait, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
