/* The connection server: the control thread.
 *
 * It accepts control connections, turns a HELLO into a lease, and answers requests about
 * ports and endpoints by programming the port space (ports.c) and the filter. It runs per
 * control message, never per data packet: `ctl_messages` and `frames_demuxed` are counted
 * separately so that tests can show it. A malformed, out-of-order or unauthorised message
 * gets an error reply and a counter (docs/control-protocol.md).
 */
#include "server/internal.h"
#include "server/stats.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "netif/conntab.h"
#include "netif/ctl/ctl.h"

#define MAX_EVENTS 64

struct srv_conn {
	int fd;
	pid_t pid;
	uid_t uid;
	struct srv_lease *lease;
	struct srv_conn *prev, *next;  /* every open connection (conns): freed when ulsd stops */
};

static struct srv_conn *conns;

static void reply(struct srv *s, struct srv_conn *c, struct ctl_msg *m, const int *fds,
		  size_t nfds)
{
	if (!nfds && srv__answer_add(m))
		return;
	char cbuf[CMSG_SPACE(sizeof(int) * CTL_MAX_FDS)];
	struct iovec iov = { m, sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (nfds) {
		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
	}
	/* Never block the connection server on one slow client. */
	if (sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(*m))
		s->ctr.v[SRV_CTL_REPLY_LOST]++;
}

static void reply_status(struct srv *s, struct srv_conn *c, const struct ctl_msg *req, int status)
{
	struct ctl_msg r;

	ctl_init(&r, (enum ctl_type)req->type, req->seq);
	r.status = status;
	r.proto = req->proto;
	r.lport = req->lport;
	r.family = req->family;
	memcpy(r.rip, req->rip, sizeof(r.rip));
	r.rport = req->rport;
	reply(s, c, &r, NULL, 0);
}

/* The families a port message asks for (filter.h, FLT_FAM_*): an AF_INET6 socket holds
 * the port in both unless it is IPV6_V6ONLY, as on Linux (ipv6(7)). */
static unsigned fams_of(const struct ctl_msg *m)
{
	if (m->family != AF_INET6)
		return FLT_FAM_V4;
	return (m->flags & CTL_F_V6ONLY) ? FLT_FAM_V6 : FLT_FAM_ANY;
}

/* A tuple's remote as the filter keys it; -EAFNOSUPPORT for IPv6 on a node without it. */
static int remote_of(const struct srv *s, const struct ctl_msg *m, struct flt_addr *out)
{
	if (m->family == AF_INET6 && !s->has_ip6)
		return -EAFNOSUPPORT;
	*out = flt_addr_v6(m->rip);  /* IPv4 comes v4-mapped, as the table keys it */
	return 0;
}

/* A tuple the process released (CTL_RELEASE): a RST it still sends on it is told from
 * a forged one (demux.c, late_rst). */
static void remember_released(struct srv_lease *l, uint16_t lport, const struct flt_addr *rip,
			      uint16_t rport)
{
	struct srv_released *r = &l->released[l->released_next++ % SRV_RELEASED_KEEP];

	memcpy(r->rip, rip->b, sizeof(r->rip));
	r->lport = lport;
	r->rport = rport;
}

/* The process's connection table (netif/conntab.h): its memfd, or -errno. ulsd creates and
 * seals the memfd and maps it first, so what the process does to it can change its contents
 * but not its size: ulsd's reads never fault. */
static int conntab_make(struct srv *s, struct srv_lease *l)
{
	void *map;

	if (l->conntab)
		return -EALREADY;
	int fd = uls_conntab_create(ULS_CONNTAB_CAPACITY, &map);
	if (fd < 0) {
		srv__log(1, "lease %u: no connection table: %s", l->id, strerror(-fd));
		return fd;
	}
	l->conntab = map;
	l->conntab_cap = ULS_CONNTAB_CAPACITY;
	s->ctr.v[SRV_CONNTABS_GIVEN]++;
	return fd;
}

/* A lease that could not be set up goes again at once (nothing else refers to it). */
static void lease_drop(struct srv *s, struct srv_lease *l)
{
	srv__leases_remove(&s->leases, l);
	l->fd = -1;  /* the connection stays the caller's */
	l->dead = true;
	srv__lease_free(s, l);
}

static void hello(struct srv *s, struct srv_conn *c, const struct ctl_msg *req)
{
	struct ctl_msg r;
	struct srv_lease *l;
	int rc = srv__lease_new(s, c->fd, c->pid, c->uid, &l);
	bool offered = (req->u.hello.flags & CTL_HELLO_F_RINGS) != 0;

	if (rc < 0) {
		reply_status(s, c, req, rc);
		return;
	}
	/* The data path, per process (docs/architecture.md): direct when the process offers
	 * its rings and ulsd may take them and has a queue for it; else the relay, unless
	 * ulsd runs with --datapath direct. A process on a node with --ip6 carries IPv6
	 * (stack/lease.c), which the direct path can take only where the kernel programs
	 * steer and check it (s->dp_ip6, set by bpf.c): otherwise the relay carries it,
	 * through ulsd's own filter (docs/ipv6.md). */
	bool ip6_relay = s->has_ip6 && !s->dp_ip6;
	rc = -EOPNOTSUPP;
	if (s->datapath != SRV_DP_RELAY && offered && s->dp && !ip6_relay) {
		rc = srv__dp_lease_direct(s, l, req->u.hello.ring_fd,
					  (req->u.hello.flags & CTL_HELLO_F_WAKE) ?
					  req->u.hello.wake_fd : -1,
					  (req->u.hello.flags & CTL_HELLO_F_MSHOT) && s->rx_mshot);
		if (rc < 0) {
			s->ctr.v[SRV_DIRECT_REFUSED]++;
			srv__log(1, "lease %u (pid %d): direct path refused: %s", l->id,
				(int)c->pid, strerror(-rc));
		}
	}
	if (rc < 0) {
		rc = s->datapath == SRV_DP_DIRECT ? (rc == -EOPNOTSUPP ? -EPROTONOSUPPORT : rc)
						  : srv__lease_rings(s, l);
		if (rc < 0) {
			lease_drop(s, l);
			reply_status(s, c, req, rc);
			return;
		}
	}
	c->lease = l;
	ctl_init(&r, CTL_HELLO, req->seq);
	r.u.hello.addr = s->ip;
	r.u.hello.gateway = s->gw;
	r.u.hello.mtu = s->mtu;
	r.u.hello.lease_id = l->id;
	r.u.hello.prefix_len = (uint8_t)s->prefix_len;
	memcpy(r.u.hello.mac, s->mac, 6);
	r.u.hello.flags = !s->offload ? 0 :
			  s->csum_only ? CTL_HELLO_F_OFFLOAD | CTL_HELLO_F_CSUM_ONLY : CTL_HELLO_F_OFFLOAD;
	memcpy(r.u.hello.isn_secret, s->isn_secret, 16);
	r.u.hello.ring_fd[0] = r.u.hello.ring_fd[1] = -1;
	r.u.hello.ifindex = s->tap_index;
	memcpy(r.u.hello.ifname, s->tap_name,
	       strnlen(s->tap_name, sizeof(r.u.hello.ifname) - 1));  /* ctl_init zeroed it */
	if (s->has_ip6) {
		ctl_set_rip6(&r, s->ip6);
		r.u.hello.prefix_len6 = (uint8_t)s->ip6_plen;
		if (s->has_gw6)
			r.u.hello.flags |= CTL_HELLO_F_ROUTER6;
	}
	/* The descriptors: the relay's three, then the connection table if the process asked
	 * for it here (CTL_HELLO_F_CONNTAB). Without a table (no memory for it) the reply
	 * goes without the flag, and the process asks with CONNTAB, which says why. */
	int fds[CTL_MAX_FDS], nfds = 0, tfd = -1;
	if (l->direct) {
		r.u.hello.datapath = CTL_DP_DIRECT;
		r.u.hello.queue = (uint8_t)l->queue;
		if (l->dp_wake)
			r.u.hello.flags |= CTL_HELLO_F_WAKE;
		if (l->dp_mshot)
			r.u.hello.flags |= CTL_HELLO_F_MSHOT;
		if (s->dp_kshed)
			r.u.hello.flags |= CTL_HELLO_F_KSHED;
		s->ctr.v[SRV_LEASES_DIRECT]++;
	} else {
		fds[nfds++] = l->memfd;
		fds[nfds++] = l->rx_efd;
		fds[nfds++] = l->tx_efd;
		r.u.hello.datapath = CTL_DP_RELAY;
		s->ctr.v[SRV_LEASES_RELAY]++;
	}
	if ((req->u.hello.flags & CTL_HELLO_F_CONNTAB) && (tfd = conntab_make(s, l)) >= 0) {
		fds[nfds++] = tfd;
		r.u.hello.flags |= CTL_HELLO_F_CONNTAB;
	}
	reply(s, c, &r, nfds ? fds : NULL, (size_t)nfds);
	if (tfd >= 0)
		close(tfd);  /* both ends keep their mapping */
	srv__log(2, "lease %u: pid %d uid %u, %s path", l->id, (int)c->pid, (unsigned)c->uid,
		l->direct ? "direct" : "relay");
}

/* CONNTAB: the table asked for on its own (a process that did not ask in HELLO). */
static void conntab(struct srv *s, struct srv_conn *c, struct srv_lease *l,
		    const struct ctl_msg *req)
{
	struct ctl_msg r;
	int fd = conntab_make(s, l);

	if (fd < 0) {
		reply_status(s, c, req, fd);
		return;
	}
	ctl_init(&r, CTL_CONNTAB, req->seq);
	reply(s, c, &r, &fd, 1);
	close(fd);  /* both ends keep their mapping */
}

/* A refused one-way message still gets an error reply (the process's stack skips replies
 * it is not waiting for) and a counter. */
static void refuse_one_way(struct srv *s, struct srv_conn *c, const struct ctl_msg *m, int rc)
{
	s->ctr.v[SRV_CTL_DENIED]++;
	reply_status(s, c, m, rc);
}

static void handle(struct srv *s, struct srv_conn *c, const struct ctl_msg *m)
{
	struct srv_lease *l = c->lease;
	int rc;

	if (s->trace)
		srv__log(2, "lease %u: message %u proto %u lport %u rport %u", l ? l->id : 0,
			m->type, m->proto, m->lport, m->rport);
	if (m->type == CTL_STATS) {
		srv__stats(s, c->fd, m->seq);
		return;
	}
	if ((m->type == CTL_HELLO) == (l != NULL)) {
		/* HELLO must come first and only once; nothing else before it. */
		s->ctr.v[SRV_CTL_OUT_OF_ORDER]++;
		reply_status(s, c, m, -EPROTO);
		return;
	}
	struct flt_addr rip;
	unsigned fams = fams_of(m);

	switch (m->type) {
	case CTL_HELLO:
		hello(s, c, m);
		return;
	case CTL_BIND:
		rc = srv__port_bind_fam(s->ports, SRV_OWNER(l), m->proto, m->lport, m->flags, fams);
		if (rc >= 0) {
			struct ctl_msg r;
			ctl_init(&r, CTL_BIND, m->seq);
			r.proto = m->proto;
			r.family = m->family;
			r.lport = (uint16_t)rc;
			reply(s, c, &r, NULL, 0);
			return;
		}
		break;
	case CTL_LISTEN:
		if (!srv__port_held(s->ports, SRV_OWNER(l), IPPROTO_TCP, m->lport))
			rc = -EPERM;
		else
			rc = srv__port_listen(s->ports, SRV_OWNER(l), m->lport, m->flags, fams);
		break;
	case CTL_CONNECT:
		rc = remote_of(s, m, &rip);
		if (rc == 0)
			rc = srv__port_connect_addr(s->ports, SRV_OWNER(l), m->lport, &rip, m->rport);
		if (rc >= 0) {
			struct ctl_msg r = *m;
			r.lport = (uint16_t)rc;
			r.status = 0;
			reply(s, c, &r, NULL, 0);
			return;
		}
		break;
	case CTL_ACCEPTED:
		/* One-way. The listener must be this process's, and the tuple new. */
		rc = remote_of(s, m, &rip);
		if (rc == 0)
			rc = srv__port_ref(s->ports, SRV_OWNER(l), IPPROTO_TCP, m->lport);
		if (rc == 0) {
			rc = flt_add_connected_addr(s->flt, WIRE_IPPROTO_TCP, m->lport, &rip, m->rport,
						    l->id);
			if (rc < 0)
				srv__port_release(s->ports, SRV_OWNER(l), IPPROTO_TCP, m->lport);
		}
		if (rc < 0)
			refuse_one_way(s, c, m, rc);
		return;
	case CTL_RELEASE:
		/* The process published the connection's last frames before this message:
		 * send them while the tuple is still its own. */
		srv__drain_tx(s, l);
		rc = remote_of(s, m, &rip);
		if (rc == 0)
			rc = flt_del_connected_addr(s->flt, WIRE_IPPROTO_TCP, m->lport, &rip, m->rport,
						    l->id);
		if (rc == 0) {
			srv__port_release(s->ports, SRV_OWNER(l), IPPROTO_TCP, m->lport);
			remember_released(l, m->lport, &rip, m->rport);
		} else
			refuse_one_way(s, c, m, rc);
		return;
	case CTL_ACCEPTING:
		/* One-way: prefer this member of the port's listening group. */
		rc = flt_set_accepting_fam(s->flt, WIRE_IPPROTO_TCP, m->lport, fams, l->id);
		if (rc < 0)
			refuse_one_way(s, c, m, rc);
		return;
	case CTL_HANDOFF:
		rc = srv__handoff_begin(s, l, m);
		break;
	case CTL_CLAIM:
		rc = srv__handoff_claim(s, l, m);
		break;
	case CTL_CONNTAB:
		conntab(s, c, l, m);
		return;
	case CTL_ROUTER6: {
		/* The node's default IPv6 router (--gw6): -ENOENT on a node without one. */
		struct ctl_msg r;
		if (!s->has_gw6) {
			rc = -ENOENT;
			break;
		}
		ctl_init(&r, CTL_ROUTER6, m->seq);
		ctl_set_rip6(&r, s->gw6);
		reply(s, c, &r, NULL, 0);
		return;
	}
	case CTL_UNBIND:
		srv__drain_tx(s, l);
		/* The socket that held the port closed: a listener stops receiving new
		 * connections at once, even while connections accepted on it live on. */
		if (srv__port_held(s->ports, SRV_OWNER(l), m->proto, m->lport)) {
			flt_del_listen_fam(s->flt, m->proto == IPPROTO_UDP ? WIRE_IPPROTO_UDP :
				       WIRE_IPPROTO_TCP, m->lport, fams, l->id);
			srv__port_release(s->ports, SRV_OWNER(l), m->proto, m->lport);
		} else {
			refuse_one_way(s, c, m, -EPERM);
		}
		return;
	default:
		/* Records only ulsd sends. */
		rc = -EBADMSG;
		s->ctr.v[SRV_CTL_OUT_OF_ORDER]++;
		break;
	}
	if (rc == -EPERM || rc == -EACCES)
		s->ctr.v[SRV_CTL_DENIED]++;
	reply_status(s, c, m, rc < 0 ? rc : 0);
}

static void conn_unlink(struct srv_conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
}

/* A process connected: its record, NULL without memory. */
struct srv_conn *srv__ctl_conn_new(int fd, pid_t pid, uid_t uid)
{
	struct srv_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->fd = fd;
	c->pid = pid;
	c->uid = uid;
	c->next = conns;
	if (conns)
		conns->prev = c;
	conns = c;
	return c;
}

void srv__ctl_conn_close(struct srv *s, struct srv_conn *c)
{
	conn_unlink(c);
	if (c->lease) {
		srv__log(2, "lease %u ended (pid %d)", c->lease->id, (int)c->pid);
		srv__lease_end(s, c->lease);  /* closes c->fd */
	} else {
		close(c->fd);
	}
	free(c);
}

/* One message as recv() returned it (n: its length, MSG_TRUNC), checked, handled and
 * answered. Takes s->lock, and sends the answer after releasing it (server/stats.c,
 * `answer`). */
void srv__ctl_input(struct srv *s, struct srv_conn *c, const uint8_t *buf, ssize_t n)
{
	struct ctl_msg m;

	pthread_mutex_lock(&s->lock);
	srv__answer_begin();
	s->ctr.v[SRV_CTL_MESSAGES]++;
	/* MSG_TRUNC: n is the whole message's size, so an oversized one is refused. */
	int err = ctl_check(buf, n, &m);
	if (err < 0) {
		s->ctr.v[SRV_CTL_REFUSED]++;
		srv__count_ctl_error(&s->ctr, err);
		struct ctl_msg r;
		uint32_t seq = 0;
		if (n >= 12)
			memcpy(&seq, buf + 8, sizeof(seq));
		ctl_init(&r, CTL_END, seq);
		r.status = err == -CTL_BAD_VERSION ? -EPROTONOSUPPORT : -EBADMSG;
		reply(s, c, &r, NULL, 0);
	} else {
		handle(s, c, &m);
	}
	bool to_send = srv__answer_end();
	pthread_mutex_unlock(&s->lock);
	if (to_send)
		srv__answer_send(s, c->fd);
}

/* One readable control connection: read every queued message. Returns false when the
 * connection is gone. */
static bool conn_read(struct srv *s, struct srv_conn *c)
{
	uint8_t buf[CTL_MSG_SIZE + 1];

	for (;;) {
		ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR;
		if (n == 0)
			return false;
		srv__ctl_input(s, c, buf, n);
	}
}

/* A new control connection: watched by ep, or closed and counted. */
static void conn_accept(struct srv *s, int ep, int lfd)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0) {
		/* EAGAIN: nothing was queued after all. Anything else (a connection aborted
		 * before we took it, EMFILE, ENOBUFS) is a process that gets no lease. */
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			pthread_mutex_lock(&s->lock);
			if (s->ctr.v[SRV_CTL_ACCEPT_FAILED]++ == 0)
				srv__log(1, "accept: %s (counted in ctl_accept_failed)",
					strerror(errno));
			pthread_mutex_unlock(&s->lock);
		}
		return;
	}
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	struct srv_conn *c = NULL;
	int err = 0;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0)
		err = errno;
	else if (!(c = srv__ctl_conn_new(fd, cred.pid, cred.uid)))
		err = ENOMEM;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = c };
	if (!err && epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		err = errno;
	if (err) {
		srv__log(1, "control connection dropped: %s", strerror(err));
		pthread_mutex_lock(&s->lock);
		if (c)
			srv__ctl_conn_close(s, c);  /* closes fd */
		else
			close(fd);
		s->ctr.v[SRV_CTL_CONN_DROPPED]++;
		pthread_mutex_unlock(&s->lock);
	}
}

