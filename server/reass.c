/* IPv4 and IPv6 reassembly for the processes of the node.
 *
 * Read first: RFC 791 §3.2 (fragmentation and reassembly), RFC 1122 §3.3.2 (reassembly
 * timeout), RFC 8200 §4.5 (IPv6's Fragment header and its reassembly rules), RFC 1858
 * (fragment attacks on filters), RFC 5722 (overlapping fragments; its rule is for IPv6,
 * Linux applies it to IPv4 too), RFC 7112 (a first fragment holds the whole header
 * chain), RFC 4963 (why bounds matter).
 *
 * Neither ulsd's filter nor the kernel's steering can tell from a fragment after the
 * first which endpoint it belongs to, so every fragment comes to ulsd (filter/demux.c,
 * filter/datapath.bpf.c). ulsd keeps the fragments of each datagram (the RFC 791 buffer
 * identifier: source, destination, protocol, Identification; the destination is always
 * the node) until all of them are there, with bounds on what it holds. Then the first
 * fragment's transport header names the owner through the filter table, and the owner gets
 * the original fragments, in order: its own lwIP reassembles them (IP_REASSEMBLY,
 * LWIP_IPV6_REASS), so no datagram larger than a ring slot or a TAP frame ever has to be
 * built. On the relay they go into the owner's ring; on the direct path ulsd writes them
 * into its own TAP queue with the node's MAC as destination, the transmit check sends them
 * back into the TAP, and the steering program finds their owner in the dp_frag map that
 * ulsd filled just before (server/bpf.c).
 *
 * IPv6 (RFC 8200 §4.5): a datagram is keyed by source, destination and the Fragment
 * header's 32-bit Identification (the destination is always the node); a fragment's data
 * is what follows its Fragment header. The checks §4.5 names are made here, with their
 * ICMPv6 answers (server/reply6.c): a fragment other than the last whose length is not a
 * multiple of 8, and one that would make the reassembled payload longer than 65,535
 * octets, get Parameter Problem code 0; an atomic fragment (offset 0, M clear) is whole at
 * once. On the direct path the steering program finds an IPv6 datagram's owner in
 * dp_frag6 when its Fragment header follows the fixed header. Deviation: one with
 * extension headers before its Fragment header, whose owner is on the direct path, is
 * dropped (drop_reass_ipv6_direct): the steering program walks no extension header.
 *
 * Bounds (RFC 4963 §3: a reassembly buffer is a resource a remote host can exhaust):
 * at most SRV_REASS_MAX datagrams in progress, SRV_REASS_BYTES octets held (each fragment
 * charged its frame length plus SRV_REASS_OVERHEAD, so tiny fragments cost what they
 * cost), SRV_REASS_FRAGS fragments per datagram. A fragment that would start a datagram
 * beyond the bounds is dropped (as Linux does above ipfrag_high_thresh): the datagrams in
 * progress are not evicted for it, and expire after the reassembly timeout.
 */
#include "server/internal.h"

#include <stdlib.h>
#include <string.h>

#include "netif/wire/wire.h"

#define SRV_REASS_MAX        256         /* datagrams in progress */
#define SRV_REASS_BYTES      (4u << 20)  /* octets held, overhead included (Linux: 4 MB) */
/* Fragments of one datagram. RFC 791 §3.2: "Every internet destination must be able to
 * receive a datagram of 576 octets either in one piece or in fragments to be reassembled",
 * and "the minimum fragment is 8 octets": 70 fragments (64 dropped such a datagram). At
 * most lwIP's IP_REASS_MAX_PBUFS (256), which the owner reassembles them with. */
#define SRV_REASS_FRAGS      128
#define SRV_REASS_OVERHEAD   64          /* charged per fragment besides its frame */
/* RFC 1122 §3.3.2: "The IP module MUST ... if the timer expires, ... discard the
 * reassembly"; "The recommended value for the reassembly timeout is 60 seconds". Linux
 * uses 30 s (ipfrag_time), and so do we. ULSD_REASS_TIMEOUT_MS changes it (tests). */
