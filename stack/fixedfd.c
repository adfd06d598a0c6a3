/* Descriptors the library holds outside the program's descriptor table.
 *
 * A readiness mirror (mirror.c) needs two kernel files of the library's own per socket
 * besides the one the program holds. Kept as descriptors they would cost the program three
 * descriptors per socket against RLIMIT_NOFILE, where a kernel socket costs one (issue 18:
 * a server under ulsrun ran out at a third of the connections the kernel holds). So the
 * library keeps them in io_uring fixed-file tables: a registered file is held by the ring,
 * not by the descriptor table, and the mirror's few system calls (send, recv, recvmsg on a
 * readiness transition) are issued on the slot through the ring, one io_uring_enter each,
 * as many system calls as before. The rare calls io_uring has no inline form for
 * (shutdown is always punted to a worker thread; setsockopt; a blocking wait that must be
 * the kernel's own for SA_RESTART and SO_RCVTIMEO) get a descriptor for their duration
 * (IORING_OP_FIXED_FD_INSTALL), which costs a descriptor per thread inside such a call,
 * never one per socket.
 *
 * Tables: the kernel refuses a table larger than RLIMIT_NOFILE's soft limit at
 * registration (io_uring/rsrc.c, io_sqe_files_register) and cannot grow one, so the library
 * registers sparse tables of 1,024, 4,096, 16,384, ... slots (each capped at the limit), one
 * ring each: a descriptor per table, O(log n) for n sockets (3 for 10,000 mirrors). A table
 * that empties is closed unless it is the largest (which stays for the next connections).
 *
 * fork(): the child inherits the rings' descriptors, which name the parent's rings and the
 * parent's slots. The child forgets them (stk__ffd_forget) without touching a slot: ring
 * ids are never reused within a process, so a handle from before the fork names no ring in
 * the child and every call on it fails with -EBADF.
 *
 * When io_uring is not available (a kernel before 6.8, which has no FIXED_FD_INSTALL; a
 * seccomp filter that refuses io_uring, as Docker's default profile does; or
 * ULS_FIXED_FILES=0), stk__ffd_hold_pair fails and the mirror keeps descriptors.
 */
#include "internal.h"

#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* Not in the installed uapi headers (Debian 12's are 6.1); kernel 6.8's opcode. */
#define ULS_IORING_OP_FIXED_FD_INSTALL 54
#define ULS_IORING_FIXED_FD_NO_CLOEXEC (1U << 0)

#define SLOT_BITS 20
#define SLOT_MASK ((1 << SLOT_BITS) - 1)
#define TABS_MAX 2047  /* ring ids: a handle is id << SLOT_BITS | slot, an int */
#define FIRST_SIZE 1024
#define GROWTH 4
#define MAX_SIZE (1u << SLOT_BITS)

/* Slots go in pairs (a mirror's two files): one registration and one release of both
 * are one system call each. A pair is free again when both its slots are. */
struct ftab {
	struct io_uring ring;
	unsigned size;    /* slots registered (even) */
	unsigned next;    /* pairs below it were handed out once */
	unsigned nfree;   /* freed pairs, on the stack below */
	unsigned used;    /* slots holding a file */
	unsigned *freed;
	uint8_t *held;    /* per pair: its slots holding a file */
};

static struct ftab *tabs[TABS_MAX + 1];
static unsigned ids;          /* ring ids issued in this process (and its parents) */
static unsigned live_from;    /* ids below this one belong to a parent process */
static bool unavailable;
static pthread_mutex_t tab_lock = PTHREAD_MUTEX_INITIALIZER;

static struct ftab *tab_new(unsigned size)
{
	struct ftab *t = calloc(1, sizeof(*t));
	int rc;

