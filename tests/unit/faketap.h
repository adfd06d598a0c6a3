/* A TAP for ulsd's code without a device (tests/unit/test_server, tests/fuzz/fuzz_ulsd):
 * netif/tap.h's functions that server/ calls, recording what ulsd sends and handing the
 * demux thread's receive the frames a test injects. Link it instead of netif/tap.c. */
#ifndef ULS_TESTS_UNIT_FAKETAP_H
#define ULS_TESTS_UNIT_FAKETAP_H

#include <stddef.h>
#include <stdint.h>

#define FAKETAP_MAX_SENT 64
#define FAKETAP_FRAME_MAX 2048

struct faketap_frame {
	uint8_t b[FAKETAP_FRAME_MAX];
	size_t len;
};

struct nif_tap;
/* The one fake TAP, for struct srv's tap. */
struct nif_tap *faketap(void);

/* What ulsd sent (the first FAKETAP_MAX_SENT frames, each cut to FAKETAP_FRAME_MAX). */
extern struct faketap_frame faketap_sent[FAKETAP_MAX_SENT];
extern unsigned faketap_nsent;
/* Frames (at most 64) that nif_tap_rx() delivers once; then it calls faketap_rx_done, if set. */
void faketap_inject(const uint8_t *const *frames, const size_t *lens, unsigned n);
extern void (*faketap_rx_done)(void);
/* Called at each nif_tap_tx_flush(), and at each frame queued or sent (if set): a test
 * looks at which locks are held there. */
extern void (*faketap_on_flush)(void);
extern void (*faketap_on_tx)(void);

#endif
