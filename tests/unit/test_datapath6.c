/* The direct data path's IPv6 steering (filter/datapath.bpf.c), run in the kernel with
 * BPF_PROG_TEST_RUN against maps filled from a filter table through its IPv6 observer
 * (flt_table_set_observer6, as server/bpf.c fills them): the steering program delivers
 * IPv6 packets to the queue of the owner flt_lookup_rx names, the same member of a shared
 * group bit for bit, and leaves to ulsd (queue 0) what the filter leaves to it. The
 * transmit check reads the writing queue from skb->queue_mapping, which a test run cannot
 * set (EINVAL on Linux 6.18): tests/node checks it on a live node (test_node_ipv6.py).
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

#include <linux/bpf.h>

#include "netif/wire/wire.h"
#include "tests/unit/dp_fixture.h"

#define TCP WIRE_IPPROTO_TCP
#define UDP WIRE_IPPROTO_UDP
#define ICMP6 WIRE_IPPROTO_ICMPV6

static const uint8_t peer6[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, [15] = 2 };

static struct dp_fx *cur;

/* What server/bpf.c's on_change6 does with a change. */
static void mirror6(void *arg, enum flt_kind kind, uint8_t proto, uint16_t lport,
		    const struct flt_addr *rip, uint16_t rport, flt_owner_t owner)
{
	struct dp_fx *f = arg;

	if (kind == FLT_RULE_CONNECTED) {
		struct flt_dp_conn6_key k = { .lport = lport, .rport = rport, .proto = proto };
		memcpy(k.rip, rip->b, 16);
		if (owner == FLT_NO_OWNER)
			bpf_map_delete_elem(f->fd_conn6, &k);
		else
			assert_int_equal(bpf_map_update_elem(f->fd_conn6, &k, &owner, BPF_ANY), 0);
		return;
	}
	dp_mirror_group(f, f->fd_listen6, proto, lport, FLT_FAM_V6);
}

static int setup(void **state)
{
	struct dp_fx *f;

	if (dp_fx_open(&f, 0x0a000001, 0) < 0)
		return -1;
	*state = f;
	if (!f)
		return 0;   /* each test skips */
	flt_table_set_observer6(f->t, mirror6, f);
	cur = f;
	return 0;
}

/* An IPv6 frame: Ethernet, the fixed header with next header nh, then l4 (len octets). */
struct frame {
	uint8_t b[256];
	size_t len;
};

static void frame6(struct frame *fr, const uint8_t *smac, const uint8_t *dmac,
		   const uint8_t *src, const uint8_t *dst, uint8_t nh, const uint8_t *l4,
		   size_t len)
{
	memset(fr, 0, sizeof(*fr));
	wire_eth_write(fr->b, dmac, smac, WIRE_ETHERTYPE_IPV6);
	wire_ipv6_write(fr->b + WIRE_ETH_HLEN, nh, src, dst, (uint16_t)len, 64);
	memcpy(fr->b + 54, l4, len);
	fr->len = 54 + len;
}

