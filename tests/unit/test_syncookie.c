/* stack/syncookie.c: SYN cookies (RFC 4987 §3.6) made and checked with the clock given:
 * what a cookie carries back, and what makes one fail (another tuple, another ISN, age).
 * The ages are tested only here: no conformance run waits 3 minutes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "hooks.h"
#include "internal.h"
#include "lwip/tcp.h"

#define TICK_MS 64000ull
#define T0      (1000 * TICK_MS + 1234)   /* an arbitrary clock reading, in ms */

/* The SYN every test starts from; tests spell out what differs. */
static struct tcp_syncookie syn(void)
{
	struct tcp_syncookie c;

	memset(&c, 0, sizeof(c));
	IP_ADDR4(&c.local_ip, 198, 18, 0, 2);
	IP_ADDR4(&c.remote_ip, 198, 19, 7, 9);
	c.local_port = 5001;
	c.remote_port = 40000;
	c.irs = 0x12345678u;
	c.mss = 1460;
	c.snd_scale = 7;
	c.sack = 1;
	c.ts = 1;
	c.ts_peer = 777;
	return c;
}

/* The ACK that returns c's cookie, as lwIP hands it to the check. */
static struct tcp_syncookie ack_of(const struct tcp_syncookie *c)
{
	struct tcp_syncookie a = syn();

	a.iss = c->iss;
	a.ts_own = c->ts_own;
	a.mss = 0;
	a.snd_scale = 0;
	a.sack = 0;
	return a;
}

static void cookie_returned_at_once_opens_with_the_syn_options(void **state)
{
	(void)state;
	struct tcp_syncookie c = syn();
	stk__cookie_encode(&c, T0);
	struct tcp_syncookie a = ack_of(&c);
	assert_true(stk__cookie_decode(&a, T0 + 50));
	assert_int_equal(a.mss, 1460);
	assert_int_equal(a.snd_scale, 7);
	assert_int_equal(a.sack, 1);
}

static void cookie_good_for_two_ticks_then_refused(void **state)
{
	(void)state;
	struct tcp_syncookie c = syn();
	stk__cookie_encode(&c, T0);
	struct tcp_syncookie a = ack_of(&c);
	assert_true(stk__cookie_decode(&a, T0 + 2 * TICK_MS));
	a = ack_of(&c);
	assert_false(stk__cookie_decode(&a, T0 + 3 * TICK_MS));
}

static void cookie_of_another_tuple_or_isn_refused(void **state)
{
	(void)state;
	struct tcp_syncookie c = syn();
	stk__cookie_encode(&c, T0);

	struct tcp_syncookie a = ack_of(&c);
	a.irs += 1;  /* SEG.SEQ not the SYN's ISN + 1 */
	assert_false(stk__cookie_decode(&a, T0));
	a = ack_of(&c);
	a.remote_port = 40001;
	assert_false(stk__cookie_decode(&a, T0));
	a = ack_of(&c);
	IP_ADDR4(&a.remote_ip, 198, 19, 7, 10);
	assert_false(stk__cookie_decode(&a, T0));
	a = ack_of(&c);
	a.iss ^= 1;
	assert_false(stk__cookie_decode(&a, T0));
}

/* IPv6 (issue 17): the MAC covers all 16 octets of both addresses, so a cookie made for
 * one peer does not open a connection for another that differs only past its first 4
 * octets (the same /32), nor for an IPv4 peer. */
static void ipv6_cookie_of_a_peer_differing_past_the_first_4_octets_refused(void **state)
{
	(void)state;
	struct tcp_syncookie c = syn();
	IP_ADDR6(&c.local_ip, PP_HTONL(0x20010db8), 0, 0, PP_HTONL(1));
	IP_ADDR6(&c.remote_ip, PP_HTONL(0x20010db8), 0, 0, PP_HTONL(2));
	stk__cookie_encode(&c, T0);

	struct tcp_syncookie a = ack_of(&c);
	a.local_ip = c.local_ip;
	a.remote_ip = c.remote_ip;
	assert_true(stk__cookie_decode(&a, T0));
	a = ack_of(&c);
	a.local_ip = c.local_ip;
	IP_ADDR6(&a.remote_ip, PP_HTONL(0x20010db8), 0, 0, PP_HTONL(3));
	assert_false(stk__cookie_decode(&a, T0));
	a = ack_of(&c);
	a.local_ip = c.local_ip;
	IP_ADDR6(&a.remote_ip, PP_HTONL(0x20010db8), PP_HTONL(1), 0, PP_HTONL(2));
	assert_false(stk__cookie_decode(&a, T0));
}

