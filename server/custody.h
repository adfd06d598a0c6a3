/* TIME-WAIT custody: the TCP connections of processes that are gone.
 *
 * A connection whose process died keeps its tuple reserved for 2 MSL (RFC 9293 §3.4.2,
 * what the process's own TIME-WAIT would have held), segments for it are answered with RST
 * (RFC 9293 §3.10.7.1, reply.c), and its peer is probed a few times so that it learns at
 * once instead of at its next timeout. A connection its process had closed in both
 * directions (TIME-WAIT) is held without probes: its peer has nothing left to learn. One
 * it had left in FIN-WAIT-2 (its FIN acknowledged) is held without probes too, and its
 * peer's FIN, or a retransmitted FIN in TIME-WAIT, gets an ACK (srv__custody_segment).
 *
 * The set knows nothing of the rest of ulsd: time comes in as an argument and probes go out
 * through the function the caller passes to srv__custody_tick. Its owner serialises calls
 * (ulsd: s->lock).
 */
#ifndef ULS_SERVER_CUSTODY_H
#define ULS_SERVER_CUSTODY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "filter/filter.h"

#define SRV_TIMEWAIT_MS     60000   /* 2 MSL (RFC 9293 §3.4.2 "MSL ... 2 minutes"; Linux uses 60 s) */
#define SRV_CUSTODY_PROBES  4
#define SRV_CUSTODY_PROBE_GAP_MS 250
/* How long a connection left in FIN-WAIT-2 waits for its peer's FIN: Linux's
 * tcp_fin_timeout for an orphaned socket (RFC 9293 §3.10.7.4 sets no limit). */
#define SRV_FIN_WAIT_2_MS   60000

/* The window field of ulsd's ACKs for such a connection: not zero. An ACK of the peer's
 * retransmitted data may come before the peer's FIN, and a zero window there would hold
 * the FIN back (it takes a sequence number: Linux then probes the window with SEG.SEQ =
 * RCV.NXT - 1, which, not its FIN, drew a RST). The peer scales it by the process's shift
 * (RFC 7323 §2.3): room for the FIN at least; more data gets a RST as before. */
#define SRV_CUSTODY_ACK_WND 1

/* What ulsd knows of a held connection. A connection its process left in FIN-WAIT-2 (its
 * FIN sent and acknowledged) or TIME-WAIT is held with the sequence numbers of its last
 * connection table (netif/conntab.h), so that the peer's FIN, or its retransmission, gets
 * the ACK the process would have sent (RFC 9293 §3.10.7.4) instead of a RST. */
enum srv_custody_state {
	SRV_CUSTODY_DEAD = 0,   /* probed; everything gets a RST */
	SRV_CUSTODY_FIN_WAIT_2,
	SRV_CUSTODY_TIME_WAIT,
};

struct srv_custody {
	uint16_t lport, rport;
	struct flt_addr rip;    /* either family, IPv4 v4-mapped (filter.h) */
	uint64_t expires_ms;
	uint64_t next_probe_ms;
	unsigned probes_left;
	uint8_t state;          /* enum srv_custody_state */
	/* A probe of this DEAD connection waits for its IPv6 peer's address (reply6.c);
	 * the advertisement that brings it sends one probe for each such entry, and no
	 * other: TIME-WAIT and FIN-WAIT-2 entries are never probed. */
	bool awaits_neighbour;
	uint8_t probes_sent;    /* saturating; ulsstat lists it */
	uint32_t snd_nxt;       /* FIN-WAIT-2, TIME-WAIT: past our FIN */
	uint32_t fin_seq;       /* the sequence number the peer's FIN must carry */
};

/* The entries in an array (probes and expiry walk it once a tick) and an index over it: a
 * lease that ends with 10,000 connections asks "held already?" for each, and so does every
 * port choice (ports.c), so a walk per question was quadratic (about 75 ms of ulsd's one
 * thread for 10,000). Open addressing with linear probing; the slot holds the entry's
 * position + 1 (0: empty); SipHash with a key of the set's own, so that peers that choose
 * their addresses and ports cannot make the tuples of a dead process collide. */
struct srv_custody_set {
	struct srv_custody *c;
	size_t n, cap;
	uint32_t *slot;
	size_t nslots;          /* 0, or a power of two at least twice cap */
	uint8_t key[16];
	bool keyed;
};

/* The probe may mark c as waiting for its peer's link-layer address (awaits_neighbour). */
typedef void srv_custody_probe_fn(void *arg, struct srv_custody *c);

bool srv__custody_holds_addr(const struct srv_custody_set *cs, uint16_t lport,
			     const struct flt_addr *rip, uint16_t rport);
/* The same with an IPv4 remote (network order). */
bool srv__custody_holds(const struct srv_custody_set *cs, uint16_t lport, uint32_t rip,
			uint16_t rport);
