/* The latency breakdown's API (uls_breakdown.h) over the device's trace (netif/breakdown.h). */
#include "internal.h"

#include <assert.h>
#include <errno.h>

#include "netif/breakdown.h"
#include "uls_breakdown.h"

static_assert(ULS_BD_STAMPS == NIF_BD_STAMPS && (int)ULS_BD_SENT == (int)NIF_BD_SENT &&
	      (int)ULS_BD_RECEIVED == (int)NIF_BD_RECEIVED &&
	      (int)ULS_BD_TAP_WRITE == (int)NIF_BD_TAP_WRITE &&
	      (int)ULS_BD_STACK_IN == (int)NIF_BD_STACK_IN,
	      "uls_breakdown.h and netif/breakdown.h number the stamps alike");

#define READ_CHUNK 256

int uls_breakdown_enabled(void)
{
#ifdef ULS_BREAKDOWN
	return 1;
#else
	return 0;
#endif
}

uint64_t uls_breakdown_now(void)
{
	return nif_bd_now();
}

ssize_t uls_breakdown_read(struct uls_bd_frame *out, size_t n, uint64_t *lost)
{
	struct nif_bd_frame buf[READ_CHUNK];
	ssize_t ret = 0;

	if (!out && n)
		return -EINVAL;
	stk__lock();
	if (!stk__node.up) {
		ret = -ENOTCONN;
	} else if (!stk__node.dev->ops->breakdown) {
		ret = -ENOTSUP;
	} else {
		struct nif_dev *dev = stk__node.dev;
		size_t got = 0, k;
		uint64_t l = 0;
		do {
			size_t want = n - got < READ_CHUNK ? n - got : READ_CHUNK;
			k = dev->ops->breakdown(dev, buf, want, &l);
			for (size_t i = 0; i < k; i++) {
				struct uls_bd_frame *o = &out[got + i];
				for (unsigned j = 0; j < ULS_BD_STAMPS; j++)
					o->t[j] = buf[i].t[j];
				o->saddr = buf[i].saddr;
				o->daddr = buf[i].daddr;
				o->sport = buf[i].sport;
				o->dport = buf[i].dport;
				o->seq = buf[i].seq;
				o->len = buf[i].len;
				o->flags = buf[i].flags;
				o->dir = buf[i].dir;
			}
			got += k;
		} while (k == READ_CHUNK && got < n);
		if (lost)
			*lost = l;
		ret = (ssize_t)got;
	}
	stk__unlock();
	return ret;
}
