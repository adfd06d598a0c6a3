/* The peer of tests/fuzz/fuzz_stack.c: the frames it sends the node (Ethernet, ARP or
 * neighbour discovery, IPv4 or IPv6, TCP with the connection's numbers) and the records of
 * an input that send them (SEG, RAW, ICMP, and for IPv6 FRAG and ND); fuzz_stack.c's top
 * comment describes the records. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "stack/internal.h"

#include "lwip/etharp.h"
#include "lwip/nd6.h"
#include "lwip/priv/tcp_priv.h"
#include <netif/ethernet.h>
#include "netif/chksum.h"
#include "netif/vnet.h"
#include "netif/wire/wire.h"
#include "tests/fuzz/fuzz_stack.h"

void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

static uint8_t rx_buf[FRAME_MAX];

/* The Internet checksum of data[0, len) (whose checksum field is zero, or holds the
 * pseudo-header sum), stored at field. */
static void store_csum(uint8_t *field, const void *data, int len)
{
	uint16_t c = (uint16_t)~nif_inet_chksum(data, len);

	memcpy(field, &c, 2);
}

static void eth_header(uint8_t *f, const uint8_t *dst_mac, uint16_t type)
{
	memcpy(f, dst_mac, 6);
	memcpy(f + 6, peer_mac, 6);
	put16(f + 12, type);
}

/* An IPv6 header (RFC 8200 §3) from src to dst, with the hop limit ND requires (255). */
static void ipv6_header(uint8_t *ip, uint8_t next, const uint8_t *src, const uint8_t *dst,
			size_t plen)
{
	wire_ipv6_write(ip, next, src, dst, (uint16_t)plen, 255);
}

/* The upper-layer checksum of an IPv6 packet (RFC 8200 §8.1) whose upper-layer header
 * starts hlen octets into it: l4len octets, the field csum_off into them. */
static void csum6(uint8_t *ip, size_t hlen, uint8_t proto, size_t l4len, size_t csum_off)
{
	uint8_t *l4 = ip + hlen;
	l4[csum_off] = l4[csum_off + 1] = 0;
	uint32_t sum = wire_sum_pseudo6(0, ip + 8, ip + 24, proto, (uint32_t)l4len);
	put16(l4 + csum_off, wire_sum_finish(wire_sum(sum, l4, l4len)));
}

static size_t eth_ipv4(uint8_t *f, uint8_t proto, size_t l4len, uint16_t frag)
{
	memcpy(f, node_mac, 6);
	memcpy(f + 6, peer_mac, 6);
	f[12] = 0x08;
	f[13] = 0x00;
	uint8_t *ip = f + 14;
	memset(ip, 0, 20);
	ip[0] = 0x45;
	put16(ip + 2, (uint16_t)(20 + l4len));
	put16(ip + 6, frag);
	ip[8] = 64;
	ip[9] = proto;
	put32(ip + 12, PEER_IP);
	put32(ip + 16, NODE_IP);
	store_csum(ip + 10, ip, 20);
	return 14 + 20 + l4len;
}

/* The frame header and network-layer header of a packet from the peer to the node: IPv4
 * (with frag as flags and offset), or IPv6 between the global addresses. */
static size_t eth_ip(uint8_t *f, uint8_t proto, size_t l4len, uint16_t frag)
{
#if FUZZ_IPV6
	(void)frag;
	eth_header(f, node_mac, 0x86dd);
	ipv6_header(f + 14, proto, peer_ip6, node_ip6, l4len);
	return 14 + 40 + l4len;
#else
	return eth_ipv4(f, proto, l4len, frag);
#endif
}

static void deliver(const uint8_t *f, size_t len, uint32_t off)
{
	stk__ethif_input(&stk__node.netif, f, len, off);
}

static void tcp_checksum(uint8_t *ip, size_t l4len)
{
	/* The pseudo-header (RFC 9293 §3.1, RFC 8200 §8.1) goes in the checksum field first,
	 * as a sender with a partial checksum leaves it; summing the segment completes it. */
	nif_vnet_pseudo_csum(ip, IPH, 16);
	store_csum(ip + IPH + 16, ip + IPH, (int)l4len);
}

/* A TCP segment from the peer. opts (optlen, a multiple of 4 after padding) go as given;
 * from port sport to dport (send_tcp: the connection's). */
