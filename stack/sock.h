/* The per-process socket layer on lwIP's raw API (shared by socket.c, stream.c, dgram.c).
 *
 * lwIP's TCP code never calls up into sockets: it raises callbacks (receive, sent, error,
 * accept, connected) that record state here and signal the socket's condition variable;
 * application threads sleep on that variable with the core lock released.
 */
#ifndef ULS_STACK_SOCK_H
#define ULS_STACK_SOCK_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include "internal.h"
#include "lwip/pbuf.h"
#include "lwip/tcp.h"
#include "lwip/udp.h"

/* Received data waiting for the application: a ring of pbuf chains (with the sender's
 * address for datagrams). pbuf chains cannot simply be concatenated: tot_len is 16 bits. */
struct stk_rxent {
	struct pbuf *p;
	ip_addr_t addr;
	uint16_t port;
};

struct stk_rxq {
	struct stk_rxent *ent;
	unsigned cap, head, count;
	size_t off;     /* bytes of the head entry already consumed (streams) */
	size_t bytes;   /* bytes queued, not yet consumed */
	size_t tail_room;  /* room after the last entry's data when the queue made that
			    * entry to collapse small segments into (stk__rxq_push_stream) */
};

int stk__rxq_push(struct stk_rxq *q, struct pbuf *p, const ip_addr_t *addr, uint16_t port);
int stk__rxq_push_stream(struct stk_rxq *q, struct pbuf *p);
size_t stk__rxq_read(struct stk_rxq *q, void *buf, size_t len, bool peek);
struct stk_rxent *stk__rxq_head(struct stk_rxq *q);
void stk__rxq_pop(struct stk_rxq *q);
void stk__rxq_clear(struct stk_rxq *q);

enum stk_state {
	STK_S_NEW,         /* created, maybe bound */
	STK_S_LISTEN,
	STK_S_CONNECTING,
	STK_S_CONNECTED,   /* TCP established (or later); UDP with a default peer */
	STK_S_DEAD,        /* TCP connection gone (reset, timed out, closed) */
};

/* The smallest TCP window SO_RCVBUF sets: Linux's smallest receive buffer (SOCK_MIN_RCVBUF)
 * is about 2.3 KB. A window below a full segment still works: the peer sends less at a
 * time. */
#define STK_RCVBUF_MIN 2048u
/* A receive window's cap (patch 0137) from any size asked for, by SO_RCVBUF or in a handed
 * over state: 0 (TCP_WND) from TCP_WND up; else at least STK_RCVBUF_MIN, rounded down to the
 * window scale's unit (128 octets), so that an unscaled SYN's window is one the scaled
 * windows after it can say again (RFC 9293 section 3.8.6: no shrinking). */
static inline uint32_t stk__rcv_wnd_cap(uint32_t v)
{
	return v >= TCP_WND ? 0 : v < STK_RCVBUF_MIN ? STK_RCVBUF_MIN :
	       v & ~((1u << TCP_RCV_SCALE) - 1);
}
/* The smallest send buffer SO_SNDBUF sets (Linux's SOCK_MIN_SNDBUF is about 4.6 KB, twice
 * the smallest it takes). */
#define STK_SNDBUF_MIN 2048u
/* A send buffer's cap from any size asked for, by SO_SNDBUF or in a handed-over state: the
 * octets a connection may hold written and not yet acknowledged. 0 (TCP_SND_BUF, lwIP's
 * own bound) from TCP_SND_BUF up; else at least STK_SNDBUF_MIN. */
static inline uint32_t stk__snd_buf_cap(uint32_t v)
{
	return v >= TCP_SND_BUF ? 0 : v < STK_SNDBUF_MIN ? STK_SNDBUF_MIN : v;
}

/* Options the application set, kept in the socket as Linux keeps them in its struct sock:
 * they outlive the connection (setsockopt after a reset still succeeds: nginx uncorks a
 * keep-alive connection its client has just reset), an accepted socket inherits its
 * listener's, and each pcb the socket gets (socket(), accept, a handed-off connection)
 * takes them from here. */
struct stk_opts {
	bool reuseaddr, keepalive, nodelay;
	uint8_t tos;
	uint32_t keep_idle_s, keep_intvl_s, keep_cnt;
	uint32_t rcv_wnd_cap;      /* SO_RCVBUF of a TCP socket: its window's cap; 0: TCP_WND */
	uint32_t user_timeout_ms;  /* TCP_USER_TIMEOUT (patch 0138); 0: the retransmission counts */
	uint32_t snd_buf_cap;      /* SO_SNDBUF of a TCP socket (stk__snd_buf_cap); 0: TCP_SND_BUF */
};

