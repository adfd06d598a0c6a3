/* Run to completion: who waits on the device, feeds lwIP and runs its timers.
 *
 * Something must wait for frames on the device, take them under the core lock, run lwIP's
 * input and timers, and flush what lwIP sent. Until now that was always the stack thread,
 * and an application thread blocked in a call slept on its socket's condition variable:
 * every message woke two threads in turn (the device woke the stack thread, whose lwIP
 * callback woke the application thread). Now an application thread that blocks in a call
 * drives the stack itself (drive()): it waits on the device, takes the frames, runs lwIP's
 * input and timers, and returns once its socket was signalled. A message then costs one
 * wake-up, as with the kernel's stack.
 *
 * Exactly one thread waits on the device at a time (stk__node.dev_waiter): the stack thread
 * or one application thread, the driver. Other blocked application threads sleep on their
 * socket's condition variable as before; the driver's rounds signal them. A thread that
 * leaves the device with threads still blocked hands it to the first of them (hand_over).
 * While application threads drive, or enter calls (stk__drive_entry: a busy program that
 * always finds a socket ready never waits on the device), the stack thread parks on
 * park_cond (park()): it wakes for lwIP's timers (unless a driver on the device runs them)
 * and at least every GRACE_MS, takes frames that arrived while no application thread was
 * inside, or leaves that round to the thread that holds the core lock then, and waits on
 * the device again only after GRACE_MS without a driver (a blocked thread that finds it
 * there asks it to leave: want_drive). Frames that arrive
 * while no thread is inside a call are also taken at the next call's entry
 * (stk__drive_entry), where the device can say cheaply that some wait (nif_dev_ops.ready).
 * A call that took frames submits the reads they re-armed once few are in flight
 * (nif_dev_ops.rx_refill): a program that never waits has nobody else to.
 *
 * Deviation: while a program alternates between calls and its own work, frames that
 * arrive during its work (ACKs, data for other sockets) wait until its next call, or at
 * most GRACE_MS for the parked stack thread; the kernel's softirq takes them at once.
 *
 * Programs under ulsrun drive too (uls_socket_drive for blocking calls, uls_poll_drive for
 * poll and epoll_wait): the shim calls with every signal blocked and passes the program's
 * mask, which drive() opens for the device wait alone; the shim's handler trampoline
 * (apps/preload/signal.c) calls uls_signal_note, which marks the thread and wakes the
 * device, and the wait ends with EINTR or goes on as signal(7) says. Such a thread never
 * sleeps on a condition variable behind another application thread's driving (no signal
 * would end that sleep): it returns -EBUSY and the shim waits in the kernel on the mirror.
 *
 * ULS_SPIN_US=N: a driver polls the device for up to N microseconds before it sleeps in
 * the device's wait (off by default; SO_BUSY_POLL sets it per socket). ULS_RTC=0 turns run
 * to completion off (the stack thread alone waits on the device, as before), for
 * comparison.
 */
#include "sock.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lwip/timeouts.h"

#define RX_BUDGET 256        /* frames per round before timers run again */
#define GRACE_MS 2           /* the stack thread's park after the last driver's round */
#define SPIN_US_MAX 1000000u

/* A thread driving for the POSIX shim (uls_socket_drive) waits on the device with the
 * program's signal mask, so that its handlers run during the wait, as they run during a
 * kernel recv(). Initial-exec TLS: uls_signal_note reads it from a signal handler. */
#define TLS __thread __attribute__((tls_model("initial-exec")))
static TLS const sigset_t *drive_mask;        /* the mask for the device wait, or NULL */
static TLS bool drive_open;                   /* the device wait is open to handlers */
static TLS struct nif_dev *volatile waiting_dev;  /* set while that wait is open */
static TLS volatile sig_atomic_t sig_noted;   /* a noted handler ran since the call began */
static TLS volatile sig_atomic_t sig_intr;    /* ... and one of them had no SA_RESTART */
static TLS struct pollfd *drive_fds;          /* uls_poll_drive: the kernel's descriptors */
static TLS unsigned drive_nfds;
/* uls_tx_batch: the sends this thread still expects before its next wait, and whether a
 * leave of this thread kept frames queued for a later flush since its last flush. */
