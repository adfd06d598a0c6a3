/* stack/rxq.c: the receive queue of pbuf chains under a socket.
 *
 * Every byte pushed is the stream pattern byte at its offset (see pattern_at()), so any
 * read can be checked for order. The fixture keeps its own reference on every pbuf it
 * pushes; teardown clears the queue and checks that the queue dropped exactly its own
 * reference on each (ref back to 1): nothing leaked, nothing freed twice.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/lwip_fixture.h"

#include "sock.h"

#include "lwip/pbuf.h"

#define MAX_HELD 128

struct fx {
	struct stk_rxq q;
	struct pbuf *held[MAX_HELD];
	unsigned nheld;
	size_t pushed;   /* stream offset of the next byte pushed */
};

static uint8_t pattern_at(size_t off)
{
	return (uint8_t)(off * 7u + 3u + (off >> 8));
}

static void assert_stream(const uint8_t *buf, size_t off, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != pattern_at(off + i))
			fail_msg("byte %zu: got %#x want %#x", off + i, buf[i], pattern_at(off + i));
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	stk__lock();
	stk__rxq_clear(&f->q);
	assert_null(f->q.ent);
	assert_int_equal(f->q.cap, 0);
	assert_int_equal(f->q.count, 0);
	assert_int_equal(f->q.bytes, 0);
	for (unsigned i = 0; i < f->nheld; i++) {
		/* Only the fixture's reference is left. */
		assert_int_equal(f->held[i]->ref, 1);
		pbuf_free(f->held[i]);
	}
	stk__unlock();
	free(f);
	return 0;
}

static struct pbuf *make_pbuf(struct fx *f, size_t len)
{
	struct pbuf *p = pbuf_alloc(PBUF_RAW, (u16_t)len, PBUF_RAM);

	assert_non_null(p);
	for (size_t i = 0; i < len; i++)
		((uint8_t *)p->payload)[i] = pattern_at(f->pushed + i);
	f->pushed += len;
	return p;
}

/* Push one pbuf chain built from the given segment lengths (0-terminated). */
static void push_chain(struct fx *f, const size_t *segs, const ip_addr_t *addr, uint16_t port)
{
	struct pbuf *p;

	stk__lock();
	p = make_pbuf(f, segs[0]);
	for (size_t i = 1; segs[i]; i++)
		pbuf_cat(p, make_pbuf(f, segs[i]));
	assert_true(f->nheld < MAX_HELD);
	pbuf_ref(p);
	f->held[f->nheld++] = p;
	assert_int_equal(stk__rxq_push(&f->q, p, addr, port), 0);
	stk__unlock();
}

static void push(struct fx *f, size_t len)
{
	push_chain(f, (const size_t[]){ len, 0 }, NULL, 0);
}

static size_t rd(struct fx *f, uint8_t *buf, size_t len, bool peek)
{
	stk__lock();
	size_t n = stk__rxq_read(&f->q, buf, len, peek);
	stk__unlock();
	return n;
}

static void empty_queue_read_returns_zero(void **state)
{
	struct fx *f = *state;
	uint8_t buf[8];

	assert_null(stk__rxq_head(&f->q));
	assert_int_equal(rd(f, buf, sizeof(buf), false), 0);
	assert_int_equal(rd(f, buf, sizeof(buf), true), 0);
}

static void three_pushes_bytes_and_count_exact(void **state)
{
	struct fx *f = *state;

	push(f, 10);
	push(f, 20);
	push(f, 30);
	assert_int_equal(f->q.count, 3);
	assert_int_equal(f->q.bytes, 60);
	assert_int_equal(f->q.off, 0);
	assert_ptr_equal(stk__rxq_head(&f->q)->p, f->held[0]);
}

static void partial_reads_across_entries_return_stream_in_order(void **state)
{
	struct fx *f = *state;
	uint8_t buf[128];

	push(f, 10);
	push(f, 20);
	push(f, 30);

	assert_int_equal(rd(f, buf, 15, false), 15);   /* all of entry 0, 5 of entry 1 */
	assert_stream(buf, 0, 15);
	assert_int_equal(f->q.count, 2);
	assert_int_equal(f->q.off, 5);
	assert_int_equal(f->q.bytes, 45);

	assert_int_equal(rd(f, buf, 25, false), 25);   /* rest of entry 1, 10 of entry 2 */
	assert_stream(buf, 15, 25);
	assert_int_equal(f->q.count, 1);
	assert_int_equal(f->q.off, 10);
	assert_int_equal(f->q.bytes, 20);

	assert_int_equal(rd(f, buf, sizeof(buf), false), 20);
	assert_stream(buf, 40, 20);
	assert_int_equal(f->q.count, 0);
	assert_int_equal(f->q.off, 0);
	assert_int_equal(f->q.bytes, 0);
}

