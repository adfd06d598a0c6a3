/* IPv6 for the node: neighbour discovery, echo, and the answers for packets nobody owns.
 *
 * Read first: RFC 8200 §3-4 (header, extension headers), RFC 4443 §2-4 (ICMPv6), RFC
 * 4861 §4.3-4.4, §7.1 and §7.2 (Neighbor Solicitation and Advertisement), RFC 4291 §2.5.6
 * and §2.7.1 (link-local and solicited-node addresses), RFC 9293 §3.10.7.1 (a segment for
 * a CLOSED connection). server/reply.c is the IPv4 twin; the answers here keep its rules,
 * rate limits and counters.
 *
 * The IPv6 frames for the node that no process owns end here (demux.c's relay_ip6 gives
 * processes theirs), from the relay's demultiplexer and, on a direct-path node, from queue
 * 0. ulsd's own neighbour cache (neigh6.h) learns from the solicitations and advertisements
 * that arrive here and resolves the peers of custody's probes (RFC 4861 §7.2.2-7.2.5).
 *
 * Every function here runs on the demux thread with s->lock held and reads the frame only
 * through netif/wire's bounds-checked views.
 */
#include "server/internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "netif/wire/wire.h"

#define ETH_HLEN  WIRE_ETH_HLEN
#define IP6_HLEN  WIRE_IPV6_HLEN
#define TCP_HLEN  WIRE_TCP_HLEN_MIN
#define ICMP6_HLEN WIRE_ICMPV6_HLEN
#define NA_LEN    (WIRE_ND_NA_LEN + WIRE_ND_OPT_LLADDR_LEN)
#define NS_LEN    (WIRE_ND_NS_LEN + WIRE_ND_OPT_LLADDR_LEN)
/* RFC 4443 §3.4: Parameter Problem code 1, "unrecognized Next Header type encountered". */
#define PARAM_PROB_NEXT_HEADER 1
/* Code 2, "unrecognized IPv6 option encountered". */
#define PARAM_PROB_OPTION 2

/* A frame being answered: the views of the packet and where its upper layer is. */
struct in6 {
	const uint8_t *frame;
	size_t len;
	struct wire_eth eth;
	struct wire_ipv6 ip;
	struct wire_ipv6_upper up;
	const uint8_t *l4;          /* the upper-layer header */
	size_t l4_len;
};

static const uint8_t all_nodes[WIRE_IPV6_ALEN] = { 0xff, 0x02, [15] = 1 };

bool srv__is_node_ip6(const struct srv *s, const uint8_t *a)
{
	return s->has_ip6 && (memcmp(a, s->ip6, WIRE_IPV6_ALEN) == 0 ||
			      memcmp(a, s->ip6_ll, WIRE_IPV6_ALEN) == 0);
}

/* A multicast group the node listens to: all-nodes (RFC 4291 §2.7.1) and the solicited-node
 * groups of its addresses (RFC 4861 §7.2.1 "join the solicited-node multicast address"). */
static bool is_node_group(const struct srv *s, const uint8_t *a)
{
	uint8_t g[WIRE_IPV6_ALEN];

	if (memcmp(a, all_nodes, WIRE_IPV6_ALEN) == 0)
		return true;
	wire_ipv6_solicited_node(g, s->ip6);
	if (memcmp(a, g, WIRE_IPV6_ALEN) == 0)
		return true;
	wire_ipv6_solicited_node(g, s->ip6_ll);
	return memcmp(a, g, WIRE_IPV6_ALEN) == 0;
}

static bool is_link_local(const uint8_t *a)
{
	return a[0] == 0xfe && (a[1] & 0xc0) == 0x80;   /* RFC 4291 §2.5.6: fe80::/10 */
}

/* The node's address an answer to this packet comes from: the one it was sent to, or for a
 * packet to a group, the address of the peer's scope (RFC 4443 §2.2 (b): "the Source
 * Address of the ICMPv6 packet MUST be a unicast address belonging to the node"). */
static const uint8_t *reply_src(const struct srv *s, const struct in6 *in)
{
	if (srv__is_node_ip6(s, in->ip.dst))
		return in->ip.dst;
	return is_link_local(in->ip.src) ? s->ip6_ll : s->ip6;
}

/* Ethernet and IPv6 headers in front of plen octets of next at f. */
static void put_headers(struct srv *s, uint8_t *f, const uint8_t dst_mac[WIRE_ETH_ALEN],
			const uint8_t *src, const uint8_t *dst, uint8_t next, size_t plen,
			uint8_t hlim)
{
	wire_eth_write(f, dst_mac, s->mac, WIRE_ETHERTYPE_IPV6);
	wire_ipv6_write(f + ETH_HLEN, next, src, dst, (uint16_t)plen, hlim);
}

/* RFC 4443 §2.4 (e): no error about an error, nor about a packet to a group, link-layer
 * multicast or broadcast, or from an address that does not name one node. */
static bool may_send_error(const struct in6 *in)
{
	return !wire_ipv6_is_multicast(in->ip.dst) && !wire_eth_is_group(in->eth.dst) &&
	       !wire_ipv6_is_unspecified(in->ip.src);
}

