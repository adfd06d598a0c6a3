/* netif/copy.c: nif_copy copies like memcpy at every distance and length, and copies of
 * 1 KiB and more whose destination is 1-63 bytes past the source (modulo 4096) take the
 * vector moves instead of `rep movsb` (counted by nif_copy_short_distance). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "netif/copy.h"

#define BIG 65536
#define SLACK 8192

static uint8_t *src, *dst;

static int setup(void **state)
{
	(void)state;
	src = aligned_alloc(4096, BIG + SLACK);
	dst = aligned_alloc(4096, BIG + SLACK);
	if (!src || !dst)
		return -1;
	for (size_t i = 0; i < BIG + SLACK; i++)
		src[i] = (uint8_t)(i * 131u + (i >> 8));
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(src);
	free(dst);
	return 0;
}

/* Copies dst[doff, doff+len) from src[soff, ...) and checks it and the bytes around it. */
static void copy_and_check(size_t soff, size_t doff, size_t len)
{
	memset(dst, 0xa5, BIG + SLACK);
	nif_copy(dst + doff, src + soff, len);
	assert_memory_equal(dst + doff, src + soff, len);
	if (doff > 0)
		assert_int_equal(dst[doff - 1], 0xa5);
	assert_int_equal(dst[doff + len], 0xa5);
}

static void any_distance_any_length_copies_like_memcpy(void **state)
{
	static const size_t lens[] = { 0, 1, 63, 127, 128, 129, 1023, 1024, 1025, 4097, 65535 };

	(void)state;
	for (size_t d = 0; d < 200; d++)
		for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
			copy_and_check(66, 66 + d, lens[i]);
	/* the destination behind the source, and across page offsets */
	for (size_t s = 4030; s < 4100; s++)
		copy_and_check(s, 5, 40000);
}

static void short_distance_bulk_copy_takes_vector_moves(void **state)
{
	(void)state;
#if defined(__x86_64__)
	unsigned long before = nif_copy_short_distance();

	copy_and_check(66, 78, BIG - 100);          /* 12 bytes past: the stall's window */
	copy_and_check(4090, 4096 + 4090 + 63, 5000); /* 63 past, modulo 4096 */
	assert_int_equal(nif_copy_short_distance(), before + 2);
#else
	skip();
#endif
}

static void other_copies_are_memcpy(void **state)
{
	(void)state;
	unsigned long before = nif_copy_short_distance();

	copy_and_check(66, 66, BIG - 100);         /* same page offset */
	copy_and_check(66, 66 + 64, BIG - 100);    /* 64 past: outside the window */
	copy_and_check(78, 66, BIG - 100);         /* behind the source */
	copy_and_check(66, 78, 1023);              /* too short for `rep movsb` */
	assert_int_equal(nif_copy_short_distance(), before);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(any_distance_any_length_copies_like_memcpy),
		cmocka_unit_test(short_distance_bulk_copy_takes_vector_moves),
		cmocka_unit_test(other_copies_are_memcpy),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
