/* filter/table.c and filter/demux.c with IPv6 keys: 16-octet remotes in one table for both
 * families, IPv4 as its v4-mapped address, ports shared across families as Linux shares
 * them (the fixture: filter_table_fixture.h). */
#include "tests/unit/filter_table_fixture.h"

/* ---- IPv6 keys: 16-octet remotes, one table for both families ------------------------- */

static const uint8_t node6[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, [15] = 1 };
static const uint8_t peer6[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, [15] = 2 };

/* An Ethernet frame carrying IPv6 (RFC 8200 §3's fixed header) from src to dst, Next
 * Header nh, plen octets of payload after it (zeros, for the caller to fill at f->b + 54). */
static void frame6(struct frame *f, const uint8_t *dmac, const uint8_t *smac, uint8_t nh,
		   uint8_t hlim, const uint8_t *src, const uint8_t *dst, size_t plen)
{
	memset(f->b, 0, sizeof(f->b));
	wire_eth_write(f->b, dmac, smac, WIRE_ETHERTYPE_IPV6);
	wire_ipv6_write(f->b + WIRE_ETH_HLEN, nh, src, dst, (uint16_t)plen, hlim);
}

/* An IPv6 TCP SYN (or UDP datagram) from src:sport to node6:dport, parsed and looked up. */
static flt_owner_t rx6(struct flt_table *t, uint8_t proto, const uint8_t *src, uint16_t sport,
		       uint16_t dport)
{
	struct frame f;
	struct flt_pkt p;
	uint8_t *l4 = f.b + 54;
	size_t l4len = proto == TCP ? 20 : 8;

	frame6(&f, node_mac, peer_mac, proto, 64, src, node6, l4len);
	wire_wr16(l4, sport);
	wire_wr16(l4 + 2, dport);
	if (proto == TCP) {
		l4[12] = 5 << 4;
		l4[13] = WIRE_TCP_SYN;
	} else {
		wire_wr16(l4 + 4, 8);
	}
	f.len = 54 + l4len;
	assert_int_equal(flt_parse(f.b, f.len, &p), 0);
	return flt_lookup_rx(t, &p);
}

static void ipv6_rules_lookup_returns_their_owners(void **state)
{
	struct flt_table *t = *state;
	struct flt_addr peer = flt_addr_v6(peer6);
	uint8_t other[16];

	memcpy(other, peer6, 16);
	other[15] = 9;
	assert_int_equal(flt_add_connected_addr(t, TCP, 80, &peer, 40000, 7), 0);
	assert_int_equal(flt_add_listen_fam(t, TCP, 80, FLT_FAM_V6, 8, false), 0);
	assert_int_equal(rx6(t, TCP, peer6, 40000, 80), 7);
	assert_int_equal(rx6(t, TCP, other, 40000, 80), 8);
	assert_int_equal(rx6(t, TCP, peer6, 40000, 81), FLT_NO_OWNER);
	/* The IPv4 listener of the port is another group: IPv4 does not reach owner 8. */
	assert_int_equal(rx(t, &(struct fspec){ .dport = 80 }), FLT_NO_OWNER);
	assert_int_equal(flt_del_connected_addr(t, TCP, 80, &peer, 40000, 7), 0);
	assert_int_equal(rx6(t, TCP, peer6, 40000, 80), 8);
	/* :: names no remote. */
	struct flt_addr zero = { { 0 } };
	assert_int_equal(flt_add_connected_addr(t, TCP, 80, &zero, 40000, 7), -EINVAL);
}

/* Linux's rules: an IPv4 and an IPv6-only listener may hold one port; a dual-stack
 * listener holds it in both families, alone unless all share. */