static void read_ending_on_entry_boundary_pops_entry(void **state)
{
	struct fx *f = *state;
	uint8_t buf[64];

	push(f, 10);
	push(f, 20);
	assert_int_equal(rd(f, buf, 10, false), 10);
	assert_stream(buf, 0, 10);
	assert_int_equal(f->q.count, 1);
	assert_int_equal(f->q.off, 0);
	assert_int_equal(f->q.bytes, 20);
	assert_int_equal(f->held[0]->ref, 1);          /* the queue let go of entry 0 */
}

static void peek_after_partial_read_does_not_consume(void **state)
{
	struct fx *f = *state;
	uint8_t buf[128];

	push(f, 10);
	push(f, 20);
	push(f, 30);
	assert_int_equal(rd(f, buf, 4, false), 4);

	for (int round = 0; round < 2; round++) {
		memset(buf, 0, sizeof(buf));
		assert_int_equal(rd(f, buf, 30, true), 30);   /* spans all three entries */
		assert_stream(buf, 4, 30);
		assert_int_equal(f->q.count, 3);
		assert_int_equal(f->q.off, 4);
		assert_int_equal(f->q.bytes, 56);
	}
	assert_int_equal(rd(f, buf, sizeof(buf), true), 56);  /* peek of more than there is */
	assert_stream(buf, 4, 56);
	assert_int_equal(rd(f, buf, sizeof(buf), false), 56);
	assert_stream(buf, 4, 56);
}

static void zero_length_read_changes_nothing(void **state)
{
	struct fx *f = *state;
	uint8_t buf[1];

	push(f, 10);
	assert_int_equal(rd(f, buf, 0, false), 0);
	assert_int_equal(f->q.count, 1);
	assert_int_equal(f->q.bytes, 10);
	assert_int_equal(f->q.off, 0);
}

static void chained_pbuf_entry_read_crosses_segments(void **state)
{
	struct fx *f = *state;
	uint8_t buf[64];

	push_chain(f, (const size_t[]){ 7, 5, 9, 0 }, NULL, 0);
	push(f, 3);
	assert_int_equal(f->q.bytes, 24);
	assert_int_equal(rd(f, buf, 6, false), 6);
	assert_int_equal(rd(f, buf + 6, 10, false), 10);   /* crosses 7 and 12 */
	assert_int_equal(rd(f, buf + 16, 64 - 16, false), 8);
	assert_stream(buf, 0, 24);
}

static void more_than_16_entries_around_the_ring_keep_order(void **state)
{
	struct fx *f = *state;
	uint8_t buf[4096];
	size_t got = 0, n;

	/* Move head off zero first, so that growth has to unwrap the ring. */
	for (int i = 0; i < 10; i++)
		push(f, 11);
	assert_int_equal(rd(f, buf, 80, false), 80);
	assert_stream(buf, 0, 80);
	got = 80;
	for (int i = 0; i < 60; i++)
		push(f, 13 + (size_t)i);
	assert_true(f->q.cap >= f->q.count);
	assert_int_equal(f->q.count, 3 + 60);
	assert_int_equal(f->q.bytes, f->pushed - got);
	while ((n = rd(f, buf, 37, false)) > 0) {
		assert_stream(buf, got, n);
		got += n;
	}
	assert_int_equal(got, f->pushed);
	assert_int_equal(f->q.bytes, 0);
}

static void pop_after_partial_read_drops_rest_of_head(void **state)
{
	struct fx *f = *state;
	uint8_t buf[64];

	push(f, 10);
	push(f, 20);
	assert_int_equal(rd(f, buf, 4, false), 4);
	stk__lock();
	stk__rxq_pop(&f->q);
	stk__unlock();
	assert_int_equal(f->q.count, 1);
	assert_int_equal(f->q.off, 0);
	assert_int_equal(f->q.bytes, 20);
	assert_int_equal(f->held[0]->ref, 1);
	assert_int_equal(rd(f, buf, sizeof(buf), false), 20);
	assert_stream(buf, 10, 20);
}

static void datagram_push_head_keeps_sender(void **state)
{
	struct fx *f = *state;
	ip_addr_t a = IPADDR4_INIT(PP_HTONL(0xc6120002u));

	push_chain(f, (const size_t[]){ 5, 0 }, &a, 5353);
	push_chain(f, (const size_t[]){ 5, 0 }, NULL, 7);
	struct stk_rxent *e = stk__rxq_head(&f->q);
	assert_non_null(e);
	assert_true(ip_addr_cmp(&e->addr, &a));
	assert_int_equal(e->port, 5353);
	stk__lock();
	stk__rxq_pop(&f->q);
	stk__unlock();
	e = stk__rxq_head(&f->q);
	assert_true(IP_IS_V4(&e->addr) && ip_addr_isany(&e->addr));
	assert_int_equal(e->port, 7);
}

