/* Host-wide endpoints: on a node, the port space and the filter rules belong to ulsd, so
 * the socket layer asks it before binding, listening and connecting, and tells it when a
 * connection's state is gone. Without a lease (a TAP node of its own) every function here
 * is a no-op and lwIP's own port allocation is used.
 *
 * BIND, LISTEN and CONNECT are called with the core lock held and release it for the
 * round trip (ulsd may be slow; every other connection of the process goes on meanwhile):
 * the caller marks its socket busy first (stk__sock_ctl_begin) and checks it again after
 * (stk__sock_ctl_end), undoing the reservation if the socket went away. */
#include "sock.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "lwip/priv/tcp_priv.h"
#include "netif/ctl/ctl.h"

struct tuple {
	uint16_t lport, rport;
	ip_addr_t rip;
	uint32_t rexmits;   /* retransmissions of the connection (conntab.c shows them) */
};

static u8_t ext_id;
static bool ext_ready;

/* A message of the given type about the TCP connection lport <-> rip:rport, the remote
 * with its family in the 16-octet form (ctl.h; IPv4 v4-mapped). */
static void tcp_msg(struct ctl_msg *m, enum ctl_type type, uint16_t lport, const ip_addr_t *rip,
		    uint16_t rport)
{
	ctl_init(m, type, 0);
	m->proto = IPPROTO_TCP;
	m->lport = lport;
	if (IP_IS_V6(rip))
		ctl_set_rip6(m, (const uint8_t *)ip_2_ip6(rip)->addr);
	else
		ctl_set_rip4(m, ip_2_ip4(rip)->addr);
	m->rport = rport;
}

/* lwIP frees a pcb (after TIME-WAIT, a reset, an abort): the tuple is free again. */
static void on_destroy(u8_t id, void *data)
{
	struct tuple *t = data;
	struct ctl_msg m;

	(void)id;
	if (!t)
		return;
	tcp_msg(&m, CTL_RELEASE, t->lport, &t->rip, t->rport);
	stk__lease_notify(&m);
	free(t);
}

/* A request with the core lock released for the round trip (held on entry and return). */
static int call_unlocked(struct ctl_msg *m)
{
	stk__unlock();
	int rc = stk__lease_call(m);
	stk__lock();
	return rc;
}

static const struct tcp_ext_arg_callbacks ext_cbs = { .destroy = on_destroy };

void stk__ep_init(void)
{
	if (!ext_ready) {
		ext_id = tcp_ext_arg_alloc_id();
		ext_ready = true;
	}
}

/* Remember a registered connection's tuple so its release reaches ulsd. */
static void track(struct tcp_pcb *pcb)
{
	struct tuple *t = malloc(sizeof(*t));

	if (!t)
		return;  /* ulsd frees the tuple when the lease ends */
	t->lport = pcb->local_port;
	t->rport = pcb->remote_port;
	ip_addr_copy(t->rip, pcb->remote_ip);
	t->rexmits = 0;
	tcp_ext_arg_set_callbacks(pcb, ext_id, &ext_cbs);
	tcp_ext_arg_set(pcb, ext_id, t);
	stk__conntab_kick();
}

/* A retransmission of a registered connection (LWIP_HOOK_TCP_LOSS_NOTE; core lock held).
 * Kept with the tuple, the one per-connection record a node's connections have. */
void stk__ep_count_rexmit(struct tcp_pcb *pcb)
{
	struct tuple *t = ext_ready ? tcp_ext_arg_get(pcb, ext_id) : NULL;

	if (t)
		t->rexmits++;
}

uint32_t stk__ep_rexmits(const struct tcp_pcb *pcb)
{
	const struct tuple *t = ext_ready ? tcp_ext_arg_get(pcb, ext_id) : NULL;

	return t ? t->rexmits : 0;
}

/* A message of the given type about the local port (proto, port) of a socket of the given
 * family, with its flags (CTL_F_V6ONLY, ...). */
static void port_msg(struct ctl_msg *m, enum ctl_type type, uint8_t proto, uint16_t port,
		     int family, unsigned flags)
{
	ctl_init(m, type, 0);
	m->family = (uint8_t)family;
	m->flags = (uint8_t)flags;
	m->proto = proto;
	m->lport = port;
}

/* Reserve (proto, port); port 0 asks for an ephemeral one. Returns the port, or -errno.
 * Releases the core lock meanwhile. */
int stk__ep_bind(uint8_t proto, uint16_t port, unsigned flags, int family)
{
	struct ctl_msg m;

	if (!stk__leased())
		return port;
	port_msg(&m, CTL_BIND, proto, port, family, flags);
	int rc = call_unlocked(&m);
	return rc < 0 ? rc : m.lport;
}

