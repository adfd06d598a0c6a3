/* Which kernel descriptor numbers are user-level sockets.
 *
 * A table indexed by descriptor number, sized once from the descriptor limit so that it
 * never moves: the hot path (every read() and write() of the program, most of them on
 * files and pipes) is one atomic load that finds NULL. Changes take one mutex; looking a
 * socket up and ending the call take none (issue 14: two lock pairs per socket call, a
 * third of the shim's locking per redis request).
 *
 * Lookups without the lock: a file's references (descriptor numbers naming it) and calls
 * in flight are one atomic word, f->hold, and a file's memory is never given back to the
 * C library, only kept for the next socket (type-stable, as Linux's SLAB_TYPESAFE_BY_RCU
 * files are for its lock-free fget): a lookup that read table[fd] just before the file
 * was closed still counts itself on memory that is a file, sees HOLD_DEAD (finished, or
 * not yet named) or that fd names something else now, and lets go. Whoever brings the
 * word to 0 finishes the file, once: it claims it by setting HOLD_DEAD (0 -> DEAD).
 */
#include "shim.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
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

/* f->hold: calls in the low 32 bits, references above them, and the top bit while the
 * file is not named (new, or finished and kept for reuse). */
#define HOLD_USER UINT64_C(1)
#define HOLD_REF (UINT64_C(1) << 32)
#define HOLD_DEAD (UINT64_C(1) << 63)

/* Finished files, kept for shim__file_new (table lock). */
static struct shim_file *pool;

/* ULS_DEBUG_LOOKUP_YIELD=1 (tests/shim/closerace.c): a lookup yields the processor
 * between reading the table and counting itself, and again before checking the table
 * still names the file, and the last drop yields before it claims the file, so that a
 * close, a reuse or a stale lookup lands in between, as they otherwise do only when a
 * thread is preempted there. */
bool shim__debug_yield;

/* Read at load, not at the first lookup, when the program's threads may run and one may
 * change the environment under getenv() (stack/env.c). */
__attribute__((constructor)) static void debug_env(void)
{
	const char *y = getenv("ULS_DEBUG_LOOKUP_YIELD");

	shim__debug_yield = y && y[0] == '1' && !y[1];
}

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
	/* Counts of the parent's other threads: the prepare handler does not stop lookups,
	 * so a thread of the parent mid-lookup (even on a pooled file), or inside a call
	 * (a recv blocked on a socket), left its count in this copy, and no thread here
	 * will ever drop it: a named file would never reach 0 (never closed: its port stays
	 * bound), nor would a pooled one once reused. Only this thread is left, and it is in
	 * fork(), inside no call: a pooled file is exactly DEAD, a named one keeps its
	 * references (the table's, one per number naming it) and no calls. The pool is
	 * consistent: the prepare handler held the table lock. */
	for (struct shim_file *f = pool; f; f = f->next_free)
		atomic_store(&f->hold, HOLD_DEAD);
	int hi = atomic_load(&maxfd);
	for (int fd = 0; fd <= hi && (unsigned)fd < table_len; fd++) {
		struct shim_file *f = atomic_load(&table[fd]);
		if (f)
			atomic_store(&f->hold, atomic_load(&f->hold) & ~(HOLD_REF - 1));
	}
	shim__uep_fork_child();
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

/* A call on f ends (or a lookup lets go): whoever takes the word to 0 finishes f. */
static void drop(struct shim_file *f, uint64_t what);

/* The file fd names, with a call counted in it, or NULL: no lock (see the top). */
static struct shim_file *lookup(int fd)
{
	if (!in_range(fd))
		return NULL;
	for (;;) {
		struct shim_file *f = atomic_load_explicit(&table[fd], memory_order_acquire);
		if (!f)
			return NULL;
		if (shim__debug_yield)
			sched_yield();
		uint64_t was = atomic_fetch_add(&f->hold, HOLD_USER);
		if (shim__debug_yield)
			sched_yield();
		/* Not finished when counted, and still fd's: the count holds it from here. */
		if (!(was & HOLD_DEAD) && atomic_load(&table[fd]) == f)
			return f;
		drop(f, HOLD_USER);  /* fd was closed or renamed meanwhile: look again */
	}
}

