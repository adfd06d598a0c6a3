/* The per-process trace of a latency breakdown (see breakdown.h).
 *
 * Read first: RFC 791 §3.1 (IPv4 header), RFC 9293 §3.1 (TCP header).
 */
#include "netif/breakdown.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "netif/frame.h"

#define IPPROTO_TCP_NUM 6
#define TCP_MIN_HLEN    20
#define TCP_FIN         0x01u
#define TCP_SYN         0x02u

uint64_t nif_bd_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

bool nif_bd_parse(const uint8_t *frame, size_t len, struct nif_bd_frame *f)
{
	if (!frame || len < NIF_ETH_HLEN + NIF_IPV4_MIN_HLEN ||
	    be16(frame + 12) != NIF_ETHERTYPE_IPV4)
		return false;
	const uint8_t *ip = frame + NIF_ETH_HLEN;
	size_t room = len - NIF_ETH_HLEN;
	size_t ihl = (size_t)(ip[0] & 0x0f) * 4, tot = be16(ip + 2);
	/* RFC 791: version 4, header of at least 5 words, total length within the frame
	 * (Ethernet may pad it, never shorten it). */
	if ((ip[0] >> 4) != 4 || ihl < NIF_IPV4_MIN_HLEN || tot < ihl || tot > room)
		return false;
	/* A fragment's first bytes are not a TCP header we can trust to describe the segment. */
	if (ip[9] != IPPROTO_TCP_NUM || (be16(ip + 6) & 0x3fff) != 0)
		return false;
	const uint8_t *tcp = ip + ihl;
	size_t seglen = tot - ihl;
	if (seglen < TCP_MIN_HLEN)
		return false;
	size_t doff = (size_t)(tcp[12] >> 4) * 4;
	if (doff < TCP_MIN_HLEN || doff > seglen)
		return false;
	memcpy(&f->saddr, ip + 12, 4);
	memcpy(&f->daddr, ip + 16, 4);
	f->sport = be16(tcp);
	f->dport = be16(tcp + 2);
	f->seq = be32(tcp + 4);
	f->flags = tcp[13];
	f->len = (uint32_t)(seglen - doff);
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
	return f->len > 0 || (f->flags & (TCP_SYN | TCP_FIN));
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