void send_tcp_ports(uint16_t sport, uint16_t dport, uint32_t seq, uint32_t ack,
			   uint8_t flags, uint16_t wnd, const uint8_t *opts, size_t optlen,
			   const uint8_t *data, size_t dlen, bool bad_csum, const uint8_t *vnet)
{
	size_t thl = 20 + ((optlen + 3) & ~(size_t)3);
	if (14 + IPH + thl + dlen > sizeof(rx_buf) || IPH + thl + dlen > 0xffff)
		return;
	uint8_t *f = rx_buf;
	uint8_t *th = f + 14 + IPH;
	memset(th, 0, thl);
	put16(th, sport);
	put16(th + 2, dport);
	put32(th + 4, seq);
	put32(th + 8, ack);
	th[12] = (uint8_t)((thl / 4) << 4);
	th[13] = flags;
	put16(th + 14, wnd);
	if (optlen)
		memcpy(th + 20, opts, optlen);
	if (dlen)
		memcpy(th + thl, data, dlen);
	size_t len = eth_ip(f, IPPROTO_TCP, thl + dlen, 0x4000);
	tcp_checksum(f + 14, thl + dlen);
	if (bad_csum)
		th[16] ^= 0x5a;
	uint32_t off = 0;
	if (FUZZ_OFFLOAD && vnet && nif_vnet_parse(vnet, NIF_VNET_HLEN, f, len, &off) < 0)
		return;  /* the device drops it (and counts) */
	deliver(f, len, off);
}

static void send_tcp(uint32_t seq, uint32_t ack, uint8_t flags, uint16_t wnd, const uint8_t *opts,
		     size_t optlen, const uint8_t *data, size_t dlen, bool bad_csum,
		     const uint8_t *vnet)
{
	send_tcp_ports(peer.port, ECHO_PORT, seq, ack, flags, wnd, opts, optlen, data, dlen,
		       bad_csum, vnet);
}

static size_t ts_option(uint8_t *o)
{
	o[0] = 1;
	o[1] = 1;
	o[2] = 8;
	o[3] = 10;
	put32(o + 4, ++peer.tsval);
	put32(o + 8, peer.node_tsval);
	return 12;
}

/* BURST (see fuzz_stack.h): n one-octet out-of-order segments, every other octet of the
 * window from RCV.NXT + 1 (distinct, none overlapping), in the order `order` says; a walk of
 * ooseq may cost what it likes, but the queue must stay within TCP_OOSEQ_MAX_SEGS (lwIP
 * patch 0128) and, once the holes are filled, the stream must reach exactly the last octet
 * kept. */
struct burst_stats burst_stats;

void rec_burst(unsigned order, uint16_t v, bool ts)
{
	static uint16_t idx[BURST_MAX];
	unsigned n = BURST_MIN + BURST_STEP * (v & 0x1f);
	uint32_t x = (uint32_t)(v >> 8) * 2654435761u | 1, base;
	uint8_t opts[12], octet;
	size_t optlen;
	unsigned kept = 0;

	if (!conn || conn->state != ESTABLISHED || conn->ooseq != NULL ||
	    conn->rcv_wnd < 2 * n + 2)
		return;
	base = conn->rcv_nxt;
	for (unsigned i = 0; i < n; i++)
		idx[i] = (uint16_t)(order == 1 ? n - 1 - i : i);
	if (order >= 2) {
		for (unsigned i = n - 1; i > 0; i--) {  /* Fisher-Yates, xorshift32 */
			x ^= x << 13;
			x ^= x >> 17;
			x ^= x << 5;
			unsigned j = x % (i + 1);
			uint16_t t = idx[i];
			idx[i] = idx[j];
			idx[j] = t;
		}
	}
	for (unsigned i = 0; i < n && conn; i++) {
		optlen = ts ? ts_option(opts) : 0;
		octet = (uint8_t)idx[i];
		send_tcp(base + 1 + 2u * idx[i], peer.snd_nxt, 0x10, 65535, opts, optlen, &octet, 1,
			 false, NULL);
	}
	burst_stats.bursts++;
	if (!conn || conn->state != ESTABLISHED || conn->rcv_nxt != base)
		return;
	for (struct tcp_seg *s = conn->ooseq; s; s = s->next)
		kept++;
	CHECK(kept <= TCP_OOSEQ_MAX_SEGS);
	CHECK(kept == TCP_OOSEQ_MAX_SEGS);  /* n is past it: the limit path ran */
	burst_stats.limit_reached++;
	if (order != 3)
		return;
	/* Fill the holes in order: what was kept joins the stream, up to the first octet that
	 * the bound dropped. */
	for (unsigned j = 0; j < n && conn; j++) {
		optlen = ts ? ts_option(opts) : 0;
		octet = (uint8_t)j;
		send_tcp(base + 2u * j, peer.snd_nxt, 0x10, 65535, opts, optlen, &octet, 1, false,
			 NULL);
	}
	if (!conn)
		return;
	CHECK(conn->rcv_nxt - base == 2u * TCP_OOSEQ_MAX_SEGS + 1);
	peer.rcv_nxt = conn->rcv_nxt;
	burst_stats.filled++;
}

