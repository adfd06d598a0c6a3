/* Latency breakdown: per-frame timestamps from one clock at each layer of the path (seed
 * 003, Jin & Yoo: "measure the latency in host and NIC with the same clock").
 *
 * The clock is CLOCK_MONOTONIC in nanoseconds: one clock for every process of the machine,
 * so stamps taken by the sending process, both ulsd daemons and the receiving process
 * compare directly. Stamps travel in the ring slot headers (netif/ring.h): the sending
 * process notes when lwIP handed it a frame and when the frame was in the tx ring, ulsd
 * writes back into the tx slot when it took the frame and queued the TAP write; the
 * receiving ulsd writes into the rx slot when it read the frame from the TAP, when the
 * filter had found the owner and when the frame was in the ring, and the receiving process
 * notes when it took the frame off the ring.
 *
 * A process keeps the stamps of its recent TCP segments that carry data (or SYN/FIN) in a
 * trace (struct nif_bd_trace), with the segment's 4-tuple, sequence number and length, so
 * that a tool can match a segment as sent with the same segment as received.
 *
 * Recording happens only in builds configured with --enable-breakdown (ULS_BREAKDOWN):
 * elsewhere the hooks in ringdev.c and server/demux.c are empty inline functions, and the
 * code below is only reached by its unit tests.
 */
#ifndef ULS_NETIF_BREAKDOWN_H
#define ULS_NETIF_BREAKDOWN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Stamps in a tx slot header (process -> ulsd), written by ulsd before it releases the
 * slot; the process zeroes them when it fills the slot. */
enum nif_bd_tx_slot {
	NIF_BD_SLOT_ULSD_TX,    /* ulsd took the frame off the ring */
	NIF_BD_SLOT_TAP_WRITE,  /* ulsd queued the frame's TAP write */
};

/* Stamps in an rx slot header (ulsd -> process), written by ulsd. */
enum nif_bd_rx_slot {
	NIF_BD_SLOT_TAP_READ,   /* ulsd got the frame from its TAP read */
	NIF_BD_SLOT_DEMUX,      /* parsed and looked up: the owner is known */
	NIF_BD_SLOT_RX_RING,    /* copied into the owner's ring */
};

#define NIF_BD_SLOT_STAMPS 4    /* room in a slot header (ring.h) */

/* One TCP segment as this process sent or received it. t[] by direction: */
enum nif_bd_sent {
	NIF_BD_STACK_OUT,       /* lwIP handed the frame to our netif */
	NIF_BD_TX_RING,         /* the frame was in the tx ring slot */
	NIF_BD_ULSD_TX,         /* ulsd took it off the ring (from the slot header) */
	NIF_BD_TAP_WRITE,       /* ulsd queued the TAP write (from the slot header) */
};
enum nif_bd_received {
	NIF_BD_TAP_READ,        /* ulsd read it from the TAP (from the slot header) */
	NIF_BD_DEMUX,           /* ulsd found its owner (from the slot header) */
	NIF_BD_RX_RING,         /* ulsd put it into our ring (from the slot header) */
	NIF_BD_STACK_IN,        /* this process took it off the ring */
};
#define NIF_BD_STAMPS 4

enum nif_bd_dir { NIF_BD_SENT = 1, NIF_BD_RECEIVED = 2 };

struct nif_bd_frame {
	uint64_t t[NIF_BD_STAMPS];  /* ns on nif_bd_now()'s clock; 0: not stamped */
	uint32_t saddr, daddr;      /* IPv4 addresses, network order */
	uint16_t sport, dport;      /* host order */
	uint32_t seq;               /* TCP sequence number of the first payload byte (or SYN) */
	uint32_t len;               /* TCP payload bytes */
	uint8_t flags;              /* TCP flags (RFC 9293 §3.1) */
	uint8_t dir;                /* enum nif_bd_dir */
};

/* The recent segments of one process: a ring of records (the oldest are overwritten and
 * counted as lost) and, for every tx slot, the record of the segment it holds until ulsd
 * has returned the slot's stamps. All calls under the caller's lock (the core lock). */
struct nif_bd_trace {
	struct nif_bd_frame *rec;
	uint64_t cap;           /* records, a power of two */
	uint64_t head;          /* records ever written */
	uint64_t tail;          /* records ever read (nif_bd_trace_read) */
	uint64_t lost;          /* records overwritten before they were read */
	uint64_t *pending;      /* by tx slot index: record number + 1, 0 = none */
	uint32_t nslots;        /* tx ring slots, a power of two */
};

/* The one clock: CLOCK_MONOTONIC, nanoseconds. */
uint64_t nif_bd_now(void);

/* Parse an Ethernet frame as IPv4/TCP into f's addresses, ports, seq, len and flags.
 * Returns false (f untouched) for anything else or anything malformed: every length is
 * checked against len, the frame may come from another process. */
bool nif_bd_parse(const uint8_t *frame, size_t len, struct nif_bd_frame *f);

/* cap and nslots are rounded up to powers of two. Returns 0 or -ENOMEM. */
int nif_bd_trace_init(struct nif_bd_trace *t, uint64_t cap, uint32_t nslots);
void nif_bd_trace_free(struct nif_bd_trace *t);

/* A frame went into tx slot `slot` (the ring's running index) at t_ring, handed to the
 * netif at t_out. Segments without data, SYN or FIN are not recorded, but the slot's
 * pending record is cleared either way. */
void nif_bd_trace_sent(struct nif_bd_trace *t, const uint8_t *frame, size_t len,
		       uint32_t slot, uint64_t t_out, uint64_t t_ring);
/* ulsd released tx slot `slot` with these stamps (enum nif_bd_tx_slot): complete the
 * record of the frame it held, if that record is still in the trace. */
void nif_bd_trace_slot_done(struct nif_bd_trace *t, uint32_t slot, const uint64_t *slot_stamps);
/* A frame taken off the rx ring at t_in, with ulsd's stamps (enum nif_bd_rx_slot). */
void nif_bd_trace_received(struct nif_bd_trace *t, const uint8_t *frame, size_t len,
			   const uint64_t *slot_stamps, uint64_t t_in);
/* Copy up to n of the oldest unread records to out and consume them; returns how many.
 * *lost (if given) is the number of records overwritten unread so far. */
size_t nif_bd_trace_read(struct nif_bd_trace *t, struct nif_bd_frame *out, size_t n,
			 uint64_t *lost);

#endif
