/* server/ports.c and server/custody.c, each an object of its own: the node's port space and
 * the custody of a dead process's connections.
 * Linux's bind(2) rules are the reference: one holder per port unless every holder asked
 * for SO_REUSEPORT as the same user; ports below 1024 need root; ephemeral ports come from
 * 32768..60999 (RFC 6056 §3.3.1 randomised start). */
#include <errno.h>
#include <setjmp.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <netinet/in.h>

#include "netif/ctl/ctl.h"
#include "filter/filter.h"
#include "server/custody.h"
#include "server/ports.h"
#include "lwipopts.h"  /* TCP_MSL: the processes' TIME-WAIT */

/* Time and probes are the caller's: the tests give them. */
static uint64_t now_ms = 1000;
static unsigned probes_sent;
static void probe(void *arg, struct srv_custody *c) { (void)arg; (void)c; probes_sent++; }

static struct flt_table *flt;
static struct srv_custody_set custody;
static struct srv_ports *ports;
static const uint64_t key[2] = { 0x0123456789abcdefull, 0xfedcba9876543210ull };
static const struct srv_port_owner root_a = { .id = 1, .uid = 0 }, root_b = { .id = 2, .uid = 0 },
			user_c = { .id = 3, .uid = 1000 }, user_d = { .id = 4, .uid = 1000 },
			other_e = { .id = 5, .uid = 2000 };
static const uint32_t peer = 0x640012c6;  /* 198.18.0.100, network order on little-endian */

static int setup(void **state)
{
	(void)state;
	flt = flt_table_new();
	ports = flt ? srv__ports_new(flt, &custody, key) : NULL;
	now_ms = 1000;
	probes_sent = 0;
	return ports ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	srv__ports_free(ports);
	flt_table_free(flt);
	srv__custody_free(&custody);
	return 0;
}

static void free_port_bound(void **state)
{
	(void)state;
	assert_int_equal(srv__port_bind(ports, &root_a, IPPROTO_TCP, 5001, 0), 5001);
	assert_true(srv__port_held(ports, &root_a, IPPROTO_TCP, 5001));
	assert_false(srv__port_held(ports, &root_b, IPPROTO_TCP, 5001));
}

static void held_port_bound_by_another_process_eaddrinuse(void **state)
{
	(void)state;
	assert_int_equal(srv__port_bind(ports, &root_a, IPPROTO_TCP, 5001, 0), 5001);
	assert_int_equal(srv__port_bind(ports, &root_b, IPPROTO_TCP, 5001, 0), -EADDRINUSE);
	assert_int_equal(srv__port_bind(ports, &root_b, IPPROTO_TCP, 5001, CTL_F_REUSEADDR),
			 -EADDRINUSE);
}

static void same_port_number_tcp_and_udp_independent(void **state)
{
	(void)state;
	assert_int_equal(srv__port_bind(ports, &root_a, IPPROTO_TCP, 5001, 0), 5001);
	assert_int_equal(srv__port_bind(ports, &root_b, IPPROTO_UDP, 5001, 0), 5001);
}

/* ipv6(7): the port space is per family. An AF_INET socket and an IPV6_V6ONLY one hold one
 * port side by side; a dual-stack AF_INET6 socket holds it in both and so conflicts with
 * either. Each family's listening group gets only its own holder. */
