/* The command-line parsers the apps share: sizes (netif/opt/opt.c), addresses (apps/netops.c);
 * and ulsbench's request (apps/benchstream.c), which a server takes from any peer. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <cmocka.h>

#include "apps/benchstream.h"
#include "apps/netops.h"
#include "netif/opt/opt.h"

#define UNTOUCHED 0x5a5a5a5a5a5a5a5aull

/* --- opt__parse_size --- */

static void good_sizes_parse_size_scales_by_suffix(void **state)
{
	static const struct { const char *s; unsigned long long v; } good[] = {
		{ "0", 0 }, { "1", 1 }, { "64K", 65536 }, { "64k", 65536 }, { "3M", 3ull << 20 },
		{ "1G", 1ull << 30 }, { "1g", 1ull << 30 }, { "0G", 0 },
		{ "17179869183G", 17179869183ull << 30 },
		{ "18446744073709551615", ~0ull },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		unsigned long long v = UNTOUCHED;
		if (opt__parse_size(good[i].s, &v) != 0 || v != good[i].v)
			fail_msg("\"%s\" -> %llu, want %llu", good[i].s, v, good[i].v);
	}
}

static void check_size_rejected(const char *s)
{
	unsigned long long v = UNTOUCHED;

	if (opt__parse_size(s, &v) >= 0)
		fail_msg("\"%s\" accepted (%llu)", s ? s : "(null)", v);
	if (v != UNTOUCHED)
		fail_msg("\"%s\": output written on failure", s ? s : "(null)");
}

static void bad_sizes_parse_size_fails_output_untouched(void **state)
{
	static const char *const bad[] = {
		NULL, "", "-1", "1X", "K", "1KB", "1K ", "99999999999G", "17179869184G",
		"18446744073709551616", "16777216T", "0x10",
	};
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		check_size_rejected(bad[i]);
}

static void negative_after_blank_parse_size_fails(void **state)
{
	(void)state;
	/* strtoull() skips blanks and then negates: " -1" would be 2^64 - 1. */
	check_size_rejected(" -1");
	check_size_rejected("\t-1024");
}

/* --- bench__parse_addr --- */

static void host_and_port_parse_addr_fills_sockaddr(void **state)
{
	struct sockaddr_in a;
	(void)state;

	assert_int_equal(bench__parse_addr("1.2.3.4:80", &a, 5001), 0);
	assert_int_equal(a.sin_family, AF_INET);
	assert_int_equal(a.sin_addr.s_addr, htonl(0x01020304));
	assert_int_equal(ntohs(a.sin_port), 80);
	assert_int_equal(bench__parse_addr("1.2.3.4:65535", &a, 5001), 0);
	assert_int_equal(ntohs(a.sin_port), 65535);
	assert_int_equal(bench__parse_addr("1.2.3.4:1", &a, 5001), 0);
	assert_int_equal(ntohs(a.sin_port), 1);
}

static void host_only_parse_addr_uses_default_port(void **state)
{
	struct sockaddr_in a;
	(void)state;

	assert_int_equal(bench__parse_addr("198.18.0.1", &a, 5001), 0);
	assert_int_equal(a.sin_addr.s_addr, htonl(0xc6120001));
	assert_int_equal(ntohs(a.sin_port), 5001);
}

static void check_addr_rejected(const char *s)
{
	struct sockaddr_in a, before;

	memset(&a, 0x5a, sizeof(a));
	before = a;
	if (bench__parse_addr(s, &a, 5001) != -1)
		fail_msg("\"%s\" accepted", s);
	if (memcmp(&a, &before, sizeof(a)) != 0)
		fail_msg("\"%s\": output written on failure", s);
}

static void bad_port_parse_addr_fails(void **state)
{
	static const char *const bad[] = {
		"1.2.3.4:0", "1.2.3.4:65536", "1.2.3.4:", "1.2.3.4:80x", "1.2.3.4:-1",
		"1.2.3.4:99999999999999999999999",
	};
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		check_addr_rejected(bad[i]);
}

static void bad_host_parse_addr_fails(void **state)
{
	static const char *const bad[] = {
		"", ":80", "300.1.1.1:80", "1.2.3:80", "localhost:80", "1.2.3.4.5.6.7.8.9:80",
	};
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		check_addr_rejected(bad[i]);
}

static void signed_port_parse_addr_fails(void **state)
{
	(void)state;
	/* -(2^64 - 16000) wraps to 16000 in strtoul(). */
	check_addr_rejected("1.2.3.4:+80");
	check_addr_rejected("1.2.3.4: 80");
	check_addr_rejected("1.2.3.4:-18446744073709535616");
}

/* --- bench__parse_addr_any: either family (RFC 3986 §3.2.2 brackets for IPv6) --- */

