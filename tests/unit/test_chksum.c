/* stack/chksum.c: the Internet checksum (RFC 1071) as lwIP's LWIP_CHKSUM.
 *
 * The reference is the plain RFC 1071 §4.1 loop: big-endian 16-bit words, the odd byte
 * padded with zero, end-around carry. nif_inet_chksum() returns the sum such that storing
 * it in native byte order gives the packet bytes, so the reference is compared after
 * converting it to network order and back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <cmocka.h>

#include "lwipopts.h"

#define BIG 65535

/* RFC 1071 §4.1, on network-order words; returns the folded sum, not inverted. */
static uint16_t ref_sum(const uint8_t *p, size_t len)
{
	uint32_t sum = 0;

	while (len > 1) {
		sum += (uint32_t)(p[0] << 8 | p[1]);
		p += 2;
		len -= 2;
	}
	if (len)
		sum += (uint32_t)p[0] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

/* The checksum's bytes as they land in the packet when stored natively. */
static uint16_t as_wire(uint16_t native)
{
	uint8_t b[2];

	memcpy(b, &native, 2);
	return (uint16_t)(b[0] << 8 | b[1]);
}

static uint64_t rng = 0x243f6a8885a308d3ull;

static uint8_t rand8(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint8_t)(rng >> 24);
}

struct buf {
	uint8_t *mem;
};

static int setup_buf(void **state)
{
	struct buf *b = malloc(sizeof(*b));

	if (!b)
		return -1;
	b->mem = malloc(BIG + 16);
	if (!b->mem) {
		free(b);
		return -1;
	}
	for (size_t i = 0; i < BIG + 16; i++)
		b->mem[i] = rand8();
	*state = b;
	return 0;
}

static int teardown_buf(void **state)
{
	struct buf *b = *state;

	free(b->mem);
	free(b);
	return 0;
}

static void random_data_each_length_and_alignment_chksum_matches_reference(void **state)
{
	struct buf *b = *state;

	for (size_t align = 0; align < 8; align++)
		for (size_t len = 0; len <= 130; len++) {
			const uint8_t *p = b->mem + align;
			uint16_t got = as_wire(nif_inet_chksum(p, (int)len));
			if (got != ref_sum(p, len))
				fail_msg("align %zu len %zu: got %#06x want %#06x", align, len,
					 got, ref_sum(p, len));
		}
}

static void large_lengths_chksum_matches_reference(void **state)
{
	struct buf *b = *state;
	static const size_t lens[] = { 1499, 1500, 4096, 9001, 65534, 65535 };

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		for (size_t align = 0; align < 8; align += 3)
			assert_int_equal(as_wire(nif_inet_chksum(b->mem + align, (int)lens[i])),
					 ref_sum(b->mem + align, lens[i]));
}

static void all_ones_max_length_chksum_folds_carries(void **state)
{
	uint8_t *p = malloc(BIG);
	(void)state;

	assert_non_null(p);
	/* Every addition carries: the 64-bit accumulator and the folds must not lose one. */
	memset(p, 0xff, BIG);
	assert_int_equal(as_wire(nif_inet_chksum(p, BIG)), ref_sum(p, BIG));
	assert_int_equal(as_wire(nif_inet_chksum(p, BIG - 1)), ref_sum(p, BIG - 1));
	free(p);
}

static void rfc1071_example_chksum_is_ddf2(void **state)
{
	/* RFC 1071 §3: the bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2 (big-endian order). */
	static const uint8_t bytes[8] = { 0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7 };
	(void)state;

	assert_int_equal(as_wire(nif_inet_chksum(bytes, 8)), 0xddf2);
	/* ... for every start alignment too. */
	for (size_t align = 1; align < 8; align++) {
		uint8_t mem[16];
		memcpy(mem + align, bytes, 8);
		assert_int_equal(as_wire(nif_inet_chksum(mem + align, 8)), 0xddf2);
	}
}

static void zero_or_negative_length_chksum_is_zero(void **state)
{
	static const uint8_t x[4] = { 1, 2, 3, 4 };
	(void)state;

	assert_int_equal(nif_inet_chksum(x, 0), 0);
	assert_int_equal(nif_inet_chksum(x, -1), 0);
}

static void stored_complement_packet_verifies_to_ffff(void **state)
{
	struct buf *b = *state;

	/* An IPv4-like header with the checksum field at offset 10, for several sizes. */
	for (size_t len = 20; len <= 60; len += 4) {
		uint8_t pkt[60];
		memcpy(pkt, b->mem + len, len);
		pkt[10] = pkt[11] = 0;
		uint16_t c = (uint16_t)~nif_inet_chksum(pkt, (int)len);
		memcpy(pkt + 10, &c, 2);  /* native store, as lwIP does */
		assert_int_equal(nif_inet_chksum(pkt, (int)len), 0xffff);
		assert_int_equal(ref_sum(pkt, len), 0xffff);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			random_data_each_length_and_alignment_chksum_matches_reference,
			setup_buf, teardown_buf),
		cmocka_unit_test_setup_teardown(large_lengths_chksum_matches_reference,
						setup_buf, teardown_buf),
		cmocka_unit_test(all_ones_max_length_chksum_folds_carries),
		cmocka_unit_test(rfc1071_example_chksum_is_ddf2),
		cmocka_unit_test(zero_or_negative_length_chksum_is_zero),
		cmocka_unit_test_setup_teardown(stored_complement_packet_verifies_to_ffff,
						setup_buf, teardown_buf),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
