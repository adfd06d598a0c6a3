/* User-level epoll for ulstack sockets (issue 14).
 *
 * Through a readiness mirror (stack/mirror.c) an epoll program paid two system calls per
 * message for readiness: the stack wrote a token into the socket's mirror when it became
 * readable, and the program's read took it out again. Here the shim keeps, for every epoll
 * instance the program made with epoll_create/epoll_create1, the interest list of its
 * ulstack sockets itself; only kernel descriptors go into the kernel's epoll instance.
 * Each instance has a ready list in the stack (stack/readylist.c): the sockets' events
 * queue their registrations on it, as Linux's ep_poll_callback does, and epoll_wait
 * looks at the queued ones only (uls_rl_collect: one lock, no system call, O(ready
 * sockets)); it sleeps by driving the stack, waiting on the device and the kernel
 * instance together (uls_poll_drive_gen). A socket that such a set holds is "lazy": its
 * mirror gets no readable token unless someone waits on it in the kernel (armed:
 * uls_socket_watch), so a request costs no mirror call at all.
 *
 * Semantics are Linux's (epoll(7), epoll_ctl(2)): level-triggered by default; EPOLLET
 * reports a socket again only after a new event of it in a direction the registration
 * asks for (data, the peer's FIN or a connection for EPOLLIN; space after the socket was
 * found without it for EPOLLOUT; an error or hang-up for any), and then with all its
 * current readiness, as Linux does; EPOLLONESHOT disarms a socket once reported until
 * EPOLL_CTL_MOD; EPOLLERR and EPOLLHUP are always reported; a registration belongs to
 * the (descriptor, file) pair and goes away when the file's last descriptor is closed;
 * ready sockets are reported round-robin when more are ready than maxevents. No limit on
 * the set's size (before the ready list, sets over 1,024 sockets used the mirrors).
 *
 * Where the shim cannot keep up, the instance falls back to the mirror path for good
 * (uep__fallback(): its sockets are registered in the kernel instance with their events and
 * data, as before issue 14): when the instance's descriptor is dup'ed, put into another
 * epoll set, or watched by poll or select, and before exec. After fork, parent and child
 * each keep their own copy of the ulstack part of the interest list.
 *
 * Deviations (docs/compatibility.md): EPOLLEXCLUSIVE is checked as Linux checks it but
 * has no effect on ulstack sockets (each instance asks the stack's state); the instance
 * used without the C library (a raw epoll_wait, or passed with SCM_RIGHTS) sees only its
 * kernel descriptors. ULS_USER_EPOLL=0: the mirror path alone.
 */
#include "shim.h"
#include "uepoll.h"

#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "uls.h"

#define UEP_FDS 65536  /* epoll descriptor numbers tracked; higher ones use the mirrors */
/* The events a registration may carry (the kernel refuses others with EINVAL only for
 * EPOLLEXCLUSIVE: EPOLLEXCLUSIVE_OK_BITS). */
#define EXCL_OK (EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP | EPOLLWAKEUP | EPOLLET | \
		 EPOLLEXCLUSIVE)
static struct uep *insts[UEP_FDS];
static int insts_hi = -1;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct uep *pool;  /* freed instances, kept for created() (reg_lock) */
static atomic_uint lazy_regs;  /* registrations of sockets in all instances */
static int enabled = -1;

/* Read at load, not at the first epoll call, when the program's threads may run and one
 * may change the environment under getenv() (stack/env.c). */
__attribute__((constructor)) static void uep_env(void)
{
	const char *e = getenv("ULS_USER_EPOLL");

	enabled = !(e && e[0] == '0' && !e[1]);
}

static bool uep_enabled(void)
{
	return enabled > 0;
}

int64_t uep__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void reg_enter(sigset_t *old)
{
	shim__signals_hold(old);
	pthread_mutex_lock(&reg_lock);
}

static void reg_leave(const sigset_t *old)
{
	pthread_mutex_unlock(&reg_lock);
	shim__signals_release(old);
}

