/* Segmentation offload on a node: super-segments out, partial checksums both ways.
 *
 * Read first: RFC 9293 §3.1 (the checksum and its pseudo-header), §3.7.1 and RFC 6691 (the
 * MSS: what the peer may receive per segment, options excluded), RFC 5681 §3.1 (cwnd),
 * RFC 3465 §2.2 (L), netif/vnet.h (the offload word), stack/patches/0006.
 *
 * When the node's rings carry offload words (ulsd's default) and ULS_TSO is not 0, lwIP
 * builds TCP segments of up to about 64 KiB (LWIP_HOOK_TCP_TSO_SIZE); the frame leaves
 * with gso_size = the connection's MSS less its options, and the kernel cuts it into wire
 * segments, or hands it whole to a receiver that takes super-segments (a ulsd
 * with offloads, veth). lwIP leaves every TCP checksum to the kernel: the frame carries
 * only the pseudo-header sum, marked partial; a receiver on the same machine never sums
 * the data at all. Received frames whose checksum the kernel verified, or that a local
 * sender left partial, skip lwIP's check (RFC 9293 §3.1 MUST-3 holds: "the checksum is
 * checked", by the kernel, or there was no wire to corrupt the data).
 *
 * Checksum offload alone (a node with `ulsd --offload csum`, or ULS_TSO=0 on any node with
 * offloads): segments of one MSS, as without offload, but still left partial, as the
 * kernel's TCP does on a device with checksum offload and TSO off (a veth with `ethtool
 * -K tso off gso off`).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "hooks.h"
#include "lwip/ip4.h"
#include "lwip/ip6.h"
#include "lwip/tcp.h"
#include "netif/copy.h"
#include "netif/vnet.h"
#include "netif/wire/wire.h"

/* Headers in front of a TCP segment's data (Ethernet, IPv4 or IPv6, TCP); the pbuf's
 * 16-bit length holds all of it. */
#define TSO_HEADROOM (WIRE_ETH_HLEN + WIRE_IPV4_HLEN_MIN + WIRE_TCP_HLEN_MIN)
#define TSO_HEADROOM6 (WIRE_ETH_HLEN + WIRE_IPV6_HLEN + WIRE_TCP_HLEN_MIN)
#define TSO_TS_OPTLEN 12   /* RFC 7323 timestamps as lwIP sends them, with two NOPs */

static bool tso_on;    /* super-segments out */
static bool csum_on;   /* TCP checksums left partial (implied by tso_on) */
/* The MSS of the connection whose segment is on its way to the netif (set by
 * LWIP_HOOK_TCP_TSO_OUTPUT just before ip_output; lwIP is single-threaded under the core
 * lock, and the ports make sure a frame that ARP queued meanwhile is not mistaken). */
static struct {
	u16_t mss, lport, rport;
} hint;

void stk__tso_setup(struct netif *netif, const struct nif_dev *dev)
{
	const char *e = stk__getenv("ULS_TSO");

	csum_on = dev->offload;
	tso_on = csum_on && !dev->csum_only && !(e && strcmp(e, "0") == 0);
	netif->chksum_flags = NETIF_CHECKSUM_ENABLE_ALL;
	if (csum_on)
		NETIF_SET_CHECKSUM_CTRL(netif, NETIF_CHECKSUM_ENABLE_ALL & ~NETIF_CHECKSUM_GEN_TCP);
}

bool stk__tso_enabled(void)
{
	return tso_on;
}

/* lwIP sums TCP data while tcp_write copies it in (LWIP_CHECKSUM_ON_COPY), for the
 * software checksum at output. With offload, output never reads that sum (the netif's
 * NETIF_CHECKSUM_GEN_TCP is off), and summing every byte sent cost 6% of the machine's
 * cycles at 8 streams (docs/benchmarks.md, "Profile"). The copy is nif_copy: an
 * application's buffer and a segment's pbuf meet at any distance (netif/copy.c). Called
 * under the core lock. */
u16_t stk__chksum_copy(void *dst, const void *src, u16_t len)
{
	nif_copy(dst, src, len);
	return csum_on ? 0 : nif_inet_chksum(dst, len);
}

static u16_t optlen(const struct tcp_pcb *pcb)
{
	return (pcb->flags & TF_TIMESTAMP) ? TSO_TS_OPTLEN : 0;
}

