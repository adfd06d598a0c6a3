/* server/reply.c: the frames the node sends for packets nobody owns, and the named counter
 * of every case it leaves unanswered.
 *
 * Read first: RFC 826, RFC 9293 §3.10.7.1, RFC 1122 §3.2.2 and §4.2.3.10.
 *
 * Frames are built from templates with netif/wire's writers, parsed with flt_parse as
 * ulsd parses them, handed to the reply functions; what the node sends is caught by the
 * srv__send_frame stub below and read back through the wire views.
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
static const uint8_t bcast_mac[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
static struct srv srv;

/* reply6.c's, which srv__send_probe hands an IPv6 peer (test_reply6 checks it). */
static unsigned probes6;
void srv__send_probe6(struct srv *s, struct srv_custody *c)
{
	(void)s; (void)c;
	probes6++;
}
static uint32_t node_ip, peer_ip, other_ip, bcast_ip;

static uint32_t addr(uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
	uint32_t v;

	memcpy(&v, (const uint8_t[]){ a, b, c, d }, 4);
	return v;
}

static int setup(void **state)
{
	(void)state;
	memset(&srv, 0, sizeof(srv));
	node_ip = addr(198, 18, 0, 1);
	peer_ip = addr(198, 18, 0, 2);
	other_ip = addr(198, 18, 0, 9);
	bcast_ip = addr(198, 18, 0, 255);
	srv.ip = node_ip;
	srv.prefix_len = 24;
	srv.mtu = 1500;
	memcpy(srv.mac, node_mac, 6);
	srv.rst_tokens = 2000;
	srv.icmp_tokens = 100;
	srv.rst_tokens_ms = srv.icmp_tokens_ms = now_ms;
	nsent = 0;
	sent_len = 0;
	return 0;
}

struct frame {
	uint8_t b[256];
	size_t len;
	struct flt_pkt p;
};

static void arp(struct frame *f, uint16_t op, uint32_t tpa)
{
	memset(f, 0, sizeof(*f));
	wire_eth_write(f->b, bcast_mac, peer_mac, WIRE_ETHERTYPE_ARP);
	wire_arp_write(f->b + WIRE_ETH_HLEN, op, peer_mac, peer_ip, bcast_mac, tpa);
	f->len = WIRE_ETH_MIN_FRAME;
	assert_int_equal(flt_parse(f->b, f->len, &f->p), 0);
}

/* A TCP segment from the peer to dst (template: SYN, seq 1000, no data). */
static void tcp(struct frame *f, uint32_t dst, uint8_t flags, uint32_t seq, uint32_t ack)
{
	uint8_t *ip = f->b + WIRE_ETH_HLEN, *t = ip + WIRE_IPV4_HLEN_MIN;

	memset(f, 0, sizeof(*f));
	wire_eth_write(f->b, node_mac, peer_mac, WIRE_ETHERTYPE_IPV4);
	wire_ipv4_write(ip, WIRE_IPPROTO_TCP, peer_ip, dst, 40, 7, 64);
	wire_tcp_write(t, 40000, 81, seq, ack, flags, 1000);
	f->len = WIRE_ETH_HLEN + 40;
	assert_int_equal(flt_parse(f->b, f->len, &f->p), 0);
}

static void echo(struct frame *f, const uint8_t *dst_mac, uint32_t dst)
{
	uint8_t *ip = f->b + WIRE_ETH_HLEN, *ic = ip + WIRE_IPV4_HLEN_MIN;

	memset(f, 0, sizeof(*f));
	wire_eth_write(f->b, dst_mac, peer_mac, WIRE_ETHERTYPE_IPV4);
	wire_ipv4_write(ip, WIRE_IPPROTO_ICMP, peer_ip, dst, 20 + 12, 7, 64);
	ic[WIRE_ICMP_OFF_TYPE] = WIRE_ICMP_ECHO;
	memcpy(ic + 8, "ping", 4);
	wire_wr16(ic + WIRE_ICMP_OFF_CHECKSUM, wire_sum_finish(wire_sum(0, ic, 12)));
	f->len = WIRE_ETH_HLEN + 32;
	assert_int_equal(flt_parse(f->b, f->len, &f->p), 0);
}

