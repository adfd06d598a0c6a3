/* stack/synshed.c: pure SYNs are shed while the previous receive round says the process is
 * behind a SYN flood, data never is, and a shed SYN's retransmission is always taken in.
 * The rounds are played here as drive.c's take_frames plays them (round_begin, one
 * stk__synshed_drop per IP packet, round_end), on a clock the test moves. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"
#include "uls.h"
#include "counter_fixture.h"

static uint64_t fake_now = 1000000;

static uint64_t fake_clock(void)
{
	return fake_now;
}

/* An IPv4 TCP segment from src:port to 198.18.0.2:5090 (checksums are not looked at before
 * lwIP). */
struct seg {
	uint8_t b[60];
	size_t len;
};

static struct seg tcp4_from(uint32_t src_addr, uint16_t sport, uint32_t seq, uint8_t flags,
			    size_t payload)
{
	struct seg s;

	memset(&s, 0, sizeof(s));
	s.len = 40 + payload;
	s.b[0] = 0x45;
	s.b[2] = (uint8_t)(s.len >> 8);
	s.b[3] = (uint8_t)s.len;
	s.b[8] = 64;
	s.b[9] = 6;
	uint32_t src = htonl(src_addr), dst = htonl(0xc6120002u);
	memcpy(s.b + 12, &src, 4);
	memcpy(s.b + 16, &dst, 4);
	uint16_t sp = htons(sport), dp = htons(5090);
	uint32_t sq = htonl(seq);
	memcpy(s.b + 20, &sp, 2);
	memcpy(s.b + 22, &dp, 2);
	memcpy(s.b + 24, &sq, 4);
	s.b[32] = 5 << 4;
	s.b[33] = flags;
	s.b[34] = 0xff;
	return s;
}

/* From 198.19.A.B (src_host's low 16 bits). */
static struct seg tcp4(uint32_t src_host, uint16_t sport, uint32_t seq, uint8_t flags, size_t payload)
{
	return tcp4_from(0xc6130000u | (src_host & 0xffffu), sport, seq, flags, payload);
}

#define SYN 0x02
#define ACK 0x10
#define RST 0x04

static bool drop(struct seg s)
{
	return stk__synshed_drop(s.b, s.len, false);
}

/* One round of n frames, every k-th a data segment (k 0: none), the rest SYNs from hosts
 * first_host, first_host + 1, ...; returns how many SYNs and data segments were dropped. */
static void round_of(unsigned n, unsigned k, uint32_t first_host, unsigned *syns_dropped,
		     unsigned *data_dropped)
{
	*syns_dropped = *data_dropped = 0;
	stk__synshed_round_begin();
	for (unsigned i = 0; i < n; i++) {
		if (k && i % k == 0) {
			*data_dropped += drop(tcp4(7, 40000, 1000 + i * 10, ACK, 10));
		} else {
			*syns_dropped += drop(tcp4(first_host + i, (uint16_t)(1024 + i), 0x5000 + i, SYN, 0));
		}
	}
	stk__synshed_round_end();
}

static void a_round_of_data_alone_sheds_nothing_after_it(void **state)
{
	unsigned s, d;
	(void)state;

	round_of(64, 1, 0, &s, &d);   /* 64 data segments */
	assert_int_equal(d, 0);
	assert_false(stk__synshed_pressure());
	round_of(8, 0, 100, &s, &d);  /* SYNs after it: all taken in */
	assert_int_equal(s, 0);
}

static void a_short_round_of_syns_sheds_nothing_after_it(void **state)
{
	unsigned s, d;
	(void)state;

	round_of(15, 0, 200, &s, &d);
	assert_int_equal(s, 0);
	assert_false(stk__synshed_pressure());
	round_of(15, 0, 300, &s, &d);
	assert_int_equal(s, 0);
}

static void behind_a_flood_syns_are_shed_counted_and_data_taken(void **state)
{
	unsigned s, d;
	uint64_t shed0 = counter("syn_shed");
	(void)state;

	/* A round of 64 frames, 3 of 4 SYNs: frames waited, and SYNs were most of them. */
	round_of(64, 4, 1000, &s, &d);
	assert_int_equal(s, 0);       /* decided by the round before: none shed yet */
	assert_true(stk__synshed_pressure());
	/* The next round: every one of its 48 SYNs is shed and counted, its 16 data
	 * segments all go on to lwIP. */
	round_of(64, 4, 2000, &s, &d);
	assert_int_equal(s, 48);
	assert_int_equal(d, 0);
	assert_int_equal(counter("syn_shed") - shed0, 48);
	/* Neither an ACK, a RST nor a SYN,ACK is a pure SYN. */
	stk__synshed_round_begin();
	assert_false(drop(tcp4(5000, 5000, 1, ACK, 0)));
	assert_false(drop(tcp4(5001, 5001, 1, RST, 0)));
	assert_false(drop(tcp4(5002, 5002, 1, SYN | ACK, 0)));
	stk__synshed_round_end();
}

