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
 * (fallback(): its sockets are registered in the kernel instance with their events and
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
#define KCHECK_NS 1000000  /* kernel descriptors asked at least this often when busy */
#define UEP_BATCH 1024     /* ready sockets taken from the stack per look, at most */
/* The events a registration may carry (the kernel refuses others with EINVAL only for
 * EPOLLEXCLUSIVE: EPOLLEXCLUSIVE_OK_BITS). */
#define EXCL_OK (EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP | EPOLLWAKEUP | EPOLLET | \
		 EPOLLEXCLUSIVE)
#define REPORTABLE (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLERR | EPOLLHUP)

struct uep_item {
	int fd;                /* the program's descriptor number */
	struct shim_file *f;   /* the socket (the registration is the pair's, as Linux's) */
	uint32_t events;       /* as given, EPOLLERR | EPOLLHUP added */
	epoll_data_t data;
	struct uls_epi *epi;   /* its registration on the instance's ready list */
	bool disarmed;         /* EPOLLONESHOT: reported, until EPOLL_CTL_MOD */
};

struct uep {
	pthread_mutex_t lock;
	int epfd;
	bool dead;             /* closed, or fell back to the mirrors */
	struct uls_rl *rl;     /* the ready list (the stack's) */
	struct uep_item **v;   /* the registrations; each is its ready list entry's cookie */
	unsigned n, cap;
	unsigned nkernel;      /* kernel descriptors added (an upper bound: close drops them) */
	int64_t kcheck_ns;     /* when the kernel instance was last asked */
	unsigned gen;          /* the fork generation its sockets were counted lazy in */
	unsigned sleepers;     /* threads waiting in the kernel on its sockets' mirrors */
	int wakefd;            /* eventfd that ends their wait (epoll_ctl), or -1 */
	struct uep *next_free;  /* in the pool of freed instances (reg_lock) */
	/* The table's reference and each call's inside, and UEP_DEAD while the instance is
	 * not in the table's hands (new, or freed into the pool). Last: the one member a
	 * reused instance keeps (see uep_get). */
	_Atomic uint64_t refs;
};

#define UEP_DEAD (UINT64_C(1) << 63)

static struct uep *insts[UEP_FDS];
static int insts_hi = -1;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct uep *pool;  /* freed instances, kept for created() (reg_lock) */
static atomic_uint lazy_regs;  /* registrations of sockets in all instances */
static int enabled = -1;

static bool uep_enabled(void)
{
	if (enabled < 0) {
		const char *e = getenv("ULS_USER_EPOLL");
		enabled = !(e && e[0] == '0' && !e[1]);
	}
	return enabled;
}

static int64_t now_ns(void)
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

static void uep_put(struct uep *u);

/* The instance of epfd with a reference, or NULL. No lock (issue 14: every epoll_wait
 * and epoll_ctl took reg_lock twice): an instance's memory is never given back, only
 * kept in the pool for the next one (type-stable, as fdtab.c's files), so a lookup that
 * read insts[epfd] just before the instance was freed still counts itself on an
 * instance, sees UEP_DEAD or that epfd names another now, and lets go. */
static struct uep *uep_get(int epfd)
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
		uep_put(u);  /* closed or replaced meanwhile: look again */
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
static void uep_put(struct uep *u)
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

static void watch(int sd, int lazy, int armed)
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
		watch(f->sd, 0, 1);
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
static void kick(struct uep *u)
{
	sigset_t old;

	shim__enter(&old);
	uls_poll_kick();
	shim__leave(&old);
	wake_sleepers(u);
}

static void lock(struct uep *u, sigset_t *old)
{
	shim__signals_hold(old);
	pthread_mutex_lock(&u->lock);
}

static void unlock(struct uep *u, const sigset_t *old)
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
static void fallback(int epfd)
{
	struct uep *u = uep_unlink(epfd);
	sigset_t old;

	if (!u)
		return;
	lock(u, &old);
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
	kick(u);
	unlock(u, &old);
	uep_put(u);
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
		lock(old_u, &old);
		old_u->dead = true;
		unlock(old_u, &old);
		uep_put(old_u);
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
	lock(u, &old);
	while (u->n)
		item_drop(u, u->n - 1, true);
	u->dead = true;
	kick(u);
	unlock(u, &old);
	uep_put(u);
}

