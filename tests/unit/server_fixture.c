/* The fixture of ulsd's unit tests (test_server.c, test_server_ctl.c): one struct srv with
 * the rest of ulsd as it is and only the TAP replaced by a fake one (tests/unit/faketap.c)
 * that records what ulsd sends and hands the demux thread the frames a test injects. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <netinet/in.h>

#include "netif/ctl/ctl.h"
#include "netif/dev.h"
#include "netif/ring.h"
#include "netif/tap.h"
#include "server/internal.h"
#include "faketap.h"
#include "server_fixture.h"

/* ---- What ulsd.c gives the other files ------------------------------------------------ */

uint64_t now_ms = 1000000;
uint64_t srv__now_ms(void) { return __atomic_load_n(&now_ms, __ATOMIC_RELAXED); }
void srv__log(int level, const char *fmt, ...) { (void)level; (void)fmt; }
static void shed_key(uint8_t key[16]) { memset(key, 0x5a, 16); }

/* ---- The TAP (tests/unit/faketap.c) -------------------------------------------------- */

struct srv srv;

static void stop_demux(void)
{
	srv.stop = true;
}

/* One round of the demux thread's loop over the frames given. */
void demux(const struct frame *f, unsigned n)
{
	const uint8_t *frames[64];
	size_t lens[64];
	for (unsigned i = 0; i < n && i < 64; i++) {
		frames[i] = f[i].b;
		lens[i] = f[i].len;
	}
	faketap_inject(frames, lens, n);
	faketap_rx_done = stop_demux;
	srv.stop = false;
	srv__demux_thread(&srv);
	srv.stop = false;
}

/* ---- Fixtures ------------------------------------------------------------------------- */

int setup(void **state)
{
	(void)state;
	memset(&srv, 0, sizeof(srv));
	pthread_mutex_init(&srv.lock, NULL);
	pthread_mutex_init(&srv.tx_lock, NULL);
	pthread_cond_init(&srv.tx_released, NULL);
	srv.flt = flt_table_new();
	srv.tap = faketap();
	srv.ip = NODE_IP;
	srv.prefix_len = 24;
	srv.mtu = 1500;
	srv.datapath = SRV_DP_AUTO;
	memcpy(srv.mac, node_mac, 6);
	srv.rst_tokens = 2000;
	srv.icmp_tokens = 100;
	srv.rst_tokens_ms = srv.icmp_tokens_ms = now_ms;
	nif_synshed_init(&srv.shed, srv__now_ms, shed_key, false);
	nsent = 0;
	srv.ports = srv.flt ? srv__ports_new(srv.flt, &srv.custody, (const uint64_t[2]){ 1, 2 }) : NULL;
	return srv.ports && srv__reass_init(&srv) == 0 ? 0 : -1;
}

/* Frees every lease through the demux thread's own path (sync_leases). */
int teardown(void **state)
{
	(void)state;
	/* Handoffs left unclaimed expire: the ports they hold are released. */
	now_ms += SRV_HANDOFF_MS;
	srv__handoff_tick(&srv);
	for (uint32_t i = 1; i < SRV_MAX_LEASES; i++)
		if (srv.leases.by_id[i] && !srv.leases.by_id[i]->dead)
			srv__lease_end(&srv, srv.leases.by_id[i]);
	srv.leases.changed = true;
	demux(NULL, 0);
	for (uint32_t i = 1; i < SRV_MAX_LEASES; i++)
		assert_null(srv.leases.by_id[i]);
	flt_table_free(srv.flt);
	srv__custody_free(&srv.custody);
	srv__ports_free(srv.ports);
	free(srv.handoff);
	free(srv.reass);
	nif_synshed_free(&srv.shed);
	return 0;
}

struct srv_lease *new_lease(uid_t uid)
{
	struct srv_lease *l;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	close(sv[1]);
	assert_int_equal(srv__lease_new(&srv, sv[0], 4242, uid, &l), 0);
	return l;
}

/* A TCP connection of lease l from lport to the peer's port 80 (BIND, then CONNECT). */
int connected(struct srv_lease *l, uint16_t lport)
{
	int rc = srv__port_bind(srv.ports, SRV_OWNER(l), IPPROTO_TCP, lport, 0);
	return rc < 0 ? rc : srv__port_connect(srv.ports, SRV_OWNER(l), lport, PEER_IP, 80);
}

const uint8_t *tcp_of(const uint8_t *f) { return f + 14 + (f[14] & 0x0f) * 4; }
uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3]; }
uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

flt_owner_t owner_of(uint16_t lport, uint16_t rport)
{
	struct fspec fs = { .sport = rport, .dport = lport };
	struct frame f;
	struct flt_pkt p;
	build(&f, &fs);
	assert_int_equal(flt_parse(f.b, f.len, &p), 0);
	return flt_lookup_rx(srv.flt, &p);
}
