/* ulsping: TCP round-trip latency, ping-pong style (seed 000: 3,000 round trips of one
 * message, the first 50 dropped, bandwidth from half the round trip); and, without a
 * subcommand, the driver that measures it on a testbed it builds itself.
 *
 *   ulsping server --port P [--family 4|6] [--breakdown FILE] [NODE OPTIONS]
 *   ulsping client --to IP:PORT|[IPV6]:PORT --size B [--count N] [--skip K] [--json FILE]
 *                  [--breakdown FILE] [NODE OPTIONS]
 *   ulsping [--mode MODE[,MODE...]] [--sizes B[,B...]] [--family 4|6] [--json FILE]
 *           [--breakdown]
 *
 * --family 6: the server listens on [::] (dual-stack); the driver brings its testbed up
 * with IPv6 and measures every mode over it (ulsd's nodes carry IPv6 since control
 * protocol 3); a ulstack worker with an IPv6 --to on a node without an IPv6 address
 * refuses it (bench__family_check).
 *
 * NODE OPTIONS as in ulsbench: --ctl PATH [--datapath direct|relay] joins ulsd's node (on
 * the direct data path unless relay is asked for), --tap/--ip makes the process a
 * node of its own; without them the kernel's TCP is used.
 *
 * The workers are apps/pingwork.c, the driver apps/pingdrive.c, the statistics
 * apps/pingstats.c; this file is the command line.
 *
 * Wire format: the client sends the message size as 4 bytes, big-endian; then each round
 * trip is one message of that size from the client, echoed whole by the server. The
 * client fills message i with the pattern (apps/pattern.h) at stream offset i * size and
 * checks every echoed byte, so a benchmark that returns wrong data fails instead of
 * reporting a latency.
 *
 * Driver modes: perproc (server and client each a process joined to a ulsd node: server on
 * node 2, client on node 1, both on the direct data path), relay (the same on ulsd's relay:
 * --datapath relay) and kernel (kernel sockets, server in ${TB_NAME}-k1, client in
 * ${TB_NAME}-k2). Every process it starts is stopped by its PID, also on failure, and the
 * testbed is always taken down. TB_NAME is "ulsping" unless set in the environment.
 *
 * --breakdown (builds configured with --enable-breakdown; relay mode only: the stamps
 * travel in the relay's ring slots, and the direct path has no ulsd stage): the one-way
 * latency split by layer (seed 003's method, apps/breakdown.h). The workers note, per
 * message, when the application started sending and when it had received the message whole
 * (uls_breakdown_now(), the clock of the stack's stamps), and save that with their stack's
 * segment trace (uls_breakdown.h) into the file the driver names; the driver matches the
 * client's file with the server's.
 */
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "apps/netops.h"
#include "apps/ping.h"
#include "netif/opt/opt.h"
#include "uls_breakdown.h"

#define DEFAULT_SIZES   "1,64,1024,16384,65536"
#define DEFAULT_MODES   "perproc,relay,kernel"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ulsping [--mode MODE[,MODE...]] [--sizes B[,B...]] [--family 4|6]\n"
		"               [--json FILE] [--breakdown]\n"
		"               MODE: perproc (direct data path), relay, kernel (default all);\n"
		"               sizes default " DEFAULT_SIZES "; --family 6: kernel mode only\n"
		"       ulsping server --port P [--family 4|6] [--breakdown FILE] [NODE OPTIONS]\n"
		"       ulsping client --to IP:PORT|[IPV6]:PORT --size B [--count N (3000)] [--skip K (50)]\n"
		"                      [--json FILE] [--breakdown FILE] [NODE OPTIONS]\n"
		"--breakdown: one-way latency by layer (relay mode; a build configured with\n"
		"             --enable-breakdown); workers: save their stamps to FILE\n"
		"NODE OPTIONS: --tap IFNAME --ip A.B.C.D/NN [--ip6 ADDR/NN] [--mac MAC] [--gw A.B.C.D]\n"
		"              [--gw6 ADDR] [--mtu N]\n"
		"              (a node of its own), or --ctl PATH [--datapath direct|relay]\n"
		"              (join ulsd's node, on its direct data path by default);\n"
		"              without them the Linux kernel's TCP is used\n");
}

static int parse_family(const char *arg, int *family)
{
	if (strcmp(arg, "4") && strcmp(arg, "6"))
		return opt__bad("ulsping", "family", arg, "4 or 6");
	*family = arg[0] - '0';
	return 0;
}

