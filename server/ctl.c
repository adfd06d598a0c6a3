/* The connection server: the control thread.
 *
 * It accepts control connections, turns a HELLO into a lease, and answers requests about
 * ports and endpoints by programming the port space (ports.c) and the filter. It runs per
 * control message, never per data packet: `ctl_messages` and `frames_demuxed` are counted
 * separately so that tests can show it. A malformed, out-of-order or unauthorised message
 * gets an error reply and a counter (docs/control-protocol.md).
 */
#include "server/internal.h"

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

/* Every answer without descriptors is collected with the lock held and sent after it is
 * released (send_answer): the demux thread, which takes the same lock per batch of frames
 * on the relay path, then waits for the records' copy, not for sendmsg calls (hundreds of
 * them for STATS). Only the control thread answers: one answer at a time. An answer that
 * passes descriptors (HELLO's rings, CONNTAB) is sent at once, under the lock: once per
 * process. */
static struct {
	struct ctl_msg *m;
	size_t n, cap;
	bool on;
	bool patient;   /* STATS: wait a little for a full socket (send_answer) */
	uint64_t lost;
} answer;

static void reply(struct srv *s, struct srv_conn *c, struct ctl_msg *m, const int *fds,
		  size_t nfds)
{
	if (answer.on && !nfds) {
		if (answer.n == answer.cap) {
			size_t cap = answer.cap ? answer.cap * 2 : 1024;
			struct ctl_msg *p = realloc(answer.m, cap * sizeof(*p));
			if (!p) {
				answer.lost++;
				return;
			}
			answer.m = p;
			answer.cap = cap;
		}
		answer.m[answer.n++] = *m;
		return;
	}
	char cbuf[CMSG_SPACE(sizeof(int) * 3)];
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
	r.u.hello.flags = s->offload ? CTL_HELLO_F_OFFLOAD : 0;
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
	if (l->direct) {
		r.u.hello.datapath = CTL_DP_DIRECT;
		r.u.hello.queue = (uint8_t)l->queue;
		if (l->dp_wake)
			r.u.hello.flags |= CTL_HELLO_F_WAKE;
		if (l->dp_mshot)
			r.u.hello.flags |= CTL_HELLO_F_MSHOT;
		s->ctr.v[SRV_LEASES_DIRECT]++;
		reply(s, c, &r, NULL, 0);
	} else {
		int fds[3] = { l->memfd, l->rx_efd, l->tx_efd };
		r.u.hello.datapath = CTL_DP_RELAY;
		s->ctr.v[SRV_LEASES_RELAY]++;
		reply(s, c, &r, fds, 3);
	}
	srv__log(2, "lease %u: pid %d uid %u, %s path", l->id, (int)c->pid, (unsigned)c->uid,
		l->direct ? "direct" : "relay");
}

static int send_counter(struct srv *s, struct srv_conn *c, uint32_t seq, const char *name, uint64_t v)
{
	struct ctl_msg r;

	ctl_init(&r, CTL_STAT_COUNTER, seq);
	snprintf(r.u.counter.name, sizeof(r.u.counter.name), "%s", name);
	r.u.counter.value = v;
	reply(s, c, &r, NULL, 0);
	return 0;
}

struct stat_ctx {
	struct srv *s;
	struct srv_conn *c;
	uint32_t seq;
};

static void stat_one(void *arg, const char *name, uint64_t v)
{
	struct stat_ctx *sc = arg;

	send_counter(sc->s, sc->c, sc->seq, name, v);
}

struct ep_ctx {
	struct srv *s;
	struct srv_conn *c;
	uint32_t seq;
};

static int send_endpoint(const struct flt_rule *rule, void *arg)
{
	struct ep_ctx *e = arg;
	struct ctl_msg r;
	struct srv_lease *l = rule->owner < SRV_MAX_LEASES ? e->s->leases.by_id[rule->owner] : NULL;

	ctl_init(&r, CTL_STAT_ENDPOINT, e->seq);
	r.proto = rule->proto;
	r.lport = rule->lport;
	r.family = rule->fam == FLT_FAM_V6 ? AF_INET6 : AF_INET;
	if (rule->kind == FLT_RULE_CONNECTED)
		memcpy(r.rip, rule->rip6.b, 16);
	r.rport = rule->rport;
	r.u.endpoint.pid = l ? (uint32_t)l->pid : 0;
	r.u.endpoint.datapath = !l ? 0 : l->direct ? CTL_DP_DIRECT : CTL_DP_RELAY;
	r.u.endpoint.kind = rule->kind == FLT_RULE_CONNECTED ? CTL_K_CONNECTED :
			    rule->proto == WIRE_IPPROTO_UDP ? CTL_K_BOUND : CTL_K_LISTEN;
	reply(e->s, e->c, &r, NULL, 0);
	return 0;
}

/* CONNTAB: the process's connection table (netif/conntab.h). ulsd creates and seals the
 * memfd and maps it first, so what the process does to it can change its contents but not
 * its size: ulsd's reads never fault. */
