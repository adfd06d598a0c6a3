/* Moving data: read, write, send, recv and their vector, message and batch forms, and
 * sendfile. libuls is asked without waiting; blocking is done here (shim__wait), driving
 * the stack or, failing that, in the kernel on the socket's mirror.
 */
#include "shim.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include "uls.h"

#define SEND_FLAGS (MSG_DONTWAIT | MSG_NOSIGNAL | MSG_MORE | MSG_EOR)
#define RECV_FLAGS (MSG_DONTWAIT | MSG_PEEK | MSG_WAITALL | MSG_TRUNC | MSG_CMSG_CLOEXEC)

/* Wait until f may be ready for events (POLLIN or POLLOUT): 0, -EINTR, -EAGAIN (the
 * socket's timeout). The thread drives the stack while it waits (run to completion) with
 * the program's signal mask open, and signal.c's trampoline tells libuls whether a
 * handler that ran had SA_RESTART. When it cannot drive (another thread does, or
 * ULS_RTC=0), it waits in the kernel on the mirror, which the driver's rounds update. */
int shim__wait(struct shim_file *f, int events)
{
	sigset_t old;

	shim__enter(&old);
	int rc = uls_socket_drive(f->sd, events, shim__program_mask(&old));
	shim__leave(&old);
	if (rc != -EBUSY)
		return rc;
	/* A kernel wait with a finite timeout (SO_RCVTIMEO, SO_SNDTIMEO) that io_uring's task
	 * work (TIF_NOTIFY_SIGNAL) ends fails with EINTR, which the kernel does not restart
	 * for a timed socket wait: EINTR only when a handler ran, as kernel_epoll_wait
	 * (poll.c). Seen: recv failing with EINTR after 0 ms, no SIGALRM yet (test_shim's
	 * timeout case with ULS_RTC=0, 1 run in 3 to 6). Deviation: each look starts the
	 * socket's timeout again. */
	for (;;) {
		unsigned ran = shim__handlers_run();
		rc = uls_socket_wait(f->sd, events);
		if (rc != -EINTR || shim__handlers_run() != ran)
			return rc;
	}
}

static size_t iov_total(const struct iovec *iov, size_t n)
{
	size_t t = 0;

	for (size_t i = 0; i < n; i++) {
		if (iov[i].iov_len > SSIZE_MAX - t)
			return SIZE_MAX;
		t += iov[i].iov_len;
	}
	return t;
}

/* send(2): EPIPE comes with SIGPIPE unless MSG_NOSIGNAL. */
static ssize_t epipe(int flags)
{
	if (!(flags & MSG_NOSIGNAL))
		pthread_kill(pthread_self(), SIGPIPE);
	return -EPIPE;
}

static ssize_t send_one(struct shim_file *f, const void *buf, size_t len, int flags,
			const struct sockaddr *to, socklen_t tolen)
{
	sigset_t old;

	shim__enter(&old);
	ssize_t rc = uls_sendto_sa(f->sd, buf, len, (flags & MSG_MORE) | MSG_DONTWAIT, to, tolen);
	shim__leave(&old);
	return rc;
}

