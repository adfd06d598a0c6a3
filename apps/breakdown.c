/* ulsping --breakdown: matching the two processes' stamps and the per-stage statistics
 * (see breakdown.h). Pure functions but for the file I/O at the end;
 * tests/unit/test_breakdown_stats.c. */
#include "apps/breakdown.h"
#include "apps/xfer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILE_MAGIC "ULSBD\x01\n"   /* 7 characters and the NUL: 8 bytes */
#define COUNT_MAX  (1ull << 28)    /* per side, far above what one run records */

const char *const bench__bd_point_name[BENCH_BD_POINTS] = {
	"app send", "stack out", "tx ring", "ulsd tx", "TAP write",
	"TAP read", "demux", "rx ring", "stack in", "app receive",
};

/* Stage k runs from point k to point k + 1. */
const char *const bench__bd_stage_key[BENCH_BD_STAGES] = {
	"send_stack", "tx_netif", "tx_ring", "ulsd_tx", "kernel",
	"ulsd_demux", "ulsd_rx", "rx_ring", "recv_stack",
};
const char *const bench__bd_stage_title[BENCH_BD_STAGES] = {
	"app send -> stack out: socket call, lwIP TCP output, copy and checksum in",
	"stack out -> tx ring: copy of the frame into the tx ring slot",
	"tx ring -> ulsd tx: publish at unlock, eventfd wake-up of ulsd, ulsd's turn",
	"ulsd tx -> TAP write: parse, transmit check, copy into a TAP buffer, queue",
	"TAP write -> TAP read: io_uring submit, kernel TAP and bridge, peer ulsd wake-up",
	"TAP read -> demux: parse, node checks, filter lookup",
	"demux -> rx ring: copy into the owner's rx ring slot",
	"rx ring -> stack in: publish, eventfd wake-up of the stack thread",
	"stack in -> app receive: lwIP input and TCP, wake-up of the application, copy out",
};

const char *const bench__bd_stage_col[BENCH_BD_STAGES] = {
	"app>stack", "stack>ring", "ring>ulsd", "ulsd>TAP", "TAP>TAP",
	"TAP>demux", "demux>ring", "ring>stack", "stack>app",
};

/* ---- matching ---- */

static bool same_tuple(const struct uls_bd_frame *a, const struct uls_bd_frame *b)
{
	return a->saddr == b->saddr && a->daddr == b->daddr && a->sport == b->sport &&
	       a->dport == b->dport;
}

/* The segments of one direction that carry data, in the order of one of their stamps. */
struct seglist {
	const struct uls_bd_frame **v;
	size_t n;
	unsigned key;   /* the stamp they are ordered by */
};

static int cmp_by_key(const void *a, const void *b, void *arg)
{
	const struct uls_bd_frame *x = *(const struct uls_bd_frame *const *)a;
	const struct uls_bd_frame *y = *(const struct uls_bd_frame *const *)b;
	unsigned key = *(const unsigned *)arg;

	if (x->t[key] != y->t[key])
		return x->t[key] < y->t[key] ? -1 : 1;
	return x < y ? -1 : x > y;   /* stable: record order */
}

static int seglist_make(struct seglist *l, const struct bench_bd_side *s, uint8_t dir,
			unsigned key)
{
	l->n = 0;
	l->key = key;
	l->v = malloc((s->nfr ? s->nfr : 1) * sizeof(*l->v));
	if (!l->v)
		return -ENOMEM;
	for (size_t i = 0; i < s->nfr; i++)
		if (s->fr[i].dir == dir && s->fr[i].len > 0)
			l->v[l->n++] = &s->fr[i];
	qsort_r(l->v, l->n, sizeof(*l->v), cmp_by_key, &key);
	return 0;
}

