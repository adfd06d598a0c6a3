/* apps/rawframe.c: ulsraw's frames and the receiver's accounting (rawframe.h). */
#include <endian.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "apps/clock.h"
#include "apps/pattern.h"
#include "apps/rawframe.h"

#define MAX_CORRUPT_LOG 5

const uint8_t bench__raw_mac_sender[WIRE_ETH_ALEN] = { 0x02, 0x75, 0x6c, 0xff, 0x00, 0x01 };
const uint8_t bench__raw_mac_receiver[WIRE_ETH_ALEN] = { 0x02, 0x75, 0x6c, 0xff, 0x00, 0x02 };
const uint8_t bench__raw_mac_broadcast[WIRE_ETH_ALEN] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

/* What a received frame is. */
enum kind {
	KIND_DATA,
	KIND_END,
	KIND_FOREIGN,   /* not for us: other EtherType, other destination, hellos */
	KIND_BAD,       /* for us but malformed: counted as corruption */
};

struct hdr {
	uint32_t stream;  /* end frames: number of streams */
	uint64_t seq;     /* end frames: data frames sent */
};


static void put32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, 8);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return be32toh(v);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return be64toh(v);
}

static void put_header(uint8_t *f, const uint8_t dst[WIRE_ETH_ALEN],
		       const uint8_t src[WIRE_ETH_ALEN], const char *magic, uint32_t a, uint64_t b)
{
	memcpy(f, dst, WIRE_ETH_ALEN);
	memcpy(f + WIRE_ETH_ALEN, src, WIRE_ETH_ALEN);
	f[12] = RAW_ETHERTYPE >> 8;
	f[13] = RAW_ETHERTYPE & 0xff;
	memcpy(f + WIRE_ETH_HLEN, magic, 4);
	put32(f + WIRE_ETH_HLEN + 4, a);
	put64(f + WIRE_ETH_HLEN + 8, b);
}

void bench__raw_build_data(uint8_t *f, size_t frame_len, const uint8_t dst[WIRE_ETH_ALEN],
		       const uint8_t src[WIRE_ETH_ALEN], uint32_t stream, uint64_t seq)
{
	size_t payload = frame_len - RAW_DATA_OFF;

	put_header(f, dst, src, RAW_MAGIC_DATA, stream, seq);
	bench__pattern_fill(stream, seq * payload, f + RAW_DATA_OFF, payload);
}

size_t bench__raw_build_ctl(uint8_t *f, const uint8_t dst[WIRE_ETH_ALEN],
			const uint8_t src[WIRE_ETH_ALEN], const char *magic, uint32_t a, uint64_t b)
{
	memset(f, 0, RAW_CTL_FRAME_LEN);
	put_header(f, dst, src, magic, a, b);
	return RAW_CTL_FRAME_LEN;
}

/* Sort a received frame; h is written for data and end frames. */
static enum kind classify(const uint8_t *f, size_t len, const uint8_t own[WIRE_ETH_ALEN],
			  struct hdr *h)
{
	if (len < WIRE_ETH_HLEN || f[12] != RAW_ETHERTYPE >> 8 || f[13] != (RAW_ETHERTYPE & 0xff))
		return KIND_FOREIGN;
	/* Hellos are broadcast, and while the bridge floods we may see frames for others. */
	if (memcmp(f, own, WIRE_ETH_ALEN) != 0)
		return KIND_FOREIGN;
	if (len < RAW_DATA_OFF)
		return KIND_BAD;
	const uint8_t *p = f + WIRE_ETH_HLEN;
	if (memcmp(p, RAW_MAGIC_DATA, 4) == 0) {
		if (len == RAW_DATA_OFF)
			return KIND_BAD;  /* no payload: we never send that */
		h->stream = get32(p + 4);
		h->seq = get64(p + 8);
		return KIND_DATA;
	}
	if (memcmp(p, RAW_MAGIC_END, 4) == 0) {
		h->stream = get32(p + 4);
		h->seq = get64(p + 8);
		return KIND_END;
	}
	return KIND_BAD;
}

