/* TAP device over io_uring (see tap.h).
 *
 * Receive keeps rx_depth reads in flight on one ring that only the stack thread touches; a
 * read of the wake eventfd sits in the same ring so that one wait covers frames, wake-ups
 * and the timer deadline. Transmit uses a second ring, touched only under the caller's lock,
 * so the two sides never share a submission queue.
 *
 * Deviation: frames are copied into transmit buffers rather than written from lwIP's pbufs
 * in place. lwIP rewrites a segment's header when it retransmits it, and a write that
 * io_uring has punted to a worker could otherwise read a half-rewritten header.
 */
#include "netif/tap.h"
#include "netif/sys.h"
#include "netif/tun.h"
#include "netif/txwait.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <liburing.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define RX_DEPTH_DEFAULT   64
#define TX_DEPTH_DEFAULT   256
#define TX_SUBMIT_BATCH    64
#define WAKE_TAG           UINT64_MAX
#define CANCEL_TAG         (UINT64_MAX - 1)
#define WATCH_BIT          (1ull << 62)  /* user_data of watched eventfd reads */
#define RX_ERROR_BACKOFF_US 10000

struct watch {
	int fd;
	bool active;     /* unwatched entries wait for their cancelled read to complete */
	bool in_flight;
	uint64_t tag;
	uint64_t buf;
};

struct nif_tap {
	struct nif_dev dev;  /* first: the generic view */
	int fd;
	int wake_fd;
	unsigned mtu;
	bool mq;               /* the TAP is multi-queue; fd is one of its queues */
	bool offload;
	char ifname[IFNAMSIZ];
	size_t frame_max;      /* MTU + Ethernet header */
	size_t buf_size;       /* one byte more than vhl + frame_max, to notice truncation */
	size_t vhl;            /* virtio-net header in front of each frame: 0 or NIF_VNET_HLEN */
	bool uring;

	struct io_uring rx;
	unsigned rx_depth;
	uint8_t *rx_bufs;
	uint64_t wake_buf;
	unsigned rx_rearm;     /* reads prepared but not yet submitted */
	unsigned rx_errors_in_row;

	struct io_uring tx;
	unsigned tx_depth;
	uint8_t *tx_bufs;
	unsigned *tx_free;
	unsigned tx_nfree;
	unsigned tx_unsubmitted;
	bool tx_stalled;   /* a wait for transmit space ran out, and half the buffers are not back since */

	struct watch *watches;
	unsigned nwatches;
	nif_event_fn *event_fn;
	void *event_arg;

	struct nif_dev_stats st;
	struct nif_wait_stats wst;  /* dev.h */
};

static const struct nif_dev_ops tap_ops;
static void watch_done(struct nif_tap *t, unsigned i, int res);

static void default_log(int level, const char *msg)
{
	(void)level;
	fprintf(stderr, "ulstack: %s\n", msg);
}

static nif_log_fn *log_fn = default_log;

void nif_set_log(nif_log_fn *fn)
{
	log_fn = fn ? fn : default_log;
}

__attribute__((format(printf, 2, 3)))
static void logf_(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	nif_vlog(log_fn, level, fmt, ap);
	va_end(ap);
}

void nif_vlog(nif_log_fn *fn, int level, const char *fmt, va_list ap)
{
	char buf[512];

	vsnprintf(buf, sizeof(buf), fmt, ap);
	fn(level, buf);
}

static uint8_t *rx_buf(struct nif_tap *t, unsigned slot)
{
	return t->rx_bufs + (size_t)slot * t->buf_size;
}

static uint8_t *tx_buf(struct nif_tap *t, unsigned slot)
{
	return t->tx_bufs + (size_t)slot * t->buf_size;
}

static struct io_uring_sqe *rx_sqe(struct nif_tap *t)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&t->rx);

	if (!sqe) {
		io_uring_submit(&t->rx);
		t->rx_rearm = 0;
		sqe = io_uring_get_sqe(&t->rx);
	}
	return sqe;
}

static void arm_read(struct nif_tap *t, unsigned slot)
{
	struct io_uring_sqe *sqe = rx_sqe(t);

	if (!sqe)
		return;  /* cannot happen: the ring has room for every read we own */
	io_uring_prep_read(sqe, t->fd, rx_buf(t, slot), (unsigned)t->buf_size, 0);
	io_uring_sqe_set_data64(sqe, slot);
	t->rx_rearm++;
}