static TLS unsigned tx_batch_left;
static TLS bool tx_deferred;

/* An application thread blocked in stk__sock_sleep (a FIFO list in stk__node). */
struct stk_sleeper {
	struct stk_sock *s;       /* NULL: a thread in uls_poll_drive */
	pthread_cond_t *cond;     /* where it sleeps: s->cond, or its own */
	struct stk_sleeper *next;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void cond_init(pthread_cond_t *c)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(c, &ca);
	pthread_condattr_destroy(&ca);
}

/* Wait on c with the core lock (held), until deadline (ns, CLOCK_MONOTONIC; 0: none). */
static int cond_wait_until(pthread_cond_t *c, uint64_t deadline)
{
	int rc;

	stk__now_held(false);
	stk__core_owner_drop();
	if (deadline) {
		struct timespec ts = { .tv_sec = (time_t)(deadline / 1000000000u),
				       .tv_nsec = (long)(deadline % 1000000000u) };
		rc = pthread_cond_timedwait(c, &stk__node.lock, &ts);
	} else {
		rc = pthread_cond_wait(c, &stk__node.lock);
	}
	stk__core_owner_take();
	stk__now_held(true);
	return rc;
}

/* A number of microseconds from the environment, read once: absent means 0; anything but
 * a decimal number up to SPIN_US_MAX is refused with a message saying so. */
static unsigned env_us(const char *name)
{
	const char *e = getenv(name);
	char *end;

	if (!e || !*e)
		return 0;
	errno = 0;
	unsigned long v = strtoul(e, &end, 10);
	if (*e < '0' || *e > '9' || *end || errno || v > SPIN_US_MAX) {
		stk__log(0, "%s=%s refused: expected microseconds, 0 to %u; not spinning", name,
			 e, SPIN_US_MAX);
		return 0;
	}
	return (unsigned)v;
}

/* Nobody on the device, parked, sleeping or owed a round: the state of a node's threads
 * before any runs (a new node, a fork child's). */
static void no_threads(struct stk_node *n)
{
	n->dev_waiter = STK_W_NONE;
	n->want_drive = false;
	n->parked = false;
	n->park_woken = false;
	n->park_now = false;
	n->round_owed = false;
	n->sleepers = NULL;
	n->driver_sock = NULL;
}

void stk__drive_init(void)
{
	struct stk_node *n = &stk__node;
	static bool read_env;

	if (!read_env) {
		const char *rtc = getenv("ULS_RTC");
		read_env = true;
		n->rtc = !(rtc && strcmp(rtc, "0") == 0);
		n->spin_us = env_us("ULS_SPIN_US");
		pthread_mutex_init(&n->park_mtx, NULL);
		cond_init(&n->park_cond);
		cond_init(&n->idle_cond);
	}
	no_threads(n);
	n->drive_last_ms = 0;
}

/* fork() child: no other thread exists, whatever the parent's were doing (core lock held). */
void stk__drive_forked(void)
{
	struct stk_node *n = &stk__node;

	pthread_mutex_init(&n->park_mtx, NULL);
	cond_init(&n->park_cond);
	cond_init(&n->idle_cond);
	no_threads(n);
}

/* The frames waiting on the device, up to RX_BUDGET, as one batch (core lock held): each
 * connection they reach answers once, at the batch's end (stack/outbatch.c). */
static int take_frames(struct stk_node *n)
{
	stk__outbatch_begin();
	int got = n->dev->ops->rx(n->dev, stk__ethif_input, &n->netif, RX_BUDGET);
	stk__outbatch_end();
	return got;
}

/* What follows a wait on the device, whoever waited (core lock held): a lost lease, the
 * frames, lwIP's timers, and what they sent. */
