/* ulsd's connection server, leases, handoffs, demultiplexer and own replies
 * (server/ctl.c, lease.c, handoff.c, demux.c, reply.c), with the rest of ulsd as it is and
 * only the TAP replaced: a fake one (below) that records what ulsd sends and hands the
 * demux thread the frames a test injects.
 *
 * The control thread (srv__ctl_run) runs in a thread of its own and is reached over a real
 * control socket, as processes reach it; the demux thread's loop (srv__demux_thread) runs
 * one round in the test's thread, which makes it deterministic. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <netinet/in.h>

#include "netif/conntab.h"
#include "netif/ctl/ctl.h"
#include "netif/dev.h"
#include "netif/ring.h"
#include "netif/tap.h"
#include "server/internal.h"
#include "server_fixture.h"

/* ---- lease.c -------------------------------------------------------------------------- */

static void test_lease_ids_start_at_one_and_a_freed_id_is_not_given_again_at_once(void **state)
{
	(void)state;
	struct srv_lease *a = new_lease(0), *b = new_lease(0);
	assert_int_equal(a->id, 1);
	assert_int_equal(b->id, 2);
	srv__lease_end(&srv, a);
	demux(NULL, 0);  /* frees it */
	assert_null(srv.leases.by_id[1]);
	struct srv_lease *c = new_lease(0);
	assert_int_equal(c->id, 3);
	assert_int_equal(srv.ctr.v[SRV_LEASES_OPENED], 3);
	assert_int_equal(srv.ctr.v[SRV_LEASES_CLOSED], 1);
}

static void test_lease_table_full_refuses_a_new_lease_with_emfile(void **state)
{
	(void)state;
	struct srv_lease *l;
	for (uint32_t i = 1; i < SRV_MAX_LEASES; i++)
		assert_int_equal(srv__lease_new(&srv, -1, 1, 0, &l), 0);
	assert_int_equal(srv__lease_new(&srv, -1, 1, 0, &l), -EMFILE);
	for (uint32_t i = 1; i < SRV_MAX_LEASES; i++) {
		srv.leases.by_id[i]->dead = true;
		srv__lease_free(&srv, srv.leases.by_id[i]);
	}
}

/* The lease table alone (lease.h): only a live lease is found by its id, so that frames
 * and transmit events for an ended process, an id past the table or the in-transit owner
 * reach no ring. */
static void test_lease_table_finds_only_live_leases_by_id(void **state)
{
	(void)state;
	struct srv_leases t = { 0 };
	struct srv_lease *a, *b;
	assert_int_equal(srv__leases_add(&t, &a), 0);
	assert_int_equal(srv__leases_add(&t, &b), 0);
	assert_int_equal(a->fd, -1);
	assert_ptr_equal(srv__leases_live(&t, a->id), a);
	b->dead = true;
	assert_null(srv__leases_live(&t, b->id));
	assert_null(srv__leases_live(&t, 0));
	assert_null(srv__leases_live(&t, SRV_IN_TRANSIT));
	assert_null(srv__leases_live(&t, UINT64_MAX));
	srv__leases_remove(&t, a);
	assert_null(srv__leases_live(&t, a->id));
	srv__leases_remove(&t, b);
	free(a);
	free(b);
}

/* ---- counters.c ----------------------------------------------------------------------- */

/* STATS sends every counter by its name: each has one, and no two share it. */
static void test_every_counter_has_a_name_of_its_own(void **state)
{
	(void)state;
	for (int i = 0; i < SRV_COUNTER_MAX; i++) {
		const char *n = srv__counter_name((enum srv_counter)i);
		assert_non_null(n);
		for (int j = 0; j < i; j++)
			assert_string_not_equal(n, srv__counter_name((enum srv_counter)j));
	}
	assert_string_equal(srv__counter_name(SRV_COUNTER_MAX), "unknown");
}

static void test_lease_end_puts_its_tcp_connections_in_custody_and_frees_its_ports(void **state)
{
	(void)state;
	struct srv_lease *a = new_lease(1000), *b = new_lease(1000);
	assert_int_equal(connected(a, 5001), 5001);
	assert_int_equal(srv__port_bind(srv.ports, SRV_OWNER(a), IPPROTO_UDP, 6001, 0), 6001);
	srv__learn_neighbour(&srv, PEER_IP, peer_mac);
	srv__lease_end(&srv, a);
	assert_true(a->dead);
	assert_true(srv__custody_holds(&srv.custody, 5001, PEER_IP, 80));
	/* The peer is probed at once: an ACK far outside its window (reply.c). */
	assert_int_equal(srv.ctr.v[SRV_RST_PROBES], 1);
	assert_int_equal(nsent, 1);
	assert_memory_equal(sent[0].b, peer_mac, 6);
	assert_int_equal(tcp_of(sent[0].b)[13], WIRE_TCP_ACK);
	/* Its UDP port is free for another process; the TCP tuple is not. */
	assert_int_equal(srv__port_bind(srv.ports, SRV_OWNER(b), IPPROTO_UDP, 6001, 0), 6001);
	assert_int_equal(connected(b, 5001), -EADDRINUSE);
}

/* A connection table entry with only what the FIN-WAIT-2 and TIME-WAIT lookup reads
 * spelled out. */
static struct uls_conntab_ent tw_ent(uint16_t lport, uint8_t rip_last, uint16_t rport,
				     uint8_t tcp_state)
{
	struct uls_conntab_ent e;

	memset(&e, 0, sizeof(e));
	e.rip[10] = e.rip[11] = 0xff;  /* ::ffff:192.0.2.x */
	e.rip[12] = 192;
	e.rip[14] = 2;
	e.rip[15] = rip_last;
	e.lport = lport;
	e.rport = rport;
	e.state = tcp_state;
	return e;
}

static void test_time_wait_lookup_finds_only_the_tuples_left_in_time_wait(void **state)
{
	(void)state;
	struct uls_conntab_ent tab[] = {
		tw_ent(5001, 7, 80, ULS_TCP_ESTABLISHED),
		tw_ent(5002, 7, 80, ULS_TCP_TIME_WAIT),
		tw_ent(5003, 7, 80, ULS_TCP_FIN_WAIT_1),
		tw_ent(5000, 9, 443, ULS_TCP_TIME_WAIT),
		tw_ent(5002, 8, 80, ULS_TCP_TIME_WAIT),
	};
	struct uls_conntab_ent probe;
	uint32_t n = srv__tw_sort(tab, 5);

	assert_int_equal(n, 3);
	probe = tw_ent(5002, 7, 80, 0);
	assert_true(srv__tw_find(tab, n, 5002, probe.rip, 80));
	probe = tw_ent(5002, 8, 80, 0);
	assert_true(srv__tw_find(tab, n, 5002, probe.rip, 80));
	probe = tw_ent(5000, 9, 443, 0);
	assert_true(srv__tw_find(tab, n, 5000, probe.rip, 443));
	/* Not in TIME-WAIT, or one field away from a tuple that is. */
	probe = tw_ent(5001, 7, 80, 0);
	assert_false(srv__tw_find(tab, n, 5001, probe.rip, 80));
	assert_false(srv__tw_find(tab, n, 5003, probe.rip, 80));
	assert_false(srv__tw_find(tab, n, 5002, probe.rip, 81));
	probe = tw_ent(5002, 6, 80, 0);
	assert_false(srv__tw_find(tab, n, 5002, probe.rip, 80));
	probe.rip[15] = 7;
	probe.rip[0] = 1;  /* the same last octet, another address */
	assert_false(srv__tw_find(tab, n, 5002, probe.rip, 80));
	/* No table (none mapped, or not readable): nothing is in TIME-WAIT. */
	assert_false(srv__tw_find(NULL, 0, 5002, tab[0].rip, 80));
}

