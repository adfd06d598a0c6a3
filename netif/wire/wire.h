/* Wire formats: one bounds-checked view per header, and writers for the headers ulstack
 * builds itself.
 *
 * Read first: netif/wire/proto.h (the constants, with their RFCs), RFC 791 §3.1, RFC 9293
 * §3.1, RFC 768, RFC 792, RFC 826, RFC 8200 §3-4 and §8.1, RFC 4443 §2, RFC 4861 §4,
 * virtio v1.2 §5.1.6.
 *
 * This is the leaf of the dependency graph: it includes only libc's integer headers, and
 * filter/, netif/, stack/ and server/ all read and write headers through it.
 *
 * A view function gets a pointer and the number of octets that really follow it, checks
 * every range before it reads, and fills its struct only when the header is whole and
 * consistent: then every pointer and length in the struct lies within [p, p + len). It
 * returns 0, or the negated enum wire_reason. A view checks what the header's own
 * specification requires of the header; what a caller requires on top (a checksum, a
 * relation between layers, its own policy) stays with the caller.
 *
 * Addresses are kept in network order, as on the wire (compare and copy them, do not do
 * arithmetic on them); every other multi-octet field is converted to host order.
 */
#ifndef ULS_NETIF_WIRE_WIRE_H
#define ULS_NETIF_WIRE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "netif/wire/proto.h"

/* Why a view refused a header. Views return the negated value. The values start above
 * every errno (the kernel's MAX_ERRNO is 4095), so a reason is never mistaken for one. */
enum wire_reason {
	WIRE_REASON_BASE = 4096,
	WIRE_TRUNCATED = WIRE_REASON_BASE, /* fewer octets than the fixed header */
	WIRE_BAD_VERSION,       /* IPv4 Version is not 4 */
	WIRE_BAD_HLEN,          /* IHL or Data Offset < 5, or the header past the octets */
	WIRE_BAD_LENGTH,        /* a length field below its minimum or past the octets */
	WIRE_BAD_FORMAT,        /* ARP not for Ethernet and IPv4; an ND option of length 0 */
	WIRE_TOO_DEEP,          /* more IPv6 extension headers than WIRE_IPV6_EXT_MAX */
	WIRE_BAD_OPTION,        /* an IPv4 option of length < 2 or past the header */
	WIRE_REASON_END
};
const char *wire_reason_name(int reason);

/* ---- Octets in network order -------------------------------------------------------- */

static inline uint16_t wire_rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t wire_rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void wire_wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void wire_wr32(uint8_t *p, uint32_t v)
{
	wire_wr16(p, (uint16_t)(v >> 16));
	wire_wr16(p + 2, (uint16_t)v);
}

/* An IPv4 address as it sits in memory: network order, whatever the host's. */
static inline uint32_t wire_rdaddr(const uint8_t *p)
{
	uint32_t a;

	memcpy(&a, p, sizeof(a));
	return a;
}

static inline void wire_wraddr(uint8_t *p, uint32_t a)
{
	memcpy(p, &a, sizeof(a));
}

/* The virtio-net header's fields are little-endian. */
static inline uint16_t wire_rdle16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline void wire_wrle16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

/* ---- The Internet checksum (RFC 1071) ----------------------------------------------- */

/* Add len octets at p, read as big-endian 16-bit words (an odd last octet padded with
 * zero), to a running 32-bit sum. */
uint32_t wire_sum(uint32_t sum, const uint8_t *p, size_t len);
/* Fold a running sum to 16 bits and invert it: the value for a checksum field. */
uint16_t wire_sum_finish(uint32_t sum);
/* RFC 9293 §3.1, RFC 768: the pseudo-header of IPv4 (source, destination, zero,
 * protocol, transport length), added to sum. Addresses in network order. */
uint32_t wire_sum_pseudo4(uint32_t sum, uint32_t src, uint32_t dst, uint8_t proto,
			  uint16_t len);

/* ---- Ethernet (RFC 894) ------------------------------------------------------------- */

struct wire_eth {
	const uint8_t *dst, *src;   /* WIRE_ETH_ALEN octets each */
	uint16_t type;
	const uint8_t *payload;     /* what follows the header, padding included */
	size_t payload_len;
};
int wire_eth_view(struct wire_eth *v, const uint8_t *p, size_t len);
static inline bool wire_eth_is_group(const uint8_t *addr)
{
	return (addr[0] & WIRE_ETH_GROUP_BIT) != 0;
}
static inline bool wire_eth_is_broadcast(const uint8_t *addr)
{
	return (addr[0] & addr[1] & addr[2] & addr[3] & addr[4] & addr[5]) == 0xff;
}
void wire_eth_write(uint8_t *p, const uint8_t dst[WIRE_ETH_ALEN],
		    const uint8_t src[WIRE_ETH_ALEN], uint16_t type);

