/* The verified byte pattern (see pattern.h).
 *
 * Word w is T[w mod 8192] XOR K(seed, w / 8192): a fixed table of random words, different
 * in every 64 KiB block through the block key. A table lookup and an XOR per 8 bytes keeps
 * verification far above the link rate (a splitmix64 per word capped the kernel's own
 * streams at ~5 Gbit/s), while every byte still depends on its stream offset: a lost,
 * duplicated or reordered byte or block is caught.
 *
 * The benchmark pays this on every byte in every mode, so it is kept cheap: runs of 64
 * bytes that the compiler vectorizes, and a check that ORs a run's differences and looks
 * for the byte only when a run is wrong. Fill and check of 1 GiB in a hot 64 KiB buffer
 * took 0.17 s word by word and take 0.06-0.09 s so (this machine, GCC 12 -O2).
 */
#include "apps/pattern.h"

#include <endian.h>
#include <pthread.h>
#include <string.h>

#define TABLE_WORDS 8192u  /* 64 KiB */
#define RUN_WORDS 8u       /* 64 bytes: the unit fill_run and check_run vectorize */

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

/* Whole words from word t of a 64 KiB block to its end (where the key changes) or to the
 * end of `left` bytes, whichever comes first. */
static size_t words_in_block(size_t t, size_t left)
{
	size_t n = TABLE_WORDS - t;

	return n < left / 8 ? n : left / 8;
}

/* Words [w, w + n) of one 64 KiB block, all under one key, into dst. The fixed-size inner
 * loop is what GCC's -O2 vectorizer accepts (its cheap cost model wants a trip count that
 * is a multiple of the vector width), 16 or 32 bytes per instruction instead of 8. */
static void fill_run(uint64_t key, size_t t, uint8_t *dst, size_t n)
{
	size_t k = 0;

	for (; k + RUN_WORDS <= n; k += RUN_WORDS)
		for (size_t j = 0; j < RUN_WORDS; j++) {
			uint64_t v = htole64(table[t + k + j] ^ key);
			memcpy(dst + 8 * (k + j), &v, 8);
		}
	for (; k < n; k++) {
		uint64_t v = htole64(table[t + k] ^ key);
		memcpy(dst + 8 * k, &v, 8);
	}
}

/* The index in [0, n] of the first run of RUN_WORDS words (or the tail word) of src that
 * differs from words [t, t + n) of the block under key; n when all match. The differences
 * of a run are ORed together rather than tested word by word, so the loop has no early exit
 * and vectorizes; the caller finds the byte. */
static size_t check_run(uint64_t key, size_t t, const uint8_t *src, size_t n)
{
	size_t k = 0;

	for (; k + RUN_WORDS <= n; k += RUN_WORDS) {
		uint64_t diff = 0;
		for (size_t j = 0; j < RUN_WORDS; j++) {
			uint64_t v;
			memcpy(&v, src + 8 * (k + j), 8);
			diff |= v ^ htole64(table[t + k + j] ^ key);
		}
		if (diff)
			return k;
	}
	for (; k < n; k++) {
		uint64_t v;
		memcpy(&v, src + 8 * k, 8);
		if (v != htole64(table[t + k] ^ key))
			return k;
	}
	return n;
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
		size_t t = w % TABLE_WORDS;
		size_t n = words_in_block(t, len - i);
		fill_run(block_key(seed, w / TABLE_WORDS), t, p + i, n);
		i += 8 * n;
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
		size_t t = w % TABLE_WORDS;
		size_t n = words_in_block(t, len - i);
		size_t k = check_run(block_key(seed, w / TABLE_WORDS), t, p + i, n);
		if (k < n) {
			/* the run at word k holds the first wrong byte */
			for (size_t b = i + 8 * k; b < len; b++)
				if (p[b] != byte_at(seed, off + b))
					return off + b;
		}
		i += 8 * n;
	}
	for (; i < len; i++)
		if (p[i] != byte_at(seed, off + i))
			return off + i;
	return UINT64_MAX;
}
