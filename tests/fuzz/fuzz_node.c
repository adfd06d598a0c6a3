/* libFuzzer target for what ulsd does with frames for the node itself: the demux thread's
 * path (server/demux.c on_frame) through the filter's verdict into reply.c (ARP, ICMP
 * echo, RSTs for closed ports and for connections in custody, port unreachables),
 * reply6.c (neighbour solicitations and advertisements, ICMPv6 echo, its errors) and
 * reass.c (IPv4 and IPv6 reassembly: overlapping, duplicate, huge, never completed), with
 * the fake TAP of tests/unit/faketap.c. fuzz_ulsd covers what processes send ulsd; this
 * covers what the wire does. Issue 13: a remote peer cannot crash ulsd.
 *
 * An input is up to 48 records; the first octet of each says which (% REC_KINDS):
 *   ARP    a request or reply, for the node or another address, broadcast or unicast
 *   ECHO4  an ICMP echo request (or another type) to the node, broadcast or elsewhere
 *   ECHO6  an ICMPv6 echo request (or another type) to the node's global, link-local or a
 *          multicast address
 *   ND     a Neighbor Discovery message (RS, RA, NS, NA, Redirect) with options of any
 *          length (0 included), hop limit 255 or not
 *   FRAG4  an IPv4 datagram (TCP, UDP, ICMP, other) cut into fragments: some left out,
 *          repeated, overlapping, in reverse, starting anywhere up to past 65,535
 *   FRAG6  the same for IPv6 (RFC 8200 §4.5), optionally behind Hop-by-Hop or Destination
 *          Options headers, with lengths that are not multiples of 8
 *   TCP    a segment to a closed port or to a connection in custody (RST), either family
 *   UDP    a datagram to a closed port (port unreachable), either family
 *   TIME   time passes: reassembly timeouts, custody probes and expiry
 *   RAW    the input's octets as a frame (ethertype and all)
 * and one more, for octets 252 to 255 (the rest keep the meaning they had before it):
 *   LEASE  a process of the node (up to three, relay path, as HELLO makes them) takes a
 *          lease, holds a TCP listener, a UDP port or a TCP connection (IPv4, IPv6 or
 *          both) on the ports the records above send to, stops or resumes reading its
 *          receive ring, or dies (its connections go into custody)
 * Each frame goes through one round of the demux thread.
 *
 * Oracles besides the sanitizers:
 *   - every frame leaves a mark in a counter (server/counters.h, the filter's reasons): an
 *     answer, a drop with its reason, or reassembly holding more octets; the generic
 *     counters (frames to the server, IPv6 frames) do not count as a mark;
 *   - every frame ulsd sends parses back with netif/wire's views: from the node's MAC and
 *     one of its addresses, at most 14 + MTU octets, its IPv4 header checksum, its TCP,
 *     ICMP and ICMPv6 checksums right; ICMPv6 errors fit the IPv6 minimum MTU (RFC 4443
 *     §2.4 (c)) and ND messages have hop limit 255 (RFC 4861 §7.1);
 *   - reassembly holds at most 256 datagrams and 4 MiB plus one frame's charge, and
 *     after the input, once the timeouts have passed, nothing;
 *   - custody ends after 2 MSL;
 *   - processes (LEASE): a frame in a process's receive ring is an ARP reply to the node,
 *     a neighbour advertisement, or one its endpoints get (flt_lookup_rx names its lease;
 *     for a fragment, the first of a reassembled datagram does); while every process reads
 *     its ring, the frames they find are exactly those ulsd counted as delivered; a
 *     process that dies leaves no filter rule and every TCP connection it had in
 *     custody; after the input no lease is left.
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "netif/wire/wire.h"
#include "server/internal.h"
#include "tests/unit/faketap.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/fuzz_srv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The peer: 198.18.0.2 and 2001:db8:0:1::2; another host 198.18.0.9. */
#define PEER4    0x020012c6u
#define OTHER4   0x090012c6u
#define CUSTODY_LPORT 5000
#define CUSTODY_RPORT 80
static const uint8_t peer_mac[6] = { 0x02, 0x75, 0x6c, 0x00, 0x00, 0x02 };
static const uint8_t peer6[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, [15] = 2 };
static const uint8_t other6[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 2, [15] = 9 };
static uint8_t peer_ll6[16];

