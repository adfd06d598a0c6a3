/* The per-frame decisions: who receives a frame, and may a process send one (filter.h).
 *
 * Read first: RFC 791 §3.2 (fragments), RFC 1122 §3.2.2 (ICMP errors go to the transport
 * endpoint they concern), RFC 826 (ARP).
 *
 * Both run once per frame on the data path. Each is a constant number of hash probes
 * (two at most, plus one score per member of a shared group), independent of the number
 * of rules in the table.
 */
#include "filter/internal.h"

#include <string.h>

/* The owner of the endpoint (proto, lport) for traffic with the remote (rip, rport), or
 * FLT_NO_OWNER. *via_listen says which kind of rule answered. */
static flt_owner_t endpoint_owner(const struct flt_table *t, uint8_t proto,
				  const struct flt_addr *lip, uint16_t lport,
				  const struct flt_addr *rip, uint16_t rport, bool *via_listen)
{
	const struct flt__slot *s;
	uint8_t fam = flt_addr_is_v4(rip) ? FLT_FAM_V4 : FLT_FAM_V6;

	*via_listen = false;
	s = flt__find(t, FLT_RULE_CONNECTED, proto, 0, lport, rip, rport);
	if (s)
		return s->owner;
	s = flt__find(t, FLT_RULE_LISTEN, proto, fam, lport, NULL, 0);
	if (!s)
		return FLT_NO_OWNER;
	*via_listen = true;
	return flt__group_pick(t, s->group, rip, rport, lip, lport);
}

static flt_owner_t endpoint_owner4(const struct flt_table *t, uint8_t proto, uint32_t lip,
				   uint16_t lport, uint32_t rip, uint16_t rport, bool *via_listen)
{
	struct flt_addr l = flt_addr_v4(lip), r = flt_addr_v4(rip);

	return endpoint_owner(t, proto, &l, lport, &r, rport, via_listen);
}

/* RFC 8200: the same decisions for an IPv6 packet, in the IPv6 groups. */
static flt_owner_t lookup_rx6(const struct flt_table *t, const struct flt_pkt *p,
			      bool *via_listen, bool *icmp)
{
	struct flt_addr l, r;

	if (p->has_ports) {
		l = flt_addr_v6(p->ip6.dst);
		r = flt_addr_v6(p->ip6.src);
		return endpoint_owner(t, p->ip6.proto, &l, p->dport, &r, p->sport, via_listen);
	}
	if (p->ip6.proto == WIRE_IPPROTO_ICMPV6 && p->icmp.has_inner &&
	    p->icmp.inner.has_ports) {
		/* RFC 4443 §2.4 (b): an error goes to the upper-layer process that sent the
		 * quoted packet; its source is the local end. */
		l = flt_addr_v6(p->icmp.inner.src6);
		r = flt_addr_v6(p->icmp.inner.dst6);
		*icmp = true;
		return endpoint_owner(t, p->icmp.inner.proto, &l, p->icmp.inner.sport, &r,
				      p->icmp.inner.dport, via_listen);
	}
	return FLT_NO_OWNER;
}

flt_owner_t flt_lookup_rx(const struct flt_table *t, const struct flt_pkt *p)
{
	struct flt_stats *st = t->stats;
	flt_owner_t owner = FLT_NO_OWNER;
	bool via_listen = false, icmp = false;

	st->rx_lookups++;
	if (p->ethertype == WIRE_ETHERTYPE_IPV6) {
		/* RFC 8200 §4.5: fragments are the server's to reassemble, as in IPv4. */
		if (p->ip6.fragment) {
			st->rx_fragment++;
			return FLT_NO_OWNER;
		}
		owner = lookup_rx6(t, p, &via_listen, &icmp);
		goto found;
	}
	if (p->ethertype != WIRE_ETHERTYPE_IPV4) {
		st->rx_no_owner++;
		return FLT_NO_OWNER;
	}
	/* RFC 791 §3.2: only the whole datagram can be demultiplexed. The first fragment
	 * has ports, but the others would not follow it, so all of them go to the server,
	 * which reassembles and delivers the datagram. */
	if (p->ip.fragment) {
		st->rx_fragment++;
		return FLT_NO_OWNER;
	}
	if (p->has_ports) {
		owner = endpoint_owner4(t, p->ip.proto, p->ip.dst, p->dport, p->ip.src, p->sport,
					&via_listen);
	} else if (p->ip.proto == WIRE_IPPROTO_ICMP && p->icmp.has_inner &&
		   p->icmp.inner.has_ports) {
		/* RFC 1122 §3.2.2: an ICMP error "MUST be passed to" the transport layer
		 * of the endpoint that sent the quoted datagram. We sent it, so its source
		 * is the local end. */
		owner = endpoint_owner4(t, p->icmp.inner.proto, p->icmp.inner.src,
					p->icmp.inner.sport, p->icmp.inner.dst,
					p->icmp.inner.dport, &via_listen);
		icmp = true;
	}
found:
	if (owner == FLT_NO_OWNER) {
		st->rx_no_owner++;
		return FLT_NO_OWNER;
	}
	if (via_listen)
		st->rx_listen++;
	else
		st->rx_connected++;
	if (icmp)
		st->rx_icmp_error++;
	return owner;
}