static void arm_wake(struct nif_tap *t)
{
	struct io_uring_sqe *sqe = rx_sqe(t);

	if (!sqe)
		return;
	io_uring_prep_read(sqe, t->wake_fd, &t->wake_buf, sizeof(t->wake_buf), 0);
	io_uring_sqe_set_data64(sqe, WAKE_TAG);
	t->rx_rearm++;
}

static int setup_uring(struct nif_tap *t)
{
	int rc = io_uring_queue_init(t->rx_depth * 2 + 2, &t->rx, 0);

	if (rc < 0)
		return rc;
	rc = io_uring_queue_init(t->tx_depth, &t->tx, 0);
	if (rc < 0) {
		io_uring_queue_exit(&t->rx);
		return rc;
	}
	for (unsigned i = 0; i < t->rx_depth; i++)
		arm_read(t, i);
	arm_wake(t);
	rc = io_uring_submit(&t->rx);
	if (rc < 0) {
		io_uring_queue_exit(&t->rx);
		io_uring_queue_exit(&t->tx);
		return rc;
	}
	t->rx_rearm = 0;
	return 0;
}

int nif_tap_open(struct nif_tap **out, const struct nif_tap_config *cfg)
{
	struct nif_tap *t;
	unsigned devmtu = 0;
	int rc;

	if (!out || !cfg)
		return -EINVAL;
	if (cfg->mtu && (cfg->mtu < NIF_MTU_MIN || cfg->mtu > NIF_MTU_MAX))
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->fd = t->wake_fd = -1;
	t->dev.ops = &tap_ops;
	rc = nif__tun_attach(cfg->ifname, cfg->offload, !cfg->csum_only, &t->mq);
	if (rc < 0)
		goto fail;
	t->fd = rc;
	/* On a multi-queue TAP the first queue must be queue 0: queues a killed predecessor
	 * still holds (its io_uring goes after it) would come first. Busy, as a single-queue
	 * TAP says. */
	if (t->mq && nif__tun_count_queues(cfg->ifname) > 1) {
		rc = -EBUSY;
		goto fail;
	}
	t->offload = cfg->offload;
	snprintf(t->ifname, sizeof(t->ifname), "%s", cfg->ifname);
	rc = nif__tun_mtu(cfg->ifname, &devmtu);
	if (rc < 0)
		goto fail;
	t->mtu = cfg->mtu ? cfg->mtu : devmtu;
	t->dev.mtu = t->mtu;
	/* Receive buffers hold the larger of the two MTUs: the kernel delivers up to the
	 * device's MTU whatever the stack was told. */
	t->frame_max = (size_t)t->mtu + WIRE_ETH_HLEN;
	t->buf_size = ((devmtu > t->mtu ? devmtu : t->mtu) + WIRE_ETH_HLEN + 1 + 63) & ~(size_t)63;
	if (cfg->offload && cfg->csum_only) {
		/* Partial checksums behind the header; frames no longer than without it. */
		t->vhl = NIF_VNET_HLEN;
		t->dev.offload = true;
		t->dev.csum_only = true;
		t->buf_size = (NIF_VNET_HLEN + t->buf_size + 63) & ~(size_t)63;
	} else if (cfg->offload) {
		/* Super-segments both ways; buffers are resident only as far as they are used. */
		t->vhl = NIF_VNET_HLEN;
		t->dev.offload = true;
		t->frame_max = NIF_OFF_FRAME_MAX;
		t->buf_size = (NIF_VNET_HLEN + NIF_OFF_FRAME_MAX + 1 + 63) & ~(size_t)63;
	}
	t->rx_depth = cfg->rx_depth ? cfg->rx_depth : RX_DEPTH_DEFAULT;
	t->tx_depth = cfg->tx_depth ? cfg->tx_depth : TX_DEPTH_DEFAULT;
	t->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (t->wake_fd < 0) {
		rc = -errno;
		goto fail;
	}
	t->rx_bufs = malloc(t->buf_size * t->rx_depth);
	t->tx_bufs = malloc(t->buf_size * t->tx_depth);
	t->tx_free = malloc(sizeof(*t->tx_free) * t->tx_depth);
	if (!t->rx_bufs || !t->tx_bufs || !t->tx_free) {
		rc = -ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < t->tx_depth; i++)
		t->tx_free[i] = t->tx_depth - 1 - i;
	t->tx_nfree = t->tx_depth;

	const char *no_uring = getenv("ULS_NO_IO_URING");
	if (no_uring && strcmp(no_uring, "1") == 0) {
		logf_(1, "io_uring disabled by ULS_NO_IO_URING=1: using read/write on %s", cfg->ifname);
	} else {
		rc = setup_uring(t);
		if (rc == 0)
			t->uring = true;
		else
			logf_(1, "io_uring unavailable (%s): using read/write on %s",
			      strerror(-rc), cfg->ifname);
	}
	*out = t;
	return 0;
fail:
	nif_tap_close(t);
	return rc;
}

