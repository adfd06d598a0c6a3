/* Bounds-checked parsing of Ethernet frames for the filter (see filter.h).
 *
 * Read first: RFC 894, RFC 826, RFC 791 §3.1-3.2, RFC 1858, RFC 9293 §3.1, RFC 768,
 * RFC 792, RFC 1122 §3.2.2.
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

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* An IPv4 address as it sits in memory in network order, whatever the host order. */
static uint32_t rdaddr(const uint8_t *p)
{
	uint32_t a;

	memcpy(&a, p, sizeof(a));
	return a;
}

/* RFC 791 §3.1: "the 16 bit one's complement of the one's complement sum of all 16 bit
 * words in the header". A correct header sums to 0xffff, checksum field included. */
static bool ipv4_checksum_ok(const uint8_t *ip, size_t hlen)
{
	uint32_t sum = 0;

	for (size_t i = 0; i + 1 < hlen; i += 2)
		sum += rd16(ip + i);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return sum == 0xffff;
}

static int parse_arp(const uint8_t *a, size_t avail, struct flt_pkt *p)
{
	/* RFC 826: hardware type Ethernet, protocol IPv4, address lengths 6 and 4. Any
	 * trailing octets are Ethernet padding (ARP frames are padded to 60). */
	if (avail < FLT__ARP_LEN || rd16(a) != FLT__ARP_HTYPE_ETHER ||
	    rd16(a + 2) != FLT_ETHERTYPE_IPV4 || a[4] != FLT_ETH_ALEN || a[5] != 4)
		return -FLT_DROP_ARP;
	p->arp.op = rd16(a + 6);
	memcpy(p->arp.sha, a + 8, FLT_ETH_ALEN);
	p->arp.spa = rdaddr(a + 14);
	memcpy(p->arp.tha, a + 18, FLT_ETH_ALEN);
	p->arp.tpa = rdaddr(a + 24);
	return 0;
}

/* TCP header of an unfragmented datagram or a first fragment; dlen octets follow tcp. */
static int parse_tcp(const uint8_t *tcp, size_t dlen, struct flt_pkt *p)
{
	size_t doff;

	/* RFC 1858 §3.2: a first fragment too short to hold the whole header (the "tiny
	 * fragment" attack hides the flags in the second one) is dropped, as is any TCP
	 * header that claims more than the datagram carries. */
	if (dlen < FLT__TCP_MIN_HLEN)
		return -FLT_DROP_TCP_HEADER;
	doff = (size_t)(tcp[12] >> 4) * 4;
	/* RFC 9293 §3.1: Data Offset is at least 5 words. */
	if (doff < FLT__TCP_MIN_HLEN || doff > dlen)
		return -FLT_DROP_TCP_HEADER;
	p->has_ports = true;
	p->sport = rd16(tcp);
	p->dport = rd16(tcp + 2);
	p->tcp.seq = rd32(tcp + 4);
	p->tcp.ack = rd32(tcp + 8);
	p->tcp.flags = tcp[13];
	p->tcp.doff = (uint8_t)doff;
	p->tcp.payload_len = (uint16_t)(dlen - doff);
	p->payload_off = (uint16_t)(p->l4_off + doff);
	return 0;
}

static int parse_udp(const uint8_t *udp, size_t dlen, struct flt_pkt *p)
{
	size_t ulen;

	if (dlen < FLT__UDP_HLEN)
		return -FLT_DROP_UDP_HEADER;
	ulen = rd16(udp + 4);
	/* RFC 768: Length counts header and data, so it is at least 8. In a first fragment
	 * it counts the whole datagram, which we cannot see yet.
	 * Deviation: Linux trims a datagram longer than its UDP Length; we drop it, because
	 * lwIP would hand the trailing octets to the application as data. */
	if (ulen < FLT__UDP_HLEN || (!p->ip.fragment && ulen != dlen) ||
	    (p->ip.fragment && ulen < dlen))
		return -FLT_DROP_UDP_HEADER;
	p->has_ports = true;
	p->sport = rd16(udp);
	p->dport = rd16(udp + 2);
	p->udp.len = (uint16_t)ulen;
	p->payload_off = (uint16_t)(p->l4_off + FLT__UDP_HLEN);
	return 0;
}

static bool icmp_is_error(uint8_t type)
{
	return type == FLT__ICMP_DEST_UNREACH || type == FLT__ICMP_SOURCE_QUENCH ||
	       type == FLT__ICMP_TIME_EXCEEDED || type == FLT__ICMP_PARAM_PROBLEM;
}

/* RFC 792: an error carries "the internet header plus the first 64 bits of the original
 * datagram's data". A quote we cannot read is not a reason to drop the error (the server
 * still gets it); it only leaves has_inner false. */
static void parse_icmp_quote(const uint8_t *q, size_t avail, struct flt_pkt *p)
{
	size_t hlen;

	if (avail < FLT__IPV4_MIN_HLEN || q[0] >> 4 != 4)
		return;
	hlen = (size_t)(q[0] & 0x0f) * 4;
	if (hlen < FLT__IPV4_MIN_HLEN || hlen + 8 > avail)
		return;
	p->icmp.has_inner = true;
	p->icmp.inner.src = rdaddr(q + 12);
	p->icmp.inner.dst = rdaddr(q + 16);
	p->icmp.inner.proto = q[9];
	/* Ports only where the quoted datagram starts with a transport header. */
	if ((rd16(q + 6) & FLT__IPV4_OFFMASK) == 0 &&
	    (q[9] == FLT_PROTO_TCP || q[9] == FLT_PROTO_UDP)) {
		p->icmp.inner.has_ports = true;
		p->icmp.inner.sport = rd16(q + hlen);
		p->icmp.inner.dport = rd16(q + hlen + 2);
	}
}

