/* The kernel half of the packet filter: receive steering and the transmit check of the
 * direct data path (docs/architecture.md, "The direct data path").
 *
 * Read first: RFC 894, RFC 826, RFC 791 §3.1-3.2, RFC 1122 §3.2.2, RFC 9293 §3.1, RFC 768.
 *
 * steer (TUNSETSTEERINGEBPF, a socket filter): tun asks it which queue of the node's TAP a
 * frame from the wire goes to; the return value is the queue. It makes the same decision as
 * flt_lookup_rx (filter/demux.c) from maps ulsd keeps equal to its rule table: the exact
 * 4-tuple, else the listening group of the port with the same keyed rendezvous pick, and an
 * ICMP error goes to the owner of the endpoint whose datagram it quotes, and the fragments
 * of a datagram ulsd has reassembled go to the owner it found. Everything else (ARP
 * requests, echo requests, fragments, other addresses, unknown tuples, processes on the
 * relay path) goes to queue 0, ulsd's.
 *
 * IPv6 (RFC 8200) is steered the same way from its own maps (dp_conn6, dp_listen6; 16-octet
 * remote addresses, the pick over the same words as flt__group_pick's IPv6 branch), for a
 * packet to one of the node's two addresses whose Next Header is TCP, UDP or ICMPv6 at once.
 * An ICMPv6 error (RFC 4443 §2.4 (b)) goes to the owner of the endpoint that sent the packet
 * it quotes, a Neighbor Advertisement to the queue that solicited it (RFC 4861 §7.2.6:
 * each stack keeps its own neighbour cache). Neighbour discovery otherwise, echo, packets
 * to other or multicast addresses, fragments and every packet with an extension header go
 * to queue 0.
 * Deviation: no extension header is walked here, where flt_parse walks up to
 * WIRE_IPV6_EXT_MAX of them: such packets are rare and ulsd checks their options
 * (server/reply6.c, RFC 8200 §4.2), so they go to ulsd, which relays them to an owner on
 * the relay path; an owner on the direct path does not get them.
 *
 * synguard (tcx egress on the TAP, filter/datapath_syn.bpf.h): sheds a SYN flood's SYNs to a
 * process's listener before tun queues them; steering notes the known peers it spares.
 *
 * txcheck (tcx ingress on the TAP): every frame a queue's reader writes passes here, with
 * queue_mapping = queue + 1. A process's queue may send only as the node (MAC, address) and
 * only from endpoints it holds: the policy of flt_check_tx. Frames for the node itself go
 * back into the TAP (bpf_redirect to its egress), where steering delivers them, so that the
 * processes of one node reach each other through the node's address. IPv6 likewise: the
 * source one of the node's two addresses (none without --ip6), TCP and UDP from the queue's
 * endpoints, ICMPv6 echo, Neighbor Solicitations (their source link-layer option the
 * node's MAC), and Destination Unreachable about a packet delivered to the queue's own
 * endpoint.
 */
#include <linux/bpf.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "filter/datapath.h"
#include "filter/siphash.h"
#include "netif/wire/proto.h"

/* Debian 12's linux/bpf.h predates tcx (Linux 6.6). */
#define TCX_PASS 0
#define TCX_DROP 2

/* A 16-bit field in network order, and the version and header length of an IPv4 header. */
#define RD16(p, off) ((__u16)(p)[off] << 8 | (p)[(off) + 1])
#define IPV4_VERSION(ip) ((ip)[WIRE_IPV4_OFF_VIHL] >> 4)
#define IPV4_HLEN(ip) (((ip)[WIRE_IPV4_OFF_VIHL] & 0xf) * 4)

/* What the programs read of a frame in one bpf_skb_load_bytes: Ethernet, an IPv4 header
 * without options and the transport header up to TCP's flags (ports, sequence numbers,
 * flags). Each helper call costs a call and its return, and every return is a thunk on
 * this kind of host (AMD's SRSO "Safe RET"): a data frame took four reads in steer, three
 * in txcheck and synguard (docs/benchmarks.md, "Stop 40: the data path's programs, per
 * frame"). */
/* TCP's control flags that say what a segment is (RFC 9293 §3.1): a pure SYN, a bare ACK
 * of a handshake; PSH, URG and the ECN bits aside. */
#define TCP_CTL (WIRE_TCP_SYN | WIRE_TCP_ACK | WIRE_TCP_RST | WIRE_TCP_FIN)
#define PEEK_LEN (WIRE_ETH_HLEN + WIRE_IPV4_HLEN_MIN + WIRE_TCP_OFF_FLAGS + 1)
#define PEEK_L4 (WIRE_ETH_HLEN + WIRE_IPV4_HLEN_MIN)

/* The first PEEK_LEN octets of the frame into h: 1, or 0 when the frame is shorter and
 * only its Ethernet header is in h (-1: not even that). */
static __always_inline int peek(struct __sk_buff *skb, __u8 h[PEEK_LEN])
{
	if (bpf_skb_load_bytes(skb, 0, h, PEEK_LEN) == 0)
		return 1;
	return bpf_skb_load_bytes(skb, 0, h, WIRE_ETH_HLEN) == 0 ? 0 : -1;
}

/* The IPv4 header into ip (the first WIRE_IPV4_HLEN_MIN octets) from the peek when it
 * holds one, else read. */
static __always_inline int ip4_hdr(struct __sk_buff *skb, const __u8 h[PEEK_LEN], int whole,
				   __u8 ip[WIRE_IPV4_HLEN_MIN])
{
	if (whole) {
		__builtin_memcpy(ip, h + WIRE_ETH_HLEN, WIRE_IPV4_HLEN_MIN);
		return 0;
	}
	return bpf_skb_load_bytes(skb, WIRE_ETH_HLEN, ip, WIRE_IPV4_HLEN_MIN) < 0 ? -1 : 0;
}

