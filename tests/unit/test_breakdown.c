/* netif/breakdown.c: the TCP parse of a frame (from another process: untrusted) and the
 * per-process trace of segments, with ulsd's stamps returned through the tx slots. */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "netif/breakdown.h"

#define SEQ0 0xfffffff0u   /* near the wrap, on purpose */

/* A template: Ethernet + IPv4 (20) + TCP (20, no options) + payload bytes. */
struct seg {
	uint32_t seq;
	uint16_t sport, dport;
	uint8_t flags;
	size_t payload;
	uint8_t ihl_words, doff_words;
	uint16_t frag;               /* flags + fragment offset field */
	uint8_t proto;
	uint16_t ethertype;
	int tot_adjust;              /* added to the IPv4 total length */
};

static const struct seg TEMPL = {
	.seq = SEQ0, .sport = 40000, .dport = 7100, .flags = 0x18 /* PSH|ACK */, .payload = 100,
	.ihl_words = 5, .doff_words = 5, .frag = 0x4000 /* DF */, .proto = 6,
	.ethertype = 0x0800,
};

static size_t build(const struct seg *s, uint8_t *f)
{
	size_t ihl = s->ihl_words * 4u, doff = s->doff_words * 4u;
	size_t tot = ihl + doff + s->payload;
	uint8_t *ip = f + 14, *tcp = ip + ihl;

	memset(f, 0, 14 + tot);
	f[12] = (uint8_t)(s->ethertype >> 8);
	f[13] = (uint8_t)s->ethertype;
	ip[0] = (uint8_t)(0x40 | s->ihl_words);
	ip[2] = (uint8_t)((tot + (size_t)s->tot_adjust) >> 8);
	ip[3] = (uint8_t)(tot + (size_t)s->tot_adjust);
	ip[6] = (uint8_t)(s->frag >> 8);
	ip[7] = (uint8_t)s->frag;
	ip[9] = s->proto;
	memcpy(ip + 12, (uint8_t[]){ 198, 18, 0, 1 }, 4);
	memcpy(ip + 16, (uint8_t[]){ 198, 18, 0, 2 }, 4);
	tcp[0] = (uint8_t)(s->sport >> 8);
	tcp[1] = (uint8_t)s->sport;
	tcp[2] = (uint8_t)(s->dport >> 8);
	tcp[3] = (uint8_t)s->dport;
	tcp[4] = (uint8_t)(s->seq >> 24);
	tcp[5] = (uint8_t)(s->seq >> 16);
	tcp[6] = (uint8_t)(s->seq >> 8);
	tcp[7] = (uint8_t)s->seq;
	tcp[12] = (uint8_t)(s->doff_words << 4);
	tcp[13] = s->flags;
	return 14 + tot;
}

static uint8_t frame[2048];

/* ---- parse ---- */

static void data_segment_parses_tuple_seq_len_flags(void **state)
{
	struct nif_bd_frame f = { 0 };
	size_t len = build(&TEMPL, frame);
	(void)state;

	assert_true(nif_bd_parse(frame, len, &f));
	assert_int_equal(f.saddr, htonl(0xc6120001));
	assert_int_equal(f.daddr, htonl(0xc6120002));
	assert_int_equal(f.sport, 40000);
	assert_int_equal(f.dport, 7100);
	assert_int_equal(f.seq, SEQ0);
	assert_int_equal(f.len, 100);
	assert_int_equal(f.flags, 0x18);
}

static void options_and_ethernet_padding_do_not_count_as_payload(void **state)
{
	struct seg s = TEMPL;
	struct nif_bd_frame f = { 0 };
	(void)state;

	s.ihl_words = 6;             /* 4 bytes of IP options */
	s.doff_words = 8;            /* 12 bytes of TCP options (timestamps) */
	s.payload = 0;
	size_t len = build(&s, frame);
	assert_true(nif_bd_parse(frame, len + 6, &f));   /* padded to Ethernet's minimum */
	assert_int_equal(f.len, 0);
}

static void frame_shorter_than_ip_total_length_is_refused(void **state)
{
	struct seg s = TEMPL;
	struct nif_bd_frame f = { .seq = 7 };
	(void)state;

	s.tot_adjust = 1;
	size_t len = build(&s, frame);
	assert_false(nif_bd_parse(frame, len, &f));
	assert_int_equal(f.seq, 7);  /* untouched */
}

static void tcp_header_longer_than_segment_is_refused(void **state)
{
	struct seg s = TEMPL;
	struct nif_bd_frame f = { 0 };
	(void)state;

	s.payload = 8;
	s.doff_words = 15;           /* 60 bytes of header claimed ... */
	s.tot_adjust = -40;          /* ... in an IPv4 packet that holds 28 after its header */
	assert_false(nif_bd_parse(frame, build(&s, frame), &f));
	s.tot_adjust = 0;
	s.doff_words = 4;            /* below the minimum */
	assert_false(nif_bd_parse(frame, build(&s, frame), &f));
}

