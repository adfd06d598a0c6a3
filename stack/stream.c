/* TCP sockets on lwIP's raw TCP API.
 *
 * Read first: RFC 9293 §3.9 (the user interface: OPEN, SEND, RECEIVE, CLOSE, ABORT),
 * RFC 1122 §4.2.2.13 (closing with unread data).
 *
 * lwIP keeps the protocol state; this file keeps what the application sees: queued received
 * data, pending errors, the accept queue, and who is waiting for what.
 */
#include "sock.h"

#include <errno.h>
#include <stdlib.h>

#include "lwip/priv/tcp_priv.h"
#include "lwip/tcp.h"
#include "netif/ctl/ctl.h"

/* lwIP's tcp_write() takes a 16-bit length. */
#define WRITE_CHUNK 0xffffu

static err_t on_recv(void *arg, struct tcp_pcb *pcb, struct pbuf *p, err_t err);
static err_t on_sent(void *arg, struct tcp_pcb *pcb, u16_t len);
static void on_err(void *arg, err_t err);
static int take_err(struct stk_sock *s, int fallback);
static void drop_unaccepted(struct stk_sock *s, bool rst);

static void attach(struct stk_sock *s, struct tcp_pcb *pcb)
{
	s->tcp = pcb;
	tcp_arg(pcb, s);
	tcp_recv(pcb, on_recv);
	tcp_sent(pcb, on_sent);
	tcp_err(pcb, on_err);
	stk__sock_apply_opts(s);
}

static void detach(struct tcp_pcb *pcb)
{
	tcp_arg(pcb, NULL);
	if (pcb->state == LISTEN) {
		/* a listening pcb has only the accept callback (lwIP asserts on the others) */
		tcp_accept(pcb, NULL);
		return;
	}
	tcp_recv(pcb, NULL);
	tcp_sent(pcb, NULL);
	tcp_err(pcb, NULL);
}

static err_t on_recv(void *arg, struct tcp_pcb *pcb, struct pbuf *p, err_t err)
{
	struct stk_sock *s = arg;

	(void)err;
	if (!s) {
		if (p) {
			tcp_recved(pcb, p->tot_len);
			pbuf_free(p);
		}
		return ERR_OK;
	}
	if (!p) {
		s->rx_eof = true;  /* FIN: RFC 9293 §3.10.7.4, eighth step */
	} else if (s->rd_shut) {
		/* Data after shutdown(SHUT_RD) is discarded, as Linux does. */
		tcp_recved(pcb, p->tot_len);
		pbuf_free(p);
		return ERR_OK;
	} else if (stk__rxq_push_stream(&s->rxq, p) < 0) {
		/* lwIP keeps refused data and offers it again from its timer. */
		stk__count(STK_CNT_RX_NOMEM);
		return ERR_MEM;
	}
	stk__sock_signal_ev(s, p ? POLLIN : POLLIN | POLLRDHUP);
	return ERR_OK;
}

/* ACKed data freed send buffer. A blocked sender is woken only once the socket would
 * poll writable again (half the buffer free), as Linux's sk_stream_write_space() does:
 * woken on every ACK, it wrote a few KiB per wake-up and slept again, two context
 * switches per ACK. A buffer that empties completely is always past the mark. */
static err_t on_sent(void *arg, struct tcp_pcb *pcb, u16_t len)
{
	struct stk_sock *s = arg;

	(void)len;
	if (s)
		s->icmp_err = 0;  /* progress: an older soft error no longer explains anything */
	if (s && stk__stream_has_room(pcb, s->opts.snd_buf_cap)) {
		/* Freed space is an event for user-level epoll sets only when the socket was
		 * seen without it (send filled it, or poll found it not writable), as Linux's
		 * tcp_check_space wakes only under SOCK_NOSPACE: an EPOLLET set is not told
		 * EPOLLOUT again for every ACK of a socket that never filled its buffer. */
		bool edge = s->nospace;
		s->nospace = false;
		stk__sock_signal_ev(s, edge ? POLLOUT : 0);
	}
	return ERR_OK;
}

