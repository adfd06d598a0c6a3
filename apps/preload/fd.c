/* Descriptor calls on user-level sockets: close, close_range, dup, dup2, dup3, fcntl,
 * ioctl (the node's interface queries are ifaddr.c's). The descriptor numbers are the
 * kernel's own (the mirror), so most of the work is the kernel's; here the table of which
 * numbers are sockets follows along, O_NONBLOCK is kept (the mirror itself must stay
 * blocking), and the library's own descriptors are kept out of the program's reach.
 */
#include "shim.h"

#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "uls.h"

SHIM_EXPORT int close(int fd)
{
	shim__real_init();
	if (shim__guarded(fd))
		return shim__ret(-EBADF);  /* not the program's to close */
	shim__uep_closed(fd);
	shim__uninstall(fd);
	return shim__real.close(fd);
}

/* close_range(2) over the program's descriptors, never the library's. */
SHIM_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
	shim__real_init();
	if (first > last)
		return shim__ret(-EINVAL);
	if (!shim__real.close_range)
		return shim__ret(-ENOSYS);
	if (flags & CLOSE_RANGE_CLOEXEC)
		return shim__real.close_range(first, last, flags);
	int hi = shim__maxfd();
	for (long fd = first; fd <= (long)last && fd <= hi; fd++)
		shim__uninstall((int)fd);
	for (long fd = first; fd <= (long)last && fd <= shim__uep_hi(); fd++)
		shim__uep_closed((int)fd);
	unsigned start = first;
	int phi = uls_fd_private_max();
	for (long fd = first; fd <= (long)last && fd <= phi; fd++) {
		if (!shim__guarded((int)fd))
			continue;
		if ((unsigned)fd > start && shim__real.close_range(start, (unsigned)fd - 1, flags) < 0)
			return -1;
		start = (unsigned)fd + 1;
	}
	if (start <= last && start >= first)
		return shim__real.close_range(start, last, flags);
	return 0;
}

/* After the kernel made nfd a copy of fd, the table follows. A copied epoll instance
 * falls back to the mirrors (uepoll.c), and one that nfd named is gone. */
static int copied(int fd, int nfd)
{
	struct shim_file *f = shim__get(fd);

	if (nfd < 0) {
		if (f)
			shim__put(f);
		return nfd;
	}
	if (nfd != fd)
		shim__uep_closed(nfd);
	if (f) {
		shim__install(nfd, f);
		shim__put(f);
	} else {
		shim__uninstall(nfd);
	}
	return nfd;
}

SHIM_EXPORT int dup(int fd)
{
	shim__real_init();
	if (shim__guarded(fd))
		return shim__ret(-EBADF);
	shim__uep_exposed(fd);
	return copied(fd, shim__real.dup(fd));
}

SHIM_EXPORT int dup3(int fd, int nfd, int flags)
{
	shim__real_init();
	if (shim__guarded(fd))
		return shim__ret(-EBADF);
	/* Deviation: a target the library itself uses is refused with EBUSY (the error
	 * dup2(2) gives for a descriptor being opened), rather than closed. */
	if (shim__guarded(nfd))
		return shim__ret(-EBUSY);
	shim__uep_exposed(fd);
	return copied(fd, shim__real.dup3(fd, nfd, flags));
}

SHIM_EXPORT int dup2(int fd, int nfd)
{
	shim__real_init();
	if (shim__guarded(fd))
		return shim__ret(-EBADF);
	if (fd == nfd)
		return shim__real.dup2(fd, nfd);
	if (shim__guarded(nfd))
		return shim__ret(-EBUSY);
	shim__uep_exposed(fd);
	return copied(fd, shim__real.dup2(fd, nfd));
}

static int do_fcntl(int fd, int cmd, unsigned long arg)
{
	struct shim_file *f;
	int rc;

	if (shim__guarded(fd))
		return shim__ret(-EBADF);
	switch (cmd) {
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		shim__uep_exposed(fd);
		return copied(fd, shim__real.fcntl(fd, cmd, arg));
	case F_GETFL:
		rc = shim__real.fcntl(fd, cmd);
		f = shim__get(fd);
		if (f) {
			if (rc >= 0)
				rc = (rc & ~O_NONBLOCK) | (f->nonblock ? O_NONBLOCK : 0);
			shim__put(f);
		}
		return rc;
	case F_SETFL:
		f = shim__get(fd);
		if (!f)
			return shim__real.fcntl(fd, cmd, arg);
		/* The mirror stays blocking: blocking calls wait on it. */
		rc = shim__real.fcntl(fd, cmd, arg & ~(unsigned long)O_NONBLOCK);
		if (rc == 0)
			f->nonblock = (arg & O_NONBLOCK) != 0;
		shim__put(f);
		return rc;
	default:
		return shim__real.fcntl(fd, cmd, arg);
	}
}

SHIM_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;

	va_start(ap, cmd);
	unsigned long arg = va_arg(ap, unsigned long);
	va_end(ap);
	shim__real_init();
	return do_fcntl(fd, cmd, arg);
}

/* The same call under the name _FILE_OFFSET_BITS=64 builds use. */
SHIM_EXPORT int fcntl64(int fd, int cmd, ...) __attribute__((alias("fcntl")));

SHIM_EXPORT int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;

	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	shim__real_init();
	/* The node's interfaces, not the kernel's, on any socket (ifaddr.c). */
	if (shim__enabled() && shim__if_request(req))
		return shim__ret(shim__if_ioctl(fd, req, arg));
	struct shim_file *f = shim__get(fd);
	if (!f)
		return shim__real.ioctl(fd, req, arg);
	int rc;
	sigset_t old;
	switch (req) {
	case FIONBIO:
		if (!arg) {
			rc = -EFAULT;
			break;
		}
		/* The program's int may sit at any address (the kernel takes it so):
		 * copied, not dereferenced (UBSan caught a misaligned one). */
		int on;
		memcpy(&on, arg, sizeof on);
		f->nonblock = on != 0;
		rc = 0;
		break;
	case FIONREAD:
		if (!arg) {
			rc = -EFAULT;
			break;
		}
		shim__enter(&old);
		rc = uls_pending(f->sd);
		shim__leave(&old);
		if (rc >= 0) {
			int n = rc;
			memcpy(arg, &n, sizeof n);
			rc = 0;
		}
		break;
	default:
		/* Other requests (the interface ones this shim does not answer among them)
		 * work on any socket: the mirror answers. */
		shim__put(f);
		return shim__real.ioctl(fd, req, arg);
	}
	shim__put(f);
	return shim__ret(rc);
}
