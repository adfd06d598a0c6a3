/* The ulsd of the fuzz targets fuzz_ulsd and fuzz_node (fuzz_srv.h). */
#include "tests/fuzz/fuzz_srv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netif/wire/wire.h"
#include "tests/unit/faketap.h"

_Noreturn void fuzz_srv_fail(const char *file, int line, const char *what)
{
	fprintf(stderr, "%s:%d: CHECK(%s) failed\n", file, line, what);
	abort();
}

uint64_t now_ms = 1000000;
uint64_t srv__now_ms(void) { return now_ms; }
void srv__log(int level, const char *fmt, ...) { (void)level; (void)fmt; }

struct srv srv;

static void stop_demux(void) { srv.stop = true; }

static void fuzz_shed_key(uint8_t key[16])
{
	memset(key, 0x5a, 16);
}

void fuzz_srv_init(void)
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

void demux_round(void)
{
	srv.stop = false;
	srv.leases.changed = true;
	srv__demux_thread(&srv);
	srv.stop = false;
}
