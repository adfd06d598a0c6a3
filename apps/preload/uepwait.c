/* User-level epoll (uepoll.c): epoll_wait, its look at the ready list and the kernel
 * instance, and its sleep. */
#include "shim.h"
#include "uepoll.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "uls.h"

/* Per thread: what one look took from the ready list. */
static __thread struct uls_rlev *rv;
static __thread unsigned rcap;

/* A fork child: its sockets are adopted (its own from now on) and counted lazy in its
 * own stack. */
static void after_fork(struct uep *u)
{
	sigset_t old;

	uep__lock(u, &old);
	unsigned n = u->n;
	int *fds = n ? malloc(n * sizeof(*fds)) : NULL;
	for (unsigned i = 0; fds && i < n; i++)
		fds[i] = u->v[i]->fd;
	uep__unlock(u, &old);
	if (fds)
		shim__adopt_set(fds, n);
	free(fds);
	uep__lock(u, &old);
	if (u->gen != shim__generation()) {
		/* Read without the lock by uep_wait's first look: atomic. */
		__atomic_store_n(&u->gen, shim__generation(), __ATOMIC_RELEASE);
		for (unsigned i = 0; i < u->n; i++)
			uep__watch(u->v[i]->f->sd, 1, 0);
		uls_rl_requeue(u->rl);  /* the child's sockets moved unseen (adopted, claimed) */
	}
	uep__unlock(u, &old);
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
	uep__lock(u, &old);
	if (u->dead || (!u->n && shim__maxfd() < 0)) {
		uep__unlock(u, &old);
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
	uep__unlock(u, &old);
	return n;
}

/* When the kernel instance was last asked: a hint for fairness, stored and read by every
 * thread waiting on the instance without its lock (relaxed: it orders nothing). */
static int64_t kcheck_age(const struct uep *u)
{
	return uep__now_ns() - __atomic_load_n(&u->kcheck_ns, __ATOMIC_RELAXED);
}

static int kernel_look(struct uep *u, struct epoll_event *ev, int max)
{
	__atomic_store_n(&u->kcheck_ns, uep__now_ns(), __ATOMIC_RELAXED);
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

	uep__lock(u, &old);
	if (u->wakefd < 0)
		u->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	p = calloc(u->n + 2, sizeof(*p));
	sds = calloc(u->n + 1, sizeof(*sds));
	if (!p || !sds) {
		uep__unlock(u, &old);
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
		uep__watch(it->f->sd, 0, 1);  /* a token now if readable, and on every change */
	}
	u->sleepers++;
	uep__unlock(u, &old);
	unsigned ran = shim__handlers_run();
	int rc;
	if (mask) {
		struct timespec ts = { timeout / 1000, (long)(timeout % 1000) * 1000000 };
		rc = shim__real.ppoll(p, n, timeout < 0 ? NULL : &ts, mask);
	} else {
		rc = shim__real.poll(p, n, timeout);
	}
	int err = rc < 0 ? errno : 0;
	uep__lock(u, &old);
	u->sleepers--;
	if (p[1].revents & POLLIN) {
		uint64_t v;
		ssize_t r = shim__real.read(u->wakefd, &v, sizeof(v));
		(void)r;
	}
	uep__unlock(u, &old);
	for (unsigned i = 0; i < ns; i++)
		uep__watch(sds[i], 0, -1);
	free(p);
	free(sds);
	/* As kernel_epoll_wait (poll.c): EINTR only when a handler ran. */
	if (err == EINTR && shim__handlers_run() != ran)
		return -EINTR;
	return 0;
}

static int64_t now_ms(void)
{
	return uep__now_ns() / 1000000;
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
	struct uep *u = uep__get(epfd);

	if (!u)
		return -EAGAIN;
	int rc = uep_wait(u, ev, max, timeout, mask, left);
	uep__put(u);
	return rc;
}

