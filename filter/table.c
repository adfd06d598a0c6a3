/* The filter's rule table (see filter.h).
 *
 * One open-addressing hash table with linear probing holds both kinds of rule and both
 * families: connected 4-tuples, whose remote address is 16 octets (an IPv4 one
 * v4-mapped), and listening ports, one group per (protocol, port, family) with remote
 * address and port zero. The load factor stays at or below one half, so a lookup touches a short run
 * of adjacent slots whatever the number of rules; deletion shifts the run back instead of
 * leaving tombstones, so a long-lived table does not slow down with churn.
 *
 * The hash is SipHash-1-3 keyed with a per-table random seed: remote addresses and ports
 * are chosen by peers, and an unkeyed hash would let them pile every connection into one
 * probe run. The same key decides which member of a shared listening group a connection
 * goes to, so a peer cannot aim its connections at one process either.
 */
#include "filter/internal.h"
#include "filter/siphash.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define MIN_CAP 16

uint64_t flt_siphash(uint64_t k0, uint64_t k1, uint64_t m0, uint64_t m1)
{
	return flt__siphash13(k0, k1, m0, m1);
}

/* splitmix64: spreads one test seed into a two-word key. */
static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static const struct flt_addr no_addr;

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* The key is the 16-octet address, the ports, kind, protocol and family; SipHash takes
 * two words, so the address's halves are folded into one (still keyed: a peer that
 * cannot compute the hash cannot aim collisions). */
static uint64_t key_hash(const struct flt_table *t, uint8_t kind, uint8_t proto, uint8_t fam,
			 uint16_t lport, const struct flt_addr *rip, uint16_t rport)
{
	uint64_t hi = rd64(rip->b), lo = rd64(rip->b + 8);

	return flt_siphash(t->k0, t->k1, lo ^ (hi * 0x9e3779b97f4a7c15ULL),
			    (uint64_t)lport << 32 | (uint64_t)rport << 16 |
			    (uint64_t)kind << 12 | (uint64_t)fam << 8 | proto);
}

static size_t slot_home(const struct flt_table *t, const struct flt__slot *s)
{
	return (size_t)key_hash(t, s->kind, s->proto, s->fam, s->lport, &s->rip, s->rport) &
	       (t->cap - 1);
}

static bool slot_is(const struct flt__slot *s, uint8_t kind, uint8_t proto, uint8_t fam,
		    uint16_t lport, const struct flt_addr *rip, uint16_t rport)
{
	return s->kind == kind && s->proto == proto && s->fam == fam && s->lport == lport &&
	       s->rport == rport && memcmp(&s->rip, rip, sizeof(*rip)) == 0;
}

/* Index of the slot holding the key, or of the empty slot that ends its probe run. The
 * load factor is at most 1/2, so an empty slot always exists. */
static size_t probe(const struct flt_table *t, uint8_t kind, uint8_t proto, uint8_t fam,
		    uint16_t lport, const struct flt_addr *rip, uint16_t rport)
{
	size_t mask = t->cap - 1;
	size_t i;

	if (!rip)
		rip = &no_addr;
	i = (size_t)key_hash(t, kind, proto, fam, lport, rip, rport) & mask;
	while (t->slots[i].kind && !slot_is(&t->slots[i], kind, proto, fam, lport, rip, rport))
		i = (i + 1) & mask;
	return i;
}

/* The listening rule of one family. */
static size_t probe_listen(const struct flt_table *t, uint8_t proto, uint8_t fam,
			   uint16_t lport)
{
	return probe(t, FLT_RULE_LISTEN, proto, fam, lport, NULL, 0);
}

static size_t probe_conn(const struct flt_table *t, uint8_t proto, uint16_t lport,
			 const struct flt_addr *rip, uint16_t rport)
{
	return probe(t, FLT_RULE_CONNECTED, proto, 0, lport, rip, rport);
}

const struct flt__slot *flt__find(const struct flt_table *t, uint8_t kind, uint8_t proto,
				  uint8_t fam, uint16_t lport, const struct flt_addr *rip,
				  uint16_t rport)
{
	const struct flt__slot *s = &t->slots[probe(t, kind, proto, fam, lport, rip, rport)];

	return s->kind ? s : NULL;
}

