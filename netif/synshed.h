/* SYN shedding: the decision, shared by a process's stack (stack/synshed.c, before lwIP)
 * and ulsd's relay demultiplexer (server/demux.c, before a frame is copied into a
 * process's ring). Pure: IP packets in, verdicts out; the caller owns the clock, the key's
 * randomness (drawn once, by nif_synshed_init) and the counters (netif/synshed.c says when
 * and why a SYN is shed).
 *
 * Use: nif_synshed_round_begin, one nif_synshed_frame per IP packet of a receive round
 * (one read of the device's queue), nif_synshed_round_end. One thread at a time. */
#ifndef ULS_NETIF_SYNSHED_H
#define ULS_NETIF_SYNSHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NIF_SHED_KNOWN_SLOTS 4096u
#define NIF_SHED_KNOWN_WAYS 4u

/* What to do with one IP packet. */
enum nif_shed {
	NIF_SHED_PASS,          /* not a pure SYN, or no pressure: take it */
	NIF_SHED_DROP,          /* a pure SYN shed (the caller counts it: syn_shed) */
	NIF_SHED_READMITTED,    /* a shed SYN's retransmission: take it, count it */
	NIF_SHED_KNOWN_PEER,    /* under pressure, from a known peer: take it, count it */
	NIF_SHED_MEMORY_FULL,   /* under pressure, but the memory of shed SYNs is full: take
				 * it, count it (syn_shed_memory_full) */
};

struct nif_synshed {
	/* set by nif_synshed_init */
	uint64_t (*clock_ms)(void);          /* monotonic ms; read only while needed */
	bool off;                            /* never shed (ULS_SYN_SHED=0) */
	/* state */
	unsigned round_frames, round_syns;
	bool pressure;
	uint64_t pressure_ms;                /* the last round that said so */
	unsigned win_shed, win_back;         /* shed, taken in again; halved every generation */
	bool suspended;
	uint64_t suspend_ms;
	bool failed;                         /* the memory could not be allocated */
	uint64_t *gen[2];                    /* gen[cur]: new fingerprints; gen[!cur]: older */
	unsigned used[2];
	unsigned cur;
	uint64_t gen_start_ms;
	uint8_t key[16];                     /* the memory's and the known peers' hash */
	uint32_t known[NIF_SHED_KNOWN_SLOTS];   /* sets of NIF_SHED_KNOWN_WAYS */
	uint8_t known_mru[16], known_mru_len;   /* the address last put first in its set */
};

/* A state that sheds nothing yet (its memory, 4 MiB, is allocated at the first pressure);
 * draws its key. */
void nif_synshed_init(struct nif_synshed *sh, uint64_t (*clock_ms)(void),
		      void (*draw_key)(uint8_t key[16]), bool off);
void nif_synshed_free(struct nif_synshed *sh);
void nif_synshed_round_begin(struct nif_synshed *sh);
/* Returns true when this round suspended shedding (the caller counts syn_shed_suspended). */
bool nif_synshed_round_end(struct nif_synshed *sh);
/* One IP packet (l3, len) of the round: IPv4, or IPv6 when ipv6. */
enum nif_shed nif_synshed_frame(struct nif_synshed *sh, const uint8_t *l3, size_t len, bool ipv6);
static inline bool nif_synshed_pressure(const struct nif_synshed *sh)
{
	return sh->pressure;
}

#endif
