/* server/reply6.c: what the node answers over IPv6 (neighbour discovery, echo, port
 * unreachable, RST) and the named counter of every case it leaves unanswered.
 *
 * Read first: RFC 4861 §7.1.1 and §7.2.3-7.2.4, RFC 4443 §2.4, §3.1, §4.1-4.2, RFC 8200
 * §3-4, RFC 9293 §3.10.7.1.
 *
 * Frames are built with netif/wire's writers and handed to srv__input_ip6 as the demux
 * thread hands them; what the node sends is caught by the srv__send_frame stub and read
 * back through the wire views, checksums included.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "netif/wire/wire.h"
#include "server/internal.h"

#include "reply_fixture.h"

static const uint8_t node_mac[6] = { 0x02, 0x75, 0x6c, 0, 0, 1 };
static const uint8_t peer_mac[6] = { 0x02, 0x75, 0x6c, 0, 0, 2 };
static const uint8_t opt_mac[6] = { 0x02, 0x75, 0x6c, 0, 0, 7 };
static const uint8_t node_ip6[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 1 };
static const uint8_t peer_ip6[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 2 };
static const uint8_t other_ip6[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 9 };
static const uint8_t peer_ll[16] = { 0xfe, 0x80, [15] = 2 };
static const uint8_t all_nodes[16] = { 0xff, 0x02, [15] = 1 };
static const uint8_t unspec[16];
static const uint8_t all_mac[6] = { 0x33, 0x33, 0, 0, 0, 1 };   /* all_nodes' */
static struct srv srv;

/* reass.c's entry, which reply6.c hands every fragment for the node (RFC 8200 §4.5). */
static unsigned reassembled;
static struct flt_pkt reass_pkt;
void srv__reass_input(struct srv *s, const uint8_t *frame, size_t len, const struct flt_pkt *p)
{
	(void)s; (void)frame; (void)len;
	reass_pkt = *p;
	reassembled++;
}

static int setup(void **state)
{
	(void)state;
	memset(&srv, 0, sizeof(srv));
	memcpy(srv.mac, node_mac, 6);
	srv.has_ip6 = true;
	memcpy(srv.ip6, node_ip6, 16);
	srv.ip6_plen = 64;
	wire_ipv6_link_local(srv.ip6_ll, node_mac);
	srv.mtu = 1500;
	srv.rst_tokens = 2000;
	srv.icmp_tokens = 100;
	srv.rst_tokens_ms = srv.icmp_tokens_ms = now_ms;
	nsent = 0;
	sent_len = 0;
	reassembled = 0;
	return 0;
}

struct frame {
	uint8_t b[512];
	size_t len;
};

/* Ethernet + IPv6 + l4 (l4_len octets at l4), the ICMPv6 checksum filled in when next is
 * ICMPv6. */
static void build(struct frame *f, const uint8_t *dmac, const uint8_t *src, const uint8_t *dst,
		  uint8_t next, uint8_t hlim, const uint8_t *l4, size_t l4_len)
{
	memset(f->b, 0, sizeof(f->b));
	wire_eth_write(f->b, dmac, peer_mac, WIRE_ETHERTYPE_IPV6);
	wire_ipv6_write(f->b + WIRE_ETH_HLEN, next, src, dst, (uint16_t)l4_len, hlim);
	memcpy(f->b + WIRE_ETH_HLEN + WIRE_IPV6_HLEN, l4, l4_len);
	if (next == WIRE_IPPROTO_ICMPV6)
		wire_icmpv6_set_checksum(src, dst, f->b + WIRE_ETH_HLEN + WIRE_IPV6_HLEN, l4_len);
	f->len = WIRE_ETH_HLEN + WIRE_IPV6_HLEN + l4_len;
}

/* The node gets build's frame, as the demux thread hands it one. */
static void input_from(const uint8_t *dmac, const uint8_t *src, const uint8_t *dst,
		       uint8_t next, uint8_t hlim, const uint8_t *l4, size_t l4_len)
{
	struct frame f;

	build(&f, dmac, src, dst, next, hlim, l4, l4_len);
	srv__input_ip6(&srv, f.b, f.len);
}

/* The node gets next's l4_len octets at l4 from the peer, hop limit 64. */
static void input(uint8_t next, const uint8_t *l4, size_t l4_len)
{
	input_from(node_mac, peer_ip6, node_ip6, next, 64, l4, l4_len);
}

/* An NS for target, with a Source Link-Layer Address option when lladdr. */
static size_t ns(uint8_t *m, const uint8_t *target, const uint8_t *lladdr)
{
	memset(m, 0, 32);
	m[0] = WIRE_ND_NEIGHBOR_SOLICIT;
	memcpy(m + WIRE_ND_OFF_TARGET, target, 16);
	if (!lladdr)
		return WIRE_ND_NS_LEN;
	m[24] = WIRE_ND_OPT_SRC_LLADDR;
	m[25] = 1;
	memcpy(m + 26, lladdr, 6);
	return 32;
}

static void solicited(uint8_t g[16], uint8_t mac[6], const uint8_t *a)
{
	wire_ipv6_solicited_node(g, a);
	wire_ipv6_mcast_mac(mac, g);
}

/* The node gets an NS for target from src (with a Source Link-Layer Address option when
 * lladdr), sent to target's solicited-node group at hop limit hlim. */
static void input_ns(const uint8_t *src, const uint8_t *target, const uint8_t *lladdr,
		     uint8_t hlim)
{
	uint8_t m[32], g[16], gmac[6];
	size_t n = ns(m, target, lladdr);

	solicited(g, gmac, target);
	input_from(gmac, src, g, WIRE_IPPROTO_ICMPV6, hlim, m, n);
}

/* The last frame sent: IPv6 from the node's MAC to dmac; its IPv6 header, read. */
static struct wire_ipv6 sent_ip6(const uint8_t *dmac)
{
	struct wire_eth e;
	struct wire_ipv6 ip;

