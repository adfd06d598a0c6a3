/* Wire formats (see wire.h).
 *
 * Read first: RFC 894, RFC 826, RFC 791 §3.1, RFC 1071, RFC 9293 §3.1, RFC 768, RFC 792,
 * RFC 8200 §3-4 and §8.1, RFC 4291 §2.5.6 and §2.7.1, RFC 2464 §7, RFC 4443 §2,
 * RFC 4861 §4, virtio v1.2 §5.1.6.
 *
 * Everything here may read octets a peer, or a process we do not trust, chose: each view
 * checks a range before every read and writes its struct only when it returns 0.
 */
#include "netif/wire/wire.h"

const char *wire_reason_name(int reason)
{
	static const char *const names[WIRE_REASON_END - WIRE_REASON_BASE] = {
		[WIRE_TRUNCATED - WIRE_REASON_BASE] = "truncated",
		[WIRE_BAD_VERSION - WIRE_REASON_BASE] = "bad_version",
		[WIRE_BAD_HLEN - WIRE_REASON_BASE] = "bad_header_length",
		[WIRE_BAD_LENGTH - WIRE_REASON_BASE] = "bad_length",
		[WIRE_BAD_FORMAT - WIRE_REASON_BASE] = "bad_format",
		[WIRE_TOO_DEEP - WIRE_REASON_BASE] = "too_deep",
		[WIRE_BAD_OPTION - WIRE_REASON_BASE] = "bad_option",
	};

	if (reason < 0)
		reason = -reason;
	if (reason < WIRE_REASON_BASE || reason >= WIRE_REASON_END)
		return "unknown";
	return names[reason - WIRE_REASON_BASE];
}

uint32_t wire_sum(uint32_t sum, const uint8_t *p, size_t len)
{
	size_t i;

	for (i = 0; i + 1 < len; i += 2) {
		sum += wire_rd16(p + i);
		/* Fold before the 32 bits could overflow (a 64 KiB run adds < 2^32 anyway). */
		if (sum & 0x80000000u)
			sum = (sum & 0xffff) + (sum >> 16);
	}
	if (i < len)
		sum += (uint32_t)p[i] << 8;
	return sum;
}

