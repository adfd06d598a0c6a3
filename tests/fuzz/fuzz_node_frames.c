/* The frames fuzz_node.c's records send ulsd's node (ARP, echo requests, Neighbor
 * Discovery, IPv4 and IPv6 fragments, TCP and UDP to the node's own address), built from
 * the input; fuzz_node.c's top comment describes the records. */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "netif/wire/wire.h"
#include "server/internal.h"
#include "tests/fuzz/fuzz_node.h"
#include "tests/fuzz/fuzz_srv.h"
#include "tests/unit/faketap.h"

uint8_t frame_buf[FAKETAP_FRAME_MAX + 2048];

static size_t eth(uint8_t *f, const uint8_t *dst, uint16_t type)
{
	wire_eth_write(f, dst, peer_mac, type);
	return WIRE_ETH_HLEN;
}

static const uint8_t bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

static uint32_t pick4(uint8_t sel)
{
	switch (sel & 3) {
	case 0: case 1: return srv.ip;
	case 2: return srv.ip | htonl(0xffu);   /* the subnet's broadcast */
	default: return OTHER4;
	}
}

/* An IPv4 header at ip (20 octets, checksum right unless bad). */
static void ipv4(uint8_t *ip, uint8_t proto, uint32_t src, uint32_t dst, size_t l4len,
		 uint16_t id, uint16_t frag, bool bad)
{
	wire_ipv4_write(ip, proto, src, dst, (uint16_t)(20 + l4len), id, 64);
	wire_wr16(ip + 6, frag);
	ip[10] = ip[11] = 0;
	wire_wr16(ip + 10, wire_sum_finish(wire_sum(0, ip, 20)));
	if (bad)
		ip[10] ^= 0x40;
}

static const uint8_t *pick6(uint8_t sel, uint8_t mac[6])
{
	static uint8_t a[16];
	static const uint8_t allnodes[16] = { 0xff, 0x02, [15] = 1 };

	switch (sel & 7) {
	case 0: case 1: case 2: memcpy(a, srv.ip6, 16); break;
	case 3: memcpy(a, srv.ip6_ll, 16); break;
	case 4: memcpy(a, allnodes, 16); break;
	case 5: wire_ipv6_solicited_node(a, srv.ip6); break;
	case 6: wire_ipv6_solicited_node(a, srv.ip6_ll); break;
	default: memcpy(a, other6, 16); break;
	}
	if (a[0] == 0xff)
		wire_ipv6_mcast_mac(mac, a);
	else
		memcpy(mac, srv.mac, 6);
	return a;
}

static const uint8_t *src6(uint8_t sel)
{
	static const uint8_t unspec[16];

	switch (sel & 3) {
	case 0: case 1: return peer6;
	case 2: return peer_ll6;
	default: return unspec;
	}
}

/* The upper layer's checksum (RFC 8200 §8.1) of the l4len octets at l4, field at off. */
static void csum6(const uint8_t *ip, uint8_t *l4, uint8_t proto, size_t l4len, size_t off)
{
	l4[off] = l4[off + 1] = 0;
	uint32_t s = wire_sum_pseudo6(0, ip + 8, ip + 24, proto, (uint32_t)l4len);
	wire_wr16(l4 + off, wire_sum_finish(wire_sum(s, l4, l4len)));
}

/* rec_tcp's and rec_udp's IPv6 header at ip, to pick6(b >> 3) from src6(b >> 6), for
 * the l4len octets at l4; the frame's destination MAC to go with it, the transport
 * checksum (field at off) filled in. */
static void ip6_to_pick(uint8_t *f, uint8_t *ip, uint8_t b, uint8_t proto, uint8_t *l4,
			size_t l4len, size_t off)
{
	uint8_t mac[6];
	const uint8_t *dst = pick6(b >> 3, mac);

	memcpy(f, mac, 6);
	wire_ipv6_write(ip, proto, src6(b >> 6), dst, (uint16_t)l4len, 64);
	csum6(ip, l4, proto, l4len, off);
}

/* Their IPv4 destination, pick4(b >> 3); a frame to another address than the node's is
 * broadcast. */
static uint32_t dst4_to_pick(uint8_t *f, uint8_t b)
{
	uint32_t dst = pick4(b >> 3);

	if (dst != srv.ip)
		memcpy(f, bcast, 6);
	return dst;
}

