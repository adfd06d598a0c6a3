/* Ethernet frame checks (see frame.h). */
#include "netif/frame.h"

#include <string.h>

#include "netif/wire/wire.h"

static enum nif_verdict check_ipv4(const uint8_t *ip, size_t avail, struct nif_frame_info *info)
{
	struct wire_ipv4 v;

	/* RFC 791 §3.1: IHL is at least 5 words; Total Length covers header and data. */
	if (wire_ipv4_view(&v, ip, avail) < 0)
		return NIF_DROP_IPV4_HEADER;
	/* lwIP skips the options unread (ip4.c), so a datagram whose options cannot be
	 * parsed would be taken as if they were fine; RFC 792 has it discarded. Deviation:
	 * silently (counted), no Parameter Problem is sent (RFC 1122 §3.2.2.5 SHOULD). */
	if (wire_ipv4_options_check(&v) < 0)
		return NIF_DROP_IPV4_OPTIONS;
	info->l3_len = v.total;  /* anything past Total Length is Ethernet padding */
	return NIF_PASS_IPV4;
}

/* The IPv6 fixed header (RFC 8200 §3): 40 octets, the version in the high nibble of the
 * first, the 16-bit Payload Length at octet 4. netif/wire has no IPv6 view yet (its IPv6
 * section is the node side's), so the two fields are read here. */
#define IPV6_HLEN         40
#define IPV6_OFF_PLEN     4

static enum nif_verdict check_ipv6(const uint8_t *ip, size_t avail, struct nif_frame_info *info)
{
	size_t plen;

	/* RFC 8200 §3: "Version 4-bit Internet Protocol version number = 6." A shorter
	 * packet has no header to read at all. */
	if (avail < IPV6_HLEN || ip[0] >> 4 != 6)
		return NIF_DROP_IPV6_HEADER;
	/* RFC 8200 §3: "Payload Length ... the rest of the packet following this IPv6
	 * header": it must fit the frame; what follows it is Ethernet padding (RFC 2464
	 * §3 frames are at least 64 octets). Deviation: a Payload Length of 0 (a jumbogram's,
	 * RFC 2675) is taken as an empty payload, as lwIP does; no jumbo option is read. */
	plen = (size_t)ip[IPV6_OFF_PLEN] << 8 | ip[IPV6_OFF_PLEN + 1];
	if (plen > avail - IPV6_HLEN)
		return NIF_DROP_IPV6_LENGTH;
	info->l3_len = IPV6_HLEN + plen;
	return NIF_PASS_IPV6;
}

static enum nif_verdict check_arp(const uint8_t *arp, size_t avail, struct nif_frame_info *info)
{
	struct wire_arp v;

	/* RFC 826: hardware type 1 (Ethernet), protocol 0x0800, address lengths 6 and 4. */
	if (wire_arp_view(&v, arp, avail) < 0)
		return NIF_DROP_ARP_HEADER;
	info->l3_len = WIRE_ARP_LEN;
	return NIF_PASS_ARP;
}

/* Classify one received frame. max_len is the largest frame the interface accepts (MTU plus
 * the Ethernet header); a read that filled the buffer past it was truncated by the device.
 * info is written only when the verdict is a pass. */
enum nif_verdict nif_frame_check(const uint8_t *frame, size_t len, size_t max_len,
				 const uint8_t own_mac[WIRE_ETH_ALEN],
				 struct nif_frame_info *info)
{
	struct nif_frame_info out = { .l3_off = WIRE_ETH_HLEN };
	struct wire_eth eth;
	enum nif_verdict v;

	if (wire_eth_view(&eth, frame, len) < 0)
		return NIF_DROP_RUNT;
	if (len > max_len)
		return NIF_DROP_OVERSIZE;
	if (wire_eth_is_broadcast(eth.dst))
		out.flags |= NIF_FRAME_LLBCAST;
	else if (wire_eth_is_group(eth.dst))
		out.flags |= NIF_FRAME_LLMCAST;
	else if (memcmp(eth.dst, own_mac, WIRE_ETH_ALEN) != 0)
		return NIF_DROP_NOT_OURS;

	switch (eth.type) {
	case WIRE_ETHERTYPE_IPV4:
		v = check_ipv4(eth.payload, eth.payload_len, &out);
		break;
	case WIRE_ETHERTYPE_ARP:
		v = check_arp(eth.payload, eth.payload_len, &out);
		break;
	case WIRE_ETHERTYPE_IPV6:
		v = check_ipv6(eth.payload, eth.payload_len, &out);
		break;
	default:
		return NIF_DROP_ETHERTYPE;
	}
	if (!nif_verdict_is_drop(v))
		*info = out;
	return v;
}

bool nif_verdict_is_drop(enum nif_verdict v)
{
	return v != NIF_PASS_IPV4 && v != NIF_PASS_ARP && v != NIF_PASS_IPV6;
}

const char *nif_verdict_name(enum nif_verdict v)
{
	static const char *const names[NIF_VERDICT_COUNT] = {
		[NIF_PASS_IPV4] = "pass_ipv4",
		[NIF_PASS_ARP] = "pass_arp",
		[NIF_PASS_IPV6] = "pass_ipv6",
		[NIF_DROP_RUNT] = "frame_runt",
		[NIF_DROP_OVERSIZE] = "frame_oversize",
		[NIF_DROP_NOT_OURS] = "frame_not_ours",
		[NIF_DROP_ETHERTYPE] = "frame_ethertype",
		[NIF_DROP_IPV4_HEADER] = "frame_ipv4_header",
		[NIF_DROP_ARP_HEADER] = "frame_arp_header",
		[NIF_DROP_IPV6_HEADER] = "frame_ipv6_header",
		[NIF_DROP_IPV6_LENGTH] = "frame_ipv6_length",
		[NIF_DROP_IPV4_OPTIONS] = "frame_ipv4_options",
	};
	return (unsigned)v < NIF_VERDICT_COUNT ? names[v] : "unknown";
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

bool nif_mac_parse(const char *s, uint8_t mac[WIRE_ETH_ALEN])
{
	uint8_t out[WIRE_ETH_ALEN];

	if (!s || strlen(s) != 17)
		return false;
	for (int i = 0; i < WIRE_ETH_ALEN; i++) {
		int hi = hexval(s[3 * i]), lo = hexval(s[3 * i + 1]);
		if (hi < 0 || lo < 0 || (i < 5 && s[3 * i + 2] != ':'))
			return false;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	memcpy(mac, out, sizeof(out));
	return true;
}