#if !FUZZ_IPV6
void arp_request(void)
{
	uint8_t *f = rx_buf;

	memset(f, 0xff, 6);
	memcpy(f + 6, peer_mac, 6);
	f[12] = 0x08;
	f[13] = 0x06;
	uint8_t *a = f + 14;
	put16(a, 1);
	put16(a + 2, 0x0800);
	a[4] = 6;
	a[5] = 4;
	put16(a + 6, 1);
	memcpy(a + 8, peer_mac, 6);
	put32(a + 14, PEER_IP);
	memset(a + 18, 0, 6);
	put32(a + 24, NODE_IP);
	deliver(f, 14 + 28, 0);
}
#endif

/* The scripted three-way handshake; the first input byte picks the SYN's options. */
bool handshake(uint8_t how)
{
	static uint16_t next_port = 1024;
	uint8_t opts[40];
	size_t n = 0;

	peer.port = next_port;
	next_port = next_port >= 60000 ? 1024 : next_port + 1;
	peer.synack_seen = false;
	peer.node_tsval = 0;
	conn = NULL;
	uint32_t iss = 0x10000000u * (how >> 5) + 12345;
	opts[n++] = 2; opts[n++] = 4; put16(opts + n, (how & 1) ? 536 : 1460); n += 2;
	if (how & 2) { opts[n++] = 1; opts[n++] = 3; opts[n++] = 3; opts[n++] = (how & 16) ? 14 : 7; }
	if (how & 4) { opts[n++] = 1; opts[n++] = 1; opts[n++] = 4; opts[n++] = 2; }
	if (how & 8) n += ts_option(opts + n);
	send_tcp(iss, 0, 0x02, 65535, opts, n, NULL, 0, false, NULL);
	if (!peer.synack_seen)
		return false;
	peer.rcv_nxt = iss + 1;
	n = (how & 8) ? ts_option(opts) : 0;
	send_tcp(peer.rcv_nxt, peer.snd_nxt, 0x10, 1024, opts, n, NULL, 0, false, NULL);
	return conn != NULL;
}

/* ---- the records ---- */


void rec_seg(struct input *in, bool ts)
{
	uint8_t flags = u8(in);
	int16_t dseq = (int16_t)u16(in);
	int16_t dack = (int16_t)u16(in);
	uint16_t wnd = u16(in);
	uint8_t ctl = u8(in);
	uint8_t opts[40];
	size_t optlen = take(in, opts, ctl & 0x1f);
	size_t dlen = u16(in) & ((ctl & 0x80) ? 0xffff : 0x7ff);
	uint8_t vnet[NIF_VNET_HLEN] = { 0 };
	if (FUZZ_OFFLOAD && (ctl & 0x40))
		take(in, vnet, sizeof(vnet));
	static uint8_t data[0x10000];
	size_t got = take(in, data, dlen < 64 ? dlen : 64);
	for (size_t i = got; i < dlen; i++)  /* the rest: a pattern, cheap for the fuzzer */
		data[i] = (uint8_t)(i * 7 + got);
	if (ts && optlen <= 28)
		optlen += ts_option(opts + optlen);
	uint32_t seq = peer.rcv_nxt + (uint32_t)(int32_t)dseq;
	send_tcp(seq, peer.snd_nxt + (uint32_t)(int32_t)dack, flags, wnd, opts, optlen, data, dlen,
		 ctl & 0x20, vnet);
	if (dseq == 0 && !(ctl & 0x20))
		peer.rcv_nxt += (uint32_t)dlen + ((flags & 0x01) ? 1 : 0);
}

#if FUZZ_IPV6
/* ---- IPv6 records ---- */

