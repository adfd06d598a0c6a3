/* The direct data path's IPv4 steering (filter/datapath.bpf.c), run in the kernel with
 * BPF_PROG_TEST_RUN against maps filled from a filter table through its observer (as
 * server/bpf.c fills them): a frame goes to the queue of the owner flt_lookup_rx names,
 * read in one call when the IPv4 header has no options (the peek) and field by field when
 * it has some or the frame is shorter than the peek; a segment too short for its TCP
 * header, which the filter drops, goes to ulsd. The transmit check reads the writing
 * queue from skb->queue_mapping, which a test run cannot set (test_datapath6's comment):
 * tests/node checks it on a live node.
 *
 * Needs root (CAP_BPF) and a kernel that runs the programs; skipped otherwise.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <linux/bpf.h>

#include "netif/wire/wire.h"
#include "tests/unit/dp_fixture.h"

#define TCP WIRE_IPPROTO_TCP
#define UDP WIRE_IPPROTO_UDP
#define NODE_IP 0x0a000001u     /* host order */
#define PEER_IP 0x0a000002u

static int setup(void **state)
{
	struct dp_fx *f;

	if (dp_fx_open(&f, NODE_IP, 0) < 0)
		return -1;
	*state = f;
	if (f)
		flt_table_set_observer(f->t, dp_mirror4, f);
	return 0;
}

struct frame {
	uint8_t b[256];
	size_t len;
};

/* An IPv4 frame from src (host order) to the node: optlen octets of IP options (NOPs,
 * RFC 791 §3.1), then l4len octets of transport header and data with the ports and, for
 * TCP, the flags. */
static void frame4(struct frame *fr, uint32_t src, uint8_t proto, uint16_t sport,
		   uint16_t dport, uint8_t flags, size_t optlen, size_t l4len)
{
	size_t hlen = WIRE_IPV4_HLEN_MIN + optlen;
	uint8_t *ip = fr->b + WIRE_ETH_HLEN, *l4 = ip + hlen;

	assert_true(WIRE_ETH_HLEN + hlen + l4len <= sizeof(fr->b));
	memset(fr, 0, sizeof(*fr));
	wire_eth_write(fr->b, node_mac, peer_mac, WIRE_ETHERTYPE_IPV4);
	wire_ipv4_write(ip, proto, htonl(src), htonl(NODE_IP), (uint16_t)(hlen + l4len), 1, 64);
	ip[WIRE_IPV4_OFF_VIHL] = (uint8_t)(WIRE_IPV4_VERSION << 4 | hlen / 4);
	memset(ip + WIRE_IPV4_HLEN_MIN, 1, optlen);   /* NOP */
	wire_wr16(ip + WIRE_IPV4_OFF_CHECKSUM, 0);
	wire_wr16(ip + WIRE_IPV4_OFF_CHECKSUM, wire_sum_finish(wire_sum(0, ip, hlen)));
	wire_wr16(l4, sport);
	wire_wr16(l4 + 2, dport);
	if (proto == TCP && l4len > WIRE_TCP_OFF_FLAGS) {
		l4[WIRE_TCP_OFF_DOFF] = 5 << 4;
		l4[WIRE_TCP_OFF_FLAGS] = flags;
	} else if (proto == UDP && l4len >= WIRE_UDP_HLEN) {
		wire_wr16(l4 + 4, (uint16_t)l4len);
	}
	fr->len = WIRE_ETH_HLEN + hlen + l4len;
}

/* The steering program's queue for fr (dp_fixture.h's dp_steer). */
static uint32_t steer(struct dp_fx *f, const struct frame *fr)
{
	return dp_steer(f, fr->b, fr->len);
}

/* The queue flt_lookup_rx's owner has (0: ulsd; dp_fixture.h). */
static uint32_t expect(struct dp_fx *f, const struct frame *fr)
{
	return dp_expect(f, fr->b, fr->len);
}

/* A shared listening group, a connected rule and a UDP listener: for 200 peers, with and
 * without IP options, the kernel picks the queue flt_lookup_rx picks, the same with
 * options as without, and the members all win some. */
