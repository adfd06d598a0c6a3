/* A network device as the stack sees it: Ethernet frames in and out, one receiving thread,
 * a transmit side serialised by the caller's lock, and a wake-up that any thread may use.
 * Implemented by the TAP device (netif/tap.c: the single-process node), by the
 * shared-memory ring pair to ulsd (netif/ringdev.c: a process on a node, the relay) and by
 * a process's own TAP queue (netif/qring.c: the direct path), which alone also lends its
 * receive buffers (rx_take) and writes from the caller's memory (tx_gather). */
#ifndef ULS_NETIF_DEV_H
#define ULS_NETIF_DEV_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "netif/vnet.h"

/* off: the frame's offload word (netif/vnet.h), 0 for a plain, fully checksummed frame. */
typedef void nif_rx_fn(void *arg, const uint8_t *frame, size_t len, uint32_t off);

/* A receive buffer a device can lend (netif/rxpool.h): the frame stays where the device
 * read it, and a consumer that keeps it gives it back with nif_rxbuf_release() once done,
 * from any thread, also after the device closed. */
struct nif_rxbuf;
/* Called instead of nif_rx_fn, with the same arg, by a device that lends its buffers when
 * the consumer set nif_dev.rx_take. Returns true if the consumer kept b (only allowed when
 * b->lendable), false if it is done with the frame (copied or dropped) when it returns. */
typedef bool nif_rx_take_fn(void *arg, struct nif_rxbuf *b);
/* Transmit from the caller's memory: called once the device no longer reads the pieces
 * of a frame queued with tx_gather (the write completed, failed, or the device closed),
 * under the caller's lock, from a later call of the device's transmit ops or close. */
typedef void nif_tx_done_fn(void *cookie);
/* The most pieces tx_gather takes for one frame. */
#define NIF_TX_IOV_MAX 16

struct nif_bd_frame;

struct nif_dev_stats {
	uint64_t rx_frames, rx_bytes, rx_errors;
	uint64_t tx_frames, tx_bytes, tx_errors, tx_short;
	uint64_t tx_waits;    /* times a sender had to wait for transmit space */
	uint64_t rx_wakeups;  /* waits that ended with work to do */
	uint64_t rx_dropped;  /* frames the device itself dropped (e.g. a full ring) */
	uint64_t rx_gso, tx_gso;       /* super-segments (gso_size set) received and sent */
	uint64_t rx_csum_partial;      /* frames received with only a pseudo-header checksum */
	uint64_t rx_csum_valid;        /* frames received whose checksum the kernel verified */
	uint64_t rx_bad_vnet;          /* frames dropped: virtio-net header refused */
	uint64_t tx_bad_offload;       /* frames dropped: offload word does not fit the frame */
	uint64_t rx_lent;              /* frames the consumer kept in the device's buffer */
	uint64_t rx_pool_empty;        /* frames not lendable: every buffer lent, so copied */
	uint64_t tx_gather;            /* frames written from the caller's memory (no copy) */
	uint64_t spin_enters;          /* a spinning thread's entries into the kernel */
	/* Waits on the device: as one io_uring_enter that submits and sleeps (the wake-up in
	 * the ring, no other descriptor to watch), and in poll(2) with the ring's descriptor
	 * (the caller's descriptors watched too, or no wake-up in the ring). */
	uint64_t ring_waits, poll_waits;
	/* The direct path's receive (netif/qring.c): frames that came by one read each, and
	 * by the multishot read; multishot reads armed, ended (for any reason), ended because
	 * the provided-buffer ring ran dry, and refused at submission (then one read per slot
	 * again). */
	uint64_t rx_read_cqes, rx_mshot_cqes;
	uint64_t rx_mshot_arms, rx_mshot_ends, rx_mshot_nobufs, rx_mshot_refused;
	/* Reads (one per slot, multishot, of the wake-up) that ended with ECANCELED: the
	 * kernel cancels a thread's reads once it exits. Not errors: armed again at once. */
	uint64_t rx_reads_cancelled;
	/* Waits for transmit space that ended without any (netif/qring.c tx_reserve): every
	 * buffer in flight and no write completing within 500 ms (netif/txwait.c). */
	uint64_t tx_reserve_timeouts;
	/* Reads in flight whose submitter exited (netif/qring.c: a thread-exit hook reports
	 * it) that a live thread replaced with reads of its own, at its next round, rather
	 * than waiting for the kernel to cancel them: the re-arms of a dead thread's reads. */
	uint64_t rx_reads_replaced;
	/* Reads in flight that another live thread had submitted, which a thread about to
	 * sleep on a cooperative receive ring cancelled and armed again as its own (their
	 * completions would wait for that thread's next system call: netif/qring.c). */
	uint64_t rx_reads_taken_over;
	/* Receive buffers the device allocated (netif/rxpool.h), each up to a 64 KiB frame
	 * with offloads: they follow the reads in flight and the frames lent at once, which
	 * start few and grow with the traffic (qring_priv.h RX_ARM_MIN, RX_BR_MIN). */
	uint64_t rx_buffers;
	/* Reads of the queue in flight, summed over the waits (ring_waits, poll_waits): each
	 * is a poll entry on the queue that a frame wakes, so their mean per wait says what a
	 * frame's arrival costs the waiter in re-arms (netif/qring.c). */
	uint64_t rx_armed_at_wait;
	/* The direct path's reads that may not wait (netif/qring_rx.c, RWF_NOWAIT): frames
	 * they took, those that found the queue empty (EAGAIN, armed again only after a
	 * round that took frames), and refused by the kernel (then the device arms only
	 * reads that wait, as before). */
	uint64_t rx_nowait_cqes, rx_nowait_again, rx_nowait_refused;
};

