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
	q->tail_room = 0;   /* the last entry is not one made for collapsing */
	return 0;
}

/* Stream data of at most this many octets is copied into a buffer of the queue's own. */
#define RXQ_SMALL        512
/* The size of such a buffer (one pbuf: its length is 16 bits). */
#define RXQ_COLLAPSE_CAP 4096

/* Queue a stream segment p for the reader; 0, or -ENOMEM with p not taken. A small segment
 * behind others is copied into a new entry of RXQ_COLLAPSE_CAP octets and freed, and the segments after
 * it go to the end of that entry while they fit, as Linux's tcp_collapse() does: the
 * window counts octets, not buffers, and a peer that sent a 4 MiB window of one-octet
 * segments to an application that does not read held four million pbufs here (about 160
 * octets of memory each, 640 MB). Other segments are queued as they came: the memory of
 * the queue stays within about twice the octets it holds. */
int stk__rxq_push_stream(struct stk_rxq *q, struct pbuf *p)
{
	u16_t n = p->tot_len;

	if (q->count && q->tail_room >= n) {
		struct pbuf *t = q->ent[(q->head + q->count - 1) % q->cap].p;

		pbuf_copy_partial(p, (uint8_t *)t->payload + t->len, n, 0);
		t->len = (u16_t)(t->len + n);
		t->tot_len = t->len;
		q->tail_room -= n;
		q->bytes += n;
		pbuf_free(p);
		return 0;
	}
	/* Into an empty queue (the application keeps up: request and answer) as it came. */
	if (n > RXQ_SMALL || !q->count)
		return stk__rxq_push(q, p, NULL, 0);
	struct pbuf *c = pbuf_alloc(PBUF_RAW, RXQ_COLLAPSE_CAP, PBUF_RAM);
	if (!c)
		return stk__rxq_push(q, p, NULL, 0);
	pbuf_copy_partial(p, c->payload, n, 0);
	c->len = c->tot_len = n;
	if (stk__rxq_push(q, c, NULL, 0) < 0) {
		pbuf_free(c);
		return -ENOMEM;
	}
	q->tail_room = RXQ_COLLAPSE_CAP - n;
	pbuf_free(p);
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
	if (!q->count)
		q->tail_room = 0;
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
	q->tail_room = 0;
}
