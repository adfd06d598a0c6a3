/* SYN shedding (synshed.h): a receiver that falls behind its receive queue under a SYN
 * flood drops new SYNs before their costly work, so that its CPU goes to the frames of
 * established connections. Two receivers use it: a process's stack, before lwIP
 * (stack/synshed.c), and ulsd's relay demultiplexer, before a frame is copied into a
 * process's ring (server/demux.c), whose one thread carries every relay frame of the node.
 *
 * Read first: RFC 4987 §3 (SYN flooding and the defences), RFC 6298 §2 and §5 (a client
 * retransmits a SYN after its RTO, 1 s by default), RFC 9293 §3.10.7.2 (a SYN to a listener).
 *
 * Why (docs/benchmarks.md, "SYN flood"): on a machine where other jobs keep the run queue
 * long, the stack thread of a listener under 50,000 SYN/s got 7% of a CPU and was runnable
 * but waiting for one 95% of the time; a SYN costs the process about 5 us (lwIP, the cookie,
 * the SYN,ACK written through the TAP and the bridge), more than that share. Its TAP queue
 * then filled and the kernel dropped frames at its tail, data segments of the established
 * streams as much as SYNs, and the streams stopped for the rest of the flood. On the relay
 * path the same flood first crosses ulsd's demultiplexer, which copies each SYN into the
 * listener's ring (and the listener's SYN,ACK back out), and the ring overflowed
 * (drop_rx_ring_full). A SYN shed costs its read and these checks only; the established
 * connections' frames are taken as before.
 *
 * When: the previous receive round (the frames of one read of the queue: drive.c's
 * take_frames in a process, one nif_tap_rx in ulsd) held at least SHED_ROUND_MIN frames,
 * at least three quarters of them pure SYNs (SYN without ACK, RST or FIN). A round that
 * long means frames waited while the thread was away; that most of them were SYNs means
 * they are what keeps it behind (a flood's rounds were 90-99% SYNs; a burst of real
 * clients also sends their handshakes' ACKs and data). A burst of data alone (a large
 * window arriving at once) never sheds. Once on, shedding lasts until no round has said so
 * for SHED_HOLD_MS: a shed SYN costs so little that the rounds shrink at once, and without
 * the hold the receiver would take the flood's SYNs in again every other round.
 *
 * Legitimate clients: a SYN shed here is remembered by its connection (addresses, ports)
 * and initial sequence number; its retransmission, the same SYN again (RFC 9293 §3.8.1: a
 * retransmitted SYN carries the same ISN), is always taken in, under pressure or not
 * (NIF_SHED_READMITTED). A flood's SYNs come once each from random sources, so the
 * memory admits none of them; a client loses at most its first SYN, one RTO (1 s), at each
 * receiver that sheds (ulsd and then the process: at most two). The memory is two
 * generations of fingerprints (SipHash-2-4 of the tuple under a per-receiver key, so a
 * sender cannot aim collisions), each of SHED_SLOTS slots; the older one is forgotten when
 * the newer is SHED_GEN_MS old, or SHED_GEN_MIN_MS old and full, never sooner, so a shed
 * SYN is remembered for at least SHED_GEN_MIN_MS (its first retransmission, after 1 s; the
 * one after 3 s too below 131,000 SYN/s). A generation holds SHED_GEN_FULL fingerprints
 * (three quarters of its slots: probes stay short). Deviation: when the newer generation
 * is full before SHED_GEN_MIN_MS, SYNs are taken in, unshed and unremembered, until it is
 * that old (NIF_SHED_MEMORY_FULL): the flood then reaches the receiver as without
 * shedding for the rest of that time (at 400,000 SYN/s, 1 s of every 1.5 s). Forgetting
 * sooner instead, as this did before review, shed a client's retransmission 1 s later
 * again above 200,000-400,000 SYN/s, and
 * each later one too, for as long as the flood lasted; a flood must never lock a client out.
 * Deviation: if the memory cannot be allocated, nothing is shed (a client's SYN must never
 * be lost for good).
 *
 * Known peers: a pure SYN from an address that sent this receiver a segment with ACK and
 * without SYN (a connection's, or a handshake's last; a table of NIF_SHED_KNOWN_SLOTS, in
 * sets of NIF_SHED_KNOWN_WAYS, known_add says how it is kept) is never shed
 * (NIF_SHED_KNOWN_PEER): a flood's spoofed sources send SYNs only.
 *
 * Real clients come back: when at least a quarter of the SYNs shed (SHED_JUDGE_MIN or more,
 * counts halved every generation) were retransmitted and taken in again, the SYNs are a
 * burst of clients, not a flood, and shedding stops for SHED_SUSPEND_MS (round_end returns
 * true): 10,000 connections at once to a python server under ulsrun took 19-22 s to connect
 * with shedding, 5 s without (make check-load). Deviation from a complete defence: a flood
 * that sends a quarter of its spoofed SYNs twice, 1 s apart, turns shedding off for
 * SHED_SUSPEND_MS at 1.25 times its cost (found in review: not twice, as this said); the
 * listener then answers it with cookies, as before shedding.
 *
 * Both a listener's SYNs and SYNs to ports without a listener are shed: both are a flood's
 * work (the second would cost a reset).
 *
 * Cost outside a flood: two header views per IP packet, and a SipHash of the source of a
 * segment with ACK (the known peers) unless it is the peer of the segment before (on this
 * loaded 2-CPU machine, medians of 5 alternated runs of 20 million ACKs: 105 ns per ACK
 * before the key, 166-220 ns with it when 64 peers alternate, 110 ns in runs from one
 * peer); no clock (0.35-0.42 us here, docs/architecture.md: it is read only while shedding
 * or remembering).
 */
