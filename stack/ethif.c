/* The lwIP network interface on top of a TAP device: frames in, frames out.
 *
 * Read first: RFC 894 (IP over Ethernet), RFC 826 (ARP).
 *
 * Received IPv4 packets bypass lwIP's ethernet_input() and go straight to ip4_input() with
 * the Ethernet header stripped: pbuf lengths are 16 bits, so a 65535-byte IP packet fits in
 * a pbuf but not together with its 14-byte Ethernet header. ARP frames take lwIP's path.
 * IPv6 packets (RFC 2464), on a node that has an IPv6 address (stk__node_ip6), go to
 * ip6_input() the same way; lwIP answers neighbour solicitations and echo requests itself
 * (a node of its own); on a node without one they are dropped as an unknown ethertype,
 * as before IPv6 (frame_ethertype).
 *
 * On a device that lends its receive buffers (the direct path's queue, netif/qring.c), a
 * large frame is not copied: the IPv4 packet becomes a custom pbuf over the buffer the
 * kernel read it into, and freeing the pbuf gives the buffer back. On a device that takes
 * gathered writes, a frame is written from lwIP's pbufs, which keep a reference until the
 * write completed; lwIP itself does not rewrite a segment's headers while a driver holds
 * one (tcp_output_segment_busy, lwIP 2.1's contract for deferred transmission).
 */
#include "internal.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "lwip/etharp.h"
#include "lwip/ip4.h"
#include "lwip/ip6.h"
#include "lwip/pbuf.h"
#include "lwip/stats.h"
#include <netif/ethernet.h>
#include "netif/copy.h"
#include "netif/frame.h"
#include "netif/rxpool.h"
#include "netif/vnet.h"
#include "netif/wire/wire.h"

/* Deviation: lwIP cannot send a frame longer than 65535 bytes (16-bit pbuf lengths), so at
 * MTU 65535 the stack sends IP packets of at most 65521 bytes; it still receives 65535. */
#define ETHIF_MTU_MAX (0xffffu - WIRE_ETH_HLEN)

/* Frames smaller than this are copied into a transmit buffer: a copy of an ACK costs less
 * than keeping its pbuf until the write completes. */
#define GATHER_MIN 512

/* A received frame lwIP holds in the device's buffer. Lives in the buffer's room for the
 * consumer (NIF_RXBUF_PRIV), in front of the frame: lwIP's PBUF_RAM layout (struct, then
 * data), so that pbuf_add_header's bound check holds. */
struct lent {
	struct pbuf_custom pc;
	struct nif_rxbuf *b;
};
_Static_assert(sizeof(struct lent) <= NIF_RXBUF_PRIV, "struct lent fits the buffer's room");

static void lent_free(struct pbuf *p)
{
	struct lent *l = (struct lent *)(void *)((uint8_t *)p - offsetof(struct lent, pc));

	nif_rxbuf_release(l->b);
}

/* The checks every received frame gets; false if it was dropped (counted). */
static bool frame_ok(const uint8_t *frame, size_t len, uint32_t *off, struct nif_frame_info *info,
		     enum nif_verdict *v)
{
	/* A super-segment (a device with offloads only) may be longer than the MTU. */
	size_t max = stk__node.dev->offload && nif_off_gso(*off) ? NIF_OFF_FRAME_MAX
							      : (size_t)stk__node.dev->mtu + WIRE_ETH_HLEN;

	if (!stk__node.dev->offload)
		*off = 0;
	*v = nif_frame_check(frame, len, max, stk__node.mac, info);
	/* Without an IPv6 address the node does not speak IPv6: the frame is of a type the
	 * node does not handle, counted where it always was. */
	if (!stk__node.has_ip6 &&
	    (*v == NIF_PASS_IPV6 || *v == NIF_DROP_IPV6_HEADER || *v == NIF_DROP_IPV6_LENGTH))
		*v = NIF_DROP_ETHERTYPE;
	stk__count_verdict(*v);
	if (nif_verdict_is_drop(*v)) {
		LINK_STATS_INC(link.drop);
		return false;
	}
	return true;
}

