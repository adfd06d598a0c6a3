/* The process's lease with ulsd: the control connection that lives as long as the process.
 *
 * uls_attach() (or the first uls_socket() when ULS_CTL is set) connects to ulsd's control
 * socket, says HELLO and receives the node's address, MAC, MTU, the node-wide RFC 6528
 * secret, and three file descriptors: the ring pair (a memfd) and the two eventfds. The
 * stack then runs on the rings exactly as it runs on a TAP.
 *
 * Ports and endpoints are host-wide, so the socket layer asks ulsd before it binds, listens
 * or connects (stk__lease_call, a synchronous round trip, made with the core lock released:
 * endpoints.c) and tells it when a connection's state is gone (one-way notifications). No
 * data ever passes through here.
 *
 * A notification is never dropped for want of room: the control socket holds only what
 * the process's send buffer does (about 280 records with the default 208 KiB), and
 * closing thousands of connections at once sends thousands of RELEASEs. What does not
 * fit waits in a queue, in order, bounded only by memory; the queue goes out before any
 * later message (a notification or a request), and an lwIP timer retries it meanwhile.
 * ulsd's view of the process's endpoints (its filter rules, the direct path's steering
 * maps) is exact as long as the lease lives: `ctl_notify_queued` counts notifications that
 * had to wait, `ctl_notify_lost` those that never went (only when the lease broke).
 */
#include "internal.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "lwip/timeouts.h"
#include "netif/ctl/ctl.h"
#include "netif/qring.h"
#include "netif/ringdev.h"
#include "netif/sys.h"

#define CALL_TIMEOUT_S 5
#define RETRY_MS 1          /* queued notifications: the next try (an lwIP timer) */

/* A notification that did not fit into the control socket. */
struct pending {
	struct pending *next;
	struct ctl_msg m;
};

struct lease {
	int fd;
	int ring_fds[3];       /* memfd and eventfds, the ring device's */
	uint32_t seq;          /* under send_lock */
	uint32_t id;
	bool direct;           /* the direct data path: ring_fds are its two io_urings */
	char path[108];        /* the control socket, for a fork child's own lease */
	pthread_mutex_t call_lock;  /* one request in flight at a time (held while waiting) */
	/* Sending and the queue. Held only for non-blocking work: the core lock's holders
	 * (notifications) take it, so it is never held while waiting for ulsd. */
	pthread_mutex_t send_lock;
	struct pending *head, **tail;
	bool retry_armed;      /* the lwIP timer (core lock) */
};

static struct lease lease = { .fd = -1, .ring_fds = { -1, -1, -1 },
			      .call_lock = PTHREAD_MUTEX_INITIALIZER,
			      .send_lock = PTHREAD_MUTEX_INITIALIZER,
			      .tail = &lease.head };

/* Counted from any thread, with or without the core lock (uls_counters reads them). */
static uint64_t cnt_queued, cnt_lost;

static void count(uint64_t *c)
{
	__atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
}

void stk__lease_counters(uint64_t *queued, uint64_t *lost)
{
	*queued = __atomic_load_n(&cnt_queued, __ATOMIC_RELAXED);
	*lost = __atomic_load_n(&cnt_lost, __ATOMIC_RELAXED);
}

bool stk__leased(void)
{
	return lease.fd >= 0;
}

int stk__lease_fd(void)
{
	return lease.fd;
}

/* One reply with at most nfds descriptors: exactly nfds unless got_out says how many came. */
static int recv_reply(int fd, struct ctl_msg *m, int *fds, size_t nfds, size_t *got_out,
		      int flags)
{
	uint8_t buf[CTL_MSG_SIZE + 1];
	char cbuf[CMSG_SPACE(sizeof(int) * CTL_MAX_FDS)];
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	ssize_t n;

	do
		n = nif_sys.recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | flags);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN ? -ETIMEDOUT : -errno;
	if (n == 0)
		return -ECONNRESET;  /* ulsd went away */
	size_t got = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		int *p = (int *)CMSG_DATA(c);
		for (size_t i = 0; i < k; i++) {
			if (got < nfds)
				fds[got++] = p[i];
			else
				nif_sys.close(p[i]);  /* more than we asked for: do not leak them */
		}
	}
	if ((got_out ? got > nfds : got != nfds) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    ctl_check(buf, n, m) != 0) {
		for (size_t i = 0; i < got; i++)
			nif_sys.close(fds[i]);
		return -EPROTO;
	}
	if (got_out)
		*got_out = got;
	return 0;
}

