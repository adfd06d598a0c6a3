/* The control protocol between a process's stack and ulsd (docs/control-protocol.md).
 *
 * A process holds one SOCK_SEQPACKET connection to ulsd, its lease, for its whole life.
 * Every message is one fixed-size, versioned record; requests carry a sequence number that
 * the reply repeats. ulsd identifies the peer by SO_PEERCRED, never by message contents.
 */
#ifndef ULS_NETIF_CTLPROTO_H
#define ULS_NETIF_CTLPROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define ULS_CTL_MAGIC    0x554c5343u  /* "ULSC" */
/* 2: HELLO offers the direct data path (ring_fd, datapath, queue). */
#define ULS_CTL_VERSION  2u
#define ULS_CTL_MSG_SIZE 128u

enum uls_ctl_type {
	ULS_CTL_HELLO = 1,     /* open the lease; reply carries node facts and 3 fds */
	ULS_CTL_BIND,          /* reserve (proto, lport or 0); reply: the port */
	ULS_CTL_LISTEN,        /* TCP: deliver new connections to lport to this process */
	ULS_CTL_CONNECT,       /* TCP: (lport or 0, rip, rport); reply: lport; installs the tuple */
	ULS_CTL_ACCEPTED,      /* TCP, one-way: a connection accepted on a listener */
	ULS_CTL_RELEASE,       /* TCP, one-way: a connection's state is gone (rip, rport set) */
	ULS_CTL_UNBIND,        /* one-way: drop this process's hold on (proto, lport) */
	ULS_CTL_STATS,         /* ulsstat: counters and endpoints follow, then END */
	ULS_CTL_STAT_COUNTER,  /* reply record: name, value */
	ULS_CTL_STAT_ENDPOINT, /* reply record: proto, kind, lport, rip, rport, pid */
	ULS_CTL_END,           /* end of a STATS reply */
	ULS_CTL_ACCEPTING,     /* TCP, one-way: this process accepts on its listener at lport */
	ULS_CTL_HANDOFF,       /* TCP: this process gives the connection up to whoever claims it
				* with u.handoff.nonce; frames for it are held back meanwhile */
	ULS_CTL_CLAIM,         /* TCP: take over the connection handed off under u.handoff.nonce */
	ULS_CTL_CONNTAB,       /* the process asks for its connection table (netif/conntab.h);
				* the reply carries its memfd */
	ULS_CTL_STAT_PROC,     /* reply record: one process, then its STAT_CONN records */
	ULS_CTL_STAT_CONN,     /* reply record: one TCP connection of that process */
	ULS_CTL_TYPE_MAX
};

#define ULS_CTL_F_REUSEADDR 0x01u
#define ULS_CTL_F_REUSEPORT 0x02u
#define ULS_CTL_F_INHERIT   0x04u  /* a fork child joins its parent's hold on the port */

/* Endpoint kinds in STAT_ENDPOINT records. */
enum uls_ctl_kind { ULS_CTL_K_BOUND = 1, ULS_CTL_K_LISTEN, ULS_CTL_K_CONNECTED, ULS_CTL_K_TIMEWAIT };

struct uls_ctl_hello {
	uint32_t addr;        /* node address, network order */
	uint32_t gateway;     /* network order, 0: none */
	uint32_t mtu;
	uint32_t lease_id;
	uint8_t prefix_len;
	uint8_t mac[6];
	uint8_t flags;        /* ULS_CTL_HELLO_F_* */
	uint8_t isn_secret[16];  /* RFC 6528's secret key, shared by the node's processes */
	/* Request with ULS_CTL_HELLO_F_RINGS: the process's two io_urings (receive, transmit),
	 * created with IORING_SETUP_R_DISABLED and nothing registered, by their descriptor
	 * numbers in the process. ulsd takes them with pidfd_getfd. */
	int32_t ring_fd[2];
	/* Reply: ULS_CTL_DP_DIRECT (the rings now read and write TAP queue `queue` as fixed
	 * file 0; no descriptors come with the reply) or ULS_CTL_DP_RELAY (3 descriptors). */
	uint8_t datapath;
	uint8_t queue;
	uint8_t pad[2];
	/* Reply: the node's interface as the host that runs ulsd names it (the TAP's name
	 * and index), which programs under ulsrun see as their interface (getifaddrs,
	 * if_nameindex, SIOCGIF*). A ulsd that predates it sends zeros. */
	uint32_t ifindex;
	char ifname[16];      /* IFNAMSIZ, NUL-terminated */
};

/* The node's rings carry offload words (netif/vnet.h): the process may send TCP segments
 * with a partial checksum and super-segments, and receives them. */
#define ULS_CTL_HELLO_F_OFFLOAD 0x01u
/* Request: ring_fd names two rings for the direct data path. */
#define ULS_CTL_HELLO_F_RINGS   0x02u

