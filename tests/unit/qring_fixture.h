/* The device of netif/qring.c on a socket pair, for test_qring and test_qring_wait: the
 * queue is a SOCK_SEQPACKET socket pair end registered as the rings' fixed file 0, as ulsd
 * registers a TAP queue: datagrams keep frame boundaries, and a write blocks while the
 * other end's queue is full, which lets a test hold a write in flight. */
#ifndef ULS_TESTS_UNIT_QRING_FIXTURE_H
#define ULS_TESTS_UNIT_QRING_FIXTURE_H

#include <linux/io_uring.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "netif/qring.h"
#include "netif/rxpool.h"

/* Which receive the device fixtures get: the multishot read (mshot_mode, where the kernel
 * has it: have_mshot, which main sets) or one read per slot. */
extern bool mshot_mode, have_mshot;
void qring_fixture_init(void);  /* sets have_mshot: main calls it first */

struct fx {
	struct nif_dev *dev;
	int peer, own;
	int lease[2];   /* wake-in-ring fixtures: [0] is the process's end, watched for hang-up */
};

struct taker {
	unsigned offered, lendable, kept, copied_bytes;
	struct nif_rxbuf *held[1024];
	bool keep;
	size_t len;
	uint8_t fill;
};

void choose_rx(struct nif_qring_prep *p);
int uring_register(int fd, unsigned op, const void *arg, unsigned n);
int open_fx(void **state, struct nif_qring_prep *p, const struct io_uring_restriction *res,
	    const unsigned nres[2], bool wake, bool with_lease);
/* cmocka fixtures: reads per slot, the wake-up in the ring (with or without a lease), and
 * the same with the multishot read (_m). */
int setup(void **state);
int open_wake_in_ring(void **state, bool with_lease);
int setup_wake_in_ring(void **state);
int setup_wake_in_ring_no_lease(void **state);
int teardown(void **state);
int setup_m(void **state);
int setup_wake_in_ring_m(void **state);
int setup_wake_in_ring_no_lease_m(void **state);
int teardown_m(void **state);

void peer_send(struct fx *f, size_t len, uint8_t fill);  /* behind a zero virtio-net header */
bool take(void *arg, struct nif_rxbuf *b);                /* rx_take for a struct taker */
void not_taken(void *arg, const uint8_t *frame, size_t len, uint32_t off);
void rx_one(struct fx *f, struct taker *t);              /* deliver the one frame sent */
double ms_since(const struct timespec *t0);

#endif
