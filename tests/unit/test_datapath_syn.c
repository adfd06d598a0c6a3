/* SYN shedding on the direct data path (synguard, filter/datapath_syn.bpf.h), run in the
 * kernel with BPF_PROG_TEST_RUN against maps filled from a filter table (as server/bpf.c
 * fills them): a queue takes its budget of pure SYNs from unknown peers and the rest are
 * dropped and counted; a shed SYN's retransmission, and SYNs from a peer whose handshake
 * ACK steering saw, are taken; shedding stops when a quarter of the shed SYNs come back;
 * only pure SYNs to a listener of a direct-path process are ever shed. The budget here is
 * small (cfg.syn_budget 4 per window) so that a test sends few frames.
 *
 * Needs root (CAP_BPF) and a kernel that runs the programs; skipped otherwise.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <linux/bpf.h>

#include "netif/wire/wire.h"
#include "tests/unit/dp_fixture.h"

#define TCP WIRE_IPPROTO_TCP
#define BUDGET 4
#define TCX_PASS 0
#define TCX_DROP 2
#define SYN WIRE_TCP_SYN
#define ACK WIRE_TCP_ACK


#define NODE_IP 0x0a000001u     /* host order */

/* What server/bpf.c's on_change6 does (IPv6 listeners only here; IPv4: dp_mirror4). */
static void mirror6(void *arg, enum flt_kind kind, uint8_t proto, uint16_t lport,
		    const struct flt_addr *rip, uint16_t rport, flt_owner_t owner)
{
	struct dp_fx *f = arg;

	(void)rip; (void)rport; (void)owner;
	if (kind == FLT_RULE_LISTEN)
		dp_mirror_group(f, f->fd_listen6, proto, lport, FLT_FAM_V6);
}

static int setup(void **state)
{
	struct dp_fx *f;

	if (dp_fx_open(&f, NODE_IP, BUDGET) < 0)
		return -1;
	*state = f;
	if (!f)
		return 0;   /* each test skips */
	flt_table_set_observer(f->t, dp_mirror4, f);
	flt_table_set_observer6(f->t, mirror6, f);
	assert_int_equal(flt_add_listen(f->t, TCP, 80, 3, false), 0);
	return 0;
}

struct frame {
	uint8_t b[128];
	size_t len;
};

static void tcp_hdr(uint8_t *l4, uint16_t sport, uint16_t dport, uint8_t flags, uint32_t seq)
{
	memset(l4, 0, 20);
	wire_wr16(l4, sport);
	wire_wr16(l4 + 2, dport);
	wire_wr32(l4 + 4, seq);
	l4[12] = 5 << 4;
	l4[13] = flags;
}

/* An IPv4 TCP segment from src (host order) to the node. */
static void seg4(struct frame *fr, uint32_t src, uint16_t sport, uint16_t dport, uint8_t flags,
		 uint32_t seq)
{
	memset(fr, 0, sizeof(*fr));
	wire_eth_write(fr->b, node_mac, peer_mac, WIRE_ETHERTYPE_IPV4);
	wire_ipv4_write(fr->b + WIRE_ETH_HLEN, TCP, __builtin_bswap32(src),
			__builtin_bswap32(NODE_IP), 40, 1, 64);
	tcp_hdr(fr->b + WIRE_ETH_HLEN + 20, sport, dport, flags, seq);
	fr->len = WIRE_ETH_HLEN + 40;
}

static void seg6(struct frame *fr, const uint8_t src[16], uint16_t sport, uint16_t dport,
		 uint8_t flags, uint32_t seq)
{
	memset(fr, 0, sizeof(*fr));
	wire_eth_write(fr->b, node_mac, peer_mac, WIRE_ETHERTYPE_IPV6);
	wire_ipv6_write(fr->b + WIRE_ETH_HLEN, TCP, src, node6, 20, 64);
	tcp_hdr(fr->b + WIRE_ETH_HLEN + 40, sport, dport, flags, seq);
	fr->len = WIRE_ETH_HLEN + 60;
}

/* synguard's verdict on a frame (a tc program's test run takes the whole frame). */
static int guard(struct dp_fx *f, const struct frame *fr)
{
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = fr->b, .data_size_in = (uint32_t)fr->len,
		    .repeat = 1);

	assert_int_equal(bpf_prog_test_run_opts(bpf_program__fd(f->skel->progs.synguard), &o), 0);
	assert_true(o.retval == TCX_PASS || o.retval == TCX_DROP);
	return (int)o.retval;
}

