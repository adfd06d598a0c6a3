/* The virtio-net header of TAP frames (see vnet.h). */
#include "netif/vnet.h"

#include <string.h>

#include "netif/wire/wire.h"

/* What the transport header of an IPv4 or IPv6 frame is, as far as offloads care. */
struct l4 {
	size_t ip_hlen;    /* IPv6: the fixed header (the upper layer follows it at once) */
	bool v6;
	uint8_t proto;
	bool fragment;
	size_t l4_len;     /* transport header and data, from Total (Payload) Length */
	size_t tcp_hlen;   /* TCP only, 0 if the header does not fit */
};

static bool parse_l4(const uint8_t *frame, size_t len, struct l4 *o)
{
	struct wire_eth eth;
	struct wire_ipv4 ip;
	struct wire_ipv6 ip6;
	struct wire_tcp tcp;
	const uint8_t *data;

	if (wire_eth_view(&eth, frame, len) < 0)
		return false;
	if (eth.type == WIRE_ETHERTYPE_IPV6) {
		/* RFC 8200 §8.1: offloads only where the upper-layer header follows the fixed
		 * header; an extension header (a fragment among them) leaves the transport
		 * header where neither side of the offload looks for it.
		 * Deviation: the kernel could mark such a packet NEEDS_CSUM too (csum_start past
		 * the extension headers); it is refused (vnet_bad_csum_offsets). Our stacks
		 * send none. */
		if (wire_ipv6_view(&ip6, eth.payload, eth.payload_len) < 0)
			return false;
		o->ip_hlen = WIRE_IPV6_HLEN;
		o->v6 = true;
		o->proto = ip6.next;
		o->fragment = ip6.next == WIRE_IPPROTO_FRAGMENT;
		o->l4_len = ip6.payload_len;
		data = ip6.payload;
	} else if (eth.type == WIRE_ETHERTYPE_IPV4 &&
		   wire_ipv4_view(&ip, eth.payload, eth.payload_len) == 0) {
		o->ip_hlen = ip.hlen;
		o->v6 = false;
		o->proto = ip.proto;
		o->fragment = wire_ipv4_is_fragment(&ip);
		o->l4_len = ip.data_len;
		data = ip.data;
	} else {
		return false;
	}
	o->tcp_hlen = 0;
	if (o->proto == WIRE_IPPROTO_TCP && wire_tcp_view(&tcp, data, o->l4_len) == 0)
		o->tcp_hlen = tcp.hlen;
	return true;
}

/* The GSO type of a TCP super-segment of this family. */
static uint8_t gso_tcp(const struct l4 *l)
{
	return l->v6 ? WIRE_VNET_GSO_TCPV6 : WIRE_VNET_GSO_TCPV4;
}

/* The checksum field's offset in the transport header, or 0 if it has none we offload. */
static size_t csum_field(const struct l4 *l)
{
	if (l->fragment)
		return 0;
	if (l->proto == WIRE_IPPROTO_TCP && l->tcp_hlen)
		return WIRE_TCP_OFF_CHECKSUM;
	if (l->proto == WIRE_IPPROTO_UDP && l->l4_len >= WIRE_UDP_HLEN)
		return WIRE_UDP_OFF_CHECKSUM;
	return 0;
}

int nif_vnet_parse(const uint8_t *hdr, size_t hlen, const uint8_t *frame, size_t len,
		   uint32_t *off)
{
	struct wire_vnet h;
	uint32_t out = 0;
	struct l4 l;

	if (wire_vnet_view(&h, hdr, hlen) < 0)
		return -NIF_VNET_BAD_FLAGS;
	if (h.flags & ~(WIRE_VNET_F_NEEDS_CSUM | WIRE_VNET_F_DATA_VALID))
		return -NIF_VNET_BAD_FLAGS;
	uint8_t gso_type = h.gso_type & (uint8_t)~WIRE_VNET_GSO_ECN;
	if (h.gso_type != WIRE_VNET_GSO_NONE && gso_type != WIRE_VNET_GSO_TCPV4 &&
	    gso_type != WIRE_VNET_GSO_TCPV6)
		return -NIF_VNET_BAD_GSO_TYPE;
	bool have_l4 = parse_l4(frame, len, &l);
	if (h.flags & WIRE_VNET_F_NEEDS_CSUM) {
		size_t f = have_l4 ? csum_field(&l) : 0;
		if (!f || h.csum_start != WIRE_ETH_HLEN + l.ip_hlen || h.csum_offset != f)
			return -NIF_VNET_BAD_CSUM;
		out |= NIF_OFF_CSUM_PARTIAL;
	} else if (h.flags & WIRE_VNET_F_DATA_VALID) {
		out |= NIF_OFF_CSUM_VALID;
	}
	if (h.gso_type != WIRE_VNET_GSO_NONE) {
		/* A super-segment: a TCP segment of IPv4 or IPv6 (its type the frame's
		 * family), whole, whose checksum a local sender left partial or the kernel
		 * verified (GRO); Linux hands out no other kind. */
		if (!have_l4 || l.proto != WIRE_IPPROTO_TCP || !l.tcp_hlen || l.fragment ||
		    gso_type != gso_tcp(&l) || !nif_off_csum_ok(out) || h.gso_size < NIF_OFF_GSO_MIN)
			return -NIF_VNET_BAD_GSO;
		out |= h.gso_size;
	}
	*off = out;
	return 0;
}