/* RFC 826: a request for the node's address gets a reply with sender and target swapped. */
static void arp_request_for_node_gets_reply(void **state)
{
	struct frame f;
	struct wire_eth eth;
	struct wire_arp a;

	(void)state;
	arp(&f, WIRE_ARP_OP_REQUEST, node_ip);
	srv__reply_arp(&srv, &f.p);
	assert_int_equal(nsent, 1);
	assert_int_equal(wire_eth_view(&eth, sent, sent_len), 0);
	assert_memory_equal(eth.dst, peer_mac, 6);
	assert_int_equal(eth.type, WIRE_ETHERTYPE_ARP);
	assert_int_equal(wire_arp_view(&a, eth.payload, eth.payload_len), 0);
	assert_int_equal(a.op, WIRE_ARP_OP_REPLY);
	assert_memory_equal(a.sha, node_mac, 6);
	assert_int_equal(a.spa, node_ip);
	assert_memory_equal(a.tha, peer_mac, 6);
	assert_int_equal(a.tpa, peer_ip);
	assert_int_equal(srv.ctr.v[SRV_ARP_REPLIES], 1);
}

static void arp_request_for_other_address_counted_not_answered(void **state)
{
	struct frame f;

	(void)state;
	arp(&f, WIRE_ARP_OP_REQUEST, other_ip);
	srv__reply_arp(&srv, &f.p);
	assert_int_equal(nsent, 0);
	assert_int_equal(srv.ctr.v[SRV_DROP_ARP_NOT_FOR_NODE], 1);
}

/* RFC 9293 §3.10.7.1: ACK off -> <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>, with a
 * checksum over the pseudo-header that verifies. */
static void syn_to_closed_port_gets_rst_ack_with_valid_checksum(void **state)
{
	struct frame f;
	struct wire_eth eth;
	struct wire_ipv4 ip;
	struct wire_tcp t;

	(void)state;
	tcp(&f, node_ip, WIRE_TCP_SYN, 1000, 0x55667788);
	srv__reply_rst(&srv, f.b, &f.p);
	assert_int_equal(nsent, 1);
	assert_int_equal(wire_eth_view(&eth, sent, sent_len), 0);
	assert_int_equal(wire_ipv4_view(&ip, eth.payload, eth.payload_len), 0);
	assert_true(wire_ipv4_checksum_ok(&ip));
	assert_int_equal(ip.src, node_ip);
	assert_int_equal(ip.dst, peer_ip);
	assert_int_equal(wire_tcp_view(&t, ip.data, ip.data_len), 0);
	assert_rst(&t, WIRE_TCP_RST | WIRE_TCP_ACK, 0, 1001, 81, 40000);
	uint32_t sum = wire_sum_pseudo4(0, ip.src, ip.dst, WIRE_IPPROTO_TCP, (uint16_t)ip.data_len);
	assert_int_equal(wire_sum_finish(wire_sum(sum, ip.data, ip.data_len)), 0);
	assert_int_equal(srv.ctr.v[SRV_RST_SENT], 1);
}

/* "An incoming segment containing a RST is discarded." */
static void rst_to_closed_port_counted_not_answered(void **state)
{
	struct frame f;

	(void)state;
	tcp(&f, node_ip, WIRE_TCP_RST, 1000, 0);
	srv__reply_rst(&srv, f.b, &f.p);
	assert_int_equal(nsent, 0);
	assert_int_equal(srv.ctr.v[SRV_DROP_RST_FOR_RST], 1);
}

