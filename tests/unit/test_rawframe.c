/* apps/rawframe.c and apps/rawopts.c: frame format, verification and loss accounting of the
 * raw link mode (ulsraw), and its argument checks. */
#include <endian.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "apps/pattern.h"
#include "apps/rawframe.h"
#include "apps/rawopts.h"

#define MTU      1500
#define FRAME    (MTU + WIRE_ETH_HLEN)

static uint8_t frame[FRAME];

static int setup(void **state)
{
	struct raw_rx *rx = calloc(1, sizeof(*rx));

	if (!rx)
		return -1;
	memcpy(rx->mac, bench__raw_mac_receiver, WIRE_ETH_ALEN);
	*state = rx;
	return 0;
}

static int teardown(void **state)
{
	free(*state);
	return 0;
}

/* A data frame from the default sender to the default receiver. */
static void data(uint32_t stream, uint64_t seq)
{
	bench__raw_build_data(frame, FRAME, bench__raw_mac_receiver, bench__raw_mac_sender, stream, seq);
}

static void data_frame_received_counts_mtu_bytes(void **state)
{
	struct raw_rx *rx = *state;

	data(0, 0);
	bench__raw_rx_frame(rx, frame, FRAME);
	data(0, 1);
	bench__raw_rx_frame(rx, frame, FRAME);
	assert_int_equal(rx->frames, 2);
	assert_int_equal(rx->bytes, 2 * MTU);  /* Ethernet header not counted */
	assert_int_equal(rx->s[0].bytes, 2 * MTU);
	assert_int_equal(rx->corrupt, 0);
	assert_int_equal(bench__raw_stream_lost(&rx->s[0]), 0);
	assert_int_equal(rx->nstreams, 1);
}

static void payload_byte_flipped_counted_corrupt(void **state)
{
	struct raw_rx *rx = *state;

	data(3, 7);
	frame[FRAME - 1] ^= 0x40;
	bench__raw_rx_frame(rx, frame, FRAME);
	assert_int_equal(rx->corrupt, 1);
	assert_int_equal(rx->frames, 0);
}

static void sequence_rewritten_counted_corrupt(void **state)
{
	struct raw_rx *rx = *state;

	data(0, 5);
	frame[WIRE_ETH_HLEN + 15] = 6;  /* big-endian sequence 5 -> 6: the payload is 5's */
	bench__raw_rx_frame(rx, frame, FRAME);
	assert_int_equal(rx->corrupt, 1);
}

static void stream_id_rewritten_counted_corrupt(void **state)
{
	struct raw_rx *rx = *state;

	data(1, 5);
	frame[WIRE_ETH_HLEN + 7] = 2;   /* big-endian stream id 1 -> 2: the pattern's seed */
	bench__raw_rx_frame(rx, frame, FRAME);
	assert_int_equal(rx->corrupt, 1);
}

static void stream_id_beyond_max_counted_corrupt(void **state)
{
	struct raw_rx *rx = *state;

	data(RAW_STREAMS_MAX, 0);
	bench__raw_rx_frame(rx, frame, FRAME);
	assert_int_equal(rx->corrupt, 1);
}

static void shorter_frame_in_stream_counted_corrupt(void **state)
{
	struct raw_rx *rx = *state;

	data(0, 0);
	bench__raw_rx_frame(rx, frame, FRAME);
	bench__raw_build_data(frame, FRAME - 100, bench__raw_mac_receiver, bench__raw_mac_sender, 0, 1);
	bench__raw_rx_frame(rx, frame, FRAME - 100);
	assert_int_equal(rx->corrupt, 1);
	assert_int_equal(rx->frames, 1);
}

static void unknown_magic_to_us_counted_corrupt(void **state)
{
	struct raw_rx *rx = *state;

	data(0, 0);
	memcpy(frame + WIRE_ETH_HLEN, "XXXX", 4);
	bench__raw_rx_frame(rx, frame, FRAME);
	assert_int_equal(rx->corrupt, 1);
}

