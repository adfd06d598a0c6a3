/* poll and select on user-level sockets are the kernel's own: the descriptors are
 * readiness mirrors (stack/mirror.c). epoll instances the program made are the shim's
 * for their user-level sockets (uepoll.c); one the shim does not know (or one fallen
 * back to the mirrors) is the kernel's, level and edge triggering, EPOLLONESHOT,
 * EPOLLEXCLUSIVE and nesting included. What the shim adds here: after fork, a socket
 * inherited from the parent is adopted before the kernel is asked to watch it, and a
 * listener watched here counts as one this process accepts on (fork.c); a user-level
 * epoll instance watched by poll or select falls back to the mirrors, and the sockets
 * such instances hold are armed for the call (their readable token is lazy); and poll,
 * select and epoll_wait drive the stack while they wait (run to completion).
 */
#include "shim.h"

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "uls.h"

/* Before poll or select: inherited sockets adopted, a user-level epoll instance watched
 * falls back to the mirrors, and sockets that user-level instances hold (whose mirrors
 * are lazy) armed for the call (disarm: the same, -1, after it). */
static void adopt_pollfds(const struct pollfd *p, nfds_t n)
{
	for (nfds_t i = 0; i < n; i++) {
		shim__adopt_set(&p[i].fd, 1);
		shim__uep_exposed(p[i].fd);
	}
}

static bool arm_pollfds(const struct pollfd *p, nfds_t n, int delta)
{
	if (delta > 0 && !shim__uep_active())
		return false;
	for (nfds_t i = 0; i < n; i++)
		shim__uep_arm(&p[i].fd, 1, delta);
	return true;
}

static void adopt_fdset(int nfds, const fd_set *a, const fd_set *b)
{
	int hi = shim__maxfd(), ehi = shim__uep_hi();

	for (int fd = 0; fd < nfds && fd <= hi && fd < FD_SETSIZE; fd++)
		if ((a && FD_ISSET(fd, a)) || (b && FD_ISSET(fd, b)))
			shim__adopt_set(&fd, 1);
	for (int fd = 0; fd < nfds && fd <= ehi && fd < FD_SETSIZE; fd++)
		if ((a && FD_ISSET(fd, a)) || (b && FD_ISSET(fd, b)))
			shim__uep_exposed(fd);
}

