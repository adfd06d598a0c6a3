/* libFuzzer target for a process's whole receive path: frames from the wire into
 * stk__ethif_input(), through our frame check, lwIP's IPv4 (reassembly included), ICMP,
 * our TCP input checks (stack/tcp_checks.c) and every lwIP patch, on a connection that is
 * ESTABLISHED when the input starts. Issue 13: "No packet sequence from the wire can
 * abort, hang or corrupt a process". lwIP's assertions abort() (stack/port.c), so a
 * reachable one is a crash here; ASan and UBSan report the rest; LeakSanitizer at exit
 * reports pbufs or PCBs that the stack lost (lwIP allocates everything with malloc here).
 *
 * For each input the harness opens a fresh connection to an echo listener with a scripted
 * handshake (the peer's SYN options chosen by the input's first byte), then plays the
 * input as a list of records, each driving one event:
 *
 *   SEG   a TCP segment on the connection: flags, SEQ and ACK as offsets from what the
 *         peer would send next and from the node's SND.NXT, window, raw option bytes, an
 *         optional valid timestamp option, payload; checksum right or (bit) wrong.
 *   RAW   an IPv4 packet of the input's bytes to the node (lengths and checksum fixed
 *         or not): fragments, other protocols, other tuples, UDP (an echo on port 7).
 *   ICMP  an ICMP error quoting one of the node's segments (type, code, MTU, SEQ offset).
 *   TIME  lwIP's timers: TCP fast and slow timers, reassembly and ARP timers.
 *   APP   the application: send bytes, shut down, close, abort.
 *
 * The first byte's bit 32 groups consecutive frame records into receive batches
 * (stack/outbatch.c), so connections freed while their output waits are covered.
 *
 * Built three times (tests/fuzz/local.mk): fuzz_stack on a plain device and
 * fuzz_stack_offload on a device with offloads (partial checksums, super-segments in and
 * out), where each SEG also carries a virtio-net header of the input's bytes, checked as the
 * device checks it; and fuzz_stack6 (FUZZ_IPV6), the same over IPv6: the connection is
 * TCPv6 between 2001:db8::2 and the node's 2001:db8::1, the peer introduces itself with a
 * neighbour solicitation (RFC 4861 §7.2.3) instead of ARP, and
 *
 *   RAW   is an IPv6 packet: the input's octets, or a header and a chain of extension
 *         headers (Hop-by-Hop, Routing, Destination Options, Fragment, others) built from
 *         them, to the node's global, link-local or a multicast address;
 *   ICMP  is an ICMPv6 error (RFC 4443: unreachable, Packet Too Big with any MTU, time
 *         exceeded, parameter problem, or any type) quoting the node's last segment;
 *   FRAG  (IPv6 only) a TCP segment on the connection or a UDP datagram to the echo, cut
 *         into fragments (RFC 8200 §4.5) some of which are left out, repeated, overlapping
 *         or sent in reverse;
 *   ND    (IPv6 only) a Neighbor Discovery message (RFC 4861: RS, RA, NS, NA, Redirect)
 *         with options of any length, an MLD query (RFC 2710/3810) or an echo request.
 *
 * The records of fuzz_stack and fuzz_stack_offload are unchanged by the IPv6 mode, so
 * their seeds keep their meaning.
 *
 * In every build, an APP record whose first octet has bits 2-7 set (ignored before) is
 *
 *   FLOOD other clients of the peer (ports 61000 to 61007) and a second listener (port 8)
 *         whose backlog is 2 and whose application leaves what it accepts in the accept
 *         queue: SYNs that fill the half-open bound and then get SYN cookies (RFC 4987
 *         §3.6, stack/syncookie.c), the ACKs that complete them (with the cookie or
 *         another number), data, FIN or RST on them, and the application accepting,
 *         closing or aborting them.
 *
 * and such a record whose 16 bits have bits 5-7 set (which FLOOD ignored) is
 *
 *   BURST up to 4,345 one-octet out-of-order segments on the connection, every other octet
 *         from RCV.NXT + 1, ascending, descending or shuffled (and then the holes filled):
 *         more than TCP_OOSEQ_MAX_SEGS, which 64 records never reached (lwIP patch 0128).
 *         The queue must hold exactly min(n, TCP_OOSEQ_MAX_SEGS) segments, and the filled
 *         stream reach exactly the last octet kept. One per input.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stack/internal.h"

#include "lwip/etharp.h"
#include "lwip/init.h"
#include "lwip/ip4_frag.h"
#include "lwip/ip6_frag.h"
#include "lwip/nd6.h"
#include "lwip/priv/tcp_priv.h"
#include "lwip/tcp.h"
#include "lwip/udp.h"
#include "lwip/timeouts.h"
#include <netif/ethernet.h>
#include "netif/chksum.h"
#include "netif/dev.h"
#include "netif/frame.h"
#include "netif/vnet.h"
#include "netif/wire/wire.h"
#include "tests/fuzz/fuzz_input.h"

#include "tests/fuzz/fuzz_stack.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const uint8_t node_mac[6] = { 0x02, 0x75, 0x6c, 0x00, 0x00, 0x01 };
const uint8_t peer_mac[6] = { 0x02, 0x75, 0x6c, 0x00, 0x00, 0x02 };
/* IPv6 (FUZZ_IPV6): 2001:db8::1 the node, 2001:db8::2 the peer, 2001:db8::ff a router on
 * the path (ICMPv6 errors), and their link-local addresses from the MACs. */
