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
 *
 * The frames of the records are built in fuzz_node_frames.c; ulsd itself is fuzz_srv.c.
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netif/wire/wire.h"
#include "server/internal.h"
#include "tests/unit/faketap.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/fuzz_node.h"
#include "tests/fuzz/fuzz_srv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

const uint8_t peer_mac[6] = { 0x02, 0x75, 0x6c, 0x00, 0x00, 0x02 };
const uint8_t peer6[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, [15] = 2 };
const uint8_t other6[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 2, [15] = 9 };
uint8_t peer_ll6[16];

/* ---- the input (fuzz_input.h) ---- */

/* Fill out[0, n) from the input, the rest a pattern (cheap for the fuzzer). */
void fill(struct input *in, uint8_t *out, size_t n, size_t from_input)
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
	if (ip.next == WIRE_IPPROTO_FRAGMENT) {
		/* A reply longer than the link, in fragments (server/fragment.c: only echo
		 * replies to reassembled requests are): a Fragment header naming ICMPv6, then a
		 * piece, a multiple of 8 octets unless it is the last. */
		CHECK(ip.payload_len > WIRE_IPV6_FRAG_HLEN);
		CHECK(ip.payload[0] == WIRE_IPPROTO_ICMPV6);
		bool more = wire_rd16(ip.payload + 2) & WIRE_IPV6_FRAG_M;
		CHECK(!more || (ip.payload_len - WIRE_IPV6_FRAG_HLEN) % 8 == 0);
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
void frame(const uint8_t *f, size_t len)
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
	fill(in, frame_buf, len, len);
	if (len >= WIRE_ETH_HLEN) {
		if (b & 1)
			memcpy(frame_buf, srv.mac, 6);
		if (b & 2)
			wire_wr16(frame_buf + 12, (b & 4) ? WIRE_ETHERTYPE_IPV6 : WIRE_ETHERTYPE_IPV4);
	}
	frame(frame_buf, len);
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