#define SRV_REASS_TIMEOUT_MS 30000
/* RFC 8200 §4.5: "If insufficient fragments are received to complete reassembly of a
 * packet within 60 seconds of the reception of the first-arriving fragment of that
 * packet, reassembly of that packet must be abandoned". Linux's ip6frag_time is 60 s too. */
#define SRV_REASS6_TIMEOUT_MS 60000
/* RFC 8200 §4.5: the reassembled packet's Payload Length is at most 65,535 octets. */
#define SRV_REASS6_MAX_PAYLOAD 65535u
/* How long a delivered datagram's key stays in the steering map: the fragments are in the
 * kernel's hands for microseconds, and a fragment of that key that comes back to ulsd
 * meanwhile was not steered (the owner left): it is dropped, not reassembled again. */
#define SRV_REASS_STEER_MS   1000
#define SRV_REASS_STEERED    SRV_REASS_MAX  /* at most FLT_DP_FRAG_MAX */

struct frag {
	struct frag *next;     /* by offset */
	uint32_t off, end;     /* octets of the datagram's data: [off, end) */
	size_t data_at;        /* where the data is in frame */
	size_t len;
	uint8_t frame[];
};

/* What names one datagram being reassembled (RFC 791 §3.2's buffer identifier, RFC
 * 8200 §4.5's source, destination and Identification; the destination is the node). */
struct reass_key {
	struct flt_addr src;   /* IPv4 as ::ffff:a.b.c.d */
	uint32_t id;           /* IPv4's 16 bits, IPv6's 32 */
	uint8_t proto;         /* IPv4's Protocol; 0 for IPv6, whose key has none */
	bool v6;
};

struct dgram {
	bool used;
	struct reass_key k;
	uint64_t expires_ms;
	uint32_t total;        /* the data length, known once the last fragment came; 0: not yet */
	uint32_t have;         /* octets of data held (no overlaps, so no double counting) */
	unsigned nfrags;
	size_t held;
	bool has_first;
	struct flt_pkt first;  /* fragment zero, parsed: its ports name the owner */
	struct frag *frags;
};

struct steered {
	struct reass_key k;
	uint64_t until_ms;
};

struct srv_reass {
	struct dgram d[SRV_REASS_MAX];
	unsigned n;
	size_t held;
	uint64_t timeout_ms, timeout6_ms;
	struct steered st[SRV_REASS_STEERED];
	unsigned st_head, st_n;  /* a ring, oldest at st_head */
	uint64_t next_ms;        /* nothing expires before this: the tick has nothing to do */
};

static void due(struct srv_reass *r, uint64_t ms)
{
	if (ms < r->next_ms)
		r->next_ms = ms;
}

int srv__reass_init(struct srv *s)
{
	struct srv_reass *r = calloc(1, sizeof(*r));
	const char *env = getenv("ULSD_REASS_TIMEOUT_MS");

	if (!r)
		return -1;
	r->timeout_ms = SRV_REASS_TIMEOUT_MS;
	r->timeout6_ms = SRV_REASS6_TIMEOUT_MS;
	r->next_ms = UINT64_MAX;
	if (env && *env) {
		char *end;
		unsigned long v = strtoul(env, &end, 10);
		if (*end || v < 100 || v > 120000)
			srv__log(1, "ULSD_REASS_TIMEOUT_MS=%s ignored (100-120000)", env);
		else
			r->timeout_ms = r->timeout6_ms = v;
	}
	s->reass = r;
	return 0;
}

static void gauges(struct srv *s)
{
	struct srv_reass *r = s->reass;

	s->ctr.v[SRV_REASS_IN_PROGRESS] = r->n;
	s->ctr.v[SRV_REASS_BYTES_HELD] = r->held;
	if (r->n > s->ctr.v[SRV_REASS_PEAK])
		s->ctr.v[SRV_REASS_PEAK] = r->n;
}

/* Forget a datagram; its fragments that are still held count as dropped. */
static void release(struct srv *s, struct dgram *d, bool dropped)
{
	struct srv_reass *r = s->reass;
	struct frag *f = d->frags;

	while (f) {
		struct frag *next = f->next;
		if (dropped)
			s->ctr.v[SRV_DROP_FRAGMENT]++;
		free(f);
		f = next;
	}
	r->held -= d->held;
	r->n--;
	memset(d, 0, sizeof(*d));
	gauges(s);
}

