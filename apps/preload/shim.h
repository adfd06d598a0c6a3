/* The POSIX shim (libuls-preload.so): what its files share.
 *
 * Every AF_INET or AF_INET6 (sockaddr.c) stream or datagram socket a program opens becomes
 * a libuls socket, shown to the program as a real kernel descriptor (a readiness mirror,
 * see stack/mirror.c), so that descriptor numbers, poll/select/epoll, dup and fork keep
 * the kernel's rules. This is the one place that turns libuls's -errno returns into errno.
 */
#ifndef ULS_SHIM_H
#define ULS_SHIM_H

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <poll.h>

#define SHIM_EXPORT __attribute__((visibility("default")))

#define SHIM_V6OPTS 6  /* IPPROTO_IPV6 options a dual-stack socket keeps (sockaddr.c) */

/* One open user-level socket, shared by every descriptor number dup() made of it. */
struct shim_file {
	int sd;              /* libuls descriptor */
	int type;            /* SOCK_STREAM or SOCK_DGRAM */
	int family;          /* AF_INET, or AF_INET6: a dual-stack socket (sockaddr.c) */
	/* AF_INET6 on a node with an IPv6 address: a libuls AF_INET6 socket (uls_socket_af),
	 * whose addresses pass as they are (the _sa calls); else a libuls IPv4 socket whose
	 * addresses sockaddr.c converts. */
	bool native6;
	bool bound;          /* bind() or connect() gave it an address (IPV6_V6ONLY is fixed) */
	unsigned v6set;      /* AF_INET6: which of v6val were set (sockaddr.c) */
	int v6val[SHIM_V6OPTS];
	atomic_uint uep_regs;  /* registrations in user-level epoll instances (uepoll.c) */
	atomic_bool kernel_epoll;  /* ever in a kernel epoll instance: its mirror stays exact */
	bool nonblock;       /* O_NONBLOCK, kept here: the mirror itself always blocks */
	bool listening;      /* listen() was called */
	bool active;         /* listener: this process accepts on it (fork.c) */
	unsigned gen;        /* the fork generation it belongs to (fork.c) */
	unsigned claiming;   /* generation + 1 while a thread claims its connection (fork.c) */
	/* Options set so far, replayed if the socket turns out to be a loopback one and
	 * moves to the kernel (socket.c). */
	struct shim_opt {
		int level, name, val;
	} opts[16];
	unsigned nopts;
	struct shim_file *next_free;  /* in fdtab.c's pool of finished files */
	/* Descriptor numbers naming it and calls in flight, one word (fdtab.c): last, as
	 * the one member a reused file keeps. */
	_Atomic uint64_t hold;
};

/* The real functions of the C library (real.c). */
struct shim_real {
	int (*socket)(int, int, int);
	int (*bind)(int, const struct sockaddr *, socklen_t);
	int (*listen)(int, int);
	int (*accept4)(int, struct sockaddr *, socklen_t *, int);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	int (*sendmmsg)(int, struct mmsghdr *, unsigned, int);
	int (*recvmmsg)(int, struct mmsghdr *, unsigned, int, struct timespec *);
	int (*shutdown)(int, int);
	int (*close)(int);
	int (*close_range)(unsigned, unsigned, int);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*fcntl)(int, int, ...);
	int (*ioctl)(int, unsigned long, ...);
	int (*getsockopt)(int, int, int, void *, socklen_t *);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*getsockname)(int, struct sockaddr *, socklen_t *);
	int (*getpeername)(int, struct sockaddr *, socklen_t *);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
	int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
	int (*pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *,
		       const sigset_t *);
	int (*epoll_ctl)(int, int, int, struct epoll_event *);
	ssize_t (*sendfile)(int, int, off_t *, size_t);
	int (*execve)(const char *, char *const[], char *const[]);
	int (*sigaction)(int, const struct sigaction *, struct sigaction *);
	int (*epoll_wait)(int, struct epoll_event *, int, int);
	int (*epoll_pwait)(int, struct epoll_event *, int, int, const sigset_t *);
	void (*_exit)(int);
	int (*register_atfork)(void (*)(void), void (*)(void), void (*)(void), void *);
};
extern struct shim_real shim__real;
void shim__real_init(void);
/* The C library's function of that name (what dlsym(RTLD_NEXT) finds), for calls made
 * too rarely to sit in shim__real. */
void *shim__next(const char *name);

/* The node's interfaces (ifaddr.c): is req an interface query this shim answers, and the
 * answer (0 or -errno). */
bool shim__if_request(unsigned long req);
int shim__if_ioctl(int fd, unsigned long req, void *arg);

/* Is the shim on? (ULS_CTL names a node; without it every call goes to the kernel.) */
bool shim__enabled(void);
void shim__set_ctl(const char *ctl);
const char *shim__ctl(void);

/* The descriptor table (fdtab.c). shim__get() returns the socket behind fd with a call
 * counted in it (shim__put() ends the call), or NULL when fd is not a user-level socket. */
#define SHIM_NO_CLAIM (-2)  /* shim__adopt: leave an inherited connection unclaimed */
struct shim_file *shim__get(int fd);
struct shim_file *shim__get_io(int fd);
struct shim_file *shim__get_raw(int fd);
void shim__put(struct shim_file *f);
void shim__hold(struct shim_file *f);
struct shim_file *shim__file_new(int sd, int family, int type, bool nonblock);
void shim__file_discard(struct shim_file *f);
int shim__install(int fd, struct shim_file *f);
int shim__uninstall(int fd);
bool shim__is_ours(int fd);
int shim__maxfd(void);
bool shim__table_at(int fd, const struct shim_file *f);
void shim__table_lock(void);
void shim__table_unlock(void);
void shim__table_reset(void);
void shim__table_wait_claim(void);
void shim__table_claim_done(void);
extern bool shim__debug_yield;  /* ULS_DEBUG_LOOKUP_YIELD=1 (fdtab.c) */