ssize_t shim__send(struct shim_file *f, const struct iovec *iov, size_t n, int flags,
		   const struct sockaddr *to, socklen_t tolen)
{
	bool nonblock = f->nonblock || (flags & MSG_DONTWAIT);
	struct sockaddr_in dst;
	const struct sockaddr *dp = NULL;
	socklen_t dplen = 0;
	size_t total = iov_total(iov, n);
	ssize_t done = 0, rc;

	if (flags & ~SEND_FLAGS)
		return (flags & MSG_OOB) ? -EOPNOTSUPP : -EINVAL;
	if (total == SIZE_MAX)
		return -EINVAL;
	/* tcp(7): the address of sendto() on a connected stream is ignored. */
	if (to && f->type == SOCK_DGRAM) {
		rc = shim__addr_in(f, to, tolen, &dst);
		/* No IPv6 route without a node IPv6 address (sockaddr.c); ::1 from a socket
		 * of the node neither. */
		if ((rc == SHIM_SA_REAL6 && !f->native6) || rc == SHIM_SA_LOOP6)
			rc = -ENETUNREACH;
		if (rc < 0)
			return rc;
		if (f->native6) {
			dp = to;  /* libuls takes it as it is */
			dplen = tolen;
		} else {
			dp = (const struct sockaddr *)&dst;
			dplen = sizeof(dst);
		}
	}
	if (f->type == SOCK_DGRAM) {
		/* One datagram, however many pieces it comes in. */
		void *buf = NULL;
		const void *p = n ? iov[0].iov_base : NULL;
		if (n > 1) {
			buf = malloc(total ? total : 1);
			if (!buf)
				return -ENOMEM;
			for (size_t i = 0, o = 0; i < n; o += iov[i].iov_len, i++)
				memcpy((char *)buf + o, iov[i].iov_base, iov[i].iov_len);
			p = buf;
		}
		for (;;) {
			rc = send_one(f, p, total, flags, dp, dplen);
			if (rc != -EAGAIN || nonblock)
				break;
			rc = shim__wait(f, POLLOUT);
			if (rc < 0)
				break;
		}
		free(buf);
		return rc == -EPIPE ? epipe(flags) : rc;
	}
	for (size_t i = 0; i < n; i++) {
		size_t off = 0;
		while (off < iov[i].iov_len) {
			int more = i + 1 < n ? MSG_MORE : 0;
			rc = send_one(f, (const char *)iov[i].iov_base + off, iov[i].iov_len - off,
				      flags | more, NULL, 0);
			if (rc > 0) {
				off += (size_t)rc;
				done += rc;
				continue;
			}
			if (rc == 0)
				rc = -EAGAIN;  /* no room at all: as good as a full buffer */
			if (rc == -EAGAIN && !nonblock) {
				rc = shim__wait(f, POLLOUT);
				if (rc == 0)
					continue;
			}
			/* A partial write stands; the error comes with the next call. */
			if (done)
				return done;
			return rc == -EPIPE ? epipe(flags) : rc;
		}
	}
	return done;
}

static ssize_t recv_one(struct shim_file *f, void *buf, size_t len, int flags,
			struct sockaddr *from, socklen_t *fromlen)
{
	sigset_t old;

	shim__enter(&old);
	ssize_t rc = uls_recvfrom_sa(f->sd, buf, len, (flags & MSG_PEEK) | MSG_DONTWAIT, from,
				     fromlen);
	shim__leave(&old);
	return rc;
}

ssize_t shim__recv(struct shim_file *f, const struct iovec *iov, size_t n, int flags,
		   struct sockaddr *from, socklen_t *fromlen, int *msg_flags)
{
	bool nonblock = f->nonblock || (flags & MSG_DONTWAIT);
	bool waitall = (flags & MSG_WAITALL) && !(flags & MSG_PEEK) && f->type == SOCK_STREAM;
	size_t total = iov_total(iov, n), got = 0;
	/* native6: libuls names the source as a sockaddr_in6; else a sockaddr_in. */
	union {
		struct sockaddr_in in;
		struct sockaddr_in6 in6;
	} src;
	socklen_t srclen = sizeof(src);
	void *buf;
	ssize_t rc;

	if (flags & MSG_OOB)
		return -EINVAL;  /* tcp(7): no urgent data is ever kept */
	if (total == SIZE_MAX)
		return -EINVAL;
	if (msg_flags)
		*msg_flags = 0;
	/* Several pieces: receive into one buffer, then scatter (a datagram, or a peek, must
	 * be taken in one call). */
	buf = n == 1 ? iov[0].iov_base : malloc(total ? total : 1);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		srclen = f->native6 ? (socklen_t)sizeof(src.in6) : (socklen_t)sizeof(src.in);
		rc = recv_one(f, (char *)buf + got, total - got, flags, (struct sockaddr *)&src,
			      &srclen);
		if (rc > 0) {
			got += (size_t)rc;
			if (!waitall || got == total)
				break;
			continue;
		}
		if (rc == 0 || rc != -EAGAIN || nonblock)
			break;
		rc = shim__wait(f, POLLIN);
		if (rc < 0)
			break;
	}
	if (got)
		rc = (ssize_t)got;
	if (n != 1) {
		for (size_t i = 0, o = 0; rc > 0 && i < n && o < (size_t)rc; i++) {
			size_t k = iov[i].iov_len < (size_t)rc - o ? iov[i].iov_len : (size_t)rc - o;
			memcpy(iov[i].iov_base, (char *)buf + o, k);
			o += k;
		}
		free(buf);
	}
	if (rc >= 0 && fromlen) {
		if (f->type == SOCK_DGRAM && f->native6)
			shim__addr_copy_out(&src, srclen, from, fromlen);
		else if (f->type == SOCK_DGRAM)
			shim__addr_out(f, &src.in, from, fromlen);
		else
			*fromlen = 0;  /* a stream has no per-message address */
	}
	return rc;
}

