/* filter/table.c and filter/demux.c: rules, the receive lookup, the transmit check.
 *
 * Each test starts from an empty table with a fixed hash seed (the fixture) so that group
 * picks are reproducible; the teardown frees it, and AddressSanitizer's leak check makes
 * sure nothing else was left behind.
 */
#include "tests/unit/filter_table_fixture.h"

static void empty_table_lookup_returns_no_owner(void **state)
{
	struct flt_table *t = *state;

	assert_int_equal(rx(t, &(struct fspec){ 0 }), FLT_NO_OWNER);
	assert_int_equal(rx(t, &(struct fspec){ .proto = UDP }), FLT_NO_OWNER);
}

static void connected_rule_lookup_returns_its_owner(void **state)
{
	struct flt_table *t = *state;

	assert_int_equal(flt_add_connected(t, TCP, 80, PEER_IP, 40000, 7), 0);
	assert_int_equal(rx(t, &(struct fspec){ 0 }), 7);
	/* Any other element of the tuple differs: no match. */
	assert_int_equal(rx(t, &(struct fspec){ .sport = 40001 }), FLT_NO_OWNER);
	assert_int_equal(rx(t, &(struct fspec){ .dport = 81 }), FLT_NO_OWNER);
	assert_int_equal(rx(t, &(struct fspec){ .src = IP4(198, 18, 0, 3) }), FLT_NO_OWNER);
	assert_int_equal(rx(t, &(struct fspec){ .proto = UDP, .dport = 80 }), FLT_NO_OWNER);
}

static void taken_tuple_add_connected_fails_eexist(void **state)
{
	struct flt_table *t = *state;

	assert_int_equal(flt_add_connected(t, TCP, 80, PEER_IP, 40000, 7), 0);
	assert_int_equal(flt_add_connected(t, TCP, 80, PEER_IP, 40000, 7), -EEXIST);
	assert_int_equal(flt_add_connected(t, TCP, 80, PEER_IP, 40000, 8), -EEXIST);
	/* UDP has its own port space. */
	assert_int_equal(flt_add_connected(t, UDP, 80, PEER_IP, 40000, 8), 0);
}

static void invalid_arguments_add_fails_einval(void **state)
{
	struct flt_table *t = *state;

	assert_int_equal(flt_add_connected(t, 1, 80, PEER_IP, 40000, 7), -EINVAL);
	assert_int_equal(flt_add_connected(t, TCP, 0, PEER_IP, 40000, 7), -EINVAL);
	assert_int_equal(flt_add_connected(t, TCP, 80, 0, 40000, 7), -EINVAL);
	assert_int_equal(flt_add_connected(t, TCP, 80, PEER_IP, 0, 7), -EINVAL);
	assert_int_equal(flt_add_connected(t, TCP, 80, PEER_IP, 1, FLT_NO_OWNER), -EINVAL);
	assert_int_equal(flt_add_listen(t, 132, 80, 7, false), -EINVAL);
	assert_int_equal(flt_add_listen(t, TCP, 0, 7, false), -EINVAL);
	assert_int_equal(flt_add_listen(t, TCP, 80, FLT_NO_OWNER, false), -EINVAL);
}

static void listen_rule_lookup_returns_its_owner(void **state)
{
	struct flt_table *t = *state;

	assert_int_equal(flt_add_listen(t, TCP, 80, 3, false), 0);
	assert_int_equal(flt_add_listen(t, UDP, 53, 4, false), 0);
	assert_int_equal(rx(t, &(struct fspec){ .tcp_flags = WIRE_TCP_SYN }), 3);
	assert_int_equal(rx(t, &(struct fspec){ .sport = 1234 }), 3);
	assert_int_equal(rx(t, &(struct fspec){ .proto = UDP }), 4);
	assert_int_equal(rx(t, &(struct fspec){ .dport = 53 }), FLT_NO_OWNER);
}

static void port_held_unshared_add_listen_fails_eaddrinuse(void **state)
{
	struct flt_table *t = *state;

	assert_int_equal(flt_add_listen(t, TCP, 80, 1, false), 0);
	assert_int_equal(flt_add_listen(t, TCP, 80, 2, true), -EADDRINUSE);
	assert_int_equal(flt_add_listen(t, TCP, 80, 2, false), -EADDRINUSE);
	assert_int_equal(flt_add_listen(t, TCP, 81, 1, true), 0);
	assert_int_equal(flt_add_listen(t, TCP, 81, 2, false), -EADDRINUSE);
	assert_int_equal(rx(t, &(struct fspec){ .dport = 81 }), 1);
}

