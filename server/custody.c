/* TIME-WAIT custody of a dead process's TCP connections (custody.h).
 *
 * Read first: RFC 9293 §3.4.2 (TIME-WAIT, 2 MSL), §3.3.2 (what TIME-WAIT may send),
 * §3.10.7.1 (RST for a connection that does not exist) and §3.10.7.4 (a FIN in FIN-WAIT-2
 * and TIME-WAIT).
 */
#include "server/custody.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "netif/siphash.h"
#include "netif/wire/wire.h"

/* How far below SND.NXT a bare ACK of the peer may acknowledge and still be a duplicate
 * of one it sent (RFC 5961 §5.2 bounds it by the peer's largest window; the table does
 * not record that, and 2^30 is the largest window RFC 7323 allows). */
#define CUSTODY_ACK_SPAN (1u << 30)

static size_t home(const struct srv_custody_set *cs, uint16_t lport, const struct flt_addr *rip,
		   uint16_t rport)
{
	uint8_t b[4 + sizeof(rip->b)];

	memcpy(b, &lport, 2);
	memcpy(b + 2, &rport, 2);
	memcpy(b + 4, rip->b, sizeof(rip->b));
	return (size_t)nif_siphash24(cs->key, b, sizeof(b)) & (cs->nslots - 1);
}

static bool is(const struct srv_custody *c, uint16_t lport, const struct flt_addr *rip,
	       uint16_t rport)
{
	return c->lport == lport && c->rport == rport && !memcmp(&c->rip, rip, sizeof(*rip));
}

/* The slot of (lport, rip, rport): the one that holds it, or the empty one where it would
 * go. The table is never full (nslots >= 2 * cap). */
static size_t find(const struct srv_custody_set *cs, uint16_t lport, const struct flt_addr *rip,
		   uint16_t rport)
{
	size_t mask = cs->nslots - 1, h = home(cs, lport, rip, rport);

	while (cs->slot[h] && !is(&cs->c[cs->slot[h] - 1], lport, rip, rport))
		h = (h + 1) & mask;
	return h;
}

static size_t home_of(const struct srv_custody_set *cs, uint32_t pos1)
{
	const struct srv_custody *c = &cs->c[pos1 - 1];

	return home(cs, c->lport, &c->rip, c->rport);
}

/* Empty slot h and move later entries of its run back, so that each stays reachable from
 * its home slot (linear probing's deletion without tombstones). */
static void unslot(struct srv_custody_set *cs, size_t h)
{
	size_t mask = cs->nslots - 1, j = h;

	for (;;) {
		j = (j + 1) & mask;
		if (!cs->slot[j])
			break;
		size_t k = home_of(cs, cs->slot[j]);
		/* The entry at j may move to h unless its home lies cyclically in (h, j]. */
		bool stays = h <= j ? (h < k && k <= j) : (h < k || k <= j);
		if (!stays) {
			cs->slot[h] = cs->slot[j];
			h = j;
		}
	}
	cs->slot[h] = 0;
}

/* An index for at least `cap` entries: a new table when it would pass half full. */
static int reindex(struct srv_custody_set *cs, size_t cap)
{
	if (cs->nslots >= 2 * cap)
		return 0;
	if (!cs->keyed) {
		/* Without the kernel's random bytes the key stays zero: the index still
		 * works, only its spread no longer hides from a chooser of tuples. */
		if (getrandom(cs->key, sizeof(cs->key), GRND_NONBLOCK) != (ssize_t)sizeof(cs->key))
			memset(cs->key, 0, sizeof(cs->key));
		cs->keyed = true;
	}
	size_t ns = cs->nslots ? cs->nslots : 128;
	while (ns < 2 * cap)
		ns *= 2;
	uint32_t *slot = calloc(ns, sizeof(*slot));
	if (!slot)
		return -ENOMEM;
	free(cs->slot);
	cs->slot = slot;
	cs->nslots = ns;
	for (size_t i = 0; i < cs->n; i++)
		cs->slot[find(cs, cs->c[i].lport, &cs->c[i].rip, cs->c[i].rport)] = (uint32_t)i + 1;
	return 0;
}

bool srv__custody_holds_addr(const struct srv_custody_set *cs, uint16_t lport,
			     const struct flt_addr *rip, uint16_t rport)
{
	return cs->n && cs->slot[find(cs, lport, rip, rport)] != 0;
}