static void ipv4_and_ipv6_only_share_a_port_dual_stack_conflicts(void **state)
{
	(void)state;
	assert_int_equal(srv__port_bind_fam(ports, &root_a, IPPROTO_TCP, 5001, 0, FLT_FAM_V4), 5001);
	assert_int_equal(srv__port_bind_fam(ports, &root_b, IPPROTO_TCP, 5001, 0, FLT_FAM_V6), 5001);
	assert_int_equal(srv__port_bind_fam(ports, &user_c, IPPROTO_TCP, 5001, 0, FLT_FAM_ANY),
			 -EADDRINUSE);
	assert_int_equal(srv__port_listen(ports, &root_a, 5001, 0, FLT_FAM_V4), 0);
	assert_int_equal(srv__port_listen(ports, &root_b, 5001, 0, FLT_FAM_V6), 0);
	/* A dual-stack holder keeps both families from others. */
	assert_int_equal(srv__port_bind_fam(ports, &root_a, IPPROTO_TCP, 5002, 0, FLT_FAM_ANY), 5002);
	assert_int_equal(srv__port_bind_fam(ports, &root_b, IPPROTO_TCP, 5002, 0, FLT_FAM_V4),
			 -EADDRINUSE);
	assert_int_equal(srv__port_bind_fam(ports, &root_b, IPPROTO_TCP, 5002, 0, FLT_FAM_V6),
			 -EADDRINUSE);
	assert_int_equal(srv__port_listen(ports, &root_a, 5002, 0, FLT_FAM_ANY), 0);
	/* Released: both families' groups go with the last reference. */
	srv__port_release(ports, &root_a, IPPROTO_TCP, 5002);
	assert_int_equal(srv__port_bind_fam(ports, &root_b, IPPROTO_TCP, 5002, 0, FLT_FAM_V6), 5002);
	assert_int_equal(srv__port_listen(ports, &root_b, 5002, 0, FLT_FAM_V6), 0);
}

/* A UDP bind receives at once in its families only; IPv6 connects get 16-octet rules and
 * are kept from a tuple in custody. */
static void udp_bind_and_ipv6_connect_by_family(void **state)
{
	const uint8_t p6[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 0x64 };
	struct flt_addr r6 = flt_addr_v6(p6);

	(void)state;
	assert_int_equal(srv__port_bind_fam(ports, &root_a, IPPROTO_UDP, 5003, 0, FLT_FAM_V6), 5003);
	assert_int_equal(srv__port_bind_fam(ports, &root_b, IPPROTO_UDP, 5003, 0, FLT_FAM_V4), 5003);
	int p = srv__port_connect_addr(ports, &root_a, 0, &r6, 80);
	assert_true(p >= 32768 && p <= 60999);
	assert_int_equal(flt_del_connected_addr(flt, WIRE_IPPROTO_TCP, (uint16_t)p, &r6, 80, 1), 0);
	srv__port_release(ports, &root_a, IPPROTO_TCP, (uint16_t)p);
	assert_int_equal(srv__custody_add_addr(&custody, now_ms, 40000, &r6, 80), 0);
	assert_true(srv__custody_holds_addr(&custody, 40000, &r6, 80));
	assert_false(srv__custody_holds(&custody, 40000, peer, 80));
	assert_int_equal(srv__port_bind_fam(ports, &root_a, IPPROTO_TCP, 40000, 0, FLT_FAM_ANY), 40000);
	assert_int_equal(srv__port_connect_addr(ports, &root_a, 40000, &r6, 80), -EADDRINUSE);
}

static void port_zero_gets_ephemeral_port_in_linux_range(void **state)
{
	(void)state;
	for (int i = 0; i < 100; i++) {
		int p = srv__port_bind(ports, &root_a, IPPROTO_TCP, 0, 0);
		assert_in_range(p, SRV_EPHEMERAL_LO, SRV_EPHEMERAL_HI);
		assert_int_equal(srv__port_bind(ports, &root_b, IPPROTO_TCP, (uint16_t)p, 0), -EADDRINUSE);
	}
}

static void privileged_port_needs_root(void **state)
{
	(void)state;
	assert_int_equal(srv__port_bind(ports, &user_c, IPPROTO_TCP, 80, 0), -EACCES);
	assert_int_equal(srv__port_bind(ports, &user_c, IPPROTO_UDP, 1023, 0), -EACCES);
	assert_int_equal(srv__port_bind(ports, &user_c, IPPROTO_TCP, 1024, 0), 1024);
	assert_int_equal(srv__port_bind(ports, &root_a, IPPROTO_TCP, 80, 0), 80);
}

