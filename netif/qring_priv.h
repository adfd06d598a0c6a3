/* What the three files of the direct path's device share: qring.c (prepare, open, wait,
 * close), qring_rx.c (receive, and the reads of threads that exited) and qring_tx.c
 * (transmit). qring.c's top comment describes the device. Nothing here is installed. */
#ifndef ULS_NETIF_QRING_PRIV_H
#define ULS_NETIF_QRING_PRIV_H

#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "netif/qring.h"
#include "netif/rxpool.h"

#define RX_DEPTH 64
/* Reads kept in flight while frames come one at a time. Every read in flight on the queue
 * is a poll entry on it, and tun wakes them all for each frame: with 64 in flight one frame
 * woke 64 poll handlers, 63 of which found nothing and went to io_uring's worker threads,
 * and a 1-byte round trip took 80 us instead of 27. The count doubles when a round takes
 * every read in flight (a burst) and shrinks by one per quiet round (q_rx). */
#define RX_ARM_MIN 2
/* Buffers given to the multishot read's provided-buffer ring at first. The kernel takes
 * the ring's entries in order, so a stream cycles through every buffer in it: with all
 * RX_DEPTH in at open, a 2 MB transfer faulted in 4 MiB of buffers (64 KiB each, with
 * offloads) it never needed at once. The count doubles when a round took every buffer in
 * the ring, or the read ran dry (ENOBUFS, then armed again), up to RX_DEPTH, and never
 * shrinks: a bulk stream reaches the 64 of before within its first few rounds (q_rx). */
#define RX_BR_MIN 4
/* Reads that may not wait (RWF_NOWAIT, qring_rx.c's top of arm_reads): at first, and the
 * fewest a round that took frames arms after one that found the queue empty. */
#define RX_NW_MIN 4
#define TX_DEPTH 256
#define TX_SUBMIT_BATCH 64
#define RX_ERROR_BACKOFF_US 10000
/* What may be lent to the consumer at once, in bytes of buffer: with offloads a buffer
 * holds a 64 KiB super-segment, so 16 MiB is 4 MiB receive windows of four connections
 * waiting for their readers; beyond it the consumer copies (rx_pool_empty). */
#define RX_LEND_BYTES (16u << 20)
/* A frame is lent only if it fills at least this share of its buffer: a small frame kept
 * until its reader comes would hold a whole buffer; copying it is cheap. */
#define RX_LEND_MIN_SHARE 4
#define TX_CLOSE_WAIT_MS 1000
/* With the wake-up in the ring, how often a waiter looks at the lease for a hang-up
 * (ulsd gone): the node must fail its sockets within about a second (tests/node). */
#define HUP_CHECK_MS 200
#define HUP_SLACK_MS 10   /* qring.c's hup_due: the coarse clock's lag */
#define WAKE_TAG UINT64_MAX   /* user_data of the wake-up eventfd's read */
#define MSHOT_TAG (UINT64_MAX - 1)   /* user_data of the multishot read of the queue */
#define CANCEL_TAG (UINT64_MAX - 2)  /* user_data of close's cancellation of the reads */
/* The same reads' other user_data: a read that replaces one whose submitter exited takes
 * the tag the replaced one does not have, so that the replaced one's end is told apart. */
#define WAKE_TAG_ALT (UINT64_MAX - 3)
#define MSHOT_TAG_ALT (UINT64_MAX - 4)
/* Exits reported to a device between two of its rounds that it tells apart; beyond, every
 * read not submitted by the thread in the round is replaced (safe: a replaced read that
 * still reads a frame delivers it). */
#define DEAD_MAX 8
/* How long close waits for the receive ring's cancelled reads to end. */
#define RX_CLOSE_WAIT_MS 1000
#define MSHOT_BGID 0

struct txg {
	nif_tx_done_fn *done;
	void *cookie;
	uint8_t vh[16];
	struct iovec iov[NIF_TX_IOV_MAX + 1];
};