/* May owner send from (proto, lport) to (rip, rport)? A connected rule for the exact
 * tuple decides alone, so a member of a shared listening group cannot write into a
 * connection another member owns. Without one, owner must be in the listening group of
 * the port; for TCP on a shared port it must also be the member that would receive the
 * connection's segments, since a listener only ever answers segments delivered to it.
 * UDP senders on a shared port may send anywhere, as with SO_REUSEPORT on Linux. */
static int may_use_addr(const struct flt_table *t, flt_owner_t owner, uint8_t proto,
			const struct flt_addr *l, uint16_t lport, const struct flt_addr *r,
			uint16_t rport)
{
	const struct flt__slot *s;
	uint8_t fam = flt_addr_is_v4(r) ? FLT_FAM_V4 : FLT_FAM_V6;

	s = flt__find(t, FLT_RULE_CONNECTED, proto, 0, lport, r, rport);
	if (s)
		return s->owner == owner ? 0 : -FLT_DENY_PORT;
	s = flt__find(t, FLT_RULE_LISTEN, proto, fam, lport, NULL, 0);
	if (!s || !flt__group_has(s->group, owner))
		return -FLT_DENY_PORT;
	if (proto == WIRE_IPPROTO_TCP && s->group->n > 1 &&
	    flt__group_pick(t, s->group, r, rport, l, lport) != owner)
		return -FLT_DENY_SHARED_PEER;
	return 0;
}

static int may_use(const struct flt_table *t, flt_owner_t owner, uint8_t proto, uint32_t lip,
		   uint16_t lport, uint32_t rip, uint16_t rport)
{
	struct flt_addr l = flt_addr_v4(lip), r = flt_addr_v4(rip);

	return may_use_addr(t, owner, proto, &l, lport, &r, rport);
}

static int check_arp(const struct flt_pkt *p, uint32_t node_ip, const uint8_t *node_mac)
{
	/* RFC 826: a process may ask and answer for the node's own address and nothing
	 * else: sender fields are what other hosts put in their caches. */
	if (p->arp.op != WIRE_ARP_OP_REQUEST && p->arp.op != WIRE_ARP_OP_REPLY)
		return -FLT_DENY_ARP;
	if (p->arp.spa != node_ip || memcmp(p->arp.sha, node_mac, WIRE_ETH_ALEN) != 0)
		return -FLT_DENY_ARP;
	return 0;
}

/* ICMP a process may send: echo request and reply (RFC 792), and destination
 * unreachable about a datagram that was delivered to one of its own endpoints (lwIP
 * answers a UDP datagram for a closed port with port unreachable, RFC 1122 §4.1.3.1).
 * Everything else (redirects, time exceeded, ...) is the node's business, not a
 * process's.
 * Deviation: the echo identifier is not tied to the sender; echo replies reach the
 * server, not the process, so a process can ping but cannot see the answer. */
static int check_icmp(const struct flt_table *t, const struct flt_pkt *p, flt_owner_t owner,
		      uint32_t node_ip)
{
	switch (p->icmp.type) {
	case WIRE_ICMP_ECHO_REPLY:
	case WIRE_ICMP_ECHO:
		return 0;
	case WIRE_ICMP_DEST_UNREACH:
		/* The quoted datagram came to us: its destination is the local end. */
		if (!p->icmp.has_inner || !p->icmp.inner.has_ports ||
		    p->icmp.inner.dst != node_ip ||
		    may_use(t, owner, p->icmp.inner.proto, node_ip, p->icmp.inner.dport,
			    p->icmp.inner.src, p->icmp.inner.sport) < 0)
			return -FLT_DENY_ICMP;
		return 0;
	default:
		return -FLT_DENY_ICMP;
	}
}

static int check_ipv4(const struct flt_table *t, const struct flt_pkt *p, flt_owner_t owner,
		      uint32_t node_ip)
{
	if (p->ip.src != node_ip)
		return -FLT_DENY_SRC_IP;
	/* Deviation: a fragment after the first carries no ports, so all we can check is
	 * that it comes from the node. A process could forge the later fragments of a
	 * datagram another process sends, if it guessed the IP Identification; it cannot
	 * send a datagram as another endpoint, because the first fragment is checked. */
	if (p->ip.frag_off != 0)
		return 0;
	switch (p->ip.proto) {
	case WIRE_IPPROTO_TCP:
	case WIRE_IPPROTO_UDP:
		if (!p->has_ports)
			return -FLT_DENY_PORT;
		return may_use(t, owner, p->ip.proto, node_ip, p->sport, p->ip.dst, p->dport);
	case WIRE_IPPROTO_ICMP:
		return check_icmp(t, p, owner, node_ip);
	default:
		return -FLT_DENY_PROTO;
	}
}