static uint32_t key_ip4(const struct reass_key *k)
{
	uint32_t ip;

	memcpy(&ip, k->src.b + 12, 4);
	return ip;
}

/* The steering program sends the fragments of key k to lease owner (0: nowhere). */
static int steer(struct srv *s, const struct reass_key *k, uint32_t owner)
{
	if (k->v6)
		return srv__dp_frag6_steer(s, k->src.b, k->id, owner);
	return srv__dp_frag_steer(s, key_ip4(k), (uint16_t)k->id, k->proto, owner);
}

static void unsteer_oldest(struct srv *s)
{
	struct srv_reass *r = s->reass;
	struct steered *e = &r->st[r->st_head];

	steer(s, &e->k, 0);
	r->st_head = (r->st_head + 1) % SRV_REASS_STEERED;
	r->st_n--;
}

static bool key_equal(const struct reass_key *a, const struct reass_key *b)
{
	return a->v6 == b->v6 && a->id == b->id && a->proto == b->proto &&
	       memcmp(a->src.b, b->src.b, sizeof(a->src.b)) == 0;
}

static bool recently_steered(const struct srv_reass *r, const struct reass_key *k)
{
	for (unsigned i = 0; i < r->st_n; i++) {
		const struct steered *e = &r->st[(r->st_head + i) % SRV_REASS_STEERED];
		if (key_equal(&e->k, k))
			return true;
	}
	return false;
}

static void drop_fragment(struct srv *s, enum srv_counter why)
{
	s->ctr.v[why]++;
	s->ctr.v[SRV_DROP_FRAGMENT]++;
}

/* The datagram whose fragments are frags (by offset, the first at offset 0; total octets
 * of data) rebuilt as one unfragmented packet in a new frame (*len octets; the caller
 * frees it), or NULL (counted). From the first fragment's headers: IPv4's without MF and
 * offset, with the whole Total Length; IPv6's unfragmentable part without the Fragment
 * header, whose Next Header goes into the field that named it. */
static uint8_t *rebuild(struct srv *s, const struct frag *frags, uint32_t total, bool v6,
			size_t *len)
{
	const struct frag *first = frags;
	size_t head = v6 ? first->data_at - WIRE_IPV6_FRAG_HLEN : first->data_at;
	size_t l3 = head - WIRE_ETH_HLEN + total;   /* IPv4: Total Length; IPv6: 40 + plen */

	if (!v6 && l3 > WIRE_IPV4_MAX_LEN) {
		/* RFC 791 §3.2: Total Length is 16 bits; offsets let fragments claim more (the
		 * "ping of death"). The processes' lwIP refuses those too. */
		s->ctr.v[SRV_DROP_REASS_BAD]++;
		return NULL;
	}
	if (v6 && l3 - WIRE_IPV6_HLEN > SRV_REASS6_MAX_PAYLOAD) {
		/* RFC 8200 §4.5: Payload Length is 16 bits too. check6 holds each fragment
		 * to 65,535 with its own unfragmentable part, so a first fragment with
		 * extension headers and a last one without can each pass and still make
		 * more; written into the field, the length was cut (to 7 for 8 + 65,535).
		 * Linux drops these at reassembly as well (ip6_frag_reasm, oversize). */
		s->ctr.v[SRV_DROP_REASS_BAD]++;
		return NULL;
	}
	uint8_t *f = malloc(head + total);
	if (!f) {
		s->ctr.v[SRV_DROP_REASS_LIMIT]++;
		return NULL;
	}
	memcpy(f, first->frame, head);
	for (const struct frag *g = frags; g; g = g->next)
		memcpy(f + head + g->off, g->frame + g->data_at, g->end - g->off);
	uint8_t *ip = f + WIRE_ETH_HLEN;
	if (v6) {
		/* The headers before the Fragment header are Hop-by-Hop, Destination Options
		 * and Routing (RFC 8200 §4.1), each (Hdr Ext Len + 1) * 8 octets, and other
		 * Fragment headers at offset 0 (wire_ipv6_upper names the last), 8 octets:
		 * their second octet is Reserved, "ignored on reception" (§4.5), no length.
		 * flt_parse walked them in bounds when the first fragment came. */
		size_t nh = WIRE_IPV6_OFF_NEXT, at = WIRE_IPV6_HLEN, fh = head - WIRE_ETH_HLEN;
		while (at < fh) {
			bool frag = ip[nh] == WIRE_IPPROTO_FRAGMENT;
			nh = at;
			at += frag ? WIRE_IPV6_FRAG_HLEN
				   : ((size_t)ip[at + 1] + 1) * WIRE_IPV6_EXT_UNIT;
		}
		ip[nh] = first->frame[first->data_at - WIRE_IPV6_FRAG_HLEN];
		wire_wr16(ip + WIRE_IPV6_OFF_PLEN, (uint16_t)(l3 - WIRE_IPV6_HLEN));
	} else {
		size_t hlen = head - WIRE_ETH_HLEN;
		wire_wr16(ip + WIRE_IPV4_OFF_TOTAL_LEN, (uint16_t)l3);
		wire_wr16(ip + WIRE_IPV4_OFF_FRAG, 0);
		wire_wr16(ip + WIRE_IPV4_OFF_CHECKSUM, 0);
		wire_wr16(ip + WIRE_IPV4_OFF_CHECKSUM, wire_sum_finish(wire_sum(0, ip, hlen)));
	}
	*len = head + total;
	return f;
}

