/* Socket options: setsockopt/getsockopt as Linux answers them (socket(7), tcp(7), ip(7),
 * ipv6(7)), what a socket keeps of them before it has a pcb (stk__sock_apply_opts) and
 * after it loses it (stk__sock_take_opts), TCP_INFO, and uls_pending (FIONREAD). */
#include "sock.h"

#include <errno.h>
#include <limits.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>

#include "lwip/ip.h"
#include "lwip/priv/tcp_priv.h"

static struct ip_pcb *ipcb_of(struct stk_sock *s)
{
	return s->tcp ? (struct ip_pcb *)s->tcp : (struct ip_pcb *)s->udp;
}

static int get_int(const void *val, socklen_t len, int *out)
{
	if (!val || len < (socklen_t)sizeof(int))
		return -EINVAL;
	memcpy(out, val, sizeof(int));
	return 0;
}

static int get_timeval(const void *val, socklen_t len, struct timespec *out)
{
	struct timeval tv;

	if (!val || len < (socklen_t)sizeof(tv))
		return -EINVAL;
	memcpy(&tv, val, sizeof(tv));
	if (tv.tv_sec < 0 || tv.tv_usec < 0 || tv.tv_usec >= 1000000)
		return -EDOM;
	out->tv_sec = tv.tv_sec;
	out->tv_nsec = tv.tv_usec * 1000;
	return 0;
}