static void reuseport_shared_only_by_same_user_all_asking(void **state)
{
	(void)state;
	assert_int_equal(srv__port_bind(ports, &user_c, IPPROTO_TCP, 8080, CTL_F_REUSEPORT), 8080);
	assert_int_equal(srv__port_bind(ports, &user_d, IPPROTO_TCP, 8080, CTL_F_REUSEPORT), 8080);
	/* another user may not join, nor may a holder that did not ask */
	assert_int_equal(srv__port_bind(ports, &other_e, IPPROTO_TCP, 8080, CTL_F_REUSEPORT),
			 -EADDRINUSE);
	assert_int_equal(srv__port_bind(ports, &root_a, IPPROTO_TCP, 8080, 0), -EADDRINUSE);
}

static void reuseport_refused_when_first_holder_did_not_ask(void **state)
{
	(void)state;
	assert_int_equal(srv__port_bind(ports, &user_c, IPPROTO_TCP, 8080, 0), 8080);
	assert_int_equal(srv__port_bind(ports, &user_d, IPPROTO_TCP, 8080, CTL_F_REUSEPORT),
			 -EADDRINUSE);
}

static void port_free_again_after_last_reference_released(void **state)
{
	(void)state;
	assert_int_equal(srv__port_bind(ports, &root_a, IPPROTO_TCP, 5001, 0), 5001);
	assert_int_equal(srv__port_ref(ports, &root_a, IPPROTO_TCP, 5001), 0);  /* an accepted conn */
	srv__port_release(ports, &root_a, IPPROTO_TCP, 5001);
	assert_int_equal(srv__port_bind(ports, &root_b, IPPROTO_TCP, 5001, 0), -EADDRINUSE);
	srv__port_release(ports, &root_a, IPPROTO_TCP, 5001);
	assert_int_equal(srv__port_bind(ports, &root_b, IPPROTO_TCP, 5001, 0), 5001);
}

static void ref_on_a_port_not_held_refused(void **state)
{
	(void)state;
	assert_int_equal(srv__port_ref(ports, &root_a, IPPROTO_TCP, 5001), -EPERM);
}

static void dead_lease_ports_freed(void **state)
{
	(void)state;
	assert_int_equal(srv__port_bind(ports, &root_a, IPPROTO_TCP, 5001, 0), 5001);
	assert_int_equal(srv__port_bind(ports, &root_a, IPPROTO_UDP, 5353, 0), 5353);
	/* what srv__lease_end() does: rules first, then ports */
	flt_del_owner(flt, root_a.id);
	srv__ports_drop_owner(ports, &root_a);
	assert_int_equal(srv__port_bind(ports, &root_b, IPPROTO_TCP, 5001, 0), 5001);
	assert_int_equal(srv__port_bind(ports, &root_b, IPPROTO_UDP, 5353, 0), 5353);
}

/* A lease's end visits only the ports that have holders (the table's held bits): the
 * ports at both ends of the table and of a 64-port word, in both protocols, are freed;
 * a port shared with another lease stays that lease's until it ends too; a port released
 * before the end, and held again by another lease, is not touched. */
