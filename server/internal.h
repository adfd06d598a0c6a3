/* ulsd: what the files of server/ share.
 *
 * Two threads, two roles (seed 004 §4.3):
 *   - the demultiplexer (demux.c): TAP frames to process rings, process frames to the TAP,
 *     and the node's own replies (ARP, ICMP echo, RST, port unreachable, reply.c);
 *   - the connection server (ctl.c): leases, ports, filter rules, cleanup after a process.
 * They share the filter table, the lease table, the ports, custody, handoffs and the
 * counters under one mutex, s->lock; the demux thread takes it once per batch of frames,
 * the control thread once per message. It guards state only: neither thread makes a
 * data-path system call under it (the TAP's write and the rings' eventfd writes come after
 * the unlock; docs/architecture.md lists what still runs under it).
 *
 * The TAP's transmit queue has a lock of its own, s->tx_lock, held only around the nif_tap_tx_*
 * calls (srv__send_frame, srv__drain_tx, srv__tx_flush). Order: s->lock, then s->tx_lock;
 * never s->lock while holding s->tx_lock.
 */
#ifndef ULS_SERVER_INTERNAL_H
#define ULS_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "filter/filter.h"
#include "netif/ctl/ctl.h"
#include "netif/ring.h"
#include "netif/synshed.h"
#include "netif/tap.h"
#include "server/counters.h"
#include "server/custody.h"
#include "server/lease.h"
#include "server/neigh6.h"
#include "server/ports.h"

#define SRV_HANDOFF_MS      5000    /* a connection in transit between processes (handoff.c) */

/* A connection handed off by one process and not yet claimed by another (handoff.c). */
struct srv_handoff {
	uint16_t lport, rport;
	struct flt_addr rip;    /* either family (filter.h) */
	uint64_t nonce;
	uint64_t expires_ms;
};

/* Which data path a process gets (ulsd --datapath). */
enum srv_datapath { SRV_DP_AUTO, SRV_DP_DIRECT, SRV_DP_RELAY };

struct srv_dp;
struct srv_reass;

/* A process's frame checked and waiting to be sent without s->lock (demux.c). */
struct srv_tx_held {
	struct srv_lease *l;
	uint8_t *slot;          /* the TAP transmit buffer holding its first head bytes */
	const uint8_t *f;       /* the frame in the process's ring */
	size_t head, len;
	uint32_t off;
	uint64_t t_taken;
	int rc;
};

struct srv {
	/* node */
	char tap_name[32];
	unsigned tap_index;     /* its ifindex in ulsd's namespace (HELLO tells processes) */
	uint32_t ip;            /* network order */
	unsigned prefix_len;
	uint32_t gw;
	/* IPv6 (--ip6; reply6.c): a global or unique-local address and the link-local one
	 * derived from the MAC (RFC 4291 §2.5.6). has_ip6 false: IPv6 frames are dropped as
	 * before (flt_parse's drop_ethertype). */
	bool has_ip6;
	/* The direct path's kernel programs steer and check IPv6 (server/bpf.c sets it once
	 * they do). Until then a node with IPv6 gives every process the relay (ctl.c). */
	bool dp_ip6;
	uint8_t ip6[16], ip6_ll[16];
	unsigned ip6_plen;
	/* The node's default IPv6 router (--gw6), given to every process (ctl.c, ROUTER6). */
	bool has_gw6;
	uint8_t gw6[16];
	/* Duplicate address detection of ip6 and ip6_ll (RFC 4862 §5.4; reply6.c), optimistic
	 * (RFC 4429): the addresses serve while it runs. enum srv_dad; dad_ms: its next step. */
	uint8_t dad;
	uint64_t dad_ms;
	uint8_t mac[WIRE_ETH_ALEN];
	unsigned mtu;
	/* The TAP carries a virtio-net header with checksum and TCP segmentation offload
	 * (netif/vnet.h): processes may send super-segments and receive them. */
	bool offload;
	/* With offload: checksum offload alone (--offload csum): no super-segment either
	 * way; frames carry partial checksums and stay within the MTU. */
	bool csum_only;
	uint8_t isn_secret[16];
	const char *ctl_path;