	assert_int_equal(wire_eth_view(&e, sent, sent_len), 0);
	assert_memory_equal(e.dst, dmac, 6);
	assert_memory_equal(e.src, node_mac, 6);
	assert_int_equal(e.type, WIRE_ETHERTYPE_IPV6);
	assert_int_equal(wire_ipv6_view(&ip, e.payload, e.payload_len), 0);
	return ip;
}

/* The last frame sent is a neighbour discovery message of the node's, checked as RFC 4861
 * §7.1.1-7.1.2 check one: from the node's MAC, hop limit 255, a valid ICMPv6 checksum,
 * code 0, and the node's MAC in its link-layer address option (§4.3, §4.4). */
static struct wire_nd sent_nd(const uint8_t *dmac, const uint8_t *src, const uint8_t *dst,
			      uint8_t type, const uint8_t *target)
{
	struct wire_ipv6 ip = sent_ip6(dmac);
	struct wire_nd nd;

	assert_int_equal(ip.hlim, 255);
	assert_int_equal(ip.next, WIRE_IPPROTO_ICMPV6);
	assert_memory_equal(ip.src, src, 16);
	assert_memory_equal(ip.dst, dst, 16);
	assert_true(wire_icmpv6_checksum_ok(ip.src, ip.dst, ip.payload, ip.payload_len));
	assert_int_equal(wire_nd_view(&nd, ip.payload, ip.payload_len), 0);
	assert_int_equal(nd.type, type);
	assert_int_equal(nd.code, 0);
	assert_memory_equal(nd.target, target, 16);
	assert_non_null(nd.lladdr);
	assert_memory_equal(nd.lladdr, node_mac, 6);
	return nd;
}

/* The NA the node sent (its only frame), from the target it advertises, and its flags. */
static void sent_na(const uint8_t *dmac, const uint8_t *dst, const uint8_t *target, uint8_t flags)
{
	assert_int_equal(nsent, 1);
	assert_int_equal(sent_nd(dmac, target, dst, WIRE_ND_NEIGHBOR_ADVERT, target).flags, flags);
}

static void ns_multicast_for_node_address_answered_solicited_override(void **state)
{
	(void)state;
	input_ns(peer_ip6, node_ip6, opt_mac, 255);
	/* To the option's link-layer address, not the frame's source. */
	sent_na(opt_mac, peer_ip6, node_ip6, WIRE_ND_NA_SOLICITED | WIRE_ND_NA_OVERRIDE);
	assert_int_equal(srv.ctr.v[SRV_ND_ADVERTS_SENT], 1);
}

static void ns_unicast_for_link_local_without_option_answered_to_frame_source(void **state)
{
	uint8_t m[32];
	size_t n = ns(m, srv.ip6_ll, NULL);

	(void)state;
	input_from(node_mac, peer_ll, srv.ip6_ll, WIRE_IPPROTO_ICMPV6, 255, m, n);
	sent_na(peer_mac, peer_ll, srv.ip6_ll, WIRE_ND_NA_SOLICITED | WIRE_ND_NA_OVERRIDE);
}

static void ns_from_unspecified_answered_to_all_nodes_unsolicited(void **state)
{

	(void)state;
	input_ns(unspec, node_ip6, NULL, 255);
	sent_na(all_mac, all_nodes, node_ip6, WIRE_ND_NA_OVERRIDE);
}

/* RFC 4861 §7.1.1: each check alone makes the NS invalid; none is answered. */
static void invalid_ns_dropped_and_counted(void **state)
{
	struct frame f;
	uint8_t m[32], g[16], gmac[6];
	size_t n;

	(void)state;
	input_ns(peer_ip6, node_ip6, opt_mac, 254);   /* hop limit 254 */
	solicited(g, gmac, node_ip6);
	n = ns(m, node_ip6, opt_mac);
	/* code 1 */
	m[1] = 1;
	input_from(gmac, peer_ip6, g, WIRE_IPPROTO_ICMPV6, 255, m, n);
	/* shorter than 24 */
	n = ns(m, node_ip6, NULL);
	input_from(gmac, peer_ip6, g, WIRE_IPPROTO_ICMPV6, 255, m, 20);
	/* target multicast */
	n = ns(m, all_nodes, opt_mac);
	input_from(gmac, peer_ip6, g, WIRE_IPPROTO_ICMPV6, 255, m, n);
	/* an option of length 0 */
	n = ns(m, node_ip6, opt_mac);
	m[25] = 0;
	input_from(gmac, peer_ip6, g, WIRE_IPPROTO_ICMPV6, 255, m, n);
	/* from :: with a source link-layer address option */
	n = ns(m, node_ip6, opt_mac);
	input_from(gmac, unspec, g, WIRE_IPPROTO_ICMPV6, 255, m, n);
	assert_int_equal(srv.ctr.v[SRV_DROP_ND_INVALID], 6);
	/* a wrong checksum */
	build(&f, gmac, peer_ip6, g, WIRE_IPPROTO_ICMPV6, 255, m, n);
	f.b[WIRE_ETH_HLEN + WIRE_IPV6_HLEN + 2] ^= 0x40;
	srv__input_ip6(&srv, f.b, f.len);
	assert_int_equal(srv.ctr.v[SRV_DROP_ICMPV6_CHECKSUM], 1);
	/* a target that is not the node's */
	n = ns(m, other_ip6, opt_mac);
	input_from(node_mac, peer_ip6, node_ip6, WIRE_IPPROTO_ICMPV6, 255, m, n);
	assert_int_equal(srv.ctr.v[SRV_DROP_ND_NOT_FOR_NODE], 1);
	assert_int_equal(nsent, 0);
}