int nif_vnet_build(uint8_t hdr[NIF_VNET_HLEN], const uint8_t *frame, size_t len, uint32_t off)
{
	struct wire_vnet h = { .gso_type = WIRE_VNET_GSO_NONE };
	struct l4 l;

	memset(hdr, 0, NIF_VNET_HLEN);
	if (off == 0)
		return 0;
	if (off & ~NIF_OFF_KNOWN || off & NIF_OFF_CSUM_VALID)
		return -NIF_VNET_BAD_FLAGS;
	if (!parse_l4(frame, len, &l))
		return (off & NIF_OFF_GSO_MASK) ? -NIF_VNET_BAD_GSO : -NIF_VNET_BAD_CSUM;
	size_t f = csum_field(&l);
	if (off & NIF_OFF_CSUM_PARTIAL) {
		if (!f)
			return -NIF_VNET_BAD_CSUM;
		h.flags = WIRE_VNET_F_NEEDS_CSUM;
		h.csum_start = (uint16_t)(WIRE_ETH_HLEN + l.ip_hlen);
		h.csum_offset = (uint16_t)f;
	}
	unsigned gso = nif_off_gso(off);
	if (gso) {
		if (l.proto != WIRE_IPPROTO_TCP || !l.tcp_hlen || l.fragment ||
		    !(off & NIF_OFF_CSUM_PARTIAL) || gso < NIF_OFF_GSO_MIN)
			return -NIF_VNET_BAD_GSO;
		if (l.l4_len - l.tcp_hlen > gso) {
			/* Only a segment with more than one piece of data is a super-segment. */
			h.gso_type = gso_tcp(&l);
			h.hdr_len = (uint16_t)(WIRE_ETH_HLEN + l.ip_hlen + l.tcp_hlen);
			h.gso_size = (uint16_t)gso;
		}
	}
	wire_vnet_write(hdr, &h);
	return 0;
}

void nif_vnet_pseudo_csum(uint8_t *ip, size_t ip_hlen, size_t csum_off)
{
	/* Source and destination address, the protocol, the transport length; folded, not
	 * inverted: the receiver (or the kernel) adds the data and inverts. */
	uint32_t sum;

	if (ip[0] >> 4 == WIRE_IPV6_VERSION)   /* RFC 8200 §8.1 */
		sum = wire_sum_pseudo6(0, ip + WIRE_IPV6_OFF_SRC, ip + WIRE_IPV6_OFF_DST,
				       ip[WIRE_IPV6_OFF_NEXT],
				       (uint32_t)(wire_rd16(ip + WIRE_IPV6_OFF_PLEN) -
						  (ip_hlen - WIRE_IPV6_HLEN)));
	else
		sum = wire_sum_pseudo4(0, wire_rdaddr(ip + WIRE_IPV4_OFF_SRC),
				       wire_rdaddr(ip + WIRE_IPV4_OFF_DST),
				       ip[WIRE_IPV4_OFF_PROTOCOL],
				       (uint16_t)(wire_rd16(ip + WIRE_IPV4_OFF_TOTAL_LEN) - ip_hlen));
	wire_wr16(ip + ip_hlen + csum_off, (uint16_t)~wire_sum_finish(sum));
}

const char *nif_vnet_reason_name(int reason)
{
	static const char *const names[NIF_VNET_REASON_END - NIF_VNET_REASON_BASE] = {
		[NIF_VNET_BAD_FLAGS - NIF_VNET_REASON_BASE] = "vnet_bad_flags",
		[NIF_VNET_BAD_GSO_TYPE - NIF_VNET_REASON_BASE] = "vnet_bad_gso_type",
		[NIF_VNET_BAD_CSUM - NIF_VNET_REASON_BASE] = "vnet_bad_csum_offsets",
		[NIF_VNET_BAD_GSO - NIF_VNET_REASON_BASE] = "vnet_bad_gso",
	};

	if (reason < 0)
		reason = -reason;
	if (reason < NIF_VNET_REASON_BASE || reason >= NIF_VNET_REASON_END)
		return "unknown";
	return names[reason - NIF_VNET_REASON_BASE];
}
