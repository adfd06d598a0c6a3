/* The fixture of the unit tests that run the direct data path's BPF programs
 * (filter/datapath.bpf.c) in the kernel with BPF_PROG_TEST_RUN (test_datapath4,
 * test_datapath6, test_datapath_syn): the programs loaded from ulsd's skeleton, a filter table whose
 * changes each test mirrors into the maps as server/bpf.c does, the node's configuration,
 * and owner n holding queue n for n = 1..31. Static functions: each test program that
 * includes it has its own copy. Needs root (CAP_BPF); where the programs do not load, the
 * fixture is NULL and each test skips (NEED_BPF). */
#ifndef ULS_TESTS_UNIT_DP_FIXTURE_H
#define ULS_TESTS_UNIT_DP_FIXTURE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "filter/datapath.h"
#include "filter/filter.h"
#include "netif/wire/proto.h"
#include "server/datapath.skel.h"

static const uint8_t node_mac[6] = { 0x02, 0, 0, 0, 0, 0x01 };
static const uint8_t peer_mac[6] = { 0x02, 0, 0, 0, 0, 0x02 };
static const uint8_t node6[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, [15] = 1 };
static const uint8_t ll6[16] = { 0xfe, 0x80, [11] = 0xff, [12] = 0xfe, [15] = 1 };

struct dp_fx {
	struct uls_dp *skel;
	struct flt_table *t;
	int fd_cfg, fd_conn, fd_conn6, fd_listen, fd_listen6, fd_lease_q, fd_q_owner, fd_qstat;
	struct flt_dp_cfg cfg;
};

/* Owner n has queue n (lease ids and queues are small numbers alike here). */
static void dp_give_queue(struct dp_fx *f, uint32_t owner)
{
	uint32_t q = owner;

	assert_int_equal(bpf_map_update_elem(f->fd_lease_q, &owner, &q, BPF_ANY), 0);
	assert_int_equal(bpf_map_update_elem(f->fd_q_owner, &q, &owner, BPF_ANY), 0);
}

static __attribute__((unused)) void dp_set_cfg(struct dp_fx *f)
{
	uint32_t zero = 0;

	assert_int_equal(bpf_map_update_elem(f->fd_cfg, &zero, &f->cfg, BPF_ANY), 0);
}

/* What server/bpf.c does with a change of listening group (proto, lport) of family fam:
 * its group into the listen map fd, or out of it once it has no members. */
static __attribute__((unused)) void dp_mirror_group(struct dp_fx *f, int fd, uint8_t proto,
						    uint16_t lport, unsigned fam)
{
	struct flt_dp_listen_key k = { .lport = lport, .proto = proto };
	struct flt_dp_group *g = calloc(1, sizeof(*g));

	assert_non_null(g);
	if (flt_group_get_fam(f->t, proto, lport, fam, g->all, &g->n_all, g->pick, &g->n_pick) < 0)
		bpf_map_delete_elem(fd, &k);
	else
		assert_int_equal(bpf_map_update_elem(fd, &k, g, BPF_ANY), 0);
	free(g);
}

/* What server/bpf.c's on_change does with a change of an IPv4 rule (an observer for
 * flt_table_set_observer, arg the fixture): a connected rule into dp_conn or out of it,
 * a listening group into dp_listen. */
static __attribute__((unused)) void dp_mirror4(void *arg, enum flt_kind kind, uint8_t proto,
					       uint16_t lport, uint32_t rip, uint16_t rport,
					       flt_owner_t owner)
{
	struct dp_fx *f = arg;

	if (kind == FLT_RULE_CONNECTED) {
		struct flt_dp_conn_key k = { .rip = rip, .lport = lport, .rport = rport, .proto = proto };
		if (owner == FLT_NO_OWNER)
			bpf_map_delete_elem(f->fd_conn, &k);
		else
			assert_int_equal(bpf_map_update_elem(f->fd_conn, &k, &owner, BPF_ANY), 0);
		return;
	}
	dp_mirror_group(f, f->fd_listen, proto, lport, FLT_FAM_V4);
}

