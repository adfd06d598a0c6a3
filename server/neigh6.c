/* ulsd's IPv6 neighbour cache (neigh6.h).
 *
 * Read first: RFC 4861 §7.2.2, §7.2.3, §7.2.5, §7.3.2, and Appendix C (the state machine).
 *
 * A fixed array searched in full: ulsd looks an address up for a probe or an ND message,
 * not per data frame, and SRV_NEIGH6_MAX entries of 16-octet keys are a few cache lines'
 * scan. When full, the least recently used entry makes room (a flood of solicitations from
 * forged sources can push real peers out, as it can of any cache of bounded size; such a
 * peer is solicited again when needed).
 */
#include "server/neigh6.h"

#include <errno.h>
#include <string.h>

static struct srv_neigh6 *find(struct srv_neigh6_cache *nc, const uint8_t ip[16])
{
	for (unsigned i = 0; i < SRV_NEIGH6_MAX; i++)
		if (nc->e[i].state != SRV_NEIGH6_FREE && memcmp(nc->e[i].ip, ip, 16) == 0)
			return &nc->e[i];
	return NULL;
}

/* A free entry for ip, or the least recently used one (counted) when none is free. */
static struct srv_neigh6 *take(struct srv_neigh6_cache *nc, uint64_t now, const uint8_t ip[16])
{
	struct srv_neigh6 *e = NULL;

	for (unsigned i = 0; i < SRV_NEIGH6_MAX; i++) {
		if (nc->e[i].state == SRV_NEIGH6_FREE) {
			e = &nc->e[i];
			break;
		}
		if (!e || nc->e[i].used_ms < e->used_ms)
			e = &nc->e[i];
	}
	if (e->state != SRV_NEIGH6_FREE)
		nc->evicted++;
	memset(e, 0, sizeof(*e));
	memcpy(e->ip, ip, 16);
	e->used_ms = now;
	return e;
}

static enum srv_neigh6_state state_of(const struct srv_neigh6 *e, uint64_t now)
{
	/* §7.3.3: "When ReachableTime milliseconds have passed since receipt of the last
	 * reachability confirmation for a neighbor, move to the STALE state." */
	if (e->state == SRV_NEIGH6_REACHABLE && now - e->at_ms >= SRV_NEIGH6_REACHABLE_MS)
		return SRV_NEIGH6_STALE;
	return (enum srv_neigh6_state)e->state;
}

enum srv_neigh6_state srv__neigh6_state(const struct srv_neigh6_cache *nc, uint64_t now,
					const uint8_t ip[16])
{
	const struct srv_neigh6 *e = find((struct srv_neigh6_cache *)nc, ip);

	return e ? state_of(e, now) : SRV_NEIGH6_FREE;
}

int srv__neigh6_lookup(struct srv_neigh6_cache *nc, uint64_t now, const uint8_t ip[16],
		       uint8_t mac[6])
{
	struct srv_neigh6 *e = find(nc, ip);

	if (!e)
		return -ENOENT;
	if (e->state == SRV_NEIGH6_INCOMPLETE)
		return -EAGAIN;
	e->used_ms = now;
	memcpy(mac, e->mac, 6);
	return 0;
}

bool srv__neigh6_from_ns(struct srv_neigh6_cache *nc, uint64_t now, const uint8_t ip[16],
			 const uint8_t mac[6])
{
	struct srv_neigh6 *e = find(nc, ip);
	bool waited = false;

	/* §7.2.3: "If an entry does not already exist, the node SHOULD create a new one and
	 * set its reachability state to STALE". */
	if (!e)
		e = take(nc, now, ip);
	if (e->state == SRV_NEIGH6_INCOMPLETE)
		waited = e->waiting;  /* Appendix C: INCOMPLETE + NS -> STALE, send the queue */
	/* "If an entry already exists, and the cached link-layer address differs from the
	 * one in the received Source Link-Layer option, the cached address should be replaced
	 * by the received address, and the entry's reachability state MUST be set to STALE."
	 * An unchanged address leaves the state as it is. */
	if (e->state != SRV_NEIGH6_REACHABLE || memcmp(e->mac, mac, 6) != 0) {
		memcpy(e->mac, mac, 6);
		e->state = SRV_NEIGH6_STALE;
	}
	e->waiting = false;
	e->used_ms = now;
	return waited;
}

void srv__neigh6_learn(struct srv_neigh6_cache *nc, uint64_t now, const uint8_t ip[16],
		       const uint8_t mac[6])
{
	(void)srv__neigh6_from_ns(nc, now, ip, mac);
}

