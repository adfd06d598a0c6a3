/* Which kernel descriptor numbers are user-level sockets.
 *
 * A table indexed by descriptor number, sized once from the descriptor limit so that it
 * never moves: the hot path (every read() and write() of the program, most of them on
 * files and pipes) is one atomic load that finds NULL. Changes and the reference counts
 * take one mutex.
 */
#include "shim.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "uls.h"

#define TABLE_MAX (1u << 20)

static _Atomic(struct shim_file *) *table;
static unsigned table_len;
static atomic_int maxfd = -1;
/* Recursive: a signal handler that reads or writes a socket may interrupt its thread
 * inside the lock, and must not deadlock on it. Every change below leaves the table
 * consistent at each step (a reference is counted before it is published), so the
 * handler's lookup, nested inside, sees nothing half done that matters. */
static pthread_mutex_t lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void table_init(void)
{
	struct rlimit rl;
	unsigned len = 65536;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		len = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > TABLE_MAX ? TABLE_MAX :
		      rl.rlim_max < 1024 ? 1024 : (unsigned)rl.rlim_max;
	table = calloc(len, sizeof(*table));
	if (table)
		table_len = len;
}

static bool in_range(int fd)
{
	pthread_once(&once, table_init);
	return fd >= 0 && (unsigned)fd < table_len;
}

/* The table lock is held only with signals blocked, like libuls's core lock. A handler
 * that uses sockets takes it too, and a recursive mutex is not safe against its own
 * thread's handler: one that lands inside pthread_mutex_unlock, after the owner is
 * cleared and before the lock word is released, waits for the lock forever (seen in
 * tests/shim's sighandler, one run in four). Nested holds block once. */
static __thread int table_depth;
static __thread sigset_t table_mask;

void shim__table_lock(void)
{
	if (table_depth == 0)
		shim__signals_hold(&table_mask);
	table_depth++;
	pthread_mutex_lock(&lock);
}

void shim__table_unlock(void)
{
	pthread_mutex_unlock(&lock);
	if (--table_depth == 0)
		shim__signals_release(&table_mask);
}

/* Claims of inherited connections (fork.c): a thread waits here, with the table lock
 * (held once) released, while another thread claims the same socket. Deviation: its
 * signals stay blocked meanwhile (the claimer's own wait, bounded by its deadline, is the
 * one a signal interrupts). */
static pthread_cond_t claimed = PTHREAD_COND_INITIALIZER;

void shim__table_wait_claim(void)
{
	pthread_cond_wait(&claimed, &lock);
}

void shim__table_claim_done(void)
{
	pthread_cond_broadcast(&claimed);
}

/* In a fork child: the lock the parent's prepare handler took belongs to a thread id
 * that no longer exists (a recursive mutex checks its owner on unlock), so it starts
 * afresh, held as often as this thread held it before the prepare handler's hold, whose
 * end (and the signal mask it saved, when it was the outermost) is undone here. */
void shim__table_reset(void)
{
	pthread_mutexattr_t a;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&lock, &a);
	pthread_mutexattr_destroy(&a);
	pthread_cond_init(&claimed, NULL);
	if (table_depth > 0 && --table_depth == 0)
		shim__signals_release(&table_mask);
	for (int i = 0; i < table_depth; i++)
		pthread_mutex_lock(&lock);
}

bool shim__is_ours(int fd)
{
	return in_range(fd) && atomic_load_explicit(&table[fd], memory_order_acquire);
}

/* Does fd name f? (table lock held) */
bool shim__table_at(int fd, const struct shim_file *f)
{
	return in_range(fd) && atomic_load(&table[fd]) == f;
}

int shim__maxfd(void)
{
	return atomic_load(&maxfd);
}

/* shim__get() without adopting an inherited socket (exec.c adopts with a time limit). */
struct shim_file *shim__get_raw(int fd)
{
	struct shim_file *f;

	if (!in_range(fd) || !atomic_load_explicit(&table[fd], memory_order_acquire))
		return NULL;
	shim__table_lock();
	f = atomic_load(&table[fd]);
	if (f)
		atomic_fetch_add(&f->users, 1);
	shim__table_unlock();
	return f;
}

static struct shim_file *get(int fd, int claim)
{
	struct shim_file *f = shim__get_raw(fd);

	/* A socket inherited across fork becomes this process's own on first use. */
	if (f && f->gen != shim__generation())
		shim__adopt(fd, f, claim);
	return f;
}

