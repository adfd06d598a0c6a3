/* The virtio-net header of TAP frames (see vnet.h). */
#include "netif/vnet.h"

#include <linux/virtio_net.h>
#include <string.h>

#include "netif/frame.h"

#define IPPROTO_TCP_ 6
#define IPPROTO_UDP_ 17
#define TCP_CSUM_OFF 16  /* RFC 9293 §3.1: the checksum is octets 16-17 of the header */
#define UDP_CSUM_OFF 6   /* RFC 768 */

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint16_t rdle16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static void wrle16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

/* What the transport header of an IPv4 frame is, as far as offloads care. */
struct l4 {
	size_t ip_hlen;
	uint8_t proto;
	bool fragment;
	size_t l4_len;     /* transport header and data, from Total Length */
	size_t tcp_hlen;   /* TCP only, 0 if the header does not fit */
};

static bool parse_l4(const uint8_t *frame, size_t len, struct l4 *o)
{
	const uint8_t *ip = frame + NIF_ETH_HLEN;

	if (len < NIF_ETH_HLEN + NIF_IPV4_MIN_HLEN || rd16(frame + 12) != NIF_ETHERTYPE_IPV4)
		return false;
	size_t hlen = (size_t)(ip[0] & 0x0f) * 4, total = rd16(ip + 2);
	if ((ip[0] >> 4) != 4 || hlen < NIF_IPV4_MIN_HLEN || total < hlen ||
	    total > len - NIF_ETH_HLEN)
		return false;
	o->ip_hlen = hlen;
	o->proto = ip[9];
	o->fragment = (rd16(ip + 6) & 0x3fff) != 0;  /* MF or an offset */
	o->l4_len = total - hlen;
	o->tcp_hlen = 0;
	if (o->proto == IPPROTO_TCP_ && o->l4_len >= 20) {
		size_t doff = (size_t)(ip[hlen + 12] >> 4) * 4;
		if (doff >= 20 && doff <= o->l4_len)
			o->tcp_hlen = doff;
	}
	return true;
}

/* The checksum field's offset in the transport header, or 0 if it has none we offload. */
static size_t csum_field(const struct l4 *l)
{
	if (l->fragment)
		return 0;
	if (l->proto == IPPROTO_TCP_ && l->tcp_hlen)
		return TCP_CSUM_OFF;
	if (l->proto == IPPROTO_UDP_ && l->l4_len >= 8)
		return UDP_CSUM_OFF;
	return 0;
}

enum nif_vnet_err nif_vnet_parse(const uint8_t *hdr, size_t hlen, const uint8_t *frame,
				 size_t len, uint32_t *off)
{
	uint32_t out = 0;
	struct l4 l;

	if (hlen < NIF_VNET_HLEN)
		return NIF_VNET_BAD_FLAGS;
	uint8_t flags = hdr[0], gso_type = hdr[1];
	uint16_t gso_size = rdle16(hdr + 4), csum_start = rdle16(hdr + 6),
		 csum_offset = rdle16(hdr + 8);

	if (flags & ~(VIRTIO_NET_HDR_F_NEEDS_CSUM | VIRTIO_NET_HDR_F_DATA_VALID))
		return NIF_VNET_BAD_FLAGS;
	if (gso_type != VIRTIO_NET_HDR_GSO_NONE &&
	    (gso_type & ~VIRTIO_NET_HDR_GSO_ECN) != VIRTIO_NET_HDR_GSO_TCPV4)
		return NIF_VNET_BAD_GSO_TYPE;
	bool have_l4 = parse_l4(frame, len, &l);
	if (flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) {
		size_t f = have_l4 ? csum_field(&l) : 0;
		if (!f || csum_start != NIF_ETH_HLEN + l.ip_hlen || csum_offset != f)
			return NIF_VNET_BAD_CSUM;
		out |= NIF_OFF_CSUM_PARTIAL;
	} else if (flags & VIRTIO_NET_HDR_F_DATA_VALID) {
		out |= NIF_OFF_CSUM_VALID;
	}
	if (gso_type != VIRTIO_NET_HDR_GSO_NONE) {
		/* A super-segment: a TCP segment of IPv4, whole, whose checksum a local sender
		 * left partial or the kernel verified (GRO); Linux hands out no other kind. */
		if (!have_l4 || l.proto != IPPROTO_TCP_ || !l.tcp_hlen || l.fragment ||
		    !nif_off_csum_ok(out) || gso_size < NIF_OFF_GSO_MIN)
			return NIF_VNET_BAD_GSO;
		out |= gso_size;
	}
	*off = out;
	return NIF_VNET_OK;
}