/* lwIP has already freed the pcb when it calls this. */
static void on_err(void *arg, err_t err)
{
	struct stk_sock *s = arg;

	if (!s)
		return;
	s->tcp = NULL;
	/* lwIP aborts a connection whose retransmissions ran out (ERR_ABRT): ETIMEDOUT, or the
	 * last ICMP error it got meanwhile (RFC 1122 §4.2.3.9, soft errors; Linux reports
	 * sk_err_soft the same way). An ICMP hard error aborts with its own error. */
	int timeout = s->icmp_err ? s->icmp_err : -ETIMEDOUT;
	if (s->state == STK_S_CONNECTING)
		/* RFC 9293 §3.10.7.3: a RST in SYN-SENT means "connection reset"; for connect()
		 * that is ECONNREFUSED, and lwIP aborts a SYN that was never answered. */
		s->err = err == ERR_RST ? -ECONNREFUSED : err == ERR_ABRT ? timeout :
			 stk__err_to_errno(err);
	else if (err == ERR_CLSD)
		/* Both FINs were exchanged and the pcb left LAST-ACK or TIME-WAIT (patch 0080):
		 * nothing went wrong. recv() reads the end of the stream, send() gets EPIPE. */
		s->err = 0;
	else
		s->err = err == ERR_ABRT ? timeout : stk__err_to_errno(err);
	s->state = STK_S_DEAD;
	stk__sock_signal(s);
}

void stk__stream_icmp_error(struct tcp_pcb *pcb, int err)
{
	struct stk_sock *s = pcb->callback_arg;

	if (s && s->tcp == pcb)
		s->icmp_err = err;
}

/* Keep the connection's local address for getsockname after the pcb is gone. */
static void remember_name(struct stk_sock *s, const struct tcp_pcb *pcb)
{
	ip_addr_copy(s->conn_ip, pcb->local_ip);
	s->conn_port = pcb->local_port;
}

static err_t on_connected(void *arg, struct tcp_pcb *pcb, err_t err)
{
	struct stk_sock *s = arg;

	if (s && err == ERR_OK) {
		s->icmp_err = 0;
		remember_name(s, pcb);
		s->state = STK_S_CONNECTED;
		stk__sock_signal_ev(s, POLLOUT);
	}
	return ERR_OK;
}

static err_t on_accept(void *arg, struct tcp_pcb *newpcb, err_t err)
{
	struct stk_sock *l = arg, *s;

	if (err != ERR_OK || !newpcb)
		return ERR_VAL;
	if (!l || l->acq_count >= l->acq_cap) {
		stk__count(STK_CNT_TCP_ACCEPTQ_FULL);
		tcp_abort(newpcb);
		return ERR_ABRT;
	}
	s = stk__sock_new(SOCK_STREAM);
	if (!s) {
		stk__count(STK_CNT_RX_NOMEM);
		tcp_abort(newpcb);
		return ERR_ABRT;
	}
	s->family = l->family;  /* names its addresses as the listener does */
	s->v6only = l->v6only;
	s->opts = l->opts;  /* accept(2) inherits the listener's options, as on Linux */
	attach(s, newpcb);
	remember_name(s, newpcb);
	s->state = STK_S_CONNECTED;
	stk__ep_accepted(newpcb);
	l->acq[(l->acq_head + l->acq_count++) % l->acq_cap] = s;
	/* Keep counting it against the listen backlog until the application accepts it, so
	 * that lwIP refuses new SYNs instead of growing the queue without bound. */
	tcp_backlog_delayed(newpcb);
	stk__sock_signal_ev(l, POLLIN);
	return ERR_OK;
}

int stk__stream_open(struct stk_sock *s)
{
	struct tcp_pcb *pcb = tcp_new_ip_type(stk__sock_iptype(s));

	if (!pcb)
		return -ENOMEM;
	attach(s, pcb);
	return 0;
}