/* The instance of epfd with a reference, or NULL. No lock (issue 14: every epoll_wait
 * and epoll_ctl took reg_lock twice): an instance's memory is never given back, only
 * kept in the pool for the next one (type-stable, as fdtab.c's files), so a lookup that
 * read insts[epfd] just before the instance was freed still counts itself on an
 * instance, sees UEP_DEAD or that epfd names another now, and lets go. */
struct uep *uep__get(int epfd)
{
	if (epfd < 0 || epfd >= UEP_FDS)
		return NULL;
	for (;;) {
		struct uep *u = __atomic_load_n(&insts[epfd], __ATOMIC_ACQUIRE);
		if (!u)
			return NULL;
		if (shim__debug_yield)
			sched_yield();  /* tests/shim/closerace.c: a close lands here (fdtab.c) */
		uint64_t was = atomic_fetch_add(&u->refs, 1);
		if (shim__debug_yield)
			sched_yield();
		if (!(was & UEP_DEAD) && __atomic_load_n(&insts[epfd], __ATOMIC_SEQ_CST) == u)
			return u;
		uep__put(u);  /* closed or replaced meanwhile: look again */
	}
}

static void uep_free(struct uep *u)
{
	sigset_t old;

	if (u->wakefd >= 0)
		shim__real.close(u->wakefd);
	shim__enter(&old);
	uls_rl_free(u->rl);  /* and the registrations still on it (a number reused raw) */
	shim__leave(&old);
	for (unsigned i = 0; i < u->n; i++)
		free(u->v[i]);
	pthread_mutex_destroy(&u->lock);
	free(u->v);
	reg_enter(&old);
	u->next_free = pool;
	pool = u;
	reg_leave(&old);
}

/* Whoever takes the count to 0 frees the instance, once: it claims it (0 -> UEP_DEAD);
 * a failed claim means a lookup counted itself meanwhile, and its put frees it. */
void uep__put(struct uep *u)
{
	uint64_t zero = 0;

	if (atomic_fetch_sub(&u->refs, 1) == 1 &&
	    atomic_compare_exchange_strong(&u->refs, &zero, UEP_DEAD))
		uep_free(u);
}

/* Take epfd's instance out of the table (closed, replaced, or fallen back). */
static struct uep *uep_unlink(int epfd)
{
	sigset_t old;
	struct uep *u = NULL;

	if (epfd < 0 || epfd >= UEP_FDS || !__atomic_load_n(&insts[epfd], __ATOMIC_ACQUIRE))
		return NULL;
	reg_enter(&old);
	u = insts[epfd];
	__atomic_store_n(&insts[epfd], NULL, __ATOMIC_RELEASE);
	reg_leave(&old);
	return u;  /* the table's reference, now the caller's */
}

void uep__watch(int sd, int lazy, int armed)
{
	sigset_t old;

	shim__enter(&old);
	uls_socket_watch(sd, lazy, armed);
	shim__leave(&old);
}

/* f goes into a kernel epoll instance (one the shim does not keep, or one fallen back):
 * the kernel waits on its mirror whenever that instance is waited on, so the mirror is
 * armed for good, whatever user-level sets also hold it. */
static void pin(struct shim_file *f)
{
	if (!atomic_exchange(&f->kernel_epoll, true))
		uep__watch(f->sd, 0, 1);
}

static void pin_fd(int fd)
{
	struct shim_file *f = shim__get(fd);

	if (f) {
		pin(f);
		shim__put(f);
	}
}

/* Wake the threads waiting in the kernel on this instance's mirrors (its eventfd).
 * Instance lock held. */
static void wake_sleepers(struct uep *u)
{
	if (u->sleepers && u->wakefd >= 0) {
		uint64_t one = 1;
		ssize_t n = shim__real.write(u->wakefd, &one, sizeof(one));
		(void)n;
	}
}

/* Wake this instance's waiters: a driver waiting on the device, and threads waiting in
 * the kernel on the mirrors. Instance lock held. */
