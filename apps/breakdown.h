/* ulsping --breakdown: one-way latency split into the layers a message crosses (seed 003,
 * Tables 2-5), from the timestamps the two processes of a ping-pong recorded on one clock.
 *
 * Each process records, per message i, when its application started sending its message i
 * and when it had received message i whole, and its stack's trace of TCP segments
 * (uls_breakdown.h). A message's path is followed through the segment that carries its
 * last byte, the one whose arrival completes the receive:
 *
 *   sender:   app send -> stack out -> tx ring -> ulsd tx -> TAP write
 *   receiver: TAP read -> demux -> rx ring -> stack in -> app receive
 *
 * Ten points, nine stages; the stages of one message add up to its one-way latency (app
 * receive - app send), so their means add up to the mean one-way latency.
 */
#ifndef ULS_APPS_BREAKDOWN_H
#define ULS_APPS_BREAKDOWN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "uls_breakdown.h"

enum bench_bd_point {
	BENCH_BD_APP_SEND, BENCH_BD_STACK_OUT, BENCH_BD_TX_RING, BENCH_BD_ULSD_TX,
	BENCH_BD_TAP_WRITE, BENCH_BD_TAP_READ, BENCH_BD_DEMUX, BENCH_BD_RX_RING,
	BENCH_BD_STACK_IN, BENCH_BD_APP_RECV,
	BENCH_BD_POINTS
};
#define BENCH_BD_STAGES (BENCH_BD_POINTS - 1)   /* stage k: point k -> point k + 1 */

/* What one process of a ping-pong recorded. app[i][0]: it started sending its message i;
 * app[i][1]: it had received message i whole (client: the echo of its message i). */
struct bench_bd_side {
	uint64_t (*app)[2];
	size_t napp;
	struct uls_bd_frame *fr;
	size_t nfr;
	uint64_t lost;              /* segments its trace overwrote unread */
};

struct bench_bd_stat {
	double mean, p50, p99;      /* microseconds; nearest-rank percentiles, as ulsping's */
};

struct bench_bd_result {
	size_t messages;            /* messages looked at (the first `skip` are not) */
	size_t samples;             /* messages with a complete, ordered chain of stamps */
	size_t no_segment;          /* left out: no data segment sent in the message's window */
	size_t unmatched;           /* left out: no arrival, or no transmission, of its last segment */
	size_t disordered;          /* left out: a stamp missing or out of order */
	struct bench_bd_stat stage[BENCH_BD_STAGES];
	struct bench_bd_stat one_way;
	double stage_mean_sum;      /* sum of the stage means: one_way.mean up to rounding */
};

/* Short names: points ("app send" ...) and stages, for tables and JSON keys. */
extern const char *const bench__bd_point_name[BENCH_BD_POINTS];
extern const char *const bench__bd_stage_key[BENCH_BD_STAGES];
extern const char *const bench__bd_stage_title[BENCH_BD_STAGES];
extern const char *const bench__bd_stage_col[BENCH_BD_STAGES];   /* <= 10 characters */

/* Follow messages skip.. of the sender snd to the receiver rcv and compute the stages'
 * and the one-way latency's mean and median. Returns 0, -ENOMEM, or -ENODATA when no
 * message gave a sample (res is filled with the counts either way). */
int bench__bd_analyse(const struct bench_bd_side *snd, const struct bench_bd_side *rcv,
		      size_t skip, struct bench_bd_result *res);

/* Output. A table row: size, samples, the stages' means (p50 = false) or medians, the
 * one-way latency and rtt/2 for comparison; the header and legend go with it. JSON: one
 * direction's object (counts, one-way, stages), no trailing newline. */
void bench__bd_table_header(FILE *f);
void bench__bd_table_row(FILE *f, unsigned long long size, const struct bench_bd_result *r,
			 bool p50, double rtt_half);
void bench__bd_table_legend(FILE *f);
void bench__bd_json(FILE *f, const struct bench_bd_result *r, uint64_t lost);

/* A side to and from a file (binary, for the driver that started the process). Load checks
 * every count against the file's size. Both return 0 or -errno. */
int bench__bd_save(const char *path, const uint64_t (*app)[2], size_t napp,
		   const struct uls_bd_frame *fr, size_t nfr, uint64_t lost);
int bench__bd_load(const char *path, struct bench_bd_side *out);
void bench__bd_free(struct bench_bd_side *s);

#endif