const uint8_t node_ip6[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 1 };
const uint8_t peer_ip6[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 2 };
const uint8_t router_ip6[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 0xff };
uint8_t node_ll6[16], peer_ll6[16];

/* ---- the device: transmitted frames are parsed for the peer's view, then dropped ---- */

static uint8_t tx_buf[FRAME_MAX];

struct fuzz_peer peer;

/* FLOOD: the peer's other clients, to the second listener (what the node sent each). Their
 * ports are above those the handshake takes (1024 to 60000), which must never be theirs. */
#define FLOOD_PORT    8
#define FLOOD_CLIENTS 8
#define FLOOD_SPORT   61000
static struct {
	uint32_t irs;         /* the client's ISN */
	uint32_t iss;         /* the node's SYN,ACK's SEQ (a cookie or not) */
	uint32_t node_tsval;
	bool synack_seen;
} flood[FLOOD_CLIENTS];

static int dev_wait(struct nif_dev *dev, int timeout_ms)
{
	(void)dev;
	(void)timeout_ms;
	return 0;
}

static int dev_rx(struct nif_dev *dev, nif_rx_fn *fn, void *arg, unsigned budget)
{
	(void)dev;
	(void)fn;
	(void)arg;
	(void)budget;
	return 0;
}

static void dev_wake(struct nif_dev *dev)
{
	(void)dev;
}

static uint8_t *dev_tx_slot(struct nif_dev *dev, size_t len)
{
	(void)dev;
	return len <= sizeof(tx_buf) ? tx_buf : NULL;
}