/* The counters above that the receiving thread bumps in its wait (rx_wakeups, spin_enters,
 * rx_reads_replaced, rx_reads_taken_over), where it holds no caller's lock, while
 * get_stats copies them under
 * that lock from another thread (uls_counters, ulsstat): kept apart, and read and written
 * with relaxed atomics, so that the copy is no data race and neither side tears them
 * (ThreadSanitizer saw rx_wakeups in tests/shim rtcwait). Relaxed: they order nothing. One
 * writer at a time (the receiving thread), so a load and a store, not a locked add. */
struct nif_wait_stats {
	uint64_t rx_wakeups, spin_enters, rx_reads_replaced, rx_reads_taken_over;
};

static inline void nif__wait_count(uint64_t *c, uint64_t n)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

/* get_stats: the copy of st, then these. */
static inline void nif__wait_stats_get(const struct nif_dev_stats *st,
				       const struct nif_wait_stats *w, struct nif_dev_stats *out)
{
	*out = *st;
	out->rx_wakeups = __atomic_load_n(&w->rx_wakeups, __ATOMIC_RELAXED);
	out->spin_enters = __atomic_load_n(&w->spin_enters, __ATOMIC_RELAXED);
	out->rx_reads_replaced = __atomic_load_n(&w->rx_reads_replaced, __ATOMIC_RELAXED);
	out->rx_reads_taken_over = __atomic_load_n(&w->rx_reads_taken_over, __ATOMIC_RELAXED);
}

struct nif_dev;

