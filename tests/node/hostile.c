/* hostile: a process on a node that does not play by libuls's rules. It speaks the control
 * protocol itself and writes raw frames into its own transmit path, to show that ulsd's
 * filter and the kernel's transmit check (not the good manners of libuls) isolate
 * processes. Used by tests/node.
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
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/if_tun.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
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
#include "tests/node/forge.h"

static int ctl_fd = -1;
static struct ctl_hello node;
static struct nif_dev *dev;
static struct nif_qring_prep qp;
static bool direct;
static unsigned queue;
static uint32_t seq = 1;

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

/* One request, one reply; up to nfds descriptors (how many came: *got). */
static int call_fds(struct ctl_msg *m, int *fds, int nfds, int *got)
{
	char cbuf[CMSG_SPACE(sizeof(int) * 3)];
	struct iovec iov = { m, sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };

	if (got)
		*got = 0;
	if (send(ctl_fd, m, sizeof(*m), 0) != sizeof(*m))
		return -errno;
	if (recvmsg(ctl_fd, &mh, 0) != sizeof(*m))
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

static int call(struct ctl_msg *m)
{
	return call_fds(m, NULL, 0, NULL);
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

	ctl_fd = ctl_connect(path);
	ctl_init(&m, CTL_HELLO, seq++);
	m.u.hello.ring_fd[0] = m.u.hello.ring_fd[1] = -1;
	if (offer_direct() && nif_qring_prepare(&qp) == 0) {
		m.u.hello.ring_fd[0] = nif_qring_fd(&qp, 0);
		m.u.hello.ring_fd[1] = nif_qring_fd(&qp, 1);
		m.u.hello.flags |= CTL_HELLO_F_RINGS;
		/* The multishot read of the queue too, as libuls asks for it. */
		if (qp.mshot)
			m.u.hello.flags |= CTL_HELLO_F_MSHOT;
	}
	rc = call_fds(&m, fds, 3, &got);
	if (rc < 0)
		return rc;
	node = m.u.hello;
	if (!(node.flags & CTL_HELLO_F_MSHOT))
		qp.mshot = false;
	bool offload = (node.flags & CTL_HELLO_F_OFFLOAD) != 0;
	if (node.datapath == CTL_DP_DIRECT && qp.made) {
		direct = true;
		queue = node.queue;
		return keep_rings ? 0 : nif_qring_open(&dev, &qp, node.mtu, offload, ctl_fd,
						       eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), false);
	}
	nif_qring_discard(&qp);
	if (got != 3)
		return -EPROTO;
	return nif_ringdev_open(&dev, node.mtu, offload, fds[0], fds[1], fds[2], ctl_fd);
}

static void lease(const char *path, bool keep_rings)
{
	int rc = lease_open(path, keep_rings);

	if (rc < 0) {
		fprintf(stderr, "hostile: no lease: %s\n", strerror(-rc));
		exit(1);
	}
	if (direct)
		fprintf(stderr, "hostile: lease direct queue %u\n", queue);
	else
		fprintf(stderr, "hostile: lease relay\n");
}

static int bind_port(uint8_t proto, uint16_t port)
{
	struct ctl_msg m;

	ctl_init(&m, CTL_BIND, seq++);
	m.family = AF_INET;
	m.proto = proto;
	m.lport = port;
	int rc = call(&m);
	return rc < 0 ? rc : m.lport;
}

static bool send_one(const uint8_t *frame, size_t len)
{
	uint8_t *slot = dev->ops->tx_slot(dev, len);

	if (!slot)
		return false;
	memcpy(slot, frame, len);
	return dev->ops->tx_queue(dev, slot, len, 0) == 0;
}

/* Let the frames leave (ulsd drains a relay ring; io_uring completes a direct queue's
 * writes) before the lease ends. */
