/* apps/pingstats.c: ulsping's round-trip statistics (pingstats.h). */
#include <errno.h>
#include <stdlib.h>

#include "apps/pattern.h"
#include "apps/pingstats.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

double bench__percentile_sorted(const double *sorted, size_t n, unsigned pct)
{
	size_t rank = ((size_t)pct * n + 99) / 100;

	if (n == 0)
		return 0;
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return sorted[rank - 1];
}

int bench__stats_compute(double *v, size_t n, struct rtt_stats *out)
{
	double sum = 0;

	if (!v || n == 0)
		return -EINVAL;
	qsort(v, n, sizeof(*v), cmp_double);
	for (size_t i = 0; i < n; i++)
		sum += v[i];
	*out = (struct rtt_stats){
		.n = n, .mean = sum / (double)n, .min = v[0], .max = v[n - 1],
		.p50 = bench__percentile_sorted(v, n, 50), .p99 = bench__percentile_sorted(v, n, 99),
	};
	return 0;
}

double bench__bandwidth_mbps(unsigned long long size, double rtt_us)
{
	return rtt_us > 0 ? (double)size * 8 / (rtt_us / 2) : 0;
}

int bench__echo_verify(uint64_t seed, uint64_t round, const void *buf, size_t size,
		       uint64_t *bad)
{
	uint64_t off = bench__pattern_check(seed, round * size, buf, size);

	if (off == UINT64_MAX)
		return 0;
	if (bad)
		*bad = off;
	return -EBADMSG;
}