/* fd is being copied (dup, F_DUPFD), watched by poll/select, or nested in another
 * epoll instance: an instance of it falls back to the mirrors. */
void shim__uep_exposed(int fd)
{
	if (fd >= 0 && fd < UEP_FDS && __atomic_load_n(&insts[fd], __ATOMIC_ACQUIRE))
		fallback(fd);
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
static void kernel_first(void)
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
		kernel_first();
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
	lock(u, &old);
	if (u->dead) {
		unlock(u, &old);
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
	unlock(u, &old);
out:
	shim__put(f);
	return rc;
}

SHIM_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	shim__real_init();
	if (fd != epfd)
		shim__uep_exposed(fd);  /* an instance nested in another: the mirror path */
	struct uep *u = uep_get(epfd);
	if (u) {
		int rc = fd == epfd ? -EINVAL : ctl_ours(u, op, fd, ev);
		if (rc != 1) {
			uep_put(u);
			return shim__ret(rc);
		}
		rc = shim__real.epoll_ctl(epfd, op, fd, ev);
		if (rc == 0 && op == EPOLL_CTL_ADD)
			pin_fd(fd);  /* a socket of an instance that just fell back */
		if (rc == 0) {
			sigset_t old;
			bool first = false;
			lock(u, &old);
			if (op == EPOLL_CTL_ADD)
				first = u->nkernel++ == 0;
			else if (op == EPOLL_CTL_DEL && u->nkernel)
				u->nkernel--;
			unlock(u, &old);
			if (first)
				kernel_first();
		}
		uep_put(u);
		return rc;
	}
	if (op == EPOLL_CTL_ADD || op == EPOLL_CTL_MOD)
		shim__adopt_set(&fd, 1);
	int rc = shim__real.epoll_ctl(epfd, op, fd, ev);
	if (rc == 0 && op == EPOLL_CTL_ADD)
		pin_fd(fd);
	return rc;
}

/* Per thread: what one look took from the ready list. */
static __thread struct uls_rlev *rv;
static __thread unsigned rcap;

/* A fork child: its sockets are adopted (its own from now on) and counted lazy in its
 * own stack. */
static void after_fork(struct uep *u)
{
	sigset_t old;

	lock(u, &old);
	unsigned n = u->n;
	int *fds = n ? malloc(n * sizeof(*fds)) : NULL;
	for (unsigned i = 0; fds && i < n; i++)
		fds[i] = u->v[i]->fd;
	unlock(u, &old);
	if (fds)
		shim__adopt_set(fds, n);
	free(fds);
	lock(u, &old);
	if (u->gen != shim__generation()) {
		/* Read without the lock by uep_wait's first look: atomic. */
		__atomic_store_n(&u->gen, shim__generation(), __ATOMIC_RELEASE);
		for (unsigned i = 0; i < u->n; i++)
			watch(u->v[i]->f->sd, 1, 0);
		uls_rl_requeue(u->rl);  /* the child's sockets moved unseen (adopted, claimed) */
	}
	unlock(u, &old);
}

/* Collect the instance's ready sockets into ev (at most max), from its ready list.
 * *gen: the stack's ready count as of the look; *nkernel: the instance's kernel
 * descriptors then. Returns how many, -ENOMEM, or -EAGAIN: fallen back (or closed)
 * meanwhile, or nothing of ours in a process without sockets.
 *
 * dead, n and nkernel are read here, under the instance's lock, not by uep_wait before
 * it: other threads change them under that lock (fallback, close, epoll_ctl), and a
 * plain read outside it was a data race (ThreadSanitizer, tests/shim closerace). Under
 * the lock the look is also one step with the fallback's: a fallback that sets dead
 * after it still moves the stack's ready count past *gen (kick), so the wait that
 * follows ends at once instead of sleeping until the kernel instance has an event. */