#include "netif/synshed.h"

#include <stdlib.h>
#include <string.h>

#include "netif/siphash.h"
#include "netif/wire/proto.h"
#include "netif/wire/wire.h"

#define SHED_ROUND_MIN 16          /* frames in a round that say frames waited */
#define SHED_HOLD_MS 500           /* pressure lasts this long after its last round */
#define SHED_SLOTS (1u << 18)      /* per generation: 2 MiB of fingerprints */
#define SHED_GEN_MS 3000           /* a generation's life: retransmissions after 1 and 3 s */
#define SHED_GEN_MIN_MS 1500       /* a full one's: past the first retransmission (1 s) */
#define SHED_GEN_FULL (SHED_SLOTS / 4 * 3)   /* fingerprints a generation holds */
#define SHED_JUDGE_MIN 256         /* shed SYNs before their comebacks are judged */
#define SHED_SUSPEND_MS 10000      /* no shedding this long after a legitimate burst */

void nif_synshed_init(struct nif_synshed *sh, uint64_t (*clock_ms)(void),
		      void (*draw_key)(uint8_t key[16]), bool off)
{
	memset(sh, 0, sizeof(*sh));
	sh->clock_ms = clock_ms;
	sh->off = off;
	/* Now, not with the memory: the known peers are hashed with it from the first ACK. */
	draw_key(sh->key);
}

void nif_synshed_free(struct nif_synshed *sh)
{
	free(sh->gen[0]);
	free(sh->gen[1]);
	sh->gen[0] = sh->gen[1] = NULL;
}

