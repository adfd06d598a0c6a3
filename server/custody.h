/* TIME-WAIT custody: the TCP connections of processes that are gone.
 *
 * A connection whose process died keeps its tuple reserved for 2 MSL (RFC 9293 §3.4.2,
 * what the process's own TIME-WAIT would have held), segments for it are answered with RST
 * (RFC 9293 §3.10.7.1, reply.c), and its peer is probed a few times so that it learns at
 * once instead of at its next timeout. A connection its process had closed in both
 * directions (TIME-WAIT) is held without probes: its peer has nothing left to learn.
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

struct srv_custody {
	uint16_t lport, rport;
	struct flt_addr rip;    /* either family, IPv4 v4-mapped (filter.h) */
	uint64_t expires_ms;
	uint64_t next_probe_ms;
	unsigned probes_left;
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

typedef void srv_custody_probe_fn(void *arg, const struct srv_custody *c);

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
 * a peer that has closed (§3.10.7.1). A tuple held already is left as it is. */
int srv__custody_add_timewait(struct srv_custody_set *cs, uint64_t now, uint16_t lport,
			      const struct flt_addr *rip, uint16_t rport);
/* Send due probes through probe(arg, c) and forget expired entries; returns ms until the
 * next due event (at most 1000). */
int srv__custody_tick(struct srv_custody_set *cs, uint64_t now, srv_custody_probe_fn *probe,
		      void *arg);
void srv__custody_free(struct srv_custody_set *cs);

#endif
