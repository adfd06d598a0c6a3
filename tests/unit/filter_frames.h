/* Test frames for the filter tests: one template (TCP from the peer to the node), each
 * test spells out only the fields it changes. Zero fields take the template's value. */
#ifndef ULS_TESTS_UNIT_FILTER_FRAMES_H
#define ULS_TESTS_UNIT_FILTER_FRAMES_H

#include <arpa/inet.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "filter/filter.h"
#include "netif/wire/wire.h"

#define IP4(a, b, c, d) htonl((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (d))

static const uint8_t node_mac[WIRE_ETH_ALEN] = { 0x02, 0x75, 0x6c, 0x00, 0x00, 0x01 };
static const uint8_t peer_mac[WIRE_ETH_ALEN] = { 0x02, 0x75, 0x6c, 0x00, 0x00, 0x02 };
#define NODE_IP IP4(198, 18, 0, 1)
#define PEER_IP IP4(198, 18, 0, 2)

struct fspec {
	const uint8_t *src_mac;    /* peer_mac */
	const uint8_t *dst_mac;    /* node_mac */
	uint16_t ethertype;        /* IPv4 */
	uint8_t ver_ihl;           /* 0x45, or 0x40 | (5 + opt_len / 4) */
	size_t opt_len;            /* IPv4 option octets (NOPs), a multiple of 4 */
	uint8_t proto;             /* TCP */
	uint32_t src, dst;         /* PEER_IP, NODE_IP (network order) */
	uint16_t frag;             /* flags and offset field, raw */
	uint16_t id;
	uint16_t ip_total;         /* computed */
	bool bad_csum;             /* corrupt the IPv4 header checksum */
	uint16_t sport, dport;     /* 40000, 80 */
	uint8_t doff_words;        /* 5 */
	uint8_t tcp_flags;         /* ACK */
	uint16_t udp_len;          /* computed */
	uint8_t icmp_type, icmp_code;
	const uint8_t *quote;      /* ICMP payload bytes (a quoted datagram), quote_len long */
	size_t quote_len;
	size_t payload;            /* transport payload octets */
	size_t pad;                /* Ethernet padding after the datagram */
};

struct frame {
	uint8_t b[2048];
	size_t len;
};

static inline uint16_t ip_csum(const uint8_t *p, size_t n)
{
	uint32_t sum = 0;

	for (size_t i = 0; i + 1 < n; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static inline void build(struct frame *f, const struct fspec *s)
{
	uint8_t *ip = f->b + 14, *l4;
	size_t hlen = 20 + s->opt_len, l4len;
	uint8_t proto = s->proto ? s->proto : WIRE_IPPROTO_TCP;
	uint32_t src = s->src ? s->src : PEER_IP, dst = s->dst ? s->dst : NODE_IP;

	memset(f->b, 0, sizeof(f->b));
	memcpy(f->b, s->dst_mac ? s->dst_mac : node_mac, WIRE_ETH_ALEN);
	memcpy(f->b + 6, s->src_mac ? s->src_mac : peer_mac, WIRE_ETH_ALEN);
	wire_wr16(f->b + 12, s->ethertype ? s->ethertype : WIRE_ETHERTYPE_IPV4);

	l4 = ip + hlen;
	switch (proto) {
	case WIRE_IPPROTO_TCP: {
		size_t doff = (s->doff_words ? s->doff_words : 5) * 4u;
		wire_wr16(l4, s->sport ? s->sport : 40000);
		wire_wr16(l4 + 2, s->dport ? s->dport : 80);
		wire_wr32(l4 + 4, 0x01020304);
		wire_wr32(l4 + 8, 0x05060708);
		l4[12] = (uint8_t)((s->doff_words ? s->doff_words : 5) << 4);
		l4[13] = s->tcp_flags ? s->tcp_flags : WIRE_TCP_ACK;
		l4len = (doff < 20 ? 20 : doff) + s->payload;
		break;
	}
	case WIRE_IPPROTO_UDP:
		l4len = 8 + s->payload;
		wire_wr16(l4, s->sport ? s->sport : 40000);
		wire_wr16(l4 + 2, s->dport ? s->dport : 53);
		wire_wr16(l4 + 4, s->udp_len ? s->udp_len : (uint16_t)l4len);
		break;
	case WIRE_IPPROTO_ICMP:
		l4[0] = s->icmp_type;
		l4[1] = s->icmp_code;
		if (s->quote)
			memcpy(l4 + 8, s->quote, s->quote_len);
		l4len = 8 + s->quote_len + s->payload;
		break;
	default:
		l4len = s->payload;
		break;
	}
	memset(l4 + l4len, 0x5a, s->pad);  /* padding */

	ip[0] = s->ver_ihl ? s->ver_ihl : (uint8_t)(0x40 | (hlen / 4));
	wire_wr16(ip + 2, s->ip_total ? s->ip_total : (uint16_t)(hlen + l4len));
	wire_wr16(ip + 4, s->id);
	wire_wr16(ip + 6, s->frag);
	ip[8] = 64;
	ip[9] = proto;
	memcpy(ip + 12, &src, 4);
	memcpy(ip + 16, &dst, 4);
	memset(ip + 20, 1, s->opt_len);  /* NOP options */
	wire_wr16(ip + 10, (uint16_t)(ip_csum(ip, hlen) ^ (s->bad_csum ? 0x0100 : 0)));
	f->len = 14 + hlen + l4len + s->pad;
}

/* An Ethernet/IPv4 ARP packet (RFC 826), padded to the 60-octet minimum frame. */
static inline void build_arp(struct frame *f, uint16_t op, const uint8_t *sha, uint32_t spa,
			     uint32_t tpa)
{
	uint8_t *a = f->b + 14;

	memset(f->b, 0, sizeof(f->b));
	memset(f->b, 0xff, 6);
	memcpy(f->b + 6, sha, 6);
	wire_wr16(f->b + 12, WIRE_ETHERTYPE_ARP);
	wire_wr16(a, 1);
	wire_wr16(a + 2, WIRE_ETHERTYPE_IPV4);
	a[4] = 6;
	a[5] = 4;
	wire_wr16(a + 6, op);
	memcpy(a + 8, sha, 6);
	memcpy(a + 14, &spa, 4);
	memcpy(a + 24, &tpa, 4);
	f->len = 60;
}

#endif