static void round_after_wait(struct stk_node *n, int wrc)
{
	if (wrc == -ECONNRESET && !n->lost) {
		/* ulsd closed the lease (it stopped or crashed). Its rings are gone with it,
		 * so established connections cannot survive: say so once and fail every
		 * socket with ENETDOWN (docs/control-protocol.md). */
		n->lost = true;
		stk__log(0, "ulsd closed the lease: the node is gone, sockets fail with ENETDOWN");
		stk__sockets_lost();
	}
	/* The timers run at the time a batch of frames ended (a frame or two take
	 * microseconds: the hold's reading stands). */
	if (take_frames(n) > 2)
		stk__now_forget();
	sys_check_timeouts();
	stk__sock_pay_owed();
	n->dev->ops->tx_flush(n->dev);
}

/* How long a waiter may sleep before lwIP's next timer (ms, -1: none), at most limit_ms
 * (-1: no limit). */
static int timer_timeout(int64_t limit_ms)
{
	u32_t sleep = sys_timeouts_sleeptime();
	int64_t t = sleep == SYS_TIMEOUTS_SLEEPTIME_INFINITE ? -1 : (int64_t)sleep;

	if (limit_ms >= 0 && (t < 0 || limit_ms < t))
		t = limit_ms;
	if (stk__sock_owing() && (t < 0 || t > GRACE_MS))
		t = GRACE_MS;  /* mirrors to bring in line (stk__sock_leave_owing) */
	return t > INT_MAX ? INT_MAX : (int)t;
}

/* The device is free and threads are blocked: the first of them takes it. A broadcast,
 * because other threads may sleep on the same socket; those that find the device taken
 * sleep again. */
static void hand_over(struct stk_node *n)
{
	if (n->rtc && n->dev_waiter == STK_W_NONE && n->sleepers)
		pthread_cond_broadcast(n->sleepers->cond);
}

/* Poll the device for frames for up to us microseconds (core lock not held). */
static bool spin(struct nif_dev *dev, unsigned us)
{
	if (!us || !dev->ops->ready)
		return false;
	uint64_t end = now_ns() + (uint64_t)us * 1000u;
	if (dev->ops->spin_poll) {
		/* The device enters the kernel only to submit reads it re-armed
		 * (netif/qring.c): no wait of timeout 0 between looks, which cost a system
		 * call (1.5 us here) every 64 looks. The yield stays: with both ends
		 * spinning on 2 vCPUs, a spin that never yielded saw no frame in 50 us
		 * (the peer's frame waited for a CPU: 114-120 us round trips, against 20
		 * with the yield). */
		do {
			for (int i = 0; i < 64; i++) {
				if (dev->ops->spin_poll(dev))
					return true;
#if defined(__x86_64__) || defined(__i386__)
				__builtin_ia32_pause();
#endif
			}
			sched_yield();
		} while (now_ns() < end);
		return false;
	}
	do {
		for (int i = 0; i < 64; i++) {
			if (dev->ops->ready(dev))
				return true;
#if defined(__x86_64__) || defined(__i386__)
			__builtin_ia32_pause();
#endif
		}
		/* A wait that does not sleep: io_uring posts a read's completion from work it
		 * queues to the thread that submitted the read, run when that thread enters
		 * the kernel, so a thread that only looked would never see it. Then the CPU
		 * goes to whoever else may run here: with both ends of a ping-pong spinning
		 * on a 2-vCPU machine, the kernel's own threads that carry the frame
		 * (softirq, io_uring workers) waited out each 50 us spin (131 us round trips
		 * against 27 without spinning; 26.5 with the yield). */
		dev->ops->wait(dev, 0);
		sched_yield();
	} while (now_ns() < end);
	return false;
}

/* One round of an application thread driving the stack for s (NULL: for an epoll set,
 * uls_poll_drive) (core lock held, the device free): wait on the device until frames, a
 * wake-up, lwIP's next timer or deadline (ns, 0: none), then take the frames and run the
 * timers. */
