/* The device of netif/qring.c on a socket pair, and the cmocka fixtures around it
 * (tests/unit/qring_fixture.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "netif/qring.h"
#include "netif/rxpool.h"
#include "netif/vnet.h"
#include "tests/unit/qring_fixture.h"

/* --- the device on a socket pair -------------------------------------------------------- */

/* Which receive the device fixtures get: the multishot read (where the kernel has it) or
 * one read per slot, as with a ulsd that did not allow it. main runs the tests both ways. */
bool mshot_mode;
/* The kernel has IORING_OP_READ_MULTISHOT (6.7): else the "_m" fixtures are reads per slot
 * too and the multishot-only tests are skipped. */
bool have_mshot;

/* What the fixture does to a prepared ring pair's multishot choice. */
void choose_rx(struct nif_qring_prep *p)
{
	if (!mshot_mode)
		p->mshot = false;
	else
		assert_int_equal(p->mshot, have_mshot);
	mshot_mode = p->mshot;
}

int uring_register(int fd, unsigned op, const void *arg, unsigned n)
{
	return syscall(__NR_io_uring_register, fd, op, arg, n) < 0 ? -errno : 0;
}

/* The device on a socket pair, its prepared rings p as ulsd leaves them (server/bpf.c):
 * ring i restricted to the first nres[i] entries of res (res NULL: not restricted), the
 * socket its fixed file 0 and, with wake (CTL_HELLO_F_WAKE), the wake-up eventfd the
 * receive ring's fixed file 1; with_lease: the lease is a socket whose other end the test
 * holds. */
int open_fx(void **state, struct nif_qring_prep *p,
		   const struct io_uring_restriction *res, const unsigned nres[2], bool wake,
		   bool with_lease)
{
	struct fx *f = calloc(1, sizeof(*f));
	int sv[2];
	int efd = eventfd(0, EFD_CLOEXEC | (wake ? 0 : EFD_NONBLOCK));

	assert_true(efd >= 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	f->lease[0] = f->lease[1] = -1;
	if (with_lease)
		assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, f->lease), 0);
	int files[2] = { sv[0], efd };
	for (int i = 0; i < 2; i++) {
		if (res)
			assert_int_equal(uring_register(nif_qring_fd(p, i), IORING_REGISTER_RESTRICTIONS,
							res, nres[i]), 0);
		assert_int_equal(uring_register(nif_qring_fd(p, i), IORING_REGISTER_FILES, files,
						wake && i == 0 ? 2 : 1), 0);
		assert_int_equal(uring_register(nif_qring_fd(p, i), IORING_REGISTER_ENABLE_RINGS, NULL, 0), 0);
	}
	assert_int_equal(nif_qring_open(&f->dev, p, 1500, true, f->lease[0], efd, wake), 0);
	f->peer = sv[1];
	f->own = sv[0];
	*state = f;
	return 0;
}

int setup(void **state)
{
	struct nif_qring_prep p;

	assert_int_equal(nif_qring_prepare(&p), 0);
	choose_rx(&p);
	return open_fx(state, &p, NULL, NULL, false, false);
}

/* As ulsd does with CTL_HELLO_F_WAKE. */
int open_wake_in_ring(void **state, bool with_lease)
{
	struct nif_qring_prep p;

	assert_int_equal(nif_qring_prepare(&p), 0);
	choose_rx(&p);
	return open_fx(state, &p, NULL, NULL, true, with_lease);
}

int setup_wake_in_ring(void **state)
{
	return open_wake_in_ring(state, true);
}

/* No lease to look at: nothing but a frame, a wake-up or the timeout ends a wait. */
int setup_wake_in_ring_no_lease(void **state)
{
	return open_wake_in_ring(state, false);
}

int teardown(void **state)
{
	struct fx *f = *state;

	if (f->dev)
		f->dev->ops->close(f->dev);
	close(f->peer);
	close(f->own);
	for (int i = 0; i < 2; i++)
		if (f->lease[i] >= 0)
			close(f->lease[i]);
	free(f);
	return 0;
}

/* A frame from the peer, behind an all-zero virtio-net header (no offload). */
void peer_send(struct fx *f, size_t len, uint8_t fill)
{
	static uint8_t buf[NIF_VNET_HLEN + 65536];

	memset(buf, 0, NIF_VNET_HLEN);
	memset(buf + NIF_VNET_HLEN, fill, len);
	assert_int_equal(write(f->peer, buf, NIF_VNET_HLEN + len), (ssize_t)(NIF_VNET_HLEN + len));
}

bool take(void *arg, struct nif_rxbuf *b)
{
	struct taker *t = arg;

	t->offered++;
	assert_int_equal(b->len, t->len);
	assert_int_equal(b->frame[0], t->fill);
	assert_int_equal(b->frame[b->len - 1], t->fill);
	if (!b->lendable || !t->keep) {
		t->copied_bytes += (unsigned)b->len;
		return false;
	}
	t->lendable++;
	t->held[t->kept++] = b;
	return true;
}

void not_taken(void *arg, const uint8_t *frame, size_t len, uint32_t off)
{
	(void)arg; (void)frame; (void)len; (void)off;
	fail_msg("the device called nif_rx_fn although rx_take was set");
}

/* Deliver the one frame the peer sent. */
void rx_one(struct fx *f, struct taker *t)
{
	unsigned before = t->offered;

	for (int tries = 0; tries < 100 && t->offered == before; tries++) {
		assert_true(f->dev->ops->wait(f->dev, 100) >= 0);
		f->dev->ops->rx(f->dev, not_taken, t, 64);
	}
	assert_int_equal(t->offered, before + 1);
}

/* The same fixtures with the multishot read. */
int setup_m(void **state)
{
	mshot_mode = true;
	return setup(state);
}

int setup_wake_in_ring_m(void **state)
{
	mshot_mode = true;
	return setup_wake_in_ring(state);
}

int setup_wake_in_ring_no_lease_m(void **state)
{
	mshot_mode = true;
	return setup_wake_in_ring_no_lease(state);
}

int teardown_m(void **state)
{
	mshot_mode = false;
	return teardown(state);
}


double ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

void qring_fixture_init(void)
{
	struct nif_qring_prep p;

	if (nif_qring_prepare(&p) == 0) {
		have_mshot = p.mshot;
		nif_qring_discard(&p);
	}
}