static void settle(void)
{
	dev->ops->tx_flush(dev);
	usleep(200000);
	dev->ops->tx_flush(dev);
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

static double since(const struct timespec *t0)
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
	    f[23] == IPPROTO_UDP && !memcmp(f + 30, &node.addr, 4) &&
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
	while (since(&t0) < secs) {
		if (dev->ops->wait(dev, 5) < 0)
			break;
		dev->ops->rx(dev, count_frame, t, 256);
		if (expect && t->mine >= expect) {
			if (!done.tv_sec && !done.tv_nsec)
				clock_gettime(CLOCK_MONOTONIC, &done);
			else if (since(&done) > 0.3)
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
	r.direct = direct;
	r.queue = queue;
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
	       "seconds %.2f\n", children, ndirect, failed, mine, foreign, got_own, nq, since(&t0));
	return 0;
}

/* Submit one request on ring r and wait for its result. */
static int one_sqe(struct io_uring *r, int op, int fd, void *addr, unsigned len, unsigned flags)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(r);
	struct io_uring_cqe *cqe;
	int res;

	if (!sqe)
		return -ENOSPC;
	io_uring_prep_rw(op, sqe, fd, addr, len, 0);
	sqe->flags |= (uint8_t)flags;
	sqe->buf_group = 1;   /* a group nobody provided */
	io_uring_submit(r);
	if (io_uring_wait_cqe(r, &cqe) < 0)
		return -EIO;
	res = cqe->res;
	io_uring_cqe_seen(r, cqe);
	return res;
}

/* The receive ring, where ulsd allowed the multishot read (CTL_HELLO_F_MSHOT) and buffer
 * selection: still nothing but reads of fixed files, and no register operation but ulsd's.
 * Buffer group 1 is provided by nobody, so that a read that got through would end at once
 * (ENOBUFS) rather than take a frame. Prints "mshot 0" alone where ulsd did not allow it. */
static int rings_mshot(void)
{
	struct io_uring *rx = &qp.ring[0];
	static uint8_t buf[64];

	printf("mshot %d\n", qp.mshot ? 1 : 0);
	if (!qp.mshot)
		return 0;
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	printf("rx_mshot_plain %d\n", one_sqe(rx, NIF_IORING_OP_READ_MULTISHOT, null, NULL, 0,
					       IOSQE_BUFFER_SELECT));
	printf("rx_read_plain %d\n", one_sqe(rx, IORING_OP_READ, null, buf, sizeof(buf), 0));
	printf("rx_nop %d\n", one_sqe(rx, IORING_OP_NOP, -1, NULL, 0, 0));
	printf("rx_write_plain %d\n", one_sqe(rx, IORING_OP_WRITE, null, buf, sizeof(buf), 0));
	/* A write with buffer selection: the kernel has no such thing. */
	printf("rx_write_select %d\n", one_sqe(rx, IORING_OP_WRITE, 0, NULL, 0,
						IOSQE_FIXED_FILE | IOSQE_BUFFER_SELECT));
	/* Opcodes next to it, which the set does not name: recv multishot is a socket op. */
	printf("rx_recv %d\n", one_sqe(rx, IORING_OP_RECV, 0, NULL, 0,
					IOSQE_FIXED_FILE | IOSQE_BUFFER_SELECT));
	printf("rx_provide %d\n", one_sqe(rx, IORING_OP_PROVIDE_BUFFERS, 1, buf, sizeof(buf), 0));
	/* Flags beyond the two. */
	printf("rx_link %d\n", one_sqe(rx, IORING_OP_READ, 0, buf, sizeof(buf),
					IOSQE_FIXED_FILE | IOSQE_IO_LINK));
	/* Register operations: files, and provided-buffer rings (its own was registered
	 * before ulsd took the ring). */
	int one = 1;
	printf("rx_register_files %d\n", io_uring_register_files(rx, &one, 1));
	printf("rx_files_update %d\n", io_uring_register_files_update(rx, 0, &one, 1));
	struct io_uring_buf_reg reg = { .ring_addr = (uintptr_t)buf, .ring_entries = 1, .bgid = 2 };
	printf("rx_register_pbuf %d\n", io_uring_register_buf_ring(rx, &reg, 0));
	printf("rx_unregister_pbuf %d\n", io_uring_unregister_buf_ring(rx, 0));
	close(null);
	return 0;
}

/* What a direct process might try with the rings ulsd restricted, and one write the
 * restrictions allow (the control: an ARP request from the node for `target`, which the
 * transmit check passes). Prints each result (0, a length, or -errno). */