static void drive(struct stk_node *n, struct stk_sock *s, uint64_t deadline)
{
	int64_t limit = -1;

	if (deadline) {
		uint64_t now = now_ns();
		limit = now >= deadline ? 0 : (int64_t)((deadline - now + 999999u) / 1000000u);
	}
	int timeout = timer_timeout(limit);
	n->dev_waiter = STK_W_APP;
	n->driver_sock = s;
	n->ready_kicked = false;
	n->dev_deadline = timeout < 0 ? UINT64_MAX : stk__now_ms() + (uint64_t)timeout;
	unsigned us = s && s->busy_poll_us > n->spin_us ? s->busy_poll_us : n->spin_us;
	struct nif_dev *dev = n->dev;
	const sigset_t *mask = drive_mask;
	bool open = drive_open;
	sigset_t saved;
	bool hit = false;
	int wrc = 0, held = 0;
	stk__unlock_raw();
	if (open) {
		/* A signal that arrives from here on wakes the device (uls_signal_note);
		 * one pending already is delivered by the unblocking itself, one held off
		 * (sigdefer.c) by opening. */
		waiting_dev = dev;
		if (mask)
			pthread_sigmask(SIG_SETMASK, mask, &saved);
		held = stk__signal_open();
	}
	if (!(open && sig_noted)) {
		hit = spin(dev, us);
		if (!hit && !(open && sig_noted))
			wrc = drive_fds ? dev->ops->wait_fd(dev, drive_fds, drive_nfds, timeout) :
					  dev->ops->wait(dev, timeout);
	}
	if (open) {
		stk__signal_close(held);
		if (mask)
			pthread_sigmask(SIG_SETMASK, &saved, NULL);
		waiting_dev = NULL;
	}
	stk__lock();
	n->dev_waiter = STK_W_NONE;
	n->driver_sock = NULL;
	n->drive_last_ms = stk__now_ms();
	stk__count(STK_CNT_RTC_ROUNDS);
	if (hit)
		stk__count(STK_CNT_RTC_SPIN_HITS);
	if (n->running)
		round_after_wait(n, wrc);
	else
		pthread_cond_broadcast(&n->idle_cond);  /* uls_node_stop() waits for the device */
}

/* Block until s is signalled (stk__sock_signal) or timeout (zero: none) passes. The core
 * lock is held on entry and on return, released while waiting. Returns 0 or -ETIMEDOUT.
 * Callers re-check their condition: a return says something happened, not what. */
static int sleep_until(struct stk_sock *s, uint64_t deadline, bool shim);

int stk__sock_sleep(struct stk_sock *s, const struct timespec *timeout)
{
	uint64_t deadline = 0;

	if (timeout && (timeout->tv_sec || timeout->tv_nsec))
		deadline = now_ns() + (uint64_t)timeout->tv_sec * 1000000000u +
			   (uint64_t)timeout->tv_nsec;
	return sleep_until(s, deadline, false);
}

/* stk__sock_sleep's loop. shim: the caller is the POSIX shim (uls_socket_drive), whose
 * thread must stay open to signals while it waits: it never sleeps on a condition
 * variable that another application thread's rounds would end (-EBUSY: it waits on the
 * mirror instead), and a noted signal ends the wait (-EINTR) unless every handler that
 * ran had SA_RESTART (then it goes on, as the kernel restarts the call). */
static int sleep_until(struct stk_sock *s, uint64_t deadline, bool shim)
{
	struct stk_node *n = &stk__node;
	int rc = 0;

	/* What the caller queued must leave before it sleeps, and a waiter on the device
	 * must know about timers the caller armed. */
	tx_batch_left = 0;
	stk__leave();
	struct stk_sleeper me = { .s = s, .cond = &s->cond }, **tail = &n->sleepers;
	while (*tail)
		tail = &(*tail)->next;
	*tail = &me;
	unsigned gen = s->gen;
	for (;;) {
		if (s->gen != gen)
			break;
		if (deadline && now_ns() >= deadline) {
			rc = -ETIMEDOUT;
			break;
		}
		if (shim && sig_noted) {
			if (sig_intr || deadline) {
				/* signal(7): a socket call with a timeout set is never
				 * restarted. */
				rc = -EINTR;
				break;
			}
			sig_noted = 0;  /* SA_RESTART: the call goes on */
		}
		if (shim && (!n->rtc || !n->running || n->dev_waiter == STK_W_APP)) {
			rc = -EBUSY;
			break;
		}
		if (n->rtc && n->running && n->dev_waiter == STK_W_NONE) {
			drive(n, s, deadline);
			continue;
		}
		if (n->rtc && n->running && n->dev_waiter == STK_W_STACK && !n->want_drive) {
			n->want_drive = true;  /* the stack thread hands the device over */
			stk__count(STK_CNT_RTC_HANDOVERS);
			n->dev->ops->wake(n->dev);
		}
		if (cond_wait_until(&s->cond, deadline) == ETIMEDOUT && s->gen == gen) {
			rc = -ETIMEDOUT;
			break;
		}
	}
	for (struct stk_sleeper **p = &n->sleepers; *p; p = &(*p)->next) {
		if (*p == &me) {
			*p = me.next;
			break;
		}
	}
	hand_over(n);
	return rc;
}