static void note_tx(const uint8_t *f, size_t len)
{
	const uint8_t *ip = f + 14;
#if FUZZ_IPV6
	/* lwIP sends TCP right behind the fixed header, without extension headers. */
	if (len < 14 + 40 + 20 || f[12] != 0x86 || f[13] != 0xdd || ip[6] != IPPROTO_TCP)
		return;
	size_t ihl = 40;
	size_t iplen = 40 + (size_t)(ip[4] << 8 | ip[5]);
#else
	if (len < 14 + 20 + 20 || f[12] != 0x08 || f[13] != 0x00)
		return;
	size_t ihl = (size_t)(ip[0] & 0xf) * 4;
	if (ip[9] != IPPROTO_TCP || ihl < 20 || len < 14 + ihl + 20)
		return;
	size_t iplen = (size_t)(ip[2] << 8 | ip[3]);
#endif
	const uint8_t *th = ip + ihl;
	size_t thl = (size_t)(th[12] >> 4) * 4;
	uint16_t dport = (uint16_t)(th[2] << 8 | th[3]);
	uint32_t seq = (uint32_t)th[4] << 24 | (uint32_t)th[5] << 16 | (uint32_t)th[6] << 8 | th[7];
	if (thl >= 20 && len >= 14 + ihl + thl && (th[13] & 0x12) == 0x12 &&
	    dport >= FLOOD_SPORT && dport < FLOOD_SPORT + FLOOD_CLIENTS) {
		unsigned k = dport - FLOOD_SPORT;
		flood[k].iss = seq;
		flood[k].synack_seen = true;
		flood[k].node_tsval = 0;
		for (size_t o = 20; o + 9 < thl && th[o]; o += th[o] == 1 ? 1 : (th[o + 1] ? th[o + 1] : thl))
			if (th[o] == 8 && th[o + 1] == 10)
				flood[k].node_tsval = (uint32_t)th[o + 2] << 24 | (uint32_t)th[o + 3] << 16 |
						      (uint32_t)th[o + 4] << 8 | th[o + 5];
		return;
	}
	if (thl < 20 || len < 14 + ihl + thl || dport != peer.port)
		return;
	uint32_t dlen = iplen > ihl + thl ? (uint32_t)(iplen - ihl - thl) : 0;
	uint8_t flags = th[13];
	uint32_t end = seq + dlen + ((flags & 0x02) ? 1 : 0) + ((flags & 0x01) ? 1 : 0);
	if ((flags & 0x12) == 0x12 && !peer.synack_seen) {
		peer.synack_seen = true;
		peer.snd_nxt = end;
	} else if ((int32_t)(end - peer.snd_nxt) > 0) {
		peer.snd_nxt = end;
	}
	for (size_t o = 20; o + 1 < thl;) {  /* the node's TSval, for the peer's TSecr */
		uint8_t kind = th[o];
		if (kind == 0)
			break;
		if (kind == 1) {
			o++;
			continue;
		}
		uint8_t olen = th[o + 1];
		if (olen < 2 || o + olen > thl)
			break;
		if (kind == 8 && olen == 10)
			peer.node_tsval = (uint32_t)th[o + 2] << 24 | (uint32_t)th[o + 3] << 16 |
					  (uint32_t)th[o + 4] << 8 | th[o + 5];
		o += olen;
	}
	memcpy(peer.last_ip, ip, IPH);
	memcpy(peer.last_tcp, th, thl < sizeof(peer.last_tcp) ? thl : sizeof(peer.last_tcp));
}

static int dev_tx_queue(struct nif_dev *dev, uint8_t *slot, size_t len, uint32_t off)
{
	(void)dev;
	/* What the device would write to the kernel must pass the device's own check. */
	uint8_t hdr[NIF_VNET_HLEN];
	if (FUZZ_OFFLOAD && nif_vnet_build(hdr, slot, len, off) < 0)
		return -EINVAL;
	CHECK(FUZZ_OFFLOAD || off == 0);
	note_tx(slot, len);
	return 0;
}

static int dev_tx_flush(struct nif_dev *dev)
{
	(void)dev;
	return 0;
}

static void dev_get_stats(const struct nif_dev *dev, struct nif_dev_stats *out)
{
	(void)dev;
	memset(out, 0, sizeof(*out));
}

static void dev_close(struct nif_dev *dev)
{
	(void)dev;
}

static const struct nif_dev_ops fuzz_ops = {
	.wait = dev_wait, .rx = dev_rx, .wake = dev_wake, .tx_slot = dev_tx_slot,
	.tx_queue = dev_tx_queue, .tx_flush = dev_tx_flush, .get_stats = dev_get_stats,
	.close = dev_close,
};

static struct nif_dev fuzz_dev = { .ops = &fuzz_ops, .mtu = MTU, .offload = FUZZ_OFFLOAD };

/* ---- the application: an echo server on lwIP's raw API ---- */

struct tcp_pcb *conn;   /* the connection the input plays on, NULL once gone */

static void echo_err(void *arg, err_t err)
{
	(void)arg;
	(void)err;
	conn = NULL;  /* lwIP freed it */
}

static err_t echo_recv(void *arg, struct tcp_pcb *pcb, struct pbuf *p, err_t err)
{
	(void)arg;
	(void)err;
	if (!p) {
		tcp_recv(pcb, NULL);
		return ERR_OK;
	}
	for (struct pbuf *q = p; q; q = q->next) {
		u16_t room = tcp_sndbuf(pcb);
		u16_t n = q->len < room ? q->len : room;
		if (n && tcp_write(pcb, q->payload, n, TCP_WRITE_FLAG_COPY) != ERR_OK)
			break;
	}
	tcp_recved(pcb, p->tot_len);
	pbuf_free(p);
	return ERR_OK;
}