static void same_owner_twice_add_listen_fails_eexist(void **state)
{
	struct flt_table *t = *state;

	assert_int_equal(flt_add_listen(t, TCP, 80, 1, false), 0);
	assert_int_equal(flt_add_listen(t, TCP, 80, 1, false), -EEXIST);
	assert_int_equal(flt_add_listen(t, TCP, 80, 1, true), -EEXIST);
}

static void shared_port_add_listen_builds_group_until_full(void **state)
{
	struct flt_table *t = *state;
	struct flt_stats st;

	for (flt_owner_t o = 0; o < FLT_GROUP_MAX; o++)
		assert_int_equal(flt_add_listen(t, TCP, 80, 1000 + o, true), 0);
	assert_int_equal(flt_add_listen(t, TCP, 80, 5, true), -ENOSPC);
	flt_table_stats(t, &st);
	assert_int_equal(st.rules_listen, FLT_GROUP_MAX);
	assert_int_equal(flt_del_listen(t, TCP, 80, 1000), 0);
	assert_int_equal(flt_add_listen(t, TCP, 80, 5, true), 0);
}

static void connected_and_listen_lookup_prefers_connected(void **state)
{
	struct flt_table *t = *state;

	assert_int_equal(flt_add_listen(t, TCP, 80, 1, false), 0);
	assert_int_equal(flt_add_connected(t, TCP, 80, PEER_IP, 40000, 2), 0);
	assert_int_equal(rx(t, &(struct fspec){ 0 }), 2);
	assert_int_equal(rx(t, &(struct fspec){ .sport = 40001 }), 1);
	assert_int_equal(flt_del_connected(t, TCP, 80, PEER_IP, 40000, 2), 0);
	assert_int_equal(rx(t, &(struct fspec){ 0 }), 1);
}

static void shared_group_of_four_lookup_spreads_1000_tuples_evenly(void **state)
{
	struct flt_table *t = *state;
	unsigned count[4] = { 0 };

	for (flt_owner_t o = 0; o < 4; o++)
		assert_int_equal(flt_add_listen(t, TCP, 80, 10 + o, true), 0);
	for (unsigned i = 0; i < 1000; i++) {
		struct fspec s = { .src = IP4(10, (i >> 8) & 3, i & 0xff, 1 + i % 7),
				   .sport = (uint16_t)(20000 + i * 13), .tcp_flags = WIRE_TCP_SYN };
		flt_owner_t o = rx(t, &s);

		assert_in_range(o, 10, 13);
		count[o - 10]++;
		/* Every later segment of the connection reaches the same member. */
		s.tcp_flags = WIRE_TCP_ACK;
		s.payload = i % 100;
		assert_int_equal(rx(t, &s), o);
		assert_int_equal(rx(t, &s), o);
	}
	for (int k = 0; k < 4; k++)
		assert_in_range(count[k], 150, 350);
}

static void same_members_in_any_order_lookup_picks_the_same(void **state)
{
	struct flt_table *t = *state, *u = flt_table_new();

	assert_non_null(u);
	assert_int_equal(flt_table_set_seed(u, 42), 0);
	for (flt_owner_t o = 0; o < 4; o++) {
		assert_int_equal(flt_add_listen(t, TCP, 80, 10 + o, true), 0);
		assert_int_equal(flt_add_listen(u, TCP, 80, 13 - o, true), 0);
	}
	for (unsigned i = 0; i < 200; i++) {
		struct fspec s = { .sport = (uint16_t)(30000 + i) };

		assert_int_equal(rx(t, &s), rx(u, &s));
	}
	flt_table_free(u);
}

static void member_leaves_group_lookup_moves_only_its_connections(void **state)
{
	struct flt_table *t = *state;
	flt_owner_t before[500];

	for (flt_owner_t o = 0; o < 4; o++)
		assert_int_equal(flt_add_listen(t, TCP, 80, 10 + o, true), 0);
	for (unsigned i = 0; i < 500; i++)
		before[i] = rx(t, &(struct fspec){ .sport = (uint16_t)(30000 + i) });
	assert_int_equal(flt_del_listen(t, TCP, 80, 12), 0);
	for (unsigned i = 0; i < 500; i++) {
		flt_owner_t o = rx(t, &(struct fspec){ .sport = (uint16_t)(30000 + i) });

		assert_int_not_equal(o, 12);
		if (before[i] != 12)
			assert_int_equal(o, before[i]);
	}
}

