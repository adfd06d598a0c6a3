/* tests/unit/faketap.h */
#include "faketap.h"

#include <string.h>

#include "netif/dev.h"
#include "netif/tap.h"
#include "netif/vnet.h"

struct nif_tap { int unused; };
static struct nif_tap the_tap;

struct nif_tap *faketap(void)
{
	return &the_tap;
}

struct faketap_frame faketap_sent[FAKETAP_MAX_SENT];
unsigned faketap_nsent;
void (*faketap_rx_done)(void);
void (*faketap_on_flush)(void);
void (*faketap_on_tx)(void);

#define MAX_INJECT 64   /* a round long enough for SYN shedding (netif/synshed.c) */
static const uint8_t *inject[MAX_INJECT];
static size_t inject_len[MAX_INJECT];
static unsigned ninject;
static uint8_t slot_buf[NIF_OFF_FRAME_MAX + 256];

void faketap_inject(const uint8_t *const *frames, const size_t *lens, unsigned n)
{
	ninject = n < MAX_INJECT ? n : MAX_INJECT;
	for (unsigned i = 0; i < ninject; i++) {
		inject[i] = frames[i];
		inject_len[i] = lens[i];
	}
}

uint8_t *nif_tap_tx_slot(struct nif_tap *t) { (void)t; return slot_buf; }
size_t nif_tap_tx_room(const struct nif_tap *t) { (void)t; return sizeof(slot_buf); }
void nif_tap_tx_unused(struct nif_tap *t, uint8_t *slot) { (void)t; (void)slot; }
int nif_tap_tx_flush(struct nif_tap *t)
{
	(void)t;
	if (faketap_on_flush)
		faketap_on_flush();
	return 0;
}
void nif_tap_wake(struct nif_tap *t) { (void)t; }
int nif_tap_wait(struct nif_tap *t, int timeout_ms) { (void)t; (void)timeout_ms; return 0; }
int nif_tap_watch(struct nif_tap *t, int fd, uint64_t tag) { (void)t; (void)fd; (void)tag; return 0; }
void nif_tap_unwatch(struct nif_tap *t, uint64_t tag) { (void)t; (void)tag; }

void nif_tap_set_event_fn(struct nif_tap *t, nif_event_fn *fn, void *arg)
{
	(void)t; (void)fn; (void)arg;
}

void nif_tap_get_stats(const struct nif_tap *t, struct nif_dev_stats *out)
{
	(void)t;
	memset(out, 0, sizeof(*out));
}

int nif_tap_tx_queue(struct nif_tap *t, uint8_t *slot, size_t len, uint32_t off)
{
	(void)t; (void)off;
	if (faketap_on_tx)
		faketap_on_tx();
	if (faketap_nsent < FAKETAP_MAX_SENT) {
		size_t n = len < FAKETAP_FRAME_MAX ? len : FAKETAP_FRAME_MAX;
		memcpy(faketap_sent[faketap_nsent].b, slot, n);
		faketap_sent[faketap_nsent++].len = len;
	}
	return 0;
}

int nif_tap_tx_send_split(struct nif_tap *t, uint8_t *slot, size_t head, const uint8_t *rest,
			  size_t rest_len, uint32_t off)
{
	(void)rest; (void)rest_len;
	return nif_tap_tx_queue(t, slot, head, off);
}

int nif_tap_rx(struct nif_tap *t, nif_rx_fn *fn, void *arg, unsigned budget)
{
	(void)t; (void)budget;
	unsigned n = ninject;
	ninject = 0;
	for (unsigned i = 0; i < n; i++)
		fn(arg, inject[i], inject_len[i], 0);
	if (faketap_rx_done)
		faketap_rx_done();
	return (int)n;
}
