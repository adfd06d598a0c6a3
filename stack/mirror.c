/* Readiness mirrors: a kernel descriptor whose poll state is the socket's.
 *
 * A user-level socket must be a real descriptor that poll, select and epoll can watch
 * next to pipes and timerfds, nested epoll sets included, with level and edge triggering
 * done by the kernel. An eventfd cannot say "neither readable nor writable", so each
 * mirrored socket is an AF_UNIX stream pair: the program holds end A (the socket's
 * descriptor number), the library holds a second reference to A (priv) and the other end B
 * (peer). priv and B are not descriptors: they sit in an io_uring fixed-file table
 * (fixedfd.c), so a socket costs the program one descriptor, as a kernel socket does
 * (issue 18). Where io_uring is refused (seccomp), they are descriptors (privfd.c), three
 * per socket.
 *
 *   readable   one token byte sits in A's receive queue (written through B);
 *   writable   A's send queue is empty; filling it (through priv, with a small SO_SNDBUF)
 *              makes A unwritable until the library reads B empty again;
 *   RDHUP      B shut down for writing (the peer's FIN);
 *   HUP        B shut down both ways (the connection is over);
 *   ERR        B closed with bytes unread, which sets ECONNRESET on A (reset, refused).
 *
 * Every change of a socket's state reaches stk__mirror_sync() (from the socket's signal
 * and when a call leaves the socket), under the core lock; system calls happen only on
 * transitions. A blocking call of the shim drives the stack (uls_socket_drive, drive.c);
 * when it cannot (another thread drives, ULS_RTC=0) it waits in the kernel on the mirror
 * (uls_socket_wait), so that signals interrupt it exactly as they interrupt a kernel socket
 * call, SA_RESTART and SO_RCVTIMEO/SO_SNDTIMEO included.
 */
#include "sock.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lwip/tcp.h"
#include "netif/sys.h"

struct stk_mirror {
	int priv, peer;  /* fixed-file handles (fixed), else the library's descriptors */
	bool fixed;
	bool token;   /* a byte waits in A: readable */
	bool filled;  /* A's send queue is full: not writable */
	bool eof;     /* B shut down for writing */
	bool hup;     /* B shut down both ways */
	bool gone;    /* B closed: nothing more to say */
	bool parked;  /* this process closed A: B only watches the other holders */
	int claim;    /* the reply socket of a holder of A that claimed it (handoff.c), or -1 */
};

/* What B may receive besides the bytes that fill A: a holder's claim, 'C' with the
 * claimer's reply socket attached (handoff.c). */
#define CLAIM_BYTE 'C'


struct readiness {
	bool rd, wr, eof, hup, err;
};

/* What the socket would report to poll(): the same cases as Linux's tcp_poll/udp_poll. */
static struct readiness want(const struct stk_sock *s)
{
	struct readiness r = { 0 };

	if (s->type == SOCK_DGRAM) {
		r.rd = s->rxq.bytes > 0 || s->err;  /* a pending ICMP error (dgram.c) */
		r.wr = true;
		return r;
	}
	switch (s->state) {
	case STK_S_NEW:
		r.wr = true;  /* Linux: an unconnected TCP socket polls writable */
		break;
	case STK_S_LISTEN:
		r.rd = s->acq_count > 0 || s->err;
		break;
	case STK_S_CONNECTING:
		break;
	case STK_S_CONNECTED:
		r.eof = s->rx_eof;
		r.rd = s->rxq.bytes > 0 || s->rx_eof || s->rd_shut || s->err;
		r.wr = s->wr_shut || !s->tcp || stk__stream_has_room(s->tcp, s->opts.snd_buf_cap);
		r.hup = s->rx_eof && s->wr_shut;
		break;
	case STK_S_DEAD:
		r.rd = r.wr = r.eof = r.hup = true;
		r.err = s->err != 0;
		break;
	}
	return r;
}