/* Sequence accounting of one verified frame. */
static void seq_account(struct raw_rx_stream *s, uint64_t seq)
{
	if (seq >= s->next) {
		s->gaps += seq - s->next;
		s->next = seq + 1;
	} else {
		s->late++;
	}
}

uint64_t bench__raw_stream_lost(const struct raw_rx_stream *s)
{
	return (s->late < s->gaps ? s->gaps - s->late : 0) + s->tail;
}

uint64_t bench__raw_sent_to_stream(uint64_t total, unsigned n, unsigned i)
{
	return total / n + (i < total % n ? 1 : 0);
}

/* Count a corrupt frame; the first few are described on stderr. */
__attribute__((format(printf, 2, 3)))
static void report_corrupt(struct raw_rx *rx, const char *fmt, ...)
{
	va_list ap;

	if (++rx->corrupt > MAX_CORRUPT_LOG)
		return;
	fprintf(stderr, "ulsraw: corrupt frame: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void end_frame(struct raw_rx *rx, const struct hdr *h)
{
	if (h->stream == 0 || h->stream > RAW_STREAMS_MAX) {
		report_corrupt(rx, "end frame for %" PRIu32 " streams", h->stream);
		return;
	}
	/* The repeats are counted, not accounted again: a loss rule on the sender's port
	 * drops end frames too, and whoever compares its count with ours needs to know how
	 * many of them arrived. */
	rx->end_frames++;
	if (rx->end_seen)
		return;
	rx->end_seen = true;
	if (h->stream > rx->nstreams)
		rx->nstreams = h->stream;
	for (unsigned i = 0; i < h->stream; i++) {
		struct raw_rx_stream *s = &rx->s[i];
		uint64_t sent = bench__raw_sent_to_stream(h->seq, h->stream, i);
		s->tail = sent > s->next ? sent - s->next : 0;
	}
}

void bench__raw_rx_frame(struct raw_rx *rx, const uint8_t *f, size_t len)
{
	struct hdr h;
	enum kind k = classify(f, len, rx->mac, &h);

	if (k == KIND_FOREIGN) {
		rx->ignored++;
		return;
	}
	if (k == KIND_BAD) {
		report_corrupt(rx, "malformed, %zu bytes", len);
		return;
	}
	if (k == KIND_END) {
		end_frame(rx, &h);
		return;
	}
	if (h.stream >= RAW_STREAMS_MAX) {
		report_corrupt(rx, "stream id %" PRIu32 ", sequence %" PRIu64, h.stream, h.seq);
		return;
	}
	struct raw_rx_stream *s = &rx->s[h.stream];
	size_t payload = len - RAW_DATA_OFF;
	if (s->frame_len && s->frame_len != len) {
		report_corrupt(rx, "stream %" PRIu32 ", sequence %" PRIu64 ": %zu bytes, not %zu",
			       h.stream, h.seq, len, s->frame_len);
		return;
	}
	uint64_t bad = bench__pattern_check(h.stream, h.seq * payload, f + RAW_DATA_OFF, payload);
	if (bad != UINT64_MAX) {
		report_corrupt(rx, "stream %" PRIu32 ", sequence %" PRIu64 ": wrong byte at "
			       "stream offset %" PRIu64, h.stream, h.seq, bad);
		return;
	}
	s->frame_len = len;
	seq_account(s, h.seq);
	s->frames++;
	s->bytes += len - WIRE_ETH_HLEN;
	if (h.stream >= rx->nstreams)
		rx->nstreams = h.stream + 1;
	if (rx->frames == 0) {
		rx->t_first = bench__now_s();
		rx->first_bytes = len - WIRE_ETH_HLEN;
	}
	rx->frames++;
	rx->bytes += len - WIRE_ETH_HLEN;
}