/* ---- ARP (RFC 826), Ethernet and IPv4 ----------------------------------------------- */

struct wire_arp {
	uint16_t op;
	const uint8_t *sha, *tha;   /* sender and target hardware address */
	uint32_t spa, tpa;          /* sender and target protocol address, network order */
};
/* Accepts only hardware space Ethernet, protocol IPv4, lengths 6 and 4: -WIRE_BAD_FORMAT
 * for any other. Octets past WIRE_ARP_LEN are Ethernet padding. */
int wire_arp_view(struct wire_arp *v, const uint8_t *p, size_t len);
/* WIRE_ARP_LEN octets. Addresses spa, tpa in network order. */
void wire_arp_write(uint8_t *p, uint16_t op, const uint8_t sha[WIRE_ETH_ALEN], uint32_t spa,
		    const uint8_t tha[WIRE_ETH_ALEN], uint32_t tpa);

/* ---- IPv4 (RFC 791 §3.1) ------------------------------------------------------------ */

struct wire_ipv4 {
	const uint8_t *hdr;
	size_t hlen;                /* IHL * 4: 20 .. 60 */
	size_t total;               /* Total Length: header and data, no Ethernet padding */
	uint8_t tos, ttl, proto;
	uint16_t id;
	uint16_t frag;              /* Flags and Fragment Offset as on the wire */
	uint32_t src, dst;          /* network order */
	const uint8_t *options;     /* hlen - 20 octets */
	size_t options_len;
	const uint8_t *data;        /* total - hlen octets (see wire_ipv4_view_quoted) */
	size_t data_len;
};
/* A whole datagram: Version 4, IHL >= 5, the header within len, hlen <= Total Length
 * <= len (what follows Total Length is link-layer padding). The header checksum is not
 * checked (wire_ipv4_checksum_ok): some readers have the kernel's word that it is right. */
int wire_ipv4_view(struct wire_ipv4 *v, const uint8_t *p, size_t len);
/* The header an ICMP error quotes (RFC 792): Version 4, IHL >= 5, the header within len.
 * Total Length describes a datagram we do not have and is not checked; data is what
 * follows the header within len. */
int wire_ipv4_view_quoted(struct wire_ipv4 *v, const uint8_t *p, size_t len);
/* RFC 791 §3.1: the header, checksum field included, sums to 0xffff. */
bool wire_ipv4_checksum_ok(const struct wire_ipv4 *v);
/* RFC 791 §3.1: the options are well formed: each one a single octet (End of Option List,
 * No Operation) or a type, a length of at least 2 and that many octets within the header.
 * 0 or -WIRE_BAD_OPTION. The options' contents are not judged (RFC 1122 §3.2.1.8). */
int wire_ipv4_options_check(const struct wire_ipv4 *v);
static inline bool wire_ipv4_df(const struct wire_ipv4 *v)
{
	return (v->frag & WIRE_IPV4_DF) != 0;
}
static inline bool wire_ipv4_mf(const struct wire_ipv4 *v)
{
	return (v->frag & WIRE_IPV4_MF) != 0;
}
/* The fragment offset in octets. */
static inline size_t wire_ipv4_frag_offset(const struct wire_ipv4 *v)
{
	return (size_t)(v->frag & WIRE_IPV4_OFFMASK) * 8;
}
/* Part of a fragmented datagram: more fragments follow, or this one is not the first. */
static inline bool wire_ipv4_is_fragment(const struct wire_ipv4 *v)
{
	return (v->frag & (WIRE_IPV4_MF | WIRE_IPV4_OFFMASK)) != 0;
}
/* A 20-octet header without options, checksum filled in. Addresses in network order. */
void wire_ipv4_write(uint8_t *p, uint8_t proto, uint32_t src, uint32_t dst, uint16_t total,
		     uint16_t id, uint8_t ttl);

/* ---- TCP (RFC 9293 §3.1) ------------------------------------------------------------ */

struct wire_tcp {
	uint16_t sport, dport;
	uint32_t seq, ack;
	uint8_t flags;              /* WIRE_TCP_* */
	uint16_t window;
	size_t hlen;                /* Data Offset * 4: 20 .. 60 */
	const uint8_t *options;     /* hlen - 20 octets */
	size_t options_len;
	const uint8_t *payload;     /* len - hlen octets */
	size_t payload_len;
};
/* len is the segment's length (the IPv4 data length): Data Offset >= 5 and the header
 * within len (RFC 1858 §3.2: a header that does not fit is not a header). */
