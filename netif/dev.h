/* A network device as the stack sees it: Ethernet frames in and out, one receiving thread,
 * a transmit side serialised by the caller's lock, and a wake-up that any thread may use.
 * Implemented by the TAP device (netif/tap.c: the single-process node) and by the
 * shared-memory ring pair to ulsd (netif/ringdev.c: a process on a node). */
#ifndef ULS_NETIF_DEV_H
#define ULS_NETIF_DEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* off: the frame's offload word (netif/vnet.h), 0 for a plain, fully checksummed frame. */
typedef void nif_rx_fn(void *arg, const uint8_t *frame, size_t len, uint32_t off);

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
};

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
	/* Any thread, caller's lock not held, while no other thread calls rx: do frames wait
	 * to be taken? Cheap (no system call where the device allows), for a thread that
	 * polls before it sleeps; a wrong "no" only delays frames until the next wait. NULL:
	 * the device cannot tell. */
	bool (*ready)(const struct nif_dev *dev);
};

struct nif_dev {
	const struct nif_dev_ops *ops;
	unsigned mtu;
	/* The device carries offload words both ways: partial checksums and super-segments
	 * up to NIF_OFF_FRAME_MAX (a ulsd node with offloads on, netif/vnet.h). */
	bool offload;
};

#endif
