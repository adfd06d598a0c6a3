/* What the files of stack/ share. Nothing here is installed. */
#ifndef ULS_STACK_INTERNAL_H
#define ULS_STACK_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "lwip/err.h"
#include "lwip/ip4_addr.h"
#include "lwip/netif.h"
#include "netif/tap.h"
#include "uls.h"

/* The process's one node: lwIP is a set of globals, so there is one stack per process. */
struct stk_node {
	pthread_mutex_t lock;       /* lwIP's core lock: every call into lwIP holds it */
	pthread_t owner;            /* holder of lock: stk__core_owner_take() and */
	bool owned;                 /* stk__core_lock_mine(), atomically */
	/* The clock as read once during the current hold of lock (port.c, stk__now_ms). */
	bool now_cached;
	uint64_t now_ms;
	bool running;
	bool up;                    /* written under lock; stk__node_up_hint() without it */
	bool lost;                  /* ulsd went away: every socket fails with ENETDOWN */
	pthread_t thread;
	struct nif_dev *dev;      /* the TAP, or the ring pair to ulsd */
	struct netif netif;
	uint8_t mac[6];
	/* The interface programs see (uls_interface): the TAP's name and index on the host
	 * that runs the node. */
	char ifname[16];
	unsigned ifindex;
	/* IPv6 (docs/ipv6.md): the node's global address and prefix, when it has one (a node
	 * of its own given one in uls_node_config or ULS_IP6); the netif then has it and the
	 * link-local address from the MAC, and IPv6 frames reach lwIP. */
	bool has_ip6;
	struct in6_addr addr6;
	unsigned prefix_len6;
	/* Its default router (--gw6, ulsd's ROUTER6 answer; stk__node_gw6): where lwIP sends
	 * what is not on-link (LWIP_HOOK_ND6_GET_GW). has_gw6 false: off-link is
	 * unreachable. */
	bool has_gw6;
	ip6_addr_t gw6;
	/* Who waits on the device (drive.c): the stack thread, an application thread blocked
	 * in a call (the driver, waiting for driver_sock), or nobody; and its next planned
	 * wake-up (ms, sys_now() clock), so a caller that arms an earlier timer knows to wake
	 * it. */
	enum { STK_W_NONE, STK_W_STACK, STK_W_APP } dev_waiter;
	uint64_t dev_deadline;
	struct stk_sock *driver_sock;
	/* Bumped whenever a registration goes onto a user-level epoll set's ready list
	 * (issue 14, readylist.c): a thread about to drive for such a set (uls_poll_drive_gen) does not wait when it
	 * moved since the thread looked at the set. */
	unsigned ready_gen;
	bool ready_kicked;          /* ... and the driver waiting on the device was woken */
	bool want_drive;            /* a blocked thread asked the stack thread for the device */
	bool rtc;                   /* run to completion (ULS_RTC, on by default) */
	unsigned spin_us;           /* ULS_SPIN_US */
	struct stk_sleeper *sleepers;  /* application threads blocked in a call, FIFO */
	uint64_t drive_last_ms;     /* when a driver last took frames, or a call entered */
	/* The stack thread parked while application threads drive (drive.c, park()), and its
	 * planned wake-up (ms, sys_now() clock), which a thread that armed an earlier timer
	 * lowers (stk__leave). It sleeps on park_cond with park_mtx, not the core lock:
	 * park_woken says park_deadline was lowered, park_now that it must come back and take
	 * the core lock now (uls_node_stop); both are set under park_mtx and the core lock.
	 * round_owed: the parked thread found the core lock held when its park ran out and left
	 * its round to the holder, whose stk__unlock takes it (stk__drive_owed). timer_next:
	 * lwIP's next timer as last seen under the core lock (ms), for a park that starts
	 * again without it. park_deadline, round_owed and timer_next are read and written with
	 * __atomic (the parked thread writes them without the core lock). */
	bool parked;
	uint64_t park_deadline;
	pthread_mutex_t park_mtx;
	pthread_cond_t park_cond;
	bool park_woken;
	bool park_now;
	bool round_owed;
	uint64_t timer_next;
	/* The next park's length while a thread waits on the device (GRACE_MS up to
	 * PARK_LONG_MS; the stack thread's alone), and whether a thread kept frames back for
	 * the park's flush since the park began (core lock). */
	unsigned park_ms;
	bool park_keep_short;
	/* The park sleeps until woken (park.c: a park of PARK_LONG_MS ran out with no
	 * driver's round in it), and the driver's rounds so far (core lock). */
	bool park_idle;
	unsigned drive_rounds;
	/* Rounds the park left to a holder, counted (__atomic) as it leaves each, before
	 * round_owed is set: a holder that takes one has it counted already
	 * (rtc_park_rounds_handed >= rtc_owed_rounds_taken in any reading). */
	uint64_t park_handed;
	pthread_cond_t idle_cond;   /* a driver left the device after the node stopped */
	/* uls_node_stop() waits for closed connections to finish (stopping): every round
	 * (stk__round_after_wait) tells it to look again (core lock). */
	bool stopping;
	pthread_cond_t stop_cond;
};