int stk__stream_bind(struct stk_sock *s, const ip_addr_t *ip, uint16_t port)
{
	int rc = stk__sock_ctl_begin(s);

	if (rc < 0)
		return rc;
	if (!s->tcp || s->state != STK_S_NEW || s->tcp->local_port) {
		stk__sock_ctl_end(s);
		return -EINVAL;  /* already bound, or no longer new */
	}
	unsigned flags = (ip_get_option(s->tcp, SOF_REUSEADDR) ? CTL_F_REUSEADDR : 0) |
			 (s->reuseport ? CTL_F_REUSEPORT : 0) |
			 (s->share_inherited ? CTL_F_INHERIT : 0);
	int p = stk__ep_bind(IPPROTO_TCP, port, flags | STK_V6FLAGS(s), s->family);  /* the core lock is released meanwhile */
	rc = stk__sock_ctl_end(s);
	if (p < 0)
		return rc < 0 ? rc : p;
	if (rc == 0 && !s->tcp)
		rc = -EBADF;
	if (rc < 0) {
		stk__ep_unbind(IPPROTO_TCP, (uint16_t)p, s->family, STK_V6FLAGS(s));  /* closed meanwhile: give it back */
		return rc;
	}
	rc = stk__err_to_errno(tcp_bind(s->tcp, ip, (u16_t)p));
	if (rc < 0)
		stk__ep_unbind(IPPROTO_TCP, (uint16_t)p, s->family, STK_V6FLAGS(s));
	else if (stk__leased())
		s->bound_port = (uint16_t)p;
	return rc;
}

/* ulsd refused LISTEN: the socket goes back to a bound, new one (core lock held). */
static void unlisten(struct stk_sock *s, const ip_addr_t *local, uint16_t port)
{
	drop_unaccepted(s, true);
	free(s->acq);
	s->acq = NULL;
	s->acq_cap = s->acq_head = 0;
	if (s->tcp) {
		detach(s->tcp);
		tcp_close(s->tcp);  /* a listening pcb goes at once */
		s->tcp = NULL;
	}
	s->state = STK_S_NEW;
	struct tcp_pcb *pcb = tcp_new_ip_type(stk__sock_iptype(s));
	if (!pcb || tcp_bind(pcb, local, port) != ERR_OK) {
		/* Deviation: nothing left to listen or connect with; close() still gives the
		 * port back. */
		if (pcb)
			tcp_abort(pcb);
		s->state = STK_S_DEAD;
		s->err = -ENOMEM;
		return;
	}
	attach(s, pcb);
}

