/* SYN floods: a bounded SYN backlog and SYN cookies.
 *
 * Read first: RFC 4987 (TCP SYN flooding attacks and common mitigations): §3.1 (bounded
 * backlog), §3.6 (SYN cookies), §3.7 (hybrid: cookies only when the backlog is full);
 * RFC 7323 §2.2 and §3.2 (window scale and timestamps, whose negotiation a cookie has to
 * remember); RFC 9293 §3.10.7.2 (an ACK in LISTEN gets a reset).
 *
 * lwIP (patch 0090) asks stk__syn_admit() what a SYN to a listener gets. A listener holds
 * at most min(backlog, ULS_SYN_BACKLOG) connections in SYN-RECEIVED (half-open) and at
 * most `backlog` established ones waiting for accept(). Deviation: Linux bounds both by
 * the backlog; lwIP finds a segment's pcb by walking a list, and every half-open pcb is
 * a step of that walk for every SYN of a flood (255 of them cost 1.6 us per SYN), so the
 * half-open bound defaults to SYN_BACKLOG_DEFAULT. Below the bound a SYN gets a pcb as
 * always. At it, the SYN gets a SYN,ACK whose ISN is a
 * cookie and no state is kept (RFC 4987 §3.7's hybrid, Linux's default
 * net.ipv4.tcp_syncookies = 1), so a flood of spoofed SYNs costs a hash and one segment
 * each and never crowds a real client out. With the accept queue full the SYN is dropped:
 * the application is the bottleneck, and a cookie's connection would find no room either.
 *
 * The cookie (RFC 4987 §3.6's layout, our own hash):
 *
 *   bits 31-27  t mod 32, t = the time in 64-second ticks
 *   bits 26-24  index of the peer's MSS in mss_table (the largest entry not above it)
 *   bits 23-0   SipHash-2-4(secret; local and remote address and port, the peer's ISN, t)
 *
 * The ACK that completes the handshake returns it as SEG.ACK - 1, with SEG.SEQ - 1 the
 * peer's ISN, so the hash checks both numbers at once (the "seq window check": an ACK
 * whose SEQ is not ISN + 1 fails). A cookie is good while t is at most COOKIE_MAX_AGE ticks
 * old (2 to 3 minutes). The secret is 128 bits from the kernel's CSPRNG, drawn once per
 * process: a listener lives in one process, and ulsd's steering sends a connection's SYN
 * and ACK to the same member of a listening group.
 *
 * What the SYN negotiated and the cookie has no room for (the peer's window scale and
 * SACK-permitted) rides in the low 5 bits of our TSval, which the peer echoes in TSecr
 * (RFC 7323 §3.2), as Linux does: bits 4-1 the peer's shift (15: none), bit 0 SACK. A peer
 * without timestamps gets a SYN,ACK without window scaling and SACK. Deviation: our TSval
 * in that SYN,ACK is up to 31 ms older than the clock (the first RTT sample is that much
 * too long), and a cookie connection's MSS is rounded down to mss_table.
 *
 * An ACK to a listener is checked as a cookie only while the listener sent one in the
 * last COOKIE_RECENT_MS (Linux: tcp_synq_no_recent_overflow), so a listener that was
 * never flooded offers nothing to guess. ULS_SYNCOOKIES=0 in the environment turns
 * cookies off: SYNs beyond the backlog are then dropped, as lwIP always did.
 *
 * Counters: tcp_syn_cookies_sent, tcp_syn_cookies_ok (a cookie's ACK opened a
 * connection), tcp_syn_cookies_bad (an ACK to a listener that sent cookies recently
 * failed the check, and got a reset), tcp_syn_backlog_drops (a SYN dropped: the
 * half-open bound reached with cookies off, or the accept queue full),
 * tcp_syn_cookies_acceptq_full (a good cookie's ACK while the accept queue was full:
 * dropped without a reset, as Linux with tcp_abort_on_overflow = 0, lwIP patch 0100; the
 * peer's next segment carries the same numbers and opens the connection later).
 */
#include "hooks.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "lwip/sys.h"
#include "lwip/tcp.h"
#include "netif/siphash.h"