static void either_family_parse_addr_any_fills_its_sockaddr(void **state)
{
	union bench_addr a;
	struct in6_addr want;
	(void)state;

	assert_int_equal(bench__parse_addr_any("1.2.3.4:80", &a, 5001), 0);
	assert_int_equal(a.sa.sa_family, AF_INET);
	assert_int_equal(a.in.sin_addr.s_addr, htonl(0x01020304));
	assert_int_equal(bench__addr_port(&a), 80);
	assert_int_equal(bench__addr_len(&a), sizeof(struct sockaddr_in));
	inet_pton(AF_INET6, "2001:db8::1", &want);
	assert_int_equal(bench__parse_addr_any("[2001:db8::1]:7000", &a, 5001), 0);
	assert_int_equal(a.sa.sa_family, AF_INET6);
	assert_memory_equal(&a.in6.sin6_addr, &want, 16);
	assert_int_equal(bench__addr_port(&a), 7000);
	assert_int_equal(bench__addr_len(&a), sizeof(struct sockaddr_in6));
	assert_int_equal(bench__parse_addr_any("[2001:db8::1]", &a, 5001), 0);
	assert_int_equal(bench__addr_port(&a), 5001);
	assert_int_equal(bench__parse_addr_any("2001:db8::1", &a, 5001), 0);
	assert_int_equal(bench__addr_port(&a), 5001);
	assert_memory_equal(&a.in6.sin6_addr, &want, 16);
}

static void bad_addresses_parse_addr_any_fails_output_untouched(void **state)
{
	static const char *const bad[] = {
		"", "[2001:db8::1]:0", "[2001:db8::1]:65536", "[2001:db8::1]:", "[2001:db8::1",
		"[2001:db8::1]x", "[1.2.3.4]:80", "[]:80", "2001:db8::g", "1.2.3.4:0", ":80",
		"[2001:db8::1]:+80",
	};
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		union bench_addr a, before;
		memset(&a, 0x5a, sizeof(a));
		before = a;
		if (bench__parse_addr_any(bad[i], &a, 5001) != -1)
			fail_msg("\"%s\" accepted", bad[i]);
		if (memcmp(&a, &before, sizeof(a)) != 0)
			fail_msg("\"%s\": output written on failure", bad[i]);
	}
}

/* --- bench__node_opt --- */

static void node_opts_fresh(struct node_opts *o)
{
	memset(o, 0, sizeof(*o));
}

static void good_options_node_opt_fill_config(void **state)
{
	struct node_opts o;
	static const uint8_t mac[6] = { 0x02, 0, 0, 0, 0, 0x42 };
	(void)state;

	node_opts_fresh(&o);
	assert_int_equal(bench__node_opt(&o, "test", "tap", "tap0"), 1);
	assert_true(o.have_tap);
	assert_string_equal(o.cfg.tap, "tap0");
	assert_int_equal(bench__node_opt(&o, "test", "ip", "198.18.0.1/24"), 1);
	assert_true(o.have_ip);
	assert_int_equal(o.cfg.addr.s_addr, htonl(0xc6120001));
	assert_int_equal(o.cfg.prefix_len, 24);
	assert_int_equal(bench__node_opt(&o, "test", "mac", "02:00:00:00:00:42"), 1);
	assert_memory_equal(o.cfg.mac, mac, 6);
	assert_int_equal(bench__node_opt(&o, "test", "gw", "198.18.0.254"), 1);
	assert_int_equal(o.cfg.gateway.s_addr, htonl(0xc61200fe));
	assert_int_equal(bench__node_opt(&o, "test", "mtu", "68"), 1);
	assert_int_equal(o.cfg.mtu, 68);
	assert_int_equal(bench__node_opt(&o, "test", "mtu", "65535"), 1);
	assert_int_equal(o.cfg.mtu, 65535);
	assert_int_equal(bench__node_opt(&o, "test", "mtu", "9K"), 1);
	assert_int_equal(o.cfg.mtu, 9216);
}

static void unknown_option_node_opt_returns_zero(void **state)
{
	struct node_opts o, before;
	(void)state;

	node_opts_fresh(&o);
	before = o;
	assert_int_equal(bench__node_opt(&o, "test", "port", "80"), 0);
	assert_memory_equal(&o, &before, sizeof(o));
}

static void check_opt_rejected(const char *opt, const char *arg)
{
	struct node_opts o, before;

	node_opts_fresh(&o);
	o.cfg.mtu = 1500;
	o.cfg.mac[0] = 0x02;
	o.cfg.mac[5] = 0x07;
	before = o;
	if (bench__node_opt(&o, "test", opt, arg) != -EINVAL)
		fail_msg("--%s %s accepted", opt, arg);
	if (memcmp(&o, &before, sizeof(o)) != 0)
		fail_msg("--%s %s: options changed although rejected", opt, arg);
}

static void out_of_range_mtu_node_opt_rejected(void **state)
{
	(void)state;
	check_opt_rejected("mtu", "67");
	check_opt_rejected("mtu", "65536");
	check_opt_rejected("mtu", "0");
	check_opt_rejected("mtu", "64K");
	check_opt_rejected("mtu", "-1500");
	check_opt_rejected("mtu", "1500x");
}

