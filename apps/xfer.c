/* apps/xfer.c: whole transfers (xfer.h). */
#include <errno.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include "apps/xfer.h"

int bench__send_whole(bench_send_fn send_fn, int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = send_fn(fd, p, len, 0);
		if (n == -EINTR)
			continue;
		if (n < 0)
			return (int)n;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int bench__recv_whole(bench_recv_fn recv_fn, int fd, void *buf, size_t len, bool *clean_eof)
{
	uint8_t *p = buf;
	size_t want = len;

	if (clean_eof)
		*clean_eof = false;
	while (len) {
		ssize_t n = recv_fn(fd, p, len, 0);
		if (n == -EINTR)
			continue;
		if (n == 0 && clean_eof && len == want)
			*clean_eof = true;
		if (n <= 0)
			return n < 0 ? (int)n : -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

ssize_t bench__sock_send(int fd, const void *buf, size_t len, int flags)
{
	ssize_t n = send(fd, buf, len, flags | MSG_NOSIGNAL);
	return n < 0 ? -errno : n;
}

ssize_t bench__sock_recv(int fd, void *buf, size_t len, int flags)
{
	ssize_t n = recv(fd, buf, len, flags);
	return n < 0 ? -errno : n;
}

ssize_t bench__fd_write(int fd, const void *buf, size_t len, int flags)
{
	(void)flags;
	ssize_t n = write(fd, buf, len);
	return n < 0 ? -errno : n;
}

ssize_t bench__fd_read(int fd, void *buf, size_t len, int flags)
{
	(void)flags;
	ssize_t n = read(fd, buf, len);
	return n < 0 ? -errno : n;
}
