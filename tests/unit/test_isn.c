/* netif/siphash.c: SipHash-2-4, stack/isn.c: the RFC 6528 initial sequence number generator,
 * and stack/port.c's random values (the ISN secret's, the handoff nonces' source). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "hooks.h"

#include "netif/siphash.h"

static void key_00_0f(uint8_t key[16])
{
	for (int i = 0; i < 16; i++)
		key[i] = (uint8_t)i;
}

static void reference_key_15_byte_message_siphash_matches_paper(void **state)
{
	uint8_t key[16], msg[15];
	(void)state;

	/* SipHash paper, Appendix A: key 00..0f, message 00..0e. */
	key_00_0f(key);
	for (int i = 0; i < 15; i++)
		msg[i] = (uint8_t)i;
	assert_true(nif_siphash24(key, msg, sizeof(msg)) == 0xa129ca6149be45e5ull);
}

static void reference_key_empty_message_siphash_matches_vector(void **state)
{
	uint8_t key[16];
	(void)state;

	key_00_0f(key);
	assert_true(nif_siphash24(key, "", 0) == 0x726fdb47dd0e0e31ull);
}

static void reference_key_8_byte_message_siphash_matches_vector(void **state)
{
	uint8_t key[16], msg[8];
	(void)state;

	/* The reference implementation's vectors.h, entry 8 (one full block, then the
	 * length-only final block). */
	key_00_0f(key);
	for (int i = 0; i < 8; i++)
		msg[i] = (uint8_t)i;
	assert_true(nif_siphash24(key, msg, sizeof(msg)) == 0x93f5f5799a932462ull);
}

static void one_key_bit_flipped_siphash_changes(void **state)
{
	uint8_t key[16], msg[12] = { 0 };
	(void)state;

	key_00_0f(key);
	uint64_t h = nif_siphash24(key, msg, sizeof(msg));
	key[15] ^= 0x80;
	assert_true(nif_siphash24(key, msg, sizeof(msg)) != h);
}

static ip_addr_t addr(uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
	ip_addr_t ip;

	memset(&ip, 0, sizeof(ip));
	ip_2_ip4(&ip)->addr = lwip_htonl((uint32_t)a << 24 | (uint32_t)b << 16 | (uint32_t)c << 8 | d);
	return ip;
}

/* ISNs of one tuple taken at `before` and `after` differ by M's 4-us ticks alone; another
 * tuple's ISN x, taken between them, must land outside that span (with a margin of SLACK
 * ticks either side): F moved it. With a random secret F is uniform, so x falls inside by
 * chance with probability (after - before + 2 * SLACK) / 2^32, about 6e-8 per call when the
 * calls are microseconds apart. (A fixed margin of 100,000 either side made that 5e-5 per
 * call and failed once in a CI run, stop 38.) */
#define SLACK 64u

static void assert_far(u32_t x, u32_t before, u32_t after)
{
	if (x - (before - SLACK) <= (after - before) + 2 * SLACK)
		fail_msg("ISN %#x lies within the clock's span %#x..%#x of the other tuple's",
			 x, before, after);
}

static void different_tuples_isn_differs_beyond_clock(void **state)
{
	ip_addr_t l = addr(198, 18, 0, 1), r = addr(198, 18, 0, 2);
	ip_addr_t l2 = addr(198, 18, 0, 3), r2 = addr(198, 18, 0, 4);
	(void)state;

	u32_t before = stk__tcp_isn(&l, 5000, &r, 80);
	u32_t x[] = {
		stk__tcp_isn(&l2, 5000, &r, 80),   /* local address */
		stk__tcp_isn(&l, 5001, &r, 80),    /* local port */
		stk__tcp_isn(&l, 5000, &r2, 80),   /* remote address */
		stk__tcp_isn(&l, 5000, &r, 81),    /* remote port */
		stk__tcp_isn(&r, 80, &l, 5000),    /* the reverse direction */
		stk__tcp_isn(&l, 80, &r, 5000),    /* ports swapped */
	};
	u32_t after = stk__tcp_isn(&l, 5000, &r, 80);
	for (size_t i = 0; i < sizeof(x) / sizeof(x[0]); i++)
		assert_far(x[i], before, after);
}

static ip_addr_t addr6(uint8_t last, uint8_t at)
{
	ip_addr_t ip;

	memset(&ip, 0, sizeof(ip));
	IP_SET_TYPE_VAL(ip, IPADDR_TYPE_V6);
	uint8_t *b = (uint8_t *)ip_2_ip6(&ip)->addr;
	b[0] = 0x20; b[1] = 0x01; b[2] = 0x0d; b[3] = 0xb8;
	b[at] ^= 0x40;   /* a bit beyond the first 4 octets when at >= 4 */
	b[15] = last;
	return ip;
}