static void dead_lease_ports_freed_at_the_table_edges_shared_ones_kept(void **state)
{
	static const uint16_t edge[] = { 1, 63, 64, 127, 4096, 65535 };

	(void)state;
	for (size_t i = 0; i < sizeof(edge) / sizeof(edge[0]); i++) {
		assert_int_equal(srv__port_bind(ports, &root_a, IPPROTO_TCP, edge[i], 0), edge[i]);
		assert_int_equal(srv__port_bind(ports, &root_a, IPPROTO_UDP, edge[i], 0), edge[i]);
	}
	assert_int_equal(srv__port_bind(ports, &user_c, IPPROTO_TCP, 8080, CTL_F_REUSEPORT), 8080);
	assert_int_equal(srv__port_bind(ports, &user_d, IPPROTO_TCP, 8080, CTL_F_REUSEPORT), 8080);
	assert_int_equal(srv__port_bind(ports, &user_c, IPPROTO_UDP, 9090, 0), 9090);
	srv__port_release(ports, &user_c, IPPROTO_UDP, 9090);
	assert_int_equal(srv__port_bind(ports, &root_b, IPPROTO_UDP, 9090, 0), 9090);

	flt_del_owner(flt, root_a.id);
	srv__ports_drop_owner(ports, &root_a);
	flt_del_owner(flt, user_c.id);
	srv__ports_drop_owner(ports, &user_c);
	for (size_t i = 0; i < sizeof(edge) / sizeof(edge[0]); i++) {
		assert_int_equal(srv__port_bind(ports, &root_b, IPPROTO_TCP, edge[i], 0), edge[i]);
		assert_int_equal(srv__port_bind(ports, &root_b, IPPROTO_UDP, edge[i], 0), edge[i]);
	}
	/* user_d still holds 8080 (another user's lease may not take it) ... */
	assert_int_equal(srv__port_bind(ports, &other_e, IPPROTO_TCP, 8080, CTL_F_REUSEPORT),
			 -EADDRINUSE);
	assert_int_equal(srv__port_bind(ports, &other_e, IPPROTO_UDP, 9090, 0), -EADDRINUSE);
	/* ... until its lease ends */
	flt_del_owner(flt, user_d.id);
	srv__ports_drop_owner(ports, &user_d);
	assert_int_equal(srv__port_bind(ports, &other_e, IPPROTO_TCP, 8080, CTL_F_REUSEPORT), 8080);
	flt_del_owner(flt, root_b.id);
	srv__ports_drop_owner(ports, &root_b);
	assert_int_equal(srv__port_bind(ports, &other_e, IPPROTO_UDP, 9090, 0), 9090);
	assert_int_equal(srv__port_bind(ports, &user_c, IPPROTO_TCP, 65535, 0), 65535);
}

static void udp_bind_installs_receive_rule(void **state)
{
	struct flt_stats st;

	(void)state;
	assert_int_equal(srv__port_bind(ports, &root_a, IPPROTO_UDP, 5353, 0), 5353);
	flt_table_stats(flt, &st);
	assert_int_equal(st.rules_listen, 1);
	srv__port_release(ports, &root_a, IPPROTO_UDP, 5353);
	flt_table_stats(flt, &st);
	assert_int_equal(st.rules_listen, 0);
}

static void connect_from_port_zero_installs_tuple_on_ephemeral_port(void **state)
{
	struct flt_stats st;

	(void)state;
	int p = srv__port_connect(ports, &root_a, 0, peer, 5001);
	assert_in_range(p, SRV_EPHEMERAL_LO, SRV_EPHEMERAL_HI);
	flt_table_stats(flt, &st);
	assert_int_equal(st.rules_connected, 1);
	assert_true(srv__port_held(ports, &root_a, IPPROTO_TCP, (uint16_t)p));
}

/* RFC 6056 §3.3.3: a port freed by a closed connection does not come back for the same
 * destination at once, where the peer may still hold the old connection in TIME-WAIT. */