void uls_signal_note(int restart)
{
	struct nif_dev *dev = waiting_dev;

	if (!restart)
		sig_intr = 1;
	sig_noted = 1;
	if (dev)
		dev->ops->wake(dev);  /* an eventfd write: async-signal-safe */
}

int uls_socket_drive(int sd, int events, const sigset_t *mask)
{
	int rc;

	if ((events != POLLIN && events != POLLOUT) || (!mask && !uls_signal_deferring()))
		return -EINVAL;
	/* A handler that interrupted this thread's own device wait and blocks on a socket:
	 * this thread cannot drive twice (the mirror's wait it falls back to is ended by
	 * the stack thread's rounds, GRACE_MS apart, or by the socket's timeout). */
	if (waiting_dev)
		return -EBUSY;
	stk__lock();
	struct stk_sock *s = stk__sock_enter(sd);
	if (!s || s->closed) {
		if (s)
			stk__sock_leave(s);
		stk__unlock();
		return -EBADF;
	}
	if (stk__sock_ready(s, events)) {
		rc = 0;
	} else {
		stk__sock_calling = s;
		const struct timespec *t = events == POLLIN ? &s->rcvtimeo : &s->sndtimeo;
		uint64_t deadline = 0;
		if (t->tv_sec || t->tv_nsec)
			deadline = now_ns() + (uint64_t)t->tv_sec * 1000000000u +
				   (uint64_t)t->tv_nsec;
		sig_noted = sig_intr = 0;
		drive_mask = mask;
		drive_open = true;
		rc = sleep_until(s, deadline, true);
		drive_open = false;
		drive_mask = NULL;
		if (rc == -ETIMEDOUT)
			rc = -EAGAIN;  /* socket(7): SO_RCVTIMEO/SO_SNDTIMEO expired */
		stk__count(rc == -EBUSY ? STK_CNT_RTC_SHIM_MIRROR :
			   rc == -EINTR ? STK_CNT_RTC_SHIM_EINTR : STK_CNT_RTC_SHIM_DRIVES);
		stk__sock_calling = NULL;
	}
	/* Ready: the shim's next call is the operation itself, whose leave brings the
	 * mirror in line. Else (EINTR, the timeout, EBUSY: the shim may wait on the mirror)
	 * now. */
	if (rc == 0)
		stk__sock_leave_owing(s);
	else
		stk__sock_leave(s);
	stk__unlock();
	return rc;
}

int uls_poll_drive(struct pollfd *fds, unsigned nfds, int timeout_ms, const sigset_t *mask)
{
	return uls_poll_drive_gen(fds, nfds, timeout_ms, mask, NULL);
}

/* A registration of a user-level epoll set (issue 14) went onto its ready list (core lock
 * held): the set's owner must look again. Its mirror may not say so (the token is lazy), so a
 * thread that drives for such a set and waits on the device (driver_sock NULL) is woken
 * there, once per wait; during that thread's own round dev_waiter is NONE, and it looks
 * at the set after the round anyway. */
void stk__ready_note(void)
{
	struct stk_node *n = &stk__node;

	n->ready_gen++;
	if (n->dev_waiter == STK_W_APP && !n->driver_sock && !n->ready_kicked) {
		n->ready_kicked = true;
		stk__count(STK_CNT_UEPOLL_KICKS);
		n->dev->ops->wake(n->dev);
	}
}

