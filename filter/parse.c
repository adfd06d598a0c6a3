/* Bounds-checked parsing of Ethernet frames for the filter (see filter.h).
 *
 * Read first: RFC 894, RFC 826, RFC 791 §3.1-3.2, RFC 1858, RFC 9293 §3.1, RFC 768,
 * RFC 792, RFC 1122 §3.2.2, RFC 8200 §3-4, RFC 4443 §2.
 *
 * Everything here reads bytes that a peer, or a process we do not trust, chose. Each
 * helper gets a pointer and the number of octets that really follow it, checks a range
 * before every read, and writes only into the caller's scratch copy; flt_parse() copies
 * that out only when the whole frame parsed.
 *
 * Checksums: the TCP, UDP and ICMP checksums are the stacks' business (they verify them
 * anyway, and with checksum offload the kernel may hand us partial ones). The IPv4 header
 * checksum is checked here: it covers at most 60 octets that we read anyway, and a header
 * with a flipped bit in an address or the protocol would otherwise be delivered to, or
 * let through as, the wrong endpoint.
 */
#include "filter/internal.h"

#include <string.h>

#include "netif/wire/wire.h"

static int parse_arp(const uint8_t *a, size_t avail, struct flt_pkt *p)
{
	struct wire_arp v;

	/* RFC 826: Ethernet and IPv4 only. Any trailing octets are Ethernet padding (ARP
	 * frames are padded to 60). */
	if (wire_arp_view(&v, a, avail) < 0)
		return -FLT_DROP_ARP;
	p->arp.op = v.op;
	memcpy(p->arp.sha, v.sha, WIRE_ETH_ALEN);
	p->arp.spa = v.spa;
	memcpy(p->arp.tha, v.tha, WIRE_ETH_ALEN);
	p->arp.tpa = v.tpa;
	return 0;
}

/* TCP header of an unfragmented datagram or a first fragment; dlen octets follow tcp. */
static int parse_tcp(const uint8_t *tcp, size_t dlen, struct flt_pkt *p)
{
	struct wire_tcp v;

	/* RFC 1858 §3.2: a first fragment too short to hold the whole header (the "tiny
	 * fragment" attack hides the flags in the second one) is dropped, as is any TCP
	 * header that claims more than the datagram carries (RFC 9293 §3.1: Data Offset is
	 * at least 5 words). */
	if (wire_tcp_view(&v, tcp, dlen) < 0)
		return -FLT_DROP_TCP_HEADER;
	p->has_ports = true;
	p->sport = v.sport;
	p->dport = v.dport;
	p->tcp.seq = v.seq;
	p->tcp.ack = v.ack;
	p->tcp.flags = v.flags;
	p->tcp.doff = (uint8_t)v.hlen;
	p->tcp.payload_len = (uint16_t)v.payload_len;
	p->payload_off = (uint16_t)(p->l4_off + v.hlen);
	return 0;
}

static int parse_udp(const uint8_t *udp, size_t dlen, struct flt_pkt *p)
{
	struct wire_udp v;

	if (wire_udp_view(&v, udp, dlen) < 0)
		return -FLT_DROP_UDP_HEADER;
	/* RFC 768: Length counts header and data, so it is at least 8. In a first fragment
	 * it counts the whole datagram, which we cannot see yet.
	 * Deviation: Linux trims a datagram longer than its UDP Length; we drop it, because
	 * lwIP would hand the trailing octets to the application as data. */
	bool first_fragment = p->ip.fragment || p->ip6.fragment;

	if (v.len < WIRE_UDP_HLEN || (!first_fragment && v.len != dlen) ||
	    (first_fragment && v.len < dlen))
		return -FLT_DROP_UDP_HEADER;
	p->has_ports = true;
	p->sport = v.sport;
	p->dport = v.dport;
	p->udp.len = v.len;
	p->payload_off = (uint16_t)(p->l4_off + WIRE_UDP_HLEN);
	return 0;
}

/* The quoted datagram's transport protocol, and its ports when l4 (at least
 * WIRE_ICMP_QUOTE_DATA octets) starts with a TCP or UDP header: for both families' errors. */