/* A connection whose peer announced an MSS so small that a wire segment would carry less
 * than NIF_OFF_GSO_MIN octets (the smallest gso_size ulsd and the TAP take) sends plain
 * segments, as every connection does without offload. So does one without timestamps:
 * it always has here (the test was "the unit is the MSS", true for both), and the
 * conformance flights without timestamps count on wire-sized sends; left as it was. */
static bool gso_fits(const struct tcp_pcb *pcb)
{
	return tso_on && optlen(pcb) > 0 && pcb->mss > optlen(pcb) &&
	       (unsigned)(pcb->mss - optlen(pcb)) >= NIF_OFF_GSO_MIN;
}

/* One wire segment's data: the MSS less the options every segment carries (RFC 9293
 * §3.7.1, Eff.snd.MSS counts the TCP header with its options; RFC 6691), with offload
 * or without. Loss recovery counts its retransmissions in these units (patch 0103); the
 * MSS itself was one timestamp option too many, and a retransmission spanning two
 * queued segments went out as a 1,512-byte datagram, cut into two IP fragments. */
u16_t stk__tso_unit(const struct tcp_pcb *pcb)
{
	if (pcb->mss <= optlen(pcb))
		return pcb->mss;
	return (u16_t)(pcb->mss - optlen(pcb));
}

/* A whole number of wire segments' payload, plus the options, within the pbuf's 16 bits;
 * the MSS (one wire segment with its options) when there is no segmentation offload. */
u16_t stk__tso_size(const struct tcp_pcb *pcb)
{
	u16_t unit = stk__tso_unit(pcb), opt = optlen(pcb);

	if (!gso_fits(pcb))
		return pcb->mss;
	unsigned room = IP_IS_V6_VAL(pcb->remote_ip) ? TSO_HEADROOM6 : TSO_HEADROOM;
	unsigned k = (0xffffu - room - opt) / unit;
	unsigned size = k * unit + opt;
	return (u16_t)(size > pcb->mss ? size : pcb->mss);
}

u32_t stk__tso_abc_limit(const struct tcp_pcb *pcb)
{
	/* Deviation (RFC 3465 §2.2, L = 2 * SMSS): one ACK covers a whole super-segment, or a
	 * batch of up to 16 received segments (stack/outbatch.c; GRO receivers do the same), so
	 * cwnd grows by what it acknowledges, as Linux's slow start does, up to 64 KiB per ACK.
	 * With L = 2 * SMSS, batched ACKs slowed slow start after a timeout eightfold. */
	if (tso_on)
		return stk__tso_size(pcb);
	return 2u * pcb->mss > 0xffffu ? 2u * pcb->mss : 0xffffu;
}

void stk__tso_output(const struct tcp_pcb *pcb)
{
	hint.mss = pcb->mss;
	hint.lport = pcb->local_port;
	hint.rport = pcb->remote_port;
}

/* The IPv4 or IPv6 header and the TCP segment of a frame lwIP is sending, when its
 * headers are in the contiguous part (hlen) and it is a TCP segment we offload: not a
 * fragment, and for IPv6 with TCP right after the fixed header (lwIP's TCP adds no
 * extension header). */
struct tso_seg {
	uint8_t *ip;
	size_t ip_hlen;
	size_t tcp_hlen, opt, payload;
	uint16_t sport, dport;
};