/* Would poll() report events (POLLIN or POLLOUT) on the socket, or an error or hang-up
 * that ends a wait for them? (Core lock held.) */
bool stk__sock_ready(const struct stk_sock *s, int events)
{
	struct readiness r = want(s);

	if (r.err || r.hup)
		return true;
	return events == POLLIN ? r.rd : r.wr;
}

static void count_fail(void)
{
	stk__count(STK_CNT_MIRROR_FAIL);
}

/* The mirror's system calls, on fixed files or descriptors: results or -errno. */
static ssize_t m_send(const struct stk_mirror *m, int h, const void *buf, size_t len, int flags)
{
	if (m->fixed)
		return stk__ffd_send(h, buf, len, flags);
	ssize_t n = nif_sys.send(h, buf, len, flags);
	return n < 0 ? -errno : n;
}

static ssize_t m_recv(const struct stk_mirror *m, int h, void *buf, size_t len, int flags)
{
	if (m->fixed)
		return stk__ffd_recv(h, buf, len, flags);
	ssize_t n = nif_sys.recv(h, buf, len, flags);
	return n < 0 ? -errno : n;
}

static ssize_t m_recvmsg(const struct stk_mirror *m, int h, struct msghdr *mh, int flags)
{
	if (m->fixed)
		return stk__ffd_recvmsg(h, mh, flags);
	ssize_t n = nif_sys.recvmsg(h, mh, flags);
	return n < 0 ? -errno : n;
}

static void m_close(const struct stk_mirror *m, int h)
{
	if (m->fixed)
		stk__ffd_release(h);
	else
		stk__fd_close(h);
}

/* A descriptor for h for the length of a call io_uring has no inline form for
 * (fixedfd.c); m_put() gives it back. */
static int m_get(const struct stk_mirror *m, int h)
{
	return m->fixed ? stk__ffd_install(h, true) : h;
}

static void m_put(const struct stk_mirror *m, int fd)
{
	if (m->fixed && fd >= 0)
		stk__fd_close(fd);
}

static int m_shutdown(const struct stk_mirror *m, int h, int how)
{
	int fd = m_get(m, h), rc;

	if (fd < 0)
		return fd;
	rc = nif_sys.shutdown(fd, how) < 0 ? -errno : 0;
	m_put(m, fd);
	return rc;
}

static void put_token(struct stk_mirror *m)
{
	char c = 0;

	if (m_send(m, m->peer, &c, 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1) {
		m->token = true;
		stk__count(STK_CNT_MIRROR_TOKENS);
	} else
		count_fail();
}

static void take_token(struct stk_mirror *m)
{
	char c;

	ssize_t n = m_recv(m, m->priv, &c, 1, MSG_DONTWAIT);

	if (n == 1 || n == -EAGAIN)
		m->token = false;
	else
		count_fail();
}

static void fill(struct stk_mirror *m)
{
	static const char junk[4096];

	for (int i = 0; i < 64; i++) {
		ssize_t n = m_send(m, m->priv, junk, sizeof(junk), MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			if (n != -EAGAIN)
				count_fail();
			break;
		}
	}
	m->filled = true;
}

/* Has the claimer whose reply socket this is stopped waiting? */
static bool claim_gone(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };

	return nif_sys.poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR));
}

/* The descriptors a claim carried: the first live claimer's reply socket is kept, any
 * other closed (that claimer reads end-of-file: not given). */
static void take_claim(struct stk_mirror *m, struct msghdr *mh)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (m->claim >= 0 && claim_gone(m->claim)) {
				stk__fd_close(m->claim);
				m->claim = -1;
			}
			if (m->claim < 0)
				m->claim = stk__fd_hide(fd);
			else
				nif_sys.close(fd);
		}
	}
}

/* Empty B. Returns 0 when B's end of the pair reached end-of-file (no holder of A is
 * left), else 1. */