/* An ICMPv6 error about in's packet: as much of it as fits in the minimum MTU (RFC 4443
 * §2.4 (c)), within the node's ICMP rate limit (§2.4 (f)). 0, or -1 when not sent. */
static int send_error(struct srv *s, const struct in6 *in, uint8_t type, uint8_t code,
		      uint32_t word)
{
	uint8_t f[ETH_HLEN + WIRE_ICMPV6_ERROR_MAX];
	uint8_t *ip = f + ETH_HLEN, *icmp = ip + IP6_HLEN;
	size_t quote = IP6_HLEN + in->ip.payload_len;

	if (!srv__tokens_allow(&s->icmp_tokens_ms, &s->icmp_tokens, SRV_ICMP_RATE_PER_S)) {
		s->ctr.v[SRV_DROP_ICMP_RATE]++;
		return -1;
	}
	if (quote > WIRE_ICMPV6_ERROR_MAX - IP6_HLEN - ICMP6_HLEN)
		quote = WIRE_ICMPV6_ERROR_MAX - IP6_HLEN - ICMP6_HLEN;
	const uint8_t *src = reply_src(s, in);
	put_headers(s, f, in->eth.src, src, in->ip.src, WIRE_IPPROTO_ICMPV6, ICMP6_HLEN + quote,
		    WIRE_IPV6_DEFAULT_HLIM);
	icmp[WIRE_ICMPV6_OFF_TYPE] = type;
	icmp[WIRE_ICMPV6_OFF_CODE] = code;
	wire_wr32(icmp + 4, word);
	memcpy(icmp + ICMP6_HLEN, in->ip.hdr, quote);
	wire_icmpv6_set_checksum(src, in->ip.src, icmp, ICMP6_HLEN + quote);
	srv__send_frame(s, f, ETH_HLEN + IP6_HLEN + ICMP6_HLEN + quote);
	return 0;
}

/* RFC 8200 §4.2: the options of the Hop-by-Hop and Destination Options headers of in's
 * packet. Pad1 and PadN are skipped; for any other type, which the node does not
 * recognize, "the highest-order two bits of the Option Type specify the action": 00 skip,
 * 01 discard, 10 discard and send Parameter Problem code 2 pointing at the option type,
 * 11 the same unless the destination is multicast. 0: process the packet; -1: discarded
 * (and counted, answered). An option past its header is a malformed header: discarded. */
static int check_options(struct srv *s, const struct in6 *in)
{
	const uint8_t *ip = in->ip.hdr;
	uint8_t next = in->ip.next;
	size_t off = IP6_HLEN;

	for (unsigned n = 0; n < in->up.nhdrs; n++) {
		size_t hlen = next == WIRE_IPPROTO_FRAGMENT ? WIRE_IPV6_FRAG_HLEN :
			      ((size_t)ip[off + 1] + 1) * WIRE_IPV6_EXT_UNIT;

		/* wire_ipv6_upper walked this chain: every header lies within the payload. */
		if (next == WIRE_IPPROTO_HOPOPTS || next == WIRE_IPPROTO_DSTOPTS) {
			for (size_t o = off + 2; o < off + hlen;) {
				uint8_t type = ip[o];
				if (type == 0) {              /* Pad1 */
					o++;
					continue;
				}
				if (o + 2 > off + hlen || o + 2 + ip[o + 1] > off + hlen) {
					s->ctr.v[SRV_DROP_IPV6_EXT_HEADERS]++;
					return -1;
				}
				unsigned action = type >> 6;
				if (type != 1 && action != 0) {   /* not PadN, not "skip" */
					s->ctr.v[SRV_DROP_IPV6_OPTION]++;
					if ((action == 2 || (action == 3 &&
							     !wire_ipv6_is_multicast(in->ip.dst))) &&
					    !wire_ipv6_is_unspecified(in->ip.src) &&
					    send_error(s, in, WIRE_ICMPV6_PARAM_PROB,
						       PARAM_PROB_OPTION, (uint32_t)o) == 0)
						s->ctr.v[SRV_ICMPV6_PARAM_PROB_SENT]++;
					return -1;
				}
				o += 2 + (size_t)ip[o + 1];
			}
		}
		next = ip[off];
		off += hlen;
	}
	return 0;
}

/* RFC 4443 §4.2: "The data received in the ICMPv6 Echo Request message MUST be returned
 * entirely and unmodified in the ICMPv6 Echo Reply message." §4.1 asks a reply to a
 * request sent to a group too ("SHOULD be sent"), from a unicast address of the node;
 * ulsd answers those to all-nodes and its solicited-node groups, as Linux does by default
 * (net.ipv6.icmp.echo_ignore_multicast 0). */
static void reply_echo(struct srv *s, const struct in6 *in)
{
	static uint8_t f[ETH_HLEN + IP6_HLEN + 65535];
	uint8_t *icmp = f + ETH_HLEN + IP6_HLEN;
	const uint8_t *src = reply_src(s, in);

	put_headers(s, f, in->eth.src, src, in->ip.src, WIRE_IPPROTO_ICMPV6, in->l4_len,
		    WIRE_IPV6_DEFAULT_HLIM);
	memcpy(icmp, in->l4, in->l4_len);
	icmp[WIRE_ICMPV6_OFF_TYPE] = WIRE_ICMPV6_ECHO_REPLY;
	icmp[WIRE_ICMPV6_OFF_CODE] = 0;
	wire_icmpv6_set_checksum(src, in->ip.src, icmp, in->l4_len);
	/* A reassembled request may be longer than the link: so is its reply. */
	srv__send_ip6(s, f, ETH_HLEN + IP6_HLEN + in->l4_len);
	s->ctr.v[SRV_ICMP_ECHO_REPLIES]++;
}