static err_t echo_accept(void *arg, struct tcp_pcb *pcb, err_t err)
{
	(void)arg;
	if (err != ERR_OK || !pcb)
		return ERR_VAL;
	tcp_recv(pcb, echo_recv);
	tcp_err(pcb, echo_err);
	if (pcb->remote_port == peer.port)
		conn = pcb;
	return ERR_OK;
}

/* FLOOD's listener: its application is slow, what it accepts waits in the accept queue
 * (tcp_backlog_delayed) until a FLOOD record accepts it. */
static struct tcp_pcb *flood_conn[FLOOD_CLIENTS];
static struct tcp_pcb_listen *flood_listener;

static void flood_err(void *arg, err_t err)
{
	(void)err;
	flood_conn[(uintptr_t)arg] = NULL;  /* lwIP freed it */
}

static err_t flood_accept(void *arg, struct tcp_pcb *pcb, err_t err)
{
	(void)arg;
	if (err != ERR_OK || !pcb)
		return ERR_VAL;
	unsigned k = pcb->remote_port - FLOOD_SPORT;
	if (k >= FLOOD_CLIENTS || flood_conn[k])
		return ERR_VAL;  /* not ours: lwIP aborts it */
	flood_conn[k] = pcb;
	tcp_arg(pcb, (void *)(uintptr_t)k);
	tcp_err(pcb, flood_err);
	tcp_backlog_delayed(pcb);
	return ERR_OK;
}

/* UDP echo on the same port: RAW records reach it (and lwIP's port unreachables). */
static void fuzz_udp_echo(void *arg, struct udp_pcb *pcb, struct pbuf *p, const ip_addr_t *addr,
		     u16_t port)
{
	(void)arg;
	udp_sendto(pcb, p, addr, port);
	pbuf_free(p);
}

#if FUZZ_IPV6
static u16_t mtu6;  /* the netif's IPv6 MTU, which an RA's MTU option lowers */
#endif

/* FUZZ_BURST_REPORT=1: how many BURST records ran, passed the bound, filled their holes. */
static void burst_report(void)
{
	fprintf(stderr, "BURST records %lu, past TCP_OOSEQ_MAX_SEGS (tcp_ooseq_limit) %lu, "
		"holes filled %lu\n", burst_stats.bursts, burst_stats.limit_reached, burst_stats.filled);
}

static void setup_once(void)
{
	static bool done;

	if (done)
		return;
	done = true;
	if (getenv("FUZZ_BURST_REPORT"))
		atexit(burst_report);
	stk__lock();  /* held for good: the harness is the only thread in lwIP */
	/* What stk__node_up() does, without the stack thread: the harness plays its part. */
	ip4_addr_t ip, mask, gw;
	IP4_ADDR(&ip, 10, 0, 0, 1);
	IP4_ADDR(&mask, 255, 255, 255, 0);
	ip4_addr_set_zero(&gw);
	stk__node.dev = &fuzz_dev;
	memcpy(stk__node.mac, node_mac, 6);
	lwip_init();
	stk__ep_init();
	stk__tcp_checks_init();
	CHECK(netif_add(&stk__node.netif, &ip, &mask, &gw, NULL, stk__ethif_init, ethernet_input));
	netif_set_default(&stk__node.netif);
	stk__node.up = true;
	netif_set_link_up(&stk__node.netif);
	netif_set_up(&stk__node.netif);
#if FUZZ_IPV6
	struct in6_addr a6;
	memcpy(a6.s6_addr, node_ip6, 16);
	CHECK(stk__node_ip6(&a6, 64) == 0);
	wire_ipv6_link_local(node_ll6, node_mac);
	wire_ipv6_link_local(peer_ll6, peer_mac);
	mtu6 = stk__node.netif.mtu6;
	const u8_t type = IPADDR_TYPE_V6;
	const ip_addr_t *any = IP6_ADDR_ANY;
#else
	const u8_t type = IPADDR_TYPE_V4;
	const ip_addr_t *any = IP4_ADDR_ANY;
#endif
	struct tcp_pcb *l = tcp_new_ip_type(type);
	CHECK(l && tcp_bind(l, any, ECHO_PORT) == ERR_OK);
	l = tcp_listen(l);
	CHECK(l);
	tcp_accept(l, echo_accept);
	l = tcp_new_ip_type(type);
	CHECK(l && tcp_bind(l, any, FLOOD_PORT) == ERR_OK);
	l = tcp_listen_with_backlog(l, 2);
	CHECK(l);
	tcp_accept(l, flood_accept);
	flood_listener = (struct tcp_pcb_listen *)l;
	struct udp_pcb *u = udp_new_ip_type(type);
	CHECK(u && udp_bind(u, any, ECHO_PORT) == ERR_OK);
	udp_recv(u, fuzz_udp_echo, NULL);
}

