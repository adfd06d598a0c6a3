/* The public API without a running node: argument checks in stack/socket.c and
 * stack/core.c, the counters (stack/counters.c) and the err_t mapping (stack/errmap.c).
 *
 * uls_node_start() is only ever called in a forked child inside a new network namespace:
 * TUNSETIFF on a name that does not exist creates a TAP, and a test must never leave a
 * device behind in the machine's own namespace.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <cmocka.h>

/* lwIP first: its def.h defines htonl() and friends unless <arpa/inet.h> did. */
#include "internal.h"

#include <arpa/inet.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>

#include "netif/ctl/ctl.h"

static struct in_addr ip4(const char *s)
{
	struct in_addr a;

	assert_int_equal(inet_pton(AF_INET, s, &a), 1);
	return a;
}

/* --- sockets without a node --- */

static void no_node_socket_fails_enetdown(void **state)
{
	(void)state;
	assert_int_equal(uls_socket(SOCK_STREAM), -ENETDOWN);
	assert_int_equal(uls_socket(SOCK_DGRAM), -ENETDOWN);
	assert_int_equal(uls_socket(SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC), -ENETDOWN);
}

static void bad_type_socket_fails_eprotonosupport(void **state)
{
	(void)state;
	assert_int_equal(uls_socket(SOCK_RAW), -EPROTONOSUPPORT);
	assert_int_equal(uls_socket(SOCK_SEQPACKET), -EPROTONOSUPPORT);
	assert_int_equal(uls_socket(0), -EPROTONOSUPPORT);
	assert_int_equal(uls_socket(-1), -EPROTONOSUPPORT);
	assert_int_equal(uls_socket(SOCK_NONBLOCK), -EPROTONOSUPPORT);
}

static const int bad_sds[] = { -1, 0, 1, 63, 64, 1 << 20, -2147483647 - 1 };
#define N_BAD_SDS (sizeof(bad_sds) / sizeof(bad_sds[0]))

static void bad_descriptor_close_fails_ebadf(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_BAD_SDS; i++)
		assert_int_equal(uls_close(bad_sds[i]), -EBADF);
}

static void bad_descriptor_bind_fails_ebadf(void **state)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(80) };
	(void)state;

	for (size_t i = 0; i < N_BAD_SDS; i++)
		assert_int_equal(uls_bind(bad_sds[i], &a), -EBADF);
}

static void bad_address_bind_fails_before_descriptor_check(void **state)
{
	struct sockaddr_in a = { .sin_family = AF_INET6 };
	(void)state;

	assert_int_equal(uls_bind(0, NULL), -EFAULT);
	assert_int_equal(uls_bind(0, &a), -EAFNOSUPPORT);
}

static void bad_descriptor_send_recv_fail_ebadf(void **state)
{
	char buf[4] = { 0 };
	(void)state;

	for (size_t i = 0; i < N_BAD_SDS; i++) {
		assert_int_equal(uls_send(bad_sds[i], buf, sizeof(buf), 0), -EBADF);
		assert_int_equal(uls_recv(bad_sds[i], buf, sizeof(buf), 0), -EBADF);
	}
	assert_int_equal(uls_send(0, NULL, 4, 0), -EFAULT);
	assert_int_equal(uls_recv(0, NULL, 4, 0), -EFAULT);
}

static void bad_descriptor_other_calls_fail_ebadf(void **state)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(80) };
	int one = 1;
	socklen_t len = sizeof(one);
	(void)state;

	assert_int_equal(uls_listen(3, 5), -EBADF);
	assert_int_equal(uls_accept(3, NULL), -EBADF);
	assert_int_equal(uls_connect(3, &a), -EBADF);
	assert_int_equal(uls_shutdown(3, SHUT_RDWR), -EBADF);
	assert_int_equal(uls_shutdown(3, 42), -EINVAL);
	assert_int_equal(uls_setsockopt(3, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), -EBADF);
	assert_int_equal(uls_getsockopt(3, SOL_SOCKET, SO_TYPE, &one, &len), -EBADF);
	assert_int_equal(uls_getsockname(3, &a), -EBADF);
	assert_int_equal(uls_getpeername(3, &a), -EBADF);
}

/* --- uls_parse_cidr --- */