enum nif_vnet_err nif_vnet_build(uint8_t hdr[NIF_VNET_HLEN], const uint8_t *frame, size_t len,
				 uint32_t off)
{
	struct l4 l;
	enum nif_vnet_err e = NIF_VNET_OK;

	memset(hdr, 0, NIF_VNET_HLEN);
	if (off == 0)
		return NIF_VNET_OK;
	if (off & ~NIF_OFF_KNOWN || off & NIF_OFF_CSUM_VALID)
		return NIF_VNET_BAD_FLAGS;
	if (!parse_l4(frame, len, &l))
		return (off & NIF_OFF_GSO_MASK) ? NIF_VNET_BAD_GSO : NIF_VNET_BAD_CSUM;
	size_t f = csum_field(&l);
	if (off & NIF_OFF_CSUM_PARTIAL) {
		if (!f)
			return NIF_VNET_BAD_CSUM;
		hdr[0] = VIRTIO_NET_HDR_F_NEEDS_CSUM;
		wrle16(hdr + 6, (uint16_t)(NIF_ETH_HLEN + l.ip_hlen));
		wrle16(hdr + 8, (uint16_t)f);
	}
	unsigned gso = nif_off_gso(off);
	if (gso) {
		if (l.proto != IPPROTO_TCP_ || !l.tcp_hlen || l.fragment ||
		    !(off & NIF_OFF_CSUM_PARTIAL) || gso < NIF_OFF_GSO_MIN) {
			e = NIF_VNET_BAD_GSO;
		} else if (l.l4_len - l.tcp_hlen > gso) {
			/* Only a segment with more than one piece of data is a super-segment. */
			hdr[1] = VIRTIO_NET_HDR_GSO_TCPV4;
			wrle16(hdr + 2, (uint16_t)(NIF_ETH_HLEN + l.ip_hlen + l.tcp_hlen));
			wrle16(hdr + 4, (uint16_t)gso);
		}
	}
	if (e != NIF_VNET_OK)
		memset(hdr, 0, NIF_VNET_HLEN);
	return e;
}

void nif_vnet_pseudo_csum(uint8_t *ip, size_t ip_hlen, size_t csum_off)
{
	uint32_t sum = 0;
	size_t l4_len = (size_t)rd16(ip + 2) - ip_hlen;

	/* Source and destination address, the protocol, the transport length. */
	for (size_t i = 12; i < 20; i += 2)
		sum += rd16(ip + i);
	sum += ip[9];
	sum += (uint32_t)l4_len;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	ip[ip_hlen + csum_off] = (uint8_t)(sum >> 8);
	ip[ip_hlen + csum_off + 1] = (uint8_t)sum;
}

const char *nif_vnet_err_name(enum nif_vnet_err e)
{
	static const char *const names[NIF_VNET_ERR_COUNT] = {
		[NIF_VNET_OK] = "ok",
		[NIF_VNET_BAD_FLAGS] = "vnet_bad_flags",
		[NIF_VNET_BAD_GSO_TYPE] = "vnet_bad_gso_type",
		[NIF_VNET_BAD_CSUM] = "vnet_bad_csum_offsets",
		[NIF_VNET_BAD_GSO] = "vnet_bad_gso",
	};
	return (unsigned)e < NIF_VNET_ERR_COUNT ? names[e] : "unknown";
}
