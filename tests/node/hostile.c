/* hostile: a process on a node that does not play by libuls's rules. It speaks the control
 * protocol itself and writes raw frames into its own transmit path, to show that ulsd's
 * filter and the kernel's transmit check (not the good manners of libuls) isolate
 * processes. Used by tests/node. The commands that work on its io_urings and its connection
 * table (rings, cancel, badring, conntab) are in hostile_rings.c.
 *
 * Its lease is on the direct data path when ulsd grants it (it offers two io_urings, as
 * libuls does, unless ULS_DATAPATH=relay), else on the relay's rings. It says which on
 * stderr: "hostile: lease direct queue Q" or "hostile: lease relay". With HOSTILE_HOLD=S
 * in its environment it keeps its lease S seconds after the command (printing "holding"),
 * so that a test can read its queue's figures.
 *
 *   hostile CTL bind PROTO PORT          try to take a port; prints "ok PORT" or "errno N"
 *   hostile CTL forge SRCPORT DSTIP DSTPORT COUNT
 *                                        send COUNT TCP segments from SRCPORT (another
 *                                        process's endpoint) to DSTIP:DSTPORT; prints how
 *                                        many it queued
 *   hostile CTL gso DSTIP DSTPORT COUNT  on a connection's tuple it installed, COUNT super-segments
 *                                        (2,896 octets of data, gso_size 1,448, checksum
 *                                        partial) to DSTIP:DSTPORT, whatever the node's
 *                                        offload (its device is opened with full offload
 *                                        even on a node with checksum offload alone);
 *                                        prints "queued N"
 *   hostile CTL spoofip COUNT            send COUNT frames with a foreign source address
 *   hostile CTL spoof COUNT VICTIMPORT DSTIP DSTPORT
 *                                        COUNT frames of each forgery (source MAC, source
 *                                        address, VICTIMPORT as TCP source port, ARP with a
 *                                        foreign sender, IP protocol 47), then COUNT UDP
 *                                        datagrams from a port it holds to DSTIP:DSTPORT
 *                                        (the control: these may pass); prints
 *                                        "queued KIND N" per kind
 *   hostile CTL spoof6 COUNT NODEIP6 DSTIP6 DSTPORT
 *                                        IPv6 (the node's address NODEIP6: HELLO does not
 *                                        say it yet), COUNT frames of each forgery: a
 *                                        foreign source address (src_ip), the node's
 *                                        address from a UDP port it holds for IPv4 only
 *                                        (port), Next Header 47 (proto), a Router
 *                                        Advertisement (icmp) and a Neighbor Solicitation
 *                                        with another's link-layer address (nd), then
 *                                        COUNT echo requests to DSTIP6 (the control: these
 *                                        pass); prints "queued KIND N" per kind
 *   hostile CTL listen SECONDS           count frames delivered to us meanwhile, by IP
 *                                        protocol; prints "frames N tcp N arp N"
 *   hostile CTL sink PORT SECONDS [EXPECT]
 *                                        bind UDP PORT, print "ready", count frames until
 *                                        SECONDS pass (or 300 ms after EXPECT of ours);
 *                                        prints "frames N mine N foreign N arp N"
 *   hostile CTL churn CHILDREN PARALLEL PORTBASE LIFE_MS
 *                                        CHILDREN short-lived processes, PARALLEL at a time,
 *                                        each with a lease of its own: bind a UDP port
 *                                        (slot k alternates between PORTBASE+2k and
 *                                        PORTBASE+2k+1), count frames for LIFE_MS, exit;
 *                                        prints "children N direct N failed N mine N
 *                                        foreign N got_own N queues N seconds S"
 *   hostile CTL rings                    (direct) try what the restricted rings refuse and
 *                                        look for TAP descriptors; prints one line each
 *   hostile CTL cancel SECONDS           (direct) IORING_OP_ASYNC_CANCEL, which ulsd allows
 *                                        for libuls's close: first the control, a read of
 *                                        its own queue cancelled from the other ring
 *                                        (cross_ring) and from its own by user_data, ANY,
 *                                        fixed file 0 and opcode (own_data, own_any,
 *                                        own_fd, own_op), "NAME CANCEL_RES READ_RES" each,
 *                                        and IORING_REGISTER_SYNC_CANCEL ("sync_cancel
 *                                        R"); prints "ready"; then for SECONDS (or until
 *                                        SIGINT), on both rings, cancellations aimed at another process's
 *                                        requests: by every user_data libuls gives its
 *                                        reads and writes, ANY, by fixed file 0-3 and by
 *                                        opcode; prints "aimed N found N none N ebadf N
 *                                        other N"
 *   hostile CTL badring KIND WHICH       offer rings of which ring WHICH (0 receive, 1
 *                                        transmit) was first tampered with: KIND enabled,
 *                                        restricted (restrictions of its own), files (a file
 *                                        of its own registered) or none (the control);
 *                                        prints "datapath direct|relay", then, refused at
 *                                        ring 1, what ring 0 (which ulsd had taken first)
 *                                        can do once the process enables it itself:
 *                                        "enable R" and "queue_write R" (a frame to fixed
 *                                        file 0, the queue ulsd had registered)
 *   hostile CTL garbage                  send malformed control messages; prints each reply
 *   hostile CTL release LPORT RIP RPORT  claim another process's connection is gone, and
 *                                        its port: RELEASE and UNBIND; prints each reply
 *   hostile CTL steal LPORT RIP RPORT    try to move another process's connection: HANDOFF
 *                                        it, and CLAIM it with a guessed nonce; prints each
 *                                        reply
 *   hostile CTL conntab KIND SECONDS     ask for a connection table and write nonsense into
 *                                        it for SECONDS: KIND entries (one good entry, for
 *                                        198.18.0.99:7, and four out of range or not from
 *                                        the node's address), count (a count beyond the
 *                                        capacity), version (the header's version set to
 *                                        1) or torn (a write that never ends); first
 *                                        tries to resize the sealed table and
 *                                        prints "truncate errno N", then "ready"
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "netif/chksum.h"
#include "netif/conntab.h"
#include "netif/ctl/ctl.h"
#include "netif/qring.h"
#include "netif/ring.h"
#include "netif/ringdev.h"
#include "netif/vnet.h"
#include "tests/node/forge.h"
#include "tests/node/hostile.h"

int hostile_ctl = -1;
struct ctl_hello hostile_node;
struct nif_dev *hostile_dev;
struct nif_qring_prep hostile_qp;
bool hostile_direct;
unsigned hostile_queue;
uint32_t hostile_seq = 1;

int hostile_ctl_connect(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);

	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		perror("hostile: connect");
		exit(1);
	}
	return fd;
}

/* One request, one reply; up to nfds descriptors (how many came: *got). */
int hostile_call_fds(struct ctl_msg *m, int *fds, int nfds, int *got)
{
	char cbuf[CMSG_SPACE(sizeof(int) * CTL_MAX_FDS)];
	struct iovec iov = { m, sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };

	if (got)
		*got = 0;
	if (send(hostile_ctl, m, sizeof(*m), 0) != sizeof(*m))
		return -errno;
	if (recvmsg(hostile_ctl, &mh, 0) != sizeof(*m))
		return -EPROTO;
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	if (nfds && c && c->cmsg_type == SCM_RIGHTS) {
		int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		if (n > nfds)
			n = nfds;
		memcpy(fds, CMSG_DATA(c), sizeof(int) * (size_t)n);
		if (got)
			*got = n;
	}
	return m->status;
}