/* The sorted lookup answers as a search of the whole table did, over a full table whose
 * tuples share ports and addresses, so that every comparison has ties to break. */
static void test_time_wait_lookup_agrees_with_a_linear_search_of_a_full_table(void **state)
{
	(void)state;
	enum { N = ULS_CONNTAB_CAPACITY };
	static struct uls_conntab_ent all[N], tw[N];
	uint32_t x = 12345, n;

	for (unsigned i = 0; i < N; i++) {
		x = x * 1103515245u + 12345u;
		all[i] = tw_ent(5000 + (x >> 8) % 8, (uint8_t)((x >> 12) % 8), 80 + (x >> 16) % 4,
				(x >> 20) % 3 ? ULS_TCP_ESTABLISHED : ULS_TCP_TIME_WAIT);
		all[i].rip[(x >> 24) % 2 ? 0 : 15] ^= (uint8_t)((x >> 26) % 2);
	}
	memcpy(tw, all, sizeof(tw));
	n = srv__tw_sort(tw, N);
	assert_true(n > 0 && n < N);
	for (unsigned i = 0; i < N; i++) {
		const struct uls_conntab_ent *e = &all[i];
		bool want = false;

		for (unsigned j = 0; j < N && !want; j++)
			want = all[j].state == ULS_TCP_TIME_WAIT && all[j].lport == e->lport &&
			       all[j].rport == e->rport && !memcmp(all[j].rip, e->rip, 16);
		assert_int_equal(srv__tw_find(tw, n, e->lport, e->rip, e->rport) != NULL, want);
	}
}

static void test_lease_rings_give_a_relay_lease_its_ring_pair_and_eventfds(void **state)
{
	(void)state;
	struct srv_lease *l = new_lease(0);
	assert_false(l->has_rings);
	assert_int_equal(srv__lease_rings(&srv, l), 0);
	assert_true(l->has_rings);
	assert_true(l->memfd >= 0 && l->rx_efd >= 0 && l->tx_efd >= 0);
	assert_true(srv.leases.changed);
}

/* ---- custody of connections left closing (custody.c, reply.c) ------------------------ */

static const struct flt_addr *peer4(void)
{
	static struct flt_addr a;

	a = flt_addr_v4(PEER_IP);
	return &a;
}

static enum srv_custody_verdict seg(uint8_t flags, uint32_t seq, uint32_t ack, size_t len,
				    uint32_t *oseq, uint32_t *oack)
{
	struct srv_custody_seg g = { seq, ack, flags, len };

	return srv__custody_segment(&srv.custody, now_ms, 5001, peer4(), 80, &g, oseq, oack);
}

/* RFC 9293 §3.10.7.4: in FIN-WAIT-2 the peer's FIN is acknowledged and the connection
 * enters TIME-WAIT; there its retransmission is acknowledged again and 2 MSL restart.
 * Only a FIN exactly at RCV.NXT acknowledging our FIN does that (a blind one cannot). */
static void test_custody_acks_the_fin_and_ignores_a_bare_ack_of_a_connection_left_in_fin_wait_2(void **state)
{
	(void)state;
	const uint8_t fa = WIRE_TCP_FIN | WIRE_TCP_ACK;
	uint32_t sq = 0, ak = 0;

	assert_int_equal(srv__custody_add_finwait2(&srv.custody, now_ms, 5001, peer4(), 80,
						   1000, 5000), 0);
	const struct srv_custody *c = &srv.custody.c[0];
	assert_int_equal(c->probes_left, 0);  /* no probe: its peer may still close in order */
	assert_true(c->expires_ms == now_ms + SRV_FIN_WAIT_2_MS);
	/* Anything but the peer's FIN is answered as today (a RST) and changes nothing. */
	assert_int_equal(seg(fa, 4999, 1000, 0, &sq, &ak), SRV_CUSTODY_RST_BAD_FIN);
	assert_int_equal(seg(fa, 5001, 1000, 0, &sq, &ak), SRV_CUSTODY_RST_BAD_FIN);
	assert_int_equal(seg(fa, 5000, 999, 0, &sq, &ak), SRV_CUSTODY_RST_BAD_FIN);
	assert_int_equal(seg(fa, 5000, 1000, 1, &sq, &ak), SRV_CUSTODY_RST_BAD_FIN);
	assert_int_equal(seg(WIRE_TCP_FIN, 5000, 1000, 0, &sq, &ak), SRV_CUSTODY_RST_BAD_FIN);
	assert_int_equal(seg(fa | WIRE_TCP_SYN, 5000, 1000, 0, &sq, &ak), SRV_CUSTODY_RST_BAD_FIN);
	assert_int_equal(seg(WIRE_TCP_ACK, 5000, 1000, 10, &sq, &ak), SRV_CUSTODY_RST_BAD_FIN);
	/* A bare ACK acknowledging more than we sent, or off RCV.NXT, is reset too. */
	assert_int_equal(seg(WIRE_TCP_ACK, 5000, 1001, 0, &sq, &ak), SRV_CUSTODY_RST_BAD_FIN);
	assert_int_equal(seg(WIRE_TCP_ACK, 5001, 1000, 0, &sq, &ak), SRV_CUSTODY_RST_BAD_FIN);
	assert_int_equal(seg(WIRE_TCP_ACK, 4999, 999, 0, &sq, &ak), SRV_CUSTODY_RST_BAD_FIN);
	assert_int_equal(seg(WIRE_TCP_ACK, 5000, 1000 - (1u << 30), 0, &sq, &ak),
			 SRV_CUSTODY_RST_BAD_FIN);
	/* Its bare ACK at RCV.NXT (a window update, or one for our data that the process's
	 * exit overtook) is ignored: "If the ACK is a duplicate (SEG.ACK =< SND.UNA), it can
	 * be ignored" (§3.10.7.4). */
	sq = ak = 7;
	assert_int_equal(seg(WIRE_TCP_ACK, 5000, 1000, 0, &sq, &ak), SRV_CUSTODY_IGNORE);
	assert_int_equal(seg(WIRE_TCP_ACK | WIRE_TCP_PSH, 5000, 999, 0, &sq, &ak),
			 SRV_CUSTODY_IGNORE);
	assert_int_equal(sq, 7);
	assert_int_equal(c->state, SRV_CUSTODY_FIN_WAIT_2);
	assert_true(c->expires_ms == now_ms + SRV_FIN_WAIT_2_MS);
	/* The FIN: <SEQ=SND.NXT><ACK=SEG.SEQ+1>, TIME-WAIT for 2 MSL from now. */
	now_ms += 100;
	assert_int_equal(seg(fa, 5000, 1000, 0, &sq, &ak), SRV_CUSTODY_ACK);
	assert_int_equal(sq, 1000);
	assert_int_equal(ak, 5001);
	assert_int_equal(c->state, SRV_CUSTODY_TIME_WAIT);
	assert_true(c->expires_ms == now_ms + SRV_TIMEWAIT_MS);
	/* Its retransmission: the same ACK, 2 MSL again. */
	now_ms += 200;
	sq = ak = 0;
	assert_int_equal(seg(fa, 5000, 1000, 0, &sq, &ak), SRV_CUSTODY_ACK);
	assert_int_equal(sq, 1000);
	assert_int_equal(ak, 5001);
	assert_true(c->expires_ms == now_ms + SRV_TIMEWAIT_MS);
	assert_int_equal(seg(fa, 5001, 1000, 0, &sq, &ak), SRV_CUSTODY_RST_BAD_FIN);
	/* In TIME-WAIT, RCV.NXT is past the FIN: a bare ACK there is ignored, one at the FIN's
	 * SEQ is not. */
	assert_int_equal(seg(WIRE_TCP_ACK, 5001, 1000, 0, &sq, &ak), SRV_CUSTODY_IGNORE);
	assert_int_equal(seg(WIRE_TCP_ACK, 5000, 1000, 0, &sq, &ak), SRV_CUSTODY_RST_BAD_FIN);
	assert_true(srv__custody_holds(&srv.custody, 5001, PEER_IP, 80));
}

