/* Frames the hostile process (tests/node/hostile.c) forges: broadcast Ethernet, IPv4 with
 * a correct header checksum, addresses in network byte order. Each builder writes into f
 * and returns the frame's length (forge_ip: where its payload of plen octets goes). */
#ifndef ULS_TESTS_NODE_FORGE_H
#define ULS_TESTS_NODE_FORGE_H

#include <stddef.h>
#include <stdint.h>

extern const uint8_t forge_bcast[6];
void forge_put16(uint8_t *p, uint16_t v);
uint8_t *forge_ip(uint8_t *f, const uint8_t *smac, uint32_t src, uint32_t dst, uint8_t proto,
		  size_t plen);
/* A TCP RST: the most harmful thing to forge into someone's connection. */
size_t forge_tcp_rst(uint8_t *f, const uint8_t *smac, uint32_t src, uint16_t sport,
		     uint32_t dst, uint16_t dport);
/* UDP behind 4 NOP options, which read as ports 257 and 257 (FORGE_NOP_PORT) where a
 * header without options has the ports. */
#define FORGE_NOP_PORT 257
size_t forge_udp_behind_nops(uint8_t *f, const uint8_t *smac, uint32_t src, uint16_t sport,
			     uint32_t dst, uint16_t dport);
/* UDP with 8 octets of payload and no checksum (RFC 768: zero means none). */
size_t forge_udp(uint8_t *f, const uint8_t *smac, uint32_t src, uint16_t sport, uint32_t dst,
		 uint16_t dport);
/* An ARP reply whose sender is spa at smac: a cache poisoning attempt. */
size_t forge_arp(uint8_t *f, const uint8_t *smac, uint32_t spa, uint32_t tpa);
/* IPv6 (RFC 8200): Ethernet to dmac and the fixed header; returns where the payload goes. */
uint8_t *forge_ip6(uint8_t *f, const uint8_t *smac, const uint8_t *dmac, const uint8_t *src,
		   const uint8_t *dst, uint8_t nh, size_t plen);
size_t forge_tcp6_rst(uint8_t *f, const uint8_t *smac, const uint8_t *src, uint16_t sport,
		      const uint8_t *dst, uint16_t dport);

#endif