int hostile_call(struct ctl_msg *m)
{
	return hostile_call_fds(m, NULL, 0, NULL);
}

static bool offer_direct(void)
{
	const char *e = getenv("ULS_DATAPATH");

	return !(e && !strcmp(e, "relay"));
}

/* HELLO, offering the direct path as libuls does. keep_rings: leave a direct lease's rings
 * as they are (the `rings` command works on them itself); else open the device. Returns
 * 0, or -errno (quiet: the churn's children count failures). */
static int lease_open(const char *path, bool keep_rings)
{
	struct ctl_msg m;
	int fds[3], got, rc;

	hostile_ctl = hostile_ctl_connect(path);
	ctl_init(&m, CTL_HELLO, hostile_seq++);
	m.u.hello.ring_fd[0] = m.u.hello.ring_fd[1] = -1;
	if (offer_direct() && nif_qring_prepare(&hostile_qp) == 0) {
		m.u.hello.ring_fd[0] = nif_qring_fd(&hostile_qp, 0);
		m.u.hello.ring_fd[1] = nif_qring_fd(&hostile_qp, 1);
		m.u.hello.flags |= CTL_HELLO_F_RINGS;
		/* The multishot read of the queue too, as libuls asks for it. */
		if (hostile_qp.mshot)
			m.u.hello.flags |= CTL_HELLO_F_MSHOT;
	}
	rc = hostile_call_fds(&m, fds, 3, &got);
	if (rc < 0)
		return rc;
	hostile_node = m.u.hello;
	if (!(hostile_node.flags & CTL_HELLO_F_MSHOT))
		hostile_qp.mshot = false;
	bool offload = (hostile_node.flags & CTL_HELLO_F_OFFLOAD) != 0;
	if (hostile_node.datapath == CTL_DP_DIRECT && hostile_qp.made) {
		hostile_direct = true;
		hostile_queue = hostile_node.queue;
		return keep_rings ? 0 : nif_qring_open(&hostile_dev, &hostile_qp, hostile_node.mtu, offload, hostile_ctl,
						       eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), false);
	}
	nif_qring_discard(&hostile_qp);
	if (got != 3)
		return -EPROTO;
	return nif_ringdev_open(&hostile_dev, hostile_node.mtu, offload, fds[0], fds[1], fds[2], hostile_ctl);
}