static bool tso_seg(struct tso_seg *o, uint8_t *frame, size_t hlen, size_t len)
{
	struct wire_eth eth;
	struct wire_ipv4 ip;
	struct wire_ipv6 ip6;
	struct wire_tcp tcp;
	const uint8_t *data;
	size_t data_len;

	/* The views read fixed headers first: the Ethernet, IP and TCP ones without
	 * options must be in the contiguous part before any is looked at. */
	if (hlen < WIRE_ETH_HLEN + WIRE_IPV4_HLEN_MIN + WIRE_TCP_HLEN_MIN ||
	    wire_eth_view(&eth, frame, len) < 0)
		return false;
	if (eth.type == WIRE_ETHERTYPE_IPV4) {
		if (wire_ipv4_view(&ip, eth.payload, eth.payload_len) < 0 ||
		    ip.proto != WIRE_IPPROTO_TCP || wire_ipv4_is_fragment(&ip))
			return false;
		o->ip_hlen = ip.hlen;
		data = ip.data;
		data_len = ip.data_len;
	} else if (eth.type == WIRE_ETHERTYPE_IPV6) {
		if (hlen < WIRE_ETH_HLEN + WIRE_IPV6_HLEN + WIRE_TCP_HLEN_MIN ||
		    wire_ipv6_view(&ip6, eth.payload, eth.payload_len) < 0 ||
		    ip6.next != WIRE_IPPROTO_TCP)
			return false;
		o->ip_hlen = WIRE_IPV6_HLEN;
		data = ip6.payload;
		data_len = ip6.payload_len;
	} else {
		return false;
	}
	if (WIRE_ETH_HLEN + o->ip_hlen + WIRE_TCP_HLEN_MIN > hlen ||
	    wire_tcp_view(&tcp, data, data_len) < 0 ||
	    WIRE_ETH_HLEN + o->ip_hlen + tcp.hlen > hlen)
		return false;
	o->ip = frame + WIRE_ETH_HLEN;
	o->tcp_hlen = tcp.hlen;
	o->opt = tcp.options_len;
	o->payload = tcp.payload_len;
	o->sport = tcp.sport;
	o->dport = tcp.dport;
	return true;
}

/* The offload word of a frame lwIP is sending (Ethernet header first, hlen bytes of it
 * contiguous at frame, len in all); writes the pseudo-header sum (RFC 9293 §3.1; RFC 8200
 * §8.1 for IPv6) into a TCP segment's checksum field. 0 for anything but TCP. */
uint32_t stk__tso_tx_offload(uint8_t *frame, size_t hlen, size_t len)
{
	struct tso_seg sg;

	if (!csum_on || !tso_seg(&sg, frame, hlen, len))
		return 0;
	nif_vnet_pseudo_csum(sg.ip, sg.ip_hlen, WIRE_TCP_OFF_CHECKSUM);
	uint32_t off = NIF_OFF_CSUM_PARTIAL;
	size_t opt = sg.opt, payload = sg.payload;
	bool hinted = hint.lport == sg.sport && hint.rport == sg.dport;
	/* RFC 9293 §3.7.1: no wire segment may exceed the peer's MSS. A super-segment must be
	 * cut whenever it carries more than one MSS of data, also when the whole of it would
	 * fit the MTU (a peer that announced MSS 600 and 1100 octets queued), and after path
	 * MTU discovery lowered the MSS (RFC 1191, stack/icmperr.c). */
	if (tso_on && ((hinted && hint.mss > opt && payload > hint.mss - opt) ||
		       payload + sg.ip_hlen + sg.tcp_hlen > stk__node.dev->mtu)) {
		unsigned mss = WIRE_TCP_DEFAULT_MSS;  /* if the hint is not ours */
		if (hinted)
			mss = hint.mss;
		else
			stk__count(STK_CNT_TSO_HINT_MISS);
		if (mss <= opt + NIF_OFF_GSO_MIN)
			mss = (unsigned)(opt + NIF_OFF_GSO_MIN);
		off |= (uint32_t)(mss - opt);
	}
	return off;
}

/* Call lwIP's IPv4 (IPv6) input for a received packet, skipping the transport checksum
 * check when the offload word says it was verified or never left the machine (RFC 8200
 * §8.1 holds as RFC 9293 §3.1 does: the kernel checked it, or there was no wire). */
void stk__tso_ip_input(struct pbuf *p, struct netif *netif, uint32_t off, bool v6)
{
	err_t (*input)(struct pbuf *, struct netif *) = v6 ? ip6_input : ip4_input;

	if (!nif_off_csum_ok(off)) {
		input(p, netif);
		return;
	}
	u16_t saved = netif->chksum_flags;
	netif->chksum_flags = (u16_t)(saved & ~(NETIF_CHECKSUM_CHECK_TCP | NETIF_CHECKSUM_CHECK_UDP));
	stk__count(STK_CNT_RX_CSUM_OFFLOADED);
	input(p, netif);
	netif->chksum_flags = saved;
}

/* LWIP_HOOK_IP4_OUTPUT_TSO and LWIP_HOOK_IP6_OUTPUT_TSO (patch 0121): a TCP segment
 * above the MTU leaves whole, as a super-segment. */
int stk__tso_ip4_output_whole(const struct netif *netif, u8_t proto)
{
	(void)netif;
	return tso_on && proto == IP_PROTO_TCP;
}