#define COOKIE_TICK_MS     64000u
#define COOKIE_MAX_AGE     2u      /* ticks */
#define COOKIE_RECENT_MS   ((COOKIE_MAX_AGE + 1u) * COOKIE_TICK_MS)
#define COOKIE_HASH_MASK   0x00ffffffu
#define TS_BITS            5
#define TS_MASK            ((1u << TS_BITS) - 1u)
#define TS_NO_WS           15u
#define SYN_BACKLOG_DEFAULT 64
#define SYNCOOKIES_DEFAULT 1      /* ULS_SYNCOOKIES unset: on, as Linux's tcp_syncookies=1 */


/* MSS values a cookie can name: the common ones (RFC 9293 §3.7.1's 536 default, IPv4
 * over Ethernet 1460 and behind tunnels, jumbo frames 8960, and a TAP's 65521 MTU). */
static const uint16_t mss_table[8] = { 536, 1200, 1400, 1440, 1460, 4056, 8960, 65481 };

static uint8_t secret[16];
static bool secret_ready;
static int enabled = -1;
static int half_open_max = -1;

/* The bound on a listener's half-open connections: its backlog, at most ULS_SYN_BACKLOG. */
static unsigned half_open_bound(const struct tcp_pcb_listen *lpcb)
{
	if (half_open_max < 0) {
		const char *e = stk__getenv("ULS_SYN_BACKLOG");
		char *end;
		long v = e ? strtol(e, &end, 10) : -1;
		half_open_max = (e && *e && !*end && v >= 1 && v <= 255) ? (int)v : SYN_BACKLOG_DEFAULT;
	}
	return lpcb->backlog < (unsigned)half_open_max ? lpcb->backlog : (unsigned)half_open_max;
}

static bool cookies_on(void)
{
	if (enabled < 0) {
		const char *e = stk__getenv("ULS_SYNCOOKIES");
		enabled = e && *e ? strcmp(e, "0") != 0 : SYNCOOKIES_DEFAULT;
	}
	return enabled;
}

static uint32_t cookie_hash(const struct tcp_syncookie *c, uint32_t t)
{
	uint8_t m[44];
	size_t at;

	if (!secret_ready) {
		for (int i = 0; i < 16; i += 4) {
			uint32_t r = stk__random32();
			memcpy(secret + i, &r, 4);
		}
		secret_ready = true;
	}
	if (IP_IS_V6(&c->remote_ip) || IP_IS_V6(&c->local_ip)) {
		/* IPv6: both whole addresses, so that the MAC covers the peer's 128 bits
		 * (the first 4 octets of the union would let every /32 share cookies). */
		memcpy(m, ip_2_ip6(&c->local_ip)->addr, 16);
		memcpy(m + 16, ip_2_ip6(&c->remote_ip)->addr, 16);
		at = 32;
	} else {
		memcpy(m, &ip_2_ip4(&c->local_ip)->addr, 4);
		memcpy(m + 4, &ip_2_ip4(&c->remote_ip)->addr, 4);
		at = 8;
	}
	memcpy(m + at, &c->local_port, 2);
	memcpy(m + at + 2, &c->remote_port, 2);
	memcpy(m + at + 4, &c->irs, 4);
	memcpy(m + at + 8, &t, 4);
	return (uint32_t)nif_siphash24(secret, m, at + 12) & COOKIE_HASH_MASK;
}

u8_t stk__syn_admit(struct tcp_pcb_listen *lpcb)
{
	unsigned waiting = (unsigned)lpcb->accepts_pending - lpcb->syn_rcvd;

	if (waiting >= lpcb->backlog) {
		stk__count(STK_CNT_TCP_SYN_BACKLOG_DROPS);
		return TCP_SYN_ADMIT_DROP;
	}
	if (lpcb->syn_rcvd < half_open_bound(lpcb))
		return TCP_SYN_ADMIT_PCB;
	if (!cookies_on()) {
		stk__count(STK_CNT_TCP_SYN_BACKLOG_DROPS);
		return TCP_SYN_ADMIT_DROP;
	}
	return TCP_SYN_ADMIT_COOKIE;
}

/* The cookie for c's SYN at now_ms, and (if the peer sent timestamps) our TSval carrying
 * its window scale and SACK-permitted, never ahead of now_ms (the peer's echo is an RTT
 * sample). Pure: the unit tests drive the clock. */