static void lease(const char *path, bool keep_rings)
{
	int rc = lease_open(path, keep_rings);

	if (rc < 0) {
		fprintf(stderr, "hostile: no lease: %s\n", strerror(-rc));
		exit(1);
	}
	if (hostile_direct)
		fprintf(stderr, "hostile: lease direct queue %u\n", hostile_queue);
	else
		fprintf(stderr, "hostile: lease relay\n");
}

static int bind_port(uint8_t proto, uint16_t port)
{
	struct ctl_msg m;

	ctl_init(&m, CTL_BIND, hostile_seq++);
	m.family = AF_INET;
	m.proto = proto;
	m.lport = port;
	int rc = hostile_call(&m);
	return rc < 0 ? rc : m.lport;
}

static bool send_one(const uint8_t *frame, size_t len)
{
	uint8_t *slot = hostile_dev->ops->tx_slot(hostile_dev, len);

	if (!slot)
		return false;
	memcpy(slot, frame, len);
	return hostile_dev->ops->tx_queue(hostile_dev, slot, len, 0) == 0;
}

/* Let the frames leave (ulsd drains a relay ring; io_uring completes a direct queue's
 * writes) before the lease ends. */
static void settle(void)
{
	hostile_dev->ops->tx_flush(hostile_dev);
	usleep(200000);
	hostile_dev->ops->tx_flush(hostile_dev);
}

static void send_frames(const uint8_t *smac, uint32_t src, uint16_t sport, uint32_t dst,
			uint16_t dport, int count)
{
	uint8_t f[64];
	int queued = 0;

	for (int i = 0; i < count; i++)
		if (send_one(f, forge_tcp_rst(f, smac, src, sport, dst, dport)))
			queued++;
	settle();
	printf("queued %d\n", queued);
}

