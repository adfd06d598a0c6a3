/* Frame rings in shared memory between ulsd and one process: single producer, single
 * consumer, lock-free, with eventfd wake-ups.
 *
 * One memfd holds a ring pair: rx (ulsd -> process) and tx (process -> ulsd). Each ring is
 * a header (indices on separate cache lines) and nslots fixed-size slots. A consumer about
 * to sleep sets `sleeping` and looks at the ring once more; a producer signals the
 * consumer's eventfd only when it sees `sleeping`, so a busy consumer costs its producer
 * no system call (the adaptive part: it polls while there is work, sleeps when there is
 * none).
 *
 * Both sides treat the other as untrusted: every index and length read from shared memory
 * is range-checked before use.
 */
#ifndef ULS_NETIF_RING_H
#define ULS_NETIF_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "netif/breakdown.h"

#define NIF_RING_MAGIC   0x756c7372u  /* "ulsr" */
#ifdef ULS_BREAKDOWN
/* Slot headers carry latency stamps (netif/breakdown.h): another layout, so a process and
 * a ulsd built with and without --enable-breakdown refuse each other's rings. */
#define NIF_RING_VERSION 0x10002u
#else
#define NIF_RING_VERSION 2u
#endif
#define NIF_CACHELINE    64

struct nif_ring_hdr {
	uint32_t magic, version;
	uint32_t nslots;      /* a power of two */
	uint32_t slot_size;   /* bytes per slot, including the slot header */
	uint8_t pad0[NIF_CACHELINE - 16];
	_Atomic uint32_t prod;       /* written by the producer */
	uint8_t pad1[NIF_CACHELINE - 4];
	_Atomic uint32_t cons;       /* written by the consumer */
	_Atomic uint32_t sleeping;   /* consumer is (about to be) asleep */
	uint8_t pad2[NIF_CACHELINE - 8];
};

/* A frame starts in a slot and runs on through as many following slots as it needs (their
 * headers are overwritten by its data), never across the end of the ring: a producer that
 * would wrap writes NIF_RING_PAD as the length and starts again at slot 0. */
#define NIF_RING_PAD UINT32_MAX

struct nif_ring_slot {
	uint32_t len;
	uint32_t offload;     /* the frame's offload word (netif/vnet.h) */
#ifdef ULS_BREAKDOWN
	uint64_t stamp[NIF_BD_SLOT_STAMPS];
#endif
	uint8_t data[];
};

/* One side's view of one ring (pointers into the shared mapping). */
struct nif_ring {
	struct nif_ring_hdr *hdr;
	uint8_t *slots;
	uint32_t nslots, slot_size;
	uint32_t data_max;    /* the longest frame (over several slots) */
	uint32_t span;        /* consumer: slots of the frame last peeked */
	int efd;              /* the consumer's eventfd */
	uint32_t local;       /* producer: next prod to publish; consumer: next cons */
	uint32_t published;   /* producer: prod as last published */
};

/* Layout of a ring pair in one shared mapping. */
struct nif_ring_layout {
	uint32_t nslots, slot_size;
	size_t ring_bytes;    /* one ring: header + slots */
	size_t total;         /* both rings */
};

int nif_ring_layout(unsigned mtu, struct nif_ring_layout *out);
/* Create the memfd of a ring pair and initialise both headers (ulsd side). */
int nif_ring_create(const struct nif_ring_layout *l, int *memfd);
/* Map a ring pair from its memfd and check its headers against l. */
int nif_ring_map(int memfd, const struct nif_ring_layout *l, void **base);
/* Make a mapping's pages resident now (the process side, at lease time; see ring.c). */
void nif_ring_populate(void *base, const struct nif_ring_layout *l);
void nif_ring_unmap(void *base, const struct nif_ring_layout *l);
/* Attach to ring i (0: rx, 1: tx) of a mapped pair; efd is the consumer's eventfd. */
void nif_ring_attach(struct nif_ring *r, void *base, const struct nif_ring_layout *l,
		     unsigned i, int efd, bool producer);

/* Producer. Room for a frame of len bytes (at most data_max), NULL if the ring is full. */
uint8_t *nif_ring_prod_slot(struct nif_ring *r, size_t len);
void nif_ring_prod_commit(struct nif_ring *r, size_t len, uint32_t off);
/* Make committed slots visible; returns true if the consumer must be signalled. */
bool nif_ring_prod_publish(struct nif_ring *r);
void nif_ring_signal(struct nif_ring *r);

/* Consumer. Returns the next frame (its length and offload word) or NULL when empty; a slot
 * whose length is out of range is skipped and counted in *bad. */
const uint8_t *nif_ring_cons_peek(struct nif_ring *r, size_t *len, uint32_t *off,
				  uint64_t *bad);
void nif_ring_cons_release(struct nif_ring *r);
/* Mark the consumer asleep; returns false (and clears the mark) if frames arrived. */
bool nif_ring_cons_prepare_sleep(struct nif_ring *r);
/* Consumer side, without taking anything: has the producer published a slot not yet
 * taken? */
bool nif_ring_cons_ready(const struct nif_ring *r);
void nif_ring_cons_awake(struct nif_ring *r);

#ifdef ULS_BREAKDOWN
/* The stamps in the header of the slot whose data a side got from nif_ring_prod_slot() or
 * nif_ring_cons_peek() (and still owns). */
static inline uint64_t *nif_ring_stamps(const uint8_t *data)
{
	return ((struct nif_ring_slot *)(uintptr_t)(data - offsetof(struct nif_ring_slot, data)))->stamp;
}
/* Producer: the stamps of slot idx (a running index), and how far the consumer has come. */
uint64_t *nif_ring_stamps_at(struct nif_ring *r, uint32_t idx);
uint32_t nif_ring_prod_consumed(const struct nif_ring *r);
#endif

#endif
