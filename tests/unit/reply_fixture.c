/* See reply_fixture.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "netif/wire/wire.h"
#include "server/internal.h"
#include "reply_fixture.h"

uint8_t sent[2048];
size_t sent_len;
unsigned nsent;
uint64_t now_ms = 1000000;

void assert_rst(const struct wire_tcp *t, uint8_t flags, uint32_t seq, uint32_t ack,
		uint16_t sport, uint16_t dport)
{
	assert_int_equal(t->flags, flags);
	assert_int_equal(t->seq, seq);
	assert_int_equal(t->ack, ack);
	assert_int_equal(t->sport, sport);
	assert_int_equal(t->dport, dport);
}

void srv__log(int level, const char *fmt, ...) { (void)level; (void)fmt; }
uint64_t srv__now_ms(void) { return now_ms; }
int srv__dp_neighbour(struct srv *s, uint32_t ip, uint8_t mac[WIRE_ETH_ALEN])
{
	(void)s; (void)ip; (void)mac;
	return -1;
}
int srv__dp_neighbour6(struct srv *s, const uint8_t ip[16], uint8_t mac[WIRE_ETH_ALEN])
{
	(void)s; (void)ip; (void)mac;
	return -1;
}
void srv__send_frame(struct srv *s, const uint8_t *frame, size_t len)
{
	(void)s;
	assert_true(len <= sizeof(sent));
	memcpy(sent, frame, len);
	sent_len = len;
	nsent++;
}
