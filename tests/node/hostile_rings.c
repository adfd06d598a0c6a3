/* hostile's attacks on the io_urings a direct lease gives it and on its connection table
 * (the commands rings, cancel, badring and conntab; hostile.c's top comment says what
 * each prints). */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <liburing.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "netif/conntab.h"
#include "netif/ring.h"
#include "netif/ringdev.h"
#include "tests/node/forge.h"
#include "tests/node/hostile.h"

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
	struct io_uring *rx = &hostile_qp.ring[0];
	static uint8_t buf[64];

	printf("mshot %d\n", hostile_qp.mshot ? 1 : 0);
	if (!hostile_qp.mshot)
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
int hostile_rings(uint32_t target)
{
	struct io_uring *tx = &hostile_qp.ring[1];
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	uint8_t frame[10 + 42] = { 0 };
	int res[3];

	if (!hostile_direct) {
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
			size_t vhl = (hostile_node.flags & CTL_HELLO_F_OFFLOAD) ? 10 : 0;
			uint8_t *f = frame + vhl;
			memcpy(f, forge_bcast, 6);
			memcpy(f + 6, hostile_node.mac, 6);
			forge_put16(f + 12, 0x0806);
			memcpy(f + 14, hdr, 8);
			memcpy(f + 22, hostile_node.mac, 6);
			memcpy(f + 28, &hostile_node.addr, 4);
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
	struct io_uring *rx = &hostile_qp.ring[0], *tx = &hostile_qp.ring[1];
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
int hostile_cancel(double seconds)
{
	struct io_uring *rx = &hostile_qp.ring[0], *tx = &hostile_qp.ring[1];

	if (!hostile_direct) {
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
	while (hostile_since(&t0) < seconds && !(sigpending(&pend) == 0 && sigismember(&pend, SIGINT))) {
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

int hostile_badring(const char *path, const char *kind, int which)
{
	static const struct io_uring_restriction nop_only[] = {
		{ .opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = IORING_OP_NOP },
	};
	struct ctl_msg m;
	int fds[3], got, rc;

	if (nif_qring_prepare(&hostile_qp) < 0 || which < 0 || which > 1)
		return 1;
	struct io_uring *r = &hostile_qp.ring[which];
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
	hostile_ctl = hostile_ctl_connect(path);
	ctl_init(&m, CTL_HELLO, hostile_seq++);
	m.u.hello.ring_fd[0] = nif_qring_fd(&hostile_qp, 0);
	m.u.hello.ring_fd[1] = nif_qring_fd(&hostile_qp, 1);
	m.u.hello.flags |= CTL_HELLO_F_RINGS;
	rc = hostile_call_fds(&m, fds, 3, &got);
	if (rc < 0) {
		printf("hello %d\n", rc);
		return 0;
	}
	bool is_direct = m.u.hello.datapath == CTL_DP_DIRECT;
	printf("datapath %s\n", is_direct ? "direct" : "relay");
	for (int i = 0; i < got; i++)
		close(fds[i]);
	if (!is_direct && which == 1) {
		struct io_uring *rx = &hostile_qp.ring[0];
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
int hostile_bad_conntab(const char *kind, double seconds)
{
	struct ctl_msg m;
	int fd = -1, got;

	ctl_init(&m, CTL_CONNTAB, hostile_seq++);
	int rc = hostile_call_fds(&m, &fd, 1, &got);
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
		ctl_addr_set4(e[0].lip, hostile_node.addr);
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