extern struct stk_node stk__node;

void stk__lock(void);
void stk__unlock(void);
void stk__unlock_raw(void);  /* without stk__leave() */

/* Who holds the core lock. Other threads read it without the lock (stk__core_lock_mine():
 * the lease's "never with the lock held" check, the heap's per-lock cache), so owner is
 * stored before owned is set (release) and read after it (acquire): a thread that sees
 * owned set also sees who set it. With plain stores the compiler set owned first, and a
 * thread that had just let the lock go saw it held under its own stale id in between
 * (CI of stop 30: "lease: request 2 to ulsd with the core lock held", an abort). Called
 * right after the mutex is taken and right before it is let go. */
static inline void stk__core_owner_take(void)
{
	__atomic_store_n(&stk__node.owner, pthread_self(), __ATOMIC_RELAXED);
	__atomic_store_n(&stk__node.owned, true, __ATOMIC_RELEASE);
}

static inline void stk__core_owner_drop(void)
{
	__atomic_store_n(&stk__node.owned, false, __ATOMIC_RELAXED);
}

/* Does the calling thread hold the core lock? If it does, both fields are its own; if not,
 * owned is clear, or set with another thread's id (acquire: the id stored before it, or a
 * later holder's), and the answer is no either way. */
static inline bool stk__core_lock_mine(void)
{
	return __atomic_load_n(&stk__node.owned, __ATOMIC_ACQUIRE) &&
	       pthread_equal(__atomic_load_n(&stk__node.owner, __ATOMIC_RELAXED), pthread_self());
}
/* Is the node up, asked without the core lock: a fast path that then takes the lock and
 * asks again under it (uls_socket_af's attach, uls_poll_drive_gen, uls_tx_flush_exit).
 * Atomic (relaxed: the answer publishes nothing, the lock does) so that the look is no
 * data race with uls_node_start/stop, which store it under the lock with
 * stk__node_set_up. */
static inline bool stk__node_up_hint(void)
{
	return __atomic_load_n(&stk__node.up, __ATOMIC_RELAXED);
}

static inline void stk__node_set_up(bool up)
{
	__atomic_store_n(&stk__node.up, up, __ATOMIC_RELAXED);
}

/* What stk__unlock() does before it unlocks: flush, and wake the device's waiter if needed
 * (drive.c). */
void stk__leave(void);
/* Run to completion (drive.c). */
void stk__drive_init(void);
bool stk__rx_coop_wanted(void);
bool stk__rx_mshot_wanted(bool coop);
bool stk__rx_nowait_wanted(void);
/* Ask the parked stack thread to come back now and take the core lock (core lock held;
 * uls_node_stop). */
void stk__park_wake(void);
/* Before a call's unlock: the round the parked stack thread left to this thread, if any
 * (core lock held). */
void stk__drive_owed(void);
void stk__drive_forked(void);
void stk__drive_stop(void);
void stk__drive_entry(void);
/* A batch of received frames (stack/outbatch.c): begin and end around a device's rx, and
 * each IPv4 frame counted as it goes to lwIP. */
