#include "apps/pattern.h"

#include <string.h>

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint8_t byte_at(uint64_t seed, uint64_t off)
{
	return (uint8_t)(splitmix64(seed + off / 8) >> (8 * (off % 8)));
}

void bench__pattern_fill(uint64_t seed, uint64_t off, void *buf, size_t len)
{
	uint8_t *p = buf;
	size_t i = 0;

	for (; i < len && (off + i) % 8; i++)
		p[i] = byte_at(seed, off + i);
	for (; i + 8 <= len; i += 8) {
		uint64_t w = splitmix64(seed + (off + i) / 8);
		uint8_t b[8];
		for (int k = 0; k < 8; k++)
			b[k] = (uint8_t)(w >> (8 * k));
		memcpy(p + i, b, 8);
	}
	for (; i < len; i++)
		p[i] = byte_at(seed, off + i);
}

uint64_t bench__pattern_check(uint64_t seed, uint64_t off, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	size_t i = 0;

	for (; i < len && (off + i) % 8; i++)
		if (p[i] != byte_at(seed, off + i))
			return off + i;
	for (; i + 8 <= len; i += 8) {
		uint64_t w = splitmix64(seed + (off + i) / 8);
		uint8_t b[8];
		for (int k = 0; k < 8; k++)
			b[k] = (uint8_t)(w >> (8 * k));
		if (memcmp(p + i, b, 8) != 0)
			for (int k = 0; k < 8; k++)
				if (p[i + k] != b[k])
					return off + i + (size_t)k;
	}
	for (; i < len; i++)
		if (p[i] != byte_at(seed, off + i))
			return off + i;
	return UINT64_MAX;
}