SHIM_EXPORT ssize_t read(int fd, void *buf, size_t len)
{
	struct shim_file *f = shim__get_io(fd);

	shim__real_init();
	if (!f)
		return shim__real.read(fd, buf, len);
	struct iovec v = { buf, len };
	ssize_t rc = shim__recv(f, &v, 1, 0, NULL, NULL, NULL);
	shim__put(f);
	return shim__sret(rc);
}

SHIM_EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
	struct shim_file *f = shim__get_io(fd);

	shim__real_init();
	if (!f)
		return shim__real.write(fd, buf, len);
	struct iovec v = { (void *)buf, len };
	ssize_t rc = shim__send(f, &v, 1, 0, NULL, 0);
	shim__put(f);
	return shim__sret(rc);
}

SHIM_EXPORT ssize_t readv(int fd, const struct iovec *iov, int n)
{
	struct shim_file *f = shim__get_io(fd);

	shim__real_init();
	if (!f)
		return shim__real.readv(fd, iov, n);
	ssize_t rc = n < 0 || n > IOV_MAX ? -EINVAL : shim__recv(f, iov, (size_t)n, 0, NULL, NULL, NULL);
	shim__put(f);
	return shim__sret(rc);
}

SHIM_EXPORT ssize_t writev(int fd, const struct iovec *iov, int n)
{
	struct shim_file *f = shim__get_io(fd);

	shim__real_init();
	if (!f)
		return shim__real.writev(fd, iov, n);
	ssize_t rc = n < 0 || n > IOV_MAX ? -EINVAL : shim__send(f, iov, (size_t)n, 0, NULL, 0);
	shim__put(f);
	return shim__sret(rc);
}

SHIM_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
			   const struct sockaddr *to, socklen_t tolen)
{
	struct shim_file *f = shim__get_io(fd);

	shim__real_init();
	if (!f)
		return shim__real.sendto(fd, buf, len, flags, to, tolen);
	struct iovec v = { (void *)buf, len };
	ssize_t rc = shim__send(f, &v, 1, flags, to, tolen);
	shim__put(f);
	return shim__sret(rc);
}

SHIM_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	return sendto(fd, buf, len, flags, NULL, 0);
}

SHIM_EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *from,
			     socklen_t *fromlen)
{
	struct shim_file *f = shim__get_io(fd);

	shim__real_init();
	if (!f)
		return shim__real.recvfrom(fd, buf, len, flags, from, fromlen);
	struct iovec v = { buf, len };
	ssize_t rc = shim__recv(f, &v, 1, flags, from, fromlen, NULL);
	shim__put(f);
	return shim__sret(rc);
}

SHIM_EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	return recvfrom(fd, buf, len, flags, NULL, NULL);
}

static ssize_t do_sendmsg(struct shim_file *f, const struct msghdr *m, int flags)
{
	if (!m || (m->msg_iovlen && !m->msg_iov) || m->msg_iovlen > IOV_MAX)
		return -EINVAL;
	/* Deviation: ancillary data (msg_control) is not interpreted; the kernel's IPv4
	 * options (IP_PKTINFO, IP_TOS per message) are not supported here. */
	return shim__send(f, m->msg_iov, m->msg_iovlen, flags, m->msg_name, m->msg_namelen);
}

static ssize_t do_recvmsg(struct shim_file *f, struct msghdr *m, int flags)
{
	if (!m || (m->msg_iovlen && !m->msg_iov) || m->msg_iovlen > IOV_MAX)
		return -EINVAL;
	socklen_t nl = m->msg_name ? m->msg_namelen : 0;
	ssize_t rc = shim__recv(f, m->msg_iov, m->msg_iovlen, flags, m->msg_name,
				m->msg_name ? &nl : NULL, &m->msg_flags);
	if (rc >= 0) {
		m->msg_namelen = nl;
		m->msg_controllen = 0;
	}
	return rc;
}

SHIM_EXPORT ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
	struct shim_file *f = shim__get_io(fd);

	shim__real_init();
	if (!f)
		return shim__real.sendmsg(fd, m, flags);
	ssize_t rc = do_sendmsg(f, m, flags);
	shim__put(f);
	return shim__sret(rc);
}