/* A whole datagram nobody owns: the node answers it as it answers an unfragmented packet
 * (an echo reply, a reset, a port unreachable), as Linux does; a fragmented echo request
 * gets all of its data back (RFC 1122 §3.2.2.6, in fragments: server/fragment.c). */
static bool for_node(struct srv *s, const struct frag *frags, uint32_t total, bool v6)
{
	size_t len;
	uint8_t *f = rebuild(s, frags, total, v6, &len);

	if (!f)
		return false;
	s->ctr.v[SRV_REASS_FOR_NODE]++;
	struct flt_pkt q;
	if (v6 && flt_parse(f, len, &q) == 0 && q.ip6.fragment && q.ip6.frag_off == 0 &&
	    !q.ip6.mf) {
		/* The first fragment came behind an atomic Fragment header (wire_ipv6_upper
		 * names the last one at offset 0), which the packet keeps: processed in
		 * isolation (RFC 6946 §4) as atomic6 does. srv__reass_input takes an atomic
		 * fragment (or a data-less one, dropped) before it looks at the datagrams in
		 * progress, so complete(), whose datagram is still in the table, is not
		 * re-entered. */
		srv__reass_input(s, f, len, &q);
	} else if (v6) {
		srv__input_ip6_whole(s, f, len);
	} else {
		srv__input_ip4_whole(s, f, len);
	}
	free(f);
	return true;
}

/* RFC 6946 §4: "A host that receives an IPv6 packet that includes a Fragment Header with
 * the "Fragment Offset" equal to 0 and the "M" flag equal to 0 MUST process such packet in
 * isolation from any other packets/fragments, even if such packets/fragments contain the
 * same set {IPv6 Source Address, IPv6 Destination Address, Fragment Identification}."
 * So an atomic fragment never meets the datagrams in progress (one of the same key is left
 * as it was): it is rebuilt without its Fragment header at once and goes where that packet
 * would go: into its owner's ring, back into the TAP for the kernel's steering to find its
 * owner's queue by its ports (the direct path; it is no fragment any more), or to the
 * node. */