static void quote_l4(struct flt_pkt *p, uint8_t proto, bool at_l4, const uint8_t *l4)
{
	p->icmp.inner.proto = proto;
	if (at_l4 && (proto == WIRE_IPPROTO_TCP || proto == WIRE_IPPROTO_UDP)) {
		p->icmp.inner.has_ports = true;
		p->icmp.inner.sport = wire_rd16(l4);
		p->icmp.inner.dport = wire_rd16(l4 + 2);
	}
}

/* RFC 792: an error carries "the internet header plus the first 64 bits of the original
 * datagram's data". A quote we cannot read is not a reason to drop the error (the server
 * still gets it); it only leaves has_inner false. */
static void parse_icmp_quote(const uint8_t *q, size_t avail, struct flt_pkt *p)
{
	struct wire_ipv4 v;

	if (wire_ipv4_view_quoted(&v, q, avail) < 0 || v.data_len < WIRE_ICMP_QUOTE_DATA)
		return;
	p->icmp.has_inner = true;
	p->icmp.inner.src = v.src;
	p->icmp.inner.dst = v.dst;
	/* Ports only where the quoted datagram starts with a transport header. */
	quote_l4(p, v.proto, wire_ipv4_frag_offset(&v) == 0, v.data);
}

/* RFC 4443 §2.4 (c): an error carries as much of the invoking packet as fits; the filter
 * needs its IPv6 header and the first 8 octets after it (ports, when no extension header
 * comes between: a quote with extension headers leaves has_ports false). */
static void parse_icmp6_quote(const uint8_t *q, size_t avail, struct flt_pkt *p)
{
	struct wire_ipv6 v;

	if (wire_ipv6_view_quoted(&v, q, avail) < 0 || v.payload_len < WIRE_ICMP_QUOTE_DATA)
		return;
	p->icmp.has_inner = true;
	memcpy(p->icmp.inner.src6, v.src, WIRE_IPV6_ALEN);
	memcpy(p->icmp.inner.dst6, v.dst, WIRE_IPV6_ALEN);
	quote_l4(p, v.next, true, v.payload);
}

/* ICMP and ICMPv6 share the header (RFC 4443 §2.1 takes RFC 792's): type, code, payload
 * offset. Which types are errors, what their quote holds, and ND are the family's. */
static int parse_icmp(const uint8_t *icmp, size_t dlen, struct flt_pkt *p, bool v6)
{
	struct wire_icmp v;

	if (wire_icmp_view(&v, icmp, dlen) < 0)
		return -FLT_DROP_ICMP_HEADER;
	p->icmp.type = v.type;
	p->icmp.code = v.code;
	p->payload_off = (uint16_t)(p->l4_off + WIRE_ICMP_HLEN);
	if (!v6) {
		if (wire_icmp_is_error(v.type))
			parse_icmp_quote(v.body, v.body_len, p);
		return 0;
	}
	if (wire_icmpv6_is_error(v.type))
		parse_icmp6_quote(v.body, v.body_len, p);
	if (v.type == WIRE_ND_NEIGHBOR_SOLICIT || v.type == WIRE_ND_NEIGHBOR_ADVERT) {
		struct wire_nd nd;
		/* A malformed one is not the filter's to drop (ulsd's reply6.c and the
		 * receiver validate ND, RFC 4861 §7.1); it only has no address here. */
		if (wire_nd_view(&nd, icmp, dlen) == 0 && nd.lladdr) {
			p->icmp.has_lladdr = true;
			memcpy(p->icmp.lladdr, nd.lladdr, WIRE_ETH_ALEN);
		}
	}
	return 0;
}