void uls_poll_kick(void)
{
	/* A process without a stack has no thread on its device (an epoll instance that
	 * got a kernel descriptor first, apps/preload/uepoll.c kernel_first). */
	if (!stk__node.up)
		return;
	stk__lock();
	stk__ready_note();
	stk__unlock();
}

int uls_poll_drive_gen(struct pollfd *fds, unsigned nfds, int timeout_ms,
		       const sigset_t *mask, const unsigned *ready_gen)
{
	struct stk_node *n = &stk__node;
	uint64_t deadline = timeout_ms < 0 ? 0 : now_ns() + (uint64_t)timeout_ms * 1000000u;
	pthread_cond_t cond;
	int rc = -EBUSY;

	if (!fds || (!mask && !uls_signal_deferring()))
		return -EINVAL;
	if (waiting_dev || !stk__node_up_hint())
		return -EBUSY;  /* see uls_socket_drive; a process without a stack */
	stk__lock();
	if (!n->rtc || !n->running || !n->dev->ops->wait_fd) {
		stk__unlock();
		return -EBUSY;
	}
	stk__drive_entry();
	tx_batch_left = 0;  /* what the caller queued leaves before it sleeps */
	stk__leave();
	cond_init(&cond);
	struct stk_sleeper me = { .cond = &cond }, **tail = &n->sleepers;
	while (*tail)
		tail = &(*tail)->next;
	*tail = &me;
	sig_noted = sig_intr = 0;
	for (int tries = 0; tries < 3; tries++) {
		if (deadline && now_ns() >= deadline) {
			rc = -ETIMEDOUT;
			break;
		}
		if (ready_gen && *ready_gen != n->ready_gen) {
			rc = 0;  /* a socket of the caller's set moved since it looked */
			break;
		}
		if (!n->running || n->dev_waiter == STK_W_APP)
			break;  /* -EBUSY: another thread drives; wait in the kernel */
		if (n->dev_waiter == STK_W_NONE) {
			drive_mask = mask;
			drive_open = true;
			drive_fds = fds;
			drive_nfds = nfds;
			drive(n, NULL, deadline);
			drive_fds = NULL;
			drive_open = false;
			drive_mask = NULL;
			/* poll(2), select(2) and epoll_wait(2) are never restarted after a
			 * handler (signal(7)). */
			rc = sig_noted ? -EINTR : 0;
			break;
		}
		if (!n->want_drive) {
			n->want_drive = true;  /* the stack thread hands the device over */
			stk__count(STK_CNT_RTC_HANDOVERS);
			n->dev->ops->wake(n->dev);
		}
		/* Signals are held off here: a bounded wait, then the kernel's own. */
		cond_wait_until(&cond, now_ns() + 2000000u);
	}
	for (struct stk_sleeper **p = &n->sleepers; *p; p = &(*p)->next) {
		if (*p == &me) {
			*p = me.next;
			break;
		}
	}
	hand_over(n);
	pthread_cond_destroy(&cond);
	stk__count(rc == -EBUSY ? STK_CNT_RTC_POLL_KERNEL :
		   rc == -EINTR ? STK_CNT_RTC_SHIM_EINTR : STK_CNT_RTC_POLL_DRIVES);
	stk__unlock();
	return rc;
}

/* Something happened to s (core lock held): whoever sleeps in it looks again. A driver
 * waiting on the device for s is woken there. */
void stk__sock_notify(struct stk_sock *s)
{
	struct stk_node *n = &stk__node;

	s->gen++;
	pthread_cond_broadcast(&s->cond);
	if (n->dev_waiter == STK_W_APP && n->driver_sock == s)
		n->dev->ops->wake(n->dev);
}

/* A call enters the stack (core lock held): frames that wait and that no thread is
 * waiting for are taken now, so that the call sees them (run to completion: a receiver
 * that still has data queued, or a sender between two sends, takes its ACKs itself). */