static int setopt(struct stk_sock *s, int level, int name, const void *val, socklen_t len)
{
	int v = 0, rc;

	if (level == SOL_SOCKET && (name == SO_RCVTIMEO || name == SO_SNDTIMEO))
		return get_timeval(val, len, name == SO_RCVTIMEO ? &s->rcvtimeo : &s->sndtimeo);
	if (level == SOL_SOCKET && name == SO_LINGER) {
		struct linger lg;
		if (!val || len < (socklen_t)sizeof(lg))
			return -EINVAL;
		memcpy(&lg, val, sizeof(lg));
		/* Deviation: the option is kept for getsockopt, but close() never blocks
		 * and a zero linger time does not turn close() into a reset; the stack
		 * finishes the close in the background (docs/limits.md). */
		s->linger = lg;
		return 0;
	}
	rc = get_int(val, len, &v);
	if (rc < 0)
		return rc;
	/* ipv6(7): IPV6_V6ONLY makes an AF_INET6 socket IPv6 only; fixed once it is bound.
	 * The pcb is not yet bound, so its address type can still change. */
	if (level == IPPROTO_IPV6 && name == IPV6_V6ONLY && s->family == AF_INET6) {
		struct tcp_pcb *t = s->tcp;
		if ((t && (t->local_port || t->state != CLOSED)) || (s->udp && s->udp->local_port))
			return -EINVAL;
		s->v6only = v != 0;
		u8_t type = stk__sock_iptype(s);
		if (t) {
			IP_SET_TYPE_VAL(t->local_ip, type);
			IP_SET_TYPE_VAL(t->remote_ip, type);
		}
		if (s->udp) {
			IP_SET_TYPE_VAL(s->udp->local_ip, type);
			IP_SET_TYPE_VAL(s->udp->remote_ip, type);
		}
		return 0;
	}
	/* Each option is recorded in s->opts and applied to the pcb if there is one: with no
	 * connection (reset, or not yet accepted by a new process) Linux still accepts them. */
	if (level == SOL_SOCKET) {
		switch (name) {
		case SO_REUSEADDR:
			s->opts.reuseaddr = v != 0;
			break;
		case SO_KEEPALIVE:
			s->opts.keepalive = v != 0;
			break;
		case SO_REUSEPORT:
			/* Takes effect at bind: ulsd lets several processes share the port. */
			s->reuseport = v != 0;
			return 0;
		case SO_BUSY_POLL:
			/* socket(7): how long a blocking receive polls the device before it
			 * sleeps (stack/drive.c; ULS_SPIN_US sets it for every socket).
			 * Deviation: Linux wants CAP_NET_ADMIN to raise it; here it spins
			 * only the caller's own thread, so anyone may. */
			if (v < 0)
				return -EINVAL;
			s->busy_poll_us = v > 1000000 ? 1000000u : (unsigned)v;
			return 0;
		case SO_RCVBUF:
			if (v < 0)
				return -EINVAL;
			/* socket(7): the receive buffer; a TCP connection's window is about the
			 * size asked for (Linux doubles the buffer for its overhead and offers
			 * about half as window). Here the window is capped at it (patch 0137),
			 * from STK_RCVBUF_MIN up to TCP_WND, the default. Few fast streams
			 * gain from a smaller one: their data stays in cache between the two
			 * ends (docs/benchmarks.md, "Stop 41"). Deviation: Linux bounds it by
			 * net.core.rmem_max unless SO_RCVBUFFORCE; here by TCP_WND. Datagram
			 * sockets keep their fixed queue (stack/dgram.c). */
			if (s->type == SOCK_STREAM)
				s->opts.rcv_wnd_cap = stk__rcv_wnd_cap((uint32_t)v);
			break;
		case SO_SNDBUF:
			if (v < 0)
				return -EINVAL;
			/* socket(7): the send buffer. A TCP socket holds at most this many
			 * octets written and not yet acknowledged (stk__stream_send), from
			 * STK_SNDBUF_MIN up to TCP_SND_BUF, the default; it is writable again
			 * when half of it is free. Deviation: Linux doubles the size for its
			 * bookkeeping and bounds it by net.core.wmem_max; here the payload is
			 * bounded by the size itself, up to TCP_SND_BUF. Datagram sockets
			 * send at once and keep nothing (their SO_SNDBUF reads 4 MiB
			 * whatever was set). */
			if (s->type != SOCK_STREAM)
				return 0;  /* Deviation: kept at 4 MiB for getsockopt */
			s->opts.snd_buf_cap = stk__snd_buf_cap((uint32_t)v);
			/* A raised bound may make room now: tell a blocked sender and the
			 * poll sets, as Linux's setsockopt calls sk_write_space. */
			if (s->tcp && s->state == STK_S_CONNECTED &&
			    stk__stream_has_room(s->tcp, s->opts.snd_buf_cap)) {
				bool edge = s->nospace;
				s->nospace = false;
				stk__sock_signal_ev(s, edge ? POLLOUT : 0);
			}
			return 0;
		default:
			return -ENOPROTOOPT;
		}
	} else if (level == IPPROTO_IP && name == IP_TOS) {
		s->opts.tos = (uint8_t)(v & 0xfc);  /* Linux keeps the ECN bits its own */
	} else if (level == IPPROTO_TCP && s->type == SOCK_STREAM) {
		switch (name) {
		case TCP_CORK:
			/* tcp(7): hold partial segments while corked; uncorking sends them.
			 * Deviation: Linux also sends them after 200 ms; here they wait for
			 * the uncork, or for the next ACK to carry them. */
			s->cork = v != 0;
			if (!s->cork && s->tcp && s->state == STK_S_CONNECTED)
				tcp_output(s->tcp);
			return 0;
		case TCP_NODELAY:
			s->opts.nodelay = v != 0;
			break;
		case TCP_KEEPIDLE:
		case TCP_KEEPINTVL:
			if (v < 1 || v > 32767)
				return -EINVAL;
			if (name == TCP_KEEPIDLE)
				s->opts.keep_idle_s = (uint32_t)v;
			else
				s->opts.keep_intvl_s = (uint32_t)v;
			break;
		case TCP_KEEPCNT:
			if (v < 1 || v > 127)
				return -EINVAL;
			s->opts.keep_cnt = (uint32_t)v;
			break;
		case TCP_USER_TIMEOUT:
			/* tcp(7): milliseconds, 0 for the system's retransmission counts;
			 * negative is EINVAL, as Linux (patch 0138) */
			if (v < 0)
				return -EINVAL;
			s->opts.user_timeout_ms = (uint32_t)v;
			break;
		default:
			return -ENOPROTOOPT;
		}
	} else {
		return -ENOPROTOOPT;
	}
	stk__sock_apply_opts(s);
	return 0;
}

/* Give the socket's pcb the options recorded in s->opts. A listening pcb is lwIP's smaller
 * struct tcp_pcb_listen, without the flags and keep-alive fields: only its so_options and
 * tos are written, and the rest reach each accepted connection through on_accept. */
void stk__sock_apply_opts(struct stk_sock *s)
{
	struct ip_pcb *pcb = ipcb_of(s);
	const struct stk_opts *o = &s->opts;

	if (!pcb)
		return;
	if (o->reuseaddr)
		ip_set_option(pcb, SOF_REUSEADDR);
	else
		ip_reset_option(pcb, SOF_REUSEADDR);
	if (o->keepalive)
		ip_set_option(pcb, SOF_KEEPALIVE);
	else
		ip_reset_option(pcb, SOF_KEEPALIVE);
	pcb->tos = o->tos;
	if (s->tcp)
		tcp_set_rcv_wnd_cap(s->tcp, o->rcv_wnd_cap);  /* a listener's reaches its children */
	if (!s->tcp || s->tcp->state == LISTEN)
		return;
	if (o->nodelay)
		tcp_nagle_disable(s->tcp);
	else
		tcp_nagle_enable(s->tcp);
	s->tcp->keep_idle = o->keep_idle_s * 1000u;
	s->tcp->keep_intvl = o->keep_intvl_s * 1000u;
	s->tcp->keep_cnt = o->keep_cnt;
	s->tcp->user_timeout = o->user_timeout_ms;
}

