/* ICMPv6 errors for TCP connections and UDP sockets, and path MTU discovery for IPv6: the
 * twin of icmperr.c (ICMPv4), whose delivery it shares (stk__icmp_err_deliver: the 4-tuple
 * and RFC 5927 §4.1 sequence checks, the SYN-SENT abort, soft errors, the MSS decrease and
 * the connected UDP socket's error). This file reads the message and says what it means.
 *
 * Read first: RFC 4443 §2.4 (b) (an error goes to the upper-layer process that sent the
 * quoted packet) and §3.1-§3.4 (Destination Unreachable codes, Packet Too Big, Time
 * Exceeded, Parameter Problem), RFC 8201 §4 (PMTU discovery: the Packet Too Big's MTU, the
 * IPv6 minimum link MTU of 1280) and §5.2-§5.4 (what TCP does with it), RFC 5927 §4.1.
 *
 * lwIP 2.1.3 passed Packet Too Big to nd6_input, which set the destination cache's path
 * MTU to whatever the message said (so later packets left as fragments of that size), and
 * dropped the other errors. Patch 0106 hands all four to LWIP_HOOK_ICMP6_ERROR_INPUT from
 * icmp6_input (after the checksum check) and bounds nd6's update (RFC 8201 §4: below 1280
 * discarded, never raised); a Packet Too Big the hook judged genuine still goes on to
 * nd6_input, so UDP datagrams and new connections to that destination use the lower MTU.
 *
 * Linux for comparison (net/ipv6/tcp_ipv6.c tcp_v6_err, net/ipv6/udp.c __udp6_lib_err,
 * net/ipv6/icmp.c icmpv6_err_convert): the errno and the "fatal" flag of each message
 * below are Linux's; a fatal error ends a SYN-SENT connection and is a connected UDP
 * socket's pending error; in synchronized states every error is soft (tcp_v6_err keeps it
 * in sk_err_soft), as RFC 5927 §7.2 asks and as icmperr.c does for IPv4. A Packet Too Big
 * whose sequence number is outside SND.UNA..SND.NXT changes nothing, not even the route's
 * MTU (Linux's OUTOFWINDOWICMPS), and one below 1280 is dropped (Linux since 2020, after
 * RFC 8201).
 */
#include "internal.h"

#include <errno.h>
#include <string.h>

#include "hooks.h"
#include "lwip/ip.h"
#include "lwip/ip6_addr.h"
#include "lwip/ip6_zone.h"
#include "lwip/netif.h"
#include "lwip/pbuf.h"
#include "netif/wire/wire.h"

/* RFC 4443 §3 message types and §3.1 Destination Unreachable codes. */
#define ICMP6_T_DEST_UNREACH   1
#define ICMP6_T_PACKET_TOO_BIG 2
#define ICMP6_T_TIME_EXCEEDED  3
#define ICMP6_T_PARAM_PROBLEM  4
#define DU6_NO_ROUTE     0
#define DU6_ADMIN        1   /* communication with destination administratively prohibited */
#define DU6_SCOPE        2   /* beyond scope of source address */
#define DU6_ADDRESS      3
#define DU6_PORT         4
#define DU6_POLICY       5   /* source address failed ingress/egress policy */
#define DU6_REJECT_ROUTE 6

/* RFC 8201 §4: the IPv6 minimum link MTU (RFC 8200 §5). */
#define PMTU6_MIN 1280

/* The bytes we read from the message: RFC 4443 §3 quotes "as much of invoking packet as
 * possible without the ICMPv6 packet exceeding the minimum IPv6 MTU", so the whole message
 * is at most 1280 - 40 octets; what follows the first 1280 is not read. */
#define QUOTE6_MAX PMTU6_MIN

/* The errno a TCP connection reports for this message and whether it is hard (Linux's
 * "fatal"): port unreachable, administratively prohibited, policy failure and reject
 * route, Parameter Problem, and Destination Unreachable codes RFC 4443 does not define
 * (EPROTO) are; no route, beyond scope, address unreachable, Time Exceeded and Packet Too
 * Big are not. */
static int classify6(u8_t type, u8_t code, bool *hard)
{
	*hard = false;
	switch (type) {
	case ICMP6_T_TIME_EXCEEDED:
		return -EHOSTUNREACH;
	case ICMP6_T_PARAM_PROBLEM:
		*hard = true;
		return -EPROTO;
	case ICMP6_T_PACKET_TOO_BIG:
		return -EMSGSIZE;
	default:
		break;
	}
	switch (code) {
	case DU6_NO_ROUTE:
		return -ENETUNREACH;
	case DU6_SCOPE: case DU6_ADDRESS:
		return -EHOSTUNREACH;
	case DU6_ADMIN: case DU6_POLICY: case DU6_REJECT_ROUTE:
		*hard = true;
		return -EACCES;
	case DU6_PORT:
		*hard = true;   /* RFC 4443 §3.1: the destination has no listener on the port */
		return -ECONNREFUSED;
	default:
		*hard = true;
		return -EPROTO;
	}
}