static int drain(struct stk_mirror *m)
{
	char buf[4096], cbuf[CMSG_SPACE(sizeof(int) * 4)];
	ssize_t n;

	for (;;) {
		struct iovec iov = { buf, sizeof(buf) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
		n = m_recvmsg(m, m->peer, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n <= 0)
			break;
		if (mh.msg_controllen)
			take_claim(m, &mh);
	}
	m->filled = false;
	return n == 0 ? 0 : 1;
}

/* HUP: B shut down both ways. Not closed: a thread of the program may be sending its
 * one-byte probe into A (uls_socket_wait) at this moment, and B closed with that byte
 * unread would set ECONNRESET on A, POLLERR for a clean close; after the shutdown such a
 * send fails with EPIPE instead. On a fixed file the shutdown costs an install, the call
 * and a close (fixedfd.c), once per connection. */
static void hang_up(struct stk_mirror *m)
{
	if (m->filled)
		drain(m);
	if (m_shutdown(m, m->peer, SHUT_RDWR) < 0)
		count_fail();
	m->hup = m->eof = true;
}

void stk__mirror_sync(struct stk_sock *s)
{
	struct stk_mirror *m = s->mirror;

	if (!m || m->gone || m->parked)
		return;
	struct readiness r = want(s);

	if (r.err && m->hup) {
		m->gone = true;  /* A shows HUP already, which ends every wait; B can say no more */
		return;
	}
	if (r.err) {
		/* Closing B with bytes it never read sets ECONNRESET on A: POLLERR, and with
		 * the pair gone, POLLHUP, POLLIN and POLLOUT, which is what a reset TCP socket
		 * reports. Nothing can follow a reset, so B is not needed any more. */
		char c = 0;
		int roomy = 1 << 16;
		/* A must already be writable when the close wakes its pollers (a poll that
		 * sees ERR and HUP returns at once): empty B, give A room, and leave only
		 * the one byte that makes the kernel set the error. */
		drain(m);
		int fd = m_get(m, m->priv);
		if (fd < 0 ||
		    nif_sys.setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &roomy, sizeof(roomy)) < 0)
			count_fail();
		m_put(m, fd);
		if (m_send(m, m->priv, &c, 1, MSG_DONTWAIT | MSG_NOSIGNAL) != 1)
			count_fail();
		m_close(m, m->peer);
		m->peer = -1;
		m->gone = true;
		return;
	}
	if (!m->eof && !m->hup && r.rd != m->token) {
		if (!r.rd)
			take_token(m);
		else if (s->lazy && !s->armed)
			/* Issue 14: only user-level epoll sets watch it, and they ask the
			 * socket's state; the token waits until someone waits in the kernel
			 * (uls_socket_watch arms it). */
			stk__count(STK_CNT_MIRROR_TOKENS_SKIPPED);
		else
			put_token(m);
	}
	if (r.wr == m->filled) {
		if (r.wr)
			drain(m);
		else
			fill(m);
	}
	if (r.hup && !m->hup) {
		hang_up(m);
	} else if (r.eof && !m->eof) {
		if (m_shutdown(m, m->peer, SHUT_WR) < 0)
			count_fail();
		m->eof = true;
	}
}

/* A blocked waiter must see the socket go away: shut the pair down, close it when the
 * last user leaves (stk__mirror_free). */
void stk__mirror_hangup(struct stk_sock *s)
{
	struct stk_mirror *m = s->mirror;

	if (!m || m->gone || m->hup)
		return;
	hang_up(m);
}

void stk__mirror_free(struct stk_sock *s)
{
	struct stk_mirror *m = s->mirror;

	if (!m)
		return;
	if (m->fixed) {
		stk__ffd_release_pair(m->priv, m->peer);
	} else {
		stk__fd_close(m->priv);
		stk__fd_close(m->peer);
	}
	stk__fd_close(m->claim);
	free(m);
	s->mirror = NULL;
}

