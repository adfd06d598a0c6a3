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

#include "netif/ctl/ctl.h"
#include "netif/dev.h"
#include "netif/ring.h"
#include "netif/tap.h"
#include "server/internal.h"
#include "faketap.h"
#include "filter_frames.h"

/* ---- What ulsd.c gives the other files ------------------------------------------------ */

static uint64_t now_ms = 1000000;
uint64_t srv__now_ms(void) { return __atomic_load_n(&now_ms, __ATOMIC_RELAXED); }
void srv__log(int level, const char *fmt, ...) { (void)level; (void)fmt; }

/* ---- The TAP (tests/unit/faketap.c) -------------------------------------------------- */

static struct srv srv;
#define sent faketap_sent
#define nsent faketap_nsent

static void stop_demux(void)
{
	srv.stop = true;
}

/* One round of the demux thread's loop over the frames given. */
static void demux(const struct frame *f, unsigned n)
{
	const uint8_t *frames[8];
	size_t lens[8];
	for (unsigned i = 0; i < n && i < 8; i++) {
		frames[i] = f[i].b;
		lens[i] = f[i].len;
	}
	faketap_inject(frames, lens, n);
	faketap_rx_done = stop_demux;
	srv.stop = false;
	srv__demux_thread(&srv);
	srv.stop = false;
}

/* ---- Fixtures ------------------------------------------------------------------------- */

static int setup(void **state)
{
	(void)state;
	memset(&srv, 0, sizeof(srv));
	pthread_mutex_init(&srv.lock, NULL);
	pthread_mutex_init(&srv.tx_lock, NULL);
	pthread_cond_init(&srv.tx_released, NULL);
	srv.flt = flt_table_new();
	srv.tap = faketap();
	srv.ip = NODE_IP;
	srv.prefix_len = 24;
	srv.mtu = 1500;
	srv.datapath = SRV_DP_AUTO;
	memcpy(srv.mac, node_mac, 6);
	srv.rst_tokens = 2000;
	srv.icmp_tokens = 100;
	srv.rst_tokens_ms = srv.icmp_tokens_ms = now_ms;
	nsent = 0;
	srv.ports = srv.flt ? srv__ports_new(srv.flt, &srv.custody, (const uint64_t[2]){ 1, 2 }) : NULL;
	return srv.ports && srv__reass_init(&srv) == 0 ? 0 : -1;
}

/* Frees every lease through the demux thread's own path (sync_leases). */
static int teardown(void **state)
{
	(void)state;
	/* Handoffs left unclaimed expire: the ports they hold are released. */
	now_ms += SRV_HANDOFF_MS;
	srv__handoff_tick(&srv);
	for (uint32_t i = 1; i < SRV_MAX_LEASES; i++)
		if (srv.leases.by_id[i] && !srv.leases.by_id[i]->dead)
			srv__lease_end(&srv, srv.leases.by_id[i]);
	srv.leases.changed = true;
	demux(NULL, 0);
	for (uint32_t i = 1; i < SRV_MAX_LEASES; i++)
		assert_null(srv.leases.by_id[i]);
	flt_table_free(srv.flt);
	srv__custody_free(&srv.custody);
	srv__ports_free(srv.ports);
	free(srv.handoff);
	free(srv.reass);
	return 0;
}

static struct srv_lease *new_lease(uid_t uid)
{
	struct srv_lease *l;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	close(sv[1]);
	assert_int_equal(srv__lease_new(&srv, sv[0], 4242, uid, &l), 0);
	return l;
}

/* A TCP connection of lease l from lport to the peer's port 80 (BIND, then CONNECT). */
static int connected(struct srv_lease *l, uint16_t lport)
{
	int rc = srv__port_bind(srv.ports, SRV_OWNER(l), IPPROTO_TCP, lport, 0);
	return rc < 0 ? rc : srv__port_connect(srv.ports, SRV_OWNER(l), lport, PEER_IP, 80);
}

static const uint8_t *tcp_of(const uint8_t *f) { return f + 14 + (f[14] & 0x0f) * 4; }
static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3]; }
static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

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

/* ---- handoff.c ------------------------------------------------------------------------ */

static struct ctl_msg handoff_msg(uint16_t lport, uint64_t nonce)
{
	struct ctl_msg m;
	ctl_init(&m, CTL_HANDOFF, 1);
	m.proto = IPPROTO_TCP;
	m.lport = lport;
	m.rip = PEER_IP;
	m.rport = 80;
	m.u.handoff.nonce = nonce;
	return m;
}