static void ephemeral_ports_to_one_destination_do_not_repeat_until_range_wraps(void **state)
{
	uint16_t seen[2000];

	(void)state;
	for (unsigned i = 0; i < 2000; i++) {
		int p = srv__port_connect(ports, &root_a, 0, peer, 8080);
		assert_in_range(p, SRV_EPHEMERAL_LO, SRV_EPHEMERAL_HI);
		for (unsigned j = 0; j < i; j++)
			assert_int_not_equal(p, seen[j]);
		seen[i] = (uint16_t)p;
		if (i > 0)  /* consecutive, wrapping at the top of the range */
			assert_int_equal(p, seen[i - 1] == SRV_EPHEMERAL_HI ? SRV_EPHEMERAL_LO
									 : seen[i - 1] + 1);
		/* the connection ends at once: its tuple and port are free again */
		assert_int_equal(flt_del_connected(flt, WIRE_IPPROTO_TCP, (uint16_t)p, peer, 8080,
						   root_a.id), 0);
		srv__port_release(ports, &root_a, IPPROTO_TCP, (uint16_t)p);
		assert_false(srv__port_held(ports, &root_a, IPPROTO_TCP, (uint16_t)p));
	}
}

static void connect_from_port_not_held_einval(void **state)
{
	(void)state;
	assert_int_equal(srv__port_connect(ports, &root_a, 40000, peer, 5001), -EINVAL);
}

static void same_tuple_connected_twice_eaddrinuse(void **state)
{
	(void)state;
	assert_int_equal(srv__port_bind(ports, &root_a, IPPROTO_TCP, 40000, 0), 40000);
	assert_int_equal(srv__port_connect(ports, &root_a, 40000, peer, 5001), 40000);
	assert_int_equal(srv__port_connect(ports, &root_a, 40000, peer, 5001), -EADDRINUSE);
	assert_int_equal(srv__port_connect(ports, &root_a, 40000, peer, 5002), 40000);
}

/* The table is an object, not a file's static: two nodes' tables (two ulsd in one test
 * program, or the fuzzer's rounds) hold their ports apart, and freeing one frees its
 * holders only. */
static void two_port_tables_hold_their_ports_apart(void **state)
{
	struct srv_custody_set other_custody = { 0 };
	struct flt_table *other_flt = flt_table_new();
	struct srv_ports *other = srv__ports_new(other_flt, &other_custody, key);

	(void)state;
	assert_non_null(other);
	assert_int_equal(srv__port_bind(ports, &root_a, IPPROTO_TCP, 5001, 0), 5001);
	assert_int_equal(srv__port_bind(other, &root_b, IPPROTO_TCP, 5001, 0), 5001);
	assert_false(srv__port_held(other, &root_a, IPPROTO_TCP, 5001));
	srv__ports_free(other);
	flt_table_free(other_flt);
	assert_true(srv__port_held(ports, &root_a, IPPROTO_TCP, 5001));
	assert_int_equal(srv__port_bind(ports, &root_b, IPPROTO_TCP, 5001, 0), -EADDRINUSE);
}

/* A tuple in custody is not handed out by the table that was given the custody set. */
static void ephemeral_connect_skips_a_port_whose_tuple_is_in_custody(void **state)
{
	(void)state;
	/* which port the next connect to peer:5001 gets, then give it back */
	int p = srv__port_connect(ports, &root_a, 0, peer, 5001);
	assert_in_range(p, SRV_EPHEMERAL_LO, SRV_EPHEMERAL_HI);
	assert_int_equal(flt_del_connected(flt, WIRE_IPPROTO_TCP, (uint16_t)p, peer, 5001,
					   root_a.id), 0);
	srv__port_release(ports, &root_a, IPPROTO_TCP, (uint16_t)p);
	srv__ports_free(ports);
	ports = srv__ports_new(flt, &custody, key);   /* the same key: the same search */
	assert_int_equal(srv__custody_add(&custody, now_ms, (uint16_t)p, peer, 5001), 0);
	int q = srv__port_connect(ports, &root_a, 0, peer, 5001);
	assert_in_range(q, SRV_EPHEMERAL_LO, SRV_EPHEMERAL_HI);
	assert_int_not_equal(q, p);
}