/* RFC 4861 §7.1.1 and §7.1.2: what every NS and NA must be to be considered at all. */
static bool nd_valid(const struct in6 *in, const struct wire_nd *nd)
{
	/* "The IP Hop Limit field has a value of 255, i.e., the packet could not possibly
	 * have been forwarded by a router"; "ICMP Code is 0"; "Target Address is not a
	 * multicast address". Length and options: wire_nd_view. */
	if (in->ip.hlim != WIRE_ND_HOP_LIMIT || nd->code != 0 ||
	    wire_ipv6_is_multicast(nd->target))
		return false;
	if (nd->type == WIRE_ND_NEIGHBOR_SOLICIT && wire_ipv6_is_unspecified(in->ip.src)) {
		/* "If the IP source address is the unspecified address, the IP destination
		 * address is a solicited-node multicast address" and "there is no source
		 * link-layer address option in the message." */
		uint8_t g[WIRE_IPV6_ALEN];
		wire_ipv6_solicited_node(g, nd->target);
		if (memcmp(in->ip.dst, g, WIRE_IPV6_ALEN) != 0 || nd->lladdr)
			return false;
	}
	/* §7.1.2: "If the IP Destination Address is a multicast address the Solicited flag
	 * is zero." */
	if (nd->type == WIRE_ND_NEIGHBOR_ADVERT && wire_ipv6_is_multicast(in->ip.dst) &&
	    (nd->flags & WIRE_ND_NA_SOLICITED))
		return false;
	return true;
}

static void count_evicted(struct srv *s)
{
	s->ctr.v[SRV_ND_CACHE_EVICTED] = s->neigh6.evicted;
}

/* The node's address a frame to peer comes from: link-local for a link-local peer, else
 * the global one. Custody keeps no local address (custody.h); a process's connection to a
 * global peer is from s->ip6, the only global address the node has. */
static const uint8_t *src_for(const struct srv *s, const uint8_t *peer)
{
	return is_link_local(peer) ? s->ip6_ll : s->ip6;
}

/* The probe of reply.c's srv__send_probe over IPv6: an ACK far outside the peer's window,
 * its checksum over RFC 8200 §8.1's pseudo-header. */
static void send_probe(struct srv *s, const uint8_t mac[WIRE_ETH_ALEN], struct srv_custody *c)
{
	uint8_t f[ETH_HLEN + IP6_HLEN + TCP_HLEN];
	uint8_t *tcp = f + ETH_HLEN + IP6_HLEN;
	const uint8_t *rip = c->rip.b, *src = src_for(s, rip);
	uint32_t seq;

	if (getrandom(&seq, sizeof(seq), GRND_NONBLOCK) != sizeof(seq))
		seq = (uint32_t)srv__now_ms();
	put_headers(s, f, mac, src, rip, WIRE_IPPROTO_TCP, TCP_HLEN, WIRE_IPV6_DEFAULT_HLIM);
	wire_tcp_write(tcp, c->lport, c->rport, seq, seq ^ 0x80000000u, WIRE_TCP_ACK, 0);
	uint32_t sum = wire_sum_pseudo6(0, src, rip, WIRE_IPPROTO_TCP, TCP_HLEN);
	wire_wr16(tcp + WIRE_TCP_OFF_CHECKSUM, wire_sum_finish(wire_sum(sum, tcp, TCP_HLEN)));
	srv__send_frame(s, f, sizeof(f));
	s->ctr.v[SRV_RST_PROBES]++;
	srv__custody_probed(c);
}

/* RFC 4861 §7.2.2: a Neighbor Solicitation for target, "sent to the solicited-node
 * multicast address corresponding to the target address", with the node's link-layer
 * address in a Source Link-Layer Address option ("MUST be included in multicast
 * solicitations", §4.3), hop limit 255 (§7.1.1). Its source: the node's address of the
 * target's scope, the one the waiting probe is sent from ("If the source address of the
 * packet prompting the solicitation is the same as one of the addresses assigned to the
 * outgoing interface, that address SHOULD be placed in the IP Source Address").
 * dad: duplicate address detection's instead (RFC 4862 §5.4.2): from the unspecified
 * address and so without the option (§7.1.1: "there is no source link-layer address
 * option in the message"). */
