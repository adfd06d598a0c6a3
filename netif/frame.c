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
	info->l3_len = v.total;  /* anything past Total Length is Ethernet padding */
	return NIF_PASS_IPV4;
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
	default:
		return NIF_DROP_ETHERTYPE;
	}
	if (!nif_verdict_is_drop(v))
		*info = out;
	return v;
}

bool nif_verdict_is_drop(enum nif_verdict v)
{
	return v != NIF_PASS_IPV4 && v != NIF_PASS_ARP;
}

const char *nif_verdict_name(enum nif_verdict v)
{
	static const char *const names[NIF_VERDICT_COUNT] = {
		[NIF_PASS_IPV4] = "pass_ipv4",
		[NIF_PASS_ARP] = "pass_arp",
		[NIF_DROP_RUNT] = "frame_runt",
		[NIF_DROP_OVERSIZE] = "frame_oversize",
		[NIF_DROP_NOT_OURS] = "frame_not_ours",
		[NIF_DROP_ETHERTYPE] = "frame_ethertype",
		[NIF_DROP_IPV4_HEADER] = "frame_ipv4_header",
		[NIF_DROP_ARP_HEADER] = "frame_arp_header",
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