static void segment_to_broadcast_address_counted_not_reset(void **state)
{
	struct frame f;

	(void)state;
	tcp(&f, bcast_ip, WIRE_TCP_SYN, 1000, 0);
	srv__reply_rst(&srv, f.b, &f.p);
	assert_int_equal(nsent, 0);
	assert_int_equal(srv.ctr.v[SRV_DROP_RST_NOT_UNICAST], 1);
}

/* RFC 1122 §3.2.2.6: the reply returns the request's data; a broadcast echo is not
 * answered (and counted). */
static void echo_answered_and_broadcast_echo_counted(void **state)
{
	struct frame f;
	struct wire_eth eth;
	struct wire_ipv4 ip;
	struct wire_icmp ic;

	(void)state;
	echo(&f, node_mac, node_ip);
	srv__reply_echo(&srv, f.b, f.len, &f.p);
	assert_int_equal(nsent, 1);
	assert_int_equal(wire_eth_view(&eth, sent, sent_len), 0);
	assert_int_equal(wire_ipv4_view(&ip, eth.payload, eth.payload_len), 0);
	assert_int_equal(wire_icmp_view(&ic, ip.data, ip.data_len), 0);
	assert_int_equal(ic.type, WIRE_ICMP_ECHO_REPLY);
	assert_memory_equal(ic.body, "ping", 4);
	assert_int_equal(wire_sum_finish(wire_sum(0, ip.data, ip.data_len)), 0);

	echo(&f, bcast_mac, bcast_ip);
	srv__reply_echo(&srv, f.b, f.len, &f.p);
	assert_int_equal(nsent, 1);
	assert_int_equal(srv.ctr.v[SRV_DROP_ECHO_UNANSWERED], 1);
}

/* RFC 1122 §3.2.2.6: "Data received in an ICMP Echo Request MUST be entirely included in
 * the resulting Echo Reply." A reassembled request of 4000 octets (reass.c) gets its reply
 * in fragments of at most the MTU (server/fragment.c, RFC 791 §3.2): 1480, 1480 and 1048
 * octets of ICMP message, one Identification, MF on all but the last; the last one is
 * what the stub kept. */
static void echo_longer_than_the_link_answered_in_fragments(void **state)
{
	static uint8_t b[WIRE_ETH_HLEN + 20 + 4008];
	uint8_t *ip = b + WIRE_ETH_HLEN, *ic = ip + 20;
	struct flt_pkt p;
	struct wire_eth eth;
	struct wire_ipv4 v;

	(void)state;
	wire_eth_write(b, node_mac, peer_mac, WIRE_ETHERTYPE_IPV4);
	wire_ipv4_write(ip, WIRE_IPPROTO_ICMP, peer_ip, node_ip, 20 + 4008, 7, 64);
	ic[WIRE_ICMP_OFF_TYPE] = WIRE_ICMP_ECHO;
	for (unsigned i = 0; i < 4000; i++)
		ic[8 + i] = (uint8_t)(i * 7);
	wire_wr16(ic + WIRE_ICMP_OFF_CHECKSUM, wire_sum_finish(wire_sum(0, ic, 4008)));
	assert_int_equal(flt_parse(b, sizeof(b), &p), 0);
	srv__reply_echo(&srv, b, sizeof(b), &p);
	assert_int_equal(nsent, 3);
	assert_int_equal(srv.ctr.v[SRV_FRAGMENTS_SENT], 3);
	assert_int_equal(srv.ctr.v[SRV_ICMP_ECHO_REPLIES], 1);
	assert_int_equal(wire_eth_view(&eth, sent, sent_len), 0);
	assert_int_equal(wire_ipv4_view(&v, eth.payload, eth.payload_len), 0);
	assert_int_equal(v.total, 20 + 4008 - 2 * 1480);
	assert_int_equal(v.frag, 2 * 1480 / 8);                 /* offset 2960, MF clear */
	assert_int_equal(wire_sum_finish(wire_sum(0, eth.payload, 20)), 0);
	/* The last fragment holds the request's data from octet 2960 - 8 of it on. */
	assert_memory_equal(v.data, ic + 2 * 1480, 4008 - 2 * 1480);
}