static void put_ns(struct srv *s, const uint8_t target[16], bool dad)
{
	static const uint8_t unspecified[WIRE_IPV6_ALEN];
	uint8_t f[ETH_HLEN + IP6_HLEN + NS_LEN], group[WIRE_IPV6_ALEN], mac[WIRE_ETH_ALEN];
	uint8_t *ns = f + ETH_HLEN + IP6_HLEN;
	const uint8_t *src = dad ? unspecified : src_for(s, target);
	size_t len = dad ? WIRE_ND_NS_LEN : NS_LEN;

	wire_ipv6_solicited_node(group, target);
	wire_ipv6_mcast_mac(mac, group);
	put_headers(s, f, mac, src, group, WIRE_IPPROTO_ICMPV6, len, WIRE_ND_HOP_LIMIT);
	memset(ns, 0, NS_LEN);
	ns[WIRE_ICMPV6_OFF_TYPE] = WIRE_ND_NEIGHBOR_SOLICIT;
	memcpy(ns + WIRE_ND_OFF_TARGET, target, WIRE_IPV6_ALEN);
	if (!dad) {
		ns[WIRE_ND_NS_LEN] = WIRE_ND_OPT_SRC_LLADDR;
		ns[WIRE_ND_NS_LEN + 1] = WIRE_ND_OPT_LLADDR_LEN / WIRE_ND_OPT_UNIT;
		memcpy(ns + WIRE_ND_NS_LEN + 2, s->mac, WIRE_ETH_ALEN);
	}
	wire_icmpv6_set_checksum(src, group, ns, len);
	srv__send_frame(s, f, ETH_HLEN + IP6_HLEN + len);
}

static void send_ns(void *arg, const uint8_t target[16])
{
	struct srv *s = arg;

	put_ns(s, target, false);
	s->ctr.v[SRV_ND_SOLICITS_SENT]++;
}

/* ---- Duplicate address detection (RFC 4862 §5.4), optimistic (RFC 4429) ---------------
 * Both addresses are optimistic from the start: the node answers for them and its
 * processes use them while one solicitation per address (DupAddrDetectTransmits, §5.1,
 * whose default is 1) waits RetransTimer for an objection, so ulsd's start is not
 * delayed. While they are tentative, an advertisement for one of them from another station,
 * or a solicitation for one from the unspecified address (another node's detection of the
 * same address), means a duplicate (§5.4.3, §5.4.4): counted (nd_dad_duplicate) and logged
 * as an error.
 * Deviation: the detection reports, it changes nothing. §5.4.5 has a duplicate address
 * not assigned (and IP operation disabled for a link-local address from the hardware
 * address), and RFC 4429 §3.3 has an optimistic node clear the Override flag of its
 * advertisements and not answer a solicitation from the unspecified address. ulsd's
 * addresses are its operator's (--ip6, the MAC), not autoconfigured: it keeps them and its
 * answers as they were, so that its processes keep their connections; the log line says
 * what to fix.
 * Deviation: no MLD report for the solicited-node groups (§5.4.2, RFC 3810): the link's
 * bridge floods multicast, as switches without MLD snooping do. */

void srv__dad_start(struct srv *s)
{
	uint16_t r;

	if (!s->has_ip6)
		return;
	/* §5.4.2: the first message after the interface comes up "SHOULD delay joining the
	 * solicited-node multicast address by a random delay between 0 and
	 * MAX_RTR_SOLICITATION_DELAY", so that nodes started together do not collide. */
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
		r = 0;
	s->dad = SRV_DAD_DUE;
	s->dad_ms = srv__now_ms() + r % SRV_DAD_MAX_DELAY_MS;
}

int srv__dad_run(struct srv *s)
{
	uint64_t now = srv__now_ms();

	if (!srv__dad_pending(s))
		return 1000;
	if (now < s->dad_ms)
		return (int)(s->dad_ms - now);
	if (s->dad == SRV_DAD_DUE) {
		put_ns(s, s->ip6, true);
		put_ns(s, s->ip6_ll, true);
		s->ctr.v[SRV_ND_DAD_SOLICITS_SENT] += 2;
		s->dad = SRV_DAD_PROBING;
		s->dad_ms = now + SRV_NEIGH6_RETRANS_MS;
		return SRV_NEIGH6_RETRANS_MS;
	}
	/* §5.4: no objection within RetransTimer after the last solicitation: the addresses
	 * are unique. */
	s->dad = SRV_DAD_DONE;
	srv__log(2, "IPv6 duplicate address detection done: no other station has the node's "
		 "addresses (RFC 4862 §5.4)");
	return 1000;
}

/* What arrived while the node's addresses are tentative says another station has addr
 * (§5.4.3, §5.4.4). */
static void dad_duplicate(struct srv *s, const uint8_t *addr, const char *what)
{
	char buf[INET6_ADDRSTRLEN];

	if (!srv__dad_pending(s))
		return;
	s->ctr.v[SRV_ND_DAD_DUPLICATE]++;
	s->dad = SRV_DAD_DUPLICATE;
	if (!inet_ntop(AF_INET6, addr, buf, sizeof(buf)))
		buf[0] = 0;
	srv__log(0, "duplicate IPv6 address %s (RFC 4862 §5.4): %s; another station on the link "
		 "has it: give this node another address (--ip6, or a MAC of its own)", buf, what);
}

/* The address of ip has come (§7.2.5: the node "sends any packets queued for the neighbor
 * awaiting address resolution"): what ulsd held for it are custody's probes, one for each
 * connection whose probe waited for ip. Only those: a connection its process left in
 * TIME-WAIT or FIN-WAIT-2 to the same peer is never probed (custody.h), and would reset a
 * peer that may still close in order. */
