/* stack/hoffstate.c: the check of a connection's state as another process hands it over
 * (after fork or across exec), before any field reaches a pcb. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "lwip/opt.h"
#include "lwip/tcpbase.h"
#include "hoffstate.h"

/* The connections a giver hands over, one per run of each test: an AF_INET socket's,
 * an AF_INET6 socket's IPv6 one, and a dual-stack AF_INET6 socket's IPv4 one (v4-mapped). */
enum kind { K_INET, K_INET6, K_MAPPED };
static const enum kind kinds[] = { K_INET, K_INET6, K_MAPPED };
static enum kind kind;

static void ends(struct stk_hoff_state *h)
{
	static const uint8_t l6[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, [15] = 1 };
	static const uint8_t r6[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, 0xaa, [15] = 2 };
	static const uint8_t l4[16] = { [10] = 0xff, 0xff, 198, 18, 0, 1 };
	static const uint8_t r4[16] = { [10] = 0xff, 0xff, 198, 18, 0, 2 };

	h->family = kind == K_INET6 ? AF_INET6 : AF_INET;
	h->sock_family = kind == K_INET ? AF_INET : AF_INET6;
	h->v6only = 0;
	memcpy(h->local_ip, kind == K_INET6 ? l6 : l4, 16);
	memcpy(h->remote_ip, kind == K_INET6 ? r6 : r4, 16);
}

static int set_kind(void **state)
{
	kind = *(const enum kind *)*state;
	return 0;
}

/* A state as a giver writes it: ESTABLISHED, rx unread octets and tx queued from SND.UNA,
 * of which sent have been sent, with the ends of this run's kind. Returns a buffer of
 * *size octets (caller frees). */
static uint8_t *given(uint32_t rx, uint32_t tx, uint32_t sent, uint32_t una, size_t *size)
{
	struct stk_hoff_state h = {
		.magic = STK_HOFF_MAGIC, .version = STK_HOFF_VERSION, .nonce = 0x9e3779b97f4a7c15u,
		.local_port = 5001, .remote_port = 40000, .state = ESTABLISHED, .mss = 1460,
		.snd_scale = 7, .rcv_scale = 7, .lastack = una, .snd_nxt = una + sent,
		.snd_lbb = una + tx, .rx_len = rx, .tx_len = tx,
	};
	ends(&h);
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
	REFUSED(x->version = 1, STK_HOFF_DROP_MAGIC);  /* version 1's IPv4-only layout */
	REFUSED(x->version = 2, STK_HOFF_DROP_MAGIC);  /* version 2's, without the window cap */
	REFUSED(x->version = 3, STK_HOFF_DROP_MAGIC);  /* version 3's, without the user timeout */
	REFUSED(x->version = 4, STK_HOFF_DROP_MAGIC);  /* version 4's, without SO_SNDBUF */
	REFUSED(x->version = 6, STK_HOFF_DROP_MAGIC);
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
	/* Families: unknown ones, and a connection its socket could not have. */
	REFUSED(x->family = 0, STK_HOFF_DROP_FAMILY);
	REFUSED(x->family = AF_UNIX, STK_HOFF_DROP_FAMILY);
	REFUSED(x->sock_family = 0, STK_HOFF_DROP_FAMILY);
	REFUSED(x->v6only = 2, STK_HOFF_DROP_FAMILY);
	if (kind == K_INET) {
		REFUSED(x->v6only = 1, STK_HOFF_DROP_FAMILY);  /* V6ONLY on an AF_INET socket */
	} else if (kind == K_INET6) {
		REFUSED(x->sock_family = AF_INET, STK_HOFF_DROP_FAMILY);  /* IPv6 on AF_INET */
	} else {
		REFUSED(x->v6only = 1, STK_HOFF_DROP_FAMILY);  /* IPv4 on an IPv6-only socket */
	}
	/* Addresses: the other family's form, unspecified, multicast. */
	if (kind == K_INET6) {
		REFUSED((x->local_ip[0] = 0, x->local_ip[1] = 0, x->local_ip[2] = 0,
			 x->local_ip[3] = 0, x->local_ip[6] = 0, x->local_ip[7] = 0,
			 x->local_ip[10] = 0xff, x->local_ip[11] = 0xff), STK_HOFF_DROP_ADDRESS);
		REFUSED(memset(x->remote_ip, 0, 16), STK_HOFF_DROP_ADDRESS);
		REFUSED(x->remote_ip[0] = 0xff, STK_HOFF_DROP_ADDRESS);
	} else {
		REFUSED(x->remote_ip[11] = 0, STK_HOFF_DROP_ADDRESS);  /* not v4-mapped */
		REFUSED(memset(x->local_ip + 12, 0, 4), STK_HOFF_DROP_ADDRESS);  /* 0.0.0.0 */
		REFUSED(x->remote_ip[12] = 224, STK_HOFF_DROP_ADDRESS);
		REFUSED(memset(x->remote_ip + 12, 0xff, 4), STK_HOFF_DROP_ADDRESS);
	}
	assert_string_equal(stk__hoff_reason_name(-STK_HOFF_DROP_FAMILY), "family");
	assert_string_equal(stk__hoff_reason_name(-STK_HOFF_DROP_ADDRESS), "address");
	free(b);
}

/* IPV6_V6ONLY on an AF_INET6 socket is a state its IPv6 connection may have. */
static void test_ipv6_only_socket_with_an_ipv6_connection_is_accepted(void **state)
{
	size_t n;
	struct stk_hoff_state h;

	(void)state;
	kind = K_INET6;
	uint8_t *b = given(1, 1, 1, 7, &n);
	hdr(b)->v6only = 1;
	assert_int_equal(stk__hoff_parse(b, n, &h), 0);
	assert_int_equal(h.v6only, 1);
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
#define EACH_KIND(t) \
	cmocka_unit_test_prestate_setup_teardown(t, set_kind, NULL, (void *)&kinds[K_INET]), \
	cmocka_unit_test_prestate_setup_teardown(t, set_kind, NULL, (void *)&kinds[K_INET6]), \
	cmocka_unit_test_prestate_setup_teardown(t, set_kind, NULL, (void *)&kinds[K_MAPPED])
	const struct CMUnitTest tests[] = {
		EACH_KIND(test_state_a_giver_writes_is_accepted_and_copied),
		EACH_KIND(test_state_is_read_at_any_alignment),
		EACH_KIND(test_send_queue_that_wraps_the_sequence_space_is_accepted),
		cmocka_unit_test(test_short_or_oversized_input_is_refused_before_it_is_read),
		EACH_KIND(test_each_broken_field_is_refused_with_its_reason),
		EACH_KIND(test_send_queue_longer_than_the_send_buffer_is_refused),
		cmocka_unit_test(test_ipv6_only_socket_with_an_ipv6_connection_is_accepted),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