/* A connection moving between processes: only its holder can move it, the rule then
 * answers for the new owner, and the table's rule count does not change. */
static void connected_rule_moves_only_from_its_owner(void **state)
{
	struct flt_table *t = *state;
	struct flt_stats st;

	assert_int_equal(flt_move_connected(t, TCP, 80, PEER_IP, 40000, 7, 9), -ENOENT);
	assert_int_equal(flt_add_connected(t, TCP, 80, PEER_IP, 40000, 7), 0);
	assert_int_equal(flt_move_connected(t, TCP, 80, PEER_IP, 40000, 8, 9), -EPERM);
	assert_int_equal(flt_move_connected(t, TCP, 80, PEER_IP, 40000, 7, FLT_NO_OWNER), -EINVAL);
	assert_int_equal(rx(t, &(struct fspec){ 0 }), 7);
	assert_int_equal(flt_move_connected(t, TCP, 80, PEER_IP, 40000, 7, 9), 0);
	assert_int_equal(rx(t, &(struct fspec){ 0 }), 9);
	assert_int_equal(flt_del_connected(t, TCP, 80, PEER_IP, 40000, 7), -EPERM);
	flt_table_stats(t, &st);
	assert_int_equal(st.rules_connected, 1);
	assert_int_equal(flt_del_connected(t, TCP, 80, PEER_IP, 40000, 9), 0);
}

static void missing_rules_del_fails_enoent_or_eperm(void **state)
{
	struct flt_table *t = *state;

	assert_int_equal(flt_del_connected(t, TCP, 80, PEER_IP, 40000, 1), -ENOENT);
	assert_int_equal(flt_del_listen(t, TCP, 80, 1), -ENOENT);
	assert_int_equal(flt_add_connected(t, TCP, 80, PEER_IP, 40000, 1), 0);
	assert_int_equal(flt_del_connected(t, TCP, 80, PEER_IP, 40000, 2), -EPERM);
	assert_int_equal(flt_add_listen(t, TCP, 80, 1, true), 0);
	assert_int_equal(flt_del_listen(t, TCP, 80, 2), -ENOENT);
	assert_int_equal(rx(t, &(struct fspec){ 0 }), 1);
}

static void owner_with_many_rules_del_owner_removes_all_and_only_them(void **state)
{
	struct flt_table *t = *state;
	struct flt_stats st;

	for (uint16_t i = 0; i < 1000; i++) {
		assert_int_equal(flt_add_connected(t, TCP, 80, PEER_IP, (uint16_t)(1000 + i),
						   i % 2 ? 5 : 6), 0);
	}
	assert_int_equal(flt_add_listen(t, TCP, 80, 5, true), 0);
	assert_int_equal(flt_add_listen(t, TCP, 80, 6, true), 0);
	assert_int_equal(flt_add_listen(t, UDP, 53, 5, false), 0);

	assert_int_equal(flt_del_owner(t, 5), 500 + 2);
	assert_int_equal(flt_del_owner(t, 5), 0);
	for (uint16_t i = 0; i < 1000; i++)
		assert_int_equal(rx(t, &(struct fspec){ .sport = (uint16_t)(1000 + i) }), 6);
	assert_int_equal(rx(t, &(struct fspec){ .proto = UDP }), FLT_NO_OWNER);
	flt_table_stats(t, &st);
	assert_int_equal(st.rules_connected, 500);
	assert_int_equal(st.rules_listen, 1);
	assert_int_equal(flt_del_owner(t, 6), 501);
	flt_table_stats(t, &st);
	assert_int_equal(st.rules_connected, 0);
	assert_int_equal(st.rules_listen, 0);
}

static void fragments_lookup_go_to_server(void **state)
{
	struct flt_table *t = *state;
	struct flt_stats st;

	assert_int_equal(flt_add_listen(t, UDP, 53, 1, false), 0);
	assert_int_equal(rx(t, &(struct fspec){ .proto = UDP, .frag = 0x2000, .udp_len = 3000,
						.payload = 100 }), FLT_NO_OWNER);
	assert_int_equal(rx(t, &(struct fspec){ .proto = UDP, .frag = 20, .payload = 100 }),
			 FLT_NO_OWNER);
	flt_table_stats(t, &st);
	assert_int_equal(st.rx_fragment, 2);
}