static void families_share_ports_as_linux_does(void **state)
{
	struct flt_table *t = *state;

	assert_int_equal(flt_add_listen(t, TCP, 80, 1, false), 0);
	assert_int_equal(flt_add_listen_fam(t, TCP, 80, FLT_FAM_V6, 2, false), 0);
	assert_int_equal(rx(t, &(struct fspec){ .dport = 80 }), 1);
	assert_int_equal(rx6(t, TCP, peer6, 40000, 80), 2);
	/* A dual-stack listener on the port: refused, and neither family changed. */
	assert_int_equal(flt_add_listen_fam(t, TCP, 80, FLT_FAM_ANY, 3, false), -EADDRINUSE);
	assert_int_equal(flt_del_listen(t, TCP, 80, 3), -ENOENT);
	/* A dual-stack listener alone on 81 takes both families and keeps both. */
	assert_int_equal(flt_add_listen_fam(t, UDP, 81, FLT_FAM_ANY, 4, false), 0);
	assert_int_equal(rx(t, &(struct fspec){ .proto = UDP, .dport = 81 }), 4);
	assert_int_equal(rx6(t, UDP, peer6, 40000, 81), 4);
	assert_int_equal(flt_add_listen(t, UDP, 81, 5, false), -EADDRINUSE);
	assert_int_equal(flt_add_listen_fam(t, UDP, 81, FLT_FAM_V6, 6, false), -EADDRINUSE);
	assert_int_equal(flt_set_accepting_fam(t, UDP, 81, FLT_FAM_ANY, 4), 0);
	assert_int_equal(flt_del_listen_fam(t, UDP, 81, FLT_FAM_ANY, 4), 0);
	assert_int_equal(rx(t, &(struct fspec){ .proto = UDP, .dport = 81 }), FLT_NO_OWNER);
	assert_int_equal(rx6(t, UDP, peer6, 40000, 81), FLT_NO_OWNER);
	assert_int_equal(flt_add_listen_fam(t, UDP, 81, 0, 4, false), -EINVAL);
	/* Shared dual-stack groups: every member in both. */
	assert_int_equal(flt_add_listen_fam(t, TCP, 82, FLT_FAM_ANY, 7, true), 0);
	assert_int_equal(flt_add_listen_fam(t, TCP, 82, FLT_FAM_ANY, 8, true), 0);
	assert_int_equal(flt_del_owner(t, 7), 2);
	assert_int_equal(rx6(t, TCP, peer6, 40000, 82), 8);
	assert_int_equal(rx(t, &(struct fspec){ .dport = 82 }), 8);
}

/* An IPv4 remote is its v4-mapped address: one rule, whichever call names it; an IPv6
 * address that ends in the same 4 octets is another remote. */
static void ipv4_remote_is_its_v4_mapped_address(void **state)
{
	struct flt_table *t = *state;
	struct flt_addr m = flt_addr_v4(PEER_IP), tail = flt_addr_v6(peer6);

	memcpy(tail.b + 12, m.b + 12, 4);
	assert_int_equal(flt_add_connected(t, TCP, 80, PEER_IP, 40000, 7), 0);
	assert_int_equal(flt_add_connected_addr(t, TCP, 80, &m, 40000, 8), -EEXIST);
	assert_int_equal(flt_add_connected_addr(t, TCP, 80, &tail, 40000, 8), 0);
	assert_true(flt_addr_is_v4(&m));
	assert_false(flt_addr_is_v4(&tail));
	assert_int_equal(flt_addr_v4_of(&m), PEER_IP);
	assert_int_equal(rx(t, &(struct fspec){ .dport = 80 }), 7);
	assert_int_equal(flt_del_connected_addr(t, TCP, 80, &m, 40000, 7), 0);
	assert_int_equal(rx(t, &(struct fspec){ .dport = 80 }), FLT_NO_OWNER);
}

static unsigned observed;
static void count_change(void *arg, enum flt_kind kind, uint8_t proto, uint16_t lport,
			 uint32_t rip, uint16_t rport, flt_owner_t owner)
{
	(void)arg; (void)kind; (void)proto; (void)lport; (void)rip; (void)rport; (void)owner;
	observed++;
}

static int count_v6(const struct flt_rule *r, void *arg)
{
	if (r->fam == FLT_FAM_V6) {
		assert_int_equal(r->rip, 0);
		(*(unsigned *)arg)++;
	}
	return 0;
}

/* The observer keeps the direct path's IPv4 maps (server/bpf.c): IPv6 rules are not
 * shown to it; flt_foreach shows them with their family. */
static void ipv6_rules_not_observed_but_visited(void **state)
{
	struct flt_table *t = *state;
	struct flt_addr peer = flt_addr_v6(peer6);
	unsigned v6 = 0;

	observed = 0;
	flt_table_set_observer(t, count_change, NULL);
	assert_int_equal(flt_add_connected_addr(t, TCP, 80, &peer, 40000, 7), 0);
	assert_int_equal(flt_add_listen_fam(t, TCP, 80, FLT_FAM_V6, 7, false), 0);
	assert_int_equal(observed, 0);
	assert_int_equal(flt_add_listen_fam(t, TCP, 81, FLT_FAM_ANY, 7, false), 0);
	assert_int_equal(observed, 1);
	assert_int_equal(flt_add_connected(t, TCP, 80, PEER_IP, 40000, 7), 0);
	assert_int_equal(observed, 2);
	flt_foreach(t, count_v6, &v6);
	assert_int_equal(v6, 3);
	assert_int_equal(flt_del_owner(t, 7), 5);
	assert_int_equal(observed, 4);
	flt_table_set_observer(t, NULL, NULL);
}

/* A process's IPv6 frame from src:sport to dst:dport (TCP, UDP, or ICMPv6 of type sport),
 * checked as ulsd checks it on the relay. */