/* Move every rule into a fresh array of new_cap slots (also used to rehash under a new
 * key). On failure the table is unchanged. */
static int resize(struct flt_table *t, size_t new_cap)
{
	struct flt__slot *old = t->slots;
	size_t old_cap = t->cap;
	struct flt__slot *slots = calloc(new_cap, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	t->slots = slots;
	t->cap = new_cap;
	for (size_t i = 0; i < old_cap; i++) {
		if (old[i].kind) {
			const struct flt__slot *s = &old[i];
			t->slots[probe(t, s->kind, s->proto, s->fam, s->lport, &s->rip,
				       s->rport)] = *s;
		}
	}
	free(old);
	return 0;
}

/* Make room for one more rule before it is inserted. */
static int reserve_one(struct flt_table *t)
{
	if ((t->used + 1) * 2 <= t->cap)
		return 0;
	return resize(t, t->cap * 2);
}

/* Empty slot i and close the gap (Knuth, TAOCP vol. 3, 6.4, Algorithm R): walk the run
 * after i and move back every rule whose home slot is not cyclically in (hole, j]. */
static void remove_at(struct flt_table *t, size_t i)
{
	size_t mask = t->cap - 1;
	size_t hole = i;

	for (size_t j = (i + 1) & mask; t->slots[j].kind; j = (j + 1) & mask) {
		size_t home = slot_home(t, &t->slots[j]);
		bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);

		if (!stays) {
			t->slots[hole] = t->slots[j];
			hole = j;
		}
	}
	memset(&t->slots[hole], 0, sizeof(t->slots[hole]));
	t->used--;
}

/* Give memory back after many deletions. A failed shrink leaves a larger table: fine. */
static void maybe_shrink(struct flt_table *t)
{
	size_t cap = t->cap;

	while (cap > MIN_CAP && t->used * 8 < cap)
		cap /= 2;
	if (cap != t->cap)
		resize(t, cap);
}

static void seed_from(struct flt_table *t, uint64_t seed)
{
	t->k0 = splitmix64(&seed);
	t->k1 = splitmix64(&seed);
}

struct flt_table *flt_table_new(void)
{
	struct flt_table *t = calloc(1, sizeof(*t));
	uint64_t seed[2];

	if (!t)
		return NULL;
	t->stats = calloc(1, sizeof(*t->stats));
	t->slots = calloc(MIN_CAP, sizeof(*t->slots));
	if (!t->stats || !t->slots) {
		flt_table_free(t);
		return NULL;
	}
	t->cap = MIN_CAP;
	/* getrandom without GRND_NONBLOCK only blocks before the kernel's pool is first
	 * seeded. Should it fail anyway, the clock and the heap address still differ from
	 * one run to the next; a weak key costs hash quality, never correctness. */
	if (getrandom(seed, sizeof(seed), 0) != (ssize_t)sizeof(seed)) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		seed[0] = (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 32;
		seed[1] = (uint64_t)(uintptr_t)t;
	}
	t->k0 = seed[0];
	t->k1 = seed[1];
	return t;
}

void flt_table_free(struct flt_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; t->slots && i < t->cap; i++)
		if (t->slots[i].kind == FLT_RULE_LISTEN)
		{
			free(t->slots[i].group->acc);
			free(t->slots[i].group);
		}
	free(t->slots);
	free(t->stats);
	free(t);
}

int flt_table_set_seed(struct flt_table *t, uint64_t seed)
{
	uint64_t k0 = t->k0, k1 = t->k1;
	int ret;

	seed_from(t, seed);
	ret = resize(t, t->cap);
	if (ret < 0) {
		t->k0 = k0;
		t->k1 = k1;
	}
	return ret;
}

static bool valid_proto(uint8_t proto)
{
	return proto == WIRE_IPPROTO_TCP || proto == WIRE_IPPROTO_UDP;
}

/* A remote address a rule can name: not zero (IPv4 0.0.0.0 or IPv6 ::). */
static bool valid_remote(const struct flt_addr *rip)
{
	return flt_addr_is_v4(rip) ? flt_addr_v4_of(rip) != 0 : memcmp(rip, &no_addr, sizeof(*rip)) != 0;
}

