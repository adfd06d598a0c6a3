/* ulsbench's streams: the request, the pattern sent and checked, and the verdict
 * (apps/benchstream.h says the wire format). */
#include "apps/benchstream.h"

#include <endian.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "apps/clock.h"
#include "apps/pattern.h"

#define MAGIC         0x554c5342u  /* "ULSB" */
#define WIRE_VERSION  3

uint64_t bench__moved;

static void put64(uint8_t *p, uint64_t v) { v = htobe64(v); memcpy(p, &v, 8); }
static void put32(uint8_t *p, uint32_t v) { v = htobe32(v); memcpy(p, &v, 4); }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return be64toh(v); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return be32toh(v); }

void bench__req_put(uint8_t *req, const struct bench_req *r)
{
	memset(req, 0, BENCH_REQ_LEN);
	put32(req, MAGIC);
	req[4] = WIRE_VERSION;
	req[5] = (uint8_t)r->dir;
	put64(req + 8, r->bytes);
	put64(req + 16, r->seed);
	put32(req + 24, r->millis);
	put32(req + 28, r->warmup_ms);
}

int bench__req_get(const uint8_t *req, struct bench_req *r)
{
	if (get32(req) != MAGIC || req[4] != WIRE_VERSION)
		return -EPROTO;
	if (req[5] != BENCH_CLIENT_SENDS && req[5] != BENCH_SERVER_SENDS)
		return -EPROTO;
	r->dir = req[5];
	r->bytes = get64(req + 8);
	r->seed = get64(req + 16);
	r->millis = get32(req + 24);
	r->warmup_ms = get32(req + 28);
	return 0;
}

/* Send the pattern in 64 KiB messages: `bytes` of it, or (bytes 0) until `millis` pass;
 * then shut our side down so the receiver sees where the stream ends. */
int bench__stream_out(const struct netops *ops, int sd, uint64_t seed, uint64_t bytes,
		      uint32_t millis, uint8_t *buf, uint64_t *sent)
{
	double deadline = millis ? bench__now_s() + millis / 1000.0 : 0;
	uint64_t off = 0;

	while (bytes ? off < bytes : bench__now_s() < deadline) {
		size_t n = bytes && bytes - off < BENCH_MSG_SIZE ? (size_t)(bytes - off) : BENCH_MSG_SIZE;
		bench__pattern_fill(seed, off, buf, n);
		int rc = bench__send_all(ops, sd, buf, n);
		if (rc < 0)
			return rc;
		__atomic_add_fetch(&bench__moved, n, __ATOMIC_RELAXED);
		off += n;
	}
	*sent = off;
	return ops->shutdown(sd, SHUT_WR);
}

/* Take the rest of a stream unchecked (`left` bytes, 0: until the sender's FIN): a sender
 * whose stream failed the check then reads the verdict, not a reset for unread data. */
static void drain(const struct netops *ops, int sd, uint8_t *buf, uint64_t left)
{
	for (;;) {
		size_t want = left && left < BENCH_MSG_SIZE ? (size_t)left : BENCH_MSG_SIZE;
		ssize_t n = ops->recv(sd, buf, want, 0);
		if (n == -EINTR)
			continue;
		if (n <= 0)
			return;
		if (left && (left -= (uint64_t)n) == 0)
			return;
	}
}

/* Receive and verify up to `bytes` (0: until the sender's FIN); returns a status and how
 * many bytes were right, and measures what arrives from `mark` (monotonic seconds) on.
 * A stream that ends before the mark is measured whole. */
int bench__stream_in(const struct netops *ops, int sd, uint64_t seed, uint64_t bytes, uint8_t *buf,
		     uint64_t *good, double mark, struct bench_measure *m)
{
	double begin = bench__now_s(), now = begin;
	uint64_t off = 0, mark_off = 0;
	bool marked = false;
	int st;

	m->from = mark;
	for (;;) {
		if (bytes && off >= bytes) {
			st = BENCH_OK;
			break;
		}
		size_t want = bytes && bytes - off < BENCH_MSG_SIZE ? (size_t)(bytes - off) : BENCH_MSG_SIZE;
		ssize_t n = ops->recv(sd, buf, want, 0);
		if (n == -EINTR)
			continue;
		now = bench__now_s();
		if (n <= 0) {
			/* FIN ends a stream without a byte count; anything else is short. */
			st = n == 0 && !bytes ? BENCH_OK : BENCH_SHORT;
			break;
		}
		if (!marked && now >= mark) {
			/* The span starts at the mark (or at this call, if the mark was before
			 * it), not at the first receive after it: a stream of one message
			 * (--bytes 64K) then has a span, and no stream gains the time between
			 * the mark and its next receive. */
			marked = true;
			mark_off = off;
			m->from = mark > begin ? mark : begin;
		}
		uint64_t bad = bench__pattern_check(seed, off, buf, (size_t)n);
		if (bad != UINT64_MAX) {
			*good = bad;
			m->bytes = 0;
			m->to = now;
			drain(ops, sd, buf, bytes ? bytes - off - (uint64_t)n : 0);
			return BENCH_CORRUPT;
		}
		off += (uint64_t)n;
		__atomic_add_fetch(&bench__moved, (uint64_t)n, __ATOMIC_RELAXED);
	}
	if (!marked) {
		mark_off = 0;
		m->from = begin;
	}
	*good = off;
	m->bytes = off - mark_off;
	m->to = now;
	return st;
}

static uint64_t to_ns(double s) { return s > 0 ? (uint64_t)(s * 1e9) : 0; }

void bench__verdict_put(uint8_t *v, int st, uint64_t good, const struct bench_measure *m)
{
	memset(v, 0, BENCH_VERDICT_LEN);
	put32(v, (uint32_t)st);
	put64(v + 8, good);
	put64(v + 16, m->bytes);
	put64(v + 24, to_ns(m->from));
	put64(v + 32, to_ns(m->to));
}

void bench__verdict_get(const uint8_t *v, int *st, uint64_t *good, struct bench_measure *m)
{
	*st = (int)get32(v);
	*good = get64(v + 8);
	m->bytes = get64(v + 16);
	m->from = (double)get64(v + 24) / 1e9;
	m->to = (double)get64(v + 32) / 1e9;
}