	pthread_mutex_t tx_lock;  /* the TAP's transmit queue (see the top of this file) */
	pthread_mutex_t lock;   /* everything below, but what is marked otherwise */
	struct nif_tap *tap;
	struct flt_table *flt;
	struct srv_leases leases;                   /* lease.h */
	/* Leases with unpublished frames: the demux thread's alone, used without the lock. */
	struct srv_lease *pending[SRV_MAX_LEASES];
	unsigned npending;
	/* Long frames checked under the lock and sent after it (demux.c, send_held), at most
	 * one per lease, and their leases, drained again at the next round: the demux
	 * thread's. tx_released is signalled when they are back in their rings. */
	struct srv_tx_held held[SRV_MAX_LEASES];
	unsigned nheld;
	struct srv_lease *again[SRV_MAX_LEASES];
	unsigned nagain;
	pthread_cond_t tx_released;
	struct srv_ports *ports;                    /* ports.h */
	struct srv_custody_set custody;             /* custody.h */
	struct srv_handoff *handoff;
	size_t nhandoff, handoff_cap;
	struct srv_counters ctr;                    /* counters.h */
	uint64_t icmp_tokens_ms;                    /* rate limiter for ICMP errors */
	unsigned icmp_tokens;
	uint64_t rst_tokens_ms;                     /* rate limiter for resets (reply.c) */
	unsigned rst_tokens;
	/* Neighbours seen on the wire (IPv4 source -> Ethernet source), so ulsd can address
	 * a peer whose process died. Direct-mapped by the address's low bits. */
	struct { uint32_t ip; uint8_t mac[WIRE_ETH_ALEN]; } neigh[256];
	/* The same for IPv6, by neighbour discovery (neigh6.h, reply6.c). */
	struct srv_neigh6_cache neigh6;
	enum srv_datapath datapath;
	struct srv_dp *dp;      /* the direct data path's programs and queues; NULL: none */
	struct srv_reass *reass;  /* fragments being reassembled (reass.c; demux thread) */
	/* SYN shedding on the relay path (demux.c; demux thread, s->lock held): ULS_SYN_SHED=0
	 * turns it off, as in the processes. */
	struct nif_synshed shed;
	/* The kernel sheds SYN floods on the direct path (synguard, bpf.c): direct leases'
	 * processes do not shed too (CTL_HELLO_F_KSHED). */
	bool dp_kshed;
	atomic_bool stop;       /* no lock: srv__stop(), srv__stopping() */
	bool trace;             /* ULSD_TRACE=1: log every control message */
	/* Allow a process that asks (CTL_HELLO_F_MSHOT) a multishot read of its queue;
	 * ULSD_RX_MULTISHOT=0 does not, as a ulsd that predates it (tests, measurements). */
	bool rx_mshot;
};

/* ulsd.c */
void srv__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
uint64_t srv__now_ms(void);

/* Ask both threads to leave their loops (from any thread). Relaxed: the
 * flag publishes no other data (whoever waits for a thread's end joins it, and the join
 * orders what it wrote); it only has to be seen, which an atomic is, where a volatile bool
 * read by one thread while another writes it was a data race. */
static inline void srv__stop(struct srv *s)
{
	atomic_store_explicit(&s->stop, true, memory_order_relaxed);
}

static inline bool srv__stopping(struct srv *s)
{
	return atomic_load_explicit(&s->stop, memory_order_relaxed);
}

/* demux.c: the demux thread */
void *srv__demux_thread(void *arg);
void srv__send_frame(struct srv *s, const uint8_t *frame, size_t len);
void srv__tx_flush(struct srv *s);   /* s->lock not held */
/* A process's frames (control thread, s->lock held): check each against its endpoints and
 * send it, after any the demux thread is sending without the lock. */
void srv__drain_tx(struct srv *s, struct srv_lease *l);
/* A frame for a process on the relay path, into its ring. */
void srv__deliver(struct srv *s, struct srv_lease *l, const uint8_t *frame, size_t len);
/* A reassembled IPv4 datagram nobody owns (reass.c), answered by the node as an
 * unfragmented packet for it would be. */