static int tx6(struct flt_table *t, uint8_t proto, const uint8_t *src, uint16_t sport,
	       const uint8_t *dst, uint16_t dport, flt_owner_t owner)
{
	struct frame f;
	struct flt_pkt p;
	uint8_t *l4 = f.b + 54;
	size_t l4len = proto == TCP ? 20 : proto == WIRE_IPPROTO_ICMPV6 ? 24 : 8;

	frame6(&f, peer_mac, node_mac, proto, 255, src, dst, l4len);
	if (proto == WIRE_IPPROTO_ICMPV6) {
		l4[0] = (uint8_t)sport;   /* type; code 0; the target (NS/NA) is dst */
		memcpy(l4 + 8, dst, 16);
	} else {
		wire_wr16(l4, sport);
		wire_wr16(l4 + 2, dport);
		if (proto == TCP)
			l4[12] = 5 << 4, l4[13] = WIRE_TCP_ACK;
		else
			wire_wr16(l4 + 4, 8);
	}
	f.len = 54 + l4len;
	assert_int_equal(flt_parse(f.b, f.len, &p), 0);
	return flt_check_tx(t, &p, owner, NODE_IP, node_mac);
}

/* Control protocol 3: a process's IPv6 leaves only from the node's addresses and its own
 * endpoints; of ICMPv6 it may send echo and neighbour solicitations (lwIP resolving its
 * peers, RFC 4861 §7.2.2), not advertisements (the node answers solicitations). Before
 * ulsd gave the table its addresses, no IPv6 leaves at all. */
static void ipv6_from_processes_checked_like_ipv4(void **state)
{
	struct flt_table *t = *state;
	struct flt_addr peer = flt_addr_v6(peer6);
	uint8_t ll[16] = { 0xfe, 0x80, [15] = 1 }, other[16];

	memcpy(other, node6, 16);
	other[15] = 7;
	assert_int_equal(flt_add_connected_addr(t, TCP, 80, &peer, 40000, 7), 0);
	assert_int_equal(tx6(t, TCP, node6, 80, peer6, 40000, 7), -FLT_DENY_PROTO);
	flt_table_set_node_ip6(t, node6, ll);
	assert_int_equal(tx6(t, TCP, node6, 80, peer6, 40000, 7), 0);
	assert_int_equal(tx6(t, TCP, node6, 80, peer6, 40000, 8), -FLT_DENY_PORT);
	assert_int_equal(tx6(t, TCP, other, 80, peer6, 40000, 7), -FLT_DENY_SRC_IP);
	assert_int_equal(tx6(t, TCP, node6, 81, peer6, 40000, 7), -FLT_DENY_PORT);
	/* UDP from a port bound in IPv6 only; not from one bound in IPv4 only. */
	assert_int_equal(flt_add_listen_fam(t, UDP, 53, FLT_FAM_V6, 7, false), 0);
	assert_int_equal(flt_add_listen_fam(t, UDP, 54, FLT_FAM_V4, 7, false), 0);
	assert_int_equal(tx6(t, UDP, node6, 53, peer6, 9999, 7), 0);
	assert_int_equal(tx6(t, UDP, node6, 54, peer6, 9999, 7), -FLT_DENY_PORT);
	assert_int_equal(tx6(t, WIRE_IPPROTO_ICMPV6, ll, WIRE_ND_NEIGHBOR_SOLICIT, peer6, 0, 7), 0);
	assert_int_equal(tx6(t, WIRE_IPPROTO_ICMPV6, node6, WIRE_ICMPV6_ECHO_REQUEST, peer6, 0, 7), 0);
	assert_int_equal(tx6(t, WIRE_IPPROTO_ICMPV6, node6, WIRE_ND_NEIGHBOR_ADVERT, peer6, 0, 7),
			 -FLT_DENY_ICMP);
}

/* A process's IPv6 UDP fragment from node6:sport, at offset off (a UDP header when 0). */
static int frag_tx6(struct flt_table *t, uint16_t sport, uint16_t off, flt_owner_t owner)
{
	struct frame f;
	struct flt_pkt p;
	uint8_t *fh = f.b + 54, *u = fh + 8;

	frame6(&f, peer_mac, node_mac, WIRE_IPPROTO_FRAGMENT, 64, node6, peer6, 8 + 16);
	fh[0] = UDP;
	wire_wr16(fh + 2, (uint16_t)(off | 1));     /* M: more follow */
	fh[7] = 9;
	if (off == 0) {
		wire_wr16(u, sport);
		wire_wr16(u + 2, 9999);
		wire_wr16(u + 4, 3000);                 /* the whole datagram's UDP Length */
	}
	f.len = 54 + 8 + 16;
	assert_int_equal(flt_parse(f.b, f.len, &p), 0);
	return flt_check_tx(t, &p, owner, NODE_IP, node_mac);
}

