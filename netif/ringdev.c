/* A process's device on a node: frames from ulsd arrive in the rx ring, frames to the wire
 * go into the tx ring. ulsd is trusted for nothing: lengths and indices read from the shared
 * mapping are checked (ring.c). */
#include "netif/ringdev.h"
#include "netif/vnet.h"
#include "netif/sys.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TX_WAIT_NS 20000  /* pause while the tx ring is full */
/* Breakdown builds: TCP segments kept per process, 56 bytes each, resident only as used.
 * 3,000 round trips of 64 KiB at MTU 1500 are about 270,000 segments sent and received. */
#define BD_TRACE_RECORDS (1u << 19)

struct ringdev {
	struct nif_dev dev;
	struct nif_ring_layout layout;
	void *base;
	int memfd, rx_efd, tx_efd, hup_fd;
	bool lease_lost;      /* hup_fd hung up (it is then no longer watched) */
	struct nif_ring rx, tx;
	struct nif_dev_stats st;
	struct nif_wait_stats wst;  /* dev.h */
	uint64_t bad_slots;
#ifdef ULS_BREAKDOWN
	struct nif_bd_trace bd;
	uint64_t bd_out;          /* when lwIP handed over the frame being queued */
	uint32_t bd_harvested;    /* tx slots whose stamps have been taken back */
#endif
};

static struct ringdev *of(struct nif_dev *d)
{
	return (struct ringdev *)d;
}

#ifdef ULS_BREAKDOWN
/* Latency stamps (netif/breakdown.h). All under the core lock, like the rest of the
 * device's transmit side; rx runs in the stack thread, which holds the lock too. */

static int bd_open(struct ringdev *r)
{
	r->bd_harvested = r->tx.local;
	return nif_bd_trace_init(&r->bd, BD_TRACE_RECORDS, r->tx.nslots);
}

static void bd_close(struct ringdev *r)
{
	nif_bd_trace_free(&r->bd);
}

/* Take back the stamps ulsd wrote into the tx slots it has released since last time. Runs
 * before a slot is filled again, so no slot is reused with its stamps unread. */
static void bd_harvest(struct ringdev *r)
{
	uint32_t cons = nif_ring_prod_consumed(&r->tx);

	/* ulsd cannot have taken more than we queued: a wild index is not followed. */
	if (cons - r->bd_harvested > r->tx.local - r->bd_harvested)
		return;
	for (; r->bd_harvested != cons; r->bd_harvested++)
		nif_bd_trace_slot_done(&r->bd, r->bd_harvested,
				       nif_ring_stamps_at(&r->tx, r->bd_harvested));
}

static void bd_stack_out(struct ringdev *r)
{
	r->bd_out = nif_bd_now();
}

/* Before commit: the slot's stamps from its previous use are read, then cleared (ulsd
 * stamps only frames it sends), and the frame is recorded. */
static void bd_tx_queue(struct ringdev *r, uint8_t *slot, size_t len)
{
	bd_harvest(r);
	memset(nif_ring_stamps(slot), 0, NIF_BD_SLOT_STAMPS * sizeof(uint64_t));
	nif_bd_trace_sent(&r->bd, slot, len, r->tx.local, r->bd_out, nif_bd_now());
}

static void bd_rx(struct ringdev *r, const uint8_t *f, size_t len)
{
	nif_bd_trace_received(&r->bd, f, len, nif_ring_stamps(f), nif_bd_now());
}

static size_t rd_breakdown(struct nif_dev *d, struct nif_bd_frame *out, size_t n,
			   uint64_t *lost)
{
	struct ringdev *r = of(d);

	bd_harvest(r);
	return nif_bd_trace_read(&r->bd, out, n, lost);
}
#define RD_BREAKDOWN rd_breakdown
#else
static inline int bd_open(struct ringdev *r) { (void)r; return 0; }
static inline void bd_close(struct ringdev *r) { (void)r; }
static inline void bd_stack_out(struct ringdev *r) { (void)r; }
static inline void bd_tx_queue(struct ringdev *r, uint8_t *slot, size_t len)
{
	(void)r; (void)slot; (void)len;
}
static inline void bd_rx(struct ringdev *r, const uint8_t *f, size_t len)
{
	(void)r; (void)f; (void)len;
}
#define RD_BREAKDOWN NULL
#endif