void srv__input_ip4_whole(struct srv *s, const uint8_t *frame, size_t len);

/* fragment.c: the node's own IPv4 / IPv6 packet in frame, sent whole when it fits the link
 * and in fragments when it does not (an echo reply to a reassembled request). */
void srv__send_ip4(struct srv *s, const uint8_t *frame, size_t len);
void srv__send_ip6(struct srv *s, const uint8_t *frame, size_t len);

/* reass.c: IPv4 and IPv6 reassembly for processes (demux thread, s->lock held) */
int srv__reass_init(struct srv *s);
void srv__reass_input(struct srv *s, const uint8_t *frame, size_t len, const struct flt_pkt *p);
int srv__reass_tick(struct srv *s);

/* reply.c: frames the node sends itself (caller holds s->lock) */
void srv__reply_arp(struct srv *s, const struct flt_pkt *p);
void srv__reply_echo(struct srv *s, const uint8_t *frame, size_t len, const struct flt_pkt *p);
void srv__reply_rst(struct srv *s, const uint8_t *frame, const struct flt_pkt *p);
enum srv_custody_verdict srv__custody_answer(struct srv *s, uint16_t lport,
					     const struct flt_addr *rip, uint16_t rport,
					     const struct srv_custody_seg *g, uint32_t *seq,
					     uint32_t *ack);
void srv__reply_port_unreachable(struct srv *s, const uint8_t *frame, size_t len,
				const struct flt_pkt *p);
void srv__reply_reass_time_exceeded(struct srv *s, const uint8_t *frame, size_t len,
				   const struct flt_pkt *p);
/* A srv_custody_probe_fn: arg is the struct srv. */
void srv__send_probe(void *arg, struct srv_custody *c);
void srv__learn_neighbour(struct srv *s, uint32_t ip, const uint8_t mac[WIRE_ETH_ALEN]);
/* A token bucket of per_s tokens a second, at most per_s saved: may one more go out? */
bool srv__tokens_allow(uint64_t *at_ms, unsigned *tokens, unsigned per_s);
#define SRV_ICMP_RATE_PER_S 100   /* RFC 1122 §3.2.2, RFC 4443 §2.4 (f) */
#define SRV_RST_RATE_PER_S  2000  /* reply.c says why */

/* reply6.c: an IPv6 frame for the node (demux thread, s->lock held): neighbour discovery,
 * echo, and the answers for ports nobody holds. Every frame is answered or counted. */
void srv__input_ip6(struct srv *s, const uint8_t *frame, size_t len);
/* A reassembled IPv6 packet nobody owns (reass.c), without its Fragment header: answered
 * as an unfragmented one would be. */
void srv__input_ip6_whole(struct srv *s, const uint8_t *frame, size_t len);
bool srv__is_node_ip6(const struct srv *s, const uint8_t *a);
/* ICMPv6 errors about a fragment reass.c holds (RFC 8200 §4.5): Parameter Problem with
 * code and pointer, and Time Exceeded code 1 about the first fragment. */
void srv__reply6_param_problem(struct srv *s, const uint8_t *frame, size_t len, uint8_t code,
			       uint32_t pointer);
void srv__reply6_reass_time_exceeded(struct srv *s, const uint8_t *frame, size_t len);
/* Duplicate address detection (RFC 4862 §5.4): srv__dad_start before the threads run,
 * srv__dad_run from the control thread's loop while srv__dad_pending (s->lock held);
 * returns ms until its next step. */
enum srv_dad { SRV_DAD_OFF, SRV_DAD_DUE, SRV_DAD_PROBING, SRV_DAD_DONE, SRV_DAD_DUPLICATE };
#define SRV_DAD_MAX_DELAY_MS 1000   /* RFC 4861 §10 MAX_RTR_SOLICITATION_DELAY */
void srv__dad_start(struct srv *s);
int srv__dad_run(struct srv *s);
static inline bool srv__dad_pending(const struct srv *s)
{
	return s->dad == SRV_DAD_DUE || s->dad == SRV_DAD_PROBING;
}
/* srv__send_probe for an IPv6 peer: at once when its link-layer address is known, else
 * after the neighbour solicitation it sends is answered (RFC 4861 §7.2.2). */
