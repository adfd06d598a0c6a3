/* The system calls libuls and netif/ make on descriptors, through one table.
 *
 * Under the POSIX shim (libuls-preload.so) the C library's read, write, close, socket and
 * the rest are the shim's interposers, and a plain call from inside the stack would reach
 * them: the shim would take the stack's own descriptors for the program's (refuse a close
 * of a ring, turn the TAP's ioctl socket into a user-level one). So the stack never names
 * them: it calls nif_sys.NAME(), which is the C library's function unless the program's
 * front end replaces the table. The shim fills it, before it calls into libuls the first
 * time, with the functions dlsym(RTLD_NEXT) finds (apps/preload/real.c): the dependency
 * runs one way, shim -> libuls, never back.
 *
 * Only the names the shim interposes are here (apps/preload/preload.map, and
 * tests/shim/no_interposer_calls.sh checks that libuls and netif/ reference none of them);
 * calls it does not interpose (eventfd, memfd_create, socketpair, mmap, io_uring's raw
 * system calls) are made directly. Same signatures, errno and return values as libc's.
 */
#ifndef ULS_NETIF_SYS_H
#define ULS_NETIF_SYS_H

#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

struct nif_sys {
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*writev)(int, const struct iovec *, int);
	int (*close)(int);
	int (*fcntl)(int, int, ...);
	int (*ioctl)(int, unsigned long, ...);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*socket)(int, int, int);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	int (*shutdown)(int, int);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	unsigned (*if_nametoindex)(const char *);
};

/* Written once, by the front end, before the first call into libuls (no lock: every
 * thread that calls libuls afterwards was made, or synchronised with, after it). */
extern struct nif_sys nif_sys;

#endif