static void header_only_frame_counted_corrupt(void **state)
{
	struct raw_rx *rx = *state;

	data(0, 0);
	bench__raw_rx_frame(rx, frame, RAW_DATA_OFF);
	assert_int_equal(rx->corrupt, 1);
}

static void frame_for_other_mac_ignored(void **state)
{
	struct raw_rx *rx = *state;

	bench__raw_build_data(frame, FRAME, bench__raw_mac_sender, bench__raw_mac_receiver, 0, 0);
	bench__raw_rx_frame(rx, frame, FRAME);
	assert_int_equal(rx->ignored, 1);
	assert_int_equal(rx->corrupt, 0);
	assert_int_equal(rx->frames, 0);
}

static void other_ethertype_ignored(void **state)
{
	struct raw_rx *rx = *state;

	data(0, 0);
	frame[12] = 0x08;
	frame[13] = 0x00;
	bench__raw_rx_frame(rx, frame, FRAME);
	bench__raw_rx_frame(rx, frame, 5);   /* runt */
	assert_int_equal(rx->ignored, 2);
	assert_int_equal(rx->corrupt, 0);
}

static void hello_broadcast_ignored(void **state)
{
	struct raw_rx *rx = *state;
	size_t len = bench__raw_build_ctl(frame, bench__raw_mac_broadcast, bench__raw_mac_sender, RAW_MAGIC_HELLO, 0, 0);

	assert_int_equal(len, RAW_CTL_FRAME_LEN);
	bench__raw_rx_frame(rx, frame, len);
	assert_int_equal(rx->ignored, 1);
	assert_int_equal(rx->corrupt, 0);
}

static void sequence_gap_counted_lost(void **state)
{
	struct raw_rx *rx = *state;

	for (uint64_t seq = 0; seq < 10; seq++) {
		if (seq == 3 || seq == 4 || seq == 8)
			continue;   /* dropped by the kernel */
		data(2, seq);
		bench__raw_rx_frame(rx, frame, FRAME);
	}
	assert_int_equal(rx->corrupt, 0);
	assert_int_equal(rx->frames, 7);
	assert_int_equal(bench__raw_stream_lost(&rx->s[2]), 3);
	assert_int_equal(rx->nstreams, 3);
	assert_int_equal(bench__raw_stream_lost(&rx->s[0]), 0);
}

static void late_frame_fills_its_gap(void **state)
{
	struct raw_rx *rx = *state;
	const uint64_t order[] = { 0, 1, 3, 2, 4 };

	for (size_t i = 0; i < 5; i++) {
		data(0, order[i]);
		bench__raw_rx_frame(rx, frame, FRAME);
	}
	assert_int_equal(rx->frames, 5);
	assert_int_equal(rx->s[0].late, 1);
	assert_int_equal(bench__raw_stream_lost(&rx->s[0]), 0);
}

static void end_frame_adds_tail_losses(void **state)
{
	struct raw_rx *rx = *state;

	/* 3 streams, 10 frames sent round-robin: 4, 3, 3. Stream 0 got 0..2, stream 1 got
	 * 0..2, stream 2 got only 0. */
	for (uint64_t seq = 0; seq < 3; seq++) {
		data(0, seq);
		bench__raw_rx_frame(rx, frame, FRAME);
		data(1, seq);
		bench__raw_rx_frame(rx, frame, FRAME);
	}
	data(2, 0);
	bench__raw_rx_frame(rx, frame, FRAME);
	bench__raw_rx_frame(rx, frame, bench__raw_build_ctl(frame, bench__raw_mac_receiver, bench__raw_mac_sender, RAW_MAGIC_END, 3, 10));
	assert_true(rx->end_seen);
	assert_int_equal(rx->end_frames, 1);
	assert_int_equal(bench__raw_stream_lost(&rx->s[0]), 1);
	assert_int_equal(bench__raw_stream_lost(&rx->s[1]), 0);
	assert_int_equal(bench__raw_stream_lost(&rx->s[2]), 2);
	/* the repeats are counted and change nothing else */
	bench__raw_rx_frame(rx, frame, bench__raw_build_ctl(frame, bench__raw_mac_receiver, bench__raw_mac_sender, RAW_MAGIC_END, 3, 10));
	assert_int_equal(bench__raw_stream_lost(&rx->s[2]), 2);
	assert_int_equal(rx->end_frames, 2);
	assert_int_equal(rx->corrupt, 0);
}