/* A TCP super-segment from the node's address: ACK, 2 x 1,448 octets of data, DF. */
static size_t tcp_super_segment(uint8_t *f, uint32_t src, uint16_t sport, uint32_t dst,
				uint16_t dport)
{
	const size_t data = 2 * 1448;
	uint8_t *tcp = forge_ip(f, hostile_node.mac, src, dst, IPPROTO_TCP, 20 + data);

	f[14 + 6] = 0x40;   /* DF: TSO segments carry it, and the IPv4 header sum skips it */
	uint16_t c = 0;
	memcpy(f + 14 + 10, &c, 2);
	c = (uint16_t)~nif_inet_chksum(f + 14, 20);
	memcpy(f + 14 + 10, &c, 2);
	memset(tcp, 0, 20 + data);
	forge_put16(tcp, sport);
	forge_put16(tcp + 2, dport);
	tcp[12] = 5 << 4;
	tcp[13] = 0x10;
	forge_put16(tcp + 14, 65535);
	return 14 + 20 + 20 + data;
}

static int send_super_segments(uint32_t dst, uint16_t dport, int count)
{
	static uint8_t f[4096];
	struct ctl_msg m;
	int queued = 0;

	/* Its own connection's tuple (what libuls's connect installs), so that only the
	 * frame's size can be held against it. */
	ctl_init(&m, CTL_CONNECT, hostile_seq++);
	m.family = AF_INET;
	m.proto = IPPROTO_TCP;
	ctl_set_rip4(&m, dst);
	m.rport = dport;
	int rc = hostile_call(&m), own = m.lport;
	if (rc < 0 || own <= 0) {
		fprintf(stderr, "hostile: gso: connect: %d\n", rc);
		return 1;
	}
	for (int i = 0; i < count; i++) {
		size_t len = tcp_super_segment(f, hostile_node.addr, (uint16_t)own, dst, dport);
		uint8_t *slot = hostile_dev->ops->tx_slot(hostile_dev, len);
		if (!slot)
			continue;
		memcpy(slot, f, len);
		queued += hostile_dev->ops->tx_queue(hostile_dev, slot, len,
						     NIF_OFF_CSUM_PARTIAL | 1448u) == 0;
	}
	settle();
	printf("queued %d\n", queued);
	return 0;
}

double hostile_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

struct tally {
	unsigned long frames, tcp, arp, mine, foreign;
	uint16_t port;          /* ours (UDP), 0: none */
};

static void count_frame(void *arg, const uint8_t *f, size_t len, uint32_t off)
{
	struct tally *t = arg;

	(void)off;
	t->frames++;
	if (len >= 14 && f[12] == 0x08 && f[13] == 0x06) {
		t->arp++;
		return;
	}
	if (len > 23 && f[12] == 0x08 && f[13] == 0 && f[23] == IPPROTO_TCP)
		t->tcp++;
	size_t ihl = len > 14 ? (size_t)(f[14] & 0xf) * 4 : 0;
	if (t->port && len >= 14 + ihl + 8 && f[12] == 0x08 && f[13] == 0 &&
	    f[23] == IPPROTO_UDP && !memcmp(f + 30, &hostile_node.addr, 4) &&
	    (f[14 + ihl + 2] << 8 | f[14 + ihl + 3]) == t->port)
		t->mine++;
	else
		t->foreign++;
}

/* Count what arrives for `secs` seconds; with expect > 0, stop 300 ms after that many
 * frames of ours. */
static void count_for(struct tally *t, double secs, unsigned long expect)
{
	struct timespec t0, done = { 0, 0 };

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (hostile_since(&t0) < secs) {
		if (hostile_dev->ops->wait(hostile_dev, 5) < 0)
			break;
		hostile_dev->ops->rx(hostile_dev, count_frame, t, 256);
		if (expect && t->mine >= expect) {
			if (!done.tv_sec && !done.tv_nsec)
				clock_gettime(CLOCK_MONOTONIC, &done);
			else if (hostile_since(&done) > 0.3)
				break;
		}
	}
}

/* One child of the churn: its own lease, a port, LIFE_MS of counting. */
struct child_res {
	int ok, direct;
	unsigned queue;
	unsigned long mine, foreign;
};