static flt_owner_t owner_of(uint16_t lport, uint16_t rport)
{
	struct fspec fs = { .sport = rport, .dport = lport };
	struct frame f;
	struct flt_pkt p;
	build(&f, &fs);
	assert_int_equal(flt_parse(f.b, f.len, &p), 0);
	return flt_lookup_rx(srv.flt, &p);
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

/* ---- ctl.c: over a control socket, as processes reach it ------------------------------ */

static pthread_t ctl_thread;
static int ctl_listen = -1;
static struct sockaddr_un ctl_addr;

static void *ctl_main(void *arg)
{
	(void)arg;
	srv__ctl_run(&srv, ctl_listen);
	return NULL;
}

static int ctl_setup(void **state)
{
	if (setup(state) < 0)
		return -1;
	ctl_listen = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	memset(&ctl_addr, 0, sizeof(ctl_addr));
	ctl_addr.sun_family = AF_UNIX;
	/* Abstract: nothing left on disk. */
	snprintf(ctl_addr.sun_path + 1, sizeof(ctl_addr.sun_path) - 1, "uls-test-server-%d",
		 (int)getpid());
	if (bind(ctl_listen, (struct sockaddr *)&ctl_addr, sizeof(ctl_addr)) < 0 ||
	    listen(ctl_listen, 16) < 0)
		return -1;
	return pthread_create(&ctl_thread, NULL, ctl_main, NULL) == 0 ? 0 : -1;
}

static int ctl_connect(void)
{
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&ctl_addr, sizeof(ctl_addr)), 0);
	return fd;
}

static int ctl_teardown(void **state)
{
	pthread_mutex_lock(&srv.lock);
	srv.stop = true;
	pthread_mutex_unlock(&srv.lock);
	close(ctl_connect());  /* wakes its wait */
	pthread_join(ctl_thread, NULL);
	close(ctl_listen);
	return teardown(state);
}

/* One request, its reply (descriptors that come with it are closed, and counted). */
static struct ctl_msg ask(int fd, const struct ctl_msg *m, int *nfds)
{
	struct ctl_msg r;
	char cbuf[CMSG_SPACE(sizeof(int) * 3)];
	struct iovec iov = { &r, sizeof(r) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	struct pollfd p = { .fd = fd, .events = POLLIN };

	assert_int_equal(send(fd, m, sizeof(*m), 0), sizeof(*m));
	assert_int_equal(poll(&p, 1, 5000), 1);
	assert_int_equal(recvmsg(fd, &mh, MSG_CMSG_CLOEXEC), sizeof(r));
	int n = 0;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (int i = 0; i < k; i++) {
			int got;
			memcpy(&got, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			close(got);
		}
		n += k;
	}
	if (nfds)
		*nfds = n;
	return r;
}

static uint64_t counter(enum srv_counter c)
{
	pthread_mutex_lock(&srv.lock);
	uint64_t v = srv.ctr.v[c];
	pthread_mutex_unlock(&srv.lock);
	return v;
}

static struct ctl_msg msg(enum ctl_type type, uint8_t proto, uint16_t lport)
{
	struct ctl_msg m;
	ctl_init(&m, type, 7);
	m.proto = proto;
	m.lport = lport;
	return m;
}

static int hello(void)
{
	int fd = ctl_connect(), nfds = 0;
	struct ctl_msg m = msg(CTL_HELLO, 0, 0);
	struct ctl_msg r = ask(fd, &m, &nfds);
	assert_int_equal(r.status, 0);
	assert_int_equal(nfds, 3);
	return fd;
}

static void test_ctl_answers_hello_with_the_node_and_the_relay_rings(void **state)
{
	(void)state;
	int fd = ctl_connect(), nfds = 0;
	struct ctl_msg m = msg(CTL_HELLO, 0, 0);
	struct ctl_msg r = ask(fd, &m, &nfds);
	assert_int_equal(r.type, CTL_HELLO);
	assert_int_equal(r.seq, 7);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.u.hello.addr, NODE_IP);
	assert_int_equal(r.u.hello.mtu, 1500);
	assert_int_equal(r.u.hello.prefix_len, 24);
	assert_memory_equal(r.u.hello.mac, node_mac, 6);
	assert_int_equal(r.u.hello.datapath, CTL_DP_RELAY);
	assert_int_equal(nfds, 3);  /* ring memory, two eventfds */
	assert_int_equal(counter(SRV_LEASES_RELAY), 1);
	close(fd);
}