/* The transport header's first n octets (n <= WIRE_TCP_OFF_FLAGS + 1) at l4 into out:
 * from the peek when the IP header had no options, else read. */
static __always_inline int l4_hdr(struct __sk_buff *skb, const __u8 h[PEEK_LEN], int whole,
				  __u32 l4, __u8 *out, __u32 n)
{
	if (whole && l4 == PEEK_L4) {
		__builtin_memcpy(out, h + PEEK_L4, WIRE_TCP_OFF_FLAGS + 1);
		return 0;
	}
	return bpf_skb_load_bytes(skb, l4, out, n) < 0 ? -1 : 0;
}

/* The GPL licence string is what the kernel asks of programs that use GPL-only helpers;
 * none of ours are, but the string also keeps the loader's verifier log readable. */
char LICENSE[] SEC("license") = "GPL";

/* A map in libbpf's BTF-defined form: kind, at most max entries, key K, value V, and any
 * other members in more. The form is an anonymous struct of __uint and __type members,
 * which C can spell once only as a macro. The _NOPREALLOC maps allocate entries as they are
 * added (a large max_entries, mostly unused). */
#define DP_MAP_WITH(kind, max, K, V, more)                                                  \
	struct {                                                                            \
		__uint(type, kind);                                                         \
		__uint(max_entries, max);                                                   \
		more                                                                        \
		__type(key, K);                                                             \
		__type(value, V);                                                           \
	}
#define DP_MAP(kind, max, K, V) DP_MAP_WITH(kind, max, K, V, )
#define DP_MAP_NOPREALLOC(kind, max, K, V)                                                  \
	DP_MAP_WITH(kind, max, K, V, __uint(map_flags, BPF_F_NO_PREALLOC);)

DP_MAP(BPF_MAP_TYPE_ARRAY, 1, __u32, struct flt_dp_cfg) dp_cfg SEC(".maps");

DP_MAP_NOPREALLOC(BPF_MAP_TYPE_HASH, FLT_DP_CONN_MAX, struct flt_dp_conn_key, __u32)
	dp_conn SEC(".maps");   /* owner (lease id) */

DP_MAP_NOPREALLOC(BPF_MAP_TYPE_HASH, FLT_DP_LISTEN_MAX, struct flt_dp_listen_key,
		  struct flt_dp_group) dp_listen SEC(".maps");

/* Lease id -> its queue (0: the relay path, or no lease). */
DP_MAP(BPF_MAP_TYPE_ARRAY, FLT_DP_LEASES, __u32, __u32) dp_lease_q SEC(".maps");

/* Queue -> its lease id (0: free, or ulsd's queue 0). */
DP_MAP(BPF_MAP_TYPE_ARRAY, FLT_DP_QUEUES, __u32, __u32) dp_q_owner SEC(".maps");

/* Per CPU: both CPUs count for the same queue (a data frame's steering on the sender's,
 * the queue's own writes on its process's), and an atomic add to a shared line moved that
 * line between them for every frame. ulsd sums the CPUs' figures. */
DP_MAP(BPF_MAP_TYPE_PERCPU_ARRAY, FLT_DP_QUEUES, __u32, struct flt_dp_qstat) dp_qstat SEC(".maps");

DP_MAP(BPF_MAP_TYPE_HASH, FLT_DP_ARP_MAX, __u32, struct flt_dp_arpwait) dp_arpwait SEC(".maps");

/* Datagrams ulsd reassembled (server/reass.c) -> the lease their fragments go to. ulsd
 * adds a key just before it writes the fragments back into the TAP and removes it soon
 * after; until then a fragment of that key from the wire goes to the same owner, whose
 * stack reassembles whatever it gets. */
DP_MAP(BPF_MAP_TYPE_HASH, FLT_DP_FRAG_MAX, struct flt_dp_frag_key, __u32)
	dp_frag SEC(".maps");   /* owner (lease id) */

/* The same for IPv6 datagrams whose Fragment header follows the fixed header (ulsd steers
 * no other). */
DP_MAP(BPF_MAP_TYPE_HASH, FLT_DP_FRAG_MAX, struct flt_dp_frag6_key, __u32)
	dp_frag6 SEC(".maps");   /* owner (lease id) */

/* IPv6 rules (RFC 8200), as dp_conn and dp_listen hold IPv4's: rules with a remote that
 * is not v4-mapped, and the groups of FLT_FAM_V6. */
DP_MAP_NOPREALLOC(BPF_MAP_TYPE_HASH, FLT_DP_CONN_MAX, struct flt_dp_conn6_key, __u32)
	dp_conn6 SEC(".maps");   /* owner (lease id) */

DP_MAP_NOPREALLOC(BPF_MAP_TYPE_HASH, FLT_DP_LISTEN_MAX, struct flt_dp_listen_key,
		  struct flt_dp_group) dp_listen6 SEC(".maps");

/* A Neighbor Solicitation's target -> the queues that asked (as dp_arpwait). */
struct ip6key {
	__u8 a[16];
};

DP_MAP(BPF_MAP_TYPE_HASH, FLT_DP_ARP_MAX, struct ip6key, struct flt_dp_arpwait)
	dp_ndwait SEC(".maps");

/* A 4-tuple seen from the node: l is the local end, r the remote one. */
struct tup {
	__u32 lip, rip;
	__u16 lport, rport;
	__u8 proto;
};

struct tup6 {
	__u8 lip[16], rip[16];
	__u16 lport, rport;
	__u8 proto;
};

/* Neighbours (IPv4 source -> Ethernet source) of connections being set up, so that ulsd
 * can reach the peer of a process that died without having seen its frames. */
