/* SYN shedding in a process: pure SYNs dropped before lwIP while the process is behind a
 * SYN flood. The decision is netif/synshed.c's (shared with ulsd's relay demultiplexer,
 * server/demux.c), which says when and why; this file gives it the process's receive
 * rounds (drive.c's take_frames, through outbatch.c), its clock, its randomness and its
 * counters: syn_shed (a pure SYN dropped here), syn_shed_readmitted (a retransmitted SYN
 * taken in because it was shed before), syn_shed_suspended, syn_shed_known_peer (a SYN
 * taken in under pressure because its source is a known peer), syn_shed_memory_full (a
 * SYN taken in under pressure because the memory of shed SYNs was full).
 *
 * ULS_SYN_SHED=0 turns it off (the process then takes every SYN to lwIP, as before).
 * A process on ulsd's relay path does not shed either: ulsd's demultiplexer sheds that
 * path's frames by the same rule, and two shedders in series lose a client more than its
 * first SYN (ulsd readmits the retransmission after 1 s while the process, behind the
 * flood that a full memory lets through, sheds it; the next comes after 3 s more, when a
 * fast flood's memory has forgotten it: review of stop 30). One shedder per path: on the
 * direct path the kernel sheds before the frame reaches the queue when ulsd attached
 * synguard (filter/datapath_syn.bpf.h; the hello's CTL_HELLO_F_KSHED), so that a flood
 * never wakes the process, and the process sheds only on a direct path without it.
 * Core lock held for every call (one receive round at a time).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "netif/synshed.h"

static struct nif_synshed shed;
static bool shed_ready;
static bool shed_by_ulsd;   /* the lease is on the relay path */

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

static void draw_key(uint8_t key[16])
{
	for (unsigned i = 0; i < 16; i += 4) {
		uint32_t r = stk__random32();
		memcpy(key + i, &r, 4);
	}
}

/* ULS_SYN_SHED=0 in the environment turns shedding off (read once). */
static struct nif_synshed *state(void)
{
	if (!shed_ready) {
		const char *e = stk__getenv("ULS_SYN_SHED");
		nif_synshed_init(&shed, mono_ms, draw_key, e && strcmp(e, "0") == 0);
		shed_ready = true;
	}
	return &shed;
}

void stk__synshed_round_begin(void)
{
	nif_synshed_round_begin(state());
}

void stk__synshed_round_end(void)
{
	if (nif_synshed_round_end(state()))
		stk__count(STK_CNT_SYN_SHED_SUSPENDED);
}

void stk__synshed_relayed(bool relayed)
{
	shed_by_ulsd = relayed;
}

bool stk__synshed_drop(const uint8_t *l3, size_t len, bool ipv6)
{
	if (shed_by_ulsd)
		return false;
	switch (nif_synshed_frame(state(), l3, len, ipv6)) {
	case NIF_SHED_DROP:
		stk__count(STK_CNT_SYN_SHED);
		return true;
	case NIF_SHED_READMITTED:
		stk__count(STK_CNT_SYN_SHED_READMITTED);
		return false;
	case NIF_SHED_KNOWN_PEER:
		stk__count(STK_CNT_SYN_SHED_KNOWN_PEER);
		return false;
	case NIF_SHED_MEMORY_FULL:
		stk__count(STK_CNT_SYN_SHED_MEMORY_FULL);
		return false;
	case NIF_SHED_PASS:
		break;
	}
	return false;
}

bool stk__synshed_pressure(void)
{
	return nif_synshed_pressure(state());
}
