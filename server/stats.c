/* ulsd's answers to its processes' control messages, collected under the server's lock and
 * sent after it is released, and the biggest of them: STATS (ulsstat), every process and
 * its connections, every counter, every endpoint. */
#include "server/stats.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "netif/conntab.h"
#include "netif/ctl/ctl.h"

/* Every answer without descriptors is collected with the lock held and sent after it is
 * released (srv__answer_send): the demux thread, which takes the same lock per batch of frames
 * on the relay path, then waits for the records' copy, not for sendmsg calls (hundreds of
 * them for STATS). Only the control thread answers: one answer at a time. An answer that
 * passes descriptors (HELLO's rings, CONNTAB) is sent at once, under the lock: once per
 * process. */
static struct {
	struct ctl_msg *m;
	size_t n, cap;
	bool on;
	bool patient;   /* STATS: wait a little for a full socket (srv__answer_send) */
	uint64_t lost;
} answer;

bool srv__answer_add(const struct ctl_msg *m)
{
	if (!answer.on)
		return false;
	if (answer.n == answer.cap) {
		size_t cap = answer.cap ? answer.cap * 2 : 1024;
		struct ctl_msg *p = realloc(answer.m, cap * sizeof(*p));
		if (!p) {
			answer.lost++;
			return true;
		}
		answer.m = p;
		answer.cap = cap;
	}
	answer.m[answer.n++] = *m;
	return true;
}

void srv__answer_begin(void)
{
	answer.on = true;
}

bool srv__answer_end(void)
{
	answer.on = false;
	return answer.n || answer.lost;
}

/* A STATS record: always collected (STATS comes through srv__ctl_input, which collects). */
static void collect(struct srv *s, const struct ctl_msg *m)
{
	(void)s;
	srv__answer_add(m);
}

static int send_counter(struct srv *s, uint32_t seq, const char *name, uint64_t v)
{
	struct ctl_msg r;

	ctl_init(&r, CTL_STAT_COUNTER, seq);
	snprintf(r.u.counter.name, sizeof(r.u.counter.name), "%s", name);
	r.u.counter.value = v;
	collect(s, &r);
	return 0;
}

/* A STATS answer being collected: the server and the request's seq. */
struct stat_ctx {
	struct srv *s;
	uint32_t seq;
};

static void stat_one(void *arg, const char *name, uint64_t v)
{
	struct stat_ctx *sc = arg;

	send_counter(sc->s, sc->seq, name, v);
}

static uint8_t custody_state(uint8_t st)
{
	switch ((enum srv_custody_state)st) {
	case SRV_CUSTODY_DEAD:       return CTL_CUSTODY_DEAD;
	case SRV_CUSTODY_FIN_WAIT_2: return CTL_CUSTODY_FIN_WAIT_2;
	case SRV_CUSTODY_TIME_WAIT:  return CTL_CUSTODY_TIME_WAIT;
	}
	return 0;
}

static int send_endpoint(const struct flt_rule *rule, void *arg)
{
	struct stat_ctx *e = arg;
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
	collect(e->s, &r);
	return 0;
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

static void stat_process(struct srv *s, uint32_t seq, struct srv_lease *l)
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
	collect(s, &r);
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
		collect(s, &r);
	}
}

/* ulsstat: every process and its connections, every counter, every endpoint, then END.
 * The socket's buffer bounds how much one reply may hold; SEQPACKET keeps the records
 * apart. */
void srv__stats(struct srv *s, int fd, uint32_t seq)
{
	struct flt_stats fs;
	struct stat_ctx e = { s, seq };
	int big = 4 << 20;

	answer.patient = true;

	/* Forced where ulsd may (CAP_NET_ADMIN): net.core.wmem_max would otherwise cap it
	 * below the records of a node with a few hundred queues (bpf.c's per-queue figures). */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	/* The processes first: what reading their tables counted is in this answer's
	 * counters. */
	for (uint32_t i = 1; i < SRV_MAX_LEASES; i++) {
		struct srv_lease *l = s->leases.by_id[i];
		if (l && !l->dead)
			stat_process(s, seq, l);
	}
	struct stat_ctx cc = { s, seq };
	srv__counters_each(&s->ctr, stat_one, &cc);
	flt_table_stats(s->flt, &fs);
	for (int i = 1; i < FLT_REASON_COUNT; i++) {
		uint64_t v = fs.rx_drop[i] + fs.tx_deny[i];
		send_counter(s, seq, flt_reason_name((enum flt_reason)(FLT_REASON_BASE + i)), v);
	}
	send_counter(s, seq, "custody_connections", s->custody.n);
	struct stat_ctx sc = { s, seq };
	srv__dp_stats(s, stat_one, &sc);
	flt_foreach(s->flt, send_endpoint, &e);
	for (size_t i = 0; i < s->custody.n; i++) {
		struct ctl_msg r;
		ctl_init(&r, CTL_STAT_ENDPOINT, seq);
		r.proto = WIRE_IPPROTO_TCP;
		r.lport = s->custody.c[i].lport;
		r.family = flt_addr_is_v4(&s->custody.c[i].rip) ? AF_INET : AF_INET6;
		memcpy(r.rip, s->custody.c[i].rip.b, 16);
		r.rport = s->custody.c[i].rport;
		r.u.endpoint.kind = CTL_K_TIMEWAIT;
		r.u.endpoint.custody = custody_state(s->custody.c[i].state);
		r.u.endpoint.probes = s->custody.c[i].probes_sent;
		collect(s, &r);
	}
	struct ctl_msg end;
	ctl_init(&end, CTL_END, seq);
	collect(s, &end);
}

/* The collected answer, with the lock released (see `answer`). */
void srv__answer_send(struct srv *s, int fd)
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
		int sent = sendmmsg(fd, mm, k, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (sent > 0) {
			i += (size_t)sent;
			continue;
		}
		/* The socket is full (a node with many thousand endpoints in custody): let
		 * ulsstat read, 10 ms at a time, at most 50 times (no lock is held), then drop
		 * what is left but the END, which says the answer is complete. */
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		if (sent < 0 && errno == EAGAIN && answer.patient && waits++ < 50 &&
		    poll(&pfd, 1, 10) >= 0)
			continue;
		break;
	}
	if (i < answer.n) {
		lost += answer.n - i;
		const struct ctl_msg *last = &answer.m[answer.n - 1];
		if (answer.patient && last->type == CTL_END && i < answer.n - 1) {
			struct pollfd pfd = { .fd = fd, .events = POLLOUT };
			poll(&pfd, 1, 100);
			if (send(fd, last, sizeof(*last), MSG_DONTWAIT | MSG_NOSIGNAL) ==
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

