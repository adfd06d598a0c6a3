/* ulsraw: the raw link limit. Full-MTU Ethernet frames through the same TAP and Linux bridge
 * path the stacks use, without TCP: the analog of the raw HiPPI limit in Guedes & Peterson
 * (1997), and the ceiling the other organisations in ulsbench are measured against.
 *
 *   ulsraw recv --tap IF [--mtu M] [--mac MAC] --seconds S [--json FILE]
 *   ulsraw send --tap IF [--mtu M] [--mac MAC] --dst-mac MAC --seconds S [--streams N]
 *               [--json FILE]
 *
 * Start the receiver first: it runs S + 1 seconds, or until the sender's end frames arrive.
 *
 * Frames carry EtherType 0x88b5 (IEEE 802 "local experimental"), so no stack on the bridge
 * reacts to them. All integers are big-endian.
 *   data  MTU + 14 bytes: Ethernet header, "ULSR", stream id (u32), sequence (u64), then
 *         MTU - 16 pattern bytes (apps/pattern.h) at stream offset sequence * (MTU - 16),
 *         seed = stream id. The pattern covers the header too: a wrong stream id or sequence
 *         moves the expected bytes, so it fails the check like a damaged payload.
 *   hello 60 bytes, broadcast, "ULSH": a TAP has no MAC of its own, so the bridge cannot know
 *         which port the receiver's MAC lives behind until a frame comes from it; until then
 *         it floods every data frame to every port. The receiver sends 3 at start.
 *   end   60 bytes, "ULSE", streams (u32), data frames sent (u64): sent 3 times once every
 *         data write has completed. The receiver then also counts the frames lost at the tail,
 *         which no later frame shows as a gap, and stops early.
 *
 * Counting: bytes are Ethernet frame bytes minus the 14-byte Ethernet header, i.e. MTU-sized
 * units (our 16-byte header included), the counterpart of IP datagram bytes. TCP goodput at
 * the same MTU is at most (MTU - 40) / MTU of this figure.
 * A frame the kernel drops (the receiving TAP's queue is full) shows up as a sequence gap and
 * is counted as lost, not as an error; a frame with a wrong byte is corruption (exit 1). A
 * frame arriving behind a later one of its stream ("late") fills a gap counted earlier.
 *
 * One thread sends; N streams are N sequence spaces interleaved round-robin, so that the
 * driver can ask for N and get per-stream numbers (the raw link has no per-stream state).
 *
 * Exit status: 0 success, 1 corruption or I/O failure, 2 bad arguments.
 */
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "apps/clock.h"
#include "apps/pattern.h"
#include "netif/frame.h"
#include "netif/tap.h"

#define ETHERTYPE_RAW   0x88b5  /* IEEE 802 local experimental EtherType 1 */
#define HDR_LEN         16
#define DATA_OFF        (NIF_ETH_HLEN + HDR_LEN)
#define CTL_FRAME_LEN   60      /* minimum Ethernet frame without FCS */
#define MAGIC_DATA      "ULSR"
#define MAGIC_HELLO     "ULSH"
#define MAGIC_END       "ULSE"
#define HELLO_COUNT     3
#define END_COUNT       3
#define END_PAUSE_NS    20000000L  /* lets the receiver drain its queue before the end frames */

#define MTU_MAX         65521   /* drivers/net/tun.c: max_mtu = 65535 - ETH_HLEN */
#define SECONDS_MIN     0.1
#define SECONDS_MAX     600.0
#define STREAMS_MAX     1024u

#define TX_DEPTH        256     /* sender's transmit buffers */
#define TX_BATCH        64      /* frames per io_uring submission */
#define RX_DEPTH        256     /* receiver's reads in flight */
#define RX_BUDGET       256
#define WAIT_SLICE_MS   100     /* longest wait, so a signal or the deadline is noticed */
#define PORT_WAIT_MS    3000
#define MAX_CORRUPT_LOG 5