/* A connection its process left in TIME-WAIT: RCV.NXT is past the peer's FIN, so its
 * retransmission carries RCV.NXT - 1. A probed (dead) connection and a tuple not held get
 * RSTs as before. */
static void test_custody_acks_a_retransmitted_fin_in_time_wait_only(void **state)
{
	(void)state;
	uint32_t sq = 0, ak = 0;
	struct srv_custody_seg g = { 5000, 1000, WIRE_TCP_FIN | WIRE_TCP_ACK, 0 };

	assert_int_equal(srv__custody_add_timewait(&srv.custody, now_ms, 5001, peer4(), 80,
						   1000, 5001), 0);
	assert_int_equal(seg(WIRE_TCP_FIN | WIRE_TCP_ACK, 5000, 1000, 0, &sq, &ak), SRV_CUSTODY_ACK);
	assert_int_equal(ak, 5001);
	assert_int_equal(srv__custody_add_addr(&srv.custody, now_ms, 5002, peer4(), 80), 0);
	assert_int_equal(srv__custody_segment(&srv.custody, now_ms, 5002, peer4(), 80, &g, &sq, &ak),
			 SRV_CUSTODY_RST);
	assert_int_equal(srv__custody_segment(&srv.custody, now_ms, 5003, peer4(), 80, &g, &sq, &ak),
			 SRV_CUSTODY_RST);
}

/* RFC 9293 §3.10.7.4, first check: a segment wholly before RCV.NXT is not acceptable
 * and gets an ACK. The peer's last data, which the process received before it stopped but
 * whose ACK never left (lost, or delayed and the stack stopped first: uls_node_stop does
 * not wait for a delayed ACK), is retransmitted after the peer's RTO: in FIN-WAIT-2 it ends
 * exactly at the recorded RCV.NXT, in TIME-WAIT at the FIN, with or without the FIN
 * (retransmissions coalesce). It gets <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>, not a RST that
 * resets a peer still to close in order (Linux's orphaned FIN-WAIT-2 and TIME-WAIT sockets
 * acknowledge it). Only a segment ending exactly there, acknowledging exactly SND.NXT:
 * a blind one cannot draw the ACK. */
static void test_custody_acks_a_retransmission_of_data_the_process_had_received(void **state)
{
	(void)state;
	const uint8_t fa = WIRE_TCP_FIN | WIRE_TCP_ACK, pa = WIRE_TCP_PSH | WIRE_TCP_ACK;
	uint32_t sq = 0, ak = 0;

	assert_int_equal(srv__custody_add_finwait2(&srv.custody, now_ms, 5001, peer4(), 80,
						   1000, 5000), 0);
	const struct srv_custody *c = &srv.custody.c[0];
	/* Off by one either way, or acknowledging other than SND.NXT: a RST as before. */
	assert_int_equal(seg(pa, 4900, 1000, 99, &sq, &ak), SRV_CUSTODY_RST_BAD_FIN);
	assert_int_equal(seg(pa, 4900, 1000, 101, &sq, &ak), SRV_CUSTODY_RST_BAD_FIN);
	assert_int_equal(seg(pa, 4900, 999, 100, &sq, &ak), SRV_CUSTODY_RST_BAD_FIN);
	/* The retransmission: acknowledged, the state and its timer as they were. */
	now_ms += 50;
	assert_int_equal(seg(pa, 4900, 1000, 100, &sq, &ak), SRV_CUSTODY_ACK_OLD);
	assert_int_equal(sq, 1000);
	assert_int_equal(ak, 5000);
	assert_int_equal(c->state, SRV_CUSTODY_FIN_WAIT_2);
	assert_true(c->expires_ms == now_ms - 50 + SRV_FIN_WAIT_2_MS);
	/* The peer's keepalive or window probe from its CLOSE-WAIT (SEG.SEQ = RCV.NXT - 1, no
	 * data; RFC 9293 §3.8.4): acknowledged too, only exactly there. */
	assert_int_equal(seg(WIRE_TCP_ACK, 4998, 1000, 0, &sq, &ak), SRV_CUSTODY_RST_BAD_FIN);
	assert_int_equal(seg(WIRE_TCP_ACK, 4999, 1001, 0, &sq, &ak), SRV_CUSTODY_RST_BAD_FIN);
	sq = ak = 0;
	assert_int_equal(seg(WIRE_TCP_ACK, 4999, 1000, 0, &sq, &ak), SRV_CUSTODY_ACK_OLD);
	assert_int_equal(sq, 1000);
	assert_int_equal(ak, 5000);
	assert_int_equal(c->state, SRV_CUSTODY_FIN_WAIT_2);
	/* The same data with the peer's FIN: the FIN is new, TIME-WAIT. */
	assert_int_equal(seg(fa | WIRE_TCP_PSH, 4900, 1000, 100, &sq, &ak), SRV_CUSTODY_ACK);
	assert_int_equal(ak, 5001);
	assert_int_equal(c->state, SRV_CUSTODY_TIME_WAIT);
	/* In TIME-WAIT: the data alone, and the data with the FIN, again. */
	sq = ak = 0;
	assert_int_equal(seg(pa, 4900, 1000, 100, &sq, &ak), SRV_CUSTODY_ACK_OLD);
	assert_int_equal(sq, 1000);
	assert_int_equal(ak, 5001);
	assert_int_equal(seg(fa, 4900, 1000, 100, &sq, &ak), SRV_CUSTODY_ACK);
	assert_int_equal(ak, 5001);
	/* Data past the FIN is new: a RST. */
	assert_int_equal(seg(pa, 5001, 1000, 10, &sq, &ak), SRV_CUSTODY_RST_BAD_FIN);
}