/* The application closed the socket, but other processes may still hold A: give up this
 * process's hold on A (its token, its fill, priv) and keep B to watch them. -1 if the
 * mirror cannot tell any more (B already hung up). */
int stk__mirror_park(struct stk_sock *s)
{
	struct stk_mirror *m = s->mirror;

	if (!m || m->gone || m->hup)
		return -1;
	if (m->token)
		take_token(m);
	drain(m);
	m_close(m, m->priv);
	m->priv = -1;
	m->parked = true;
	return 0;
}

enum stk_mirror_watch stk__mirror_watch(struct stk_sock *s)
{
	struct stk_mirror *m = s->mirror;
	char c;

	if (!m || m->peer < 0)
		return STK_MIRROR_ALONE;
	/* A's last holder gone: B reads end-of-file, or ECONNRESET if that holder left the
	 * token unread. Bytes first: fill and claims, which drain() takes. */
	ssize_t n = m_recv(m, m->peer, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	int open = n > 0 ? drain(m) : n == 0 ? 0 : n == -EAGAIN ? 1 : n == -EBADF ? 1 : 0;
	if (m->claim >= 0 && claim_gone(m->claim)) {
		stk__fd_close(m->claim);  /* the claimer stopped waiting; it may claim again */
		m->claim = -1;
	}
	if (m->claim >= 0)
		return STK_MIRROR_CLAIMED;
	return open ? STK_MIRROR_SHARED : STK_MIRROR_ALONE;
}

/* Answer the claim on the claimer's reply socket: 'H' with the state's descriptor, or
 * 'N' (state_fd < 0). */
int stk__mirror_give(struct stk_sock *s, int state_fd)
{
	struct stk_mirror *m = s->mirror;
	char tag = state_fd >= 0 ? 'H' : 'N', cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &tag, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (!m || m->claim < 0)
		return -1;
	if (state_fd >= 0) {
		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &state_fd, sizeof(int));
	}
	int rc = nif_sys.sendmsg(m->claim, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) == 1 ? 0 : -1;
	stk__fd_close(m->claim);
	m->claim = -1;
	return rc;
}

/* A new mirror; its end A is returned as the program's descriptor (*afd), close-on-exec
 * if cloexec. */
static int mirror_new(struct stk_sock *s, bool cloexec, int *afd)
{
	int sv[2], sndbuf = 1;
	struct stk_mirror *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		int rc = -errno;
		free(m);
		return rc;
	}
	/* The smallest send buffer: filling A costs a system call or two. */
	nif_sys.setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	m->claim = -1;
	if (stk__ffd_hold_pair(sv[0], sv[1], &m->priv, &m->peer) == 0) {
		/* The kernel's socket() would have returned the lowest free number: sv[0]. */
		m->fixed = true;
		nif_sys.close(sv[1]);
		if (!cloexec)
			nif_sys.fcntl(sv[0], F_SETFD, 0);
		*afd = sv[0];
	} else {
		m->peer = stk__fd_hide(sv[1]);
		m->priv = stk__fd_hide(sv[0]);
		*afd = nif_sys.fcntl(m->priv, cloexec ? F_DUPFD_CLOEXEC : F_DUPFD, 0);
		if (*afd < 0)
			*afd = -errno;
	}
	s->mirror = m;
	stk__mirror_sync(s);
	return 0;
}

int uls_socket_fd(int sd, int flags)
{
	int rc, fd = -EBADF;

	if (flags & ~SOCK_CLOEXEC)
		return -EINVAL;
	stk__lock();
	struct stk_sock *s = stk__sock_enter(sd);
	if (!s) {
		stk__unlock();
		return -EBADF;
	}
	bool cloexec = flags & SOCK_CLOEXEC;
	if (!s->mirror) {
		rc = mirror_new(s, cloexec, &fd);
	} else if (s->mirror->priv < 0) {
		rc = -EBADF;
	} else if (s->mirror->fixed) {
		rc = fd = stk__ffd_install(s->mirror->priv, cloexec);
	} else {
		fd = nif_sys.fcntl(s->mirror->priv, cloexec ? F_DUPFD_CLOEXEC : F_DUPFD, 0);
		rc = fd < 0 ? -errno : 0;
	}
	stk__sock_leave(s);
	stk__unlock();
	return rc < 0 ? rc : fd;
}