void rec_arp(struct input *in)
{
	uint8_t b = u8(in);
	uint8_t *f = frame_buf;
	size_t n = eth(f, (b & 8) ? srv.mac : bcast, WIRE_ETHERTYPE_ARP);
	uint8_t *a = f + n;
	wire_wr16(a, 1);
	wire_wr16(a + 2, WIRE_ETHERTYPE_IPV4);
	a[4] = 6;
	a[5] = 4;
	wire_wr16(a + 6, (b & 3) == 3 ? u16(in) : (b & 3) ? (uint16_t)(b & 3) : 1);
	memcpy(a + 8, peer_mac, 6);
	wire_wraddr(a + 14, (b & 0x10) ? u32(in) : PEER4);
	memset(a + 18, 0, 6);
	wire_wraddr(a + 24, (b & 4) ? OTHER4 : srv.ip);
	if (b & 0x80)  /* a malformed one: hardware or protocol lengths of the input's */
		a[(b >> 5) & 3] = u8(in);
	frame(f, n + 28 + (b & 0x40 ? 18 : 0));
}

void rec_echo4(struct input *in)
{
	uint8_t b = u8(in);
	size_t dlen = u16(in) & 0x7ff;
	uint8_t *f = frame_buf;
	uint32_t dst = pick4(b);
	size_t n = eth(f, dst == srv.ip || (b & 4) ? srv.mac : bcast, WIRE_ETHERTYPE_IPV4);
	uint8_t *ip = f + n, *ic = ip + 20;
	if (dlen > FAKETAP_FRAME_MAX - 14 - 28)
		dlen = FAKETAP_FRAME_MAX - 14 - 28;
	ic[0] = (b & 0x80) ? u8(in) : WIRE_ICMP_ECHO;
	ic[1] = (b & 0x40) ? u8(in) : 0;
	fill(in, ic + 4, 4 + dlen, 4 + 16);
	ic[2] = ic[3] = 0;
	wire_wr16(ic + 2, wire_sum_finish(wire_sum(0, ic, 8 + dlen)));
	if (b & 0x20)
		ic[2] ^= 1;
	ipv4(ip, WIRE_IPPROTO_ICMP, (b & 0x10) ? OTHER4 : PEER4, dst, 8 + dlen, 1, 0, b & 8);
	frame(f, n + 28 + dlen);
}

void rec_echo6(struct input *in)
{
	uint8_t b = u8(in);
	size_t dlen = u16(in) & 0x7ff;
	uint8_t *f = frame_buf, mac[6];
	const uint8_t *dst = pick6(b, mac);
	size_t n = eth(f, mac, WIRE_ETHERTYPE_IPV6);
	uint8_t *ip = f + n, *ic = ip + 40;
	if (dlen > FAKETAP_FRAME_MAX - 14 - 48)
		dlen = FAKETAP_FRAME_MAX - 14 - 48;
	ic[0] = (b & 0x80) ? u8(in) : 128;
	ic[1] = (b & 0x40) ? u8(in) : 0;
	fill(in, ic + 4, 4 + dlen, 4 + 16);
	wire_ipv6_write(ip, WIRE_IPPROTO_ICMPV6, src6(b >> 3), dst, (uint16_t)(8 + dlen),
			(b & 0x20) ? u8(in) : 64);
	csum6(ip, ic, WIRE_IPPROTO_ICMPV6, 8 + dlen, 2);
	if ((b & 0x60) == 0x60)
		ic[2] ^= 1;
	frame(f, n + 48 + dlen);
}

void rec_nd(struct input *in)
{
	static const uint8_t types[] = { 135, 136, 135, 136, 133, 134, 137 };
	uint8_t sel = u8(in), ctl = u8(in);
	uint8_t *f = frame_buf, mac[6];
	const uint8_t *dst = pick6(ctl, mac);
	size_t n = eth(f, mac, WIRE_ETHERTYPE_IPV6);
	uint8_t *ip = f + n, *m = ip + 40;
	size_t len;

	memset(m, 0, 40);
	m[0] = (sel & 0x80) ? u8(in) : types[sel % sizeof(types)];
	m[1] = (sel & 0x40) ? u8(in) : 0;
	m[4] = u8(in);  /* NA's flags, RA's hop limit */
	if (m[0] == 135 || m[0] == 136) {
		uint8_t t = u8(in);
		const uint8_t *tgt = (t & 3) < 2 ? srv.ip6 : (t & 3) == 2 ? srv.ip6_ll : peer6;
		memcpy(m + 8, tgt, 16);
		len = 24;
	} else if (m[0] == 137) {
		memcpy(m + 8, peer6, 16);
		memcpy(m + 24, other6, 16);
		len = 40;
	} else {
		fill(in, m + 5, 11, 11);
		len = m[0] == 134 ? 16 : 8;
	}
	/* Options: up to three, a type, a length octet (the right one or the input's, 0 and
	 * lengths past the message included) and a body. */
	static const uint8_t kinds[] = { 1, 2, 1, 2, 5, 3, 14 };
	for (unsigned i = 0; i < ((ctl >> 5) & 3); i++) {
		uint8_t k = u8(in);
		uint8_t *o = m + len;
		uint8_t type = (k & 0x80) ? u8(in) : kinds[k % sizeof(kinds)];
		size_t units = type == 3 ? 4 : 1;
		uint8_t lf = (k & 0x40) ? u8(in) : (uint8_t)units;
		if (k & 0x40)
			units = (lf & 7) ? (lf & 7) : 1;
		o[0] = type;
		o[1] = lf;
		if ((type == 1 || type == 2) && !(k & 0x20))
			memcpy(o + 2, peer_mac, 6), memset(o + 8, 0, units * 8 - 8);
		else
			fill(in, o + 2, units * 8 - 2, units * 8 - 2);
		len += units * 8;
	}
	if (ctl & 0x80) {  /* octets after the options that are no option */
		size_t extra = u8(in) & 7;
		fill(in, m + len, extra, extra);
		len += extra;
	}
	wire_ipv6_write(ip, WIRE_IPPROTO_ICMPV6, src6(ctl >> 3), dst, (uint16_t)len,
			(sel & 0x20) ? u8(in) : 255);
	csum6(ip, m, WIRE_IPPROTO_ICMPV6, len, 2);
	frame(f, n + 40 + len);
}