static const uint8_t mac_sender[NIF_ETH_ALEN] = { 0x02, 0x75, 0x6c, 0xff, 0x00, 0x01 };
static const uint8_t mac_receiver[NIF_ETH_ALEN] = { 0x02, 0x75, 0x6c, 0xff, 0x00, 0x02 };
static const uint8_t mac_broadcast[NIF_ETH_ALEN] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

enum role { ROLE_RECV, ROLE_SEND };

struct opts {
	enum role role;
	const char *tap;
	unsigned mtu;              /* 0: the device's */
	uint8_t mac[NIF_ETH_ALEN];
	uint8_t dst[NIF_ETH_ALEN];
	double seconds;
	unsigned streams;
	const char *json;
};

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

struct rx_stream {
	uint64_t next;      /* one past the highest sequence seen */
	uint64_t frames;
	uint64_t bytes;
	uint64_t gaps;      /* sequences skipped when a later one arrived */
	uint64_t late;      /* frames that arrived behind a later one */
	uint64_t tail;      /* frames after the last one seen, known from the end frame */
	size_t frame_len;   /* of the first frame: every frame of a stream has the same length */
};

struct rx {
	uint8_t mac[NIF_ETH_ALEN];
	struct rx_stream s[STREAMS_MAX];
	unsigned nstreams;  /* highest stream id seen + 1 (or the end frame's count) */
	uint64_t frames, bytes, corrupt, ignored;
	uint64_t first_bytes;
	double t_first, t_last;
	bool end_seen;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}


static void sleep_ns(long ns)
{
	struct timespec ts = { .tv_sec = ns / 1000000000L, .tv_nsec = ns % 1000000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR && !stop)
		;
}

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

static void put_header(uint8_t *f, const uint8_t dst[NIF_ETH_ALEN],
		       const uint8_t src[NIF_ETH_ALEN], const char *magic, uint32_t a, uint64_t b)
{
	memcpy(f, dst, NIF_ETH_ALEN);
	memcpy(f + NIF_ETH_ALEN, src, NIF_ETH_ALEN);
	f[12] = ETHERTYPE_RAW >> 8;
	f[13] = ETHERTYPE_RAW & 0xff;
	memcpy(f + NIF_ETH_HLEN, magic, 4);
	put32(f + NIF_ETH_HLEN + 4, a);
	put64(f + NIF_ETH_HLEN + 8, b);
}

/* A data frame of frame_len (> DATA_OFF) bytes: header, then the stream's pattern. */
static void build_data(uint8_t *f, size_t frame_len, const uint8_t dst[NIF_ETH_ALEN],
		       const uint8_t src[NIF_ETH_ALEN], uint32_t stream, uint64_t seq)
{
	size_t payload = frame_len - DATA_OFF;

	put_header(f, dst, src, MAGIC_DATA, stream, seq);
	bench__pattern_fill(stream, seq * payload, f + DATA_OFF, payload);
}

/* A hello or end frame; returns its length. */
static size_t build_ctl(uint8_t *f, const uint8_t dst[NIF_ETH_ALEN],
			const uint8_t src[NIF_ETH_ALEN], const char *magic, uint32_t a, uint64_t b)
{
	memset(f, 0, CTL_FRAME_LEN);
	put_header(f, dst, src, magic, a, b);
	return CTL_FRAME_LEN;
}

/* Sort a received frame; h is written for data and end frames. */
static enum kind classify(const uint8_t *f, size_t len, const uint8_t own[NIF_ETH_ALEN],
			  struct hdr *h)
{
	if (len < NIF_ETH_HLEN || f[12] != ETHERTYPE_RAW >> 8 || f[13] != (ETHERTYPE_RAW & 0xff))
		return KIND_FOREIGN;
	/* Hellos are broadcast, and while the bridge floods we may see frames for others. */
	if (memcmp(f, own, NIF_ETH_ALEN) != 0)
		return KIND_FOREIGN;
	if (len < DATA_OFF)
		return KIND_BAD;
	const uint8_t *p = f + NIF_ETH_HLEN;
	if (memcmp(p, MAGIC_DATA, 4) == 0) {
		if (len == DATA_OFF)
			return KIND_BAD;  /* no payload: we never send that */
		h->stream = get32(p + 4);
		h->seq = get64(p + 8);
		return KIND_DATA;
	}
	if (memcmp(p, MAGIC_END, 4) == 0) {
		h->stream = get32(p + 4);
		h->seq = get64(p + 8);
		return KIND_END;
	}
	return KIND_BAD;
}