/* The other way: a connection handed over from another process (handoff.c) arrives with
 * the options its giver had set, in the pcb; they become this socket's. */
void stk__sock_take_opts(struct stk_sock *s, const struct tcp_pcb *pcb)
{
	struct stk_opts *o = &s->opts;

	o->reuseaddr = ip_get_option(pcb, SOF_REUSEADDR) != 0;
	o->keepalive = ip_get_option(pcb, SOF_KEEPALIVE) != 0;
	o->tos = pcb->tos;
	o->nodelay = tcp_nagle_disabled(pcb);
	o->keep_idle_s = pcb->keep_idle / 1000u;
	o->keep_intvl_s = pcb->keep_intvl / 1000u;
	o->keep_cnt = pcb->keep_cnt;
	o->rcv_wnd_cap = pcb->rcv_wnd_cap;
	o->user_timeout_ms = pcb->user_timeout;
}

int uls_setsockopt(int sd, int level, int name, const void *val, socklen_t len)
{
	stk__lock();
	struct stk_sock *s = stk__sock_enter(sd);
	int rc = s ? setopt(s, level, name, val, len) : -EBADF;
	if (s)
		stk__sock_leave(s);
	stk__unlock();
	return rc;
}

static int getopt_int(struct stk_sock *s, int level, int name, int *v)
{
	const struct stk_opts *o = &s->opts;

	if (level == SOL_SOCKET) {
		switch (name) {
		case SO_TYPE:      *v = s->type; return 0;
		case SO_DOMAIN:    *v = s->family; return 0;
		case SO_ERROR:     *v = -s->err; s->err = 0; return 0;
		/* A TCP socket's: twice its window's cap (TCP_WND by default), as Linux reports
		 * twice what it was given. */
		case SO_RCVBUF:    *v = s->type != SOCK_STREAM ? 4 << 20 :
					2 * (int)(o->rcv_wnd_cap ? o->rcv_wnd_cap : TCP_WND);
				   return 0;
		/* As SO_RCVBUF: twice the bound (TCP_SND_BUF by default), as Linux reports
		 * twice what it was given. */
		case SO_SNDBUF:    *v = s->type != SOCK_STREAM ? (int)TCP_SND_BUF :
					2 * (int)(o->snd_buf_cap ? o->snd_buf_cap : TCP_SND_BUF);
				   return 0;
		case SO_REUSEADDR: *v = o->reuseaddr; return 0;
		case SO_KEEPALIVE: *v = o->keepalive; return 0;
		case SO_ACCEPTCONN: *v = s->state == STK_S_LISTEN; return 0;
		case SO_PROTOCOL:  *v = s->type == SOCK_STREAM ? IPPROTO_TCP : IPPROTO_UDP; return 0;
		case SO_REUSEPORT: *v = s->reuseport; return 0;
		case SO_BUSY_POLL: *v = (int)s->busy_poll_us; return 0;
		default:           return -ENOPROTOOPT;
		}
	}
	if (level == IPPROTO_TCP && s->type == SOCK_STREAM) {
		switch (name) {
		case TCP_NODELAY:   *v = o->nodelay; return 0;
		case TCP_CORK:      *v = s->cork; return 0;
		case TCP_KEEPIDLE:  *v = (int)o->keep_idle_s; return 0;
		case TCP_KEEPINTVL: *v = (int)o->keep_intvl_s; return 0;
		case TCP_KEEPCNT:   *v = (int)o->keep_cnt; return 0;
		case TCP_USER_TIMEOUT: *v = (int)o->user_timeout_ms; return 0;
		case TCP_MAXSEG:
			/* Without a connection, RFC 9293 §3.7.1's default send MSS, as Linux. */
			*v = s->tcp && s->tcp->state != LISTEN ? s->tcp->mss : 536;
			return 0;
		default:            return -ENOPROTOOPT;
		}
	}
	if (level == IPPROTO_IP && name == IP_TOS) {
		*v = o->tos;
		return 0;
	}
	return -ENOPROTOOPT;
}

