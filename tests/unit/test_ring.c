/* netif/ring.c: the shared-memory frame rings between ulsd and a process. Each side treats
 * the other as untrusted, so besides order and capacity the tests check that lengths and
 * indices written by a misbehaving peer are refused, never followed. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cmocka.h>

#include "netif/ring.h"

struct pair {
	struct nif_ring_layout l;
	int memfd, efd;
	void *a, *b;               /* two mappings: producer's and consumer's views */
	struct nif_ring prod, cons;
	size_t len;                /* the last peek's frame: its length, offload word */
	uint32_t off;
	uint64_t bad;              /* frames the consumer skipped, counted */
};

static int setup(void **state)
{
	static struct pair p;

	memset(&p, 0, sizeof(p));
	assert_int_equal(nif_ring_layout(1500, &p.l), 0);
	assert_int_equal(nif_ring_create(&p.l, &p.memfd), 0);
	assert_int_equal(nif_ring_map(p.memfd, &p.l, &p.a), 0);
	assert_int_equal(nif_ring_map(p.memfd, &p.l, &p.b), 0);
	p.efd = eventfd(0, EFD_NONBLOCK);
	nif_ring_attach(&p.prod, p.a, &p.l, 0, p.efd, true);
	nif_ring_attach(&p.cons, p.b, &p.l, 0, p.efd, false);
	*state = &p;
	return 0;
}

static int teardown(void **state)
{
	struct pair *p = *state;

	nif_ring_unmap(p->a, &p->l);
	nif_ring_unmap(p->b, &p->l);
	close(p->memfd);
	close(p->efd);
	return 0;
}

/* A producer that writes a slot header of its own making, one slot long. */
static void put_raw_len(struct nif_ring *r, uint32_t len)
{
	uint8_t *data = nif_ring_prod_slot(r, 64);

	((struct nif_ring_slot *)(void *)(data - offsetof(struct nif_ring_slot, data)))->len = len;
	r->local++;
}

static void put_frame(struct nif_ring *r, uint8_t tag, size_t len)
{
	uint8_t *slot = nif_ring_prod_slot(r, 64);

	assert_non_null(slot);
	memset(slot, tag, len);
	nif_ring_prod_commit(r, len, 0);
}

/* The consumer's next frame, with its length and offload word in p (setup zeroes them). */
static const uint8_t *peek(struct pair *p)
{
	return nif_ring_cons_peek(&p->cons, &p->len, &p->off, &p->bad);
}

static void layout_slots_hold_an_mtu_frame_and_are_a_power_of_two(void **state)
{
	struct nif_ring_layout l;

	(void)state;
	for (unsigned mtu = 68; mtu <= 65535; mtu = mtu * 2 + 1) {
		assert_int_equal(nif_ring_layout(mtu, &l), 0);
		assert_true(l.slot_size >= sizeof(struct nif_ring_slot) + mtu + 14);
		assert_int_equal(l.nslots & (l.nslots - 1), 0);
		assert_true(l.nslots >= 64);
	}
	assert_int_equal(nif_ring_layout(67, &l), -22);
	assert_int_equal(nif_ring_layout(65536, &l), -22);
}

static void frames_arrive_in_order_only_after_publish(void **state)
{
	struct pair *p = *state;

	put_frame(&p->prod, 1, 60);
	put_frame(&p->prod, 2, 1514);
	assert_null(peek(p));  /* not yet published */
	nif_ring_prod_publish(&p->prod);
	const uint8_t *f = peek(p);
	assert_non_null(f);
	assert_int_equal(p->len, 60);
	assert_int_equal(f[59], 1);
	nif_ring_cons_release(&p->cons);
	f = peek(p);
	assert_int_equal(p->len, 1514);
	assert_int_equal(f[0], 2);
	nif_ring_cons_release(&p->cons);
	assert_null(peek(p));
	assert_int_equal(p->bad, 0);
}

static void full_ring_refuses_a_slot_until_the_consumer_releases(void **state)
{
	struct pair *p = *state;

	for (uint32_t i = 0; i < p->l.nslots; i++)
		put_frame(&p->prod, (uint8_t)i, 64);
	assert_null(nif_ring_prod_slot(&p->prod, 64));
	nif_ring_prod_publish(&p->prod);
	assert_non_null(peek(p));
	nif_ring_cons_release(&p->cons);
	assert_non_null(nif_ring_prod_slot(&p->prod, 64));
}

