/* apps/pingstats.c: ulsping's round-trip statistics (mean, nearest-rank percentiles) and the
 * check of an echoed message. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "apps/pattern.h"
#include "apps/pingstats.h"

#define SEED 0x70696e67ull   /* "ping" */

static void known_vector_stats_match_hand_computed(void **state)
{
	double v[] = { 10, 20, 30, 40 };
	struct rtt_stats st;
	(void)state;

	assert_int_equal(bench__stats_compute(v, 4, &st), 0);
	assert_int_equal(st.n, 4);
	assert_true(st.mean == 25.0);
	assert_true(st.min == 10.0);
	assert_true(st.max == 40.0);
	assert_true(st.p50 == 20.0);   /* rank ceil(0.5 * 4) = 2 */
	assert_true(st.p99 == 40.0);   /* rank ceil(0.99 * 4) = 4 */
}

static void single_sample_every_statistic_is_it(void **state)
{
	double v[] = { 7.5 };
	struct rtt_stats st;
	(void)state;

	assert_int_equal(bench__stats_compute(v, 1, &st), 0);
	assert_true(st.mean == 7.5 && st.p50 == 7.5 && st.p99 == 7.5 && st.min == 7.5 &&
		    st.max == 7.5);
}

static void hundred_samples_p99_is_the_99th_not_the_max(void **state)
{
	double v[100];
	struct rtt_stats st;
	(void)state;

	for (int i = 0; i < 100; i++)
		v[i] = i + 1;          /* 1..100 */
	assert_int_equal(bench__stats_compute(v, 100, &st), 0);
	assert_true(st.p99 == 99.0);
	assert_true(st.p50 == 50.0);
	assert_true(st.mean == 50.5);
	assert_true(st.max == 100.0);
}

static void odd_count_p50_is_the_middle(void **state)
{
	double v[] = { 1, 2, 3 };   /* sorted, as the function expects */
	(void)state;

	assert_true(bench__percentile_sorted(v, 3, 50) == 2.0);   /* rank ceil(1.5) = 2 */
	assert_true(bench__percentile_sorted(v, 3, 99) == 3.0);
	assert_true(bench__percentile_sorted(v, 3, 0) == 1.0);    /* rank clamped to 1 */
	assert_true(bench__percentile_sorted(v, 3, 100) == 3.0);
}

static void unsorted_input_stats_equal_sorted_input(void **state)
{
	double shuffled[] = { 500, 3, 42, 7, 1000, 1, 99, 12, 64, 8 };
	double sorted[] = { 1, 3, 7, 8, 12, 42, 64, 99, 500, 1000 };
	struct rtt_stats a, b;
	(void)state;

	assert_int_equal(bench__stats_compute(shuffled, 10, &a), 0);
	assert_int_equal(bench__stats_compute(sorted, 10, &b), 0);
	assert_memory_equal(shuffled, sorted, sizeof(sorted));   /* sorted in place */
	assert_true(a.min == 1 && a.max == 1000);
	assert_true(a.p50 == 12);      /* rank 5 */
	assert_true(a.p99 == 1000);    /* rank ceil(9.9) = 10 */
	assert_true(a.mean == b.mean && a.p50 == b.p50 && a.p99 == b.p99);
	assert_true(a.mean == 173.6);
}

static void no_samples_stats_einval_output_untouched(void **state)
{
	double v[1] = { 1 };
	struct rtt_stats st = { .mean = -3 };
	(void)state;

	assert_int_equal(bench__stats_compute(v, 0, &st), -EINVAL);
	assert_int_equal(bench__stats_compute(NULL, 5, &st), -EINVAL);
	assert_true(st.mean == -3);
}

static void half_round_trip_bandwidth_in_mbps(void **state)
{
	(void)state;

	/* 1000 bytes in a 16 us round trip: 8000 bits in 8 us = 1000 Mbit/s */
	assert_true(bench__bandwidth_mbps(1000, 16.0) == 1000.0);
	assert_true(bench__bandwidth_mbps(1000, 0) == 0);
}

static void intact_echo_verifies(void **state)
{
	uint8_t buf[1024];
	uint64_t bad = 12345;
	(void)state;

	for (uint64_t round = 0; round < 5; round++) {
		bench__pattern_fill(SEED, round * sizeof(buf), buf, sizeof(buf));
		assert_int_equal(bench__echo_verify(SEED, round, buf, sizeof(buf), &bad), 0);
	}
	assert_int_equal(bad, 12345);   /* untouched on success */
}

static void corrupted_echo_detected_at_the_flipped_byte(void **state)
{
	uint8_t buf[1024];
	uint64_t bad = 0;
	(void)state;

	bench__pattern_fill(SEED, 3 * sizeof(buf), buf, sizeof(buf));
	buf[700] ^= 0x01;
	assert_int_equal(bench__echo_verify(SEED, 3, buf, sizeof(buf), &bad), -EBADMSG);
	assert_int_equal(bad, 3 * sizeof(buf) + 700);
}

static void echo_of_another_round_detected(void **state)
{
	uint8_t buf[64];
	(void)state;

	/* a stale or duplicated message: right bytes, wrong place in the stream */
	bench__pattern_fill(SEED, 1 * sizeof(buf), buf, sizeof(buf));
	assert_int_equal(bench__echo_verify(SEED, 2, buf, sizeof(buf), NULL), -EBADMSG);
}

static void one_byte_echo_wrong_byte_detected(void **state)
{
	uint8_t b;
	uint64_t bad = 0;
	(void)state;

	bench__pattern_fill(SEED, 9, &b, 1);
	assert_int_equal(bench__echo_verify(SEED, 9, &b, 1, NULL), 0);
	b = (uint8_t)~b;
	assert_int_equal(bench__echo_verify(SEED, 9, &b, 1, &bad), -EBADMSG);
	assert_int_equal(bad, 9);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(known_vector_stats_match_hand_computed),
		cmocka_unit_test(single_sample_every_statistic_is_it),
		cmocka_unit_test(hundred_samples_p99_is_the_99th_not_the_max),
		cmocka_unit_test(odd_count_p50_is_the_middle),
		cmocka_unit_test(unsorted_input_stats_equal_sorted_input),
		cmocka_unit_test(no_samples_stats_einval_output_untouched),
		cmocka_unit_test(half_round_trip_bandwidth_in_mbps),
		cmocka_unit_test(intact_echo_verifies),
		cmocka_unit_test(corrupted_echo_detected_at_the_flipped_byte),
		cmocka_unit_test(echo_of_another_round_detected),
		cmocka_unit_test(one_byte_echo_wrong_byte_detected),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