int flt_add_connected_addr(struct flt_table *t, uint8_t proto, uint16_t lport,
			   const struct flt_addr *rip, uint16_t rport, flt_owner_t owner)
{
	size_t i;
	int ret;

	if (!valid_proto(proto) || !lport || !valid_remote(rip) || !rport || owner == FLT_NO_OWNER)
		return -EINVAL;
	if (flt__find(t, FLT_RULE_CONNECTED, proto, 0, lport, rip, rport))
		return -EEXIST;
	ret = reserve_one(t);
	if (ret < 0)
		return ret;
	i = probe_conn(t, proto, lport, rip, rport);
	t->slots[i] = (struct flt__slot){
		.rip = *rip, .lport = lport, .rport = rport, .proto = proto,
		.kind = FLT_RULE_CONNECTED, .owner = owner,
	};
	t->used++;
	t->stats->rules_connected++;
	flt__changed(t, FLT_RULE_CONNECTED, proto, 0, lport, rip, rport, owner);
	return 0;
}

int flt_add_connected(struct flt_table *t, uint8_t proto, uint16_t lport, uint32_t rip,
		      uint16_t rport, flt_owner_t owner)
{
	struct flt_addr a = flt_addr_v4(rip);

	return flt_add_connected_addr(t, proto, lport, &a, rport, owner);
}

int flt_del_connected_addr(struct flt_table *t, uint8_t proto, uint16_t lport,
			   const struct flt_addr *rip, uint16_t rport, flt_owner_t owner)
{
	size_t i = probe_conn(t, proto, lport, rip, rport);

	if (!t->slots[i].kind)
		return -ENOENT;
	if (t->slots[i].owner != owner)
		return -EPERM;
	remove_at(t, i);
	t->stats->rules_connected--;
	flt__changed(t, FLT_RULE_CONNECTED, proto, 0, lport, rip, rport, FLT_NO_OWNER);
	maybe_shrink(t);
	return 0;
}

int flt_del_connected(struct flt_table *t, uint8_t proto, uint16_t lport, uint32_t rip,
		      uint16_t rport, flt_owner_t owner)
{
	struct flt_addr a = flt_addr_v4(rip);

	return flt_del_connected_addr(t, proto, lport, &a, rport, owner);
}

int flt_move_connected_addr(struct flt_table *t, uint8_t proto, uint16_t lport,
			    const struct flt_addr *rip, uint16_t rport, flt_owner_t from,
			    flt_owner_t to)
{
	size_t i;

	if (to == FLT_NO_OWNER)
		return -EINVAL;
	i = probe_conn(t, proto, lport, rip, rport);
	if (!t->slots[i].kind)
		return -ENOENT;
	if (t->slots[i].owner != from)
		return -EPERM;
	t->slots[i].owner = to;
	flt__changed(t, FLT_RULE_CONNECTED, proto, 0, lport, rip, rport, to);
	return 0;
}

int flt_move_connected(struct flt_table *t, uint8_t proto, uint16_t lport, uint32_t rip,
		       uint16_t rport, flt_owner_t from, flt_owner_t to)
{
	struct flt_addr a = flt_addr_v4(rip);

	return flt_move_connected_addr(t, proto, lport, &a, rport, from, to);
}

bool flt__group_has(const struct flt__group *g, flt_owner_t owner)
{
	for (uint32_t i = 0; i < g->n; i++)
		if (g->owners[i] == owner)
			return true;
	return false;
}

/* Add owner to g in sorted position; g may move. */
static int group_insert(struct flt__group **gp, flt_owner_t owner)
{
	struct flt__group *g = *gp;
	uint32_t i;

	if (g->n == g->cap) {
		uint32_t cap = g->cap * 2 > FLT_GROUP_MAX ? FLT_GROUP_MAX : g->cap * 2;
		struct flt__group *ng = realloc(g, sizeof(*g) + cap * sizeof(g->owners[0]));

		if (!ng)
			return -ENOMEM;
		ng->cap = cap;
		*gp = g = ng;
	}
	for (i = g->n; i > 0 && g->owners[i - 1] > owner; i--)
		g->owners[i] = g->owners[i - 1];
	g->owners[i] = owner;
	g->n++;
	return 0;
}

/* Whether owner may join the group of one family (0), or why not; the checks of
 * flt_add_listen. */