/* Addresses an input may pick for a packet's destination (the node's own, the all-nodes
 * group, its solicited-node group, another host) and source. */
static const uint8_t *pick_dst6(uint8_t sel, uint8_t *mac)
{
	static uint8_t snm[16], allnodes[16] = { 0xff, 0x02, [15] = 1 };
	static const uint8_t other[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 9 };
	const uint8_t *a;

	switch (sel & 7) {
	case 0: case 1: case 2: a = node_ip6; break;
	case 3: a = node_ll6; break;
	case 4: a = allnodes; break;
	case 5: wire_ipv6_solicited_node(snm, node_ip6); a = snm; break;
	case 6: wire_ipv6_solicited_node(snm, node_ll6); a = snm; break;
	default: a = other; break;
	}
	if (a[0] == 0xff)
		wire_ipv6_mcast_mac(mac, a);
	else
		memcpy(mac, node_mac, 6);
	return a;
}

static const uint8_t *pick_src6(uint8_t sel)
{
	static const uint8_t unspec[16];

	switch (sel & 3) {
	case 0: case 1: return peer_ip6;
	case 2: return peer_ll6;
	default: return unspec;
	}
}

/* The peer introduces itself (RFC 4861 §7.2.3): a neighbour solicitation for the node's
 * address with the peer's link-layer address, as ARP's request does for IPv4. */
void introduce(void)
{
	uint8_t *f = rx_buf, mac[6], *ip = f + 14, *ns = ip + 40;
	const uint8_t *dst = pick_dst6(5, mac);

	eth_header(f, mac, 0x86dd);
	memset(ns, 0, 32);
	ns[0] = 135;
	memcpy(ns + 8, node_ip6, 16);
	ns[24] = 1;  /* Source Link-Layer Address, one unit of 8 octets */
	ns[25] = 1;
	memcpy(ns + 26, peer_mac, 6);
	ipv6_header(ip, 58, peer_ip6, dst, 32);
	csum6(ip, 40, 58, 32, 2);
	deliver(f, 14 + 40 + 32, 0);
}

/* Build a chain of extension headers (RFC 8200 §4) at p from the input: up to four of
 * Hop-by-Hop, Routing, Destination Options, Fragment and others, each of the length the
 * input gives; *first gets the first one's number. Returns the octets written. */
static size_t ext_chain(struct input *in, uint8_t *p, size_t room, unsigned n, uint8_t *first,
			uint8_t last)
{
	static const uint8_t kinds[] = { 0, 43, 60, 44, 0, 60, 51, 135, 139, 140, 253, 59 };
	size_t len = 0;
	uint8_t *prev_next = first;

	for (unsigned i = 0; i < n; i++) {
		uint8_t k = u8(in);
		uint8_t type = (k & 0x80) ? u8(in) : kinds[k % sizeof(kinds)];
		uint8_t units = u8(in);
		size_t hl = type == 44 ? 8 : ((size_t)(units & 3) + 1) * 8;
		if (len + hl > room)
			break;
		uint8_t *h = p + len;
		memset(h, 0, hl);
		take(in, h + 1, hl - 1);
		if (type != 44)
			h[1] = (units & 0x80) ? units : (uint8_t)(hl / 8 - 1);
		*prev_next = type;
		prev_next = h;
		len += hl;
	}
	*prev_next = last;
	return len;
}