DP_MAP(BPF_MAP_TYPE_LRU_HASH, FLT_DP_ARP_MAX, __u32, struct flt_dp_neigh) dp_neigh SEC(".maps");

/* The same for IPv6 sources (custody of IPv6 connections, RFC 4861's link-layer address). */
DP_MAP(BPF_MAP_TYPE_LRU_HASH, FLT_DP_ARP_MAX, struct ip6key, struct flt_dp_neigh)
	dp_neigh6 SEC(".maps");

#include "filter/datapath_pick.bpf.h"
#include "filter/datapath_syn.bpf.h"

/* ---- Receive steering ----------------------------------------------------------------- */

static void count_steered(__u32 q, int gso)
{
	struct flt_dp_qstat *st = bpf_map_lookup_elem(&dp_qstat, &q);

	if (!st)
		return;
	st->steered++;
	if (gso)
		st->steered_gso++;
}

/* An ARP reply for the node goes to a queue that asked for that address (RFC 826: each
 * stack keeps its own table), one reply per waiting queue; the rest go to ulsd. */
static __u32 take_waiter(struct flt_dp_arpwait *w)
{
	if (!w)
		return 0;
	for (__u32 i = 0; i < FLT_DP_QUEUES / 64; i++) {
		__u64 x = w->bits[i];
		if (!x)
			continue;
		__u64 low = x & -x;
		__u32 bit = 0;
		for (__u32 k = 0; k < 64; k++) {
			if (low == (1ULL << k)) {
				bit = k;
				break;
			}
		}
		__sync_fetch_and_and(&w->bits[i], ~low);
		return i * 64 + bit;
	}
	return 0;
}

/* The queue of the lease owner, 0 for none. */
static __u32 lease_queue(__u32 owner)
{
	__u32 *q;

	if (!owner)
		return 0;
	q = bpf_map_lookup_elem(&dp_lease_q, &owner);
	return q ? *q : 0;
}

/* RFC 8200: an IPv6 packet to one of the node's addresses whose Next Header is TCP, UDP
 * or ICMPv6 (the header comment says what goes to ulsd). */
static __u32 steer6(struct __sk_buff *skb, const struct flt_dp_cfg *c, const __u8 *eth)
{
	__u8 ip[WIRE_IPV6_HLEN];
	const __u32 l4 = WIRE_ETH_HLEN + WIRE_IPV6_HLEN;
	__u16 ports[2];
	int exact;

	if (!c->has_ip6 || bpf_skb_load_bytes(skb, WIRE_ETH_HLEN, ip, sizeof(ip)) < 0 ||
	    ip[WIRE_IPV6_OFF_VTCFL] >> 4 != WIRE_IPV6_VERSION || !node_ip6(c, ip + WIRE_IPV6_OFF_DST))
		return 0;
	__u8 nh = ip[WIRE_IPV6_OFF_NEXT];
	if (nh == WIRE_IPPROTO_FRAGMENT) {
		/* RFC 8200 §4.5: as for IPv4, fragments go to ulsd, which sends a whole
		 * datagram's back here for the owner it found (server/reass.c). */
		__u8 fh[WIRE_IPV6_FRAG_HLEN];
		struct flt_dp_frag6_key fk;
		if (bpf_skb_load_bytes(skb, l4, fh, sizeof(fh)) < 0)
			return 0;
		__builtin_memcpy(fk.src, ip + WIRE_IPV6_OFF_SRC, 16);
		__builtin_memcpy(&fk.id, fh + 4, 4);
		__u32 *fo = bpf_map_lookup_elem(&dp_frag6, &fk);
		return fo ? lease_queue(*fo) : 0;
	}
	if (nh == WIRE_IPPROTO_TCP || nh == WIRE_IPPROTO_UDP) {
		__u8 l4h[WIRE_TCP_OFF_FLAGS + 1];
		struct tup6 t = { .proto = nh };
		if (bpf_skb_load_bytes(skb, l4, ports, sizeof(ports)) < 0)
			return 0;
		__builtin_memcpy(t.lip, ip + WIRE_IPV6_OFF_DST, 16);
		__builtin_memcpy(t.rip, ip + WIRE_IPV6_OFF_SRC, 16);
		t.lport = bpf_ntohs(ports[1]);
		t.rport = bpf_ntohs(ports[0]);
		__u32 owner = endpoint_owner6(c, &t, &exact);
		/* The handshakes that name a peer ulsd may have to reset, as for IPv4. */
		if (owner && nh == WIRE_IPPROTO_TCP &&
		    bpf_skb_load_bytes(skb, l4, l4h, sizeof(l4h)) == 0 &&
		    (exact ? (l4h[WIRE_TCP_OFF_FLAGS] & WIRE_TCP_SYN) :
			     (l4h[WIRE_TCP_OFF_FLAGS] & TCP_CTL) == WIRE_TCP_ACK)) {
			struct flt_dp_neigh nb = {};
			struct ip6key k;
			__builtin_memcpy(k.a, ip + WIRE_IPV6_OFF_SRC, 16);
			__builtin_memcpy(nb.mac, eth + WIRE_ETH_OFF_SRC, WIRE_ETH_ALEN);
			bpf_map_update_elem(&dp_neigh6, &k, &nb, BPF_ANY);
			if (!exact)   /* a handshake's last ACK: a known peer (synguard) */
				syn_known_note(&k);
		}
		return lease_queue(owner);
	}
	if (nh != WIRE_IPPROTO_ICMPV6)
		return 0;
	__u8 ic[WIRE_ICMPV6_HLEN];
	if (bpf_skb_load_bytes(skb, l4, ic, sizeof(ic)) < 0)
		return 0;
	__u8 type = ic[WIRE_ICMPV6_OFF_TYPE];
	if (type == WIRE_ND_NEIGHBOR_ADVERT) {
		/* RFC 4861 §7.2.5: the advertisement answers the solicitation of a queue that
		 * asked for its target; the others (unsolicited, for ulsd's own asking) are
		 * ulsd's. */
		struct ip6key k;
		if (bpf_skb_load_bytes(skb, l4 + WIRE_ND_OFF_TARGET, k.a, sizeof(k.a)) < 0)
			return 0;
		return take_waiter(bpf_map_lookup_elem(&dp_ndwait, &k));
	}
	if (type > WIRE_ICMPV6_PARAM_PROB || type < WIRE_ICMPV6_DST_UNREACH)
		return 0;
	/* RFC 4443 §2.4 (b): an error goes to the process that sent the packet it quotes;
	 * the quoted source is the local end. Only a quote whose Next Header is TCP or UDP at
	 * once, as flt_parse reads it. */
	__u8 in[WIRE_IPV6_HLEN];
	if (bpf_skb_load_bytes(skb, l4 + WIRE_ICMPV6_HLEN, in, sizeof(in)) < 0 ||
	    in[WIRE_IPV6_OFF_VTCFL] >> 4 != WIRE_IPV6_VERSION ||
	    (in[WIRE_IPV6_OFF_NEXT] != WIRE_IPPROTO_TCP && in[WIRE_IPV6_OFF_NEXT] != WIRE_IPPROTO_UDP) ||
	    bpf_skb_load_bytes(skb, l4 + WIRE_ICMPV6_HLEN + WIRE_IPV6_HLEN, ports, sizeof(ports)) < 0)
		return 0;
	struct tup6 t = { .proto = in[WIRE_IPV6_OFF_NEXT], .lport = bpf_ntohs(ports[0]),
			  .rport = bpf_ntohs(ports[1]) };
	__builtin_memcpy(t.lip, in + WIRE_IPV6_OFF_SRC, 16);
	__builtin_memcpy(t.rip, in + WIRE_IPV6_OFF_DST, 16);
	return lease_queue(endpoint_owner6(c, &t, &exact));
}