static int listen_admits(const struct flt_table *t, uint8_t proto, uint8_t fam,
			 uint16_t lport, flt_owner_t owner, bool shared)
{
	const struct flt__slot *s = &t->slots[probe_listen(t, proto, fam, lport)];

	if (!s->kind)
		return 0;
	if (flt__group_has(s->group, owner))
		return -EEXIST;
	/* SO_REUSEPORT semantics: every holder of the port, old and new, must have asked
	 * to share it. */
	if (!s->group->shared || !shared)
		return -EADDRINUSE;
	if (s->group->n >= FLT_GROUP_MAX)
		return -ENOSPC;
	return 0;
}

/* Add owner to the group of one family, listen_admits() having said yes. */
static int listen_add_one(struct flt_table *t, uint8_t proto, uint8_t fam, uint16_t lport,
			  flt_owner_t owner, bool shared)
{
	struct flt__slot *s;
	struct flt__group *g;
	size_t i;
	int ret;

	i = probe_listen(t, proto, fam, lport);
	s = &t->slots[i];
	if (s->kind) {
		ret = group_insert(&s->group, owner);
		if (ret < 0)
			return ret;
		t->stats->rules_listen++;
		flt__changed(t, FLT_RULE_LISTEN, proto, fam, lport, NULL, 0, 0);
		return 0;
	}

	g = malloc(sizeof(*g) + 2 * sizeof(g->owners[0]));
	if (!g)
		return -ENOMEM;
	ret = reserve_one(t);
	if (ret < 0) {
		free(g);
		return ret;
	}
	g->n = 1;
	g->cap = 2;
	g->shared = shared;
	g->nacc = 0;
	g->acc = NULL;
	g->owners[0] = owner;
	i = probe_listen(t, proto, fam, lport);
	t->slots[i] = (struct flt__slot){
		.lport = lport, .proto = proto, .kind = FLT_RULE_LISTEN, .fam = fam,
		.owner = FLT_NO_OWNER, .group = g,
	};
	t->used++;
	t->stats->rules_listen++;
	flt__changed(t, FLT_RULE_LISTEN, proto, fam, lport, NULL, 0, 0);
	return 0;
}

static bool valid_fams(unsigned fams)
{
	return fams && !(fams & ~(unsigned)FLT_FAM_ANY);
}

/* A change of one family's listening rule (join, accepting, delete). */
typedef int (*fam_op)(struct flt_table *t, uint8_t proto, uint8_t fam, uint16_t lport,
		      flt_owner_t owner);

/* one, made for each family in fams (-EINVAL if fams is no valid set): every family is
 * tried, the first error returned. */
static int each_fam(struct flt_table *t, uint8_t proto, uint16_t lport, unsigned fams,
		    flt_owner_t owner, fam_op one)
{
	int ret = 0, r;

	if (!valid_fams(fams))
		return -EINVAL;
	for (uint8_t f = FLT_FAM_V4; f <= FLT_FAM_V6; f <<= 1)
		if ((fams & f) && (r = one(t, proto, f, lport, owner)) < 0 && !ret)
			ret = r;
	return ret;
}

static int listen_del_one(struct flt_table *t, uint8_t proto, uint8_t fam, uint16_t lport,
			  flt_owner_t owner);

int flt_add_listen_fam(struct flt_table *t, uint8_t proto, uint16_t lport, unsigned fams,
		       flt_owner_t owner, bool shared)
{
	int ret;

	if (!valid_proto(proto) || !lport || owner == FLT_NO_OWNER || !valid_fams(fams))
		return -EINVAL;
	/* Both families or neither: a dual-stack listener holds the port in both. */
	for (uint8_t f = FLT_FAM_V4; f <= FLT_FAM_V6; f <<= 1)
		if ((fams & f) && (ret = listen_admits(t, proto, f, lport, owner, shared)) < 0)
			return ret;
	for (uint8_t f = FLT_FAM_V4; f <= FLT_FAM_V6; f <<= 1) {
		if (!(fams & f))
			continue;
		ret = listen_add_one(t, proto, f, lport, owner, shared);
		if (ret < 0) {
			if (f == FLT_FAM_V6 && (fams & FLT_FAM_V4))
				listen_del_one(t, proto, FLT_FAM_V4, lport, owner);
			return ret;
		}
	}
	return 0;
}

