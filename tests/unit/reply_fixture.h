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

struct wire_tcp;
/* A reset the node sent (RFC 9293 §3.10.7.1), read into t: its flags, sequence and
 * acknowledgment numbers and ports are these. */
void assert_rst(const struct wire_tcp *t, uint8_t flags, uint32_t seq, uint32_t ack,
		uint16_t sport, uint16_t dport);

#endif