static void not_ipv4_tcp_or_a_fragment_is_refused(void **state)
{
	struct seg s = TEMPL;
	struct nif_bd_frame f = { 0 };
	(void)state;

	s.proto = 17;
	assert_false(nif_bd_parse(frame, build(&s, frame), &f));
	s = TEMPL;
	s.ethertype = 0x0806;
	assert_false(nif_bd_parse(frame, build(&s, frame), &f));
	s = TEMPL;
	s.frag = 0x2000;             /* more fragments */
	assert_false(nif_bd_parse(frame, build(&s, frame), &f));
	s = TEMPL;
	s.frag = 0x0001;             /* a later fragment */
	assert_false(nif_bd_parse(frame, build(&s, frame), &f));
	s = TEMPL;
	s.ihl_words = 4;
	assert_false(nif_bd_parse(frame, build(&s, frame), &f));
	assert_false(nif_bd_parse(frame, 33, &f));
	assert_false(nif_bd_parse(NULL, 100, &f));
}

/* ---- the trace ---- */

static int trace_setup(void **state)
{
	static struct nif_bd_trace t;

	assert_int_equal(nif_bd_trace_init(&t, 8, 4), 0);
	*state = &t;
	return 0;
}

static int trace_teardown(void **state)
{
	nif_bd_trace_free(*state);
	return 0;
}

static size_t seg_frame(uint32_t seq, size_t payload, uint8_t flags)
{
	struct seg s = TEMPL;

	s.seq = seq;
	s.payload = payload;
	s.flags = flags;
	return build(&s, frame);
}

static void sent_segment_completed_by_its_slot_stamps(void **state)
{
	struct nif_bd_trace *t = *state;
	struct nif_bd_frame out[4];
	uint64_t ulsd[NIF_BD_SLOT_STAMPS] = { 0 };

	nif_bd_trace_sent(t, frame, seg_frame(SEQ0, 100, 0x18), 5, 1000, 1100);
	ulsd[NIF_BD_SLOT_ULSD_TX] = 1500;
	ulsd[NIF_BD_SLOT_TAP_WRITE] = 1600;
	nif_bd_trace_slot_done(t, 5, ulsd);
	assert_int_equal(nif_bd_trace_read(t, out, 4, NULL), 1);
	assert_int_equal(out[0].dir, NIF_BD_SENT);
	assert_int_equal(out[0].seq, SEQ0);
	assert_int_equal(out[0].t[NIF_BD_STACK_OUT], 1000);
	assert_int_equal(out[0].t[NIF_BD_TX_RING], 1100);
	assert_int_equal(out[0].t[NIF_BD_ULSD_TX], 1500);
	assert_int_equal(out[0].t[NIF_BD_TAP_WRITE], 1600);
}

static void pure_ack_is_not_recorded_and_its_slot_completes_nothing(void **state)
{
	struct nif_bd_trace *t = *state;
	struct nif_bd_frame out[4];
	uint64_t ulsd[NIF_BD_SLOT_STAMPS] = { 9, 9 };

	nif_bd_trace_sent(t, frame, seg_frame(SEQ0, 100, 0x18), 1, 10, 11);
	nif_bd_trace_slot_done(t, 1, (uint64_t[NIF_BD_SLOT_STAMPS]){ 20, 21 });
	/* slot 1 again, 4 slots later (running index 5): a pure ACK this time */
	nif_bd_trace_sent(t, frame, seg_frame(SEQ0 + 100, 0, 0x10), 5, 30, 31);
	nif_bd_trace_slot_done(t, 5, ulsd);
	assert_int_equal(nif_bd_trace_read(t, out, 4, NULL), 1);
	assert_int_equal(out[0].t[NIF_BD_ULSD_TX], 20);   /* the ACK's stamps went nowhere */
	assert_int_equal(out[0].t[NIF_BD_TAP_WRITE], 21);
}

static void syn_and_fin_are_recorded_without_payload(void **state)
{
	struct nif_bd_trace *t = *state;
	struct nif_bd_frame out[4];

	nif_bd_trace_sent(t, frame, seg_frame(SEQ0, 0, 0x02), 0, 1, 2);
	nif_bd_trace_sent(t, frame, seg_frame(SEQ0, 0, 0x11), 1, 3, 4);
	assert_int_equal(nif_bd_trace_read(t, out, 4, NULL), 2);
	assert_int_equal(out[0].flags, 0x02);
	assert_int_equal(out[1].flags, 0x11);
}

static void received_segment_carries_ulsd_stamps_and_stack_input(void **state)
{
	struct nif_bd_trace *t = *state;
	struct nif_bd_frame out[2];
	uint64_t ulsd[NIF_BD_SLOT_STAMPS] = { 0 };

	ulsd[NIF_BD_SLOT_TAP_READ] = 100;
	ulsd[NIF_BD_SLOT_DEMUX] = 110;
	ulsd[NIF_BD_SLOT_RX_RING] = 120;
	nif_bd_trace_received(t, frame, seg_frame(7, 1448, 0x10), ulsd, 150);
	assert_int_equal(nif_bd_trace_read(t, out, 2, NULL), 1);
	assert_int_equal(out[0].dir, NIF_BD_RECEIVED);
	assert_int_equal(out[0].len, 1448);
	assert_int_equal(out[0].t[NIF_BD_TAP_READ], 100);
	assert_int_equal(out[0].t[NIF_BD_DEMUX], 110);
	assert_int_equal(out[0].t[NIF_BD_RX_RING], 120);
	assert_int_equal(out[0].t[NIF_BD_STACK_IN], 150);
}

