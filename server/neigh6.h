/* ulsd's IPv6 neighbour cache (RFC 4861 §5.1, §7.2-7.3): peers' link-layer addresses, so
 * that ulsd can address the peer of a dead process's connection (custody's probes, reply.c
 * and reply6.c). The processes resolve their own peers with their own lwIP; this cache is
 * ulsd's alone.
 *
 * Read first: RFC 4861 §7.2.2 (sending solicitations, retransmissions), §7.2.3 (a
 * solicitation's source link-layer option), §7.2.5 (advertisements), §7.3.2 (states).
 *
 * The cache knows nothing of the rest of ulsd, as custody.h: time comes in as an argument,
 * solicitations go out through the function the caller passes to srv__neigh6_tick, and
 * the caller counts what the return values report. Its owner serialises calls (ulsd:
 * s->lock).
 */
#ifndef ULS_SERVER_NEIGH6_H
#define ULS_SERVER_NEIGH6_H

#include <stdbool.h>
#include <stdint.h>

#define SRV_NEIGH6_MAX           128
#define SRV_NEIGH6_RETRANS_MS    1000    /* RFC 4861 §10 RETRANS_TIMER */
#define SRV_NEIGH6_SOLICITS      3       /* §10 MAX_MULTICAST_SOLICIT */
#define SRV_NEIGH6_REACHABLE_MS  30000   /* §10 REACHABLE_TIME */

/* §7.3.2's states that ulsd uses. Deviation: no DELAY and PROBE (§7.3.3): ulsd sends a
 * STALE entry's peer only custody's few probes and does not confirm reachability first;
 * an address that changed costs those probes (the peer then learns from the RST its next
 * segment gets). REACHABLE is STALE again REACHABLE_TIME after its confirmation. */
enum srv_neigh6_state {
	SRV_NEIGH6_FREE,
	SRV_NEIGH6_INCOMPLETE,  /* solicitations out, no answer yet */
	SRV_NEIGH6_REACHABLE,   /* confirmed by a solicited advertisement */
	SRV_NEIGH6_STALE,       /* learned without confirmation */
};

struct srv_neigh6 {
	uint8_t ip[16];
	uint8_t mac[6];
	uint8_t state;          /* enum srv_neigh6_state */
	uint8_t solicits;       /* solicitations sent while INCOMPLETE */
	bool waiting;           /* a probe waits for the address (INCOMPLETE) */
	uint64_t at_ms;         /* REACHABLE: confirmed; INCOMPLETE: next solicitation due */
	uint64_t used_ms;       /* last created, updated or looked up: the eviction order */
};

struct srv_neigh6_cache {
	struct srv_neigh6 e[SRV_NEIGH6_MAX];
	uint64_t evicted;       /* entries replaced to make room for another address */
};

/* Its current state (REACHABLE turns STALE with age); FREE when ip has no entry. */
enum srv_neigh6_state srv__neigh6_state(const struct srv_neigh6_cache *nc, uint64_t now,
					const uint8_t ip[16]);
/* ip's link-layer address into mac: 0; -EAGAIN while it is being resolved; -ENOENT. */
int srv__neigh6_lookup(struct srv_neigh6_cache *nc, uint64_t now, const uint8_t ip[16],
		       uint8_t mac[6]);
/* §7.2.3: a valid solicitation for one of the node's addresses carried ip's source
 * link-layer address mac: create the entry STALE, or update it (STALE if the address
 * changed). An INCOMPLETE entry gets mac and turns STALE; true when a probe waited for it. */
bool srv__neigh6_from_ns(struct srv_neigh6_cache *nc, uint64_t now, const uint8_t ip[16],
			 const uint8_t mac[6]);
/* A peer's address learned other than by neighbour discovery (the direct path's
 * handshakes, filter/datapath.bpf.c): as from a solicitation. */
void srv__neigh6_learn(struct srv_neigh6_cache *nc, uint64_t now, const uint8_t ip[16],
		       const uint8_t mac[6]);

/* §7.2.5, an advertisement for target: what became of it. */
enum srv_neigh6_na {
	SRV_NEIGH6_NA_IGNORED,   /* no entry, or nothing §7.2.5 lets it change */
	SRV_NEIGH6_NA_UPDATED,   /* the entry's state or address changed (or was confirmed) */
	SRV_NEIGH6_NA_RESOLVED,  /* an INCOMPLETE entry got its address */
	SRV_NEIGH6_NA_RESOLVED_WAITING,  /* ... and a probe waited for it */
};
/* mac: the Target Link-Layer Address option, or NULL without one; solicited and override:
 * the advertisement's S and O flags. */
enum srv_neigh6_na srv__neigh6_from_na(struct srv_neigh6_cache *nc, uint64_t now,
				       const uint8_t target[16], const uint8_t *mac,
				       bool solicited, bool override);

/* §7.2.2: ulsd needs ip's address and has none. Creates an INCOMPLETE entry marked
 * waiting (replacing the least recently used one when full). 1: a solicitation is due now
 * (the caller sends it, srv__neigh6_tick sends the next ones); 0: resolution was under
 * way already (the entry now waits too); -EEXIST: the address is known (lookup it). */
int srv__neigh6_resolve(struct srv_neigh6_cache *nc, uint64_t now, const uint8_t ip[16]);

/* Retransmissions (§7.2.2: a solicitation every RetransTimer milliseconds, at most
 * MAX_MULTICAST_SOLICIT in all): solicit(arg, ip) for each INCOMPLETE entry whose
 * time has come; an entry that has had its solicitations unanswered is deleted and counted
 * in *failed (with *failed_waiting when a probe waited for it). Returns ms until the next
 * event (at most 1000). */
typedef void srv_neigh6_solicit_fn(void *arg, const uint8_t ip[16]);
int srv__neigh6_tick(struct srv_neigh6_cache *nc, uint64_t now, srv_neigh6_solicit_fn *solicit,
		     void *arg, unsigned *failed, unsigned *failed_waiting);
/* Whether any entry is INCOMPLETE (the caller's timer need not run otherwise). */
bool srv__neigh6_resolving(const struct srv_neigh6_cache *nc);

#endif