static int collect(struct uep *u, struct epoll_event *ev, int max, unsigned *gen,
		   unsigned *nkernel)
{
	unsigned want = (unsigned)max < UEP_BATCH ? (unsigned)max : UEP_BATCH;
	sigset_t old;

	if (want > rcap) {
		struct uls_rlev *v = realloc(rv, want * sizeof(*v));
		if (!v)
			return -ENOMEM;
		rv = v;
		rcap = want;
	}
	lock(u, &old);
	if (u->dead || (!u->n && shim__maxfd() < 0)) {
		unlock(u, &old);
		return -EAGAIN;
	}
	*nkernel = u->nkernel;
	int n = uls_rl_collect(u->rl, rv, want, gen);
	for (int i = 0; i < n; i++) {
		struct uep_item *it = rv[i].cookie;
		if (it->events & EPOLLONESHOT)
			it->disarmed = true;  /* as the stack's entry is */
		/* poll's bits and epoll's are the same numbers on Linux */
		ev[i].events = (uint32_t)(unsigned short)rv[i].revents & it->events;
		ev[i].data = it->data;
	}
	unlock(u, &old);
	return n;
}

/* When the kernel instance was last asked: a hint for fairness, stored and read by every
 * thread waiting on the instance without its lock (relaxed: it orders nothing). */
static int64_t kcheck_age(const struct uep *u)
{
	return now_ns() - __atomic_load_n(&u->kcheck_ns, __ATOMIC_RELAXED);
}

static int kernel_look(struct uep *u, struct epoll_event *ev, int max)
{
	__atomic_store_n(&u->kcheck_ns, now_ns(), __ATOMIC_RELAXED);
	int k = shim__real.epoll_wait(u->epfd, ev, max, 0);
	return k < 0 ? 0 : k;
}

/* Another thread drives (or run to completion is off): wait in the kernel on the kernel
 * instance, the sockets' mirrors (armed: exact while this thread waits) and the
 * instance's eventfd (epoll_ctl ends the wait). Returns 0 (look again) or -EINTR. */
static int kernel_sleep(struct uep *u, int timeout, const sigset_t *mask)
{
	sigset_t old;
	struct pollfd *p;
	unsigned n = 0;
	int *sds;

	lock(u, &old);
	if (u->wakefd < 0)
		u->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	p = calloc(u->n + 2, sizeof(*p));
	sds = calloc(u->n + 1, sizeof(*sds));
	if (!p || !sds) {
		unlock(u, &old);
		free(p);
		free(sds);
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
		return 0;
	}
	p[n++] = (struct pollfd){ .fd = u->epfd, .events = POLLIN };
	p[n++] = (struct pollfd){ .fd = u->wakefd, .events = POLLIN };
	unsigned ns = 0;
	for (unsigned i = 0; i < u->n; i++) {
		struct uep_item *it = u->v[i];
		if (it->disarmed || !shim__table_at(it->fd, it->f))
			continue;
		p[n++] = (struct pollfd){ .fd = it->fd, .events = (short)(it->events & REPORTABLE) };
		sds[ns++] = it->f->sd;
		watch(it->f->sd, 0, 1);  /* a token now if readable, and on every change */
	}
	u->sleepers++;
	unlock(u, &old);
	unsigned ran = shim__handlers_run();
	int rc;
	if (mask) {
		struct timespec ts = { timeout / 1000, (long)(timeout % 1000) * 1000000 };
		rc = shim__real.ppoll(p, n, timeout < 0 ? NULL : &ts, mask);
	} else {
		rc = shim__real.poll(p, n, timeout);
	}
	int err = rc < 0 ? errno : 0;
	lock(u, &old);
	u->sleepers--;
	if (p[1].revents & POLLIN) {
		uint64_t v;
		ssize_t r = shim__real.read(u->wakefd, &v, sizeof(v));
		(void)r;
	}
	unlock(u, &old);
	for (unsigned i = 0; i < ns; i++)
		watch(sds[i], 0, -1);
	free(p);
	free(sds);
	/* As kernel_epoll_wait (poll.c): EINTR only when a handler ran. */
	if (err == EINTR && shim__handlers_run() != ran)
		return -EINTR;
	return 0;
}

static int64_t now_ms(void)
{
	return now_ns() / 1000000;
}

/* epoll_wait/epoll_pwait on an instance the shim keeps. Returns -EAGAIN when it has no
 * socket of ours (the caller takes the kernel's path), else the count or -errno. */
