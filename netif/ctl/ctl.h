/* The control protocol between a process's stack and ulsd (docs/control-protocol.md).
 *
 * A process holds one SOCK_SEQPACKET connection to ulsd, its lease, for its whole life.
 * Every message is one fixed-size, versioned record; requests carry a sequence number that
 * the reply repeats. ulsd identifies the peer by SO_PEERCRED, never by message contents.
 */
#ifndef ULS_NETIF_CTL_CTL_H
#define ULS_NETIF_CTL_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

#define CTL_MAGIC    0x554c5343u  /* "ULSC" */
/* 2: HELLO offers the direct data path (ring_fd, datapath, queue).
 * 3: IPv6 (issue 17): a family byte and a 16-octet remote address in the header, the
 *    node's IPv6 address in HELLO's reply, a 16-octet local address in STAT_CONN. */
#define CTL_VERSION  3u
#define CTL_MSG_SIZE 128u

/* TCP states, numbered as lwIP's enum tcp_state (RFC 9293 §3.3.2's names): a
 * handed-over connection's state here, and the connection table's (netif/conntab.h). */
enum uls_tcp_state {
	ULS_TCP_CLOSED = 0, ULS_TCP_LISTEN, ULS_TCP_SYN_SENT, ULS_TCP_SYN_RECEIVED,
	ULS_TCP_ESTABLISHED, ULS_TCP_FIN_WAIT_1, ULS_TCP_FIN_WAIT_2, ULS_TCP_CLOSE_WAIT,
	ULS_TCP_CLOSING, ULS_TCP_LAST_ACK, ULS_TCP_TIME_WAIT, ULS_TCP_STATE_COUNT
};

enum ctl_type {
	CTL_HELLO = 1,     /* open the lease; reply carries node facts and 3 fds */
	CTL_BIND,          /* reserve (proto, lport or 0); reply: the port */
	CTL_LISTEN,        /* TCP: deliver new connections to lport to this process */
	CTL_CONNECT,       /* TCP: (lport or 0, rip, rport); reply: lport; installs the tuple */
	CTL_ACCEPTED,      /* TCP, one-way: a connection accepted on a listener */
	CTL_RELEASE,       /* TCP, one-way: a connection's state is gone (rip, rport set) */
	CTL_UNBIND,        /* one-way: drop this process's hold on (proto, lport) */
	CTL_STATS,         /* ulsstat: counters and endpoints follow, then END */
	CTL_STAT_COUNTER,  /* reply record: name, value */
	CTL_STAT_ENDPOINT, /* reply record: proto, kind, lport, rip, rport, pid */
	CTL_END,           /* end of a STATS reply */
	CTL_ACCEPTING,     /* TCP, one-way: this process accepts on its listener at lport */
	CTL_HANDOFF,       /* TCP: this process gives the connection up to whoever claims it
				* with u.handoff.nonce; frames for it are held back meanwhile */
	CTL_CLAIM,         /* TCP: take over the connection handed off under u.handoff.nonce */
	CTL_CONNTAB,       /* the process asks for its connection table (netif/conntab.h);
				* the reply carries its memfd */
	CTL_STAT_PROC,     /* reply record: one process, then its STAT_CONN records */
	CTL_STAT_CONN,     /* reply record: one TCP connection of that process */
	CTL_ROUTER6,       /* the process asks for the node's default IPv6 router; the reply
				* has family AF_INET6 and the router's address in rip */
	CTL_TYPE_MAX
};

#define CTL_F_REUSEADDR 0x01u
#define CTL_F_REUSEPORT 0x02u
#define CTL_F_INHERIT   0x04u  /* a fork child joins its parent's hold on the port */
/* BIND, LISTEN, ACCEPTING, UNBIND of an AF_INET6 socket with IPV6_V6ONLY 1: the port in
 * IPv6 only. Without it an AF_INET6 socket holds the port in both families, as on Linux. */
#define CTL_F_V6ONLY    0x08u

/* Endpoint kinds in STAT_ENDPOINT records. */
enum ctl_kind { CTL_K_BOUND = 1, CTL_K_LISTEN, CTL_K_CONNECTED, CTL_K_TIMEWAIT };