	if (!t)
		return NULL;
	size &= ~1u;
	t->freed = calloc(size / 2, sizeof(*t->freed));
	t->held = calloc(size / 2, 1);
	if (!t->freed || !t->held || io_uring_queue_init(4, &t->ring, 0) < 0) {
		free(t->freed);
		free(t->held);
		free(t);
		return NULL;
	}
	/* Without FIXED_FD_INSTALL (Linux < 6.8) a slot's file could not be waited on or
	 * shut down: descriptors it is. */
	struct io_uring_probe *probe = io_uring_get_probe_ring(&t->ring);
	rc = probe && io_uring_opcode_supported(probe, ULS_IORING_OP_FIXED_FD_INSTALL) ?
	     io_uring_register_files_sparse(&t->ring, size) : -ENOSYS;
	io_uring_free_probe(probe);
	if (rc < 0) {
		io_uring_queue_exit(&t->ring);
		free(t->freed);
		free(t->held);
		free(t);
		return NULL;
	}
	/* Out of the program's way like the library's other descriptors (privfd.c). */
	t->ring.ring_fd = t->ring.enter_ring_fd = stk__fd_hide(t->ring.ring_fd);
	t->size = size;
	return t;
}

/* A table with a free slot, a new one if none has: its id, or -1. */
static int tab_with_room(void)
{
	unsigned last = 0;

	for (unsigned id = ids; id-- > live_from;) {
		struct ftab *t = tabs[id];
		if (t && (t->nfree || t->next < t->size / 2))
			return (int)id;
		if (t && t->size > last)
			last = t->size;
	}
	if (ids == live_from && !last) {
		const char *e = stk__getenv("ULS_FIXED_FILES");
		if (e && strcmp(e, "0") == 0)
			unavailable = true;  /* docs/usage.md: descriptors, for comparison */
	}
	if (unavailable || ids >= TABS_MAX)
		return -1;
	struct rlimit rl;
	unsigned size = last ? last * GROWTH : FIRST_SIZE;
	if (size > MAX_SIZE)
		size = MAX_SIZE;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < size)
		size = (unsigned)rl.rlim_cur;
	struct ftab *t = size >= 2 ? tab_new(size) : NULL;
	if (!t) {
		/* No io_uring here (or no memory, or a limit of 0): descriptors it is. Only
		 * the first failure settles it; a later one may be a passing shortage. */
		if (ids == live_from && !last)
			unavailable = true;
		return -1;
	}
	tabs[ids] = t;
	return (int)ids++;
}

int stk__ffd_hold_pair(int a, int b, int *ha, int *hb)
{
	int fds[2] = { a, b }, rc;

	pthread_mutex_lock(&tab_lock);
	int id = tab_with_room();
	if (id < 0) {
		pthread_mutex_unlock(&tab_lock);
		return -ENOSYS;
	}
	struct ftab *t = tabs[id];
	unsigned pair = t->nfree ? t->freed[--t->nfree] : t->next++;
	rc = io_uring_register_files_update(&t->ring, pair * 2, fds, 2);
	if (rc != 2) {
		if (rc == 1) {  /* cannot happen: an update stops only at a bad descriptor */
			int none[1] = { -1 };
			io_uring_register_files_update(&t->ring, pair * 2, none, 1);
		}
		t->freed[t->nfree++] = pair;
		pthread_mutex_unlock(&tab_lock);
		return rc < 0 ? rc : -EIO;
	}
	t->held[pair] = 2;
	t->used += 2;
	pthread_mutex_unlock(&tab_lock);
	*ha = id << SLOT_BITS | (int)(pair * 2);
	*hb = *ha + 1;
	return 0;
}

static struct ftab *tab_of(int h)
{
	unsigned id = (unsigned)h >> SLOT_BITS;

	if (h < 0 || id < live_from || id >= ids)
		return NULL;
	return tabs[id];
}

static void tab_close(unsigned id)
{
	struct ftab *t = tabs[id];

	stk__fd_unmark(t->ring.ring_fd);
	io_uring_queue_exit(&t->ring);  /* munmap and close */
	free(t->freed);
	free(t->held);
	free(t);
	tabs[id] = NULL;
}

/* The slots [h, h + n) empty (n: 1, or 2 for a whole pair). */
static void release(int h, unsigned n)
{
	int none[2] = { -1, -1 };

	pthread_mutex_lock(&tab_lock);
	struct ftab *t = tab_of(h);
	unsigned slot = (unsigned)(h & SLOT_MASK), pair = slot / 2;
	if (t && io_uring_register_files_update(&t->ring, slot, none, n) == (int)n) {
		t->used -= n;
		t->held[pair] -= (uint8_t)n;
		if (!t->held[pair])
			t->freed[t->nfree++] = pair;
		if (!t->used) {
			bool larger = false;
			for (unsigned id = live_from; id < ids; id++)
				larger |= tabs[id] && tabs[id]->size > t->size;
			if (larger)
				tab_close((unsigned)h >> SLOT_BITS);
		}
	}
	pthread_mutex_unlock(&tab_lock);
}