static void atomic6(struct srv *s, const uint8_t *frame, size_t len, const struct flt_pkt *p,
		    uint32_t end)
{
	struct frag *one = malloc(sizeof(*one) + len);
	struct flt_pkt q;
	size_t wlen;
	uint8_t *w;

	if (!one) {
		drop_fragment(s, SRV_DROP_REASS_LIMIT);
		return;
	}
	*one = (struct frag){ .off = 0, .end = end, .len = len,
			      .data_at = (size_t)p->l3_off + p->ip6.frag_data_off };
	memcpy(one->frame, frame, len);
	w = rebuild(s, one, end, true, &wlen);
	free(one);
	if (!w)
		return;
	s->ctr.v[SRV_REASS_ATOMIC]++;
	int rc = flt_parse(w, wlen, &q);
	if (rc == 0 && q.ip6.fragment && q.ip6.frag_off == 0 && !q.ip6.mf) {
		/* What it carried is an atomic fragment again (wire_ipv6_upper names the last
		 * Fragment header at offset 0; another came before it): processed in isolation
		 * too, as Linux and the processes' lwIP do. Each pass removes one Fragment
		 * header, so there are at most WIRE_IPV6_EXT_MAX of them. */
		srv__reass_input(s, w, wlen, &q);
		free(w);
		return;
	}
	flt_owner_t o = rc < 0 ? FLT_NO_OWNER : flt_lookup_rx(s->flt, &q);
	struct srv_lease *l = o != FLT_NO_OWNER && o != SRV_IN_TRANSIT ?
			      srv__leases_live(&s->leases, o) : NULL;
	if (o == SRV_IN_TRANSIT) {
		s->ctr.v[SRV_DROP_IN_TRANSIT]++;
	} else if (!l) {
		s->ctr.v[SRV_REASS_FOR_NODE]++;
		srv__input_ip6_whole(s, w, wlen);
	} else if (l->has_rings) {
		srv__deliver(s, l, w, wlen);
	} else if (p->ip6.frag_data_off != WIRE_IPV6_HLEN + WIRE_IPV6_FRAG_HLEN) {
		/* As for a datagram (complete): the steering program would not find its ports
		 * behind an extension header. */
		drop_fragment(s, SRV_DROP_REASS_IPV6_DIRECT);
	} else {
		memcpy(w, s->mac, WIRE_ETH_ALEN);  /* for the node: back into the TAP */
		srv__send_frame(s, w, wlen);
	}
	free(w);
}

/* The datagram is whole: hand its fragments to the owner of its first fragment's
 * endpoint, in order of offset. */
static void complete(struct srv *s, struct dgram *d)
{
	struct srv_reass *r = s->reass;
	struct flt_pkt p = d->first;
	flt_owner_t o;
	struct srv_lease *l = NULL;

	/* The whole datagram is there, so the first fragment's ports stand for it. */
	p.ip.fragment = false;
	p.ip6.fragment = false;
	o = flt_lookup_rx(s->flt, &p);
	if (o != FLT_NO_OWNER)
		l = srv__leases_live(&s->leases, o);
	if (o == SRV_IN_TRANSIT) {
		s->ctr.v[SRV_DROP_IN_TRANSIT]++;
		release(s, d, true);
		return;
	}
	if (!l) {
		release(s, d, !for_node(s, d->frags, d->total, d->k.v6));
		return;
	}
	if (!l->has_rings && d->k.v6 &&
	    d->first.ip6.frag_data_off != WIRE_IPV6_HLEN + WIRE_IPV6_FRAG_HLEN) {
		s->ctr.v[SRV_DROP_REASS_IPV6_DIRECT]++;
		release(s, d, true);
		return;
	}
	if (!l->has_rings) {
		/* The direct path: the key goes into the steering map first, so that the
		 * fragments find their owner's queue when the kernel sends them back. */
		if (r->st_n == SRV_REASS_STEERED)
			unsteer_oldest(s);
		if (steer(s, &d->k, l->id) < 0) {
			s->ctr.v[SRV_DP_MAP_ERRORS]++;
			release(s, d, true);
			return;
		}
		struct steered *e = &r->st[(r->st_head + r->st_n) % SRV_REASS_STEERED];
		*e = (struct steered){ d->k, srv__now_ms() + SRV_REASS_STEER_MS };
		r->st_n++;
		due(r, e->until_ms);
	}
	for (struct frag *f = d->frags; f; f = f->next) {
		if (l->has_rings) {
			srv__deliver(s, l, f->frame, f->len);
		} else {
			memcpy(f->frame, s->mac, 6);  /* for the node: back into the TAP */
			srv__send_frame(s, f->frame, f->len);
		}
		s->ctr.v[SRV_REASS_FRAGMENTS]++;
	}
	s->ctr.v[SRV_REASS_DATAGRAMS]++;
	release(s, d, false);
}