void rec_raw(struct input *in)
{
	uint8_t ctl = u8(in);
	size_t len = u16(in) & 0x7ff;
	uint8_t *f = rx_buf, mac[6], *ip = f + 14;

	if (!(ctl & 1)) {  /* the input's octets as the packet, header and all */
		size_t got = take(in, ip, len < 40 ? 40 : len);
		if (got < 40)
			return;
		eth_header(f, node_mac, 0x86dd);
		if (ctl & 2)  /* a payload length that fits */
			put16(ip + 4, (uint16_t)(got - 40));
		deliver(f, 14 + got, 0);
		return;
	}
	/* A header, an extension-header chain and an upper-layer payload from the input. */
	static const uint8_t uppers[] = { 6, 17, 58, 59, 6, 58 };
	uint8_t up = u8(in);
	uint8_t last = (up & 0x80) ? u8(in) : uppers[up % sizeof(uppers)];
	const uint8_t *dst = pick_dst6(ctl >> 2, mac);
	const uint8_t *src = pick_src6(ctl >> 5);
	uint8_t first;
	unsigned next = (ctl & 0x80) ? ((ctl >> 3) & 3) + 1u : 0;  /* how many headers */
	size_t ext = ext_chain(in, ip + 40, 256, next, &first, last);
	size_t got = take(in, ip + 40 + ext, len);
	if (last == 6 && got >= 20) {  /* a segment to the connection's port, or a closed one */
		if (up & 0x40) {
			put16(ip + 40 + ext, peer.port);
			put16(ip + 40 + ext + 2, ECHO_PORT);
		}
	} else if (last == 17 && got >= 8) {
		put16(ip + 40 + ext + 2, ECHO_PORT);
		put16(ip + 40 + ext + 4, (uint16_t)got);
	}
	eth_header(f, mac, 0x86dd);
	ipv6_header(ip, first, src, dst, ext + got);
	if (ctl & 2) {  /* the upper layer's checksum right */
		size_t off = last == 6 ? 16 : last == 17 ? 6 : last == 58 ? 2 : 0;
		if ((last == 6 || last == 17 || last == 58) && got >= off + 2)
			csum6(ip, 40 + ext, last, got, off);
	}
	deliver(f, 14 + 40 + ext + got, 0);
}

/* An ICMPv6 error (RFC 4443 §3) quoting the node's last segment, from the peer or from a
 * router on the path: unreachable, Packet Too Big with any MTU, time exceeded, parameter
 * problem, or a type of the input's. */
void rec_icmp(struct input *in)
{
	uint8_t type = u8(in);
	uint8_t code = u8(in);
	uint32_t word = (uint32_t)u16(in) << 16;
	word |= u16(in);
	int16_t dseq = (int16_t)u16(in);
	uint8_t *f = rx_buf, *ip = f + 14, *icmp = ip + 40;
	static const uint8_t types[] = { 1, 2, 2, 2, 3, 4 };
	icmp[0] = (type & 0x80) ? type : types[type % sizeof(types)];
	icmp[1] = code;
	if (icmp[0] == 2 && !(type & 0x40))
		word &= 0xffff;  /* mostly MTUs a router could name */
	put32(icmp + 4, word);
	/* The quote: the node's IPv6 header and its TCP header, whole or the first 8 octets. */
	size_t tl = (type & 0x20) ? (size_t)(peer.last_tcp[12] >> 4) * 4 : 8;
	if (tl < 8 || tl > sizeof(peer.last_tcp))
		tl = 8;
	memcpy(icmp + 8, peer.last_ip, 40);
	memcpy(icmp + 48, peer.last_tcp, tl);
	put32(icmp + 48 + 4, peer.snd_nxt - 1 + (uint32_t)(int32_t)dseq);
	size_t l4len = 8 + 40 + tl;
	eth_header(f, node_mac, 0x86dd);
	ipv6_header(ip, 58, (type & 0x10) ? router_ip6 : peer_ip6, node_ip6, l4len);
	csum6(ip, 40, 58, l4len, 2);
	deliver(f, 14 + 40 + l4len, 0);
}

/* A packet from the peer cut into fragments (RFC 8200 §4.5): a TCP segment on the
 * connection (its data continues the peer's stream when dseq is 0) or a UDP datagram to
 * the echo. The input says the fragment size, which fragments go, which go twice or
 * overlap, and the order. */