static void no_probe(void *arg, struct srv_custody *c)
{
	(void)arg;
	(void)c;
	fail_msg("a connection left in FIN-WAIT-2 was probed");
}

/* Without the peer's FIN a FIN-WAIT-2 tuple is forgotten after SRV_FIN_WAIT_2_MS (Linux's
 * tcp_fin_timeout), never probed. */
static void test_custody_forgets_a_fin_wait_2_connection_whose_peer_never_closes(void **state)
{
	(void)state;
	assert_int_equal(srv__custody_add_finwait2(&srv.custody, now_ms, 5001, peer4(), 80, 1, 2), 0);
	srv__custody_tick(&srv.custody, now_ms + SRV_FIN_WAIT_2_MS - 1, no_probe, NULL);
	assert_true(srv__custody_holds(&srv.custody, 5001, PEER_IP, 80));
	srv__custody_tick(&srv.custody, now_ms + SRV_FIN_WAIT_2_MS, no_probe, NULL);
	assert_false(srv__custody_holds(&srv.custody, 5001, PEER_IP, 80));
}

/* A frame from the peer, with its SEQ and ACK fields (the TCP checksum is not checked
 * here: the TAP's). */
static void peer_segment(struct frame *f, uint8_t flags, uint32_t seq, uint32_t ack,
			 size_t payload)
{
	struct fspec fs = { .sport = 80, .dport = 5001, .tcp_flags = flags, .payload = payload };

	build(f, &fs);
	wire_wr32(f->b + 14 + 20 + 4, seq);
	wire_wr32(f->b + 14 + 20 + 8, ack);
}

/* The lease's end reads the process's last connection table: a connection in FIN-WAIT-2
 * is held without a probe; its peer's FIN gets an ACK on the wire (twice, the second a
 * retransmission in TIME-WAIT), its data a RST, each counted. */
static void test_lease_end_holds_a_fin_wait_2_connection_acks_its_peers_fin_and_ignores_its_bare_ack(void **state)
{
	(void)state;
	struct srv_lease *a = new_lease(1000);
	struct frame f;
	void *map;

	assert_int_equal(connected(a, 5001), 5001);
	int fd = uls_conntab_create(4, &map);
	assert_true(fd >= 0);
	close(fd);
	struct uls_conntab_hdr *h = map;
	struct uls_conntab_ent *e = (void *)(h + 1);
	uls_conntab_write_begin(h);
	*e = tw_ent(5001, 2, 80, ULS_TCP_FIN_WAIT_2);
	ctl_addr_set4(e->rip, PEER_IP);
	e->snd_nxt = 1000;
	e->rcv_nxt = 5000;
	uls_conntab_write_end(h, 1, 1, 1);
	a->conntab = map;
	a->conntab_cap = 4;
	srv__learn_neighbour(&srv, PEER_IP, peer_mac);
	srv__lease_end(&srv, a);
	assert_true(srv__custody_holds(&srv.custody, 5001, PEER_IP, 80));
	assert_int_equal(srv.ctr.v[SRV_CUSTODY_FINWAIT2], 1);
	assert_int_equal(srv.ctr.v[SRV_RST_PROBES], 0);
	assert_int_equal(nsent, 0);
	/* The peer's bare ACK (one the process's exit overtook): no answer, counted. */
	peer_segment(&f, WIRE_TCP_ACK, 5000, 990, 0);
	demux(&f, 1);
	assert_int_equal(nsent, 0);
	assert_int_equal(srv.ctr.v[SRV_CUSTODY_ACK_IGNORED], 1);
	for (int i = 0; i < 2; i++) {
		peer_segment(&f, WIRE_TCP_FIN | WIRE_TCP_ACK, 5000, 1000, 0);
		demux(&f, 1);
		assert_int_equal(nsent, i + 1);
		const uint8_t *t = tcp_of(sent[i].b);
		assert_int_equal(t[13], WIRE_TCP_ACK);
		assert_int_equal(rd32(t + 4), 1000);
		assert_int_equal(rd32(t + 8), 5001);
		assert_int_equal(rd16(t), 5001);
		assert_int_equal(rd16(t + 2), 80);
	}
	assert_int_equal(srv.ctr.v[SRV_CUSTODY_FIN_ACKED], 2);
	assert_int_equal(srv.ctr.v[SRV_RST_SENT], 0);
	/* Data after the process is gone: a RST at its ACK, as for any dead connection. */
	peer_segment(&f, WIRE_TCP_ACK | WIRE_TCP_PSH, 5001, 1000, 10);
	demux(&f, 1);
	assert_int_equal(nsent, 3);
	assert_int_equal(tcp_of(sent[2].b)[13], WIRE_TCP_RST);
	assert_int_equal(srv.ctr.v[SRV_RST_SENT], 1);
	assert_int_equal(srv.ctr.v[SRV_CUSTODY_NOT_FIN], 1);
}

/* On the wire (reply.c): the retransmission of data the process had received gets the
 * ACK, counted, no RST; its window is not zero, which would hold the peer's FIN back
 * (custody.h, SRV_CUSTODY_ACK_WND). */
static void test_custody_acks_a_retransmission_of_received_data_on_the_wire(void **state)
{
	(void)state;
	struct frame f;

	assert_int_equal(srv__custody_add_finwait2(&srv.custody, now_ms, 5001, peer4(), 80,
						   1000, 5000), 0);
	srv__learn_neighbour(&srv, PEER_IP, peer_mac);
	peer_segment(&f, WIRE_TCP_ACK | WIRE_TCP_PSH, 4990, 1000, 10);
	demux(&f, 1);
	assert_int_equal(nsent, 1);
	const uint8_t *t = tcp_of(sent[0].b);
	assert_int_equal(t[13], WIRE_TCP_ACK);
	assert_int_equal(rd32(t + 4), 1000);
	assert_int_equal(rd32(t + 8), 5000);
	assert_int_not_equal(rd16(t + 14), 0);   /* a window: the peer's FIN may follow */
	assert_int_equal(srv.ctr.v[SRV_CUSTODY_OLD_ACKED], 1);
	assert_int_equal(srv.ctr.v[SRV_RST_SENT], 0);
}