int flt_add_listen(struct flt_table *t, uint8_t proto, uint16_t lport, flt_owner_t owner,
		   bool shared)
{
	return flt_add_listen_fam(t, proto, lport, FLT_FAM_V4, owner, shared);
}

/* Remove owner from the group in slot i; frees the slot with the last member. */
static bool group_remove(struct flt_table *t, size_t i, flt_owner_t owner)
{
	struct flt__group *g = t->slots[i].group;
	uint8_t proto = t->slots[i].proto, fam = t->slots[i].fam;
	uint16_t lport = t->slots[i].lport;
	uint32_t k;

	for (k = 0; k < g->nacc && g->acc[k] != owner; k++)
		;
	if (k < g->nacc) {
		g->acc[k] = g->acc[g->nacc - 1];
		g->nacc--;
	}

	for (k = 0; k < g->n && g->owners[k] != owner; k++)
		;
	if (k == g->n)
		return false;
	memmove(&g->owners[k], &g->owners[k + 1], (g->n - k - 1) * sizeof(g->owners[0]));
	g->n--;
	t->stats->rules_listen--;
	if (g->n == 0) {
		free(g->acc);
		free(g);
		remove_at(t, i);
	}
	flt__changed(t, FLT_RULE_LISTEN, proto, fam, lport, NULL, 0, 0);
	return true;
}

static int join_listen_one(struct flt_table *t, uint8_t proto, uint8_t fam, uint16_t lport,
			   flt_owner_t owner)
{
	size_t i;
	int ret;

	i = probe_listen(t, proto, fam, lport);
	if (!t->slots[i].kind)
		return flt_add_listen_fam(t, proto, lport, fam, owner, false);
	if (flt__group_has(t->slots[i].group, owner))
		return -EEXIST;
	if (t->slots[i].group->n >= FLT_GROUP_MAX)
		return -ENOSPC;
	ret = group_insert(&t->slots[i].group, owner);
	if (ret == 0) {
		t->stats->rules_listen++;
		flt__changed(t, FLT_RULE_LISTEN, proto, fam, lport, NULL, 0, 0);
	}
	return ret;
}

int flt_join_listen_fam(struct flt_table *t, uint8_t proto, uint16_t lport, unsigned fams,
			flt_owner_t owner)
{
	if (!valid_proto(proto) || !lport || owner == FLT_NO_OWNER || !valid_fams(fams))
		return -EINVAL;
	return each_fam(t, proto, lport, fams, owner, join_listen_one);
}

int flt_join_listen(struct flt_table *t, uint8_t proto, uint16_t lport, flt_owner_t owner)
{
	return flt_join_listen_fam(t, proto, lport, FLT_FAM_V4, owner);
}

static int set_accepting_one(struct flt_table *t, uint8_t proto, uint8_t fam, uint16_t lport,
			     flt_owner_t owner)
{
	size_t i = probe_listen(t, proto, fam, lport);
	struct flt__group *g;

	if (!t->slots[i].kind || !flt__group_has(t->slots[i].group, owner))
		return -ENOENT;
	g = t->slots[i].group;
	for (uint32_t k = 0; k < g->nacc; k++)
		if (g->acc[k] == owner)
			return 0;
	flt_owner_t *n = realloc(g->acc, sizeof(*n) * (g->nacc + 1));
	if (!n)
		return -ENOMEM;
	n[g->nacc++] = owner;
	g->acc = n;
	flt__changed(t, FLT_RULE_LISTEN, proto, fam, lport, NULL, 0, 0);
	return 0;
}

int flt_set_accepting_fam(struct flt_table *t, uint8_t proto, uint16_t lport, unsigned fams,
			  flt_owner_t owner)
{
	return each_fam(t, proto, lport, fams, owner, set_accepting_one);
}

int flt_set_accepting(struct flt_table *t, uint8_t proto, uint16_t lport, flt_owner_t owner)
{
	return flt_set_accepting_fam(t, proto, lport, FLT_FAM_V4, owner);
}