static void probe_waiting(struct srv *s, const uint8_t ip[16])
{
	uint8_t mac[WIRE_ETH_ALEN];

	if (srv__neigh6_lookup(&s->neigh6, srv__now_ms(), ip, mac) < 0)
		return;
	for (size_t i = 0; i < s->custody.n; i++) {
		struct srv_custody *c = &s->custody.c[i];
		if (c->awaits_neighbour && memcmp(c->rip.b, ip, 16) == 0) {
			c->awaits_neighbour = false;
			send_probe(s, mac, c);
		}
	}
}

void srv__send_probe6(struct srv *s, struct srv_custody *c)
{
	uint64_t now = srv__now_ms();
	uint8_t mac[WIRE_ETH_ALEN];
	int rc;

	if (!s->has_ip6) {
		s->ctr.v[SRV_DROP_PROBE_NO_NEIGHBOUR]++;
		return;
	}
	rc = srv__neigh6_lookup(&s->neigh6, now, c->rip.b, mac);
	if (rc == -ENOENT && srv__dp_neighbour6(s, c->rip.b, mac) == 0) {
		/* A process on the direct path: the kernel saw the handshake, not ulsd. */
		srv__neigh6_learn(&s->neigh6, now, c->rip.b, mac);
		count_evicted(s);
		rc = 0;
	}
	if (rc == 0) {
		c->awaits_neighbour = false;
		send_probe(s, mac, c);
		return;
	}
	/* §7.2.2: resolve it; the probe goes when the advertisement comes (probe_waiting),
	 * or is lost with the entry after MAX_MULTICAST_SOLICIT unanswered solicitations
	 * (srv__neigh6_run). */
	if (srv__neigh6_resolve(&s->neigh6, now, c->rip.b) == 1)
		send_ns(s, c->rip.b);
	c->awaits_neighbour = true;   /* cleared if the resolution fails (srv__neigh6_run) */
	count_evicted(s);
	s->ctr.v[SRV_RST_PROBES_DEFERRED]++;
}

int srv__neigh6_run(struct srv *s)
{
	unsigned failed = 0, failed_waiting = 0;
	int t = srv__neigh6_tick(&s->neigh6, srv__now_ms(), send_ns, s, &failed, &failed_waiting);

	s->ctr.v[SRV_ND_RESOLVE_FAILED] += failed;
	/* The probes that waited for an address that never came: the peer learns from the
	 * RST its next segment gets (§3.10.7.1) instead. They are dropped, counted, and no
	 * longer wait: a later resolution of that address, started by another connection's
	 * probe, sends that connection's probe only. */
	s->ctr.v[SRV_DROP_PROBE_NO_NEIGHBOUR] += failed_waiting;
	if (failed_waiting) {
		uint64_t now = srv__now_ms();
		for (size_t i = 0; i < s->custody.n; i++) {
			struct srv_custody *c = &s->custody.c[i];
			if (c->awaits_neighbour &&
			    srv__neigh6_state(&s->neigh6, now, c->rip.b) == SRV_NEIGH6_FREE)
				c->awaits_neighbour = false;
		}
	}
	return t;
}

/* §7.2.5 for an advertisement that nd_valid accepted, about another station's address. */
static void input_na(struct srv *s, const struct wire_nd *na)
{
	enum srv_neigh6_na r = srv__neigh6_from_na(&s->neigh6, srv__now_ms(), na->target,
						    na->lladdr,
						    (na->flags & WIRE_ND_NA_SOLICITED) != 0,
						    (na->flags & WIRE_ND_NA_OVERRIDE) != 0);
	if (r == SRV_NEIGH6_NA_IGNORED)
		s->ctr.v[SRV_ND_ADVERTS_IGNORED]++;
	else if (r == SRV_NEIGH6_NA_RESOLVED_WAITING)
		probe_waiting(s, na->target);
}

