/* stack/cubic.c: RFC 9438's window arithmetic (β_cubic, W_max and fast convergence, K,
 * W_cubic(t), the Reno-friendly W_est and its α, the 1.5 * cwnd clamp, the timeout rule),
 * with windows in bytes and times in ms as lwIP gives them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cubic.h"

#define MSS 1000u

static void ssthresh_is_0_7_of_flight_at_least_two_segments(void **state)
{
	struct stk_cubic c;

	(void)state;
	memset(&c, 0, sizeof(c));
	/* §4.6: ssthresh = flight_size * β_cubic, cwnd (far larger) does not count */
	assert_int_equal(stk__cubic_loss(&c, 70 * MSS, 20 * MSS, MSS), 14 * MSS);
	assert_int_equal(c.w_max, 20 * MSS);
	assert_int_equal(c.cwnd_prior, 20 * MSS);
	/* "ssthresh = max(ssthresh, 2)" */
	assert_int_equal(stk__cubic_loss(&c, 2 * MSS, 2 * MSS, MSS), 2 * MSS);
}

static void fast_convergence_lowers_w_max(void **state)
{
	struct stk_cubic c;

	(void)state;
	memset(&c, 0, sizeof(c));
	stk__cubic_loss(&c, 0, 100 * MSS, MSS);
	assert_int_equal(c.w_max, 100 * MSS);
	/* §4.7: a loss below the last W_max: W_max = cwnd * (1 + β_cubic) / 2 */
	stk__cubic_loss(&c, 0, 80 * MSS, MSS);
	assert_int_equal(c.w_max, 68 * MSS);
	/* and at or above it, W_max = cwnd */
	stk__cubic_loss(&c, 0, 90 * MSS, MSS);
	assert_int_equal(c.w_max, 90 * MSS);
}

static void k_puts_w_cubic_back_at_w_max(void **state)
{
	struct stk_cubic c;

	(void)state;
	memset(&c, 0, sizeof(c));
	uint32_t ss = stk__cubic_loss(&c, 0, 100 * MSS, MSS);     /* W_max 100, ssthresh 70 */
	stk__cubic_ack(&c, ss, MSS, MSS, 5000, 0);               /* the stage begins */
	/* §4.2 equation 2: K = cubic_root((100 - 70) / 0.4) s = 4.217 s */
	assert_in_range(c.k_ms, 4216, 4218);
	/* W_cubic(0) = cwnd_epoch, W_cubic(K) = W_max, symmetric around K */
	assert_in_range((uint32_t)stk__cubic_w(&c, 0, MSS), 70 * MSS - 5, 70 * MSS + 5);
	assert_in_range((uint32_t)stk__cubic_w(&c, c.k_ms, MSS), 100 * MSS - 1, 100 * MSS + 1);
	assert_in_range((uint32_t)stk__cubic_w(&c, 2 * c.k_ms, MSS), 130 * MSS - 5, 130 * MSS + 5);
}

static void reno_friendly_region_grows_by_alpha_per_window(void **state)
{
	struct stk_cubic c;
	uint32_t cwnd;

	(void)state;
	memset(&c, 0, sizeof(c));
	cwnd = stk__cubic_loss(&c, 0, 20 * MSS, MSS);            /* 14 segments */
	/* one window of ACKs, one segment each, within a millisecond: K is 2.47 s, so
	 * W_cubic(t) stays near cwnd_epoch and W_est sets the window (§4.3) */
	for (int i = 0; i < 14; i++)
		cwnd = stk__cubic_ack(&c, cwnd, MSS, MSS, 100, 0);
	/* W_est += α_cubic * segments_acked / cwnd: about 0.53 of a segment per window */
	assert_in_range(cwnd, 14 * MSS + 500, 14 * MSS + 545);
	assert_true(c.w_est >= 14 * MSS + 500);
}

static void alpha_becomes_one_once_w_est_reaches_cwnd_prior(void **state)
{
	struct stk_cubic c;
	uint32_t cwnd, before;

	(void)state;
	memset(&c, 0, sizeof(c));
	cwnd = stk__cubic_loss(&c, 0, 20 * MSS, MSS);
	int n = 0;
	while (c.w_est < c.cwnd_prior && n++ < 10000)
		cwnd = stk__cubic_ack(&c, cwnd, MSS, MSS, 0, 0);
	assert_true(c.w_est >= c.cwnd_prior);
	/* §4.3: "the sender SHOULD set α_cubic to 1": one segment per window from here */
	before = cwnd;
	uint32_t wnd = cwnd / MSS;
	for (uint32_t i = 0; i < wnd; i++)
		cwnd = stk__cubic_ack(&c, cwnd, MSS, MSS, 0, 0);
	assert_in_range(cwnd - before, MSS - 60, MSS + 10);
}