static void echo_request_answered_with_its_data(void **state)
{
	uint8_t m[64];
	struct wire_ipv6 ip;

	(void)state;
	memset(m, 0, sizeof(m));
	m[0] = WIRE_ICMPV6_ECHO_REQUEST;
	wire_wr16(m + 4, 0x1234);
	wire_wr16(m + 6, 7);
	for (int i = 8; i < 64; i++)
		m[i] = (uint8_t)i;
	input(WIRE_IPPROTO_ICMPV6, m, sizeof(m));
	assert_int_equal(nsent, 1);
	assert_memory_equal(sent, peer_mac, 6);
	assert_int_equal(wire_ipv6_view(&ip, sent + 14, sent_len - 14), 0);
	assert_memory_equal(ip.src, node_ip6, 16);
	assert_memory_equal(ip.dst, peer_ip6, 16);
	assert_int_equal(ip.payload_len, sizeof(m));
	assert_int_equal(ip.payload[0], WIRE_ICMPV6_ECHO_REPLY);
	assert_memory_equal(ip.payload + 4, m + 4, sizeof(m) - 4);
	assert_true(wire_icmpv6_checksum_ok(ip.src, ip.dst, ip.payload, ip.payload_len));
	assert_int_equal(srv.ctr.v[SRV_ICMP_ECHO_REPLIES], 1);
	/* To all-nodes: answered from the address of the peer's scope (RFC 4443 §4.1). */
	input_from(all_mac, peer_ll, all_nodes, WIRE_IPPROTO_ICMPV6, 64, m, sizeof(m));
	assert_int_equal(nsent, 2);
	assert_int_equal(wire_ipv6_view(&ip, sent + 14, sent_len - 14), 0);
	assert_memory_equal(ip.src, srv.ip6_ll, 16);
}

static void udp_to_nobody_gets_port_unreachable_quoting_it(void **state)
{
	struct frame f;
	uint8_t u[20] = { 0x9c, 0x40, 0x1f, 0x90, 0, 20 };
	struct wire_ipv6 ip;

	(void)state;
	build(&f, node_mac, peer_ip6, node_ip6, WIRE_IPPROTO_UDP, 64, u, sizeof(u));
	srv__input_ip6(&srv, f.b, f.len);
	assert_int_equal(nsent, 1);
	assert_int_equal(wire_ipv6_view(&ip, sent + 14, sent_len - 14), 0);
	assert_memory_equal(ip.dst, peer_ip6, 16);
	assert_int_equal(ip.payload[0], WIRE_ICMPV6_DST_UNREACH);
	assert_int_equal(ip.payload[1], WIRE_ICMPV6_UNREACH_PORT);
	assert_int_equal(ip.payload_len, 8 + 40 + sizeof(u));
	assert_memory_equal(ip.payload + 8, f.b + 14, 40 + sizeof(u));
	assert_true(wire_icmpv6_checksum_ok(ip.src, ip.dst, ip.payload, ip.payload_len));
	assert_int_equal(srv.ctr.v[SRV_ICMP_UNREACH_SENT], 1);
	/* Not for a packet to a group (RFC 4443 §2.4 (e.3)). */
	input_from(all_mac, peer_ip6, all_nodes, WIRE_IPPROTO_UDP, 64, u, sizeof(u));
	assert_int_equal(nsent, 1);
	assert_int_equal(srv.ctr.v[SRV_DROP_ICMP_ERROR_NOT_UNICAST], 1);
	/* Rate-limited with IPv4's errors. */
	srv.icmp_tokens = 0;
	input(WIRE_IPPROTO_UDP, u, sizeof(u));
	assert_int_equal(nsent, 1);
	assert_int_equal(srv.ctr.v[SRV_DROP_ICMP_RATE], 1);
}

static void tcp_to_nobody_gets_rst(void **state)
{
	uint8_t t[20];
	struct wire_ipv6 ip;
	struct wire_tcp tcp;

	(void)state;
	wire_tcp_write(t, 40000, 80, 1000, 0, WIRE_TCP_SYN, 1024);
	input(WIRE_IPPROTO_TCP, t, sizeof(t));
	assert_int_equal(nsent, 1);
	assert_int_equal(wire_ipv6_view(&ip, sent + 14, sent_len - 14), 0);
	assert_int_equal(ip.next, WIRE_IPPROTO_TCP);
	assert_int_equal(wire_tcp_view(&tcp, ip.payload, ip.payload_len), 0);
	assert_rst(&tcp, WIRE_TCP_RST | WIRE_TCP_ACK, 0, 1001, 80, 40000);
	uint32_t sum = wire_sum_pseudo6(0, ip.src, ip.dst, WIRE_IPPROTO_TCP, 20);
	assert_int_equal(wire_sum_finish(wire_sum(sum, ip.payload, 20)), 0);
	/* With ACK: <SEQ=SEG.ACK><CTL=RST>. */
	wire_tcp_write(t, 40000, 80, 1000, 5555, WIRE_TCP_ACK, 1024);
	input(WIRE_IPPROTO_TCP, t, sizeof(t));
	assert_int_equal(wire_ipv6_view(&ip, sent + 14, sent_len - 14), 0);
	assert_int_equal(wire_tcp_view(&tcp, ip.payload, ip.payload_len), 0);
	assert_int_equal(tcp.flags, WIRE_TCP_RST);
	assert_int_equal(tcp.seq, 5555);
	/* A RST is not answered. */
	wire_tcp_write(t, 40000, 80, 1000, 0, WIRE_TCP_RST, 0);
	input(WIRE_IPPROTO_TCP, t, sizeof(t));
	assert_int_equal(nsent, 2);
	assert_int_equal(srv.ctr.v[SRV_DROP_RST_FOR_RST], 1);
	assert_int_equal(srv.ctr.v[SRV_RST_SENT], 2);
}

/* A tuple in custody that its process left in FIN-WAIT-2 (custody.h): the peer's FIN gets
 * <SEQ=SND.NXT><ACK=SEG.SEQ+1><CTL=ACK> over IPv6 as over IPv4 (RFC 9293 §3.10.7.4), from
 * the address it was sent to; its data gets a RST. */
