/* What the fuzz targets of ulsd share (fuzz_ulsd, fuzz_node): one struct srv with the fake
 * TAP of tests/unit/faketap.c, IPv4 198.18.0.1/24 and IPv6 2001:db8:0:1::1/64 (and its
 * link-local address), time that the input moves, and one round of the demux thread's loop
 * over the frames injected. Included by one source file of each target. */
#ifndef ULS_TESTS_FUZZ_FUZZ_SRV_H
#define ULS_TESTS_FUZZ_FUZZ_SRV_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netif/wire/wire.h"
#include "server/internal.h"
#include "tests/unit/faketap.h"

/* An oracle that fails names its line (libFuzzer's report then says which). */
#define CHECK(c) do { if (!(c)) fuzz_srv_fail(__FILE__, __LINE__, #c); } while (0)
static _Noreturn void fuzz_srv_fail(const char *file, int line, const char *what)
{
	fprintf(stderr, "%s:%d: CHECK(%s) failed\n", file, line, what);
	abort();
}

static uint64_t now_ms = 1000000;
uint64_t srv__now_ms(void) { return now_ms; }
void srv__log(int level, const char *fmt, ...) { (void)level; (void)fmt; }

static struct srv srv;

static inline void stop_demux(void) { srv.stop = true; }

static inline void fuzz_shed_key(uint8_t key[16])
{
	memset(key, 0x5a, 16);
}

static inline void fuzz_srv_init(void)
{
	memset(&srv, 0, sizeof(srv));
	pthread_mutex_init(&srv.lock, NULL);
	pthread_mutex_init(&srv.tx_lock, NULL);
	pthread_cond_init(&srv.tx_released, NULL);
	srv.flt = flt_table_new();
	srv.ports = srv.flt ? srv__ports_new(srv.flt, &srv.custody, (const uint64_t[2]){ 1, 2 }) : NULL;
	CHECK(srv.ports && srv__reass_init(&srv) == 0);
	srv.tap = faketap();
	/* SYN shedding as ulsd runs it (a fixed key: the fuzzer's input is the attacker) */
	nif_synshed_init(&srv.shed, srv__now_ms, fuzz_shed_key, false);
	srv.ip = 0x010012c6u;
	srv.prefix_len = 24;
	srv.mtu = 1500;
	memcpy(srv.mac, (const uint8_t[]){ 2, 0x75, 0x6c, 0, 0, 1 }, 6);
	/* IPv6 too (ulsd --ip6): frames of type 86dd reach server/reply6.c. */
	srv.has_ip6 = true;
	memcpy(srv.ip6, (const uint8_t[]){ 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, [15] = 1 }, 16);
	srv.ip6_plen = 64;
	wire_ipv6_link_local(srv.ip6_ll, srv.mac);
	flt_table_set_node_ip6(srv.flt, srv.ip6, srv.ip6_ll);
	faketap_rx_done = stop_demux;
}

static inline void demux_round(void)
{
	srv.stop = false;
	srv.leases.changed = true;
	srv__demux_thread(&srv);
	srv.stop = false;
}

#endif
