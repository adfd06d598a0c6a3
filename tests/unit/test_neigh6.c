/* server/neigh6.c: ulsd's IPv6 neighbour cache, its states and transitions as RFC 4861
 * §7.2.2, §7.2.3, §7.2.5 and §7.3.3 give them, and its bounds (retransmissions, size).
 *
 * Read first: RFC 4861 §7.2 and Appendix C.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "server/neigh6.h"

static const uint8_t peer[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 2 };
static const uint8_t mac_a[6] = { 0x02, 0, 0, 0, 0, 0xa };
static const uint8_t mac_b[6] = { 0x02, 0, 0, 0, 0, 0xb };
static struct srv_neigh6_cache nc;
static const uint64_t T0 = 1000000;

static unsigned nsolicit;
static uint8_t solicited_ip[16];
static void solicit(void *arg, const uint8_t ip[16])
{
	(void)arg;
	memcpy(solicited_ip, ip, 16);
	nsolicit++;
}

static int setup(void **state)
{
	(void)state;
	memset(&nc, 0, sizeof(nc));
	nsolicit = 0;
	return 0;
}

static void assert_mac(const uint8_t ip[16], const uint8_t want[6])
{
	uint8_t mac[6];

	assert_int_equal(srv__neigh6_lookup(&nc, T0, ip, mac), 0);
	assert_memory_equal(mac, want, 6);
}

/* §7.2.3: a solicitation's source link-layer option creates a STALE entry; a different
 * address replaces it and leaves it STALE; the same address keeps a REACHABLE entry so. */
static void ns_creates_stale_entry_and_replaces_a_changed_address(void **state)
{
	(void)state;
	uint8_t mac[6];

	assert_int_equal(srv__neigh6_lookup(&nc, T0, peer, mac), -ENOENT);
	assert_false(srv__neigh6_from_ns(&nc, T0, peer, mac_a));
	assert_int_equal(srv__neigh6_state(&nc, T0, peer), SRV_NEIGH6_STALE);
	assert_mac(peer, mac_a);
	assert_false(srv__neigh6_from_ns(&nc, T0, peer, mac_b));
	assert_int_equal(srv__neigh6_state(&nc, T0, peer), SRV_NEIGH6_STALE);
	assert_mac(peer, mac_b);
	/* Confirmed by a solicited advertisement, then the same address again in an NS. */
	assert_int_equal(srv__neigh6_from_na(&nc, T0, peer, mac_b, true, true),
			 SRV_NEIGH6_NA_UPDATED);
	assert_int_equal(srv__neigh6_state(&nc, T0, peer), SRV_NEIGH6_REACHABLE);
	assert_false(srv__neigh6_from_ns(&nc, T0, peer, mac_b));
	assert_int_equal(srv__neigh6_state(&nc, T0, peer), SRV_NEIGH6_REACHABLE);
	/* §7.3.3: REACHABLE_TIME after its confirmation it is STALE. */
	assert_int_equal(srv__neigh6_state(&nc, T0 + SRV_NEIGH6_REACHABLE_MS, peer),
			 SRV_NEIGH6_STALE);
}

/* §7.2.5: "If no entry exists, the advertisement SHOULD be silently discarded." */
static void na_without_entry_is_ignored(void **state)
{
	(void)state;
	assert_int_equal(srv__neigh6_from_na(&nc, T0, peer, mac_a, true, true),
			 SRV_NEIGH6_NA_IGNORED);
	assert_int_equal(srv__neigh6_state(&nc, T0, peer), SRV_NEIGH6_FREE);
}

/* §7.2.2: resolution makes an INCOMPLETE entry and one solicitation now; a second need
 * waits for the same one; a solicited NA with the option makes it REACHABLE and reports
 * the waiting probe; one without the option is discarded for an INCOMPLETE entry. */