/* ---- handoff.c ------------------------------------------------------------------------ */

static struct ctl_msg handoff_msg(uint16_t lport, uint64_t nonce)
{
	struct ctl_msg m;
	ctl_init(&m, CTL_HANDOFF, 1);
	m.proto = IPPROTO_TCP;
	m.lport = lport;
	ctl_set_rip4(&m, PEER_IP);
	m.rport = 80;
	m.u.handoff.nonce = nonce;
	return m;
}


static void test_handoff_with_a_zero_nonce_is_refused(void **state)
{
	(void)state;
	struct srv_lease *a = new_lease(0);
	assert_int_equal(connected(a, 5001), 5001);
	struct ctl_msg m = handoff_msg(5001, 0);
	assert_int_equal(srv__handoff_begin(&srv, a, &m), -EINVAL);
	assert_int_equal(owner_of(5001, 80), a->id);
}

static void test_claim_with_the_nonce_moves_the_connection_to_the_taker(void **state)
{
	(void)state;
	struct srv_lease *a = new_lease(0), *b = new_lease(0);
	/* From an ephemeral port: the connection's reference is the giver's only one. */
	int p = srv__port_connect(srv.ports, SRV_OWNER(a), 0, PEER_IP, 80);
	assert_true(p >= SRV_EPHEMERAL_LO && p <= SRV_EPHEMERAL_HI);
	struct ctl_msg m = handoff_msg((uint16_t)p, 0x1234);
	assert_int_equal(srv__handoff_begin(&srv, a, &m), 0);
	assert_int_equal(owner_of((uint16_t)p, 80), SRV_IN_TRANSIT);
	assert_false(srv__port_held(srv.ports, SRV_OWNER(a), IPPROTO_TCP, (uint16_t)p));
	assert_int_equal(srv__handoff_claim(&srv, b, &m), 0);
	assert_int_equal(owner_of((uint16_t)p, 80), b->id);
	assert_true(srv__port_held(srv.ports, SRV_OWNER(b), IPPROTO_TCP, (uint16_t)p));
	assert_int_equal(srv.nhandoff, 0);
	assert_int_equal(srv.ctr.v[SRV_HANDOFFS], 1);
}

static void test_claim_with_a_wrong_nonce_is_refused_and_leaves_it_in_transit(void **state)
{
	(void)state;
	struct srv_lease *a = new_lease(0), *b = new_lease(0);
	assert_int_equal(connected(a, 5001), 5001);
	struct ctl_msg m = handoff_msg(5001, 0x1234), wrong = handoff_msg(5001, 0x1235),
			   other = handoff_msg(5002, 0x1234);
	assert_int_equal(srv__handoff_begin(&srv, a, &m), 0);
	assert_int_equal(srv__handoff_claim(&srv, b, &wrong), -EPERM);
	assert_int_equal(srv__handoff_claim(&srv, b, &other), -ENOENT);
	assert_int_equal(owner_of(5001, 80), SRV_IN_TRANSIT);
	assert_false(srv__port_held(srv.ports, SRV_OWNER(b), IPPROTO_TCP, 5001));
	assert_int_equal(srv.nhandoff, 1);
}

static void test_handoff_of_a_tuple_already_in_transit_is_busy(void **state)
{
	(void)state;
	struct srv_lease *a = new_lease(0);
	assert_int_equal(connected(a, 5001), 5001);
	struct ctl_msg m = handoff_msg(5001, 7);
	assert_int_equal(srv__handoff_begin(&srv, a, &m), 0);
	assert_int_equal(srv__handoff_begin(&srv, a, &m), -EBUSY);
}

static void test_port_of_a_connection_in_transit_stays_taken_after_the_giver_ends(void **state)
{
	(void)state;
	struct srv_lease *a = new_lease(0), *b = new_lease(0), *c = new_lease(0);
	assert_int_equal(connected(a, 5001), 5001);
	struct ctl_msg m = handoff_msg(5001, 99);
	assert_int_equal(srv__handoff_begin(&srv, a, &m), 0);
	srv__lease_end(&srv, a);  /* the giver exec'd or exited */
	assert_false(srv__custody_holds(&srv.custody, 5001, PEER_IP, 80));
	assert_int_equal(srv__port_bind(srv.ports, SRV_OWNER(c), IPPROTO_TCP, 5001, 0), -EADDRINUSE);
	assert_int_equal(srv__handoff_claim(&srv, b, &m), 0);
	assert_int_equal(owner_of(5001, 80), b->id);
}

static void test_unclaimed_handoff_expires_into_custody(void **state)
{
	(void)state;
	struct srv_lease *a = new_lease(0), *b = new_lease(0);
	assert_int_equal(connected(a, 5001), 5001);
	struct ctl_msg m = handoff_msg(5001, 5);
	assert_int_equal(srv__handoff_begin(&srv, a, &m), 0);
	now_ms += SRV_HANDOFF_MS - 1;
	srv__handoff_tick(&srv);
	assert_int_equal(srv.nhandoff, 1);
	now_ms += 1;
	srv__handoff_tick(&srv);
	assert_int_equal(srv.nhandoff, 0);
	assert_int_equal(srv.ctr.v[SRV_HANDOFFS_EXPIRED], 1);
	assert_true(srv__custody_holds(&srv.custody, 5001, PEER_IP, 80));
	assert_int_equal(srv__handoff_claim(&srv, b, &m), -ENOENT);
}

/* ---- demux.c -------------------------------------------------------------------------- */

static void test_demux_delivers_a_frame_to_the_process_owning_its_tuple(void **state)
{
	(void)state;
	struct srv_lease *a = new_lease(0);
	assert_int_equal(srv__lease_rings(&srv, a), 0);
	assert_int_equal(connected(a, 5001), 5001);
	struct frame f;
	struct fspec fs = { .sport = 80, .dport = 5001, .payload = 100 };
	build(&f, &fs);
	demux(&f, 1);
	assert_int_equal(a->rx_frames, 1);
	assert_int_equal(srv.ctr.v[SRV_FRAMES_DEMUXED], 1);
	assert_int_equal(nsent, 0);
	/* The process reads it from its receive ring, as it came. */
	struct nif_ring rx;
	size_t len;
	uint32_t off;
	uint64_t bad = 0;
	nif_ring_attach(&rx, a->rings, &a->layout, 0, a->rx_efd, false);
	const uint8_t *got = nif_ring_cons_peek(&rx, &len, &off, &bad);
	assert_non_null(got);
	assert_int_equal(len, f.len);
	assert_memory_equal(got, f.b, f.len);
}

