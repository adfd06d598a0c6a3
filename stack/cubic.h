/* RFC 9438 CUBIC congestion control: the window arithmetic, kept out of lwIP so that it
 * can be unit-tested (tests/unit/test_cubic.c). lwIP's tcp_pcb carries one struct
 * stk_cubic (patch 0040); tcp_in.c and tcp_out.c call these through the hooks in
 * lwipopts.h. Windows are in bytes, times in milliseconds (sys_now()). */
#ifndef ULS_STACK_CUBIC_H
#define ULS_STACK_CUBIC_H

#include <stdint.h>

struct stk_cubic {
	double w_est;         /* W_est (§4.3), bytes */
	uint32_t w_max;       /* W_max (§4.2, §4.7), bytes; 0 before the first congestion event */
	uint32_t cwnd_prior;  /* cwnd_prior (§4.6): the window in use when it was last reduced */
	uint32_t cwnd_epoch;  /* cwnd_epoch (§4.2): cwnd when this congestion avoidance began */
	uint32_t epoch_ms;    /* t = 0 of W_cubic(t): when this congestion avoidance began */
	uint32_t k_ms;        /* K (§4.2, equation 2) */
	uint8_t epoch_on;     /* a congestion-avoidance stage is under way */
	uint8_t after_rto;    /* it will follow a timeout (§4.8: K = 0, W_max = cwnd) */
};

/* A congestion event (§4.6, fast retransmit or RTO): updates W_max (§4.7 fast
 * convergence) and returns the new ssthresh, flight * β_cubic, at least 2 * mss. */
uint32_t stk__cubic_loss(struct stk_cubic *c, uint32_t cwnd, uint32_t flight, uint32_t mss);
/* The retransmission timer expired (§4.8): the next congestion avoidance starts with
 * K = 0 and W_max = the cwnd it starts from. */
void stk__cubic_timeout(struct stk_cubic *c);
/* An ACK for acked new bytes in congestion avoidance (cwnd >= ssthresh, not in
 * recovery): returns the new cwnd (§4.2-§4.5). now_ms is sys_now(), rtt_ms the SRTT. */
uint32_t stk__cubic_ack(struct stk_cubic *c, uint32_t cwnd, uint32_t acked, uint32_t mss,
			uint32_t now_ms, uint32_t rtt_ms);
/* W_cubic(t) in bytes (§4.2, equation 1), t in ms since the stage began. */
double stk__cubic_w(const struct stk_cubic *c, uint32_t t_ms, uint32_t mss);

#endif
