/* hostile: a process on a node that does not play by libuls's rules. It speaks the control
 * protocol itself and writes raw frames into its own transmit ring, to show that ulsd's
 * filter (not the good manners of libuls) isolates processes. Used by tests/node.
 *
 *   hostile CTL bind PROTO PORT          try to take a port; prints "ok PORT" or "errno N"
 *   hostile CTL forge SRCPORT DSTIP DSTPORT COUNT
 *                                        send COUNT TCP segments from SRCPORT (another
 *                                        process's endpoint) to DSTIP:DSTPORT; prints how
 *                                        many it queued
 *   hostile CTL spoofip COUNT            send COUNT frames with a foreign source address
 *   hostile CTL listen SECONDS           count frames ulsd delivers to us meanwhile, by
 *                                        IP protocol; prints "frames N tcp N arp N"
 *   hostile CTL garbage                  send malformed control messages; prints each reply
 *   hostile CTL release LPORT RIP RPORT  claim another process's connection is gone, and
 *                                        its port: RELEASE and UNBIND; prints each reply
 *   hostile CTL steal LPORT RIP RPORT    try to move another process's connection: HANDOFF
 *                                        it, and CLAIM it with a guessed nonce; prints each
 *                                        reply
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "netif/chksum.h"
#include "netif/ctlproto.h"
#include "netif/ring.h"

static int ctl_fd;
static struct uls_ctl_hello node;
static struct nif_ring rx, tx;

static int ctl_connect(const char *path)
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

static int call(struct uls_ctl_msg *m, int *fds, int nfds)
{
	char cbuf[CMSG_SPACE(sizeof(int) * 3)];
	struct iovec iov = { m, sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };

	if (send(ctl_fd, m, sizeof(*m), 0) != sizeof(*m))
		return -errno;
	if (recvmsg(ctl_fd, &mh, 0) != sizeof(*m))
		return -EPROTO;
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	if (nfds && c && c->cmsg_type == SCM_RIGHTS)
		memcpy(fds, CMSG_DATA(c), sizeof(int) * (size_t)nfds);
	return m->status;
}

static void lease(const char *path)
{
	struct uls_ctl_msg m;
	struct nif_ring_layout l;
	int fds[3];
	void *base;

	ctl_fd = ctl_connect(path);
	uls_ctl_init(&m, ULS_CTL_HELLO, 1);
	if (call(&m, fds, 3) < 0 || nif_ring_layout(m.u.hello.mtu, &l) < 0 ||
	    nif_ring_map(fds[0], &l, &base) < 0) {
		fprintf(stderr, "hostile: no lease\n");
		exit(1);
	}
	node = m.u.hello;
	nif_ring_attach(&rx, base, &l, 0, fds[1], false);
	nif_ring_attach(&tx, base, &l, 1, fds[2], true);
}

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }

/* Ethernet + IPv4 + TCP SYN|ACK segment with correct checksums. */
static size_t tcp_frame(uint8_t *f, uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport)
{
	static const uint8_t bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	uint8_t *ip = f + 14, *tcp = ip + 20;

	memcpy(f, bcast, 6);
	memcpy(f + 6, node.mac, 6);
	put16(f + 12, 0x0800);
	memset(ip, 0, 40);
	ip[0] = 0x45;
	put16(ip + 2, 40);
	ip[8] = 64;
	ip[9] = 6;
	memcpy(ip + 12, &src, 4);
	memcpy(ip + 16, &dst, 4);
	uint16_t c = (uint16_t)~nif_inet_chksum(ip, 20);
	memcpy(ip + 10, &c, 2);
	put16(tcp, sport);
	put16(tcp + 2, dport);
	tcp[12] = 5 << 4;
	tcp[13] = 0x04;  /* RST: the most harmful thing to forge into someone's connection */
	return 54;
}

