/* stack/heap.c: lwIP's heap keeps freed blocks of a size class and gives them back warm.
 *
 * The lists are only used under the core lock; without it every block goes straight to
 * and from the C library. Each test checks which block comes back, so a list that lost,
 * duplicated or mixed up blocks fails here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"

static int setup(void **state)
{
	(void)state;
	stk__lock();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	stk__unlock();
	return 0;
}

static void freed_block_comes_back_for_its_class(void **state)
{
	(void)state;
	uint8_t *a = stk__heap_alloc(1514);
	assert_non_null(a);
	memset(a, 0xab, 1514);  /* the whole request is usable */
	stk__heap_free(a);
	/* Any size of the same class (1025 ... 2048) reuses it. */
	uint8_t *b = stk__heap_alloc(2048);
	assert_ptr_equal(a, b);
	stk__heap_free(b);
}

static void classes_do_not_mix(void **state)
{
	(void)state;
	void *big = stk__heap_alloc(65535 + 64);  /* a super-segment's pbuf */
	void *small = stk__heap_alloc(1514);
	stk__heap_free(big);
	void *other = stk__heap_alloc(1514);
	assert_ptr_not_equal(other, big);
	void *again = stk__heap_alloc(69000);  /* the same 4 KiB class as big */
	assert_ptr_equal(again, big);
	stk__heap_free(again);
	stk__heap_free(other);
	stk__heap_free(small);
}

static void lists_are_last_in_first_out(void **state)
{
	(void)state;
	void *p[8];
	for (int i = 0; i < 8; i++)
		p[i] = stk__heap_alloc(4000);
	for (int i = 0; i < 8; i++)
		stk__heap_free(p[i]);
	for (int i = 7; i >= 0; i--)
		assert_ptr_equal(stk__heap_alloc(4000), p[i]);
	for (int i = 0; i < 8; i++)
		stk__heap_free(p[i]);
}

static void the_lists_hold_a_bounded_amount(void **state)
{
	(void)state;
	enum { N = 400 };  /* 400 x 72 KiB = 28 MiB, more than the bound */
	void **p = calloc(N, sizeof(*p));
	assert_non_null(p);
	size_t before = stk__heap_cached();
	for (int i = 0; i < N; i++)
		assert_non_null(p[i] = stk__heap_alloc(72u << 10));
	for (int i = 0; i < N; i++)
		stk__heap_free(p[i]);
	size_t held = stk__heap_cached();
	assert_true(held > before);
	assert_true(held <= 16u << 20);
	free(p);
}

static void sizes_outside_the_classes_are_not_kept(void **state)
{
	(void)state;
	size_t before = stk__heap_cached();
	void *tiny = stk__heap_alloc(16);
	void *huge = stk__heap_alloc(256u << 10);
	assert_non_null(tiny);
	assert_non_null(huge);
	memset(huge, 1, 256u << 10);
	stk__heap_free(tiny);
	stk__heap_free(huge);
	assert_int_equal(stk__heap_cached(), before);
	stk__heap_free(NULL);
}

static void without_the_core_lock_blocks_bypass_the_lists(void **state)
{
	(void)state;
	size_t before = stk__heap_cached();
	stk__unlock();
	void *a = stk__heap_alloc(3000);
	assert_non_null(a);
	stk__heap_free(a);
	assert_int_equal(stk__heap_cached(), before);
	stk__lock();
}

static void calloc_zeroes_and_refuses_overflow(void **state)
{
	(void)state;
	uint8_t *a = stk__heap_alloc(3000);
	memset(a, 0xff, 3000);
	stk__heap_free(a);
	uint8_t *z = stk__heap_calloc(3, 1000);  /* takes the dirty block back */
	assert_ptr_equal(z, a);
	for (int i = 0; i < 3000; i++)
		assert_int_equal(z[i], 0);
	stk__heap_free(z);
	assert_null(stk__heap_calloc(SIZE_MAX / 2, 4));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(freed_block_comes_back_for_its_class, setup, teardown),
		cmocka_unit_test_setup_teardown(classes_do_not_mix, setup, teardown),
		cmocka_unit_test_setup_teardown(lists_are_last_in_first_out, setup, teardown),
		cmocka_unit_test_setup_teardown(the_lists_hold_a_bounded_amount, setup, teardown),
		cmocka_unit_test_setup_teardown(sizes_outside_the_classes_are_not_kept, setup,
						teardown),
		cmocka_unit_test_setup_teardown(without_the_core_lock_blocks_bypass_the_lists,
						setup, teardown),
		cmocka_unit_test_setup_teardown(calloc_zeroes_and_refuses_overflow, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