/* On the relay path ulsd sheds (server/demux.c); a second shedder in the process would
 * shed what ulsd took back (review of stop 30). */
static void a_process_on_the_relay_path_sheds_nothing(void **state)
{
	unsigned s, d;
	uint64_t shed0 = counter("syn_shed");
	(void)state;

	stk__synshed_relayed(true);
	round_of(64, 4, 3000, &s, &d);
	round_of(64, 4, 3100, &s, &d);   /* behind a flood: the direct path's would shed 48 */
	stk__synshed_relayed(false);
	assert_int_equal(s, 0);
	assert_int_equal(counter("syn_shed") - shed0, 0);
	round_of(64, 4, 3200, &s, &d);   /* direct again: shed */
	assert_int_equal(s, 48);
}

static void a_shed_syn_retransmitted_is_taken_in(void **state)
{
	unsigned s, d;
	uint64_t again0 = counter("syn_shed_readmitted");
	(void)state;

	/* Still behind: a round of SYNs, the flood's. */
	round_of(64, 0, 3000, &s, &d);
	assert_true(stk__synshed_pressure());
	stk__synshed_round_begin();
	assert_true(drop(tcp4(9000, 33000, 0xabcdef, SYN, 0)));   /* a client's first SYN */
	for (unsigned i = 0; i < 63; i++)
		drop(tcp4(4000 + i, 1024, i, SYN, 0));
	stk__synshed_round_end();
	/* Its retransmission 1 s later (RFC 6298 §5), same tuple and ISN: taken in, with the
	 * flood still on; a SYN of the same tuple with another ISN is not. */
	fake_now += 1000;
	stk__synshed_round_begin();
	assert_false(drop(tcp4(9000, 33000, 0xabcdef, SYN, 0)));
	assert_true(drop(tcp4(9000, 33000, 0xabcdf0, SYN, 0)));
	for (unsigned i = 0; i < 62; i++)
		drop(tcp4(5000 + i, 1024, i, SYN, 0));
	stk__synshed_round_end();
	assert_int_equal(counter("syn_shed_readmitted") - again0, 1);
	/* A second retransmission 2 s after that (3 s after the first SYN) is taken in too. */
	fake_now += 2000;
	stk__synshed_round_begin();
	assert_false(drop(tcp4(9000, 33000, 0xabcdef, SYN, 0)));
	stk__synshed_round_end();
	assert_int_equal(counter("syn_shed_readmitted") - again0, 2);
}

static void pressure_ends_half_a_second_after_the_last_round_behind(void **state)
{
	unsigned s, d;
	(void)state;

	round_of(64, 0, 6000, &s, &d);
	assert_true(stk__synshed_pressure());
	fake_now += 499;
	round_of(4, 0, 7000, &s, &d);
	assert_true(stk__synshed_pressure());
	fake_now += 1;
	round_of(4, 0, 7100, &s, &d);
	assert_false(stk__synshed_pressure());
	round_of(8, 0, 7200, &s, &d);
	assert_int_equal(s, 0);
}

static void shed_syns_that_come_back_stop_the_shedding(void **state)
{
	unsigned s, d, dropped = 0, back = 0;
	uint64_t susp0 = counter("syn_shed_suspended");
	(void)state;

	/* A burst of real clients keeps the process behind: 320 of their SYNs shed. */
	fake_now += 10000;
	round_of(64, 0, 20000, &s, &d);
	assert_true(stk__synshed_pressure());
	for (unsigned r = 0; r < 5; r++) {
		round_of(64, 0, 30000 + r * 64, &s, &d);
		dropped += s;
	}
	assert_int_equal(dropped, 320);
	/* 1 s later every one of them comes back (the same SYN): all taken in, and once a
	 * quarter or more of what was shed came back, shedding stops. */
	fake_now += 1000;
	for (unsigned r = 0; r < 5; r++) {
		stk__synshed_round_begin();
		for (unsigned i = 0; i < 64; i++) {
			unsigned n = r * 64 + i;
			back += !drop(tcp4(30000 + n, (uint16_t)(1024 + (n % 64)), 0x5000 + (n % 64), SYN, 0));
		}
		stk__synshed_round_end();
	}
	assert_int_equal(back, 320);
	assert_int_equal(counter("syn_shed_suspended") - susp0, 1);
	assert_false(stk__synshed_pressure());
	/* Suspended: a round of new SYNs neither is shed nor brings the pressure back... */
	round_of(64, 0, 40000, &s, &d);
	assert_false(stk__synshed_pressure());
	round_of(64, 0, 40100, &s, &d);
	assert_int_equal(s, 0);
	/* ...for 10 s; then a flood's rounds shed again. */
	fake_now += 10000;
	round_of(64, 0, 41000, &s, &d);
	assert_true(stk__synshed_pressure());
	round_of(64, 0, 42000, &s, &d);
	assert_int_equal(s, 64);
}