static int rings(uint32_t target)
{
	struct io_uring *tx = &qp.ring[1];
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	uint8_t frame[10 + 42] = { 0 };
	int res[3];

	if (!direct) {
		printf("not direct\n");
		return 0;
	}
	/* A write to an ordinary descriptor, a NOP, a fixed write allowed: in that order. */
	for (int i = 0; i < 3; i++) {
		sqe = io_uring_get_sqe(tx);
		if (!sqe)
			return 1;
		if (i == 0) {
			int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
			io_uring_prep_write(sqe, null, "x\n", 2, 0);
		} else if (i == 1) {
			io_uring_prep_nop(sqe);
		} else {
			static const uint8_t hdr[8] = { 0, 1, 8, 0, 6, 4, 0, 1 };
			size_t vhl = (node.flags & CTL_HELLO_F_OFFLOAD) ? 10 : 0;
			uint8_t *f = frame + vhl;
			memcpy(f, forge_bcast, 6);
			memcpy(f + 6, node.mac, 6);
			forge_put16(f + 12, 0x0806);
			memcpy(f + 14, hdr, 8);
			memcpy(f + 22, node.mac, 6);
			memcpy(f + 28, &node.addr, 4);
			memcpy(f + 38, &target, 4);
			io_uring_prep_write(sqe, 0, frame, (unsigned)(vhl + 42), 0);
			sqe->flags |= IOSQE_FIXED_FILE;
		}
		io_uring_sqe_set_data64(sqe, (uint64_t)i);
		io_uring_submit(tx);
		if (io_uring_wait_cqe(tx, &cqe) < 0)
			return 1;
		res[i] = cqe->res;
		io_uring_cqe_seen(tx, cqe);
	}
	printf("plain_write %d\nnop %d\nfixed_write %d\n", res[0], res[1], res[2]);
	/* Registering another file in its place, or updating the table. */
	int one = 1;
	printf("register_files %d\n", io_uring_register_files(tx, &one, 1));
	printf("files_update %d\n", io_uring_register_files_update(tx, 0, &one, 1));
	/* tun's ioctls on the only descriptors it has. */
	int off = 0;
	printf("tun_ioctl %d\n", ioctl(tx->ring_fd, TUNSETOFFLOAD, off) < 0 ? -errno : 0);
	/* And no TAP descriptor anywhere in the process. */
	int tun = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char p[300], l[64];
		snprintf(p, sizeof(p), "/proc/self/fd/%s", e->d_name);
		ssize_t n = readlink(p, l, sizeof(l) - 1);
		if (n > 0 && (l[n] = '\0', !strcmp(l, "/dev/net/tun")))
			tun++;
	}
	if (d)
		closedir(d);
	printf("tun_fds %d\n", tun);
	return rings_mshot();
}

static int uring_register(struct io_uring *r, unsigned op, const void *arg, unsigned n);

/* Not in liburing 2.3's header: a cancellation keyed by opcode (Linux 6.6), which the
 * kernel reads from sqe->len. */
#define CANCEL_OP (1U << 5)

static void prep_cancel(struct io_uring_sqe *sqe, uint64_t data, unsigned flags, int fd, int op)
{
	io_uring_prep_cancel64(sqe, data, (int)flags);
	if (fd >= 0)
		sqe->fd = fd;
	if (op >= 0)
		sqe->len = (unsigned)op;
	sqe->flags |= IOSQE_FIXED_FILE;  /* ulsd requires it of every request */
	io_uring_sqe_set_data64(sqe, 0xc0ffee);
}

/* One IORING_OP_ASYNC_CANCEL on ring r; its result. fd >= 0: keyed by that fixed file;
 * op >= 0: by that opcode. */
static int cancel_one(struct io_uring *r, uint64_t data, unsigned flags, int fd, int op)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(r);
	struct io_uring_cqe *cqe;

	if (!sqe)
		return -ENOSPC;
	prep_cancel(sqe, data, flags, fd, op);
	io_uring_submit(r);
	if (io_uring_wait_cqe(r, &cqe) < 0)
		return -EIO;
	int res = cqe->res;
	io_uring_cqe_seen(r, cqe);
	return res;
}