void stk__outbatch_begin(void);
/* SYN shedding (synshed.c; the decision is netif/synshed.c's): a receive round's bounds,
 * and whether to drop this IP packet (a pure SYN while the previous round said the process
 * is behind; counted). */
void stk__synshed_round_begin(void);
void stk__synshed_round_end(void);
bool stk__synshed_drop(const uint8_t *l3, size_t len, bool ipv6);
bool stk__synshed_pressure(void);
/* Another shedder guards the lease's path (ulsd's relay demultiplexer, or the kernel's
 * synguard on the direct path): the process then sheds nothing. */
void stk__synshed_relayed(bool relayed);
extern uint64_t (*stk__synshed_clock)(void);   /* ms; tests replace it */
void stk__outbatch_frame(void);
void stk__outbatch_end(void);
void *stk__stack_thread(void *arg);
uint64_t stk__now_ms(void);
/* The calling thread took the core lock, or is about to let it go (port.c: the clock is
 * read once per hold); stk__now_forget(): the hold went on long enough (a batch of
 * frames) that the next reading must be fresh. */
void stk__now_held(bool held);
void stk__now_forget(void);
/* SYN cookies (syncookie.c): encode and check, with the clock given. */
struct tcp_syncookie;
void stk__cookie_encode(struct tcp_syncookie *c, uint64_t now_ms);
bool stk__cookie_decode(struct tcp_syncookie *c, uint64_t now_ms);
/* Bytes on the free lists of lwIP's heap (heap.c; mem_clib_malloc in lwipopts.h). */
size_t stk__heap_cached(void);

/* Bring lwIP up on a device (core lock held); stk__node_down_hook() runs when it stops. */
int stk__node_up(struct nif_dev *dev, struct in_addr addr, unsigned prefix_len,
		 struct in_addr gateway, const uint8_t mac[6]);
/* Name the node's interface (core lock held, before stk__node_up): an empty name or a zero
 * index (a ulsd that does not say) gets STK_IFNAME_DEFAULT and STK_IFINDEX_DEFAULT. */
#define STK_IFNAME_DEFAULT "uls0"
#define STK_IFINDEX_DEFAULT 2u  /* 1 is the loopback's, as on Linux */
void stk__node_name(const char *ifname, unsigned ifindex);
/* Give the node's netif IPv6 (core lock held, node up): the link-local address from the
 * MAC and addr/prefix_len, both usable at once (no duplicate address detection). */
int stk__node_ip6(const struct in6_addr *addr, unsigned prefix_len);
/* Give the node (with IPv6, core lock held) its default router: a link-local address, or
 * one within the node's prefix (RFC 4861 §6.3.4, §8.3; RFC 5942 §4), neither the node's
 * own nor multicast; else -EINVAL. */
int stk__node_gw6(const struct in6_addr *gw);
/* Whether an IPv6 destination has a next hop (core lock held): on-link by the node's
 * prefix or link-local, multicast, or any other once the node has a router. */
bool stk__ip6_routable(const ip6_addr_t *dest);
void stk__node_down_hook(void);

/* The lease with ulsd (lease.c); without one the process is a TAP node of its own. */
struct ctl_msg;
bool stk__leased(void);
int stk__lease_fd(void);
/* A request and its reply: never with the core lock held (it aborts), except
 * stk__lease_call_locked for HANDOFF and CLAIM (lease.c says why). */
int stk__lease_call(struct ctl_msg *m);
int stk__lease_call_locked(struct ctl_msg *m);
/* One-way, core lock held: queued when the control socket is full, never dropped while
 * the lease lives. */
void stk__lease_notify(struct ctl_msg *m);
void stk__lease_counters(uint64_t *queued, uint64_t *lost);
void stk__lease_unmark_rings(void);
void stk__lease_forget(void);
int stk__lease_reattach(void);
/* conntab.c: the connection table ulsstat reads (netif/conntab.h); endpoints.c keeps each
 * registered connection's retransmissions for it. */
int stk__conntab_map(int fd);
void stk__conntab_kick(void);
void stk__conntab_last(void);
void stk__conntab_close(void);
void stk__ep_keep_fin_wait_2(void);
struct tcp_pcb;
void stk__ep_count_rexmit(struct tcp_pcb *pcb);