/* The steering program's queue (dp_fixture.h's dp_steer). */
static uint32_t steer(struct dp_fx *f, const struct frame *fr)
{
	return dp_steer(f, fr->b, fr->len);
}

/* Queue q's SYN figures, summed over the CPUs (dp_qstat is per CPU, as server/bpf.c's
 * qstat_read sums it). */
static struct flt_dp_qstat qstat(struct dp_fx *f, uint32_t q)
{
	int n = libbpf_num_possible_cpus();
	struct flt_dp_qstat st = { 0 }, *v;

	assert_true(n > 0);
	v = calloc((size_t)n, sizeof(*v));
	assert_non_null(v);
	assert_int_equal(bpf_map_lookup_elem(f->fd_qstat, &q, v), 0);
	for (int i = 0; i < n; i++) {
		st.syn_shed += v[i].syn_shed;
		st.syn_readmitted += v[i].syn_readmitted;
		st.syn_known_peer += v[i].syn_known_peer;
		st.syn_suspended += v[i].syn_suspended;
	}
	free(v);
	return st;
}

/* A flood's SYN number i: its own source and port. */
static void flood_syn(struct frame *fr, unsigned i)
{
	seg4(fr, 0xc6130000u + i, (uint16_t)(1024 + i % 60000), 80, SYN, 0x1000u * i + 7);
}

/* SYN number i of a flood whose IPv4 headers carry 4 octets of options (NOPs, RFC 791
 * §3.1): the TCP header starts 4 octets later, and the octet where a header without
 * options has TCP's flags is the acknowledgment number's second, set to ACK's bit. */
static void flood_syn_with_options(struct frame *fr, unsigned i)
{
	uint8_t *ip = fr->b + WIRE_ETH_HLEN;

	memset(fr, 0, sizeof(*fr));
	wire_eth_write(fr->b, node_mac, peer_mac, WIRE_ETHERTYPE_IPV4);
	wire_ipv4_write(ip, TCP, __builtin_bswap32(0xc6140000u + i), __builtin_bswap32(NODE_IP),
			44, 1, 64);
	ip[WIRE_IPV4_OFF_VIHL] = WIRE_IPV4_VERSION << 4 | 6;
	memset(ip + 20, 1, 4);
	wire_wr16(ip + WIRE_IPV4_OFF_CHECKSUM, 0);
	wire_wr16(ip + WIRE_IPV4_OFF_CHECKSUM, wire_sum_finish(wire_sum(0, ip, 24)));
	tcp_hdr(ip + 24, (uint16_t)(1024 + i % 60000), 80, SYN, 0x1000u * i + 7);
	ip[24 + 9] = ACK;
	fr->len = WIRE_ETH_HLEN + 44;
}

/* BUDGET + 20 of a flood's SYNs (make builds number i) in one window: the budget's pass,
 * the other 20 are dropped and counted for the listener's queue. */
static void flood_past_the_budget(struct dp_fx *f, void (*make)(struct frame *, unsigned))
{
	struct frame fr;

	for (unsigned i = 0; i < BUDGET + 20; i++) {
		make(&fr, i);
		assert_int_equal(guard(f, &fr), i < BUDGET ? TCX_PASS : TCX_DROP);
	}
	assert_int_equal(qstat(f, 3).syn_shed, 20);
}

/* A flood whose SYNs carry IP options is shed as one without: the one-read pass for
 * frames that are not pure SYNs is only for headers without options. */
static void a_syn_flood_with_ip_options_is_shed_too(void **state)
{
	struct dp_fx *f = *state;

	NEED_BPF(f);
	flood_past_the_budget(f, flood_syn_with_options);
}

/* The budget's SYNs pass, the rest of the window's are dropped and counted for the queue. */
static void syns_over_the_budget_are_shed_and_counted(void **state)
{
	struct dp_fx *f = *state;
	struct frame fr;

	NEED_BPF(f);
	flood_past_the_budget(f, flood_syn);
	assert_int_equal(qstat(f, 3).syn_readmitted, 0);
	/* The next window takes the budget again. */
	usleep(FLT_DP_SYN_WINDOW_NS / 1000 + 20000);
	flood_syn(&fr, 100);
	assert_int_equal(guard(f, &fr), TCX_PASS);
}

/* RFC 9293 §3.8.1: a retransmitted SYN carries the same ISN; a shed SYN's retransmission is
 * taken (counted), a new SYN of the same tuple with another ISN is not. */
