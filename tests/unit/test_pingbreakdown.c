/* apps/breakdown.c: following a message's last segment from the sender's stamps to the
 * receiver's, the per-stage statistics, and the files the ping processes hand the driver.
 * The stamps come from a simulated ping-pong whose stage lengths are known. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "apps/breakdown.h"

#define MSGS     20
#define SEGS_MAX 4096
#define T0       1000000000ull   /* 1 s: stamps are never 0 */
#define GAP      1000000ull      /* 1 ms between messages */

/* Stage lengths in ns (stage 0 per segment: the k-th segment leaves at (k+1) * D[0]). */
static const uint64_t D[BENCH_BD_STAGES] = { 100, 10, 20, 20, 200, 5, 6, 7, 40 };

struct sim {
	uint64_t app[MSGS][2];
	struct uls_bd_frame fr[SEGS_MAX];
	size_t nfr;
};

static struct sim snd_sim, rcv_sim;

static struct bench_bd_side side(struct sim *s, size_t napp)
{
	return (struct bench_bd_side){ .app = s->app, .napp = napp, .fr = s->fr, .nfr = s->nfr };
}

static struct uls_bd_frame *add(struct sim *s, uint8_t dir, uint32_t seq, uint32_t len)
{
	struct uls_bd_frame *f = &s->fr[s->nfr++];

	assert_true(s->nfr <= SEGS_MAX);
	*f = (struct uls_bd_frame){ .saddr = 0x010012c6, .daddr = 0x020012c6, .sport = 40000,
				    .dport = 7100, .seq = seq, .len = len, .flags = 0x18,
				    .dir = dir };
	return f;
}

/* Message i in nseg segments of seglen bytes from sequence number seq; returns the
 * sequence number after it. */
static uint32_t message(size_t i, uint32_t seq, unsigned nseg, uint32_t seglen)
{
	uint64_t t = T0 + i * GAP, last_in = 0;

	snd_sim.app[i][0] = t;
	for (unsigned k = 0; k < nseg; k++, seq += seglen) {
		struct uls_bd_frame *tx = add(&snd_sim, ULS_BD_SENT, seq, seglen);
		struct uls_bd_frame *rx = add(&rcv_sim, ULS_BD_RECEIVED, seq, seglen);
		uint64_t p = t + (k + 1) * D[0];
		for (unsigned j = 0; j < ULS_BD_STAMPS; j++) {
			tx->t[j] = p;
			p += D[1 + j];
		}
		for (unsigned j = 0; j < ULS_BD_STAMPS; j++) {
			rx->t[j] = p;
			if (j + 5 < BENCH_BD_STAGES)
				p += D[5 + j];
		}
		last_in = rx->t[ULS_BD_STACK_IN];
	}
	rcv_sim.app[i][1] = last_in + D[8];
	rcv_sim.app[i][0] = rcv_sim.app[i][1] + 10;   /* the echo (not followed here) */
	snd_sim.app[i][1] = rcv_sim.app[i][1] + GAP / 2;
	return seq;
}

static int reset(void **state)
{
	(void)state;
	memset(&snd_sim, 0, sizeof(snd_sim));
	memset(&rcv_sim, 0, sizeof(rcv_sim));
	return 0;
}

static double us(uint64_t ns)
{
	return (double)ns / 1e3;
}

static void one_segment_messages_give_each_stage_its_length(void **state)
{
	struct bench_bd_result r;
	uint32_t seq = 1;
	(void)state;

	for (size_t i = 0; i < MSGS; i++)
		seq = message(i, seq, 1, 100);
	struct bench_bd_side s = side(&snd_sim, MSGS), c = side(&rcv_sim, MSGS);
	assert_int_equal(bench__bd_analyse(&s, &c, 5, &r), 0);
	assert_int_equal(r.messages, MSGS - 5);
	assert_int_equal(r.samples, MSGS - 5);
	assert_int_equal(r.no_segment + r.unmatched + r.disordered, 0);
	uint64_t total = 0;
	for (unsigned k = 0; k < BENCH_BD_STAGES; k++) {
		assert_float_equal(r.stage[k].mean, us(D[k]), 1e-9);
		assert_float_equal(r.stage[k].p50, us(D[k]), 1e-9);
		total += D[k];
	}
	assert_float_equal(r.one_way.mean, us(total), 1e-9);
	assert_float_equal(r.stage_mean_sum, r.one_way.mean, 1e-9);
}

