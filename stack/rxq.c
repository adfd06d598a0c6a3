/* Receive queues: pbuf chains waiting for the application (see sock.h). */
#include "sock.h"

#include <errno.h>
#include <stdlib.h>

int stk__rxq_push(struct stk_rxq *q, struct pbuf *p, const ip_addr_t *addr, uint16_t port)
{
	if (q->count == q->cap) {
		unsigned ncap = q->cap ? q->cap * 2 : 16;
		struct stk_rxent *n = malloc(sizeof(*n) * ncap);
		if (!n)
			return -ENOMEM;
		for (unsigned i = 0; i < q->count; i++)
			n[i] = q->ent[(q->head + i) % q->cap];
		free(q->ent);
		q->ent = n;
		q->cap = ncap;
		q->head = 0;
	}
	struct stk_rxent *e = &q->ent[(q->head + q->count) % q->cap];
	e->p = p;
	if (addr)
		ip_addr_copy(e->addr, *addr);
	else
		ip_addr_set_zero_ip4(&e->addr);
	e->port = port;
	q->count++;
	q->bytes += p->tot_len;
	return 0;
}

struct stk_rxent *stk__rxq_head(struct stk_rxq *q)
{
	return q->count ? &q->ent[q->head] : NULL;
}

/* Drop the head entry, whatever of it was read. */
void stk__rxq_pop(struct stk_rxq *q)
{
	struct stk_rxent *e = &q->ent[q->head];

	q->bytes -= e->p->tot_len - q->off;
	pbuf_free(e->p);
	q->head = (q->head + 1) % q->cap;
	q->count--;
	q->off = 0;
}

/* Copy up to len bytes of the byte stream out; unless peek, free what was consumed.
 * Returns the number of bytes copied. */
size_t stk__rxq_read(struct stk_rxq *q, void *buf, size_t len, bool peek)
{
	size_t done = 0, off = q->off;
	unsigned idx = 0;

	while (done < len && idx < q->count) {
		struct stk_rxent *e = &q->ent[(q->head + idx) % q->cap];
		size_t avail = e->p->tot_len - off;
		size_t n = len - done < avail ? len - done : avail;

		pbuf_copy_partial(e->p, (uint8_t *)buf + done, (u16_t)n, (u16_t)off);
		done += n;
		if (peek) {
			idx++;
			off = 0;
			continue;
		}
		if (n == avail) {
			stk__rxq_pop(q);
		} else {
			q->off += n;
			q->bytes -= n;
		}
		off = q->off;
	}
	return done;
}

void stk__rxq_clear(struct stk_rxq *q)
{
	while (q->count)
		stk__rxq_pop(q);
	free(q->ent);
	q->ent = NULL;
	q->cap = 0;
	q->bytes = 0;
}