/* RFC 4861 §7.2.4: answer a valid solicitation for one of the node's addresses. */
static void reply_ns(struct srv *s, const struct in6 *in, const struct wire_nd *ns)
{
	uint8_t f[ETH_HLEN + IP6_HLEN + NA_LEN];
	uint8_t *na = f + ETH_HLEN + IP6_HLEN;
	uint8_t mac[WIRE_ETH_ALEN];
	const uint8_t *dst;
	uint8_t flags = WIRE_ND_NA_OVERRIDE;

	if (!srv__is_node_ip6(s, ns->target)) {
		/* §7.2.3: "A valid Neighbor Solicitation that does not meet any of the
		 * following requirements MUST be silently discarded: - The Target Address is
		 * a "valid" unicast or anycast address assigned to the receiving interface"
		 * (the node proxies for nobody and runs no duplicate address detection). */
		s->ctr.v[SRV_DROP_ND_NOT_FOR_NODE]++;
		return;
	}
	if (wire_ipv6_is_unspecified(in->ip.src)) {
		/* RFC 4862 §5.4.3: a solicitation from the unspecified address for a tentative
		 * address comes from a node detecting the same address: a duplicate.
		 * From the node's own MAC it is the node's own (a process's frame the direct
		 * path's transmit check sends back to ulsd, datapath.bpf.c), not another's. */
		if (memcmp(in->eth.src, s->mac, WIRE_ETH_ALEN) != 0)
			dad_duplicate(s, ns->target,
				      "a solicitation for it from the unspecified address");
		/* §7.2.4: "If the source of the solicitation is the unspecified address, the
		 * node MUST set the Solicited flag to zero and multicast the advertisement to
		 * the all-nodes address." (Another node's duplicate address detection.) */
		dst = all_nodes;
		wire_ipv6_mcast_mac(mac, all_nodes);
	} else {
		/* "Otherwise, the node MUST set the Solicited flag to one and unicast the
		 * advertisement to the Source Address of the solicitation." Its link-layer
		 * address is the option's, or the frame's source when there is none (a
		 * unicast solicitation may leave it out, §4.3).
		 * §7.2.3: "If the Source Address is not the unspecified address and, on link
		 * layers that have addresses, the solicitation includes a Source Link-Layer
		 * Address option, then the recipient SHOULD create or update the Neighbor
		 * Cache entry for the IP Source Address of the solicitation." */
		dst = in->ip.src;
		flags |= WIRE_ND_NA_SOLICITED;
		memcpy(mac, ns->lladdr ? ns->lladdr : in->eth.src, WIRE_ETH_ALEN);
		if (ns->lladdr) {
			bool waited = srv__neigh6_from_ns(&s->neigh6, srv__now_ms(), in->ip.src,
							 ns->lladdr);
			count_evicted(s);
			if (waited)
				probe_waiting(s, in->ip.src);
		}
	}
	/* §4.4: Router flag 0 (the node is not a router); Override 1 (§7.2.4: not anycast,
	 * no proxy, the option included: "Otherwise, the Override flag SHOULD be set to
	 * one."); the Target Link-Layer Address option, which §4.4 says "MUST be included
	 * for multicast solicitations". */
	put_headers(s, f, mac, ns->target, dst, WIRE_IPPROTO_ICMPV6, NA_LEN, WIRE_ND_HOP_LIMIT);
	memset(na, 0, NA_LEN);
	na[WIRE_ICMPV6_OFF_TYPE] = WIRE_ND_NEIGHBOR_ADVERT;
	na[WIRE_ND_OFF_FLAGS] = flags;
	memcpy(na + WIRE_ND_OFF_TARGET, ns->target, WIRE_IPV6_ALEN);
	na[WIRE_ND_NA_LEN] = WIRE_ND_OPT_TGT_LLADDR;
	na[WIRE_ND_NA_LEN + 1] = WIRE_ND_OPT_LLADDR_LEN / WIRE_ND_OPT_UNIT;
	memcpy(na + WIRE_ND_NA_LEN + 2, s->mac, WIRE_ETH_ALEN);
	wire_icmpv6_set_checksum(ns->target, dst, na, NA_LEN);
	srv__send_frame(s, f, sizeof(f));
	s->ctr.v[SRV_ND_ADVERTS_SENT]++;
}

static void input_icmp6(struct srv *s, const struct in6 *in)
{
	struct wire_icmp ic;
	struct wire_nd nd;

	if (wire_icmp_view(&ic, in->l4, in->l4_len) < 0) {
		s->ctr.v[SRV_DROP_ICMPV6_HEADER]++;
		return;
	}
	/* RFC 4443 §2.3 and RFC 4861 §7.1.1 "The ICMP Checksum is valid": the checksum is
	 * mandatory in IPv6 and the kernel does not offload ICMPv6's. */
	if (!wire_icmpv6_checksum_ok(in->ip.src, in->ip.dst, in->l4, in->l4_len)) {
		s->ctr.v[SRV_DROP_ICMPV6_CHECKSUM]++;
		return;
	}
	switch (ic.type) {
	case WIRE_ICMPV6_ECHO_REQUEST:
		reply_echo(s, in);
		return;
	case WIRE_ND_NEIGHBOR_SOLICIT:
	case WIRE_ND_NEIGHBOR_ADVERT:
		if (wire_nd_view(&nd, in->l4, in->l4_len) < 0 || !nd_valid(in, &nd)) {
			s->ctr.v[SRV_DROP_ND_INVALID]++;
			return;
		}
		if (ic.type == WIRE_ND_NEIGHBOR_SOLICIT) {
			reply_ns(s, in, &nd);
			return;
		}
		s->ctr.v[SRV_ND_ADVERTS_RECEIVED]++;
		/* An advertisement for one of the node's own addresses from another station
		 * is a duplicate address. */
		if (srv__is_node_ip6(s, nd.target)) {
			if (memcmp(in->eth.src, s->mac, WIRE_ETH_ALEN) != 0) {
				s->ctr.v[SRV_ND_ADDRESS_CONFLICT]++;
				/* RFC 4862 §5.4.4: an advertisement for a tentative address
				 * means another node has it: a duplicate. */
				if (srv__dad_pending(s))
					dad_duplicate(s, nd.target, "an advertisement for it");
				else
					srv__log(1, "another station advertises one of the node's IPv6 addresses");
			}
			return;
		}
		/* §7.2.5 for ulsd's cache (each relay process got a copy for its own, demux.c). */
		input_na(s, &nd);
		return;
	default:
		/* Errors about processes' packets, router messages, echo replies: no process
		 * carries IPv6 yet, and the node is not a router. */
		s->ctr.v[SRV_DROP_NO_OWNER]++;
		return;
	}
}

