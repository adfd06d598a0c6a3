/* stack/hoffstate.c: the check of a connection's state as another process hands it over
 * (after fork or across exec), before any field reaches a pcb. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lwip/opt.h"
#include "lwip/tcpbase.h"
#include "hoffstate.h"

/* A state as a giver writes it: ESTABLISHED, rx unread octets and tx queued from SND.UNA,
 * of which sent have been sent. Returns a buffer of *size octets (caller frees). */
static uint8_t *given(uint32_t rx, uint32_t tx, uint32_t sent, uint32_t una, size_t *size)
{
	struct stk_hoff_state h = {
		.magic = STK_HOFF_MAGIC, .version = STK_HOFF_VERSION, .nonce = 0x9e3779b97f4a7c15u,
		.local_port = 5001, .remote_port = 40000, .state = ESTABLISHED, .mss = 1460,
		.snd_scale = 7, .rcv_scale = 7, .lastack = una, .snd_nxt = una + sent,
		.snd_lbb = una + tx, .rx_len = rx, .tx_len = tx,
	};
	*size = sizeof(h) + rx + tx;
	uint8_t *b = calloc(1, *size);
	assert_non_null(b);
	memcpy(b, &h, sizeof(h));
	return b;
}

static struct stk_hoff_state *hdr(uint8_t *b) { return (struct stk_hoff_state *)(void *)b; }

static void test_state_a_giver_writes_is_accepted_and_copied(void **state)
{
	(void)state;
	size_t n;
	uint8_t *b = given(100, 2000, 1000, 5000, &n);
	struct stk_hoff_state h;
	assert_int_equal(stk__hoff_parse(b, n, &h), 0);
	assert_memory_equal(&h, b, sizeof(h));
	free(b);
}

static void test_state_is_read_at_any_alignment(void **state)
{
	(void)state;
	size_t n;
	uint8_t *b = given(3, 5, 5, 1, &n), *odd = malloc(n + 1);
	struct stk_hoff_state h;
	memcpy(odd + 1, b, n);
	assert_int_equal(stk__hoff_parse(odd + 1, n, &h), 0);
	assert_int_equal(h.tx_len, 5);
	free(odd);
	free(b);
}

static void test_send_queue_that_wraps_the_sequence_space_is_accepted(void **state)
{
	(void)state;
	size_t n;
	uint8_t *b = given(0, 4096, 2048, 0xfffff800u, &n);
	struct stk_hoff_state h;
	assert_int_equal(stk__hoff_parse(b, n, &h), 0);
	free(b);
}

static void test_short_or_oversized_input_is_refused_before_it_is_read(void **state)
{
	(void)state;
	struct stk_hoff_state h;
	memset(&h, 0xa5, sizeof(h));
	uint8_t zero[sizeof(h)] = { 0 };
	assert_int_equal(stk__hoff_parse(zero, sizeof(h) - 1, &h), -STK_HOFF_DROP_SHORT);
	assert_int_equal(((uint8_t *)&h)[0], 0xa5);
	assert_int_equal(stk__hoff_parse(zero, (size_t)STK_HOFF_MAX + 1, &h), -STK_HOFF_DROP_LONG);
}

static void test_each_broken_field_is_refused_with_its_reason(void **state)
{
	(void)state;
	struct stk_hoff_state h;
	size_t n;
	uint8_t *b = given(10, 20, 10, 1000, &n);

#define REFUSED(field_edit, reason) do { \
		uint8_t *c = malloc(n); \
		memcpy(c, b, n); \
		struct stk_hoff_state *x = hdr(c); \
		field_edit; \
		assert_int_equal(stk__hoff_parse(c, n, &h), -(reason)); \
		free(c); \
	} while (0)

	REFUSED(x->magic ^= 1, STK_HOFF_DROP_MAGIC);
	REFUSED(x->version = 2, STK_HOFF_DROP_MAGIC);
	REFUSED(x->nonce = 0, STK_HOFF_DROP_NONCE);
	REFUSED(x->state = SYN_SENT, STK_HOFF_DROP_STATE);
	REFUSED(x->state = TIME_WAIT, STK_HOFF_DROP_STATE);
	REFUSED(x->local_port = 0, STK_HOFF_DROP_TUPLE);
	REFUSED(x->remote_port = 0, STK_HOFF_DROP_TUPLE);
	REFUSED(x->mss = 0, STK_HOFF_DROP_TUPLE);
	REFUSED(x->rx_len += 1, STK_HOFF_DROP_LENGTH);
	REFUSED(x->tx_len -= 1, STK_HOFF_DROP_LENGTH);
	/* The lengths add up but the queue does not match SND.LBB - SND.UNA. */
	REFUSED((x->rx_len += 1, x->tx_len -= 1), STK_HOFF_DROP_SEND_QUEUE);
	REFUSED(x->snd_nxt = x->snd_lbb + 1, STK_HOFF_DROP_SEND_QUEUE);
	REFUSED(x->snd_nxt = x->lastack - 1, STK_HOFF_DROP_SEND_QUEUE);
	REFUSED(x->snd_scale = 15, STK_HOFF_DROP_SCALE);
	REFUSED(x->rcv_scale = 15, STK_HOFF_DROP_SCALE);
	assert_string_equal(stk__hoff_reason_name(-STK_HOFF_DROP_SCALE), "scale");
	free(b);
}

static void test_send_queue_longer_than_the_send_buffer_is_refused(void **state)
{
	(void)state;
	size_t n;
	uint8_t *b = given(0, TCP_SND_BUF + 1, 0, 1, &n);
	struct stk_hoff_state h;
	assert_int_equal(stk__hoff_parse(b, n, &h), -STK_HOFF_DROP_SEND_QUEUE);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_state_a_giver_writes_is_accepted_and_copied),
		cmocka_unit_test(test_state_is_read_at_any_alignment),
		cmocka_unit_test(test_send_queue_that_wraps_the_sequence_space_is_accepted),
		cmocka_unit_test(test_short_or_oversized_input_is_refused_before_it_is_read),
		cmocka_unit_test(test_each_broken_field_is_refused_with_its_reason),
		cmocka_unit_test(test_send_queue_longer_than_the_send_buffer_is_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