/* The steering program's queue for the frame b (len octets, at most 256). A socket
 * filter's test run starts the packet after the Ethernet header it takes off
 * (eth_type_trans), where tun runs the steering program on the whole frame: the frame goes
 * in behind 14 octets of its own Ethernet header. */
static __attribute__((unused)) uint32_t dp_steer(struct dp_fx *f, const uint8_t *b, size_t len)
{
	uint8_t in[256 + WIRE_ETH_HLEN];

	assert_true(len >= WIRE_ETH_HLEN && len <= 256);
	memcpy(in, b, WIRE_ETH_HLEN);
	memcpy(in + WIRE_ETH_HLEN, b, len);
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = in,
		    .data_size_in = (uint32_t)(len + WIRE_ETH_HLEN), .repeat = 1);
	assert_int_equal(bpf_prog_test_run_opts(bpf_program__fd(f->skel->progs.steer), &o), 0);
	return o.retval;
}

/* The queue of the owner flt_lookup_rx names for the frame b (0: ulsd): what steering
 * must agree with. The frame must parse. */
static __attribute__((unused)) uint32_t dp_expect(struct dp_fx *f, const uint8_t *b, size_t len)
{
	struct flt_pkt p;

	assert_int_equal(flt_parse(b, len, &p), 0);
	flt_owner_t o = flt_lookup_rx(f->t, &p);
	return o == FLT_NO_OWNER ? 0 : o;
}

/* The programs loaded and the maps set for a node at node_ip (host order) with the given
 * SYN budget: 0 and *out the fixture, 0 and *out NULL where the programs do not load
 * (the tests skip), -1 on any other failure. */
static int dp_fx_open(struct dp_fx **out, uint32_t node_ip, uint32_t syn_budget)
{
	struct dp_fx *f = calloc(1, sizeof(*f));
	uint64_t k0, k1;

	*out = NULL;
	if (!f)
		return -1;
	libbpf_set_print(NULL);
	f->skel = uls_dp__open_and_load();
	if (!f->skel) {
		free(f);
		return 0;
	}
	f->t = flt_table_new();
	if (!f->t || flt_table_set_seed(f->t, 7) < 0) {
		flt_table_free(f->t);
		uls_dp__destroy(f->skel);
		free(f);
		return -1;
	}
	f->fd_cfg = bpf_map__fd(f->skel->maps.dp_cfg);
	f->fd_conn = bpf_map__fd(f->skel->maps.dp_conn);
	f->fd_conn6 = bpf_map__fd(f->skel->maps.dp_conn6);
	f->fd_listen = bpf_map__fd(f->skel->maps.dp_listen);
	f->fd_listen6 = bpf_map__fd(f->skel->maps.dp_listen6);
	f->fd_lease_q = bpf_map__fd(f->skel->maps.dp_lease_q);
	f->fd_q_owner = bpf_map__fd(f->skel->maps.dp_q_owner);
	f->fd_qstat = bpf_map__fd(f->skel->maps.dp_qstat);
	flt_table_key(f->t, &k0, &k1);
	f->cfg = (struct flt_dp_cfg){ .node_ip = __builtin_bswap32(node_ip), .ifindex = 1,
				      .mtu = 1500, .k0 = k0, .k1 = k1, .has_ip6 = 1,
				      .syn_budget = syn_budget };
	memcpy(f->cfg.node_mac, node_mac, 6);
	memcpy(f->cfg.node_ip6, node6, 16);
	memcpy(f->cfg.node_ll6, ll6, 16);
	dp_set_cfg(f);
	for (uint32_t o = 1; o < 32; o++)
		dp_give_queue(f, o);
	*out = f;
	return 0;
}

static int dp_fx_teardown(void **state)
{
	struct dp_fx *f = *state;

	if (!f)
		return 0;
	flt_table_free(f->t);
	uls_dp__destroy(f->skel);
	free(f);
	return 0;
}

#define NEED_BPF(f)                                                                     \
	do {                                                                            \
		if (!(f)) {                                                             \
			print_message("skipped: the BPF programs do not load here\n"); \
			skip();                                                         \
		}                                                                       \
	} while (0)

#endif