static __u32 steer_frame(struct __sk_buff *skb)
{
	__u32 zero = 0, owner = 0;
	const struct flt_dp_cfg *c = bpf_map_lookup_elem(&dp_cfg, &zero);
	__u8 h[PEEK_LEN];
	const __u8 *eth = h;
	__u8 ip[WIRE_IPV4_HLEN_MIN];
	int whole;

	if (!c || (whole = peek(skb, h)) < 0)
		return 0;
	__u16 type = RD16(eth, WIRE_ETH_OFF_TYPE);
	if (type == WIRE_ETHERTYPE_IPV6)
		return steer6(skb, c, eth);
	if (type == WIRE_ETHERTYPE_ARP) {
		__u8 a[WIRE_ARP_LEN];
		__u32 spa, tpa;
		if (bpf_skb_load_bytes(skb, WIRE_ETH_HLEN, a, sizeof(a)) < 0)
			return 0;
		__builtin_memcpy(&spa, a + WIRE_ARP_OFF_SPA, 4);
		__builtin_memcpy(&tpa, a + WIRE_ARP_OFF_TPA, 4);
		if (RD16(a, WIRE_ARP_OFF_OP) == WIRE_ARP_OP_REPLY && tpa == c->node_ip)
			return take_waiter(bpf_map_lookup_elem(&dp_arpwait, &spa));
		return 0;
	}
	if (type != WIRE_ETHERTYPE_IPV4 || ip4_hdr(skb, h, whole, ip) < 0)
		return 0;
	__u32 ihl = IPV4_HLEN(ip), src, dst;
	__u16 frag = RD16(ip, WIRE_IPV4_OFF_FRAG);
	__builtin_memcpy(&src, ip + WIRE_IPV4_OFF_SRC, 4);
	__builtin_memcpy(&dst, ip + WIRE_IPV4_OFF_DST, 4);
	if (IPV4_VERSION(ip) != WIRE_IPV4_VERSION || ihl < WIRE_IPV4_HLEN_MIN)
		return 0;
	if (frag & (WIRE_IPV4_MF | WIRE_IPV4_OFFMASK)) {
		/* RFC 791 §3.2: fragments go to ulsd, which collects each datagram and then
		 * sends its fragments back here, for the owner it found (server/reass.c);
		 * a broadcast datagram's too, so the key is checked before the address. */
		struct flt_dp_frag_key fk = { .src = src, .id = RD16(ip, WIRE_IPV4_OFF_ID),
					      .proto = ip[WIRE_IPV4_OFF_PROTOCOL] };
		__u32 *fo = bpf_map_lookup_elem(&dp_frag, &fk);
		if (!fo)
			return 0;
		owner = *fo;
		__u32 *fq = bpf_map_lookup_elem(&dp_lease_q, &owner);
		return fq ? *fq : 0;
	}
	if (dst != c->node_ip)
		return 0;
	__u32 l4 = WIRE_ETH_HLEN + ihl;
	if (ip[WIRE_IPV4_OFF_PROTOCOL] == WIRE_IPPROTO_TCP || ip[WIRE_IPV4_OFF_PROTOCOL] == WIRE_IPPROTO_UDP) {
		/* The ports, and TCP's flags: a TCP header is at least 20 octets, so a
		 * segment has the 14 read here; a frame with fewer octets of TCP goes to
		 * ulsd, which drops it (flt_parse: tcp_header). One with 14 to 19 still goes
		 * to the owner, whose stack drops it. */
		__u8 l4h[WIRE_TCP_OFF_FLAGS + 1];
		int tcp = ip[WIRE_IPV4_OFF_PROTOCOL] == WIRE_IPPROTO_TCP;
		if (l4_hdr(skb, h, whole, l4, l4h, tcp ? sizeof(l4h) : 4) < 0)
			return 0;
		struct tup t = { .lip = dst, .rip = src, .lport = RD16(l4h, 2),
				 .rport = RD16(l4h, 0), .proto = ip[WIRE_IPV4_OFF_PROTOCOL] };
		int exact;
		owner = endpoint_owner(c, &t, &exact);
		/* A handshake (RFC 9293 §3.5) names a peer ulsd may have to reset later: the
		 * SYN or SYN,ACK of a tuple we hold (an active open), or the ACK that completes
		 * a passive open (its tuple not yet ours: a listener's pick). Not the SYN to a
		 * listener: under a flood of spoofed SYNs (RFC 4987) each would replace a real
		 * peer's entry in the LRU map, at the cost of a map update per SYN. */
		if (owner && tcp &&
		    (exact ? (l4h[WIRE_TCP_OFF_FLAGS] & WIRE_TCP_SYN) :
			     (l4h[WIRE_TCP_OFF_FLAGS] & TCP_CTL) == WIRE_TCP_ACK)) {
			struct flt_dp_neigh nb = {};
			__builtin_memcpy(nb.mac, eth + WIRE_ETH_OFF_SRC, WIRE_ETH_ALEN);
			bpf_map_update_elem(&dp_neigh, &src, &nb, BPF_ANY);
			if (!exact) {   /* a handshake's last ACK: a known peer (synguard) */
				struct ip6key k;
				syn_v4_key(&k, src);
				syn_known_note(&k);
			}
		}
	} else if (ip[WIRE_IPV4_OFF_PROTOCOL] == WIRE_IPPROTO_ICMP) {
		/* RFC 1122 §3.2.2: an error goes to the endpoint that sent the datagram it
		 * quotes; its source is the local end. */
		__u8 ic[WIRE_ICMP_HLEN], in[WIRE_IPV4_HLEN_MIN];
		__u16 ports[2];
		if (bpf_skb_load_bytes(skb, l4, ic, sizeof(ic)) < 0)
			return 0;
		if (ic[WIRE_ICMP_OFF_TYPE] != WIRE_ICMP_DEST_UNREACH &&
		    ic[WIRE_ICMP_OFF_TYPE] != WIRE_ICMP_SOURCE_QUENCH &&
		    ic[WIRE_ICMP_OFF_TYPE] != WIRE_ICMP_TIME_EXCEEDED &&
		    ic[WIRE_ICMP_OFF_TYPE] != WIRE_ICMP_PARAM_PROBLEM)
			return 0;
		if (bpf_skb_load_bytes(skb, l4 + WIRE_ICMP_HLEN, in, sizeof(in)) < 0)
			return 0;
		__u32 iihl = IPV4_HLEN(in), isrc, idst;
		__u16 ifrag = RD16(in, WIRE_IPV4_OFF_FRAG);
		if (IPV4_VERSION(in) != WIRE_IPV4_VERSION || iihl < WIRE_IPV4_HLEN_MIN || (ifrag & WIRE_IPV4_OFFMASK) ||
		    (in[WIRE_IPV4_OFF_PROTOCOL] != WIRE_IPPROTO_TCP &&
		     in[WIRE_IPV4_OFF_PROTOCOL] != WIRE_IPPROTO_UDP))
			return 0;
		if (bpf_skb_load_bytes(skb, l4 + WIRE_ICMP_HLEN + iihl, ports, sizeof(ports)) < 0)
			return 0;
		__builtin_memcpy(&isrc, in + WIRE_IPV4_OFF_SRC, 4);
		__builtin_memcpy(&idst, in + WIRE_IPV4_OFF_DST, 4);
		struct tup t = { .lip = isrc, .rip = idst, .lport = bpf_ntohs(ports[0]),
				 .rport = bpf_ntohs(ports[1]), .proto = in[WIRE_IPV4_OFF_PROTOCOL] };
		int exact;
		owner = endpoint_owner(c, &t, &exact);
	}
	if (!owner)
		return 0;
	__u32 *q = bpf_map_lookup_elem(&dp_lease_q, &owner);
	return q ? *q : 0;
}

