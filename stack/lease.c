/* The process's lease with ulsd: the control connection that lives as long as the process.
 *
 * uls_attach() (or the first uls_socket() when ULS_CTL is set) connects to ulsd's control
 * socket, says HELLO and receives the node's address, MAC, MTU, the node-wide RFC 6528
 * secret, and three file descriptors: the ring pair (a memfd) and the two eventfds. The
 * stack then runs on the rings exactly as it runs on a TAP.
 *
 * Ports and endpoints are host-wide, so the socket layer asks ulsd before it binds, listens
 * or connects (stk__lease_call, a synchronous round trip) and tells it when a connection's
 * state is gone (one-way messages). No data ever passes through here.
 */
#include "internal.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "netif/ctlproto.h"
#include "netif/qring.h"
#include "netif/ringdev.h"

#define CALL_TIMEOUT_S 5

struct lease {
	int fd;
	int ring_fds[3];       /* memfd and eventfds, the ring device's */
	uint32_t seq;
	uint32_t id;
	bool direct;           /* the direct data path: ring_fds are its two io_urings */
	char path[108];        /* the control socket, for a fork child's own lease */
	pthread_mutex_t lock;  /* one request in flight at a time */
};

static struct lease lease = { .fd = -1, .ring_fds = { -1, -1, -1 },
			      .lock = PTHREAD_MUTEX_INITIALIZER };

bool stk__leased(void)
{
	return lease.fd >= 0;
}

int stk__lease_fd(void)
{
	return lease.fd;
}

/* One reply with at most nfds descriptors: exactly nfds unless got_out says how many came. */
static int recv_reply(int fd, struct uls_ctl_msg *m, int *fds, size_t nfds, size_t *got_out)
{
	uint8_t buf[ULS_CTL_MSG_SIZE + 1];
	char cbuf[CMSG_SPACE(sizeof(int) * 3)];
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	ssize_t n;

	do
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
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
				close(p[i]);  /* more than we asked for: do not leak them */
		}
	}
	if ((got_out ? got > nfds : got != nfds) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    uls_ctl_check(buf, n, m) != 0) {
		for (size_t i = 0; i < got; i++)
			close(fds[i]);
		return -EPROTO;
	}
	if (got_out)
		*got_out = got;
	return 0;
}

/* Send m and wait for its reply (same seq). Returns the reply's status or -errno. */
int stk__lease_call(struct uls_ctl_msg *m)
{
	int rc;

	if (lease.fd < 0)
		return -ENOTCONN;
	pthread_mutex_lock(&lease.lock);
	m->seq = ++lease.seq;
	if (send(lease.fd, m, sizeof(*m), MSG_NOSIGNAL) != (ssize_t)sizeof(*m)) {
		rc = -errno;
		goto out;
	}
	struct uls_ctl_msg r;
	do
		rc = recv_reply(lease.fd, &r, NULL, 0, NULL);
	while (rc == 0 && r.seq != m->seq);  /* a stale reply of a timed-out call */
	if (rc == 0) {
		rc = r.status;
		*m = r;
	}
out:
	pthread_mutex_unlock(&lease.lock);
	return rc;
}

/* One-way notification; losing it is harmless (ulsd cleans up when the lease ends).
 * Called with the core lock held. Frames queued before it (a verdict, a FIN, a RST) are
 * published first: ulsd applies a RELEASE or UNBIND only after draining what the ring
 * held, so those frames still leave under the rules they were sent under. */