/* One record, without blocking (send_lock held): 0, -EAGAIN (no room now) or -errno. */
static int send_one(const struct ctl_msg *m)
{
	ssize_t n;

	do
		n = nif_sys.send(lease.fd, m, sizeof(*m), MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)sizeof(*m))
		return 0;
	if (n >= 0)
		return -EPROTO;  /* SOCK_SEQPACKET sends records whole */
	return errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS ? -EAGAIN : -errno;
}

/* The lease broke (send_lock held): what waits can never go. */
static void drop_queue(int err)
{
	unsigned n = 0;

	while (lease.head) {
		struct pending *p = lease.head;
		lease.head = p->next;
		free(p);
		count(&cnt_lost);
		n++;
	}
	lease.tail = &lease.head;
	if (n)
		stk__log(1, "lease: %u notifications lost: %s", n, strerror(-err));
}

/* Send what waits, oldest first, without blocking (send_lock held): 0 when the queue is
 * empty, -EAGAIN when the socket is full again, or the error that broke the lease. */
static int flush_locked(void)
{
	while (lease.head) {
		struct pending *p = lease.head;
		int rc = send_one(&p->m);
		if (rc == -EAGAIN)
			return rc;
		if (rc < 0) {
			drop_queue(rc);
			return rc;
		}
		lease.head = p->next;
		if (!lease.head)
			lease.tail = &lease.head;
		free(p);
	}
	return 0;
}

/* Wait (neither lock held) until the control socket takes a record again, or deadline. */
static int wait_room(const struct timespec *deadline)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	long ms = (deadline->tv_sec - now.tv_sec) * 1000 + (deadline->tv_nsec - now.tv_nsec) / 1000000;
	if (ms <= 0)
		return -ETIMEDOUT;
	struct pollfd pfd = { .fd = lease.fd, .events = POLLOUT };
	int rc = nif_sys.poll(&pfd, 1, (int)ms);
	if (rc < 0 && errno != EINTR)
		return -errno;
	if (rc > 0 && (pfd.revents & (POLLHUP | POLLERR)))
		return -ECONNRESET;
	return 0;
}

/* Send a request after everything queued before it, waiting for room if need be (core
 * lock not held, call_lock held). */
static int send_request(struct ctl_msg *m, const struct timespec *deadline)
{
	int rc;

	for (;;) {
		pthread_mutex_lock(&lease.send_lock);
		rc = flush_locked();
		if (rc == 0) {
			m->seq = ++lease.seq;
			rc = send_one(m);
		}
		pthread_mutex_unlock(&lease.send_lock);
		if (rc != -EAGAIN)
			return rc;
		rc = wait_room(deadline);
		if (rc < 0)
			return rc;
	}
}

/* Send what waits, waiting for room until deadline (core lock not held, call_lock held). */
static void drain(const struct timespec *deadline)
{
	for (;;) {
		pthread_mutex_lock(&lease.send_lock);
		int rc = flush_locked();
		pthread_mutex_unlock(&lease.send_lock);
		if (rc != -EAGAIN || wait_room(deadline) < 0)
			return;  /* (a timer or the next message sends what is left) */
	}
}

/* A notification from a call (call_lock held, core lock not): sent, or queued in order
 * (then undo_queued: the call sends it before it returns, as no timer was armed). */
static bool undo_queued;

static void notify_unlocked(struct ctl_msg *m)
{
	pthread_mutex_lock(&lease.send_lock);
	m->seq = ++lease.seq;
	int rc = flush_locked();
	if (rc == 0)
		rc = send_one(m);
	struct pending *p = rc == -EAGAIN ? malloc(sizeof(*p)) : NULL;
	if (p) {
		p->next = NULL;
		p->m = *m;
		*lease.tail = p;
		lease.tail = &p->next;
		count(&cnt_queued);
		undo_queued = true;
	} else if (rc < 0) {
		count(&cnt_lost);
	}
	pthread_mutex_unlock(&lease.send_lock);
}