static void custody_tuple_not_reused_until_it_expires(void **state)
{
	(void)state;
	assert_int_equal(srv__port_bind(ports, &root_a, IPPROTO_TCP, 40000, 0), 40000);
	srv__custody_add(&custody, now_ms, 40000, peer, 5001);
	assert_true(srv__custody_holds(&custody, 40000, peer, 5001));
	assert_int_equal(srv__port_connect(ports, &root_a, 40000, peer, 5001), -EADDRINUSE);
	now_ms += SRV_TIMEWAIT_MS;
	srv__custody_tick(&custody, now_ms, probe, NULL);
	assert_false(srv__custody_holds(&custody, 40000, peer, 5001));
	assert_int_equal(srv__port_connect(ports, &root_a, 40000, peer, 5001), 40000);
}

/* A tuple whose process died stays reserved as long as it would have stayed in TIME-WAIT in
 * the process: RFC 9293 §3.4.2, 2 MSL on both sides. */
static void custody_lasts_as_long_as_a_processs_time_wait(void **state)
{
	(void)state;
	assert_int_equal(2 * TCP_MSL, SRV_TIMEWAIT_MS);
}

static void custody_probes_peer_a_few_times_then_stops(void **state)
{
	(void)state;
	srv__custody_add(&custody, now_ms, 40000, peer, 5001);
	srv__custody_add(&custody, now_ms, 40000, peer, 5001);  /* once only */
	assert_int_equal(custody.n, 1);
	for (int i = 0; i < 20; i++) {
		srv__custody_tick(&custody, now_ms, probe, NULL);
		now_ms += 250;
	}
	assert_int_equal(probes_sent, 4);
	/* the first probe goes out at once: the peer hears within a second */
	probes_sent = 0;
	srv__custody_add(&custody, now_ms, 40001, peer, 5001);
	srv__custody_tick(&custody, now_ms, probe, NULL);
	assert_int_equal(probes_sent, 1);
}

/* A connection its process left in TIME-WAIT: held as long, never probed (RFC 9293 §3.3.2:
 * TIME-WAIT only acknowledges a retransmitted FIN). */
static void custody_of_a_time_wait_connection_holds_it_without_probes(void **state)
{
	(void)state;
	struct flt_addr a = flt_addr_v4(peer);

	assert_int_equal(srv__custody_add_timewait(&custody, now_ms, 40000, &a, 5001, 1, 1), 0);
	assert_true(srv__custody_holds(&custody, 40000, peer, 5001));
	for (int i = 0; i < 20; i++) {
		srv__custody_tick(&custody, now_ms, probe, NULL);
		now_ms += 250;
	}
	assert_int_equal(probes_sent, 0);
	assert_true(srv__custody_holds(&custody, 40000, peer, 5001));
	now_ms += SRV_TIMEWAIT_MS;
	srv__custody_tick(&custody, now_ms, probe, NULL);
	assert_false(srv__custody_holds(&custody, 40000, peer, 5001));
}

/* The index over custody's entries (custody.h) answers as a walk of the entries would,
 * through 20,000 connections of both families taken in at two times, a tuple added twice,
 * tuples never added, and the first half expiring (each expiry moves the last entry into
 * the freed place, and deletion moves index entries back along their runs). */