void stk__cookie_encode(struct tcp_syncookie *c, uint64_t now_ms)
{
	uint32_t t = (uint32_t)(now_ms / COOKIE_TICK_MS);
	uint32_t idx = 0;

	for (uint32_t i = 1; i < 8; i++)
		if (mss_table[i] <= c->mss)
			idx = i;
	c->iss = (t & 0x1fu) << 27 | idx << 24 | cookie_hash(c, t);
	if (c->ts) {
		uint32_t now = (uint32_t)now_ms;
		uint32_t bits = (c->snd_scale == TCP_SYNCOOKIE_NO_WS ? TS_NO_WS : c->snd_scale) << 1 |
				(c->sack ? 1u : 0u);
		uint32_t ts = (now & ~TS_MASK) | bits;
		c->ts_own = (int32_t)(ts - now) > 0 ? ts - (1u << TS_BITS) : ts;
	}
}

/* Is c->iss (SEG.ACK - 1) the cookie of c's tuple and c->irs (SEG.SEQ - 1) at now_ms, at
 * most COOKIE_MAX_AGE ticks old? If so, fills in what it carried (MSS; window scale and
 * SACK-permitted from c->ts_own, the ACK's TSecr, when c->ts) and returns true. */
bool stk__cookie_decode(struct tcp_syncookie *c, uint64_t now_ms)
{
	uint32_t t_now = (uint32_t)(now_ms / COOKIE_TICK_MS);
	uint32_t age = (t_now - (c->iss >> 27)) & 0x1fu;

	if (age > COOKIE_MAX_AGE || cookie_hash(c, t_now - age) != (c->iss & COOKIE_HASH_MASK))
		return false;
	c->mss = mss_table[(c->iss >> 24) & 7u];
	c->snd_scale = TCP_SYNCOOKIE_NO_WS;
	c->sack = 0;
	if (c->ts) {
		/* RFC 7323 §3.2: TSecr echoes our TSval; one from the future is forged */
		if ((int32_t)((uint32_t)now_ms - c->ts_own) < 0)
			return false;
		uint32_t ws = (c->ts_own & TS_MASK) >> 1;
		c->snd_scale = ws > 14 ? TCP_SYNCOOKIE_NO_WS : (u8_t)ws;
		c->sack = c->ts_own & 1u;
	}
	return true;
}

/* The listener keeps when it last sent a cookie (lwIP patch 0090's syncookie_at: the
 * clock's low 32 bits, 0 meaning never, so a stamp that would be 0 is 1). */
void stk__syncookie_make(struct tcp_pcb_listen *lpcb, struct tcp_syncookie *c)
{
	uint64_t now_ms = stk__now_ms();

	stk__cookie_encode(c, now_ms);
	lpcb->syncookie_at = (u32_t)now_ms ? (u32_t)now_ms : 1u;
	stk__count(STK_CNT_TCP_SYN_COOKIES_SENT);
}

int stk__syncookie_check(struct tcp_pcb_listen *lpcb, struct tcp_syncookie *c)
{
	uint64_t now_ms = stk__now_ms();
	u32_t at = lpcb->syncookie_at;

	/* signed: a stamp bumped from 0 to 1 is 1 ms ahead */
	if (!cookies_on() || at == 0 || (int32_t)((u32_t)now_ms - at) > (int32_t)COOKIE_RECENT_MS)
		return 0;  /* no cookies out: an ACK in LISTEN, nothing to count */
	if (!stk__cookie_decode(c, now_ms)) {
		stk__count(STK_CNT_TCP_SYN_COOKIES_BAD);
		/* RFC 9293 §3.10.7.2: an ACK in LISTEN gets a reset, as Linux and FreeBSD answer
		 * a failed cookie. A peer whose first segment (SEQ = ISN + 1, the only one a
		 * cookie can be checked with) was lost loses the connection when its next one
		 * arrives first. */
		return -1;
	}
	stk__count(STK_CNT_TCP_SYN_COOKIES_OK);
	return 1;
}

void stk__syncookie_acceptq_full(struct tcp_pcb_listen *lpcb)
{
	(void)lpcb;
	stk__count(STK_CNT_TCP_SYN_COOKIES_ACCEPTQ_FULL);
}