/* FLOOD (an APP record whose first octet has bits 2-7 set: its bits 0-1 say what, the
 * 16 bits after it, v, how; the records' octets are APP's, so older inputs parse as they
 * did). v's bits 0-2 choose the client; then
 *   0  its SYN (ISN: v's high octet, shifted), with an MSS, with v bit 3 timestamps, with
 *      bit 4 window scale and SACK-permitted;
 *   1  its ACK of the node's SYN,ACK (the cookie, or with bit 3 that plus v's high octet,
 *      signed), with bit 4 an octet of data and FIN;
 *   2  its RST (SEQ right, or with bit 3 off by v's high octet, signed);
 *   3  the application accepts the client's connection waiting in the accept queue, with
 *      bit 3 closes it, with bit 4 aborts it. */
static void rec_flood(unsigned what, uint16_t v)
{
	unsigned k = v & 7;
	uint16_t sport = (uint16_t)(FLOOD_SPORT + k);
	int32_t d = (v & 8) ? (int8_t)(v >> 8) : 0;
	uint8_t opts[40];
	size_t n = 0;

	switch (what) {
	case 0:
		flood[k].irs = (uint32_t)(v >> 8) << 24 | 0x10000u * k | 1;
		flood[k].synack_seen = false;
		opts[n++] = 2; opts[n++] = 4; put16(opts + n, 1460); n += 2;
		if (v & 0x10) {
			opts[n++] = 1; opts[n++] = 3; opts[n++] = 3; opts[n++] = 7;
			opts[n++] = 1; opts[n++] = 1; opts[n++] = 4; opts[n++] = 2;
		}
		if (v & 8) {
			opts[n++] = 1; opts[n++] = 1; opts[n++] = 8; opts[n++] = 10;
			put32(opts + n, ++peer.tsval); put32(opts + n + 4, 0); n += 8;
		}
		send_tcp_ports(sport, FLOOD_PORT, flood[k].irs, 0, 0x02, 65535, opts, n, NULL, 0,
			       false, NULL);
		break;
	case 1: {
		if (flood[k].node_tsval) {
			opts[n++] = 1; opts[n++] = 1; opts[n++] = 8; opts[n++] = 10;
			put32(opts + n, ++peer.tsval); put32(opts + n + 4, flood[k].node_tsval); n += 8;
		}
		static const uint8_t x = 'x';
		send_tcp_ports(sport, FLOOD_PORT, flood[k].irs + 1, flood[k].iss + 1 + (uint32_t)d,
			       (v & 0x10) ? 0x19 : 0x10, 1024, opts, n, &x, (v & 0x10) ? 1 : 0, false,
			       NULL);
		break;
	}
	case 2:
		send_tcp_ports(sport, FLOOD_PORT, flood[k].irs + 1 + (uint32_t)d, 0, 0x04, 0, NULL, 0,
			       NULL, 0, false, NULL);
		break;
	default: {
		struct tcp_pcb *pcb = flood_conn[k];
		if (!pcb)
			break;
		tcp_backlog_accepted(pcb);
		if (v & 0x10) {
			flood_conn[k] = NULL;
			tcp_abort(pcb);
		} else if (v & 8) {
			tcp_err(pcb, NULL);
			if (tcp_close(pcb) == ERR_OK)
				flood_conn[k] = NULL;
			else
				tcp_err(pcb, flood_err);
		}
		break;
	}
	}
}

static void rec_time(struct input *in)
{
	uint8_t n = u8(in);

	for (unsigned i = 0; i < (n & 7) + 1u; i++) {
		tcp_fasttmr();
		if (n & 8)
			tcp_slowtmr();
	}
	if (n & 16)
		ip_reass_tmr();
#if FUZZ_IPV6
	if (n & 32)
		ip6_reass_tmr();
	if (n & 64)
		nd6_tmr();
#endif
	sys_check_timeouts();
}