struct ctl_hello {
	uint32_t addr;        /* node address, network order */
	uint32_t gateway;     /* network order, 0: none */
	uint32_t mtu;
	uint32_t lease_id;
	uint8_t prefix_len;
	uint8_t mac[6];
	uint8_t flags;        /* CTL_HELLO_F_* */
	uint8_t isn_secret[16];  /* RFC 6528's secret key, shared by the node's processes */
	/* Request with CTL_HELLO_F_RINGS: the process's two io_urings (receive, transmit),
	 * created with IORING_SETUP_R_DISABLED and nothing registered, by their descriptor
	 * numbers in the process. ulsd takes them with pidfd_getfd. */
	int32_t ring_fd[2];
	/* Reply: CTL_DP_DIRECT (the rings now read and write TAP queue `queue` as fixed
	 * file 0; no descriptors come with the reply) or CTL_DP_RELAY (3 descriptors). */
	uint8_t datapath;
	uint8_t queue;
	/* Reply (version 3): the node's IPv6 prefix length when the header's family is
	 * AF_INET6 and its address the node's global IPv6 address (the link-local one
	 * follows from mac, RFC 4291 §2.5.6); 0 and family 0 on a node without IPv6. */
	uint8_t prefix_len6;
	uint8_t pad;
	/* Reply: the node's interface as the host that runs ulsd names it (the TAP's name
	 * and index), which programs under ulsrun see as their interface (getifaddrs,
	 * if_nameindex, SIOCGIF*). A ulsd that predates it sends zeros. */
	uint32_t ifindex;
	char ifname[16];      /* IFNAMSIZ, NUL-terminated */
	/* Request with CTL_HELLO_F_WAKE (and CTL_HELLO_F_RINGS): the descriptor number of the
	 * process's wake-up eventfd, which ulsd registers as fixed file 1 of the receive
	 * ring, so that one io_uring_enter both submits the ring's reads and waits for a
	 * frame or a wake-up (netif/qring.c). The reply keeps CTL_HELLO_F_WAKE when it did. */
	int32_t wake_fd;
};

/* The node's rings carry offload words (netif/vnet.h): the process may send TCP segments
 * with a partial checksum and super-segments, and receives them. */
#define CTL_HELLO_F_OFFLOAD 0x01u
/* Request: ring_fd names two rings for the direct data path. */
#define CTL_HELLO_F_RINGS   0x02u
/* Request: wake_fd names an eventfd for the receive ring; reply: it is fixed file 1. */
#define CTL_HELLO_F_WAKE    0x04u
/* Reply: the node has a default IPv6 router (ulsd --gw6); the process asks for it with
 * CTL_ROUTER6 (HELLO's body has no room for a 16-octet address). */
#define CTL_HELLO_F_ROUTER6 0x08u
/* Request (with CTL_HELLO_F_RINGS): allow the receive ring a multishot read of the queue
 * into buffers the process provides (IORING_OP_READ_MULTISHOT, IOSQE_BUFFER_SELECT);
 * reply: allowed. A ulsd that predates it ignores it and replies without it. */
#define CTL_HELLO_F_MSHOT   0x10u
/* Reply (direct path): the kernel sheds SYN floods to the process's queue (synguard,
 * filter/datapath_syn.bpf.h); the process does not shed too (one shedder per path,
 * stack/synshed.c). A ulsd that predates it sends no flag, and the process sheds. */
#define CTL_HELLO_F_KSHED   0x20u
/* Request: send the process's connection table (as CTL_CONNTAB's reply would) with the
 * reply, saving a round trip at every process's start; reply: its memfd is the reply's
 * last descriptor. A ulsd that predates it replies without it, and the process asks with
 * CTL_CONNTAB as before. */
#define CTL_HELLO_F_CONNTAB 0x40u
/* Reply, with CTL_HELLO_F_OFFLOAD: checksum offload alone (ulsd --offload csum): the
 * node's TAP takes and delivers no super-segment, and the process sends none. A ulsd that
 * predates it sends no flag (it had no such mode). */
#define CTL_HELLO_F_CSUM_ONLY 0x80u
/* The most descriptors one reply carries: HELLO's relay rings and the table. */
#define CTL_MAX_FDS 4u

enum ctl_datapath { CTL_DP_DIRECT = 1, CTL_DP_RELAY = 2 };

struct ctl_counter {
	char name[48];
	uint64_t value;
};

/* A custody endpoint's state: what the process left its connection in (server/custody.h). */
enum ctl_custody { CTL_CUSTODY_DEAD = 1, CTL_CUSTODY_FIN_WAIT_2, CTL_CUSTODY_TIME_WAIT };

struct ctl_endpoint {
	uint32_t pid;
	uint8_t kind;
	uint8_t datapath;     /* enum ctl_datapath of the owner; 0: none (custody) */
	uint8_t custody;      /* CTL_K_TIMEWAIT: enum ctl_custody; else 0 (and from a ulsd
			       * before stop 40, whose padding this was) */
	uint8_t probes;       /* CTL_K_TIMEWAIT: the probes ulsd sent its peer (at most 255) */
};

/* STAT_PROC: a process on the node and what its connection table said. */
enum ctl_table {
	CTL_TABLE_NONE = 0,   /* the process has no table (an older library) */
	CTL_TABLE_OK,
	CTL_TABLE_TORN,       /* no consistent copy (conntab_torn) */
	CTL_TABLE_BAD,        /* a header out of range (conntab_bad_header) */
	CTL_TABLE_MAX
};

struct ctl_proc {
	uint32_t pid;
	uint8_t datapath;     /* enum ctl_datapath */
	uint8_t queue;        /* its TAP queue on the direct path */
	uint8_t table;        /* enum ctl_table */
	uint8_t pad;
	uint32_t connections; /* TCP connections the process has */
	uint32_t listed;      /* STAT_CONN records that follow */
	uint32_t refused;     /* entries refused as out of range (conntab_bad_entries) */
	uint32_t age_ms;      /* since the process last wrote its table; UINT32_MAX: never */
};

