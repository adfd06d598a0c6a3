/* What the node's own answers (server/reply.c, reply6.c) need of the rest of ulsd, for
 * their unit tests: the clock, the log, no neighbour cache, and a srv__send_frame that
 * keeps the last frame sent (reply_fixture.c). */
#ifndef ULS_TESTS_UNIT_REPLY_FIXTURE_H
#define ULS_TESTS_UNIT_REPLY_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

extern uint8_t sent[2048];    /* the last frame the node sent */
extern size_t sent_len;
extern unsigned nsent;        /* frames sent so far */
extern uint64_t now_ms;       /* what srv__now_ms() says; tests move it */

#endif