static void arp_and_echo_lookup_go_to_server(void **state)
{
	struct flt_table *t = *state;
	struct frame f;
	struct flt_pkt p;

	assert_int_equal(flt_add_listen(t, TCP, 80, 1, false), 0);
	build_arp(&f, 1, peer_mac, PEER_IP, NODE_IP);
	assert_int_equal(flt_parse(f.b, f.len, &p), 0);
	assert_int_equal(flt_lookup_rx(t, &p), FLT_NO_OWNER);
	assert_int_equal(rx(t, &(struct fspec){ .proto = WIRE_IPPROTO_ICMP, .icmp_type = 8 }),
			 FLT_NO_OWNER);
}

static void icmp_error_lookup_returns_owner_of_quoted_endpoint(void **state)
{
	struct flt_table *t = *state;
	struct frame inner;
	struct flt_stats st;

	/* Process 9 sent TCP 50000 -> peer:443 and gets "fragmentation needed". */
	assert_int_equal(flt_add_connected(t, TCP, 50000, PEER_IP, 443, 9), 0);
	build(&inner, &(struct fspec){ .src = NODE_IP, .dst = PEER_IP, .sport = 50000,
				       .dport = 443 });
	assert_int_equal(rx(t, &(struct fspec){ .proto = WIRE_IPPROTO_ICMP, .icmp_type = 3,
						.icmp_code = 4, .quote = inner.b + 14,
						.quote_len = 28 }), 9);
	/* About a connection nobody has: the server's. */
	build(&inner, &(struct fspec){ .src = NODE_IP, .dst = PEER_IP, .sport = 50001,
				       .dport = 443 });
	assert_int_equal(rx(t, &(struct fspec){ .proto = WIRE_IPPROTO_ICMP, .icmp_type = 3,
						.quote = inner.b + 14, .quote_len = 28 }),
			 FLT_NO_OWNER);
	flt_table_stats(t, &st);
	assert_int_equal(st.rx_icmp_error, 1);
}

static void own_endpoints_check_tx_allows(void **state)
{
	struct flt_table *t = *state;

	assert_int_equal(flt_add_connected(t, TCP, 50000, PEER_IP, 443, 1), 0);
	assert_int_equal(flt_add_listen(t, TCP, 80, 1, false), 0);
	assert_int_equal(flt_add_listen(t, UDP, 53, 1, false), 0);
	assert_int_equal(tx(t, 1, (struct fspec){ .sport = 50000, .dport = 443 }), 0);
	assert_int_equal(tx(t, 1, (struct fspec){ .sport = 80, .dport = 40000,
						  .tcp_flags = WIRE_TCP_SYN | WIRE_TCP_ACK }), 0);
	assert_int_equal(tx(t, 1, (struct fspec){ .proto = UDP, .sport = 53, .dport = 9 }), 0);
}

static void others_port_check_tx_denies_port(void **state)
{
	struct flt_table *t = *state;
	struct flt_stats st;

	assert_int_equal(flt_add_connected(t, TCP, 50000, PEER_IP, 443, 1), 0);
	assert_int_equal(flt_add_listen(t, TCP, 80, 1, false), 0);
	assert_int_equal(flt_add_listen(t, TCP, 81, 2, false), 0);
	assert_int_equal(tx(t, 2, (struct fspec){ .sport = 50000, .dport = 443 }),
			 -FLT_DENY_PORT);
	assert_int_equal(tx(t, 2, (struct fspec){ .sport = 80, .dport = 40000 }), -FLT_DENY_PORT);
	/* Nobody's port, and a TCP port is not a UDP port. */
	assert_int_equal(tx(t, 2, (struct fspec){ .sport = 82 }), -FLT_DENY_PORT);
	assert_int_equal(tx(t, 2, (struct fspec){ .proto = UDP, .sport = 81 }), -FLT_DENY_PORT);
	flt_table_stats(t, &st);
	assert_int_equal(st.tx_checks, 4);
	assert_int_equal(st.tx_deny[FLT_REASON_INDEX(FLT_DENY_PORT)], 4);
	assert_int_equal(st.tx_allowed, 0);
}

static void forged_source_port_on_own_connection_check_tx_denies(void **state)
{
	struct flt_table *t = *state;

	/* Owner 1 has 50000 -> peer:443 only: the same destination from another source
	 * port, or its own port to another destination, is not its endpoint. */
	assert_int_equal(flt_add_connected(t, TCP, 50000, PEER_IP, 443, 1), 0);
	assert_int_equal(flt_add_connected(t, TCP, 50001, PEER_IP, 443, 2), 0);
	assert_int_equal(tx(t, 1, (struct fspec){ .sport = 50001, .dport = 443 }),
			 -FLT_DENY_PORT);
	assert_int_equal(tx(t, 1, (struct fspec){ .sport = 50000, .dport = 444 }),
			 -FLT_DENY_PORT);
	assert_int_equal(tx(t, 1, (struct fspec){ .sport = 50000, .dport = 443,
						  .dst = IP4(198, 18, 0, 3) }), -FLT_DENY_PORT);
}