/* The first octets of a transport header for the fragments' datagram: to a closed port,
 * to the connection in custody, or an echo request. */
static size_t l4_header(uint8_t *l4, uint8_t proto, uint16_t dport, size_t total)
{
	switch (proto) {
	case WIRE_IPPROTO_TCP:
		wire_tcp_write(l4, CUSTODY_RPORT, dport, 1, 1, WIRE_TCP_ACK, 1024);
		return 20;
	case WIRE_IPPROTO_UDP:
		wire_wr16(l4, 4000);
		wire_wr16(l4 + 2, dport);
		wire_wr16(l4 + 4, (uint16_t)total);
		l4[6] = l4[7] = 0;
		return 8;
	case WIRE_IPPROTO_ICMP:
	case WIRE_IPPROTO_ICMPV6:
		memset(l4, 0, 8);
		l4[0] = proto == WIRE_IPPROTO_ICMP ? WIRE_ICMP_ECHO : 128;
		return 8;
	default:
		return 0;
	}
}

/* A datagram cut into fragments, IPv4 or IPv6. ctl: bit 0 IPv6, bits 1-2 the protocol,
 * 3 reverse order, 4 the last fragment says more follow, 5 fragments left out (skip),
 * 6 IPv6: a Hop-by-Hop header before the Fragment header; IPv4: from another host,
 * 7 the first fragment at an offset of the input's (up to past 65,535). */
void rec_frag(struct input *in)
{
	static uint8_t pl[0x4000 + 64];
	uint8_t ctl = u8(in);
	bool v6 = ctl & 1;
	static const uint8_t protos[2][4] = {
		{ WIRE_IPPROTO_TCP, WIRE_IPPROTO_UDP, WIRE_IPPROTO_ICMP, 47 },
		{ WIRE_IPPROTO_TCP, WIRE_IPPROTO_UDP, WIRE_IPPROTO_ICMPV6, 59 },
	};
	uint8_t proto = protos[v6][(ctl >> 1) & 3];
	uint8_t fs = u8(in);
	/* IPv6 fragments other than the last must be multiples of 8 octets (RFC 8200 §4.5):
	 * with fs's top bit, they are not. */
	size_t fsz = (fs & 0x80) ? (size_t)(fs & 0x7f) + 1 : ((size_t)(fs & 0x3f) + 1) * 8;
	size_t dlen = u16(in) & 0x3fff;
	size_t base = (ctl & 0x80) ? (size_t)(u16(in) & 0x1fff) * 8 : 0;
	uint32_t skip = (ctl & 0x20) ? u32(in) : 0;
	uint8_t dup = u8(in);
	uint32_t id = u8(in);
	uint16_t dport = (dup & 0x20) ? CUSTODY_LPORT : 9;

	size_t hl = l4_header(pl, proto, dport, dlen);
	if (dlen < hl)
		dlen = hl;
	fill(in, pl + hl, dlen - hl, 16);
	size_t nfrag = (dlen + fsz - 1) / fsz;
	if (nfrag > 48)
		nfrag = 48;
	for (size_t k = 0; k < nfrag; k++) {
		size_t i = (ctl & 8) ? nfrag - 1 - k : k;
		if (i < 32 && (skip >> i & 1))
			continue;
		size_t off = i * fsz;
		if ((dup & 0x80) && i == (dup & 0x1f) && off >= 8)
			off -= 8;  /* overlaps the fragment before */
		size_t n = dlen - off < fsz ? dlen - off : fsz;
		bool more = off + n < dlen || (ctl & 0x10);
		size_t at = base + off;
		if (at > 0xfff8)
			break;  /* the offset field cannot say it */
		uint8_t *f = frame_buf, mac[6];
		size_t h;
		if (v6) {
			h = eth(f, srv.mac, WIRE_ETHERTYPE_IPV6);
			uint8_t *ip = f + h, *x = ip + 40;
			size_t ext = 0;
			uint8_t first = 44;
			if (ctl & 0x40) {  /* Hop-by-Hop with a PadN option */
				memset(x, 0, 8);
				x[0] = 44;
				x[2] = 1;
				x[3] = 4;
				first = 0;
				ext = 8;
			}
			uint8_t *fh = x + ext;
			fh[0] = proto;
			fh[1] = 0;
			wire_wr16(fh + 2, (uint16_t)((at & 0xfff8) | more));
			wire_wr32(fh + 4, id);
			memcpy(fh + 8, pl + off, n);
			(void)pick6(0, mac);
			wire_ipv6_write(ip, first, peer6, srv.ip6, (uint16_t)(ext + 8 + n), 64);
			h += 40 + ext + 8 + n;
		} else {
			h = eth(f, srv.mac, WIRE_ETHERTYPE_IPV4);
			uint8_t *ip = f + h;
			memcpy(ip + 20, pl + off, n);
			ipv4(ip, proto, (ctl & 0x40) ? OTHER4 : PEER4, srv.ip, n, (uint16_t)id,
			     (uint16_t)((at >> 3) | (more ? 0x2000 : 0)), false);
			h += 20 + n;
		}
		frame(f, h);
		if ((dup & 0x40) && i == (dup & 0x1f))
			frame(f, h);  /* the same fragment again */
	}
}