/* RFC 6528 §3: F covers the whole connection-id. For IPv6, peers that differ only past
 * their first 4 octets (every 2001:db8::/32 host) must still get far-apart ISNs. */
static void ipv6_tuples_differing_past_the_first_4_octets_isn_differs(void **state)
{
	ip_addr_t l = addr6(1, 0), r = addr6(2, 0), r2 = addr6(2, 8), l2 = addr6(1, 12);
	ip_addr_t r3 = addr6(3, 0);
	(void)state;

	u32_t before = stk__tcp_isn(&l, 5000, &r, 80);
	u32_t x[] = {
		stk__tcp_isn(&l, 5000, &r2, 80),   /* remote, interface id */
		stk__tcp_isn(&l2, 5000, &r, 80),   /* local, interface id */
		stk__tcp_isn(&l, 5000, &r3, 80),
	};
	u32_t after = stk__tcp_isn(&l, 5000, &r, 80);
	for (size_t i = 0; i < sizeof(x) / sizeof(x[0]); i++)
		assert_far(x[i], before, after);
}

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void same_tuple_10ms_later_isn_advances_by_4us_ticks(void **state)
{
	ip_addr_t l = addr(198, 18, 0, 1), r = addr(198, 18, 0, 2);
	struct timespec ten_ms = { 0, 10 * 1000 * 1000 };
	(void)state;

	int64_t t0 = now_us();
	u32_t a = stk__tcp_isn(&l, 40000, &r, 443);
	int64_t t1 = now_us();
	nanosleep(&ten_ms, NULL);
	int64_t t2 = now_us();
	u32_t b = stk__tcp_isn(&l, 40000, &r, 443);
	int64_t t3 = now_us();

	/* RFC 6528 §3: "M is the 4 microsecond timer". F is the same for both calls, so the
	 * difference is the time between them in 4 us ticks (1 tick of rounding each side). */
	int64_t d = (int64_t)(u32_t)(b - a);
	int64_t lo = (t2 - t1) / 4 - 1, hi = (t3 - t0) / 4 + 1;
	if (d < lo || d > hi)
		fail_msg("ISN advanced %lld ticks, expected %lld..%lld", (long long)d,
			 (long long)lo, (long long)hi);
	assert_true(d >= 2500 - 1);
}

uint32_t stk__random32(void);

/* Random values are drawn from a buffer filled ahead (port.c): a fork child must not draw
 * the values its parent draws next, though both hold the same buffer. The child sends its
 * next 4 values through a pipe; the parent draws its own 4 and compares. Also: no two of
 * 64 values in a row repeat (a buffer handed out twice would). */
static void fork_child_draws_values_its_parent_does_not(void **state)
{
	uint32_t mine[4], theirs[4], seen[64];
	int pfd[2], status;
	(void)state;

	for (int i = 0; i < 64; i++) {
		seen[i] = stk__random32();
		for (int j = 0; j < i; j++)
			assert_true(seen[i] != seen[j]);
	}
	(void)stk__random32();  /* the buffer is now part used */
	assert_int_equal(pipe(pfd), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		for (int i = 0; i < 4; i++)
			theirs[i] = stk__random32();
		_exit(write(pfd[1], theirs, sizeof(theirs)) == (ssize_t)sizeof(theirs) ? 0 : 1);
	}
	for (int i = 0; i < 4; i++)
		mine[i] = stk__random32();
	assert_int_equal(read(pfd[0], theirs, sizeof(theirs)), (ssize_t)sizeof(theirs));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(pfd[0]);
	close(pfd[1]);
	assert_true(memcmp(mine, theirs, sizeof(mine)) != 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reference_key_15_byte_message_siphash_matches_paper),
		cmocka_unit_test(reference_key_empty_message_siphash_matches_vector),
		cmocka_unit_test(reference_key_8_byte_message_siphash_matches_vector),
		cmocka_unit_test(one_key_bit_flipped_siphash_changes),
		cmocka_unit_test(different_tuples_isn_differs_beyond_clock),
		cmocka_unit_test(ipv6_tuples_differing_past_the_first_4_octets_isn_differs),
		cmocka_unit_test(same_tuple_10ms_later_isn_advances_by_4us_ticks),
		cmocka_unit_test(fork_child_draws_values_its_parent_does_not),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