static int parse_icmp(const uint8_t *icmp, size_t dlen, struct flt_pkt *p)
{
	if (dlen < FLT__ICMP_HLEN)
		return -FLT_DROP_ICMP_HEADER;
	p->icmp.type = icmp[0];
	p->icmp.code = icmp[1];
	p->payload_off = (uint16_t)(p->l4_off + FLT__ICMP_HLEN);
	if (icmp_is_error(icmp[0]))
		parse_icmp_quote(icmp + FLT__ICMP_HLEN, dlen - FLT__ICMP_HLEN, p);
	return 0;
}

static int parse_ipv4(const uint8_t *ip, size_t avail, struct flt_pkt *p)
{
	size_t hlen, total, dlen, frag;

	if (avail < FLT__IPV4_MIN_HLEN)
		return -FLT_DROP_IPV4_HEADER;
	hlen = (size_t)(ip[0] & 0x0f) * 4;
	total = rd16(ip + 2);
	/* RFC 791 §3.1: version 4; IHL at least 5 words; Total Length covers header and
	 * data and everything past it is Ethernet padding. Options must fit the header. */
	if (ip[0] >> 4 != 4 || hlen < FLT__IPV4_MIN_HLEN || hlen > avail || total < hlen ||
	    total > avail)
		return -FLT_DROP_IPV4_HEADER;
	if (!ipv4_checksum_ok(ip, hlen))
		return -FLT_DROP_IPV4_CHECKSUM;

	frag = rd16(ip + 6);
	dlen = total - hlen;
	p->ip.src = rdaddr(ip + 12);
	p->ip.dst = rdaddr(ip + 16);
	p->ip.proto = ip[9];
	p->ip.hlen = (uint8_t)hlen;
	p->ip.total = (uint16_t)total;
	p->ip.id = rd16(ip + 4);
	p->ip.df = (frag & FLT__IPV4_DF) != 0;
	p->ip.mf = (frag & FLT__IPV4_MF) != 0;
	p->ip.frag_off = (uint16_t)((frag & FLT__IPV4_OFFMASK) * 8);
	p->ip.fragment = p->ip.mf || p->ip.frag_off != 0;
	p->l4_off = (uint16_t)(p->l3_off + hlen);
	p->payload_off = p->l4_off;

	/* RFC 791 §3.2: a datagram is at most 65535 octets; a fragment reaching past that
	 * (the "ping of death") can never be reassembled. */
	if ((size_t)p->ip.frag_off + dlen > FLT__IPV4_MAX_LEN)
		return -FLT_DROP_FRAGMENT;
	if (p->ip.frag_off != 0) {
		/* RFC 1858 §4: "if FO=1 and PROTOCOL=TCP then drop packet": a fragment at
		 * offset 8 can only be there to overwrite the ports and flags of the first. */
		if (p->ip.proto == FLT_PROTO_TCP && p->ip.frag_off == 8)
			return -FLT_DROP_FRAGMENT;
		return 0;
	}

	switch (p->ip.proto) {
	case FLT_PROTO_TCP:
		return parse_tcp(ip + hlen, dlen, p);
	case FLT_PROTO_UDP:
		return parse_udp(ip + hlen, dlen, p);
	case FLT_PROTO_ICMP:
		return parse_icmp(ip + hlen, dlen, p);
	default:
		return 0;
	}
}

int flt_parse(const uint8_t *frame, size_t len, struct flt_pkt *out)
{
	struct flt_pkt p;
	int ret;

	if (!frame || len < FLT__ETH_HLEN)
		return -FLT_DROP_RUNT;
	memset(&p, 0, sizeof(p));
	memcpy(p.dst_mac, frame, FLT_ETH_ALEN);
	memcpy(p.src_mac, frame + FLT_ETH_ALEN, FLT_ETH_ALEN);
	p.ethertype = rd16(frame + 12);
	p.l3_off = FLT__ETH_HLEN;

	switch (p.ethertype) {
	case FLT_ETHERTYPE_IPV4:
		ret = parse_ipv4(frame + FLT__ETH_HLEN, len - FLT__ETH_HLEN, &p);
		break;
	case FLT_ETHERTYPE_ARP:
		ret = parse_arp(frame + FLT__ETH_HLEN, len - FLT__ETH_HLEN, &p);
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
		[FLT_REASON_NONE] = "none",
		[FLT_DROP_RUNT] = "drop_runt",
		[FLT_DROP_ETHERTYPE] = "drop_ethertype",
		[FLT_DROP_ARP] = "drop_arp",
		[FLT_DROP_IPV4_HEADER] = "drop_ipv4_header",
		[FLT_DROP_IPV4_CHECKSUM] = "drop_ipv4_checksum",
		[FLT_DROP_FRAGMENT] = "drop_fragment",
		[FLT_DROP_TCP_HEADER] = "drop_tcp_header",
		[FLT_DROP_UDP_HEADER] = "drop_udp_header",
		[FLT_DROP_ICMP_HEADER] = "drop_icmp_header",
		[FLT_DENY_SRC_MAC] = "deny_src_mac",
		[FLT_DENY_SRC_IP] = "deny_src_ip",
		[FLT_DENY_ARP] = "deny_arp",
		[FLT_DENY_PROTO] = "deny_proto",
		[FLT_DENY_PORT] = "deny_port",
		[FLT_DENY_SHARED_PEER] = "deny_shared_peer",
		[FLT_DENY_ICMP] = "deny_icmp",
	};
	return (unsigned)r < FLT_REASON_COUNT && names[r] ? names[r] : "unknown";
}
