/* Receive buffers that a device lends to the stack (see rxpool.h). */
#include "netif/rxpool.h"

#include <pthread.h>
#include <stdlib.h>

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
};

struct nif_rxpool *nif_rxpool_new(size_t data_size, unsigned max)
{
	struct nif_rxpool *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	pthread_mutex_init(&p->lock, NULL);
	p->data_size = data_size;
	p->max = max;
	return p;
}

struct nif_rxbuf *nif_rxpool_get(struct nif_rxpool *p)
{
	struct nif_rxbuf *b;

	pthread_mutex_lock(&p->lock);
	b = p->free;
	if (b) {
		p->free = b->next_free;
	} else if (p->out < p->max) {
		/* Touched only as far as frames fill it: malloc's pages stay unfaulted. */
		uint8_t *m = aligned_alloc(64, (HEAD_SIZE + p->data_size + 63) & ~(size_t)63);
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
		pthread_mutex_unlock(&p->lock);
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
	pthread_mutex_unlock(&p->lock);
	for (; b; b = next) {
		next = b->next_free;
		free(b);
	}
	if (last)
		destroy(p);
}