void uep__kick(struct uep *u)
{
	sigset_t old;

	shim__enter(&old);
	uls_poll_kick();
	shim__leave(&old);
	wake_sleepers(u);
}

void uep__lock(struct uep *u, sigset_t *old)
{
	shim__signals_hold(old);
	pthread_mutex_lock(&u->lock);
}

void uep__unlock(struct uep *u, const sigset_t *old)
{
	pthread_mutex_unlock(&u->lock);
	shim__signals_release(old);
}

/* Instance lock held (signals held). */
static void item_drop(struct uep *u, unsigned i, bool unwatch)
{
	struct uep_item *it = u->v[i];

	uls_epi_del(it->epi, unwatch);  /* and the socket's lazy count, in the same hold */
	atomic_fetch_sub(&it->f->uep_regs, 1);
	atomic_fetch_sub(&lazy_regs, 1);
	u->v[i] = u->v[--u->n];
	free(it);
}

/* The mirror path for good: the sockets go into the kernel instance (disarmed one-shot
 * ones without events, as the kernel keeps them), and the instance leaves the table. */
void uep__fallback(int epfd)
{
	struct uep *u = uep_unlink(epfd);
	sigset_t old;

	if (!u)
		return;
	uep__lock(u, &old);
	while (u->n) {
		struct uep_item *it = u->v[u->n - 1];
		struct epoll_event ev = { .events = it->disarmed ? it->events & ~REPORTABLE :
						    it->events, .data = it->data };
		ev.events &= ~(uint32_t)EPOLLEXCLUSIVE;
		if (shim__table_at(it->fd, it->f) &&
		    shim__real.epoll_ctl(epfd, EPOLL_CTL_ADD, it->fd, &ev) == 0)
			pin(it->f);
		item_drop(u, u->n - 1, true);
	}
	u->dead = true;
	uep__kick(u);
	uep__unlock(u, &old);
	uep__put(u);
}

/* epoll_create(2), epoll_create1(2): a new instance the shim keeps. */
static int created(int epfd)
{
	if (epfd < 0 || epfd >= UEP_FDS || !shim__enabled() || !uep_enabled())
		return epfd;
	struct uep *u, *old_u;
	sigset_t old;
	reg_enter(&old);
	u = pool;
	if (u)
		pool = u->next_free;
	reg_leave(&old);
	if (u) {
		/* Everything but the count, which stale lookups may still be counting in. */
		memset(u, 0, offsetof(struct uep, refs));
	} else {
		u = calloc(1, sizeof(*u));
		if (!u)
			return epfd;
		atomic_init(&u->refs, UEP_DEAD);
	}
	shim__enter(&old);
	u->rl = uls_rl_new();
	shim__leave(&old);
	if (!u->rl) {
		reg_enter(&old);
		u->next_free = pool;  /* still UEP_DEAD: never in the table */
		pool = u;
		reg_leave(&old);
		return epfd;  /* the mirror path */
	}
	pthread_mutex_init(&u->lock, NULL);
	u->epfd = epfd;
	u->wakefd = -1;
	u->gen = shim__generation();
	atomic_fetch_add(&u->refs, 1 - UEP_DEAD);  /* the table's; a stale count stays */
	reg_enter(&old);
	old_u = insts[epfd];  /* a number the program reused without our close (raw) */
	__atomic_store_n(&insts[epfd], u, __ATOMIC_RELEASE);
	/* Read without reg_lock by shim__uep_hi (and exec's walk): relaxed, it bounds a
	 * scan and publishes nothing (each slot is read with its own acquire). */
	if (epfd > insts_hi)
		__atomic_store_n(&insts_hi, epfd, __ATOMIC_RELAXED);
	reg_leave(&old);
	if (old_u) {
		/* Under its lock, where its waiters look (collect). */
		uep__lock(old_u, &old);
		old_u->dead = true;
		uep__unlock(old_u, &old);
		uep__put(old_u);
	}
	return epfd;
}