static void drain_efd(int fd)
{
	uint64_t v;

	while (nif_sys.read(fd, &v, sizeof(v)) > 0)
		;
}

static int rd_wait_fd(struct nif_dev *d, struct pollfd *fds, unsigned n, int timeout_ms)
{
	struct ringdev *r = of(d);
	struct pollfd local[64], *pfd = n <= 62 ? local : malloc((n + 2) * sizeof(*pfd));

	for (unsigned i = 0; i < n; i++)
		fds[i].revents = 0;
	if (!pfd)
		return -ENOMEM;
	pfd[0] = (struct pollfd){ .fd = r->rx_efd, .events = POLLIN };
	/* poll(2) skips a negative fd */
	pfd[1] = (struct pollfd){ .fd = r->hup_fd, .events = POLLRDHUP };
	if (n)
		memcpy(pfd + 2, fds, n * sizeof(*pfd));
	if (!nif_ring_cons_prepare_sleep(&r->rx)) {
		if (pfd != local)
			free(pfd);
		return 0;  /* frames are waiting */
	}
	int rc = nif_sys.poll(pfd, n + 2, timeout_ms);
	int err = errno;
	nif_ring_cons_awake(&r->rx);
	for (unsigned i = 0; rc > 0 && i < n; i++)
		fds[i].revents = pfd[2 + i].revents;
	short rx_ev = pfd[0].revents, hup_ev = pfd[1].revents;
	if (pfd != local)
		free(pfd);
	errno = err;
	if (rc > 0 && (rx_ev & POLLIN)) {
		nif__wait_count(&r->wst.rx_wakeups, 1);
		drain_efd(r->rx_efd);
	}
	if (rc > 0 && r->hup_fd >= 0 && (hup_ev & (POLLRDHUP | POLLHUP | POLLERR))) {
		/* Report it once. A sender (rd_tx_slot, under the caller's lock, not ours)
		 * reads both without a lock: lease_lost first (release), hup_fd after it
		 * (acquire there), so a sender that sees the descriptor gone also sees why. */
		__atomic_store_n(&r->lease_lost, true, __ATOMIC_RELEASE);
		__atomic_store_n(&r->hup_fd, -1, __ATOMIC_RELEASE);
		return -ECONNRESET;
	}
	return rc < 0 && errno != EINTR ? -errno : 0;
}

static int rd_wait(struct nif_dev *d, int timeout_ms)
{
	return rd_wait_fd(d, NULL, 0, timeout_ms);
}

static bool rd_ready(const struct nif_dev *d)
{
	return nif_ring_cons_ready(&((const struct ringdev *)d)->rx);
}

static int rd_rx(struct nif_dev *d, nif_rx_fn *fn, void *arg, unsigned budget)
{
	struct ringdev *r = of(d);
	unsigned n = 0;
	size_t len;
	uint32_t off;
	const uint8_t *f;

	while (n < budget && (f = nif_ring_cons_peek(&r->rx, &len, &off, &r->bad_slots))) {
		r->st.rx_frames++;
		r->st.rx_bytes += len;
		if (nif_off_gso(off))
			r->st.rx_gso++;
		if (off & NIF_OFF_CSUM_PARTIAL)
			r->st.rx_csum_partial++;
		else if (off & NIF_OFF_CSUM_VALID)
			r->st.rx_csum_valid++;
		bd_rx(r, f, len);
		fn(arg, f, len, off);
		nif_ring_cons_release(&r->rx);
		n++;
	}
	r->st.rx_errors = r->bad_slots;
	return (int)n;
}