/* A TCP segment to a closed port or to the connection in custody (b bit 1), either
 * family (bit 0). */
void rec_tcp(struct input *in)
{
	uint8_t b = u8(in);
	bool v6 = b & 1;
	uint16_t dport = (b & 2) ? CUSTODY_LPORT : u16(in);
	uint8_t flags = u8(in);
	uint32_t seq = u32(in), ack = u32(in);
	size_t dlen = u8(in);
	uint8_t *f = frame_buf;
	size_t h = eth(f, srv.mac, v6 ? WIRE_ETHERTYPE_IPV6 : WIRE_ETHERTYPE_IPV4);
	uint8_t *ip = f + h, *t = ip + (v6 ? 40 : 20);

	wire_tcp_write(t, CUSTODY_RPORT, dport, seq, ack, flags, 1024);
	fill(in, t + 20, dlen, 8);
	if (v6) {
		ip6_to_pick(f, ip, b, WIRE_IPPROTO_TCP, t, 20 + dlen, 16);
	} else {
		uint32_t dst = dst4_to_pick(f, b);
		ipv4(ip, WIRE_IPPROTO_TCP, (b & 0x40) ? OTHER4 : PEER4, dst, 20 + dlen, 2, 0x4000,
		     false);
		uint32_t s = wire_sum_pseudo4(0, wire_rdaddr(ip + 12), dst, WIRE_IPPROTO_TCP,
					      (uint16_t)(20 + dlen));
		wire_wr16(t + 16, wire_sum_finish(wire_sum(s, t, 20 + dlen)));
	}
	if (b & 4)
		t[16] ^= 0x10;  /* a wrong checksum */
	h += (v6 ? 40 : 20) + 20 + dlen;
	frame(f, h);
}

/* A UDP datagram to a port of the input's (closed: no process here), either family. */
void rec_udp(struct input *in)
{
	uint8_t b = u8(in);
	bool v6 = b & 1;
	uint16_t dport = u16(in);
	size_t dlen = u16(in) & 0x7ff;
	uint8_t *f = frame_buf;
	size_t h = eth(f, srv.mac, v6 ? WIRE_ETHERTYPE_IPV6 : WIRE_ETHERTYPE_IPV4);
	uint8_t *ip = f + h, *u = ip + (v6 ? 40 : 20);

	if (dlen > FAKETAP_FRAME_MAX - 14 - 48)
		dlen = FAKETAP_FRAME_MAX - 14 - 48;
	wire_wr16(u, 4000);
	wire_wr16(u + 2, dport);
	wire_wr16(u + 4, (b & 2) ? u16(in) : (uint16_t)(8 + dlen));
	fill(in, u + 8, dlen, 8);
	if (v6) {
		ip6_to_pick(f, ip, b, WIRE_IPPROTO_UDP, u, 8 + dlen, 6);
		if (b & 4)
			u[6] = u[7] = 0;  /* none: invalid in IPv6 (RFC 8200 §8.1) */
	} else {
		ipv4(ip, WIRE_IPPROTO_UDP, PEER4, dst4_to_pick(f, b), 8 + dlen, 3, 0, false);
		u[6] = u[7] = 0;  /* no checksum: allowed in IPv4 */
	}
	h += (v6 ? 40 : 20) + 8 + dlen;
	frame(f, h);
}

