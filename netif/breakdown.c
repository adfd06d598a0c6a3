/* The per-process trace of a latency breakdown (see breakdown.h).
 *
 * Read first: RFC 791 §3.1 (IPv4 header), RFC 9293 §3.1 (TCP header).
 */
#include "netif/breakdown.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "netif/wire/wire.h"

uint64_t nif_bd_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool nif_bd_parse(const uint8_t *frame, size_t len, struct nif_bd_frame *f)
{
	struct wire_eth eth;
	struct wire_ipv4 ip;
	struct wire_tcp tcp;

	/* RFC 791: version 4, header of at least 5 words, total length within the frame
	 * (Ethernet may pad it, never shorten it). */
	if (wire_eth_view(&eth, frame, len) < 0 || eth.type != WIRE_ETHERTYPE_IPV4 ||
	    wire_ipv4_view(&ip, eth.payload, eth.payload_len) < 0)
		return false;
	/* A fragment's first bytes are not a TCP header we can trust to describe the segment. */
	if (ip.proto != WIRE_IPPROTO_TCP || wire_ipv4_is_fragment(&ip) ||
	    wire_tcp_view(&tcp, ip.data, ip.data_len) < 0)
		return false;
	f->saddr = ip.src;
	f->daddr = ip.dst;
	f->sport = tcp.sport;
	f->dport = tcp.dport;
	f->seq = tcp.seq;
	f->flags = tcp.flags;
	f->len = (uint32_t)tcp.payload_len;
	return true;
}

static uint64_t pow2_at_least(uint64_t v)
{
	uint64_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

int nif_bd_trace_init(struct nif_bd_trace *t, uint64_t cap, uint32_t nslots)
{
	memset(t, 0, sizeof(*t));
	t->cap = pow2_at_least(cap ? cap : 1);
	t->nslots = (uint32_t)pow2_at_least(nslots ? nslots : 1);
	/* calloc of this size maps zero pages: only records really written become resident. */
	t->rec = calloc(t->cap, sizeof(*t->rec));
	t->pending = calloc(t->nslots, sizeof(*t->pending));
	if (!t->rec || !t->pending) {
		nif_bd_trace_free(t);
		return -ENOMEM;
	}
	return 0;
}

void nif_bd_trace_free(struct nif_bd_trace *t)
{
	free(t->rec);
	free(t->pending);
	memset(t, 0, sizeof(*t));
}

/* Only segments that occupy sequence space can be matched between sender and receiver. */
static bool worth_recording(const struct nif_bd_frame *f)
{
	return f->len > 0 || (f->flags & (WIRE_TCP_SYN | WIRE_TCP_FIN));
}

/* The next record slot; the oldest unread record is overwritten when the trace is full. */
static struct nif_bd_frame *append(struct nif_bd_trace *t)
{
	if (t->head - t->tail == t->cap) {
		t->tail++;
		t->lost++;
	}
	return &t->rec[t->head++ & (t->cap - 1)];
}

void nif_bd_trace_sent(struct nif_bd_trace *t, const uint8_t *frame, size_t len,
		       uint32_t slot, uint64_t t_out, uint64_t t_ring)
{
	struct nif_bd_frame f = { .dir = NIF_BD_SENT };
	uint64_t *pend = &t->pending[slot & (t->nslots - 1)];

	*pend = 0;
	if (!nif_bd_parse(frame, len, &f) || !worth_recording(&f))
		return;
	f.t[NIF_BD_STACK_OUT] = t_out;
	f.t[NIF_BD_TX_RING] = t_ring;
	*pend = t->head + 1;
	*append(t) = f;
}

void nif_bd_trace_slot_done(struct nif_bd_trace *t, uint32_t slot, const uint64_t *slot_stamps)
{
	uint64_t *pend = &t->pending[slot & (t->nslots - 1)];
	uint64_t n = *pend;

	*pend = 0;
	/* n - 1 is the record's number; it is gone if it was read or overwritten since. */
	if (n == 0 || n - 1 < t->tail || n - 1 >= t->head)
		return;
	struct nif_bd_frame *f = &t->rec[(n - 1) & (t->cap - 1)];
	f->t[NIF_BD_ULSD_TX] = slot_stamps[NIF_BD_SLOT_ULSD_TX];
	f->t[NIF_BD_TAP_WRITE] = slot_stamps[NIF_BD_SLOT_TAP_WRITE];
}

void nif_bd_trace_received(struct nif_bd_trace *t, const uint8_t *frame, size_t len,
			   const uint64_t *slot_stamps, uint64_t t_in)
{
	struct nif_bd_frame f = { .dir = NIF_BD_RECEIVED };

	if (!nif_bd_parse(frame, len, &f) || !worth_recording(&f))
		return;
	f.t[NIF_BD_TAP_READ] = slot_stamps[NIF_BD_SLOT_TAP_READ];
	f.t[NIF_BD_DEMUX] = slot_stamps[NIF_BD_SLOT_DEMUX];
	f.t[NIF_BD_RX_RING] = slot_stamps[NIF_BD_SLOT_RX_RING];
	f.t[NIF_BD_STACK_IN] = t_in;
	*append(t) = f;
}

size_t nif_bd_trace_read(struct nif_bd_trace *t, struct nif_bd_frame *out, size_t n,
			 uint64_t *lost)
{
	size_t k = 0;

	while (k < n && t->tail < t->head)
		out[k++] = t->rec[t->tail++ & (t->cap - 1)];
	if (lost)
		*lost = t->lost;
	return k;
}