static void wrong_source_addresses_check_tx_denies(void **state)
{
	struct flt_table *t = *state;

	assert_int_equal(flt_add_connected(t, TCP, 50000, PEER_IP, 443, 1), 0);
	assert_int_equal(tx(t, 1, (struct fspec){ .sport = 50000, .dport = 443,
						  .src = IP4(198, 18, 0, 9) }), -FLT_DENY_SRC_IP);
	assert_int_equal(tx(t, 1, (struct fspec){ .sport = 50000, .dport = 443,
						  .src_mac = peer_mac }), -FLT_DENY_SRC_MAC);
}

static void shared_port_member_check_tx_allows_only_its_connections(void **state)
{
	struct flt_table *t = *state;
	unsigned allowed[2] = { 0 };

	assert_int_equal(flt_add_listen(t, TCP, 80, 1, true), 0);
	assert_int_equal(flt_add_listen(t, TCP, 80, 2, true), 0);
	for (unsigned i = 0; i < 100; i++) {
		uint16_t rport = (uint16_t)(40000 + i);
		flt_owner_t o = rx(t, &(struct fspec){ .sport = rport });
		flt_owner_t other = o == 1 ? 2 : 1;

		assert_int_equal(tx(t, o, (struct fspec){ .sport = 80, .dport = rport }), 0);
		assert_int_equal(tx(t, other, (struct fspec){ .sport = 80, .dport = rport }),
				 -FLT_DENY_SHARED_PEER);
		allowed[o - 1]++;
	}
	assert_true(allowed[0] > 0 && allowed[1] > 0);
	/* Once a connection has its own rule, that rule alone decides. */
	assert_int_equal(flt_add_connected(t, TCP, 80, PEER_IP, 40000, 2), 0);
	assert_int_equal(tx(t, 2, (struct fspec){ .sport = 80, .dport = 40000 }), 0);
	assert_int_equal(tx(t, 1, (struct fspec){ .sport = 80, .dport = 40000 }), -FLT_DENY_PORT);
}

static void shared_udp_port_member_check_tx_allows_any_destination(void **state)
{
	struct flt_table *t = *state;

	assert_int_equal(flt_add_listen(t, UDP, 53, 1, true), 0);
	assert_int_equal(flt_add_listen(t, UDP, 53, 2, true), 0);
	for (uint16_t i = 0; i < 50; i++) {
		assert_int_equal(tx(t, 1, (struct fspec){ .proto = UDP, .sport = 53,
							  .dport = (uint16_t)(1000 + i) }), 0);
		assert_int_equal(tx(t, 2, (struct fspec){ .proto = UDP, .sport = 53,
							  .dport = (uint16_t)(1000 + i) }), 0);
	}
}

static void arp_from_node_check_tx_allows_and_forged_denies(void **state)
{
	struct flt_table *t = *state;
	struct frame f;
	struct flt_pkt p;

	build_arp(&f, 1, node_mac, NODE_IP, PEER_IP);
	assert_int_equal(flt_parse(f.b, f.len, &p), 0);
	assert_int_equal(flt_check_tx(t, &p, 1, NODE_IP, node_mac), 0);
	build_arp(&f, 2, node_mac, NODE_IP, PEER_IP);
	assert_int_equal(flt_parse(f.b, f.len, &p), 0);
	assert_int_equal(flt_check_tx(t, &p, 1, NODE_IP, node_mac), 0);
	/* Claiming the peer's address (cache poisoning), or a RARP-style opcode. */
	build_arp(&f, 2, node_mac, PEER_IP, PEER_IP);
	assert_int_equal(flt_parse(f.b, f.len, &p), 0);
	assert_int_equal(flt_check_tx(t, &p, 1, NODE_IP, node_mac), -FLT_DENY_ARP);
	build_arp(&f, 3, node_mac, NODE_IP, PEER_IP);
	assert_int_equal(flt_parse(f.b, f.len, &p), 0);
	assert_int_equal(flt_check_tx(t, &p, 1, NODE_IP, node_mac), -FLT_DENY_ARP);
	/* Ethernet source right, ARP sender hardware address someone else's. */
	build_arp(&f, 1, peer_mac, NODE_IP, PEER_IP);
	memcpy(f.b + 6, node_mac, 6);
	assert_int_equal(flt_parse(f.b, f.len, &p), 0);
	assert_int_equal(flt_check_tx(t, &p, 1, NODE_IP, node_mac), -FLT_DENY_ARP);
}

