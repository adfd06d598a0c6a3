/* UDP sockets on lwIP's raw UDP API (RFC 768; RFC 1122 §4.1.3). */
#include "sock.h"

#include <errno.h>
#include <string.h>

#include "lwip/udp.h"
#include "netif/ctl/ctl.h"

/* Datagrams queued for the application beyond this are dropped and counted, as a kernel
 * drops on a full SO_RCVBUF. */
#define DGRAM_RCVBUF (4u << 20)
/* 65535 - 20 (IPv4 header) - 8 (UDP header) */
#define DGRAM_MAX 65507u

static void on_recv(void *arg, struct udp_pcb *pcb, struct pbuf *p,
		    const ip_addr_t *addr, u16_t port)
{
	struct stk_sock *s = arg;

	(void)pcb;
	if (!s || s->rxq.bytes + p->tot_len > DGRAM_RCVBUF ||
	    stk__rxq_push(&s->rxq, p, addr, port) < 0) {
		stk__count(STK_CNT_UDP_RCVBUF_FULL);
		pbuf_free(p);
		return;
	}
	stk__sock_signal_ev(s, POLLIN);
}

/* RFC 1122 §4.1.3.3: the error is the socket's pending error (SO_ERROR), reported by its
 * next recv or send, once, as Linux's sk_err; a recv blocked on the socket wakes for it.
 * Deviation: poll reports it as readable, not POLLERR (the readiness mirror's error state
 * is for good, docs/compatibility.md). */
void stk__dgram_icmp_error(void *arg, int err)
{
	struct stk_sock *s = arg;

	if (!s || s->state == STK_S_DEAD)
		return;
	s->err = err;
	stk__sock_signal(s);
}

/* The pending error, taken (Linux's sock_error). */
static int take_error(struct stk_sock *s)
{
	int rc = s->err;

	s->err = 0;
	return rc;
}

int stk__dgram_open(struct stk_sock *s)
{
	s->udp = udp_new_ip_type(stk__sock_iptype(s));
	if (!s->udp)
		return -ENOMEM;
	udp_recv(s->udp, on_recv, s);
	return 0;
}

int stk__dgram_bind(struct stk_sock *s, const ip_addr_t *ip, uint16_t port)
{
	int rc = stk__sock_ctl_begin(s);

	if (rc < 0)
		return rc;
	if (!s->udp || s->udp->local_port) {
		stk__sock_ctl_end(s);
		return s->udp ? -EINVAL : -EBADF;
	}
	unsigned flags = (ip_get_option(s->udp, SOF_REUSEADDR) ? CTL_F_REUSEADDR : 0) |
			 (s->reuseport ? CTL_F_REUSEPORT : 0) |
			 (s->share_inherited ? CTL_F_INHERIT : 0);
	int p = stk__ep_bind(IPPROTO_UDP, port, flags | STK_V6FLAGS(s), s->family);  /* the core lock is released meanwhile */
	rc = stk__sock_ctl_end(s);
	if (p < 0)
		return rc < 0 ? rc : p;
	if (rc == 0 && !s->udp)
		rc = -EBADF;
	if (rc < 0) {
		stk__ep_unbind(IPPROTO_UDP, (uint16_t)p, s->family, STK_V6FLAGS(s));  /* closed meanwhile: give it back */
		return rc;
	}
	rc = stk__err_to_errno(udp_bind(s->udp, ip, (u16_t)p));
	if (rc < 0)
		stk__ep_unbind(IPPROTO_UDP, (uint16_t)p, s->family, STK_V6FLAGS(s));
	else if (stk__leased())
		s->bound_port = (uint16_t)p;
	return rc;
}

/* On a node, a socket that sends before binding gets its port from ulsd, not from lwIP,
 * so that the filter delivers the replies and lets the datagrams out. */
static int autobind(struct stk_sock *s)
{
	ip_addr_t any;

	stk__sock_any(s, &any);
	/* Another thread's bind may be with ulsd right now: its port is this one's too. */
	while (s->ctl_busy && !s->closed)
		stk__sock_sleep(s, NULL);
	if (s->closed || !s->udp)
		return -EBADF;
	if (s->udp->local_port || !stk__leased())
		return 0;
	return stk__dgram_bind(s, &any, 0);
}

int stk__dgram_connect(struct stk_sock *s, const ip_addr_t *ip, uint16_t port)
{
	/* connect() to AF_INET INADDR_ANY:0 dissolves the association (like AF_UNSPEC). */
	if (ip_addr_isany(ip) && port == 0) {
		udp_disconnect(s->udp);
		s->state = STK_S_NEW;
		return 0;
	}
	int rc = autobind(s);
	if (rc < 0)
		return rc;
	rc = stk__err_to_errno(udp_connect(s->udp, ip, port));
	if (rc == 0)
		s->state = STK_S_CONNECTED;
	return rc;
}

ssize_t stk__dgram_sendto(struct stk_sock *s, const void *buf, size_t len, int flags,
			  const ip_addr_t *ip, uint16_t port, bool has_to)
{
	struct pbuf *p;
	err_t err;

	(void)flags;
	if (len > DGRAM_MAX)
		return -EMSGSIZE;
	if (s->state == STK_S_DEAD)
		return s->err ? s->err : -ENETDOWN;
	if (s->err)
		return take_error(s);
	if (!has_to && s->state != STK_S_CONNECTED)
		return -EDESTADDRREQ;
	if (has_to && port == 0)
		return -EINVAL;
	int rc = autobind(s);
	if (rc < 0)
		return rc;
	p = pbuf_alloc(PBUF_TRANSPORT, (u16_t)len, PBUF_RAM);
	if (!p)
		return -ENOBUFS;
	if (len)
		memcpy(p->payload, buf, len);
	if (has_to) {
		err = udp_sendto(s->udp, p, ip, port);
	} else {
		err = udp_send(s->udp, p);
	}
	pbuf_free(p);
	return err == ERR_OK ? (ssize_t)len : stk__err_to_errno(err);
}

ssize_t stk__dgram_recvfrom(struct stk_sock *s, void *buf, size_t len, int flags,
			    ip_addr_t *ip, uint16_t *port)
{
	bool nonblock = s->nonblock || (flags & MSG_DONTWAIT);
	struct stk_rxent *e;

	for (;;) {
		if (s->closed)
			return -EBADF;
		/* A pending error comes first, even before queued datagrams (Linux's
		 * __skb_recv_udp). */
		if (s->err)
			return take_error(s);
		if ((e = stk__rxq_head(&s->rxq)))
			break;
		if (nonblock)
			return -EAGAIN;
		if (stk__sock_sleep(s, &s->rcvtimeo) == -ETIMEDOUT)
			return -EAGAIN;
	}
	size_t dlen = e->p->tot_len;
	size_t n = len < dlen ? len : dlen;
	pbuf_copy_partial(e->p, buf, (u16_t)n, 0);
	*ip = e->addr;
	*port = e->port;
	if (!(flags & MSG_PEEK))
		stk__rxq_pop(&s->rxq);  /* the rest of a truncated datagram is discarded */
	return (flags & MSG_TRUNC) ? (ssize_t)dlen : (ssize_t)n;
}

void stk__dgram_close(struct stk_sock *s)
{
	if (s->udp) {
		udp_remove(s->udp);
		s->udp = NULL;
	}
	if (s->bound_port) {
		stk__ep_unbind(IPPROTO_UDP, s->bound_port, s->family, STK_V6FLAGS(s));
		s->bound_port = 0;
	}
	s->state = STK_S_DEAD;
}
