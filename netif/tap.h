/* A Linux TAP device driven through io_uring, with batched reads and writes.
 *
 * The device knows nothing of IP or lwIP: it moves Ethernet frames. Receive is owned by one
 * thread (the stack thread): nif_tap_wait() then nif_tap_rx(). Transmit may be used from any
 * thread as long as the caller serialises it (ulstack holds its core lock): frames are
 * queued with nif_tap_tx_slot()/nif_tap_tx_queue() and go to the kernel in one system call
 * at nif_tap_tx_flush(). nif_tap_wake() is safe from any thread and ends a wait.
 *
 * When io_uring is unavailable (or ULS_NO_IO_URING=1 is set) the same calls fall back to
 * poll(2), read(2) and write(2); that is logged once.
 */
#ifndef ULS_NETIF_TAP_H
#define ULS_NETIF_TAP_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "netif/dev.h"
#include "netif/frame.h"
#include "netif/vnet.h"

struct nif_tap;

struct nif_tap_config {
	const char *ifname;   /* an existing TAP device in the caller's network namespace */
	unsigned mtu;         /* 0: the device's MTU */
	unsigned rx_depth;    /* reads kept in flight (0: default) */
	unsigned tx_depth;    /* transmit buffers (0: default) */
	/* Open with a virtio-net header (IFF_VNET_HDR) and turn on checksum and TCP
	 * segmentation offload for both families (TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6):
	 * frames carry offload words
	 * (netif/vnet.h) and may be up to NIF_OFF_FRAME_MAX long. Off: plain frames of at most
	 * MTU + 14, every offload of the device reset. */
	bool offload;
	/* With offload: checksum offload alone (TUN_F_CSUM): no super-segment either way,
	 * frames of at most MTU + 14 behind their virtio-net header. */
	bool csum_only;
};

int nif_tap_open(struct nif_tap **out, const struct nif_tap_config *cfg);
void nif_tap_close(struct nif_tap *tap);
/* The TAP as a generic device (the stack's view); closing it closes the TAP. */
struct nif_dev *nif_tap_dev(struct nif_tap *tap);
unsigned nif_tap_mtu(const struct nif_tap *tap);
int nif_tap_uses_io_uring(const struct nif_tap *tap);

/* ulsd also waits on other eventfds (the processes' transmit rings) in the same wait as the
 * TAP: nif_tap_watch() keeps a read of fd in flight; when it completes, nif_tap_rx() calls
 * the event function with tag instead of delivering a frame. Receiving thread only. */
typedef void nif_event_fn(void *arg, uint64_t tag);
int nif_tap_watch(struct nif_tap *tap, int fd, uint64_t tag);
void nif_tap_unwatch(struct nif_tap *tap, uint64_t tag);
void nif_tap_set_event_fn(struct nif_tap *tap, nif_event_fn *fn, void *arg);

int nif_tap_wait(struct nif_tap *tap, int timeout_ms);
int nif_tap_rx(struct nif_tap *tap, nif_rx_fn *fn, void *arg, unsigned budget);
void nif_tap_wake(struct nif_tap *tap);
/* Any thread, while none calls nif_tap_rx(): do frames wait? */
bool nif_tap_ready(const struct nif_tap *tap);

uint8_t *nif_tap_tx_slot(struct nif_tap *tap);
/* Queue a frame from nif_tap_tx_slot() with its offload word (0 on a TAP without offloads).
 * Returns 0, or -EINVAL when off does not fit the frame (dropped, tx_bad_offload). */
int nif_tap_tx_queue(struct nif_tap *tap, uint8_t *slot, size_t len, uint32_t off);
int nif_tap_tx_flush(struct nif_tap *tap);
/* The longest frame a buffer from nif_tap_tx_slot() holds. */
size_t nif_tap_tx_room(const struct nif_tap *tap);
/* Give back a buffer from nif_tap_tx_slot() that will not be sent. */
void nif_tap_tx_unused(struct nif_tap *tap, uint8_t *slot);
/* Send, now and in one system call, a frame whose first head bytes are in a buffer from
 * nif_tap_tx_slot() and whose rest (rest_len bytes) lies elsewhere: a large frame leaves
 * from where its owner wrote it, without a copy into a transmit buffer. Frames queued
 * before it are handed to the kernel first, so frames leave in order. The buffer is free
 * again on return. Returns 0, or -EINVAL for an offload word that does not describe the
 * frame (nothing is sent). */
int nif_tap_tx_send_split(struct nif_tap *tap, uint8_t *slot, size_t head,
			  const uint8_t *rest, size_t rest_len, uint32_t off);

void nif_tap_get_stats(const struct nif_tap *tap, struct nif_dev_stats *out);

/* Multi-queue TAPs (a device made with IFF_MULTI_QUEUE: `ip tuntap add ... multi_queue`).
 * nif_tap_open takes either kind; on a multi-queue one its fd is one queue, and more queues
 * can be attached. tun numbers queues in attach order and, when one detaches, moves the last
 * one into its place: a caller that wants stable numbers keeps every queue open.
 * nif_tap_fd: the queue nif_tap_open attached (for ioctls such as TUNSETSTEERINGEBPF).
 * nif_tap_queue_open: attach one more queue with the same flags (non-blocking, close-on-
 * exec); it takes the next index. -EOPNOTSUPP on a single-queue TAP, -E2BIG past 256.
 * nif_tap_queue_detach: detach that queue from the device (TUNSETQUEUE); the file stays
 * open, receives nothing more, and its unread frames are dropped. */
int nif_tap_fd(const struct nif_tap *tap);
bool nif_tap_multiqueue(const struct nif_tap *tap);
int nif_tap_queue_open(const struct nif_tap *tap);
int nif_tap_queue_detach(int fd);

/* The TAP's root qdisc (netif/qdisc.c, rtnetlink; CAP_NET_ADMIN). nif_tap_noqueue: if
 * ifindex has the kernel's default root (mq or pfifo_fast, handle 0), replace it by
 * noqueue: 1 replaced, 0 left as it was (an operator's own, or noqueue already), -errno.
 * nif_qdisc_root: the root's kind and handle (-ENOENT: none listed). nif_qdisc_set_root:
 * create or replace the root (tests set an operator's). */
int nif_tap_noqueue(unsigned ifindex);
int nif_qdisc_root(unsigned ifindex, char kind[16], uint32_t *handle);
int nif_qdisc_set_root(unsigned ifindex, const char *kind, uint32_t handle);

/* Logging hook: the host program decides where messages go (default: stderr). */
typedef void nif_log_fn(int level, const char *msg);
void nif_set_log(nif_log_fn *fn);
/* Format like vprintf (at most 511 octets: longer is cut) and hand the message to fn: the
 * one place the log functions of libuls, ulsd and the device make a message of a format. */
__attribute__((format(printf, 3, 0)))
void nif_vlog(nif_log_fn *fn, int level, const char *fmt, va_list ap);

#endif