static void good_cidr_parse_writes_address_and_prefix(void **state)
{
	struct in_addr a;
	unsigned plen;
	(void)state;

	assert_int_equal(uls_parse_cidr("198.18.0.1/24", &a, &plen), 0);
	assert_int_equal(a.s_addr, ip4("198.18.0.1").s_addr);
	assert_int_equal(plen, 24);
	assert_int_equal(uls_parse_cidr("10.0.0.1/1", &a, &plen), 0);
	assert_int_equal(plen, 1);
	assert_int_equal(uls_parse_cidr("10.0.0.1/30", &a, &plen), 0);
	assert_int_equal(plen, 30);
}

static void cidr6_parse_takes_ipv6_with_prefix_rejects_others(void **state)
{
	static const char *const bad[] = {
		"2001:db8::1", "2001:db8::1/0", "2001:db8::1/129", "2001:db8::1/", "/64",
		"198.18.0.1/24", "2001:db8::g/64", "2001:db8::1/64x", "2001:db8::1/+64", NULL,
	};
	struct in6_addr a, want, sentinel;
	unsigned plen;
	(void)state;

	assert_int_equal(uls_parse_cidr6("2001:db8:0:1::1/64", &a, &plen), 0);
	assert_int_equal(inet_pton(AF_INET6, "2001:db8:0:1::1", &want), 1);
	assert_memory_equal(&a, &want, sizeof(a));
	assert_int_equal(plen, 64);
	assert_int_equal(uls_parse_cidr6("fd00::5/128", &a, &plen), 0);
	assert_int_equal(plen, 128);
	memset(&sentinel, 0x5a, sizeof(sentinel));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		a = sentinel;
		plen = 77;
		if (uls_parse_cidr6(bad[i], &a, &plen) != -EINVAL)
			fail_msg("\"%s\" was not rejected with -EINVAL", bad[i] ? bad[i] : "(null)");
		assert_memory_equal(&a, &sentinel, sizeof(a));
		assert_int_equal(plen, 77);
	}
}

static void sockaddr_calls_check_family_before_descriptor(void **state)
{
	struct sockaddr_un u = { .sun_family = AF_UNIX };
	char buf[4] = { 0 };
	(void)state;

	assert_int_equal(uls_socket_af(AF_UNIX, SOCK_STREAM), -EAFNOSUPPORT);
	assert_int_equal(uls_bind_sa(0, NULL, 0), -EFAULT);
	assert_int_equal(uls_bind_sa(0, (struct sockaddr *)&u, sizeof(u)), -EAFNOSUPPORT);
	assert_int_equal(uls_connect_sa(0, (struct sockaddr *)&u, sizeof(u)), -EAFNOSUPPORT);
	assert_int_equal(uls_sendto_sa(0, buf, 1, 0, (struct sockaddr *)&u, sizeof(u)),
			 -EAFNOSUPPORT);
	/* A good address on a descriptor that is no socket: EBADF. */
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons(80) };
	assert_int_equal(uls_bind_sa(-1, (struct sockaddr *)&a6, sizeof(a6)), -EBADF);
	assert_int_equal(uls_connect_sa(12345, (struct sockaddr *)&a6, sizeof(a6)), -EBADF);
}

static void check_cidr_rejected(const char *s)
{
	struct in_addr a = { .s_addr = 0x5a5a5a5a };
	unsigned plen = 77;

	if (uls_parse_cidr(s, &a, &plen) != -EINVAL)
		fail_msg("\"%s\" was not rejected with -EINVAL", s);
	if (a.s_addr != 0x5a5a5a5a || plen != 77)
		fail_msg("\"%s\": outputs written on failure", s);
}

static void bad_cidr_parse_fails_outputs_untouched(void **state)
{
	static const char *const bad[] = {
		"", "1.2.3.4", "1.2.3.4/0", "/24", "1.2.3.4/31", "1.2.3.4/32", "1.2.3.4/24x",
		"300.1.1.1/24", "1.2.3.4/", "1.2.3/24", "1.2.3.4.5/24", "1.2.3.4/-1",
		"1.2.3.4/99999999999999999999999", "1.2.3.4//24", "1.2.3.4/24/24",
		"255.255.255.255255255255/24",
	};
	struct in_addr a;
	unsigned plen;
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		check_cidr_rejected(bad[i]);
	assert_int_equal(uls_parse_cidr(NULL, &a, &plen), -EINVAL);
	assert_int_equal(uls_parse_cidr("1.2.3.4/24", NULL, &plen), -EINVAL);
	assert_int_equal(uls_parse_cidr("1.2.3.4/24", &a, NULL), -EINVAL);
}