static void input_ip(struct pbuf *p, const struct nif_frame_info *info, struct netif *netif,
		     uint32_t off, enum nif_verdict v)
{
	if (info->flags & NIF_FRAME_LLBCAST)
		p->flags |= PBUF_FLAG_LLBCAST;
	if (info->flags & NIF_FRAME_LLMCAST)
		p->flags |= PBUF_FLAG_LLMCAST;
	LINK_STATS_INC(link.recv);
	stk__outbatch_frame();
	/* IPv6 as IPv4: a checksum the kernel verified, or a local sender left partial, is
	 * not checked again (stack/tso.c). */
	stk__tso_ip_input(p, netif, off, v == NIF_PASS_IPV6);  /* always takes the pbuf */
}

/* A device offers a frame in a buffer it can lend (nif_rx_take_fn): keep an IPv4 packet in
 * place when allowed, else copy as stk__ethif_input does. Core lock held. */
static bool ethif_take(void *arg, struct nif_rxbuf *b)
{
	struct netif *netif = arg;
	struct nif_frame_info info;
	enum nif_verdict v;
	uint32_t off = b->off;

	if (!b->lendable) {
		stk__ethif_input(arg, b->frame, b->len, b->off);
		return false;
	}
	if (!frame_ok(b->frame, b->len, &off, &info, &v))
		return false;
	if (v == NIF_PASS_ARP) {
		stk__ethif_input(arg, b->frame, b->len, b->off);
		return false;
	}
	if (stk__synshed_drop(b->frame + info.l3_off, info.l3_len, v == NIF_PASS_IPV6))
		return false;
	struct lent *l = b->priv;
	l->b = b;
	l->pc.custom_free_function = lent_free;
	struct pbuf *p = pbuf_alloced_custom(PBUF_RAW, (u16_t)info.l3_len, PBUF_RAM, &l->pc,
					     b->frame + info.l3_off, (u16_t)info.l3_len);
	if (!p) {
		stk__ethif_input(arg, b->frame, b->len, b->off);
		return false;
	}
	stk__count(STK_CNT_RX_LENT);
	input_ip(p, &info, netif, off, v);
	return true;
}

/* Called by the stack thread, under the core lock, for every frame read from the TAP. */
void stk__ethif_input(void *arg, const uint8_t *frame, size_t len, uint32_t off)
{
	struct netif *netif = arg;
	struct nif_frame_info info;
	enum nif_verdict v;
	struct pbuf *p;

	if (!frame_ok(frame, len, &off, &info, &v))
		return;
	if (v == NIF_PASS_ARP) {
		p = pbuf_alloc(PBUF_RAW, (u16_t)len, PBUF_RAM);
		if (!p) {
			stk__count(STK_CNT_RX_NOMEM);
			return;
		}
		memcpy(p->payload, frame, len);
		if (netif->input(p, netif) != ERR_OK)
			pbuf_free(p);
		return;
	}
	/* Before the copy: a shed SYN costs its checks only (stack/synshed.c). */
	if (stk__synshed_drop(frame + info.l3_off, info.l3_len, v == NIF_PASS_IPV6))
		return;
	p = pbuf_alloc(PBUF_RAW, (u16_t)info.l3_len, PBUF_RAM);
	if (!p) {
		stk__count(STK_CNT_RX_NOMEM);
		return;
	}
	nif_copy(p->payload, frame + info.l3_off, info.l3_len);
	input_ip(p, &info, netif, off, v);
}

static void gather_done(void *cookie)
{
	pbuf_free(cookie);
}

/* The bytes of Ethernet, IPv4 and transport header at the start of a frame lwIP sends (the
 * transport header only for TCP and UDP), or 0 if they do not look complete. */
static size_t headers_len(const uint8_t *f, size_t len)
{
	struct wire_eth eth;
	struct wire_ipv4 ip;
	struct wire_tcp tcp;
	size_t h;

	/* Only the headers need be here (len may end before the data): the IPv4 header is
	 * read as a header alone. */
	if (wire_eth_view(&eth, f, len) < 0 || eth.type != WIRE_ETHERTYPE_IPV4 ||
	    wire_ipv4_view_quoted(&ip, eth.payload, eth.payload_len) < 0)
		return 0;
	h = WIRE_ETH_HLEN + ip.hlen;
	if (ip.proto == WIRE_IPPROTO_TCP) {
		if (wire_tcp_view(&tcp, ip.data, ip.data_len) < 0)
			return 0;
		h += tcp.hlen;
	} else if (ip.proto == WIRE_IPPROTO_UDP) {
		h += WIRE_UDP_HLEN;
	}
	return h <= len ? h : 0;
}