static struct dgram *find(struct srv_reass *r, const struct reass_key *k)
{
	for (unsigned i = 0; i < SRV_REASS_MAX; i++) {
		struct dgram *d = &r->d[i];
		if (d->used && key_equal(&d->k, k))
			return d;
	}
	return NULL;
}

/* One fragment as reassembly sees it, from either family's header. */
struct piece {
	struct reass_key k;
	uint32_t off, end;     /* octets of the datagram's data: [off, end) */
	bool mf;
};

static void piece_of(const struct flt_pkt *p, struct piece *x)
{
	memset(x, 0, sizeof(*x));
	if (p->ethertype == WIRE_ETHERTYPE_IPV6) {
		x->k.v6 = true;
		x->k.src = flt_addr_v6(p->ip6.src);
		x->k.id = p->ip6.frag_id;
		x->off = p->ip6.frag_off;
		/* §4.5: the fragment's data is what follows its Fragment header. */
		x->end = x->off + (uint32_t)WIRE_IPV6_HLEN + p->ip6.plen - p->ip6.frag_data_off;
		x->mf = p->ip6.mf;
		return;
	}
	x->k.src = flt_addr_v4(p->ip.src);
	x->k.id = p->ip.id;
	x->k.proto = p->ip.proto;
	/* The fragment's data: from the end of its IP header to Total Length (what follows
	 * is Ethernet padding). */
	x->off = p->ip.frag_off;
	x->end = x->off + (uint32_t)p->ip.total - p->ip.hlen;
	x->mf = p->ip.mf;
}

/* RFC 8200 §4.5's checks of one IPv6 fragment, with their answers. 0: go on. */
static int check6(struct srv *s, const uint8_t *frame, size_t len, const struct flt_pkt *p,
		  const struct piece *x)
{
	/* "If the length of a fragment, as derived from the fragment packet's Payload
	 * Length field, is not a multiple of 8 octets and the M flag of that fragment is
	 * 1, then that fragment must be discarded and an ICMP Parameter Problem, Code 0,
	 * message should be sent to the source of the fragment, pointing to the Payload
	 * Length field of the fragment packet." */
	if (x->mf && (x->end - x->off) % 8) {
		srv__reply6_param_problem(s, frame, len, 0, WIRE_IPV6_OFF_PLEN);
		drop_fragment(s, SRV_DROP_REASS_BAD);
		return -1;
	}
	/* "If the length and offset of a fragment are such that the Payload Length of the
	 * packet reassembled from that fragment would exceed 65,535 octets, then that
	 * fragment must be discarded and an ICMP Parameter Problem, Code 0, message should
	 * be sent to the source of the fragment, pointing to the Fragment Offset field of
	 * the fragment packet." The reassembled payload is the unfragmentable part's
	 * extension headers (those before the Fragment header) and the data. */
	uint32_t unfrag = (uint32_t)p->ip6.frag_data_off - WIRE_IPV6_FRAG_HLEN - WIRE_IPV6_HLEN;
	if (unfrag + x->end > SRV_REASS6_MAX_PAYLOAD) {
		srv__reply6_param_problem(s, frame, len, 0,
					  (uint32_t)p->ip6.frag_data_off - WIRE_IPV6_FRAG_HLEN + 2);
		drop_fragment(s, SRV_DROP_REASS_BAD);
		return -1;
	}
	return 0;
}

/* The packet's first Fragment header, when it is a first fragment's (offset 0, M 1) and
 * not the one flt_parse named (wire_ipv6_upper walks on past a Fragment header at offset
 * 0, for the first fragment's ports, and names the last one): p's fragment fields are made
 * that header's in *q, and q returned; else p. RFC 8200 §4: extension headers "must be
 * processed strictly in the order they appear in the packet", and §4.5: what follows a
 * Fragment header is its Fragmentable Part, another Fragment header included. So the outer
 * header keys the datagram and says where its data starts; the inner one is processed when
 * the datagram is whole (for_node, or the owner's lwIP, whose ip6_input takes the first
 * Fragment header it meets). Before, such a first fragment was taken for the inner one,
 * rebuilt, dropped as a fragment nobody owns, and its datagram never completed. The headers
 * before it (§4.1: Hop-by-Hop, Routing, Destination Options) were walked in bounds by
 * flt_parse; the walk stops at p's own Fragment header. */
