/* netif/opt/opt.c: the command-line values every program shares: ranges, lists, words,
 * durations and the A.B.C.D/NN parser. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>

#include <cmocka.h>

#include "netif/opt/opt.h"

#define UNTOUCHED 0x5a5a5a5a5a5a5a5aull

static void number_in_range_accepted_suffix_scales(void **state)
{
	unsigned long long v = UNTOUCHED;
	unsigned u = 0;
	(void)state;

	assert_int_equal(opt__num("t", "n", "1", 1, 65535, &v), 0);
	assert_int_equal(v, 1);
	assert_int_equal(opt__num("t", "n", "64K", 1, 1ull << 20, &v), 0);
	assert_int_equal(v, 65536);
	assert_int_equal(opt__uint("t", "n", "65535", 1, 65535, &u), 0);
	assert_int_equal(u, 65535);
}

static void number_out_of_range_or_malformed_rejected_output_untouched(void **state)
{
	static const char *const bad[] = { "0", "65536", "", "-1", " 1", "1x", "0x10", "+5",
					   "99999999999999999999" };
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		unsigned long long v = UNTOUCHED;
		if (opt__num("t", "n", bad[i], 1, 65535, &v) != -EINVAL)
			fail_msg("'%s' accepted", bad[i]);
		if (v != UNTOUCHED)
			fail_msg("'%s': output written on failure", bad[i]);
	}
}

static void seconds_fractions_accepted_inf_nan_sign_rejected(void **state)
{
	static const char *const bad[] = { "inf", "nan", "-1", " 1", "1e9", "0.09", "", "1s" };
	double d = -1;
	(void)state;

	assert_int_equal(opt__seconds("t", "s", "2.5", 0.1, 600, &d), 0);
	assert_true(d == 2.5);
	assert_int_equal(opt__seconds("t", "s", ".5", 0.1, 600, &d), 0);
	assert_true(d == 0.5);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		d = -1;
		if (opt__seconds("t", "s", bad[i], 0.1, 600, &d) != -EINVAL || d != -1)
			fail_msg("'%s' accepted", bad[i]);
	}
}

static void word_returns_its_index_unknown_rejected(void **state)
{
	static const char *const w[] = { "auto", "direct", "relay" };
	(void)state;

	assert_int_equal(opt__word("t", "w", "relay", w, 3), 2);
	assert_int_equal(opt__word("t", "w", "auto", w, 3), 0);
	assert_int_equal(opt__word("t", "w", "Relay", w, 3), -EINVAL);
	assert_int_equal(opt__word("t", "w", "", w, 3), -EINVAL);
}

static void number_list_in_order_empty_entries_rejected(void **state)
{
	static const char *const bad[] = { "", ",", "1,", ",1", "1,,8", "1,0", "1,8,64,512",
					   "1,x" };
	unsigned long long v[3];
	(void)state;

	assert_int_equal(opt__num_list("t", "streams", "1,8,64", 1, 100, v, 3), 3);
	assert_int_equal(v[0], 1);
	assert_int_equal(v[1], 8);
	assert_int_equal(v[2], 64);
	assert_int_equal(opt__num_list("t", "streams", "4K", 1, 1 << 20, v, 3), 1);
	assert_int_equal(v[0], 4096);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (opt__num_list("t", "streams", bad[i], 1, 100, v, 3) != -EINVAL)
			fail_msg("'%s' accepted", bad[i]);
}

static void word_list_each_once_repeats_rejected(void **state)
{
	static const char *const w[] = { "perproc", "relay", "kernel" };
	unsigned idx[3];
	(void)state;

	assert_int_equal(opt__word_list("t", "mode", "kernel,perproc", w, 3, idx), 2);
	assert_int_equal(idx[0], 2);
	assert_int_equal(idx[1], 0);
	assert_int_equal(opt__word_list("t", "mode", "relay,relay", w, 3, idx), -EINVAL);
	assert_int_equal(opt__word_list("t", "mode", "relay,,kernel", w, 3, idx), -EINVAL);
	assert_int_equal(opt__word_list("t", "mode", "tcp", w, 3, idx), -EINVAL);
	assert_int_equal(opt__word_list("t", "mode", "", w, 3, idx), -EINVAL);
}

static void cidr_prefix_1_to_30_anything_else_einval(void **state)
{
	static const char *const bad[] = { "1.2.3.4", "1.2.3.4/0", "1.2.3.4/31", "1.2.3.4/",
					   "1.2.3.4/ 8", "1.2.3.4/-8", "1.2.3/8", "1.2.3.4/8x",
					   "999.2.3.4/8", "/8" };
	struct in_addr a = { 0 };
	unsigned plen = 0;
	(void)state;

	assert_int_equal(opt__parse_cidr("198.18.0.1/24", &a, &plen), 0);
	assert_int_equal(a.s_addr, htonl(0xc6120001));
	assert_int_equal(plen, 24);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		a.s_addr = 7;
		plen = 7;
		if (opt__parse_cidr(bad[i], &a, &plen) != -EINVAL || a.s_addr != 7 || plen != 7)
			fail_msg("'%s' accepted or output written", bad[i]);
	}
}

/* What opt__help_or_bad's usage callback was given. */
static FILE *usage_to;
static int usage_calls;

static void record_usage(FILE *f)
{
	usage_to = f;
	usage_calls++;
}

static void help_goes_to_stdout_and_0_anything_else_to_stderr_and_2(void **state)
{
	(void)state;
	assert_int_equal(opt__help_or_bad('h', record_usage), 0);
	assert_ptr_equal(usage_to, stdout);
	assert_int_equal(opt__help_or_bad('?', record_usage), 2);
	assert_ptr_equal(usage_to, stderr);
	assert_int_equal(opt__help_or_bad(':', record_usage), 2);
	assert_ptr_equal(usage_to, stderr);
	assert_int_equal(usage_calls, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(number_in_range_accepted_suffix_scales),
		cmocka_unit_test(number_out_of_range_or_malformed_rejected_output_untouched),
		cmocka_unit_test(seconds_fractions_accepted_inf_nan_sign_rejected),
		cmocka_unit_test(word_returns_its_index_unknown_rejected),
		cmocka_unit_test(number_list_in_order_empty_entries_rejected),
		cmocka_unit_test(word_list_each_once_repeats_rejected),
		cmocka_unit_test(cidr_prefix_1_to_30_anything_else_einval),
		cmocka_unit_test(help_goes_to_stdout_and_0_anything_else_to_stderr_and_2),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