/* Called by icmp6_input() (patch 0106) for Destination Unreachable, Packet Too Big, Time
 * Exceeded and Parameter Problem; p->payload is the ICMPv6 header, its checksum checked.
 * Returns 1: the message was ours to judge (handled or counted), lwIP only frees it; 0: a
 * genuine Packet Too Big, for nd6_input to lower the destination's path MTU. */
int stk__icmp6_error_input(struct pbuf *p, struct netif *inp)
{
	u8_t b[QUOTE6_MAX];
	u16_t n = pbuf_copy_partial(p, b, sizeof(b), 0);

	struct wire_icmp icmp;
	struct wire_ipv6 ip;
	struct wire_ipv6_upper up;

	/* RFC 4443 §2.4 (c): the quote is the invoking packet's start. We need its fixed
	 * header, its extension headers, and 8 octets of TCP or UDP (the ports and, for TCP,
	 * the sequence number). */
	if (wire_icmp_view(&icmp, b, n) < 0 ||
	    wire_ipv6_view_quoted(&ip, icmp.body, icmp.body_len) < 0 ||
	    wire_ipv6_upper(&up, &ip) < 0 ||
	    up.off + WIRE_ICMP_QUOTE_DATA > WIRE_IPV6_HLEN + ip.payload_len) {
		stk__count(STK_CNT_ICMP6_ERR_MALFORMED);
		return 1;
	}
	ip6_addr_t src, dst;
	memcpy(&src.addr, ip.src, sizeof(src.addr));
	memcpy(&dst.addr, ip.dst, sizeof(dst.addr));
	ip6_addr_clear_zone(&src);
	ip6_addr_clear_zone(&dst);
	ip6_addr_assign_zone(&src, IP6_UNKNOWN, inp);
	ip6_addr_assign_zone(&dst, IP6_UNKNOWN, inp);
	/* The quoted packet must be one we sent (RFC 5927 §4.1's first check is the 4-tuple,
	 * the source address ours), of TCP or UDP, and not a later fragment (no ports). */
	if ((up.proto != WIRE_IPPROTO_TCP && up.proto != WIRE_IPPROTO_UDP) ||
	    (up.fragment && up.frag_off != 0) || netif_get_ip6_addr_match(inp, &src) < 0) {
		stk__count(STK_CNT_ICMP_ERR_NO_CONN);
		return 1;
	}
	ip_addr_t remote;
	ip_addr_copy_from_ip6(remote, dst);
	struct stk_icmp_err m = {
		.remote = &remote, .proto = up.proto, .th = ip.hdr + up.off,
	};
	m.err = classify6(icmp.type, icmp.code, &m.hard);
	m.dgram_err = m.hard ? m.err : 0;   /* Linux's udpv6_err: fatal errors only */
	if (icmp.type == ICMP6_T_PACKET_TOO_BIG) {
		/* RFC 8201 §4: "If a node receives a Packet Too Big message reporting a next-hop
		 * MTU that is less than the IPv6 minimum link MTU, it must discard it. A node must
		 * not reduce its estimate of the Path MTU below the IPv6 minimum link MTU on
		 * receipt of a Packet Too Big message." */
		u32_t mtu = wire_rd32(icmp.rest);
		if (mtu < PMTU6_MIN) {
			stk__count(STK_CNT_ICMP6_PTB_BELOW_MIN);
			return 1;
		}
		/* RFC 8201 §5.2: TCP's MSS follows the path MTU (MTU - 60, RFC 8200 §8.3), and
		 * what the router dropped is sent again cut to the new size (icmperr.c). */
		m.too_big = true;
		m.mtu = mtu;
		m.hdrs = IP6_TCP_HDRS;
		m.mtu_min = PMTU6_MIN;
	}
	if (stk__icmp_err_deliver(&m) < 0 || !m.too_big)
		return 1;
	/* Genuine (a live connection's sequence space, or a UDP socket's port): the
	 * destination cache takes the path MTU too (nd6.c, patch 0106's bounds). */
	stk__count(STK_CNT_ICMP6_PTB_TO_DEST_CACHE);
	return 0;
}