int stk__stream_listen(struct stk_sock *s, int backlog)
{
	struct tcp_pcb *lpcb;
	err_t err;
	int rc;

	if (s->state == STK_S_LISTEN)
		return 0;
	if (!s->tcp || s->state != STK_S_NEW)
		return -EINVAL;
	/* Linux clamps the backlog; lwIP's counter is 8 bits. */
	if (backlog < 1)
		backlog = 1;
	if (backlog > 255)
		backlog = 255;
	if (!s->tcp->local_port) {
		ip_addr_t any;
		stk__sock_any(s, &any);
		rc = stk__stream_bind(s, &any, 0);
		if (rc < 0 && !(rc == -EINVAL && s->tcp && s->tcp->local_port))
			return rc;  /* (EINVAL with a port: another thread bound it meanwhile) */
	}
	rc = stk__sock_ctl_begin(s);
	if (rc < 0)
		return rc;
	/* Another thread may have listened or connected while this one waited. */
	if (s->state == STK_S_LISTEN || !s->tcp || s->state != STK_S_NEW || !s->tcp->local_port) {
		rc = s->state == STK_S_LISTEN ? 0 : -EINVAL;
		stk__sock_ctl_end(s);
		return rc;
	}
	uint16_t port = s->tcp->local_port;
	ip_addr_t local = s->tcp->local_ip;
	/* Room for `backlog` waiting connections plus as many half-open ones: lwIP admits a
	 * SYN while fewer than `backlog` wait (stk__syn_admit), and the half-open ones it
	 * admitted complete later, each into this queue. Without the room, on_accept() had
	 * to reset connections the peer already saw established (issue 18). */
	s->acq = calloc((size_t)backlog * 2, sizeof(*s->acq));
	if (!s->acq) {
		stk__sock_ctl_end(s);
		return -ENOMEM;
	}
	s->acq_cap = (unsigned)backlog * 2;
	lpcb = tcp_listen_with_backlog_and_err(s->tcp, (u8_t)backlog, &err);
	if (!lpcb) {
		free(s->acq);
		s->acq = NULL;
		s->acq_cap = 0;
		stk__sock_ctl_end(s);
		return stk__err_to_errno(err);
	}
	s->tcp = lpcb;  /* lwIP freed the old pcb */
	tcp_arg(lpcb, s);
	tcp_accept(lpcb, on_accept);
	s->state = STK_S_LISTEN;
	/* lwIP listens before ulsd is told: from ulsd's LISTEN on, SYNs for the port may come
	 * here (at once for a member of a SO_REUSEPORT group), and with the core lock released
	 * for the round trip the stack processes them meanwhile; they must find the listener,
	 * not get a RST. */
	int lrc = stk__ep_listen(port, (s->reuseport ? CTL_F_REUSEPORT : 0) |
					   (s->share_inherited ? CTL_F_INHERIT : 0) | STK_V6FLAGS(s),
				 s->family);
	rc = stk__sock_ctl_end(s);
	if (rc < 0)
		return rc;  /* closed meanwhile: close() closed the listener and unbound the port */
	if (lrc < 0) {
		unlisten(s, &local, port);
		return lrc;
	}
	/* A thread that called accept meanwhile was not announced (stk__stream_accepting). */
	if (s->users > 1)
		stk__stream_accepting(s);
	return 0;
}

/* The process accepts on this listener: tell ulsd once (see stk__ep_accepting). */
void stk__stream_accepting(struct stk_sock *s)
{
	/* (Not before ulsd answered LISTEN: stk__stream_listen says it then.) */
	if (s->state == STK_S_LISTEN && !s->accepting && s->tcp && !s->ctl_busy) {
		s->accepting = true;
		stk__ep_accepting(s->tcp->local_port, s->family, STK_V6FLAGS(s));
	}
}

int stk__stream_accept(struct stk_sock *s, struct stk_sock **child)
{
	if (s->state != STK_S_LISTEN)
		return s->err ? take_err(s, -EINVAL) : -EINVAL;
	stk__stream_accepting(s);
	while (s->acq_count == 0) {
		if (s->closed)
			return -EBADF;
		if (s->nonblock)
			return -EAGAIN;
		if (stk__sock_sleep(s, &s->rcvtimeo) == -ETIMEDOUT)
			return -EAGAIN;
		if (s->state != STK_S_LISTEN)
			return s->err ? take_err(s, -EINVAL) : -EINVAL;
	}
	*child = s->acq[s->acq_head];
	s->acq_head = (s->acq_head + 1) % s->acq_cap;
	s->acq_count--;
	if ((*child)->tcp)
		tcp_backlog_accepted((*child)->tcp);
	return 0;
}

