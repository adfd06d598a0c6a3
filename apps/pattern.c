/* The verified byte pattern (see pattern.h).
 *
 * Word w is T[w mod 8192] XOR K(seed, w / 8192): a fixed table of random words, different
 * in every 64 KiB block through the block key. A table lookup and an XOR per 8 bytes keeps
 * verification far above the link rate (a splitmix64 per word capped the kernel's own
 * streams at ~5 Gbit/s), while every byte still depends on its stream offset: a lost,
 * duplicated or reordered byte or block is caught.
 */
#include "apps/pattern.h"

#include <endian.h>
#include <pthread.h>
#include <string.h>

#define TABLE_WORDS 8192u  /* 64 KiB */

static uint64_t table[TABLE_WORDS];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Mixing the seed first keeps (seed, block) pairs from aliasing: with seed ^ block, seed 0
 * block 1 would equal seed 1 block 0. */
static uint64_t block_key(uint64_t seed, uint64_t block)
{
	return splitmix64(splitmix64(seed) + block);
}

static void table_init(void)
{
	for (uint64_t i = 0; i < TABLE_WORDS; i++)
		table[i] = splitmix64(i ^ 0x756c737461636bull);
}

/* Word w of the stream, as it sits in memory (little-endian). */
static uint64_t word_at(uint64_t seed, uint64_t w)
{
	return htole64(table[w % TABLE_WORDS] ^ block_key(seed, w / TABLE_WORDS));
}

static uint8_t byte_at(uint64_t seed, uint64_t off)
{
	uint64_t w = word_at(seed, off / 8);
	uint8_t b[8];

	memcpy(b, &w, 8);
	return b[off % 8];
}

void bench__pattern_fill(uint64_t seed, uint64_t off, void *buf, size_t len)
{
	uint8_t *p = buf;
	size_t i = 0;

	pthread_once(&table_once, table_init);
	for (; i < len && (off + i) % 8; i++)
		p[i] = byte_at(seed, off + i);
	while (i + 8 <= len) {
		uint64_t w = (off + i) / 8;
		uint64_t key = block_key(seed, w / TABLE_WORDS);
		/* the rest of this 64 KiB block shares one key */
		uint64_t end = (w / TABLE_WORDS + 1) * TABLE_WORDS;
		for (; w < end && i + 8 <= len; w++, i += 8) {
			uint64_t v = htole64(table[w % TABLE_WORDS] ^ key);
			memcpy(p + i, &v, 8);
		}
	}
	for (; i < len; i++)
		p[i] = byte_at(seed, off + i);
}

uint64_t bench__pattern_check(uint64_t seed, uint64_t off, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	size_t i = 0;

	pthread_once(&table_once, table_init);
	for (; i < len && (off + i) % 8; i++)
		if (p[i] != byte_at(seed, off + i))
			return off + i;
	while (i + 8 <= len) {
		uint64_t w = (off + i) / 8;
		uint64_t key = block_key(seed, w / TABLE_WORDS);
		uint64_t end = (w / TABLE_WORDS + 1) * TABLE_WORDS;
		for (; w < end && i + 8 <= len; w++, i += 8) {
			uint64_t v, want = htole64(table[w % TABLE_WORDS] ^ key);
			memcpy(&v, p + i, 8);
			if (v != want)
				for (size_t k = 0; k < 8; k++)
					if (p[i + k] != byte_at(seed, off + i + k))
						return off + i + k;
		}
	}
	for (; i < len; i++)
		if (p[i] != byte_at(seed, off + i))
			return off + i;
	return UINT64_MAX;
}