SHIM_EXPORT int epoll_create1(int flags)
{
	static int (*real)(int);

	shim__real_init();
	if (!real)
		real = (int (*)(int))shim__next("epoll_create1");
	return created(real(flags));
}

SHIM_EXPORT int epoll_create(int size)
{
	static int (*real)(int);

	shim__real_init();
	if (!real)
		real = (int (*)(int))shim__next("epoll_create");
	return created(real(size));
}

/* close(2), dup2(2) over, close_range(2): the instance of fd, if any, is gone. */
void shim__uep_closed(int fd)
{
	struct uep *u = uep_unlink(fd);
	sigset_t old;

	if (!u)
		return;
	uep__lock(u, &old);
	while (u->n)
		item_drop(u, u->n - 1, true);
	u->dead = true;
	uep__kick(u);
	uep__unlock(u, &old);
	uep__put(u);
}

/* fd is being copied (dup, F_DUPFD), watched by poll/select, or nested in another
 * epoll instance: an instance of it falls back to the mirrors. */
void shim__uep_exposed(int fd)
{
	if (fd >= 0 && fd < UEP_FDS && __atomic_load_n(&insts[fd], __ATOMIC_ACQUIRE))
		uep__fallback(fd);
}

/* fork(2) in a process with threads: a lock another thread holds at that moment is
 * copied held, by a thread the child does not have, and the child's first epoll call that
 * needs it waits forever (tests/shim/uepfork.c: a child hung at the 4th fork). So fork.c's
 * prepare handler, after the table lock (which holds signals), takes them all, in the
 * order every path takes them: reg_lock, then each named instance's by descriptor number
 * (drop_regs_of takes them so under reg_lock; no path holds two otherwise). No path takes
 * the table lock under one of them, and libuls's core lock, which paths take under an
 * instance's, is taken after them (libuls's prepare handler runs last, fork.c). The
 * instances in the table cannot change meanwhile: it changes under reg_lock alone. */
void shim__uep_fork_prepare(void)
{
	pthread_mutex_lock(&reg_lock);
	for (int fd = 0; fd <= insts_hi && fd < UEP_FDS; fd++)
		if (insts[fd])
			pthread_mutex_lock(&insts[fd]->lock);
}

void shim__uep_fork_parent(void)
{
	for (int fd = 0; fd <= insts_hi && fd < UEP_FDS; fd++)
		if (insts[fd])
			pthread_mutex_unlock(&insts[fd]->lock);
	pthread_mutex_unlock(&reg_lock);
}

/* In a fork child (fdtab.c's shim__table_reset), the only thread: the locks the prepare
 * handler took start afresh (their owner is the parent's thread). The parent's other
 * threads' counts (an epoll_wait sleeping, a lookup midway) are gone with them, as for
 * the files. A pooled instance is exactly UEP_DEAD, a named one holds the table's
 * reference alone; the pool is a whole list (reg_lock was held). An instance a parent's
 * thread had taken out of the table but not yet freed (its lock perhaps held) is
 * reachable by nobody here, and stays unused. */
void shim__uep_fork_child(void)
{
	pthread_mutex_init(&reg_lock, NULL);
	for (struct uep *u = pool; u; u = u->next_free)
		atomic_store(&u->refs, UEP_DEAD);
	for (int fd = 0; fd <= insts_hi && fd < UEP_FDS; fd++) {
		struct uep *u = __atomic_load_n(&insts[fd], __ATOMIC_ACQUIRE);
		if (u) {
			pthread_mutex_init(&u->lock, NULL);
			atomic_store(&u->refs, 1);
		}
	}
}

/* exec: the new program's shim knows nothing of these instances. */
void shim__uep_exec(void)
{
	int hi = shim__uep_hi();

	for (int fd = 0; fd <= hi && fd < UEP_FDS; fd++)
		shim__uep_exposed(fd);
}