static void fin_for_a_fin_wait_2_tuple_in_custody_gets_an_ack(void **state)
{
	uint8_t t[20];
	struct wire_ipv6 ip;
	struct wire_tcp tcp;
	struct flt_addr rip = flt_addr_v6(peer_ip6);

	(void)state;
	assert_int_equal(srv__custody_add_finwait2(&srv.custody, now_ms, 80, &rip, 40000, 700, 1000), 0);
	for (int i = 0; i < 2; i++) {   /* the FIN, then its retransmission in TIME-WAIT */
		wire_tcp_write(t, 40000, 80, 1000, 700, WIRE_TCP_FIN | WIRE_TCP_ACK, 1024);
		input(WIRE_IPPROTO_TCP, t, sizeof(t));
		assert_int_equal(nsent, i + 1);
		assert_int_equal(wire_ipv6_view(&ip, sent + 14, sent_len - 14), 0);
		assert_memory_equal(ip.src, node_ip6, 16);
		assert_memory_equal(ip.dst, peer_ip6, 16);
		assert_int_equal(wire_tcp_view(&tcp, ip.payload, ip.payload_len), 0);
		assert_rst(&tcp, WIRE_TCP_ACK, 700, 1001, 80, 40000);
		uint32_t sum = wire_sum_pseudo6(0, ip.src, ip.dst, WIRE_IPPROTO_TCP, 20);
		assert_int_equal(wire_sum_finish(wire_sum(sum, ip.payload, 20)), 0);
	}
	assert_int_equal(srv.ctr.v[SRV_CUSTODY_FIN_ACKED], 2);
	assert_int_equal(srv.ctr.v[SRV_RST_SENT], 0);
	/* A FIN one octet off: a RST at its ACK, as for any dead connection. */
	wire_tcp_write(t, 40000, 80, 1001, 700, WIRE_TCP_FIN | WIRE_TCP_ACK, 1024);
	input(WIRE_IPPROTO_TCP, t, sizeof(t));
	assert_int_equal(wire_ipv6_view(&ip, sent + 14, sent_len - 14), 0);
	assert_int_equal(wire_tcp_view(&tcp, ip.payload, ip.payload_len), 0);
	assert_int_equal(tcp.flags, WIRE_TCP_RST);
	assert_int_equal(srv.ctr.v[SRV_CUSTODY_NOT_FIN], 1);
	assert_int_equal(srv.ctr.v[SRV_RST_SENT], 1);
	srv__custody_free(&srv.custody);
}

/* The peer's retransmission of data the process had received (ending at the recorded
 * RCV.NXT, custody.h) gets <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK> over IPv6 too, counted. */
static void old_data_for_a_fin_wait_2_tuple_in_custody_gets_an_ack(void **state)
{
	uint8_t t[20 + 100] = { 0 };
	struct wire_ipv6 ip;
	struct wire_tcp tcp;
	struct flt_addr rip = flt_addr_v6(peer_ip6);

	(void)state;
	assert_int_equal(srv__custody_add_finwait2(&srv.custody, now_ms, 80, &rip, 40000, 700, 1000), 0);
	wire_tcp_write(t, 40000, 80, 900, 700, WIRE_TCP_PSH | WIRE_TCP_ACK, 1024);
	input(WIRE_IPPROTO_TCP, t, sizeof(t));
	assert_int_equal(nsent, 1);
	assert_int_equal(wire_ipv6_view(&ip, sent + 14, sent_len - 14), 0);
	assert_int_equal(wire_tcp_view(&tcp, ip.payload, ip.payload_len), 0);
	assert_rst(&tcp, WIRE_TCP_ACK, 700, 1000, 80, 40000);
	assert_int_not_equal(tcp.window, 0);
	assert_int_equal(srv.ctr.v[SRV_CUSTODY_OLD_ACKED], 1);
	assert_int_equal(srv.ctr.v[SRV_RST_SENT], 0);
	srv__custody_free(&srv.custody);
}

/* RFC 8200 §3 and §4: what is dropped before anything is answered. */
static void bad_headers_dropped_and_counted(void **state)
{
	struct frame f;
	uint8_t t[20];

	(void)state;
	wire_tcp_write(t, 40000, 80, 1000, 0, WIRE_TCP_SYN, 1024);
	/* Version 4 under the IPv6 ethertype. */
	build(&f, node_mac, peer_ip6, node_ip6, WIRE_IPPROTO_TCP, 64, t, sizeof(t));
	f.b[14] = 0x45;
	srv__input_ip6(&srv, f.b, f.len);
	/* Payload Length past the frame. */
	build(&f, node_mac, peer_ip6, node_ip6, WIRE_IPPROTO_TCP, 64, t, sizeof(t));
	wire_wr16(f.b + 14 + WIRE_IPV6_OFF_PLEN, 21);
	srv__input_ip6(&srv, f.b, f.len);
	/* A multicast source. */
	input_from(node_mac, all_nodes, node_ip6, WIRE_IPPROTO_TCP, 64, t, sizeof(t));
	assert_int_equal(srv.ctr.v[SRV_DROP_IPV6_HEADER], 3);
	/* Another address, another MAC. */
	input_from(node_mac, peer_ip6, other_ip6, WIRE_IPPROTO_TCP, 64, t, sizeof(t));
	input_from(opt_mac, peer_ip6, node_ip6, WIRE_IPPROTO_TCP, 64, t, sizeof(t));
	assert_int_equal(srv.ctr.v[SRV_DROP_NOT_FOR_NODE], 2);
	/* A fragment: it goes to reassembly, not answered here. */
	uint8_t fr[8 + 20] = { WIRE_IPPROTO_TCP, 0, 0, 1, 0, 0, 0, 42 };
	memcpy(fr + 8, t, 20);
	input(WIRE_IPPROTO_FRAGMENT, fr, sizeof(fr));
	assert_int_equal(reassembled, 1);
	assert_int_equal(nsent, 0);
	/* An extension header past the payload. */
	uint8_t dx[8] = { WIRE_IPPROTO_TCP, 4 };
	input(WIRE_IPPROTO_DSTOPTS, dx, sizeof(dx));
	assert_int_equal(srv.ctr.v[SRV_DROP_IPV6_EXT_HEADERS], 1);
	assert_int_equal(nsent, 0);
}