/* TCP_INFO: what lwIP knows, in Linux's layout; the rest stays zero. */
static void fill_tcp_info(const struct stk_sock *s, struct tcp_info *ti)
{
	static const u8_t linux_state[] = {
		[CLOSED] = 7, [LISTEN] = 10, [SYN_SENT] = 2, [SYN_RCVD] = 3,
		[ESTABLISHED] = 1, [FIN_WAIT_1] = 4, [FIN_WAIT_2] = 5, [CLOSE_WAIT] = 8,
		[CLOSING] = 11, [LAST_ACK] = 9, [TIME_WAIT] = 6,
	};
	const struct tcp_pcb *p = s->tcp;

	memset(ti, 0, sizeof(*ti));
	if (!p) {
		ti->tcpi_state = 7;  /* TCP_CLOSE */
		return;
	}
	ti->tcpi_state = p->state <= TIME_WAIT ? linux_state[p->state] : 7;
	if (p->state == LISTEN)
		return;
	ti->tcpi_snd_mss = p->mss;
	ti->tcpi_rcv_mss = p->mss;
	ti->tcpi_retransmits = p->nrtx;
	ti->tcpi_total_retrans = p->nrtx;
	/* lwIP keeps RTO in slow-timer ticks and the smoothed RTT scaled by 8 (in ticks). */
	ti->tcpi_rto = (u32_t)p->rto * TCP_SLOW_INTERVAL * 1000u;
	ti->tcpi_rtt = (u32_t)(p->sa >> 3) * TCP_SLOW_INTERVAL * 1000u;
	ti->tcpi_rttvar = (u32_t)(p->sv >> 2) * TCP_SLOW_INTERVAL * 1000u;
	ti->tcpi_snd_cwnd = p->mss ? p->cwnd / p->mss : 0;
	ti->tcpi_snd_ssthresh = p->mss ? p->ssthresh / p->mss : 0;
	ti->tcpi_snd_wscale = p->snd_scale;
	ti->tcpi_rcv_wscale = p->rcv_scale;
	ti->tcpi_rcv_space = p->rcv_wnd;
	ti->tcpi_unacked = p->snd_queuelen;
}

int uls_pending(int sd)
{
	stk__lock();
	struct stk_sock *s = stk__sock_enter(sd);
	int rc;
	if (!s)
		rc = -EBADF;
	else if (s->state == STK_S_LISTEN)
		rc = -EINVAL;
	else if (s->type == SOCK_DGRAM)
		/* FIONREAD on a UDP socket: the size of the next datagram (udp(7)). */
		rc = s->rxq.count ? (int)(stk__rxq_head(&s->rxq)->p->tot_len) : 0;
	else
		rc = s->rxq.bytes > INT_MAX ? INT_MAX : (int)s->rxq.bytes;
	if (s)
		stk__sock_leave(s);
	stk__unlock();
	return rc;
}

/* The options whose value is a structure; Linux copies out at most *len bytes. */
static int getopt_struct(int sd, int level, int name, void *val, socklen_t *len)
{
	union {
		struct linger lg;
		struct timeval tv;
		struct tcp_info ti;
	} u;
	size_t n;

	memset(&u, 0, sizeof(u));
	stk__lock();
	struct stk_sock *s = stk__sock_enter(sd);
	if (!s) {
		stk__unlock();
		return -EBADF;
	}
	if (level == IPPROTO_TCP) {
		if (s->type != SOCK_STREAM) {
			stk__sock_leave(s);
			stk__unlock();
			return -EOPNOTSUPP;
		}
		fill_tcp_info(s, &u.ti);
		n = sizeof(u.ti);
	} else if (name == SO_LINGER) {
		u.lg = s->linger;
		n = sizeof(u.lg);
	} else {
		const struct timespec *t = name == SO_RCVTIMEO ? &s->rcvtimeo : &s->sndtimeo;
		u.tv.tv_sec = t->tv_sec;
		u.tv.tv_usec = t->tv_nsec / 1000;
		n = sizeof(u.tv);
	}
	stk__sock_leave(s);
	stk__unlock();
	if ((size_t)*len < n)
		n = (size_t)*len;
	memcpy(val, &u, n);
	*len = (socklen_t)n;
	return 0;
}

int uls_getsockopt(int sd, int level, int name, void *val, socklen_t *len)
{
	int v = 0, rc;

	if (!val || !len)
		return -EFAULT;
	if ((level == SOL_SOCKET && (name == SO_LINGER || name == SO_RCVTIMEO ||
				     name == SO_SNDTIMEO)) ||
	    (level == IPPROTO_TCP && name == TCP_INFO))
		return getopt_struct(sd, level, name, val, len);
	if (*len < (socklen_t)sizeof(int))
		return -EINVAL;
	stk__lock();
	struct stk_sock *s = stk__sock_enter(sd);
	rc = s ? getopt_int(s, level, name, &v) : -EBADF;
	if (s)
		stk__sock_leave(s);
	stk__unlock();
	if (rc == 0) {
		memcpy(val, &v, sizeof(v));
		*len = sizeof(v);
	}
	return rc;
}

