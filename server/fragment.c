/* The node's own answers that are longer than the link: sent in fragments.
 *
 * Read first: RFC 791 §3.2 (fragmentation), RFC 8200 §4.5 (the Fragment header, a source's
 * fragmentation), RFC 7739 (unpredictable IPv6 Identifications).
 *
 * Only an echo reply can be longer than the link: reass.c hands a reassembled echo request
 * nobody owns to the node, and RFC 1122 §3.2.2.6 wants the reply to carry all of its data.
 * Errors and resets are short by construction. The whole reply is built first (one frame
 * longer than the link, never sent as it is) and cut here.
 *
 * Every function here runs on the demux thread with s->lock held.
 */
#include "server/internal.h"

#include <string.h>
#include <sys/random.h>

#include "netif/wire/wire.h"

#define ETH_HLEN WIRE_ETH_HLEN
#define IP6_HLEN WIRE_IPV6_HLEN

/* A scratch frame for one fragment: at most the link's MTU behind the Ethernet header. */
static uint8_t frag_frame[ETH_HLEN + NIF_MTU_MAX];

void srv__send_ip4(struct srv *s, const uint8_t *f, size_t len)
{
	const uint8_t *ip = f + ETH_HLEN;
	size_t hlen = (size_t)(ip[WIRE_IPV4_OFF_VIHL] & 0x0f) * 4;
	size_t total = wire_rd16(ip + WIRE_IPV4_OFF_TOTAL_LEN);

	if (total <= s->mtu) {
		srv__send_frame(s, f, len);
		return;
	}
	/* RFC 791 §3.2: every fragment but the last carries a multiple of 8 octets; each
	 * carries the whole header (ours have no options, so none is left out of later
	 * fragments), its Fragment Offset in 8-octet units and MF on all but the last. The
	 * Identification, which the built reply has, is the same in all of them. */
	size_t chunk = (s->mtu - hlen) & ~(size_t)7, data = total - hlen;
	uint8_t *g = frag_frame, *gip = g + ETH_HLEN;

	for (size_t off = 0; off < data; off += chunk) {
		size_t n = data - off < chunk ? data - off : chunk;
		bool more = off + n < data;

		memcpy(g, f, ETH_HLEN + hlen);
		memcpy(gip + hlen, ip + hlen + off, n);
		wire_wr16(gip + WIRE_IPV4_OFF_TOTAL_LEN, (uint16_t)(hlen + n));
		wire_wr16(gip + WIRE_IPV4_OFF_FRAG, (uint16_t)(off / 8 | (more ? WIRE_IPV4_MF : 0)));
		wire_wr16(gip + WIRE_IPV4_OFF_CHECKSUM, 0);
		wire_wr16(gip + WIRE_IPV4_OFF_CHECKSUM, wire_sum_finish(wire_sum(0, gip, hlen)));
		srv__send_frame(s, g, ETH_HLEN + hlen + n);
		s->ctr.v[SRV_FRAGMENTS_SENT]++;
	}
}

void srv__send_ip6(struct srv *s, const uint8_t *f, size_t len)
{
	const uint8_t *ip = f + ETH_HLEN;
	size_t plen = wire_rd16(ip + WIRE_IPV6_OFF_PLEN);
	uint32_t id;

	if (IP6_HLEN + plen <= s->mtu) {
		srv__send_frame(s, f, len);
		return;
	}
	/* RFC 8200 §4.5: the unfragmentable part (ours: the fixed header alone), then a
	 * Fragment header naming what the fragmentable part starts with, then a piece of it,
	 * a multiple of 8 octets in all but the last. RFC 7739 §5: an Identification an
	 * off-path host cannot predict. */
	if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != sizeof(id))
		id = (uint32_t)srv__now_ms() ^ (uint32_t)s->ctr.v[SRV_FRAGMENTS_SENT];
	size_t chunk = (s->mtu - IP6_HLEN - WIRE_IPV6_FRAG_HLEN) & ~(size_t)7;
	uint8_t *g = frag_frame, *gip = g + ETH_HLEN, *fh = gip + IP6_HLEN;

	for (size_t off = 0; off < plen; off += chunk) {
		size_t n = plen - off < chunk ? plen - off : chunk;
		bool more = off + n < plen;

		memcpy(g, f, ETH_HLEN + IP6_HLEN);
		gip[WIRE_IPV6_OFF_NEXT] = WIRE_IPPROTO_FRAGMENT;
		wire_wr16(gip + WIRE_IPV6_OFF_PLEN, (uint16_t)(WIRE_IPV6_FRAG_HLEN + n));
		fh[0] = ip[WIRE_IPV6_OFF_NEXT];
		fh[1] = 0;
		wire_wr16(fh + 2, (uint16_t)(off | (more ? WIRE_IPV6_FRAG_M : 0)));
		wire_wr32(fh + 4, id);
		memcpy(fh + WIRE_IPV6_FRAG_HLEN, ip + IP6_HLEN + off, n);
		srv__send_frame(s, g, ETH_HLEN + IP6_HLEN + WIRE_IPV6_FRAG_HLEN + n);
		s->ctr.v[SRV_FRAGMENTS_SENT]++;
	}
}