/* The control: a read of the own queue (fixed file 0) armed on the receive ring, then
 * cancelled with the key given, from the transmit ring (cross) or its own; a read the
 * transmit ring's cancellation missed is ended from its own ring by its user_data. Prints
 * "NAME CANCEL_RESULT READ_RESULT". */
static void own_read_cancel(const char *name, bool cross, uint64_t data, unsigned flags, int fd,
			    int op)
{
	struct io_uring *rx = &qp.ring[0], *tx = &qp.ring[1];
	static uint8_t buf[2048];
	struct io_uring_sqe *sqe = io_uring_get_sqe(rx);
	struct io_uring_cqe *cqe;
	int first = 1, read_res = 1, own = 1;

	if (!sqe)
		return;
	io_uring_prep_read(sqe, 0, buf, sizeof(buf), 0);
	sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, 0x1234);
	io_uring_submit(rx);
	if (cross) {
		first = cancel_one(tx, data, flags, fd, op);
		data = 0x1234;
		flags = 0;
		fd = op = -1;
	}
	if (!(sqe = io_uring_get_sqe(rx)))
		return;
	prep_cancel(sqe, data, flags, fd, op);
	io_uring_submit(rx);
	for (int i = 0; i < 2; i++) {
		struct __kernel_timespec ts = { .tv_sec = 2 };
		if (io_uring_wait_cqe_timeout(rx, &cqe, &ts) < 0)
			break;
		if (io_uring_cqe_get_data64(cqe) == 0x1234)
			read_res = cqe->res;
		else
			own = cqe->res;
		io_uring_cqe_seen(rx, cqe);
	}
	printf("%s %d %d\n", name, cross ? first : own, read_res);
}

/* A cancellation reaches only the requests of the ring it is submitted on (io_uring's
 * cancel walks its own context), so the one operation ulsd allows beyond reads and
 * writes cannot touch another process's requests, whatever it names: the user_data
 * libuls gives its own (reads 0..63, writes 0..255, the tags at the top), any request,
 * a fixed file (the only descriptors a restricted request can name are the ring's own
 * fixed files: its own queue), an opcode. The control shows that each key finds a
 * request where it may: a read this process armed on its own queue, on that ring. */
static int cancel_hostile(double seconds)
{
	struct io_uring *rx = &qp.ring[0], *tx = &qp.ring[1];

	if (!direct) {
		printf("not direct\n");
		return 0;
	}
	/* SIGINT ends the run early (looked for between rounds, never interrupting one). */
	sigset_t intr, pend;
	sigemptyset(&intr);
	sigaddset(&intr, SIGINT);
	sigprocmask(SIG_BLOCK, &intr, NULL);
	own_read_cancel("cross_ring", true, 0x1234, 0, -1, -1);
	own_read_cancel("own_data", false, 0x1234, 0, -1, -1);
	own_read_cancel("own_any", false, 0, IORING_ASYNC_CANCEL_ANY, -1, -1);
	own_read_cancel("own_fd", false, 0, IORING_ASYNC_CANCEL_FD | IORING_ASYNC_CANCEL_FD_FIXED |
			IORING_ASYNC_CANCEL_ALL, 0, -1);
	own_read_cancel("own_op", false, 0, CANCEL_OP | IORING_ASYNC_CANCEL_ALL, -1,
			IORING_OP_READ);
	struct io_uring_sync_cancel_reg reg = { .addr = 0, .fd = -1,
						.flags = IORING_ASYNC_CANCEL_ANY,
						.timeout = { .tv_sec = -1, .tv_nsec = -1 } };
	printf("sync_cancel %d\n", uring_register(rx, IORING_REGISTER_SYNC_CANCEL, &reg, 1));
	printf("ready\n");
	fflush(stdout);

	static const uint64_t tags[] = { UINT64_MAX, UINT64_MAX - 1, UINT64_MAX - 2 };
	static const int ops[] = { IORING_OP_READ, IORING_OP_WRITE, NIF_IORING_OP_READ_MULTISHOT };
	/* found: a request cancelled (0 for one keyed by user_data, a count > 0 for ALL and
	 * ANY, which give 0 when none matched); none: nothing matched (ENOENT, or ALL's 0). */
	unsigned long aimed = 0, found = 0, none = 0, ebadf = 0, other = 0;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (since(&t0) < seconds && !(sigpending(&pend) == 0 && sigismember(&pend, SIGINT))) {
		for (int w = 0; w < 2; w++) {
			struct io_uring *r = w ? tx : rx;
			int res[256 + 3 + 1 + 4 + 3], n = 0, n1;
			for (uint64_t d = 0; d < 256; d++)
				res[n++] = cancel_one(r, d, 0, -1, -1);
			for (unsigned i = 0; i < 3; i++)
				res[n++] = cancel_one(r, tags[i], 0, -1, -1);
			n1 = n;  /* from here on, ALL (or ANY): a count */
			res[n++] = cancel_one(r, 0, IORING_ASYNC_CANCEL_ANY, -1, -1);
			for (int fd = 0; fd < 4; fd++)
				res[n++] = cancel_one(r, 0, IORING_ASYNC_CANCEL_FD |
						      IORING_ASYNC_CANCEL_FD_FIXED |
						      IORING_ASYNC_CANCEL_ALL, fd, -1);
			for (unsigned i = 0; i < 3; i++)
				res[n++] = cancel_one(r, 0, CANCEL_OP | IORING_ASYNC_CANCEL_ALL, -1,
						      ops[i]);
			for (int i = 0; i < n; i++) {
				aimed++;
				if (res[i] > 0 || (res[i] == 0 && i < n1))
					found++;
				else if (res[i] == 0 || res[i] == -ENOENT)
					none++;
				else if (res[i] == -EBADF)
					ebadf++;
				else
					other++;
			}
		}
	}
	printf("aimed %lu found %lu none %lu ebadf %lu other %lu\n", aimed, found, none, ebadf,
	       other);
	return 0;
}

