/* poll, select and epoll on user-level sockets are the kernel's own: the descriptors are
 * readiness mirrors (stack/mirror.c), so level and edge triggering, EPOLLONESHOT,
 * EPOLLEXCLUSIVE and nested epoll sets work as they do for any descriptor. What the shim
 * adds: after fork, a socket inherited from the parent is adopted before the kernel is
 * asked to watch it, and a listener watched here counts as one this process accepts on
 * (fork.c).
 */
#include "shim.h"

#include <stdlib.h>

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

SHIM_EXPORT int poll(struct pollfd *p, nfds_t n, int timeout)
{
	shim__real_init();
	if (p)
		adopt_pollfds(p, n);
	return shim__real.poll(p, n, timeout);
}

SHIM_EXPORT int ppoll(struct pollfd *p, nfds_t n, const struct timespec *t, const sigset_t *m)
{
	shim__real_init();
	if (p)
		adopt_pollfds(p, n);
	return shim__real.ppoll(p, n, t, m);
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