void srv__send_probe6(struct srv *s, struct srv_custody *c);
/* The neighbour cache's retransmissions and failures (s->lock held); returns ms until the
 * next one (at most 1000). */
int srv__neigh6_run(struct srv *s);

/* A lease as the port table knows it (ports.h). */
#define SRV_OWNER(l) (&(const struct srv_port_owner){ .id = (l)->id, .uid = (l)->uid, \
						      .pid = (l)->pid })
/* Custody's probes and expiry now (s->lock held); returns ms until the next work. */
static inline int srv__custody_run(struct srv *s)
{
	return srv__custody_tick(&s->custody, srv__now_ms(), srv__send_probe, s);
}

/* handoff.c (s->lock held) */
struct ctl_msg;
int srv__handoff_begin(struct srv *s, struct srv_lease *l, const struct ctl_msg *m);
int srv__handoff_claim(struct srv *s, struct srv_lease *l, const struct ctl_msg *m);
int srv__handoff_tick(struct srv *s);  /* expiry; returns ms until the next one */

/* lease.c (s->lock held unless noted) */
int srv__lease_new(struct srv *s, int fd, pid_t pid, uid_t uid, struct srv_lease **out);
/* The relay's ring pair and eventfds, for a lease not on the direct path. */
int srv__lease_rings(struct srv *s, struct srv_lease *l);
void srv__lease_end(struct srv *s, struct srv_lease *l);   /* control thread */
void srv__lease_conntab_close(struct srv_lease *l);
void srv__lease_free(struct srv *s, struct srv_lease *l);  /* demux thread */
/* FIN-WAIT-2 and TIME-WAIT lookup in a process's last connection table (struct
 * uls_conntab_ent, netif/conntab.h): keep and sort those entries once, then search. */
struct uls_conntab_ent;
uint32_t srv__tw_sort(struct uls_conntab_ent *tab, uint32_t n);
const struct uls_conntab_ent *srv__tw_find(const struct uls_conntab_ent *tw, uint32_t n,
					   uint16_t lport, const uint8_t rip[16], uint16_t rport);

/* bpf.c (or bpf_none.c): the direct data path (s->lock held) */
int srv__dp_init(struct srv *s);
int srv__dp_lease_direct(struct srv *s, struct srv_lease *l, const int32_t ring_fd[2],
			 int32_t wake_fd, bool mshot);
void srv__dp_lease_end(struct srv *s, struct srv_lease *l);
typedef void srv_dp_stat_fn(void *arg, const char *name, uint64_t value);
void srv__dp_stats(struct srv *s, srv_dp_stat_fn *fn, void *arg);
/* The MAC of a peer the kernel saw set up a connection (ulsd sees no direct frames). */
int srv__dp_neighbour(struct srv *s, uint32_t ip, uint8_t mac[WIRE_ETH_ALEN]);
int srv__dp_neighbour6(struct srv *s, const uint8_t ip[16], uint8_t mac[WIRE_ETH_ALEN]);
/* Steer the fragments of datagram (src, id, proto) to the queue of lease owner; owner 0
 * removes the entry. */
int srv__dp_frag_steer(struct srv *s, uint32_t src, uint16_t id, uint8_t proto, uint32_t owner);
/* The same for an IPv6 datagram (src, Identification id in host order). */
int srv__dp_frag6_steer(struct srv *s, const uint8_t src[16], uint32_t id, uint32_t owner);

/* ctl.c: the control thread (runs in main) */
int srv__ctl_run(struct srv *s, int listen_fd);
/* Its steps, for srv__ctl_run and tests/fuzz/fuzz_ulsd: a process's control connection
 * (fd, and its credentials from SO_PEERCRED), one message from it, and its end (the
 * process's lease ends; s->lock held). */
struct srv_conn;
struct srv_conn *srv__ctl_conn_new(int fd, pid_t pid, uid_t uid);
void srv__ctl_input(struct srv *s, struct srv_conn *c, const uint8_t *buf, ssize_t n);
void srv__ctl_conn_close(struct srv *s, struct srv_conn *c);

#endif