/* A process that offers rings it prepared in a way libuls never does. ulsd must refuse
 * them, before the process can reach a queue through them (issue 12 item 4: "ulsd refuses
 * a ring that was already enabled or had files or restrictions registered"). */
static int uring_register(struct io_uring *r, unsigned op, const void *arg, unsigned n)
{
	/* liburing 2.3's shared library lacks io_uring_enable_rings and
	 * io_uring_register_restrictions: the system call itself. */
	return syscall(__NR_io_uring_register, r->ring_fd, op, arg, n) < 0 ? -errno : 0;
}

static int badring(const char *path, const char *kind, int which)
{
	static const struct io_uring_restriction nop_only[] = {
		{ .opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = IORING_OP_NOP },
	};
	struct ctl_msg m;
	int fds[3], got, rc;

	if (nif_qring_prepare(&qp) < 0 || which < 0 || which > 1)
		return 1;
	struct io_uring *r = &qp.ring[which];
	int efd = eventfd(0, EFD_CLOEXEC);
	if (!strcmp(kind, "enabled"))
		rc = uring_register(r, IORING_REGISTER_ENABLE_RINGS, NULL, 0);
	else if (!strcmp(kind, "restricted"))
		rc = uring_register(r, IORING_REGISTER_RESTRICTIONS, nop_only, 1);
	else if (!strcmp(kind, "files"))
		rc = io_uring_register_files(r, &efd, 1);
	else
		rc = strcmp(kind, "none") ? -EINVAL : 0;
	if (rc < 0) {
		fprintf(stderr, "hostile: badring %s: %s\n", kind, strerror(-rc));
		return 1;
	}
	ctl_fd = ctl_connect(path);
	ctl_init(&m, CTL_HELLO, seq++);
	m.u.hello.ring_fd[0] = nif_qring_fd(&qp, 0);
	m.u.hello.ring_fd[1] = nif_qring_fd(&qp, 1);
	m.u.hello.flags |= CTL_HELLO_F_RINGS;
	rc = call_fds(&m, fds, 3, &got);
	if (rc < 0) {
		printf("hello %d\n", rc);
		return 0;
	}
	bool is_direct = m.u.hello.datapath == CTL_DP_DIRECT;
	printf("datapath %s\n", is_direct ? "direct" : "relay");
	for (int i = 0; i < got; i++)
		close(fds[i]);
	if (!is_direct && which == 1) {
		struct io_uring *rx = &qp.ring[0];
		struct io_uring_sqe *sqe;
		struct io_uring_cqe *cqe;
		static uint8_t frame[10 + 60];
		rc = uring_register(rx, IORING_REGISTER_ENABLE_RINGS, NULL, 0);
		printf("enable %d\n", rc);
		sqe = io_uring_get_sqe(rx);
		if (rc == 0 && sqe) {
			io_uring_prep_write(sqe, 0, frame, sizeof(frame), 0);
			sqe->flags |= IOSQE_FIXED_FILE;
			io_uring_submit(rx);
			rc = io_uring_wait_cqe(rx, &cqe);
			if (rc == 0) {
				rc = cqe->res;
				io_uring_cqe_seen(rx, cqe);
			}
		}
		printf("queue_write %d\n", rc);
	}
	close(efd);
	return 0;
}