static void resolve_then_solicited_na_resolves_and_reports_the_waiter(void **state)
{
	(void)state;
	uint8_t mac[6];

	assert_int_equal(srv__neigh6_resolve(&nc, T0, peer), 1);
	assert_int_equal(srv__neigh6_state(&nc, T0, peer), SRV_NEIGH6_INCOMPLETE);
	assert_int_equal(srv__neigh6_lookup(&nc, T0, peer, mac), -EAGAIN);
	assert_true(srv__neigh6_resolving(&nc));
	assert_int_equal(srv__neigh6_resolve(&nc, T0 + 10, peer), 0);
	assert_int_equal(srv__neigh6_from_na(&nc, T0, peer, NULL, true, true),
			 SRV_NEIGH6_NA_IGNORED);
	assert_int_equal(srv__neigh6_from_na(&nc, T0 + 20, peer, mac_a, true, false),
			 SRV_NEIGH6_NA_RESOLVED_WAITING);
	assert_int_equal(srv__neigh6_state(&nc, T0 + 20, peer), SRV_NEIGH6_REACHABLE);
	assert_mac(peer, mac_a);
	assert_false(srv__neigh6_resolving(&nc));
	assert_int_equal(srv__neigh6_resolve(&nc, T0 + 30, peer), -EEXIST);
}

/* An unsolicited NA for an INCOMPLETE entry: STALE (§7.2.5). An NS from the peer while
 * resolving completes it too (Appendix C) and reports the waiter. */
static void unsolicited_na_or_ns_completes_an_incomplete_entry_as_stale(void **state)
{
	(void)state;
	static const uint8_t other[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 3 };

	assert_int_equal(srv__neigh6_resolve(&nc, T0, peer), 1);
	assert_int_equal(srv__neigh6_from_na(&nc, T0, peer, mac_a, false, true),
			 SRV_NEIGH6_NA_RESOLVED_WAITING);
	assert_int_equal(srv__neigh6_state(&nc, T0, peer), SRV_NEIGH6_STALE);
	assert_int_equal(srv__neigh6_resolve(&nc, T0, other), 1);
	assert_true(srv__neigh6_from_ns(&nc, T0, other, mac_b));
	assert_int_equal(srv__neigh6_state(&nc, T0, other), SRV_NEIGH6_STALE);
	assert_mac(other, mac_b);
}

/* §7.2.5 for an entry with an address: Override clear and a different address turns a
 * REACHABLE entry STALE without changing it, and is ignored for a STALE one; Override set
 * replaces the address (STALE when unsolicited); a solicited NA without the option
 * confirms (REACHABLE); an unsolicited one with the same address changes nothing. */
static void na_override_and_solicited_flags_as_section_7_2_5(void **state)
{
	(void)state;

	srv__neigh6_from_ns(&nc, T0, peer, mac_a);
	assert_int_equal(srv__neigh6_from_na(&nc, T0, peer, mac_b, false, false),
			 SRV_NEIGH6_NA_IGNORED);
	assert_mac(peer, mac_a);
	assert_int_equal(srv__neigh6_from_na(&nc, T0, peer, NULL, true, false),
			 SRV_NEIGH6_NA_UPDATED);
	assert_int_equal(srv__neigh6_state(&nc, T0, peer), SRV_NEIGH6_REACHABLE);
	assert_int_equal(srv__neigh6_from_na(&nc, T0, peer, mac_b, true, false),
			 SRV_NEIGH6_NA_UPDATED);
	assert_int_equal(srv__neigh6_state(&nc, T0, peer), SRV_NEIGH6_STALE);
	assert_mac(peer, mac_a);
	assert_int_equal(srv__neigh6_from_na(&nc, T0, peer, mac_b, false, true),
			 SRV_NEIGH6_NA_UPDATED);
	assert_int_equal(srv__neigh6_state(&nc, T0, peer), SRV_NEIGH6_STALE);
	assert_mac(peer, mac_b);
	assert_int_equal(srv__neigh6_from_na(&nc, T0, peer, mac_b, false, true),
			 SRV_NEIGH6_NA_IGNORED);
	assert_int_equal(srv__neigh6_from_na(&nc, T0, peer, mac_b, true, true),
			 SRV_NEIGH6_NA_UPDATED);
	assert_int_equal(srv__neigh6_state(&nc, T0, peer), SRV_NEIGH6_REACHABLE);
}