static void shed_syns_retransmission_is_taken(void **state)
{
	struct dp_fx *f = *state;
	struct frame fr;

	NEED_BPF(f);
	for (unsigned i = 0; i < BUDGET + 3; i++) {
		flood_syn(&fr, i);
		assert_int_equal(guard(f, &fr), i < BUDGET ? TCX_PASS : TCX_DROP);
	}
	flood_syn(&fr, BUDGET + 1);
	assert_int_equal(guard(f, &fr), TCX_PASS);
	assert_int_equal(guard(f, &fr), TCX_PASS);   /* and the one after it */
	assert_int_equal(qstat(f, 3).syn_readmitted, 2);
	flood_syn(&fr, BUDGET + 1);
	wire_wr32(fr.b + WIRE_ETH_HLEN + 24, 12345);
	assert_int_equal(guard(f, &fr), TCX_DROP);
}

/* A budget of one SYN a window, taken by SYN 0; SYN 1, in x, shed and so remembered. */
static void shed_one(struct dp_fx *f, struct frame *fr, struct frame *x)
{
	f->cfg.syn_budget = 1;
	dp_set_cfg(f);
	flood_syn(fr, 0);
	assert_int_equal(guard(f, fr), TCX_PASS);
	flood_syn(x, 1);
	assert_int_equal(guard(f, x), TCX_DROP);
}

/* The memory of shed SYNs outlives a generation (3 s: the client's retransmissions after
 * 1 s and 3 s more) and forgets after two. */
static void shed_syn_remembered_for_a_generation_then_forgotten(void **state)
{
	struct dp_fx *f = *state;
	struct frame fr, x;

	NEED_BPF(f);
	shed_one(f, &fr, &x);        /* remembered */
	usleep(3100000);
	flood_syn(&fr, 2);
	assert_int_equal(guard(f, &fr), TCX_PASS);       /* the window's budget */
	flood_syn(&fr, 3);
	assert_int_equal(guard(f, &fr), TCX_DROP);       /* the generations turn over */
	assert_int_equal(guard(f, &x), TCX_PASS);        /* x still remembered */
	usleep(3100000);
	flood_syn(&fr, 4);
	assert_int_equal(guard(f, &fr), TCX_PASS);
	flood_syn(&fr, 5);
	assert_int_equal(guard(f, &fr), TCX_DROP);       /* x's generation cleared */
	assert_int_equal(guard(f, &x), TCX_DROP);
}

/* struct syn_gen of filter/datapath_syn.bpf.h (dp_syngen's one value), as user space sees
 * it: the spin lock is one 32-bit word. */
struct syn_gen_view {
	uint32_t lock, cur;
	uint64_t start_ns;
	uint32_t used[2];
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);   /* bpf_ktime_get_ns's clock */
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Both CPUs run the program without a lock on the queue's window: a CPU that read the
 * clock just before another one started a new window (win_start_ns later than its own
 * reading) is in that window, not one 2^64 ns old. It must not start the window again and
 * take a second budget. */
static void a_window_started_after_the_clock_was_read_is_not_started_again(void **state)
{
	struct dp_fx *f = *state;
	struct frame fr;
	uint32_t q = 3;
	int fd = bpf_map__fd(f->skel->maps.dp_synq);

	NEED_BPF(f);
	struct flt_dp_synq sq = { .win_start_ns = mono_ns() + 1000000000u, .win_syns = BUDGET,
				  .judge_start_ns = mono_ns() + 1000000000u };
	assert_int_equal(bpf_map_update_elem(fd, &q, &sq, BPF_ANY), 0);
	for (unsigned i = 0; i < 3; i++) {
		flood_syn(&fr, i);
		assert_int_equal(guard(f, &fr), TCX_DROP);
	}
	assert_int_equal(qstat(f, 3).syn_shed, 3);
}

/* Likewise the memory's turnover: a CPU that read the clock before another CPU turned the
 * generations over (start_ns later than its reading) must not turn them over once more,
 * which would clear the generation that holds the SYNs shed in the last 3 s (each client
 * would lose a second RTO). */