struct nif_dev_ops {
	/* Receiving thread only, caller's lock not held. timeout_ms < 0: no timeout. */
	int (*wait)(struct nif_dev *dev, int timeout_ms);
	/* Receiving thread only: deliver up to budget frames; returns how many. */
	int (*rx)(struct nif_dev *dev, nif_rx_fn *fn, void *arg, unsigned budget);
	/* Any thread: end a wait. */
	void (*wake)(struct nif_dev *dev);
	/* Caller's lock held: a buffer for a frame of len bytes (at most mtu + 14, or
	 * NIF_OFF_FRAME_MAX on a device with offloads), then queue it with its offload word
	 * (netif/vnet.h). tx_queue returns 0, or -EINVAL if the device refused the offload
	 * word (the frame is dropped and counted). */
	uint8_t *(*tx_slot)(struct nif_dev *dev, size_t len);
	int (*tx_queue)(struct nif_dev *dev, uint8_t *slot, size_t len, uint32_t off);
	int (*tx_flush)(struct nif_dev *dev);
	void (*get_stats)(const struct nif_dev *dev, struct nif_dev_stats *out);
	void (*close)(struct nif_dev *dev);
	/* Caller's lock held: read the latency trace (netif/breakdown.h). NULL for devices
	 * that keep none (the TAP; every device of a build without --enable-breakdown). */
	size_t (*breakdown)(struct nif_dev *dev, struct nif_bd_frame *out, size_t n,
			    uint64_t *lost);
	/* Optional (NULL: use tx_slot): caller's lock held. Queue the frame made of the n
	 * pieces iov[0..n) (n <= NIF_TX_IOV_MAX; len bytes in all; iov[0] holds the whole
	 * Ethernet, IPv4 and transport headers) with its offload word, written from where the
	 * pieces are: they must stay unchanged until done(cookie) is called. Returns 0 (done
	 * will be called), -EINVAL if the offload word does not fit (dropped and counted; done
	 * is not called), -ENOBUFS if the device cannot take it now (the caller copies it with
	 * tx_slot instead; done is not called). */
	int (*tx_gather)(struct nif_dev *dev, const struct iovec *iov, unsigned n, size_t len,
			 uint32_t off, nif_tx_done_fn *done, void *cookie);
	/* Any thread, caller's lock not held, while no other thread calls rx: do frames wait
	 * to be taken? Cheap (no system call where the device allows), for a thread that
	 * polls before it sleeps; a wrong "no" only delays frames until the next wait. NULL:
	 * the device cannot tell. */
	bool (*ready)(const struct nif_dev *dev);
	/* Optional: as ready, for a thread that spins on the device (caller's lock not held,
	 * no other thread calling rx); may enter the kernel, but only when that arms reads
	 * (netif/qring.c). NULL: spin on ready and the wait with timeout 0 (stack/drive.c). */
	bool (*spin_poll)(struct nif_dev *dev);
	/* Optional (NULL: the device cannot): as wait, and also ends when one of the n
	 * kernel descriptors in fds is ready as its events ask (what a program's poll or
	 * epoll_wait waits on, stack/drive.c); their revents are left as poll(2) set them. */
	int (*wait_fd)(struct nif_dev *dev, struct pollfd *fds, unsigned n, int timeout_ms);
	/* Optional (NULL: rx submits what it re-arms): the receiving thread, caller's lock
	 * held, no thread in wait. A device whose rx leaves the reads it re-armed for the
	 * next wait to submit with its own system call submits them now if too few reads
	 * are in flight, for a caller that takes frames without ever waiting. */
	void (*rx_refill)(struct nif_dev *dev);
	/* Optional (NULL: its wait looks): caller's lock held, no thread in wait. For a
	 * device whose wait is also where it notices that the lease hung up, a look at the
	 * lease without a wait, at most as often as the wait would look: 0, or -ECONNRESET
	 * once the lease is gone (as wait returns it). */
	int (*lease_check)(struct nif_dev *dev);
	/* Optional (NULL: the caller never defers a flush): caller's lock held. Do frames
	 * queued by tx_queue or tx_gather wait for tx_flush to hand them to the kernel? */
	bool (*tx_pending)(const struct nif_dev *dev);
};

/* What a process's device carries (nif_qring_open, nif_ringdev_open): a bool's true is
 * NIF_OFFLOAD_FULL. */
enum nif_offload {
	NIF_OFFLOAD_NONE = 0,   /* plain, fully checksummed frames */
	NIF_OFFLOAD_FULL = 1,   /* partial checksums and super-segments */
	NIF_OFFLOAD_CSUM = 2,   /* partial checksums only (nif_dev.csum_only) */
};

struct nif_dev {
	const struct nif_dev_ops *ops;
	unsigned mtu;
	/* The device carries offload words both ways: partial checksums and super-segments
	 * up to NIF_OFF_FRAME_MAX (a ulsd node with offloads on, netif/vnet.h). */
	bool offload;
	/* With offload: partial checksums only, no super-segment either way (a ulsd node with
	 * `--offload csum`: a TAP with TUN_F_CSUM alone, like a NIC without TSO); frames stay
	 * within the MTU. */
	bool csum_only;
	/* Set by the consumer (NULL: it always copies): devices that can lend their receive
	 * buffers (netif/qring.c) call it from rx instead of the nif_rx_fn they were given. */
	nif_rx_take_fn *rx_take;
};

/* Whether a frame with offload word off may go out of device d at all (nif_vnet_build
 * then checks the word against the frame): none on a device without offload, no
 * super-segment on one with checksum offload alone. */
static inline bool nif_dev_takes_offload(const struct nif_dev *d, uint32_t off)
{
	return off == 0 || (d->offload && !(d->csum_only && nif_off_gso(off)));
}

#endif