/* Take (lport, rip, rport) into custody from now on (once: a tuple held already is left
 * as it is). 0, or -ENOMEM: the peer then still gets a RST for its next segment. */
int srv__custody_add_addr(struct srv_custody_set *cs, uint64_t now, uint16_t lport,
			  const struct flt_addr *rip, uint16_t rport);
int srv__custody_add(struct srv_custody_set *cs, uint64_t now, uint16_t lport, uint32_t rip,
		     uint16_t rport);
/* The same for a connection its process left in TIME-WAIT: held for 2 MSL, never probed.
 * RFC 9293 §3.3.2's TIME-WAIT sends nothing of its own ("The only thing that can arrive in
 * this state is a retransmission of the remote FIN"); a probe would only draw a RST from
 * a peer that has closed (§3.10.7.1). snd_nxt and rcv_nxt as the process left them (past
 * both FINs). A tuple held already is left as it is. */
int srv__custody_add_timewait(struct srv_custody_set *cs, uint64_t now, uint16_t lport,
			      const struct flt_addr *rip, uint16_t rport, uint32_t snd_nxt,
			      uint32_t rcv_nxt);
/* The same for a connection its process left in FIN-WAIT-2 (our FIN acknowledged, the
 * peer's half open): held SRV_FIN_WAIT_2_MS for the peer's FIN, never probed (a probe
 * would reset a peer that may still send its last data and FIN in good order). */
int srv__custody_add_finwait2(struct srv_custody_set *cs, uint64_t now, uint16_t lport,
			      const struct flt_addr *rip, uint16_t rport, uint32_t snd_nxt,
			      uint32_t rcv_nxt);

/* A probe of c went out (the probe function's part: a deferred one does not count). */
static inline void srv__custody_probed(struct srv_custody *c)
{
	if (c->probes_sent < UINT8_MAX)
		c->probes_sent++;
}

/* A TCP segment for a held tuple (the fields of its header; payload_len: its data). */
struct srv_custody_seg {
	uint32_t seq, ack;
	uint8_t flags;          /* WIRE_TCP_* */
	size_t payload_len;
};
enum srv_custody_verdict {
	SRV_CUSTODY_RST = 0,    /* not held, or held as DEAD: a RST as for CLOSED (§3.10.7.1) */
	SRV_CUSTODY_ACK,        /* the peer's FIN: send <SEQ=*seq><ACK=*ack><CTL=ACK> */
	SRV_CUSTODY_RST_BAD_FIN,/* a FIN-WAIT-2 or TIME-WAIT tuple, a segment that is not its
				 * peer's FIN (data, wrong SEQ or ACK): a RST as today */
	SRV_CUSTODY_IGNORE,     /* such a tuple, its peer's bare ACK (a late or duplicate
				 * one, a window update): nothing to answer */
	SRV_CUSTODY_ACK_OLD,    /* such a tuple, a retransmission of data the process had
				 * received, or a keepalive probe: send
				 * <SEQ=*seq><ACK=*ack><CTL=ACK>, nothing changes */
};
/* What to answer segment g for (lport, rip, rport), which no process owns. The peer's
 * FIN (FIN and ACK, no data, SYN or RST; SEG.ACK our snd_nxt; SEG.SEQ the one the table
 * recorded, so that a blind FIN cannot end the connection, RFC 5961's spirit) moves a
 * FIN-WAIT-2 tuple to TIME-WAIT and restarts a TIME-WAIT tuple's 2 MSL (RFC 9293
 * §3.10.7.4, "FIN bit" check, FIN-WAIT-2 and TIME-WAIT). The peer's bare ACK at the same
 * SEQ, acknowledging no more than our snd_nxt, is ignored (§3.10.7.4, "ACK bit" check: a
 * duplicate ACK "can be ignored"). A retransmission of data the process had received
 * (ending exactly at the FIN's SEQ, SEG.ACK our snd_nxt), or in FIN-WAIT-2 the peer's
 * keepalive (SEG.SEQ one below the FIN's, no data), gets an ACK (§3.10.7.4, first check: a
 * segment not acceptable is acknowledged); with the FIN, the FIN is taken as above. */
enum srv_custody_verdict srv__custody_segment(struct srv_custody_set *cs, uint64_t now,
					      uint16_t lport, const struct flt_addr *rip,
					      uint16_t rport, const struct srv_custody_seg *g,
					      uint32_t *seq, uint32_t *ack);
/* Send due probes through probe(arg, c) and forget expired entries; returns ms until the
 * next due event (at most 1000). */
int srv__custody_tick(struct srv_custody_set *cs, uint64_t now, srv_custody_probe_fn *probe,
		      void *arg);
void srv__custody_free(struct srv_custody_set *cs);

#endif