static void icmp_types_check_tx_allows_echo_and_own_unreachables(void **state)
{
	struct flt_table *t = *state;
	struct frame inner;

	assert_int_equal(flt_add_listen(t, UDP, 53, 1, false), 0);
	assert_int_equal(tx(t, 1, (struct fspec){ .proto = WIRE_IPPROTO_ICMP, .icmp_type = 8 }), 0);
	assert_int_equal(tx(t, 1, (struct fspec){ .proto = WIRE_IPPROTO_ICMP, .icmp_type = 0 }), 0);
	assert_int_equal(tx(t, 1, (struct fspec){ .proto = WIRE_IPPROTO_ICMP, .icmp_type = 5 }),
			 -FLT_DENY_ICMP);                  /* redirect */
	assert_int_equal(tx(t, 1, (struct fspec){ .proto = WIRE_IPPROTO_ICMP, .icmp_type = 11 }),
			 -FLT_DENY_ICMP);
	/* Port unreachable quoting a datagram the peer sent to owner 1's port 53... */
	build(&inner, &(struct fspec){ .proto = UDP, .sport = 1111, .dport = 53 });
	assert_int_equal(tx(t, 1, (struct fspec){ .proto = WIRE_IPPROTO_ICMP, .icmp_type = 3,
						  .icmp_code = 3, .quote = inner.b + 14,
						  .quote_len = 28 }), 0);
	/* ...is not owner 2's to send, nor one about a port nobody has, nor one without
	 * a readable quote. */
	assert_int_equal(tx(t, 2, (struct fspec){ .proto = WIRE_IPPROTO_ICMP, .icmp_type = 3,
						  .quote = inner.b + 14, .quote_len = 28 }),
			 -FLT_DENY_ICMP);
	build(&inner, &(struct fspec){ .proto = UDP, .sport = 1111, .dport = 54 });
	assert_int_equal(tx(t, 1, (struct fspec){ .proto = WIRE_IPPROTO_ICMP, .icmp_type = 3,
						  .quote = inner.b + 14, .quote_len = 28 }),
			 -FLT_DENY_ICMP);
	assert_int_equal(tx(t, 1, (struct fspec){ .proto = WIRE_IPPROTO_ICMP, .icmp_type = 3 }),
			 -FLT_DENY_ICMP);
}

static void fragments_and_other_protocols_check_tx(void **state)
{
	struct flt_table *t = *state;

	/* A later fragment: only the source address can be checked. */
	assert_int_equal(tx(t, 1, (struct fspec){ .proto = UDP, .frag = 185, .payload = 8 }), 0);
	assert_int_equal(tx(t, 1, (struct fspec){ .proto = UDP, .frag = 185, .payload = 8,
						  .src = IP4(198, 18, 0, 9) }), -FLT_DENY_SRC_IP);
	/* A first fragment is checked like a whole datagram. */
	assert_int_equal(tx(t, 1, (struct fspec){ .proto = UDP, .frag = 0x2000, .udp_len = 3000,
						  .payload = 100 }), -FLT_DENY_PORT);
	assert_int_equal(flt_add_listen(t, UDP, 40000, 1, false), 0);
	assert_int_equal(tx(t, 1, (struct fspec){ .proto = UDP, .frag = 0x2000, .udp_len = 3000,
						  .payload = 100 }), 0);
	assert_int_equal(tx(t, 1, (struct fspec){ .proto = 132, .payload = 4 }), -FLT_DENY_PROTO);
	assert_int_equal(tx(t, 1, (struct fspec){ .proto = 2, .payload = 8 }), -FLT_DENY_PROTO);
}

