/* What the filter's files share: wire constants, the table layout, the hash. */
#ifndef ULS_FILTER_INTERNAL_H
#define ULS_FILTER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "filter/filter.h"

/* ---- The table ---------------------------------------------------------------------- */

/* The owners of one listening port. More than one only if shared. Sorted, so that the
 * same set of owners always behaves the same whatever order they joined in. */
struct flt__group {
	uint32_t n, cap;
	bool shared;
	/* The members that accept connections (flt_set_accepting): new connections go to
	 * them when there are any, so a member that only holds the port gets none. */
	uint32_t nacc;
	flt_owner_t *acc;
	flt_owner_t owners[];
};

/* One slot of the open-addressing hash table. Both kinds of rule live in one table; a
 * listening rule has rip = 0 and rport = 0 and is told apart by kind. kind 0: empty. */
struct flt__slot {
	struct flt_addr rip;         /* v4-mapped for IPv4; zero for a listening rule */
	uint16_t lport, rport;
	uint8_t proto, kind;
	uint8_t fam;                 /* FLT_RULE_LISTEN: FLT_FAM_V4 or FLT_FAM_V6; else 0 */
	flt_owner_t owner;           /* FLT_RULE_CONNECTED */
	struct flt__group *group;    /* FLT_RULE_LISTEN */
};

struct flt_table {
	struct flt__slot *slots;
	size_t cap;                  /* a power of two */
	size_t used;                 /* slots in use */
	uint64_t k0, k1;             /* hash key */
	/* Lookups on a const table still count: the counters live behind a pointer. */
	struct flt_stats *stats;
	flt_change_fn *observer;     /* flt_table_set_observer */
	void *observer_arg;
	/* The node's IPv6 addresses (flt_table_set_node_ip6), which processes may send
	 * from: the global one and the link-local one. has_ip6 false: none. */
	bool has_ip6;
	uint8_t ip6[2][16];
	flt_change6_fn *observer6;   /* flt_table_set_observer6 */
	void *observer6_arg;
};

/* Tell the observer of the rule's family, if any, that a rule changed. */
void flt__changed(const struct flt_table *t, enum flt_kind kind, uint8_t proto, uint8_t fam,
		  uint16_t lport, const struct flt_addr *rip, uint16_t rport, flt_owner_t owner);

/* A connected rule: fam 0, rip the remote. A listening rule: fam FLT_FAM_V4 or _V6, rip
 * NULL (zero), rport 0. */
const struct flt__slot *flt__find(const struct flt_table *t, uint8_t kind, uint8_t proto,
				  uint8_t fam, uint16_t lport, const struct flt_addr *rip,
				  uint16_t rport);
flt_owner_t flt__group_pick(const struct flt_table *t, const struct flt__group *g,
			    const struct flt_addr *rip, uint16_t rport,
			    const struct flt_addr *lip, uint16_t lport);
bool flt__group_has(const struct flt__group *g, flt_owner_t owner);

#endif