static bool input_ts, burst_done;

static void rec_app(struct input *in)
{
	uint8_t what = u8(in);
	uint16_t len = u16(in);
	static uint8_t buf[0x10000];

	if ((what & 0xfc) == 0xfc && (len & 0xe0) == 0xe0) {
		if (!burst_done)
			rec_burst(what & 3, len, input_ts);
		burst_done = true;
		return;
	}
	if ((what & 0xfc) == 0xfc) {
		rec_flood(what & 3, len);
		return;
	}
	if (!conn)
		return;
	switch (what & 3) {
	case 0: {
		u16_t room = tcp_sndbuf(conn);
		u16_t n = len < room ? len : room;
		memset(buf, 'x', n);
		if (n)
			tcp_write(conn, buf, n, TCP_WRITE_FLAG_COPY);
		tcp_output(conn);
		break;
	}
	case 1:
		tcp_shutdown(conn, 0, 1);
		break;
	case 2:
		tcp_recv(conn, NULL);
		tcp_err(conn, NULL);
		if (tcp_close(conn) == ERR_OK)
			conn = NULL;
		else
			tcp_err(conn, echo_err);
		break;
	default:
		tcp_output(conn);
		break;
	}
}

/* Free whatever the input left behind: connections, reassembly and ARP state. */
static void reset_state(void)
{
	while (tcp_active_pcbs) {
		tcp_err(tcp_active_pcbs, NULL);
		tcp_abort(tcp_active_pcbs);
	}
	while (tcp_tw_pcbs)
		tcp_abort(tcp_tw_pcbs);
	conn = NULL;
	memset(flood_conn, 0, sizeof(flood_conn));
	memset(flood, 0, sizeof(flood));
	/* Every connection is gone: the listener counts none half-open or waiting, or
	 * its next input would find its backlog taken (lwIP patch 0090's counts). */
	CHECK(flood_listener->accepts_pending == 0 && flood_listener->syn_rcvd == 0);
	for (int i = 0; i <= IP_REASS_MAXAGE; i++)
		ip_reass_tmr();
	etharp_cleanup_netif(&stk__node.netif);
#if FUZZ_IPV6
	for (int i = 0; i <= IPV6_REASS_MAXAGE; i++)
		ip6_reass_tmr();
	/* Neighbours, routers, prefixes and destinations an input taught the node, and the
	 * MTU an RA set. (An RA's reachable time and retransmission timer stay: lwIP keeps
	 * them in nd6.c's statics; they change no frame the handshake needs.) */
	nd6_cleanup_netif(&stk__node.netif);
	stk__node.netif.mtu6 = mtu6;
#endif
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };

	setup_once();
#if FUZZ_IPV6
	introduce();
#else
	arp_request();
#endif
	uint8_t how = u8(&in);
	/* The handshake is scripted and the state before it clean: it must always work, or
	 * the records below would test nothing. */
	CHECK(handshake(how));
	bool ts = how & 8;
	input_ts = ts;
	burst_done = false;
	/* With bit 32, consecutive frame records form one receive batch, as the stack's device
	 * rounds do (stack/outbatch.c): lwIP's output for them waits for the batch's end, which
	 * comes before a timer or an application record, as in the stack. */
	bool batches = how & 32, open = false;
	for (unsigned n = 0; in.left && n < 64; n++) {
		unsigned kind = u8(&in) % REC_KINDS;
		bool frame = kind != REC_TIME && kind != REC_APP;
		if (batches && frame && !open)
			stk__outbatch_begin();
		else if (open && !frame)
			stk__outbatch_end();
		open = batches && frame;
		switch (kind) {
		case REC_SEG: rec_seg(&in, ts); break;
		case REC_RAW: rec_raw(&in); break;
		case REC_ICMP: rec_icmp(&in); break;
		case REC_TIME: rec_time(&in); break;
#if FUZZ_IPV6
		case REC_FRAG: rec_frag(&in); break;
		case REC_ND: rec_nd(&in); break;
#endif
		default: rec_app(&in); break;
		}
	}
	if (open)
		stk__outbatch_end();
	reset_state();
	return 0;
}
