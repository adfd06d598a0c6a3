/* Round-trip statistics of ulsping (pure; tests/unit/test_pingstats.c): mean and
 * nearest-rank percentiles of the samples, bandwidth from half the round trip, and the check
 * of an echoed message. */
#ifndef ULS_APPS_PINGSTATS_H
#define ULS_APPS_PINGSTATS_H

#include <stddef.h>
#include <stdint.h>

struct rtt_stats {
	size_t n;
	double mean, p50, p99, min, max;
};

/* The pct-th percentile of n sorted samples by nearest rank: the smallest sample with at
 * least pct% of the samples at or below it, i.e. sorted[ceil(pct * n / 100) - 1]. Integer
 * arithmetic, so p99 of 100 samples is the 99th, never the 100th through rounding. */
double bench__percentile_sorted(const double *sorted, size_t n, unsigned pct);
/* Mean, p50, p99, min and max of v[0..n); sorts v in place. Returns 0, or -EINVAL for no
 * samples (out is then untouched). */
int bench__stats_compute(double *v, size_t n, struct rtt_stats *out);
/* Seed 000: "since each message is sent twice, the bandwidth is computed as half the
 * round-trip time": size * 8 bits in rtt / 2 microseconds, which is Mbit/s. */
double bench__bandwidth_mbps(unsigned long long size, double rtt_us);
/* Check the echo of round trip `round` (message size `size`); returns 0 when every byte is
 * right, else -EBADMSG with the stream offset of the first wrong byte in *bad. */
int bench__echo_verify(uint64_t seed, uint64_t round, const void *buf, size_t size,
		       uint64_t *bad);

#endif