SEC("socket")
int steer(struct __sk_buff *skb)
{
	__u32 q = steer_frame(skb);

	if (q >= FLT_DP_QUEUES)
		q = 0;
	count_steered(q, skb->gso_size != 0);
	return (int)q;
}

/* ---- Transmit check ------------------------------------------------------------------- */

static int group_has(const struct flt_dp_group *g, __u32 owner)
{
	for (__u32 i = 0; i < FLT_DP_GROUP_MAX; i++) {
		if (i >= g->n_all)
			break;
		if (g->all[i] == owner)
			return 1;
	}
	return 0;
}

/* flt_check_tx's may_use: the exact tuple's owner decides alone; else the sender must be
 * in the port's group and, for TCP on a shared port, the member the peer's segments reach. */
static __always_inline int may_use_of(const struct flt_dp_cfg *c, __u32 owner, const void *t,
				      __u8 proto, int v6)
{
	struct found f = lookup(t, v6);

	if (f.owner)
		return *f.owner == owner ? FLT_DP_PASS : FLT_DP_PORT;
	if (!f.g || !group_has(f.g, owner))
		return FLT_DP_PORT;
	if (proto == WIRE_IPPROTO_TCP && f.g->n_all > 1 && pick(c, f.g, t, v6) != owner)
		return FLT_DP_SHARED_PEER;
	return FLT_DP_PASS;
}

static int may_use(const struct flt_dp_cfg *c, __u32 owner, const struct tup *t)
{
	return may_use_of(c, owner, t, t->proto, 0);
}