static int uep_wait(struct uep *u, struct epoll_event *ev, int max, int timeout,
		    const sigset_t *mask, int *left_out)
{
	int64_t end = timeout > 0 ? now_ms() + timeout : 0;
	struct pollfd set = { .fd = u->epfd, .events = POLLIN };

	if (max <= 0 || (size_t)max > INT32_MAX / sizeof(struct epoll_event))
		return -EINVAL;
	if (!ev)
		return -EFAULT;
	/* Without the lock (after_fork looks again under it). */
	if (__atomic_load_n(&u->gen, __ATOMIC_ACQUIRE) != shim__generation())
		after_fork(u);
	/* The last round's sends not yet flushed leave with the look below (uls_tx_batch). */
	uls_tx_batch(0);
	for (int round = 0;; round++) {
		unsigned gen = 0, nkernel = 0;
		int n = collect(u, ev, max, &gen, &nkernel);
		if (n == -EAGAIN) {
			/* Fallen back (or closed) meanwhile, or nothing of ours in a process
			 * without sockets: the kernel's path, for the time left. */
			if (timeout > 0) {
				int64_t l = end - now_ms();
				*left_out = l <= 0 ? 0 : l > INT32_MAX ? INT32_MAX : (int)l;
			}
			return -EAGAIN;
		}
		if (n < 0)
			return n;
		bool kready = (set.revents & POLLIN) != 0;
		set.revents = 0;
		if (n > 0) {
			/* Fairness: the kernel's descriptors are asked too when the device wait
			 * said they are ready, or at least every KCHECK_NS while sockets keep
			 * being ready (a zero-timeout epoll_wait: a system call we skip
			 * otherwise). */
			if (nkernel && n < max && (kready || kcheck_age(u) >= KCHECK_NS))
				n += kernel_look(u, ev + n, max - n);
			/* An event loop answers its events before it waits again: one flush
			 * for the round's sends instead of one system call each (issue 14). */
			if (n > 1)
				uls_tx_batch((unsigned)n);
			return n;
		}
		/* Nothing of ours: the kernel's descriptors too, when the device wait said so,
		 * for a zero timeout, or when not asked for KCHECK_NS (else the device wait
		 * below, which watches the kernel's instance, answers for them). */
		if (nkernel && (kready || timeout == 0 ||
				(round == 0 && kcheck_age(u) >= KCHECK_NS))) {
			int k = kernel_look(u, ev, max);
			if (k > 0)
				return k;
		}
		int left = -1;
		if (timeout == 0)
			return 0;
		if (timeout > 0) {
			int64_t l = end - now_ms();
			if (l <= 0)
				return 0;
			left = l > INT32_MAX ? INT32_MAX : (int)l;
		}
		sigset_t old;
		shim__enter(&old);
		/* Without kernel descriptors the device's wait is one io_uring_enter that
		 * submits the re-armed reads and sleeps (netif/qring.c ring_wait). With the
		 * kernel instance in the set it is poll(2), three system calls: the submit,
		 * the poll, which the reads' completions interrupt (io_uring runs them as
		 * task work of the thread that submitted them), and its restart
		 * (redis-benchmark with one client: 3.07 system calls per request against
		 * 2.03). An epoll_ctl that gives the instance its first kernel descriptor
		 * wakes this wait (kernel_first), as Linux's epoll_ctl wakes an epoll_wait. */
		int d = uls_poll_drive_gen(&set, u->nkernel ? 1 : 0, left,
					   mask ? mask : shim__program_mask(&old), &gen);
		shim__leave(&old);
		if (d == -EINTR)
			return -EINTR;
		if (d == -EBUSY || d == -EINVAL || d == -ENOMEM) {
			set.revents = 0;
			d = kernel_sleep(u, left, mask);
			if (d == -EINTR)
				return -EINTR;
			set.revents = POLLIN;  /* ask the kernel's descriptors next round */
		}
	}
}

/* poll.c's epoll_wait and epoll_pwait: -EAGAIN when epfd is not an instance of ours
 * (or holds no socket), else the answer (count or -errno). */
int shim__uep_wait(int epfd, struct epoll_event *ev, int max, int timeout,
		   const sigset_t *mask, int *left)
{
	struct uep *u = uep_get(epfd);

	if (!u)
		return -EAGAIN;
	int rc = uep_wait(u, ev, max, timeout, mask, left);
	uep_put(u);
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
		watch(f->sd, 0, delta);
		shim__put(f);
	}
}