static int listen_del_one(struct flt_table *t, uint8_t proto, uint8_t fam, uint16_t lport,
			  flt_owner_t owner)
{
	size_t i = probe_listen(t, proto, fam, lport);

	if (!t->slots[i].kind || !group_remove(t, i, owner))
		return -ENOENT;
	maybe_shrink(t);
	return 0;
}

int flt_del_listen_fam(struct flt_table *t, uint8_t proto, uint16_t lport, unsigned fams,
		       flt_owner_t owner)
{
	return each_fam(t, proto, lport, fams, owner, listen_del_one);
}

int flt_del_listen(struct flt_table *t, uint8_t proto, uint16_t lport, flt_owner_t owner)
{
	return flt_del_listen_fam(t, proto, lport, FLT_FAM_V4, owner);
}

size_t flt_del_owner(struct flt_table *t, flt_owner_t owner)
{
	size_t n = 0;

	/* remove_at() only moves rules backwards into the hole at i, or into later holes,
	 * so re-examining slot i after a removal visits every rule exactly once or (for a
	 * rule that wrapped round from the start) again harmlessly. */
	for (size_t i = 0; i < t->cap;) {
		struct flt__slot *s = &t->slots[i];
		bool moved = false;

		if (s->kind == FLT_RULE_CONNECTED && s->owner == owner) {
			struct flt__slot gone = *s;

			remove_at(t, i);
			t->stats->rules_connected--;
			flt__changed(t, FLT_RULE_CONNECTED, gone.proto, 0, gone.lport, &gone.rip,
				     gone.rport, FLT_NO_OWNER);
			n++;
			moved = true;
		} else if (s->kind == FLT_RULE_LISTEN && flt__group_has(s->group, owner)) {
			bool last = s->group->n == 1;

			group_remove(t, i, owner);
			n++;
			moved = last;
		}
		if (!moved)
			i++;
	}
	maybe_shrink(t);
	return n;
}

/* Which member of a listening group gets the connection (rip, rport) -> (lip, lport).
 * Rendezvous (highest random weight) hashing: each member scores the connection and the
 * highest score wins. With no per-connection state, every segment of a connection, the
 * SYN first, reaches the same member; when a member joins or leaves, only the
 * connections it wins or held change hands, not a shuffle of all of them. */
flt_owner_t flt__group_pick(const struct flt_table *t, const struct flt__group *g,
			    const struct flt_addr *rip, uint16_t rport,
			    const struct flt_addr *lip, uint16_t lport)
{
	uint64_t h, best = 0;
	const flt_owner_t *m = g->nacc ? g->acc : g->owners;
	uint32_t n = g->nacc ? g->nacc : g->n;
	flt_owner_t pick;

	if (n == 1)
		return m[0];
	if (flt_addr_is_v4(rip) && flt_addr_is_v4(lip)) {
		/* IPv4: exactly the words the direct path's steering program hashes
		 * (filter/datapath.bpf.c), so that both pick the same member. */
		h = flt_siphash(t->k0, t->k1,
				 (uint64_t)flt_addr_v4_of(rip) << 32 | flt_addr_v4_of(lip),
				 (uint64_t)1 << 40 | (uint64_t)rport << 16 | lport);
	} else {
		/* IPv6: all 32 address octets, chained; group_pick6 in the steering program
		 * computes the same words. */
		h = flt_siphash(t->k0, t->k1, rd64(rip->b), rd64(rip->b + 8));
		h = flt_siphash(t->k0, t->k1, h ^ rd64(lip->b), rd64(lip->b + 8));
		h = flt_siphash(t->k0, t->k1, h,
				 (uint64_t)2 << 40 | (uint64_t)rport << 16 | lport);
	}
	pick = m[0];
	for (uint32_t i = 0; i < n; i++) {
		uint64_t w = flt__pick_weight(h, m[i]);

		if (i == 0 || w > best) {
			best = w;
			pick = m[i];
		}
	}
	return pick;
}

void flt_count_rx_drop(const struct flt_table *t, enum flt_reason r)
{
	if (FLT_REASON_INDEX(r) < FLT_REASON_COUNT)
		t->stats->rx_drop[FLT_REASON_INDEX(r)]++;
}

void flt_count_tx_drop(const struct flt_table *t, enum flt_reason r)
{
	if (FLT_REASON_INDEX(r) < FLT_REASON_COUNT)
		t->stats->tx_deny[FLT_REASON_INDEX(r)]++;
}

