/* libFuzzer target for ulsd's handling of what processes send it: control messages
 * through srv__ctl_input() (server/ctl.c) and what they reach (leases, the port space,
 * filter rules, handoffs, connection tables, STATS), from up to three processes at once,
 * with processes that die and time that passes. ctl_check() alone is fuzz_ctl's.
 *
 * An input is a list of records; the first octet of each says what happens:
 *   bits 0-1  0: process (bits 2-3) % 3 sends the next 128 octets as a message (fewer if
 *                the input ends there); with bit 4 set, the message is made well formed
 *                (magic, version, a known type) and its tuple drawn from a few ports and
 *                two peers, so that processes collide;
 *             1: that process dies (its control connection closes);
 *             2: the next octet x 50 ms pass; custody and handoffs are ticked;
 *             3: the demux thread runs a round (frees dead leases).
 *
 * Oracles besides the sanitizers, after every message:
 *   - every filter rule belongs to a live lease that holds its port, or, for a connection
 *     in transit, to no process and to a handoff of the same tuple (no process can get
 *     frames for a port it does not hold);
 * and at the end, when every process has died and time has passed:
 *   - no rule, handoff, custody entry or lease is left, and every port the input used is
 *     free again (a process's death gives back all it held).
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "netif/ctl/ctl.h"
#include "netif/wire/wire.h"
#include "server/internal.h"
#include "tests/unit/faketap.h"
#include "tests/fuzz/fuzz_srv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NPROC 3

static struct srv_conn *conn[NPROC];
static int app[NPROC] = { -1, -1, -1 };   /* the process's end of its control connection */
static bool used[2][65536];             /* ports the input named or was given */

static const uint32_t peers[2] = { 0x640012c6u, 0x650012c6u };
/* Two IPv6 peers (control protocol 3), 2001:db8::64 and 2001:db8::65. */
static const uint8_t peers6[2][16] = {
	{ 0x20, 0x01, 0x0d, 0xb8, [15] = 0x64 }, { 0x20, 0x01, 0x0d, 0xb8, [15] = 0x65 },
};

/* Read what ulsd answered: the ports it gave, descriptors closed. */
static void drain(int fd)
{
	for (;;) {
		struct ctl_msg r;
		char cbuf[CMSG_SPACE(sizeof(int) * CTL_MAX_FDS)];
		struct iovec iov = { &r, sizeof(r) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
				     .msg_controllen = sizeof(cbuf) };
		ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n <= 0)
			return;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
				continue;
			for (size_t i = 0; i < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
				int got;
				memcpy(&got, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
				close(got);
			}
		}
		if (n == (ssize_t)sizeof(r) && r.status == 0)
			used[r.proto == IPPROTO_UDP][r.lport] = true;
	}
}

static void open_proc(int i)
{
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
	conn[i] = srv__ctl_conn_new(sv[0], 1000 + i, i == 2 ? 1000 : 0);
	CHECK(conn[i] != NULL);
	app[i] = sv[1];
}

static void close_proc(int i)
{
	if (!conn[i])
		return;
	pthread_mutex_lock(&srv.lock);
	srv__ctl_conn_close(&srv, conn[i]);
	pthread_mutex_unlock(&srv.lock);
	conn[i] = NULL;
	drain(app[i]);
	close(app[i]);
	app[i] = -1;
}

static struct srv_lease *lease_of(flt_owner_t id)
{
	return id && id < SRV_MAX_LEASES ? srv.leases.by_id[id] : NULL;
}

static bool in_handoff(const struct flt_rule *r)
{
	for (size_t i = 0; i < srv.nhandoff; i++)
		if (srv.handoff[i].lport == r->lport &&
		    !memcmp(&srv.handoff[i].rip, &r->rip6, sizeof(r->rip6)) &&
		    srv.handoff[i].rport == r->rport)
			return true;
	return false;
}

static int rule_ok(const struct flt_rule *r, void *arg)
{
	(void)arg;
	if (r->owner == SRV_IN_TRANSIT) {
		CHECK(r->kind == FLT_RULE_CONNECTED && in_handoff(r));
		return 0;
	}
	struct srv_lease *l = lease_of(r->owner);
	CHECK(l && !l->dead);
	CHECK(srv__port_held(srv.ports, SRV_OWNER(l), r->proto == WIRE_IPPROTO_UDP ? IPPROTO_UDP : IPPROTO_TCP,
			    r->lport));
	return 0;
}

static int count_rule(const struct flt_rule *r, void *arg)
{
	(void)r;
	(*(unsigned *)arg)++;
	return 0;
}

