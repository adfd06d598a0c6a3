/* SYN shedding: a process that falls behind its receive queue under a SYN flood drops
 * new SYNs before lwIP, so that its CPU goes to the frames of established connections.
 *
 * Read first: RFC 4987 §3 (SYN flooding and the defences), RFC 6298 §2 and §5 (a client
 * retransmits a SYN after its RTO, 1 s by default), RFC 9293 §3.10.7.2 (a SYN to a listener).
 *
 * Why (docs/benchmarks.md, "SYN flood"): on a machine where other jobs keep the run queue
 * long, the stack thread of a listener under 50,000 SYN/s got 7% of a CPU and was runnable
 * but waiting for one 95% of the time; a SYN costs the process about 5 us (lwIP, the cookie,
 * the SYN,ACK written through the TAP and the bridge), more than that share. Its TAP queue
 * then filled and the kernel dropped frames at its tail, data segments of the established
 * streams as much as SYNs, and the streams stopped for the rest of the flood. A SYN shed
 * here costs its read and these checks only; the established connections' frames are taken
 * as before.
 *
 * When: the previous receive round (the frames of one rx call, drive.c's take_frames)
 * held at least SHED_ROUND_MIN frames, at least three quarters of them pure SYNs (SYN
 * without ACK, RST or FIN). A round that long means frames waited while the thread was
 * away; that most of them were SYNs means they are what keeps it behind (a flood's rounds
 * were 90-99% SYNs; a burst of real clients also sends their handshakes' ACKs and data). A burst of data alone (a large
 * window arriving at once) never sheds. Once on, shedding lasts until no round has said so
 * for SHED_HOLD_MS: a shed SYN costs so little that the rounds shrink at once, and without
 * the hold the process would take the flood's SYNs in again every other round.
 *
 * Legitimate clients: a SYN shed here is remembered by its connection (addresses, ports)
 * and initial sequence number; its retransmission, the same SYN again (RFC 9293 §3.8.1: a
 * retransmitted SYN carries the same ISN), is always taken in, under pressure or not
 * (counted syn_shed_readmitted). A flood's SYNs come once each from random sources, so the
 * memory admits none of them; a client loses at most its first SYN, one RTO (1 s). The
 * memory is two generations of fingerprints (SipHash-2-4 of the tuple under a per-process
 * key, so a sender cannot aim collisions), each of SHED_SLOTS slots; the older one is
 * forgotten when the newer is SHED_GEN_MS old or three quarters full. So a shed SYN is
 * remembered for at least SHED_GEN_MS while fewer than 3/4 * SHED_SLOTS / SHED_GEN_MS SYNs
 * per millisecond are shed (65,000 SYN/s), and for proportionally less above that rate.
 * Deviation: if the memory cannot be allocated, nothing is shed (a client's SYN must never
 * be lost for good).
 *
 * Known peers: a pure SYN from an address that sent this process a segment with ACK and
 * without SYN (a connection's, or a handshake's last; KNOWN_SLOTS direct-mapped) is never
 * shed (syn_shed_known_peer): a flood's spoofed sources send SYNs only.
 *
 * Real clients come back: when at least a quarter of the SYNs shed (SHED_JUDGE_MIN or more,
 * counts halved every generation) were retransmitted and taken in again, the SYNs are a
 * burst of clients, not a flood, and shedding stops for SHED_SUSPEND_MS
 * (syn_shed_suspended): 10,000 connections at once to a python server under ulsrun took
 * 19-22 s to connect with shedding, 5 s without (make check-load). Deviation from a
 * complete defence: a flood that sends each spoofed SYN twice, 1 s apart, turns shedding
 * off, at twice its cost; the listener then answers it with cookies, as before shedding.
 * ULS_SYN_SHED=0 turns it off (the process then takes every SYN to lwIP, as before).
 *
 * Counters: syn_shed (a pure SYN dropped here), syn_shed_readmitted (a retransmitted SYN
 * taken in because it was shed before), syn_shed_suspended, syn_shed_known_peer (a SYN
 * taken in under pressure because its source is a known peer). Both the listener's SYNs and SYNs to ports without
 * a listener are shed: both are a flood's work (the second would cost a reset).
 *
 * Cost outside a flood: two header views per IP packet (no hash, no clock: the clock,
 * 0.35-0.42 us here, docs/architecture.md, is read only while shedding or remembering).
 * Core lock held for every call (one receive round at a time).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "netif/wire/proto.h"
#include "netif/wire/wire.h"

#define SHED_ROUND_MIN 16          /* frames in a round that say frames waited */
#define SHED_HOLD_MS 500           /* pressure lasts this long after its last round */
#define SHED_SLOTS (1u << 18)      /* per generation: 2 MiB of fingerprints */
#define SHED_GEN_MS 3000           /* a generation's life: two retransmissions of 1 s */
#define SHED_JUDGE_MIN 256         /* shed SYNs before their comebacks are judged */
#define SHED_SUSPEND_MS 10000      /* no shedding this long after a legitimate burst */