enum uls_ctl_datapath { ULS_CTL_DP_DIRECT = 1, ULS_CTL_DP_RELAY = 2 };

struct uls_ctl_counter {
	char name[48];
	uint64_t value;
};

struct uls_ctl_endpoint {
	uint32_t pid;
	uint8_t kind;
	uint8_t datapath;     /* enum uls_ctl_datapath of the owner; 0: none (custody) */
	uint8_t pad[2];
};

/* STAT_PROC: a process on the node and what its connection table said. */
enum uls_ctl_table {
	ULS_CTL_TABLE_NONE = 0,   /* the process has no table (an older library) */
	ULS_CTL_TABLE_OK,
	ULS_CTL_TABLE_TORN,       /* no consistent copy (conntab_torn) */
	ULS_CTL_TABLE_BAD,        /* a header out of range (conntab_bad_header) */
	ULS_CTL_TABLE_MAX
};

struct uls_ctl_proc {
	uint32_t pid;
	uint8_t datapath;     /* enum uls_ctl_datapath */
	uint8_t queue;        /* its TAP queue on the direct path */
	uint8_t table;        /* enum uls_ctl_table */
	uint8_t pad;
	uint32_t connections; /* TCP connections the process has */
	uint32_t listed;      /* STAT_CONN records that follow */
	uint32_t refused;     /* entries refused as out of range (conntab_bad_entries) */
	uint32_t age_ms;      /* since the process last wrote its table; UINT32_MAX: never */
};

/* STAT_CONN: the message's lport, rip, rport name the connection (proto TCP). */
struct uls_ctl_conn {
	uint32_t pid;
	uint8_t datapath;     /* enum uls_ctl_datapath */
	uint8_t state;        /* enum uls_tcp_state (netif/conntab.h) */
	uint8_t snd_wscale, rcv_wscale;
	uint32_t send_queue, recv_queue;  /* bytes */
	uint32_t rtt_us, rttvar_us, rto_us;
	uint32_t cwnd, ssthresh;          /* bytes */
	uint32_t retransmits;
	uint32_t mss, snd_wnd, rcv_wnd;
	uint8_t flags;        /* ULS_CONNTAB_F_* */
	uint8_t pad[3];
	uint32_t lip;         /* the node's address, network order */
};

/* HANDOFF and CLAIM: the secret the giving process passed to the taker (stack/handoff.c). */
struct uls_ctl_handoff {
	uint64_t nonce;       /* nonzero */
};

struct uls_ctl_msg {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t seq;
	int32_t status;       /* replies: 0 or -errno */
	uint8_t proto;        /* IPPROTO_TCP or IPPROTO_UDP */
	uint8_t flags;        /* ULS_CTL_F_* */
	uint16_t lport;       /* host order */
	uint32_t rip;         /* network order */
	uint16_t rport;       /* host order */
	uint16_t pad;
	uint32_t pad2;
	union {
		struct uls_ctl_hello hello;
		struct uls_ctl_counter counter;
		struct uls_ctl_endpoint endpoint;
		struct uls_ctl_handoff handoff;
		struct uls_ctl_proc proc;
		struct uls_ctl_conn conn;
		uint8_t raw[96];
	} u;
};

_Static_assert(sizeof(struct uls_ctl_msg) == ULS_CTL_MSG_SIZE, "fixed-size control message");

/* Why a received message was refused (each has a counter in ulsd). uls_ctl_check returns
 * the negated reason, as filter's parser returns -FLT_*. The reasons start above the
 * largest errno Linux returns (MAX_ERRNO, 4095), so -reason is never read as -errno. */
#define ULS_CTL_ERROR_BASE 4096
enum uls_ctl_error {
	ULS_CTL_BAD_SIZE = ULS_CTL_ERROR_BASE + 1,   /* truncated or oversized */
	ULS_CTL_BAD_MAGIC,
	ULS_CTL_BAD_VERSION,
	ULS_CTL_BAD_TYPE,
	ULS_CTL_BAD_FIELD,      /* a field out of range for its type */
	ULS_CTL_ERROR_END
};
/* Counters by reason: index reason - ULS_CTL_ERROR_BASE (0 unused). */
#define ULS_CTL_ERROR_SLOTS (ULS_CTL_ERROR_END - ULS_CTL_ERROR_BASE)

/* Check a received message of n bytes; on success copy it to out and return 0, else return
 * -ULS_CTL_BAD_* (out untouched). */
int uls_ctl_check(const void *buf, ssize_t n, struct uls_ctl_msg *out);
/* The counter name of a reason (ULS_CTL_BAD_*, or its negation). */
const char *uls_ctl_error_name(int err);
void uls_ctl_init(struct uls_ctl_msg *m, enum uls_ctl_type type, uint32_t seq);

#endif
