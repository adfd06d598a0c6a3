/* ns per run of steer and synguard on a data frame of an established IPv4 connection
 * (BPF_PROG_TEST_RUN, repeat N): a measurement tool, not a test. Built by hand from a
 * build directory: gcc -O2 -I.. -I. -o bpfcost PATH/bpfcost.c -lbpf (the skeleton in
 * server/datapath.skel.h carries the programs; rebuild after each change). Root only. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "filter/datapath.h"
#include "server/datapath.skel.h"

static unsigned char fr[14 + 14 + 20 + 20 + 1448];

int main(int argc, char **argv)
{
	unsigned rep = argc > 1 ? (unsigned)atoi(argv[1]) : 1000000;
	struct uls_dp *sk = uls_dp__open_and_load();
	if (!sk) { perror("load"); return 1; }
	uint32_t zero = 0, one = 1;
	struct flt_dp_cfg c = { .node_ip = htonl(0x0a000001), .ifindex = 1, .mtu = 1500,
				.node_mac = { 2, 0, 0, 0, 0, 1 }, .syn_budget = argc > 2 ? 0 : 200 };
	bpf_map_update_elem(bpf_map__fd(sk->maps.dp_cfg), &zero, &c, 0);
	struct flt_dp_conn_key k = { .rip = htonl(0x0a000002), .lport = 5001, .rport = 40000, .proto = 6 };
	bpf_map_update_elem(bpf_map__fd(sk->maps.dp_conn), &k, &one, 0);
	bpf_map_update_elem(bpf_map__fd(sk->maps.dp_lease_q), &one, &one, 0);
	bpf_map_update_elem(bpf_map__fd(sk->maps.dp_q_owner), &one, &one, 0);
	/* eth twice (the socket filter's test run takes one off), IPv4, TCP ACK + data */
	unsigned char *e = fr + 14;
	memcpy(e, c.node_mac, 6);
	unsigned char pm[6] = { 2, 0, 0, 0, 0, 2 };
	memcpy(e + 6, pm, 6);
	e[12] = 0x08; e[13] = 0;
	unsigned char *ip = e + 14;
	ip[0] = 0x45; ip[2] = (20 + 20 + 1448) >> 8; ip[3] = (20 + 20 + 1448) & 0xff; ip[8] = 64; ip[9] = 6;
	uint32_t s = htonl(0x0a000002), d = htonl(0x0a000001);
	memcpy(ip + 12, &s, 4); memcpy(ip + 16, &d, 4);
	unsigned char *t = ip + 20;
	t[0] = 40000 >> 8; t[1] = 40000 & 0xff; t[2] = 5001 >> 8; t[3] = 5001 & 0xff;
	t[12] = 5 << 4; t[13] = 0x10;
	memcpy(fr, e, 14);
	struct { const char *n; int fd; const void *in; unsigned len; } p[] = {
		{ "steer", bpf_program__fd(sk->progs.steer), fr, sizeof(fr) },
		{ "synguard", bpf_program__fd(sk->progs.synguard), e, sizeof(fr) - 14 },
	};
	for (int r = 0; r < 3; r++)
		for (unsigned i = 0; i < 2; i++) {
			LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = p[i].in, .data_size_in = p[i].len,
				    .repeat = rep);
			if (bpf_prog_test_run_opts(p[i].fd, &o) < 0) { perror(p[i].n); return 1; }
			printf("%-9s ret %u  %u ns/run\n", p[i].n, o.retval, o.duration);
		}
	uls_dp__destroy(sk);
	return 0;
}
