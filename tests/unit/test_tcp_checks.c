/* stack/tcp_checks.c: the pure decisions of the TCP input checks (RFC 9293 §3.10.7.4,
 * RFC 5961 §5.2 and §7, RFC 7323 §5). The 24-day rule of RFC 7323 §5.5 is tested only
 * here: no conformance run can wait 24 days. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "internal.h"

#define DAY_MS (24ull * 3600 * 1000)

static void zero_len_segment_acceptable_only_inside_window(void **state)
{
	(void)state;
	assert_true(stk__tcp_seq_acceptable(1000, 0, 1000, 100));
	assert_true(stk__tcp_seq_acceptable(1099, 0, 1000, 100));
	assert_false(stk__tcp_seq_acceptable(1100, 0, 1000, 100));
	assert_false(stk__tcp_seq_acceptable(999, 0, 1000, 100));
}

static void data_segment_overlapping_left_edge_acceptable(void **state)
{
	(void)state;
	assert_true(stk__tcp_seq_acceptable(990, 20, 1000, 100));   /* ends inside */
	assert_false(stk__tcp_seq_acceptable(980, 20, 1000, 100));  /* all old */
	assert_true(stk__tcp_seq_acceptable(1090, 50, 1000, 100));  /* starts inside */
}

static void zero_window_accepts_only_rcv_nxt(void **state)
{
	(void)state;
	assert_true(stk__tcp_seq_acceptable(1000, 0, 1000, 0));
	assert_true(stk__tcp_seq_acceptable(1000, 1, 1000, 0));   /* probe: its ACK is read */
	assert_false(stk__tcp_seq_acceptable(1001, 0, 1000, 0));
}

static void sequence_check_wraps(void **state)
{
	(void)state;
	assert_true(stk__tcp_seq_acceptable(5, 10, 0xfffffff0u, 100));
	assert_false(stk__tcp_seq_acceptable(0x7ffffff0u, 10, 0xfffffff0u, 100));
}

static void ack_range_is_snd_una_minus_max_window_to_snd_nxt(void **state)
{
	(void)state;
	assert_true(stk__tcp_ack_acceptable(5000, 5000, 6000, 1000));
	assert_true(stk__tcp_ack_acceptable(6000, 5000, 6000, 1000));
	assert_true(stk__tcp_ack_acceptable(4000, 5000, 6000, 1000));
	assert_false(stk__tcp_ack_acceptable(3999, 5000, 6000, 1000));
	assert_false(stk__tcp_ack_acceptable(6001, 5000, 6000, 1000));
	assert_true(stk__tcp_ack_acceptable(10, 0xfffffff0u, 20, 100));  /* wraps */
}

static void older_tsval_rejected_newer_and_equal_accepted(void **state)
{
	bool expired;
	(void)state;
	assert_true(stk__tcp_paws_reject(999, 1000, 10, 0, &expired));
	assert_false(expired);
	assert_false(stk__tcp_paws_reject(1000, 1000, 10, 0, &expired));
	assert_false(stk__tcp_paws_reject(1001, 1000, 10, 0, &expired));
	/* "older" is modulo 2^32: 5 is newer than 0xfffffff0 */
	assert_false(stk__tcp_paws_reject(5, 0xfffffff0u, 10, 0, &expired));
}

static void ts_recent_invalid_after_24_days_idle(void **state)
{
	bool expired;
	uint64_t t0 = 1000;
	(void)state;
	assert_true(stk__tcp_paws_reject(1, 1000, t0 + 24 * DAY_MS - 1, t0, &expired));
	assert_false(expired);
	assert_false(stk__tcp_paws_reject(1, 1000, t0 + 24 * DAY_MS + 1, t0, &expired));
	assert_true(expired);
}

static void ack_budget_ten_per_five_seconds(void **state)
{
	uint64_t start = 0;
	uint16_t used = 0;
	int sent = 0;
	(void)state;
	for (int i = 0; i < 30; i++)
		sent += stk__tcp_ack_budget(&start, &used, 100);
	assert_int_equal(sent, 10);
	assert_false(stk__tcp_ack_budget(&start, &used, 4999));
	assert_true(stk__tcp_ack_budget(&start, &used, 5100));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(zero_len_segment_acceptable_only_inside_window),
		cmocka_unit_test(data_segment_overlapping_left_edge_acceptable),
		cmocka_unit_test(zero_window_accepts_only_rcv_nxt),
		cmocka_unit_test(sequence_check_wraps),
		cmocka_unit_test(ack_range_is_snd_una_minus_max_window_to_snd_nxt),
		cmocka_unit_test(older_tsval_rejected_newer_and_equal_accepted),
		cmocka_unit_test(ts_recent_invalid_after_24_days_idle),
		cmocka_unit_test(ack_budget_ten_per_five_seconds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