int stk__stream_connect(struct stk_sock *s, const ip_addr_t *ip, uint16_t port)
{
	err_t err;
	int rc;

	/* After a connect, bind or listen of another thread that is with ulsd right now. */
	while (s->ctl_busy && !s->closed)
		stk__sock_sleep(s, NULL);
	switch (s->state) {
	case STK_S_CONNECTED:
		return -EISCONN;
	case STK_S_CONNECTING:
		if (s->nonblock)
			return -EALREADY;
		break;
	case STK_S_LISTEN:
		return -EISCONN;
	case STK_S_DEAD:
		rc = s->err ? s->err : -ECONNABORTED;
		s->err = 0;
		return rc;
	case STK_S_NEW:
		if (!s->tcp)
			return -EINVAL;
		/* IPv6 only on a node that has it (a node of its own): ulsd's tuples are
		 * IPv4 (the control protocol's rip), and there is no route otherwise. */
		if (IP_IS_V6(ip) && !stk__node.has_ip6)
			return -ENETUNREACH;
		rc = stk__sock_ctl_begin(s);
		if (rc < 0)
			return rc;
		/* The core lock is released for the round trip. */
		rc = stk__ep_connect(s->tcp->local_port, ip, port);
		int now = stk__sock_ctl_end(s);
		if (rc < 0)
			return now < 0 ? now : rc;
		if (now == 0 && !s->tcp)
			now = -EBADF;
		if (now < 0) {
			/* Closed meanwhile: the tuple goes back to ulsd. */
			stk__ep_release((uint16_t)rc, ip, port);
			return now;
		}
		err = ERR_OK;
		if (!s->tcp->local_port && rc) {
			ip_addr_t any;
			stk__sock_any(s, &any);
			err = tcp_bind(s->tcp, &any, (u16_t)rc);
		}
		if (err == ERR_OK)
			err = tcp_connect(s->tcp, ip, port, on_connected);
		if (err != ERR_OK) {
			stk__ep_release((uint16_t)rc, ip, port);
			return stk__err_to_errno(err);
		}
		stk__ep_connected(s->tcp);
		s->state = STK_S_CONNECTING;
		if (s->nonblock)
			return -EINPROGRESS;
		break;
	}
	while (s->state == STK_S_CONNECTING) {
		if (s->closed)
			return -EBADF;
		if (stk__sock_sleep(s, &s->sndtimeo) == -ETIMEDOUT)
			return -EINPROGRESS;  /* Linux: the connect goes on in the background */
	}
	if (s->state == STK_S_CONNECTED)
		return 0;
	rc = s->err ? s->err : -ECONNABORTED;
	s->err = 0;
	return rc;
}

/* An error owed to the caller of a failed call, reported once (like SO_ERROR). */
static int take_err(struct stk_sock *s, int fallback)
{
	if (stk__node.lost)
		return -ENETDOWN;  /* sticky: the node is gone for every call */
	int rc = s->err ? s->err : fallback;

	s->err = 0;
	return rc;
}