static struct {
	unsigned round_frames, round_syns;
	bool pressure;
	uint64_t pressure_ms;          /* the last round that said so */
	unsigned win_shed, win_back;   /* shed, and taken in again, halved every generation */
	bool suspended;
	uint64_t suspend_ms;
	bool failed;                   /* the memory could not be allocated */
	uint64_t *gen[2];              /* gen[cur]: new entries; gen[!cur]: the older ones */
	unsigned used[2];
	unsigned cur;
	uint64_t gen_start_ms;
	uint8_t key[16];
} shed;

static uint64_t clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The clock, replaced by tests/unit/test_synshed.c with one it moves itself. */
uint64_t (*stk__synshed_clock)(void) = clock_ms;

static uint64_t mono_ms(void)
{
	return stk__synshed_clock();
}

static bool memory_ready(void)
{
	if (shed.gen[0])
		return true;
	if (shed.failed)
		return false;
	shed.gen[0] = calloc(SHED_SLOTS, sizeof(uint64_t));
	shed.gen[1] = calloc(SHED_SLOTS, sizeof(uint64_t));
	if (!shed.gen[0] || !shed.gen[1]) {
		free(shed.gen[0]);
		free(shed.gen[1]);
		shed.gen[0] = shed.gen[1] = NULL;
		shed.failed = true;
		return false;
	}
	for (unsigned i = 0; i < sizeof(shed.key); i += 4) {
		uint32_t r = stk__random32();
		memcpy(shed.key + i, &r, 4);
	}
	shed.cur = 0;
	shed.used[0] = shed.used[1] = 0;
	shed.gen_start_ms = mono_ms();
	return true;
}

/* 0 marks an empty slot: a fingerprint is never 0. */
static bool gen_has(const uint64_t *g, uint64_t fp)
{
	for (unsigned i = (unsigned)fp & (SHED_SLOTS - 1);; i = (i + 1) & (SHED_SLOTS - 1)) {
		if (g[i] == fp)
			return true;
		if (!g[i])
			return false;
	}
}

static void forget_older(uint64_t now)
{
	unsigned old = shed.cur ^ 1u;

	memset(shed.gen[old], 0, SHED_SLOTS * sizeof(uint64_t));
	shed.win_shed /= 2;
	shed.win_back /= 2;
	shed.used[old] = 0;
	shed.cur = old;
	shed.gen_start_ms = now;
}

static void remember(uint64_t fp)
{
	uint64_t *g;

	if (shed.used[shed.cur] >= SHED_SLOTS / 4 * 3)
		forget_older(mono_ms());
	g = shed.gen[shed.cur];
	for (unsigned i = (unsigned)fp & (SHED_SLOTS - 1);; i = (i + 1) & (SHED_SLOTS - 1)) {
		if (g[i] == fp)
			return;
		if (!g[i]) {
			g[i] = fp;
			shed.used[shed.cur]++;
			return;
		}
	}
}

void stk__synshed_round_begin(void)
{
	shed.round_frames = 0;
	shed.round_syns = 0;
	if (shed.gen[0] && (shed.used[0] || shed.used[1])) {
		uint64_t now = mono_ms();
		if (now - shed.gen_start_ms >= SHED_GEN_MS)
			forget_older(now);
	}
}

/* ULS_SYN_SHED=0 in the environment turns shedding off (read once). */
static bool shed_on(void)
{
	static int enabled = -1;

	if (enabled < 0) {
		const char *e = getenv("ULS_SYN_SHED");
		enabled = !(e && strcmp(e, "0") == 0);
	}
	return enabled;
}

void stk__synshed_round_end(void)
{
	if (!shed_on())
		return;
	/* Shed SYNs that come back are a burst of real clients, not a flood: shedding them
	 * only delays each by an RTO. */
	if (shed.win_shed >= SHED_JUDGE_MIN && shed.win_back * 4 >= shed.win_shed) {
		stk__count(STK_CNT_SYN_SHED_SUSPENDED);
		shed.suspended = true;
		shed.suspend_ms = mono_ms();
		shed.pressure = false;
		shed.win_shed = shed.win_back = 0;
	}
	if (shed.suspended) {
		if (mono_ms() - shed.suspend_ms < SHED_SUSPEND_MS)
			return;
		shed.suspended = false;
	}
	if (shed.round_frames >= SHED_ROUND_MIN && shed.round_syns * 4 >= shed.round_frames * 3) {
		shed.pressure = true;
		shed.pressure_ms = mono_ms();
	} else if (shed.pressure && mono_ms() - shed.pressure_ms >= SHED_HOLD_MS) {
		shed.pressure = false;
	}
}