int uls_socket_wait(int sd, int events)
{
	sigset_t all, old;
	int rc = 0;
	char c = 0;

	if (events != POLLIN && events != POLLOUT)
		return -EINVAL;
	/* The core lock is held only with signals blocked: a handler that uses sockets must
	 * never find it held by the thread it interrupted. The wait itself is open to them. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	stk__lock();
	struct stk_sock *s = stk__sock_enter(sd);
	if (!s || !s->mirror || s->closed) {
		if (s)
			stk__sock_leave(s);
		stk__unlock();
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		return -EBADF;
	}
	/* A descriptor for A for the wait's length (fixedfd.c): the program may have closed
	 * or moved its own number meanwhile. */
	bool temp = s->mirror->fixed;
	int priv = m_get(s->mirror, s->mirror->priv);
	/* A lazy mirror (issue 14) must be exact while this thread waits on it. */
	s->armed++;
	stk__mirror_sync(s);
	stk__unlock();
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	ssize_t n;
	if (priv < 0) {
		/* No descriptor to spare (EMFILE): a short nap, then the caller looks again. */
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
		n = 0;
	} else {
		/* Kernel calls on the mirror, so that the kernel decides between EINTR and a
		 * restart (signal(7): socket calls restart under SA_RESTART unless a timeout
		 * is set) and applies the timeouts the program set on the descriptor. */
		n = events == POLLIN ? nif_sys.recv(priv, &c, 1, MSG_PEEK) :
				       nif_sys.send(priv, &c, 1, MSG_NOSIGNAL);
		if (n < 0)
			rc = errno == EAGAIN ? -EAGAIN : errno == EINTR ? -EINTR : 0;
	}
	pthread_sigmask(SIG_BLOCK, &all, &old);
	stk__lock();
	if (temp && priv >= 0)
		stk__fd_close(priv);
	s->armed--;
	if (events == POLLOUT && n == 1 && s->mirror && !s->mirror->gone) {
		/* The byte that proved A writable sits in B: take it out, then let the
		 * socket's state decide again. */
		drain(s->mirror);
		stk__mirror_sync(s);
	}
	stk__sock_leave(s);
	stk__unlock();
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

/* Issue 14: the POSIX shim's user-level epoll. */
int uls_socket_watch(int sd, int lazy, int armed)
{
	stk__lock();
	struct stk_sock *s = stk__sock_enter(sd);
	if (!s) {
		stk__unlock();
		return -EBADF;
	}
	s->lazy = lazy < 0 && s->lazy < (unsigned)-lazy ? 0 : s->lazy + (unsigned)lazy;
	s->armed = armed < 0 && s->armed < (unsigned)-armed ? 0 : s->armed + (unsigned)armed;
	stk__sock_leave(s);  /* brings the mirror in line: a token now if armed and readable */
	stk__unlock();
	return 0;
}

/* What poll() would report on s, as poll bits (core lock held). Not writable: a later
 * write-space event is an event again (nospace), as Linux's tcp_poll sets SOCK_NOSPACE
 * for tcp_check_space. */
short stk__sock_revents(struct stk_sock *s)
{
	struct readiness r = want(s);

	if (!r.wr)
		s->nospace = true;
	return (short)((r.rd ? POLLIN : 0) | (r.wr ? POLLOUT : 0) | (r.eof ? POLLRDHUP : 0) |
		       (r.hup ? POLLHUP : 0) | (r.err ? POLLERR : 0));
}