/* Sequence accounting of one verified frame. */
static void seq_account(struct rx_stream *s, uint64_t seq)
{
	if (seq >= s->next) {
		s->gaps += seq - s->next;
		s->next = seq + 1;
	} else {
		s->late++;
	}
}

static uint64_t stream_lost(const struct rx_stream *s)
{
	return (s->late < s->gaps ? s->gaps - s->late : 0) + s->tail;
}

/* How many of `total` round-robin frames went to stream i of n. */
static uint64_t sent_to_stream(uint64_t total, unsigned n, unsigned i)
{
	return total / n + (i < total % n ? 1 : 0);
}

/* Count a corrupt frame; the first few are described on stderr. */
__attribute__((format(printf, 2, 3)))
static void report_corrupt(struct rx *rx, const char *fmt, ...)
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

static void end_frame(struct rx *rx, const struct hdr *h)
{
	if (rx->end_seen)
		return;  /* the repeats */
	if (h->stream == 0 || h->stream > STREAMS_MAX) {
		report_corrupt(rx, "end frame for %" PRIu32 " streams", h->stream);
		return;
	}
	rx->end_seen = true;
	if (h->stream > rx->nstreams)
		rx->nstreams = h->stream;
	for (unsigned i = 0; i < h->stream; i++) {
		struct rx_stream *s = &rx->s[i];
		uint64_t sent = sent_to_stream(h->seq, h->stream, i);
		s->tail = sent > s->next ? sent - s->next : 0;
	}
}

/* Verify and count one received frame. */
static void rx_frame(struct rx *rx, const uint8_t *f, size_t len)
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
	if (h.stream >= STREAMS_MAX) {
		report_corrupt(rx, "stream id %" PRIu32 ", sequence %" PRIu64, h.stream, h.seq);
		return;
	}
	struct rx_stream *s = &rx->s[h.stream];
	size_t payload = len - DATA_OFF;
	if (s->frame_len && s->frame_len != len) {
		report_corrupt(rx, "stream %" PRIu32 ", sequence %" PRIu64 ": %zu bytes, not %zu",
			       h.stream, h.seq, len, s->frame_len);
		return;
	}
	uint64_t bad = bench__pattern_check(h.stream, h.seq * payload, f + DATA_OFF, payload);
	if (bad != UINT64_MAX) {
		report_corrupt(rx, "stream %" PRIu32 ", sequence %" PRIu64 ": wrong byte at "
			       "stream offset %" PRIu64, h.stream, h.seq, bad);
		return;
	}
	s->frame_len = len;
	seq_account(s, h.seq);
	s->frames++;
	s->bytes += len - NIF_ETH_HLEN;
	if (h.stream >= rx->nstreams)
		rx->nstreams = h.stream + 1;
	if (rx->frames == 0) {
		rx->t_first = bench__now_s();
		rx->first_bytes = len - NIF_ETH_HLEN;
	}
	rx->frames++;
	rx->bytes += len - NIF_ETH_HLEN;
}

static void on_frame(void *arg, const uint8_t *frame, size_t len, uint32_t off)
{
	(void)off;  /* the raw path runs on a TAP without offloads */
	rx_frame(arg, frame, len);
}

/* The bridge forwards and learns only once a port is in the forwarding state, which follows
 * the TAP's carrier (on when a process attaches) through an asynchronous link event. Frames
 * written earlier would vanish, so wait for it. A TAP outside a bridge has nothing to wait for. */