/* Queue p without copying it, if the device takes gathered writes and p's memory stays as
 * it is until the write completes: ERR_OK, ERR_BUF (dropped), or ERR_INPROGRESS when the
 * caller must copy it instead. */
static err_t gather_output(struct pbuf *p)
{
	struct nif_dev *dev = stk__node.dev;
	struct iovec iov[NIF_TX_IOV_MAX];
	unsigned n = 0;

	if (!dev->ops->tx_gather || p->tot_len < GATHER_MIN)
		return ERR_INPROGRESS;
	/* PBUF_REF and PBUF_ROM data is the caller's (a datagram the application may reuse
	 * once the call returns): copied. */
	for (struct pbuf *q = p; q; q = q->next) {
		if (n == NIF_TX_IOV_MAX || PBUF_NEEDS_COPY(q))
			return ERR_INPROGRESS;
		iov[n].iov_base = q->payload;
		iov[n].iov_len = q->len;
		n++;
		if (q->len == q->tot_len)
			break;
	}
	if (headers_len(p->payload, p->len) == 0)
		return ERR_INPROGRESS;
	uint32_t off = stk__tso_tx_offload(p->payload, p->len, p->tot_len);
	if (p->tot_len > dev->mtu + WIRE_ETH_HLEN && !nif_off_gso(off)) {
		stk__count(STK_CNT_TX_OVERSIZE);
		return ERR_BUF;
	}
	pbuf_ref(p);
	int rc = dev->ops->tx_gather(dev, iov, n, p->tot_len, off, gather_done, p);
	if (rc < 0) {
		pbuf_free(p);
		return rc == -ENOBUFS ? ERR_INPROGRESS : ERR_BUF;
	}
	stk__count(STK_CNT_TX_GATHER);
	LINK_STATS_INC(link.xmit);
	return ERR_OK;
}

static err_t linkoutput(struct netif *netif, struct pbuf *p)
{
	(void)netif;
	/* Above the MTU only a TCP super-segment, checked once it is in the slot. */
	if (p->tot_len > stk__node.dev->mtu + WIRE_ETH_HLEN && !stk__tso_enabled()) {
		stk__count(STK_CNT_TX_OVERSIZE);
		return ERR_BUF;
	}
	err_t err = gather_output(p);
	if (err != ERR_INPROGRESS)
		return err;
	uint8_t *slot = stk__node.dev->ops->tx_slot(stk__node.dev, p->tot_len);
	if (!slot) {
		stk__count(STK_CNT_TX_NOBUF);
		return ERR_BUF;
	}
	pbuf_copy_partial(p, slot, p->tot_len, 0);
	uint32_t off = stk__tso_tx_offload(slot, p->tot_len, p->tot_len);
	if (p->tot_len > stk__node.dev->mtu + WIRE_ETH_HLEN && !nif_off_gso(off)) {
		/* The slot is not committed: the next frame takes it. */
		stk__count(STK_CNT_TX_OVERSIZE);
		return ERR_BUF;
	}
	if (stk__node.dev->ops->tx_queue(stk__node.dev, slot, p->tot_len, off) < 0)
		return ERR_BUF;
	LINK_STATS_INC(link.xmit);
	return ERR_OK;
}

err_t stk__ethif_init(struct netif *netif)
{
	unsigned mtu = stk__node.dev->mtu;

	netif->name[0] = 'u';
	netif->name[1] = 's';
	netif->output = etharp_output;
	netif->linkoutput = linkoutput;
	netif->mtu = (u16_t)(mtu > ETHIF_MTU_MAX ? ETHIF_MTU_MAX : mtu);
	netif->hwaddr_len = ETH_HWADDR_LEN;
	memcpy(netif->hwaddr, stk__node.mac, ETH_HWADDR_LEN);
	netif->flags = NETIF_FLAG_BROADCAST | NETIF_FLAG_ETHARP | NETIF_FLAG_ETHERNET;
	stk__tso_setup(netif, stk__node.dev);
	stk__node.dev->rx_take = ethif_take;
	return ERR_OK;
}