static void test_demux_drops_a_frame_for_another_station_and_counts_it(void **state)
{
	(void)state;
	static const uint8_t other[6] = { 0x02, 0, 0, 0, 0, 9 };
	struct frame f[2];
	struct fspec to_mac = { .dst_mac = other }, to_ip = { .dst = IP4(198, 18, 0, 77) };
	build(&f[0], &to_mac);
	build(&f[1], &to_ip);
	demux(f, 2);
	assert_int_equal(srv.ctr.v[SRV_DROP_NOT_FOR_NODE], 2);
	assert_int_equal(nsent, 0);
}

static void test_demux_answers_a_segment_no_process_owns_with_a_reset(void **state)
{
	(void)state;
	struct frame f;
	struct fspec fs = { .sport = 40000, .dport = 5555, .tcp_flags = WIRE_TCP_ACK };
	build(&f, &fs);
	demux(&f, 1);
	assert_int_equal(srv.ctr.v[SRV_FRAMES_TO_SERVER], 1);
	assert_int_equal(nsent, 1);
	assert_int_equal(tcp_of(sent[0].b)[13], WIRE_TCP_RST);
}

static void test_demux_drops_frames_of_a_connection_in_transit_unanswered(void **state)
{
	(void)state;
	struct srv_lease *a = new_lease(0);
	assert_int_equal(connected(a, 5001), 5001);
	struct ctl_msg m = handoff_msg(5001, 3);
	assert_int_equal(srv__handoff_begin(&srv, a, &m), 0);
	struct frame f;
	struct fspec fs = { .sport = 80, .dport = 5001 };
	build(&f, &fs);
	demux(&f, 1);
	assert_int_equal(srv.ctr.v[SRV_DROP_IN_TRANSIT], 1);
	assert_int_equal(nsent, 0);
}

/* What a process puts in its transmit ring. */
static void process_sends(struct srv_lease *l, const struct frame *f)
{
	struct nif_ring tx;
	nif_ring_attach(&tx, l->rings, &l->layout, 1, l->tx_efd, true);
	uint8_t *slot = nif_ring_prod_slot(&tx, f->len);
	assert_non_null(slot);
	memcpy(slot, f->b, f->len);
	nif_ring_prod_commit(&tx, f->len, 0);
	nif_ring_prod_publish(&tx);
}

static void test_demux_sends_a_process_frame_only_from_its_own_endpoint(void **state)
{
	(void)state;
	struct srv_lease *a = new_lease(0);
	assert_int_equal(srv__lease_rings(&srv, a), 0);
	assert_int_equal(connected(a, 5001), 5001);
	struct frame ok, spoofed;
	struct fspec mine = { .src_mac = node_mac, .dst_mac = peer_mac, .src = NODE_IP,
			      .dst = PEER_IP, .sport = 5001, .dport = 80 };
	struct fspec not_mine = mine;
	not_mine.sport = 5002;
	build(&ok, &mine);
	build(&spoofed, &not_mine);
	process_sends(a, &ok);
	process_sends(a, &spoofed);
	srv__drain_tx(&srv, a);
	assert_int_equal(nsent, 1);
	assert_memory_equal(sent[0].b, ok.b, ok.len);
	assert_int_equal(a->tx_frames, 1);
	assert_int_equal(srv.ctr.v[SRV_DROP_TX_DENIED], 1);
}

/* ---- reply.c -------------------------------------------------------------------------- */

static void test_arp_request_for_the_node_gets_a_reply_with_its_mac(void **state)
{
	(void)state;
	struct frame f;
	build_arp(&f, 1, peer_mac, PEER_IP, NODE_IP);
	demux(&f, 1);
	assert_int_equal(nsent, 1);
	const uint8_t *r = sent[0].b, *a = r + 14;
	assert_memory_equal(r, peer_mac, 6);
	assert_int_equal(rd16(a + 6), 2);               /* reply */
	assert_memory_equal(a + 8, node_mac, 6);        /* sender: the node */
	assert_memory_equal(a + 14, &srv.ip, 4);
	assert_memory_equal(a + 18, peer_mac, 6);       /* target: who asked */
	assert_int_equal(srv.ctr.v[SRV_ARP_REPLIES], 1);
}

/* Which locks the TAP's transmit calls ran under (faketap's hooks; the demux loop runs in
 * this thread, so a trylock of a mutex it holds fails with EBUSY). */
static unsigned flushes, flushes_with_state_lock, txs, txs_without_tx_lock;

static bool held(pthread_mutex_t *m)
{
	if (pthread_mutex_trylock(m) != 0)
		return true;
	pthread_mutex_unlock(m);
	return false;
}

static void on_flush(void)
{
	flushes++;
	flushes_with_state_lock += held(&srv.lock);
}

static void on_tx(void)
{
	txs++;
	txs_without_tx_lock += !held(&srv.tx_lock);
}

/* The TAP's write is a system call: the demux thread makes it after releasing the state
 * lock, so that the control thread never waits for it; frames are queued under the TAP's
 * transmit lock. */
static void test_demux_flushes_the_tap_without_the_state_lock(void **state)
{
	(void)state;
	struct frame f[2];
	build_arp(&f[0], 1, peer_mac, PEER_IP, NODE_IP);
	struct fspec fs = { .sport = 40000, .dport = 5555, .tcp_flags = WIRE_TCP_ACK };
	build(&f[1], &fs);
	flushes = flushes_with_state_lock = txs = txs_without_tx_lock = 0;
	faketap_on_flush = on_flush;
	faketap_on_tx = on_tx;
	demux(f, 2);
	faketap_on_flush = NULL;
	faketap_on_tx = NULL;
	assert_int_equal(nsent, 2);           /* the ARP reply and the reset */
	assert_int_equal(txs, 2);
	assert_int_equal(txs_without_tx_lock, 0);
	assert_true(flushes >= 1);
	assert_int_equal(flushes_with_state_lock, 0);
}

/* A frame longer than 2048 bytes leaves from the process's ring in a system call of its
 * own (nif_tap_tx_send_split): the demux thread checks it under the state lock and sends it
 * after releasing it; the process's next frame leaves after it, at the next round. */
static unsigned long_txs, long_txs_under_state_lock;

static void on_long_tx(void)
{
	if (faketap_nsent < FAKETAP_MAX_SENT && faketap_nsent < 1) {
		long_txs++;
		long_txs_under_state_lock += held(&srv.lock);
	}
}