static int parse_ipv4(const uint8_t *ip, size_t avail, struct flt_pkt *p)
{
	struct wire_ipv4 v;

	/* RFC 791 §3.1: version 4; IHL at least 5 words; Total Length covers header and
	 * data and everything past it is Ethernet padding. Options must fit the header. */
	if (wire_ipv4_view(&v, ip, avail) < 0)
		return -FLT_DROP_IPV4_HEADER;
	if (!wire_ipv4_checksum_ok(&v))
		return -FLT_DROP_IPV4_CHECKSUM;
	/* RFC 792 (Parameter Problem): a datagram with "incorrect arguments in an option" is
	 * discarded. Deviation: silently (counted), no Parameter Problem is sent. */
	if (wire_ipv4_options_check(&v) < 0)
		return -FLT_DROP_IPV4_OPTIONS;

	p->ip.src = v.src;
	p->ip.dst = v.dst;
	p->ip.proto = v.proto;
	p->ip.hlen = (uint8_t)v.hlen;
	p->ip.total = (uint16_t)v.total;
	p->ip.id = v.id;
	p->ip.df = wire_ipv4_df(&v);
	p->ip.mf = wire_ipv4_mf(&v);
	p->ip.frag_off = (uint16_t)wire_ipv4_frag_offset(&v);
	p->ip.fragment = wire_ipv4_is_fragment(&v);
	p->l4_off = (uint16_t)(p->l3_off + v.hlen);
	p->payload_off = p->l4_off;

	/* RFC 791 §3.2: a datagram is at most 65535 octets; a fragment reaching past that
	 * (the "ping of death") can never be reassembled. */
	if ((size_t)p->ip.frag_off + v.data_len > WIRE_IPV4_MAX_LEN)
		return -FLT_DROP_FRAGMENT;
	if (p->ip.frag_off != 0) {
		/* RFC 1858 §4: "if FO=1 and PROTOCOL=TCP then drop packet": a fragment at
		 * offset 8 can only be there to overwrite the ports and flags of the first. */
		if (p->ip.proto == WIRE_IPPROTO_TCP && p->ip.frag_off == 8)
			return -FLT_DROP_FRAGMENT;
		return 0;
	}

	switch (p->ip.proto) {
	case WIRE_IPPROTO_TCP:
		return parse_tcp(v.data, v.data_len, p);
	case WIRE_IPPROTO_UDP:
		return parse_udp(v.data, v.data_len, p);
	case WIRE_IPPROTO_ICMP:
		return parse_icmp(v.data, v.data_len, p, false);
	default:
		return 0;
	}
}

static int parse_ipv6(const uint8_t *ip, size_t avail, struct flt_pkt *p)
{
	struct wire_ipv6 v;
	struct wire_ipv6_upper u;
	size_t l4_len;

	/* RFC 8200 §3: Version 6; Payload Length within the frame, the rest padding. There
	 * is no header checksum: the upper layers' checksums cover the addresses (§8.1). */
	if (wire_ipv6_view(&v, ip, avail) < 0)
		return -FLT_DROP_IPV6_HEADER;
	/* §4: the extension headers in order, to the upper layer; a bounded walk. */
	if (wire_ipv6_upper(&u, &v) < 0)
		return -FLT_DROP_IPV6_EXT;
	memcpy(p->ip6.src, v.src, WIRE_IPV6_ALEN);
	memcpy(p->ip6.dst, v.dst, WIRE_IPV6_ALEN);
	p->ip6.proto = u.proto;
	p->ip6.hlim = v.hlim;
	p->ip6.plen = v.plen;
	p->ip6.nexthdrs = (uint8_t)u.nhdrs;
	p->ip6.fragment = u.fragment;
	p->ip6.frag_off = u.frag_off;
	p->ip6.mf = u.frag_more;
	p->ip6.frag_id = u.frag_id;
	p->ip6.frag_data_off = (uint16_t)u.frag_data_off;
	p->l4_off = (uint16_t)(p->l3_off + u.off);
	p->payload_off = p->l4_off;
	/* §4.5: a fragment names its endpoint only once reassembled (the server's); the
	 * first one's ports say whose it will be (server/reass.c). RFC 7112 §5: a first
	 * fragment must hold the whole header chain, so one too short for its TCP or UDP
	 * header is dropped below as a bad header. */
	if (u.fragment && u.frag_off)
		return 0;
	l4_len = WIRE_IPV6_HLEN + v.payload_len - u.off;
	switch (u.proto) {
	case WIRE_IPPROTO_TCP:
		return parse_tcp(v.hdr + u.off, l4_len, p);
	case WIRE_IPPROTO_UDP:
		return parse_udp(v.hdr + u.off, l4_len, p);
	case WIRE_IPPROTO_ICMPV6:
		return parse_icmp(v.hdr + u.off, l4_len, p, true);
	default:
		/* Anything else has no endpoint the filter knows: the server's, which
		 * answers an unrecognized Next Header (server/reply6.c). */
		return 0;
	}
}