/* The `conntab` command: a table that ulsd must survive reading. */
static int bad_conntab(const char *kind, double seconds)
{
	struct ctl_msg m;
	int fd = -1, got;

	ctl_init(&m, CTL_CONNTAB, seq++);
	int rc = call_fds(&m, &fd, 1, &got);
	if (rc < 0 || got != 1) {
		printf("conntab status %d fds %d\n", rc, got);
		return 1;
	}
	off_t len = lseek(fd, 0, SEEK_END);
	printf("truncate errno %d\n", ftruncate(fd, 64) < 0 ? errno : 0);
	struct uls_conntab_hdr *h = mmap(NULL, (size_t)len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED)
		return 1;
	struct uls_conntab_ent *e = (void *)(h + 1);
	if (!strcmp(kind, "entries")) {
		uls_conntab_write_begin(h);
		memset(e, 0, 3 * sizeof(*e));
		memset(e, 0, 5 * sizeof(*e));
		e[0] = (struct uls_conntab_ent){ .family = AF_INET, .lport = 7, .rport = 7,
						 .state = ULS_TCP_ESTABLISHED, .cwnd = 1 };
		ctl_addr_set4(e[0].rip, htonl(0xc6120063));
		ctl_addr_set4(e[0].lip, node.addr);
		e[1] = e[0];
		e[1].state = 99;
		e[2] = e[0];
		e[2].lport = 0;
		e[2].flags = 0x80;
		/* IPv6 with a v4-mapped remote, and IPv4 from an address not the node's. */
		e[3] = e[0];
		e[3].family = AF_INET6;
		e[4] = e[0];
		ctl_addr_set4(e[4].lip, htonl(0xc6120064));
		uls_conntab_write_end(h, 5, 5, 1);
	} else if (!strcmp(kind, "count")) {
		uls_conntab_write_begin(h);
		uls_conntab_write_end(h, 0xffffffffu, 0xffffffffu, 1);
	} else if (!strcmp(kind, "version")) {
		/* A table in a layout ulsd did not give: version 1's (IPv4 entries of 64
		 * octets). */
		h->version = 1;
		uls_conntab_write_begin(h);
		uls_conntab_write_end(h, 1, 1, 1);
	} else if (!strcmp(kind, "torn")) {
		uls_conntab_write_begin(h);  /* and never ends */
	} else {
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	usleep((useconds_t)(seconds * 1e6));
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
		return forge_tcp_rst(f, other_mac, node.addr, own, s->dst, s->dport);
	if (k == 1)
		return forge_tcp_rst(f, node.mac, htonl(0xc6120063), own, s->dst, s->dport);
	if (k == 2)
		return forge_tcp_rst(f, node.mac, node.addr, s->victim, s->dst, s->dport);
	if (k == 3)
		return forge_arp(f, node.mac, s->dst, s->dst);
	if (k == 4) {
		memset(forge_ip(f, node.mac, node.addr, s->dst, 47, 8), 0, 8);
		return 14 + 20 + 8;
	}
	return forge_udp(f, node.mac, node.addr, own, s->dst, s->dport);
}

static size_t spoof6_frame(int k, const struct spoof *s, uint8_t *f)
{
	uint8_t *p;

	if (k == 0)
		return forge_tcp6_rst(f, node.mac, s->other6, (uint16_t)s->own, s->dst6, s->dport);
	if (k == 1) {
		p = forge_ip6(f, node.mac, forge_bcast, s->me, s->dst6, IPPROTO_UDP, 16);
		memset(p, 0, 16);
		forge_put16(p, (uint16_t)s->own);
		forge_put16(p + 2, s->dport);
		forge_put16(p + 4, 16);
		return 14 + 40 + 16;
	}
	if (k == 2) {
		memset(forge_ip6(f, node.mac, forge_bcast, s->me, s->dst6, 47, 8), 0, 8);
		return 14 + 40 + 8;
	}
	if (k == 3) {
		/* RFC 4861 §4.2: a router's announcement is nobody's on a node. */
		p = forge_ip6(f, node.mac, forge_bcast, s->me, s->dst6, 58, 16);
		memset(p, 0, 16);
		p[0] = 134;
		return 14 + 40 + 16;
	}
	if (k == 4) {
		/* §4.3: a solicitation naming another's link-layer address, which the
		 * neighbour would cache for the node. */
		p = forge_ip6(f, node.mac, forge_bcast, s->me, s->dst6, 58, 32);
		memset(p, 0, 32);
		p[0] = 135;
		memcpy(p + 8, s->dst6, 16);
		p[24] = 1;
		p[25] = 1;
		memcpy(p + 26, other_mac, 6);
		return 14 + 40 + 32;
	}
	p = forge_ip6(f, node.mac, forge_bcast, s->me, s->dst6, 58, 16);
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
		return badring(ctl, argv[3], atoi(argv[4]));
	if (!strcmp(cmd, "cancel") && argc == 4) {
		lease(ctl, true);
		return cancel_hostile(atof(argv[3]));
	}
	if (!strcmp(cmd, "rings") && argc == 4) {
		uint32_t target;
		lease(ctl, true);
		inet_pton(AF_INET, argv[3], &target);
		return rings(target);
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
		send_frames(node.mac, node.addr, (uint16_t)atoi(argv[3]), dst, (uint16_t)atoi(argv[5]),
			    atoi(argv[6]));
		return 0;
	}
	if (!strcmp(cmd, "spoofip") && argc == 4) {
		send_frames(node.mac, htonl(0xc6120063), 40000, htonl(0xc6120064), 5001, atoi(argv[3]));
		return 0;
	}
	if (!strcmp(cmd, "spoof") && argc == 7) {
		struct spoof sp = { .victim = (uint16_t)atoi(argv[4]),
				    .dport = (uint16_t)atoi(argv[6]) };
		inet_pton(AF_INET, argv[5], &sp.dst);
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
		ctl_init(&m, CTL_RELEASE, seq++);
		tcp_tuple_of(&m, argv + 3);
		printf("release status %d\n", call(&m));
		ctl_init(&m, CTL_UNBIND, seq++);
		m.family = AF_INET;
		m.proto = IPPROTO_TCP;
		m.lport = (uint16_t)atoi(argv[3]);
		printf("unbind status %d\n", call(&m));
		return 0;
	}
	if (!strcmp(cmd, "steal") && argc == 6) {
		struct ctl_msg m;
		enum ctl_type types[2] = { CTL_HANDOFF, CTL_CLAIM };
		for (int i = 0; i < 2; i++) {
			ctl_init(&m, types[i], seq++);
			tcp_tuple_of(&m, argv + 3);
			m.u.handoff.nonce = 0x0123456789abcdefull;
			printf("%s status %d\n", i ? "claim" : "handoff", call(&m));
		}
		return 0;
	}
	if (!strcmp(cmd, "conntab") && argc == 5)
		return bad_conntab(argv[3], atof(argv[4]));
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
		ctl_fd = ctl_connect(argv[1]);
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
			send(ctl_fd, buf, cases[i].len, 0);
			struct pollfd p = { ctl_fd, POLLIN, 0 };
			if (poll(&p, 1, 2000) != 1 || recv(ctl_fd, &m, sizeof(m), 0) != sizeof(m))
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
