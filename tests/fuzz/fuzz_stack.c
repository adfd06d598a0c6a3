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
 * Built twice (tests/fuzz/local.mk): fuzz_stack on a plain device and fuzz_stack_offload on
 * a device with offloads (partial checksums, super-segments in and out), where each SEG
 * also carries a virtio-net header of the input's bytes, checked as the device checks it.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stack/internal.h"

#include "lwip/etharp.h"
#include "lwip/init.h"
#include "lwip/ip4_frag.h"
#include "lwip/priv/tcp_priv.h"
#include "lwip/tcp.h"
#include "lwip/udp.h"
#include "lwip/timeouts.h"
#include <netif/ethernet.h>
#include "netif/chksum.h"
#include "netif/dev.h"
#include "netif/frame.h"
#include "netif/vnet.h"

#ifndef FUZZ_OFFLOAD
#define FUZZ_OFFLOAD 0
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

#define NODE_IP   0x0a000001u  /* 10.0.0.1 */
#define PEER_IP   0x0a000002u  /* 10.0.0.2 */
#define ECHO_PORT 7
#define MTU       1500u
#define FRAME_MAX (NIF_OFF_FRAME_MAX + 64)

static const uint8_t node_mac[6] = { 0x02, 0x75, 0x6c, 0x00, 0x00, 0x01 };
static const uint8_t peer_mac[6] = { 0x02, 0x75, 0x6c, 0x00, 0x00, 0x02 };

/* ---- the input, read front to back; reads past the end give zeros ---- */

struct input {
	const uint8_t *p;
	size_t left;
};

static uint8_t u8(struct input *in)
{
	if (!in->left)
		return 0;
	in->left--;
	return *in->p++;
}

static uint16_t u16(struct input *in)
{
	uint16_t hi = u8(in);

	return (uint16_t)(hi << 8 | u8(in));
}

static size_t take(struct input *in, uint8_t *out, size_t want)
{
	size_t n = want < in->left ? want : in->left;

	memcpy(out, in->p, n);
	in->p += n;
	in->left -= n;
	return n;
}

/* ---- the device: transmitted frames are parsed for the peer's view, then dropped ---- */

static uint8_t tx_buf[FRAME_MAX];

/* What the peer knows of the connection, from the frames the node sent. */
static struct {
	uint16_t port;        /* the peer's port of the current connection */
	uint32_t snd_nxt;     /* highest SEQ + LEN the node sent */
	uint32_t rcv_nxt;     /* what the peer sends next */
	uint32_t node_tsval;  /* the node's last TSval */
	uint32_t tsval;       /* the peer's TSval clock */
	bool synack_seen;
	uint8_t last_tcp[60]; /* the node's last TCP header, for ICMP quotes */
	uint8_t last_ip[20];
} peer;

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
	if (len < 14 + 20 + 20 || f[12] != 0x08 || f[13] != 0x00)
		return;
	const uint8_t *ip = f + 14;
	size_t ihl = (size_t)(ip[0] & 0xf) * 4;
	if (ip[9] != IPPROTO_TCP || ihl < 20 || len < 14 + ihl + 20)
		return;
	const uint8_t *th = ip + ihl;
	size_t thl = (size_t)(th[12] >> 4) * 4;
	if (thl < 20 || len < 14 + ihl + thl || ((uint16_t)(th[2] << 8 | th[3])) != peer.port)
		return;
	uint32_t seq = (uint32_t)th[4] << 24 | (uint32_t)th[5] << 16 | (uint32_t)th[6] << 8 | th[7];
	size_t iplen = (size_t)(ip[2] << 8 | ip[3]);
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
	memcpy(peer.last_ip, ip, 20);
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

static struct tcp_pcb *conn;   /* the connection the input plays on, NULL once gone */

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

/* UDP echo on the same port: RAW records reach it (and lwIP's port unreachables). */
static void fuzz_udp_echo(void *arg, struct udp_pcb *pcb, struct pbuf *p, const ip_addr_t *addr,
		     u16_t port)
{
	(void)arg;
	udp_sendto(pcb, p, addr, port);
	pbuf_free(p);
}