static void wait_forwarding(const char *ifname)
{
	char path[96];

	snprintf(path, sizeof(path), "/sys/class/net/%s/brport/state", ifname);
	for (int waited = 0;; waited += 10) {
		FILE *f = fopen(path, "r");
		int state = -1;
		if (!f)
			return;
		if (fscanf(f, "%d", &state) != 1)
			state = -1;
		fclose(f);
		if (state == 3)  /* BR_STATE_FORWARDING */
			return;
		if (waited >= PORT_WAIT_MS || stop) {
			fprintf(stderr, "ulsraw: warning: bridge port %s not forwarding (state %d)\n",
				ifname, state);
			return;
		}
		sleep_ns(10000000L);
	}
}

/* Open the TAP and settle the MTU: --mtu may lower the device's but not exceed it (the bridge
 * would drop every frame). Returns 0, 1 (I/O failure) or 2 (bad argument). */
static int open_tap(const struct opts *o, unsigned rx_depth, unsigned tx_depth,
		    struct nif_tap **tap, unsigned *mtu)
{
	struct nif_tap_config cfg = {
		.ifname = o->tap, .mtu = 0, .rx_depth = rx_depth, .tx_depth = tx_depth,
	};
	int rc = nif_tap_open(tap, &cfg);

	if (rc < 0) {
		fprintf(stderr, "ulsraw: cannot open TAP %s: %s\n", o->tap, strerror(-rc));
		return 1;
	}
	unsigned dev_mtu = nif_tap_mtu(*tap);
	if (o->mtu > dev_mtu) {
		fprintf(stderr, "ulsraw: --mtu %u exceeds %s's MTU %u\n", o->mtu, o->tap, dev_mtu);
		nif_tap_close(*tap);
		return 2;
	}
	*mtu = o->mtu ? o->mtu : dev_mtu;
	if (*mtu < NIF_MTU_MIN || *mtu > MTU_MAX) {
		fprintf(stderr, "ulsraw: %s's MTU %u is outside %d..%d\n", o->tap, *mtu,
			NIF_MTU_MIN, MTU_MAX);
		nif_tap_close(*tap);
		return 2;
	}
	return 0;
}

static FILE *open_json(const char *path)
{
	FILE *f = fopen(path, "w");

	if (!f)
		fprintf(stderr, "ulsraw: %s: %s\n", path, strerror(errno));
	return f;
}

static int close_json(FILE *f, const char *path)
{
	if (ferror(f) | fclose(f)) {
		fprintf(stderr, "ulsraw: %s: write failed\n", path);
		return -EIO;
	}
	return 0;
}

static double gbps_of(uint64_t bytes, double secs)
{
	return secs > 0 ? (double)bytes * 8 / secs / 1e9 : 0;
}

static int write_recv_json(const struct opts *o, const struct rx *rx, unsigned mtu,
			   double secs, uint64_t lost, double cpu)
{
	FILE *f = open_json(o->json);

	if (!f)
		return -EIO;
	fprintf(f, "{\"mode\":\"raw\",\"role\":\"recv\",\"mtu\":%u,\"seconds\":%.6f,"
		   "\"requested_seconds\":%.3f,\"frames\":%llu,\"bytes_verified\":%llu,"
		   "\"gbps\":%.4f,\"frames_per_s\":%.1f,\"lost\":%llu,\"corrupt\":%llu,"
		   "\"ignored\":%llu,\"end_seen\":%s,\"streams\":[",
		mtu, secs, o->seconds, (unsigned long long)rx->frames,
		(unsigned long long)rx->bytes, gbps_of(rx->bytes - rx->first_bytes, secs),
		secs > 0 ? (double)(rx->frames - 1) / secs : 0, (unsigned long long)lost,
		(unsigned long long)rx->corrupt, (unsigned long long)rx->ignored,
		rx->end_seen ? "true" : "false");
	for (unsigned i = 0; i < rx->nstreams; i++) {
		const struct rx_stream *s = &rx->s[i];
		fprintf(f, "%s{\"id\":%u,\"frames\":%llu,\"bytes_verified\":%llu,\"gbps\":%.4f,"
			   "\"lost\":%llu,\"late\":%llu}",
			i ? "," : "", i, (unsigned long long)s->frames,
			(unsigned long long)s->bytes, gbps_of(s->bytes, secs),
			(unsigned long long)stream_lost(s), (unsigned long long)s->late);
	}
	fprintf(f, "],\"cpu_seconds\":%.3f}\n", cpu);
	return close_json(f, o->json);
}

