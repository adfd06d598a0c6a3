/* poll, select and epoll on user-level sockets are the kernel's own: the descriptors are
 * readiness mirrors (stack/mirror.c), so level and edge triggering, EPOLLONESHOT,
 * EPOLLEXCLUSIVE and nested epoll sets work as they do for any descriptor. What the shim
 * adds: after fork, a socket inherited from the parent is adopted before the kernel is
 * asked to watch it, and a listener watched here counts as one this process accepts on
 * (fork.c); and epoll_wait drives the stack while it waits (run to completion).
 */
#include "shim.h"

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "uls.h"

static void adopt_pollfds(const struct pollfd *p, nfds_t n)
{
	for (nfds_t i = 0; i < n; i++)
		shim__adopt_set(&p[i].fd, 1);
}

static void adopt_fdset(int nfds, const fd_set *a, const fd_set *b)
{
	int hi = shim__maxfd();

	for (int fd = 0; fd < nfds && fd <= hi && fd < FD_SETSIZE; fd++)
		if ((a && FD_ISSET(fd, a)) || (b && FD_ISSET(fd, b)))
			shim__adopt_set(&fd, 1);
}

static int64_t now_ms(void);

/* The milliseconds a wait may still take (-1: no limit) for a call given timeout ms at
 * start (end: when it is up); false once it is up. */
static bool time_left(int timeout, int64_t end, int *left)
{
	*left = -1;
	if (timeout > 0) {
		int64_t l = end - now_ms();
		if (l <= 0)
			return false;
		*left = l > INT32_MAX ? INT32_MAX : (int)l;
	}
	return true;
}

/* Does the set hold a user-level socket? Only then is it worth driving the stack. */
static bool holds_ours(const struct pollfd *p, nfds_t n)
{
	if (!shim__enabled() || shim__maxfd() < 0)
		return false;
	for (nfds_t i = 0; i < n; i++)
		if (shim__is_ours(p[i].fd))
			return true;
	return false;
}

/* poll(2) and ppoll(2) (mask: NULL, or the mask for the wait) on a set holding user-level
 * sockets: as epoll_drive below, with the whole set (mirrors and kernel descriptors) in
 * the one wait on the device. */
static int poll_drive(struct pollfd *p, nfds_t n, int timeout, const sigset_t *mask)
{
	int64_t end = timeout > 0 ? now_ms() + timeout : 0;

	for (;;) {
		int rc = shim__real.poll(p, n, 0);
		if (rc != 0)
			return rc;
		int left;
		if (!time_left(timeout, end, &left))
			return 0;
		sigset_t old;
		shim__enter(&old);
		int d = uls_poll_drive(p, (unsigned)n, left, mask ? mask : shim__program_mask(&old));
		shim__leave(&old);
		if (d == -EINTR)
			return shim__ret(-EINTR);
		if (d == -EBUSY || d == -EINVAL || d == -ENOMEM) {
			if (!mask)
				return shim__real.poll(p, n, left);
			struct timespec ts = { left / 1000, (long)(left % 1000) * 1000000 };
			return shim__real.ppoll(p, n, left < 0 ? NULL : &ts, mask);
		}
	}
}

SHIM_EXPORT int poll(struct pollfd *p, nfds_t n, int timeout)
{
	shim__real_init();
	if (p)
		adopt_pollfds(p, n);
	if (timeout == 0 || !p || n > 0xffffu || !holds_ours(p, n))
		return shim__real.poll(p, n, timeout);
	return poll_drive(p, n, timeout, NULL);
}

SHIM_EXPORT int ppoll(struct pollfd *p, nfds_t n, const struct timespec *t, const sigset_t *m)
{
	shim__real_init();
	if (p)
		adopt_pollfds(p, n);
	/* Timeouts of whole milliseconds only (rounded up); others go to the kernel. */
	if (!p || n > 0xffffu || (t && (t->tv_sec < 0 || t->tv_nsec < 0 ||
				      t->tv_nsec >= 1000000000 || t->tv_sec > 1000000)) ||
	    (t && !t->tv_sec && !t->tv_nsec) || !holds_ours(p, n))
		return shim__real.ppoll(p, n, t, m);
	int timeout = t ? (int)(t->tv_sec * 1000 + (t->tv_nsec + 999999) / 1000000) : -1;
	return poll_drive(p, n, timeout, m);
}

SHIM_EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *t)
{
	shim__real_init();
	adopt_fdset(nfds, r, w);
	return shim__real.select(nfds, r, w, e, t);
}

SHIM_EXPORT int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t,
			const sigset_t *m)
{
	shim__real_init();
	adopt_fdset(nfds, r, w);
	return shim__real.pselect(nfds, r, w, e, t, m);
}

SHIM_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	shim__real_init();
	if (op == EPOLL_CTL_ADD || op == EPOLL_CTL_MOD)
		shim__adopt_set(&fd, 1);
	return shim__real.epoll_ctl(epfd, op, fd, ev);
}


SHIM_EXPORT int __poll_chk(struct pollfd *p, nfds_t n, int timeout, size_t len)
{
	if (len / sizeof(*p) < n)
		__chk_fail();
	return poll(p, n, timeout);
}

SHIM_EXPORT int __ppoll_chk(struct pollfd *p, nfds_t n, const struct timespec *t,
			    const sigset_t *m, size_t len)
{
	if (len / sizeof(*p) < n)
		__chk_fail();
	return ppoll(p, n, t, m);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* epoll_wait(2) and epoll_pwait(2) (mask: NULL, or the mask for the wait) in a process
 * with user-level sockets: ask the set without waiting; if nothing is ready, drive the
 * stack for one round while waiting on the device and the set together
 * (uls_poll_drive), and ask again. The frames that make a socket ready are so taken by
 * the thread that waits for them: one wake-up per message instead of two (the stack
 * thread's, then this thread's on the mirror). A handler that runs ends the wait with
 * EINTR, as epoll_wait is never restarted (signal(7)). When this thread cannot drive
 * (another does, or ULS_RTC=0), the kernel waits on the set as before. */
static int epoll_drive(int epfd, struct epoll_event *ev, int max, int timeout,
		       const sigset_t *mask)
{
	int64_t end = timeout > 0 ? now_ms() + timeout : 0;

	for (;;) {
		int rc = shim__real.epoll_wait(epfd, ev, max, 0);
		if (rc != 0)
			return rc;
		int left;
		if (!time_left(timeout, end, &left))
			return 0;
		sigset_t old;
		shim__enter(&old);
		struct pollfd set = { .fd = epfd, .events = POLLIN };
		int d = uls_poll_drive(&set, 1, left, mask ? mask : shim__program_mask(&old));
		shim__leave(&old);
		if (d == -EINTR)
			return shim__ret(-EINTR);
		if (d == -EBUSY || d == -EINVAL)
			return mask ? shim__real.epoll_pwait(epfd, ev, max, left, mask) :
				      shim__real.epoll_wait(epfd, ev, max, left);
	}
}

SHIM_EXPORT int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
	shim__real_init();
	if (timeout == 0 || !shim__enabled() || shim__maxfd() < 0)
		return shim__real.epoll_wait(epfd, ev, max, timeout);
	return epoll_drive(epfd, ev, max, timeout, NULL);
}

SHIM_EXPORT int epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout,
			    const sigset_t *mask)
{
	shim__real_init();
	if (timeout == 0 || !shim__enabled() || shim__maxfd() < 0)
		return shim__real.epoll_pwait(epfd, ev, max, timeout, mask);
	return epoll_drive(epfd, ev, max, timeout, mask);
}