uint16_t wire_sum_finish(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

uint32_t wire_sum_pseudo4(uint32_t sum, uint32_t src, uint32_t dst, uint8_t proto,
			  uint16_t len)
{
	uint8_t ph[12];

	wire_wraddr(ph, src);
	wire_wraddr(ph + 4, dst);
	ph[8] = 0;
	ph[9] = proto;
	wire_wr16(ph + 10, len);
	return wire_sum(sum, ph, sizeof(ph));
}

int wire_eth_view(struct wire_eth *v, const uint8_t *p, size_t len)
{
	if (!p || len < WIRE_ETH_HLEN)
		return -WIRE_TRUNCATED;
	v->dst = p + WIRE_ETH_OFF_DST;
	v->src = p + WIRE_ETH_OFF_SRC;
	v->type = wire_rd16(p + WIRE_ETH_OFF_TYPE);
	v->payload = p + WIRE_ETH_HLEN;
	v->payload_len = len - WIRE_ETH_HLEN;
	return 0;
}

void wire_eth_write(uint8_t *p, const uint8_t dst[WIRE_ETH_ALEN],
		    const uint8_t src[WIRE_ETH_ALEN], uint16_t type)
{
	memcpy(p + WIRE_ETH_OFF_DST, dst, WIRE_ETH_ALEN);
	memcpy(p + WIRE_ETH_OFF_SRC, src, WIRE_ETH_ALEN);
	wire_wr16(p + WIRE_ETH_OFF_TYPE, type);
}

int wire_arp_view(struct wire_arp *v, const uint8_t *p, size_t len)
{
	if (len < WIRE_ARP_LEN)
		return -WIRE_TRUNCATED;
	/* RFC 826: the address spaces and lengths say how to read the rest; we read only
	 * Ethernet hardware addresses and IPv4 protocol addresses. */
	if (wire_rd16(p + WIRE_ARP_OFF_HRD) != WIRE_ARP_HRD_ETHERNET ||
	    wire_rd16(p + WIRE_ARP_OFF_PRO) != WIRE_ETHERTYPE_IPV4 ||
	    p[WIRE_ARP_OFF_HLN] != WIRE_ETH_ALEN || p[WIRE_ARP_OFF_PLN] != WIRE_ARP_PLN_IPV4)
		return -WIRE_BAD_FORMAT;
	v->op = wire_rd16(p + WIRE_ARP_OFF_OP);
	v->sha = p + WIRE_ARP_OFF_SHA;
	v->spa = wire_rdaddr(p + WIRE_ARP_OFF_SPA);
	v->tha = p + WIRE_ARP_OFF_THA;
	v->tpa = wire_rdaddr(p + WIRE_ARP_OFF_TPA);
	return 0;
}

void wire_arp_write(uint8_t *p, uint16_t op, const uint8_t sha[WIRE_ETH_ALEN], uint32_t spa,
		    const uint8_t tha[WIRE_ETH_ALEN], uint32_t tpa)
{
	wire_wr16(p + WIRE_ARP_OFF_HRD, WIRE_ARP_HRD_ETHERNET);
	wire_wr16(p + WIRE_ARP_OFF_PRO, WIRE_ETHERTYPE_IPV4);
	p[WIRE_ARP_OFF_HLN] = WIRE_ETH_ALEN;
	p[WIRE_ARP_OFF_PLN] = WIRE_ARP_PLN_IPV4;
	wire_wr16(p + WIRE_ARP_OFF_OP, op);
	memcpy(p + WIRE_ARP_OFF_SHA, sha, WIRE_ETH_ALEN);
	wire_wraddr(p + WIRE_ARP_OFF_SPA, spa);
	memcpy(p + WIRE_ARP_OFF_THA, tha, WIRE_ETH_ALEN);
	wire_wraddr(p + WIRE_ARP_OFF_TPA, tpa);
}

/* The checks every IPv4 header must pass. A whole datagram must also hold the Total
 * Length it claims; a quote (RFC 792: "the internet header plus the first 64 bits of the
 * original datagram's data") holds what the error could carry, its data is the rest. */
static int ipv4_view(struct wire_ipv4 *v, const uint8_t *p, size_t len, bool quoted)
{
	struct wire_ipv4 o;
	size_t hlen;

	if (!p || len < WIRE_IPV4_HLEN_MIN)
		return -WIRE_TRUNCATED;
	/* RFC 791 §3.1: "Version: 4 bits ... Internet Header Length ... the minimum value
	 * for a correct header is 5." */
	if (p[WIRE_IPV4_OFF_VIHL] >> 4 != WIRE_IPV4_VERSION)
		return -WIRE_BAD_VERSION;
	hlen = (size_t)(p[WIRE_IPV4_OFF_VIHL] & 0x0f) * 4;
	if (hlen < WIRE_IPV4_HLEN_MIN || hlen > len)
		return -WIRE_BAD_HLEN;
	o.hdr = p;
	o.hlen = hlen;
	o.total = wire_rd16(p + WIRE_IPV4_OFF_TOTAL_LEN);
	o.tos = p[WIRE_IPV4_OFF_TOS];
	o.ttl = p[WIRE_IPV4_OFF_TTL];
	o.proto = p[WIRE_IPV4_OFF_PROTOCOL];
	o.id = wire_rd16(p + WIRE_IPV4_OFF_ID);
	o.frag = wire_rd16(p + WIRE_IPV4_OFF_FRAG);
	o.src = wire_rdaddr(p + WIRE_IPV4_OFF_SRC);
	o.dst = wire_rdaddr(p + WIRE_IPV4_OFF_DST);
	o.options = p + WIRE_IPV4_HLEN_MIN;
	o.options_len = hlen - WIRE_IPV4_HLEN_MIN;
	o.data = p + hlen;
	o.data_len = len - hlen;
	if (!quoted) {
		/* "Total Length is the length of the datagram, measured in octets, including
		 * internet header and data": it covers the header, and the link layer may
		 * pad the datagram but never shorten it. */
		if (o.total < hlen || o.total > len)
			return -WIRE_BAD_LENGTH;
		o.data_len = o.total - hlen;
	}
	*v = o;
	return 0;
}

int wire_ipv4_view(struct wire_ipv4 *v, const uint8_t *p, size_t len)
{
	return ipv4_view(v, p, len, false);
}

int wire_ipv4_view_quoted(struct wire_ipv4 *v, const uint8_t *p, size_t len)
{
	return ipv4_view(v, p, len, true);
}

bool wire_ipv4_checksum_ok(const struct wire_ipv4 *v)
{
	/* "the 16 bit one's complement of the one's complement sum of all 16 bit words in
	 * the header": a correct header, checksum included, sums to 0xffff. */
	return wire_sum_finish(wire_sum(0, v->hdr, v->hlen)) == 0;
}

int wire_ipv4_options_check(const struct wire_ipv4 *v)
{
	size_t i = 0, n = v->options_len, len;

	/* RFC 791 §3.1: "Case 1: A single octet of option-type. Case 2: An option-type octet,
	 * an option-length octet, and the actual option-data octets. The option-length octet
	 * counts the option-type octet and the option-length octet as well as the
	 * option-data octets." A length below 2 (which would never advance), one past the
	 * header, or a type with no room for its length cannot be parsed, and RFC 792
	 * (Parameter Problem) has the host "discard the datagram" for "incorrect arguments in
	 * an option". End of Option List ends the walk: what follows it is padding. */
	while (i < n) {
		uint8_t type = v->options[i];

		if (type == WIRE_IPOPT_EOL)
			return 0;
		if (type == WIRE_IPOPT_NOP) {
			i++;
			continue;
		}
		if (n - i < 2)
			return -WIRE_BAD_OPTION;
		len = v->options[i + 1];
		if (len < 2 || len > n - i)
			return -WIRE_BAD_OPTION;
		i += len;
	}
	return 0;
}

void wire_ipv4_write(uint8_t *p, uint8_t proto, uint32_t src, uint32_t dst, uint16_t total,
		     uint16_t id, uint8_t ttl)
{
	memset(p, 0, WIRE_IPV4_HLEN_MIN);
	p[WIRE_IPV4_OFF_VIHL] = WIRE_IPV4_VERSION << 4 | WIRE_IPV4_HLEN_MIN / 4;
	wire_wr16(p + WIRE_IPV4_OFF_TOTAL_LEN, total);
	wire_wr16(p + WIRE_IPV4_OFF_ID, id);
	p[WIRE_IPV4_OFF_TTL] = ttl;
	p[WIRE_IPV4_OFF_PROTOCOL] = proto;
	wire_wraddr(p + WIRE_IPV4_OFF_SRC, src);
	wire_wraddr(p + WIRE_IPV4_OFF_DST, dst);
	wire_wr16(p + WIRE_IPV4_OFF_CHECKSUM, wire_sum_finish(wire_sum(0, p, WIRE_IPV4_HLEN_MIN)));
}

int wire_tcp_view(struct wire_tcp *v, const uint8_t *p, size_t len)
{
	size_t hlen;

	if (!p || len < WIRE_TCP_HLEN_MIN)
		return -WIRE_TRUNCATED;
	/* RFC 9293 §3.1: "Data Offset ... the TCP header (even one including options) is an
	 * integer multiple of 32 bits"; it is at least the 5 words of the fixed header. */
	hlen = (size_t)(p[WIRE_TCP_OFF_DOFF] >> 4) * 4;
	if (hlen < WIRE_TCP_HLEN_MIN || hlen > len)
		return -WIRE_BAD_HLEN;
	v->sport = wire_rd16(p + WIRE_TCP_OFF_SPORT);
	v->dport = wire_rd16(p + WIRE_TCP_OFF_DPORT);
	v->seq = wire_rd32(p + WIRE_TCP_OFF_SEQ);
	v->ack = wire_rd32(p + WIRE_TCP_OFF_ACK);
	v->flags = p[WIRE_TCP_OFF_FLAGS];
	v->window = wire_rd16(p + WIRE_TCP_OFF_WINDOW);
	v->hlen = hlen;
	v->options = p + WIRE_TCP_HLEN_MIN;
	v->options_len = hlen - WIRE_TCP_HLEN_MIN;
	v->payload = p + hlen;
	v->payload_len = len - hlen;
	return 0;
}

void wire_tcp_write(uint8_t *p, uint16_t sport, uint16_t dport, uint32_t seq, uint32_t ack,
		    uint8_t flags, uint16_t window)
{
	memset(p, 0, WIRE_TCP_HLEN_MIN);
	wire_wr16(p + WIRE_TCP_OFF_SPORT, sport);
	wire_wr16(p + WIRE_TCP_OFF_DPORT, dport);
	wire_wr32(p + WIRE_TCP_OFF_SEQ, seq);
	wire_wr32(p + WIRE_TCP_OFF_ACK, ack);
	p[WIRE_TCP_OFF_DOFF] = (WIRE_TCP_HLEN_MIN / 4) << 4;
	p[WIRE_TCP_OFF_FLAGS] = flags;
	wire_wr16(p + WIRE_TCP_OFF_WINDOW, window);
}

int wire_udp_view(struct wire_udp *v, const uint8_t *p, size_t len)
{
	if (!p || len < WIRE_UDP_HLEN)
		return -WIRE_TRUNCATED;
	v->sport = wire_rd16(p + WIRE_UDP_OFF_SPORT);
	v->dport = wire_rd16(p + WIRE_UDP_OFF_DPORT);
	v->len = wire_rd16(p + WIRE_UDP_OFF_LEN);
	v->checksum = wire_rd16(p + WIRE_UDP_OFF_CHECKSUM);
	v->payload = p + WIRE_UDP_HLEN;
	v->payload_len = len - WIRE_UDP_HLEN;
	return 0;
}

_Static_assert(WIRE_ICMPV6_HLEN == WIRE_ICMP_HLEN &&
	       WIRE_ICMPV6_OFF_CHECKSUM == WIRE_ICMP_OFF_CHECKSUM, "RFC 4443 §2.1: RFC 792's header");

int wire_icmp_view(struct wire_icmp *v, const uint8_t *p, size_t len)
{
	if (!p || len < WIRE_ICMP_HLEN)
		return -WIRE_TRUNCATED;
	v->type = p[WIRE_ICMP_OFF_TYPE];
	v->code = p[WIRE_ICMP_OFF_CODE];
	v->checksum = wire_rd16(p + WIRE_ICMP_OFF_CHECKSUM);
	v->rest = p + 4;
	v->body = p + WIRE_ICMP_HLEN;
	v->body_len = len - WIRE_ICMP_HLEN;
	return 0;
}

/* As ipv4_view: a whole packet must hold the Payload Length it claims, a quote (RFC 4443
 * §2.4 (c): "as much of invoking packet as possible") only the fixed header. */
static int ipv6_view(struct wire_ipv6 *v, const uint8_t *p, size_t len, bool quoted)
{
	struct wire_ipv6 o;
	uint32_t vtcfl;

	if (!p || len < WIRE_IPV6_HLEN)
		return -WIRE_TRUNCATED;
	vtcfl = wire_rd32(p + WIRE_IPV6_OFF_VTCFL);
	/* RFC 8200 §3: "Version 4-bit Internet Protocol version number = 6." */
	if (vtcfl >> 28 != WIRE_IPV6_VERSION)
		return -WIRE_BAD_VERSION;
	o.hdr = p;
	o.tclass = (uint8_t)(vtcfl >> 20);
	o.flow = vtcfl & 0xfffff;
	o.plen = wire_rd16(p + WIRE_IPV6_OFF_PLEN);
	o.next = p[WIRE_IPV6_OFF_NEXT];
	o.hlim = p[WIRE_IPV6_OFF_HLIM];
	o.src = p + WIRE_IPV6_OFF_SRC;
	o.dst = p + WIRE_IPV6_OFF_DST;
	o.payload = p + WIRE_IPV6_HLEN;
	o.payload_len = len - WIRE_IPV6_HLEN;
	if (!quoted) {
		/* §3: "Payload Length ... the rest of the packet following this IPv6
		 * header": the link layer may pad the packet but never shorten it. */
		if ((size_t)WIRE_IPV6_HLEN + o.plen > len)
			return -WIRE_BAD_LENGTH;
		o.payload_len = o.plen;
	}
	*v = o;
	return 0;
}

int wire_ipv6_view(struct wire_ipv6 *v, const uint8_t *p, size_t len)
{
	return ipv6_view(v, p, len, false);
}

int wire_ipv6_view_quoted(struct wire_ipv6 *v, const uint8_t *p, size_t len)
{
	return ipv6_view(v, p, len, true);
}

int wire_ipv6_upper(struct wire_ipv6_upper *u, const struct wire_ipv6 *v)
{
	struct wire_ipv6_upper o = { .proto = v->next, .off = WIRE_IPV6_HLEN,
				     .nh_off = WIRE_IPV6_OFF_NEXT };
	size_t end = WIRE_IPV6_HLEN + v->payload_len;

	for (;;) {
		const uint8_t *h = v->hdr + o.off;
		size_t hlen;

		switch (o.proto) {
		case WIRE_IPPROTO_HOPOPTS:
			/* §4.1: only directly after the IPv6 header. */
			if (o.nhdrs)
				return -WIRE_BAD_FORMAT;
			/* fall through */
		case WIRE_IPPROTO_ROUTING:
		case WIRE_IPPROTO_DSTOPTS:
			if (end - o.off < 2)
				return -WIRE_BAD_LENGTH;
			/* §4.3: "Hdr Ext Len ... in 8-octet units, not including the first
			 * 8 octets". */
			hlen = ((size_t)h[1] + 1) * WIRE_IPV6_EXT_UNIT;
			break;
		case WIRE_IPPROTO_FRAGMENT:
			hlen = WIRE_IPV6_FRAG_HLEN;
			if (end - o.off < hlen)
				return -WIRE_BAD_LENGTH;
			o.fragment = true;
			o.frag_off = wire_rd16(h + 2) & WIRE_IPV6_FRAG_OFFMASK;
			o.frag_more = (wire_rd16(h + 2) & WIRE_IPV6_FRAG_M) != 0;
			o.frag_id = wire_rd32(h + 4);
			o.frag_data_off = o.off + hlen;
			if (o.frag_off) {
				/* §4.5: a later fragment's data is the middle of the
				 * fragmentable part, not more headers. */
				o.nhdrs++;
				o.proto = h[0];
				o.nh_off = o.off;
				o.off += hlen;
				*u = o;
				return 0;
			}
			break;
		default:
			*u = o;
			return 0;
		}
		if (end - o.off < hlen)
			return -WIRE_BAD_LENGTH;
		if (++o.nhdrs > WIRE_IPV6_EXT_MAX)
			return -WIRE_TOO_DEEP;
		o.proto = h[0];
		o.nh_off = o.off;
		o.off += hlen;
	}
}

void wire_ipv6_write(uint8_t *p, uint8_t next, const uint8_t src[WIRE_IPV6_ALEN],
		     const uint8_t dst[WIRE_IPV6_ALEN], uint16_t plen, uint8_t hlim)
{
	wire_wr32(p + WIRE_IPV6_OFF_VTCFL, (uint32_t)WIRE_IPV6_VERSION << 28);
	wire_wr16(p + WIRE_IPV6_OFF_PLEN, plen);
	p[WIRE_IPV6_OFF_NEXT] = next;
	p[WIRE_IPV6_OFF_HLIM] = hlim;
	memmove(p + WIRE_IPV6_OFF_SRC, src, WIRE_IPV6_ALEN);
	memmove(p + WIRE_IPV6_OFF_DST, dst, WIRE_IPV6_ALEN);
}

uint32_t wire_sum_pseudo6(uint32_t sum, const uint8_t src[WIRE_IPV6_ALEN],
			  const uint8_t dst[WIRE_IPV6_ALEN], uint8_t next, uint32_t len)
{
	uint8_t tail[8];

	sum = wire_sum(sum, src, WIRE_IPV6_ALEN);
	sum = wire_sum(sum, dst, WIRE_IPV6_ALEN);
	wire_wr32(tail, len);
	tail[4] = tail[5] = tail[6] = 0;
	tail[7] = next;
	return wire_sum(sum, tail, sizeof(tail));
}

void wire_ipv6_solicited_node(uint8_t out[WIRE_IPV6_ALEN], const uint8_t addr[WIRE_IPV6_ALEN])
{
	static const uint8_t prefix[13] = { 0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff };
	uint8_t low[3];

	memcpy(low, addr + 13, 3);   /* out may be addr */
	memcpy(out, prefix, sizeof(prefix));
	memcpy(out + 13, low, 3);
}

void wire_ipv6_mcast_mac(uint8_t out[WIRE_ETH_ALEN], const uint8_t addr[WIRE_IPV6_ALEN])
{
	out[0] = WIRE_ETH_IPV6_MCAST0;
	out[1] = WIRE_ETH_IPV6_MCAST1;
	memcpy(out + 2, addr + 12, 4);
}

void wire_ipv6_link_local(uint8_t out[WIRE_IPV6_ALEN], const uint8_t mac[WIRE_ETH_ALEN])
{
	memset(out, 0, WIRE_IPV6_ALEN);
	out[0] = 0xfe;
	out[1] = 0x80;
	out[8] = mac[0] ^ 0x02;      /* Appendix A: "inverting the 'u' bit" */
	out[9] = mac[1];
	out[10] = mac[2];
	out[11] = 0xff;
	out[12] = 0xfe;
	out[13] = mac[3];
	out[14] = mac[4];
	out[15] = mac[5];
}

bool wire_icmpv6_checksum_ok(const uint8_t src[WIRE_IPV6_ALEN],
			     const uint8_t dst[WIRE_IPV6_ALEN], const uint8_t *p, size_t len)
{
	uint32_t sum = wire_sum_pseudo6(0, src, dst, WIRE_IPPROTO_ICMPV6, (uint32_t)len);

	return wire_sum_finish(wire_sum(sum, p, len)) == 0;
}

void wire_icmpv6_set_checksum(const uint8_t src[WIRE_IPV6_ALEN],
			      const uint8_t dst[WIRE_IPV6_ALEN], uint8_t *p, size_t len)
{
	uint32_t sum = wire_sum_pseudo6(0, src, dst, WIRE_IPPROTO_ICMPV6, (uint32_t)len);

	wire_wr16(p + WIRE_ICMPV6_OFF_CHECKSUM, 0);
	/* RFC 8200 §8.1: unlike UDP's, a computed 0 is sent as 0 (ICMPv6 has no "no
	 * checksum" value to avoid). */
	wire_wr16(p + WIRE_ICMPV6_OFF_CHECKSUM, wire_sum_finish(wire_sum(sum, p, len)));
}

int wire_nd_view(struct wire_nd *v, const uint8_t *p, size_t len)
{
	struct wire_nd o = { 0 };
	uint8_t want;
	size_t off;

	if (!p || len < WIRE_ND_NS_LEN)
		return -WIRE_TRUNCATED;
	o.type = p[WIRE_ICMPV6_OFF_TYPE];
	o.code = p[WIRE_ICMPV6_OFF_CODE];
	if (o.type == WIRE_ND_NEIGHBOR_SOLICIT)
		want = WIRE_ND_OPT_SRC_LLADDR;
	else if (o.type == WIRE_ND_NEIGHBOR_ADVERT)
		want = WIRE_ND_OPT_TGT_LLADDR;
	else
		return -WIRE_BAD_FORMAT;
	o.flags = o.type == WIRE_ND_NEIGHBOR_ADVERT ? p[WIRE_ND_OFF_FLAGS] : 0;
	o.target = p + WIRE_ND_OFF_TARGET;
	o.options = p + WIRE_ND_NS_LEN;
	o.options_len = len - WIRE_ND_NS_LEN;
	/* §4.6: "Length ... in units of 8 octets ... The value 0 is invalid." */
	for (off = 0; off < o.options_len;) {
		const uint8_t *opt = o.options + off;
		size_t olen;

		if (o.options_len - off < 2)
			return -WIRE_BAD_LENGTH;
		olen = (size_t)opt[1] * WIRE_ND_OPT_UNIT;
		if (olen == 0)
			return -WIRE_BAD_FORMAT;
		if (olen > o.options_len - off)
			return -WIRE_BAD_LENGTH;
		/* §4.6.1: for Ethernet the address is 6 octets in a length-1 option; the
		 * first one counts ("options ... they MAY appear ... any number of times"
		 * does not hold for this one, but a second copy is not a reason to drop). */
		if (opt[0] == want && !o.lladdr && olen >= 2 + WIRE_ETH_ALEN)
			o.lladdr = opt + 2;
		off += olen;
	}
	*v = o;
	return 0;
}

int wire_vnet_view(struct wire_vnet *v, const uint8_t *p, size_t len)
{
	if (!p || len < WIRE_VNET_HLEN)
		return -WIRE_TRUNCATED;
	v->flags = p[WIRE_VNET_OFF_FLAGS];
	v->gso_type = p[WIRE_VNET_OFF_GSO_TYPE];
	v->hdr_len = wire_rdle16(p + WIRE_VNET_OFF_HDR_LEN);
	v->gso_size = wire_rdle16(p + WIRE_VNET_OFF_GSO_SIZE);
	v->csum_start = wire_rdle16(p + WIRE_VNET_OFF_CSUM_START);
	v->csum_offset = wire_rdle16(p + WIRE_VNET_OFF_CSUM_OFFSET);
	return 0;
}

void wire_vnet_write(uint8_t p[WIRE_VNET_HLEN], const struct wire_vnet *v)
{
	p[WIRE_VNET_OFF_FLAGS] = v->flags;
	p[WIRE_VNET_OFF_GSO_TYPE] = v->gso_type;
	wire_wrle16(p + WIRE_VNET_OFF_HDR_LEN, v->hdr_len);
	wire_wrle16(p + WIRE_VNET_OFF_GSO_SIZE, v->gso_size);
	wire_wrle16(p + WIRE_VNET_OFF_CSUM_START, v->csum_start);
	wire_wrle16(p + WIRE_VNET_OFF_CSUM_OFFSET, v->csum_offset);
}