int flt_parse(const uint8_t *frame, size_t len, struct flt_pkt *out)
{
	struct wire_eth eth;
	struct flt_pkt p;
	int ret;

	if (wire_eth_view(&eth, frame, len) < 0)
		return -FLT_DROP_RUNT;
	memset(&p, 0, sizeof(p));
	memcpy(p.dst_mac, eth.dst, WIRE_ETH_ALEN);
	memcpy(p.src_mac, eth.src, WIRE_ETH_ALEN);
	p.ethertype = eth.type;
	p.l3_off = WIRE_ETH_HLEN;

	switch (p.ethertype) {
	case WIRE_ETHERTYPE_IPV4:
		ret = parse_ipv4(eth.payload, eth.payload_len, &p);
		break;
	case WIRE_ETHERTYPE_ARP:
		ret = parse_arp(eth.payload, eth.payload_len, &p);
		break;
	case WIRE_ETHERTYPE_IPV6:
		ret = parse_ipv6(eth.payload, eth.payload_len, &p);
		break;
	default:
		ret = -FLT_DROP_ETHERTYPE;
		break;
	}
	if (ret == 0)
		*out = p;
	return ret;
}

const char *flt_reason_name(enum flt_reason r)
{
	static const char *const names[FLT_REASON_COUNT] = {
		[FLT_REASON_NONE - FLT_REASON_BASE] = "none",
		[FLT_DROP_RUNT - FLT_REASON_BASE] = "drop_runt",
		[FLT_DROP_ETHERTYPE - FLT_REASON_BASE] = "drop_ethertype",
		[FLT_DROP_ARP - FLT_REASON_BASE] = "drop_arp",
		[FLT_DROP_IPV4_HEADER - FLT_REASON_BASE] = "drop_ipv4_header",
		[FLT_DROP_IPV4_CHECKSUM - FLT_REASON_BASE] = "drop_ipv4_checksum",
		[FLT_DROP_FRAGMENT - FLT_REASON_BASE] = "drop_fragment",
		[FLT_DROP_TCP_HEADER - FLT_REASON_BASE] = "drop_tcp_header",
		[FLT_DROP_UDP_HEADER - FLT_REASON_BASE] = "drop_udp_header",
		[FLT_DROP_ICMP_HEADER - FLT_REASON_BASE] = "drop_icmp_header",
		[FLT_DROP_IPV6_HEADER - FLT_REASON_BASE] = "drop_ipv6_malformed",
		[FLT_DROP_IPV6_EXT - FLT_REASON_BASE] = "drop_ipv6_ext_chain",
		[FLT_DROP_IPV4_OPTIONS - FLT_REASON_BASE] = "drop_ipv4_options",
		[FLT_DENY_SRC_MAC - FLT_REASON_BASE] = "deny_src_mac",
		[FLT_DENY_SRC_IP - FLT_REASON_BASE] = "deny_src_ip",
		[FLT_DENY_ARP - FLT_REASON_BASE] = "deny_arp",
		[FLT_DENY_PROTO - FLT_REASON_BASE] = "deny_proto",
		[FLT_DENY_PORT - FLT_REASON_BASE] = "deny_port",
		[FLT_DENY_SHARED_PEER - FLT_REASON_BASE] = "deny_shared_peer",
		[FLT_DENY_ICMP - FLT_REASON_BASE] = "deny_icmp",
	};
	unsigned i = FLT_REASON_INDEX(r);

	return i < FLT_REASON_COUNT && names[i] ? names[i] : "unknown";
}