/* Calls into libuls run with signals held off (deferred, or blocked: fdtab.c): a handler
 * that uses sockets must never find the stack's lock held by the very thread it
 * interrupted. shim__program_mask(old) is the mask to give a driving wait. */
void shim__enter(sigset_t *old);
void shim__leave(const sigset_t *old);
void shim__signals_hold(sigset_t *old);
void shim__signals_release(const sigset_t *old);
const sigset_t *shim__program_mask(const sigset_t *old);
void shim__signals_init(void);
unsigned shim__handlers_run(void);
bool shim__guarded(int fd);

/* Sockets (socket.c), data (io.c), waiting (wait in io.c). */
int shim__wait(struct shim_file *f, int events);
ssize_t shim__send(struct shim_file *f, const struct iovec *iov, size_t n, int flags,
		   const struct sockaddr *to, socklen_t tolen);
ssize_t shim__recv(struct shim_file *f, const struct iovec *iov, size_t n, int flags,
		   struct sockaddr *from, socklen_t *fromlen, int *msg_flags);

/* Addresses (sockaddr.c). shim__addr_in() gives the IPv4 address libuls takes, and what
 * kind the program's address was (or -errno): */
enum {
	SHIM_SA_V4,     /* an IPv4 address: sockaddr_in, or v4-mapped ::ffff:a.b.c.d */
	SHIM_SA_ANY,    /* the wildcard, 0.0.0.0 or :: (out is 0.0.0.0) */
	SHIM_SA_LOOP6,  /* ::1, the kernel's as 127.0.0.0/8 is */
	SHIM_SA_REAL6,  /* any other IPv6 address: only a native6 socket carries it */
};
int shim__addr_in(const struct shim_file *f, const struct sockaddr *a, socklen_t len,
		  struct sockaddr_in *out);
void shim__addr_out(const struct shim_file *f, const struct sockaddr_in *in,
		    struct sockaddr *a, socklen_t *len);
/* An address libuls gave (srclen long) out to the program, as the kernel copies it. */
void shim__addr_copy_out(const void *src, socklen_t srclen, struct sockaddr *a, socklen_t *len);
/* Does the node have an IPv6 address (uls_interface)? Inside shim__enter. */
bool shim__node_has_ip6(void);
int shim__v6opt_set(struct shim_file *f, int name, const void *val, socklen_t len);
int shim__v6opt_get(const struct shim_file *f, int name, void *val, socklen_t *len);

/* User-level epoll (uepoll.c, issue 14). */
int shim__uep_wait(int epfd, struct epoll_event *ev, int max, int timeout,
		   const sigset_t *mask, int *left);
void shim__uep_closed(int fd);
void shim__uep_exposed(int fd);
void shim__uep_exec(void);
void shim__uep_fork_prepare(void);
void shim__uep_fork_parent(void);
void shim__uep_fork_child(void);
void shim__uep_forget(struct shim_file *f);
void shim__uep_to_kernel(struct shim_file *f);
bool shim__uep_active(void);
void shim__uep_arm(const int *fds, size_t n, int delta);
int shim__uep_hi(void);

/* fork (fork.c) and exec (exec.c). */
void shim__fork_init(void);
/* glibc's, which pthread_atfork calls; no header declares it. */
int __register_atfork(void (*on_prepare)(void), void (*on_parent)(void), void (*on_child)(void),
		      void *dso);
bool shim__own_memory(void);
/* Before the process ends without unwinding (_exit, execve, the destructor): frames kept
 * back for a later flush leave now (uls_tx_flush_exit), signals held. Not in a vfork
 * child. */
void shim__flush_at_exit(void);
void shim__fork_note_self(void);
int shim__adopt(int fd, struct shim_file *f, int timeout_ms);
void shim__adopt_set(const int *fds, size_t n);
unsigned shim__generation(void);
/* Is f this process's own: made here, or adopted after fork (fork.c)? Every call's lookup
 * asks without the table lock, while another thread's shim__adopt may store f->gen under
 * it: an atomic load (acquire, paired with the adoption's release store after the child's
 * mirror is in place under every number). A stale answer only sends the caller to
 * shim__adopt, which looks again under the lock. */
static inline bool shim__file_current(const struct shim_file *f)
{
	return __atomic_load_n(&f->gen, __ATOMIC_ACQUIRE) == shim__generation();
}

/* _FORTIFY_SOURCE's checked forms (glibc declares them only in its bits/ headers). */
ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
		       struct sockaddr *from, socklen_t *fromlen);
int __poll_chk(struct pollfd *p, nfds_t n, int timeout, size_t len);
int __ppoll_chk(struct pollfd *p, nfds_t n, const struct timespec *t, const sigset_t *m,
		size_t len);
void __chk_fail(void) __attribute__((noreturn));

static inline int shim__ret(long rc)
{
	if (rc < 0) {
		errno = (int)-rc;
		return -1;
	}
	return (int)rc;
}

static inline ssize_t shim__sret(ssize_t rc)
{
	if (rc < 0) {
		errno = (int)-rc;
		return -1;
	}
	return rc;
}

#endif