/* A process's fragmented IPv6 datagram: the first fragment's ports are its endpoint's (as
 * for IPv4), a later fragment is checked by its source alone (the Deviation in demux.c). */
static void ipv6_first_fragment_checked_by_its_ports(void **state)
{
	struct flt_table *t = *state;
	uint8_t ll[16] = { 0xfe, 0x80, [15] = 1 };

	flt_table_set_node_ip6(t, node6, ll);
	assert_int_equal(flt_add_listen_fam(t, UDP, 53, FLT_FAM_V6, 7, false), 0);
	assert_int_equal(frag_tx6(t, 53, 0, 7), 0);
	assert_int_equal(frag_tx6(t, 53, 0, 8), -FLT_DENY_PORT);
	assert_int_equal(frag_tx6(t, 55, 0, 7), -FLT_DENY_PORT);
	assert_int_equal(frag_tx6(t, 0, 1456, 7), 0);
}

static unsigned observed6, listen6_changes;
static struct flt_addr last6;
static flt_owner_t last6_owner;

static void count_change6(void *arg, enum flt_kind kind, uint8_t proto, uint16_t lport,
			  const struct flt_addr *rip, uint16_t rport, flt_owner_t owner)
{
	(void)arg; (void)proto; (void)lport; (void)rport;
	observed6++;
	if (kind == FLT_RULE_LISTEN) {
		assert_null(rip);
		listen6_changes++;
	} else {
		last6 = *rip;
		last6_owner = owner;
	}
}

/* The IPv6 observer (the direct path's IPv6 maps, server/bpf.c) sees exactly the IPv6
 * rules, with their 16-octet remotes, and flt_group_get_fam reads an IPv6 group. */
static void ipv6_observer_sees_ipv6_rules_only(void **state)
{
	struct flt_table *t = *state;
	struct flt_addr peer = flt_addr_v6(peer6);
	flt_owner_t all[FLT_GROUP_MAX], pick[FLT_GROUP_MAX];
	uint32_t n_all, n_pick;

	observed6 = listen6_changes = 0;
	flt_table_set_observer6(t, count_change6, NULL);
	assert_int_equal(flt_add_connected(t, TCP, 80, PEER_IP, 40000, 7), 0);
	assert_int_equal(flt_add_listen_fam(t, TCP, 80, FLT_FAM_V4, 7, false), 0);
	assert_int_equal(observed6, 0);
	assert_int_equal(flt_add_connected_addr(t, TCP, 80, &peer, 40000, 7), 0);
	assert_int_equal(observed6, 1);
	assert_memory_equal(last6.b, peer6, 16);
	assert_int_equal(last6_owner, 7);
	assert_int_equal(flt_add_listen_fam(t, TCP, 81, FLT_FAM_ANY, 8, true), 0);
	assert_int_equal(flt_add_listen_fam(t, TCP, 81, FLT_FAM_V6, 9, true), 0);
	assert_int_equal(flt_set_accepting_fam(t, TCP, 81, FLT_FAM_V6, 9), 0);
	assert_int_equal(listen6_changes, 3);
	assert_int_equal(flt_group_get_fam(t, TCP, 81, FLT_FAM_V6, all, &n_all, pick, &n_pick), 0);
	assert_int_equal(n_all, 2);
	assert_int_equal(all[0], 8);
	assert_int_equal(all[1], 9);
	assert_int_equal(n_pick, 1);
	assert_int_equal(pick[0], 9);
	assert_int_equal(flt_group_get_fam(t, TCP, 81, FLT_FAM_V4, all, &n_all, pick, &n_pick), 0);
	assert_int_equal(n_all, 1);
	assert_int_equal(flt_group_get_fam(t, TCP, 82, FLT_FAM_V6, all, &n_all, pick, &n_pick),
			 -ENOENT);
	assert_int_equal(flt_group_get_fam(t, TCP, 81, FLT_FAM_ANY, all, &n_all, pick, &n_pick),
			 -EINVAL);
	assert_int_equal(flt_del_owner(t, 7), 3);
	assert_int_equal(last6_owner, FLT_NO_OWNER);
	assert_int_equal(observed6, 5);
	flt_table_set_observer6(t, NULL, NULL);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(ipv6_from_processes_checked_like_ipv4),
		T(ipv6_first_fragment_checked_by_its_ports),
		T(ipv6_rules_lookup_returns_their_owners),
		T(families_share_ports_as_linux_does),
		T(ipv4_remote_is_its_v4_mapped_address),
		T(ipv6_rules_not_observed_but_visited),
		T(ipv6_observer_sees_ipv6_rules_only),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