static const struct flt_pkt *outer_first_fragment6(const uint8_t *frame, const struct flt_pkt *p,
						   struct flt_pkt *q)
{
	const uint8_t *ip = frame + p->l3_off;
	uint8_t nh = ip[WIRE_IPV6_OFF_NEXT];
	size_t at = WIRE_IPV6_HLEN;

	while (at + WIRE_IPV6_FRAG_HLEN <= p->ip6.frag_data_off &&
	       (nh == WIRE_IPPROTO_HOPOPTS || nh == WIRE_IPPROTO_ROUTING ||
		nh == WIRE_IPPROTO_DSTOPTS)) {
		nh = ip[at];
		at += ((size_t)ip[at + 1] + 1) * WIRE_IPV6_EXT_UNIT;
	}
	if (nh != WIRE_IPPROTO_FRAGMENT || at + WIRE_IPV6_FRAG_HLEN >= p->ip6.frag_data_off)
		return p;   /* p's is the first (or there is none to find) */
	uint16_t fo = wire_rd16(ip + at + 2);
	if ((fo & WIRE_IPV6_FRAG_OFFMASK) || !(fo & WIRE_IPV6_FRAG_M))
		return p;   /* an atomic one: atomic6 takes the packet, one header per pass */
	*q = *p;
	q->ip6.frag_off = 0;
	q->ip6.mf = true;
	q->ip6.frag_id = wire_rd32(ip + at + 4);
	q->ip6.frag_data_off = (uint16_t)(at + WIRE_IPV6_FRAG_HLEN);
	return q;
}

void srv__reass_input(struct srv *s, const uint8_t *frame, size_t len, const struct flt_pkt *p)
{
	struct srv_reass *r = s->reass;
	struct piece x;
	size_t cost = len + SRV_REASS_OVERHEAD;
	struct dgram *d;
	struct flt_pkt outer;

	if (p->ethertype == WIRE_ETHERTYPE_IPV6 && p->ip6.fragment)
		p = outer_first_fragment6(frame, p, &outer);
	piece_of(p, &x);
	uint32_t off = x.off, end = x.end, dlen = end - off;
	/* RFC 8200 §4.5: an atomic fragment "should be processed as a fully reassembled
	 * packet". One with no data is one when its Next Header is 59, No Next Header (§4.7:
	 * "there is nothing following that header"): the node ignores it as it ignores any
	 * such packet (reply6.c, answer). Without data and with another Next Header, the
	 * header it names is missing: drop_reass_bad below. */
	if (x.k.v6 && off == 0 && !x.mf &&
	    (dlen || frame[p->l3_off + p->ip6.frag_data_off - WIRE_IPV6_FRAG_HLEN] ==
			     WIRE_IPPROTO_NONE)) {
		atomic6(s, frame, len, p, end);
		return;
	}
	if (recently_steered(r, &x.k)) {
		/* A fragment we handed to a process came back: its owner is gone. */
		drop_fragment(s, SRV_DROP_REASS_UNSTEERED);
		return;
	}
	if (x.k.v6 && check6(s, frame, len, p, &x) < 0)
		return;
	/* RFC 791 §3.2: every fragment but the last carries a multiple of 8 octets, and a
	 * fragment with data is the only kind that can fill a hole. */
	if (dlen == 0 || (x.mf && dlen % 8)) {
		drop_fragment(s, SRV_DROP_REASS_BAD);
		return;
	}
	d = find(r, &x.k);
	if (!d) {
		if (r->n == SRV_REASS_MAX || r->held + cost > SRV_REASS_BYTES) {
			drop_fragment(s, SRV_DROP_REASS_LIMIT);
			return;
		}
		for (unsigned i = 0; i < SRV_REASS_MAX && !d; i++)
			if (!r->d[i].used)
				d = &r->d[i];
		*d = (struct dgram){ .used = true, .k = x.k,
				     .expires_ms = srv__now_ms() +
						   (x.k.v6 ? r->timeout6_ms : r->timeout_ms) };
		r->n++;
		due(r, d->expires_ms);
	} else if (d->nfrags == SRV_REASS_FRAGS || r->held + cost > SRV_REASS_BYTES) {
		drop_fragment(s, SRV_DROP_REASS_LIMIT);
		release(s, d, true);
		return;
	}
	/* The last fragment fixes the length; nothing may lie beyond it, and no two last
	 * fragments may disagree. */
	uint32_t tail = 0;
	for (struct frag *f = d->frags; f; f = f->next)
		tail = f->end;
	if ((!x.mf && ((d->total && d->total != end) || end < tail)) ||
	    (d->total && end > d->total)) {
		drop_fragment(s, SRV_DROP_REASS_BAD);
		release(s, d, true);
		return;
	}
	struct frag **at = &d->frags;
	while (*at && (*at)->off < off)
		at = &(*at)->next;
	struct frag *prev = NULL;
	for (struct frag *f = d->frags; f && f != *at; f = f->next)
		prev = f;
	if (*at && (*at)->off == off && (*at)->end == end) {
		/* The same fragment again (a retransmission, a duplicating link): Linux keeps
		 * the first copy and drops this one, the datagram survives. */
		drop_fragment(s, SRV_DROP_REASS_DUPLICATE);
		return;
	}
	if ((prev && prev->end > off) || (*at && (*at)->off < end)) {
		/* RFC 5722 §4 (for IPv6; Linux does the same for IPv4): "the entire datagram
		 * (and any constituent fragments, including those not yet received) MUST be
		 * silently discarded". Overlaps are how fragments smuggle a header past a
		 * filter (RFC 1858 §4). */
		drop_fragment(s, SRV_DROP_REASS_OVERLAP);
		release(s, d, true);
		return;
	}
	struct frag *f = malloc(sizeof(*f) + len);
	if (!f) {
		drop_fragment(s, SRV_DROP_REASS_LIMIT);
		if (!d->nfrags)
			release(s, d, true);
		return;
	}
	f->off = off;
	f->end = end;
	f->data_at = (size_t)p->l3_off + (x.k.v6 ? p->ip6.frag_data_off : p->ip.hlen);
	f->len = len;
	memcpy(f->frame, frame, len);
	f->next = *at;
	*at = f;
	d->nfrags++;
	d->have += dlen;
	d->held += cost;
	r->held += cost;
	if (!x.mf)
		d->total = end;
	if (off == 0) {
		d->has_first = true;
		d->first = *p;
	}
	gauges(s);
	if (d->total && d->have == d->total)
		complete(s, d);
}

