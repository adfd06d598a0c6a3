/* apps/rawopts.c: ulsraw's command line (rawopts.h). */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "apps/rawframe.h"
#include "apps/rawopts.h"
#include "netif/opt/opt.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ulsraw recv --tap IF [--mtu M] [--mac MAC] --seconds S [--json FILE]\n"
		"       ulsraw send --tap IF [--mtu M] [--mac MAC] --dst-mac MAC --seconds S\n"
		"                   [--streams N] [--json FILE]\n"
		"Full-MTU frames (EtherType 0x88b5) through a TAP, verified byte for byte.\n"
		"MTU %d..%d (default: the device's), S %.1f..%.0f, N 1..%u;\n"
		"--mac defaults to 02:75:6c:ff:00:02 (recv) and 02:75:6c:ff:00:01 (send).\n",
		NIF_MTU_MIN, RAW_MTU_MAX, RAW_SECONDS_MIN, RAW_SECONDS_MAX, RAW_STREAMS_MAX);
}

/* A unicast MAC other than zero: what a frame's source may be. */
static bool parse_unicast_mac(const char *s, uint8_t mac[WIRE_ETH_ALEN])
{
	static const uint8_t zero[WIRE_ETH_ALEN];
	uint8_t m[WIRE_ETH_ALEN];

	if (!nif_mac_parse(s, m) || (m[0] & 1) || memcmp(m, zero, WIRE_ETH_ALEN) == 0)
		return false;
	memcpy(mac, m, WIRE_ETH_ALEN);
	return true;
}

static int bad(const char *opt, const char *arg, const char *want)
{
	opt__bad("ulsraw", opt, arg, want);
	return 2;
}

int bench__raw_parse_args(int argc, char **argv, struct raw_opts *o)
{
	static const struct option lopts[] = {
		{ "tap", required_argument, NULL, 't' }, { "mtu", required_argument, NULL, 'm' },
		{ "mac", required_argument, NULL, 'a' }, { "dst-mac", required_argument, NULL, 'd' },
		{ "seconds", required_argument, NULL, 's' },
		{ "streams", required_argument, NULL, 'n' },
		{ "json", required_argument, NULL, 'j' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool have_mac = false, have_dst = false, have_secs = false, have_streams = false;
	int c;

	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		usage(stdout);
		return -1;
	}
	if (argc < 2 || (strcmp(argv[1], "recv") && strcmp(argv[1], "send"))) {
		usage(stderr);
		return 2;
	}
	memset(o, 0, sizeof(*o));
	o->role = strcmp(argv[1], "send") ? RAW_RECV : RAW_SEND;
	o->streams = 1;
	/* Options follow the role word; optind 0 also resets getopt between calls (tests). */
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc - 1, argv + 1, "h", lopts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (!*optarg || strlen(optarg) >= 16 || strchr(optarg, '/'))
				return bad("tap", optarg, "expected an interface name of 1..15 characters");
			o->tap = optarg;
			break;
		case 'm':
			if (opt__uint("ulsraw", "mtu", optarg, NIF_MTU_MIN, RAW_MTU_MAX, &o->mtu) < 0)
				return 2;
			break;
		case 'a':
			if (!parse_unicast_mac(optarg, o->mac))
				return bad("mac", optarg, "expected a unicast MAC like 02:75:6c:ff:00:02");
			have_mac = true;
			break;
		case 'd':
			if (!nif_mac_parse(optarg, o->dst))
				return bad("dst-mac", optarg, "expected a MAC like 02:75:6c:ff:00:02");
			have_dst = true;
			break;
		case 's':
			if (opt__seconds("ulsraw", "seconds", optarg, RAW_SECONDS_MIN, RAW_SECONDS_MAX,
					 &o->seconds) < 0)
				return 2;
			have_secs = true;
			break;
		case 'n':
			if (opt__uint("ulsraw", "streams", optarg, 1, RAW_STREAMS_MAX, &o->streams) < 0)
				return 2;
			have_streams = true;
			break;
		case 'j':
			if (!*optarg)
				return bad("json", optarg, "expected a file name");
			o->json = optarg;
			break;
		case 'h':
			usage(stdout);
			return -1;
		default:
			fprintf(stderr, "ulsraw: bad option '%s' (or its value is missing)\n",
				argv[optind]);
			usage(stderr);
			return 2;
		}
	}
	/* getopt ran on argv + 1 (after the role word). */
	if (opt__no_operands("ulsraw", argc - 1, argv + 1, optind) < 0)
		return 2;
	if (!o->tap || !have_secs) {
		fprintf(stderr, "ulsraw: %s needs --tap and --seconds\n", argv[1]);
		return 2;
	}
	if (o->role == RAW_RECV && (have_dst || have_streams)) {
		fprintf(stderr, "ulsraw: --dst-mac and --streams are for send\n");
		return 2;
	}
	if (o->role == RAW_SEND && !have_dst) {
		fprintf(stderr, "ulsraw: send needs --dst-mac (the receiver's --mac)\n");
		return 2;
	}
	if (!have_mac)
		memcpy(o->mac, o->role == RAW_SEND ? bench__raw_mac_sender : bench__raw_mac_receiver, WIRE_ETH_ALEN);
	return 0;
}