static void conntab(struct srv *s, struct srv_conn *c, struct srv_lease *l,
		    const struct ctl_msg *req)
{
	struct ctl_msg r;
	void *map;

	if (l->conntab) {
		reply_status(s, c, req, -EALREADY);
		return;
	}
	int fd = uls_conntab_create(ULS_CONNTAB_CAPACITY, &map);
	if (fd < 0) {
		srv__log(1, "lease %u: no connection table: %s", l->id, strerror(-fd));
		reply_status(s, c, req, fd);
		return;
	}
	l->conntab = map;
	l->conntab_cap = ULS_CONNTAB_CAPACITY;
	s->ctr.v[SRV_CONNTABS_GIVEN]++;
	ctl_init(&r, CTL_CONNTAB, req->seq);
	reply(s, c, &r, &fd, 1);
	close(fd);  /* both ends keep their mapping */
}

/* One process's connections, read from its table without waiting for it: a STAT_PROC
 * record, then a STAT_CONN record per valid entry. An inconsistent table or an entry out
 * of range is counted and left out, never passed on. */
static struct uls_conntab_ent snap[ULS_CONNTAB_CAPACITY];

/* An entry in range whose local address is one of the node's: the process's word is
 * passed on only where ulsd can vouch for it. */
static bool ent_ok(const struct srv *s, const struct uls_conntab_ent *e)
{
	if (!uls_conntab_ent_ok(e))
		return false;
	return e->family == AF_INET6 ? srv__is_node_ip6(s, e->lip) : ctl_addr_v4(e->lip) == s->ip;
}

static void stat_process(struct srv *s, struct srv_conn *c, uint32_t seq, struct srv_lease *l)
{
	struct ctl_msg r;
	uint32_t n = 0, total = 0, ok = 0;
	uint64_t published = 0;
	uint8_t dp = l->direct ? CTL_DP_DIRECT : CTL_DP_RELAY;
	int table = CTL_TABLE_NONE;

	if (l->conntab) {
		int rc = uls_conntab_snapshot(l->conntab, l->conntab_cap, snap, &n, &total, &published);
		table = rc == ULS_CONNTAB_OK ? CTL_TABLE_OK :
			rc == ULS_CONNTAB_TORN ? CTL_TABLE_TORN : CTL_TABLE_BAD;
		if (rc == ULS_CONNTAB_TORN)
			s->ctr.v[SRV_CONNTAB_TORN]++;
		else if (rc == ULS_CONNTAB_BAD_VERSION)
			s->ctr.v[SRV_CONNTAB_BAD_VERSION]++;
		else if (rc != ULS_CONNTAB_OK)
			s->ctr.v[SRV_CONNTAB_BAD_HEADER]++;
		if (rc != ULS_CONNTAB_OK)
			n = total = 0;
	}
	for (uint32_t i = 0; i < n; i++)
		ok += ent_ok(s, &snap[i]);
	ctl_init(&r, CTL_STAT_PROC, seq);
	r.u.proc.pid = (uint32_t)l->pid;
	r.u.proc.datapath = dp;
	r.u.proc.queue = (uint8_t)l->queue;
	r.u.proc.table = (uint8_t)table;
	r.u.proc.connections = total;
	r.u.proc.listed = ok;
	r.u.proc.refused = n - ok;
	s->ctr.v[SRV_CONNTAB_BAD_ENTRIES] += n - ok;
	r.u.proc.age_ms = UINT32_MAX;  /* never written (no connection yet) */
	if (published) {
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		uint64_t now_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
		uint64_t age = now_ns > published ? (now_ns - published) / 1000000u : 0;
		r.u.proc.age_ms = age > UINT32_MAX ? UINT32_MAX : (uint32_t)age;
	}
	reply(s, c, &r, NULL, 0);
	for (uint32_t i = 0; i < n; i++) {
		const struct uls_conntab_ent *e = &snap[i];
		if (!ent_ok(s, e))
			continue;
		ctl_init(&r, CTL_STAT_CONN, seq);
		r.proto = IPPROTO_TCP;
		r.lport = e->lport;
		if (e->family == AF_INET6)
			ctl_set_rip6(&r, e->rip);
		else
			ctl_set_rip4(&r, ctl_addr_v4(e->rip));
		r.rport = e->rport;
		r.u.conn = (struct ctl_conn){
			.pid = (uint32_t)l->pid, .datapath = dp, .state = e->state,
			.snd_wscale = e->snd_wscale, .rcv_wscale = e->rcv_wscale,
			.send_queue = e->send_queue, .recv_queue = e->recv_queue,
			.rtt_us = e->rtt_us, .rttvar_us = e->rttvar_us, .rto_us = e->rto_us,
			.cwnd = e->cwnd, .ssthresh = e->ssthresh, .retransmits = e->retransmits,
			.mss = e->mss, .snd_wnd = e->snd_wnd, .rcv_wnd = e->rcv_wnd, .flags = e->flags,
		};
		memcpy(r.u.conn.lip, e->lip, 16);
		reply(s, c, &r, NULL, 0);
	}
}