static int run_recv(const struct opts *o)
{
	struct nif_tap *tap;
	struct nif_dev_stats st;
	uint8_t *slot = NULL;
	unsigned mtu;
	int ret = 0, rc;
	struct rx *rx = calloc(1, sizeof(*rx));

	if (!rx) {
		fprintf(stderr, "ulsraw: out of memory\n");
		return 1;
	}
	memcpy(rx->mac, o->mac, NIF_ETH_ALEN);
	rc = open_tap(o, RX_DEPTH, HELLO_COUNT, &tap, &mtu);
	if (rc) {
		free(rx);
		return rc;
	}
	double cpu0 = bench__cpu_s();
	wait_forwarding(o->tap);
	for (int i = 0; i < HELLO_COUNT; i++) {
		slot = nif_tap_tx_slot(tap);
		if (!slot)
			break;
		nif_tap_tx_queue(tap, slot, build_ctl(slot, mac_broadcast, rx->mac, MAGIC_HELLO,
							0, (uint64_t)i), 0);
	}
	if (nif_tap_tx_flush(tap) < 0 || !slot) {
		fprintf(stderr, "ulsraw: cannot send hello frames on %s\n", o->tap);
		ret = 1;
	}

	double deadline = bench__now_s() + o->seconds + 1;
	while (!ret && !stop && !rx->end_seen) {
		double left = deadline - bench__now_s();
		if (left <= 0)
			break;
		int ms = left * 1000 < WAIT_SLICE_MS ? (int)(left * 1000) + 1 : WAIT_SLICE_MS;
		rc = nif_tap_wait(tap, ms);
		if (rc < 0) {
			fprintf(stderr, "ulsraw: waiting on %s: %s\n", o->tap, strerror(-rc));
			ret = 1;
			break;
		}
		uint64_t before = rx->frames;
		/* Bounded, so that a sender outlasting us cannot keep us past the deadline. */
		for (int i = 0; i < 16 && !rx->end_seen; i++)
			if (nif_tap_rx(tap, on_frame, rx, RX_BUDGET) == 0)
				break;
		if (rx->frames != before)
			rx->t_last = bench__now_s();
	}
	double cpu = bench__cpu_s() - cpu0;
	bool uring = nif_tap_uses_io_uring(tap);
	nif_tap_get_stats(tap, &st);
	nif_tap_close(tap);
	if (st.rx_errors) {
		fprintf(stderr, "ulsraw: %llu read errors on %s\n",
			(unsigned long long)st.rx_errors, o->tap);
		ret = 1;
	}

	/* The window runs from the first verified frame to the last, so the time before the
	 * sender starts and after it stops does not count; the first frame only marks the start. */
	double secs = rx->frames > 1 ? rx->t_last - rx->t_first : 0;
	uint64_t lost = 0;
	for (unsigned i = 0; i < rx->nstreams; i++)
		lost += stream_lost(&rx->s[i]);
	printf("raw recv: %llu frames, %.2f GB in %.2f s = %.2f Gbit/s, %llu corrupt, %llu lost\n",
	       (unsigned long long)rx->frames, (double)rx->bytes / 1e9, secs,
	       gbps_of(rx->bytes - rx->first_bytes, secs), (unsigned long long)rx->corrupt,
	       (unsigned long long)lost);
	fprintf(stderr, "ulsraw: recv %s: mtu %u, %.0f frames/s, %u streams, %s, %llu ignored, "
			"%.2f s CPU, io_uring %s\n",
		o->tap, mtu, secs > 0 ? (double)(rx->frames - 1) / secs : 0, rx->nstreams,
		rx->end_seen ? "end frame seen (tail losses counted)" : "no end frame",
		(unsigned long long)rx->ignored, cpu, uring ? "yes" : "no");
	if (rx->frames == 0)
		fprintf(stderr, "ulsraw: warning: no data frames arrived on %s\n", o->tap);
	if (o->json && write_recv_json(o, rx, mtu, secs, lost, cpu) < 0)
		ret = 1;
	if (rx->corrupt)
		ret = 1;
	free(rx);
	return ret;
}