static void end_frame_reports_streams_that_got_nothing(void **state)
{
	struct raw_rx *rx = *state;

	bench__raw_rx_frame(rx, frame, bench__raw_build_ctl(frame, bench__raw_mac_receiver, bench__raw_mac_sender, RAW_MAGIC_END, 4, 8));
	assert_int_equal(rx->nstreams, 4);
	assert_int_equal(bench__raw_stream_lost(&rx->s[3]), 2);
}

static void end_frame_with_zero_streams_counted_corrupt(void **state)
{
	struct raw_rx *rx = *state;

	bench__raw_rx_frame(rx, frame, bench__raw_build_ctl(frame, bench__raw_mac_receiver, bench__raw_mac_sender, RAW_MAGIC_END, 0, 8));
	assert_false(rx->end_seen);
	assert_int_equal(rx->end_frames, 0);
	assert_int_equal(rx->corrupt, 1);
}

static void round_robin_total_divides_fairly(void **state)
{
	(void)state;
	assert_int_equal(bench__raw_sent_to_stream(10, 3, 0), 4);
	assert_int_equal(bench__raw_sent_to_stream(10, 3, 1), 3);
	assert_int_equal(bench__raw_sent_to_stream(10, 3, 2), 3);
	assert_int_equal(bench__raw_sent_to_stream(0, 1, 0), 0);
	uint64_t sum = 0;
	for (unsigned i = 0; i < RAW_STREAMS_MAX; i++)
		sum += bench__raw_sent_to_stream(123456789, RAW_STREAMS_MAX, i);
	assert_int_equal(sum, 123456789);
}

static void minimum_mtu_frame_verifies(void **state)
{
	struct raw_rx *rx = *state;
	size_t len = NIF_MTU_MIN + WIRE_ETH_HLEN;

	bench__raw_build_data(frame, len, bench__raw_mac_receiver, bench__raw_mac_sender, 9, 1000000);
	bench__raw_rx_frame(rx, frame, len);
	assert_int_equal(rx->frames, 1);
	assert_int_equal(rx->bytes, NIF_MTU_MIN);
	assert_int_equal(rx->corrupt, 0);
}

/* bench__raw_parse_args with the words of line; returns 0, 2 or -1 (help). */
static int run(const char *line)
{
	char buf[512], *argv[32];
	int argc = 0;

	snprintf(buf, sizeof(buf), "%s", line);
	for (char *t = strtok(buf, " "); t && argc < 31; t = strtok(NULL, " "))
		argv[argc++] = t;
	argv[argc] = NULL;
	struct raw_opts o;

	return bench__raw_parse_args(argc, argv, &o);
}

static void bad_arguments_exit_2(void **state)
{
	static const char *const lines[] = {
		"ulsraw",
		"ulsraw bogus --tap t --seconds 1",
		"ulsraw recv --seconds 1",
		"ulsraw recv --tap t",
		"ulsraw recv --tap t --seconds 0.09",
		"ulsraw recv --tap t --seconds 600.5",
		"ulsraw recv --tap t --seconds inf",
		"ulsraw recv --tap t --seconds 1x",
		"ulsraw recv --tap t --seconds 1 --mtu 67",
		"ulsraw recv --tap t --seconds 1 --mtu 65522",
		"ulsraw recv --tap t --seconds 1 --mtu -1500",
		"ulsraw recv --tap t --seconds 1 --mac ff:ff:ff:ff:ff:ff",
		"ulsraw recv --tap t --seconds 1 --mac 00:00:00:00:00:00",
		"ulsraw recv --tap t --seconds 1 --mac 02:75:6c:ff:00",
		"ulsraw recv --tap t --seconds 1 --streams 2",
		"ulsraw recv --tap t --seconds 1 --dst-mac 02:75:6c:ff:00:02",
		"ulsraw recv --tap 0123456789abcdef --seconds 1",
		"ulsraw recv --tap t --seconds 1 stray",
		"ulsraw recv --tap t --seconds 1 --frobnicate",
		"ulsraw send --tap t --seconds 1",
		"ulsraw send --tap t --seconds 1 --dst-mac 02:75:6c:ff:00:0g",
		"ulsraw send --tap t --seconds 1 --dst-mac 02:75:6c:ff:00:02 --streams 0",
		"ulsraw send --tap t --seconds 1 --dst-mac 02:75:6c:ff:00:02 --streams 1025",
		"ulsraw send --tap t --seconds 1 --dst-mac 02:75:6c:ff:00:02 --json",
	};
	(void)state;

	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
		if (run(lines[i]) != 2)
			fail_msg("'%s' did not exit 2", lines[i]);
}