static void custody_index_agrees_with_the_entries_through_adds_and_expiries(void **state)
{
	(void)state;
	enum { N = 20000 };
	static struct flt_addr rip[N];
	static uint16_t lp[N], rp[N];

	for (unsigned i = 0; i < N; i++) {
		/* few distinct ports and addresses: many tuples share all but one field */
		uint32_t a = htonl(0xc6120000u | (i % 97));
		if (i % 3 == 0) {
			rip[i] = (struct flt_addr){ 0 };
			rip[i].b[0] = 0x20;
			rip[i].b[1] = 0x01;
			rip[i].b[15] = (uint8_t)(i % 89);
		} else {
			rip[i] = flt_addr_v4(a);
		}
		lp[i] = (uint16_t)(40000 + i / 7);
		rp[i] = (uint16_t)(5000 + i % 7);
		uint64_t t = i < N / 2 ? now_ms : now_ms + 1000;
		assert_int_equal(srv__custody_add_addr(&custody, t, lp[i], &rip[i], rp[i]), 0);
		if (i % 1000 == 0)  /* held already: left as it is */
			assert_int_equal(srv__custody_add_addr(&custody, t, lp[i], &rip[i], rp[i]), 0);
	}
	assert_int_equal(custody.n, N);
	for (unsigned i = 0; i < N; i++) {
		assert_true(srv__custody_holds_addr(&custody, lp[i], &rip[i], rp[i]));
		/* the same tuple with another remote port, local port or address is not held */
		assert_false(srv__custody_holds_addr(&custody, lp[i], &rip[i], 4999));
		assert_false(srv__custody_holds_addr(&custody, 39999, &rip[i], rp[i]));
	}
	struct flt_addr none = flt_addr_v4(htonl(0x0a000001u));
	assert_false(srv__custody_holds_addr(&custody, lp[0], &none, rp[0]));
	/* the first half's 2 MSL ends: only the second half is held */
	srv__custody_tick(&custody, now_ms + SRV_TIMEWAIT_MS, probe, NULL);
	assert_int_equal(custody.n, N / 2);
	for (unsigned i = 0; i < N; i++)
		assert_int_equal(srv__custody_holds_addr(&custody, lp[i], &rip[i], rp[i]), i >= N / 2);
	for (size_t k = 0; k < custody.n; k++)   /* and every entry is found where it is */
		assert_true(srv__custody_holds_addr(&custody, custody.c[k].lport, &custody.c[k].rip,
						    custody.c[k].rport));
	/* a freed tuple can be taken in again */
	assert_int_equal(srv__custody_add_addr(&custody, now_ms, lp[0], &rip[0], rp[0]), 0);
	assert_true(srv__custody_holds_addr(&custody, lp[0], &rip[0], rp[0]));
	srv__custody_tick(&custody, now_ms + 1000 + SRV_TIMEWAIT_MS, probe, NULL);
	assert_int_equal(custody.n, 0);
	assert_false(srv__custody_holds_addr(&custody, lp[N - 1], &rip[N - 1], rp[N - 1]));
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
#define T_V6 T(ipv4_and_ipv6_only_share_a_port_dual_stack_conflicts), \
	     T(udp_bind_and_ipv6_connect_by_family)
	const struct CMUnitTest tests[] = {
		T(free_port_bound),
		T_V6,
		T(held_port_bound_by_another_process_eaddrinuse),
		T(same_port_number_tcp_and_udp_independent),
		T(port_zero_gets_ephemeral_port_in_linux_range),
		T(privileged_port_needs_root),
		T(reuseport_shared_only_by_same_user_all_asking),
		T(reuseport_refused_when_first_holder_did_not_ask),
		T(port_free_again_after_last_reference_released),
		T(ref_on_a_port_not_held_refused),
		T(dead_lease_ports_freed),
		T(dead_lease_ports_freed_at_the_table_edges_shared_ones_kept),
		T(udp_bind_installs_receive_rule),
		T(connect_from_port_zero_installs_tuple_on_ephemeral_port),
		T(ephemeral_ports_to_one_destination_do_not_repeat_until_range_wraps),
		T(connect_from_port_not_held_einval),
		T(same_tuple_connected_twice_eaddrinuse),
		T(two_port_tables_hold_their_ports_apart),
		T(ephemeral_connect_skips_a_port_whose_tuple_is_in_custody),
		T(custody_tuple_not_reused_until_it_expires),
		T(custody_lasts_as_long_as_a_processs_time_wait),
		T(custody_probes_peer_a_few_times_then_stops),
		T(custody_index_agrees_with_the_entries_through_adds_and_expiries),
		T(custody_of_a_time_wait_connection_holds_it_without_probes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