/* RFC 9293 §3.10.7.1, as srv__reply_rst for IPv4 (and its ACK for a custody FIN); the
 * checksum over RFC 8200 §8.1's pseudo-header. */
static void reply_rst(struct srv *s, const struct in6 *in)
{
	uint8_t f[ETH_HLEN + IP6_HLEN + TCP_HLEN];
	uint8_t *tcp = f + ETH_HLEN + IP6_HLEN;
	struct wire_tcp t;

	if (wire_tcp_view(&t, in->l4, in->l4_len) < 0) {
		s->ctr.v[SRV_DROP_NO_OWNER]++;
		return;
	}
	if (t.flags & WIRE_TCP_RST) {
		s->ctr.v[SRV_DROP_RST_FOR_RST]++;
		return;
	}
	if (!srv__is_node_ip6(s, in->ip.dst) || wire_eth_is_group(in->eth.dst)) {
		/* RFC 1122 §4.2.3.10's rule for IPv6 too: nothing to a group is reset. */
		s->ctr.v[SRV_DROP_RST_NOT_UNICAST]++;
		return;
	}
	struct flt_addr rip = flt_addr_v6(in->ip.src);
	struct srv_custody_seg g = { t.seq, t.ack, t.flags, t.payload_len };
	uint32_t seq, ack;
	enum srv_custody_verdict v = srv__custody_answer(s, t.dport, &rip, t.sport, &g, &seq, &ack);
	if (v == SRV_CUSTODY_IGNORE)
		return;
	bool fin = v == SRV_CUSTODY_ACK || v == SRV_CUSTODY_ACK_OLD;
	if (fin)  /* the peer's FIN for a connection its process left closing (custody.h) */
		wire_tcp_write(tcp, t.dport, t.sport, seq, ack, WIRE_TCP_ACK, SRV_CUSTODY_ACK_WND);
	else if (!srv__tokens_allow(&s->rst_tokens_ms, &s->rst_tokens, SRV_RST_RATE_PER_S)) {
		s->ctr.v[SRV_DROP_RST_RATE]++;
		return;
	} else if (t.flags & WIRE_TCP_ACK)
		wire_tcp_write(tcp, t.dport, t.sport, t.ack, 0, WIRE_TCP_RST, 0);
	else
		wire_tcp_write(tcp, t.dport, t.sport, 0, t.seq + wire_tcp_seg_len(&t),
			       WIRE_TCP_RST | WIRE_TCP_ACK, 0);
	put_headers(s, f, in->eth.src, in->ip.dst, in->ip.src, WIRE_IPPROTO_TCP, TCP_HLEN,
		    WIRE_IPV6_DEFAULT_HLIM);
	uint32_t sum = wire_sum_pseudo6(0, in->ip.dst, in->ip.src, WIRE_IPPROTO_TCP, TCP_HLEN);
	wire_wr16(tcp + WIRE_TCP_OFF_CHECKSUM, wire_sum_finish(wire_sum(sum, tcp, TCP_HLEN)));
	srv__send_frame(s, f, sizeof(f));
	if (!fin)
		s->ctr.v[SRV_RST_SENT]++;
}

/* RFC 4443 §3.1: "If the transport protocol ... has no listener, the destination node
 * SHOULD send a Destination Unreachable message with Code 4." */
static void reply_port_unreachable(struct srv *s, const struct in6 *in)
{
	if (!may_send_error(in)) {
		s->ctr.v[SRV_DROP_ICMP_ERROR_NOT_UNICAST]++;
		return;
	}
	if (send_error(s, in, WIRE_ICMPV6_DST_UNREACH, WIRE_ICMPV6_UNREACH_PORT, 0) == 0)
		s->ctr.v[SRV_ICMP_UNREACH_SENT]++;
}

/* A fragment for the node (RFC 8200 §4.5): reass.c collects its datagram for the process
 * whose endpoint the first fragment names, or, when nobody owns it, for the node's own
 * answer (srv__input_ip6_whole). Fragments to a multicast group are not reassembled
 * (nothing of the node's is reached that way). */
static void reassemble(struct srv *s, const struct in6 *in)
{
	struct flt_pkt p;
	int rc;

	if (wire_ipv6_is_multicast(in->ip.dst)) {
		s->ctr.v[SRV_DROP_IPV6_FRAGMENT]++;
		return;
	}
	rc = flt_parse(in->frame, in->len, &p);
	if (rc < 0) {
		/* Among them RFC 7112 §5's first fragment without its whole header chain
		 * (too short for its TCP or UDP header). */
		flt_count_rx_drop(s->flt, (enum flt_reason)-rc);
		return;
	}
	srv__reass_input(s, in->frame, in->len, &p);
}