static void a_syn_from_a_peer_that_sent_acks_is_never_shed(void **state)
{
	unsigned s, d;
	uint64_t known0 = counter("syn_shed_known_peer");
	(void)state;

	fake_now += 20000;
	round_of(64, 0, 50000, &s, &d);
	round_of(64, 0, 50100, &s, &d);
	assert_true(stk__synshed_pressure());
	assert_int_equal(s, 64);
	/* 198.19.0.7 sent the data segments of round_of: a peer with a connection. Its new
	 * connection's SYN goes to lwIP at once, flood or not; a stranger's is shed. */
	stk__synshed_round_begin();
	assert_false(drop(tcp4(7, 41000, 0x77, SYN, 0)));
	assert_true(drop(tcp4(60000, 41000, 0x77, SYN, 0)));
	stk__synshed_round_end();
	assert_int_equal(counter("syn_shed_known_peer") - known0, 1);
}

/* Review finding 3: at 400,000 SYN/s a generation of the memory (196,608 fingerprints) fills
 * in half a second, and forgetting the older one then forgot a client's shed SYN before its
 * retransmission 1 s later, which was shed again (and so for the whole flood). Now a full
 * memory takes SYNs in until the generation is 3 s old, and the retransmission is taken. */
#define FLOOD_PER_MS 400

/* One round (one millisecond) of the flood: FLOOD_PER_MS SYNs from 10.0.0.0/8, each new
 * (*n counts them); returns how many were shed. */
static unsigned flood_ms(uint32_t *n)
{
	unsigned shed = 0;

	for (unsigned i = 0; i < FLOOD_PER_MS; i++, (*n)++)
		shed += drop(tcp4_from(0x0a000000u | (*n & 0xffffffu), (uint16_t)(1024 + (*n >> 24)),
				       *n * 2654435761u, SYN, 0));
	return shed;
}

static void at_400k_syn_per_s_a_shed_clients_retransmission_is_taken_in(void **state)
{
	uint32_t n = 0;
	unsigned taken = 0, shed_after = 0;
	uint64_t again0 = counter("syn_shed_readmitted");
	uint64_t full0 = counter("syn_shed_memory_full");
	struct seg client = tcp4(9100, 47000, 0x1234567, SYN, 0);
	(void)state;

	/* Long after the tests before: the first round starts a new generation. */
	fake_now += 60000;
	for (unsigned ms = 0; ms < 3200; ms++, fake_now++) {
		unsigned shed;
		stk__synshed_round_begin();
		if (ms == 100)        /* the client's first SYN: shed */
			assert_true(drop(client));
		if (ms == 1100)       /* its retransmission 1 s later (RFC 6298 §5): taken */
			assert_false(drop(client));
		shed = flood_ms(&n);
		stk__synshed_round_end();
		if (ms == 0)
			continue;     /* the round that says the process is behind */
		taken += FLOOD_PER_MS - shed;
		if (ms >= 3001)       /* a full generation rolled over: the memory remembers again */
			shed_after += shed;
	}
	assert_int_equal(counter("syn_shed_readmitted") - again0, 1);
	/* The flood filled each generation in half a second (196,608 SYNs); the SYNs after that
	 * were taken in and counted until the full generation was 1.5 s old (ms 1500, 3000). */
	assert_int_equal(counter("syn_shed_memory_full") - full0, taken);
	assert_in_range(taken, 1900 * FLOOD_PER_MS, 2100 * FLOOD_PER_MS);
	assert_int_equal(shed_after, 199 * FLOOD_PER_MS);
	assert_true(stk__synshed_pressure());
}

/* Review finding 5: the known peers' table had an unkeyed hash, direct-mapped: a sender
 * that knew it could evict a chosen peer with a few spoofed ACKs in its slot, and any flood
 * of ACKs from random sources flushed the table. */

/* NPEERS peers, 198.19.200.0 and up, each sending two ACKs (as any connection does). */
#define NPEERS 256
static uint32_t peer_addr(unsigned i)
{
	return 0xc613c800u + i;
}