static int write_send_json(const struct opts *o, const uint64_t *seq, unsigned mtu,
			   double secs, uint64_t frames, uint64_t errors, double cpu)
{
	FILE *f = open_json(o->json);

	if (!f)
		return -EIO;
	fprintf(f, "{\"mode\":\"raw\",\"role\":\"send\",\"mtu\":%u,\"seconds\":%.6f,"
		   "\"requested_seconds\":%.3f,\"frames\":%llu,\"bytes_sent\":%llu,"
		   "\"gbps\":%.4f,\"frames_per_s\":%.1f,\"errors\":%llu,\"streams\":[",
		mtu, secs, o->seconds, (unsigned long long)frames,
		(unsigned long long)(frames * mtu), gbps_of(frames * mtu, secs),
		secs > 0 ? (double)frames / secs : 0, (unsigned long long)errors);
	for (unsigned i = 0; i < o->streams; i++)
		fprintf(f, "%s{\"id\":%u,\"frames\":%llu,\"bytes_sent\":%llu,\"gbps\":%.4f}",
			i ? "," : "", i, (unsigned long long)seq[i],
			(unsigned long long)(seq[i] * mtu), gbps_of(seq[i] * mtu, secs));
	fprintf(f, "],\"cpu_seconds\":%.3f}\n", cpu);
	return close_json(f, o->json);
}

/* Wait until every write handed to the kernel has completed, by taking every transmit
 * buffer (nif_tap_tx_slot waits for completions when none is free). The buffers stay ours:
 * the end frames are built in them. Returns the number taken. */
static unsigned drain(struct nif_tap *tap, uint8_t **slots, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		slots[i] = nif_tap_tx_slot(tap);
		if (!slots[i])
			break;
	}
	return i;
}