void stk__ffd_release(int h)
{
	release(h, 1);
}

/* Both of a pair's files, in one system call when both are still held. */
void stk__ffd_release_pair(int ha, int hb)
{
	if (ha >= 0 && hb == ha + 1 && !(ha & 1)) {
		release(ha, 2);
		return;
	}
	if (ha >= 0)
		release(ha, 1);
	if (hb >= 0)
		release(hb, 1);
}

/* One operation on a slot, issued and reaped: its result (-errno on failure). */
static int run(int h, void (*prep)(struct io_uring_sqe *, const void *), const void *arg)
{
	struct io_uring_cqe *cqe;
	int rc;

	pthread_mutex_lock(&tab_lock);
	struct ftab *t = tab_of(h);
	if (!t) {
		pthread_mutex_unlock(&tab_lock);
		return -EBADF;
	}
	struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);
	if (!sqe) {
		pthread_mutex_unlock(&tab_lock);
		return -EBUSY;  /* cannot happen: every operation is reaped before the next */
	}
	prep(sqe, arg);
	sqe->fd = h & SLOT_MASK;
	sqe->flags |= IOSQE_FIXED_FILE;
	rc = io_uring_submit_and_wait(&t->ring, 1);
	do
		rc = io_uring_wait_cqe(&t->ring, &cqe);
	while (rc == -EINTR);
	if (rc == 0) {
		rc = cqe->res;
		io_uring_cqe_seen(&t->ring, cqe);
	}
	pthread_mutex_unlock(&tab_lock);
	return rc;
}

struct xfer {
	void *buf;
	size_t len;
	int flags;
	struct msghdr *mh;
};

static void prep_send(struct io_uring_sqe *sqe, const void *a)
{
	const struct xfer *x = a;

	io_uring_prep_send(sqe, 0, x->buf, x->len, x->flags);
}

static void prep_recv(struct io_uring_sqe *sqe, const void *a)
{
	const struct xfer *x = a;

	io_uring_prep_recv(sqe, 0, x->buf, x->len, x->flags);
}

static void prep_recvmsg(struct io_uring_sqe *sqe, const void *a)
{
	const struct xfer *x = a;

	io_uring_prep_recvmsg(sqe, 0, x->mh, (unsigned)x->flags);
}

static void prep_install(struct io_uring_sqe *sqe, const void *a)
{
	const struct xfer *x = a;

	io_uring_prep_nop(sqe);
	sqe->opcode = ULS_IORING_OP_FIXED_FD_INSTALL;
	sqe->rw_flags = x->flags;
}

/* Nonblocking calls: MSG_DONTWAIT makes io_uring answer -EAGAIN instead of waiting. */
ssize_t stk__ffd_send(int h, const void *buf, size_t len, int flags)
{
	struct xfer x = { (void *)buf, len, flags, NULL };

	return run(h, prep_send, &x);
}

ssize_t stk__ffd_recv(int h, void *buf, size_t len, int flags)
{
	struct xfer x = { buf, len, flags, NULL };

	return run(h, prep_recv, &x);
}

ssize_t stk__ffd_recvmsg(int h, struct msghdr *mh, int flags)
{
	struct xfer x = { NULL, 0, flags, mh };

	return run(h, prep_recvmsg, &x);
}

/* A descriptor for the slot's file, in the program's table (lowest free number, as a
 * kernel socket() would get), close-on-exec unless cloexec is false. */
int stk__ffd_install(int h, bool cloexec)
{
	struct xfer x = { NULL, 0, cloexec ? 0 : (int)ULS_IORING_FIXED_FD_NO_CLOEXEC, NULL };

	return run(h, prep_install, &x);
}

/* In a fork child: the rings are the parent's. Close this process's references without a
 * word to them (no slot update, no unregister) and never name them again. */
void stk__ffd_forget(void)
{
	pthread_mutex_init(&tab_lock, NULL);
	for (unsigned id = live_from; id < ids; id++)
		if (tabs[id])
			tab_close(id);  /* this process's reference only: the parent's ring lives on */
	live_from = ids;
}
