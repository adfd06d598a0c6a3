/* Bulk copies of packet data that avoid `rep movsb` where it is slow.
 *
 * glibc's memcpy copies blocks of a few KiB and up with `rep movsb` on CPUs that report
 * fast short `rep movsb` (FSRM). On the AMD Zen 3 this project is measured on, that
 * instruction runs 10-20 times slower when the destination is a few bytes past the source
 * modulo 4096 (1 to 31 measured; the window here is glibc's 63 for Intel): a 64 KiB copy
 * from offset 66 to offset 78 of two page-aligned buffers took 1.2-1.4 ns/B against
 * 0.06-0.09 ns/B at other distances, while a loop of 32-byte vector moves took 0.06 ns/B
 * at both (docs/benchmarks.md, "`rep movsb` at a short distance"). glibc 2.36 checks that
 * distance only on Intel CPUs. A stream's application buffer and its pbufs sit at
 * distances that change with every segment, so about one bulk copy in 55 met the stall.
 *
 * Here a copy of at least SHORT_MIN bytes at such a distance runs as a loop of vector
 * moves (AVX2 where the CPU has it, SSE2 otherwise: x86-64's baseline); every other copy
 * is glibc's. Other architectures use memcpy.
 */
#include "netif/copy.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

/* Below this glibc does not use `rep movsb` (its threshold is 2 KiB and more). */
#define SHORT_MIN 1024u
/* The stall's window: destination this many bytes or fewer past the source, page offsets. */
#define SHORT_DIST 63u

static atomic_ulong short_copies;

__attribute__((target("avx2"))) static void copy_avx2(uint8_t *d, const uint8_t *s, size_t n)
{
	while (n >= 128) {
		__m256i a = _mm256_loadu_si256((const __m256i *)s);
		__m256i b = _mm256_loadu_si256((const __m256i *)(s + 32));
		__m256i c = _mm256_loadu_si256((const __m256i *)(s + 64));
		__m256i e = _mm256_loadu_si256((const __m256i *)(s + 96));
		_mm256_storeu_si256((__m256i *)d, a);
		_mm256_storeu_si256((__m256i *)(d + 32), b);
		_mm256_storeu_si256((__m256i *)(d + 64), c);
		_mm256_storeu_si256((__m256i *)(d + 96), e);
		d += 128;
		s += 128;
		n -= 128;
	}
	memcpy(d, s, n);  /* under 128 bytes: glibc uses vector moves there too */
}

static void copy_sse2(uint8_t *d, const uint8_t *s, size_t n)
{
	while (n >= 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)s);
		__m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
		__m128i e = _mm_loadu_si128((const __m128i *)(s + 48));
		_mm_storeu_si128((__m128i *)d, a);
		_mm_storeu_si128((__m128i *)(d + 16), b);
		_mm_storeu_si128((__m128i *)(d + 32), c);
		_mm_storeu_si128((__m128i *)(d + 48), e);
		d += 64;
		s += 64;
		n -= 64;
	}
	memcpy(d, s, n);
}

void nif_copy(void *dst, const void *src, size_t len)
{
	uintptr_t dist = ((uintptr_t)dst - (uintptr_t)src) & 4095u;

	if (len < SHORT_MIN || dist == 0 || dist > SHORT_DIST) {
		memcpy(dst, src, len);
		return;
	}
	atomic_fetch_add_explicit(&short_copies, 1, memory_order_relaxed);
	if (__builtin_cpu_supports("avx2"))
		copy_avx2(dst, src, len);
	else
		copy_sse2(dst, src, len);
}

unsigned long nif_copy_short_distance(void)
{
	return atomic_load_explicit(&short_copies, memory_order_relaxed);
}
#else
void nif_copy(void *dst, const void *src, size_t len)
{
	memcpy(dst, src, len);
}

unsigned long nif_copy_short_distance(void)
{
	return 0;
}
#endif
