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
 * and at least every GRACE_MS (PARK_LONG_MS while a driver stays on the device; not at all
 * once a driver stayed there through a whole PARK_LONG_MS park without a round: then the
 * driver's leaving wakes it, stk__leave, and an idle process sleeps), takes
 * frames that arrived while no application thread was inside, or leaves that round to the
 * thread that holds the core lock then, and waits on
 * the device again only after GRACE_MS without a driver (a blocked thread that finds it
 * there asks it to leave: want_drive). Frames that arrive
 * while no thread is inside a call are also taken at the next call's entry
 * (stk__drive_entry), where the device can say cheaply that some wait (nif_dev_ops.ready).
 * A call that took frames submits the reads they re-armed once few are in flight
 * (nif_dev_ops.rx_refill): a program that never waits has nobody else to.
 *
 * Deviation: while a program alternates between calls and its own work, frames that
 * arrive during its work (ACKs, data for other sockets) wait until its next call, or at
 * most GRACE_MS for the parked stack thread (PARK_LONG_MS when its calls had been waiting
 * on the device, park.c); the kernel's softirq takes them at once.
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
 * the device's wait (off by default; SO_BUSY_POLL sets it per socket). The device's
 * receive ring is cooperative (netif/qring.h: a frame's read completes when the thread
 * that submitted it next enters the kernel, not by interrupting it); ULS_RX_COOP=0 makes
 * it of the interrupting kind, for comparison; ULS_RX_MULTISHOT=0 reads it with one read per
 * slot instead of the one multishot read (netif/qring.c), for comparison. ULS_RTC=0 turns run
 * to completion off (the stack thread alone waits on the device, as before), for
 * comparison.
 *
 * The stack thread's park is stack/park.c; the batching of a thread's sends, stack/txbatch.c.
 */
#include "drive.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lwip/timeouts.h"

#define SPIN_US_MAX 1000000u

/* A thread driving for the POSIX shim (uls_socket_drive) waits on the device with the
 * program's signal mask, so that its handlers run during the wait, as they run during a
 * kernel recv(). uls_signal_note reads these from a signal handler (drive.h's TLS). */
static TLS const sigset_t *drive_mask;        /* the mask for the device wait, or NULL */
static TLS bool drive_open;                   /* the device wait is open to handlers */
static TLS struct nif_dev *volatile waiting_dev;  /* set while that wait is open */
static TLS volatile sig_atomic_t sig_noted;   /* a noted handler ran since the call began */
static TLS volatile sig_atomic_t sig_intr;    /* ... and one of them had no SA_RESTART */
static TLS struct pollfd *drive_fds;          /* uls_poll_drive: the kernel's descriptors */
static TLS unsigned drive_nfds;
TLS unsigned stk__tx_batch_left;  /* drive.h */
TLS bool stk__tx_deferred;

/* An application thread blocked in stk__sock_sleep (a FIFO list in stk__node). */
struct stk_sleeper {
	struct stk_sock *s;       /* NULL: a thread in uls_poll_drive */
	pthread_cond_t *cond;     /* where it sleeps: s->cond, or its own */
	struct stk_sleeper *next;
};

uint64_t stk__now_ns(void)
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
int stk__cond_wait_until(pthread_cond_t *c, uint64_t deadline)
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
static unsigned env_us_said(const char *name, bool say)
{
	const char *e = stk__getenv(name);
	char *end;

	if (!e || !*e)
		return 0;
	errno = 0;
	unsigned long v = strtoul(e, &end, 10);
	if (*e < '0' || *e > '9' || *end || errno || v > SPIN_US_MAX) {
		if (say)
			stk__log(0, "%s=%s refused: expected microseconds, 0 to %u; not spinning",
				 name, e, SPIN_US_MAX);
		return 0;
	}
	return (unsigned)v;
}

static unsigned env_us(const char *name)
{
	return env_us_said(name, true);
}

/* A switch of the receive ring's, name=0 or =1; unset: dflt. Anything else is refused,
 * said (with what the default does, dflt_says), and leaves the default. */
static bool env_switch(const char *name, bool dflt, const char *dflt_says)
{
	const char *e = stk__getenv(name);

	if (!e)
		return dflt;
	if (!strcmp(e, "1"))
		return true;
	if (!strcmp(e, "0"))
		return false;
	stk__log(0, "%s=%s refused: expected 0 or 1; %s", name, e, dflt_says);
	return dflt;
}

/* Does this process want the device's receive ring of the interrupting kind (ULS_RX_COOP=0,
 * for comparison; by default it is cooperative: netif/qring.h)? Asked by the lease before
 * the node's device exists (stack/lease.c). */
bool stk__rx_coop_wanted(void)
{
	return env_switch("ULS_RX_COOP", true, "cooperative");
}

/* Does this process want its receive ring read by one multishot read where the kernel and
 * ulsd allow it (ULS_RX_MULTISHOT=1; =0: one read per slot, for comparison)? Unset, as its
 * ring is cooperative (coop): a thread about to wait takes a cooperative ring's reads over
 * (netif/qring_rx.c), an interrupting ring's never, and a multishot read left with the
 * thread that armed it woke that thread for every frame (docs/bench/mshot14). Asked by the
 * lease (stack/lease.c). */
bool stk__rx_mshot_wanted(bool coop)
{
	return env_switch("ULS_RX_MULTISHOT", coop, coop ? "multishot" : "reads per slot");
}

/* Does this process want reads that do not wait beyond the few that do, on the slot path
 * (netif/qring_rx.c; ULS_RX_NOWAIT=0: reads that wait only, for comparison)? */
bool stk__rx_nowait_wanted(void)
{
	return env_switch("ULS_RX_NOWAIT", true, "reads that do not wait");
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
	n->park_idle = false;
	n->round_owed = false;
	n->sleepers = NULL;
	n->driver_sock = NULL;
}

void stk__drive_init(void)
{
	struct stk_node *n = &stk__node;
	static bool read_env;

	if (!read_env) {
		const char *rtc = stk__getenv("ULS_RTC");
		read_env = true;
		n->rtc = !(rtc && strcmp(rtc, "0") == 0);
		n->spin_us = env_us("ULS_SPIN_US");
		pthread_mutex_init(&n->park_mtx, NULL);
		cond_init(&n->park_cond);
		cond_init(&n->idle_cond);
		cond_init(&n->stop_cond);
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
	cond_init(&n->stop_cond);
	n->stopping = false;
	no_threads(n);
}

/* The frames waiting on the device, up to RX_BUDGET, as one batch (core lock held): each
 * connection they reach answers once, at the batch's end (stack/outbatch.c). */
int stk__take_frames(struct stk_node *n)
{
	stk__outbatch_begin();
	int got = n->dev->ops->rx(n->dev, stk__ethif_input, &n->netif, RX_BUDGET);
	stk__outbatch_end();
	return got;
}

/* What follows a wait on the device, whoever waited (core lock held): a lost lease, the
 * frames, lwIP's timers, and what they sent. */
void stk__round_after_wait(struct stk_node *n, int wrc)
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
	int got = stk__take_frames(n);
	if (got > 2)
		stk__now_forget();
	sys_check_timeouts();
	stk__sock_pay_owed();
	n->dev->ops->tx_flush(n->dev);
	/* Only a frame (an ACK, a RST) or the lease's end can finish what uls_node_stop()
	 * waits for; the timers' rounds (lwIP's TCP timer runs while a FIN is unacknowledged)
	 * cannot, but for an abort after the last retransmission, which its 50 ms look
	 * catches. */
	if (n->stopping && (got > 0 || n->lost))
		pthread_cond_broadcast(&n->stop_cond);
}

/* How long a waiter may sleep before lwIP's next timer (ms, -1: none), at most limit_ms
 * (-1: no limit). */
int stk__timer_timeout(int64_t limit_ms)
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
void stk__hand_over(struct stk_node *n)
{
	if (n->rtc && n->dev_waiter == STK_W_NONE && n->sleepers)
		pthread_cond_broadcast(n->sleepers->cond);
}

/* Poll the device for frames for up to us microseconds (core lock not held). */
static bool spin(struct nif_dev *dev, unsigned us)
{
	if (!us || !dev->ops->ready)
		return false;
	uint64_t end = stk__now_ns() + (uint64_t)us * 1000u;
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
		} while (stk__now_ns() < end);
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
	} while (stk__now_ns() < end);
	return false;
}