struct stk_sock {
	int sd;                    /* -1 until it is in the table (accepted but not yet taken) */
	int type;                  /* SOCK_STREAM or SOCK_DGRAM */
	/* AF_INET, or AF_INET6 (uls_socket_af): a dual-stack socket whose pcbs are
	 * IPADDR_TYPE_ANY, IPADDR_TYPE_V6 once IPV6_V6ONLY is set; its addresses are
	 * sockaddr_in6, IPv4 peers v4-mapped (RFC 4291 §2.5.5.2, as Linux's). */
	int family;
	bool v6only;
	enum stk_state state;
	bool nonblock;
	bool closed;               /* uls_close() ran; freed when the last user leaves */
	unsigned users;            /* calls currently inside, sleeping or not */
	pthread_cond_t cond;
	unsigned gen;              /* bumped by every stk__sock_notify: sleepers look again */
	unsigned busy_poll_us;     /* SO_BUSY_POLL */
	int err;                   /* pending error, -errno (SO_ERROR) */
	struct timespec rcvtimeo, sndtimeo;  /* zero: wait forever */
	struct linger linger;      /* SO_LINGER, kept for getsockopt (see setopt) */

	struct tcp_pcb *tcp;
	struct udp_pcb *udp;
	bool rx_eof, rd_shut, wr_shut;
	bool reuseport;            /* SO_REUSEPORT: share the port with other processes */
	bool cork;                 /* TCP_CORK */
	struct stk_opts opts;      /* what setsockopt set; applied to every pcb (attach) */
	uint16_t bound_port;       /* a port reserved at ulsd by bind (released at close) */
	/* The connection's local address, kept for getsockname once the pcb is gone (Linux
	 * still names a reset socket's address). */
	ip_addr_t conn_ip;
	uint16_t conn_port;
	struct stk_rxq rxq;

	/* Listeners: connections established and not yet accepted. */
	struct stk_sock **acq;
	unsigned acq_cap, acq_head, acq_count;

	struct stk_mirror *mirror;  /* a kernel descriptor showing readiness (mirror.c) */
	/* Issue 14: user-level epoll sets (the shim's) that hold the socket, and waiters in
	 * the kernel on its mirror. While lazy > 0 and armed == 0 the mirror's readable token
	 * is not written (the shim takes it from its ready list instead, readylist.c). */
	unsigned lazy, armed;
	/* Issue 14: the registrations of user-level epoll sets (readylist.c), and whether the
	 * socket was found without send space since its last write-space event (Linux's
	 * SOCK_NOSPACE: only then is freed space an event for edge-triggered sets). */
	struct uls_epi *epis;
	bool nospace;
	/* Inherited across fork: the parent's state, kept only to build this process's own
	 * socket from it (uls_adopt); the pcbs belong to the parent. */
	bool inherited;
	uint16_t inh_port;
	bool inh_listen, inh_connected;
	int inh_backlog;
	bool share_inherited;      /* bind/listen join the parent's hold on the port */
	bool accepting;            /* listener: ulsd was told this process accepts here */
	/* A thread is in a round trip to ulsd for this socket (bind, listen, connect) with the
	 * core lock released: the others wait (stk__sock_ctl_begin). */
	bool ctl_busy;
	/* Connections another process may hold too (handoff.c). */
	bool forked;               /* it existed at a fork(): the child holds its mirror */
	bool parked;               /* closed here, kept until the others let go or claim it */
	/* The last ICMP error for the connection (-errno; icmperr.c): reported instead of
	 * ETIMEDOUT if it times out, or at once when it aborted the connection. */
	int icmp_err;
	/* Its mirror may lag its state: a blocking call of the shim left it ready without
	 * bringing the mirror in line, for the call that follows at once (owe list,
	 * socket.c). */
	bool owed;
	bool on_owed;              /* it is on the owe list */
	struct stk_sock *owed_next;
};

/* endpoints.c: the node's port space lives in ulsd */
/* family: the socket's (AF_INET or AF_INET6); flags with CTL_F_V6ONLY for an IPV6_V6ONLY
 * socket, whose port ulsd then holds in IPv6 only (control protocol 3). */