void rec_frag(struct input *in)
{
	uint8_t ctl = u8(in);
	size_t fsz = ((size_t)(u8(in) & 0x3f) + 1) * 8;
	size_t dlen = u16(in) & 0x1fff;
	int16_t dseq = (int16_t)u16(in);
	uint32_t skip = (uint32_t)u16(in) << 16;
	skip |= u16(in);
	uint8_t dup = u8(in);
	uint32_t id = 0x1000u + u8(in);
	static uint8_t pkt[14 + 40 + 60 + 0x2000];
	uint8_t *ip = pkt + 14, *l4 = ip + 40;
	bool tcp = !(ctl & 1);
	size_t hl = tcp ? 20 : 8;

	memset(l4, 0, hl);
	size_t got = take(in, l4 + hl, dlen < 32 ? dlen : 32);
	for (size_t i = got; i < dlen; i++)
		l4[hl + i] = (uint8_t)(i * 13 + got);
	if (tcp) {
		put16(l4, peer.port);
		put16(l4 + 2, ECHO_PORT);
		put32(l4 + 4, peer.rcv_nxt + (uint32_t)(int32_t)dseq);
		put32(l4 + 8, peer.snd_nxt);
		l4[12] = 5 << 4;
		l4[13] = 0x18;
		put16(l4 + 14, 8192);
	} else {
		put16(l4, 4000);
		put16(l4 + 2, ECHO_PORT);
		put16(l4 + 4, (uint16_t)(hl + dlen));
	}
	size_t plen = hl + dlen;
	ipv6_header(ip, tcp ? 6 : 17, peer_ip6, node_ip6, plen);
	csum6(ip, 40, tcp ? 6 : 17, plen, tcp ? 16 : 6);
	if (ctl & 2)
		l4[tcp ? 16 : 6] ^= 0x5a;

	/* The fragments: each the fixed header, a Fragment header and its part. */
	size_t nfrag = (plen + fsz - 1) / fsz;
	if (nfrag > 64)
		nfrag = 64;
	for (size_t k = 0; k < nfrag; k++) {
		size_t i = (ctl & 4) ? nfrag - 1 - k : k;
		if (i < 32 && (skip >> i & 1) && (ctl & 8))
			continue;
		size_t off = i * fsz;
		bool overlap = (dup & 0x80) && i == (dup & 0x1f) && off >= 8;
		if (overlap)
			off -= 8;  /* starts inside the fragment before */
		size_t n = plen - off < fsz ? plen - off : fsz;
		bool more = off + n < plen || ((ctl & 0x10) && k == nfrag - 1);
		uint8_t *f = rx_buf, *fip = f + 14, *fh = fip + 40;
		eth_header(f, node_mac, 0x86dd);
		ipv6_header(fip, 44, peer_ip6, node_ip6, 8 + n);
		fh[0] = tcp ? 6 : 17;
		fh[1] = 0;
		put16(fh + 2, (uint16_t)(off | more));
		put32(fh + 4, id);
		memcpy(fh + 8, l4 + off, n);
		deliver(f, 14 + 40 + 8 + n, 0);
		if ((dup & 0x40) && i == (dup & 0x1f))
			deliver(f, 14 + 40 + 8 + n, 0);  /* the same fragment again */
	}
	if (tcp && dseq == 0 && !(ctl & 0x0a))
		peer.rcv_nxt += (uint32_t)dlen;
}

/* Neighbor Discovery (RFC 4861 §4), an MLD query (RFC 2710 §3, RFC 3810 §5.1) or an echo
 * request, with options of any length (RFC 4861 §4.6: a length of 0 is invalid). */