static void a_turnover_after_the_clock_was_read_is_not_repeated(void **state)
{
	struct dp_fx *f = *state;
	struct frame fr, x;
	uint32_t zero = 0;
	struct syn_gen_view g;
	int fd = bpf_map__fd(f->skel->maps.dp_syngen);

	NEED_BPF(f);
	shed_one(f, &fr, &x);        /* x in generation cur */
	assert_int_equal(bpf_map_lookup_elem(fd, &zero, &g), 0);
	/* Another CPU has just turned it over, at a clock reading later than ours: x's
	 * generation is the older one now, the newer one has a SYN. */
	g.cur ^= 1;
	g.used[g.cur & 1] = 1;
	g.start_ns = mono_ns() + 1000000000u;
	const uint32_t cur = g.cur & 1;
	assert_int_equal(bpf_map_update_elem(fd, &zero, &g, BPF_ANY), 0);
	flood_syn(&fr, 2);
	assert_int_equal(guard(f, &fr), TCX_DROP);
	assert_int_equal(bpf_map_lookup_elem(fd, &zero, &g), 0);
	assert_int_equal(g.cur & 1, cur);                /* not turned over again */
	assert_int_equal(guard(f, &x), TCX_PASS);        /* x still remembered */
}

/* A peer whose handshake-completing ACK steering saw is a known peer: its SYNs pass over the
 * budget (counted); its neighbour's do not. An ACK of a tuple a process holds does not make
 * its source known (steering notes handshakes to listeners only). */
static void known_peers_syns_pass_over_the_budget(void **state)
{
	struct dp_fx *f = *state;
	struct frame fr;
	const uint32_t peer = 0x0a000009u, held = 0x0a00000bu;

	NEED_BPF(f);
	seg4(&fr, peer, 5000, 80, ACK, 1);
	assert_int_equal(steer(f, &fr), 3);
	assert_int_equal(flt_add_connected(f->t, TCP, 80, __builtin_bswap32(held), 6000, 3), 0);
	seg4(&fr, held, 6000, 80, ACK, 1);
	assert_int_equal(steer(f, &fr), 3);
	for (unsigned i = 0; i < BUDGET; i++) {
		flood_syn(&fr, i);
		assert_int_equal(guard(f, &fr), TCX_PASS);
	}
	for (unsigned i = 0; i < 10; i++) {
		seg4(&fr, peer, (uint16_t)(5001 + i), 80, SYN, 77 + i);
		assert_int_equal(guard(f, &fr), TCX_PASS);
	}
	assert_int_equal(qstat(f, 3).syn_known_peer, 10);
	seg4(&fr, peer + 1, 5001, 80, SYN, 77);
	assert_int_equal(guard(f, &fr), TCX_DROP);
	seg4(&fr, held, 6001, 80, SYN, 99);
	assert_int_equal(guard(f, &fr), TCX_DROP);
}

/* When a quarter of the shed SYNs (256 or more) come back they are a burst of real clients:
 * shedding stops for the queue (counted once), other queues are not affected. */
static void shedding_suspended_when_a_quarter_come_back(void **state)
{
	struct dp_fx *f = *state;
	struct frame fr;
	bool shed[400];
	unsigned nshed = 0, dropped = 0, back = 0;

	NEED_BPF(f);
	f->cfg.syn_budget = 1;
	dp_set_cfg(f);
	for (unsigned i = 0; i < 400; i++) {
		flood_syn(&fr, i);
		shed[i] = guard(f, &fr) == TCX_DROP;
		nshed += shed[i];
	}
	assert_true(nshed >= 256);
	for (unsigned i = 0; i < 3; i++) {     /* a window takes 1: at most one more passes */
		flood_syn(&fr, 5000 + i);
		dropped += guard(f, &fr) == TCX_DROP;
	}
	assert_true(dropped >= 2);
	for (unsigned i = 0; i < 400 && back * 4 < nshed + dropped; i++) {
		if (!shed[i])
			continue;
		flood_syn(&fr, i);
		assert_int_equal(guard(f, &fr), TCX_PASS);
		back++;
	}
	assert_int_equal(qstat(f, 3).syn_suspended, 1);
	for (unsigned i = 0; i < 10; i++) {
		flood_syn(&fr, 7000 + i);
		assert_int_equal(guard(f, &fr), TCX_PASS);
	}
	/* Another queue still sheds. */
	assert_int_equal(flt_add_listen(f->t, TCP, 81, 4, false), 0);
	dropped = 0;
	for (unsigned i = 0; i < 3; i++) {
		seg4(&fr, 0xc6140000u + i, 1024, 81, SYN, i);
		dropped += guard(f, &fr) == TCX_DROP;
	}
	assert_true(dropped >= 1);
}

/* Only pure SYNs to a listener of a process on the direct path: not a SYN,ACK or other
 * segment, nor a SYN of a tuple a process holds, nor one to ulsd (no listener, or a
 * listener on the relay path), nor a fragment; and nothing with a budget of 0
 * (ULS_SYN_SHED=0). */
