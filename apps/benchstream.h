/* ulsbench's streams (apps/ulsbench.c): one request, a stream of apps/pattern.h's bytes,
 * one verdict.
 *
 * Wire format, big-endian: the client sends a 32-byte request {magic "ULSB", version 3,
 * direction (0: client sends, 1: server sends), 2 zero bytes, bytes (u64; 0: until the
 * sender's FIN), seed (u64), milliseconds (u32; the sender's time limit including the
 * warm-up, 0: none), warm-up milliseconds (u32)}; the receiving side answers with a 40-byte
 * verdict {status (u32: 0 ok, 1 corrupt, 2 short), 4 zero bytes, bytes verified (u64),
 * bytes measured (u64: received after the warm-up), and the measured span's first and
 * last instants (u64 each, CLOCK_MONOTONIC nanoseconds; every process of a testbed is on
 * one machine, so one clock)}. A time-limited sender stops at the limit and shuts its side
 * down; the receiver verifies up to the FIN.
 */
#ifndef ULS_APPS_BENCHSTREAM_H
#define ULS_APPS_BENCHSTREAM_H

#include <stdint.h>

#include "apps/netops.h"

#define BENCH_MSG_SIZE    65536  /* data moves in 64 KiB messages (seed 004's size) */
#define BENCH_REQ_LEN     32
#define BENCH_VERDICT_LEN 40

enum { BENCH_CLIENT_SENDS = 0, BENCH_SERVER_SENDS = 1 };  /* a request's direction */
enum { BENCH_OK = 0, BENCH_CORRUPT = 1, BENCH_SHORT = 2 };  /* a verdict's status */

struct bench_req {
	int dir;              /* BENCH_CLIENT_SENDS or BENCH_SERVER_SENDS */
	uint64_t bytes;       /* 0: until the sender's FIN */
	uint64_t seed;
	uint32_t millis;      /* the sender's time limit, warm-up included; 0: none */
	uint32_t warmup_ms;
};

/* What a receiver measured: the bytes its application took in from the end of the warm-up
 * on, and when (monotonic seconds). */
struct bench_measure {
	uint64_t bytes;
	double from, to;
};

/* Bytes every stream of the process moved so far (atomic; SIGUSR1's report). */
extern uint64_t bench__moved;

void bench__req_put(uint8_t *req, const struct bench_req *r);
int bench__req_get(const uint8_t *req, struct bench_req *r);  /* -EPROTO: not ours */

/* Send the pattern in BENCH_MSG_SIZE messages: `bytes` of it, or (bytes 0) until `millis`
 * pass; then shut the sending side down. 0 or -errno; *sent: the bytes sent. */
int bench__stream_out(const struct netops *ops, int sd, uint64_t seed, uint64_t bytes,
		      uint32_t millis, uint8_t *buf, uint64_t *sent);
/* Receive and verify up to `bytes` (0: until the FIN); a BENCH_ status, *good the bytes
 * that were right, *m what arrived from `mark` (monotonic seconds) on. */
int bench__stream_in(const struct netops *ops, int sd, uint64_t seed, uint64_t bytes, uint8_t *buf,
		     uint64_t *good, double mark, struct bench_measure *m);

void bench__verdict_put(uint8_t *v, int st, uint64_t good, const struct bench_measure *m);
void bench__verdict_get(const uint8_t *v, int *st, uint64_t *good, struct bench_measure *m);

#endif