void nif_tap_close(struct nif_tap *t)
{
	if (!t)
		return;
	if (t->uring) {
		io_uring_queue_exit(&t->rx);
		io_uring_queue_exit(&t->tx);
	}
	if (t->fd >= 0)
		nif_sys.close(t->fd);
	if (t->wake_fd >= 0)
		nif_sys.close(t->wake_fd);
	free(t->rx_bufs);
	free(t->tx_bufs);
	free(t->tx_free);
	free(t->watches);
	free(t);
}

unsigned nif_tap_mtu(const struct nif_tap *t)
{
	return t->mtu;
}

int nif_tap_uses_io_uring(const struct nif_tap *t)
{
	return t->uring;
}

/* Wait for frames, a wake-up or the timeout (-1: none). Only the receiving thread calls
 * this, without holding the caller's lock. */
int nif_tap_wait(struct nif_tap *t, int timeout_ms)
{
	if (t->uring) {
		struct io_uring_cqe *cqe;
		struct __kernel_timespec ts = {
			.tv_sec = timeout_ms / 1000,
			.tv_nsec = (long long)(timeout_ms % 1000) * 1000000,
		};
		int rc = io_uring_wait_cqe_timeout(&t->rx, &cqe, timeout_ms < 0 ? NULL : &ts);
		if (rc == 0)
			nif__wait_count(&t->wst.rx_wakeups, 1);
		return rc == -ETIME || rc == -EINTR ? 0 : rc;
	}
	struct pollfd pfd[2] = {
		{ .fd = t->fd, .events = POLLIN },
		{ .fd = t->wake_fd, .events = POLLIN },
	};
	int rc = nif_sys.poll(pfd, 2, timeout_ms);
	if (rc > 0)
		nif__wait_count(&t->wst.rx_wakeups, 1);
	return rc < 0 && errno != EINTR ? -errno : 0;
}

/* Do frames wait (tap.h)? Without io_uring it costs a poll(2). */
bool nif_tap_ready(const struct nif_tap *t)
{
	if (t->uring)
		return io_uring_cq_ready(&t->rx) != 0;
	struct pollfd pfd = { .fd = t->fd, .events = POLLIN };
	return nif_sys.poll(&pfd, 1, 0) > 0;
}

static void rx_error(struct nif_tap *t, int err)
{
	t->st.rx_errors++;
	/* A device that keeps failing (taken down under us) must not turn this thread into a
	 * busy loop. */
	if (++t->rx_errors_in_row > 64)
		usleep(RX_ERROR_BACKOFF_US);
	if (t->st.rx_errors == 1)
		logf_(1, "TAP read failed: %s", strerror(err));
}

/* One read: strip and check the virtio-net header, then hand the frame on. A header that
 * does not describe its frame is counted and the frame dropped. */
static bool deliver(struct nif_tap *t, nif_rx_fn *fn, void *arg, const uint8_t *buf, size_t len)
{
	uint32_t off = 0;

	if (t->vhl) {
		if (len < t->vhl ||
		    nif_vnet_parse(buf, t->vhl, buf + t->vhl, len - t->vhl, &off) < 0) {
			t->st.rx_bad_vnet++;
			return false;
		}
		buf += t->vhl;
		len -= t->vhl;
		if (nif_off_gso(off))
			t->st.rx_gso++;
		if (off & NIF_OFF_CSUM_PARTIAL)
			t->st.rx_csum_partial++;
		else if (off & NIF_OFF_CSUM_VALID)
			t->st.rx_csum_valid++;
	}
	t->st.rx_frames++;
	t->st.rx_bytes += (uint64_t)len;
	fn(arg, buf, len, off);
	return true;
}