static void multi_segment_message_is_followed_through_its_last_segment(void **state)
{
	struct bench_bd_result r;
	uint32_t seq = 1000;
	(void)state;

	for (size_t i = 0; i < MSGS; i++)
		seq = message(i, seq, 45, 1448);
	struct bench_bd_side s = side(&snd_sim, MSGS), c = side(&rcv_sim, MSGS);
	assert_int_equal(bench__bd_analyse(&s, &c, 0, &r), 0);
	assert_int_equal(r.samples, MSGS);
	assert_float_equal(r.stage[0].mean, us(45 * D[0]), 1e-9);   /* app send -> last out */
	assert_float_equal(r.stage[4].mean, us(D[4]), 1e-9);
	assert_float_equal(r.stage_mean_sum, r.one_way.mean, 1e-9);
}

static void sequence_numbers_wrapping_inside_a_message_still_find_the_last_byte(void **state)
{
	struct bench_bd_result r;
	uint32_t seq = 0xffffffffu - 3000;   /* message 0 wraps past 2^32 */
	(void)state;

	for (size_t i = 0; i < 3; i++)
		seq = message(i, seq, 4, 1448);
	struct bench_bd_side s = side(&snd_sim, 3), c = side(&rcv_sim, 3);
	assert_int_equal(bench__bd_analyse(&s, &c, 0, &r), 0);
	assert_int_equal(r.samples, 3);
	assert_float_equal(r.stage[0].mean, us(4 * D[0]), 1e-9);
}

static void retransmitted_last_segment_first_arrival_and_its_transmission_count(void **state)
{
	struct bench_bd_result r;
	(void)state;

	message(0, 1, 1, 100);
	/* the segment again: sent 1 us later, arriving after the first copy */
	struct uls_bd_frame *tx = add(&snd_sim, ULS_BD_SENT, 1, 100);
	struct uls_bd_frame *rx = add(&rcv_sim, ULS_BD_RECEIVED, 1, 100);
	for (unsigned j = 0; j < ULS_BD_STAMPS; j++) {
		tx->t[j] = snd_sim.fr[0].t[j] + 1000;
		rx->t[j] = rcv_sim.fr[0].t[j] + 1000;
	}
	struct bench_bd_side s = side(&snd_sim, 1), c = side(&rcv_sim, 1);
	assert_int_equal(bench__bd_analyse(&s, &c, 0, &r), 0);
	assert_int_equal(r.samples, 1);
	for (unsigned k = 0; k < BENCH_BD_STAGES; k++)
		assert_float_equal(r.stage[k].mean, us(D[k]), 1e-9);
}

static void lost_first_copy_pairs_arrival_with_the_retransmission(void **state)
{
	struct bench_bd_result r;
	(void)state;

	message(0, 1, 1, 100);
	/* the first copy never arrived: the receiver saw only a copy sent 5 us later */
	struct uls_bd_frame *tx = add(&snd_sim, ULS_BD_SENT, 1, 100);
	for (unsigned j = 0; j < ULS_BD_STAMPS; j++) {
		tx->t[j] = snd_sim.fr[0].t[j] + 5000;
		rcv_sim.fr[0].t[j] += 5000;
	}
	rcv_sim.app[0][1] += 5000;
	struct bench_bd_side s = side(&snd_sim, 1), c = side(&rcv_sim, 1);
	assert_int_equal(bench__bd_analyse(&s, &c, 0, &r), 0);
	assert_float_equal(r.stage[0].mean, us(D[0] + 5000), 1e-9);  /* the wait shows here */
	assert_float_equal(r.stage[4].mean, us(D[4]), 1e-9);         /* not in the kernel */
}