static void mss_rounded_down_to_the_table(void **state)
{
	(void)state;
	static const struct { uint16_t in, out; } cases[] = {
		{ 536, 536 }, { 1000, 536 }, { 1460, 1460 }, { 1500, 1460 }, { 8960, 8960 },
		{ 9000, 8960 }, { 65495, 65481 }, { 100, 536 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct tcp_syncookie c = syn();
		c.mss = cases[i].in;
		stk__cookie_encode(&c, T0);
		struct tcp_syncookie a = ack_of(&c);
		assert_true(stk__cookie_decode(&a, T0));
		assert_int_equal(a.mss, cases[i].out);
	}
}

static void no_window_scale_and_no_sack_carried_as_such(void **state)
{
	(void)state;
	struct tcp_syncookie c = syn();
	c.snd_scale = TCP_SYNCOOKIE_NO_WS;
	c.sack = 0;
	stk__cookie_encode(&c, T0);
	struct tcp_syncookie a = ack_of(&c);
	assert_true(stk__cookie_decode(&a, T0));
	assert_int_equal(a.snd_scale, TCP_SYNCOOKIE_NO_WS);
	assert_int_equal(a.sack, 0);
}

static void ack_without_timestamps_opens_without_scale_and_sack(void **state)
{
	(void)state;
	struct tcp_syncookie c = syn();
	stk__cookie_encode(&c, T0);
	struct tcp_syncookie a = ack_of(&c);
	a.ts = 0;
	assert_true(stk__cookie_decode(&a, T0));
	assert_int_equal(a.snd_scale, TCP_SYNCOOKIE_NO_WS);
	assert_int_equal(a.sack, 0);
}

static void tsval_never_ahead_of_the_clock_and_tsecr_from_the_future_refused(void **state)
{
	(void)state;
	for (uint64_t now = T0; now < T0 + 64; now++) {
		struct tcp_syncookie c = syn();
		stk__cookie_encode(&c, now);
		assert_true((int32_t)((uint32_t)now - c.ts_own) >= 0);
		assert_true((uint32_t)now - c.ts_own < 32);
	}
	struct tcp_syncookie c = syn();
	stk__cookie_encode(&c, T0);
	struct tcp_syncookie a = ack_of(&c);
	a.ts_own += 64;  /* an echo of a TSval we never sent */
	assert_false(stk__cookie_decode(&a, T0));
}

/* Through the hooks, on the real clock: a cookie made a moment ago is checked as one
 * (the listener counts as having sent cookies recently), whatever the millisecond.
 * Found on the relay path: a stamp of now | 1 made every other check fail. */
static void listener_checks_the_cookie_it_just_made(void **state)
{
	(void)state;
	struct tcp_pcb_listen l;
	memset(&l, 0, sizeof(l));
	l.backlog = 4;
	for (int i = 0; i < 40; i++) {
		struct tcp_syncookie c = syn();
		stk__syncookie_make(&l, &c);
		struct tcp_syncookie a = ack_of(&c);
		struct timespec ns = { 0, 300000 };
		nanosleep(&ns, NULL);
		assert_int_equal(stk__syncookie_check(&l, &a), 1);
	}
	struct tcp_syncookie c = syn();
	stk__syncookie_make(&l, &c);
	struct tcp_syncookie a = ack_of(&c);
	a.iss ^= 0x10;
	assert_int_equal(stk__syncookie_check(&l, &a), -1);  /* counted, and reset */
}

static void listener_without_cookies_out_does_not_check(void **state)
{
	(void)state;
	struct tcp_pcb_listen l;
	memset(&l, 0, sizeof(l));
	struct tcp_syncookie c = syn();
	stk__cookie_encode(&c, stk__now_ms());
	struct tcp_syncookie a = ack_of(&c);
	assert_int_equal(stk__syncookie_check(&l, &a), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cookie_returned_at_once_opens_with_the_syn_options),
		cmocka_unit_test(cookie_good_for_two_ticks_then_refused),
		cmocka_unit_test(cookie_of_another_tuple_or_isn_refused),
		cmocka_unit_test(ipv6_cookie_of_a_peer_differing_past_the_first_4_octets_refused),
		cmocka_unit_test(mss_rounded_down_to_the_table),
		cmocka_unit_test(no_window_scale_and_no_sack_carried_as_such),
		cmocka_unit_test(ack_without_timestamps_opens_without_scale_and_sack),
		cmocka_unit_test(tsval_never_ahead_of_the_clock_and_tsecr_from_the_future_refused),
		cmocka_unit_test(listener_checks_the_cookie_it_just_made),
		cmocka_unit_test(listener_without_cookies_out_does_not_check),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
