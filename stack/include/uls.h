/* ulstack: a user-level TCP/IP stack in every process.
 *
 * This is the only installed header. All functions return a non-negative value on success
 * and -errno on failure; they never set errno. Descriptors returned by uls_socket() and
 * uls_accept() are small non-negative integers private to the process (not kernel fds).
 *
 * A process runs one stack. uls_node_start() brings it up on a TAP device that the process
 * opens itself (the single-process node: embedding and tests). Blocking calls sleep; a
 * helper thread inside the library keeps timers, acknowledgements and retransmissions going
 * while the caller computes or sleeps.
 */
#ifndef ULS_H
#define ULS_H

#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(ULS_BUILDING)
#define ULS_EXTERN __attribute__((visibility("default")))
#else
#define ULS_EXTERN
#endif

struct uls_node_config {
	const char *tap;        /* TAP device name (required) */
	struct in_addr addr;    /* node address (required) */
	unsigned prefix_len;    /* 1..30 */
	struct in_addr gateway; /* 0.0.0.0: none */
	uint8_t mac[6];         /* all zero: a locally administered MAC derived from addr */
	unsigned mtu;           /* 0: the device's MTU; else 68..65535 */
	/* IPv6 (docs/ipv6.md): the node's global unicast address and prefix length (1..128;
	 * that prefix is on-link). All zero (::): none, unless $ULS_IP6
	 * says ADDR/PLEN. With one, the node also has the link-local address fe80::/64 from
	 * the MAC (RFC 4291 §2.5.1, RFC 2464 §4-5) and does its own neighbour discovery. */
	struct in6_addr addr6;
	unsigned prefix_len6;
	/* The default IPv6 router (docs/ipv6.md): a link-local address, or a global one
	 * within addr6/prefix_len6, of a router on the TAP's link, to which destinations off
	 * that prefix go (RFC 4861 §5.2). :: none (off-link destinations are unreachable),
	 * unless $ULS_GW6 says ADDR. Needs addr6. */
	struct in6_addr gateway6;
};

/* Parse "A.B.C.D/NN" into addr and prefix_len (the CLI form). */
ULS_EXTERN int uls_parse_cidr(const char *s, struct in_addr *addr, unsigned *prefix_len);
/* Parse "ADDR/NN" (an IPv6 address, NN in 1..128): 0 or -EINVAL. */
ULS_EXTERN int uls_parse_cidr6(const char *s, struct in6_addr *addr, unsigned *prefix_len);

/* The structure grows at its end as the library learns more (addr6, then gateway6), so a
 * caller says how large the structure it was compiled with is: the library reads that
 * much and takes the rest as zero (none, the default). A caller compiled with a larger
 * structure than the library knows gets -E2BIG if any of the bytes the library does not
 * know is set, so a setting is never silently ignored. uls_node_start() passes the size
 * of this header's structure; the function of that name is kept for binaries compiled
 * before the macro (it reads a whole structure of this header's size). */
ULS_EXTERN int uls_node_start_sized(const struct uls_node_config *cfg, size_t size);
ULS_EXTERN int uls_node_start(const struct uls_node_config *cfg);
#define uls_node_start(cfg) uls_node_start_sized((cfg), sizeof(struct uls_node_config))

/* Join the node served by the ulsd whose control socket is ctl_path: the process's stack
 * then shares the node's address with the node's other processes. uls_socket() does this
 * by itself, with $ULS_CTL, when no node is up yet. */
ULS_EXTERN int uls_attach(const char *ctl_path);
/* libuls reads its ULS_* environment variables once, when it is loaded (a later getenv()
 * could meet another thread's setenv()). A program that sets one for itself after that
 * calls this, before its first socket or uls_attach() and while none of its other threads
 * calls libuls or changes the environment: libuls reads them again. */
ULS_EXTERN void uls_env_reload(void);
ULS_EXTERN void uls_node_stop(void);

/* The node's network interface as the node's sockets use it: the name and index of the
 * node's TAP on the host that runs the node (for a node on ulsd, as ulsd's host names it),
 * its IPv4 address and prefix, gateway (0.0.0.0: none), MAC and MTU. -ENETDOWN when the
 * process has no node yet. The POSIX shim shows programs this interface and the loopback
 * (getifaddrs, if_nameindex, SIOCGIF*; uls(3)). */
struct uls_interface {
	char name[16];          /* IFNAMSIZ, NUL-terminated */
	unsigned index;
	struct in_addr addr;
	unsigned prefix_len;
	struct in_addr gateway;
	uint8_t mac[6];
	unsigned mtu;
	/* The node's global IPv6 address and prefix length; prefix_len6 0: the node has
	 * no IPv6 (then AF_INET6 sockets carry IPv4 only). */
	struct in6_addr addr6;
	unsigned prefix_len6;
};
ULS_EXTERN int uls_interface(struct uls_interface *out);