struct qring {
	struct nif_dev dev;
	struct qring *kept_next;  /* closed with reads still in flight (qring.c, q_close) */
	struct io_uring rx, tx;
	int wake_fd, hup_fd;
	bool lease_lost;
	bool wake_in_ring;     /* the eventfd is the receive ring's fixed file 1 */
	bool wake_armed;       /* a read of it is in flight */
	uint64_t wake_buf;     /* where that read puts the eventfd's count */
	uint64_t hup_checked_ns;
	size_t vhl, frame_max, buf_size;
	struct nif_rxpool *pool;
	/* Receive slot i reads into rx_slot[i], a buffer of the pool, or has none: never
	 * armed yet (a slot gets its buffer when it is first armed, so that the memory a
	 * process touches follows the reads its traffic needed), or the consumer holds the
	 * one it had (lent) and the pool had no other. */
	struct nif_rxbuf *rx_slot[RX_DEPTH];
	uint8_t *tx_bufs;
	struct txg *txg;   /* per transmit buffer index: a gathered write's state */
	unsigned rx_rearm, rx_errors_in_row;
	unsigned rx_free[RX_DEPTH], rx_nfree;  /* slots with no read in flight */
	unsigned rx_armed, rx_target;          /* reads in flight, and how many to keep */
	/* Reads that may not wait (qring_rx.c, arm_reads): slot i's read is one (rx_nw[i]);
	 * how many are in flight (in rx_armed too); how many the next arming adds (the
	 * last round took frames), and how many a round's arming adds at most (adapted to
	 * what they found). nowait: the kernel takes them (cleared when it refuses one). */
	bool rx_nw[RX_DEPTH];
	unsigned rx_nw_armed, rx_nw_want, rx_nw_target;
	bool nowait;
	/* Multishot: rx_slot[i] is buffer id i of br; rx_free holds the ids not in br (never
	 * given yet, beyond br_target; or their buffer lent and the pool had no other);
	 * rx_target is 1, rx_armed 0 or 1. */
	bool mshot;
	/* The receive ring is cooperative (nif_qring_prepare); takeover_off: ulsd refused the
	 * cancellation that taking reads over needs (a ring whose restrictions predate it). */
	bool coop, takeover_off;
	struct io_uring_buf_ring *br;
	unsigned br_added;     /* buffers added to br and not yet made visible */
	unsigned br_posted;    /* buffer ids in br (added, not yet taken by a completion) */
	unsigned br_target;    /* how many to keep in br: RX_BR_MIN, doubling (RX_BR_MIN) */
	bool br_dry;           /* the read ended for want of a buffer (ENOBUFS) this round */
	unsigned *tx_free, tx_nfree, tx_unsubmitted, tx_inflight;
	bool tx_stalled;   /* a wait for transmit space ran out, and half the buffers are not back since */
	pid_t owner;   /* the process that opened it: a fork child holds copies of its rings */
	struct nif_dev_stats st;
	struct nif_wait_stats wst;  /* dev.h */
	/* Who submitted each read in flight (a thread's token, 0: armed and not yet
	 * submitted), and reads armed since the last submission (rx_pend: slots). */
	uint64_t rx_tok[RX_DEPTH], wake_tok, mshot_tok;
	unsigned rx_pend[RX_DEPTH], rx_npend;
	bool wake_pend, mshot_pend;
	/* Reads replaced because their submitter exited, still in flight: per slot (not in
	 * rx_armed), the wake-up's and the multishot read's (tagged with the other tag). */
	bool rx_orphan[RX_DEPTH];
	unsigned rx_orphans;
	bool wake_orphan, mshot_orphan;
	uint64_t wake_tag, mshot_tag;   /* the tags of the current reads */
	/* Threads that exited since the last round (reg_mu): their tokens, or more. */
	uint64_t dead[DEAD_MAX];
	unsigned ndead;
	bool dead_overflow;
	atomic_bool dead_new;
	struct qring *reg_next;   /* the open devices (reg_head, reg_mu) */
};

/* qring.c */
struct qring *nif__qring_of(struct nif_dev *d);
void nif__q_wake(struct nif_dev *d);
int nif__q_rx_submit(struct qring *q);   /* submit the receive ring's armed reads */
int nif__q_lease_lost(struct qring *q);  /* -ECONNRESET, counted once */

/* qring_rx.c: the receive side, and the reads of threads that exited */
uint64_t nif__q_token(void);             /* the calling thread's submitter token */
void nif__q_reg_add(struct qring *q);
void nif__q_reg_remove(struct qring *q);
struct io_uring_sqe *nif__q_rx_sqe(struct qring *q);
void nif__q_arm_reads(struct qring *q);
void nif__q_replace_dead_reads(struct qring *q);
void nif__q_take_over_reads(struct qring *q);
bool nif__q_rx_cancel(struct qring *q, uint64_t tag, unsigned flags);
int nif__q_rx(struct nif_dev *d, nif_rx_fn *fn, void *arg, unsigned budget);

/* qring_tx.c: the transmit side */
void nif__q_tx_reap(struct qring *q);
int nif__q_flush(struct nif_dev *d);
uint8_t *nif__q_tx_slot(struct nif_dev *d, size_t len);
int nif__q_tx_gather(struct nif_dev *d, const struct iovec *iov, unsigned n, size_t len,
		     uint32_t off, nif_tx_done_fn *done, void *cookie);
int nif__q_tx_queue(struct nif_dev *d, uint8_t *slot, size_t len, uint32_t off);
void nif__q_tx_drain(struct qring *q);   /* at close: wait for the writes in flight */

#endif
