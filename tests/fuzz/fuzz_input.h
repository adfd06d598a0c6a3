/* The fuzz targets' input, read front to back: reads past the end give zeros, so every
 * record of every input is whole (tests/fuzz/README.md). Shared by fuzz_stack (and its
 * IPv6 and offload builds) and fuzz_node. */
#ifndef ULS_TESTS_FUZZ_INPUT_H
#define ULS_TESTS_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct input {
	const uint8_t *p;
	size_t left;
};

static inline uint8_t u8(struct input *in)
{
	if (!in->left)
		return 0;
	in->left--;
	return *in->p++;
}

static inline uint16_t u16(struct input *in)
{
	uint16_t hi = u8(in);

	return (uint16_t)(hi << 8 | u8(in));
}

static inline uint32_t u32(struct input *in)
{
	uint32_t hi = u16(in);

	return hi << 16 | u16(in);
}

/* Up to want octets into out; how many the input still had. */
static inline size_t take(struct input *in, uint8_t *out, size_t want)
{
	size_t n = want < in->left ? want : in->left;

	memcpy(out, in->p, n);
	in->p += n;
	in->left -= n;
	return n;
}

#endif