void stk__drive_entry(void)
{
	struct stk_node *n = &stk__node;
	struct nif_dev *dev = n->dev;

	if (!n->rtc || !n->up)
		return;
	/* An application thread is inside: the stack thread keeps off the device for
	 * GRACE_MS more (apps_drive), so that this call and the next take the frames (run to
	 * completion). A busy program, such as redis-server with 50 clients, always finds a
	 * socket ready and never waits on the device itself: the stack thread sat there and
	 * took every frame, two system calls per request on a thread of its own and the core
	 * lock fought for on every send (a futex call per request). So does a sender that
	 * never blocks (iperf3's non-blocking writes after select; tests/node/test_rtc.py). */
	n->drive_last_ms = stk__now_ms();
	if (n->dev_waiter != STK_W_NONE)
		return;
	if (dev->ops->ready && dev->ops->ready(dev)) {
		if (take_frames(n) > 2)
			stk__now_forget();  /* as after a wait (round_after_wait) */
		stk__count(STK_CNT_RTC_ENTRY_RX);
	}
	/* The reads that taking frames re-armed, here or in the parked stack thread's
	 * round, wait for the next wait on the device to be submitted (netif/qring.c); a
	 * program that never waits would run out of reads in flight, and its frames would
	 * stay in the kernel's queue until the stack thread stopped parking. */
	if (dev->ops->rx_refill)
		dev->ops->rx_refill(dev);
}