static void test_demux_sends_a_long_process_frame_without_the_state_lock_and_in_order(void **state)
{
	(void)state;
	srv.mtu = 4000;   /* a frame longer than the split threshold fits the MTU */
	struct srv_lease *a = new_lease(0);
	assert_int_equal(srv__lease_rings(&srv, a), 0);
	assert_int_equal(connected(a, 5001), 5001);
	struct fspec mine = { .src_mac = node_mac, .dst_mac = peer_mac, .src = NODE_IP,
			      .dst = PEER_IP, .sport = 5001, .dport = 80, .payload = 3000 };
	struct frame hdr, small;
	build(&hdr, &mine);       /* headers only: the payload is zeros */
	static uint8_t big[4096];
	size_t big_len = hdr.len;
	memset(big, 0, sizeof(big));
	memcpy(big, hdr.b, 14 + 20 + 20);
	mine.payload = 10;
	build(&small, &mine);
	struct nif_ring tx;
	nif_ring_attach(&tx, a->rings, &a->layout, 1, a->tx_efd, true);
	uint8_t *slot = nif_ring_prod_slot(&tx, big_len);
	assert_non_null(slot);
	memcpy(slot, big, big_len);
	nif_ring_prod_commit(&tx, big_len, 0);
	nif_ring_prod_publish(&tx);
	process_sends(a, &small);
	long_txs = long_txs_under_state_lock = 0;
	faketap_on_tx = on_long_tx;
	srv.leases.changed = true;   /* the demux thread watches it and drains its ring */
	demux(NULL, 0);
	assert_int_equal(nsent, 1);            /* the long one; the short one waits behind it */
	assert_int_equal(sent[0].len, 256);    /* its head (the rest left from the ring) */
	assert_false(a->tx_held);
	demux(NULL, 0);
	faketap_on_tx = NULL;
	assert_int_equal(nsent, 2);
	assert_memory_equal(sent[1].b, small.b, small.len);
	assert_int_equal(long_txs, 1);
	assert_int_equal(long_txs_under_state_lock, 0);
	assert_int_equal(a->tx_frames, 2);
	assert_int_equal(a->tx_bytes, big_len + small.len);
}

static void test_arp_request_for_another_address_gets_no_reply(void **state)
{
	(void)state;
	struct frame f;
	build_arp(&f, 1, peer_mac, PEER_IP, IP4(198, 18, 0, 77));
	demux(&f, 1);
	assert_int_equal(nsent, 0);
	assert_int_equal(srv.ctr.v[SRV_ARP_REPLIES], 0);
}

static void test_echo_request_gets_its_data_back_in_a_reply_with_a_valid_checksum(void **state)
{
	(void)state;
	struct frame f;
	struct fspec fs = { .proto = WIRE_IPPROTO_ICMP, .icmp_type = 8, .payload = 56 };
	build(&f, &fs);
	for (size_t i = 0; i < 56; i++)
		f.b[14 + 20 + 8 + i] = (uint8_t)i;
	demux(&f, 1);
	assert_int_equal(nsent, 1);
	const uint8_t *ip = sent[0].b + 14, *icmp = ip + 20;
	assert_int_equal(sent[0].len, f.len);
	assert_memory_equal(ip + 16, &(uint32_t){ PEER_IP }, 4);
	assert_int_equal(icmp[0], 0);
	assert_memory_equal(icmp + 8, f.b + 14 + 20 + 8, 56);
	assert_int_equal(ip_csum(icmp, 64), 0);
	assert_int_equal(ip_csum(ip, 20), 0);
}

static void test_reset_for_a_segment_with_ack_takes_its_sequence_from_that_ack(void **state)
{
	(void)state;
	struct frame f;
	struct fspec fs = { .sport = 40000, .dport = 5555, .tcp_flags = WIRE_TCP_ACK };
	build(&f, &fs);
	demux(&f, 1);
	assert_int_equal(nsent, 1);
	const uint8_t *t = tcp_of(sent[0].b);
	assert_int_equal(rd16(t), 5555);
	assert_int_equal(rd16(t + 2), 40000);
	assert_int_equal(rd32(t + 4), 0x05060708);  /* SEQ = SEG.ACK */
	assert_int_equal(t[13], WIRE_TCP_RST);
}

static void test_reset_for_a_syn_acknowledges_the_syn_and_its_data(void **state)
{
	(void)state;
	struct frame f;
	struct fspec fs = { .sport = 40000, .dport = 5555, .tcp_flags = WIRE_TCP_SYN, .payload = 10 };
	build(&f, &fs);
	demux(&f, 1);
	assert_int_equal(nsent, 1);
	const uint8_t *t = tcp_of(sent[0].b);
	assert_int_equal(rd32(t + 4), 0);
	assert_int_equal(rd32(t + 8), 0x01020304 + 10 + 1);
	assert_int_equal(t[13], WIRE_TCP_RST | WIRE_TCP_ACK);
}

static void test_no_reset_answers_a_reset(void **state)
{
	(void)state;
	struct frame f;
	struct fspec fs = { .sport = 40000, .dport = 5555, .tcp_flags = WIRE_TCP_RST };
	build(&f, &fs);
	demux(&f, 1);
	assert_int_equal(nsent, 0);
	assert_int_equal(srv.ctr.v[SRV_RST_SENT], 0);
}

static void test_resets_beyond_the_rate_limit_are_dropped_and_counted(void **state)
{
	(void)state;
	struct frame f;
	struct fspec fs = { .sport = 40000, .dport = 5555 };
	struct flt_pkt p;
	build(&f, &fs);
	assert_int_equal(flt_parse(f.b, f.len, &p), 0);
	srv.rst_tokens = 3;
	for (int i = 0; i < 5; i++)
		srv__reply_rst(&srv, f.b, &p);
	assert_int_equal(srv.ctr.v[SRV_RST_SENT], 3);
	assert_int_equal(srv.ctr.v[SRV_DROP_RST_RATE], 2);
	now_ms += 1000;  /* a second later the bucket is full again */
	srv__reply_rst(&srv, f.b, &p);
	assert_int_equal(srv.ctr.v[SRV_RST_SENT], 4);
}

static void test_udp_to_a_closed_port_gets_port_unreachable_quoting_the_datagram(void **state)
{
	(void)state;
	struct frame f;
	struct fspec fs = { .proto = WIRE_IPPROTO_UDP, .sport = 40000, .dport = 53, .payload = 20 };
	build(&f, &fs);
	demux(&f, 1);
	assert_int_equal(nsent, 1);
	const uint8_t *icmp = sent[0].b + 14 + 20;
	assert_int_equal(sent[0].b[14 + 9], WIRE_IPPROTO_ICMP);
	assert_int_equal(icmp[0], 3);  /* destination unreachable */
	assert_int_equal(icmp[1], 3);  /* port unreachable */
	/* RFC 1122 §3.2.2: the IP header and at least 8 octets of the datagram. */
	assert_memory_equal(icmp + 8, f.b + 14, 28);
	assert_int_equal(srv.ctr.v[SRV_ICMP_UNREACH_SENT], 1);
}

/* ---- SYN shedding on the relay path (demux.c, netif/synshed.c) ------------------------ */