/* RFC 1122 §3.2.2: no ICMP error for a datagram to a broadcast or multicast address. */
static void udp_to_broadcast_gets_no_port_unreachable_and_is_counted(void **state)
{
	struct frame f;
	uint8_t *ip = f.b + WIRE_ETH_HLEN, *u = ip + WIRE_IPV4_HLEN_MIN;

	(void)state;
	memset(&f, 0, sizeof(f));
	wire_eth_write(f.b, bcast_mac, peer_mac, WIRE_ETHERTYPE_IPV4);
	wire_ipv4_write(ip, WIRE_IPPROTO_UDP, peer_ip, bcast_ip, 20 + 8, 7, 64);
	wire_wr16(u + WIRE_UDP_OFF_SPORT, 5000);
	wire_wr16(u + WIRE_UDP_OFF_DPORT, 6000);
	wire_wr16(u + WIRE_UDP_OFF_LEN, 8);
	f.len = WIRE_ETH_HLEN + 28;
	assert_int_equal(flt_parse(f.b, f.len, &f.p), 0);
	srv__reply_port_unreachable(&srv, f.b, f.len, &f.p);
	assert_int_equal(nsent, 0);
	assert_int_equal(srv.ctr.v[SRV_DROP_ICMP_ERROR_NOT_UNICAST], 1);
}

/* Custody's probe: to a known IPv4 peer at once, an ACK far outside its window (RFC 9293
 * §3.10.7.4); to one ulsd never heard from, nothing, counted; an IPv6 peer goes to
 * reply6.c. */
static void probe_known_peer_sent_unknown_counted_ipv6_handed_on(void **state)
{
	(void)state;
	struct srv_custody c = { .lport = 5001, .rport = 80, .rip = flt_addr_v4(peer_ip) };
	struct wire_ipv4 ip;
	struct wire_tcp t;

	srv__send_probe(&srv, &c);
	assert_int_equal(nsent, 0);
	assert_int_equal(srv.ctr.v[SRV_DROP_PROBE_NO_NEIGHBOUR], 1);
	srv__learn_neighbour(&srv, peer_ip, peer_mac);
	srv__send_probe(&srv, &c);
	assert_int_equal(nsent, 1);
	assert_int_equal(srv.ctr.v[SRV_RST_PROBES], 1);
	assert_memory_equal(sent, peer_mac, 6);
	assert_int_equal(wire_ipv4_view(&ip, sent + 14, sent_len - 14), 0);
	assert_int_equal(wire_tcp_view(&t, ip.data, ip.data_len), 0);
	assert_int_equal(t.flags, WIRE_TCP_ACK);
	assert_int_equal(t.ack, t.seq ^ 0x80000000u);
	assert_int_equal(t.sport, 5001);
	assert_int_equal(t.dport, 80);
	const uint8_t v6[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 2 };
	c.rip = flt_addr_v6(v6);
	srv__send_probe(&srv, &c);
	assert_int_equal(probes6, 1);
	assert_int_equal(nsent, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(arp_request_for_node_gets_reply, setup),
		cmocka_unit_test_setup(probe_known_peer_sent_unknown_counted_ipv6_handed_on, setup),
		cmocka_unit_test_setup(arp_request_for_other_address_counted_not_answered, setup),
		cmocka_unit_test_setup(syn_to_closed_port_gets_rst_ack_with_valid_checksum, setup),
		cmocka_unit_test_setup(rst_to_closed_port_counted_not_answered, setup),
		cmocka_unit_test_setup(segment_to_broadcast_address_counted_not_reset, setup),
		cmocka_unit_test_setup(echo_answered_and_broadcast_echo_counted, setup),
		cmocka_unit_test_setup(echo_longer_than_the_link_answered_in_fragments, setup),
		cmocka_unit_test_setup(udp_to_broadcast_gets_no_port_unreachable_and_is_counted,
				       setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