static void steering_agrees_with_the_filter_with_and_without_ip_options(void **state)
{
	struct dp_fx *f = *state;
	unsigned wins[32] = { 0 };
	struct frame fr;

	NEED_BPF(f);
	for (flt_owner_t o = 3; o <= 9; o += 2)
		assert_int_equal(flt_add_listen(f->t, TCP, 80, o, true), 0);
	assert_int_equal(flt_add_connected(f->t, TCP, 80, htonl(PEER_IP), 40000, 11), 0);
	assert_int_equal(flt_add_listen(f->t, UDP, 53, 12, false), 0);
	for (unsigned i = 0; i < 200; i++) {
		uint32_t src = PEER_IP + i * 7919;
		uint16_t sport = (uint16_t)(1024 + i * 131);
		frame4(&fr, src, TCP, sport, 80, WIRE_TCP_ACK, 0, 100);
		uint32_t want = expect(f, &fr);
		assert_true(want >= 3 && want <= 9);
		assert_int_equal(steer(f, &fr), want);
		frame4(&fr, src, TCP, sport, 80, WIRE_TCP_ACK, 8, 100);
		assert_int_equal(expect(f, &fr), want);
		assert_int_equal(steer(f, &fr), want);
		wins[want]++;
	}
	for (flt_owner_t o = 3; o <= 9; o += 2)
		assert_true(wins[o] > 0);
	for (size_t opt = 0; opt <= 40; opt += 4) {
		frame4(&fr, PEER_IP, TCP, 40000, 80, WIRE_TCP_ACK | WIRE_TCP_PSH, opt, 120);
		assert_int_equal(steer(f, &fr), 11);
		frame4(&fr, PEER_IP, UDP, 5353, 53, 0, opt, 64);
		assert_int_equal(steer(f, &fr), 12);
	}
	/* A datagram shorter than the peek (42 octets: no data): read field by field. */
	frame4(&fr, PEER_IP, UDP, 5353, 53, 0, 0, WIRE_UDP_HLEN);
	assert_true(fr.len < WIRE_ETH_HLEN + WIRE_IPV4_HLEN_MIN + WIRE_TCP_OFF_FLAGS + 1);
	assert_int_equal(expect(f, &fr), 12);
	assert_int_equal(steer(f, &fr), 12);
	/* Removed from the table, gone from the maps. */
	assert_int_equal(flt_del_owner(f->t, 12), 1);
	assert_int_equal(steer(f, &fr), 0);
}

/* RFC 9293 §3.1: a TCP header is at least 20 octets. A frame with fewer than 14 octets of
 * TCP (ports, sequence numbers, flags) is one the filter drops (FLT_DROP_TCP_HEADER); it
 * goes to ulsd, which counts the drop, not to the tuple's owner. Its 20-octet control
 * reaches the owner. */
static void a_segment_too_short_for_its_tcp_header_goes_to_ulsd(void **state)
{
	struct dp_fx *f = *state;
	struct flt_pkt p;
	struct frame fr;

	NEED_BPF(f);
	assert_int_equal(flt_add_connected(f->t, TCP, 80, htonl(PEER_IP), 40000, 11), 0);
	for (size_t opt = 0; opt <= 4; opt += 4) {
		frame4(&fr, PEER_IP, TCP, 40000, 80, 0, opt, 10);
		assert_int_equal(flt_parse(fr.b, fr.len, &p), -FLT_DROP_TCP_HEADER);
		assert_int_equal(steer(f, &fr), 0);
		frame4(&fr, PEER_IP, TCP, 40000, 80, WIRE_TCP_ACK, opt, WIRE_TCP_HLEN_MIN);
		assert_int_equal(steer(f, &fr), 11);
	}
}

/* The ACK that completes a passive open notes its peer's link-layer address (dp_neigh:
 * ulsd may have to reset that peer for a process that dies), with or without IP options;
 * a SYN to the listener does not (a flood's spoofed sources would push real peers out). */
static void the_handshakes_last_ack_notes_its_peer_a_syn_does_not(void **state)
{
	struct dp_fx *f = *state;
	int fd = -1;
	struct flt_dp_neigh nb;
	struct frame fr;

	NEED_BPF(f);
	fd = bpf_map__fd(f->skel->maps.dp_neigh);
	assert_int_equal(flt_add_listen(f->t, TCP, 80, 3, false), 0);
	for (size_t opt = 0; opt <= 4; opt += 4) {
		uint32_t src = htonl(PEER_IP + 100 + (uint32_t)opt);
		frame4(&fr, ntohl(src), TCP, 40001, 80, WIRE_TCP_SYN, opt, WIRE_TCP_HLEN_MIN);
		assert_int_equal(steer(f, &fr), 3);
		assert_true(bpf_map_lookup_elem(fd, &src, &nb) < 0);
		frame4(&fr, ntohl(src), TCP, 40001, 80, WIRE_TCP_ACK, opt, WIRE_TCP_HLEN_MIN);
		assert_int_equal(steer(f, &fr), 3);
		assert_int_equal(bpf_map_lookup_elem(fd, &src, &nb), 0);
		assert_memory_equal(nb.mac, peer_mac, WIRE_ETH_ALEN);
	}
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, dp_fx_teardown)
	const struct CMUnitTest tests[] = {
		T(steering_agrees_with_the_filter_with_and_without_ip_options),
		T(a_segment_too_short_for_its_tcp_header_goes_to_ulsd),
		T(the_handshakes_last_ack_notes_its_peer_a_syn_does_not),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