static int may_use6(const struct flt_dp_cfg *c, __u32 owner, const struct tup6 *t)
{
	return may_use_of(c, owner, t, t->proto, 1);
}

static void wait_bit(void *map, const void *key, __u32 q)
{
	struct flt_dp_arpwait *w = bpf_map_lookup_elem(map, key);
	__u32 i = (q / 64) & 3;

	if (!w) {
		struct flt_dp_arpwait n = {};
		bpf_map_update_elem(map, key, &n, BPF_NOEXIST);
		w = bpf_map_lookup_elem(map, key);
		if (!w)
			return;
	}
	__sync_fetch_and_or(&w->bits[i], 1ULL << (q % 64));
}

/* An IPv6 frame from queue q (RFC 8200; the header comment has the policy). */
static int check_frame6(struct __sk_buff *skb, const struct flt_dp_cfg *c, __u32 q,
			__u32 owner)
{
	__u8 ip[WIRE_IPV6_HLEN];
	__u32 l4 = WIRE_ETH_HLEN + WIRE_IPV6_HLEN;
	__u16 ports[2];

	if (!c->has_ip6 || bpf_skb_load_bytes(skb, WIRE_ETH_HLEN, ip, sizeof(ip)) < 0 ||
	    ip[WIRE_IPV6_OFF_VTCFL] >> 4 != WIRE_IPV6_VERSION)
		return FLT_DP_PROTO;
	if (!node_ip6(c, ip + WIRE_IPV6_OFF_SRC))
		return FLT_DP_SRC_IP;
	__u8 nh = ip[WIRE_IPV6_OFF_NEXT];
	if (skb->gso_size) {
		/* A TCPv6 super-segment: every piece within the MTU; none on a node with
		 * checksum offload alone. */
		__u8 t[WIRE_TCP_OFF_DOFF + 1];
		if (c->csum_only || nh != WIRE_IPPROTO_TCP || bpf_skb_load_bytes(skb, l4, t, sizeof(t)) < 0 ||
		    WIRE_IPV6_HLEN + (t[WIRE_TCP_OFF_DOFF] >> 4) * 4 + skb->gso_size > c->mtu)
			return FLT_DP_SIZE;
	} else if (skb->len > c->mtu + WIRE_ETH_HLEN) {
		return FLT_DP_SIZE;
	}
	if (nh == WIRE_IPPROTO_FRAGMENT) {
		/* RFC 8200 §4.5: the first fragment is checked as its datagram is; a later one
		 * carries no ports. Deviation (as for IPv4): only its source is checked. */
		__u8 fh[WIRE_IPV6_FRAG_HLEN];
		if (bpf_skb_load_bytes(skb, l4, fh, sizeof(fh)) < 0)
			return FLT_DP_PROTO;
		if (RD16(fh, 2) & WIRE_IPV6_FRAG_OFFMASK)
			return FLT_DP_PASS;
		nh = fh[0];
		l4 += WIRE_IPV6_FRAG_HLEN;
	}
	if (nh == WIRE_IPPROTO_TCP || nh == WIRE_IPPROTO_UDP) {
		struct tup6 t = { .proto = nh };
		if (bpf_skb_load_bytes(skb, l4, ports, sizeof(ports)) < 0)
			return FLT_DP_PORT;
		__builtin_memcpy(t.lip, ip + WIRE_IPV6_OFF_SRC, 16);
		__builtin_memcpy(t.rip, ip + WIRE_IPV6_OFF_DST, 16);
		t.lport = bpf_ntohs(ports[0]);
		t.rport = bpf_ntohs(ports[1]);
		return may_use6(c, owner, &t);
	}
	/* Other extension headers: the process's stack sends none. */
	if (nh != WIRE_IPPROTO_ICMPV6)
		return FLT_DP_PROTO;
	__u8 ic[WIRE_ND_NS_LEN + WIRE_ND_OPT_LLADDR_LEN];
	if (bpf_skb_load_bytes(skb, l4, ic, WIRE_ICMPV6_HLEN) < 0)
		return FLT_DP_ICMP;
	__u8 type = ic[WIRE_ICMPV6_OFF_TYPE];
	if (type == WIRE_ICMPV6_ECHO_REQUEST || type == WIRE_ICMPV6_ECHO_REPLY)
		return FLT_DP_PASS;
	if (type == WIRE_ND_NEIGHBOR_SOLICIT) {
		/* RFC 4861 §4.3: the source link-layer option is what the neighbour caches:
		 * the node's MAC only (the option comes first as lwIP and Linux write it). */
		struct ip6key k;
		if (bpf_skb_load_bytes(skb, l4, ic, sizeof(ic)) < 0 ||
		    ic[WIRE_ND_NS_LEN] != WIRE_ND_OPT_SRC_LLADDR || ic[WIRE_ND_NS_LEN + 1] != 1 ||
		    !mac_eq(ic + WIRE_ND_NS_LEN + 2, c->node_mac))
			return FLT_DP_ICMP;
		__builtin_memcpy(k.a, ic + WIRE_ND_OFF_TARGET, 16);
		wait_bit(&dp_ndwait, &k, q);
		return FLT_DP_PASS;
	}
	if (type != WIRE_ICMPV6_DST_UNREACH)
		return FLT_DP_ICMP;
	/* RFC 4443 §3.1, about a packet delivered to one of the queue's endpoints: the quoted
	 * destination is the local end. */
	__u8 in[WIRE_IPV6_HLEN];
	if (bpf_skb_load_bytes(skb, l4 + WIRE_ICMPV6_HLEN, in, sizeof(in)) < 0 ||
	    in[WIRE_IPV6_OFF_VTCFL] >> 4 != WIRE_IPV6_VERSION || !node_ip6(c, in + WIRE_IPV6_OFF_DST) ||
	    (in[WIRE_IPV6_OFF_NEXT] != WIRE_IPPROTO_TCP && in[WIRE_IPV6_OFF_NEXT] != WIRE_IPPROTO_UDP) ||
	    bpf_skb_load_bytes(skb, l4 + WIRE_ICMPV6_HLEN + WIRE_IPV6_HLEN, ports, sizeof(ports)) < 0)
		return FLT_DP_ICMP;
	struct tup6 t = { .proto = in[WIRE_IPV6_OFF_NEXT], .lport = bpf_ntohs(ports[1]),
			  .rport = bpf_ntohs(ports[0]) };
	__builtin_memcpy(t.lip, in + WIRE_IPV6_OFF_DST, 16);
	__builtin_memcpy(t.rip, in + WIRE_IPV6_OFF_SRC, 16);
	if (may_use6(c, owner, &t))
		return FLT_DP_ICMP;
	return FLT_DP_PASS;
}