static void signed_or_spaced_prefix_cidr_parse_fails(void **state)
{
	(void)state;
	/* strtoul() skips blanks and takes a sign; NN must be digits only. A minus sign
	 * wraps: -(2^64 - 24) reads as 24. */
	check_cidr_rejected("1.2.3.4/+24");
	check_cidr_rejected("1.2.3.4/ 24");
	check_cidr_rejected("1.2.3.4/-18446744073709551592");
}

/* --- uls_node_start, in a child in its own network namespace --- */

#define CHILD_SKIP 0x7fffffff

/* Run uls_node_start(cfg) in a forked child in a new network namespace; returns its
 * result, or CHILD_SKIP if no namespace could be made while running as root. */
static int start_sized_in_child(const struct uls_node_config *cfg, size_t size)
{
	int fds[2], rc = 0, status;
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		/* Without root no TAP can be created, so the own namespace is safe then. */
		if (unshare(CLONE_NEWNET) < 0 && geteuid() == 0)
			rc = CHILD_SKIP;
		else
			rc = uls_node_start_sized(cfg, size);
		if (rc == 0)
			uls_node_stop();
		if (write(fds[1], &rc, sizeof(rc)) != (ssize_t)sizeof(rc))
			_exit(2);
		_exit(0);
	}
	close(fds[1]);
	ssize_t n = read(fds[0], &rc, sizeof(rc));
	close(fds[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("uls_node_start crashed or failed in the child (status %#x)", status);
	assert_int_equal(n, sizeof(rc));
	return rc;
}

static int start_in_child(const struct uls_node_config *cfg)
{
	return start_sized_in_child(cfg, sizeof(*cfg));
}

static struct uls_node_config good_config(void)
{
	struct uls_node_config c = {
		.tap = "ulsnonexist0",
		.addr = ip4("198.18.0.1"),
		.prefix_len = 24,
	};
	return c;
}

static void expect_einval(const struct uls_node_config *cfg, const char *what)
{
	int rc = start_in_child(cfg);

	if (rc == CHILD_SKIP)
		skip();
	if (rc != -EINVAL)
		fail_msg("%s: uls_node_start returned %d, want -EINVAL", what, rc);
}

static void null_config_node_start_fails_einval(void **state)
{
	(void)state;
	/* Checked before any device is touched, so safe in this process. */
	assert_int_equal(uls_node_start(NULL), -EINVAL);
}

static void bad_configs_node_start_fail_einval(void **state)
{
	struct uls_node_config c;
	(void)state;

	c = good_config(); c.tap = NULL;                   expect_einval(&c, "no tap");
	c = good_config(); c.tap = "";                     expect_einval(&c, "empty tap");
	c = good_config(); c.prefix_len = 0;               expect_einval(&c, "prefix 0");
	c = good_config(); c.prefix_len = 31;              expect_einval(&c, "prefix 31");
	c = good_config(); c.addr = ip4("0.0.0.0");        expect_einval(&c, "0.0.0.0");
	c = good_config(); c.addr = ip4("127.0.0.1");      expect_einval(&c, "127.0.0.1");
	c = good_config(); c.addr = ip4("224.0.0.1");      expect_einval(&c, "224.0.0.1");
	c = good_config(); c.addr = ip4("255.255.255.255"); expect_einval(&c, "broadcast");
	c = good_config(); c.mac[0] = 0x01;                expect_einval(&c, "multicast MAC");
	c = good_config(); c.mtu = 67;                     expect_einval(&c, "mtu 67");
	c = good_config(); c.mtu = 65536;                  expect_einval(&c, "mtu 65536");
	c = good_config(); c.tap = "ulsnamewaytoolong0";   expect_einval(&c, "tap name > IFNAMSIZ");
}

static void bad_ipv6_configs_node_start_fail_einval(void **state)
{
	struct uls_node_config c;
	(void)state;

	c = good_config(); c.prefix_len6 = 64;
	assert_int_equal(inet_pton(AF_INET6, "fe80::1", &c.addr6), 1);
	expect_einval(&c, "link-local IPv6");
	assert_int_equal(inet_pton(AF_INET6, "ff02::1", &c.addr6), 1);
	expect_einval(&c, "multicast IPv6");
	assert_int_equal(inet_pton(AF_INET6, "::1", &c.addr6), 1);
	expect_einval(&c, "loopback IPv6");
	assert_int_equal(inet_pton(AF_INET6, "2001:db8::1", &c.addr6), 1);
	c.prefix_len6 = 0;
	expect_einval(&c, "IPv6 prefix 0");
	c.prefix_len6 = 129;
	expect_einval(&c, "IPv6 prefix 129");
}

/* uls.h: the library reads the size the caller was compiled with and takes the rest as
 * zero. A caller of the oldest layout (no addr6) whose memory after it holds what would be
 * a bad IPv6 address must not be refused for it: the start fails only on the missing TAP. */
static void node_start_sized_reads_only_the_callers_structure(void **state)
{
	struct uls_node_config c = good_config();
	(void)state;

	assert_int_equal(inet_pton(AF_INET6, "fe80::1", &c.addr6), 1);
	c.prefix_len6 = 64;
	expect_einval(&c, "link-local IPv6 read whole");
	int rc = start_sized_in_child(&c, offsetof(struct uls_node_config, addr6));
	if (rc == CHILD_SKIP)
		skip();
	if (rc == -EINVAL || rc >= 0)
		fail_msg("a structure that ends before addr6: got %d, want the missing TAP's error", rc);
}

/* Sizes that no structure of this library has had: checked before any device is touched,
 * so safe in this process. A larger structure is accepted only when what the library does
 * not know of it is zero. */
static void node_start_sized_refuses_sizes_and_settings_it_does_not_know(void **state)
{
	struct {
		struct uls_node_config c;
		unsigned char newer[8];
	} big;
	(void)state;

	memset(&big, 0, sizeof(big));
	big.c = good_config();
	assert_int_equal(uls_node_start_sized(&big.c, 0), -EINVAL);
	assert_int_equal(uls_node_start_sized(&big.c, offsetof(struct uls_node_config, addr6) - 1),
			 -EINVAL);
	big.newer[7] = 1;
	assert_int_equal(uls_node_start_sized(&big.c, sizeof(big)), -E2BIG);
	big.newer[7] = 0;
	int rc = start_sized_in_child(&big.c, sizeof(big));
	if (rc == CHILD_SKIP)
		skip();
	if (rc == -E2BIG || rc == -EINVAL || rc >= 0)
		fail_msg("a larger structure with a zero tail: got %d, want the missing TAP's error", rc);
}

static void nonexistent_tap_node_start_fails_negative_errno(void **state)
{
	struct uls_node_config c = good_config();
	(void)state;

	/* tap.h: "an existing TAP device in the caller's network namespace". */
	int rc = start_in_child(&c);
	if (rc == CHILD_SKIP)
		skip();
	if (rc >= 0)
		fail_msg("uls_node_start on nonexistent TAP %s returned %d", c.tap, rc);
}

static void no_node_stop_is_noop(void **state)
{
	(void)state;
	uls_node_stop();
	uls_node_stop();
	assert_int_equal(uls_socket(SOCK_DGRAM), -ENETDOWN);
}

/* --- counters --- */

static void null_out_counters_returns_count(void **state)
{
	(void)state;
	assert_true(uls_counters(NULL, 0) > 20);
	assert_int_equal(uls_counters(NULL, 5), uls_counters(NULL, 0));
}

static void all_counters_names_unique_values_zero(void **state)
{
	int n = uls_counters(NULL, 0);
	struct uls_counter *c = calloc((size_t)n, sizeof(*c));
	static const char *const must[] = {
		"frame_runt", "frame_not_ours", "udp_rcvbuf_full", "tcp_chkerr", "ip_drop",
		"dev_rx_frames",
	};
	(void)state;

	assert_non_null(c);
	assert_int_equal(uls_counters(c, (size_t)n), n);
	for (int i = 0; i < n; i++) {
		assert_non_null(c[i].name);
		assert_true(c[i].name[0] != '\0');
		assert_true(c[i].value == 0);
		for (int j = 0; j < i; j++)
			if (strcmp(c[i].name, c[j].name) == 0)
				fail_msg("counter name %s appears twice", c[i].name);
	}
	for (size_t m = 0; m < sizeof(must) / sizeof(must[0]); m++) {
		int found = 0;
		for (int i = 0; i < n; i++)
			found |= strcmp(c[i].name, must[m]) == 0;
		if (!found)
			fail_msg("no counter named %s", must[m]);
	}
	/* Pass verdicts are not drops and have no counter. */
	for (int i = 0; i < n; i++)
		assert_true(strncmp(c[i].name, "pass_", 5) != 0);
	free(c);
}

static void short_array_counters_fills_only_n(void **state)
{
	struct uls_counter c[4];
	(void)state;

	memset(c, 0xa5, sizeof(c));
	struct uls_counter sentinel = c[2];
	assert_int_equal(uls_counters(c, 2), uls_counters(NULL, 0));
	assert_non_null(c[0].name);
	assert_non_null(c[1].name);
	assert_memory_equal(&c[2], &sentinel, sizeof(sentinel));
	assert_memory_equal(&c[3], &sentinel, sizeof(sentinel));
}

static void drop_verdict_counted_counter_increments(void **state)
{
	int n = uls_counters(NULL, 0);
	struct uls_counter *c = calloc((size_t)n, sizeof(*c));
	(void)state;

	assert_non_null(c);
	stk__lock();
	stk__count_verdict(NIF_DROP_RUNT);
	stk__count_verdict(NIF_DROP_RUNT);
	stk__count_verdict(NIF_VERDICT_COUNT);   /* out of range: ignored */
	stk__count(STK_CNT_TX_OVERSIZE);
	stk__unlock();
	uls_counters(c, (size_t)n);
	for (int i = 0; i < n; i++) {
		if (strcmp(c[i].name, "frame_runt") == 0)
			assert_true(c[i].value == 2);
		else if (strcmp(c[i].name, "tx_oversize") == 0)
			assert_true(c[i].value == 1);
		else
			assert_true(c[i].value == 0);
	}
	free(c);
}

/* --- err_t to -errno --- */

static void named_errs_err_to_errno_maps_exactly(void **state)
{
	(void)state;
	assert_int_equal(stk__err_to_errno(ERR_OK), 0);
	assert_int_equal(stk__err_to_errno(ERR_RST), -ECONNRESET);
	assert_int_equal(stk__err_to_errno(ERR_USE), -EADDRINUSE);
	assert_int_equal(stk__err_to_errno(ERR_MEM), -ENOMEM);
	assert_int_equal(stk__err_to_errno(ERR_ABRT), -ECONNABORTED);
	assert_int_equal(stk__err_to_errno(ERR_WOULDBLOCK), -EWOULDBLOCK);
	assert_int_equal(stk__err_to_errno(ERR_RTE), -EHOSTUNREACH);
	assert_int_equal(stk__err_to_errno(ERR_CONN), -ENOTCONN);
}

static void every_lwip_err_err_to_errno_negative_not_eio(void **state)
{
	(void)state;
	for (int e = ERR_MEM; e >= ERR_ARG; e--) {
		int rc = stk__err_to_errno((err_t)e);
		if (rc >= 0 || rc == -EIO)
			fail_msg("err_t %d maps to %d", e, rc);
	}
}

static void unknown_err_err_to_errno_is_eio(void **state)
{
	(void)state;
	assert_int_equal(stk__err_to_errno((err_t)(ERR_ARG - 1)), -EIO);
	assert_int_equal(stk__err_to_errno((err_t)1), -EIO);
	assert_int_equal(stk__err_to_errno((err_t)-128), -EIO);
	assert_int_equal(stk__err_to_errno((err_t)127), -EIO);
}

/* --- the lease: no request to ulsd with the core lock held (stack/lease.c) --- */

/* The check is on every call, before anything else, so it fires without a lease too: a
 * forked child takes the core lock and asks; it must die of SIGABRT, and the same call
 * without the lock must return (-ENOTCONN: no lease). */
static void lease_call_with_core_lock_held_aborts(void **state)
{
	(void)state;
	for (int locked = 0; locked < 2; locked++) {
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			struct ctl_msg m;
			memset(&m, 0, sizeof(m));
			m.type = CTL_CONNECT;
			struct rlimit no_core = { 0, 0 };
			setrlimit(RLIMIT_CORE, &no_core);  /* the abort is expected */
			if (locked)
				stk__lock();
			int rc = stk__lease_call(&m);
			_exit(rc == -ENOTCONN ? 0 : 1);
		}
		int st = 0;
		assert_int_equal(waitpid(pid, &st, 0), pid);
		if (locked)
			assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
		else
			assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
}

/* Other threads read who holds the core lock without it (the check above, the heap's
 * cache): a thread that has just let the lock go must never see it as still its own while
 * the next holder moves in (stack/internal.h, stk__core_owner_take: owner before owned).
 * Two threads take and release it for at most a second each, and check right after every
 * release, where the next holder is taking it. */
#define OWNER_RACE_ROUNDS 2000000
#define OWNER_RACE_NS 1000000000ull

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *owner_race_thread(void *arg)
{
	unsigned long *wrong = arg;
	uint64_t end = mono_ns() + OWNER_RACE_NS;

	for (int i = 0; i < OWNER_RACE_ROUNDS; i++) {
		stk__lock();
		if (!stk__core_lock_mine())
			(*wrong)++;
		stk__unlock_raw();
		if (stk__core_lock_mine())
			(*wrong)++;
		if ((i & 1023) == 0 && mono_ns() > end)
			break;
	}
	return NULL;
}

static void core_lock_owner_never_stale_after_release(void **state)
{
	unsigned long wrong[2] = { 0, 0 };
	pthread_t t[2];

	(void)state;
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, owner_race_thread, &wrong[i]), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_int_equal(wrong[0] + wrong[1], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(no_node_socket_fails_enetdown),
		cmocka_unit_test(core_lock_owner_never_stale_after_release),
		cmocka_unit_test(bad_type_socket_fails_eprotonosupport),
		cmocka_unit_test(bad_descriptor_close_fails_ebadf),
		cmocka_unit_test(bad_descriptor_bind_fails_ebadf),
		cmocka_unit_test(bad_address_bind_fails_before_descriptor_check),
		cmocka_unit_test(bad_descriptor_send_recv_fail_ebadf),
		cmocka_unit_test(bad_descriptor_other_calls_fail_ebadf),
		cmocka_unit_test(good_cidr_parse_writes_address_and_prefix),
		cmocka_unit_test(bad_cidr_parse_fails_outputs_untouched),
		cmocka_unit_test(signed_or_spaced_prefix_cidr_parse_fails),
		cmocka_unit_test(null_config_node_start_fails_einval),
		cmocka_unit_test(bad_configs_node_start_fail_einval),
		cmocka_unit_test(bad_ipv6_configs_node_start_fail_einval),
		cmocka_unit_test(cidr6_parse_takes_ipv6_with_prefix_rejects_others),
		cmocka_unit_test(sockaddr_calls_check_family_before_descriptor),
		cmocka_unit_test(node_start_sized_reads_only_the_callers_structure),
		cmocka_unit_test(node_start_sized_refuses_sizes_and_settings_it_does_not_know),
		cmocka_unit_test(nonexistent_tap_node_start_fails_negative_errno),
		cmocka_unit_test(no_node_stop_is_noop),
		cmocka_unit_test(null_out_counters_returns_count),
		cmocka_unit_test(all_counters_names_unique_values_zero),
		cmocka_unit_test(short_array_counters_fills_only_n),
		cmocka_unit_test(drop_verdict_counted_counter_increments),
		cmocka_unit_test(named_errs_err_to_errno_maps_exactly),
		cmocka_unit_test(every_lwip_err_err_to_errno_negative_not_eio),
		cmocka_unit_test(unknown_err_err_to_errno_is_eio),
		cmocka_unit_test(lease_call_with_core_lock_held_aborts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