static void only_pure_syns_to_a_direct_listener_are_shed(void **state)
{
	struct dp_fx *f = *state;
	struct frame fr;

	NEED_BPF(f);
	assert_int_equal(flt_add_listen(f->t, TCP, 90, 40, false), 0);   /* owner 40: relay */
	/* The listener's own connection: its queue is over the budget too. */
	assert_int_equal(flt_add_connected(f->t, TCP, 80, __builtin_bswap32(0x0a000007u), 4000, 3), 0);
	for (unsigned i = 0; i < BUDGET; i++) {
		flood_syn(&fr, i);
		assert_int_equal(guard(f, &fr), TCX_PASS);
	}
	flood_syn(&fr, 50);
	assert_int_equal(guard(f, &fr), TCX_DROP);
	seg4(&fr, 0xc6130100u, 1000, 80, SYN | ACK, 1);
	assert_int_equal(guard(f, &fr), TCX_PASS);
	seg4(&fr, 0xc6130101u, 1000, 80, SYN | WIRE_TCP_RST, 1);
	assert_int_equal(guard(f, &fr), TCX_PASS);
	seg4(&fr, 0xc6130102u, 1000, 80, ACK | WIRE_TCP_PSH, 1);
	assert_int_equal(guard(f, &fr), TCX_PASS);
	seg4(&fr, 0x0a000007u, 4000, 80, SYN, 1);
	assert_int_equal(guard(f, &fr), TCX_PASS);
	for (unsigned i = 0; i < 2 * BUDGET; i++) {
		seg4(&fr, 0xc6130200u + i, 1000, 90, SYN, 1);
		assert_int_equal(guard(f, &fr), TCX_PASS);
		seg4(&fr, 0xc6130200u + i, 1000, 91, SYN, 1);
		assert_int_equal(guard(f, &fr), TCX_PASS);
	}
	flood_syn(&fr, 51);
	wire_wr16(fr.b + WIRE_ETH_HLEN + 6, WIRE_IPV4_MF);
	assert_int_equal(guard(f, &fr), TCX_PASS);
	f->cfg.syn_budget = 0;
	dp_set_cfg(f);
	flood_syn(&fr, 52);
	assert_int_equal(guard(f, &fr), TCX_PASS);
	assert_int_equal(qstat(f, 3).syn_shed, 1);
	assert_int_equal(qstat(f, 0).syn_shed, 0);
}

/* IPv6 (RFC 8200) likewise: shed over the budget, the retransmission taken, a known peer's
 * SYN taken. */
static void ipv6_syns_shed_and_retransmission_taken(void **state)
{
	struct dp_fx *f = *state;
	struct frame fr;
	uint8_t src[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 9, [15] = 1 };

	NEED_BPF(f);
	assert_int_equal(flt_add_listen_fam(f->t, TCP, 443, FLT_FAM_V6, 6, false), 0);
	for (unsigned i = 0; i < BUDGET + 5; i++) {
		src[14] = (uint8_t)i;
		seg6(&fr, src, (uint16_t)(2000 + i), 443, SYN, i);
		assert_int_equal(guard(f, &fr), i < BUDGET ? TCX_PASS : TCX_DROP);
	}
	src[14] = BUDGET + 2;
	seg6(&fr, src, (uint16_t)(2000 + BUDGET + 2), 443, SYN, BUDGET + 2);
	assert_int_equal(guard(f, &fr), TCX_PASS);
	assert_int_equal(qstat(f, 6).syn_shed, 5);
	assert_int_equal(qstat(f, 6).syn_readmitted, 1);
	src[14] = 200;
	seg6(&fr, src, 3000, 443, ACK, 1);
	assert_int_equal(steer(f, &fr), 6);
	seg6(&fr, src, 3001, 443, SYN, 5);
	assert_int_equal(guard(f, &fr), TCX_PASS);
	assert_int_equal(qstat(f, 6).syn_known_peer, 1);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, dp_fx_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(syns_over_the_budget_are_shed_and_counted),
		T(shed_syns_retransmission_is_taken),
		T(shed_syn_remembered_for_a_generation_then_forgotten),
		T(known_peers_syns_pass_over_the_budget),
		T(shedding_suspended_when_a_quarter_come_back),
		T(only_pure_syns_to_a_direct_listener_are_shed),
		T(a_syn_flood_with_ip_options_is_shed_too),
		T(ipv6_syns_shed_and_retransmission_taken),
		T(a_window_started_after_the_clock_was_read_is_not_started_again),
		T(a_turnover_after_the_clock_was_read_is_not_repeated),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