static int check_frame(struct __sk_buff *skb, const struct flt_dp_cfg *c, __u32 q,
		       const __u8 h[PEEK_LEN], int whole)
{
	const __u8 *eth = h;
	__u32 *op = bpf_map_lookup_elem(&dp_q_owner, &q);
	__u32 owner = op ? *op : 0;
	__u16 type = RD16(eth, WIRE_ETH_OFF_TYPE);
	__u8 ip[WIRE_IPV4_HLEN_MIN];

	if (!owner)
		return FLT_DP_NO_OWNER;
	if (!mac_eq(eth + WIRE_ETH_OFF_SRC, c->node_mac))
		return FLT_DP_SRC_MAC;
	if (type == WIRE_ETHERTYPE_ARP) {
		/* RFC 826: the sender fields are what other hosts cache: the node's only. */
		__u8 a[WIRE_ARP_LEN];
		__u32 spa, tpa;
		if (bpf_skb_load_bytes(skb, WIRE_ETH_HLEN, a, sizeof(a)) < 0)
			return FLT_DP_ARP;
		__builtin_memcpy(&spa, a + WIRE_ARP_OFF_SPA, 4);
		__builtin_memcpy(&tpa, a + WIRE_ARP_OFF_TPA, 4);
		__u16 op = RD16(a, WIRE_ARP_OFF_OP);
		if (RD16(a, WIRE_ARP_OFF_HRD) != WIRE_ARP_HRD_ETHERNET ||
		    RD16(a, WIRE_ARP_OFF_PRO) != WIRE_ETHERTYPE_IPV4 ||
		    a[WIRE_ARP_OFF_HLN] != WIRE_ETH_ALEN || a[WIRE_ARP_OFF_PLN] != WIRE_ARP_PLN_IPV4 ||
		    (op != WIRE_ARP_OP_REQUEST && op != WIRE_ARP_OP_REPLY) || spa != c->node_ip ||
		    !mac_eq(a + WIRE_ARP_OFF_SHA, c->node_mac))
			return FLT_DP_ARP;
		if (op == WIRE_ARP_OP_REQUEST)
			wait_bit(&dp_arpwait, &tpa, q);
		return FLT_DP_PASS;
	}
	if (type == WIRE_ETHERTYPE_IPV6)
		return check_frame6(skb, c, q, owner);
	if (type != WIRE_ETHERTYPE_IPV4 || ip4_hdr(skb, h, whole, ip) < 0)
		return FLT_DP_PROTO;
	__u32 ihl = IPV4_HLEN(ip), src, dst;
	__u16 frag = RD16(ip, WIRE_IPV4_OFF_FRAG);
	__builtin_memcpy(&src, ip + WIRE_IPV4_OFF_SRC, 4);
	__builtin_memcpy(&dst, ip + WIRE_IPV4_OFF_DST, 4);
	if (IPV4_VERSION(ip) != WIRE_IPV4_VERSION || ihl < WIRE_IPV4_HLEN_MIN)
		return FLT_DP_PROTO;
	if (src != c->node_ip)
		return FLT_DP_SRC_IP;
	__u32 l4 = WIRE_ETH_HLEN + ihl;
	if (skb->gso_size) {
		/* A super-segment: TCP only, every piece on the wire within the MTU; none on a
		 * node with checksum offload alone. */
		__u8 t[WIRE_TCP_OFF_FLAGS + 1];
		if (c->csum_only || ip[WIRE_IPV4_OFF_PROTOCOL] != WIRE_IPPROTO_TCP ||
		    l4_hdr(skb, h, whole, l4, t, WIRE_TCP_OFF_DOFF + 1) < 0 ||
		    ihl + (t[WIRE_TCP_OFF_DOFF] >> 4) * 4 + skb->gso_size > c->mtu)
			return FLT_DP_SIZE;
	} else if (skb->len > c->mtu + WIRE_ETH_HLEN) {
		return FLT_DP_SIZE;
	}
	/* Deviation (as flt_check_tx): a later fragment carries no ports; only its source is
	 * checked. */
	if (frag & WIRE_IPV4_OFFMASK)
		return FLT_DP_PASS;
	if (ip[WIRE_IPV4_OFF_PROTOCOL] == WIRE_IPPROTO_TCP || ip[WIRE_IPV4_OFF_PROTOCOL] == WIRE_IPPROTO_UDP) {
		__u8 l4h[WIRE_TCP_OFF_FLAGS + 1];
		if (l4_hdr(skb, h, whole, l4, l4h, 4) < 0)
			return FLT_DP_PORT;
		struct tup t = { .lip = src, .rip = dst, .lport = RD16(l4h, 0),
				 .rport = RD16(l4h, 2), .proto = ip[WIRE_IPV4_OFF_PROTOCOL] };
		return may_use(c, owner, &t);
	}
	if (ip[WIRE_IPV4_OFF_PROTOCOL] != WIRE_IPPROTO_ICMP)
		return FLT_DP_PROTO;
	__u8 ic[WIRE_ICMP_HLEN], in[WIRE_IPV4_HLEN_MIN];
	__u16 ports[2];
	if (bpf_skb_load_bytes(skb, l4, ic, sizeof(ic)) < 0)
		return FLT_DP_ICMP;
	if (ic[WIRE_ICMP_OFF_TYPE] == WIRE_ICMP_ECHO_REPLY ||
	    ic[WIRE_ICMP_OFF_TYPE] == WIRE_ICMP_ECHO)
		return FLT_DP_PASS;
	if (ic[WIRE_ICMP_OFF_TYPE] != WIRE_ICMP_DEST_UNREACH || bpf_skb_load_bytes(skb, l4 + WIRE_ICMP_HLEN, in, sizeof(in)) < 0)
		return FLT_DP_ICMP;
	/* Destination unreachable about a datagram delivered to one of its endpoints
	 * (RFC 1122 §4.1.3.1): the quoted datagram's destination is the local end. */
	__u32 iihl = IPV4_HLEN(in), isrc, idst;
	__builtin_memcpy(&isrc, in + WIRE_IPV4_OFF_SRC, 4);
	__builtin_memcpy(&idst, in + WIRE_IPV4_OFF_DST, 4);
	if (IPV4_VERSION(in) != WIRE_IPV4_VERSION || iihl < WIRE_IPV4_HLEN_MIN || idst != c->node_ip ||
	    (in[WIRE_IPV4_OFF_PROTOCOL] != WIRE_IPPROTO_TCP &&
		     in[WIRE_IPV4_OFF_PROTOCOL] != WIRE_IPPROTO_UDP) ||
	    bpf_skb_load_bytes(skb, l4 + WIRE_ICMP_HLEN + iihl, ports, sizeof(ports)) < 0)
		return FLT_DP_ICMP;
	struct tup t = { .lip = idst, .rip = isrc, .lport = bpf_ntohs(ports[1]),
			 .rport = bpf_ntohs(ports[0]), .proto = in[WIRE_IPV4_OFF_PROTOCOL] };
	if (may_use(c, owner, &t))
		return FLT_DP_ICMP;
	return FLT_DP_PASS;
}