int stk__ep_bind(uint8_t proto, uint16_t port, unsigned flags, int family);
void stk__ep_unbind(uint8_t proto, uint16_t port, int family, unsigned flags);
int stk__ep_listen(uint16_t port, unsigned flags, int family);
void stk__ep_accepting(uint16_t port, int family, unsigned flags);
#define STK_V6FLAGS(s) ((s)->family == AF_INET6 && (s)->v6only ? CTL_F_V6ONLY : 0u)
int stk__ep_connect(uint16_t lport, const ip_addr_t *rip, uint16_t rport);
void stk__ep_connected(struct tcp_pcb *pcb);
void stk__ep_release(uint16_t lport, const ip_addr_t *rip, uint16_t rport);
void stk__ep_accepted(struct tcp_pcb *pcb);
int stk__ep_handoff(struct tcp_pcb *pcb, uint64_t nonce);
int stk__ep_claim(uint16_t lport, const ip_addr_t *rip, uint16_t rport, uint64_t nonce);
void stk__ep_forget(struct tcp_pcb *pcb);
uint32_t stk__ep_rexmits(const struct tcp_pcb *pcb);

/* stream.c: an ICMP error for the connection of pcb (icmperr.c) */
struct tcp_pcb;
void stk__stream_icmp_error(struct tcp_pcb *pcb, int err);
/* dgram.c: an ICMP error for a connected UDP socket (icmperr.c); arg is its recv_arg */
void stk__dgram_icmp_error(void *arg, int err);

/* socket.c */
struct stk_sock *stk__sock_new(int type);
/* The pcb address type of a socket (IPADDR_TYPE_V4, _ANY or _V6), and its wildcard. */
u8_t stk__sock_iptype(const struct stk_sock *s);
void stk__sock_any(const struct stk_sock *s, ip_addr_t *any);
struct stk_sock *stk__sock_enter(int sd);
struct stk_sock *stk__sock_at(int sd);
void stk__sock_leave(struct stk_sock *s);
/* Leave s ready for the caller's next call on it without bringing its mirror in line: that
 * call does (its leave), or else the next round on the device (stk__sock_pay_owed). */
void stk__sock_leave_owing(struct stk_sock *s);
void stk__sock_pay_owed(void);
bool stk__sock_owing(void);
/* The socket this thread is in a call on whose leave brings the mirror in line anyway:
 * state changes of it during the call skip the mirror (stk__sock_signal). */
extern __thread struct stk_sock *stk__sock_calling __attribute__((tls_model("initial-exec")));
/* Around a round trip to ulsd that releases the core lock (endpoints.c). */
int stk__sock_ctl_begin(struct stk_sock *s);
int stk__sock_ctl_end(struct stk_sock *s);
void stk__sock_release(struct stk_sock *s);
int stk__sock_sleep(struct stk_sock *s, const struct timespec *timeout);  /* drive.c */
void stk__sock_notify(struct stk_sock *s);  /* drive.c: wake who sleeps in s */
/* drive.c: a socket some user-level epoll set holds was signalled (issue 14) */
void stk__ready_note(void);
void stk__sock_signal(struct stk_sock *s);  /* notify, and update the mirror */
/* The same, naming the poll events the change may have made true (its key, as Linux's
 * wake_up_poll): registrations of user-level epoll sets asking for none of them are not
 * queued. stk__sock_signal is every event. */
void stk__sock_signal_ev(struct stk_sock *s, short key);
#define STK_EV_ALL ((short)(POLLIN | POLLOUT | POLLRDHUP | POLLERR | POLLHUP))
/* readylist.c */
void stk__epi_signal(struct stk_sock *s, short key);
void stk__epi_detach(struct stk_sock *s);
void stk__sock_apply_opts(struct stk_sock *s);
void stk__sock_take_opts(struct stk_sock *s, const struct tcp_pcb *pcb);

/* mirror.c */
void stk__mirror_sync(struct stk_sock *s);
bool stk__sock_ready(const struct stk_sock *s, int events);
short stk__sock_revents(struct stk_sock *s);
void stk__mirror_hangup(struct stk_sock *s);
void stk__mirror_free(struct stk_sock *s);
/* A parked socket's mirror (handoff.c): this process lets go of end A and watches B. */
enum stk_mirror_watch { STK_MIRROR_SHARED, STK_MIRROR_ALONE, STK_MIRROR_CLAIMED };
int stk__mirror_park(struct stk_sock *s);
enum stk_mirror_watch stk__mirror_watch(struct stk_sock *s);
int stk__mirror_give(struct stk_sock *s, int state_fd);