SHIM_EXPORT ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
	struct shim_file *f = shim__get_io(fd);

	shim__real_init();
	if (!f)
		return shim__real.recvmsg(fd, m, flags);
	ssize_t rc = do_recvmsg(f, m, flags);
	shim__put(f);
	return shim__sret(rc);
}

/* sendmmsg(2)/recvmmsg(2): the first message may wait, the rest are taken as they are;
 * an error after the first message ends the batch with the count so far. */
SHIM_EXPORT int sendmmsg(int fd, struct mmsghdr *v, unsigned n, int flags)
{
	struct shim_file *f = shim__get_io(fd);
	unsigned i;
	ssize_t rc = 0;

	shim__real_init();
	if (!f)
		return shim__real.sendmmsg(fd, v, n, flags);
	for (i = 0; i < n && i < UIO_MAXIOV; i++) {
		rc = do_sendmsg(f, &v[i].msg_hdr, flags);
		if (rc < 0)
			break;
		v[i].msg_len = (unsigned)rc;
	}
	shim__put(f);
	return i ? (int)i : shim__ret(rc);
}

SHIM_EXPORT int recvmmsg(int fd, struct mmsghdr *v, unsigned n, int flags, struct timespec *t)
{
	struct shim_file *f = shim__get_io(fd);
	unsigned i;
	ssize_t rc = 0;

	shim__real_init();
	if (!f)
		return shim__real.recvmmsg(fd, v, n, flags, t);
	/* Deviation: after the first message the rest are taken only if already there, as
	 * with MSG_WAITFORONE; the timeout is not applied (recvmmsg(2) calls it buggy). */
	flags &= ~MSG_WAITFORONE;
	for (i = 0; i < n && i < UIO_MAXIOV; i++) {
		rc = do_recvmsg(f, &v[i].msg_hdr, i ? flags | MSG_DONTWAIT : flags);
		if (rc < 0)
			break;
		v[i].msg_len = (unsigned)rc;
	}
	shim__put(f);
	return i ? (int)i : shim__ret(rc);
}

/* sendfile(2) from a file to a user-level socket: read and send, in pieces. */
static ssize_t file_to_socket(struct shim_file *f, int in, off_t *off, size_t count)
{
	char *buf = malloc(1 << 16);
	size_t done = 0;
	off_t pos = off ? *off : 0;
	ssize_t rc = 0;

	if (!buf)
		return -ENOMEM;
	while (done < count) {
		size_t want = count - done < (1 << 16) ? count - done : (1 << 16);
		ssize_t r = off ? pread(in, buf, want, pos) : shim__real.read(in, buf, want);
		if (r < 0) {
			rc = -errno;
			break;
		}
		if (r == 0)
			break;
		struct iovec v = { buf, (size_t)r };
		ssize_t w = shim__send(f, &v, 1, 0, NULL, 0);
		if (w < 0) {
			rc = w;
			if (!off)  /* what was read and not sent goes back */
				lseek(in, -r, SEEK_CUR);
			break;
		}
		if (w < r && !off)
			lseek(in, w - r, SEEK_CUR);
		done += (size_t)w;
		pos += w;
		if (w < r)
			break;
	}
	free(buf);
	if (off)
		*off = pos;
	return done ? (ssize_t)done : rc;
}

SHIM_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	struct shim_file *f = shim__get_io(out);

	shim__real_init();
	if (!f) {
		if (shim__is_ours(in))
			return shim__sret(-EINVAL);  /* sendfile(2): in_fd cannot be a socket */
		return shim__real.sendfile(out, in, off, count);
	}
	ssize_t rc = file_to_socket(f, in, off, count);
	shim__put(f);
	return shim__sret(rc);
}

SHIM_EXPORT ssize_t sendfile64(int out, int in, off_t *off, size_t count)
{
	return sendfile(out, in, off, count);
}

/* _FORTIFY_SOURCE builds call these instead (Debian builds everything so). */

SHIM_EXPORT ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	if (len > buflen)
		__chk_fail();
	return read(fd, buf, len);
}

SHIM_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags)
{
	if (len > buflen)
		__chk_fail();
	return recv(fd, buf, len, flags);
}

SHIM_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
				   struct sockaddr *from, socklen_t *fromlen)
{
	if (len > buflen)
		__chk_fail();
	return recvfrom(fd, buf, len, flags, from, fromlen);
}
