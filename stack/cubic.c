/* RFC 9438 CUBIC: the window of a sender in congestion avoidance and its response to a
 * congestion event. Linux's default (net.ipv4.tcp_congestion_control = cubic as Linux
 * ships it). The benchmarks' kernel peers run the host's default instead, which on the
 * guest of docs/benchmarks.md is BBR (`ulsbench --kernel-cc cubic` compares like with like).
 *
 * Where it applies (patch 0040): lwIP's slow start is unchanged (RFC 5681 with RFC
 * 3465's byte counting, L up to an offloaded super-segment: stk__tso_abc_limit), and so
 * is loss recovery (RFC 6675 / RFC 6582 in patches 0021-0023; RFC 9438 §4.6 keeps them).
 * CUBIC sets ssthresh at a congestion event and cwnd on each ACK in congestion avoidance.
 *
 * Why it matters here: at 1% loss a congestion event comes every few hundred
 * microseconds, and each took the window to half the flight (Reno) where the kernel
 * peers keep 0.7 of it.
 * With round trips of ~100 us, K is seconds long and W_cubic(t) stays far below W_est
 * between losses: the Reno-friendly region (§4.3) sets the window, with β_cubic = 0.7. */
#include "cubic.h"

/* §5: "β_cubic SHOULD be set to 0.7", "C SHOULD be set to 0.4" */
#define CUBIC_BETA 0.7
#define CUBIC_C 0.4
/* §4.3: α_cubic = 3 * (1 - β_cubic) / (1 + β_cubic), 1 once W_est reached cwnd_prior */
#define CUBIC_ALPHA (3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA))
/* cwnd never grows past this (TCP_WND_INC's saturation in lwIP is larger; a window of a
 * gigabyte is far beyond any buffer here) */
#define CUBIC_WND_MAX 0x40000000u

/* The real cube root of x >= 0 by Newton's method (no libm here). */
static double cbrt_pos(double x)
{
	double r = x > 1.0 ? x / 3.0 : 1.0;

	if (x <= 0.0)
		return 0.0;
	for (int i = 0; i < 200; i++) {
		double n = r - (r * r * r - x) / (3.0 * r * r);
		if (n == r || (n > r ? n - r : r - n) < r * 1e-12) {
			r = n;
			break;
		}
		r = n;
	}
	return r;
}

uint32_t stk__cubic_loss(struct stk_cubic *c, uint32_t cwnd, uint32_t flight, uint32_t mss)
{
	/* Deviation (§4.6 uses cwnd for W_max and cwnd_prior, flight_size for ssthresh):
	 * lwIP's cwnd is not validated (RFC 7661) and grows while the receive window or the
	 * application limits the sender, so the window in use at the loss, FlightSize, is
	 * taken for all three. */
	uint32_t w = flight;
	double ss;

	(void)cwnd;
	/* §4.7: "W_max = cwnd * (1 + β_cubic) / 2" when the window is below the last W_max
	 * (a flow giving way to a new one), else "W_max = cwnd" */
	if (w < c->w_max)
		c->w_max = (uint32_t)((double)w * (1.0 + CUBIC_BETA) / 2.0);
	else
		c->w_max = w;
	/* §4.6: "ssthresh = flight_size * β_cubic", "cwnd_prior = cwnd",
	 * "ssthresh = max(ssthresh, 2)" (segments) */
	c->cwnd_prior = w;
	ss = (double)flight * CUBIC_BETA;
	if (ss < 2.0 * mss)
		ss = 2.0 * mss;
	c->epoch_on = 0;
	c->after_rto = 0;
	return (uint32_t)ss;
}

void stk__cubic_timeout(struct stk_cubic *c)
{
	c->epoch_on = 0;
	c->after_rto = 1;
}

double stk__cubic_w(const struct stk_cubic *c, uint32_t t_ms, uint32_t mss)
{
	/* §4.2 equation 1: W_cubic(t) = C * (t - K)^3 + W_max, in segments and seconds */
	double d = ((double)t_ms - (double)c->k_ms) / 1000.0;
	return CUBIC_C * d * d * d * mss + c->w_max;
}

uint32_t stk__cubic_ack(struct stk_cubic *c, uint32_t cwnd, uint32_t acked, uint32_t mss,
			uint32_t now_ms, uint32_t rtt_ms)
{
	double next, target, wc, alpha;
	uint32_t t;

	if (mss == 0 || cwnd == 0)
		return cwnd;
	if (!c->epoch_on) {
		/* §4.2: a new congestion-avoidance stage, cwnd_epoch = cwnd; §4.3: "W_est is
		 * set equal to cwnd_epoch at the start of the congestion avoidance stage" */
		c->epoch_on = 1;
		c->epoch_ms = now_ms;
		c->cwnd_epoch = cwnd;
		c->w_est = cwnd;
		if (c->after_rto || c->w_max <= cwnd) {
			/* §4.8 after a timeout: "K is set to 0, and W_max is set to the congestion
			 * window size at the beginning of the current congestion avoidance
			 * stage"; the same before any congestion event, and when slow start
			 * overshot W_max */
			c->w_max = cwnd;
			c->k_ms = 0;
			c->after_rto = 0;
		} else {
			/* §4.2 equation 2: K = cubic_root((W_max - cwnd_epoch) / C) */
			double segs = (double)(c->w_max - cwnd) / mss;
			c->k_ms = (uint32_t)(cbrt_pos(segs / CUBIC_C) * 1000.0 + 0.5);
		}
	}
	t = now_ms - c->epoch_ms;

	/* §4.3: "W_est = W_est + α_cubic * segments_acked / cwnd"; "Once W_est has grown to
	 * reach the cwnd at the time of most recently setting ssthresh -- that is, W_est >=
	 * cwnd_prior -- the sender SHOULD set α_cubic to 1" */
	alpha = (c->w_est >= (double)c->cwnd_prior) ? 1.0 : CUBIC_ALPHA;
	c->w_est += alpha * (double)acked * (double)mss / (double)cwnd;

	wc = stk__cubic_w(c, t, mss);
	if (wc < c->w_est) {
		/* §4.3: "If W_cubic(t) is less than W_est, then CUBIC MUST set cwnd to W_est" */
		next = c->w_est;
	} else {
		/* §4.2: target = W_cubic(t + RTT), at least cwnd and at most 1.5 * cwnd;
		 * §4.4/§4.5: cwnd grows by (target - cwnd) / cwnd per acknowledged segment */
		target = stk__cubic_w(c, t + rtt_ms, mss);
		if (target < (double)cwnd)
			target = cwnd;
		if (target > 1.5 * (double)cwnd)
			target = 1.5 * (double)cwnd;
		next = (double)cwnd + (target - (double)cwnd) * (double)acked / (double)cwnd;
	}
	if (next < (double)cwnd)
		next = cwnd;
	if (next > (double)CUBIC_WND_MAX)
		next = CUBIC_WND_MAX;
	return (uint32_t)next;
}
