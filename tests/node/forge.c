/* tests/node/forge.c: the frames the hostile process forges (forge.h). */
#include <netinet/in.h>
#include <string.h>

#include "netif/chksum.h"
#include "tests/node/forge.h"

void forge_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

const uint8_t forge_bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

/* The Ethernet header (RFC 894) from smac to dmac; returns where its payload goes. */
static uint8_t *eth(uint8_t *f, const uint8_t *dmac, const uint8_t *smac, uint16_t type)
{
	memcpy(f, dmac, 6);
	memcpy(f + 6, smac, 6);
	forge_put16(f + 12, type);
	return f + 14;
}

/* Ethernet + IPv4 header for a datagram of plen payload octets; returns the payload. */
uint8_t *forge_ip(uint8_t *f, const uint8_t *smac, uint32_t src, uint32_t dst, uint8_t proto,
		  size_t plen)
{
	uint8_t *ip = eth(f, forge_bcast, smac, 0x0800);

	memset(ip, 0, 20);
	ip[0] = 0x45;
	forge_put16(ip + 2, (uint16_t)(20 + plen));
	ip[8] = 64;
	ip[9] = proto;
	memcpy(ip + 12, &src, 4);
	memcpy(ip + 16, &dst, 4);
	uint16_t c = (uint16_t)~nif_inet_chksum(ip, 20);
	memcpy(ip + 10, &c, 2);
	return ip + 20;
}

/* Ethernet + IPv4 + TCP RST: the most harmful thing to forge into someone's connection. */
size_t forge_tcp_rst(uint8_t *f, const uint8_t *smac, uint32_t src, uint16_t sport,
		     uint32_t dst, uint16_t dport)
{
	uint8_t *tcp = forge_ip(f, smac, src, dst, IPPROTO_TCP, 20);

	memset(tcp, 0, 20);
	forge_put16(tcp, sport);
	forge_put16(tcp + 2, dport);
	tcp[12] = 5 << 4;
	tcp[13] = 0x04;
	return 54;
}

/* A UDP header and 8 octets of data at udp, without a checksum (RFC 768: zero means
 * none). */
static void udp_datagram(uint8_t *udp, uint16_t sport, uint16_t dport)
{
	memset(udp, 0, 16);
	forge_put16(udp, sport);
	forge_put16(udp + 2, dport);
	forge_put16(udp + 4, 16);
	memcpy(udp + 8, "hostile!", 8);
}

/* UDP from sport behind 4 octets of IP options, all NOPs (RFC 791 §3.1: option type 1):
 * a valid header, whose options read as ports 257 and 257 where a header without options
 * has the ports. */
size_t forge_udp_behind_nops(uint8_t *f, const uint8_t *smac, uint32_t src, uint16_t sport,
			     uint32_t dst, uint16_t dport)
{
	uint8_t *ip = forge_ip(f, smac, src, dst, IPPROTO_UDP, 4 + 16) - 20, *udp = ip + 24;

	ip[0] = 0x46;
	memset(ip + 20, 1, 4);
	memset(ip + 10, 0, 2);
	uint16_t c = (uint16_t)~nif_inet_chksum(ip, 24);
	memcpy(ip + 10, &c, 2);
	udp_datagram(udp, sport, dport);
	return 14 + 24 + 16;
}

/* UDP without a checksum (RFC 768: zero means none). */
size_t forge_udp(uint8_t *f, const uint8_t *smac, uint32_t src, uint16_t sport, uint32_t dst,
		 uint16_t dport)
{
	udp_datagram(forge_ip(f, smac, src, dst, IPPROTO_UDP, 8 + 8), sport, dport);
	return 14 + 20 + 16;
}

/* An ARP reply whose sender is another address at our MAC: a cache poisoning attempt. */
size_t forge_arp(uint8_t *f, const uint8_t *smac, uint32_t spa, uint32_t tpa)
{
	static const uint8_t hdr[8] = { 0, 1, 8, 0, 6, 4, 0, 2 };

	eth(f, forge_bcast, smac, 0x0806);
	memcpy(f + 14, hdr, 8);
	memcpy(f + 22, smac, 6);
	memcpy(f + 28, &spa, 4);
	memset(f + 32, 0, 6);
	memcpy(f + 38, &tpa, 4);
	return 42;
}

/* Ethernet + the fixed IPv6 header (RFC 8200 §3) for a packet of plen payload octets with
 * Next Header nh; returns the payload. */
uint8_t *forge_ip6(uint8_t *f, const uint8_t *smac, const uint8_t *dmac, const uint8_t *src,
		   const uint8_t *dst, uint8_t nh, size_t plen)
{
	uint8_t *ip = eth(f, dmac, smac, 0x86dd);

	memset(ip, 0, 40);
	ip[0] = 0x60;
	forge_put16(ip + 4, (uint16_t)plen);
	ip[6] = nh;
	ip[7] = nh == 58 ? 255 : 64;
	memcpy(ip + 8, src, 16);
	memcpy(ip + 24, dst, 16);
	return ip + 40;
}

/* IPv6 + TCP RST. The checksum is left 0: the transmit check drops it before any receiver
 * would check it. */
size_t forge_tcp6_rst(uint8_t *f, const uint8_t *smac, const uint8_t *src, uint16_t sport,
		      const uint8_t *dst, uint16_t dport)
{
	uint8_t *tcp = forge_ip6(f, smac, forge_bcast, src, dst, IPPROTO_TCP, 20);

	memset(tcp, 0, 20);
	forge_put16(tcp, sport);
	forge_put16(tcp + 2, dport);
	tcp[12] = 5 << 4;
	tcp[13] = 0x04;
	return 14 + 40 + 20;
}