static void send_frames(uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport, int count)
{
	int queued = 0;

	for (int i = 0; i < count; i++) {
		uint8_t *slot = nif_ring_prod_slot(&tx, 64);
		if (!slot)
			break;
		nif_ring_prod_commit(&tx, tcp_frame(slot, src, sport, dst, dport), 0);
		queued++;
	}
	nif_ring_prod_publish(&tx);
	nif_ring_signal(&tx);
	printf("queued %d\n", queued);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: see the header of hostile.c\n");
		return 2;
	}
	const char *ctl = argv[1], *cmd = argv[2];

	if (!strcmp(cmd, "garbage")) {
		uint8_t buf[256];
		struct uls_ctl_msg m;
		ctl_fd = ctl_connect(ctl);
		struct { const char *name; size_t len; uint32_t magic; uint16_t version, type; } cases[] = {
			{ "truncated", 20, ULS_CTL_MAGIC, ULS_CTL_VERSION, ULS_CTL_BIND },
			{ "oversized", 200, ULS_CTL_MAGIC, ULS_CTL_VERSION, ULS_CTL_BIND },
			{ "bad_magic", sizeof(m), 0x12345678, ULS_CTL_VERSION, ULS_CTL_BIND },
			{ "bad_version", sizeof(m), ULS_CTL_MAGIC, 99, ULS_CTL_BIND },
			{ "unknown_type", sizeof(m), ULS_CTL_MAGIC, ULS_CTL_VERSION, 999 },
			{ "before_hello", sizeof(m), ULS_CTL_MAGIC, ULS_CTL_VERSION, ULS_CTL_CONNECT },
		};
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			memset(buf, 0, sizeof(buf));
			uls_ctl_init(&m, (enum uls_ctl_type)cases[i].type, (uint32_t)i + 1);
			m.magic = cases[i].magic;
			m.version = cases[i].version;
			m.proto = IPPROTO_TCP;
			m.rip = htonl(0xc6120064);
			m.rport = 80;
			memcpy(buf, &m, sizeof(m));
			send(ctl_fd, buf, cases[i].len, 0);
			struct pollfd p = { ctl_fd, POLLIN, 0 };
			if (poll(&p, 1, 2000) != 1 || recv(ctl_fd, &m, sizeof(m), 0) != sizeof(m))
				printf("%s noreply\n", cases[i].name);
			else
				printf("%s status %d\n", cases[i].name, m.status);
		}
		return 0;
	}
	lease(ctl);
	if (!strcmp(cmd, "bind") && argc == 5) {
		struct uls_ctl_msg m;
		uls_ctl_init(&m, ULS_CTL_BIND, 2);
		m.proto = !strcmp(argv[3], "udp") ? IPPROTO_UDP : IPPROTO_TCP;
		m.lport = (uint16_t)atoi(argv[4]);
		int rc = call(&m, NULL, 0);
		if (rc < 0)
			printf("errno %d\n", -rc);
		else
			printf("ok %u\n", m.lport);
		return 0;
	}
	if (!strcmp(cmd, "forge") && argc == 7) {
		uint32_t dst;
		inet_pton(AF_INET, argv[4], &dst);
		send_frames(node.addr, (uint16_t)atoi(argv[3]), dst, (uint16_t)atoi(argv[5]), atoi(argv[6]));
		usleep(200000);  /* let ulsd drain the ring before the lease ends */
		return 0;
	}
	if (!strcmp(cmd, "spoofip") && argc == 4) {
		send_frames(htonl(0xc6120063), 40000, htonl(0xc6120064), 5001, atoi(argv[3]));
		usleep(200000);
		return 0;
	}
	if (!strcmp(cmd, "listen") && argc == 4) {
		struct timespec t0, t;
		unsigned long frames = 0, tcp = 0, arp = 0;
		uint64_t bad = 0;
		uint32_t off;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		double secs = atof(argv[3]);
		do {
			size_t len;
			const uint8_t *f;
			while ((f = nif_ring_cons_peek(&rx, &len, &off, &bad))) {
				frames++;
				if (f[12] == 0x08 && f[13] == 0x06)
					arp++;
				else if (len > 23 && f[12] == 0x08 && f[13] == 0 && f[23] == 6)
					tcp++;
				nif_ring_cons_release(&rx);
			}
			usleep(1000);
			clock_gettime(CLOCK_MONOTONIC, &t);
		} while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
		printf("frames %lu tcp %lu arp %lu\n", frames, tcp, arp);
		return 0;
	}
	if (!strcmp(cmd, "release") && argc == 6) {
		struct uls_ctl_msg m;
		uls_ctl_init(&m, ULS_CTL_RELEASE, 3);
		m.proto = IPPROTO_TCP;
		m.lport = (uint16_t)atoi(argv[3]);
		inet_pton(AF_INET, argv[4], &m.rip);
		m.rport = (uint16_t)atoi(argv[5]);
		printf("release status %d\n", call(&m, NULL, 0));
		uls_ctl_init(&m, ULS_CTL_UNBIND, 4);
		m.proto = IPPROTO_TCP;
		m.lport = (uint16_t)atoi(argv[3]);
		printf("unbind status %d\n", call(&m, NULL, 0));
		return 0;
	}
	if (!strcmp(cmd, "steal") && argc == 6) {
		struct uls_ctl_msg m;
		enum uls_ctl_type types[2] = { ULS_CTL_HANDOFF, ULS_CTL_CLAIM };
		for (int i = 0; i < 2; i++) {
			uls_ctl_init(&m, types[i], 5 + (uint32_t)i);
			m.proto = IPPROTO_TCP;
			m.lport = (uint16_t)atoi(argv[3]);
			inet_pton(AF_INET, argv[4], &m.rip);
			m.rport = (uint16_t)atoi(argv[5]);
			m.u.handoff.nonce = 0x0123456789abcdefull;
			printf("%s status %d\n", i ? "claim" : "handoff", call(&m, NULL, 0));
		}
		return 0;
	}
	fprintf(stderr, "hostile: bad command\n");
	return 2;
}
