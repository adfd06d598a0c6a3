/* The lwIP network interface on top of a TAP device: frames in, frames out.
 *
 * Read first: RFC 894 (IP over Ethernet), RFC 826 (ARP).
 *
 * Received IPv4 packets bypass lwIP's ethernet_input() and go straight to ip4_input() with
 * the Ethernet header stripped: pbuf lengths are 16 bits, so a 65535-byte IP packet fits in
 * a pbuf but not together with its 14-byte Ethernet header. ARP frames take lwIP's path.
 */
#include "internal.h"

#include <string.h>

#include "lwip/etharp.h"
#include "lwip/ip4.h"
#include "lwip/pbuf.h"
#include "lwip/stats.h"
#include "netif/ethernet.h"
#include "netif/frame.h"
#include "netif/vnet.h"

/* Deviation: lwIP cannot send a frame longer than 65535 bytes (16-bit pbuf lengths), so at
 * MTU 65535 the stack sends IP packets of at most 65521 bytes; it still receives 65535. */
#define ETHIF_MTU_MAX (0xffffu - NIF_ETH_HLEN)

/* Called by the stack thread, under the core lock, for every frame read from the TAP. */
void stk__ethif_input(void *arg, const uint8_t *frame, size_t len, uint32_t off)
{
	struct netif *netif = arg;
	struct nif_frame_info info;
	enum nif_verdict v;
	struct pbuf *p;
	/* A super-segment (a device with offloads only) may be longer than the MTU. */
	size_t max = stk__node.dev->offload && nif_off_gso(off) ? NIF_OFF_FRAME_MAX
							     : (size_t)stk__node.dev->mtu + NIF_ETH_HLEN;

	if (!stk__node.dev->offload)
		off = 0;
	v = nif_frame_check(frame, len, max, stk__node.mac, &info);
	stk__count_verdict(v);
	if (nif_verdict_is_drop(v)) {
		LINK_STATS_INC(link.drop);
		return;
	}
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
	p = pbuf_alloc(PBUF_RAW, (u16_t)info.l3_len, PBUF_RAM);
	if (!p) {
		stk__count(STK_CNT_RX_NOMEM);
		return;
	}
	memcpy(p->payload, frame + info.l3_off, info.l3_len);
	if (info.flags & NIF_FRAME_LLBCAST)
		p->flags |= PBUF_FLAG_LLBCAST;
	if (info.flags & NIF_FRAME_LLMCAST)
		p->flags |= PBUF_FLAG_LLMCAST;
	LINK_STATS_INC(link.recv);
	stk__tso_ip_input(p, netif, off);  /* always takes the pbuf */
}

static err_t linkoutput(struct netif *netif, struct pbuf *p)
{
	(void)netif;
	/* Above the MTU only a TCP super-segment, checked once it is in the slot. */
	if (p->tot_len > stk__node.dev->mtu + NIF_ETH_HLEN && !stk__tso_enabled()) {
		stk__count(STK_CNT_TX_OVERSIZE);
		return ERR_BUF;
	}
	uint8_t *slot = stk__node.dev->ops->tx_slot(stk__node.dev, p->tot_len);
	if (!slot) {
		stk__count(STK_CNT_TX_NOBUF);
		return ERR_BUF;
	}
	pbuf_copy_partial(p, slot, p->tot_len, 0);
	uint32_t off = stk__tso_tx_offload(slot, p->tot_len);
	if (p->tot_len > stk__node.dev->mtu + NIF_ETH_HLEN && !nif_off_gso(off)) {
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
	return ERR_OK;
}