/* An instance got its first kernel descriptor (nkernel was 0): a thread of it may be in the
 * device's wait without the kernel instance (uep_wait), which nothing the kernel does would
 * end. The stack's ready count moves, so that a wait about to begin returns at once
 * (uls_poll_drive_gen's gen), and a thread waiting on the device for an epoll set is
 * woken there; its next round watches the kernel instance. No instance lock held (the
 * core lock is taken). */
void uep__kernel_first(void)
{
	sigset_t old;

	shim__enter(&old);
	uls_poll_kick();
	shim__leave(&old);
}

/* Every registration of f goes from every instance; to_kernel: each moves into its
 * instance's kernel epoll first, with its events and data. */
static void drop_regs_of(struct shim_file *f, bool to_kernel)
{
	sigset_t old;
	bool first = false;

	if (!atomic_load(&f->uep_regs))
		return;
	reg_enter(&old);
	for (int fd = 0; fd <= insts_hi; fd++) {
		struct uep *u = insts[fd];
		if (!u)
			continue;
		pthread_mutex_lock(&u->lock);
		for (unsigned i = 0; i < u->n;) {
			struct uep_item *it = u->v[i];
			if (it->f != f) {
				i++;
				continue;
			}
			if (to_kernel) {
				struct epoll_event ev = { .events = it->disarmed ?
							  it->events & ~REPORTABLE : it->events,
							  .data = it->data };
				if (shim__real.epoll_ctl(u->epfd, EPOLL_CTL_ADD, it->fd, &ev) == 0 &&
				    u->nkernel++ == 0)
					first = true;
			}
			item_drop(u, i, false);  /* the socket is closing, or is the kernel's now */
		}
		pthread_mutex_unlock(&u->lock);
	}
	reg_leave(&old);
	if (first)
		uep__kernel_first();
}

/* Every registration of f, whose last descriptor is closing (fdtab.c finish), goes. */
void shim__uep_forget(struct shim_file *f)
{
	drop_regs_of(f, false);
}

/* f became a kernel socket under the same numbers (socket.c to_kernel): its
 * registrations move to the kernel instances. */
void shim__uep_to_kernel(struct shim_file *f)
{
	drop_regs_of(f, true);
}

static int find(const struct uep *u, int fd, const struct shim_file *f)
{
	for (unsigned i = 0; i < u->n; i++)
		if (u->v[i]->fd == fd && u->v[i]->f == f)
			return (int)i;
	return -1;
}

/* epoll_ctl on an instance the shim keeps. Returns 1 when the kernel should do it (a
 * kernel descriptor), else 0 or -errno. */