/* ulsstat: every process and its connections, every counter, every endpoint, then END.
 * The socket's buffer bounds how much one reply may hold; SEQPACKET keeps the records
 * apart. */
static void stats(struct srv *s, struct srv_conn *c, const struct ctl_msg *req)
{
	struct flt_stats fs;
	struct ep_ctx e = { s, c, req->seq };
	int big = 4 << 20;

	answer.on = true;
	answer.patient = true;

	/* Forced where ulsd may (CAP_NET_ADMIN): net.core.wmem_max would otherwise cap it
	 * below the records of a node with a few hundred queues (bpf.c's per-queue figures). */
	if (setsockopt(c->fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)) < 0)
		setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	/* The processes first: what reading their tables counted is in this answer's
	 * counters. */
	for (uint32_t i = 1; i < SRV_MAX_LEASES; i++) {
		struct srv_lease *l = s->leases.by_id[i];
		if (l && !l->dead)
			stat_process(s, c, req->seq, l);
	}
	struct stat_ctx cc = { s, c, req->seq };
	srv__counters_each(&s->ctr, stat_one, &cc);
	flt_table_stats(s->flt, &fs);
	for (int i = 1; i < FLT_REASON_COUNT; i++) {
		uint64_t v = fs.rx_drop[i] + fs.tx_deny[i];
		send_counter(s, c, req->seq, flt_reason_name((enum flt_reason)(FLT_REASON_BASE + i)), v);
	}
	send_counter(s, c, req->seq, "custody_connections", s->custody.n);
	struct stat_ctx sc = { s, c, req->seq };
	srv__dp_stats(s, stat_one, &sc);
	flt_foreach(s->flt, send_endpoint, &e);
	for (size_t i = 0; i < s->custody.n; i++) {
		struct ctl_msg r;
		ctl_init(&r, CTL_STAT_ENDPOINT, req->seq);
		r.proto = WIRE_IPPROTO_TCP;
		r.lport = s->custody.c[i].lport;
		r.family = flt_addr_is_v4(&s->custody.c[i].rip) ? AF_INET : AF_INET6;
		memcpy(r.rip, s->custody.c[i].rip.b, 16);
		r.rport = s->custody.c[i].rport;
		r.u.endpoint.kind = CTL_K_TIMEWAIT;
		reply(s, c, &r, NULL, 0);
	}
	struct ctl_msg end;
	ctl_init(&end, CTL_END, req->seq);
	reply(s, c, &end, NULL, 0);
	answer.on = false;
}

/* The collected STATS answer, with the lock released (see `answer`). */
static void send_answer(struct srv *s, struct srv_conn *c)
{
	struct mmsghdr mm[64];
	struct iovec iov[64];
	size_t i = 0;
	uint64_t lost = answer.lost;

	int waits = 0;

	while (i < answer.n) {
		unsigned k = 0;
		for (; k < 64 && i + k < answer.n; k++) {
			iov[k] = (struct iovec){ &answer.m[i + k], sizeof(answer.m[0]) };
			mm[k] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[k], .msg_iovlen = 1 } };
		}
		int sent = sendmmsg(c->fd, mm, k, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (sent > 0) {
			i += (size_t)sent;
			continue;
		}
		/* The socket is full (a node with many thousand endpoints in custody): let
		 * ulsstat read, 10 ms at a time, at most 50 times (no lock is held), then drop
		 * what is left but the END, which says the answer is complete. */
		struct pollfd pfd = { .fd = c->fd, .events = POLLOUT };
		if (sent < 0 && errno == EAGAIN && answer.patient && waits++ < 50 &&
		    poll(&pfd, 1, 10) >= 0)
			continue;
		break;
	}
	if (i < answer.n) {
		lost += answer.n - i;
		const struct ctl_msg *last = &answer.m[answer.n - 1];
		if (answer.patient && last->type == CTL_END && i < answer.n - 1) {
			struct pollfd pfd = { .fd = c->fd, .events = POLLOUT };
			poll(&pfd, 1, 100);
			if (send(c->fd, last, sizeof(*last), MSG_DONTWAIT | MSG_NOSIGNAL) ==
			    (ssize_t)sizeof(*last))
				lost--;
		}
	}
	answer.n = 0;
	answer.lost = 0;
	answer.patient = false;
	if (lost) {
		pthread_mutex_lock(&s->lock);
		s->ctr.v[SRV_CTL_REPLY_LOST] += lost;
		pthread_mutex_unlock(&s->lock);
	}
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
		stats(s, c, m);
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
 * answered. Takes s->lock, and sends the answer after releasing it (see `answer`). */
void srv__ctl_input(struct srv *s, struct srv_conn *c, const uint8_t *buf, ssize_t n)
{
	struct ctl_msg m;

	pthread_mutex_lock(&s->lock);
	answer.on = true;
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
	answer.on = false;
	pthread_mutex_unlock(&s->lock);
	if (answer.n || answer.lost)
		send_answer(s, c);
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
