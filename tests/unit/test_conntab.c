/* netif/conntab.c: the connection table a process writes and ulsd reads. ulsd must get
 * either a consistent copy or a counted refusal, whatever the writer does: a table written
 * while it is read, a write that never ends, a count beyond the table, entries out of
 * range; and the memfd is sealed so that the process cannot shrink ulsd's mapping. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "netif/conntab.h"

#define CAP 64u

static struct uls_conntab_ent snap[CAP];

/* A fresh table of CAP entries for each test (cmocka's setup and teardown), and what
 * ulsd's copy of it says. */
struct table {
	int fd;
	void *map;
	uint32_t n, total;
	uint64_t ns;
};

static int table_setup(void **state)
{
	static struct table t;

	t.fd = uls_conntab_create(CAP, &t.map);
	if (t.fd < 0)
		return -1;
	*state = &t;
	return 0;
}

static int table_teardown(void **state)
{
	struct table *t = *state;

	munmap(t->map, uls_conntab_size(CAP));
	close(t->fd);
	return 0;
}

static int snapshot(struct table *t)
{
	return uls_conntab_snapshot(t->map, CAP, snap, &t->n, &t->total, &t->ns);
}

static void table_is_sealed_and_its_header_checks(void **state)
{
	struct table *t = *state;
	int fd = t->fd;
	void *map = t->map;

	assert_int_equal(lseek(fd, 0, SEEK_END), (off_t)uls_conntab_size(CAP));
	assert_int_equal(ftruncate(fd, 64), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(ftruncate(fd, 1 << 20), -1);
	assert_int_equal(uls_conntab_check_header(map, uls_conntab_size(CAP)), 0);
	assert_int_equal(uls_conntab_check_header(map, uls_conntab_size(CAP) - 64), -EPROTO);
	((struct uls_conntab_hdr *)map)->version = 99;
	assert_int_equal(uls_conntab_check_header(map, uls_conntab_size(CAP)), -EPROTO);
}

struct writer {
	struct uls_conntab_hdr *h;
	volatile int stop;
	unsigned rounds;
};

/* Every round writes n entries that all carry the round's number: a torn copy would mix
 * rounds, or have fewer entries with that number than its count says. The stack writes
 * every 250 ms; this writer writes all the time, so that reads meet writes often. */
static void *write_loop(void *arg)
{
	struct writer *w = arg;
	struct uls_conntab_ent *e = (void *)(w->h + 1);

	while (!w->stop) {
		uint32_t r = ++w->rounds, n = 1 + r % CAP;
		uls_conntab_write_begin(w->h);
		for (uint32_t i = 0; i < n; i++) {
			e[i].cwnd = r;
			e[i].ssthresh = r;
			e[i].rtt_us = r;
		}
		uls_conntab_write_end(w->h, n, n + 5, r);
		if (r % 16 == 0)
			usleep(10);  /* bursts of back-to-back rounds, then a pause */
	}
	return NULL;
}

static void reader_never_sees_a_torn_table(void **state)
{
	struct table *tab = *state;
	struct writer w = { .h = tab->map };
	pthread_t t;
	unsigned ok = 0, torn = 0;

	assert_int_equal(pthread_create(&t, NULL, write_loop, &w), 0);
	/* At least 200,000 reads, and on until 1,000 were whole copies: on a loaded machine
	 * (make check runs beside other suites) the writer can take the reader's core for a
	 * long time, and most reads give up (TORN, a liveness question, not a torn copy).
	 * Bounded at 30 s. */
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long k = 0;; k++) {
		if (k >= 200000 && (ok > 1000 || k % 1024 == 0)) {
			clock_gettime(CLOCK_MONOTONIC, &t1);
			if (ok > 1000 || t1.tv_sec - t0.tv_sec >= 30)
				break;
		}
		int rc = snapshot(tab);
		uint32_t n = tab->n;
		uint64_t ns = tab->ns;
		if (rc == ULS_CONNTAB_TORN) {
			torn++;
			continue;
		}
		assert_int_equal(rc, ULS_CONNTAB_OK);
		if (ns == 0)
			continue;  /* nothing written yet */
		ok++;
		assert_int_equal(n, 1 + ns % CAP);
		assert_int_equal(tab->total, n + 5);
		for (uint32_t i = 0; i < n; i++) {
			assert_int_equal(snap[i].cwnd, (uint32_t)ns);
			assert_int_equal(snap[i].ssthresh, (uint32_t)ns);
			assert_int_equal(snap[i].rtt_us, (uint32_t)ns);
		}
	}
	w.stop = 1;
	pthread_join(t, NULL);
	assert_true(ok > 1000);
	print_message("consistent copies %u, gave up %u, writer rounds %u\n", ok, torn, w.rounds);
}

static void endless_write_and_bad_count_are_refused(void **state)
{
	struct table *t = *state;
	struct uls_conntab_hdr *h = t->map;

	uls_conntab_write_begin(h);
	assert_int_equal(snapshot(t), ULS_CONNTAB_TORN);
	uls_conntab_write_end(h, CAP + 1, CAP + 1, 1);
	assert_int_equal(snapshot(t), ULS_CONNTAB_BAD_HEADER);
	uls_conntab_write_begin(h);
	uls_conntab_write_end(h, 2, 0, 7);  /* a total below the count is raised to it */
	assert_int_equal(snapshot(t), ULS_CONNTAB_OK);
	assert_int_equal(t->n, 2);
	assert_int_equal(t->total, 2);
	assert_int_equal(t->ns, 7);
}