void stk__lease_notify(struct uls_ctl_msg *m)
{
	if (lease.fd < 0 || stk__node.lost)
		return;
	if (stk__node.dev)
		stk__node.dev->ops->tx_flush(stk__node.dev);
	pthread_mutex_lock(&lease.lock);
	m->seq = ++lease.seq;
	if (send(lease.fd, m, sizeof(*m), MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof(*m))
		stk__log(1, "lease: notification %u not sent: %s", m->type, strerror(errno));
	pthread_mutex_unlock(&lease.lock);
}

void stk__isn_set_secret(const uint8_t secret[16]);

/* The process offers the direct data path (two disabled io_urings, netif/qring.h) unless
 * ULS_DATAPATH=relay; ulsd decides. */
static bool offer_direct(void)
{
	const char *e = getenv("ULS_DATAPATH");

	return !(e && !strcmp(e, "relay"));
}

int uls_attach(const char *ctl_path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct timeval tv = { CALL_TIMEOUT_S, 0 };
	struct uls_ctl_msg m;
	struct nif_dev *dev;
	struct nif_qring_prep qp = { .made = false };
	int fds[3] = { -1, -1, -1 }, fd, rc;
	size_t got = 0;

	if (!ctl_path || !*ctl_path || strlen(ctl_path) >= sizeof(sun.sun_path))
		return -EINVAL;
	memcpy(sun.sun_path, ctl_path, strlen(ctl_path));
	stk__lock();
	if (stk__node.up) {
		stk__unlock();
		return -EALREADY;
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		goto fail;
	}
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
		rc = -errno;
		goto fail_fd;
	}
	uls_ctl_init(&m, ULS_CTL_HELLO, ++lease.seq);
	m.u.hello.ring_fd[0] = m.u.hello.ring_fd[1] = -1;
	if (offer_direct() && nif_qring_prepare(&qp) == 0) {
		/* The library's own descriptors: high, and out of the program's reach. */
		for (int i = 0; i < 2; i++) {
			nif_qring_set_fd(&qp, i, stk__fd_hide(nif_qring_fd(&qp, i)));
			m.u.hello.ring_fd[i] = nif_qring_fd(&qp, i);
		}
		m.u.hello.flags |= ULS_CTL_HELLO_F_RINGS;
	}
	if (send(fd, &m, sizeof(m), MSG_NOSIGNAL) != (ssize_t)sizeof(m)) {
		rc = -errno;
		goto fail_fd;
	}
	rc = recv_reply(fd, &m, fds, 3, &got);
	if (rc < 0)
		goto fail_fd;
	bool direct = m.u.hello.datapath == ULS_CTL_DP_DIRECT && qp.made;
	if (m.type != ULS_CTL_HELLO || m.status < 0 || m.u.hello.mtu == 0 ||
	    got != (direct ? 0u : 3u)) {
		rc = m.status < 0 ? m.status : -EPROTO;
		for (size_t i = 0; i < got; i++)
			close(fds[i]);
		goto fail_fd;
	}
	fd = stk__fd_hide(fd);
	bool offload = (m.u.hello.flags & ULS_CTL_HELLO_F_OFFLOAD) != 0;
	if (!direct) {
		for (int i = 0; qp.made && i < 2; i++)
			stk__fd_unmark(nif_qring_fd(&qp, i));
		nif_qring_discard(&qp);  /* the relay: ulsd did not take them */
	}
	if (direct) {
		fds[0] = nif_qring_fd(&qp, 0);
		fds[1] = nif_qring_fd(&qp, 1);
		/* The stack thread's wake-up, out of the program's descriptor range too. */
		fds[2] = stk__fd_hide(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
		rc = fds[2] < 0 ? -errno : nif_qring_open(&dev, &qp, m.u.hello.mtu, offload, fd, fds[2]);
		if (rc < 0 && fds[2] >= 0)
			stk__fd_close(fds[2]);
	} else {
		for (int i = 0; i < 3; i++)
			fds[i] = stk__fd_hide(fds[i]);
		rc = nif_ringdev_open(&dev, m.u.hello.mtu, offload, fds[0], fds[1], fds[2], fd);
		if (rc < 0)
			for (int i = 0; i < 3; i++)
				close(fds[i]);
	}
	if (rc < 0)
		goto fail_fd;
	stk__isn_set_secret(m.u.hello.isn_secret);
	lease.fd = fd;
	memcpy(lease.ring_fds, fds, sizeof(lease.ring_fds));
	lease.direct = direct;
	snprintf(lease.path, sizeof(lease.path), "%s", ctl_path);
	lease.id = m.u.hello.lease_id;
	struct in_addr addr = { m.u.hello.addr }, gw = { m.u.hello.gateway };
	rc = stk__node_up(dev, addr, m.u.hello.prefix_len, gw, m.u.hello.mac);
	if (rc < 0) {
		lease.fd = -1;
		goto fail_fd;
	}
	stk__fork_init();
	stk__unlock();
	return 0;
fail_fd:
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

/* The node stopped (uls_node_stop): end the lease; ulsd reclaims what is left. */
void stk__node_down_hook(void)
{
	if (lease.fd >= 0) {
		stk__fd_close(lease.fd);
		lease.fd = -1;
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
	stk__node_down_hook();
	pthread_mutex_init(&lease.lock, NULL);
}

/* A fork child's first use of the node: a lease of its own, at the parent's ulsd. */
int stk__lease_reattach(void)
{
	const char *ctl = getenv("ULS_CTL");

	if (lease.path[0])
		ctl = lease.path;
	if (!ctl || !*ctl)
		return -ENETDOWN;
	return uls_attach(ctl);
}