/* Peers known to talk TCP with this process: the source address of every segment with ACK
 * and without SYN (a connection's, or a handshake's last), direct-mapped. A flood's spoofed
 * sources send nothing but SYNs; a client of this process that already has a connection,
 * or just completed one, does not wait behind a flood. Deviation: a sender that also
 * spoofs ACKs from its sources gets their SYNs through, to lwIP's cookies, as before
 * shedding. */
#define KNOWN_SLOTS 4096u
static uint32_t known[KNOWN_SLOTS];

static uint32_t known_fp(const uint8_t a[16], unsigned *slot)
{
	uint32_t w[4], h;

	memcpy(w, a, 16);
	h = (w[0] ^ w[1] * 0x85ebca6bu ^ w[2] * 0xc2b2ae35u ^ w[3] * 0x27d4eb2fu) * 0x9e3779b1u;
	*slot = h >> 20;
	return (w[0] ^ w[1] ^ w[2] ^ w[3]) | 1u;
}

static void known_add(const uint8_t a[16])
{
	unsigned i;
	uint32_t fp = known_fp(a, &i);

	known[i] = fp;
}

static bool known_has(const uint8_t a[16])
{
	unsigned i;
	uint32_t fp = known_fp(a, &i);

	return known[i] == fp;
}

/* The fingerprint of a pure SYN in the IP packet (l3, len), or 0 if it is not one (and
 * whether its source is a known peer). */
static uint64_t pure_syn(const uint8_t *l3, size_t len, bool ipv6, bool *known_src)
{
	struct wire_tcp tcp;
	struct {
		uint8_t src[16], dst[16];
		uint16_t sport, dport;
		uint32_t seq;
	} t;

	memset(&t, 0, sizeof(t));
	if (ipv6) {
		struct wire_ipv6 ip;
		/* Extension headers before TCP are rare in SYNs; such a SYN is not shed. */
		if (wire_ipv6_view(&ip, l3, len) < 0 || ip.next != WIRE_IPPROTO_TCP ||
		    wire_tcp_view(&tcp, ip.payload, ip.payload_len) < 0)
			return 0;
		memcpy(t.src, ip.src, 16);
		memcpy(t.dst, ip.dst, 16);
	} else {
		struct wire_ipv4 ip;
		/* A fragment is left to reassembly (its first fragment's header is not the
		 * segment's whole story). */
		if (wire_ipv4_view(&ip, l3, len) < 0 || ip.proto != WIRE_IPPROTO_TCP ||
		    (ip.frag & 0x3fff) || wire_tcp_view(&tcp, ip.data, ip.data_len) < 0)
			return 0;
		memcpy(t.src, &ip.src, 4);
		memcpy(t.dst, &ip.dst, 4);
	}
	if ((tcp.flags & (WIRE_TCP_SYN | WIRE_TCP_ACK)) == WIRE_TCP_ACK) {
		known_add(t.src);
		return 0;
	}
	if ((tcp.flags & (WIRE_TCP_SYN | WIRE_TCP_ACK | WIRE_TCP_RST | WIRE_TCP_FIN)) != WIRE_TCP_SYN)
		return 0;
	if (known_src)
		*known_src = known_has(t.src);
	t.sport = tcp.sport;
	t.dport = tcp.dport;
	t.seq = tcp.seq;
	return stk__siphash24(shed.key, &t, sizeof(t)) | 1u;
}

bool stk__synshed_drop(const uint8_t *l3, size_t len, bool ipv6)
{
	shed.round_frames++;
	/* The key is drawn with the memory, before the first fingerprint that counts. */
	bool can = shed.pressure && memory_ready();
	bool known_src = false;
	uint64_t fp = pure_syn(l3, len, ipv6, &known_src);
	if (!fp)
		return false;
	shed.round_syns++;
	if (known_src) {
		if (can)
			stk__count(STK_CNT_SYN_SHED_KNOWN_PEER);
		return false;
	}
	if (shed.gen[0] && (shed.used[0] || shed.used[1]) &&
	    (gen_has(shed.gen[0], fp) || gen_has(shed.gen[1], fp))) {
		stk__count(STK_CNT_SYN_SHED_READMITTED);
		shed.win_back++;
		return false;
	}
	if (!can)
		return false;
	remember(fp);
	shed.win_shed++;
	stk__count(STK_CNT_SYN_SHED);
	return true;
}

bool stk__synshed_pressure(void)
{
	return shed.pressure;
}