static void unknown_next_header_gets_parameter_problem_pointing_at_it(void **state)
{
	uint8_t d[8 + 8] = { 253, 0 };
	struct wire_ipv6 ip;

	(void)state;
	input(WIRE_IPPROTO_DSTOPTS, d, sizeof(d));
	assert_int_equal(nsent, 1);
	assert_int_equal(wire_ipv6_view(&ip, sent + 14, sent_len - 14), 0);
	assert_int_equal(ip.payload[0], WIRE_ICMPV6_PARAM_PROB);
	assert_int_equal(ip.payload[1], 1);
	assert_int_equal(wire_rd32(ip.payload + 4), 40);   /* the Destination Options' Next Header */
	assert_int_equal(srv.ctr.v[SRV_ICMPV6_PARAM_PROB_SENT], 1);
	assert_int_equal(srv.ctr.v[SRV_DROP_IPV6_NEXT_HEADER], 1);
}

/* RFC 8200 §4.2: an unrecognized option's two high bits say what to do. */
static void unrecognized_options_acted_on_by_their_high_bits(void **state)
{
	struct frame f;
	/* Destination Options: one option of type T, 2 octets of data, then PadN to 8;
	 * then an echo request. */
	uint8_t d[8 + 8] = { WIRE_IPPROTO_ICMPV6, 0, 0x00, 2, 0xab, 0xcd, 1, 0,
			     WIRE_ICMPV6_ECHO_REQUEST };
	struct wire_ipv6 ip;

	(void)state;
	/* 00: skipped, the echo is answered (the option types 0x00-0x3f but Pad1). */
	d[2] = 0x3e;
	build(&f, node_mac, peer_ip6, node_ip6, WIRE_IPPROTO_DSTOPTS, 64, d, sizeof(d));
	wire_icmpv6_set_checksum(peer_ip6, node_ip6, f.b + 14 + 40 + 8, 8);
	srv__input_ip6(&srv, f.b, f.len);
	assert_int_equal(srv.ctr.v[SRV_ICMP_ECHO_REPLIES], 1);
	/* 01: discarded silently. */
	d[2] = 0x7e;
	input(WIRE_IPPROTO_DSTOPTS, d, sizeof(d));
	assert_int_equal(nsent, 1);
	assert_int_equal(srv.ctr.v[SRV_DROP_IPV6_OPTION], 1);
	/* 10: discarded, Parameter Problem code 2 pointing at the option type (offset 42),
	 * even for a packet to a group. */
	d[2] = 0xbe;
	input_from(all_mac, peer_ip6, all_nodes, WIRE_IPPROTO_DSTOPTS, 64, d, sizeof(d));
	assert_int_equal(nsent, 2);
	assert_int_equal(wire_ipv6_view(&ip, sent + 14, sent_len - 14), 0);
	assert_int_equal(ip.payload[0], WIRE_ICMPV6_PARAM_PROB);
	assert_int_equal(ip.payload[1], 2);
	assert_int_equal(wire_rd32(ip.payload + 4), 42);
	/* 11: the same, but not for a packet to a group. */
	d[2] = 0xfe;
	input_from(all_mac, peer_ip6, all_nodes, WIRE_IPPROTO_DSTOPTS, 64, d, sizeof(d));
	assert_int_equal(nsent, 2);
	input(WIRE_IPPROTO_DSTOPTS, d, sizeof(d));
	assert_int_equal(nsent, 3);
	assert_int_equal(srv.ctr.v[SRV_DROP_IPV6_OPTION], 4);
	/* An option running past its header: a malformed header. */
	d[2] = 0x3e;
	d[3] = 9;
	input(WIRE_IPPROTO_DSTOPTS, d, sizeof(d));
	assert_int_equal(srv.ctr.v[SRV_DROP_IPV6_EXT_HEADERS], 1);
	assert_int_equal(nsent, 3);
}

/* RFC 8200 §4.5: the node reassembles fragments for its processes (server/reass.c); a
 * fragment to a group is dropped and counted. */
static void fragments_for_the_node_go_to_reassembly_and_to_a_group_are_dropped(void **state)
{
	/* Fragment header (UDP, offset 0, M, Identification 5), then a UDP header. */
	uint8_t d[8 + 8 + 8] = { WIRE_IPPROTO_UDP, 0, 0, 1, 0, 0, 0, 5, 0x9c, 0x40, 0, 7, 0, 100 };

	(void)state;
	input(WIRE_IPPROTO_FRAGMENT, d, sizeof(d));
	assert_int_equal(reassembled, 1);
	assert_true(reass_pkt.ip6.fragment);
	assert_true(reass_pkt.ip6.mf);
	assert_int_equal(reass_pkt.ip6.frag_id, 5);
	assert_true(reass_pkt.has_ports);
	assert_int_equal(reass_pkt.dport, 7);
	input_from(all_mac, peer_ip6, all_nodes, WIRE_IPPROTO_FRAGMENT, 64, d, sizeof(d));
	assert_int_equal(reassembled, 1);
	assert_int_equal(srv.ctr.v[SRV_DROP_IPV6_FRAGMENT], 1);
	assert_int_equal(nsent, 0);
}

/* The answers reass.c asks for: Parameter Problem code 0 with its pointer, and Time
 * Exceeded code 1 (RFC 4443 §3.3, §3.4), each quoting the fragment, checksummed, to its
 * source. */
static void reassembly_errors_quote_the_fragment_to_its_source(void **state)
{
	struct frame f;
	uint8_t d[8 + 8] = { WIRE_IPPROTO_UDP, 0, 0, 1, 0, 0, 0, 5 };
	struct wire_ipv6 ip;

	(void)state;
	build(&f, node_mac, peer_ip6, node_ip6, WIRE_IPPROTO_FRAGMENT, 64, d, sizeof(d));
	srv__reply6_param_problem(&srv, f.b, f.len, 0, 4);
	assert_int_equal(nsent, 1);
	assert_int_equal(wire_ipv6_view(&ip, sent + 14, sent_len - 14), 0);
	assert_memory_equal(ip.dst, peer_ip6, 16);
	assert_true(wire_icmpv6_checksum_ok(ip.src, ip.dst, ip.payload, ip.payload_len));
	assert_int_equal(ip.payload[0], WIRE_ICMPV6_PARAM_PROB);
	assert_int_equal(ip.payload[1], 0);
	assert_int_equal(wire_rd32(ip.payload + 4), 4);
	assert_memory_equal(ip.payload + 8, f.b + 14, f.len - 14);
	assert_int_equal(srv.ctr.v[SRV_ICMPV6_PARAM_PROB_SENT], 1);
	srv__reply6_reass_time_exceeded(&srv, f.b, f.len);
	assert_int_equal(nsent, 2);
	assert_int_equal(wire_ipv6_view(&ip, sent + 14, sent_len - 14), 0);
	assert_int_equal(ip.payload[0], WIRE_ICMPV6_TIME_EXCEEDED);
	assert_int_equal(ip.payload[1], 1);
	assert_int_equal(srv.ctr.v[SRV_ICMP_TIME_EXCEEDED_SENT], 1);
}