/* ---- the input (fuzz_input.h) ---- */

/* Fill out[0, n) from the input, the rest a pattern (cheap for the fuzzer). */
static void fill(struct input *in, uint8_t *out, size_t n, size_t from_input)
{
	size_t got = take(in, out, n < from_input ? n : from_input);

	for (size_t i = got; i < n; i++)
		out[i] = (uint8_t)(i * 7 + 3);
}

/* ---- the oracles ---- */

static bool generic(unsigned c)
{
	return c == SRV_FRAMES_TO_SERVER || c == SRV_IPV6_FRAMES || c == SRV_REASS_IN_PROGRESS ||
	       c == SRV_REASS_BYTES_HELD || c == SRV_REASS_PEAK || c == SRV_FRAMES_GSO_RECEIVED ||
	       c == SRV_FRAMES_CSUM_PARTIAL_RECEIVED;
}

static uint64_t marks(void)
{
	struct flt_stats fs;
	uint64_t sum = 0;

	flt_table_stats(srv.flt, &fs);
	for (size_t i = 0; i < FLT_REASON_COUNT; i++)
		sum += fs.rx_drop[i];
	for (unsigned c = 0; c < SRV_COUNTER_MAX; c++)
		if (!generic(c))
			sum += srv.ctr.v[c];
	return sum;
}

static bool node_ip6(const uint8_t *a)
{
	return !memcmp(a, srv.ip6, 16) || !memcmp(a, srv.ip6_ll, 16);
}

static bool sum_ok(uint32_t sum, const uint8_t *p, size_t len)
{
	return wire_sum_finish(wire_sum(sum, p, len)) == 0;
}

static size_t in_len;  /* the frame being handled (0: none) */

/* A frame ulsd sent: well formed, from the node, checksums right; no longer than the
 * link's MTU allows, or than the frame it answers (an echo reply mirrors its request,
 * which the link carried). */
static void check_sent(const uint8_t *f, size_t len)
{
	struct wire_eth e;

	CHECK(len <= WIRE_ETH_HLEN + srv.mtu || len <= in_len);
	CHECK(wire_eth_view(&e, f, len) == 0);
	CHECK(!memcmp(e.src, srv.mac, 6));
	if (e.type == WIRE_ETHERTYPE_ARP) {
		struct wire_arp a;
		CHECK(wire_arp_view(&a, e.payload, e.payload_len) == 0);
		CHECK(!memcmp(a.sha, srv.mac, 6) && a.spa == srv.ip);
		CHECK(a.op == WIRE_ARP_OP_REPLY || a.op == WIRE_ARP_OP_REQUEST);
		return;
	}
	if (e.type == WIRE_ETHERTYPE_IPV4) {
		struct wire_ipv4 ip;
		CHECK(wire_ipv4_view(&ip, e.payload, e.payload_len) == 0);
		CHECK(wire_ipv4_checksum_ok(&ip));
		CHECK(ip.src == srv.ip);
		CHECK(!wire_eth_is_group(e.dst));
		if (ip.frag & 0x3fff)
			return;  /* a fragment the node hands back (not sent on the relay path) */
		if (ip.proto == WIRE_IPPROTO_TCP) {
			struct wire_tcp t;
			CHECK(wire_tcp_view(&t, ip.data, ip.data_len) == 0);
			CHECK(sum_ok(wire_sum_pseudo4(0, ip.src, ip.dst, ip.proto, (uint16_t)ip.data_len),
				     ip.data, ip.data_len));
		} else {
			CHECK(ip.proto == WIRE_IPPROTO_ICMP);
			struct wire_icmp ic;
			CHECK(wire_icmp_view(&ic, ip.data, ip.data_len) == 0);
			CHECK(sum_ok(0, ip.data, ip.data_len));
		}
		return;
	}
	CHECK(e.type == WIRE_ETHERTYPE_IPV6);
	struct wire_ipv6 ip;
	CHECK(wire_ipv6_view(&ip, e.payload, e.payload_len) == 0);
	CHECK(node_ip6(ip.src));
	if (ip.next == WIRE_IPPROTO_TCP) {
		struct wire_tcp t;
		CHECK(wire_tcp_view(&t, ip.payload, ip.payload_len) == 0);
		CHECK(sum_ok(wire_sum_pseudo6(0, ip.src, ip.dst, ip.next, (uint32_t)ip.payload_len),
			     ip.payload, ip.payload_len));
		return;
	}
	CHECK(ip.next == WIRE_IPPROTO_ICMPV6);
	struct wire_icmp ic;
	CHECK(wire_icmp_view(&ic, ip.payload, ip.payload_len) == 0);
	CHECK(wire_icmpv6_checksum_ok(ip.src, ip.dst, ip.payload, ip.payload_len));
	if (wire_icmpv6_is_error(ic.type))
		CHECK(WIRE_IPV6_HLEN + ip.payload_len <= 1280);
	if (ic.type >= 133 && ic.type <= 137)
		CHECK(ip.hlim == 255);
}