static void rd_wake(struct nif_dev *d)
{
	uint64_t one = 1;

	if (nif_sys.write(of(d)->rx_efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		return;
}

static int rd_flush(struct nif_dev *d)
{
	struct ringdev *r = of(d);

	if (nif_ring_prod_publish(&r->tx))
		nif_ring_signal(&r->tx);
	return 0;
}

static uint8_t *rd_tx_slot(struct nif_dev *d, size_t len)
{
	struct ringdev *r = of(d);
	uint8_t *slot;

	bd_stack_out(r);
	if (len > r->tx.data_max)
		return NULL;
	while (!(slot = nif_ring_prod_slot(&r->tx, len))) {
		/* ulsd drains rings as fast as the TAP takes frames; hand it what we have and
		 * give it the CPU (this machine may have fewer cores than busy threads). A ring
		 * nobody drains any more (ulsd died) must not hold the caller forever: the frame
		 * is dropped, and the stack thread reports the lost lease. */
		r->st.tx_waits++;
		rd_flush(d);
		/* The receiving thread may be marking the lease lost meanwhile (rd_wait_fd). */
		int hfd = __atomic_load_n(&r->hup_fd, __ATOMIC_ACQUIRE);
		struct pollfd hup = { .fd = hfd, .events = POLLRDHUP };
		if (hfd >= 0 ? nif_sys.poll(&hup, 1, 0) > 0 :
			       __atomic_load_n(&r->lease_lost, __ATOMIC_RELAXED))
			return NULL;
		struct timespec ts = { 0, TX_WAIT_NS };
		nanosleep(&ts, NULL);
	}
	return slot;
}

static int rd_tx_queue(struct nif_dev *d, uint8_t *slot, size_t len, uint32_t off)
{
	struct ringdev *r = of(d);

	/* ulsd checks the offload word against the frame; here only whether it may carry one. */
	if (!nif_dev_takes_offload(&r->dev, off)) {
		r->st.tx_bad_offload++;
		return -EINVAL;
	}
	bd_tx_queue(r, slot, len);
	nif_ring_prod_commit(&r->tx, len, off);
	r->st.tx_frames++;
	r->st.tx_bytes += len;
	if (nif_off_gso(off))
		r->st.tx_gso++;
	return 0;
}

static void rd_get_stats(const struct nif_dev *d, struct nif_dev_stats *out)
{
	const struct ringdev *r = (const struct ringdev *)d;

	nif__wait_stats_get(&r->st, &r->wst, out);
}

static void rd_close(struct nif_dev *d)
{
	struct ringdev *r = of(d);

	bd_close(r);
	nif_ring_unmap(r->base, &r->layout);
	nif_sys.close(r->memfd);
	nif_sys.close(r->rx_efd);
	nif_sys.close(r->tx_efd);
	free(r);
}

static const struct nif_dev_ops ringdev_ops = {
	.wait = rd_wait, .rx = rd_rx, .wake = rd_wake, .tx_slot = rd_tx_slot,
	.tx_queue = rd_tx_queue, .tx_flush = rd_flush, .get_stats = rd_get_stats,
	.close = rd_close, .breakdown = RD_BREAKDOWN, .ready = rd_ready,
	.wait_fd = rd_wait_fd,
};

int nif_ringdev_open(struct nif_dev **out, unsigned mtu, enum nif_offload offload, int memfd, int rx_efd,
		     int tx_efd, int hup_fd)
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
	nif_ring_populate(r->base, &r->layout);
	r->dev.ops = &ringdev_ops;
	r->dev.mtu = mtu;
	r->dev.offload = offload != NIF_OFFLOAD_NONE;
	r->dev.csum_only = offload == NIF_OFFLOAD_CSUM;
	r->memfd = memfd;
	r->rx_efd = rx_efd;
	r->tx_efd = tx_efd;
	r->hup_fd = hup_fd;
	nif_ring_attach(&r->rx, r->base, &r->layout, 0, rx_efd, false);
	nif_ring_attach(&r->tx, r->base, &r->layout, 1, tx_efd, true);
	rc = bd_open(r);
	if (rc < 0) {
		nif_ring_unmap(r->base, &r->layout);
		free(r);
		return rc;
	}
	*out = &r->dev;
	return 0;
}