/* ---- ulsd's neighbour cache and custody's probes (RFC 4861 §7.2.2-7.2.5) ------------- */

/* An NA from peer_mac for target, to the node's address, with TLLA mac when mac. */
static void na_in(struct frame *f, const uint8_t *target, const uint8_t *mac, uint8_t flags,
		  uint8_t hlim)
{
	uint8_t m[32] = { WIRE_ND_NEIGHBOR_ADVERT };
	size_t n = WIRE_ND_NA_LEN;

	m[WIRE_ND_OFF_FLAGS] = flags;
	memcpy(m + WIRE_ND_OFF_TARGET, target, 16);
	if (mac) {
		m[24] = WIRE_ND_OPT_TGT_LLADDR;
		m[25] = 1;
		memcpy(m + 26, mac, 6);
		n = 32;
	}
	build(f, node_mac, target, node_ip6, WIRE_IPPROTO_ICMPV6, hlim, m, n);
}

static struct srv_custody custody1;

/* One connection in custody: node_ip6 port 5001 to peer port 80. */
static void hold(const uint8_t *peer)
{
	custody1 = (struct srv_custody){ .lport = 5001, .rport = 80, .rip = flt_addr_v6(peer),
					 .probes_left = SRV_CUSTODY_PROBES };
	srv.custody.c = &custody1;
	srv.custody.n = srv.custody.cap = 1;
}

/* The last frame sent is custody's probe to dmac: an ACK from node port 5001 to port 80,
 * ACK = SEQ + 2^31 (RFC 9293 §3.10.7.4), its checksum over the IPv6 pseudo-header. */
static void sent_probe(const uint8_t *dmac, const uint8_t *dst)
{
	struct wire_ipv6 ip = sent_ip6(dmac);
	struct wire_tcp t;

	assert_int_equal(ip.next, WIRE_IPPROTO_TCP);
	assert_memory_equal(ip.src, node_ip6, 16);
	assert_memory_equal(ip.dst, dst, 16);
	assert_int_equal(wire_tcp_view(&t, ip.payload, ip.payload_len), 0);
	assert_int_equal(t.sport, 5001);
	assert_int_equal(t.dport, 80);
	assert_int_equal(t.flags, WIRE_TCP_ACK);
	assert_int_equal(t.ack, t.seq ^ 0x80000000u);
	uint32_t sum = wire_sum_pseudo6(0, ip.src, ip.dst, WIRE_IPPROTO_TCP, ip.payload_len);
	assert_int_equal(wire_sum_finish(wire_sum(sum, ip.payload, ip.payload_len)), 0);
}

/* The last frame sent is ulsd's NS for target, to its solicited-node group (RFC 4861
 * §7.2.2, §4.3). */
static void sent_ns(const uint8_t *target)
{
	uint8_t g[16], gmac[6];

	solicited(g, gmac, target);
	sent_nd(gmac, node_ip6, g, WIRE_ND_NEIGHBOR_SOLICIT, target);
}

/* §7.2.3: a valid NS with a Source Link-Layer Address option creates the entry for its
 * source; custody's probe then goes to that address at once. An invalid NS (hop limit
 * 254, §7.1.1) creates none. */
static void ns_source_option_enters_the_cache_and_probe_goes_there(void **state)
{
	(void)state;
	input_ns(other_ip6, node_ip6, opt_mac, 254);
	assert_int_equal(srv.ctr.v[SRV_DROP_ND_INVALID], 1);
	assert_int_equal(srv__neigh6_state(&srv.neigh6, now_ms, other_ip6), SRV_NEIGH6_FREE);
	input_ns(peer_ip6, node_ip6, opt_mac, 255);
	assert_int_equal(nsent, 1);   /* the NA */
	assert_int_equal(srv__neigh6_state(&srv.neigh6, now_ms, peer_ip6), SRV_NEIGH6_STALE);
	hold(peer_ip6);
	srv__send_probe(&srv, &custody1);
	assert_int_equal(nsent, 2);
	sent_probe(opt_mac, peer_ip6);
	assert_int_equal(srv.ctr.v[SRV_RST_PROBES], 1);
	assert_int_equal(srv.ctr.v[SRV_ND_SOLICITS_SENT], 0);
}

/* §7.2.2: a probe to a peer the cache does not know solicits it (counted, deferred); a
 * second probe meanwhile solicits nothing more; the solicited NA brings the address and
 * the probe goes. An NA with hop limit 254 (§7.1.2) is dropped, counted, and resolves
 * nothing; an NA for an address nobody asked about is ignored, counted. */