static void good_arguments_parse(void **state)
{
	char a[] = "ulsraw", b[] = "send", c[] = "--tap", d[] = "uls1", e[] = "--dst-mac",
	     f[] = "02:75:6c:ff:00:02", g[] = "--seconds", h[] = "2.5", i[] = "--streams",
	     j[] = "1024", k[] = "--mtu", l[] = "65521";
	char *argv[] = { a, b, c, d, e, f, g, h, i, j, k, l, NULL };
	struct raw_opts o;
	(void)state;

	assert_int_equal(bench__raw_parse_args(12, argv, &o), 0);
	assert_int_equal(o.role, RAW_SEND);
	assert_string_equal(o.tap, "uls1");
	assert_memory_equal(o.dst, bench__raw_mac_receiver, WIRE_ETH_ALEN);
	assert_memory_equal(o.mac, bench__raw_mac_sender, WIRE_ETH_ALEN);
	assert_true(o.seconds == 2.5);
	assert_int_equal(o.streams, 1024);
	assert_int_equal(o.mtu, 65521);
	assert_null(o.json);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(data_frame_received_counts_mtu_bytes, setup, teardown),
		cmocka_unit_test_setup_teardown(payload_byte_flipped_counted_corrupt, setup, teardown),
		cmocka_unit_test_setup_teardown(sequence_rewritten_counted_corrupt, setup, teardown),
		cmocka_unit_test_setup_teardown(stream_id_rewritten_counted_corrupt, setup, teardown),
		cmocka_unit_test_setup_teardown(stream_id_beyond_max_counted_corrupt, setup, teardown),
		cmocka_unit_test_setup_teardown(shorter_frame_in_stream_counted_corrupt, setup,
						teardown),
		cmocka_unit_test_setup_teardown(unknown_magic_to_us_counted_corrupt, setup, teardown),
		cmocka_unit_test_setup_teardown(header_only_frame_counted_corrupt, setup, teardown),
		cmocka_unit_test_setup_teardown(frame_for_other_mac_ignored, setup, teardown),
		cmocka_unit_test_setup_teardown(other_ethertype_ignored, setup, teardown),
		cmocka_unit_test_setup_teardown(hello_broadcast_ignored, setup, teardown),
		cmocka_unit_test_setup_teardown(sequence_gap_counted_lost, setup, teardown),
		cmocka_unit_test_setup_teardown(late_frame_fills_its_gap, setup, teardown),
		cmocka_unit_test_setup_teardown(end_frame_adds_tail_losses, setup, teardown),
		cmocka_unit_test_setup_teardown(end_frame_reports_streams_that_got_nothing, setup,
						teardown),
		cmocka_unit_test_setup_teardown(end_frame_with_zero_streams_counted_corrupt, setup,
						teardown),
		cmocka_unit_test(round_robin_total_divides_fairly),
		cmocka_unit_test_setup_teardown(minimum_mtu_frame_verifies, setup, teardown),
		cmocka_unit_test(bad_arguments_exit_2),
		cmocka_unit_test(good_arguments_parse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