void flt_table_set_node_ip6(struct flt_table *t, const uint8_t global[16],
			    const uint8_t link_local[16])
{
	memcpy(t->ip6[0], global, 16);
	memcpy(t->ip6[1], link_local, 16);
	t->has_ip6 = true;
}

/* RFC 8200: an IPv6 frame from a process, as check_ipv4 for IPv4. */
static int check_ipv6(const struct flt_table *t, const struct flt_pkt *p, flt_owner_t owner,
		      const uint8_t node_mac[WIRE_ETH_ALEN])
{
	struct flt_addr l, r;

	if (!t->has_ip6)
		return -FLT_DENY_PROTO;
	if (memcmp(p->ip6.src, t->ip6[0], 16) != 0 && memcmp(p->ip6.src, t->ip6[1], 16) != 0)
		return -FLT_DENY_SRC_IP;
	/* Deviation (as IPv4): a fragment after the first carries no ports; only its source
	 * is checked. A first fragment's ports are parsed (parse.c) and checked below, as
	 * an IPv4 first fragment's are, so a datagram can only be sent as its own
	 * endpoint. */
	if (p->ip6.fragment && p->ip6.frag_off)
		return 0;
	l = flt_addr_v6(p->ip6.src);
	r = flt_addr_v6(p->ip6.dst);
	switch (p->ip6.proto) {
	case WIRE_IPPROTO_TCP:
	case WIRE_IPPROTO_UDP:
		if (!p->has_ports)
			return -FLT_DENY_PORT;
		return may_use_addr(t, owner, p->ip6.proto, &l, p->sport, &r, p->dport);
	case WIRE_IPPROTO_ICMPV6:
		switch (p->icmp.type) {
		case WIRE_ICMPV6_ECHO_REQUEST:
		case WIRE_ICMPV6_ECHO_REPLY:
			return 0;
		case WIRE_ND_NEIGHBOR_SOLICIT:
			/* RFC 4861 §7.2.2: the process's lwIP resolves its own peers. Its
			 * answers reach it as copies (server/demux.c); a process never
			 * answers a solicitation (the node does, server/reply6.c), so it
			 * sends no NA. The solicitation names the node's link-layer address,
			 * or none: another's would point the peer's cache elsewhere (as the
			 * direct path's transmit check rules). */
			return p->icmp.has_lladdr && memcmp(p->icmp.lladdr, node_mac, WIRE_ETH_ALEN)
				       ? -FLT_DENY_ICMP : 0;
		case WIRE_ICMPV6_DST_UNREACH:
			/* RFC 4443 §3.1, about a packet delivered to one of its endpoints: the
			 * quoted packet's destination is the local end. */
			if (!p->icmp.has_inner || !p->icmp.inner.has_ports)
				return -FLT_DENY_ICMP;
			l = flt_addr_v6(p->icmp.inner.dst6);
			r = flt_addr_v6(p->icmp.inner.src6);
			if ((memcmp(l.b, t->ip6[0], 16) && memcmp(l.b, t->ip6[1], 16)) ||
			    may_use_addr(t, owner, p->icmp.inner.proto, &l, p->icmp.inner.dport, &r,
					 p->icmp.inner.sport) < 0)
				return -FLT_DENY_ICMP;
			return 0;
		default:
			return -FLT_DENY_ICMP;
		}
	default:
		return -FLT_DENY_PROTO;
	}
}

int flt_check_tx(const struct flt_table *t, const struct flt_pkt *p, flt_owner_t owner,
		 uint32_t node_ip, const uint8_t node_mac[WIRE_ETH_ALEN])
{
	int ret;

	t->stats->tx_checks++;
	if (memcmp(p->src_mac, node_mac, WIRE_ETH_ALEN) != 0)
		ret = -FLT_DENY_SRC_MAC;
	else if (p->ethertype == WIRE_ETHERTYPE_ARP)
		ret = check_arp(p, node_ip, node_mac);
	else if (p->ethertype == WIRE_ETHERTYPE_IPV4)
		ret = check_ipv4(t, p, owner, node_ip);
	else if (p->ethertype == WIRE_ETHERTYPE_IPV6)
		ret = check_ipv6(t, p, owner, node_mac);
	else
		ret = -FLT_DENY_PROTO;
	if (ret < 0)
		t->stats->tx_deny[FLT_REASON_INDEX(-ret)]++;
	else
		t->stats->tx_allowed++;
	return ret;
}