void flt_table_stats(const struct flt_table *t, struct flt_stats *out)
{
	*out = *t->stats;
}

int flt_foreach(const struct flt_table *t, flt_visit_fn fn, void *arg)
{
	for (size_t i = 0; i < t->cap; i++) {
		const struct flt__slot *s = &t->slots[i];
		bool v4 = s->kind == FLT_RULE_LISTEN ? s->fam == FLT_FAM_V4 : flt_addr_is_v4(&s->rip);
		struct flt_rule r = {
			.kind = (enum flt_kind)s->kind, .proto = s->proto, .lport = s->lport,
			.rip = v4 && s->kind == FLT_RULE_CONNECTED ? flt_addr_v4_of(&s->rip) : 0,
			.rip6 = s->rip, .fam = v4 ? FLT_FAM_V4 : FLT_FAM_V6,
			.rport = s->rport, .owner = s->owner,
		};
		int ret;

		if (s->kind == FLT_RULE_CONNECTED) {
			ret = fn(&r, arg);
			if (ret)
				return ret;
		} else if (s->kind == FLT_RULE_LISTEN) {
			r.shared = s->group->shared;
			for (uint32_t k = 0; k < s->group->n; k++) {
				r.owner = s->group->owners[k];
				ret = fn(&r, arg);
				if (ret)
					return ret;
			}
		}
	}
	return 0;
}

void flt_table_set_observer(struct flt_table *t, flt_change_fn *fn, void *arg)
{
	t->observer = fn;
	t->observer_arg = arg;
}

void flt__changed(const struct flt_table *t, enum flt_kind kind, uint8_t proto, uint8_t fam,
		  uint16_t lport, const struct flt_addr *rip, uint16_t rport, flt_owner_t owner)
{
	bool v4 = kind == FLT_RULE_LISTEN ? fam == FLT_FAM_V4 : flt_addr_is_v4(rip);

	if (v4 && t->observer) {
		if (kind == FLT_RULE_LISTEN)
			t->observer(t->observer_arg, kind, proto, lport, 0, 0, owner);
		else
			t->observer(t->observer_arg, kind, proto, lport, flt_addr_v4_of(rip),
				    rport, owner);
	} else if (!v4 && t->observer6) {
		t->observer6(t->observer6_arg, kind, proto, lport,
			     kind == FLT_RULE_LISTEN ? NULL : rip, rport, owner);
	}
}

void flt_table_set_observer6(struct flt_table *t, flt_change6_fn *fn, void *arg)
{
	t->observer6 = fn;
	t->observer6_arg = arg;
}

void flt_table_key(const struct flt_table *t, uint64_t *k0, uint64_t *k1)
{
	*k0 = t->k0;
	*k1 = t->k1;
}

int flt_group_get(const struct flt_table *t, uint8_t proto, uint16_t lport, flt_owner_t *all,
		  uint32_t *n_all, flt_owner_t *pick, uint32_t *n_pick)
{
	return flt_group_get_fam(t, proto, lport, FLT_FAM_V4, all, n_all, pick, n_pick);
}

int flt_group_get_fam(const struct flt_table *t, uint8_t proto, uint16_t lport, unsigned fam,
		      flt_owner_t *all, uint32_t *n_all, flt_owner_t *pick, uint32_t *n_pick)
{
	const struct flt__slot *s;
	const struct flt__group *g;

	*n_all = *n_pick = 0;
	if (fam != FLT_FAM_V4 && fam != FLT_FAM_V6)
		return -EINVAL;
	s = flt__find(t, FLT_RULE_LISTEN, proto, (uint8_t)fam, lport, NULL, 0);
	if (!s)
		return -ENOENT;
	g = s->group;
	/* flt__group_pick's list: the accepting members when there are any. */
	memcpy(all, g->owners, sizeof(all[0]) * g->n);
	*n_all = g->n;
	if (g->nacc) {
		memcpy(pick, g->acc, sizeof(pick[0]) * g->nacc);
		*n_pick = g->nacc;
	} else {
		memcpy(pick, g->owners, sizeof(pick[0]) * g->n);
		*n_pick = g->n;
	}
	return 0;
}