static void test_ctl_refuses_any_request_before_hello(void **state)
{
	(void)state;
	int fd = ctl_connect();
	struct ctl_msg m = msg(CTL_BIND, IPPROTO_TCP, 5001);
	assert_int_equal(ask(fd, &m, NULL).status, -EPROTO);
	assert_int_equal(counter(SRV_CTL_OUT_OF_ORDER), 1);
	assert_int_equal(counter(SRV_LEASES_OPENED), 0);
	close(fd);
}

static void test_ctl_refuses_a_second_hello(void **state)
{
	(void)state;
	int fd = hello();
	struct ctl_msg m = msg(CTL_HELLO, 0, 0);
	assert_int_equal(ask(fd, &m, NULL).status, -EPROTO);
	assert_int_equal(counter(SRV_LEASES_OPENED), 1);
	close(fd);
}

static void test_ctl_refuses_a_malformed_message_and_counts_why(void **state)
{
	(void)state;
	int fd = hello();
	struct ctl_msg m = msg(CTL_BIND, IPPROTO_TCP, 5001);
	m.magic ^= 1;
	struct ctl_msg r = ask(fd, &m, NULL);
	assert_int_equal(r.type, CTL_END);
	assert_int_equal(r.status, -EBADMSG);
	assert_int_equal(counter(SRV_CTL_REFUSED), 1);
	pthread_mutex_lock(&srv.lock);
	assert_int_equal(srv.ctr.ctl_errors[CTL_BAD_MAGIC - CTL_ERROR_BASE], 1);
	pthread_mutex_unlock(&srv.lock);
	close(fd);
}

/* ulsd's replies go out through these (they take the place of libc's in this program):
 * each counts the replies without descriptors sent while the state lock was held. */
static unsigned replies_sent, plain_replies_under_lock;

static bool lock_held_elsewhere_or_here(void)
{
	if (pthread_mutex_trylock(&srv.lock) != 0)
		return true;
	pthread_mutex_unlock(&srv.lock);
	return false;
}

ssize_t sendmsg(int fd, const struct msghdr *mh, int flags)
{
	__atomic_add_fetch(&replies_sent, 1, __ATOMIC_RELAXED);
	if (!mh->msg_controllen && lock_held_elsewhere_or_here())
		__atomic_add_fetch(&plain_replies_under_lock, 1, __ATOMIC_RELAXED);
	return syscall(SYS_sendmsg, fd, mh, flags);
}

int sendmmsg(int fd, struct mmsghdr *mm, unsigned n, int flags)
{
	__atomic_add_fetch(&replies_sent, 1, __ATOMIC_RELAXED);
	if (lock_held_elsewhere_or_here())
		__atomic_add_fetch(&plain_replies_under_lock, 1, __ATOMIC_RELAXED);
	return (int)syscall(SYS_sendmmsg, fd, mm, n, flags);
}

/* A reply is a system call on a socket a process may have let fill up: the control thread
 * makes it after releasing the state lock, so the demux thread never waits for it. Only
 * an answer passing descriptors (HELLO's rings) goes out under the lock. */
static void test_ctl_replies_after_releasing_the_state_lock(void **state)
{
	(void)state;
	int a = hello();
	struct ctl_msg m = msg(CTL_BIND, IPPROTO_TCP, 5001);
	struct ctl_msg bad = msg(CTL_LISTEN, IPPROTO_TCP, 5002);
	__atomic_store_n(&replies_sent, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&plain_replies_under_lock, 0, __ATOMIC_RELAXED);
	assert_int_equal(ask(a, &m, NULL).status, 0);
	assert_int_equal(ask(a, &bad, NULL).status, -EPERM);
	assert_int_equal(__atomic_load_n(&replies_sent, __ATOMIC_RELAXED), 2);
	assert_int_equal(__atomic_load_n(&plain_replies_under_lock, __ATOMIC_RELAXED), 0);
	close(a);
}

static void test_ctl_refuses_a_bind_of_a_port_another_process_holds(void **state)
{
	(void)state;
	int a = hello(), b = hello();
	struct ctl_msg m = msg(CTL_BIND, IPPROTO_TCP, 5001);
	struct ctl_msg r = ask(a, &m, NULL);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.lport, 5001);
	assert_int_equal(ask(b, &m, NULL).status, -EADDRINUSE);
	close(a);
	close(b);
}