int wire_tcp_view(struct wire_tcp *v, const uint8_t *p, size_t len);
/* The sequence space a segment occupies: its data, SYN and FIN (RFC 9293 §3.4). */
static inline uint32_t wire_tcp_seg_len(const struct wire_tcp *v)
{
	return (uint32_t)v->payload_len + !!(v->flags & WIRE_TCP_SYN) +
	       !!(v->flags & WIRE_TCP_FIN);
}
/* A 20-octet header without options, checksum field zero. */
void wire_tcp_write(uint8_t *p, uint16_t sport, uint16_t dport, uint32_t seq, uint32_t ack,
		    uint8_t flags, uint16_t window);

/* ---- UDP (RFC 768) ------------------------------------------------------------------ */

struct wire_udp {
	uint16_t sport, dport;
	uint16_t len;               /* the Length field: header and data */
	uint16_t checksum;
	const uint8_t *payload;     /* what follows the header within the octets given */
	size_t payload_len;
};
/* Only the header must be there: Length is reported, not checked (in a first fragment it
 * counts octets we have not seen; the caller knows which case it is). */
int wire_udp_view(struct wire_udp *v, const uint8_t *p, size_t len);

/* ---- ICMP (RFC 792) ----------------------------------------------------------------- */

/* One view for both families: RFC 4443 §2.1 gives ICMPv6 the ICMP header of RFC 792
 * (type, code, checksum), and every message ulstack reads of either has 4 more octets by
 * type (RFC 792's errors and echo; RFC 4443 §3-4). */
struct wire_icmp {
	uint8_t type, code;
	uint16_t checksum;
	const uint8_t *rest;        /* the 4 octets that depend on the type */
	const uint8_t *body;        /* what follows the 8-octet header */
	size_t body_len;
};
int wire_icmp_view(struct wire_icmp *v, const uint8_t *p, size_t len);
/* The error messages, whose body quotes the datagram they are about (RFC 1122 §3.2.2). */
static inline bool wire_icmp_is_error(uint8_t type)
{
	return type == WIRE_ICMP_DEST_UNREACH || type == WIRE_ICMP_SOURCE_QUENCH ||
	       type == WIRE_ICMP_TIME_EXCEEDED || type == WIRE_ICMP_PARAM_PROBLEM;
}

/* ---- IPv6 (RFC 8200) ---------------------------------------------------------------- */

struct wire_ipv6 {
	const uint8_t *hdr;
	uint8_t tclass;
	uint32_t flow;              /* 20 bits */
	uint16_t plen;              /* Payload Length */
	uint8_t next, hlim;
	const uint8_t *src, *dst;   /* WIRE_IPV6_ALEN octets each, inside hdr */
	const uint8_t *payload;     /* plen octets: extension headers and the upper layer */
	size_t payload_len;
};
/* A whole packet: Version 6, the fixed header within len, 40 + Payload Length <= len
 * (what follows is link-layer padding). Payload Length 0 with a Hop-by-Hop header would be
 * a jumbogram (RFC 2675), which no Ethernet link carries: a payload length of 0 is taken
 * as it says, an empty payload. */
int wire_ipv6_view(struct wire_ipv6 *v, const uint8_t *p, size_t len);
/* The header an ICMPv6 error quotes (RFC 4443 §2.4 (c)): Version 6, the fixed header
 * within len; Payload Length is about a packet we may have only part of and is not
 * checked. payload is what follows the fixed header within len. */
int wire_ipv6_view_quoted(struct wire_ipv6 *v, const uint8_t *p, size_t len);

/* Where the upper-layer header starts: RFC 8200 §4 extension headers walked from the
 * fixed header's Next Header. Hop-by-Hop, Routing, Destination Options and Fragment are
 * skipped (their contents are not interpreted); the walk stops at any other Next Header,
 * which is the upper layer (or No Next Header). It also stops right after a Fragment
 * header whose offset is not zero: what follows is the middle of the original packet's
 * fragmentable part, not headers (§4.5), and proto is that Fragment header's Next
 * Header. */
struct wire_ipv6_upper {
	uint8_t proto;              /* the upper layer's Next Header value */
	size_t off;                 /* its offset from the start of the IPv6 header */
	size_t nh_off;              /* where the Next Header field naming it is (the Pointer
				     * of RFC 4443 §3.4's Parameter Problem code 1) */
	unsigned nhdrs;             /* extension headers skipped */
	bool fragment;              /* a Fragment header was among them */
	uint16_t frag_off;          /* its offset in octets */
	bool frag_more;             /* its M flag */
	uint32_t frag_id;
	size_t frag_data_off;       /* where the fragment's data (the part of the original
				     * packet's fragmentable part it carries) starts: right
				     * after the Fragment header */
};
/* 0; -WIRE_BAD_LENGTH when an extension header runs past the payload; -WIRE_TOO_DEEP
 * after WIRE_IPV6_EXT_MAX extension headers; -WIRE_BAD_FORMAT for a Hop-by-Hop header
 * that is not the first (§4.1: it "MUST ... immediately follow the IPv6 header"). */