static void missing_or_disordered_stamps_leave_the_message_out(void **state)
{
	struct bench_bd_result r;
	uint32_t seq = 1;
	(void)state;

	for (size_t i = 0; i < 4; i++)
		seq = message(i, seq, 1, 100);
	snd_sim.fr[1].t[ULS_BD_ULSD_TX] = 0;           /* ulsd never stamped it */
	rcv_sim.fr[2].t[ULS_BD_DEMUX] = rcv_sim.fr[2].t[ULS_BD_TAP_READ] - 1;
	struct bench_bd_side s = side(&snd_sim, 4), c = side(&rcv_sim, 4);
	assert_int_equal(bench__bd_analyse(&s, &c, 0, &r), 0);
	assert_int_equal(r.samples, 2);
	assert_int_equal(r.disordered, 2);
}

static void message_without_segments_or_arrival_is_counted_not_guessed(void **state)
{
	struct bench_bd_result r;
	(void)state;

	message(0, 1, 1, 100);
	message(1, 101, 1, 100);
	message(2, 201, 1, 100);
	snd_sim.fr[1].dir = ULS_BD_RECEIVED;   /* message 1: nothing sent in its window */
	rcv_sim.fr[2].sport = 1;               /* message 2: arrived on another connection */
	struct bench_bd_side s = side(&snd_sim, 3), c = side(&rcv_sim, 3);
	assert_int_equal(bench__bd_analyse(&s, &c, 0, &r), 0);
	assert_int_equal(r.samples, 1);
	assert_int_equal(r.no_segment, 1);
	assert_int_equal(r.unmatched, 1);
}

static void nothing_to_analyse_is_enodata(void **state)
{
	struct bench_bd_result r;
	(void)state;

	message(0, 1, 1, 100);
	struct bench_bd_side s = side(&snd_sim, 1), c = side(&rcv_sim, 1);
	assert_int_equal(bench__bd_analyse(&s, &c, 1, &r), -ENODATA);   /* all skipped */
	rcv_sim.fr[0].dir = ULS_BD_SENT;
	assert_int_equal(bench__bd_analyse(&s, &c, 0, &r), -ENODATA);
	assert_int_equal(r.unmatched, 1);
}

static void median_is_nearest_rank_and_means_still_add_up(void **state)
{
	struct bench_bd_result r;
	uint32_t seq = 1;
	(void)state;

	for (size_t i = 0; i < 5; i++)
		seq = message(i, seq, 1, 100);
	/* the wire stage of message i takes 200 + 1000 * i ns: 0.2, 1.2, 2.2, 3.2, 4.2 us */
	for (size_t i = 0; i < 5; i++) {
		uint64_t more = 1000 * i;
		for (unsigned j = 0; j < ULS_BD_STAMPS; j++)
			rcv_sim.fr[i].t[j] += more;
		rcv_sim.app[i][1] += more;
	}
	struct bench_bd_side s = side(&snd_sim, 5), c = side(&rcv_sim, 5);
	assert_int_equal(bench__bd_analyse(&s, &c, 0, &r), 0);
	assert_float_equal(r.stage[4].mean, 2.2, 1e-9);
	assert_float_equal(r.stage[4].p50, 2.2, 1e-9);    /* rank ceil(0.5 * 5) = 3 */
	assert_float_equal(r.stage[4].p99, 4.2, 1e-9);    /* rank ceil(0.99 * 5) = 5 */
	assert_float_equal(r.stage_mean_sum, r.one_way.mean, 1e-9);
	assert_float_equal(r.one_way.p50, us(D[0] + D[1] + D[2] + D[3] + D[5] + D[6] + D[7] +
					 D[8]) + 2.2, 1e-9);
}

/* ---- files ---- */

static char path[] = "/tmp/test_pingbreakdown-XXXXXX";

static int file_setup(void **state)
{
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	close(fd);
	return reset(state);
}

static int file_teardown(void **state)
{
	(void)state;
	unlink(path);
	memcpy(path + strlen(path) - 6, "XXXXXX", 6);
	return 0;
}