static int rx_fallback(struct nif_tap *t, nif_rx_fn *fn, void *arg, unsigned budget)
{
	unsigned n = 0;
	uint64_t v;

	while (nif_sys.read(t->wake_fd, &v, sizeof(v)) > 0)
		;
	while (n < budget) {
		ssize_t len = nif_sys.read(t->fd, t->rx_bufs, t->buf_size);
		if (len < 0) {
			if (errno != EAGAIN && errno != EINTR)
				rx_error(t, errno);
			break;
		}
		t->rx_errors_in_row = 0;
		if (deliver(t, fn, arg, t->rx_bufs, (size_t)len))
			n++;
	}
	return (int)n;
}

/* Deliver up to budget received frames to fn and put their reads back in flight. The frame
 * is only valid during the call. Returns the number of frames delivered. */
int nif_tap_rx(struct nif_tap *t, nif_rx_fn *fn, void *arg, unsigned budget)
{
	struct io_uring_cqe *cqe;
	unsigned n = 0;

	if (!t->uring)
		return rx_fallback(t, fn, arg, budget);
	while (n < budget && io_uring_peek_cqe(&t->rx, &cqe) == 0) {
		uint64_t tag = io_uring_cqe_get_data64(cqe);
		int res = cqe->res;

		io_uring_cqe_seen(&t->rx, cqe);
		if (tag == WAKE_TAG) {
			arm_wake(t);
			continue;
		}
		if (tag == CANCEL_TAG)
			continue;
		if (tag & WATCH_BIT) {
			watch_done(t, (unsigned)(tag & ~WATCH_BIT), res);
			continue;
		}
		if (res > 0) {
			t->rx_errors_in_row = 0;
			if (deliver(t, fn, arg, rx_buf(t, (unsigned)tag), (size_t)res))
				n++;
		} else if (res < 0 && res != -EAGAIN && res != -EINTR) {
			rx_error(t, -res);
		}
		arm_read(t, (unsigned)tag);
	}
	if (t->rx_rearm) {
		io_uring_submit(&t->rx);
		t->rx_rearm = 0;
	}
	return (int)n;
}

static void arm_watch(struct nif_tap *t, unsigned i)
{
	struct io_uring_sqe *sqe = rx_sqe(t);

	if (!sqe)
		return;
	io_uring_prep_read(sqe, t->watches[i].fd, &t->watches[i].buf, sizeof(uint64_t), 0);
	io_uring_sqe_set_data64(sqe, WATCH_BIT | i);
	t->watches[i].in_flight = true;
	t->rx_rearm++;
}

static void watch_done(struct nif_tap *t, unsigned i, int res)
{
	struct watch *w;

	if (i >= t->nwatches)
		return;
	w = &t->watches[i];
	w->in_flight = false;
	if (!w->active)
		return;  /* cancelled: the entry is free again */
	if (res > 0 && t->event_fn)
		t->event_fn(t->event_arg, w->tag);
	/* event_fn may have unwatched it */
	if (w->active && (res > 0 || res == -EAGAIN || res == -EINTR))
		arm_watch(t, i);
	else if (w->active)
		w->active = false;  /* the fd failed: stop watching it */
}

int nif_tap_watch(struct nif_tap *t, int fd, uint64_t tag)
{
	unsigned i;

	if (!t->uring)
		return -EOPNOTSUPP;
	for (i = 0; i < t->nwatches; i++)
		if (!t->watches[i].active && !t->watches[i].in_flight)
			break;
	if (i == t->nwatches) {
		struct watch *n = realloc(t->watches, sizeof(*n) * (t->nwatches + 16));
		if (!n)
			return -ENOMEM;
		memset(n + t->nwatches, 0, sizeof(*n) * 16);
		t->watches = n;
		t->nwatches += 16;
		/* every watch needs room in the submission queue next to the reads */
		if (t->nwatches > t->rx_depth)
			return -ENOSPC;
	}
	t->watches[i].fd = fd;
	t->watches[i].tag = tag;
	t->watches[i].active = true;
	arm_watch(t, i);
	io_uring_submit(&t->rx);
	t->rx_rearm = 0;
	return 0;
}

void nif_tap_unwatch(struct nif_tap *t, uint64_t tag)
{
	for (unsigned i = 0; i < t->nwatches; i++) {
		struct watch *w = &t->watches[i];
		if (!w->active || w->tag != tag)
			continue;
		w->active = false;
		if (w->in_flight) {
			struct io_uring_sqe *sqe = rx_sqe(t);
			if (sqe) {
				io_uring_prep_cancel64(sqe, WATCH_BIT | i, 0);
				io_uring_sqe_set_data64(sqe, CANCEL_TAG);
				t->rx_rearm++;
			}
		}
	}
}