static void table_of_100k_connections_lookup_stays_exact(void **state)
{
	struct flt_table *t = *state;
	struct flt_stats st;
	enum { N = 100000 };

	assert_int_equal(flt_add_listen(t, TCP, 80, 999999, false), 0);
	for (uint32_t i = 0; i < N; i++) {
		uint32_t rip = IP4(10, (i >> 16) & 0xff, (i >> 8) & 0xff, i & 0xff);

		assert_int_equal(flt_add_connected(t, TCP, 80, rip, (uint16_t)(1024 + i % 1000),
						   i), 0);
	}
	for (uint32_t i = 0; i < N; i += 7) {
		uint32_t rip = IP4(10, (i >> 16) & 0xff, (i >> 8) & 0xff, i & 0xff);

		assert_int_equal(rx(t, &(struct fspec){ .src = rip,
							.sport = (uint16_t)(1024 + i % 1000) }), i);
		/* A near miss falls through to the listener. */
		assert_int_equal(rx(t, &(struct fspec){ .src = rip,
							.sport = (uint16_t)(2024 + i % 1000) }),
				 999999);
	}
	/* Delete every other one; the rest still resolve, the deleted ones fall through. */
	for (uint32_t i = 0; i < N; i += 2) {
		uint32_t rip = IP4(10, (i >> 16) & 0xff, (i >> 8) & 0xff, i & 0xff);

		assert_int_equal(flt_del_connected(t, TCP, 80, rip, (uint16_t)(1024 + i % 1000),
						   i), 0);
	}
	for (uint32_t i = 0; i < N; i += 3) {
		uint32_t rip = IP4(10, (i >> 16) & 0xff, (i >> 8) & 0xff, i & 0xff);

		assert_int_equal(rx(t, &(struct fspec){ .src = rip,
							.sport = (uint16_t)(1024 + i % 1000) }),
				 i % 2 ? i : 999999);
	}
	flt_table_stats(t, &st);
	assert_int_equal(st.rules_connected, N / 2);
}

/* A reference model: the rules as a flat list. */
struct model_rule {
	uint16_t lport, rport;
	flt_owner_t owner;
	bool live;
};

static void random_churn_table_matches_model(void **state)
{
	struct flt_table *t = *state;
	enum { M = 3000 };
	struct model_rule *m = calloc(M, sizeof(*m));
	uint64_t x = 12345;

	assert_non_null(m);
	for (unsigned i = 0; i < M; i++) {
		m[i].lport = (uint16_t)(1 + i % 97);
		m[i].rport = (uint16_t)(1 + i);
		m[i].owner = i % 13;
	}
	for (unsigned step = 0; step < 60000; step++) {
		unsigned i;

		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		i = (unsigned)(x >> 33) % M;
		if (m[i].live) {
			assert_int_equal(flt_del_connected(t, UDP, m[i].lport, PEER_IP, m[i].rport,
							   m[i].owner), 0);
		} else {
			assert_int_equal(flt_add_connected(t, UDP, m[i].lport, PEER_IP, m[i].rport,
							   m[i].owner), 0);
		}
		m[i].live = !m[i].live;
		if (step % 20000 == 19999) {
			size_t n = flt_del_owner(t, step % 13), expect = 0;

			for (unsigned k = 0; k < M; k++) {
				if (m[k].live && m[k].owner == step % 13) {
					m[k].live = false;
					expect++;
				}
			}
			assert_int_equal(n, expect);
		}
	}
	for (unsigned i = 0; i < M; i++) {
		flt_owner_t o = rx(t, &(struct fspec){ .proto = UDP, .sport = m[i].rport,
						       .dport = m[i].lport });

		assert_int_equal(o, m[i].live ? m[i].owner : FLT_NO_OWNER);
	}
	free(m);
}

struct visit {
	unsigned connected, listen, shared;
	uint64_t owner_sum;
};

static int visit(const struct flt_rule *r, void *arg)
{
	struct visit *v = arg;

	if (r->kind == FLT_RULE_CONNECTED) {
		v->connected++;
		assert_int_equal(r->rip, PEER_IP);
	} else {
		v->listen++;
		v->shared += r->shared;
		assert_int_equal(r->rip, 0);
		assert_int_equal(r->rport, 0);
	}
	v->owner_sum += r->owner;
	return 0;
}

static int stop_at_first(const struct flt_rule *r, void *arg)
{
	(void)r;
	++*(unsigned *)arg;
	return 17;
}