static void check_bounds(void)
{
	CHECK(srv.ctr.v[SRV_REASS_IN_PROGRESS] <= 256);
	CHECK(srv.ctr.v[SRV_REASS_BYTES_HELD] <= (4u << 20) + FAKETAP_FRAME_MAX + 64);
}

/* FUZZ_NODE_TRACE=1 in the environment: each frame's length, the counters it moved and
 * the frames sent, on stderr (to see where a seed goes). */
static struct srv_counters trace_before;

static void trace(size_t len)
{
	static int on = -1;

	if (on < 0)
		on = getenv("FUZZ_NODE_TRACE") != NULL;
	if (!on)
		return;
	fprintf(stderr, "frame of %zu:", len);
	for (unsigned c = 0; c < SRV_COUNTER_MAX; c++)
		if (srv.ctr.v[c] != trace_before.v[c])
			fprintf(stderr, " %s", srv__counter_name(c));
	fprintf(stderr, "; sent %u\n", faketap_nsent);
}

static void after_round(void);

/* One frame through one round of the demux thread, and the oracles. */
static void frame(const uint8_t *f, size_t len)
{
	uint64_t before = marks();
	uint64_t held = srv.ctr.v[SRV_REASS_BYTES_HELD];

	trace_before = srv.ctr;
	faketap_nsent = 0;
	in_len = len;
	faketap_inject(&f, &len, 1);
	/* One round of the demux thread; it walks the lease slots only when a LEASE record
	 * changed them (not demux_round()'s every time). */
	srv.stop = false;
	srv__demux_thread(&srv);
	srv.stop = false;
	trace(len);
	after_round();
	CHECK(marks() > before || srv.ctr.v[SRV_REASS_BYTES_HELD] > held);
	for (unsigned i = 0; i < faketap_nsent; i++)
		check_sent(faketap_sent[i].b, faketap_sent[i].len);
	check_bounds();
	faketap_nsent = 0;
	in_len = 0;
}

/* ---- frames ---- */

static uint8_t buf[FAKETAP_FRAME_MAX + 2048];

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