/* handoff.c */
bool stk__handoff_park(struct stk_sock *s);

/* stream.c */
/* Bytes a connection may hold written but not yet sent: as many as it has in flight, at
 * least STK_NOTSENT_FLOOR. The send buffer (TCP_SND_BUF, 4 MiB) is sized for one fast
 * stream; with many streams sharing the node each one's flight is small, and a buffer
 * filled far ahead of the window had the application's copy into pbufs go cold before the
 * TAP write read it again, and made the heap of 64 senders 256 MiB (docs/benchmarks.md,
 * "The 64-stream point: what grows per byte"). Linux bounds its send buffer by the
 * flight much the same way (tcp_sndbuf_expand: twice the congestion window's bytes). */
#define STK_NOTSENT_FLOOR (256u * 1024u)
static inline u32_t stk__stream_notsent(const struct tcp_pcb *pcb)
{
	return pcb->snd_lbb - pcb->snd_nxt;
}
static inline u32_t stk__stream_notsent_max(const struct tcp_pcb *pcb)
{
	u32_t flight = pcb->snd_nxt - pcb->lastack;

	return flight > STK_NOTSENT_FLOOR ? flight : STK_NOTSENT_FLOOR;
}
/* Bytes a connection holds written and not yet acknowledged: what SO_SNDBUF bounds. */
static inline u32_t stk__stream_queued(const struct tcp_pcb *pcb)
{
	return pcb->snd_lbb - pcb->lastack;
}
/* Whether a connection's send buffer has room enough to report it writable: lwIP's own
 * low-water marks, half the bytes and half the segments free (tcp_sndbuf() clamps to 16
 * bits, so snd_buf itself), at most half the unsent bytes it may hold, and with a send
 * buffer's cap (SO_SNDBUF, snd_cap; 0: none) half of it free (Linux's mark,
 * sk_stream_wspace() >= sk_stream_min_wspace(), is two thirds in use; half matches lwIP's
 * own). poll() and a blocked send wake at the same mark. */
static inline bool stk__stream_has_room(const struct tcp_pcb *pcb, uint32_t snd_cap)
{
	return pcb->snd_buf > TCP_SNDLOWAT && tcp_sndqueuelen(pcb) < TCP_SNDQUEUELOWAT &&
	       stk__stream_notsent(pcb) <= stk__stream_notsent_max(pcb) / 2 &&
	       (snd_cap == 0 || stk__stream_queued(pcb) <= snd_cap / 2);
}
int stk__stream_open(struct stk_sock *s);
int stk__stream_bind(struct stk_sock *s, const ip_addr_t *ip, uint16_t port);
int stk__stream_listen(struct stk_sock *s, int backlog);
int stk__stream_accept(struct stk_sock *s, struct stk_sock **child);
void stk__stream_accepting(struct stk_sock *s);
int stk__stream_connect(struct stk_sock *s, const ip_addr_t *ip, uint16_t port);
ssize_t stk__stream_send(struct stk_sock *s, const void *buf, size_t len, int flags);
ssize_t stk__stream_recv(struct stk_sock *s, void *buf, size_t len, int flags);
int stk__stream_shutdown(struct stk_sock *s, bool rd, bool wr);
void stk__stream_close(struct stk_sock *s);
void stk__stream_lost(struct stk_sock *s);
void stk__stream_forget(struct stk_sock *s);
void stk__stream_abort(struct stk_sock *s);
void stk__stream_adopted(struct stk_sock *s, struct tcp_pcb *pcb);

/* dgram.c */
int stk__dgram_open(struct stk_sock *s);
int stk__dgram_bind(struct stk_sock *s, const ip_addr_t *ip, uint16_t port);
int stk__dgram_connect(struct stk_sock *s, const ip_addr_t *ip, uint16_t port);
ssize_t stk__dgram_sendto(struct stk_sock *s, const void *buf, size_t len, int flags,
			  const ip_addr_t *ip, uint16_t port, bool has_to);
ssize_t stk__dgram_recvfrom(struct stk_sock *s, void *buf, size_t len, int flags,
			    ip_addr_t *ip, uint16_t *port);
void stk__dgram_close(struct stk_sock *s);

#endif