/* Sockets. type is SOCK_STREAM or SOCK_DGRAM, optionally or-ed with SOCK_NONBLOCK. */
ULS_EXTERN int uls_socket(int type);
ULS_EXTERN int uls_bind(int sd, const struct sockaddr_in *addr);
ULS_EXTERN int uls_listen(int sd, int backlog);
ULS_EXTERN int uls_accept(int sd, struct sockaddr_in *peer);
ULS_EXTERN int uls_connect(int sd, const struct sockaddr_in *addr);
ULS_EXTERN ssize_t uls_send(int sd, const void *buf, size_t len, int flags);
ULS_EXTERN ssize_t uls_recv(int sd, void *buf, size_t len, int flags);
ULS_EXTERN ssize_t uls_sendto(int sd, const void *buf, size_t len, int flags,
			      const struct sockaddr_in *to);
ULS_EXTERN ssize_t uls_recvfrom(int sd, void *buf, size_t len, int flags,
				struct sockaddr_in *from);
ULS_EXTERN int uls_shutdown(int sd, int how);
ULS_EXTERN int uls_close(int sd);
ULS_EXTERN int uls_setsockopt(int sd, int level, int name, const void *val, socklen_t len);
ULS_EXTERN int uls_getsockopt(int sd, int level, int name, void *val, socklen_t *len);
ULS_EXTERN int uls_getsockname(int sd, struct sockaddr_in *addr);
ULS_EXTERN int uls_getpeername(int sd, struct sockaddr_in *addr);

/* The same for both families (docs/ipv6.md). uls_socket_af(AF_INET6, type) makes a
 * dual-stack socket, as Linux's with IPV6_V6ONLY 0: it talks IPv6 (on a node with an IPv6
 * address) and IPv4, whose peers it names by v4-mapped addresses ::ffff:a.b.c.d (RFC 4291
 * §2.5.5.2); setsockopt(IPPROTO_IPV6, IPV6_V6ONLY, 1) before bind makes it IPv6 only. The
 * _sa calls take and give struct sockaddr with its length, as the POSIX calls do: an
 * AF_INET socket sockaddr_in, an AF_INET6 socket sockaddr_in6 (and sockaddr_in); output
 * copies at most *len bytes and sets *len to the address's length. The calls above, with
 * struct sockaddr_in, are for AF_INET sockets. IPv6 peers without a node IPv6 address:
 * -ENETUNREACH; binding an address that is not the node's: -EADDRNOTAVAIL. */
ULS_EXTERN int uls_socket_af(int domain, int type);
ULS_EXTERN int uls_bind_sa(int sd, const struct sockaddr *addr, socklen_t len);
ULS_EXTERN int uls_accept_sa(int sd, struct sockaddr *peer, socklen_t *len);
ULS_EXTERN int uls_connect_sa(int sd, const struct sockaddr *addr, socklen_t len);
ULS_EXTERN ssize_t uls_sendto_sa(int sd, const void *buf, size_t len, int flags,
				 const struct sockaddr *to, socklen_t tolen);
ULS_EXTERN ssize_t uls_recvfrom_sa(int sd, void *buf, size_t len, int flags,
				   struct sockaddr *from, socklen_t *fromlen);
ULS_EXTERN int uls_getsockname_sa(int sd, struct sockaddr *addr, socklen_t *len);
ULS_EXTERN int uls_getpeername_sa(int sd, struct sockaddr *addr, socklen_t *len);

/* Kernel descriptors for user-level sockets (what the POSIX shim, libuls-preload, is
 * built on; see uls(3)).
 *
 * uls_socket_fd() returns a new kernel descriptor whose poll/select/epoll readiness is the
 * socket's (readable, writable, RDHUP, HUP, ERR), so user-level sockets can sit in one
 * epoll set with pipes and timerfds. The caller owns it; flags may hold SOCK_CLOEXEC.
 * uls_socket_wait() sleeps in the kernel until the socket may have become readable
 * (POLLIN) or writable (POLLOUT): 0, or -EINTR when a signal interrupted it (unless
 * SA_RESTART restarted it), or -EAGAIN when SO_RCVTIMEO/SO_SNDTIMEO set on that
 * descriptor expired. uls_fd_private() says whether fd is one of the library's own
 * descriptors, which a program must not close. uls_pending() is FIONREAD. */