int srv__reass_tick(struct srv *s)
{
	struct srv_reass *r = s->reass;
	uint64_t now = srv__now_ms();

	/* The demux thread calls this once per batch of frames: scan only when due. */
	if (now < r->next_ms)
		return 0;
	r->next_ms = UINT64_MAX;
	for (unsigned i = 0; i < SRV_REASS_MAX; i++) {
		struct dgram *d = &r->d[i];
		if (d->used && d->expires_ms > now)
			due(r, d->expires_ms);
		if (d->used && d->expires_ms <= now) {
			/* RFC 1122 §3.3.2: "If this timeout expires, the partially-reassembled
			 * datagram MUST be discarded and an ICMP Time Exceeded message sent to
			 * the source host (if fragment zero has been received)." RFC 8200
			 * §4.5: "If the first fragment (i.e., the one with a Fragment Offset of
			 * zero) has been received, an ICMP Time Exceeded -- Fragment Reassembly
			 * Time Exceeded message should be sent to the source of that
			 * fragment." */
			if (d->has_first && d->frags && d->frags->off == 0 && d->k.v6)
				srv__reply6_reass_time_exceeded(s, d->frags->frame, d->frags->len);
			else if (d->has_first && d->frags && d->frags->off == 0)
				srv__reply_reass_time_exceeded(s, d->frags->frame, d->frags->len,
							      &d->first);
			s->ctr.v[SRV_DROP_REASS_TIMEOUT]++;
			release(s, d, true);
		}
	}
	while (r->st_n && r->st[r->st_head].until_ms <= now)
		unsteer_oldest(s);
	if (r->st_n)
		due(r, r->st[r->st_head].until_ms);
	return 0;
}