static int run_send(const struct opts *o)
{
	struct nif_tap *tap;
	struct nif_dev_stats st;
	uint8_t *slots[TX_DEPTH];
	unsigned mtu, stream = 0;
	uint64_t frames = 0;
	int ret = 0;
	uint64_t *seq = calloc(o->streams, sizeof(*seq));

	if (!seq) {
		fprintf(stderr, "ulsraw: out of memory\n");
		return 1;
	}
	/* One read in flight is enough: the sender does not receive. */
	int rc = open_tap(o, 1, TX_DEPTH, &tap, &mtu);
	if (rc) {
		free(seq);
		return rc;
	}
	size_t frame_len = (size_t)mtu + NIF_ETH_HLEN;
	double cpu0 = bench__cpu_s();
	wait_forwarding(o->tap);

	double t0 = bench__now_s(), deadline = t0 + o->seconds;
	while (!ret && !stop) {
		for (int i = 0; i < TX_BATCH; i++) {
			uint8_t *slot = nif_tap_tx_slot(tap);
			if (!slot) {
				ret = 1;
				break;
			}
			build_data(slot, frame_len, o->dst, o->mac, stream, seq[stream]);
			nif_tap_tx_queue(tap, slot, frame_len, 0);
			seq[stream]++;
			frames++;
			stream = stream + 1 == o->streams ? 0 : stream + 1;
		}
		if (nif_tap_tx_flush(tap) < 0)
			ret = 1;
		if (bench__now_s() >= deadline)
			break;
	}
	unsigned held = drain(tap, slots, TX_DEPTH);
	double secs = bench__now_s() - t0;
	double cpu = bench__cpu_s() - cpu0;
	if (ret || held < TX_DEPTH)
		fprintf(stderr, "ulsraw: transmit on %s failed\n", o->tap);
	if (held < TX_DEPTH)
		ret = 1;
	nif_tap_get_stats(tap, &st);

	/* Every data frame has left; give the receiver a moment to drain its queue so that the
	 * end frames are not dropped behind them. */
	sleep_ns(END_PAUSE_NS);
	for (unsigned i = 0; i < END_COUNT && i < held; i++)
		nif_tap_tx_queue(tap, slots[i], build_ctl(slots[i], o->dst, o->mac, MAGIC_END,
							  o->streams, frames), 0);
	nif_tap_tx_flush(tap);
	drain(tap, slots, END_COUNT < held ? END_COUNT : held);
	nif_tap_close(tap);

	if (st.tx_errors) {
		fprintf(stderr, "ulsraw: %llu of %llu writes to %s failed\n",
			(unsigned long long)st.tx_errors, (unsigned long long)frames, o->tap);
		ret = 1;
	}
	uint64_t ok = frames - (st.tx_errors < frames ? st.tx_errors : frames);
	printf("raw send: %llu frames, %.2f GB in %.2f s = %.2f Gbit/s, %.0f frames/s, "
	       "%llu errors\n",
	       (unsigned long long)ok, (double)(ok * mtu) / 1e9, secs, gbps_of(ok * mtu, secs),
	       secs > 0 ? (double)ok / secs : 0, (unsigned long long)st.tx_errors);
	fprintf(stderr, "ulsraw: send %s: mtu %u, %u streams, %llu waits for buffers, "
			"%.2f s CPU\n",
		o->tap, mtu, o->streams, (unsigned long long)st.tx_waits, cpu);
	if (o->json && write_send_json(o, seq, mtu, secs, ok, st.tx_errors, cpu) < 0)
		ret = 1;
	free(seq);
	return ret;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ulsraw recv --tap IF [--mtu M] [--mac MAC] --seconds S [--json FILE]\n"
		"       ulsraw send --tap IF [--mtu M] [--mac MAC] --dst-mac MAC --seconds S\n"
		"                   [--streams N] [--json FILE]\n"
		"Full-MTU frames (EtherType 0x88b5) through a TAP, verified byte for byte.\n"
		"MTU %d..%d (default: the device's), S %.1f..%.0f, N 1..%u;\n"
		"--mac defaults to 02:75:6c:ff:00:02 (recv) and 02:75:6c:ff:00:01 (send).\n",
		NIF_MTU_MIN, MTU_MAX, SECONDS_MIN, SECONDS_MAX, STREAMS_MAX);
}

/* A decimal integer in lo..hi; false on anything else. */
static bool parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;

	if (!s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return false;
	*out = (unsigned)v;
	return true;
}

static bool parse_seconds(const char *s, double *out)
{
	char *end;

	if (!s || !*s)
		return false;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || *end || !isfinite(v) || v < SECONDS_MIN || v > SECONDS_MAX)
		return false;
	*out = v;
	return true;
}

/* A unicast MAC other than zero: what a frame's source may be. */
static bool parse_unicast_mac(const char *s, uint8_t mac[NIF_ETH_ALEN])
{
	static const uint8_t zero[NIF_ETH_ALEN];
	uint8_t m[NIF_ETH_ALEN];

	if (!nif_mac_parse(s, m) || (m[0] & 1) || memcmp(m, zero, NIF_ETH_ALEN) == 0)
		return false;
	memcpy(mac, m, NIF_ETH_ALEN);
	return true;
}