bool srv__custody_holds(const struct srv_custody_set *cs, uint16_t lport, uint32_t rip,
			uint16_t rport)
{
	struct flt_addr a = flt_addr_v4(rip);

	return srv__custody_holds_addr(cs, lport, &a, rport);
}

int srv__custody_add(struct srv_custody_set *cs, uint64_t now, uint16_t lport, uint32_t rip,
		     uint16_t rport)
{
	struct flt_addr a = flt_addr_v4(rip);

	return srv__custody_add_addr(cs, now, lport, &a, rport);
}

static int add(struct srv_custody_set *cs, uint64_t now, uint16_t lport,
	       const struct flt_addr *rip, uint16_t rport, const struct srv_custody *how)
{
	if (srv__custody_holds_addr(cs, lport, rip, rport))
		return 0;
	if (cs->n == cs->cap) {
		size_t ncap = cs->cap ? cs->cap * 2 : 64;
		if (ncap > UINT32_MAX / 2)
			return -ENOMEM;
		struct srv_custody *n = realloc(cs->c, sizeof(*n) * ncap);
		if (!n)
			return -ENOMEM;
		cs->c = n;
		cs->cap = ncap;
	}
	if (reindex(cs, cs->cap) < 0)
		return -ENOMEM;
	cs->c[cs->n] = *how;
	cs->c[cs->n].lport = lport;
	cs->c[cs->n].rip = *rip;
	cs->c[cs->n].rport = rport;
	cs->c[cs->n].expires_ms = now + (how->state == SRV_CUSTODY_FIN_WAIT_2 ?
					 SRV_FIN_WAIT_2_MS : SRV_TIMEWAIT_MS);
	cs->c[cs->n].next_probe_ms = now;
	cs->slot[find(cs, lport, rip, rport)] = (uint32_t)++cs->n;
	return 0;
}

/* Forget entry i: out of the index, and the last entry moves into its place. */
static void drop(struct srv_custody_set *cs, size_t i)
{
	unslot(cs, find(cs, cs->c[i].lport, &cs->c[i].rip, cs->c[i].rport));
	if (i != --cs->n) {
		cs->c[i] = cs->c[cs->n];
		cs->slot[find(cs, cs->c[i].lport, &cs->c[i].rip, cs->c[i].rport)] = (uint32_t)i + 1;
	}
}

int srv__custody_add_addr(struct srv_custody_set *cs, uint64_t now, uint16_t lport,
			  const struct flt_addr *rip, uint16_t rport)
{
	struct srv_custody how = { .state = SRV_CUSTODY_DEAD, .probes_left = SRV_CUSTODY_PROBES };

	return add(cs, now, lport, rip, rport, &how);
}

int srv__custody_add_timewait(struct srv_custody_set *cs, uint64_t now, uint16_t lport,
			      const struct flt_addr *rip, uint16_t rport, uint32_t snd_nxt,
			      uint32_t rcv_nxt)
{
	/* rcv_nxt is past the peer's FIN: its retransmission carries rcv_nxt - 1. */
	struct srv_custody how = { .state = SRV_CUSTODY_TIME_WAIT, .snd_nxt = snd_nxt,
				   .fin_seq = rcv_nxt - 1 };

	return add(cs, now, lport, rip, rport, &how);
}

int srv__custody_add_finwait2(struct srv_custody_set *cs, uint64_t now, uint16_t lport,
			      const struct flt_addr *rip, uint16_t rport, uint32_t snd_nxt,
			      uint32_t rcv_nxt)
{
	struct srv_custody how = { .state = SRV_CUSTODY_FIN_WAIT_2, .snd_nxt = snd_nxt,
				   .fin_seq = rcv_nxt };

	return add(cs, now, lport, rip, rport, &how);
}

