/* The filter table's pick for filter/datapath.bpf.c, bit for bit as filter/table.c makes
 * it: which lease owns a tuple (a connection's rule, or a listening group's member picked
 * by rendezvous hashing). A BPF object is one compilation unit: datapath.bpf.c includes
 * this once, after the maps and tuple structs it reads (dp_conn, dp_conn6, dp_listen,
 * dp_listen6, struct tup, struct tup6) are defined. */
#ifndef ULS_FILTER_DATAPATH_PICK_BPF_H
#define ULS_FILTER_DATAPATH_PICK_BPF_H

/* ---- The filter table's pick, bit for bit (filter/table.c) --------------------------- */

/* flt__group_pick: rendezvous hashing over the group's pick list, the tuple's hash h. */
static __u32 pick_member(const struct flt_dp_group *g, __u64 h)
{
	__u32 n = g->n_pick, pick = g->pick[0];
	__u64 best = 0;

	for (__u32 i = 0; i < FLT_DP_GROUP_MAX; i++) {
		if (i >= n)
			break;
		__u32 m = g->pick[i];
		__u64 w = flt__pick_weight(h, m);
		if (i == 0 || w > best) {
			best = w;
			pick = m;
		}
	}
	return pick;
}

/* One subprogram each (noinline), called by the steering and the transmit check: the
 * siphash rounds are not copied into every caller. */
static __noinline __u32 group_pick(const struct flt_dp_cfg *c, const struct flt_dp_group *g,
				   const struct tup *t)
{
	if (g->n_pick <= 1)
		return g->pick[0];
	return pick_member(g, flt__siphash13(c->k0, c->k1, (__u64)t->rip << 32 | t->lip,
					     (__u64)1 << 40 | (__u64)t->rport << 16 | t->lport));
}

/* A 64-bit word of an address in host order, as table.c's rd64 reads it. */
static __always_inline __u64 rd64(const __u8 *p)
{
	__u64 v;

	__builtin_memcpy(&v, p, sizeof(v));
	return v;
}

/* flt__group_pick's IPv6 branch: all 32 address octets, chained. */
static __noinline __u32 group_pick6(const struct flt_dp_cfg *c, const struct flt_dp_group *g,
				    const struct tup6 *t)
{
	__u64 h;

	if (g->n_pick <= 1)
		return g->pick[0];
	h = flt__siphash13(c->k0, c->k1, rd64(t->rip), rd64(t->rip + 8));
	h = flt__siphash13(c->k0, c->k1, h ^ rd64(t->lip), rd64(t->lip + 8));
	h = flt__siphash13(c->k0, c->k1, h, (__u64)2 << 40 | (__u64)t->rport << 16 | t->lport);
	return pick_member(g, h);
}

static __always_inline void conn6_key(struct flt_dp_conn6_key *k, const struct tup6 *t)
{
	__builtin_memset(k, 0, sizeof(*k));
	__builtin_memcpy(k->rip, t->rip, 16);
	k->lport = t->lport;
	k->rport = t->rport;
	k->proto = t->proto;
}

/* What the maps say of a tuple, in flt_lookup_rx's order: the exact 4-tuple's owner, else
 * the listening group of its port. The rules below read both families through it: t is a
 * struct tup6 and the IPv6 maps are read when v6, a constant at every call (the other
 * family's branch is compiled out). */
struct found {
	__u32 *owner;                   /* the exact tuple's entry, or NULL */
	const struct flt_dp_group *g;   /* without one, the port's group, or NULL */
};

static __always_inline struct found lookup(const void *t, int v6)
{
	struct found f = { 0, 0 };

	if (v6) {
		const struct tup6 *t6 = t;
		struct flt_dp_conn6_key ck;
		struct flt_dp_listen_key lk = { .lport = t6->lport, .proto = t6->proto };

		conn6_key(&ck, t6);
		f.owner = bpf_map_lookup_elem(&dp_conn6, &ck);
		if (!f.owner)
			f.g = bpf_map_lookup_elem(&dp_listen6, &lk);
	} else {
		const struct tup *t4 = t;
		struct flt_dp_conn_key ck = { .rip = t4->rip, .lport = t4->lport,
					      .rport = t4->rport, .proto = t4->proto };
		struct flt_dp_listen_key lk = { .lport = t4->lport, .proto = t4->proto };

		f.owner = bpf_map_lookup_elem(&dp_conn, &ck);
		if (!f.owner)
			f.g = bpf_map_lookup_elem(&dp_listen, &lk);
	}
	return f;
}

static __always_inline __u32 pick(const struct flt_dp_cfg *c, const struct flt_dp_group *g,
				  const void *t, int v6)
{
	return v6 ? group_pick6(c, g, t) : group_pick(c, g, t);
}

/* The owner of the tuple (0: none); *exact says whether by its 4-tuple rather than as a
 * listening group's pick. */
static __always_inline __u32 owner_of(const struct flt_dp_cfg *c, const void *t, int v6,
				      int *exact)
{
	struct found f = lookup(t, v6);

	*exact = f.owner != 0;
	if (f.owner)
		return *f.owner;
	if (!f.g || f.g->n_pick == 0)
		return 0;
	return pick(c, f.g, t, v6);
}

static __always_inline __u32 endpoint_owner(const struct flt_dp_cfg *c, const struct tup *t,
					    int *exact)
{
	return owner_of(c, t, 0, exact);
}

static __always_inline __u32 endpoint_owner6(const struct flt_dp_cfg *c, const struct tup6 *t,
					     int *exact)
{
	return owner_of(c, t, 1, exact);
}

static __always_inline int ip6_eq(const __u8 *a, const __u8 *b)
{
	return rd64(a) == rd64(b) && rd64(a + 8) == rd64(b + 8);
}

/* One of the node's IPv6 addresses (RFC 4291 §2.5.6: the link-local one too). */
static __always_inline int node_ip6(const struct flt_dp_cfg *c, const __u8 *a)
{
	return c->has_ip6 && (ip6_eq(a, c->node_ip6) || ip6_eq(a, c->node_ll6));
}

/* clang has no memcmp for BPF. */
static __always_inline int mac_eq(const __u8 *a, const __u8 *b)
{
	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3] && a[4] == b[4] &&
	       a[5] == b[5];
}

#endif