void rec_nd(struct input *in)
{
	uint8_t sel = u8(in);
	uint8_t ctl = u8(in);
	uint8_t *f = rx_buf, mac[6], *ip = f + 14, *m = ip + 40;
	static const uint8_t types[] = { 133, 134, 135, 136, 137, 130, 128, 135, 136, 134 };
	const uint8_t *dst = pick_dst6(ctl, mac);
	const uint8_t *src = pick_src6(ctl >> 3);
	size_t len;

	memset(m, 0, 64);  /* the fixed parts; options and data are written whole below */
	m[0] = (sel & 0x80) ? u8(in) : types[sel % sizeof(types)];
	m[1] = (ctl & 0x20) ? u8(in) : 0;  /* a code other than 0 is invalid */
	switch (m[0]) {
	case 133:  /* RS: reserved */
		len = 8;
		break;
	case 134:  /* RA: hop limit, flags, router lifetime, reachable time, retrans timer */
		take(in, m + 4, 12);
		len = 16;
		break;
	case 135: case 136: {  /* NS, NA: flags, target */
		static const uint8_t *const targets[] = { node_ip6, node_ll6, peer_ip6, peer_ll6 };
		take(in, m + 4, 1);
		uint8_t t = u8(in);
		if (t & 0x80)
			take(in, m + 8, 16);
		else
			memcpy(m + 8, targets[t & 3], 16);
		len = 24;
		break;
	}
	case 137: {  /* Redirect: target, destination */
		static const uint8_t *const addrs[] = { peer_ip6, peer_ll6, router_ip6, node_ip6 };
		uint8_t t = u8(in);
		memcpy(m + 8, addrs[t & 3], 16);
		memcpy(m + 24, addrs[(t >> 2) & 3], 16);
		if (t & 0x80)
			take(in, m + 8, 32);
		len = 40;
		break;
	}
	case 130:  /* MLD query: maximum response delay, multicast address, MLDv2's fields */
		take(in, m + 4, 20);
		len = (sel & 0x40) ? 28 : 24;
		break;
	default:   /* echo request and others: identifier, sequence, data */
		take(in, m + 4, 4);
		len = 8;
		len += take(in, m + 8, u8(in) & 0x3f);
		break;
	}
	/* Options: up to three, each a type, a length in units of 8 octets (the right one or
	 * the input's, 0 included) and a body from the input. */
	static const uint8_t kinds[] = { 1, 2, 3, 4, 5, 25, 31, 14 };
	unsigned nopt = (ctl >> 6) & 3;
	for (unsigned i = 0; i < nopt && len < 1024; i++) {
		uint8_t k = u8(in);
		uint8_t *o = m + len;
		uint8_t type = (k & 0x80) ? u8(in) : kinds[k % sizeof(kinds)];
		size_t units = type == 1 || type == 2 || type == 5 ? 1 : type == 3 ? 4 : 2;
		uint8_t lf = (k & 0x40) ? u8(in) : (uint8_t)units;
		if (k & 0x40)
			units = lf ? (lf & 7) : 1;  /* what the octets take; the field may say 0 */
		memset(o, 0, units * 8);
		o[0] = type;
		o[1] = lf;
		if ((type == 1 || type == 2) && !(k & 0x20))
			memcpy(o + 2, peer_mac, 6);
		else
			take(in, o + 2, units * 8 - 2);
		if (type == 4 && units * 8 >= 48 && !(k & 0x20))  /* a redirected header */
			memcpy(o + 8, peer.last_ip, 40);
		len += units * 8;
	}
	if (ctl & 0x20)  /* raw octets after the options */
		len += take(in, m + len, u8(in) & 0x3f);
	eth_header(f, mac, 0x86dd);
	ipv6_header(ip, 58, src, dst, len);
	if (sel & 0x40 && m[0] != 130)
		ip[7] = u8(in);  /* a hop limit other than 255: not from the link */
	csum6(ip, 40, 58, len, 2);
	deliver(f, 14 + 40 + len, 0);
}
#else
void rec_raw(struct input *in)
{
	uint8_t ctl = u8(in);
	size_t len = u16(in) & 0x7ff;
	uint8_t *f = rx_buf;
	size_t got = take(in, f + 14, len < 20 ? 20 : len);
	if (got < 20)
		return;
	memcpy(f, node_mac, 6);
	memcpy(f + 6, peer_mac, 6);
	f[12] = 0x08;
	f[13] = 0x00;
	uint8_t *ip = f + 14;
	if (ctl & 1) {  /* a well-formed header around the input's bytes */
		ip[0] = 0x45;
		put16(ip + 2, (uint16_t)got);
		put32(ip + 12, PEER_IP);
		put32(ip + 16, NODE_IP);
	}
	if (ctl & 2) {
		size_t ihl = (size_t)(ip[0] & 0xf) * 4;
		if (ihl >= 20 && ihl <= got) {
			ip[10] = ip[11] = 0;
			store_csum(ip + 10, ip, (int)ihl);
		}
	}
	deliver(f, 14 + got, 0);
}

void rec_icmp(struct input *in)
{
	uint8_t type = u8(in);
	uint8_t code = u8(in);
	uint16_t mtu = u16(in);
	int16_t dseq = (int16_t)u16(in);
	uint8_t *f = rx_buf;
	uint8_t *icmp = f + 14 + 20;
	memset(icmp, 0, 8);
	static const uint8_t types[] = { 3, 3, 3, 11, 12, 4 };  /* mostly unreachables */
	icmp[0] = (type & 0x80) ? type : types[type % sizeof(types)];
	icmp[1] = code;
	put16(icmp + 6, mtu);
	memcpy(icmp + 8, peer.last_ip, 20);
	memcpy(icmp + 28, peer.last_tcp, 8);
	put32(icmp + 28 + 4, peer.snd_nxt - 1 + (uint32_t)(int32_t)dseq);
	icmp[2] = icmp[3] = 0;
	store_csum(icmp + 2, icmp, 36);
	deliver(f, eth_ipv4(f, IPPROTO_ICMP, 36, 0), 0);
}

#endif