/* One round of an application thread driving the stack for s (NULL: for an epoll set,
 * uls_poll_drive) (core lock held, the device free): wait on the device until frames, a
 * wake-up, lwIP's next timer or deadline (ns, 0: none), then take the frames and run the
 * timers. */
void stk__drive(struct stk_node *n, struct stk_sock *s, uint64_t deadline)
{
	int64_t limit = -1;

	if (deadline) {
		uint64_t now = stk__now_ns();
		limit = now >= deadline ? 0 : (int64_t)((deadline - now + 999999u) / 1000000u);
	}
	int timeout = stk__timer_timeout(limit);
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
	n->drive_rounds++;
	stk__count(STK_CNT_RTC_ROUNDS);
	if (hit)
		stk__count(STK_CNT_RTC_SPIN_HITS);
	if (n->running)
		stk__round_after_wait(n, wrc);
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
		deadline = stk__now_ns() + (uint64_t)timeout->tv_sec * 1000000000u +
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
	stk__tx_batch_left = 0;
	stk__leave();
	struct stk_sleeper me = { .s = s, .cond = &s->cond }, **tail = &n->sleepers;
	while (*tail)
		tail = &(*tail)->next;
	*tail = &me;
	unsigned gen = s->gen;
	for (;;) {
		if (s->gen != gen)
			break;
		if (deadline && stk__now_ns() >= deadline) {
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
			stk__drive(n, s, deadline);
			continue;
		}
		if (n->rtc && n->running && n->dev_waiter == STK_W_STACK && !n->want_drive) {
			n->want_drive = true;  /* the stack thread hands the device over */
			stk__count(STK_CNT_RTC_HANDOVERS);
			n->dev->ops->wake(n->dev);
		}
		if (stk__cond_wait_until(&s->cond, deadline) == ETIMEDOUT && s->gen == gen) {
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
	stk__hand_over(n);
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
			deadline = stk__now_ns() + (uint64_t)t->tv_sec * 1000000000u +
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
	uint64_t deadline = timeout_ms < 0 ? 0 : stk__now_ns() + (uint64_t)timeout_ms * 1000000u;
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
	stk__tx_batch_left = 0;  /* what the caller queued leaves before it sleeps */
	stk__leave();
	cond_init(&cond);
	struct stk_sleeper me = { .cond = &cond }, **tail = &n->sleepers;
	while (*tail)
		tail = &(*tail)->next;
	*tail = &me;
	sig_noted = sig_intr = 0;
	for (int tries = 0; tries < 3; tries++) {
		if (deadline && stk__now_ns() >= deadline) {
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
			stk__drive(n, NULL, deadline);
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
		stk__cond_wait_until(&cond, stk__now_ns() + 2000000u);
	}
	for (struct stk_sleeper **p = &n->sleepers; *p; p = &(*p)->next) {
		if (*p == &me) {
			*p = me.next;
			break;
		}
	}
	stk__hand_over(n);
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
		if (stk__take_frames(n) > 2)
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