int wire_ipv6_upper(struct wire_ipv6_upper *u, const struct wire_ipv6 *v);

/* A 40-octet header: Traffic Class and Flow Label 0. */
void wire_ipv6_write(uint8_t *p, uint8_t next, const uint8_t src[WIRE_IPV6_ALEN],
		     const uint8_t dst[WIRE_IPV6_ALEN], uint16_t plen, uint8_t hlim);
/* RFC 8200 §8.1: the pseudo-header of IPv6 (source, destination, upper-layer packet
 * length as 32 bits, three zero octets, Next Header), added to sum. */
uint32_t wire_sum_pseudo6(uint32_t sum, const uint8_t src[WIRE_IPV6_ALEN],
			  const uint8_t dst[WIRE_IPV6_ALEN], uint8_t next, uint32_t len);

static inline bool wire_ipv6_is_multicast(const uint8_t *a)
{
	return a[0] == 0xff;        /* RFC 4291 §2.7: ff00::/8 */
}
static inline bool wire_ipv6_is_unspecified(const uint8_t *a)
{
	static const uint8_t zero[WIRE_IPV6_ALEN];

	return memcmp(a, zero, WIRE_IPV6_ALEN) == 0;
}
/* RFC 4291 §2.7.1: ff02::1:ff00:0/104 and the low 24 bits of addr. */
void wire_ipv6_solicited_node(uint8_t out[WIRE_IPV6_ALEN], const uint8_t addr[WIRE_IPV6_ALEN]);
/* RFC 2464 §7: 33:33 and the last 4 octets of a multicast address. */
void wire_ipv6_mcast_mac(uint8_t out[WIRE_ETH_ALEN], const uint8_t addr[WIRE_IPV6_ALEN]);
/* RFC 4291 §2.5.6 and Appendix A: fe80::/64 with the modified EUI-64 interface
 * identifier of an Ethernet address (ff:fe in the middle, the universal/local bit
 * inverted). */
void wire_ipv6_link_local(uint8_t out[WIRE_IPV6_ALEN], const uint8_t mac[WIRE_ETH_ALEN]);

/* ---- ICMPv6 (RFC 4443) and Neighbor Discovery (RFC 4861) ----------------------------- */

/* An ICMPv6 message's header is read by wire_icmp_view (the layout is RFC 792's). */
static inline bool wire_icmpv6_is_error(uint8_t type)
{
	return type <= WIRE_ICMPV6_ERROR_MAX_TYPE;
}
/* RFC 4443 §2.3: the checksum over the pseudo-header and the message (len octets at p,
 * checksum field included) is right. */
bool wire_icmpv6_checksum_ok(const uint8_t src[WIRE_IPV6_ALEN],
			     const uint8_t dst[WIRE_IPV6_ALEN], const uint8_t *p, size_t len);
/* Fill in the checksum field of the ICMPv6 message of len octets at p. */
void wire_icmpv6_set_checksum(const uint8_t src[WIRE_IPV6_ALEN],
			      const uint8_t dst[WIRE_IPV6_ALEN], uint8_t *p, size_t len);

/* A Neighbor Solicitation or Advertisement (RFC 4861 §4.3, §4.4). */
struct wire_nd {
	uint8_t type, code;
	uint8_t flags;              /* NA: WIRE_ND_NA_* */
	const uint8_t *target;      /* WIRE_IPV6_ALEN octets */
	const uint8_t *options;
	size_t options_len;
	const uint8_t *lladdr;      /* the Source (NS) or Target (NA) Link-Layer Address
				     * option's address, or NULL when there is none */
};
/* p, len: the ICMPv6 message. At least the 24 octets (§7.1.1 "ICMP length ... is 24 or
 * more octets"), type NS or NA (else -WIRE_BAD_FORMAT); every option within len and none
 * of length 0 (§4.6 "Nodes MUST silently discard an ND packet that contains an option
 * with length zero": -WIRE_BAD_FORMAT). Hop limit, code and the addresses are the
 * caller's checks (they need the IPv6 header). */
int wire_nd_view(struct wire_nd *v, const uint8_t *p, size_t len);

/* ---- virtio-net header (virtio v1.2 §5.1.6) ----------------------------------------- */

struct wire_vnet {
	uint8_t flags;              /* WIRE_VNET_F_* */
	uint8_t gso_type;           /* WIRE_VNET_GSO_* */
	uint16_t hdr_len, gso_size, csum_start, csum_offset;
};
/* Reads the fields; whether they describe the frame behind them is the caller's question
 * (netif/vnet.c). */
int wire_vnet_view(struct wire_vnet *v, const uint8_t *p, size_t len);
void wire_vnet_write(uint8_t p[WIRE_VNET_HLEN], const struct wire_vnet *v);

#endif
