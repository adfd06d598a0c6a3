/* `rep movsb` by distance (docs/benchmarks.md, "rep movsb at a short distance").
 *
 *   cc -O2 -o distance distance.c && ./distance [RING_BYTES]
 *
 * Copies 64 KiB blocks through RING_BYTES (default 128 KiB: in L2) from a source at page
 * offset 66 to destinations at every distance 0..160 past it (and every 64th above), with
 * glibc's memcpy, `rep movsb` and a loop of 32-byte AVX2 moves, best of 5 rounds each,
 * and prints the ns per byte. User space only; no root, no network.
 */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void movsb(void *d, const void *s, size_t n)
{
	__asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
}

__attribute__((target("avx2"))) static void avx2(void *d, const void *s, size_t n)
{
	char *dp = d;
	const char *sp = s;

	for (; n >= 32; n -= 32, dp += 32, sp += 32)
		_mm256_storeu_si256((__m256i *)dp, _mm256_loadu_si256((const __m256i *)sp));
	memcpy(dp, sp, n);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	size_t ring = argc > 1 ? strtoul(argv[1], NULL, 0) : 131072, n = 65536;
	char *src = aligned_alloc(4096, ring + 8192), *dst = aligned_alloc(4096, ring + 8192);
	const char *names[] = { "memcpy", "rep movsb", "avx2" };

	if (!src || !dst || ring < n + 8192)
		return 1;
	memset(src, 1, ring + 8192);
	memset(dst, 2, ring + 8192);
	printf("distance  memcpy  rep-movsb  avx2   (ns/B, 64 KiB copies, ring %zu)\n", ring);
	for (size_t d = 0; d < 4096; d += (d < 160) ? 1 : 64) {
		printf("%8zu", d);
		for (int m = 0; m < 3; m++) {
			double best = 1e9;
			for (int r = 0; r < 5; r++) {
				double t0 = now();
				size_t pos = 0;
				for (int i = 0; i < 200; i++) {
					char *dp = dst + pos + ((66 + d) % 4096);
					const char *sp = src + pos + 66;
					if (m == 0)
						memcpy(dp, sp, n);
					else if (m == 1)
						movsb(dp, sp, n);
					else
						avx2(dp, sp, n);
					__asm__ volatile("" : : : "memory");
					pos = (pos + n + 4096 > ring - 4096) ? 0 : pos + n + 4096;
				}
				double t = (now() - t0) / 200 * 1e9 / n;
				if (t < best)
					best = t;
			}
			printf("  %7.3f", best);
			(void)names[m];
		}
		printf("\n");
	}
	return 0;
}