/* §7.2.2: a solicitation every RETRANS_TIMER, MAX_MULTICAST_SOLICIT in all (the first
 * is the caller's); then resolution has failed: the entry goes, counted with its waiter. */
static void unanswered_resolution_retransmits_then_fails_counted(void **state)
{
	(void)state;
	unsigned failed = 0, failed_waiting = 0;

	assert_int_equal(srv__neigh6_resolve(&nc, T0, peer), 1);
	assert_int_equal(srv__neigh6_tick(&nc, T0 + 10, solicit, NULL, &failed, &failed_waiting),
			 SRV_NEIGH6_RETRANS_MS - 10);
	assert_int_equal(nsolicit, 0);
	for (unsigned i = 1; i < SRV_NEIGH6_SOLICITS; i++) {
		srv__neigh6_tick(&nc, T0 + i * SRV_NEIGH6_RETRANS_MS, solicit, NULL, &failed,
				 &failed_waiting);
		assert_int_equal(nsolicit, i);
		assert_memory_equal(solicited_ip, peer, 16);
		assert_int_equal(failed, 0);
	}
	srv__neigh6_tick(&nc, T0 + SRV_NEIGH6_SOLICITS * SRV_NEIGH6_RETRANS_MS, solicit, NULL,
			 &failed, &failed_waiting);
	assert_int_equal(nsolicit, SRV_NEIGH6_SOLICITS - 1);
	assert_int_equal(failed, 1);
	assert_int_equal(failed_waiting, 1);
	assert_int_equal(srv__neigh6_state(&nc, T0, peer), SRV_NEIGH6_FREE);
	assert_false(srv__neigh6_resolving(&nc));
}

/* A full cache makes room by replacing its least recently used entry, counted. */
static void full_cache_evicts_the_least_recently_used_entry(void **state)
{
	(void)state;
	uint8_t ip[16], mac[6];

	memcpy(ip, peer, 16);
	for (unsigned i = 0; i < SRV_NEIGH6_MAX; i++) {
		ip[14] = (uint8_t)(i >> 8);
		ip[15] = (uint8_t)i;
		srv__neigh6_from_ns(&nc, T0 + i, ip, mac_a);
	}
	assert_int_equal(nc.evicted, 0);
	/* The first entry used again: the second is now the oldest. */
	ip[14] = 0;
	ip[15] = 0;
	assert_int_equal(srv__neigh6_lookup(&nc, T0 + SRV_NEIGH6_MAX, ip, mac), 0);
	ip[15] = 0xff;
	ip[14] = 0xff;
	srv__neigh6_from_ns(&nc, T0 + SRV_NEIGH6_MAX + 1, ip, mac_b);
	assert_int_equal(nc.evicted, 1);
	assert_mac(ip, mac_b);
	ip[14] = 0;
	ip[15] = 0;
	assert_int_equal(srv__neigh6_state(&nc, T0, ip), SRV_NEIGH6_STALE);
	ip[15] = 1;
	assert_int_equal(srv__neigh6_state(&nc, T0, ip), SRV_NEIGH6_FREE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(ns_creates_stale_entry_and_replaces_a_changed_address, setup),
		cmocka_unit_test_setup(na_without_entry_is_ignored, setup),
		cmocka_unit_test_setup(resolve_then_solicited_na_resolves_and_reports_the_waiter, setup),
		cmocka_unit_test_setup(unsolicited_na_or_ns_completes_an_incomplete_entry_as_stale, setup),
		cmocka_unit_test_setup(na_override_and_solicited_flags_as_section_7_2_5, setup),
		cmocka_unit_test_setup(unanswered_resolution_retransmits_then_fails_counted, setup),
		cmocka_unit_test_setup(full_cache_evicts_the_least_recently_used_entry, setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