static void rec_arp(struct input *in)
{
	uint8_t b = u8(in);
	uint8_t *f = buf;
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

static void rec_echo4(struct input *in)
{
	uint8_t b = u8(in);
	size_t dlen = u16(in) & 0x7ff;
	uint8_t *f = buf;
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

static void rec_echo6(struct input *in)
{
	uint8_t b = u8(in);
	size_t dlen = u16(in) & 0x7ff;
	uint8_t *f = buf, mac[6];
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

static void rec_nd(struct input *in)
{
	static const uint8_t types[] = { 135, 136, 135, 136, 133, 134, 137 };
	uint8_t sel = u8(in), ctl = u8(in);
	uint8_t *f = buf, mac[6];
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
static void rec_frag(struct input *in)
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
		uint8_t *f = buf, mac[6];
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
static void rec_tcp(struct input *in)
{
	uint8_t b = u8(in);
	bool v6 = b & 1;
	uint16_t dport = (b & 2) ? CUSTODY_LPORT : u16(in);
	uint8_t flags = u8(in);
	uint32_t seq = u32(in), ack = u32(in);
	size_t dlen = u8(in);
	uint8_t *f = buf;
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
static void rec_udp(struct input *in)
{
	uint8_t b = u8(in);
	bool v6 = b & 1;
	uint16_t dport = u16(in);
	size_t dlen = u16(in) & 0x7ff;
	uint8_t *f = buf;
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

/* ---- processes (LEASE) ---- */

#define NPROC 3
static struct fproc {
	struct srv_lease *l;
	struct nif_ring rx;     /* the process's side of its receive ring */
	bool asleep;            /* not reading its ring (it fills: rx_ring_full) */
} proc[NPROC];
static uint64_t ring_frames;  /* frames the processes found in their rings this round */

/* A frame in process p's receive ring: one it may get (see the top of this file). */
static void check_delivered(const struct fproc *p, const uint8_t *f, size_t len)
{
	struct flt_pkt pk;

	CHECK(flt_parse(f, len, &pk) == 0);
	if (pk.ethertype == WIRE_ETHERTYPE_ARP) {
		CHECK(pk.arp.op == WIRE_ARP_OP_REPLY && pk.arp.tpa == srv.ip);
		return;
	}
	if (pk.ethertype == WIRE_ETHERTYPE_IPV6 && pk.ip6.proto == WIRE_IPPROTO_ICMPV6 &&
	    !pk.ip6.fragment && pk.icmp.type == WIRE_ND_NEIGHBOR_ADVERT)
		return;
	bool v6 = pk.ethertype == WIRE_ETHERTYPE_IPV6;
	if (v6 ? pk.ip6.fragment : pk.ip.fragment) {
		if (v6 ? pk.ip6.frag_off : pk.ip.frag_off)
			return;  /* a later fragment of a datagram its first names */
		pk.ip.fragment = pk.ip6.fragment = false;
	}
	CHECK(flt_lookup_rx(srv.flt, &pk) == p->l->id);
}

/* Every process that reads its ring takes what is in it; owner: check that each frame is
 * one its endpoints get (right after the round that delivered it: the rules may have
 * changed since for a ring read late). */
static void read_rings(bool owner)
{
	for (unsigned i = 0; i < NPROC; i++) {
		struct fproc *p = &proc[i];
		const uint8_t *f;
		size_t len;
		uint32_t off;
		uint64_t bad = 0;
		if (!p->l || p->asleep)
			continue;
		while ((f = nif_ring_cons_peek(&p->rx, &len, &off, &bad))) {
			CHECK(len <= FAKETAP_FRAME_MAX);
			if (owner)
				check_delivered(p, f, len);
			nif_ring_cons_release(&p->rx);
			ring_frames++;
		}
		CHECK(bad == 0);
	}
}

static bool all_reading(void)
{
	for (unsigned i = 0; i < NPROC; i++)
		if (proc[i].l && proc[i].asleep)
			return false;
	return true;
}

/* The TCP connections of a lease (up to 64), to find them in custody once it has died. */
struct conns {
	uint32_t owner;
	unsigned n;
	struct flt_rule r[64];
};

static int conns_of(const struct flt_rule *r, void *arg)
{
	struct conns *c = arg;

	CHECK(r->owner != c->owner || c->n < 64 || r->kind != FLT_RULE_CONNECTED);
	if (r->owner == c->owner && r->kind == FLT_RULE_CONNECTED && r->proto == WIRE_IPPROTO_TCP)
		c->r[c->n++] = *r;
	return 0;
}

static int count_rule(const struct flt_rule *r, void *arg)
{
	(void)r;
	(*(unsigned *)arg)++;
	return 0;
}

static int rule_of_owner(const struct flt_rule *r, void *arg)
{
	CHECK(r->owner != *(uint32_t *)arg);
	return 0;
}

static void proc_die(struct fproc *p)
{
	struct conns c = { .owner = p->l->id };
	uint64_t nomem = srv.ctr.v[SRV_DROP_CUSTODY_NO_MEMORY];

	pthread_mutex_lock(&srv.lock);
	flt_foreach(srv.flt, conns_of, &c);
	faketap_nsent = 0;
	srv__lease_end(&srv, p->l);  /* the lease is freed by the next demux round */
	flt_foreach(srv.flt, rule_of_owner, &c.owner);
	if (srv.ctr.v[SRV_DROP_CUSTODY_NO_MEMORY] == nomem)
		for (unsigned i = 0; i < c.n; i++)
			CHECK(srv__custody_holds_addr(&srv.custody, c.r[i].lport, &c.r[i].rip6,
						      c.r[i].rport));
	pthread_mutex_unlock(&srv.lock);
	for (unsigned i = 0; i < faketap_nsent; i++)
		check_sent(faketap_sent[i].b, faketap_sent[i].len);  /* custody's first probes */
	faketap_nsent = 0;
	p->l = NULL;
	p->asleep = false;
}

/* LEASE: record octet 252 + n is process n % 3's; the next octet's bits 0-1 say what it
 * does: take a lease (if it has none) and an endpoint, die, stop or resume reading its
 * ring. The endpoint's octet e: bits 0-1 its port (the port of the connections in custody, 9, 7, or the
 * input's), bits 2-3 what (a TCP listener, a UDP port, a TCP connection to the peer's port
 * 80 or the input's, a listener shared with SO_REUSEPORT), bits 4-5 its families (IPv4,
 * IPv6, both), bit 6 the connection's peer IPv6. Refusals (a port in use, a tuple in
 * custody) are ulsd's to make; the record goes on. */
static void rec_lease(struct input *in, unsigned n)
{
	static const unsigned fams[4] = { FLT_FAM_V4, FLT_FAM_V6, FLT_FAM_ANY, FLT_FAM_ANY };
	struct fproc *p = &proc[n % NPROC];
	unsigned act = u8(in) & 3;

	if (act == 1) {
		if (p->l)
			proc_die(p);
		return;
	}
	if (act == 2 || act == 3) {
		if (p->l && p->asleep && act == 3) {
			p->asleep = false;  /* what waited in its ring, delivered in earlier rounds */
			read_rings(false);
		}
		p->asleep = act == 2;
		return;
	}
	uint8_t e = u8(in);
	uint16_t port = (e & 3) == 0 ? CUSTODY_LPORT : (e & 3) == 1 ? 9 : (e & 3) == 2 ? 7 : u16(in);
	pthread_mutex_lock(&srv.lock);
	if (!p->l) {
		struct srv_lease *l;
		CHECK(srv__lease_new(&srv, -1, (pid_t)(1000 + (p - proc)), 0, &l) == 0);
		CHECK(srv__lease_rings(&srv, l) == 0);
		nif_ring_attach(&p->rx, l->rings, &l->layout, 0, -1, false);
		p->l = l;
	}
	const struct srv_port_owner *o = SRV_OWNER(p->l);
	unsigned fam = fams[(e >> 4) & 3];
	switch ((e >> 2) & 3) {
	case 0:
	case 3: {
		unsigned fl = (e & 0xc) == 0xc ? CTL_F_REUSEPORT : 0;
		if (srv__port_bind_fam(srv.ports, o, IPPROTO_TCP, port, fl, fam) >= 0)
			(void)srv__port_listen(srv.ports, o, port, fl, fam);
		break;
	}
	case 1:
		(void)srv__port_bind_fam(srv.ports, o, IPPROTO_UDP, port, 0, fam);
		break;
	default: {
		struct flt_addr rip = flt_addr_v4(PEER4);
		if (e & 0x40)
			memcpy(rip.b, peer6, 16);
		uint16_t rport = (e & 0x80) ? u16(in) : CUSTODY_RPORT;
		if (!srv__port_held(srv.ports, o, IPPROTO_TCP, port))
			(void)srv__port_bind_fam(srv.ports, o, IPPROTO_TCP, port, 0, fam);
		(void)srv__port_connect_addr(srv.ports, o, port, &rip, rport);
		break;
	}
	}
	pthread_mutex_unlock(&srv.lock);
}

/* A demux round is over: the processes read their rings; while every process reads, what
 * they found is exactly what ulsd counted as delivered in it. */
static uint64_t demuxed_seen;

static void after_round(void)
{
	ring_frames = 0;
	read_rings(true);
	if (all_reading())
		CHECK(ring_frames == srv.ctr.v[SRV_FRAMES_DEMUXED] - demuxed_seen);
	demuxed_seen = srv.ctr.v[SRV_FRAMES_DEMUXED];
}

/* ulsd's timers at now_ms (reassembly, custody), and the frames they sent checked. */
static void run_timers(void)
{
	faketap_nsent = 0;
	pthread_mutex_lock(&srv.lock);
	srv__reass_tick(&srv);
	srv__custody_run(&srv);
	pthread_mutex_unlock(&srv.lock);
	for (unsigned i = 0; i < faketap_nsent; i++)
		check_sent(faketap_sent[i].b, faketap_sent[i].len);
	faketap_nsent = 0;
}

static void rec_time(struct input *in)
{
	uint8_t t = u8(in);

	now_ms += (t & 0x80) ? (uint64_t)(t & 0x7f) * 1000 : (uint64_t)t * 50;
	run_timers();
	check_bounds();
}

static void rec_raw(struct input *in)
{
	uint8_t b = u8(in);
	size_t len = u16(in) & 0x7ff;

	if (len < WIRE_ETH_HLEN && !(b & 0x80))
		len = WIRE_ETH_HLEN;
	fill(in, buf, len, len);
	if (len >= WIRE_ETH_HLEN) {
		if (b & 1)
			memcpy(buf, srv.mac, 6);
		if (b & 2)
			wire_wr16(buf + 12, (b & 4) ? WIRE_ETHERTYPE_IPV6 : WIRE_ETHERTYPE_IPV4);
	}
	frame(buf, len);
}

enum { REC_ARP, REC_ECHO4, REC_ECHO6, REC_ND, REC_FRAG, REC_TCP, REC_UDP, REC_TIME, REC_RAW,
       REC_KINDS };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	struct input in = { data, size };

	if (!ready) {
		fuzz_srv_init();
		wire_ipv6_link_local(peer_ll6, peer_mac);
		ready = true;
	}
	/* Two connections of a process that died: in custody, either family. */
	struct flt_addr p6;
	memcpy(p6.b, peer6, 16);
	pthread_mutex_lock(&srv.lock);
	CHECK(srv__custody_add(&srv.custody, now_ms, CUSTODY_LPORT, PEER4, CUSTODY_RPORT) == 0);
	CHECK(srv__custody_add_addr(&srv.custody, now_ms, CUSTODY_LPORT, &p6, CUSTODY_RPORT) == 0);
	pthread_mutex_unlock(&srv.lock);

	demuxed_seen = srv.ctr.v[SRV_FRAMES_DEMUXED];
	for (unsigned n = 0; in.left && n < 48; n++) {
		uint8_t k = u8(&in);
		if (k >= 252) {
			rec_lease(&in, k & 3);
			continue;
		}
		switch (k % REC_KINDS) {
		case REC_ARP: rec_arp(&in); break;
		case REC_ECHO4: rec_echo4(&in); break;
		case REC_ECHO6: rec_echo6(&in); break;
		case REC_ND: rec_nd(&in); break;
		case REC_FRAG: rec_frag(&in); break;
		case REC_TCP: rec_tcp(&in); break;
		case REC_UDP: rec_udp(&in); break;
		case REC_TIME: rec_time(&in); break;
		default: rec_raw(&in); break;
		}
	}

	/* Every process dies, and a demux round frees their leases. */
	for (unsigned i = 0; i < NPROC; i++)
		if (proc[i].l)
			proc_die(&proc[i]);
	demux_round();
	for (uint32_t id = 1; id < SRV_MAX_LEASES; id++)
		CHECK(srv.leases.by_id[id] == NULL);
	unsigned rules = 0;
	flt_foreach(srv.flt, count_rule, &rules);
	CHECK(rules == 0);

	/* Past every timeout: reassembly (60 s for IPv6) and custody (2 MSL) hold nothing. */
	now_ms += SRV_TIMEWAIT_MS + 61000;
	run_timers();
	CHECK(srv.ctr.v[SRV_REASS_IN_PROGRESS] == 0 && srv.ctr.v[SRV_REASS_BYTES_HELD] == 0);
	CHECK(srv.custody.n == 0);
	return 0;
}