/* A TCP segment or UDP datagram's header (flags for TCP). */
static size_t ports_hdr(uint8_t *l4, uint8_t proto, uint16_t sport, uint16_t dport,
			uint8_t flags)
{
	memset(l4, 0, 20);
	wire_wr16(l4, sport);
	wire_wr16(l4 + 2, dport);
	if (proto == TCP) {
		l4[12] = 5 << 4;
		l4[13] = flags;
		return 20;
	}
	wire_wr16(l4 + 4, 8);
	return 8;
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

static void rx_tuple(struct dp_fx *f, struct frame *fr, uint8_t proto, const uint8_t *src,
		     uint16_t sport, const uint8_t *dst, uint16_t dport)
{
	uint8_t l4[20];
	size_t n = ports_hdr(l4, proto, sport, dport, WIRE_TCP_ACK);

	(void)f;
	frame6(fr, peer_mac, node_mac, src, dst, proto, l4, n);
}

/* A shared IPv6 listening group and connected rules, entered through the filter API: for
 * 400 peers (addresses and ports varied, to both node addresses) the kernel picks the
 * queue of the owner flt_lookup_rx picks, and the members all win some. */
static void steering_picks_the_filter_tables_owner(void **state)
{
	struct dp_fx *f = *state;
	unsigned wins[32] = { 0 };
	struct frame fr;

	NEED_BPF(f);
	for (flt_owner_t o = 3; o <= 9; o += 2)
		assert_int_equal(flt_add_listen_fam(f->t, TCP, 80, FLT_FAM_V6, o, true), 0);
	struct flt_addr peer = flt_addr_v6(peer6);
	assert_int_equal(flt_add_connected_addr(f->t, TCP, 80, &peer, 40000, 11), 0);
	assert_int_equal(flt_add_listen_fam(f->t, UDP, 53, FLT_FAM_ANY, 12, false), 0);
	for (unsigned i = 0; i < 400; i++) {
		uint8_t src[16];
		memcpy(src, peer6, 16);
		src[13] = (uint8_t)(i * 37);
		src[15] = (uint8_t)(i * 11 + 3);
		rx_tuple(f, &fr, TCP, src, (uint16_t)(1024 + i * 131), i & 1 ? ll6 : node6, 80);
		uint32_t want = expect(f, &fr);
		assert_int_equal(steer(f, &fr), want);
		assert_true(want >= 3 && want <= 9);
		wins[want]++;
	}
	for (flt_owner_t o = 3; o <= 9; o += 2)
		assert_true(wins[o] > 0);
	rx_tuple(f, &fr, TCP, peer6, 40000, node6, 80);
	assert_int_equal(steer(f, &fr), 11);
	rx_tuple(f, &fr, UDP, peer6, 5353, node6, 53);
	assert_int_equal(steer(f, &fr), 12);
	/* Removed from the table, gone from the maps. */
	assert_int_equal(flt_del_connected_addr(f->t, TCP, 80, &peer, 40000, 11), 0);
	assert_int_equal(steer(f, &fr), 12);
	rx_tuple(f, &fr, TCP, peer6, 40000, node6, 80);
	assert_int_equal(steer(f, &fr), expect(f, &fr));
	assert_int_not_equal(steer(f, &fr), 11);
	assert_int_equal(flt_del_owner(f->t, 12), 2);
	rx_tuple(f, &fr, UDP, peer6, 5353, node6, 53);
	assert_int_equal(steer(f, &fr), 0);
}

/* An IPv4 listener's port is not an IPv6 one, and an IPv6 packet to another address, a
 * multicast group, or with the node's IPv6 switched off, is ulsd's. */
static void steering_keeps_families_and_addresses_apart(void **state)
{
	struct dp_fx *f = *state;
	struct frame fr;
	uint8_t other[16], group[16] = { 0xff, 0x02, [15] = 1 };

	NEED_BPF(f);
	memcpy(other, node6, 16);
	other[15] = 9;
	assert_int_equal(flt_add_listen_fam(f->t, TCP, 81, FLT_FAM_V4, 4, false), 0);
	rx_tuple(f, &fr, TCP, peer6, 1234, node6, 81);
	assert_int_equal(steer(f, &fr), 0);
	assert_int_equal(flt_add_listen_fam(f->t, TCP, 82, FLT_FAM_V6, 5, false), 0);
	rx_tuple(f, &fr, TCP, peer6, 1234, node6, 82);
	assert_int_equal(steer(f, &fr), 5);
	rx_tuple(f, &fr, TCP, peer6, 1234, other, 82);
	assert_int_equal(steer(f, &fr), 0);
	rx_tuple(f, &fr, TCP, peer6, 1234, group, 82);
	assert_int_equal(steer(f, &fr), 0);
	f->cfg.has_ip6 = 0;
	dp_set_cfg(f);
	rx_tuple(f, &fr, TCP, peer6, 1234, node6, 82);
	assert_int_equal(steer(f, &fr), 0);
	f->cfg.has_ip6 = 1;
	dp_set_cfg(f);
}

/* RFC 4443 §2.4 (b): an error quoting a packet an endpoint sent goes to its owner, as the
 * filter says; echo, neighbour discovery, fragments and extension headers go to ulsd. */
static void icmpv6_errors_to_owner_the_rest_to_ulsd(void **state)
{
	struct dp_fx *f = *state;
	struct frame fr;
	uint8_t l4[120];

	NEED_BPF(f);
	assert_int_equal(flt_add_listen_fam(f->t, UDP, 5000, FLT_FAM_V6, 6, false), 0);
	for (uint8_t type = WIRE_ICMPV6_DST_UNREACH; type <= WIRE_ICMPV6_PARAM_PROB; type++) {
		/* The quoted packet: node6:5000 -> peer6:53, UDP. */
		memset(l4, 0, sizeof(l4));
		l4[0] = type;
		uint8_t *in = l4 + 8;
		in[0] = 0x60;
		wire_wr16(in + 4, 8);
		in[6] = UDP;
		in[7] = 64;
		memcpy(in + 8, node6, 16);
		memcpy(in + 24, peer6, 16);
		ports_hdr(in + 40, UDP, 5000, 53, 0);
		frame6(&fr, peer_mac, node_mac, peer6, node6, ICMP6, l4, 56);
		assert_int_equal(expect(f, &fr), 6);
		assert_int_equal(steer(f, &fr), 6);
	}
	/* Not our port: ulsd. */
	wire_wr16(l4 + 48, 5001);
	frame6(&fr, peer_mac, node_mac, peer6, node6, ICMP6, l4, 56);
	assert_int_equal(steer(f, &fr), 0);
	/* Echo request and a Neighbor Solicitation for the node: ulsd answers them. */
	memset(l4, 0, sizeof(l4));
	l4[0] = WIRE_ICMPV6_ECHO_REQUEST;
	frame6(&fr, peer_mac, node_mac, peer6, node6, ICMP6, l4, 16);
	assert_int_equal(steer(f, &fr), 0);
	l4[0] = WIRE_ND_NEIGHBOR_SOLICIT;
	memcpy(l4 + 8, node6, 16);
	frame6(&fr, peer_mac, node_mac, peer6, node6, ICMP6, l4, 24);
	assert_int_equal(steer(f, &fr), 0);
	/* A fragment and a Destination Options header before UDP to an owned port. */
	memset(l4, 0, sizeof(l4));
	l4[0] = UDP;
	wire_wr16(l4 + 2, 1);   /* offset 0, M */
	ports_hdr(l4 + 8, UDP, 53, 5000, 0);
	frame6(&fr, peer_mac, node_mac, peer6, node6, WIRE_IPPROTO_FRAGMENT, l4, 16);
	assert_int_equal(steer(f, &fr), 0);
	memset(l4, 0, sizeof(l4));
	l4[0] = UDP;
	l4[2] = 1;   /* PadN filling the 8 octets */
	l4[3] = 4;
	ports_hdr(l4 + 8, UDP, 53, 5000, 0);
	frame6(&fr, peer_mac, node_mac, peer6, node6, WIRE_IPPROTO_DSTOPTS, l4, 16);
	assert_int_equal(steer(f, &fr), 0);
	/* The control: the same datagram without the header reaches the owner. */
	ports_hdr(l4, UDP, 53, 5000, 0);
	frame6(&fr, peer_mac, node_mac, peer6, node6, UDP, l4, 8);
	assert_int_equal(steer(f, &fr), 6);
}

/* RFC 4861 §7.2.5: a Neighbor Advertisement goes to the queue whose solicitation for its
 * target the transmit check recorded (here written into dp_ndwait as it writes it), once
 * per solicitation; with none waiting, to ulsd. */
static void neighbour_advertisement_to_the_soliciting_queue(void **state)
{
	struct dp_fx *f = *state;
	struct frame fr;
	uint8_t l4[32] = { WIRE_ND_NEIGHBOR_ADVERT };
	struct flt_dp_arpwait w = { .bits = { 1ull << 8 | 1ull << 13 } };
	int fd;

	NEED_BPF(f);
	fd = bpf_map__fd(f->skel->maps.dp_ndwait);
	l4[4] = WIRE_ND_NA_SOLICITED | WIRE_ND_NA_OVERRIDE;
	memcpy(l4 + 8, peer6, 16);
	frame6(&fr, peer_mac, node_mac, peer6, node6, ICMP6, l4, 24);
	assert_int_equal(steer(f, &fr), 0);
	assert_int_equal(bpf_map_update_elem(fd, peer6, &w, BPF_ANY), 0);
	assert_int_equal(steer(f, &fr), 8);
	assert_int_equal(steer(f, &fr), 13);
	assert_int_equal(steer(f, &fr), 0);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, dp_fx_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(steering_picks_the_filter_tables_owner),
		T(steering_keeps_families_and_addresses_apart),
		T(icmpv6_errors_to_owner_the_rest_to_ulsd),
		T(neighbour_advertisement_to_the_soliciting_queue),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