static int driver_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "mode", required_argument, NULL, 'm' }, { "sizes", required_argument, NULL, 's' },
		{ "json", required_argument, NULL, 'j' }, { "breakdown", no_argument, NULL, 'b' },
		{ "family", required_argument, NULL, 'F' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	static const char *const known[PING_MODES_MAX] = { "perproc", "relay", "kernel" };
	int family = 4;
	const char *modes[PING_MODES_MAX], *json = NULL;
	const char *mode_arg = DEFAULT_MODES, *size_arg = DEFAULT_SIZES;
	unsigned long long sizes[PING_SIZES_MAX];
	unsigned mode_idx[PING_MODES_MAX];
	bool breakdown = false;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'm': mode_arg = optarg; break;
		case 's': size_arg = optarg; break;
		case 'j': json = optarg; break;
		case 'b': breakdown = true; break;
		case 'F':
			if (parse_family(optarg, &family) < 0)
				return 2;
			break;
		default: return opt__help_or_bad(c, usage);
		}
	}
	if (opt__no_operands("ulsping", argc, argv, optind) < 0) {
		usage(stderr);
		return 2;
	}
	if (breakdown && !uls_breakdown_enabled()) {
		fprintf(stderr, "ulsping: --breakdown needs a build configured with "
			"--enable-breakdown: this one records no per-layer timestamps\n");
		return 2;
	}
	int nmodes = opt__word_list("ulsping", "mode", mode_arg, known, PING_MODES_MAX, mode_idx);
	int nsizes = nmodes < 0 ? -1 : opt__num_list("ulsping", "sizes", size_arg, 1,
						      PING_SIZE_MAX, sizes, PING_SIZES_MAX);
	if (nmodes < 0 || nsizes < 0)
		return 2;
	for (int i = 0; i < nmodes; i++)
		modes[i] = known[mode_idx[i]];
	bool has_relay = false;
	for (int m = 0; m < nmodes; m++)
		has_relay |= strcmp(modes[m], "relay") == 0;
	if (breakdown && !has_relay) {
		fprintf(stderr, "ulsping: --breakdown is for the relay mode (the stamps travel in "
			"the relay's rings; the kernel's layers carry none)\n");
		return 2;
	}
	return bench__ping_drive(modes, (size_t)nmodes, sizes, (size_t)nsizes, json, breakdown,
				 family);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		BENCH_NODE_OPTIONS,
		{ "port", required_argument, NULL, 'p' }, { "to", required_argument, NULL, 't' },
		{ "size", required_argument, NULL, 'z' }, { "count", required_argument, NULL, 'c' },
		{ "skip", required_argument, NULL, 'k' }, { "json", required_argument, NULL, 'j' },
		{ "breakdown", required_argument, NULL, 'b' },
		{ "family", required_argument, NULL, 'F' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	struct node_opts no = { 0 };
	union bench_addr at = { .in = { .sin_family = AF_INET } };
	uint16_t port = 0;
	int family = 0;
	unsigned long long size = 0, count = PING_DEFAULT_COUNT,
			   skip = PING_DEFAULT_SKIP, v;
	bool have_port = false, have_to = false;
	const char *json = NULL, *bd_path = NULL;
	int c, idx;

	if (argc < 2 || (strcmp(argv[1], "server") && strcmp(argv[1], "client")))
		return driver_main(argc, argv);
	bool server = !strcmp(argv[1], "server");
	optind = 2;
	while ((c = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
		switch (c) {
		case 'N':
			if (bench__node_opt(&no, "ulsping", opts[idx].name, optarg) != 1)
				return 2;
			break;
		case 'p':
			if (!server ? opt__bad("ulsping", "port", optarg, "for the server only") :
			    opt__num("ulsping", "port", optarg, 1, 65535, &v))
				return 2;
			port = (uint16_t)v;
			have_port = true;
			break;
		case 't':
			if (server || bench__parse_addr_any(optarg, &at, 0) < 0 ||
			    bench__addr_port(&at) == 0) {
				fprintf(stderr, "ulsping: bad --to '%s': expected A.B.C.D:PORT or "
					"[IPV6]:PORT%s\n", optarg,
					server ? " (client only)" : "");
				return 2;
			}
			have_to = true;
			break;
		case 'z':
			if (opt__num("ulsping", "size", optarg, 1, PING_SIZE_MAX, &size) < 0)
				return 2;
			break;
		case 'c':
			if (opt__num("ulsping", "count", optarg, 1, PING_COUNT_MAX, &count) < 0)
				return 2;
			break;
		case 'k':
			if (opt__num("ulsping", "skip", optarg, 0, PING_COUNT_MAX, &skip) < 0)
				return 2;
			break;
		case 'j':
			json = optarg;
			break;
		case 'b':
			bd_path = optarg;
			break;
		case 'F':
			if (!server ? opt__bad("ulsping", "family", optarg, "for the server (a client's "
					       "--to names its family)") :
			    parse_family(optarg, &family))
				return 2;
			break;
		default:
			return opt__help_or_bad(c, usage);
		}
	}
	if (opt__no_operands("ulsping", argc, argv, optind) < 0)
		return 2;
	if (bd_path && (!uls_breakdown_enabled() || !no.ctl)) {
		fprintf(stderr, "ulsping %s: --breakdown needs %s\n", argv[1],
			!uls_breakdown_enabled() ? "a build configured with --enable-breakdown" :
			"--ctl (a process on a ulsd node: the stamps come from the rings)");
		return 2;
	}
	if (server && !have_port) {
		fprintf(stderr, "ulsping server: --port is required\n");
		return 2;
	}
	if (server) {
		/* --family 6: [::], dual-stack. */
		memset(&at, 0, sizeof(at));
		if (family == 6) {
			at.in6.sin6_family = AF_INET6;
			at.in6.sin6_port = htons(port);
		} else {
			at.in.sin_family = AF_INET;
			at.in.sin_port = htons(port);
		}
	}
	if (!server && (!have_to || !size)) {
		fprintf(stderr, "ulsping client: --to IP:PORT and --size B are required\n");
		return 2;
	}
	if (!server && skip >= count) {
		fprintf(stderr, "ulsping client: --skip %llu leaves no samples of --count %llu\n",
			skip, count);
		return 2;
	}
	if (server && json) {
		fprintf(stderr, "ulsping server: --json is for the client\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	int started = bench__node_start(&no, "ulsping");
	if (started < 0)
		return 1;
	const struct netops *ops = started ? &bench__uls_ops : &bench__kernel_ops;
	if (bench__family_check(ops, at.sa.sa_family, "ulsping") < 0) {
		if (started)
			uls_node_stop();
		return 2;
	}
	int rc = server ? bench__ping_server(ops, &at, bd_path) :
			  bench__ping_client(ops, &at, size, count, skip, json, bd_path);
	if (started)
		uls_node_stop();
	return rc;
}