void stk__ep_unbind(uint8_t proto, uint16_t port, int family, unsigned flags)
{
	struct ctl_msg m;

	if (!stk__leased() || port == 0)
		return;
	port_msg(&m, CTL_UNBIND, proto, port, family, flags & CTL_F_V6ONLY);
	stk__lease_notify(&m);
}

/* Releases the core lock meanwhile. */
int stk__ep_listen(uint16_t port, unsigned flags, int family)
{
	struct ctl_msg m;

	if (!stk__leased())
		return 0;
	port_msg(&m, CTL_LISTEN, IPPROTO_TCP, port, family, flags);
	return call_unlocked(&m);
}

/* One-way: this process accepts connections on its listener at port, so ulsd should
 * prefer it over members of the port's group that never do (a master process that only
 * holds the listener for its workers). */
void stk__ep_accepting(uint16_t port, int family, unsigned flags)
{
	struct ctl_msg m;

	if (!stk__leased())
		return;
	port_msg(&m, CTL_ACCEPTING, IPPROTO_TCP, port, family, flags & CTL_F_V6ONLY);
	stk__lease_notify(&m);
}

/* Register an outgoing connection; returns the local port to use, or -errno. Releases
 * the core lock meanwhile. */
int stk__ep_connect(uint16_t lport, const ip_addr_t *rip, uint16_t rport)
{
	struct ctl_msg m;

	if (!stk__leased())
		return lport;
	tcp_msg(&m, CTL_CONNECT, lport, rip, rport);
	int rc = call_unlocked(&m);
	return rc < 0 ? rc : m.lport;
}

void stk__ep_release(uint16_t lport, const ip_addr_t *rip, uint16_t rport)
{
	struct tuple *t = malloc(sizeof(*t));

	if (!stk__leased() || !t) {
		free(t);
		return;
	}
	t->lport = lport;
	ip_addr_copy(t->rip, *rip);
	t->rport = rport;
	on_destroy(0, t);
}

/* After tcp_connect() succeeded locally: report the tuple's end when lwIP frees it. */
void stk__ep_connected(struct tcp_pcb *pcb)
{
	if (stk__leased())
		track(pcb);
}

/* The connection moves to another process: ulsd holds its frames back until the process
 * presenting nonce claims it. Synchronous. */
int stk__ep_handoff(struct tcp_pcb *pcb, uint64_t nonce)
{
	struct ctl_msg m;

	if (!stk__leased())
		return -EOPNOTSUPP;  /* a TAP node of its own has nobody to give it to */
	tcp_msg(&m, CTL_HANDOFF, pcb->local_port, &pcb->remote_ip, pcb->remote_port);
	m.u.handoff.nonce = nonce;
	return stk__lease_call_locked(&m);  /* under the core lock: lease.c says why */
}

int stk__ep_claim(uint16_t lport, const ip_addr_t *rip, uint16_t rport, uint64_t nonce)
{
	struct ctl_msg m;

	if (!stk__leased())
		return -EOPNOTSUPP;
	tcp_msg(&m, CTL_CLAIM, lport, rip, rport);
	m.u.handoff.nonce = nonce;
	int rc = stk__lease_call_locked(&m);  /* under the core lock: lease.c says why */
	if (rc == 0)
		stk__conntab_kick();
	return rc;
}

/* The pcb goes without a RELEASE: its tuple is another process's now. */
void stk__ep_forget(struct tcp_pcb *pcb)
{
	if (!ext_ready)
		return;
	free(tcp_ext_arg_get(pcb, ext_id));
	tcp_ext_arg_set(pcb, ext_id, NULL);
}

/* The node stops (core lock held, the stack thread gone): connections left in FIN-WAIT-2
 * (our FIN acknowledged, the peer's half open) are not released when netif_remove aborts
 * their pcbs. ulsd keeps their tuples at the lease's end and, from the last connection
 * table (which lists them), acknowledges the peer's FIN as Linux's orphaned FIN-WAIT-2
 * socket does (RFC 9293 §3.10.7.4; server/custody.h). Released, a tuple has no owner and
 * the peer's FIN got a RST (§3.10.7.1). */
void stk__ep_keep_fin_wait_2(void)
{
	for (struct tcp_pcb *pcb = tcp_active_pcbs; pcb; pcb = pcb->next)
		if (pcb->state == FIN_WAIT_2)
			stk__ep_forget(pcb);
}

/* A connection accepted on a listener of ours: ulsd delivers its segments by tuple from
 * now on and keeps it in custody if we die. */
void stk__ep_accepted(struct tcp_pcb *pcb)
{
	struct ctl_msg m;

	if (!stk__leased())
		return;
	tcp_msg(&m, CTL_ACCEPTED, pcb->local_port, &pcb->remote_ip, pcb->remote_port);
	stk__lease_notify(&m);
	track(pcb);
}