SEC("tc")
int txcheck(struct __sk_buff *skb)
{
	__u32 zero = 0, qm = skb->queue_mapping;
	const struct flt_dp_cfg *c = bpf_map_lookup_elem(&dp_cfg, &zero);
	__u8 h[PEEK_LEN];
	const __u8 *eth = h;
	int whole;

	if (!c || qm == 0 || qm > FLT_DP_QUEUES)
		return TCX_PASS;   /* not written by a queue of ours */
	if ((whole = peek(skb, h)) < 0)
		return TCX_DROP;
	__u32 q = qm - 1;
	if (q != 0) {
		int r = check_frame(skb, c, q, h, whole);
		struct flt_dp_qstat *st = bpf_map_lookup_elem(&dp_qstat, &q);
		if (r != FLT_DP_PASS) {
			if (st && r > 0 && r < FLT_DP_REASONS)
				st->tx_drop[r]++;
			return TCX_DROP;
		}
		if (st) {
			st->tx_pass++;
			if (skb->gso_size)
				st->tx_pass_gso++;
		}
	}
	/* For the node itself: back into the TAP, to steering. An ARP request for the node's
	 * own address goes there too, so that ulsd answers it. */
	if (mac_eq(eth, c->node_mac))
		return bpf_redirect(c->ifindex, 0);
	if (eth[WIRE_ETH_OFF_DST] == 0xff && RD16(eth, WIRE_ETH_OFF_TYPE) == WIRE_ETHERTYPE_ARP) {
		__u32 tpa;
		if (bpf_skb_load_bytes(skb, WIRE_ETH_HLEN + WIRE_ARP_OFF_TPA, &tpa, 4) == 0 &&
		    tpa == c->node_ip)
			return bpf_redirect(c->ifindex, 0);
	}
	/* A process's Neighbor Solicitation for one of the node's IPv6 addresses (to its
	 * solicited-node group, RFC 4861 §7.2.2) likewise: ulsd answers, and the
	 * advertisement reaches the asking queue through dp_ndwait. Not ulsd's own (queue
	 * 0): its duplicate address detection of those addresses (RFC 4862 §5.4.2) is for
	 * the link, and would come back to it as another node's. */
	if (q != 0 && eth[WIRE_ETH_OFF_DST] == 0x33 &&
	    RD16(eth, WIRE_ETH_OFF_TYPE) == WIRE_ETHERTYPE_IPV6) {
		__u8 ip[WIRE_IPV6_HLEN], ns[WIRE_ND_NS_LEN];
		if (bpf_skb_load_bytes(skb, WIRE_ETH_HLEN, ip, sizeof(ip)) == 0 &&
		    ip[WIRE_IPV6_OFF_NEXT] == WIRE_IPPROTO_ICMPV6 &&
		    bpf_skb_load_bytes(skb, WIRE_ETH_HLEN + WIRE_IPV6_HLEN, ns, sizeof(ns)) == 0 &&
		    ns[WIRE_ICMPV6_OFF_TYPE] == WIRE_ND_NEIGHBOR_SOLICIT &&
		    node_ip6(c, ns + WIRE_ND_OFF_TARGET))
			return bpf_redirect(c->ifindex, 0);
	}
	return TCX_PASS;
}