enum srv_neigh6_na srv__neigh6_from_na(struct srv_neigh6_cache *nc, uint64_t now,
				       const uint8_t target[16], const uint8_t *mac,
				       bool solicited, bool override)
{
	struct srv_neigh6 *e = find(nc, target);

	/* §7.2.5: "If no entry exists, the advertisement SHOULD be silently discarded." */
	if (!e)
		return SRV_NEIGH6_NA_IGNORED;
	if (e->state == SRV_NEIGH6_INCOMPLETE) {
		/* "If the advertisement's Solicited flag is set, the state of the entry is set
		 * to REACHABLE; otherwise, it is set to STALE." Without a Target Link-Layer
		 * Address option an advertisement cannot complete an INCOMPLETE entry: it is
		 * discarded. */
		if (!mac)
			return SRV_NEIGH6_NA_IGNORED;
		bool waited = e->waiting;
		memcpy(e->mac, mac, 6);
		e->state = solicited ? SRV_NEIGH6_REACHABLE : SRV_NEIGH6_STALE;
		e->at_ms = now;
		e->waiting = false;
		e->used_ms = now;
		return waited ? SRV_NEIGH6_NA_RESOLVED_WAITING : SRV_NEIGH6_NA_RESOLVED;
	}
	bool differs = mac && memcmp(mac, e->mac, 6) != 0;
	if (!override && differs) {
		/* "If the Override flag is clear and the supplied link-layer address differs
		 * from that in the cache, then ... If the state of the entry is REACHABLE, set
		 * it to STALE, but do not update the entry in any other way. ... Otherwise, the
		 * received advertisement should be ignored". */
		if (state_of(e, now) != SRV_NEIGH6_REACHABLE)
			return SRV_NEIGH6_NA_IGNORED;
		e->state = SRV_NEIGH6_STALE;
		return SRV_NEIGH6_NA_UPDATED;
	}
	/* "If the Override flag is set, or the supplied link-layer address is the same as
	 * that in the cache, or no Target Link-Layer Address option was supplied, the
	 * received advertisement MUST update the Neighbor Cache entry as follows: - The
	 * link-layer address in the Target Link-Layer Address option MUST be inserted in the
	 * cache (if one is supplied and differs from the already recorded address). - If the
	 * Solicited flag is set, the state of the entry MUST be set to REACHABLE. If the
	 * Solicited flag is zero and the link-layer address was updated with a different
	 * address, the state MUST be set to STALE. Otherwise, the entry's state remains
	 * unchanged." */
	if (differs)
		memcpy(e->mac, mac, 6);
	if (solicited) {
		e->state = SRV_NEIGH6_REACHABLE;
		e->at_ms = now;
	} else if (differs) {
		e->state = SRV_NEIGH6_STALE;
	} else {
		return SRV_NEIGH6_NA_IGNORED;
	}
	e->used_ms = now;
	return SRV_NEIGH6_NA_UPDATED;
}

int srv__neigh6_resolve(struct srv_neigh6_cache *nc, uint64_t now, const uint8_t ip[16])
{
	struct srv_neigh6 *e = find(nc, ip);

	if (e && e->state != SRV_NEIGH6_INCOMPLETE)
		return -EEXIST;
	if (e) {
		e->waiting = true;
		e->used_ms = now;
		return 0;
	}
	/* §7.2.2: "When a node has a unicast packet to send to a neighbor, but does not know
	 * the neighbor's link-layer address, it performs address resolution. ... this
	 * entails creating a Neighbor Cache entry in the INCOMPLETE state and transmitting a
	 * Neighbor Solicitation message targeted at the neighbor." */
	e = take(nc, now, ip);
	e->state = SRV_NEIGH6_INCOMPLETE;
	e->waiting = true;
	e->solicits = 1;
	e->at_ms = now + SRV_NEIGH6_RETRANS_MS;
	return 1;
}

int srv__neigh6_tick(struct srv_neigh6_cache *nc, uint64_t now, srv_neigh6_solicit_fn *solicit,
		     void *arg, unsigned *failed, unsigned *failed_waiting)
{
	uint64_t next = now + 1000;

	for (unsigned i = 0; i < SRV_NEIGH6_MAX; i++) {
		struct srv_neigh6 *e = &nc->e[i];
		if (e->state != SRV_NEIGH6_INCOMPLETE)
			continue;
		if (e->at_ms <= now) {
			if (e->solicits >= SRV_NEIGH6_SOLICITS) {
				/* "If no Neighbor Advertisement is received after
				 * MAX_MULTICAST_SOLICIT solicitations, address resolution has
				 * failed"; Appendix C discards the entry. */
				(*failed)++;
				if (e->waiting)
					(*failed_waiting)++;
				memset(e, 0, sizeof(*e));
				continue;
			}
			solicit(arg, e->ip);
			e->solicits++;
			e->at_ms = now + SRV_NEIGH6_RETRANS_MS;
		}
		if (e->at_ms < next)
			next = e->at_ms;
	}
	return (int)(next - now);
}

bool srv__neigh6_resolving(const struct srv_neigh6_cache *nc)
{
	for (unsigned i = 0; i < SRV_NEIGH6_MAX; i++)
		if (nc->e[i].state == SRV_NEIGH6_INCOMPLETE)
			return true;
	return false;
}