static void setup_once(void)
{
	static bool done;

	if (done)
		return;
	done = true;
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
	struct tcp_pcb *l = tcp_new();
	CHECK(l && tcp_bind(l, IP4_ADDR_ANY, ECHO_PORT) == ERR_OK);
	l = tcp_listen(l);
	CHECK(l);
	tcp_accept(l, echo_accept);
	struct udp_pcb *u = udp_new();
	CHECK(u && udp_bind(u, IP4_ADDR_ANY, ECHO_PORT) == ERR_OK);
	udp_recv(u, fuzz_udp_echo, NULL);
}

/* ---- frames from the peer ---- */

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void put32(uint8_t *p, uint32_t v)
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

static void deliver(const uint8_t *f, size_t len, uint32_t off)
{
	stk__ethif_input(&stk__node.netif, f, len, off);
}

static void tcp_checksum(uint8_t *ip, size_t l4len)
{
	/* The pseudo-header (RFC 9293 §3.1) goes in the checksum field first, as a sender
	 * with a partial checksum leaves it; summing the segment then completes it. */
	nif_vnet_pseudo_csum(ip, 20, 16);
	store_csum(ip + 20 + 16, ip + 20, (int)l4len);
}

/* A TCP segment from the peer. opts (optlen, a multiple of 4 after padding) go as given. */
static void send_tcp(uint32_t seq, uint32_t ack, uint8_t flags, uint16_t wnd, const uint8_t *opts,
		     size_t optlen, const uint8_t *data, size_t dlen, bool bad_csum,
		     const uint8_t *vnet)
{
	size_t thl = 20 + ((optlen + 3) & ~(size_t)3);
	if (14 + 20 + thl + dlen > sizeof(rx_buf) || 20 + thl + dlen > 0xffff)
		return;
	uint8_t *f = rx_buf;
	uint8_t *th = f + 14 + 20;
	memset(th, 0, thl);
	put16(th, peer.port);
	put16(th + 2, ECHO_PORT);
	put32(th + 4, seq);
	put32(th + 8, ack);
	th[12] = (uint8_t)((thl / 4) << 4);
	th[13] = flags;
	put16(th + 14, wnd);
	if (optlen)
		memcpy(th + 20, opts, optlen);
	if (dlen)
		memcpy(th + thl, data, dlen);
	size_t len = eth_ipv4(f, IPPROTO_TCP, thl + dlen, 0x4000);
	tcp_checksum(f + 14, thl + dlen);
	if (bad_csum)
		th[16] ^= 0x5a;
	uint32_t off = 0;
	if (FUZZ_OFFLOAD && vnet && nif_vnet_parse(vnet, NIF_VNET_HLEN, f, len, &off) < 0)
		return;  /* the device drops it (and counts) */
	deliver(f, len, off);
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

static void arp_request(void)
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

/* The scripted three-way handshake; the first input byte picks the SYN's options. */
static bool handshake(uint8_t how)
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

enum { REC_SEG, REC_RAW, REC_ICMP, REC_TIME, REC_APP, REC_KINDS };

static void rec_seg(struct input *in, bool ts)
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

static void rec_raw(struct input *in)
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

static void rec_icmp(struct input *in)
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
	sys_check_timeouts();
}

static void rec_app(struct input *in)
{
	uint8_t what = u8(in);
	uint16_t len = u16(in);
	static uint8_t buf[0x10000];

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
	for (int i = 0; i <= IP_REASS_MAXAGE; i++)
		ip_reass_tmr();
	etharp_cleanup_netif(&stk__node.netif);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };

	setup_once();
	arp_request();
	uint8_t how = u8(&in);
	/* The handshake is scripted and the state before it clean: it must always work, or
	 * the records below would test nothing. */
	CHECK(handshake(how));
	bool ts = how & 8;
	/* With bit 32, consecutive frame records form one receive batch, as the stack's device
	 * rounds do (stack/outbatch.c): lwIP's output for them waits for the batch's end, which
	 * comes before a timer or an application record, as in the stack. */
	bool batches = how & 32, open = false;
	for (unsigned n = 0; in.left && n < 64; n++) {
		unsigned kind = u8(&in) % REC_KINDS;
		bool frame = kind == REC_SEG || kind == REC_RAW || kind == REC_ICMP;
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
		default: rec_app(&in); break;
		}
	}
	if (open)
		stk__outbatch_end();
	reset_state();
	return 0;
}