/* An ICMPv6 error about a frame reass.c holds (the frame was checked on arrival). */
static void error_about(struct srv *s, const uint8_t *frame, size_t len, uint8_t type,
			uint8_t code, uint32_t word)
{
	struct in6 in = { .frame = frame, .len = len };

	if (wire_eth_view(&in.eth, frame, len) < 0 ||
	    wire_ipv6_view(&in.ip, in.eth.payload, in.eth.payload_len) < 0 || !may_send_error(&in))
		return;
	if (send_error(s, &in, type, code, word) < 0)
		return;
	if (type == WIRE_ICMPV6_PARAM_PROB)
		s->ctr.v[SRV_ICMPV6_PARAM_PROB_SENT]++;
	else
		s->ctr.v[SRV_ICMP_TIME_EXCEEDED_SENT]++;
}

void srv__reply6_param_problem(struct srv *s, const uint8_t *frame, size_t len, uint8_t code,
			       uint32_t pointer)
{
	error_about(s, frame, len, WIRE_ICMPV6_PARAM_PROB, code, pointer);
}

void srv__reply6_reass_time_exceeded(struct srv *s, const uint8_t *frame, size_t len)
{
	/* RFC 4443 §3.3: code 1, "fragment reassembly time exceeded". */
	error_about(s, frame, len, WIRE_ICMPV6_TIME_EXCEEDED, 1, 0);
}

static void answer(struct srv *s, struct in6 *in);

void srv__input_ip6(struct srv *s, const uint8_t *frame, size_t len)
{
	struct in6 in = { .frame = frame, .len = len };

	s->ctr.v[SRV_IPV6_FRAMES]++;
	if (wire_eth_view(&in.eth, frame, len) < 0) {
		s->ctr.v[SRV_DROP_IPV6_HEADER]++;
		return;
	}
	if (!wire_eth_is_group(in.eth.dst) && memcmp(in.eth.dst, s->mac, WIRE_ETH_ALEN) != 0) {
		s->ctr.v[SRV_DROP_NOT_FOR_NODE]++;
		return;
	}
	/* RFC 8200 §3: Version 6, and Payload Length within what arrived. */
	if (wire_ipv6_view(&in.ip, in.eth.payload, in.eth.payload_len) < 0 ||
	    /* RFC 4291 §2.7: "Multicast addresses must not be used as source addresses". */
	    wire_ipv6_is_multicast(in.ip.src)) {
		s->ctr.v[SRV_DROP_IPV6_HEADER]++;
		return;
	}
	if (!srv__is_node_ip6(s, in.ip.dst) && !is_node_group(s, in.ip.dst)) {
		s->ctr.v[SRV_DROP_NOT_FOR_NODE]++;
		return;
	}
	s->ctr.v[SRV_FRAMES_TO_SERVER]++;
	if (wire_ipv6_upper(&in.up, &in.ip) < 0) {
		/* An extension header past the payload, Hop-by-Hop not first, or a chain
		 * longer than WIRE_IPV6_EXT_MAX. */
		s->ctr.v[SRV_DROP_IPV6_EXT_HEADERS]++;
		return;
	}
	if (in.up.fragment) {
		reassemble(s, &in);
		return;
	}
	answer(s, &in);
}

void srv__input_ip6_whole(struct srv *s, const uint8_t *frame, size_t len)
{
	struct in6 in = { .frame = frame, .len = len };

	/* reass.c rebuilt it from fragments that passed srv__input_ip6's checks. */
	if (wire_eth_view(&in.eth, frame, len) < 0 ||
	    wire_ipv6_view(&in.ip, in.eth.payload, in.eth.payload_len) < 0 ||
	    wire_ipv6_upper(&in.up, &in.ip) < 0 || in.up.fragment) {
		s->ctr.v[SRV_DROP_IPV6_EXT_HEADERS]++;
		return;
	}
	answer(s, &in);
}

/* An IPv6 packet for the node, whole, that no process owns: its options' verdicts, then
 * the node's own answer. */
static void answer(struct srv *s, struct in6 *in)
{
	if (check_options(s, in) < 0)
		return;
	in->l4 = in->ip.hdr + in->up.off;
	in->l4_len = IP6_HLEN + in->ip.payload_len - in->up.off;
	switch (in->up.proto) {
	case WIRE_IPPROTO_ICMPV6:
		input_icmp6(s, in);
		break;
	case WIRE_IPPROTO_TCP:
		reply_rst(s, in);
		break;
	case WIRE_IPPROTO_UDP:
		reply_port_unreachable(s, in);
		break;
	case WIRE_IPPROTO_NONE:
		/* RFC 8200 §4.7: nothing follows; nothing to do. */
		s->ctr.v[SRV_DROP_NO_OWNER]++;
		break;
	default:
		/* RFC 8200 §4: an unrecognized Next Header: "discard the packet and send an
		 * ICMP Parameter Problem message to the source of the packet, with an ICMP
		 * Code value of 1 ... and the ICMP Pointer field containing the offset of the
		 * unrecognized value within the original packet". */
		s->ctr.v[SRV_DROP_IPV6_NEXT_HEADER]++;
		if (may_send_error(in) &&
		    send_error(s, in, WIRE_ICMPV6_PARAM_PROB, PARAM_PROB_NEXT_HEADER,
			       (uint32_t)in->up.nh_off) == 0)
			s->ctr.v[SRV_ICMPV6_PARAM_PROB_SENT]++;
		break;
	}
}