static bool arm_fdset(int nfds, const fd_set *a, const fd_set *b, const fd_set *c, int delta)
{
	if (delta > 0 && !shim__uep_active())
		return false;
	int hi = shim__maxfd();
	for (int fd = 0; fd < nfds && fd <= hi && fd < FD_SETSIZE; fd++)
		if ((a && FD_ISSET(fd, a)) || (b && FD_ISSET(fd, b)) || (c && FD_ISSET(fd, c)))
			shim__uep_arm(&fd, 1, delta);
	return true;
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

/* A poll or select on a set holding user-level sockets reported rc of them ready: as after
 * epoll_wait (uepoll.c), the program answers them before it waits again, and all but the
 * last of its sends may leave their transmit flush to a later one (uls_tx_batch: one
 * system call for the round's frames, issue 14). The round, and its batch, ends at the
 * thread's next poll, select or epoll_wait, whatever that wait does (wait_begin). */
static void batch_round(int rc)
{
	if (rc > 1)
		uls_tx_batch((unsigned)rc);
}

/* Before every poll, select and kernel epoll_wait: the last round is over. Its batch ends,
 * so that no send after this wait keeps its flush for sends the last round expected (a
 * round answered with fewer sends than it reported, or whose sends were flushed at once,
 * left it open: a send after a wait that reports one socket, or that the kernel answers,
 * waited up to the stack thread's grace). And what it kept back leaves now, not after the
 * wait (a wait answered by the mirrors alone never enters the stack, whose leave would
 * flush it). */
static void wait_begin(void)
{
	if (!shim__enabled())
		return;
	uls_tx_batch(0);  /* a store to this thread's own variable: no lock */
	/* The flush takes the core lock: signals are held as on every path into the stack,
	 * so that a handler using sockets cannot wait for the lock this thread holds
	 * (stack/sigdefer.c). Only when something was kept back: the common wait pays
	 * nothing more. */
	if (!uls_tx_kept())
		return;
	sigset_t old;
	shim__enter(&old);
	uls_tx_flush();
	shim__leave(&old);
}

/* One round of poll_drive or epoll_drive: drive the stack while waiting on set for at most
 * left ms (uls_poll_drive), signals held as on every path into the stack and the wait's
 * own mask (NULL: the program's) applied during the wait. */
static int drive_round(struct pollfd *set, nfds_t n, int left, const sigset_t *mask)
{
	sigset_t old;

	shim__enter(&old);
	int d = uls_poll_drive(set, (unsigned)n, left, mask ? mask : shim__program_mask(&old));
	shim__leave(&old);
	return d;
}

/* poll(2) and ppoll(2) (mask: NULL, or the mask for the wait) on a set holding user-level
 * sockets: as epoll_drive below, with the whole set (mirrors and kernel descriptors) in
 * the one wait on the device. */
static int poll_drive(struct pollfd *p, nfds_t n, int timeout, const sigset_t *mask)
{
	int64_t end = timeout > 0 ? now_ms() + timeout : 0;

	for (;;) {
		int rc = shim__real.poll(p, n, 0);
		if (rc != 0) {
			batch_round(rc);
			return rc;
		}
		int left;
		if (!time_left(timeout, end, &left))
			return 0;
		int d = drive_round(p, n, left, mask);
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

/* Around a poll of the program's set: epoll instances in it fall back to the mirrors,
 * and its lazy sockets are armed for the call (arm_end disarms them, errno kept). */
static bool arm_begin(struct pollfd *p, nfds_t n)
{
	if (p)
		adopt_pollfds(p, n);
	return p && n <= 0xffffu && arm_pollfds(p, n, 1);
}

static void arm_end(struct pollfd *p, nfds_t n, bool armed)
{
	if (armed) {
		int err = errno;
		arm_pollfds(p, n, -1);
		errno = err;
	}
}

/* arm_begin and arm_end for select's sets: in[] keeps the sets as given (select
 * overwrites them with the ready ones), and the end disarms what the begin armed. */
static bool fdset_arm_begin(int nfds, fd_set *r, fd_set *w, fd_set *e, fd_set in[3])
{
	adopt_fdset(nfds, r, w);
	const fd_set *sets[3] = { r, w, e };
	for (int k = 0; k < 3; k++)
		if (sets[k])
			in[k] = *sets[k];
	return arm_fdset(nfds, r ? &in[0] : NULL, w ? &in[1] : NULL, e ? &in[2] : NULL, 1);
}

static void fdset_arm_end(int nfds, const fd_set *r, const fd_set *w, const fd_set *e,
			  const fd_set in[3], bool armed)
{
	if (armed) {
		int err = errno;
		arm_fdset(nfds, r ? &in[0] : NULL, w ? &in[1] : NULL, e ? &in[2] : NULL, -1);
		errno = err;
	}
}

static int poll_unarmed(struct pollfd *p, nfds_t n, int timeout)
{
	if (timeout == 0 || !p || n > 0xffffu || !holds_ours(p, n))
		return shim__real.poll(p, n, timeout);
	return poll_drive(p, n, timeout, NULL);
}

SHIM_EXPORT int poll(struct pollfd *p, nfds_t n, int timeout)
{
	shim__real_init();
	wait_begin();
	bool armed = arm_begin(p, n);
	int rc = poll_unarmed(p, n, timeout);
	arm_end(p, n, armed);
	return rc;
}

static int ppoll_unarmed(struct pollfd *p, nfds_t n, const struct timespec *t,
			 const sigset_t *m);

SHIM_EXPORT int ppoll(struct pollfd *p, nfds_t n, const struct timespec *t, const sigset_t *m)
{
	shim__real_init();
	wait_begin();
	bool armed = arm_begin(p, n);
	int rc = ppoll_unarmed(p, n, t, m);
	arm_end(p, n, armed);
	return rc;
}

static int ppoll_unarmed(struct pollfd *p, nfds_t n, const struct timespec *t,
			 const sigset_t *m)
{
	/* Timeouts of whole milliseconds only (rounded up); others go to the kernel. */
	if (!p || n > 0xffffu || (t && (t->tv_sec < 0 || t->tv_nsec < 0 ||
				      t->tv_nsec >= 1000000000 || t->tv_sec > 1000000)) ||
	    (t && !t->tv_sec && !t->tv_nsec) || !holds_ours(p, n))
		return shim__real.ppoll(p, n, t, m);
	int timeout = t ? (int)(t->tv_sec * 1000 + (t->tv_nsec + 999999) / 1000000) : -1;
	return poll_drive(p, n, timeout, m);
}

/* Does the set hold a user-level socket? */
static bool fdset_holds_ours(int nfds, const fd_set *r, const fd_set *w, const fd_set *e)
{
	if (!shim__enabled() || shim__maxfd() < 0)
		return false;
	int hi = shim__maxfd();
	for (int fd = 0; fd < nfds && fd <= hi; fd++)
		if (((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) || (e && FD_ISSET(fd, e))) &&
		    shim__is_ours(fd))
			return true;
	return false;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* select(2) and pselect(2) on sets holding user-level sockets: as poll_drive, the sets
 * asked without waiting, then one round of the stack while waiting on the device and on
 * the sets' descriptors (as poll: read POLLIN, write POLLOUT, except POLLPRI), until one
 * is ready or the time is up. timeout_ns < 0: no limit. *left_ns (select's Linux
 * behaviour: the timeval says the time not slept) is set on return. Like the kernel's
 * select, a handler that runs ends the wait with EINTR, SA_RESTART or not (signal(7)). */
static int select_drive(int nfds, fd_set *r, fd_set *w, fd_set *e, int64_t timeout_ns,
			const sigset_t *mask, int64_t *left_ns)
{
	static const short ev[3] = { POLLIN, POLLOUT, POLLPRI };
	fd_set *sets[3] = { r, w, e }, in[3], out[3];
	struct pollfd *p = calloc((size_t)nfds * 3, sizeof(*p));
	unsigned n = 0;
	int64_t end = timeout_ns >= 0 ? now_ns() + timeout_ns : 0;
	int rc;

	if (!p) {
		*left_ns = timeout_ns;
		return -EBUSY;
	}
	for (int k = 0; k < 3; k++) {
		if (!sets[k])
			continue;
		in[k] = *sets[k];
		for (int fd = 0; fd < nfds; fd++)
			if (FD_ISSET(fd, &in[k]))
				p[n++] = (struct pollfd){ .fd = fd, .events = ev[k] };
	}
	for (;;) {
		struct timeval zero = { 0, 0 };
		for (int k = 0; k < 3; k++)
			if (sets[k])
				out[k] = in[k];
		rc = shim__real.select(nfds, r ? &out[0] : NULL, w ? &out[1] : NULL,
				       e ? &out[2] : NULL, &zero);
		if (rc < 0) {
			rc = -errno;
			break;
		}
		int64_t l = timeout_ns >= 0 ? end - now_ns() : -1;
		if (rc > 0 || (timeout_ns >= 0 && l <= 0)) {
			for (int k = 0; k < 3; k++)
				if (sets[k])
					*sets[k] = out[k];  /* none set when the time is up */
			batch_round(rc);
			break;
		}
		/* Whole milliseconds for the device's wait, rounded up (as poll's timeout). */
		int ms = l < 0 ? -1 : l / 1000000 >= INT32_MAX ? INT32_MAX : (int)((l + 999999) / 1000000);
		sigset_t old;
		shim__enter(&old);
		int d = uls_poll_drive(p, n, ms, mask ? mask : shim__program_mask(&old));
		shim__leave(&old);
		if (d == -EINTR) {
			rc = -EINTR;
			break;
		}
		if (d == -EBUSY || d == -EINVAL || d == -ENOMEM) {
			/* The kernel waits: the caller asks it with the time left. */
			*left_ns = timeout_ns >= 0 ? (l > 0 ? l : 0) : -1;
			free(p);
			return -EBUSY;
		}
	}
	if (timeout_ns >= 0) {
		int64_t l = end - now_ns();
		*left_ns = l > 0 ? l : 0;
	}
	free(p);
	return rc;
}

static int select_unarmed(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *t);

SHIM_EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *t)
{
	shim__real_init();
	wait_begin();
	fd_set in[3];
	bool armed = fdset_arm_begin(nfds, r, w, e, in);
	int rc = select_unarmed(nfds, r, w, e, t);
	fdset_arm_end(nfds, r, w, e, in, armed);
	return rc;
}

static int select_unarmed(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *t)
{
	/* Sets larger than fd_set (nfds > FD_SETSIZE, which the kernel allows) and zero
	 * timeouts go to the kernel as they are. */
	if (nfds <= 0 || nfds > FD_SETSIZE || (t && !t->tv_sec && !t->tv_usec) ||
	    (t && (t->tv_sec < 0 || t->tv_usec < 0 || t->tv_usec >= 1000000 ||
		   t->tv_sec > 100000000)) || !fdset_holds_ours(nfds, r, w, e))
		return shim__real.select(nfds, r, w, e, t);
	int64_t left = -1, timeout = t ? (int64_t)t->tv_sec * 1000000000 + t->tv_usec * 1000 : -1;
	int rc = select_drive(nfds, r, w, e, timeout, NULL, &left);
	if (rc == -EBUSY) {
		struct timeval tv = { left / 1000000000, (left % 1000000000) / 1000 };
		rc = shim__real.select(nfds, r, w, e, t ? &tv : NULL);
		if (t)
			*t = tv;  /* the kernel updated it: the time still left */
		return rc;
	}
	if (t) {
		/* Linux updates the timeout to the time not slept (select(2)). */
		t->tv_sec = left / 1000000000;
		t->tv_usec = (left % 1000000000) / 1000;
	}
	return shim__ret(rc);
}

static int pselect_unarmed(int nfds, fd_set *r, fd_set *w, fd_set *e,
			   const struct timespec *t, const sigset_t *m);

SHIM_EXPORT int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t,
			const sigset_t *m)
{
	shim__real_init();
	wait_begin();
	fd_set in[3];
	bool armed = fdset_arm_begin(nfds, r, w, e, in);
	int rc = pselect_unarmed(nfds, r, w, e, t, m);
	fdset_arm_end(nfds, r, w, e, in, armed);
	return rc;
}

static int pselect_unarmed(int nfds, fd_set *r, fd_set *w, fd_set *e,
			   const struct timespec *t, const sigset_t *m)
{
	if (nfds <= 0 || nfds > FD_SETSIZE || (t && !t->tv_sec && !t->tv_nsec) ||
	    (t && (t->tv_sec < 0 || t->tv_nsec < 0 || t->tv_nsec >= 1000000000 ||
		   t->tv_sec > 100000000)) || !fdset_holds_ours(nfds, r, w, e))
		return shim__real.pselect(nfds, r, w, e, t, m);
	/* glibc's pselect leaves the timeout alone (the system call would update it). */
	int64_t left = -1, timeout = t ? (int64_t)t->tv_sec * 1000000000 + t->tv_nsec : -1;
	int rc = select_drive(nfds, r, w, e, timeout, m, &left);
	if (rc == -EBUSY) {
		struct timespec ts = { left / 1000000000, left % 1000000000 };
		return shim__real.pselect(nfds, r, w, e, t ? &ts : NULL, m);
	}
	return shim__ret(rc);
}

/* epoll_ctl is uepoll.c's. */


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

/* epoll_wait(2) or epoll_pwait(2) in the kernel, for up to timeout ms. A thread that armed
 * io_uring requests (the device's receive reads, when it drove the stack) gets their
 * completions as task work, which wakes it from whatever it sleeps in as a signal would
 * (TIF_NOTIFY_SIGNAL), and epoll_wait then fails with EINTR: most calls are restarted by
 * the kernel, epoll_wait never is. The kernel's own epoll_wait says EINTR only when a
 * handler ran, so without one (the trampoline counts them) the wait goes on for what is
 * left of it. Deviation: a handler installed without the C library is not counted, and
 * does not end the wait. */
static int kernel_epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout,
			     const sigset_t *mask)
{
	int64_t end = timeout > 0 ? now_ms() + timeout : 0;

	for (;;) {
		unsigned ran = shim__handlers_run();
		int rc = mask ? shim__real.epoll_pwait(epfd, ev, max, timeout, mask) :
				shim__real.epoll_wait(epfd, ev, max, timeout);
		if (rc >= 0 || errno != EINTR || shim__handlers_run() != ran)
			return rc;
		if (!time_left(timeout, end, &timeout))
			return 0;
	}
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
		struct pollfd set = { .fd = epfd, .events = POLLIN };
		int d = drive_round(&set, 1, left, mask);
		if (d == -EINTR)
			return shim__ret(-EINTR);
		if (d == -EBUSY || d == -EINVAL)
			return kernel_epoll_wait(epfd, ev, max, left, mask);
	}
}

SHIM_EXPORT int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
	shim__real_init();
	int rc = shim__uep_wait(epfd, ev, max, timeout, NULL, &timeout);
	if (rc != -EAGAIN)
		return shim__ret(rc);
	wait_begin();  /* the shim's own sets end the round in uep_wait */
	if (timeout == 0 || !shim__enabled())
		return shim__real.epoll_wait(epfd, ev, max, timeout);
	if (shim__maxfd() < 0)
		return kernel_epoll_wait(epfd, ev, max, timeout, NULL);
	return epoll_drive(epfd, ev, max, timeout, NULL);
}

SHIM_EXPORT int epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout,
			    const sigset_t *mask)
{
	shim__real_init();
	int rc = shim__uep_wait(epfd, ev, max, timeout, mask, &timeout);
	if (rc != -EAGAIN)
		return shim__ret(rc);
	wait_begin();
	if (timeout == 0 || !shim__enabled())
		return shim__real.epoll_pwait(epfd, ev, max, timeout, mask);
	if (shim__maxfd() < 0)
		return kernel_epoll_wait(epfd, ev, max, timeout, mask);
	return epoll_drive(epfd, ev, max, timeout, mask);
}