static void probe_to_unknown_peer_solicits_and_goes_when_the_na_comes(void **state)
{
	struct frame f;

	(void)state;
	na_in(&f, other_ip6, opt_mac, WIRE_ND_NA_SOLICITED | WIRE_ND_NA_OVERRIDE, 255);
	srv__input_ip6(&srv, f.b, f.len);
	assert_int_equal(srv.ctr.v[SRV_ND_ADVERTS_IGNORED], 1);
	assert_int_equal(nsent, 0);
	hold(peer_ip6);
	srv__send_probe(&srv, &custody1);
	assert_int_equal(nsent, 1);
	sent_ns(peer_ip6);
	assert_int_equal(srv.ctr.v[SRV_ND_SOLICITS_SENT], 1);
	assert_int_equal(srv.ctr.v[SRV_RST_PROBES_DEFERRED], 1);
	srv__send_probe(&srv, &custody1);
	assert_int_equal(nsent, 1);
	assert_int_equal(srv.ctr.v[SRV_RST_PROBES_DEFERRED], 2);
	na_in(&f, peer_ip6, opt_mac, WIRE_ND_NA_SOLICITED | WIRE_ND_NA_OVERRIDE, 254);
	srv__input_ip6(&srv, f.b, f.len);
	assert_int_equal(srv.ctr.v[SRV_DROP_ND_INVALID], 1);
	assert_int_equal(nsent, 1);
	na_in(&f, peer_ip6, opt_mac, WIRE_ND_NA_SOLICITED | WIRE_ND_NA_OVERRIDE, 255);
	srv__input_ip6(&srv, f.b, f.len);
	assert_int_equal(nsent, 2);
	sent_probe(opt_mac, peer_ip6);
	assert_int_equal(srv.ctr.v[SRV_RST_PROBES], 1);
	assert_int_equal(srv__neigh6_state(&srv.neigh6, now_ms, peer_ip6), SRV_NEIGH6_REACHABLE);
	/* The next probe goes at once. */
	srv__send_probe(&srv, &custody1);
	assert_int_equal(nsent, 3);
	assert_int_equal(srv.ctr.v[SRV_RST_PROBES], 2);
}

/* §7.2.2: unanswered, the solicitation is sent again every RetransTimer, three in all;
 * then resolution fails and the waiting probe is a counted drop. */
static void unanswered_solicitations_end_in_a_counted_drop(void **state)
{
	(void)state;
	hold(peer_ip6);
	srv__send_probe(&srv, &custody1);
	assert_int_equal(nsent, 1);
	assert_true(custody1.awaits_neighbour);
	assert_int_equal(srv__neigh6_run(&srv), SRV_NEIGH6_RETRANS_MS);
	assert_int_equal(nsent, 1);
	for (unsigned i = 1; i <= SRV_NEIGH6_SOLICITS; i++) {
		now_ms += SRV_NEIGH6_RETRANS_MS;
		srv__neigh6_run(&srv);
	}
	assert_int_equal(nsent, SRV_NEIGH6_SOLICITS);
	sent_ns(peer_ip6);
	assert_int_equal(srv.ctr.v[SRV_ND_SOLICITS_SENT], SRV_NEIGH6_SOLICITS);
	assert_int_equal(srv.ctr.v[SRV_ND_RESOLVE_FAILED], 1);
	assert_int_equal(srv.ctr.v[SRV_DROP_PROBE_NO_NEIGHBOUR], 1);
	assert_int_equal(srv.ctr.v[SRV_RST_PROBES], 0);
	assert_false(srv__neigh6_resolving(&srv.neigh6));
	/* Counted as dropped, it waits no more: a later resolution does not send it. */
	assert_false(custody1.awaits_neighbour);
}

/* The advertisement that ends a resolution sends the probes that waited for it, and only
 * those: a connection its process left in TIME-WAIT to the same peer is held unprobed
 * (custody.h, RFC 9293 §3.3.2), and a DEAD one probed already is not probed twice. Then
 * the peer's own solicitation, its address known, sends nothing either. */
static void resolution_sends_only_the_probes_that_waited(void **state)
{
	struct srv_custody held[2] = {
		{ .lport = 5002, .rport = 80, .rip = flt_addr_v6(peer_ip6),
		  .state = SRV_CUSTODY_TIME_WAIT, .expires_ms = now_ms + SRV_TIMEWAIT_MS },
		{ .lport = 5001, .rport = 80, .rip = flt_addr_v6(peer_ip6),
		  .probes_left = SRV_CUSTODY_PROBES, .expires_ms = now_ms + SRV_TIMEWAIT_MS },
	};
	struct frame f;

	(void)state;
	srv.custody.c = held;
	srv.custody.n = srv.custody.cap = 2;
	srv__send_probe(&srv, &held[1]);
	assert_int_equal(nsent, 1);
	sent_ns(peer_ip6);
	assert_true(held[1].awaits_neighbour);
	assert_false(held[0].awaits_neighbour);
	na_in(&f, peer_ip6, opt_mac, WIRE_ND_NA_SOLICITED | WIRE_ND_NA_OVERRIDE, 255);
	srv__input_ip6(&srv, f.b, f.len);
	assert_int_equal(nsent, 2);
	sent_probe(opt_mac, peer_ip6);   /* port 5001's, the DEAD one */
	assert_int_equal(srv.ctr.v[SRV_RST_PROBES], 1);
	assert_false(held[1].awaits_neighbour);
	assert_int_equal(held[1].probes_sent, 1);   /* ulsstat lists them */
	assert_int_equal(held[0].probes_sent, 0);
	/* An unsolicited advertisement with another address, then the peer's solicitation:
	 * the cache changes, nothing waits, no probe. */
	static const uint8_t new_mac[6] = { 0x02, 0x75, 0x6c, 0, 0, 0x77 };
	na_in(&f, peer_ip6, new_mac, WIRE_ND_NA_OVERRIDE, 255);
	srv__input_ip6(&srv, f.b, f.len);
	input_ns(peer_ip6, node_ip6, opt_mac, 255);
	assert_int_equal(nsent, 3);   /* the NA answering the solicitation */
	assert_int_equal(srv.ctr.v[SRV_RST_PROBES], 1);
	srv.custody.c = NULL;
	srv.custody.n = srv.custody.cap = 0;
}

/* ---- the node's duplicate address detection (RFC 4862 §5.4, optimistic) --------------- */

/* §5.4.2: after a random delay of at most MAX_RTR_SOLICITATION_DELAY, one solicitation per
 * address, from the unspecified address, without a source link-layer option, to the
 * address's solicited-node group; §5.4: unique when nothing objects within RetransTimer. */