enum srv_custody_verdict srv__custody_segment(struct srv_custody_set *cs, uint64_t now,
					      uint16_t lport, const struct flt_addr *rip,
					      uint16_t rport, const struct srv_custody_seg *g,
					      uint32_t *seq, uint32_t *ack)
{
	if (!cs->n || !cs->nslots)
		return SRV_CUSTODY_RST;
	uint32_t pos1 = cs->slot[find(cs, lport, rip, rport)];
	if (!pos1)
		return SRV_CUSTODY_RST;
	struct srv_custody *c = &cs->c[pos1 - 1];
	if (c->state == SRV_CUSTODY_DEAD)
		return SRV_CUSTODY_RST;
	/* Only the peer's FIN, exactly where it must be: no data (the process never read
	 * it; nobody will, RFC 9293 §3.10.7.4 "seventh" check in a closed receive half),
	 * acknowledging our FIN (SEG.ACK = SND.NXT: in FIN-WAIT-2 nothing else of ours is
	 * outstanding) and at RCV.NXT as the process left it. Anything else is answered as
	 * before this tuple had a state: a RST. */
	const uint8_t want = WIRE_TCP_FIN | WIRE_TCP_ACK;
	const uint8_t ctl = WIRE_TCP_FIN | WIRE_TCP_ACK | WIRE_TCP_SYN | WIRE_TCP_RST;
	/* A bare ACK from the peer, at RCV.NXT and acknowledging nothing we did not send: a
	 * window update, or an ACK of our data that the process's exit overtook (it may reach
	 * the node after the ACK of our FIN when one went through ulsd's relay). "If the ACK
	 * is a duplicate (SEG.ACK =< SND.UNA), it can be ignored" (§3.10.7.4, FIN-WAIT-2 and
	 * TIME-WAIT process it as ESTABLISHED). A RST would be out of the peer's window and
	 * ignored, or, for SEG.ACK = SND.NXT, reset a peer that may still close in order. */
	uint32_t rcv_nxt = c->fin_seq + (c->state == SRV_CUSTODY_TIME_WAIT);
	if ((g->flags & ctl) == WIRE_TCP_ACK && !g->payload_len && g->seq == rcv_nxt &&
	    c->snd_nxt - g->ack < CUSTODY_ACK_SPAN)
		return SRV_CUSTODY_IGNORE;
	/* Where the segment's data ends: at the peer's FIN for a retransmission of data the
	 * process had received (in FIN-WAIT-2 the FIN's place is the recorded RCV.NXT). Its
	 * ACK was lost, or delayed and never sent (uls_node_stop waits for none): such a
	 * segment is not acceptable, and "an acknowledgment should be sent in reply"
	 * (§3.10.7.4, first check), as Linux's orphaned FIN-WAIT-2 and TIME-WAIT sockets do.
	 * So is the peer's keepalive or window probe in FIN-WAIT-2 (its CLOSE-WAIT may probe:
	 * SEG.SEQ = RCV.NXT - 1, no data; §3.8.4). Only one ending exactly there and
	 * acknowledging exactly SND.NXT (a blind one cannot); with the FIN too, its old data
	 * is trimmed and the FIN taken as below. */
	uint32_t end = g->seq + (uint32_t)g->payload_len;
	bool old = g->payload_len ? end == c->fin_seq :
		   c->state == SRV_CUSTODY_FIN_WAIT_2 && g->seq == c->fin_seq - 1;
	if ((g->flags & ctl) == WIRE_TCP_ACK && old && g->ack == c->snd_nxt) {
		*seq = c->snd_nxt;
		*ack = rcv_nxt;
		return SRV_CUSTODY_ACK_OLD;
	}
	if ((g->flags & ctl) != want || g->ack != c->snd_nxt || end != c->fin_seq)
		return SRV_CUSTODY_RST_BAD_FIN;
	/* FIN-WAIT-2: "enter the TIME-WAIT state"; TIME-WAIT: "Acknowledge it, and restart
	 * the 2 MSL timeout" (§3.10.7.4). */
	c->state = SRV_CUSTODY_TIME_WAIT;
	c->expires_ms = now + SRV_TIMEWAIT_MS;
	*seq = c->snd_nxt;
	*ack = c->fin_seq + 1;
	return SRV_CUSTODY_ACK;
}

int srv__custody_tick(struct srv_custody_set *cs, uint64_t now, srv_custody_probe_fn *probe,
		      void *arg)
{
	uint64_t next = now + 1000;

	for (size_t i = 0; i < cs->n;) {
		struct srv_custody *c = &cs->c[i];
		if (c->expires_ms <= now) {
			drop(cs, i);
			continue;
		}
		if (c->probes_left && c->next_probe_ms <= now) {
			probe(arg, c);
			c->probes_left--;
			c->next_probe_ms = now + SRV_CUSTODY_PROBE_GAP_MS;
		}
		if (c->probes_left && c->next_probe_ms < next)
			next = c->next_probe_ms;
		if (c->expires_ms < next)
			next = c->expires_ms;
		i++;
	}
	return (int)(next - now);
}

void srv__custody_free(struct srv_custody_set *cs)
{
	free(cs->c);
	free(cs->slot);
	*cs = (struct srv_custody_set){ 0 };
}
