/* Run-time TCP settings read from the environment.
 *
 * Read first: RFC 1122 §4.2.3.5 (R2 for a SYN), RFC 6298 §5.5 (backoff).
 *
 * ULS_SYN_RETRIES: how many times an unanswered SYN is retransmitted before connect gives
 * up, each after twice the time of the one before (1, 2, 4, ... s). The default, 6, is
 * Linux's tcp_syn_retries: the last SYN leaves 63 s after the first and connect fails 64 s
 * later, 127 s in all. Deviation: RFC 1122 §4.2.3.5 asks R2 for a SYN to cover at least
 * 3 minutes; 7 does (255 s). lwIP's backoff table bounds it to 12.
 */
#include "internal.h"

#include <stdlib.h>

#include "hooks.h"
#include "lwip/opt.h"

/* Called from lwIP's slow timer under the core lock: the first call reads the variable. */
u8_t stk__syn_retries(void)
{
	static int retries = -1;

	if (retries < 0) {
		const char *e = stk__getenv("ULS_SYN_RETRIES");
		char *end;
		long v = e ? strtol(e, &end, 10) : -1;
		retries = (e && *e && !*end && v >= 1 && v <= 12) ? (int)v : TCP_SYNMAXRTX;
	}
	return (u8_t)retries;
}

/* RFC 1122 §3.3.2: "The IP module MUST provide a reassembly timeout"; "the recommended
 * value ... is 60 seconds" (Linux: 30 s, ipfrag_time). lwIP counts it in seconds in a u8_t
 * (IP_REASS_MAXAGE, read per new datagram under the core lock). ULS_REASS_TIMEOUT=N (1-255
 * s, read once per process) changes it; tests use a few seconds. */
static int reass_timeout_env(void)
{
	static int secs = -1;

	if (secs < 0) {
		const char *e = stk__getenv("ULS_REASS_TIMEOUT");
		char *end;
		long v = e ? strtol(e, &end, 10) : -1;
		secs = (e && *e && !*end && v >= 1 && v <= 255) ? (int)v : 0;
	}
	return secs;
}

u8_t stk__ip_reass_maxage(void)
{
	int secs = reass_timeout_env();

	return (u8_t)(secs ? secs : 30);
}

/* RFC 8200 §4.5: "within 60 seconds of the reception of the first-arriving fragment"
 * (IPV6_REASS_MAXAGE, seconds in a u8_t, read per new datagram under the core lock);
 * ULS_REASS_TIMEOUT changes it as it does IPv4's. */
u8_t stk__ip6_reass_maxage(void)
{
	int secs = reass_timeout_env();

	return (u8_t)(secs ? secs : 60);
}

void stk__ip_reass_note(enum stk_reass_note what)
{
	static const enum stk_counter ctr[] = {
		[STK_REASS_NOTE_OVERLAP] = STK_CNT_IP_REASS_OVERLAP,
		[STK_REASS_NOTE_DUPLICATE] = STK_CNT_IP_REASS_DUPLICATE,
		[STK_REASS_NOTE_TIMEOUT] = STK_CNT_IP_REASS_TIMEOUT,
		[STK_REASS_NOTE_LIMIT] = STK_CNT_IP_REASS_LIMIT,
	};

	if ((unsigned)what < sizeof(ctr) / sizeof(ctr[0]))
		stk__count(ctr[what]);
}

/* RFC 1191 §4: a raised path MTU estimate is tried "not ... less than 5 minutes" after a
 * decrease, 10 minutes recommended (Linux: ip_rt_mtu_expires, 600 s). ULS_PMTU_AGE=N
 * seconds (1-86400, read once per process) changes it. Deviation: values below 300 break
 * RFC 1191's MUST NOT; they are for tests. */
uint64_t stk__pmtu_age_ms(void)
{
	static long secs = -1;

	if (secs < 0) {
		const char *e = stk__getenv("ULS_PMTU_AGE");
		char *end;
		long v = e ? strtol(e, &end, 10) : -1;
		secs = (e && *e && !*end && v >= 1 && v <= 86400) ? v : 600;
	}
	return (uint64_t)secs * 1000;
}