static void acks_from(uint32_t addr)
{
	stk__synshed_round_begin();
	assert_false(drop(tcp4_from(addr, 45000, 100, ACK, 0)));
	assert_false(drop(tcp4_from(addr, 45000, 100, ACK, 10)));
	stk__synshed_round_end();
}

/* Behind a flood, a new SYN from each of the first n peers: how many were taken in as known
 * peers' (the others are shed). */
static unsigned peers_known(unsigned n)
{
	static unsigned calls;   /* new SYNs each time: none is a retransmission */
	unsigned s, d, known = 0;
	uint64_t known0 = counter("syn_shed_known_peer");

	calls++;
	fake_now += 60000;
	round_of(64, 0, 61000 + calls * 64, &s, &d);
	assert_true(stk__synshed_pressure());
	stk__synshed_round_begin();
	for (unsigned i = 0; i < n; i++)
		known += !drop(tcp4_from(peer_addr(i), 46000, 0x66 + calls, SYN, 0));
	stk__synshed_round_end();
	assert_int_equal(counter("syn_shed_known_peer") - known0, known);
	return known;
}

/* The hash this table had before review, which an attacker can compute: the slot of IPv4
 * address a (network order in the table's first 4 bytes, read as a host word). */
static unsigned old_slot(uint32_t a)
{
	uint32_t w, n = htonl(a);

	memcpy(&w, &n, 4);
	return (w * 0x9e3779b1u) >> 20;
}

static void acks_aimed_at_a_peers_slot_do_not_evict_it(void **state)
{
	unsigned found = 0, want = old_slot(peer_addr(0));
	(void)state;

	acks_from(peer_addr(0));
	/* 32 spoofed sources in its slot under the old hash (from 10.0.0.0/8), two ACKs each:
	 * the old table forgot the peer at the first; two ACKs defeat the newcomer's slot
	 * (known_add), so only the key keeps the peer. Keyed, the sources fall in random sets
	 * of four: three in the peer's set would evict it, 1 in 200,000 runs. */
	stk__synshed_round_begin();
	for (uint32_t a = 0x0a000000u; found < 32 && a < 0x0b000000u; a++) {
		if (old_slot(a) != want)
			continue;
		found++;
		drop(tcp4_from(a, 1024, 1, ACK, 0));
		drop(tcp4_from(a, 1024, 1, ACK, 0));
	}
	stk__synshed_round_end();
	assert_int_equal(found, 32);
	assert_int_equal(peers_known(1), 1);
}

static void a_flood_of_spoofed_acks_does_not_flush_the_known_peers(void **state)
{
	uint32_t x = 0x12345678u;
	unsigned before;
	(void)state;

	for (unsigned i = 0; i < NPEERS; i++)
		acks_from(peer_addr(i));
	/* A set keeps three peers seen twice: a fourth of the 256 in the same set of the 1,024
	 * (about 1 run in 8) evicts the least recent. */
	before = peers_known(NPEERS);
	assert_in_range(before, NPEERS - 4, NPEERS);
	/* 200,000 ACKs from random sources, one each (as hping3 -A --rand-source), 49 times
	 * the table's size: the old table kept a peer with probability e^-49. */
	for (unsigned r = 0; r < 200000 / 250; r++) {
		stk__synshed_round_begin();
		for (unsigned i = 0; i < 250; i++) {
			x ^= x << 13, x ^= x >> 17, x ^= x << 5;
			drop(tcp4_from(x, (uint16_t)x, x, ACK, 0));
		}
		stk__synshed_round_end();
	}
	assert_int_equal(peers_known(NPEERS), before);
}

int main(void)
{
	unsetenv("ULS_SYN_SHED");   /* the defaults are under test */
	uls_env_reload();           /* libuls read it at load (stack/env.c) */
	stk__synshed_clock = fake_clock;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_round_of_data_alone_sheds_nothing_after_it),
		cmocka_unit_test(a_short_round_of_syns_sheds_nothing_after_it),
		cmocka_unit_test(behind_a_flood_syns_are_shed_counted_and_data_taken),
		cmocka_unit_test(a_process_on_the_relay_path_sheds_nothing),
		cmocka_unit_test(a_shed_syn_retransmitted_is_taken_in),
		cmocka_unit_test(pressure_ends_half_a_second_after_the_last_round_behind),
		cmocka_unit_test(shed_syns_that_come_back_stop_the_shedding),
		cmocka_unit_test(a_syn_from_a_peer_that_sent_acks_is_never_shed),
		cmocka_unit_test(at_400k_syn_per_s_a_shed_clients_retransmission_is_taken_in),
		cmocka_unit_test(acks_aimed_at_a_peers_slot_do_not_evict_it),
		cmocka_unit_test(a_flood_of_spoofed_acks_does_not_flush_the_known_peers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
