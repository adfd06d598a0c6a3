/* Whole transfers: the one loop that moves exactly len bytes through a send or receive
 * function, retrying after EINTR, for sockets of either stack (apps/netops.h), kernel
 * sockets and files. The functions return bytes moved or -errno (never -1 with errno). */
#ifndef ULS_APPS_XFER_H
#define ULS_APPS_XFER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef ssize_t (*bench_send_fn)(int fd, const void *buf, size_t len, int flags);
typedef ssize_t (*bench_recv_fn)(int fd, void *buf, size_t len, int flags);

/* Send all len bytes; 0 or -errno. */
int bench__send_whole(bench_send_fn send_fn, int fd, const void *buf, size_t len);
/* Receive exactly len bytes: 0, -EPIPE on EOF before len bytes (with *clean_eof, when not
 * NULL, set if the EOF came before the first byte), or -errno. */
int bench__recv_whole(bench_recv_fn recv_fn, int fd, void *buf, size_t len, bool *clean_eof);

/* libc's send (MSG_NOSIGNAL added) and recv, and write and read (flags ignored), returning
 * -errno. */
ssize_t bench__sock_send(int fd, const void *buf, size_t len, int flags);
ssize_t bench__sock_recv(int fd, void *buf, size_t len, int flags);
ssize_t bench__fd_write(int fd, const void *buf, size_t len, int flags);
ssize_t bench__fd_read(int fd, void *buf, size_t len, int flags);

#endif