static void full_queue_clear_frees_everything(void **state)
{
	struct fx *f = *state;
	uint8_t buf[8];

	for (int i = 0; i < 40; i++)
		push_chain(f, (const size_t[]){ 100, 50, 0 }, NULL, 0);
	assert_int_equal(rd(f, buf, 3, false), 3);
	stk__lock();
	stk__rxq_clear(&f->q);
	stk__unlock();
	assert_int_equal(f->q.count, 0);
	assert_int_equal(f->q.bytes, 0);
	for (unsigned i = 0; i < f->nheld; i++)
		assert_int_equal(f->held[i]->ref, 1);
	/* A cleared queue is reusable. */
	push(f, 9);
	assert_int_equal(f->q.bytes, 9);
}

/* A stream segment of len pattern bytes through stk__rxq_push_stream (the queue may free it:
 * the fixture keeps no reference). */
static void push_stream(struct fx *f, size_t len)
{
	stk__lock();
	struct pbuf *p = make_pbuf(f, len);
	assert_int_equal(stk__rxq_push_stream(&f->q, p), 0);
	stk__unlock();
}

static void stream_one_octet_segments_behind_others_collapse_into_few_entries(void **state)
{
	struct fx *f = *state;
	uint8_t buf[512];
	size_t read = 0;

	/* 20,000 one-octet segments to a reader that falls behind: a peer's way to make a
	 * queue of 20,000 buffers out of 20,000 octets of window. */
	for (int i = 0; i < 20000; i++) {
		push_stream(f, 1);
		if (i % 1000 == 999) {
			assert_int_equal(rd(f, buf, 333, false), 333);
			assert_stream(buf, read, 333);
			read += 333;
		}
	}
	assert_int_equal(f->q.bytes, 20000 - read);
	assert_true(f->q.count <= 2 + 20000 / 4096);
	while (f->q.bytes) {
		size_t n = rd(f, buf, sizeof(buf), false);
		assert_true(n > 0);
		assert_stream(buf, read, n);
		read += n;
	}
	assert_int_equal(read, 20000);
	assert_int_equal(f->q.count, 0);
}

static void stream_segment_into_empty_queue_kept_as_it_came(void **state)
{
	struct fx *f = *state;

	/* push_chain holds a reference: the entry must be that very pbuf */
	stk__lock();
	struct pbuf *p = make_pbuf(f, 10);
	pbuf_ref(p);
	f->held[f->nheld++] = p;
	assert_int_equal(stk__rxq_push_stream(&f->q, p), 0);
	stk__unlock();
	assert_int_equal(f->q.count, 1);
	assert_ptr_equal(stk__rxq_head(&f->q)->p, p);
}

static void stream_large_segment_after_small_ones_fills_their_entry(void **state)
{
	struct fx *f = *state;
	uint8_t buf[2048];

	push_stream(f, 5);      /* as it came */
	push_stream(f, 7);      /* a new entry with room */
	push_stream(f, 1400);   /* fits in that room */
	assert_int_equal(f->q.count, 2);
	assert_int_equal(f->q.bytes, 1412);
	push_stream(f, 4000);   /* does not fit: as it came */
	assert_int_equal(f->q.count, 3);
	assert_int_equal(rd(f, buf, 1412, true), 1412);
	assert_stream(buf, 0, 1412);
	assert_int_equal(rd(f, buf, sizeof(buf), false), sizeof(buf));
	assert_stream(buf, 0, sizeof(buf));
	assert_int_equal(f->q.bytes, 1412 + 4000 - sizeof(buf));
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(empty_queue_read_returns_zero),
		T(three_pushes_bytes_and_count_exact),
		T(partial_reads_across_entries_return_stream_in_order),
		T(read_ending_on_entry_boundary_pops_entry),
		T(peek_after_partial_read_does_not_consume),
		T(zero_length_read_changes_nothing),
		T(chained_pbuf_entry_read_crosses_segments),
		T(more_than_16_entries_around_the_ring_keep_order),
		T(pop_after_partial_read_drops_rest_of_head),
		T(datagram_push_head_keeps_sender),
		T(full_queue_clear_frees_everything),
		T(stream_one_octet_segments_behind_others_collapse_into_few_entries),
		T(stream_segment_into_empty_queue_kept_as_it_came),
		T(stream_large_segment_after_small_ones_fills_their_entry),
	};
#undef T
	return cmocka_run_group_tests(tests, lwip_group_setup, NULL);
}