static struct child_res churn_child(const char *ctl, uint16_t port, int life_ms)
{
	struct child_res r = { 0 };
	struct tally t = { .port = port };
	int rc = lease_open(ctl, false);

	for (int tries = 0; rc >= 0 && tries < 50; tries++) {
		rc = bind_port(IPPROTO_UDP, port);
		if (rc != -EADDRINUSE)
			break;
		usleep(2000);  /* the previous holder's lease is still ending */
	}
	if (rc < 0)
		return r;
	count_for(&t, life_ms / 1000.0, 0);
	r.ok = 1;
	r.direct = hostile_direct;
	r.queue = hostile_queue;
	r.mine = t.mine;
	r.foreign = t.foreign;
	return r;
}

static int churn(const char *ctl, int children, int parallel, int portbase, int life_ms)
{
	pid_t pid[64] = { 0 };
	int pipes[64][2], next_in_slot[64] = { 0 };
	unsigned long mine = 0, foreign = 0, got_own = 0, ndirect = 0, failed = 0, done = 0;
	bool qseen[256] = { false };
	unsigned nq = 0;
	struct timespec t0;
	int started = 0;

	if (parallel < 1 || parallel > 64 || children < 1) {
		fprintf(stderr, "hostile: churn: 1..64 at a time\n");
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (done < (unsigned long)children) {
		for (int k = 0; k < parallel && started < children; k++) {
			if (pid[k])
				continue;
			if (pipe(pipes[k]) < 0)
				return 1;
			uint16_t port = (uint16_t)(portbase + 2 * k + (next_in_slot[k]++ & 1));
			pid[k] = fork();
			if (pid[k] < 0)
				return 1;
			if (pid[k] == 0) {
				close(pipes[k][0]);
				struct child_res r = churn_child(ctl, port, life_ms);
				if (write(pipes[k][1], &r, sizeof(r)) != sizeof(r))
					_exit(1);
				_exit(0);
			}
			close(pipes[k][1]);
			started++;
		}
		int st;
		pid_t w = wait(&st);
		if (w < 0)
			return 1;
		for (int k = 0; k < parallel; k++) {
			if (pid[k] != w)
				continue;
			struct child_res r = { 0 };
			if (read(pipes[k][0], &r, sizeof(r)) != sizeof(r) || !r.ok) {
				failed++;
			} else {
				mine += r.mine;
				foreign += r.foreign;
				got_own += r.mine > 0;
				ndirect += r.direct != 0;
				if (r.direct && r.queue < 256 && !qseen[r.queue]) {
					qseen[r.queue] = true;
					nq++;
				}
			}
			close(pipes[k][0]);
			pid[k] = 0;
			done++;
		}
	}
	printf("children %d direct %lu failed %lu mine %lu foreign %lu got_own %lu queues %u "
	       "seconds %.2f\n", children, ndirect, failed, mine, foreign, got_own, nq, hostile_since(&t0));
	return 0;
}

static void hold(void)
{
	const char *h = getenv("HOSTILE_HOLD");

	if (!h || !*h)
		return;
	printf("holding\n");
	fflush(stdout);
	usleep((useconds_t)(atof(h) * 1e6));
}

/* release and steal: the TCP connection named by three arguments, LPORT RIP RPORT. */
static void tcp_tuple_of(struct ctl_msg *m, char **a)
{
	uint32_t rip = 0;

	inet_pton(AF_INET, a[1], &rip);
	m->proto = IPPROTO_TCP;
	m->lport = (uint16_t)atoi(a[0]);
	ctl_set_rip4(m, rip);
	m->rport = (uint16_t)atoi(a[2]);
}

/* spoof and spoof6: frames of six kinds a process must not send, count of each. */
struct spoof {
	int own;                /* the UDP port the hostile process holds */
	uint16_t victim, dport; /* another's port (IPv4); the destination port */
	uint32_t dst;           /* IPv4 destination */
	uint8_t me[16], dst6[16], other6[16];
};

static const uint8_t other_mac[6] = { 0x02, 0x75, 0x6c, 0x00, 0x00, 0x63 };
static const char *const spoof4_kinds[6] = { "src_mac", "src_ip", "port", "arp", "proto",
					      "control" };
static const char *const spoof6_kinds[6] = { "src_ip", "port", "proto", "icmp", "nd",
					      "control" };

static size_t spoof4_frame(int k, const struct spoof *s, uint8_t *f)
{
	uint16_t own = (uint16_t)s->own;

	if (k == 0)
		return forge_tcp_rst(f, other_mac, hostile_node.addr, own, s->dst, s->dport);
	if (k == 1)
		return forge_tcp_rst(f, hostile_node.mac, htonl(0xc6120063), own, s->dst, s->dport);
	if (k == 2) {
		/* Every other one a UDP datagram from the victim's port behind IP options
		 * that read as a port we hold (FORGE_NOP_PORT, bound by "spoof") where the
		 * transmit check's one-read peek has the ports of a header without options
		 * (filter/datapath.bpf.c): it must see the victim's port all the same. */
		static unsigned n;
		if (n++ % 2)
			return forge_udp_behind_nops(f, hostile_node.mac, hostile_node.addr,
						     s->victim, s->dst, s->dport);
		return forge_tcp_rst(f, hostile_node.mac, hostile_node.addr, s->victim, s->dst, s->dport);
	}
	if (k == 3)
		return forge_arp(f, hostile_node.mac, s->dst, s->dst);
	if (k == 4) {
		memset(forge_ip(f, hostile_node.mac, hostile_node.addr, s->dst, 47, 8), 0, 8);
		return 14 + 20 + 8;
	}
	return forge_udp(f, hostile_node.mac, hostile_node.addr, own, s->dst, s->dport);
}

static size_t spoof6_frame(int k, const struct spoof *s, uint8_t *f)
{
	uint8_t *p;

	if (k == 0)
		return forge_tcp6_rst(f, hostile_node.mac, s->other6, (uint16_t)s->own, s->dst6, s->dport);
	if (k == 1) {
		p = forge_ip6(f, hostile_node.mac, forge_bcast, s->me, s->dst6, IPPROTO_UDP, 16);
		memset(p, 0, 16);
		forge_put16(p, (uint16_t)s->own);
		forge_put16(p + 2, s->dport);
		forge_put16(p + 4, 16);
		return 14 + 40 + 16;
	}
	if (k == 2) {
		memset(forge_ip6(f, hostile_node.mac, forge_bcast, s->me, s->dst6, 47, 8), 0, 8);
		return 14 + 40 + 8;
	}
	if (k == 3) {
		/* RFC 4861 §4.2: a router's announcement is nobody's on a node. */
		p = forge_ip6(f, hostile_node.mac, forge_bcast, s->me, s->dst6, 58, 16);
		memset(p, 0, 16);
		p[0] = 134;
		return 14 + 40 + 16;
	}
	if (k == 4) {
		/* §4.3: a solicitation naming another's link-layer address, which the
		 * neighbour would cache for the node. */
		p = forge_ip6(f, hostile_node.mac, forge_bcast, s->me, s->dst6, 58, 32);
		memset(p, 0, 32);
		p[0] = 135;
		memcpy(p + 8, s->dst6, 16);
		p[24] = 1;
		p[25] = 1;
		memcpy(p + 26, other_mac, 6);
		return 14 + 40 + 32;
	}
	p = forge_ip6(f, hostile_node.mac, forge_bcast, s->me, s->dst6, 58, 16);
	memset(p, 0, 16);
	p[0] = 128;
	return 14 + 40 + 16;
}

/* Holds a UDP port of its own (s->own), then queues count frames of each kind and prints
 * "queued KIND N" for each; 1 when the port cannot be had. */
static int spoof_each(const char *cmd, const char *const kinds[6], int count,
		      size_t (*frame)(int k, const struct spoof *s, uint8_t *f), struct spoof *s)
{
	uint8_t f[128];

	s->own = bind_port(IPPROTO_UDP, 0);
	if (s->own <= 0) {
		fprintf(stderr, "hostile: %s: bind: %d\n", cmd, s->own);
		return 1;
	}
	for (int k = 0; k < 6; k++) {
		int queued = 0;
		for (int i = 0; i < count; i++)
			queued += send_one(f, frame(k, s, f));
		printf("queued %s %d\n", kinds[k], queued);
	}
	return 0;
}

static int run(int argc, char **argv)
{
	const char *ctl = argv[1], *cmd = argv[2];

	if (!strcmp(cmd, "churn") && argc == 7)
		return churn(ctl, atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]));
	if (!strcmp(cmd, "badring") && argc == 5)
		return hostile_badring(ctl, argv[3], atoi(argv[4]));
	if (!strcmp(cmd, "cancel") && argc == 4) {
		lease(ctl, true);
		return hostile_cancel(atof(argv[3]));
	}
	if (!strcmp(cmd, "rings") && argc == 4) {
		uint32_t target;
		lease(ctl, true);
		inet_pton(AF_INET, argv[3], &target);
		return hostile_rings(target);
	}
	lease(ctl, false);
	if (!strcmp(cmd, "bind") && argc == 5) {
		int rc = bind_port(!strcmp(argv[3], "udp") ? IPPROTO_UDP : IPPROTO_TCP,
				   (uint16_t)atoi(argv[4]));
		if (rc < 0)
			printf("errno %d\n", -rc);
		else
			printf("ok %d\n", rc);
		return 0;
	}
	if (!strcmp(cmd, "forge") && argc == 7) {
		uint32_t dst;
		inet_pton(AF_INET, argv[4], &dst);
		send_frames(hostile_node.mac, hostile_node.addr, (uint16_t)atoi(argv[3]), dst, (uint16_t)atoi(argv[5]),
			    atoi(argv[6]));
		return 0;
	}
	if (!strcmp(cmd, "gso") && argc == 6) {
		uint32_t dst;
		inet_pton(AF_INET, argv[3], &dst);
		return send_super_segments(dst, (uint16_t)atoi(argv[4]), atoi(argv[5]));
	}
	if (!strcmp(cmd, "spoofip") && argc == 4) {
		send_frames(hostile_node.mac, htonl(0xc6120063), 40000, htonl(0xc6120064), 5001, atoi(argv[3]));
		return 0;
	}
	if (!strcmp(cmd, "spoof") && argc == 7) {
		struct spoof sp = { .victim = (uint16_t)atoi(argv[4]),
				    .dport = (uint16_t)atoi(argv[6]) };
		inet_pton(AF_INET, argv[5], &sp.dst);
		int rc = bind_port(IPPROTO_UDP, FORGE_NOP_PORT);
		if (rc != FORGE_NOP_PORT) {
			fprintf(stderr, "hostile: spoof: bind of UDP port %d: %d\n", FORGE_NOP_PORT, rc);
			return 1;
		}
		if (spoof_each("spoof", spoof4_kinds, atoi(argv[3]), spoof4_frame, &sp))
			return 1;
		printf("own_port %d\n", sp.own);
		settle();
		hold();
		return 0;
	}
	if (!strcmp(cmd, "spoof6") && argc == 7) {
		struct spoof sp = { .dport = (uint16_t)atoi(argv[6]) };
		if (inet_pton(AF_INET6, argv[4], sp.me) != 1 ||
		    inet_pton(AF_INET6, argv[5], sp.dst6) != 1) {
			fprintf(stderr, "hostile: spoof6: bad address\n");
			return 1;
		}
		memcpy(sp.other6, sp.me, 16);
		sp.other6[15] ^= 0x5a;
		if (spoof_each("spoof6", spoof6_kinds, atoi(argv[3]), spoof6_frame, &sp))
			return 1;
		settle();
		return 0;
	}
	if (!strcmp(cmd, "listen") && argc == 4) {
		struct tally t = { 0 };
		count_for(&t, atof(argv[3]), 0);
		printf("frames %lu tcp %lu arp %lu\n", t.frames, t.tcp, t.arp);
		return 0;
	}
	if (!strcmp(cmd, "sink") && (argc == 5 || argc == 6)) {
		struct tally t = { .port = (uint16_t)atoi(argv[3]) };
		int rc = bind_port(IPPROTO_UDP, t.port);
		if (rc < 0) {
			printf("errno %d\n", -rc);
			return 1;
		}
		printf("ready\n");
		fflush(stdout);
		count_for(&t, atof(argv[4]), argc == 6 ? strtoul(argv[5], NULL, 10) : 0);
		printf("frames %lu mine %lu foreign %lu arp %lu\n", t.frames, t.mine, t.foreign, t.arp);
		return 0;
	}
	if (!strcmp(cmd, "release") && argc == 6) {
		struct ctl_msg m;
		ctl_init(&m, CTL_RELEASE, hostile_seq++);
		tcp_tuple_of(&m, argv + 3);
		printf("release status %d\n", hostile_call(&m));
		ctl_init(&m, CTL_UNBIND, hostile_seq++);
		m.family = AF_INET;
		m.proto = IPPROTO_TCP;
		m.lport = (uint16_t)atoi(argv[3]);
		printf("unbind status %d\n", hostile_call(&m));
		return 0;
	}
	if (!strcmp(cmd, "steal") && argc == 6) {
		struct ctl_msg m;
		enum ctl_type types[2] = { CTL_HANDOFF, CTL_CLAIM };
		for (int i = 0; i < 2; i++) {
			ctl_init(&m, types[i], hostile_seq++);
			tcp_tuple_of(&m, argv + 3);
			m.u.handoff.nonce = 0x0123456789abcdefull;
			printf("%s status %d\n", i ? "claim" : "handoff", hostile_call(&m));
		}
		return 0;
	}
	if (!strcmp(cmd, "conntab") && argc == 5)
		return hostile_bad_conntab(argv[3], atof(argv[4]));
	fprintf(stderr, "hostile: bad command\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: see the header of hostile.c\n");
		return 2;
	}
	if (!strcmp(argv[2], "garbage")) {
		uint8_t buf[256];
		struct ctl_msg m;
		hostile_ctl = hostile_ctl_connect(argv[1]);
		struct { const char *name; size_t len; uint32_t magic; uint16_t version, type; } cases[] = {
			{ "truncated", 20, CTL_MAGIC, CTL_VERSION, CTL_BIND },
			{ "oversized", 200, CTL_MAGIC, CTL_VERSION, CTL_BIND },
			{ "bad_magic", sizeof(m), 0x12345678, CTL_VERSION, CTL_BIND },
			{ "bad_version", sizeof(m), CTL_MAGIC, 99, CTL_BIND },
			{ "unknown_type", sizeof(m), CTL_MAGIC, CTL_VERSION, 999 },
			{ "before_hello", sizeof(m), CTL_MAGIC, CTL_VERSION, CTL_CONNECT },
		};
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			memset(buf, 0, sizeof(buf));
			ctl_init(&m, (enum ctl_type)cases[i].type, (uint32_t)i + 1);
			m.magic = cases[i].magic;
			m.version = cases[i].version;
			m.proto = IPPROTO_TCP;
			ctl_set_rip4(&m, htonl(0xc6120064));
			m.rport = 80;
			memcpy(buf, &m, sizeof(m));
			send(hostile_ctl, buf, cases[i].len, 0);
			struct pollfd p = { hostile_ctl, POLLIN, 0 };
			if (poll(&p, 1, 2000) != 1 || recv(hostile_ctl, &m, sizeof(m), 0) != sizeof(m))
				printf("%s noreply\n", cases[i].name);
			else
				printf("%s status %d\n", cases[i].name, m.status);
		}
		return 0;
	}
	int rc = run(argc, argv);
	fflush(stdout);
	return rc;
}
