/* A process's device on a node: frames from ulsd arrive in the rx ring, frames to the wire
 * go into the tx ring. ulsd is trusted for nothing: lengths and indices read from the shared
 * mapping are checked (ring.c). */
#include "netif/ringdev.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TX_WAIT_NS 20000  /* pause while the tx ring is full */

struct ringdev {
	struct nif_dev dev;
	struct nif_ring_layout layout;
	void *base;
	int memfd, rx_efd, tx_efd, hup_fd;
	bool lease_lost;      /* hup_fd hung up (it is then no longer watched) */
	struct nif_ring rx, tx;
	struct nif_dev_stats st;
	uint64_t bad_slots;
};

static struct ringdev *of(struct nif_dev *d)
{
	return (struct ringdev *)d;
}

static void drain_efd(int fd)
{
	uint64_t v;

	while (read(fd, &v, sizeof(v)) > 0)
		;
}

static int rd_wait(struct nif_dev *d, int timeout_ms)
{
	struct ringdev *r = of(d);
	struct pollfd pfd[2] = {
		{ .fd = r->rx_efd, .events = POLLIN },
		{ .fd = r->hup_fd, .events = POLLRDHUP },
	};

	if (!nif_ring_cons_prepare_sleep(&r->rx))
		return 0;  /* frames are waiting */
	int rc = poll(pfd, r->hup_fd >= 0 ? 2 : 1, timeout_ms);
	nif_ring_cons_awake(&r->rx);
	if (rc > 0 && (pfd[0].revents & POLLIN)) {
		r->st.rx_wakeups++;
		drain_efd(r->rx_efd);
	}
	if (rc > 0 && r->hup_fd >= 0 && (pfd[1].revents & (POLLRDHUP | POLLHUP | POLLERR))) {
		r->hup_fd = -1;  /* report it once */
		r->lease_lost = true;
		return -ECONNRESET;
	}
	return rc < 0 && errno != EINTR ? -errno : 0;
}

static int rd_rx(struct nif_dev *d, nif_rx_fn *fn, void *arg, unsigned budget)
{
	struct ringdev *r = of(d);
	unsigned n = 0;
	size_t len;
	const uint8_t *f;

	while (n < budget && (f = nif_ring_cons_peek(&r->rx, &len, &r->bad_slots))) {
		r->st.rx_frames++;
		r->st.rx_bytes += len;
		fn(arg, f, len);
		nif_ring_cons_release(&r->rx);
		n++;
	}
	r->st.rx_errors = r->bad_slots;
	return (int)n;
}

static void rd_wake(struct nif_dev *d)
{
	uint64_t one = 1;

	if (write(of(d)->rx_efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		return;
}

static int rd_flush(struct nif_dev *d)
{
	struct ringdev *r = of(d);

	if (nif_ring_prod_publish(&r->tx))
		nif_ring_signal(&r->tx);
	return 0;
}

static uint8_t *rd_tx_slot(struct nif_dev *d)
{
	struct ringdev *r = of(d);
	uint8_t *slot;

	while (!(slot = nif_ring_prod_slot(&r->tx))) {
		/* ulsd drains rings as fast as the TAP takes frames; hand it what we have and
		 * give it the CPU (this machine may have fewer cores than busy threads). A ring
		 * nobody drains any more (ulsd died) must not hold the caller forever: the frame
		 * is dropped, and the stack thread reports the lost lease. */
		r->st.tx_waits++;
		rd_flush(d);
		struct pollfd hup = { .fd = r->hup_fd, .events = POLLRDHUP };
		if (r->hup_fd >= 0 ? poll(&hup, 1, 0) > 0 : r->lease_lost)
			return NULL;
		struct timespec ts = { 0, TX_WAIT_NS };
		nanosleep(&ts, NULL);
	}
	return slot;
}

static void rd_tx_queue(struct nif_dev *d, uint8_t *slot, size_t len)
{
	struct ringdev *r = of(d);

	(void)slot;
	nif_ring_prod_commit(&r->tx, len);
	r->st.tx_frames++;
	r->st.tx_bytes += len;
}

static void rd_get_stats(const struct nif_dev *d, struct nif_dev_stats *out)
{
	*out = ((const struct ringdev *)d)->st;
}

static void rd_close(struct nif_dev *d)
{
	struct ringdev *r = of(d);

	nif_ring_unmap(r->base, &r->layout);
	close(r->memfd);
	close(r->rx_efd);
	close(r->tx_efd);
	free(r);
}

static const struct nif_dev_ops ringdev_ops = {
	.wait = rd_wait, .rx = rd_rx, .wake = rd_wake, .tx_slot = rd_tx_slot,
	.tx_queue = rd_tx_queue, .tx_flush = rd_flush, .get_stats = rd_get_stats,
	.close = rd_close,
};

int nif_ringdev_open(struct nif_dev **out, unsigned mtu, int memfd, int rx_efd, int tx_efd,
		     int hup_fd)
{
	struct ringdev *r = calloc(1, sizeof(*r));
	int rc;

	if (!r)
		return -ENOMEM;
	rc = nif_ring_layout(mtu, &r->layout);
	if (rc == 0)
		rc = nif_ring_map(memfd, &r->layout, &r->base);
	if (rc < 0) {
		free(r);
		return rc;
	}
	r->dev.ops = &ringdev_ops;
	r->dev.mtu = mtu;
	r->memfd = memfd;
	r->rx_efd = rx_efd;
	r->tx_efd = tx_efd;
	r->hup_fd = hup_fd;
	nif_ring_attach(&r->rx, r->base, &r->layout, 0, rx_efd, false);
	nif_ring_attach(&r->tx, r->base, &r->layout, 1, tx_efd, true);
	*out = &r->dev;
	return 0;
}