ssize_t stk__stream_send(struct stk_sock *s, const void *buf, size_t len, int flags)
{
	const uint8_t *p = buf;
	size_t sent = 0;
	bool nonblock = s->nonblock || (flags & MSG_DONTWAIT);
	int rc = 0;

	if (s->state == STK_S_CONNECTING)
		return nonblock ? -EAGAIN : -ENOTCONN;
	if (s->state != STK_S_CONNECTED && s->state != STK_S_DEAD)
		return -ENOTCONN;
	if (s->wr_shut)
		return -EPIPE;
	while (sent < len) {
		if (!s->tcp) {
			/* after a partial send the error stays pending for the next call */
			rc = sent ? 0 : take_err(s, -EPIPE);
			break;
		}
		size_t room = tcp_sndbuf(s->tcp);
		u32_t ns = stk__stream_notsent(s->tcp), ns_max = stk__stream_notsent_max(s->tcp);
		if (room > (ns < ns_max ? ns_max - ns : 0))
			room = ns < ns_max ? ns_max - ns : 0;
		uint32_t cap = s->opts.snd_buf_cap, q = stk__stream_queued(s->tcp);
		if (cap && room > (q < cap ? cap - q : 0))
			room = q < cap ? cap - q : 0;   /* SO_SNDBUF: at most cap unacknowledged */
		size_t n = len - sent;
		if (n > room)
			n = room;
		if (n > WRITE_CHUNK)
			n = WRITE_CHUNK;
		err_t err = ERR_MEM;
		while (n > 0) {
			u8_t wflags = TCP_WRITE_FLAG_COPY;
			if ((flags & MSG_MORE) || s->cork || sent + n < len)
				wflags |= TCP_WRITE_FLAG_MORE;
			err = tcp_write(s->tcp, p + sent, (u16_t)n, wflags);
			/* lwIP refuses a whole write that needs more segments than its queue holds
			 * (TCP_SND_QUEUELEN). A peer whose largest window is tiny gets segments of
			 * one or two octets (RFC 9293 §3.8.6.2.1), so even a small write is too many
			 * and, with nothing queued, no ACK would ever make room: write less. */
			if (err != ERR_MEM || n == 1 || s->tcp->snd_queuelen > 0)
				break;
			n /= 2;
		}
		if (err == ERR_OK) {
			sent += n;
			continue;
		}
		if (err != ERR_MEM) {
			rc = stk__err_to_errno(err);
			break;
		}
		/* The send buffer is full: push out what is queued and wait for ACKs. */
		s->nospace = true;
		tcp_output(s->tcp);
		/* Held back by the unsent bytes alone, and that output sent enough of them:
		 * write more now (each pass sends, so this ends within the window). */
		if (ns >= ns_max && s->tcp && stk__stream_notsent(s->tcp) < ns &&
		    stk__stream_has_room(s->tcp, s->opts.snd_buf_cap)) {
			s->nospace = false;
			continue;
		}
		if (nonblock) {
			rc = -EAGAIN;
			break;
		}
		if (stk__sock_sleep(s, &s->sndtimeo) == -ETIMEDOUT) {
			rc = -EAGAIN;
			break;
		}
		if (s->closed) {
			rc = -EBADF;
			break;
		}
	}
	/* Corked (TCP_CORK), what was written waits for the uncork, a full send buffer, or
	 * an incoming ACK, which makes lwIP send what the window allows. */
	if (s->tcp && !s->cork)
		tcp_output(s->tcp);
	return sent ? (ssize_t)sent : rc;
}

/* Tell lwIP the application took n bytes: this opens the receive window again. */
static void consumed(struct stk_sock *s, size_t n)
{
	while (s->tcp && n) {
		u16_t step = n > 0xffff ? 0xffff : (u16_t)n;
		tcp_recved(s->tcp, step);
		n -= step;
	}
}

ssize_t stk__stream_recv(struct stk_sock *s, void *buf, size_t len, int flags)
{
	bool peek = flags & MSG_PEEK;
	bool waitall = (flags & MSG_WAITALL) && !peek;
	bool nonblock = s->nonblock || (flags & MSG_DONTWAIT);
	size_t got = 0;

	if (s->state == STK_S_LISTEN || s->state == STK_S_NEW)
		return -ENOTCONN;
	if (len == 0)
		return 0;
	for (;;) {
		if (s->rxq.bytes) {
			size_t n = stk__rxq_read(&s->rxq, (uint8_t *)buf + got, len - got, peek);
			if (!peek)
				consumed(s, n);
			got += n;
			if (got == len || !waitall)
				return (ssize_t)got;
		}
		if (s->rx_eof || s->rd_shut)
			return (ssize_t)got;
		if (s->state == STK_S_DEAD)
			return got ? (ssize_t)got : take_err(s, 0);
		if (s->closed)
			return got ? (ssize_t)got : -EBADF;
		if (nonblock)
			return got ? (ssize_t)got : -EAGAIN;
		if (stk__sock_sleep(s, &s->rcvtimeo) == -ETIMEDOUT)
			return got ? (ssize_t)got : -EAGAIN;
	}
}