/* fork() support (fork.c), and connections moving to the process that goes on with them
 * (handoff.c). */
void stk__fork_init(void);
struct stk_sock;
void stk__sockets_each(void (*fn)(struct stk_sock *s));
void stk__handoff_forked(void);
void stk__handoff_forget(void);
bool stk__handoff_pending(void);

/* err_t to -errno: the one place where lwIP's error codes are converted. */
int stk__err_to_errno(err_t err);

/* Ethernet glue between the TAP and lwIP (ethif.c). */
err_t stk__ethif_init(struct netif *netif);
void stk__ethif_input(void *arg, const uint8_t *frame, size_t len, uint32_t off);

/* Segmentation and checksum offload (tso.c; lwIP's hooks are in hooks.h). */
void stk__tso_setup(struct netif *netif, const struct nif_dev *dev);
bool stk__tso_enabled(void);
uint32_t stk__tso_tx_offload(uint8_t *frame, size_t hlen, size_t len);
void stk__tso_ip_input(struct pbuf *p, struct netif *netif, uint32_t off, bool v6);

/* Counters of our own code, by name (counters.c). */
enum stk_counter {
	STK_CNT_UDP_RCVBUF_FULL,
	STK_CNT_TCP_ACCEPTQ_FULL,
	STK_CNT_RX_NOMEM,
	STK_CNT_TX_NOBUF,
	STK_CNT_TX_OVERSIZE,
	STK_CNT_MIRROR_FAIL,
	STK_CNT_MIRROR_TOKENS,
	STK_CNT_MIRROR_DEBTS_PAID,
	STK_CNT_HANDOFF_OUT,
	STK_CNT_HANDOFF_IN,
	STK_CNT_HANDOFF_FAIL,
	STK_CNT_TSO_HINT_MISS,
	STK_CNT_RX_CSUM_OFFLOADED,
	/* TCP input checks (stack/tcp_checks.c; lwIP patches 0010-0019) */
	STK_CNT_TCP_MSS_NONSYN,
	STK_CNT_TCP_MSS_CLAMPED,
	STK_CNT_TCP_OOSEQ_TRIMMED,
	STK_CNT_TCP_OOSEQ_LIMIT,
	STK_CNT_TCP_PAST_FIN_DROPPED,
	STK_CNT_TCP_SEQ_UNACCEPTABLE,
	STK_CNT_TCP_RST_OUT_OF_WINDOW,
	STK_CNT_TCP_RST_CHALLENGED,
	STK_CNT_TCP_SYN_CHALLENGED,
	STK_CNT_TCP_NO_ACK_DROPPED,
	STK_CNT_TCP_ACK_UNACCEPTABLE,
	STK_CNT_TCP_CHALLENGE_ACK_SENT,
	STK_CNT_TCP_CHALLENGE_ACK_LIMITED,
	STK_CNT_TCP_PAWS_DROPPED,
	STK_CNT_TCP_TS_RECENT_EXPIRED,
	STK_CNT_TCP_SIMULTANEOUS_OPEN,
	/* ICMP errors for TCP and path MTU discovery (icmperr.c) */
	STK_CNT_ICMP_ERR_MALFORMED,
	STK_CNT_ICMP_ERR_NO_CONN,
	STK_CNT_ICMP_ERR_OUT_OF_WINDOW,
	STK_CNT_ICMP_ERR_HARD,
	STK_CNT_ICMP_ERR_SOFT,
	STK_CNT_ICMP_PMTU_LOWERED,
	STK_CNT_ICMP_PMTU_IGNORED,
	/* Loss recovery of the sending side (lwIP patches 0020-0029, LWIP_HOOK_TCP_LOSS_NOTE) */
	STK_CNT_TCP_RTO,
	STK_CNT_TCP_RECOVERY_SACK,
	STK_CNT_TCP_RECOVERY_NEWRENO,
	STK_CNT_TCP_REXMIT,
	STK_CNT_TCP_TLP,
	STK_CNT_TCP_TLP_REPAIRED,
	STK_CNT_TCP_RACK_TAIL,
	STK_CNT_TCP_REXMIT_LOST,
	STK_CNT_TCP_RTO_SPURIOUS,
	STK_CNT_TCP_FR_SPURIOUS,
	/* ACKs sent by the delayed-ACK timer (lwIP patch 0113, LWIP_HOOK_TCP_TIMER_NOTE) */
	STK_CNT_TCP_DELAYED_ACK_TIMER,
	/* IPv4 reassembly (lwIP patch 0050, stack/tcpconf.c) */
	STK_CNT_IP_REASS_OVERLAP,
	STK_CNT_IP_REASS_DUPLICATE,
	STK_CNT_IP_REASS_TIMEOUT,
	STK_CNT_IP_REASS_LIMIT,
	/* ICMP errors for UDP sockets (icmperr.c) */
	STK_CNT_UDP_ICMP_ERR,
	STK_CNT_UDP_ICMP_ERR_IGNORED,
	/* RFC 1191 §6.3 path MTU aging (icmperr.c) */
	STK_CNT_ICMP_PMTU_RAISED,
	/* ICMPv6 errors (icmp6err.c; the rest share the ICMP counters above) */
	STK_CNT_ICMP6_ERR_MALFORMED,
	STK_CNT_ICMP6_PTB_BELOW_MIN,
	STK_CNT_ICMP6_PTB_TO_DEST_CACHE,
	/* zcopy: frames the direct path moved without a copy (stack/ethif.c) */
	STK_CNT_RX_LENT,
	STK_CNT_TX_GATHER,
	/* Run to completion (stack/drive.c) */
	STK_CNT_RTC_ROUNDS,
	STK_CNT_RTC_ENTRY_RX,
	STK_CNT_RTC_PARK_TIMERS_LEFT,
	STK_CNT_RTC_PARK_WAKES,
	STK_CNT_RTC_PARK_LONG,
	STK_CNT_RTC_PARK_IDLE,
	STK_CNT_RTC_PARK_SIGNALLED,
	STK_CNT_RTC_PARK_TIMER_WAITS,
	STK_CNT_RTC_PARK_TIMERS_HANDED,
	STK_CNT_RTC_PARK_HANDED,
	STK_CNT_RTC_OWED_TAKEN,
	STK_CNT_RTC_HANDOVERS,
	STK_CNT_RTC_SPIN_HITS,
	STK_CNT_RTC_SHIM_DRIVES,
	STK_CNT_RTC_SHIM_MIRROR,
	STK_CNT_RTC_SHIM_EINTR,
	STK_CNT_RTC_POLL_DRIVES,
	STK_CNT_RTC_POLL_KERNEL,
	/* User-level epoll (issue 14: mirror.c, drive.c) */
	STK_CNT_MIRROR_TOKENS_SKIPPED,
	STK_CNT_UEPOLL_KICKS,
	STK_CNT_UEPOLL_UNQUEUED,
	STK_CNT_UEPOLL_CTL_QUIET,  /* readylist.c: epoll_ctl holds left without stk__leave */
	STK_CNT_TX_FLUSH_DEFERRED,  /* uls_tx_batch (drive.c) */
	STK_CNT_TX_FLUSH_AT_WAIT,   /* uls_tx_flush: a round's kept flush, at the next wait */
	STK_CNT_TX_FLUSH_BATCH_AT_ONCE,  /* a round's send flushed at once: stack thread not parked */
	/* SYN floods (stack/syncookie.c, lwIP patch 0090) */
	STK_CNT_TCP_SYN_COOKIES_SENT,
	STK_CNT_TCP_SYN_COOKIES_OK,
	STK_CNT_TCP_SYN_COOKIES_BAD,
	STK_CNT_TCP_SYN_BACKLOG_DROPS,
	/* SYN shedding under receive pressure (stack/synshed.c) */
	STK_CNT_SYN_SHED,
	STK_CNT_SYN_SHED_READMITTED,
	STK_CNT_SYN_SHED_SUSPENDED,
	STK_CNT_SYN_SHED_KNOWN_PEER,
	STK_CNT_SYN_SHED_MEMORY_FULL,
	/* Load (issue 18, lwIP patch 0100) */
	STK_CNT_TCP_SYN_COOKIES_ACCEPTQ_FULL,
	STK_CNT__COUNT
};
void stk__count(enum stk_counter c);