static void dad_solicits_each_address_once_from_unspecified_then_is_done(void **state)
{
	struct wire_eth e;
	struct wire_ipv6 ip;
	struct wire_nd nd;
	uint8_t g[16], gmac[6];

	(void)state;
	srv__dad_start(&srv);
	assert_true(srv__dad_pending(&srv));
	assert_true(srv.dad_ms >= now_ms && srv.dad_ms < now_ms + SRV_DAD_MAX_DELAY_MS);
	now_ms = srv.dad_ms - 1;   /* the delay is random: its end, whatever it is */
	assert_int_equal(srv__dad_run(&srv), 1);
	assert_int_equal(nsent, 0);
	now_ms = srv.dad_ms;
	assert_int_equal(srv__dad_run(&srv), SRV_NEIGH6_RETRANS_MS);
	assert_int_equal(nsent, 2);
	assert_int_equal(srv.ctr.v[SRV_ND_DAD_SOLICITS_SENT], 2);
	/* The last one: the link-local address's. */
	solicited(g, gmac, srv.ip6_ll);
	assert_int_equal(wire_eth_view(&e, sent, sent_len), 0);
	assert_memory_equal(e.dst, gmac, 6);
	assert_int_equal(wire_ipv6_view(&ip, e.payload, e.payload_len), 0);
	assert_int_equal(ip.hlim, 255);
	assert_memory_equal(ip.src, unspec, 16);
	assert_memory_equal(ip.dst, g, 16);
	assert_true(wire_icmpv6_checksum_ok(ip.src, ip.dst, ip.payload, ip.payload_len));
	assert_int_equal(wire_nd_view(&nd, ip.payload, ip.payload_len), 0);
	assert_int_equal(nd.type, WIRE_ND_NEIGHBOR_SOLICIT);
	assert_memory_equal(nd.target, srv.ip6_ll, 16);
	assert_null(nd.lladdr);
	assert_int_equal(ip.payload_len, WIRE_ND_NS_LEN);
	now_ms += SRV_NEIGH6_RETRANS_MS - 1;
	srv__dad_run(&srv);
	assert_true(srv__dad_pending(&srv));
	now_ms += 1;
	srv__dad_run(&srv);
	assert_false(srv__dad_pending(&srv));
	assert_int_equal(srv.dad, SRV_DAD_DONE);
	assert_int_equal(nsent, 2);
	assert_int_equal(srv.ctr.v[SRV_ND_DAD_DUPLICATE], 0);
}

/* §5.4.4: an advertisement for a tentative address from another station: a duplicate,
 * counted once; after detection, an advertisement is a conflict but not a detection. */
static void dad_advertisement_for_tentative_address_is_a_counted_duplicate(void **state)
{
	struct frame f;

	(void)state;
	srv__dad_start(&srv);
	na_in(&f, node_ip6, opt_mac, WIRE_ND_NA_OVERRIDE, 255);
	srv__input_ip6(&srv, f.b, f.len);
	assert_int_equal(srv.ctr.v[SRV_ND_DAD_DUPLICATE], 1);
	assert_int_equal(srv.ctr.v[SRV_ND_ADDRESS_CONFLICT], 1);
	assert_int_equal(srv.dad, SRV_DAD_DUPLICATE);
	assert_false(srv__dad_pending(&srv));
	srv__input_ip6(&srv, f.b, f.len);
	assert_int_equal(srv.ctr.v[SRV_ND_DAD_DUPLICATE], 1);
	assert_int_equal(srv.ctr.v[SRV_ND_ADDRESS_CONFLICT], 2);
	/* No solicitation of the node's own once it is over. */
	now_ms += 10 * SRV_NEIGH6_RETRANS_MS;
	srv__dad_run(&srv);
	assert_int_equal(nsent, 0);
}

/* §5.4.3: a solicitation for a tentative address from the unspecified address is another
 * node's detection of it: a duplicate, counted; the node still answers it (Deviation in
 * reply6.c: its addresses are its operator's). */
static void dad_solicitation_from_unspecified_for_tentative_address_is_a_duplicate(void **state)
{

	(void)state;
	srv__dad_start(&srv);
	input_ns(unspec, node_ip6, NULL, 255);
	assert_int_equal(srv.ctr.v[SRV_ND_DAD_DUPLICATE], 1);
	sent_na(all_mac, all_nodes, node_ip6, WIRE_ND_NA_OVERRIDE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(ns_multicast_for_node_address_answered_solicited_override, setup),
		cmocka_unit_test_setup(ns_unicast_for_link_local_without_option_answered_to_frame_source, setup),
		cmocka_unit_test_setup(ns_from_unspecified_answered_to_all_nodes_unsolicited, setup),
		cmocka_unit_test_setup(invalid_ns_dropped_and_counted, setup),
		cmocka_unit_test_setup(echo_request_answered_with_its_data, setup),
		cmocka_unit_test_setup(udp_to_nobody_gets_port_unreachable_quoting_it, setup),
		cmocka_unit_test_setup(tcp_to_nobody_gets_rst, setup),
		cmocka_unit_test_setup(fin_for_a_fin_wait_2_tuple_in_custody_gets_an_ack, setup),
		cmocka_unit_test_setup(old_data_for_a_fin_wait_2_tuple_in_custody_gets_an_ack, setup),
		cmocka_unit_test_setup(bad_headers_dropped_and_counted, setup),
		cmocka_unit_test_setup(unknown_next_header_gets_parameter_problem_pointing_at_it, setup),
		cmocka_unit_test_setup(unrecognized_options_acted_on_by_their_high_bits, setup),
		cmocka_unit_test_setup(
			fragments_for_the_node_go_to_reassembly_and_to_a_group_are_dropped, setup),
		cmocka_unit_test_setup(reassembly_errors_quote_the_fragment_to_its_source, setup),
		cmocka_unit_test_setup(ns_source_option_enters_the_cache_and_probe_goes_there, setup),
		cmocka_unit_test_setup(probe_to_unknown_peer_solicits_and_goes_when_the_na_comes,
				       setup),
		cmocka_unit_test_setup(unanswered_solicitations_end_in_a_counted_drop, setup),
		cmocka_unit_test_setup(resolution_sends_only_the_probes_that_waited, setup),
		cmocka_unit_test_setup(dad_solicits_each_address_once_from_unspecified_then_is_done,
				       setup),
		cmocka_unit_test_setup(dad_advertisement_for_tentative_address_is_a_counted_duplicate,
				       setup),
		cmocka_unit_test_setup(
			dad_solicitation_from_unspecified_for_tentative_address_is_a_duplicate, setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