static int ctl_ours(struct uep *u, int op, int fd, struct epoll_event *ev)
{
	struct shim_file *f = shim__get(fd);
	sigset_t old;
	int rc = 0;

	if (!f)
		return 1;
	if (op != EPOLL_CTL_ADD && op != EPOLL_CTL_MOD && op != EPOLL_CTL_DEL) {
		rc = -EINVAL;
		goto out;
	}
	if (op != EPOLL_CTL_DEL && !ev) {
		rc = -EFAULT;
		goto out;
	}
	uint32_t events = ev ? ev->events : 0;
	/* epoll_ctl(2): EPOLLEXCLUSIVE only with ADD, and with few other flags. */
	if (op != EPOLL_CTL_DEL && (events & EPOLLEXCLUSIVE) &&
	    (op == EPOLL_CTL_MOD || (events & ~(uint32_t)EXCL_OK))) {
		rc = -EINVAL;
		goto out;
	}
	if (op != EPOLL_CTL_DEL)
		shim__adopt_set(&fd, 1);
	uep__lock(u, &old);
	if (u->dead) {
		uep__unlock(u, &old);
		shim__put(f);
		return 1;  /* fell back meanwhile: the kernel's */
	}
	int i = find(u, fd, f);
	short pev = (short)(events & REPORTABLE);
	unsigned flags = (events & EPOLLET ? ULS_EPI_ET : 0) |
			 (events & EPOLLONESHOT ? ULS_EPI_ONESHOT : 0);
	struct uep_item *it;
	switch (op) {
	case EPOLL_CTL_ADD:
		if (i >= 0) {
			rc = -EEXIST;
			break;
		}
		if (u->n == u->cap) {
			unsigned cap = u->cap ? u->cap * 2 : 16;
			struct uep_item **v = realloc(u->v, cap * sizeof(*v));
			if (!v) {
				rc = -ENOMEM;
				break;
			}
			u->v = v;
			u->cap = cap;
		}
		it = malloc(sizeof(*it));
		if (!it) {
			rc = -ENOMEM;
			break;
		}
		*it = (struct uep_item){ .fd = fd, .f = f, .data = ev->data,
					 .events = events | EPOLLERR | EPOLLHUP };
		/* One hold of the core lock, left without the stack's leave: the registration,
		 * the socket's lazy count, and the wake-up of a driver waiting for this set
		 * (stk__ready_note); readylist.c says why. */
		rc = uls_epi_add(u->rl, f->sd, pev, flags | ULS_EPI_LAZY, it, &it->epi);
		if (rc < 0) {
			free(it);
			break;
		}
		u->v[u->n++] = it;
		atomic_fetch_add(&f->uep_regs, 1);
		atomic_fetch_add(&lazy_regs, 1);
		wake_sleepers(u);
		break;
	case EPOLL_CTL_MOD:
		if (i < 0) {
			rc = -ENOENT;
			break;
		}
		it = u->v[i];
		if (it->events & EPOLLEXCLUSIVE) {
			rc = -EINVAL;
			break;
		}
		it->events = events | EPOLLERR | EPOLLHUP;
		it->data = ev->data;
		it->disarmed = false;
		uls_epi_mod(it->epi, pev, flags);  /* wakes a driver, as uls_epi_add */
		wake_sleepers(u);
		break;
	case EPOLL_CTL_DEL:
		if (i < 0)
			rc = -ENOENT;
		else
			item_drop(u, (unsigned)i, true);
		break;
	}
	uep__unlock(u, &old);
out:
	shim__put(f);
	return rc;
}

SHIM_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	shim__real_init();
	if (fd != epfd)
		shim__uep_exposed(fd);  /* an instance nested in another: the mirror path */
	struct uep *u = uep__get(epfd);
	if (u) {
		int rc = fd == epfd ? -EINVAL : ctl_ours(u, op, fd, ev);
		if (rc != 1) {
			uep__put(u);
			return shim__ret(rc);
		}
		rc = shim__real.epoll_ctl(epfd, op, fd, ev);
		if (rc == 0 && op == EPOLL_CTL_ADD)
			pin_fd(fd);  /* a socket of an instance that just fell back */
		if (rc == 0) {
			sigset_t old;
			bool first = false;
			uep__lock(u, &old);
			if (op == EPOLL_CTL_ADD)
				first = u->nkernel++ == 0;
			else if (op == EPOLL_CTL_DEL && u->nkernel)
				u->nkernel--;
			uep__unlock(u, &old);
			if (first)
				uep__kernel_first();
		}
		uep__put(u);
		return rc;
	}
	if (op == EPOLL_CTL_ADD || op == EPOLL_CTL_MOD)
		shim__adopt_set(&fd, 1);
	int rc = shim__real.epoll_ctl(epfd, op, fd, ev);
	if (rc == 0 && op == EPOLL_CTL_ADD)
		pin_fd(fd);
	return rc;
}

int shim__uep_hi(void)
{
	return __atomic_load_n(&insts_hi, __ATOMIC_RELAXED);
}

/* While some instance holds sockets, the sockets of a poll or select set are armed for
 * the call: their mirrors exact while the kernel looks at them (delta +1, then -1). */
bool shim__uep_active(void)
{
	return atomic_load(&lazy_regs) > 0;
}

void shim__uep_arm(const int *fds, size_t n, int delta)
{
	for (size_t i = 0; i < n; i++) {
		struct shim_file *f = shim__get(fds[i]);
		if (!f)
			continue;
		uep__watch(f->sd, 0, delta);
		shim__put(f);
	}
}