static void rules_of_both_kinds_foreach_visits_each_once(void **state)
{
	struct flt_table *t = *state;
	struct visit v = { 0 };
	unsigned calls = 0;

	assert_int_equal(flt_add_connected(t, TCP, 50000, PEER_IP, 443, 1), 0);
	assert_int_equal(flt_add_connected(t, UDP, 50000, PEER_IP, 53, 2), 0);
	assert_int_equal(flt_add_listen(t, TCP, 80, 3, true), 0);
	assert_int_equal(flt_add_listen(t, TCP, 80, 4, true), 0);
	assert_int_equal(flt_add_listen(t, UDP, 67, 5, false), 0);
	assert_int_equal(flt_foreach(t, visit, &v), 0);
	assert_int_equal(v.connected, 2);
	assert_int_equal(v.listen, 3);
	assert_int_equal(v.shared, 2);
	assert_int_equal(v.owner_sum, 1 + 2 + 3 + 4 + 5);
	assert_int_equal(flt_foreach(t, stop_at_first, &calls), 17);
	assert_int_equal(calls, 1);
}

static void new_seed_set_seed_keeps_every_rule(void **state)
{
	struct flt_table *t = *state;

	for (uint16_t i = 1; i <= 100; i++)
		assert_int_equal(flt_add_connected(t, TCP, i, PEER_IP, 40000, i), 0);
	assert_int_equal(flt_add_listen(t, TCP, 8080, 7, false), 0);
	assert_int_equal(flt_table_set_seed(t, 7), 0);
	for (uint16_t i = 1; i <= 100; i++)
		assert_int_equal(rx(t, &(struct fspec){ .dport = i }), i);
	assert_int_equal(rx(t, &(struct fspec){ .dport = 8080 }), 7);
}

static void lookups_and_drops_stats_count_each(void **state)
{
	struct flt_table *t = *state;
	struct flt_stats st;

	assert_int_equal(flt_add_listen(t, TCP, 80, 1, false), 0);
	assert_int_equal(flt_add_connected(t, TCP, 80, PEER_IP, 40000, 2), 0);
	rx(t, &(struct fspec){ 0 });
	rx(t, &(struct fspec){ .sport = 1 });
	rx(t, &(struct fspec){ .dport = 1 });
	flt_count_rx_drop(t, FLT_DROP_RUNT);
	flt_count_rx_drop(t, FLT_REASON_END);   /* ignored */
	flt_count_tx_drop(t, FLT_DROP_TCP_HEADER);
	flt_table_stats(t, &st);
	assert_int_equal(st.rx_lookups, 3);
	assert_int_equal(st.rx_connected, 1);
	assert_int_equal(st.rx_listen, 1);
	assert_int_equal(st.rx_no_owner, 1);
	assert_int_equal(st.rx_drop[FLT_REASON_INDEX(FLT_DROP_RUNT)], 1);
	assert_int_equal(st.tx_deny[FLT_REASON_INDEX(FLT_DROP_TCP_HEADER)], 1);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(empty_table_lookup_returns_no_owner),
		T(connected_rule_lookup_returns_its_owner),
		T(taken_tuple_add_connected_fails_eexist),
		T(invalid_arguments_add_fails_einval),
		T(listen_rule_lookup_returns_its_owner),
		T(port_held_unshared_add_listen_fails_eaddrinuse),
		T(same_owner_twice_add_listen_fails_eexist),
		T(shared_port_add_listen_builds_group_until_full),
		T(connected_and_listen_lookup_prefers_connected),
		T(shared_group_of_four_lookup_spreads_1000_tuples_evenly),
		T(same_members_in_any_order_lookup_picks_the_same),
		T(member_leaves_group_lookup_moves_only_its_connections),
		T(missing_rules_del_fails_enoent_or_eperm),
		T(connected_rule_moves_only_from_its_owner),
		T(owner_with_many_rules_del_owner_removes_all_and_only_them),
		T(fragments_lookup_go_to_server),
		T(arp_and_echo_lookup_go_to_server),
		T(icmp_error_lookup_returns_owner_of_quoted_endpoint),
		T(own_endpoints_check_tx_allows),
		T(others_port_check_tx_denies_port),
		T(forged_source_port_on_own_connection_check_tx_denies),
		T(wrong_source_addresses_check_tx_denies),
		T(shared_port_member_check_tx_allows_only_its_connections),
		T(shared_udp_port_member_check_tx_allows_any_destination),
		T(arp_from_node_check_tx_allows_and_forged_denies),
		T(icmp_types_check_tx_allows_echo_and_own_unreachables),
		T(fragments_and_other_protocols_check_tx),
		T(table_of_100k_connections_lookup_stays_exact),
		T(random_churn_table_matches_model),
		T(rules_of_both_kinds_foreach_visits_each_once),
		T(new_seed_set_seed_keeps_every_rule),
		T(lookups_and_drops_stats_count_each),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