/* TCP input checks (tcp_checks.c; the hook itself is declared in hooks.h). The pure
 * decisions are exposed for the unit tests. */
void stk__tcp_checks_init(void);
/* ICMP errors (icmperr.c): its per-connection state for path MTU aging */
void stk__icmperr_init(void);
/* What an ICMP or ICMPv6 error says about a datagram we sent, read from the message by
 * icmperr.c or icmp6err.c and delivered by stk__icmp_err_deliver (icmperr.c). */
struct stk_icmp_err {
	const ip_addr_t *remote;  /* the quoted datagram's destination */
	u8_t proto;               /* IP_PROTO_TCP or IP_PROTO_UDP */
	const u8_t *th;           /* the first 8 octets of its transport header */
	int err;                  /* -errno for a TCP connection */
	bool hard;                /* a hard error: ends a SYN-SENT connection */
	int dgram_err;            /* -errno for a connected UDP socket; 0: none */
	bool too_big;             /* frag-needed or Packet Too Big: lowers the MSS */
	u32_t mtu;                /* ... to this next-hop MTU */
	u16_t hdrs;               /* less the IP and TCP headers (40 or 60 octets) */
	u16_t mtu_min;            /* an MTU below this is counted and ignored */
};
/* 0: the message is about a live connection (its sequence number within SND.UNA..SND.NXT)
 * or a UDP socket's port, and was acted on; -ENOENT (no such connection or socket) or
 * -ERANGE (RFC 5927 §4.1: sequence number outside the window), counted. */
