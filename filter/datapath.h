/* The direct data path's maps, as both the BPF programs (filter/datapath.bpf.c) and ulsd
 * (server/bpf.c) see them. Fixed-width types only: this header is compiled for the BPF
 * target too. Addresses are in network order, ports in host order, exactly as struct
 * flt_pkt holds them, so that the kernel's group pick and flt__group_pick agree.
 */
#ifndef ULS_FILTER_DATAPATH_H
#define ULS_FILTER_DATAPATH_H

#include <linux/types.h>

/* A TAP takes at most 256 queues (tun's MAX_TAP_QUEUES). Queue 0 is ulsd's, and one is
 * kept spare to replace a queue when it is recycled (server/bpf.c), so at most 254 processes
 * have a queue of their own. */
#define FLT_DP_QUEUES      256
#define FLT_DP_LEASES      4097   /* lease ids 1..4095, and SRV_IN_TRANSIT (4096) */
#define FLT_DP_GROUP_MAX   256    /* FLT_GROUP_MAX */
#define FLT_DP_CONN_MAX    (1u << 20)
#define FLT_DP_LISTEN_MAX  65536
#define FLT_DP_ARP_MAX     4096
#define FLT_DP_FRAG_MAX    512    /* datagrams ulsd reassembled, on their way to a queue */

/* Why the transmit check dropped a frame a process wrote into its queue. */
enum flt_dp_reason {
	FLT_DP_PASS,
	FLT_DP_NO_OWNER,    /* the queue has no process */
	FLT_DP_SRC_MAC,     /* Ethernet source is not the node's MAC */
	FLT_DP_SRC_IP,      /* IPv4 or IPv6 source is not one of the node's addresses */
	FLT_DP_ARP,         /* ARP other than request/reply from the node */
	FLT_DP_PROTO,       /* an EtherType or IP protocol processes may not send (IPv6 on
			     * a node without an IPv6 address, an extension header) */
	FLT_DP_PORT,        /* TCP/UDP source port (or tuple) not the queue's */
	FLT_DP_SHARED_PEER, /* shared TCP port: the 4-tuple belongs to another member */
	FLT_DP_ICMP,        /* ICMP or ICMPv6 type not allowed, or an error about another's
			     * port */
	FLT_DP_SIZE,        /* longer than the MTU, or a super-segment that is not TCP */
	FLT_DP_REASONS
};

struct flt_dp_cfg {
	__u32 node_ip;         /* network order */
	__u32 ifindex;         /* the TAP: frames for the node go back into it */
	__u32 mtu;
	__u8 node_mac[6];
	__u8 pad[2];
	__u64 k0, k1;          /* the filter table's hash key (flt_table_key) */
	/* IPv6 (ulsd --ip6): the node's global address and its link-local one; with
	 * has_ip6 0 the node has none, every IPv6 frame is ulsd's and no process may send
	 * one. */
	__u8 node_ip6[16];
	__u8 node_ll6[16];
	__u32 has_ip6;
	__u32 pad6;
	/* SYN shedding on the direct path (synguard, filter/datapath_syn.bpf.h): the pure
	 * SYNs from unknown peers a process's queue takes per FLT_DP_SYN_WINDOW_NS before the
	 * rest are shed; 0: never shed (ULS_SYN_SHED=0). */
	__u32 syn_budget;
	/* ulsd --offload csum: the TAP takes no super-segment, so a queue may send none
	 * (FLT_DP_SIZE). */
	__u32 csum_only;
};

struct flt_dp_conn_key {
	__u32 rip;
	__u16 lport, rport;
	__u8 proto;
	__u8 pad[3];
};

/* An IPv6 connected rule (dp_conn6): the remote address as the filter table keys a
 * non-v4-mapped one. The listening groups of IPv6 (FLT_FAM_V6) are dp_listen6, keyed as
 * dp_listen. */
struct flt_dp_conn6_key {
	__u8 rip[16];
	__u16 lport, rport;
	__u8 proto;
	__u8 pad[3];
};

struct flt_dp_listen_key {
	__u16 lport;
	__u8 proto;
	__u8 pad;
};

/* A listening TCP port or bound UDP port: every member (who may send from the port) and
 * the members new connections are picked from (the accepting ones, if any), in the
 * filter table's order. */
struct flt_dp_group {
	__u32 n_all, n_pick;
	__u32 all[FLT_DP_GROUP_MAX];
	__u32 pick[FLT_DP_GROUP_MAX];
};

/* Per queue: frames steered to it, and frames it wrote that passed or were dropped; the
 * _gso figures count the super-segments among them (virtio-net offload). ulsd folds a
 * queue's figures into its node-wide totals and zeroes them when the queue is renewed, so
 * a queue's figures are its current owner's. */
struct flt_dp_qstat {
	__u64 steered;
	__u64 steered_gso;
	__u64 tx_pass;
	__u64 tx_pass_gso;
	__u64 tx_drop[FLT_DP_REASONS];
	/* synguard (filter/datapath_syn.bpf.h): pure SYNs for the queue dropped before tun
	 * queued them; shed SYNs' retransmissions taken; SYNs over the budget taken as a
	 * known peer's; times shedding was suspended for the queue. */
	__u64 syn_shed;
	__u64 syn_readmitted;
	__u64 syn_known_peer;
	__u64 syn_suspended;
};

/* SYN shedding on the direct path (filter/datapath_syn.bpf.h). */
#define FLT_DP_SYN_WINDOW_NS 100000000ull      /* the budget's window: 100 ms */
#define FLT_DP_SYN_BUDGET_DEFAULT 200          /* per window: 2,000 SYN/s per queue */
#define FLT_DP_SHED_BITS (1u << 22)            /* per generation of the shed memory */
#define FLT_DP_SHED_WORDS (FLT_DP_SHED_BITS / 64)
#define FLT_DP_KNOWN_MAX 65536                 /* known peers (LRU) */

/* Per queue: its budget's window, the shed SYNs that came back, a suspension. Written by
 * the program without locks on both CPUs: a lost update moves a count by one, which only
 * moves the budget or the judgement by one SYN. */
struct flt_dp_synq {
	__u64 win_start_ns;
	__u32 win_syns;
	__u32 judge_shed, judge_back;
	__u32 pad;
	__u64 judge_start_ns;
	__u64 suspend_until_ns;
};

/* Queues waiting for an ARP reply from one address: bit q set by the transmit check when
 * queue q asks, cleared when the steering program gives a reply to q. dp_ndwait keeps the
 * same for IPv6: a Neighbor Solicitation's target, and the Neighbor Advertisement for it. */
struct flt_dp_arpwait {
	__u64 bits[FLT_DP_QUEUES / 64];
};

/* RFC 791 §3.2's buffer identifier (the destination is the node). */
struct flt_dp_frag_key {
	__u32 src;            /* network order */
	__u16 id;             /* host order */
	__u8 proto;
	__u8 pad;
};

/* RFC 8200 §4.5's: source and Identification (the destination is the node). */
struct flt_dp_frag6_key {
	__u8 src[16];
	__u32 id;             /* as on the wire */
};

struct flt_dp_neigh {
	__u8 mac[6];
	__u8 pad[2];
};

#endif