/* STAT_CONN: the message's lport, rip, rport name the connection (proto TCP). */
struct ctl_conn {
	uint32_t pid;
	uint8_t datapath;     /* enum ctl_datapath */
	uint8_t state;        /* enum uls_tcp_state (netif/conntab.h) */
	uint8_t snd_wscale, rcv_wscale;
	uint32_t send_queue, recv_queue;  /* bytes */
	uint32_t rtt_us, rttvar_us, rto_us;
	uint32_t cwnd, ssthresh;          /* bytes */
	uint32_t retransmits;
	uint32_t mss, snd_wnd, rcv_wnd;
	uint8_t flags;        /* ULS_CONNTAB_F_* */
	uint8_t pad[3];
	uint8_t lip[16];      /* the node's address of the connection's family (IPv4 as
			       * ::ffff:a.b.c.d) */
};

/* HANDOFF and CLAIM: the secret the giving process passed to the taker (stack/handoff.c). */
struct ctl_handoff {
	uint64_t nonce;       /* nonzero */
};

struct ctl_msg {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t seq;
	int32_t status;       /* replies: 0 or -errno */
	uint8_t proto;        /* IPPROTO_TCP or IPPROTO_UDP */
	uint8_t flags;        /* CTL_F_* */
	uint16_t lport;       /* host order */
	uint16_t rport;       /* host order */
	uint8_t family;       /* AF_INET or AF_INET6: the socket's family (0 where none) */
	uint8_t pad;
	/* The remote address, network order, 16 octets whatever the family: an IPv4
	 * address as its IPv4-mapped IPv6 address ::ffff:a.b.c.d (RFC 4291 §2.5.5.2), the
	 * form the filter keys (filter.h, struct flt_addr). HELLO's reply: the node's
	 * IPv6 address. */
	uint8_t rip[16];
	union {
		struct ctl_hello hello;
		struct ctl_counter counter;
		struct ctl_endpoint endpoint;
		struct ctl_handoff handoff;
		struct ctl_proc proc;
		struct ctl_conn conn;
		uint8_t raw[88];
	} u;
};

_Static_assert(sizeof(struct ctl_msg) == CTL_MSG_SIZE, "fixed-size control message");

/* Why a received message was refused (each has a counter in ulsd). ctl_check returns
 * the negated reason, as filter's parser returns -FLT_*. The reasons start above the
 * largest errno Linux returns (MAX_ERRNO, 4095), so -reason is never read as -errno. */
#define CTL_ERROR_BASE 4096
enum ctl_error {
	CTL_BAD_SIZE = CTL_ERROR_BASE + 1,   /* truncated or oversized */
	CTL_BAD_MAGIC,
	CTL_BAD_VERSION,
	CTL_BAD_TYPE,
	CTL_BAD_FIELD,      /* a field out of range for its type */
	CTL_BAD_FAMILY,     /* a family other than AF_INET/AF_INET6 where one is needed,
			     * or CTL_F_V6ONLY without AF_INET6 */
	CTL_BAD_ADDR,       /* an address that does not fit its family: an AF_INET one
			     * not v4-mapped or 0.0.0.0, an AF_INET6 one v4-mapped,
			     * unspecified or multicast */
	CTL_ERROR_END
};
/* Counters by reason: index reason - CTL_ERROR_BASE (0 unused). */
#define CTL_ERROR_SLOTS (CTL_ERROR_END - CTL_ERROR_BASE)

/* Check a received message of n bytes; on success copy it to out and return 0, else return
 * -CTL_BAD_* (out untouched). */
int ctl_check(const void *buf, ssize_t n, struct ctl_msg *out);
/* The counter name of a reason (CTL_BAD_*, or its negation). */
const char *ctl_error_name(int err);
void ctl_init(struct ctl_msg *m, enum ctl_type type, uint32_t seq);

/* ::ffff:0:0/96 (RFC 4291 §2.5.5.2). */
static inline bool ctl_addr_is_v4mapped(const uint8_t a[16])
{
	static const uint8_t pre[12] = { [10] = 0xff, [11] = 0xff };

	return memcmp(a, pre, 12) == 0;
}
/* An IPv4 address (network order) in the 16-octet form, and back. */
static inline void ctl_addr_set4(uint8_t a[16], uint32_t ip)
{
	memset(a, 0, 10);
	a[10] = a[11] = 0xff;
	memcpy(a + 12, &ip, 4);
}
static inline uint32_t ctl_addr_v4(const uint8_t a[16])
{
	uint32_t ip;

	memcpy(&ip, a + 12, 4);
	return ip;
}
/* The message's remote as an IPv4 peer: family AF_INET and rip ::ffff:ip. */
static inline void ctl_set_rip4(struct ctl_msg *m, uint32_t ip)
{
	m->family = AF_INET;
	ctl_addr_set4(m->rip, ip);
}
static inline void ctl_set_rip6(struct ctl_msg *m, const uint8_t a[16])
{
	m->family = AF_INET6;
	memcpy(m->rip, a, 16);
}

#endif