static void saved_side_loads_back_the_same(void **state)
{
	struct bench_bd_side in = { 0 };
	(void)state;

	message(0, 1, 3, 100);
	message(1, 301, 3, 100);
	assert_int_equal(bench__bd_save(path, (const uint64_t (*)[2])snd_sim.app, 2, snd_sim.fr,
					snd_sim.nfr, 7), 0);
	assert_int_equal(bench__bd_load(path, &in), 0);
	assert_int_equal(in.napp, 2);
	assert_int_equal(in.nfr, 6);
	assert_int_equal(in.lost, 7);
	assert_memory_equal(in.app, snd_sim.app, 2 * sizeof(snd_sim.app[0]));
	assert_memory_equal(in.fr, snd_sim.fr, 6 * sizeof(snd_sim.fr[0]));
	bench__bd_free(&in);
	assert_null(in.fr);
}

static void json_names_every_stage_and_its_numbers(void **state)
{
	struct bench_bd_result r;
	char *text = NULL;
	size_t len = 0;
	uint32_t seq = 1;
	(void)state;

	for (size_t i = 0; i < 3; i++)
		seq = message(i, seq, 1, 100);
	struct bench_bd_side s = side(&snd_sim, 3), c = side(&rcv_sim, 3);
	assert_int_equal(bench__bd_analyse(&s, &c, 0, &r), 0);
	FILE *f = open_memstream(&text, &len);
	assert_non_null(f);
	bench__bd_json(f, &r, 4);
	fclose(f);
	assert_non_null(strstr(text, "\"samples\": 3, "));
	assert_non_null(strstr(text, "\"segments_lost\": 4, "));
	assert_non_null(strstr(text, "{\"stage\": \"kernel\", \"from\": \"TAP write\", "
				     "\"to\": \"TAP read\", \"mean_us\": 0.200, \"p50_us\": 0.200, "
				     "\"p99_us\": 0.200}"));
	assert_non_null(strstr(text, "\"stage\": \"recv_stack\""));
	assert_int_equal(text[len - 1], '}');
	free(text);
}

static void truncated_or_foreign_file_is_refused(void **state)
{
	struct bench_bd_side in = { 0 };
	(void)state;

	message(0, 1, 3, 100);
	assert_int_equal(bench__bd_save(path, (const uint64_t (*)[2])snd_sim.app, 1, snd_sim.fr,
					snd_sim.nfr, 0), 0);
	assert_int_equal(truncate(path, 40 + 16 + 2 * (off_t)sizeof(struct uls_bd_frame)), 0);
	assert_int_equal(bench__bd_load(path, &in), -EPROTO);
	assert_null(in.app);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs("{\"not\": \"ours\"}\n", f);
	fclose(f);
	assert_int_equal(bench__bd_load(path, &in), -EPROTO);
	assert_int_equal(bench__bd_load("/nonexistent/dir/file", &in), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(one_segment_messages_give_each_stage_its_length, reset),
		cmocka_unit_test_setup(multi_segment_message_is_followed_through_its_last_segment, reset),
		cmocka_unit_test_setup(sequence_numbers_wrapping_inside_a_message_still_find_the_last_byte, reset),
		cmocka_unit_test_setup(retransmitted_last_segment_first_arrival_and_its_transmission_count, reset),
		cmocka_unit_test_setup(lost_first_copy_pairs_arrival_with_the_retransmission, reset),
		cmocka_unit_test_setup(missing_or_disordered_stamps_leave_the_message_out, reset),
		cmocka_unit_test_setup(message_without_segments_or_arrival_is_counted_not_guessed, reset),
		cmocka_unit_test_setup(nothing_to_analyse_is_enodata, reset),
		cmocka_unit_test_setup(median_is_nearest_rank_and_means_still_add_up, reset),
		cmocka_unit_test_setup(json_names_every_stage_and_its_numbers, reset),
		cmocka_unit_test_setup_teardown(saved_side_loads_back_the_same, file_setup, file_teardown),
		cmocka_unit_test_setup_teardown(truncated_or_foreign_file_is_refused, file_setup,
						file_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
