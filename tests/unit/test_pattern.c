/* apps/pattern.c: the stream pattern every transfer sends and verifies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "apps/pattern.h"

#define SEED 0x5eedf00dull

static void odd_offsets_and_lengths_fill_then_check_passes(void **state)
{
	uint8_t buf[200];
	(void)state;

	for (uint64_t off = 0; off < 20; off++)
		for (size_t len = 0; len <= 67; len++) {
			memset(buf, 0, sizeof(buf));
			bench__pattern_fill(SEED, off, buf + 1, len);   /* unaligned buffer too */
			if (bench__pattern_check(SEED, off, buf + 1, len) != UINT64_MAX)
				fail_msg("off %llu len %zu does not verify", (unsigned long long)off, len);
			assert_int_equal(buf[0], 0);
			assert_int_equal(buf[1 + len], 0);   /* nothing written past len */
		}
}

static void pieces_at_any_split_fill_equals_whole(void **state)
{
	uint8_t whole[100], pieces[100];
	(void)state;

	bench__pattern_fill(SEED, 1000, whole, sizeof(whole));
	for (size_t cut = 0; cut <= sizeof(whole); cut++) {
		bench__pattern_fill(SEED, 1000, pieces, cut);
		bench__pattern_fill(SEED, 1000 + cut, pieces + cut, sizeof(pieces) - cut);
		assert_memory_equal(whole, pieces, sizeof(whole));
	}
}

#define BLOCK 65536u   /* the pattern's key changes every 64 KiB */

static void region_across_block_boundary_fill_equals_byte_by_byte(void **state)
{
	size_t len = 3 * 8 + BLOCK + 5;
	uint64_t off = BLOCK - 13;
	uint8_t *whole = malloc(len), *bytes = malloc(len);
	(void)state;

	assert_non_null(whole);
	assert_non_null(bytes);
	/* One call takes the word-at-a-time path; one-byte calls take the byte path. */
	bench__pattern_fill(SEED, off, whole, len);
	for (size_t i = 0; i < len; i++)
		bench__pattern_fill(SEED, off + i, bytes + i, 1);
	assert_memory_equal(whole, bytes, len);
	assert_true(bench__pattern_check(SEED, off, whole, len) == UINT64_MAX);
	free(whole);
	free(bytes);
}

static void swapped_64k_blocks_check_reports_first_block(void **state)
{
	uint8_t *buf = malloc(2 * BLOCK), *tmp = malloc(BLOCK);
	(void)state;

	assert_non_null(buf);
	assert_non_null(tmp);
	bench__pattern_fill(SEED, 0, buf, 2 * BLOCK);
	memcpy(tmp, buf, BLOCK);
	memmove(buf, buf + BLOCK, BLOCK);
	memcpy(buf + BLOCK, tmp, BLOCK);
	assert_true(bench__pattern_check(SEED, 0, buf, 2 * BLOCK) < 8);
	free(buf);
	free(tmp);
}

static void duplicated_64k_block_check_reports_second_block(void **state)
{
	uint8_t *buf = malloc(2 * BLOCK);
	(void)state;

	assert_non_null(buf);
	bench__pattern_fill(SEED, 0, buf, 2 * BLOCK);
	memcpy(buf + BLOCK, buf, BLOCK);
	uint64_t bad = bench__pattern_check(SEED, 0, buf, 2 * BLOCK);
	assert_true(bad >= BLOCK && bad < BLOCK + 8);
	free(buf);
}

static void one_flipped_byte_check_reports_its_stream_offset(void **state)
{
	uint8_t buf[64];
	const uint64_t off = (1ull << 40) + 3;   /* far into a stream, not word-aligned */
	(void)state;

	for (size_t i = 0; i < sizeof(buf); i++) {
		bench__pattern_fill(SEED, off, buf, sizeof(buf));
		buf[i] ^= 0x10;
		assert_true(bench__pattern_check(SEED, off, buf, sizeof(buf)) == off + i);
	}
}

/* Long buffers take the 64-byte runs (fill_run, check_run); a byte flipped anywhere in
 * them, on either side of a block boundary and in the words after the last whole run, is
 * still reported at its own offset. */
static void one_flipped_byte_in_runs_check_reports_its_stream_offset(void **state)
{
	enum { LEN = 1000 };
	uint8_t *buf = malloc(LEN);
	const uint64_t off = 3 * BLOCK - 517;   /* not word-aligned; a block boundary inside */
	(void)state;

	assert_non_null(buf);
	for (size_t i = 0; i < LEN; i++) {
		bench__pattern_fill(SEED, off, buf, LEN);
		buf[i] ^= 0x80;
		if (bench__pattern_check(SEED, off, buf, LEN) != off + i)
			fail_msg("flipped byte %zu reported at %llu", i,
				 (unsigned long long)(bench__pattern_check(SEED, off, buf, LEN) - off));
	}
	free(buf);
}

static void two_flipped_bytes_check_reports_first(void **state)
{
	uint8_t buf[64];
	(void)state;

	bench__pattern_fill(SEED, 5, buf, sizeof(buf));
	buf[40] ^= 1;
	buf[20] ^= 1;
	assert_true(bench__pattern_check(SEED, 5, buf, sizeof(buf)) == 25);
}

static void different_seeds_fill_differs(void **state)
{
	uint8_t a[64], b[64];
	(void)state;

	bench__pattern_fill(1, 0, a, sizeof(a));
	bench__pattern_fill(2, 0, b, sizeof(b));
	assert_memory_not_equal(a, b, sizeof(a));
	assert_true(bench__pattern_check(1, 0, b, sizeof(b)) != UINT64_MAX);
}

static void different_offsets_fill_differs(void **state)
{
	uint8_t a[64], b[64];
	(void)state;

	/* A reordered (shifted) stream must not verify. */
	bench__pattern_fill(SEED, 0, a, sizeof(a));
	bench__pattern_fill(SEED, 8, b, sizeof(b));
	assert_memory_not_equal(a, b, sizeof(a));
	assert_true(bench__pattern_check(SEED, 0, b, sizeof(b)) == 0);
}

static void empty_buffer_check_is_uint64_max(void **state)
{
	(void)state;
	assert_true(bench__pattern_check(SEED, 0, NULL, 0) == UINT64_MAX);
	assert_true(bench__pattern_check(SEED, 12345, "", 0) == UINT64_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(odd_offsets_and_lengths_fill_then_check_passes),
		cmocka_unit_test(pieces_at_any_split_fill_equals_whole),
		cmocka_unit_test(region_across_block_boundary_fill_equals_byte_by_byte),
		cmocka_unit_test(swapped_64k_blocks_check_reports_first_block),
		cmocka_unit_test(duplicated_64k_block_check_reports_second_block),
		cmocka_unit_test(one_flipped_byte_check_reports_its_stream_offset),
		cmocka_unit_test(one_flipped_byte_in_runs_check_reports_its_stream_offset),
		cmocka_unit_test(two_flipped_bytes_check_reports_first),
		cmocka_unit_test(different_seeds_fill_differs),
		cmocka_unit_test(different_offsets_fill_differs),
		cmocka_unit_test(empty_buffer_check_is_uint64_max),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