static void bad_ip_node_opt_rejected(void **state)
{
	(void)state;
	check_opt_rejected("ip", "198.18.0.1");
	check_opt_rejected("ip", "198.18.0.1/31");
	check_opt_rejected("ip", "198.18.0.256/24");
	check_opt_rejected("gw", "198.18.0");
}

static void malformed_mac_node_opt_rejected(void **state)
{
	(void)state;
	check_opt_rejected("mac", "02:00:00:00:00");
	check_opt_rejected("mac", "02-00-00-00-00-01");
}

static void multicast_mac_node_opt_rejected_config_untouched(void **state)
{
	(void)state;
	check_opt_rejected("mac", "01:00:5e:00:00:01");
	check_opt_rejected("mac", "ff:ff:ff:ff:ff:ff");
}

/* --- bench__req_put / bench__req_get --- */

static void bench_request_round_trips_every_field(void **state)
{
	struct bench_req in = { .dir = BENCH_SERVER_SENDS, .bytes = 0x0102030405060708ull,
				.seed = ~0ull, .millis = 4000, .warmup_ms = 1000 }, out;
	uint8_t req[BENCH_REQ_LEN];

	(void)state;
	memset(&out, 0x5a, sizeof(out));
	bench__req_put(req, &in);
	assert_int_equal(bench__req_get(req, &out), 0);
	assert_int_equal(out.dir, in.dir);
	assert_true(out.bytes == in.bytes && out.seed == in.seed);
	assert_int_equal(out.millis, in.millis);
	assert_int_equal(out.warmup_ms, in.warmup_ms);
	assert_memory_equal(req, "ULSB\x03\x01\x00\x00\x01\x02\x03\x04\x05\x06\x07\x08", 16);
}

/* A server reads its requests from any peer: wrong magic, version or direction is refused
 * (-EPROTO) with the output untouched. */
static void bad_bench_requests_are_refused(void **state)
{
	struct bench_req in = { .dir = BENCH_CLIENT_SENDS, .bytes = 1 }, out;
	uint8_t req[BENCH_REQ_LEN];
	static const struct { unsigned off; uint8_t v; } bad[] = {
		{ 0, 'X' }, { 3, 'C' }, { 4, 2 }, { 4, 4 }, { 5, 2 }, { 5, 0xff },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		bench__req_put(req, &in);
		req[bad[i].off] = bad[i].v;
		memset(&out, 0x5a, sizeof(out));
		assert_int_equal(bench__req_get(req, &out), -EPROTO);
		assert_int_equal(out.millis, 0x5a5a5a5a);
	}
}

/* --- bench__node_start --- */

const char *stk__getenv(const char *name);   /* stack/internal.h (libuls-internal) */

/* ulsbench --ctl PATH --datapath relay: libuls read ULS_DATAPATH when it was loaded
 * (stack/env.c), so netops has it read the variable again after setting it; the attach
 * itself fails here (no ulsd at PATH). Without the reload libuls offered the direct path. */
static void datapath_option_reaches_libuls_which_read_its_variables_at_load(void **state)
{
	struct node_opts o = { .ctl = "/nonexistent/uls-test_netops.ctl", .datapath = "relay" };

	(void)state;
	unsetenv("ULS_DATAPATH");
	uls_env_reload();
	assert_null(stk__getenv("ULS_DATAPATH"));
	assert_int_equal(bench__node_start(&o, "test_netops"), -1);
	assert_non_null(stk__getenv("ULS_DATAPATH"));
	assert_string_equal(stk__getenv("ULS_DATAPATH"), "relay");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bench_request_round_trips_every_field),
		cmocka_unit_test(bad_bench_requests_are_refused),
		cmocka_unit_test(good_sizes_parse_size_scales_by_suffix),
		cmocka_unit_test(bad_sizes_parse_size_fails_output_untouched),
		cmocka_unit_test(negative_after_blank_parse_size_fails),
		cmocka_unit_test(host_and_port_parse_addr_fills_sockaddr),
		cmocka_unit_test(host_only_parse_addr_uses_default_port),
		cmocka_unit_test(bad_port_parse_addr_fails),
		cmocka_unit_test(bad_host_parse_addr_fails),
		cmocka_unit_test(signed_port_parse_addr_fails),
		cmocka_unit_test(either_family_parse_addr_any_fills_its_sockaddr),
		cmocka_unit_test(bad_addresses_parse_addr_any_fails_output_untouched),
		cmocka_unit_test(good_options_node_opt_fill_config),
		cmocka_unit_test(unknown_option_node_opt_returns_zero),
		cmocka_unit_test(out_of_range_mtu_node_opt_rejected),
		cmocka_unit_test(bad_ip_node_opt_rejected),
		cmocka_unit_test(malformed_mac_node_opt_rejected),
		cmocka_unit_test(multicast_mac_node_opt_rejected_config_untouched),
		cmocka_unit_test(datapath_option_reaches_libuls_which_read_its_variables_at_load),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