void nif_tap_set_event_fn(struct nif_tap *t, nif_event_fn *fn, void *arg)
{
	t->event_fn = fn;
	t->event_arg = arg;
}

void nif_tap_wake(struct nif_tap *t)
{
	uint64_t one = 1;

	/* EAGAIN means the counter is already non-zero: a wake-up is pending anyway. */
	if (nif_sys.write(t->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		logf_(1, "wake write failed: %s", strerror(errno));
}

static void tx_reap(struct nif_tap *t)
{
	struct io_uring_cqe *cqe;

	while (io_uring_peek_cqe(&t->tx, &cqe) == 0) {
		unsigned slot = (unsigned)io_uring_cqe_get_data64(cqe);
		if (cqe->res < 0)
			t->st.tx_errors++;
		t->tx_free[t->tx_nfree++] = slot;
		if (t->tx_stalled && t->tx_nfree >= t->tx_depth / 2)
			t->tx_stalled = false;   /* half the buffers are back: a sender may wait again */
		io_uring_cqe_seen(&t->tx, cqe);
	}
}

static bool tx_reap_any(void *arg)
{
	struct nif_tap *t = arg;

	tx_reap(t);
	return t->tx_nfree != 0;
}

/* A transmit buffer of at least MTU + 14 bytes. The caller must hold its lock until the
 * buffer is queued. Waits, at most 500 ms (netif/txwait.c), for the kernel to finish
 * earlier writes when all are in use; NULL when none finished (counted,
 * tx_reserve_timeouts), and at once after that until half the buffers are back. */
uint8_t *nif_tap_tx_slot(struct nif_tap *t)
{
	if (!t->uring)
		return t->tx_bufs + t->vhl;
	if (t->tx_nfree == 0)
		tx_reap(t);
	if (t->tx_nfree == 0) {
		if (t->tx_stalled)
			return NULL;
		t->st.tx_waits++;
		t->tx_unsubmitted = 0;   /* nif__tx_wait submits them */
		if (!nif__tx_wait(&t->tx, tx_reap_any, t)) {
			t->st.tx_reserve_timeouts++;
			t->tx_stalled = true;
			return NULL;
		}
	}
	return tx_buf(t, t->tx_free[--t->tx_nfree]) + t->vhl;
}

static void tx_put_back(struct nif_tap *t, uint8_t *buf)
{
	if (t->uring)
		t->tx_free[t->tx_nfree++] = (unsigned)((size_t)(buf - t->tx_bufs) / t->buf_size);
}

size_t nif_tap_tx_room(const struct nif_tap *t)
{
	return t->frame_max;
}

void nif_tap_tx_unused(struct nif_tap *t, uint8_t *slot)
{
	tx_put_back(t, slot - t->vhl);
}

/* Fill in the virtio-net header in front of slot from the offload word. The header is
 * built from the frame's headers alone, which lie in slot. */
static int tx_header(struct nif_tap *t, uint8_t *slot, size_t len, uint32_t off)
{
	uint8_t *buf = slot - t->vhl;

	if (!nif_dev_takes_offload(&t->dev, off) ||
	    (t->vhl && nif_vnet_build(buf, slot, len, off) < 0)) {
		t->st.tx_bad_offload++;
		return -EINVAL;
	}
	if (t->vhl && buf[1] != 0)
		t->st.tx_gso++;
	return 0;
}

static void tx_count_write(struct nif_tap *t, ssize_t n, size_t len)
{
	if (n < 0)
		t->st.tx_errors++;
	else if ((size_t)n != len + t->vhl)
		t->st.tx_short++;
	else {
		t->st.tx_frames++;
		t->st.tx_bytes += len;
	}
}

int nif_tap_tx_send_split(struct nif_tap *t, uint8_t *slot, size_t head,
			  const uint8_t *rest, size_t rest_len, uint32_t off)
{
	uint8_t *buf = slot - t->vhl;
	size_t len = head + rest_len;
	int rc = tx_header(t, slot, len, off);

	if (rc == 0) {
		struct iovec iov[2] = {
			{ .iov_base = buf, .iov_len = head + t->vhl },
			{ .iov_base = (void *)rest, .iov_len = rest_len },
		};
		if (t->uring && t->tx_unsubmitted) {
			io_uring_submit(&t->tx);
			t->tx_unsubmitted = 0;
		}
		tx_count_write(t, nif_sys.writev(t->fd, iov, 2), len);
	}
	tx_put_back(t, buf);
	return rc;
}

int nif_tap_tx_queue(struct nif_tap *t, uint8_t *slot, size_t len, uint32_t off)
{
	uint8_t *buf = slot - t->vhl;

	if (tx_header(t, slot, len, off) < 0) {
		tx_put_back(t, buf);  /* the buffer goes back unused */
		return -EINVAL;
	}
	if (!t->uring) {
		tx_count_write(t, nif_sys.write(t->fd, buf, len + t->vhl), len);
		return 0;
	}
	struct io_uring_sqe *sqe = io_uring_get_sqe(&t->tx);
	if (!sqe) {
		io_uring_submit(&t->tx);
		t->tx_unsubmitted = 0;
		sqe = io_uring_get_sqe(&t->tx);
	}
	io_uring_prep_write(sqe, t->fd, buf, (unsigned)(len + t->vhl), 0);
	io_uring_sqe_set_data64(sqe, (uint64_t)((size_t)(buf - t->tx_bufs) / t->buf_size));
	t->st.tx_frames++;
	t->st.tx_bytes += len;
	if (++t->tx_unsubmitted >= TX_SUBMIT_BATCH) {
		io_uring_submit(&t->tx);
		t->tx_unsubmitted = 0;
	}
	return 0;
}

/* Hand every queued frame to the kernel in one system call. */
int nif_tap_tx_flush(struct nif_tap *t)
{
	int rc = 0;

	if (!t->uring)
		return 0;
	if (t->tx_unsubmitted) {
		rc = io_uring_submit(&t->tx);
		t->tx_unsubmitted = 0;
	}
	tx_reap(t);
	return rc < 0 ? rc : 0;
}

void nif_tap_get_stats(const struct nif_tap *t, struct nif_dev_stats *out)
{
	nif__wait_stats_get(&t->st, &t->wst, out);
}

int nif_tap_fd(const struct nif_tap *t)
{
	return t->fd;
}

bool nif_tap_multiqueue(const struct nif_tap *t)
{
	return t->mq;
}

int nif_tap_queue_open(const struct nif_tap *t)
{
	bool mq = true;
	int fd;

	if (!t->mq)
		return -EOPNOTSUPP;
	fd = nif__tun_attach_queue(t->ifname, t->offload, &mq);
	if (fd >= 0 && !mq) {
		nif_sys.close(fd);
		return -EOPNOTSUPP;
	}
	return fd;
}

struct nif_dev *nif_tap_dev(struct nif_tap *t)
{
	return &t->dev;
}

static struct nif_tap *of(struct nif_dev *d)
{
	return (struct nif_tap *)d;  /* dev is the first member */
}

static int op_wait(struct nif_dev *d, int timeout_ms) { return nif_tap_wait(of(d), timeout_ms); }
static int op_rx(struct nif_dev *d, nif_rx_fn *fn, void *arg, unsigned budget)
{
	return nif_tap_rx(of(d), fn, arg, budget);
}
static void op_wake(struct nif_dev *d) { nif_tap_wake(of(d)); }
static uint8_t *op_tx_slot(struct nif_dev *d, size_t len)
{
	(void)len;  /* every buffer holds the largest frame */
	return nif_tap_tx_slot(of(d));
}
static int op_tx_queue(struct nif_dev *d, uint8_t *slot, size_t len, uint32_t off)
{
	return nif_tap_tx_queue(of(d), slot, len, off);
}
static int op_tx_flush(struct nif_dev *d) { return nif_tap_tx_flush(of(d)); }
static void op_get_stats(const struct nif_dev *d, struct nif_dev_stats *out)
{
	nif_tap_get_stats((const struct nif_tap *)d, out);
}
static void op_close(struct nif_dev *d) { nif_tap_close(of(d)); }
static bool op_ready(const struct nif_dev *d)
{
	return nif_tap_ready((const struct nif_tap *)d);
}

static const struct nif_dev_ops tap_ops = {
	.wait = op_wait, .rx = op_rx, .wake = op_wake, .tx_slot = op_tx_slot,
	.tx_queue = op_tx_queue, .tx_flush = op_tx_flush, .get_stats = op_get_stats,
	.close = op_close, .ready = op_ready,
};