void uls_tx_batch(unsigned sends)
{
	tx_batch_left = sends;
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
static bool flush_deferred(struct stk_node *n)
{
	if (tx_batch_left <= 1) {
		tx_batch_left = 0;
		return false;
	}
	if (!n->dev->ops->tx_pending || !n->dev->ops->tx_pending(n->dev))
		return false;  /* nothing queued: the batch's count is kept for the sends */
	/* A send of the round either way: one flushed at once still counts, or the round's
	 * last send would find sends expected and keep its flush past the round. */
	tx_batch_left--;
	if (!n->rtc || !n->parked || n->dev_waiter != STK_W_NONE) {
		stk__count(STK_CNT_TX_FLUSH_BATCH_AT_ONCE);
		return false;
	}
	tx_deferred = true;
	stk__count(STK_CNT_TX_FLUSH_DEFERRED);
	return true;
}

/* Before a wait that does not enter the stack (a poll or select answered by the mirrors
 * alone): the batch ends, and frames this thread's batch kept back leave now. Without a
 * deferral since the last flush there is nothing of this thread's to send: no lock. */
int uls_tx_kept(void)
{
	return tx_deferred;
}

void uls_tx_flush(void)
{
	tx_batch_left = 0;
	if (!tx_deferred)
		return;
	tx_deferred = false;
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

	tx_batch_left = 0;
	tx_deferred = false;
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
	if (!flush_deferred(n)) {
		n->dev->ops->tx_flush(n->dev);
		tx_deferred = false;
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

/* Are application threads driving the stack, or did one just now? Then the stack thread
 * keeps off the device. */
static bool apps_drive(const struct stk_node *n)
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
		take_frames(n);
		/* Nobody waits on the device, where the lease's hang-up is seen. */
		if (n->dev->ops->lease_check && n->dev->ops->lease_check(n->dev) < 0) {
			round_after_wait(n, -ECONNRESET);
			hand_over(n);
			return;
		}
	} else if (n->dev->ops->ready && n->dev->ops->ready(n->dev)) {
		/* Frames wait for the thread on the device, which takes them and then runs
		 * the timers itself (round_after_wait). Timers run now would act on a state
		 * those frames change: a loss probe for data whose ACK is already here. */
		stk__count(STK_CNT_RTC_PARK_TIMERS_LEFT);
		hand_over(n);
		return;
	}
	sys_check_timeouts();
	stk__sock_pay_owed();
	n->dev->ops->tx_flush(n->dev);
	hand_over(n);  /* blocked threads left the device to nobody meanwhile? */
}

/* The stack thread while applications drive: lwIP's timers, and frames that arrived while
 * no application thread was inside, at most GRACE_MS late (2 x GRACE_MS, below).
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
 *   lock. A park that runs out for a timer waits for the lock, as before: the holder
 *   would run it no sooner.
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
 *   call, against GRACE_MS plus the holder's hold before). Timers are not delayed: a
 *   due one takes the lock. A round handed twice before it is taken is one round.
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
	 * stream). Deviation: if the driver then leaves the device and its program stops
	 * calling, a timer runs up to GRACE_MS late (this park's end). */
	bool driver = n->dev_waiter == STK_W_APP;
	uint64_t now = stk__now_ms();
	int t = driver ? GRACE_MS : timer_timeout(GRACE_MS);
	u32_t sleep = driver ? SYS_TIMEOUTS_SLEEPTIME_INFINITE : sys_timeouts_sleeptime();
	bool take = false, timer_wait = false;

	n->parked = true;
	__atomic_store_n(&n->park_deadline, now + (uint64_t)t, __ATOMIC_RELAXED);
	__atomic_store_n(&n->timer_next, sleep == SYS_TIMEOUTS_SLEEPTIME_INFINITE ? UINT64_MAX :
			 now + sleep, __ATOMIC_RELAXED);
	n->park_woken = n->park_now = false;  /* every waker holds the core lock */
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
		if (now_ns() < until) {
			struct timespec ts = { .tv_sec = (time_t)(until / 1000000000u),
					       .tv_nsec = (long)(until % 1000000000u) };
			while (!n->park_woken &&
			       pthread_cond_timedwait(&n->park_cond, &n->park_mtx, &ts) != ETIMEDOUT)
				;
			continue;
		}
		/* Run out. For a timer that is due: the lock, waiting for it, as always (a
		 * holder that took the round at its unlock would run the timer no sooner). */
		pthread_mutex_unlock(&n->park_mtx);
		uint64_t timer = __atomic_load_n(&n->timer_next, __ATOMIC_RELAXED);
		uint64_t ms = stk__now_ms();
		if (timer <= ms) {
			take = true;
			timer_wait = true;
			pthread_mutex_lock(&n->park_mtx);
			break;
		}
		if (pthread_mutex_trylock(&n->lock) == 0) {
			stk__core_owner_take();
			stk__now_held(true);
			pthread_mutex_lock(&n->park_mtx);
			break;
		}
		/* Held: the holder takes the round at its unlock; back at GRACE_MS, or at
		 * lwIP's next timer as last seen (later than now), if that is sooner. */
		__atomic_add_fetch(&n->park_handed, 1, __ATOMIC_RELAXED);
		uint64_t next = ms + GRACE_MS, d = timer < next ? timer : next;
		__atomic_store_n(&n->park_deadline, d, __ATOMIC_SEQ_CST);
		/* The holder may have armed an earlier timer after timer_next was read above
		 * and compared it with the deadline that had run out (no wake): look again
		 * (the pairing is in stk__leave). Due timers then take the lock at their time,
		 * not GRACE_MS later. */
		uint64_t again = __atomic_load_n(&n->timer_next, __ATOMIC_SEQ_CST);
		if (again < d)
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
	__atomic_store_n(&n->round_owed, false, __ATOMIC_RELAXED);
	stk__count(STK_CNT_RTC_PARK_WAKES);
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
	if (tx_batch_left > 1 && n->dev->ops->tx_pending && n->dev->ops->tx_pending(n->dev)) {
		tx_batch_left--;
		stk__count(STK_CNT_TX_FLUSH_BATCH_AT_ONCE);
	}
	park_round(n);
}

/* The stack thread on the device: no application thread drives. */
static void wait_device(struct stk_node *n)
{
	int timeout = timer_timeout(-1);

	n->dev_deadline = timeout < 0 ? UINT64_MAX : stk__now_ms() + (uint64_t)timeout;
	n->dev_waiter = STK_W_STACK;
	stk__unlock_raw();
	int wrc = n->dev->ops->wait(n->dev, timeout);
	stk__lock();
	n->dev_waiter = STK_W_NONE;
	if (!n->running)
		return;
	round_after_wait(n, wrc);
	n->want_drive = false;
	hand_over(n);  /* a thread blocked meanwhile: the device is its now */
}

void *stk__stack_thread(void *arg)
{
	struct stk_node *n = arg;

	stk__lock();
	while (n->running) {
		if (apps_drive(n))
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
		cond_wait_until(&n->idle_cond, now_ns() + 10000000u);
	}
}