/* A good entry of either family: IPv4 198.18.0.2 to .1, IPv6 2001:db8::2 to ::1. */
static struct uls_conntab_ent good_entry(int family)
{
	struct uls_conntab_ent e = { .family = (uint8_t)family, .lport = 5001, .rport = 40000,
				     .state = ULS_TCP_ESTABLISHED, .snd_wscale = 7, .rcv_wscale = 7,
				     .flags = ULS_CONNTAB_F_WSCALE | ULS_CONNTAB_F_SACK };
	static const uint8_t l6[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 1 };
	static const uint8_t r6[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 2 };

	if (family == AF_INET6) {
		memcpy(e.lip, l6, 16);
		memcpy(e.rip, r6, 16);
	} else {
		ctl_addr_set4(e.lip, htonl(0xc6120001));
		ctl_addr_set4(e.rip, htonl(0xc6120002));
	}
	return e;
}

/* Each family's entry is checked with the same rules: the test runs once per family. */
static void entries_out_of_range_are_refused(void **state)
{
	int family = *(int *)*state;
	struct uls_conntab_ent good = good_entry(family), e;

	assert_true(uls_conntab_ent_ok(&good));
	e = good; e.state = ULS_TCP_LISTEN; assert_false(uls_conntab_ent_ok(&e));
	e = good; e.state = ULS_TCP_STATE_COUNT; assert_false(uls_conntab_ent_ok(&e));
	e = good; e.lport = 0; assert_false(uls_conntab_ent_ok(&e));
	e = good; e.rport = 0; assert_false(uls_conntab_ent_ok(&e));
	e = good; memset(e.rip, 0, 16); assert_false(uls_conntab_ent_ok(&e));
	e = good; memset(e.lip, 0, 16); assert_false(uls_conntab_ent_ok(&e));
	e = good; e.snd_wscale = 15; assert_false(uls_conntab_ent_ok(&e));
	e = good; e.flags = 0x80; assert_false(uls_conntab_ent_ok(&e));
	e = good; e.family = 0; assert_false(uls_conntab_ent_ok(&e));
	e = good; e.family = 17; assert_false(uls_conntab_ent_ok(&e));
	/* The other family's addresses under this family. */
	struct uls_conntab_ent other = good_entry(family == AF_INET ? AF_INET6 : AF_INET);
	e = good; memcpy(e.rip, other.rip, 16); assert_false(uls_conntab_ent_ok(&e));
	e = good; memcpy(e.lip, other.lip, 16); assert_false(uls_conntab_ent_ok(&e));
	if (family == AF_INET) {
		e = good; ctl_addr_set4(e.rip, 0); assert_false(uls_conntab_ent_ok(&e));  /* 0.0.0.0 */
	} else {
		e = good; e.rip[0] = 0xff; assert_false(uls_conntab_ent_ok(&e));  /* multicast */
		e = good; e.lip[0] = 0xff; assert_false(uls_conntab_ent_ok(&e));
	}
	assert_string_equal(uls_tcp_state_name(ULS_TCP_ESTABLISHED), "ESTABLISHED");
	assert_string_equal(uls_tcp_state_name(200), "UNKNOWN");
}

/* A table whose header the process changed: another layout (version 1's IPv4 entries, or
 * another entry size or magic) is refused as such, a changed capacity as a bad header,
 * whatever the entries hold. */
static void table_of_another_version_or_capacity_is_refused(void **state)
{
	struct table *t = *state;
	struct uls_conntab_hdr *h = t->map;

	uls_conntab_write_begin(h);
	uls_conntab_write_end(h, 1, 1, 1);
	assert_int_equal(snapshot(t), ULS_CONNTAB_OK);
	h->version = 1;
	assert_int_equal(snapshot(t), ULS_CONNTAB_BAD_VERSION);
	h->version = ULS_CONNTAB_VERSION;
	h->entry_size = 64;
	assert_int_equal(snapshot(t), ULS_CONNTAB_BAD_VERSION);
	h->entry_size = sizeof(struct uls_conntab_ent);
	h->magic ^= 1;
	assert_int_equal(snapshot(t), ULS_CONNTAB_BAD_VERSION);
	h->magic ^= 1;
	h->capacity = CAP + 1;
	assert_int_equal(snapshot(t), ULS_CONNTAB_BAD_HEADER);
	h->capacity = CAP;
	assert_int_equal(snapshot(t), ULS_CONNTAB_OK);
}

int main(void)
{
	static int fam4 = AF_INET, fam6 = AF_INET6;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(table_is_sealed_and_its_header_checks, table_setup,
						table_teardown),
		cmocka_unit_test_setup_teardown(reader_never_sees_a_torn_table, table_setup,
						table_teardown),
		cmocka_unit_test_setup_teardown(endless_write_and_bad_count_are_refused, table_setup,
						table_teardown),
		cmocka_unit_test_prestate(entries_out_of_range_are_refused, &fam4),
		cmocka_unit_test_prestate(entries_out_of_range_are_refused, &fam6),
		cmocka_unit_test_setup_teardown(table_of_another_version_or_capacity_is_refused,
						table_setup, table_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