static void full_trace_overwrites_oldest_and_counts_them_lost(void **state)
{
	struct nif_bd_trace *t = *state;   /* 8 records */
	struct nif_bd_frame out[16];
	uint64_t lost = 0;

	for (uint32_t i = 0; i < 11; i++)
		nif_bd_trace_sent(t, frame, seg_frame(i * 100, 100, 0x18), i, i, i);
	assert_int_equal(nif_bd_trace_read(t, out, 16, &lost), 8);
	assert_int_equal(lost, 3);
	assert_int_equal(out[0].seq, 300);    /* the three oldest are gone */
	assert_int_equal(out[7].seq, 1000);
	assert_int_equal(nif_bd_trace_read(t, out, 16, &lost), 0);
}

static void stamps_for_an_overwritten_record_are_dropped(void **state)
{
	struct nif_bd_trace *t = *state;   /* 8 records, 4 slots */
	struct nif_bd_frame out[16];

	nif_bd_trace_sent(t, frame, seg_frame(0, 100, 0x18), 0, 1, 1);
	/* eight more records (received ones: no slots) push record 0 out */
	for (int i = 0; i < 8; i++)
		nif_bd_trace_received(t, frame, seg_frame(5000, 10, 0x18),
				      (uint64_t[NIF_BD_SLOT_STAMPS]){ 0 }, 2);
	nif_bd_trace_slot_done(t, 0, (uint64_t[NIF_BD_SLOT_STAMPS]){ 77, 78 });
	assert_int_equal(nif_bd_trace_read(t, out, 16, NULL), 8);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(out[i].dir, NIF_BD_RECEIVED);
		assert_int_not_equal(out[i].t[0], 77);
	}
}

static void stamps_after_the_record_was_read_are_dropped(void **state)
{
	struct nif_bd_trace *t = *state;
	struct nif_bd_frame out[4];

	nif_bd_trace_sent(t, frame, seg_frame(0, 100, 0x18), 2, 1, 1);
	assert_int_equal(nif_bd_trace_read(t, out, 4, NULL), 1);
	nif_bd_trace_sent(t, frame, seg_frame(100, 0, 0x10), 3, 1, 1);  /* ACK: not recorded */
	nif_bd_trace_received(t, frame, seg_frame(9, 10, 0x18),
			      (uint64_t[NIF_BD_SLOT_STAMPS]){ 0 }, 5);
	nif_bd_trace_slot_done(t, 2, (uint64_t[NIF_BD_SLOT_STAMPS]){ 77, 78 });
	assert_int_equal(nif_bd_trace_read(t, out, 4, NULL), 1);
	assert_int_equal(out[0].dir, NIF_BD_RECEIVED);
	assert_int_equal(out[0].t[0], 0);   /* not the sent record's stamps */
}

static void sizes_round_up_to_powers_of_two(void **state)
{
	struct nif_bd_trace t;
	(void)state;

	assert_int_equal(nif_bd_trace_init(&t, 1000, 3000), 0);
	assert_int_equal(t.cap, 1024);
	assert_int_equal(t.nslots, 4096);
	nif_bd_trace_free(&t);
	assert_null(t.rec);
}

static void clock_is_monotonic_nanoseconds(void **state)
{
	(void)state;
	uint64_t a = nif_bd_now(), b = nif_bd_now();

	assert_true(a > 0 && b >= a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(data_segment_parses_tuple_seq_len_flags),
		cmocka_unit_test(options_and_ethernet_padding_do_not_count_as_payload),
		cmocka_unit_test(frame_shorter_than_ip_total_length_is_refused),
		cmocka_unit_test(tcp_header_longer_than_segment_is_refused),
		cmocka_unit_test(not_ipv4_tcp_or_a_fragment_is_refused),
		cmocka_unit_test_setup_teardown(sent_segment_completed_by_its_slot_stamps,
						trace_setup, trace_teardown),
		cmocka_unit_test_setup_teardown(pure_ack_is_not_recorded_and_its_slot_completes_nothing,
						trace_setup, trace_teardown),
		cmocka_unit_test_setup_teardown(syn_and_fin_are_recorded_without_payload,
						trace_setup, trace_teardown),
		cmocka_unit_test_setup_teardown(received_segment_carries_ulsd_stamps_and_stack_input,
						trace_setup, trace_teardown),
		cmocka_unit_test_setup_teardown(full_trace_overwrites_oldest_and_counts_them_lost,
						trace_setup, trace_teardown),
		cmocka_unit_test_setup_teardown(stamps_for_an_overwritten_record_are_dropped,
						trace_setup, trace_teardown),
		cmocka_unit_test_setup_teardown(stamps_after_the_record_was_read_are_dropped,
						trace_setup, trace_teardown),
		cmocka_unit_test(sizes_round_up_to_powers_of_two),
		cmocka_unit_test(clock_is_monotonic_nanoseconds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