/* A call that only asks or sets things about the descriptor (fcntl, ioctl, getsockopt,
 * dup): an inherited connection is not claimed for it. A shell's child that checks
 * isatty() on a socket it inherited must not wait for its parent, which waits for it. */
struct shim_file *shim__get(int fd)
{
	return get(fd, SHIM_NO_CLAIM);
}

/* A call that uses the connection (data, shutdown, its addresses, its options): an
 * inherited connection is claimed first, waiting for the parent to let go of it. */
struct shim_file *shim__get_io(int fd)
{
	return get(fd, -1);
}

/* Is f's last reference and last call gone? (table lock held) Then the caller closes it
 * with finish() after dropping the lock: the lock order is table, then libuls's core
 * lock, and fork takes them in that order too (fork.c). */
static struct shim_file *unused(struct shim_file *f)
{
	return f && !atomic_load(&f->refs) && !atomic_load(&f->users) ? f : NULL;
}

static void finish(struct shim_file *f)
{
	sigset_t old;

	if (!f)
		return;
	shim__uep_forget(f);  /* Linux drops a file's epoll registrations with it */
	shim__enter(&old);
	uls_close(f->sd);
	shim__leave(&old);
	free(f);
}

void shim__put(struct shim_file *f)
{
	shim__table_lock();
	atomic_fetch_sub(&f->users, 1);
	struct shim_file *done = unused(f);
	shim__table_unlock();
	finish(done);
}

struct shim_file *shim__file_new(int sd, int family, int type, bool nonblock)
{
	struct shim_file *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->sd = sd;
	f->family = family;
	f->type = type;
	f->nonblock = nonblock;
	f->gen = shim__generation();
	return f;
}

/* Name f by descriptor fd (which the caller has just made a mirror of f). Whatever fd
 * named before is dropped. */
int shim__install(int fd, struct shim_file *f)
{
	if (!in_range(fd) || !table)
		return -EMFILE;
	struct shim_file *done = NULL;
	shim__table_lock();
	atomic_fetch_add(&f->refs, 1);
	struct shim_file *old = atomic_exchange(&table[fd], f);
	if (old && old != f) {
		atomic_fetch_sub(&old->refs, 1);
		done = unused(old);
	} else if (old == f) {
		atomic_fetch_sub(&f->refs, 1);
	}
	int m = atomic_load(&maxfd);
	while (fd > m && !atomic_compare_exchange_weak(&maxfd, &m, fd))
		;
	shim__table_unlock();
	finish(done);
	return 0;
}

/* fd no longer names a user-level socket (closed, or replaced by dup2). Returns 1 if it
 * did. */
int shim__uninstall(int fd)
{
	if (!in_range(fd) || !atomic_load(&table[fd]))
		return 0;
	struct shim_file *done = NULL;
	shim__table_lock();
	struct shim_file *f = atomic_exchange(&table[fd], NULL);
	if (f) {
		atomic_fetch_sub(&f->refs, 1);
		done = unused(f);
	}
	shim__table_unlock();
	finish(done);
	return f != NULL;
}

/* Signals held off (the table lock, calls into libuls): with the trampoline of signal.c
 * in front of every handler, libuls defers them without a system call (stack/sigdefer.c);
 * with ULS_SIGNAL_DEFER=0, or before deferral is on, they are blocked. */
void shim__signals_hold(sigset_t *old)
{
	if (uls_signal_deferring()) {
		uls_signal_hold();
		return;
	}
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, old);
}

void shim__signals_release(const sigset_t *old)
{
	if (uls_signal_deferring())
		uls_signal_release();
	else
		pthread_sigmask(SIG_SETMASK, old, NULL);
}

/* The mask a driving wait should have: NULL (the thread's own, which deferral leaves in
 * place) or the one shim__enter saved. */
const sigset_t *shim__program_mask(const sigset_t *old)
{
	return uls_signal_deferring() ? NULL : old;
}

void shim__enter(sigset_t *old)
{
	shim__signals_hold(old);
}

void shim__leave(const sigset_t *old)
{
	shim__signals_release(old);
}

/* Is fd one of libuls's descriptors? Then the program may not close it, duplicate it or
 * dup2() over it. Whoever calls an interposer is the program: libuls makes its own system
 * calls through its table (netif/sys.h), which real.c points past this library. */
bool shim__guarded(int fd)
{
	return uls_fd_private(fd);
}
