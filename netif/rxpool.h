/* Receive buffers a device reads frames into and can lend to the stack, so that a frame
 * reaches lwIP where the kernel wrote it (docs/architecture.md, "Copies of a payload byte").
 *
 * A buffer is one block: this header, NIF_RXBUF_PRIV bytes for the consumer (the stack
 * puts its pbuf there, in front of the data, as lwIP's PBUF_RAM layout has it), then the
 * data area the device reads into. The pool keeps freed buffers on a LIFO list, so the
 * next read lands in memory that was touched last (warm in the cache, already faulted
 * in), and bounds how many exist: when all are out, nothing is lent (the device's rx says
 * so in b->lendable and the consumer copies), so a reader that holds on to its data can
 * make the stack copy, never make it block or grow without bound.
 */
#ifndef ULS_NETIF_RXPOOL_H
#define ULS_NETIF_RXPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The consumer's room in every buffer, aligned for any type. */
#define NIF_RXBUF_PRIV 128

struct nif_rxpool;

struct nif_rxbuf {
	/* Set by the device for the consumer's callback. */
	uint8_t *frame;        /* the Ethernet frame (after the virtio-net header, if any) */
	size_t len;
	uint32_t off;          /* the frame's offload word (netif/vnet.h) */
	bool lendable;         /* the consumer may keep the buffer */
	void *priv;            /* NIF_RXBUF_PRIV bytes, before data, in the same block */
	/* The device's. */
	uint8_t *data;         /* the data area: the pool's data_size bytes */
	struct nif_rxpool *pool;
	struct nif_rxbuf *next_free;
};

/* A pool of buffers with data_size bytes of data each, at most max of them in all
 * (in the device's reads and lent). */
struct nif_rxpool *nif_rxpool_new(size_t data_size, unsigned max);
/* Reserve the first n buffers as one anonymous mapping, carved in order as they are first
 * needed: no allocation on the receive path for them, and no page touched until a buffer
 * is (issue 12). 0 or -errno; the pool works without it. */
int nif_rxpool_reserve(struct nif_rxpool *p, unsigned n);
/* A buffer, or NULL when max are out (or memory ran out). */
struct nif_rxbuf *nif_rxpool_get(struct nif_rxpool *p);
/* Whether nif_rxpool_get would succeed without allocating beyond max. */
bool nif_rxpool_can_get(struct nif_rxpool *p);
/* Give a buffer back (to its pool; freed if the pool was closed). Any thread. */
void nif_rxbuf_release(struct nif_rxbuf *b);
/* The device is done: free what is not out; the buffers still lent are freed when they
 * come back, the pool with the last one. */
void nif_rxpool_close(struct nif_rxpool *p);
/* Buffers out of the pool now (in reads and lent). */
unsigned nif_rxpool_out(struct nif_rxpool *p);
/* Buffers the pool has allocated so far (each one's memory faulted in as far as frames
 * filled it): what the device's traffic needed at once at most, since buffers that come
 * back are handed out again before a new one is made. */
unsigned nif_rxpool_made(struct nif_rxpool *p);

#endif