/* Requests whose answer did not come in time (call_lock): if ulsd granted them after all,
 * the grant goes back when the answer comes (read before and during later calls), since
 * the caller already failed with ETIMEDOUT. */
#define LATE_MAX 8

static struct ctl_msg late[LATE_MAX];
static unsigned late_next;

static void remember_late(const struct ctl_msg *m)
{
	if (m->type == CTL_BIND || m->type == CTL_CONNECT)
		late[late_next++ % LATE_MAX] = *m;
}

static void late_reply(const struct ctl_msg *r)
{
	for (unsigned i = 0; i < LATE_MAX; i++) {
		struct ctl_msg *l = &late[i];
		if (l->type == 0 || l->seq != r->seq)
			continue;
		uint16_t type = l->type;
		l->type = 0;
		if (r->status < 0 || r->type != type)
			return;  /* refused: nothing to give back */
		struct ctl_msg u;
		ctl_init(&u, type == CTL_BIND ? CTL_UNBIND : CTL_RELEASE, 0);
		u.proto = type == CTL_BIND ? l->proto : IPPROTO_TCP;
		u.lport = r->lport;
		u.family = l->family;
		u.flags = l->flags & CTL_F_V6ONLY;
		memcpy(u.rip, l->rip, sizeof(u.rip));
		u.rport = l->rport;
		stk__log(1, "lease: request %u answered after its timeout: given back", type);
		notify_unlocked(&u);
		return;
	}
}

/* Send m and wait for its reply (same seq). Returns the reply's status or -errno.
 *
 * Never with the core lock held: ulsd may take its time (up to CALL_TIMEOUT_S), and
 * meanwhile every connection of the process must go on (ACKs, timers, retransmissions).
 * Checked on every call, like lwIP's LWIP_ASSERT_CORE_LOCKED the other way round.
 * The one exception is stk__lease_call_locked(). */
static const int sync_signals[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS };

static int call(struct ctl_msg *m)
{
	struct timespec deadline;
	struct ctl_msg r;
	int rc, cancel;

	/* A thread cancelled in the middle would leave a reply unread and the lock taken: the
	 * call is bounded (CALL_TIMEOUT_S), so it finishes first and the cancellation acts at
	 * the caller's next cancellation point. A signal's handler runs after it too (when
	 * the mask is restored, with no lock of the lease or the stack held), so that a
	 * handler that uses sockets, even one that connects, never meets this call halfway.
	 * The signals a fault raises stay deliverable. */
	sigset_t all, old;
	sigfillset(&all);
	for (size_t i = 0; i < sizeof(sync_signals) / sizeof(sync_signals[0]); i++)
		sigdelset(&all, sync_signals[i]);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	pthread_mutex_lock(&lease.call_lock);
	if (lease.fd < 0) {
		rc = -ENOTCONN;  /* (the node stopped while this thread waited for the lock) */
		goto out;
	}
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += CALL_TIMEOUT_S;
	/* Late answers to calls that timed out, before this request could meet them. */
	while (recv_reply(lease.fd, &r, NULL, 0, NULL, MSG_DONTWAIT) == 0)
		late_reply(&r);
	rc = send_request(m, &deadline);
	if (rc < 0)
		goto out;
	for (;;) {
		rc = recv_reply(lease.fd, &r, NULL, 0, NULL, 0);
		if (rc < 0 || r.seq == m->seq)
			break;
		late_reply(&r);  /* the answer to a call that timed out */
	}
	if (rc == 0) {
		rc = r.status;
		*m = r;
	} else if (rc == -ETIMEDOUT) {
		remember_late(m);
	}
	if (undo_queued) {
		undo_queued = false;
		drain(&deadline);  /* what late_reply queued */
	}
out:
	pthread_mutex_unlock(&lease.call_lock);
	pthread_setcancelstate(cancel, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

int stk__lease_call(struct ctl_msg *m)
{
	if (stk__core_lock_mine()) {
		stk__log(0, "lease: request %u to ulsd with the core lock held", m->type);
		abort();
	}
	return call(m);
}

/* Deviation: "no request under the core lock" does not hold for HANDOFF and CLAIM
 * (handoff.c): the connection's state was packed (or is rebuilt) under the lock, and no
 * segment of it may be processed between that and ulsd's answer, or the packed state
 * would be stale (HANDOFF) or lwIP would reset the tuple that now comes here (CLAIM).
 * They are rare (fork and exec of a server), never per connection. */
int stk__lease_call_locked(struct ctl_msg *m)
{
	int rc = call(m);

	stk__now_forget();  /* a round trip to ulsd: the hold's clock reading is old */
	return rc;
}

static void retry(void *arg);

/* The queue waits (core lock held): try again soon. */
static void arm_retry(void)
{
	if (!lease.retry_armed && stk__node.up) {
		lease.retry_armed = true;
		sys_timeout(RETRY_MS, retry, NULL);
	}
}

static void retry(void *arg)
{
	(void)arg;
	lease.retry_armed = false;
	if (lease.fd < 0)
		return;
	pthread_mutex_lock(&lease.send_lock);
	bool left = flush_locked() == -EAGAIN;
	pthread_mutex_unlock(&lease.send_lock);
	if (left)
		arm_retry();
}

/* One-way notification, called with the core lock held; it never blocks and is never
 * dropped while the lease lives (see the top of this file). Frames queued before it (a
 * verdict, a FIN, a RST) are published first: ulsd applies a RELEASE or UNBIND only after
 * draining what the ring held, so those frames still leave under the rules they were sent
 * under. */
void stk__lease_notify(struct ctl_msg *m)
{
	if (lease.fd < 0 || stk__node.lost)
		return;
	if (stk__node.dev)
		stk__node.dev->ops->tx_flush(stk__node.dev);
	pthread_mutex_lock(&lease.send_lock);
	m->seq = ++lease.seq;
	int rc = flush_locked();
	if (rc == 0)
		rc = send_one(m);
	if (rc == -EAGAIN) {
		struct pending *p = malloc(sizeof(*p));
		if (p) {
			p->next = NULL;
			p->m = *m;
			*lease.tail = p;
			lease.tail = &p->next;
			count(&cnt_queued);
		} else {
			count(&cnt_lost);
			stk__log(1, "lease: notification %u lost: no memory to queue it", m->type);
		}
	} else if (rc < 0) {
		count(&cnt_lost);
		stk__log(1, "lease: notification %u not sent: %s", m->type, strerror(-rc));
	}
	bool waiting = lease.head != NULL;
	pthread_mutex_unlock(&lease.send_lock);
	if (waiting)
		arm_retry();
}

void stk__isn_set_secret(const uint8_t secret[16]);

/* The connection table ulsstat reads (conntab.c): it comes with HELLO's reply
 * (CTL_HELLO_F_CONNTAB, take_conntab), else it is asked for right after HELLO on the fresh
 * lease (core lock held, no other thread uses the lease yet). A ulsd that has none to give
 * (an older one refuses the type) leaves the process without: its connections are then
 * missing from ulsstat, nothing else changes. */
static void take_conntab(int tfd)
{
	int rc = stk__conntab_map(tfd);

	if (rc < 0)
		stk__log(1, "lease: connection table refused: %s", strerror(-rc));
}

static void ask_conntab(int fd)
{
	struct ctl_msg m;
	int tfd = -1;
	size_t got = 0;

	ctl_init(&m, CTL_CONNTAB, ++lease.seq);
	if (nif_sys.send(fd, &m, sizeof(m), MSG_NOSIGNAL) != (ssize_t)sizeof(m))
		return;
	int rc = recv_reply(fd, &m, &tfd, 1, &got, 0);
	if (rc < 0 || m.seq != lease.seq || m.type != CTL_CONNTAB || m.status < 0 || got != 1) {
		if (got)
			nif_sys.close(tfd);
		stk__log(1, "lease: no connection table from ulsd (%d)", rc < 0 ? rc : m.status);
		return;
	}
	rc = stk__conntab_map(tfd);
	if (rc < 0)
		stk__log(1, "lease: connection table refused: %s", strerror(-rc));
}

/* The node's default IPv6 router (ulsd --gw6), asked for right after HELLO when its reply
 * says there is one (CTL_HELLO_F_ROUTER6; core lock held, the lease still the caller's
 * alone). 0 and the address, or -errno: the process then has no router, and off-link
 * IPv6 destinations are unreachable, as without --gw6. */
static int ask_router6(int fd, struct in6_addr *gw)
{
	struct ctl_msg m;
	size_t got = 0;
	int none = -1;

	ctl_init(&m, CTL_ROUTER6, ++lease.seq);
	if (nif_sys.send(fd, &m, sizeof(m), MSG_NOSIGNAL) != (ssize_t)sizeof(m))
		return -errno;
	int rc = recv_reply(fd, &m, &none, 1, &got, 0);
	if (got)
		nif_sys.close(none);
	if (rc < 0)
		return rc;
	/* A reply to another request is no answer, whatever its status says. */
	if (m.seq != lease.seq || m.type != CTL_ROUTER6)
		return -EPROTO;
	if (m.status < 0 || m.family != AF_INET6)
		return m.status < 0 ? m.status : -EPROTO;
	memcpy(gw->s6_addr, m.rip, 16);
	return 0;
}

/* The process offers the direct data path (two disabled io_urings, netif/qring.h) unless
 * ULS_DATAPATH=relay; ulsd decides. */
static bool offer_direct(void)
{
	const char *e = stk__getenv("ULS_DATAPATH");

	return !(e && !strcmp(e, "relay"));
}

int uls_attach(const char *ctl_path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct timeval tv = { CALL_TIMEOUT_S, 0 };
	struct ctl_msg m;
	struct nif_dev *dev;
	struct nif_qring_prep qp = { .made = false };
	int fds[CTL_MAX_FDS] = { -1, -1, -1, -1 }, fd, rc, wake = -1, tfd = -1;
	size_t got = 0;

	if (!ctl_path || !*ctl_path || strlen(ctl_path) >= sizeof(sun.sun_path))
		return -EINVAL;
	memcpy(sun.sun_path, ctl_path, strlen(ctl_path));
	stk__fork_init();
	stk__lock();
	if (stk__node.up) {
		stk__unlock();
		return -EALREADY;
	}
	fd = nif_sys.socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		goto fail;
	}
	if (nif_sys.connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
	    nif_sys.setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
		rc = -errno;
		goto fail_fd;
	}
	ctl_init(&m, CTL_HELLO, ++lease.seq);
	m.u.hello.ring_fd[0] = m.u.hello.ring_fd[1] = -1;
	m.u.hello.flags = CTL_HELLO_F_CONNTAB;  /* the table with the reply: one round trip less */
	bool coop = stk__rx_coop_wanted();
	if (offer_direct() && (coop ? nif_qring_prepare(&qp)
				    : nif_qring_prepare_interrupting(&qp)) == 0) {
		/* The library's own descriptors: high, and out of the program's reach. */
		for (int i = 0; i < 2; i++) {
			nif_qring_set_fd(&qp, i, stk__fd_hide(nif_qring_fd(&qp, i)));
			m.u.hello.ring_fd[i] = nif_qring_fd(&qp, i);
		}
		m.u.hello.flags |= CTL_HELLO_F_RINGS;
		/* The stack thread's wake-up, out of the program's descriptor range too; ulsd
		 * makes it the receive ring's file 1 (CTL_HELLO_F_WAKE), so that a wait on the
		 * device is one io_uring_enter (netif/qring.c). */
		wake = stk__fd_hide(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
		if (wake >= 0) {
			m.u.hello.wake_fd = wake;
			m.u.hello.flags |= CTL_HELLO_F_WAKE;
		}
		/* One multishot read for the frames, where the kernel has it (qp.mshot), unless
		 * ULS_RX_MULTISHOT=0 (stk__rx_mshot_wanted). It was off by default while it
		 * stayed with the thread that armed it as the driver changed (a frame woke two
		 * threads, docs/bench/mshot14); a thread about to wait now takes it over
		 * (netif/qring_rx.c nif__q_take_over_reads), and one frame is one task work
		 * with no read to re-arm: 1-byte round trips 2-3 us shorter (docs/benchmarks.md,
		 * "Stop 37"). An interrupting ring (ULS_RX_COOP=0) takes nothing over, so there
		 * it stays off unless asked for. */
		if (!stk__rx_mshot_wanted(coop))
			qp.mshot = false;
		if (qp.mshot)
			m.u.hello.flags |= CTL_HELLO_F_MSHOT;
		/* Reads that do not wait, beyond the few that do (netif/qring_rx.c):
		 * ULS_RX_NOWAIT=0 arms only reads that wait, for comparison. */
		if (!stk__rx_nowait_wanted())
			qp.nowait = false;
	}
	if (nif_sys.send(fd, &m, sizeof(m), MSG_NOSIGNAL) != (ssize_t)sizeof(m)) {
		rc = -errno;
		goto fail_fd;
	}
	rc = recv_reply(fd, &m, fds, CTL_MAX_FDS, &got, 0);
	if (rc < 0)
		goto fail_fd;
	bool direct = m.u.hello.datapath == CTL_DP_DIRECT && qp.made;
	size_t want = direct ? 0u : 3u;  /* the relay's; the table's comes last */
	bool with_tab = (m.u.hello.flags & CTL_HELLO_F_CONNTAB) != 0;
	if (m.type != CTL_HELLO || m.status < 0 || m.u.hello.mtu == 0 ||
	    got != want + with_tab) {
		rc = m.status < 0 ? m.status : -EPROTO;
		for (size_t i = 0; i < got; i++)
			nif_sys.close(fds[i]);
		goto fail_fd;
	}
	if (with_tab) {
		tfd = fds[want];
		fds[want] = -1;
	}
	fd = stk__fd_hide(fd);
	if (tfd >= 0)
		take_conntab(tfd);
	else
		ask_conntab(fd);
	struct in6_addr gw6;
	int gw6_rc = -ENOENT;
	if (m.family == AF_INET6 && (m.u.hello.flags & CTL_HELLO_F_ROUTER6)) {
		gw6_rc = ask_router6(fd, &gw6);
		if (gw6_rc < 0)
			stk__log(1, "lease: no IPv6 router from ulsd: %s", strerror(-gw6_rc));
	}
	enum nif_offload offload = !(m.u.hello.flags & CTL_HELLO_F_OFFLOAD) ? NIF_OFFLOAD_NONE :
				   (m.u.hello.flags & CTL_HELLO_F_CSUM_ONLY) ? NIF_OFFLOAD_CSUM :
				   NIF_OFFLOAD_FULL;
	if (!direct) {
		for (int i = 0; qp.made && i < 2; i++)
			stk__fd_unmark(nif_qring_fd(&qp, i));
		nif_qring_discard(&qp);  /* the relay: ulsd did not take them */
		if (wake >= 0)
			stk__fd_close(wake);
		wake = -1;
	}
	if (direct) {
		fds[0] = nif_qring_fd(&qp, 0);
		fds[1] = nif_qring_fd(&qp, 1);
		fds[2] = wake >= 0 ? wake : stk__fd_hide(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
		wake = -1;  /* fds[2] now */
		/* A ulsd that did not allow the multishot read (or predates it) restricted
		 * the ring to reads per slot. */
		if (!(m.u.hello.flags & CTL_HELLO_F_MSHOT))
			qp.mshot = false;
		rc = fds[2] < 0 ? -errno :
			nif_qring_open(&dev, &qp, m.u.hello.mtu, offload, fd, fds[2],
				       (m.u.hello.flags & CTL_HELLO_F_WAKE) != 0);
		if (rc < 0 && fds[2] >= 0)
			stk__fd_close(fds[2]);
	} else {
		for (int i = 0; i < 3; i++)
			fds[i] = stk__fd_hide(fds[i]);
		rc = nif_ringdev_open(&dev, m.u.hello.mtu, offload, fds[0], fds[1], fds[2], fd);
		if (rc < 0)
			for (int i = 0; i < 3; i++)
				nif_sys.close(fds[i]);
	}
	if (rc < 0)
		goto fail_fd;
	stk__isn_set_secret(m.u.hello.isn_secret);
	lease.fd = fd;
	memcpy(lease.ring_fds, fds, sizeof(lease.ring_fds));
	lease.direct = direct;
	stk__synshed_relayed(!direct || (m.u.hello.flags & CTL_HELLO_F_KSHED));
	snprintf(lease.path, sizeof(lease.path), "%s", ctl_path);
	lease.id = m.u.hello.lease_id;
	struct in_addr addr = { m.u.hello.addr }, gw = { m.u.hello.gateway };
	stk__node_name(m.u.hello.ifname, m.u.hello.ifindex);
	rc = stk__node_up(dev, addr, m.u.hello.prefix_len, gw, m.u.hello.mac);
	if (rc < 0) {
		stk__conntab_close();
		lease.fd = -1;
		goto fail_fd;
	}
	/* Control protocol 3: the node's IPv6 address, when it has one; the link-local one
	 * follows from the MAC (stk__node_ip6). With offloads, stack/tso.c gives TCP over
	 * IPv6 the same partial checksums and super-segments as IPv4's. */
	if (m.family == AF_INET6 && m.u.hello.prefix_len6) {
		struct in6_addr a6;
		memcpy(a6.s6_addr, m.rip, 16);
		if ((rc = stk__node_ip6(&a6, m.u.hello.prefix_len6)) < 0)
			stk__log(1, "lease: the node's IPv6 address: %s", strerror(-rc));
		else if (gw6_rc == 0 && (rc = stk__node_gw6(&gw6)) < 0)
			stk__log(1, "lease: the node's IPv6 router: %s", strerror(-rc));
		rc = 0;
	}
	stk__fork_init();
	stk__unlock();
	return 0;
fail_fd:
	if (wake >= 0)
		stk__fd_close(wake);
	stk__conntab_close();
	for (int i = 0; qp.made && i < 2; i++)
		stk__fd_unmark(nif_qring_fd(&qp, i));
	nif_qring_discard(&qp);
	stk__fd_close(fd);
fail:
	stk__unlock();
	return rc;
}

/* The ring device is about to close its descriptors itself. */
void stk__lease_unmark_rings(void)
{
	for (int i = 0; i < 3; i++) {
		stk__fd_unmark(lease.ring_fds[i]);
		lease.ring_fds[i] = -1;
	}
}

/* What still waits to be sent, thrown away (send_lock held): the lease ends, and ulsd
 * reclaims everything a lease held when it ends, so nothing is lost that matters. */
static void free_queue(void)
{
	while (lease.head) {
		struct pending *p = lease.head;
		lease.head = p->next;
		free(p);
	}
	lease.tail = &lease.head;
}

/* The node stopped (uls_node_stop): end the lease; ulsd reclaims what is left. In a fork
 * child (stk__lease_forget) the descriptor is only closed: the connection is the parent's,
 * and a shutdown() would end it for the parent too. */
static bool forgetting;

void stk__node_down_hook(void)
{
	sys_untimeout(retry, NULL);
	lease.retry_armed = false;
	if (!forgetting)
		stk__conntab_last();  /* a fork child's table is its parent's */
	stk__conntab_close();
	if (lease.fd >= 0 && forgetting) {
		stk__fd_close(lease.fd);
		lease.fd = -1;
	} else if (lease.fd >= 0) {
		pthread_mutex_lock(&lease.send_lock);
		flush_locked();  /* what fits, in case the process goes on without a lease */
		free_queue();
		pthread_mutex_unlock(&lease.send_lock);
		/* A thread may wait for a reply (without the core lock): wake it, and close the
		 * descriptor only after it let go, so that it never reads a reused number. */
		nif_sys.shutdown(lease.fd, SHUT_RDWR);
		pthread_mutex_lock(&lease.call_lock);
		stk__fd_close(lease.fd);
		lease.fd = -1;
		pthread_mutex_unlock(&lease.call_lock);
	}
	stk__node.lost = false;
}

/* In a fork child (fork.c): the lease and the rings are the parent's. Closing the
 * child's copies tells ulsd nothing; the parent still holds them. */
void stk__lease_forget(void)
{
	stk__lease_unmark_rings();
	if (stk__node.dev)
		stk__node.dev->ops->close(stk__node.dev);
	/* The parent's locks may have been held by its other threads at the fork, and what
	 * its queue holds is the parent's to send. */
	pthread_mutex_init(&lease.call_lock, NULL);
	pthread_mutex_init(&lease.send_lock, NULL);
	free_queue();
	memset(late, 0, sizeof(late));
	forgetting = true;
	stk__node_down_hook();
	forgetting = false;
}

/* A fork child's first use of the node: a lease of its own, at the parent's ulsd. */
int stk__lease_reattach(void)
{
	const char *ctl = stk__getenv("ULS_CTL");

	if (lease.path[0])
		ctl = lease.path;
	if (!ctl || !*ctl)
		return -ENETDOWN;
	return uls_attach(ctl);
}
