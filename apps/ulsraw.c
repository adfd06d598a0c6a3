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
 *         which no later frame shows as a gap, and stops once the three have come or 0.2 s
 *         after the first; how many came is in its JSON (end_frames).
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
 *
 * The frames and their accounting are apps/rawframe.c, the command line apps/rawopts.c.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "apps/clock.h"
#include "apps/rawframe.h"
#include "apps/rawopts.h"
#include "netif/frame.h"
#include "netif/tap.h"

#define HELLO_COUNT     3
#define END_COUNT       3
#define END_PAUSE_NS    20000000L  /* lets the receiver drain its queue before the end frames */
#define END_GRACE_S     0.2     /* how long the receiver waits for the repeats of the end frame */
#define TX_DEPTH        256     /* sender's transmit buffers */
#define TX_BATCH        64      /* frames per io_uring submission */
#define RX_DEPTH        256     /* receiver's reads in flight */
#define RX_BUDGET       256
#define WAIT_SLICE_MS   100     /* longest wait, so a signal or the deadline is noticed */
#define PORT_WAIT_MS    3000

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

static void on_frame(void *arg, const uint8_t *frame, size_t len, uint32_t off)
{
	(void)off;  /* the raw path runs on a TAP without offloads */
	bench__raw_rx_frame(arg, frame, len);
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
static int open_tap(const struct raw_opts *o, unsigned rx_depth, unsigned tx_depth,
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
	if (*mtu < NIF_MTU_MIN || *mtu > RAW_MTU_MAX) {
		fprintf(stderr, "ulsraw: %s's MTU %u is outside %d..%d\n", o->tap, *mtu,
			NIF_MTU_MIN, RAW_MTU_MAX);
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

static int write_recv_json(const struct raw_opts *o, const struct raw_rx *rx, unsigned mtu,
			   double secs, uint64_t lost, double cpu)
{
	FILE *f = open_json(o->json);

	if (!f)
		return -EIO;
	fprintf(f, "{\"mode\":\"raw\",\"role\":\"recv\",\"mtu\":%u,\"seconds\":%.6f,"
		   "\"requested_seconds\":%.3f,\"frames\":%llu,\"bytes_verified\":%llu,"
		   "\"gbps\":%.4f,\"frames_per_s\":%.1f,\"lost\":%llu,\"corrupt\":%llu,"
		   "\"ignored\":%llu,\"end_seen\":%s,\"end_frames\":%u,\"streams\":[",
		mtu, secs, o->seconds, (unsigned long long)rx->frames,
		(unsigned long long)rx->bytes, gbps_of(rx->bytes - rx->first_bytes, secs),
		secs > 0 ? (double)(rx->frames - 1) / secs : 0, (unsigned long long)lost,
		(unsigned long long)rx->corrupt, (unsigned long long)rx->ignored,
		rx->end_seen ? "true" : "false", rx->end_frames);
	for (unsigned i = 0; i < rx->nstreams; i++) {
		const struct raw_rx_stream *s = &rx->s[i];
		fprintf(f, "%s{\"id\":%u,\"frames\":%llu,\"bytes_verified\":%llu,\"gbps\":%.4f,"
			   "\"lost\":%llu,\"late\":%llu}",
			i ? "," : "", i, (unsigned long long)s->frames,
			(unsigned long long)s->bytes, gbps_of(s->bytes, secs),
			(unsigned long long)bench__raw_stream_lost(s), (unsigned long long)s->late);
	}
	fprintf(f, "],\"cpu_seconds\":%.3f}\n", cpu);
	return close_json(f, o->json);
}

static int run_recv(const struct raw_opts *o)
{
	struct nif_tap *tap;
	struct nif_dev_stats st;
	uint8_t *slot = NULL;
	unsigned mtu;
	int ret = 0, rc;
	struct raw_rx *rx = calloc(1, sizeof(*rx));

	if (!rx) {
		fprintf(stderr, "ulsraw: out of memory\n");
		return 1;
	}
	memcpy(rx->mac, o->mac, WIRE_ETH_ALEN);
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
		nif_tap_tx_queue(tap, slot, bench__raw_build_ctl(slot, bench__raw_mac_broadcast, rx->mac, RAW_MAGIC_HELLO,
							0, (uint64_t)i), 0);
	}
	if (nif_tap_tx_flush(tap) < 0 || !slot) {
		fprintf(stderr, "ulsraw: cannot send hello frames on %s\n", o->tap);
		ret = 1;
	}

	double deadline = bench__now_s() + o->seconds + 1;
	bool grace = false;
	/* After the first end frame, the receiver waits a moment for its repeats: a loss rule
	 * on the sender's port may drop end frames as well as data frames, and the count of
	 * end frames received (the JSON's end_frames) is what lets the two counts be compared
	 * exactly. */
	while (!ret && !stop && rx->end_frames < END_COUNT) {
		if (rx->end_seen && !grace) {
			grace = true;
			if (bench__now_s() + END_GRACE_S < deadline)
				deadline = bench__now_s() + END_GRACE_S;
		}
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
		for (int i = 0; i < 16 && rx->end_frames < END_COUNT; i++)
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
		lost += bench__raw_stream_lost(&rx->s[i]);
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

static int write_send_json(const struct raw_opts *o, const uint64_t *seq, unsigned mtu,
			   double secs, uint64_t frames, uint64_t errors, double cpu)
{
	FILE *f = open_json(o->json);

	if (!f)
		return -EIO;
	fprintf(f, "{\"mode\":\"raw\",\"role\":\"send\",\"mtu\":%u,\"seconds\":%.6f,"
		   "\"requested_seconds\":%.3f,\"frames\":%llu,\"bytes_sent\":%llu,"
		   "\"gbps\":%.4f,\"frames_per_s\":%.1f,\"errors\":%llu,\"end_frames\":%u,"
		   "\"streams\":[",
		mtu, secs, o->seconds, (unsigned long long)frames,
		(unsigned long long)(frames * mtu), gbps_of(frames * mtu, secs),
		secs > 0 ? (double)frames / secs : 0, (unsigned long long)errors, END_COUNT);
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

static int run_send(const struct raw_opts *o)
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
	size_t frame_len = (size_t)mtu + WIRE_ETH_HLEN;
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
			bench__raw_build_data(slot, frame_len, o->dst, o->mac, stream, seq[stream]);
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
		nif_tap_tx_queue(tap, slots[i], bench__raw_build_ctl(slots[i], o->dst, o->mac, RAW_MAGIC_END,
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

int main(int argc, char **argv)
{
	struct raw_opts o;
	struct sigaction sa;
	int rc = bench__raw_parse_args(argc, argv, &o);

	if (rc)
		return rc < 0 ? 0 : rc;
	/* No SA_RESTART: a signal ends the wait in progress and the run reports what it has. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	return o.role == RAW_SEND ? run_send(&o) : run_recv(&o);
}