static struct shim_file *get(int fd, int claim)
{
	struct shim_file *f = shim__get_raw(fd);

	/* A socket inherited across fork becomes this process's own on first use. */
	if (f && !shim__file_current(f))
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

/* shim__get() without adopting an inherited socket (exec.c adopts with a time limit). */
struct shim_file *shim__get_raw(int fd)
{
	if (!in_range(fd) || !atomic_load_explicit(&table[fd], memory_order_acquire))
		return NULL;
	return lookup(fd);
}

/* f's last reference and last call are gone: its registrations, its libuls socket, and
 * its memory goes to the pool. Called without the table lock (the lock order is table,
 * then libuls's core lock, and fork takes them in that order too: fork.c). */
static void finish(struct shim_file *f)
{
	sigset_t old;

	shim__uep_forget(f);  /* Linux drops a file's epoll registrations with it */
	shim__enter(&old);
	uls_close(f->sd);
	shim__leave(&old);
	shim__file_discard(f);
}

static void drop(struct shim_file *f, uint64_t what)
{
	uint64_t zero = 0;

	if (atomic_fetch_sub(&f->hold, what) != what)
		return;
	if (shim__debug_yield)
		sched_yield();  /* a stale lookup may count itself here */
	if (atomic_compare_exchange_strong(&f->hold, &zero, HOLD_DEAD))
		finish(f);
	/* A failed claim: a lookup counted itself meanwhile, and its drop finishes f. */
}

void shim__put(struct shim_file *f)
{
	drop(f, HOLD_USER);
}

/* One more call in f, by a caller that holds one already (so f cannot be finished under
 * it): a hold that outlives the caller's own, ended by its own shim__put (exec.c). */
void shim__hold(struct shim_file *f)
{
	atomic_fetch_add(&f->hold, HOLD_USER);
}

struct shim_file *shim__file_new(int sd, int family, int type, bool nonblock)
{
	struct shim_file *f = NULL;

	shim__table_lock();
	if (pool) {
		f = pool;
		pool = f->next_free;
	}
	shim__table_unlock();
	if (f) {
		/* Everything but the word, which stale lookups may still be counting in. */
		memset(f, 0, offsetof(struct shim_file, hold));
	} else {
		f = calloc(1, sizeof(*f));
		if (!f)
			return NULL;
		atomic_init(&f->hold, HOLD_DEAD);
	}
	f->sd = sd;
	f->family = family;
	f->type = type;
	f->nonblock = nonblock;
	f->gen = shim__generation();
	return f;
}

/* A file that is named nowhere (finished, or never installed) goes to the pool: never to
 * free(), a stale lookup may still count itself in it. */
void shim__file_discard(struct shim_file *f)
{
	if (!f)
		return;
	shim__table_lock();
	f->next_free = pool;
	pool = f;
	shim__table_unlock();
}

/* Name f by descriptor fd (which the caller has just made a mirror of f). Whatever fd
 * named before is dropped. */
int shim__install(int fd, struct shim_file *f)
{
	if (!in_range(fd) || !table)
		return -EMFILE;
	shim__table_lock();
	/* A new file is named for the first time: its word loses HOLD_DEAD in the same step
	 * (a stale lookup's count in it stays as it is). */
	if (atomic_load(&f->hold) & HOLD_DEAD)
		atomic_fetch_add(&f->hold, HOLD_REF - HOLD_DEAD);
	else
		atomic_fetch_add(&f->hold, HOLD_REF);
	struct shim_file *old = atomic_exchange(&table[fd], f);
	int m = atomic_load(&maxfd);
	while (fd > m && !atomic_compare_exchange_weak(&maxfd, &m, fd))
		;
	shim__table_unlock();
	if (old)
		drop(old, HOLD_REF);  /* old == f: named once, as before */
	return 0;
}

/* fd no longer names a user-level socket (closed, or replaced by dup2). Returns 1 if it
 * did. */
int shim__uninstall(int fd)
{
	if (!in_range(fd) || !atomic_load(&table[fd]))
		return 0;
	shim__table_lock();
	struct shim_file *f = atomic_exchange(&table[fd], NULL);
	shim__table_unlock();
	if (f)
		drop(f, HOLD_REF);
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