int stk__icmp_err_deliver(const struct stk_icmp_err *m);
#define IP6_TCP_HDRS 60  /* IPv6 and TCP headers without options: MSS = MTU - 60 */
bool stk__tcp_seq_acceptable(uint32_t seq, uint32_t len, uint32_t rcv_nxt, uint32_t rcv_wnd);
bool stk__tcp_ack_acceptable(uint32_t ack, uint32_t snd_una, uint32_t snd_nxt,
			     uint32_t max_snd_wnd);
bool stk__tcp_paws_reject(uint32_t tsval, uint32_t ts_recent, uint64_t now,
			  uint64_t ts_recent_at, bool *expired);
bool stk__tcp_ack_budget(uint64_t *start, uint16_t *used, uint64_t now);
void stk__count_verdict(enum nif_verdict v);

/* Signals held off inside the stack without a system call (sigdefer.c). */
int stk__signal_open(void);
void stk__signal_close(int held);
void stk__signal_fork_child(void);
void stk__signal_counters(uint64_t *deferred, uint64_t *redelivered);

/* Sockets (socket.c) need to know when the node goes away, or ulsd does. */
void stk__sockets_shutdown(void);
void stk__sockets_lost(void);
void stk__ep_init(void);

/* The library's own descriptors (privfd.c). */
int stk__fd_hide(int fd);
void stk__fd_close(int fd);
void stk__fd_unmark(int fd);

/* Files held in io_uring fixed-file tables, outside the descriptor table (fixedfd.c):
 * handles >= 0, results or -errno. */
int stk__ffd_hold_pair(int a, int b, int *ha, int *hb);
void stk__ffd_release(int h);
void stk__ffd_release_pair(int ha, int hb);
ssize_t stk__ffd_send(int h, const void *buf, size_t len, int flags);
ssize_t stk__ffd_recv(int h, void *buf, size_t len, int flags);
ssize_t stk__ffd_recvmsg(int h, struct msghdr *mh, int flags);
int stk__ffd_install(int h, bool cloexec);
void stk__ffd_forget(void);

/* One of libuls's environment variables as it was when libuls was loaded, or NULL
 * (env.c: glibc's getenv() is not safe while another thread changes the environment). */
const char *stk__getenv(const char *name);

/* Logging (port.c). */
void stk__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