int srv__ctl_run(struct srv *s, int lfd)
{
	struct epoll_event ev, evs[MAX_EVENTS];
	sigset_t sigs;
	int ep, sfd, err;

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		return -errno;
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		err = -errno;
		close(ep);
		return err;
	}
	ev.events = EPOLLIN;
	ev.data.ptr = NULL;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) < 0)
		goto fail;
	ev.data.ptr = &sfd;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev) < 0)
		goto fail;
	int timeout = 1000;
	while (!srv__stopping(s)) {
		int n = epoll_wait(ep, evs, MAX_EVENTS, timeout);
		for (int i = 0; i < n; i++) {
			if (evs[i].data.ptr == &sfd) {
				srv__log(2, "stopping on signal");
				srv__stop(s);
				continue;
			}
			if (!evs[i].data.ptr) {
				conn_accept(s, ep, lfd);
				continue;
			}
			struct srv_conn *c = evs[i].data.ptr;
			bool alive = conn_read(s, c);
			if (!alive || (evs[i].events & (EPOLLHUP | EPOLLERR))) {
				/* Before the close: the lease may pass the fd on (custody), and epoll
				 * watches the file, not the number. */
				if (epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL) < 0)
					srv__log(1, "epoll_ctl(DEL) of a control connection: %s",
						strerror(errno));
				pthread_mutex_lock(&s->lock);
				srv__ctl_conn_close(s, c);
				pthread_mutex_unlock(&s->lock);
			}
		}
		pthread_mutex_lock(&s->lock);
		timeout = s->custody.n ? srv__custody_run(s) : 1000;
		if (s->nhandoff) {
			int t = srv__handoff_tick(s);
			timeout = t < timeout ? t : timeout;
		}
		/* The node's duplicate address detection (reply6.c). */
		if (srv__dad_pending(s)) {
			int t = srv__dad_run(s);
			timeout = t < timeout ? t : timeout;
		}
		/* Neighbour solicitations for custody's IPv6 probes (reply6.c). */
		if (srv__neigh6_resolving(&s->neigh6)) {
			int t = srv__neigh6_run(s);
			timeout = t < timeout ? t : timeout;
		}
		pthread_mutex_unlock(&s->lock);
		srv__tx_flush(s);   /* the probes, and frames drained for RELEASE and UNBIND */
		if (timeout < 1)
			timeout = 1;
	}
	/* Stopping: the records go; a lease keeps its connection's descriptor (it closes it
	 * when it is freed), the others are closed here. */
	while (conns) {
		struct srv_conn *c = conns;
		conn_unlink(c);
		if (!c->lease)
			close(c->fd);
		free(c);
	}
	close(sfd);
	close(ep);
	return 0;
fail:
	err = -errno;
	close(sfd);
	close(ep);
	return err;
}