static bool memory_ready(struct nif_synshed *sh)
{
	if (sh->gen[0])
		return true;
	if (sh->failed)
		return false;
	sh->gen[0] = calloc(SHED_SLOTS, sizeof(uint64_t));
	sh->gen[1] = calloc(SHED_SLOTS, sizeof(uint64_t));
	if (!sh->gen[0] || !sh->gen[1]) {
		nif_synshed_free(sh);
		sh->failed = true;
		return false;
	}
	sh->cur = 0;
	sh->used[0] = sh->used[1] = 0;
	sh->gen_start_ms = sh->clock_ms();
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

static void forget_older(struct nif_synshed *sh, uint64_t now)
{
	unsigned old = sh->cur ^ 1u;

	memset(sh->gen[old], 0, SHED_SLOTS * sizeof(uint64_t));
	sh->win_shed /= 2;
	sh->win_back /= 2;
	sh->used[old] = 0;
	sh->cur = old;
	sh->gen_start_ms = now;
}

/* Whether fp is remembered: not while the newer generation is full (round_begin forgets
 * the older one only when the newer is SHED_GEN_MS old, or SHED_GEN_MIN_MS and full). */
static bool remember(struct nif_synshed *sh, uint64_t fp)
{
	uint64_t *g = sh->gen[sh->cur];

	if (sh->used[sh->cur] >= SHED_GEN_FULL)
		return false;
	for (unsigned i = (unsigned)fp & (SHED_SLOTS - 1);; i = (i + 1) & (SHED_SLOTS - 1)) {
		if (g[i] == fp)
			return true;
		if (!g[i]) {
			g[i] = fp;
			sh->used[sh->cur]++;
			return true;
		}
	}
}

void nif_synshed_round_begin(struct nif_synshed *sh)
{
	sh->round_frames = 0;
	sh->round_syns = 0;
	if (sh->gen[0] && (sh->used[0] || sh->used[1])) {
		uint64_t now = sh->clock_ms();
		uint64_t age = now - sh->gen_start_ms;
		/* A SYN remembered in the newer generation is kept at least until that one
		 * has aged SHED_GEN_MIN_MS once more, so at least 1.5 s: past the client's first
		 * retransmission (RFC 6298 2.1's 1 s), which is the one shedding takes back.
		 * A full newer generation rolls over that early (a flood above 131,000 SYN/s)
		 * rather than leave shedding off until SHED_GEN_MS. */
		if (age >= SHED_GEN_MS ||
		    (age >= SHED_GEN_MIN_MS && sh->used[sh->cur] >= SHED_GEN_FULL))
			forget_older(sh, now);
	}
}

bool nif_synshed_round_end(struct nif_synshed *sh)
{
	bool suspended_now = false;

	if (sh->off || !sh->clock_ms)   /* off, or a zeroed state, never initialised */
		return false;
	/* Shed SYNs that come back are a burst of real clients, not a flood: shedding them
	 * only delays each by an RTO. */
	if (sh->win_shed >= SHED_JUDGE_MIN && sh->win_back * 4 >= sh->win_shed) {
		suspended_now = true;
		sh->suspended = true;
		sh->suspend_ms = sh->clock_ms();
		sh->pressure = false;
		sh->win_shed = sh->win_back = 0;
	}
	if (sh->suspended) {
		if (sh->clock_ms() - sh->suspend_ms < SHED_SUSPEND_MS)
			return suspended_now;
		sh->suspended = false;
	}
	if (sh->round_frames >= SHED_ROUND_MIN && sh->round_syns * 4 >= sh->round_frames * 3) {
		sh->pressure = true;
		sh->pressure_ms = sh->clock_ms();
	} else if (sh->pressure && sh->clock_ms() - sh->pressure_ms >= SHED_HOLD_MS) {
		sh->pressure = false;
	}
	return suspended_now;
}

/* Peers known to talk TCP with this receiver: the source address of every segment with
 * ACK and without SYN (a connection's, or a handshake's last). A flood's spoofed sources
 * send nothing but SYNs; a client that already has a connection, or just completed one,
 * does not wait behind a flood. Deviation: a sender that also spoofs ACKs from its sources
 * gets their SYNs through, to lwIP's cookies, as before shedding.
 *
 * The table's set for an address, and the address's fingerprint in it: SipHash under the
 * receiver's key, so that a sender cannot choose addresses that share a peer's set (the
 * unkeyed hash this had before review let a flood of ACKs aim at one peer's slot).
 * Returns the index into sh->known of the set's first slot. */
static unsigned known_set(const struct nif_synshed *sh, const uint8_t *a, size_t alen,
			  uint32_t *fp)
{
	const unsigned sets = NIF_SHED_KNOWN_SLOTS / NIF_SHED_KNOWN_WAYS;
	uint64_t h = nif_siphash24(sh->key, a, alen);

	*fp = (uint32_t)h | 1u;   /* 0 marks an empty slot */
	return (unsigned)(h >> 32) % sets * NIF_SHED_KNOWN_WAYS;
}

/* A set's slots but the last hold peers seen twice or more, the most recent first; its last
 * slot holds a newcomer, and the newcomer's second ACK moves it to the first slot (the
 * least recent of the others leaves). A newcomer replaces only the newcomer before it: a
 * flood of ACKs from spoofed sources, each sent once, cannot evict a peer that sent two
 * (any connection's peer), whichever set it is in. Deviation: a flood that sends each
 * spoofed ACK twice still can, though not aim at one peer: that peer's next SYN is shed
 * and its retransmission taken in, one RTO. */
static void known_add(struct nif_synshed *sh, const uint8_t *a, size_t alen)
{
	const unsigned last = NIF_SHED_KNOWN_WAYS - 1;
	_Static_assert(NIF_SHED_KNOWN_WAYS >= 2, "a newcomer's slot and the others'");
	uint32_t fp, *set;
	unsigned i = 0;

	/* The common case, a run of segments from one peer, costs no hash: the address last
	 * moved to (or found in) a set's first slot is still there, as only a newcomer (in the
	 * last slot) can come in after it without taking its place here. */
	if (alen == sh->known_mru_len && !memcmp(a, sh->known_mru, alen))
		return;
	set = sh->known + known_set(sh, a, alen, &fp);
	while (i <= last && set[i] != fp)
		i++;
	if (i > last) {           /* a newcomer */
		set[last] = fp;
		return;
	}
	if (i == last)            /* a newcomer's second ACK */
		set[last] = 0;
	if (i > 0) {
		memmove(set + 1, set, (i < last ? i : last - 1) * sizeof(*set));
		set[0] = fp;
	}
	memcpy(sh->known_mru, a, alen);
	sh->known_mru_len = (uint8_t)alen;
}

static bool known_has(const struct nif_synshed *sh, const uint8_t *a, size_t alen)
{
	uint32_t fp;
	const uint32_t *set = sh->known + known_set(sh, a, alen, &fp);

	for (unsigned i = 0; i < NIF_SHED_KNOWN_WAYS; i++)
		if (set[i] == fp)
			return true;
	return false;
}

/* The fingerprint of a pure SYN in the IP packet (l3, len), or 0 if it is not one (and
 * whether its source is a known peer). */
static uint64_t pure_syn(struct nif_synshed *sh, const uint8_t *l3, size_t len, bool ipv6,
			 bool *known_src)
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
		known_add(sh, t.src, ipv6 ? 16 : 4);
		return 0;
	}
	if ((tcp.flags & (WIRE_TCP_SYN | WIRE_TCP_ACK | WIRE_TCP_RST | WIRE_TCP_FIN)) != WIRE_TCP_SYN)
		return 0;
	*known_src = known_has(sh, t.src, ipv6 ? 16 : 4);
	t.sport = tcp.sport;
	t.dport = tcp.dport;
	t.seq = tcp.seq;
	return nif_siphash24(sh->key, &t, sizeof(t)) | 1u;
}

enum nif_shed nif_synshed_frame(struct nif_synshed *sh, const uint8_t *l3, size_t len, bool ipv6)
{
	sh->round_frames++;
	/* The memory is allocated at the first pressure. */
	bool can = sh->pressure && memory_ready(sh);
	bool known_src = false;
	uint64_t fp = pure_syn(sh, l3, len, ipv6, &known_src);
	if (!fp)
		return NIF_SHED_PASS;
	sh->round_syns++;
	if (known_src)
		return can ? NIF_SHED_KNOWN_PEER : NIF_SHED_PASS;
	if (sh->gen[0] && (sh->used[0] || sh->used[1]) &&
	    (gen_has(sh->gen[0], fp) || gen_has(sh->gen[1], fp))) {
		sh->win_back++;
		return NIF_SHED_READMITTED;
	}
	if (!can)
		return NIF_SHED_PASS;
	/* A SYN shed must be remembered until its retransmission: when it cannot be, it is
	 * taken in (the memory's Deviation, above). */
	if (!remember(sh, fp))
		return NIF_SHED_MEMORY_FULL;
	sh->win_shed++;
	return NIF_SHED_DROP;
}