static void concave_then_convex_growth_toward_and_past_w_max(void **state)
{
	struct stk_cubic c;
	uint32_t cwnd;

	(void)state;
	memset(&c, 0, sizeof(c));
	cwnd = stk__cubic_loss(&c, 0, 1000 * MSS, MSS);          /* W_max 1000, cwnd 700 */
	cwnd = stk__cubic_ack(&c, cwnd, MSS, MSS, 0, 100);        /* t = 0, K = 9.09 s */
	/* ACK a window at a time, one window per 100 ms round trip (W_est gains only 0.53
	 * of a segment per round trip, 48 in K): half way the window has covered 7/8 of
	 * the way back (concave region, §4.4), after K it is back at W_max, and it goes on
	 * growing past it (convex region, §4.5) */
	uint32_t t;
	for (t = 100; t <= c.k_ms / 2; t += 100)
		cwnd = stk__cubic_ack(&c, cwnd, cwnd, MSS, t, 100);
	assert_in_range(cwnd, 955 * MSS, 975 * MSS);
	for (; t <= c.k_ms; t += 100)
		cwnd = stk__cubic_ack(&c, cwnd, cwnd, MSS, t, 100);
	assert_in_range(cwnd, 995 * MSS, 1005 * MSS);
	for (; t <= c.k_ms + 5000; t += 100)
		cwnd = stk__cubic_ack(&c, cwnd, cwnd, MSS, t, 100);
	/* W_cubic(K + 5 s + RTT) = W_max + 0.4 * 5.1^3 = 1053 segments */
	assert_in_range(cwnd, 1040 * MSS, 1060 * MSS);
}

static void growth_per_ack_is_clamped_to_half_of_what_it_acknowledges(void **state)
{
	struct stk_cubic c;

	(void)state;
	memset(&c, 0, sizeof(c));
	uint32_t cwnd = stk__cubic_loss(&c, 0, 10 * MSS, MSS);    /* cwnd 7 */
	stk__cubic_ack(&c, cwnd, MSS, MSS, 0, 0);
	/* 100 s later W_cubic is enormous: the target is at most 1.5 * cwnd (§4.2) */
	uint32_t next = stk__cubic_ack(&c, cwnd, cwnd, MSS, 100000, 0);
	assert_in_range(next, cwnd, cwnd + cwnd / 2);
	assert_true(next > cwnd + cwnd / 2 - 10);
}

static void after_timeout_k_is_zero_and_w_max_the_starting_cwnd(void **state)
{
	struct stk_cubic c;

	(void)state;
	memset(&c, 0, sizeof(c));
	stk__cubic_loss(&c, 0, 100 * MSS, MSS);
	stk__cubic_timeout(&c);
	/* slow start from one segment ended at 30 segments: §4.8 */
	stk__cubic_ack(&c, 30 * MSS, MSS, MSS, 777, 0);
	assert_int_equal(c.k_ms, 0);
	assert_int_equal(c.w_max, 30 * MSS);
	assert_int_equal(c.cwnd_epoch, 30 * MSS);
}

static void window_never_shrinks_on_an_ack(void **state)
{
	struct stk_cubic c;

	(void)state;
	memset(&c, 0, sizeof(c));
	stk__cubic_loss(&c, 0, 100 * MSS, MSS);
	/* cwnd above W_max (an application-limited flight at the loss): the stage starts
	 * from it, W_max = cwnd, and the window only grows */
	assert_in_range(stk__cubic_ack(&c, 200 * MSS, MSS, MSS, 0, 0), 200 * MSS, 200 * MSS + 10);
	assert_int_equal(stk__cubic_ack(&c, 0, MSS, MSS, 0, 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ssthresh_is_0_7_of_flight_at_least_two_segments),
		cmocka_unit_test(fast_convergence_lowers_w_max),
		cmocka_unit_test(k_puts_w_cubic_back_at_w_max),
		cmocka_unit_test(reno_friendly_region_grows_by_alpha_per_window),
		cmocka_unit_test(alpha_becomes_one_once_w_est_reaches_cwnd_prior),
		cmocka_unit_test(concave_then_convex_growth_toward_and_past_w_max),
		cmocka_unit_test(growth_per_ack_is_clamped_to_half_of_what_it_acknowledges),
		cmocka_unit_test(after_timeout_k_is_zero_and_w_max_the_starting_cwnd),
		cmocka_unit_test(window_never_shrinks_on_an_ack),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
