/* The fixture of ulsd's unit tests: see server_fixture.c. */
#ifndef ULS_TESTS_UNIT_SERVER_FIXTURE_H
#define ULS_TESTS_UNIT_SERVER_FIXTURE_H

#include <stdint.h>
#include <sys/types.h>

#include "server/internal.h"
#include "faketap.h"
#include "filter_frames.h"

#define sent faketap_sent
#define nsent faketap_nsent

extern uint64_t now_ms;       /* what srv__now_ms() says; tests move it */
extern struct srv srv;        /* the ulsd under test */

/* One round of the demux thread's loop over the frames given (at most 64). */
void demux(const struct frame *f, unsigned n);
int setup(void **state);
/* Frees every lease through the demux thread's own path (sync_leases). */
int teardown(void **state);
struct srv_lease *new_lease(uid_t uid);
/* A TCP connection of lease l from lport to the peer's port 80 (BIND, then CONNECT). */
int connected(struct srv_lease *l, uint16_t lport);
/* Who owns the connected rule lport <-> the peer's rport, as the filter says. */
flt_owner_t owner_of(uint16_t lport, uint16_t rport);
const uint8_t *tcp_of(const uint8_t *f);
uint32_t rd32(const uint8_t *p);
uint16_t rd16(const uint8_t *p);

#endif