ULS_EXTERN int uls_socket_fd(int sd, int flags);
ULS_EXTERN int uls_socket_wait(int sd, int events);
/* Run to completion for a shim (docs/architecture.md): uls_socket_drive() waits until the
 * socket may have become readable (POLLIN) or writable (POLLOUT) by driving the stack, as
 * libuls's own blocking calls do. The caller has every signal blocked; mask is the
 * program's own signal mask, which holds while the thread waits on the device, so handlers
 * run during the wait. Returns 0 (look again), -EINTR (a handler noted with
 * uls_signal_note ran and had no SA_RESTART, or the socket has a timeout), -EAGAIN
 * (SO_RCVTIMEO/SO_SNDTIMEO passed), -EBUSY (another thread drives, or run to completion
 * is off: wait with uls_socket_wait instead), -EBADF. uls_signal_note(), from a signal
 * handler (async-signal-safe), says a handler runs on this thread, with or without
 * SA_RESTART, and ends its wait on the device. */
ULS_EXTERN int uls_socket_drive(int sd, int events, const sigset_t *mask);
ULS_EXTERN void uls_signal_note(int restart);
/* Signals held off without system calls, for a shim whose trampoline runs every handler
 * of the program (stack/sigdefer.c). After uls_signal_defer_enable(), a thread between
 * uls_signal_hold() and uls_signal_release() (nested) is not interrupted by handlers: the
 * trampoline first asks uls_signal_deferred(sig, si), and when it says 1 returns at once;
 * the outermost release sends those signals to the thread again, and their handlers run
 * then. Without deferral, hold and release block and restore the signals (not those a
 * fault raises). With deferral on, uls_socket_drive and uls_poll_drive take a NULL mask:
 * the thread's own mask holds during the wait, and handlers run there. */
ULS_EXTERN void uls_signal_defer_enable(void);
ULS_EXTERN int uls_signal_deferring(void);
ULS_EXTERN int uls_signal_deferred(int sig, const siginfo_t *si);
ULS_EXTERN void uls_signal_hold(void);
ULS_EXTERN void uls_signal_release(void);
/* The same for a wait on kernel descriptors (poll's, or an epoll set holding socket
 * descriptors): uls_poll_drive() drives one round, waiting on the device and on the
 * nfds descriptors in fds together, as poll(2) would (until frames, one of them ready,
 * lwIP's next timer, timeout_ms, or a noted handler), so that the caller then asks them
 * again without waiting. Returns 0 (ask again), -EINTR, -ETIMEDOUT, -EBUSY (wait in the
 * kernel instead: another thread drives, the device cannot wait on descriptors too, run to
 * completion is off, or no stack is running). */
struct pollfd;
ULS_EXTERN int uls_poll_drive(struct pollfd *fds, unsigned nfds, int timeout_ms,
			      const sigset_t *mask);
/* Issue 14, the shim's user-level epoll. Each instance has a ready list (uls_rl_new): a
 * registration (uls_epi_add: socket sd, poll events, ULS_EPI_ET / ULS_EPI_ONESHOT, the
 * caller's cookie) is queued on it whenever its socket has an event it asks for, as
 * Linux's ep_poll_callback queues an epitem; uls_rl_collect() looks at the queued ones
 * only (O(ready sockets), no system call) and returns up to max (cookie, revents), revents
 * as poll() would show them (POLLIN, POLLOUT, POLLRDHUP, POLLHUP, POLLERR) masked by the
 * events plus POLLHUP and POLLERR. Level-triggered registrations stay queued while
 * reported, edge-triggered ones come back with the next event of a direction they ask
 * for, one-shot ones are disarmed once reported until uls_epi_mod. *ready_gen: a number
 * that moves whenever a registration is queued; uls_poll_drive_gen() does not wait when
 * it moved (pass it back), and a queued registration wakes its device wait.
 * uls_rl_free() deletes what registrations are left. uls_socket_watch() adds lazy
 * (user-level sets holding the socket) and armed (waiters in the kernel on its mirror):
 * while lazy > 0 and armed == 0 the mirror's readable token is not written. */
struct uls_rl;
struct uls_epi;
#define ULS_EPI_ET 1u
#define ULS_EPI_ONESHOT 2u
/* uls_epi_add only: the socket counts one more lazy set (uls_socket_watch(sd, 1, 0)) in
 * the same hold of the core lock; uls_epi_del(e, 1) takes it back. */
#define ULS_EPI_LAZY 4u
struct uls_rlev {
	void *cookie;
	short revents;
};
ULS_EXTERN struct uls_rl *uls_rl_new(void);
ULS_EXTERN void uls_rl_free(struct uls_rl *rl);
ULS_EXTERN int uls_epi_add(struct uls_rl *rl, int sd, short events, unsigned flags,
			   void *cookie, struct uls_epi **out);
ULS_EXTERN int uls_epi_mod(struct uls_epi *e, short events, unsigned flags);
ULS_EXTERN void uls_epi_del(struct uls_epi *e, int unlazy);
/* Every registration queued again (a fork child: its sockets' state moved unseen). */
ULS_EXTERN void uls_rl_requeue(struct uls_rl *rl);
ULS_EXTERN int uls_rl_collect(struct uls_rl *rl, struct uls_rlev *out, unsigned max,
			      unsigned *ready_gen);