int stk__stream_shutdown(struct stk_sock *s, bool rd, bool wr)
{
	if (s->state != STK_S_CONNECTED)
		return -ENOTCONN;
	if (rd) {
		s->rd_shut = true;
		consumed(s, s->rxq.bytes);
		stk__rxq_clear(&s->rxq);
	}
	if (wr && !s->wr_shut) {
		s->wr_shut = true;
		if (s->tcp) {
			err_t err = tcp_shutdown(s->tcp, 0, 1);  /* queues our FIN */
			if (err != ERR_OK)
				return stk__err_to_errno(err);
			tcp_output(s->tcp);
		}
	}
	stk__sock_signal(s);
	return 0;
}

static void close_pcb(struct tcp_pcb *pcb, bool unread)
{
	detach(pcb);
	/* RFC 1122 §4.2.2.13: closing with received data the application never read means
	 * that data is lost; send a RST so the peer knows (Linux does the same). */
	if (unread && pcb->state != LISTEN) {
		tcp_abort(pcb);
		return;
	}
	if (tcp_close(pcb) != ERR_OK)
		tcp_abort(pcb);
}

/* A listener goes away with connections it never handed to accept(): reset them (rst), or,
 * when nothing can reach the wire any more, just forget them. */
static void drop_unaccepted(struct stk_sock *s, bool rst)
{
	while (s->acq_count) {
		struct stk_sock *c = s->acq[s->acq_head];
		s->acq_head = (s->acq_head + 1) % s->acq_cap;
		s->acq_count--;
		if (c->tcp) {
			detach(c->tcp);
			tcp_abandon(c->tcp, rst);
			c->tcp = NULL;
		}
		c->closed = true;
		stk__sock_release(c);
	}
}

/* ulsd is gone: forget every connection without a word on the wire (nothing would carry
 * it) and let blocked callers return ENETDOWN. */
void stk__stream_lost(struct stk_sock *s)
{
	drop_unaccepted(s, false);
	if (s->tcp) {
		detach(s->tcp);
		if (s->tcp->state == LISTEN)
			tcp_close(s->tcp);
		else
			tcp_abandon(s->tcp, 0);
		s->tcp = NULL;
	}
}

/* The connection now lives in another process (handoff.c): drop the pcb without a word on
 * the wire and without telling ulsd, which has moved the tuple already. */
void stk__stream_forget(struct stk_sock *s)
{
	struct tcp_pcb *pcb = s->tcp;

	if (!pcb)
		return;
	detach(pcb);
	stk__ep_forget(pcb);
	tcp_clear_flags(pcb, TF_ACK_DELAY | TF_ACK_NOW);
	TCP_PCB_REMOVE_ACTIVE(pcb);
	tcp_free(pcb);
	s->tcp = NULL;
	s->state = STK_S_DEAD;
}

/* End the connection with a RST (a move between processes that could not keep every
 * byte): the peer must not take it for a clean end. */
void stk__stream_abort(struct stk_sock *s)
{
	if (s->tcp) {
		detach(s->tcp);
		tcp_abort(s->tcp);
		s->tcp = NULL;
	}
	s->state = STK_S_DEAD;
	s->err = -ECONNABORTED;
}

/* A connection that came from another process (handoff.c), registered already. */
void stk__stream_adopted(struct stk_sock *s, struct tcp_pcb *pcb)
{
	stk__sock_take_opts(s, pcb);  /* before attach() applies them */
	attach(s, pcb);
	remember_name(s, pcb);
	stk__ep_connected(pcb);
	s->state = STK_S_CONNECTED;
	s->err = 0;
}

void stk__stream_close(struct stk_sock *s)
{
	drop_unaccepted(s, true);
	if (s->tcp) {
		close_pcb(s->tcp, s->rxq.bytes > 0);
		s->tcp = NULL;
	}
	if (s->bound_port) {
		stk__ep_unbind(IPPROTO_TCP, s->bound_port, s->family, STK_V6FLAGS(s));
		s->bound_port = 0;
	}
	s->state = STK_S_DEAD;
}
