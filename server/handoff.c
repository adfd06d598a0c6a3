/* Connections that move from one process to another.
 *
 * After fork(), parent and child hold the same connected socket, but only the parent's
 * stack has the connection. When the parent closes its copy and the child goes on using
 * it (inetd, sshd, Python's ForkingMixIn), the parent's stack hands the connection's
 * state to the child's (stack/handoff.c) and ulsd moves the connection's filter rule and
 * port reference between their leases:
 *
 *   HANDOFF(tuple, nonce)  from the holder: the rule goes "in transit". Frames for the
 *                          tuple are dropped and counted (the peer retransmits them), so
 *                          neither process's stack answers them with a RST meanwhile.
 *   CLAIM(tuple, nonce)    from the taker, who got the nonce from the holder over their
 *                          shared socket: the rule and the port reference become its own.
 *
 * While in transit, the connection's reference on its port is held by a lease of its own
 * (`transit`), so that the port stays taken even if the giver's lease ends meanwhile (an
 * exec). A transit nobody claims within SRV_HANDOFF_MS ends like a connection whose
 * process died: custody, probes, RST (ports.c).
 */
#include "server/internal.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "netif/ctl/ctl.h"

static struct srv_handoff *find(struct srv *s, uint16_t lport, const struct flt_addr *rip,
				uint16_t rport)
{
	for (size_t i = 0; i < s->nhandoff; i++) {
		struct srv_handoff *h = &s->handoff[i];
		if (h->lport == lport && h->rport == rport && !memcmp(&h->rip, rip, sizeof(*rip)))
			return h;
	}
	return NULL;
}

/* The holder of a port in transit (a constant: the holder records its user itself). */
static const struct srv_port_owner transit = { .id = SRV_IN_TRANSIT };

static void forget(struct srv *s, struct srv_handoff *h)
{
	*h = s->handoff[--s->nhandoff];
}

int srv__handoff_begin(struct srv *s, struct srv_lease *l, const struct ctl_msg *m)
{
	/* Either family: the remote as the filter keys it (IPv4 v4-mapped, ctl.h). */
	struct flt_addr rip = flt_addr_v6(m->rip);

	if (!m->u.handoff.nonce)
		return -EINVAL;  /* zero would be guessable */
	if (find(s, m->lport, &rip, m->rport))
		return -EBUSY;
	if (s->nhandoff == s->handoff_cap) {
		size_t ncap = s->handoff_cap ? s->handoff_cap * 2 : 16;
		struct srv_handoff *n = realloc(s->handoff, sizeof(*n) * ncap);
		if (!n)
			return -ENOMEM;
		s->handoff = n;
		s->handoff_cap = ncap;
	}
	/* What the process queued before it asked leaves under its own rule. */
	srv__drain_tx(s, l);
	int rc = flt_move_connected_addr(s->flt, WIRE_IPPROTO_TCP, m->lport, &rip, m->rport, l->id,
					 SRV_IN_TRANSIT);
	if (rc < 0)
		return rc;
	/* The port stays the giver's user's while in transit. */
	const struct srv_port_owner held = { .id = SRV_IN_TRANSIT, .uid = l->uid };
	rc = srv__port_take(s->ports, &held, IPPROTO_TCP, m->lport);
	if (rc < 0) {
		flt_move_connected_addr(s->flt, WIRE_IPPROTO_TCP, m->lport, &rip, m->rport,
					SRV_IN_TRANSIT, l->id);
		return rc;
	}
	srv__port_release(s->ports, SRV_OWNER(l), IPPROTO_TCP, m->lport);
	s->handoff[s->nhandoff++] = (struct srv_handoff){
		.lport = m->lport, .rip = rip, .rport = m->rport,
		.nonce = m->u.handoff.nonce, .expires_ms = srv__now_ms() + SRV_HANDOFF_MS,
	};
	return 0;
}

int srv__handoff_claim(struct srv *s, struct srv_lease *l, const struct ctl_msg *m)
{
	struct flt_addr rip = flt_addr_v6(m->rip);
	struct srv_handoff *h = find(s, m->lport, &rip, m->rport);

	if (!h)
		return -ENOENT;
	if (h->nonce != m->u.handoff.nonce)
		return -EPERM;
	int rc = srv__port_take(s->ports, SRV_OWNER(l), IPPROTO_TCP, m->lport);
	if (rc < 0)
		return rc;
	rc = flt_move_connected_addr(s->flt, WIRE_IPPROTO_TCP, m->lport, &rip, m->rport,
				     SRV_IN_TRANSIT, l->id);
	if (rc < 0) {
		srv__port_release(s->ports, SRV_OWNER(l), IPPROTO_TCP, m->lport);
		return rc;
	}
	srv__port_release(s->ports, &transit, IPPROTO_TCP, m->lport);
	forget(s, h);
	s->ctr.v[SRV_HANDOFFS]++;
	return 0;
}

int srv__handoff_tick(struct srv *s)
{
	uint64_t now = srv__now_ms(), next = now + 1000;

	for (size_t i = 0; i < s->nhandoff;) {
		struct srv_handoff *h = &s->handoff[i];
		if (h->expires_ms > now) {
			if (h->expires_ms < next)
				next = h->expires_ms;
			i++;
			continue;
		}
		flt_del_connected_addr(s->flt, WIRE_IPPROTO_TCP, h->lport, &h->rip, h->rport,
				       SRV_IN_TRANSIT);
		/* without memory: the peer gets a RST for its next segment all the same */
		if (srv__custody_add_addr(&s->custody, now, h->lport, &h->rip, h->rport) < 0)
			s->ctr.v[SRV_DROP_CUSTODY_NO_MEMORY]++;
		srv__port_release(s->ports, &transit, IPPROTO_TCP, h->lport);
		s->ctr.v[SRV_HANDOFFS_EXPIRED]++;
		forget(s, h);
	}
	return (int)(next - now);
}