static void message(int i, const uint8_t *p, size_t n, bool fix)
{
	uint8_t buf[CTL_MSG_SIZE];
	memset(buf, 0, sizeof(buf));
	memcpy(buf, p, n);
	if (fix && n == sizeof(buf)) {
		struct ctl_msg m;
		memcpy(&m, buf, sizeof(m));
		m.magic = CTL_MAGIC;
		m.version = CTL_VERSION;
		m.type = (uint16_t)(1 + m.type % (CTL_TYPE_MAX - 1));
		m.proto = (m.proto & 1) ? IPPROTO_TCP : IPPROTO_UDP;
		m.lport = (m.lport & 3) ? (uint16_t)(5000 + (m.lport & 3)) : 0;
		/* Either family: an IPv4 peer v4-mapped, or an IPv6 one; V6ONLY only with
		 * AF_INET6 (ctl_check refuses the rest, which unfixed inputs cover). */
		m.family = (m.family & 1) ? AF_INET6 : AF_INET;
		if (m.family == AF_INET6)
			ctl_set_rip6(&m, peers6[m.rip[15] & 1]);
		else
			ctl_set_rip4(&m, peers[m.rip[15] & 1]);
		if (m.family != AF_INET6)
			m.flags &= (uint8_t)~CTL_F_V6ONLY;
		m.rport = (uint16_t)(80 + (m.rport & 1));
		if (m.type == CTL_HELLO) {
			m.u.hello.flags = 0;  /* the direct path needs a kernel ulsd has not here */
			m.family = 0;         /* a request carries no address */
			memset(m.rip, 0, sizeof(m.rip));
		}
		memcpy(buf, &m, sizeof(m));
	}
	struct ctl_msg m;
	if (n == sizeof(buf) && ctl_check(buf, (ssize_t)n, &m) == 0 && m.lport)
		used[m.proto == IPPROTO_UDP][m.lport] = true;
	if (!conn[i])
		open_proc(i);
	srv__ctl_input(&srv, conn[i], buf, (ssize_t)n);
	drain(app[i]);
	pthread_mutex_lock(&srv.lock);
	flt_foreach(srv.flt, rule_ok, NULL);
	pthread_mutex_unlock(&srv.lock);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	if (!ready) {
		fuzz_srv_init();
		ready = true;
	}
	memset(used, 0, sizeof(used));
	for (int records = 0; size && records < 32; records++) {
		uint8_t op = data[0];
		int i = (op >> 2) % NPROC;
		data++;
		size--;
		switch (op & 3) {
		case 0: {
			size_t n = size < CTL_MSG_SIZE ? size : CTL_MSG_SIZE;
			message(i, data, n, (op & 0x10) != 0);
			data += n;
			size -= n;
			break;
		}
		case 1:
			close_proc(i);
			break;
		case 2:
			if (size) {
				now_ms += (uint64_t)data[0] * 50;
				data++;
				size--;
			}
			pthread_mutex_lock(&srv.lock);
			srv__custody_run(&srv);
			srv__handoff_tick(&srv);
			pthread_mutex_unlock(&srv.lock);
			break;
		case 3:
			demux_round();
			break;
		}
	}

	/* Every process dies; handoffs expire; custody ends after 2 MSL. */
	for (int i = 0; i < NPROC; i++)
		close_proc(i);
	now_ms += SRV_HANDOFF_MS;
	pthread_mutex_lock(&srv.lock);
	srv__handoff_tick(&srv);
	now_ms += SRV_TIMEWAIT_MS + 1000;
	srv__custody_run(&srv);
	pthread_mutex_unlock(&srv.lock);
	demux_round();
	unsigned rules = 0;
	flt_foreach(srv.flt, count_rule, &rules);
	CHECK(rules == 0);
	CHECK(srv.nhandoff == 0 && srv.custody.n == 0);
	for (uint32_t id = 1; id < SRV_MAX_LEASES; id++)
		CHECK(srv.leases.by_id[id] == NULL);
	/* Every port the input used is free: a new process may bind it. */
	struct srv_lease *probe;
	CHECK(srv__lease_new(&srv, -1, 1, 0, &probe) == 0);
	for (int u = 0; u < 2; u++)
		for (unsigned port = 1; port < 65536; port++) {
			if (!used[u][port])
				continue;
			uint8_t proto = u ? IPPROTO_UDP : IPPROTO_TCP;
			CHECK(srv__port_bind(srv.ports, SRV_OWNER(probe), proto, (uint16_t)port, 0) == (int)port);
			srv__port_release(srv.ports, SRV_OWNER(probe), proto, (uint16_t)port);
		}
	probe->dead = true;
	srv__lease_free(&srv, probe);
	faketap_nsent = 0;
	return 0;
}