ULS_EXTERN int uls_socket_watch(int sd, int lazy, int armed);
/* A user-level set changed (epoll_ctl): its driver looks again (as a signalled socket). */
ULS_EXTERN void uls_poll_kick(void);
ULS_EXTERN int uls_poll_drive_gen(struct pollfd *fds, unsigned nfds, int timeout_ms,
				  const sigset_t *mask, const unsigned *ready_gen);
/* The calling thread expects to send about `sends` times before it next waits (an event
 * loop's round: epoll_wait returned that many events). The transmit flush of all but the
 * last of those sends may wait for a later one, so that one system call hands the round's
 * frames to the kernel; never longer than the parked stack thread's grace (a few ms), and
 * not at all when the stack thread or another thread waits on the device. 0 ends it;
 * a thread's blocking wait ends it too. */
ULS_EXTERN void uls_tx_batch(unsigned sends);
/* The batch ends, and what this thread's batch kept back is flushed now (a wait the shim
 * answers without entering the stack: poll or select on mirrors). */
ULS_EXTERN void uls_tx_flush(void);
/* Did this thread's batch keep a flush back since its last flush (then uls_tx_flush takes
 * the lock)? Nonzero if so; no lock, no system call. */
ULS_EXTERN int uls_tx_kept(void);
/* The process is about to end without unwinding (_exit): every frame queued on the device
 * is handed to the kernel. Not from inside the stack; waits 1 s at most for the lock. */
ULS_EXTERN void uls_tx_flush_exit(void);
ULS_EXTERN int uls_fd_private(int fd);
ULS_EXTERN int uls_fd_private_max(void);
ULS_EXTERN int uls_pending(int sd);

/* After fork(), sockets the child inherited still hold the parent's connections. In the
 * child, uls_adopt() gives such a socket a life of its own: a listener listens again on
 * its port (the node spreads new connections over every process listening there), an
 * unconnected socket starts afresh: 0. For a connected socket it returns ULS_ADOPT_CLAIM:
 * the connection moves to this process once the parent has closed its copy. Then
 * uls_claim_wait(fd, timeout_ms), on the inherited descriptor fd that uls_socket_fd() made
 * in the parent, asks for it and waits (kernel calls only, no lock held; a signal
 * interrupts it; timeout_ms < 0: no limit) and returns a descriptor holding the
 * connection's state, or -EINTR, -ETIMEDOUT, or -ENOTCONN when the parent let go of the
 * connection without giving it; uls_claim(sd, that result) takes the connection over, or
 * records the failure (-EINTR, -ETIMEDOUT: the socket's next call reports it, and the
 * claim can be made again; otherwise the socket is left not connected).
 * uls_inherited() says whether sd still needs adopting: 0 no, 1 yes, 2 yes and it is a
 * connection. */
#define ULS_ADOPT_CLAIM 1
ULS_EXTERN int uls_adopt(int sd);
/* libuls's fork handlers (pthread_atfork), which the first uls_attach registers. A caller
 * whose own handlers must come after them in registration order (prepare handlers run
 * last registered first) registers them earlier with this; once, whoever calls first. */
ULS_EXTERN void uls_fork_init(void);
ULS_EXTERN int uls_claim_wait(int fd, int timeout_ms);
ULS_EXTERN int uls_claim(int sd, int state_fd);

/* Across exec, a connection goes to the program that replaces this one: uls_export()
 * packs connected socket sd's state into a memfd (returned; close-on-exec) and has ulsd
 * hold the connection's frames for whoever presents *nonce (written); the program after
 * exec passes the memfd to uls_import(), which returns a socket with the connection. If
 * exec fails, uls_export_undo() takes the connection back; sd was never changed. */
ULS_EXTERN int uls_export(int sd, uint64_t *nonce);
ULS_EXTERN int uls_export_undo(int sd, uint64_t nonce);
ULS_EXTERN int uls_import(int state_fd);
ULS_EXTERN int uls_inherited(int sd);

/* The process accepts connections on listener sd (it waits for them, in accept or in a
 * poll or epoll set). Among the processes listening on one port, the node gives new
 * connections to those that accept; one that only holds the listener (a master process
 * that forked workers) gets none. accept() says it by itself. */
ULS_EXTERN int uls_accepting(int sd);

/* Counters: every drop and refusal has a name. uls_counters() fills up to n entries and
 * returns how many there are in all. */
struct uls_counter {
	const char *name;
	uint64_t value;
};
ULS_EXTERN int uls_counters(struct uls_counter *out, size_t n);

/* Log messages go to this function (default: stderr). level: 0 error, 1 warning, 2 info. */
typedef void uls_log_fn(int level, const char *msg);
ULS_EXTERN void uls_set_log(uls_log_fn *fn);

#ifdef __cplusplus
}
#endif
#endif
