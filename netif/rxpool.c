/* Receive buffers that a device lends to the stack (see rxpool.h). */
#include "netif/rxpool.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

/* The data area starts on a cache line; the consumer's room right before it. */
#define HEAD_SIZE (((sizeof(struct nif_rxbuf) + 63) & ~(size_t)63) + NIF_RXBUF_PRIV)

struct nif_rxpool {
	/* Buffers come back from whichever thread frees the stack's pbuf (under the stack's
	 * core lock today; the lock keeps that an assumption nobody has to check). */
	pthread_mutex_t lock;
	size_t data_size;
	unsigned max, out, made;
	bool closed;
	struct nif_rxbuf *free;
	/* nif_rxpool_reserve's mapping: area_n blocks of block bytes, the first carved ones
	 * in use (handed out in order, each faulted in only as far as it is written). */
	uint8_t *area;
	size_t block;
	unsigned area_n, carved;
};

static bool in_area(const struct nif_rxpool *p, const void *b)
{
	return p->area && (const uint8_t *)b >= p->area &&
	       (const uint8_t *)b < p->area + (size_t)p->area_n * p->block;
}

struct nif_rxpool *nif_rxpool_new(size_t data_size, unsigned max)
{
	struct nif_rxpool *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	pthread_mutex_init(&p->lock, NULL);
	p->data_size = data_size;
	p->max = max;
	p->block = (HEAD_SIZE + data_size + 63) & ~(size_t)63;
	return p;
}

int nif_rxpool_reserve(struct nif_rxpool *p, unsigned n)
{
	if (p->area || !n)
		return -EINVAL;
	void *m = mmap(NULL, (size_t)n * p->block, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return -errno;
	p->area = m;
	p->area_n = n;
	return 0;
}

struct nif_rxbuf *nif_rxpool_get(struct nif_rxpool *p)
{
	struct nif_rxbuf *b;

	pthread_mutex_lock(&p->lock);
	b = p->free;
	if (b) {
		p->free = b->next_free;
	} else if (p->out < p->max) {
		/* Touched only as far as frames fill it: the area's and malloc's pages stay
		 * unfaulted until then. */
		uint8_t *m = p->carved < p->area_n ? p->area + (size_t)p->carved++ * p->block
						   : aligned_alloc(64, p->block);
		if (m) {
			b = (struct nif_rxbuf *)m;
			b->priv = m + HEAD_SIZE - NIF_RXBUF_PRIV;
			b->data = m + HEAD_SIZE;
			b->pool = p;
			p->made++;
		}
	}
	if (b) {
		b->next_free = NULL;
		p->out++;
	}
	pthread_mutex_unlock(&p->lock);
	return b;
}

bool nif_rxpool_can_get(struct nif_rxpool *p)
{
	pthread_mutex_lock(&p->lock);
	bool ok = p->free || p->out < p->max;
	pthread_mutex_unlock(&p->lock);
	return ok;
}

unsigned nif_rxpool_out(struct nif_rxpool *p)
{
	pthread_mutex_lock(&p->lock);
	unsigned n = p->out;
	pthread_mutex_unlock(&p->lock);
	return n;
}

unsigned nif_rxpool_made(struct nif_rxpool *p)
{
	pthread_mutex_lock(&p->lock);
	unsigned n = p->made;
	pthread_mutex_unlock(&p->lock);
	return n;
}

static void destroy(struct nif_rxpool *p)
{
	if (p->area)
		munmap(p->area, (size_t)p->area_n * p->block);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

void nif_rxbuf_release(struct nif_rxbuf *b)
{
	struct nif_rxpool *p = b->pool;

	pthread_mutex_lock(&p->lock);
	p->out--;
	if (p->closed) {
		bool last = p->out == 0;
		/* Asked under the lock: once it is released, another thread's release of the
		 * last buffer may destroy p (and unmap the area) at any time. */
		bool heap = !in_area(p, b);
		pthread_mutex_unlock(&p->lock);
		if (heap)
			free(b);
		if (last)
			destroy(p);
		return;
	}
	b->next_free = p->free;
	p->free = b;
	pthread_mutex_unlock(&p->lock);
}

void nif_rxpool_close(struct nif_rxpool *p)
{
	struct nif_rxbuf *b, *next;

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->closed = true;
	b = p->free;
	p->free = NULL;
	bool last = p->out == 0;
	/* The free buffers go under the lock: with some still out, the release of the last
	 * one (another thread) destroys p and unmaps the area, where free buffers link on. */
	for (; b; b = next) {
		next = b->next_free;
		if (!in_area(p, b))
			free(b);
	}
	pthread_mutex_unlock(&p->lock);
	if (last)
		destroy(p);
}