static int bad(const char *opt, const char *arg, const char *want)
{
	fprintf(stderr, "ulsraw: bad %s '%s': expected %s\n", opt, arg, want);
	return 2;
}

/* Fill o from the command line. Returns 0, 2 (bad arguments) or -1 (help was printed). */
static int parse_args(int argc, char **argv, struct opts *o)
{
	static const struct option lopts[] = {
		{ "tap", required_argument, NULL, 't' }, { "mtu", required_argument, NULL, 'm' },
		{ "mac", required_argument, NULL, 'a' }, { "dst-mac", required_argument, NULL, 'd' },
		{ "seconds", required_argument, NULL, 's' },
		{ "streams", required_argument, NULL, 'n' },
		{ "json", required_argument, NULL, 'j' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool have_mac = false, have_dst = false, have_secs = false, have_streams = false;
	int c;

	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		usage(stdout);
		return -1;
	}
	if (argc < 2 || (strcmp(argv[1], "recv") && strcmp(argv[1], "send"))) {
		usage(stderr);
		return 2;
	}
	memset(o, 0, sizeof(*o));
	o->role = strcmp(argv[1], "send") ? ROLE_RECV : ROLE_SEND;
	o->streams = 1;
	/* Options follow the role word; optind 0 also resets getopt between calls (tests). */
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc - 1, argv + 1, "h", lopts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (!*optarg || strlen(optarg) >= 16 || strchr(optarg, '/'))
				return bad("--tap", optarg, "an interface name of 1..15 characters");
			o->tap = optarg;
			break;
		case 'm':
			if (!parse_uint(optarg, NIF_MTU_MIN, MTU_MAX, &o->mtu))
				return bad("--mtu", optarg, "68..65521");
			break;
		case 'a':
			if (!parse_unicast_mac(optarg, o->mac))
				return bad("--mac", optarg, "a unicast MAC like 02:75:6c:ff:00:02");
			have_mac = true;
			break;
		case 'd':
			if (!nif_mac_parse(optarg, o->dst))
				return bad("--dst-mac", optarg, "a MAC like 02:75:6c:ff:00:02");
			have_dst = true;
			break;
		case 's':
			if (!parse_seconds(optarg, &o->seconds))
				return bad("--seconds", optarg, "a number of seconds in 0.1..600");
			have_secs = true;
			break;
		case 'n':
			if (!parse_uint(optarg, 1, STREAMS_MAX, &o->streams))
				return bad("--streams", optarg, "1..1024");
			have_streams = true;
			break;
		case 'j':
			if (!*optarg)
				return bad("--json", optarg, "a file name");
			o->json = optarg;
			break;
		case 'h':
			usage(stdout);
			return -1;
		default:
			fprintf(stderr, "ulsraw: bad option '%s' (or its value is missing)\n",
				argv[optind]);
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "ulsraw: unexpected argument '%s'\n", argv[optind + 1]);
		return 2;
	}
	if (!o->tap || !have_secs) {
		fprintf(stderr, "ulsraw: %s needs --tap and --seconds\n", argv[1]);
		return 2;
	}
	if (o->role == ROLE_RECV && (have_dst || have_streams)) {
		fprintf(stderr, "ulsraw: --dst-mac and --streams are for send\n");
		return 2;
	}
	if (o->role == ROLE_SEND && !have_dst) {
		fprintf(stderr, "ulsraw: send needs --dst-mac (the receiver's --mac)\n");
		return 2;
	}
	if (!have_mac)
		memcpy(o->mac, o->role == ROLE_SEND ? mac_sender : mac_receiver, NIF_ETH_ALEN);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct sigaction sa;
	int rc = parse_args(argc, argv, &o);

	if (rc)
		return rc < 0 ? 0 : rc;
	/* No SA_RESTART: a signal ends the wait in progress and the run reports what it has. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	return o.role == ROLE_SEND ? run_send(&o) : run_recv(&o);
}