static void test_ctl_refuses_a_listen_on_a_port_the_process_does_not_hold(void **state)
{
	(void)state;
	int a = hello(), b = hello();
	struct ctl_msg bind = msg(CTL_BIND, IPPROTO_TCP, 5001);
	struct ctl_msg listen = msg(CTL_LISTEN, IPPROTO_TCP, 5001);
	assert_int_equal(ask(a, &bind, NULL).status, 0);
	assert_int_equal(ask(b, &listen, NULL).status, -EPERM);
	assert_int_equal(counter(SRV_CTL_DENIED), 1);
	assert_int_equal(ask(a, &listen, NULL).status, 0);
	close(a);
	close(b);
}

static void test_ctl_answers_a_release_of_a_connection_the_process_does_not_hold(void **state)
{
	(void)state;
	int a = hello();
	struct ctl_msg rel = msg(CTL_RELEASE, IPPROTO_TCP, 5001);
	rel.rip = PEER_IP;
	rel.rport = 80;
	assert_int_equal(ask(a, &rel, NULL).status, -ENOENT);
	assert_int_equal(counter(SRV_CTL_DENIED), 1);
	close(a);
}

static void test_ctl_frees_a_process_ports_when_its_control_connection_closes(void **state)
{
	(void)state;
	int a = hello(), b = hello();
	struct ctl_msg m = msg(CTL_BIND, IPPROTO_TCP, 5001);
	assert_int_equal(ask(a, &m, NULL).status, 0);
	close(a);  /* the process died */
	for (int i = 0; i < 500 && counter(SRV_LEASES_CLOSED) == 0; i++)
		nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
	assert_int_equal(counter(SRV_LEASES_CLOSED), 1);
	assert_int_equal(ask(b, &m, NULL).status, 0);
	close(b);
}

static void test_ctl_connect_installs_the_tuple_for_the_process(void **state)
{
	(void)state;
	int a = hello();
	struct ctl_msg m = msg(CTL_CONNECT, IPPROTO_TCP, 0);
	m.rip = PEER_IP;
	m.rport = 80;
	struct ctl_msg r = ask(a, &m, NULL);
	assert_int_equal(r.status, 0);
	assert_true(r.lport >= SRV_EPHEMERAL_LO && r.lport <= SRV_EPHEMERAL_HI);
	pthread_mutex_lock(&srv.lock);
	assert_int_equal(owner_of(r.lport, 80), 1);
	pthread_mutex_unlock(&srv.lock);
	close(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
#define C(f) cmocka_unit_test_setup_teardown(f, ctl_setup, ctl_teardown)
		T(test_lease_ids_start_at_one_and_a_freed_id_is_not_given_again_at_once),
		T(test_lease_table_full_refuses_a_new_lease_with_emfile),
		T(test_lease_table_finds_only_live_leases_by_id),
		T(test_every_counter_has_a_name_of_its_own),
		T(test_lease_end_puts_its_tcp_connections_in_custody_and_frees_its_ports),
		T(test_lease_rings_give_a_relay_lease_its_ring_pair_and_eventfds),
		T(test_handoff_with_a_zero_nonce_is_refused),
		T(test_claim_with_the_nonce_moves_the_connection_to_the_taker),
		T(test_claim_with_a_wrong_nonce_is_refused_and_leaves_it_in_transit),
		T(test_handoff_of_a_tuple_already_in_transit_is_busy),
		T(test_port_of_a_connection_in_transit_stays_taken_after_the_giver_ends),
		T(test_unclaimed_handoff_expires_into_custody),
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
		C(test_ctl_answers_hello_with_the_node_and_the_relay_rings),
		C(test_ctl_refuses_any_request_before_hello),
		C(test_ctl_refuses_a_second_hello),
		C(test_ctl_refuses_a_malformed_message_and_counts_why),
		C(test_ctl_replies_after_releasing_the_state_lock),
		C(test_ctl_refuses_a_bind_of_a_port_another_process_holds),
		C(test_ctl_refuses_a_listen_on_a_port_the_process_does_not_hold),
		C(test_ctl_answers_a_release_of_a_connection_the_process_does_not_hold),
		C(test_ctl_frees_a_process_ports_when_its_control_connection_closes),
		C(test_ctl_connect_installs_the_tuple_for_the_process),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