static void out_of_range_length_skipped_and_counted(void **state)
{
	struct pair *p = *state;

	put_frame(&p->prod, 1, 60);
	put_raw_len(&p->prod, 100000);  /* a lying producer */
	put_raw_len(&p->prod, 3);       /* shorter than an Ethernet header */
	put_frame(&p->prod, 4, 70);
	nif_ring_prod_publish(&p->prod);
	assert_non_null(peek(p));
	assert_int_equal(p->len, 60);
	nif_ring_cons_release(&p->cons);
	const uint8_t *f = peek(p);
	assert_non_null(f);
	assert_int_equal(p->len, 70);
	assert_int_equal(p->bad, 2);
}

static void wild_producer_index_ignored(void **state)
{
	struct pair *p = *state;

	/* A producer claims far more frames than the ring holds. */
	atomic_store(&p->prod.hdr->prod, p->l.nslots * 3u);
	assert_null(peek(p));
}

static void consumer_with_pending_frames_does_not_sleep(void **state)
{
	struct pair *p = *state;

	assert_true(nif_ring_cons_prepare_sleep(&p->cons));
	nif_ring_cons_awake(&p->cons);
	put_frame(&p->prod, 1, 60);
	nif_ring_prod_publish(&p->prod);
	assert_false(nif_ring_cons_prepare_sleep(&p->cons));
}

static void publish_signals_only_a_sleeping_consumer(void **state)
{
	struct pair *p = *state;

	put_frame(&p->prod, 1, 60);
	assert_false(nif_ring_prod_publish(&p->prod));  /* consumer awake: no system call */
	assert_false(nif_ring_prod_publish(&p->prod));  /* nothing new: nothing to do */
	nif_ring_cons_prepare_sleep(&p->cons);           /* sees the frame: stays awake */
	assert_true(nif_ring_cons_prepare_sleep(&p->cons) == false);
	peek(p);
	nif_ring_cons_release(&p->cons);
	assert_true(nif_ring_cons_prepare_sleep(&p->cons));
	put_frame(&p->prod, 2, 60);
	assert_true(nif_ring_prod_publish(&p->prod));   /* consumer asleep: signal it */
}

static void transmit_ring_consumer_always_signalled(void **state)
{
	struct pair *p = *state;
	struct nif_ring tx;

	/* ulsd drains transmit rings only on a signal: ring 1 starts "asleep". */
	nif_ring_attach(&tx, p->a, &p->l, 1, p->efd, true);
	put_frame(&tx, 1, 60);
	assert_true(nif_ring_prod_publish(&tx));
}

static void mapping_with_another_layout_refused(void **state)
{
	struct pair *p = *state;
	struct nif_ring_layout other;
	void *base;

	assert_int_equal(nif_ring_layout(9000, &other), 0);
	assert_int_not_equal(nif_ring_map(p->memfd, &other, &base), 0);
}

/* A 64 KiB super-segment takes many slots and comes out whole, with its offload word;
 * frames that would run past the ring's end start again at slot 0 (after a pad). */
static void large_frames_span_slots_and_wrap_without_splitting(void **state)
{
	struct pair *p = *state;
	static uint8_t big[65549];

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 7);
	for (unsigned round = 0; round < 300; round++) {
		uint8_t *slot = nif_ring_prod_slot(&p->prod, sizeof(big));
		assert_non_null(slot);
		memcpy(slot, big, sizeof(big));
		nif_ring_prod_commit(&p->prod, sizeof(big), 0x11448u);
		nif_ring_prod_publish(&p->prod);
		const uint8_t *f = peek(p);
		assert_non_null(f);
		assert_int_equal(p->len, sizeof(big));
		assert_int_equal(p->off, 0x11448u);
		assert_memory_equal(f, big, sizeof(big));
		nif_ring_cons_release(&p->cons);
	}
	assert_int_equal(p->bad, 0);
	assert_null(peek(p));
	assert_null(nif_ring_prod_slot(&p->prod, 70000));  /* longer than any frame */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(layout_slots_hold_an_mtu_frame_and_are_a_power_of_two),
		cmocka_unit_test_setup_teardown(frames_arrive_in_order_only_after_publish, setup, teardown),
		cmocka_unit_test_setup_teardown(full_ring_refuses_a_slot_until_the_consumer_releases, setup, teardown),
		cmocka_unit_test_setup_teardown(out_of_range_length_skipped_and_counted, setup, teardown),
		cmocka_unit_test_setup_teardown(wild_producer_index_ignored, setup, teardown),
		cmocka_unit_test_setup_teardown(consumer_with_pending_frames_does_not_sleep, setup, teardown),
		cmocka_unit_test_setup_teardown(publish_signals_only_a_sleeping_consumer, setup, teardown),
		cmocka_unit_test_setup_teardown(transmit_ring_consumer_always_signalled, setup, teardown),
		cmocka_unit_test_setup_teardown(mapping_with_another_layout_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(large_frames_span_slots_and_wrap_without_splitting, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