/* The first segment of l whose stamp is >= t. */
static size_t lower_bound(const struct seglist *l, uint64_t t)
{
	size_t lo = 0, hi = l->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (l->v[mid]->t[l->key] < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

enum chain_result { CHAIN_OK, CHAIN_NO_SEGMENT, CHAIN_UNMATCHED, CHAIN_DISORDERED };

/* The chain of points of message i: its window on the sender is from its app send to the
 * next message's (the ping-pong sends message i + 1 only after message i has come back, so
 * every data segment the sender hands to its stack in that window belongs to message i,
 * retransmissions included). Its last byte is the highest sequence number sent in the
 * window; the receiver's first arrival of a segment holding that byte, between the app send
 * and the app receive, completed the message; the sender's transmission of that segment is
 * its latest one whose TAP write precedes that arrival. */
static enum chain_result chain(const struct bench_bd_side *snd, const struct bench_bd_side *rcv,
			       const struct seglist *sent, const struct seglist *rcvd, size_t i,
			       uint64_t p[BENCH_BD_POINTS])
{
	uint64_t lo = snd->app[i][0], done = rcv->app[i][1];
	uint64_t hi = i + 1 < snd->napp ? snd->app[i + 1][0] : UINT64_MAX;
	size_t first = lower_bound(sent, lo), end = first;
	const struct uls_bd_frame *last = NULL, *tx = NULL, *rx = NULL;
	uint32_t base = 0, top = 0;

	for (; end < sent->n && sent->v[end]->t[ULS_BD_STACK_OUT] < hi; end++) {
		const struct uls_bd_frame *f = sent->v[end];
		uint32_t rel;
		if (!last) {
			base = f->seq;
			last = f;
		}
		rel = f->seq + f->len - base;   /* serial arithmetic (RFC 1982): wraps */
		if (rel > top) {
			top = rel;
			last = f;
		}
	}
	if (!last)
		return CHAIN_NO_SEGMENT;
	uint32_t last_byte = base + top - 1;
	for (size_t k = lower_bound(rcvd, lo); k < rcvd->n; k++) {
		const struct uls_bd_frame *f = rcvd->v[k];
		if (f->t[ULS_BD_STACK_IN] > done)
			break;
		if (same_tuple(f, last) && (uint32_t)(last_byte - f->seq) < f->len) {
			rx = f;
			break;
		}
	}
	if (!rx)
		return CHAIN_UNMATCHED;
	for (size_t k = first; k < end; k++) {
		const struct uls_bd_frame *f = sent->v[k];
		if (same_tuple(f, rx) && f->seq == rx->seq && f->len == rx->len &&
		    f->t[ULS_BD_TAP_WRITE] != 0 && f->t[ULS_BD_TAP_WRITE] <= rx->t[ULS_BD_TAP_READ])
			tx = f;
	}
	if (!tx)
		return CHAIN_UNMATCHED;
	p[BENCH_BD_APP_SEND] = lo;
	for (unsigned k = 0; k < ULS_BD_STAMPS; k++) {
		p[BENCH_BD_STACK_OUT + k] = tx->t[k];
		p[BENCH_BD_TAP_READ + k] = rx->t[k];
	}
	p[BENCH_BD_APP_RECV] = done;
	for (unsigned k = 0; k < BENCH_BD_POINTS; k++)
		if (p[k] == 0 || (k > 0 && p[k] < p[k - 1]))
			return CHAIN_DISORDERED;
	return CHAIN_OK;
}

/* ---- statistics ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Mean and nearest-rank percentiles (the smallest sample with at least pct% of the samples
 * at or below it, as ulsping's RTT figures) of v[0..n), n > 0; sorts v. */
static struct bench_bd_stat stat_of(double *v, size_t n)
{
	double sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += v[i];
	qsort(v, n, sizeof(*v), cmp_double);
	return (struct bench_bd_stat){ .mean = sum / (double)n, .p50 = v[(50 * n + 99) / 100 - 1],
				       .p99 = v[(99 * n + 99) / 100 - 1] };
}

int bench__bd_analyse(const struct bench_bd_side *snd, const struct bench_bd_side *rcv,
		      size_t skip, struct bench_bd_result *res)
{
	size_t n = snd->napp < rcv->napp ? snd->napp : rcv->napp;
	struct seglist sent = { 0 }, rcvd = { 0 };
	double *v = NULL;
	int rc = -ENOMEM;

	memset(res, 0, sizeof(*res));
	if (skip >= n)
		return -ENODATA;
	res->messages = n - skip;
	/* one row per stage and one for the one-way latency, a column per sample */
	v = malloc((BENCH_BD_STAGES + 1) * res->messages * sizeof(*v));
	if (!v || seglist_make(&sent, snd, ULS_BD_SENT, ULS_BD_STACK_OUT) < 0 ||
	    seglist_make(&rcvd, rcv, ULS_BD_RECEIVED, ULS_BD_STACK_IN) < 0)
		goto out;
	for (size_t i = skip; i < n; i++) {
		uint64_t p[BENCH_BD_POINTS];
		switch (chain(snd, rcv, &sent, &rcvd, i, p)) {
		case CHAIN_NO_SEGMENT: res->no_segment++; continue;
		case CHAIN_UNMATCHED: res->unmatched++; continue;
		case CHAIN_DISORDERED: res->disordered++; continue;
		case CHAIN_OK: break;
		}
		for (unsigned k = 0; k < BENCH_BD_STAGES; k++)
			v[k * res->messages + res->samples] = (double)(p[k + 1] - p[k]) / 1e3;
		v[BENCH_BD_STAGES * res->messages + res->samples] =
			(double)(p[BENCH_BD_APP_RECV] - p[BENCH_BD_APP_SEND]) / 1e3;
		res->samples++;
	}
	rc = -ENODATA;
	if (res->samples == 0)
		goto out;
	for (unsigned k = 0; k < BENCH_BD_STAGES; k++) {
		res->stage[k] = stat_of(v + k * res->messages, res->samples);
		res->stage_mean_sum += res->stage[k].mean;
	}
	res->one_way = stat_of(v + BENCH_BD_STAGES * res->messages, res->samples);
	rc = 0;
out:
	free(v);
	free(sent.v);
	free(rcvd.v);
	return rc;
}

/* ---- output ---- */

void bench__bd_table_header(FILE *f)
{
	fprintf(f, "%9s %7s", "size", "samples");
	for (unsigned k = 0; k < BENCH_BD_STAGES; k++)
		fprintf(f, " %10s", bench__bd_stage_col[k]);
	fprintf(f, " %9s %9s\n", "one-way", "rtt/2");
}

void bench__bd_table_row(FILE *f, unsigned long long size, const struct bench_bd_result *r,
			 bool p50, double rtt_half)
{
	fprintf(f, "%9llu %7zu", size, r->samples);
	for (unsigned k = 0; k < BENCH_BD_STAGES; k++)
		fprintf(f, " %10.1f", p50 ? r->stage[k].p50 : r->stage[k].mean);
	fprintf(f, " %9.1f %9.1f\n", p50 ? r->one_way.p50 : r->one_way.mean, rtt_half);
}

void bench__bd_table_legend(FILE *f)
{
	for (unsigned k = 0; k < BENCH_BD_STAGES; k++)
		fprintf(f, "  %-10s %s\n", bench__bd_stage_col[k], bench__bd_stage_title[k]);
}

void bench__bd_json(FILE *f, const struct bench_bd_result *r, uint64_t lost)
{
	fprintf(f, "{\"messages\": %zu, \"samples\": %zu, \"no_segment\": %zu, "
		   "\"unmatched\": %zu, \"disordered\": %zu, \"segments_lost\": %llu, "
		   "\"one_way_us\": {\"mean\": %.3f, \"p50\": %.3f, \"p99\": %.3f}, "
		   "\"stage_mean_sum_us\": %.3f, \"stages\": [",
		r->messages, r->samples, r->no_segment, r->unmatched, r->disordered,
		(unsigned long long)lost, r->one_way.mean, r->one_way.p50, r->one_way.p99,
		r->stage_mean_sum);
	for (unsigned k = 0; k < BENCH_BD_STAGES; k++)
		fprintf(f, "%s{\"stage\": \"%s\", \"from\": \"%s\", \"to\": \"%s\", "
			   "\"mean_us\": %.3f, \"p50_us\": %.3f, \"p99_us\": %.3f}", k ? ", " : "",
			bench__bd_stage_key[k], bench__bd_point_name[k], bench__bd_point_name[k + 1],
			r->stage[k].mean, r->stage[k].p50, r->stage[k].p99);
	fputs("]}", f);
}

/* ---- files ---- */

struct file_hdr {
	char magic[8];
	uint32_t rec_size;      /* sizeof(struct uls_bd_frame) of the writer */
	uint32_t reserved;
	uint64_t napp, nfr, lost;
};

/* A file that ends early is not one of ours. */
static int read_all(int fd, void *buf, size_t len)
{
	int rc = bench__recv_whole(bench__fd_read, fd, buf, len, NULL);
	return rc == -EPIPE ? -EPROTO : rc;
}

int bench__bd_save(const char *path, const uint64_t (*app)[2], size_t napp,
		   const struct uls_bd_frame *fr, size_t nfr, uint64_t lost)
{
	struct file_hdr h = {
		.magic = FILE_MAGIC, .rec_size = sizeof(*fr), .napp = napp, .nfr = nfr,
		.lost = lost,
	};
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600), rc;

	if (fd < 0)
		return -errno;
	rc = bench__send_whole(bench__fd_write, fd, &h, sizeof(h));
	if (rc == 0 && napp)
		rc = bench__send_whole(bench__fd_write, fd, app, napp * sizeof(*app));
	if (rc == 0 && nfr)
		rc = bench__send_whole(bench__fd_write, fd, fr, nfr * sizeof(*fr));
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	return rc;
}

int bench__bd_load(const char *path, struct bench_bd_side *out)
{
	struct bench_bd_side s = { 0 };
	struct file_hdr h;
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return -errno;
	rc = fstat(fd, &st) < 0 ? -errno : read_all(fd, &h, sizeof(h));
	if (rc < 0)
		goto out;
	rc = -EPROTO;
	if (memcmp(h.magic, FILE_MAGIC, sizeof(h.magic)) != 0 ||
	    h.rec_size != sizeof(struct uls_bd_frame) || h.napp > COUNT_MAX || h.nfr > COUNT_MAX ||
	    (uint64_t)st.st_size != sizeof(h) + h.napp * sizeof(*s.app) + h.nfr * h.rec_size)
		goto out;
	s.napp = (size_t)h.napp;
	s.nfr = (size_t)h.nfr;
	s.lost = h.lost;
	s.app = malloc((s.napp ? s.napp : 1) * sizeof(*s.app));
	s.fr = malloc((s.nfr ? s.nfr : 1) * sizeof(*s.fr));
	rc = -ENOMEM;
	if (!s.app || !s.fr)
		goto out;
	rc = read_all(fd, s.app, s.napp * sizeof(*s.app));
	if (rc == 0)
		rc = read_all(fd, s.fr, s.nfr * sizeof(*s.fr));
out:
	close(fd);
	if (rc < 0)
		bench__bd_free(&s);
	else
		*out = s;
	return rc;
}

void bench__bd_free(struct bench_bd_side *s)
{
	free(s->app);
	free(s->fr);
	memset(s, 0, sizeof(*s));
}