/* n pure SYNs to the closed port 5555 from as many spoofed sources, 198.19.0.first.. */
static void syns(struct frame *f, unsigned n, unsigned first)
{
	for (unsigned i = 0; i < n; i++) {
		struct fspec fs = { .src = IP4(198, 19, (first + i) >> 8, (first + i) & 0xff),
				    .sport = (uint16_t)(1024 + first + i), .dport = 5555,
				    .tcp_flags = WIRE_TCP_SYN };
		build(&f[i], &fs);
	}
}

static void test_demux_sheds_pure_syns_behind_a_flood_and_takes_a_shed_syns_retransmission(void **state)
{
	(void)state;
	static struct frame f[64];
	struct srv_lease *a = new_lease(0);
	assert_int_equal(srv__lease_rings(&srv, a), 0);
	assert_int_equal(connected(a, 5001), 5001);
	/* A round of 32 SYNs: all taken (ulsd answers them with resets); a round that long
	 * and all SYNs says the demux thread is behind a flood. */
	syns(f, 32, 0);
	demux(f, 32);
	assert_int_equal(srv.ctr.v[SRV_DROP_SYN_SHED], 0);
	assert_int_equal(srv.ctr.v[SRV_FRAMES_TO_SERVER], 32);
	/* The next round: its 31 SYNs are shed before the lookup (no reset), counted; the
	 * data segment of a's connection, from the peer, is delivered. */
	syns(f, 31, 100);
	struct fspec data = { .sport = 80, .dport = 5001, .payload = 100 };
	build(&f[31], &data);
	demux(f, 32);
	assert_int_equal(srv.ctr.v[SRV_DROP_SYN_SHED], 31);
	assert_int_equal(srv.ctr.v[SRV_FRAMES_TO_SERVER], 32);
	assert_int_equal(a->rx_frames, 1);
	/* 1 s later, the flood on: the first shed SYN again (its retransmission, RFC 6298
	 * §5) is taken; so is a SYN from the peer, which sent a segment with ACK (a known
	 * peer); 30 new SYNs are shed. */
	now_ms += 1000;
	syns(f, 1, 100);
	syns(f + 1, 30, 200);
	struct fspec peer_syn = { .sport = 40001, .dport = 5555, .tcp_flags = WIRE_TCP_SYN };
	build(&f[31], &peer_syn);
	demux(f, 32);
	assert_int_equal(srv.ctr.v[SRV_SYN_SHED_READMITTED], 1);
	assert_int_equal(srv.ctr.v[SRV_SYN_SHED_KNOWN_PEER], 1);
	assert_int_equal(srv.ctr.v[SRV_DROP_SYN_SHED], 61);
	assert_int_equal(srv.ctr.v[SRV_FRAMES_TO_SERVER], 34);
	/* 500 ms after the last round behind, a short round: its SYN is still shed (the
	 * pressure is the previous rounds' word), and it ends the pressure: the next round's
	 * SYN is taken. */
	now_ms += 500;
	syns(f, 1, 300);
	demux(f, 1);
	assert_int_equal(srv.ctr.v[SRV_DROP_SYN_SHED], 62);
	syns(f, 1, 301);
	demux(f, 1);
	assert_int_equal(srv.ctr.v[SRV_DROP_SYN_SHED], 62);
	assert_int_equal(srv.ctr.v[SRV_FRAMES_TO_SERVER], 35);
}

static void test_demux_with_syn_shedding_off_takes_every_syn(void **state)
{
	(void)state;
	static struct frame f[64];
	srv.shed.off = true;   /* ULS_SYN_SHED=0 (ulsd.c) */
	for (unsigned r = 0; r < 3; r++) {
		syns(f, 32, 32 * r);
		demux(f, 32);
	}
	assert_int_equal(srv.ctr.v[SRV_DROP_SYN_SHED], 0);
	assert_int_equal(srv.ctr.v[SRV_FRAMES_TO_SERVER], 96);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(test_lease_ids_start_at_one_and_a_freed_id_is_not_given_again_at_once),
		T(test_lease_table_full_refuses_a_new_lease_with_emfile),
		T(test_lease_table_finds_only_live_leases_by_id),
		T(test_every_counter_has_a_name_of_its_own),
		T(test_lease_end_puts_its_tcp_connections_in_custody_and_frees_its_ports),
		T(test_time_wait_lookup_finds_only_the_tuples_left_in_time_wait),
		T(test_time_wait_lookup_agrees_with_a_linear_search_of_a_full_table),
		T(test_lease_rings_give_a_relay_lease_its_ring_pair_and_eventfds),
		T(test_handoff_with_a_zero_nonce_is_refused),
		T(test_claim_with_the_nonce_moves_the_connection_to_the_taker),
		T(test_claim_with_a_wrong_nonce_is_refused_and_leaves_it_in_transit),
		T(test_handoff_of_a_tuple_already_in_transit_is_busy),
		T(test_port_of_a_connection_in_transit_stays_taken_after_the_giver_ends),
		T(test_unclaimed_handoff_expires_into_custody),
		T(test_custody_acks_the_fin_and_ignores_a_bare_ack_of_a_connection_left_in_fin_wait_2),
		T(test_custody_acks_a_retransmitted_fin_in_time_wait_only),
		T(test_custody_acks_a_retransmission_of_data_the_process_had_received),
		T(test_custody_acks_a_retransmission_of_received_data_on_the_wire),
		T(test_custody_forgets_a_fin_wait_2_connection_whose_peer_never_closes),
		T(test_lease_end_holds_a_fin_wait_2_connection_acks_its_peers_fin_and_ignores_its_bare_ack),
		T(test_demux_delivers_a_frame_to_the_process_owning_its_tuple),
		T(test_demux_drops_a_frame_for_another_station_and_counts_it),
		T(test_demux_answers_a_segment_no_process_owns_with_a_reset),
		T(test_demux_drops_frames_of_a_connection_in_transit_unanswered),
		T(test_demux_sends_a_process_frame_only_from_its_own_endpoint),
		T(test_demux_sends_a_long_process_frame_without_the_state_lock_and_in_order),
		T(test_arp_request_for_the_node_gets_a_reply_with_its_mac),
		T(test_arp_request_for_another_address_gets_no_reply),
		T(test_demux_flushes_the_tap_without_the_state_lock),
		T(test_echo_request_gets_its_data_back_in_a_reply_with_a_valid_checksum),
		T(test_reset_for_a_segment_with_ack_takes_its_sequence_from_that_ack),
		T(test_reset_for_a_syn_acknowledges_the_syn_and_its_data),
		T(test_no_reset_answers_a_reset),
		T(test_resets_beyond_the_rate_limit_are_dropped_and_counted),
		T(test_udp_to_a_closed_port_gets_port_unreachable_quoting_the_datagram),
		T(test_demux_sheds_pure_syns_behind_a_flood_and_takes_a_shed_syns_retransmission),
		T(test_demux_with_syn_shedding_off_takes_every_syn),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
