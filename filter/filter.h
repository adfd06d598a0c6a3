/* The packet-filter demultiplexer: which process owns a received frame, and may a process
 * send this frame.
 *
 * Read first: RFC 894 (IPv4 over Ethernet), RFC 826 (ARP), RFC 791 §3.1 and §3.2 (IPv4
 * header, fragmentation), RFC 1858 (fragment attacks on filters), RFC 9293 §3.1 (TCP
 * header), RFC 768 (UDP), RFC 792 and RFC 1122 §3.2.2 (ICMP).
 *
 * The filter is a library on byte arrays: no I/O, no threads, no lwIP. ulsd parses every
 * frame it reads from the TAP with flt_parse(), asks flt_lookup_rx() which process gets it,
 * and checks every frame a process hands it with flt_check_tx() before it reaches the wire.
 * The connection server programs the rule table (flt_add_*, flt_del_*) on the control path.
 *
 * Concurrency: none. A table is used by one thread at a time; the caller serialises.
 * Lookups count into the table's statistics, so even a const table must not be looked up
 * from two threads at once.
 */
#ifndef ULS_FILTER_FILTER_H
#define ULS_FILTER_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Protocol constants (WIRE_ETHERTYPE_*, WIRE_IPPROTO_*, WIRE_TCP_* flags) are the wire
 * module's, as are the header views flt_parse() reads frames through. */
#include "netif/wire/proto.h"

/* Why a frame was dropped (flt_parse, receive side) or refused (flt_check_tx, transmit
 * side). Functions return the negated value; 0 is never a reason. The reasons start above
 * every errno value (and above the control protocol's, 4097 on, and the virtio-net
 * header's, 4160 on), so that a negative return says which kind of failure it is.
 * Every reason has a counter in struct flt_stats, at index FLT_REASON_INDEX(r). */
#define FLT_REASON_BASE 4224
enum flt_reason {
	FLT_REASON_NONE = FLT_REASON_BASE,
	/* flt_parse */
	FLT_DROP_RUNT,           /* shorter than an Ethernet header */
	FLT_DROP_ETHERTYPE,      /* neither IPv4, IPv6 nor ARP (VLAN tags, ...) */
	FLT_DROP_ARP,            /* ARP not for Ethernet/IPv4, or too short */
	FLT_DROP_IPV4_HEADER,    /* bad version, IHL, total length, or options past the end */
	FLT_DROP_IPV4_CHECKSUM,  /* IPv4 header checksum wrong */
	FLT_DROP_FRAGMENT,       /* fragment past 65535 octets or an RFC 1858 overlap */
	FLT_DROP_TCP_HEADER,     /* data offset < 5 or past the datagram */
	FLT_DROP_UDP_HEADER,     /* shorter than 8 octets, or length field inconsistent */
	FLT_DROP_ICMP_HEADER,    /* shorter than the 8-octet ICMP header */
	FLT_DROP_IPV6_HEADER,    /* bad version, or Payload Length past the frame */
	FLT_DROP_IPV6_EXT,       /* an extension header past the payload, Hop-by-Hop not
				  * first, or more than WIRE_IPV6_EXT_MAX of them */
	FLT_DROP_IPV4_OPTIONS,   /* an IPv4 option of length 0 or 1, or past the header */
	/* flt_check_tx */
	FLT_DENY_SRC_MAC,        /* Ethernet source is not the node's MAC */
	FLT_DENY_SRC_IP,         /* IPv4 source is not the node's address */
	FLT_DENY_ARP,            /* ARP other than request/reply, or sender not the node */
	FLT_DENY_PROTO,          /* an IP protocol processes may not send */
	FLT_DENY_PORT,           /* TCP/UDP source port (or tuple) not the sender's */
	FLT_DENY_SHARED_PEER,    /* shared TCP port: this 4-tuple belongs to another member */
	FLT_DENY_ICMP,           /* ICMP type not allowed, or an error about another's port */
	FLT_REASON_END
};
#define FLT_REASON_COUNT (FLT_REASON_END - FLT_REASON_BASE)
/* A reason's counter slot; FLT_REASON_COUNT or more for a value that is no reason. */
#define FLT_REASON_INDEX(r) ((unsigned)(r) - (unsigned)FLT_REASON_BASE)

/* A short stable name for counters and logs ("drop_runt", "deny_src_ip", ...). */
const char *flt_reason_name(enum flt_reason r);

/* What flt_parse() found. Addresses are in network byte order, as on the wire; ports,
 * lengths and the other numeric fields in host order. Only the parts the ethertype and
 * protocol select are meaningful; the rest are zero. */
struct flt_pkt {
	uint8_t dst_mac[WIRE_ETH_ALEN];
	uint8_t src_mac[WIRE_ETH_ALEN];
	uint16_t ethertype;

	struct {
		uint16_t op;                 /* 1 request, 2 reply (RFC 826) */
		uint8_t sha[WIRE_ETH_ALEN];   /* sender hardware address */
		uint8_t tha[WIRE_ETH_ALEN];   /* target hardware address */
		uint32_t spa, tpa;           /* sender and target protocol (IPv4) address */
	} arp;

	struct {
		uint32_t src, dst;
		uint8_t proto;
		uint8_t hlen;                /* header length in octets (IHL * 4) */
		uint16_t total;              /* Total Length: Ethernet padding is not in it */
		uint16_t id;
		bool df, mf;                 /* don't fragment, more fragments */
		uint16_t frag_off;           /* fragment offset in octets (field * 8) */
		bool fragment;               /* mf || frag_off: part of a fragmented datagram */
	} ip;

	/* IPv6 (RFC 8200): the fixed header, and the upper layer found after the extension
	 * headers (wire_ipv6_upper). proto is that upper layer's Next Header value, which
	 * may be one the filter does not know (it then has no ports and goes to the
	 * server). A first fragment's upper-layer header is parsed for its ports, as an
	 * IPv4 first fragment's is; later fragments are not parsed past the Fragment
	 * header. */
	struct {
		uint8_t src[16], dst[16];
		uint8_t proto;
		uint8_t hlim;
		uint16_t plen;               /* Payload Length */
		uint8_t nexthdrs;            /* extension headers walked */
		bool fragment;               /* a Fragment header was among them */
		uint16_t frag_off;           /* its offset in octets */
		bool mf;                     /* its M flag: more fragments follow */
		uint32_t frag_id;            /* its Identification */
		uint16_t frag_data_off;      /* the fragment's data, from the IPv6 header */
	} ip6;

	/* Ports: true for TCP and UDP unfragmented datagrams and first fragments. */
	bool has_ports;
	uint16_t sport, dport;

	struct {
		uint32_t seq, ack;
		uint8_t flags;               /* FLT_TCP_* */
		uint8_t doff;                /* header length in octets (data offset * 4) */
		uint16_t payload_len;        /* TCP data octets in this frame */
	} tcp;

	struct {
		uint16_t len;                /* the UDP Length field (header + data) */
	} udp;

	/* ICMP, or ICMPv6 for an IPv6 packet (RFC 4443: errors are types 0..127). */
	struct {
		uint8_t type, code;
		/* A Neighbor Solicitation's or Advertisement's link-layer address option
		 * (RFC 4861 §4.6.1), when it has one. */
		bool has_lladdr;
		uint8_t lladdr[WIRE_ETH_ALEN];
		/* For errors (destination unreachable, time exceeded, parameter problem,
		 * source quench, RFC 792): the datagram they quote, when its IPv4 header
		 * and first 8 octets are there (RFC 1122 §3.2.2). Ports are set for a
		 * quoted TCP or UDP first fragment. */
		bool has_inner;
		struct {
			uint32_t src, dst;
			uint8_t proto;
			bool has_ports;
			uint16_t sport, dport;
			/* An ICMPv6 error's quoted IPv6 addresses (src, dst above stay 0). */
			uint8_t src6[16], dst6[16];
		} inner;
	} icmp;

	/* Offsets into the frame: network header, transport header, transport payload.
	 * For a non-first fragment l4_off is where the fragment's data starts. */
	uint16_t l3_off, l4_off, payload_off;
};

/* Parse an Ethernet frame. Returns 0 and fills *out, or returns -FLT_DROP_* and leaves
 * *out untouched. Never reads outside frame[0, len). Checksums are left to the stacks
 * except the IPv4 header checksum, which is checked here because every decision the
 * filter makes rests on that header (see parse.c). */
int flt_parse(const uint8_t *frame, size_t len, struct flt_pkt *out);

/* ---- The rule table ---------------------------------------------------------------- */

/* A remote address of either family, as the table keys it: 16 octets, an IPv4 address as
 * its IPv4-mapped IPv6 address ::ffff:a.b.c.d (RFC 4291 §2.5.5.2). One table holds both
 * families, so a port is one port whichever family uses it (below). */
struct flt_addr {
	uint8_t b[16];
};
static inline struct flt_addr flt_addr_v4(uint32_t ip)   /* ip in network order */
{
	struct flt_addr a = { .b = { [10] = 0xff, [11] = 0xff } };

	memcpy(a.b + 12, &ip, 4);
	return a;
}
static inline struct flt_addr flt_addr_v6(const uint8_t b[16])
{
	struct flt_addr a;

	memcpy(a.b, b, 16);
	return a;
}
static inline bool flt_addr_is_v4(const struct flt_addr *a)
{
	static const uint8_t mapped[12] = { [10] = 0xff, [11] = 0xff };

	return memcmp(a->b, mapped, 12) == 0;
}
static inline uint32_t flt_addr_v4_of(const struct flt_addr *a)
{
	uint32_t ip;

	memcpy(&ip, a->b + 12, 4);
	return ip;
}

/* Which families a listening rule takes (flt_add_listen_fam). Linux's rules, which the
 * table keeps: an AF_INET listener takes IPv4; an AF_INET6 one with IPV6_V6ONLY takes
 * IPv6; a dual-stack AF_INET6 one (V6ONLY 0) takes both, and so holds the port in both
 * families: it cannot share the port with an IPv4-only or an IPv6-only listener that did
 * not ask to share, while an IPv4-only and an IPv6-only listener can hold the same port. */
#define FLT_FAM_V4 0x1
#define FLT_FAM_V6 0x2
#define FLT_FAM_ANY (FLT_FAM_V4 | FLT_FAM_V6)

typedef uint32_t flt_owner_t;
#define FLT_NO_OWNER UINT32_MAX   /* "deliver to the server"; never a valid owner */

enum flt_kind {
	FLT_RULE_CONNECTED = 1,  /* (proto, local port, remote ip, remote port) -> one owner */
	FLT_RULE_LISTEN,         /* (proto, local port) -> a group of owners */
};

/* Most owners in one listening group (processes sharing one port). Lookup cost grows
 * with the size of the group, never with the number of rules. */
#define FLT_GROUP_MAX 256

struct flt_table;

/* SipHash-2-4 of two 64-bit words under the key (k0, k1): the keyed pseudorandom function
 * behind the table's hash and group picks, and ulsd's port selection (RFC 6056 §3.3.3). */
uint64_t flt_siphash(uint64_t k0, uint64_t k1, uint64_t m0, uint64_t m1);

/* NULL on allocation failure. The hash seed comes from getrandom(2). */
struct flt_table *flt_table_new(void);
void flt_table_free(struct flt_table *t);

/* Replace the random hash seed (tests use it for reproducible group picks). Rehashes the
 * table: 0, or -ENOMEM with the table unchanged. */
int flt_table_set_seed(struct flt_table *t, uint64_t seed);

/* proto is WIRE_IPPROTO_TCP or WIRE_IPPROTO_UDP; ports are nonzero; owner is not FLT_NO_OWNER;
 * rip is the remote address in network order, nonzero. Otherwise -EINVAL.
 * -EEXIST if the exact tuple already has a rule (of any owner), -ENOMEM. */
int flt_add_connected(struct flt_table *t, uint8_t proto, uint16_t lport, uint32_t rip,
		      uint16_t rport, flt_owner_t owner);
/* The same for a remote address of either family (an IPv4 one v4-mapped). The IPv4
 * functions are these with flt_addr_v4(rip). */
int flt_add_connected_addr(struct flt_table *t, uint8_t proto, uint16_t lport,
			   const struct flt_addr *rip, uint16_t rport, flt_owner_t owner);
int flt_del_connected_addr(struct flt_table *t, uint8_t proto, uint16_t lport,
			   const struct flt_addr *rip, uint16_t rport, flt_owner_t owner);
/* -ENOENT if there is no such rule, -EPERM if another owner holds it. */
int flt_del_connected(struct flt_table *t, uint8_t proto, uint16_t lport, uint32_t rip,
		      uint16_t rport, flt_owner_t owner);

/* Give the connected rule of the tuple, held by from, to another owner (a connection that
 * moves between processes). -ENOENT if there is no such rule, -EPERM if from does not hold
 * it, -EINVAL if to is FLT_NO_OWNER. */
int flt_move_connected(struct flt_table *t, uint8_t proto, uint16_t lport, uint32_t rip,
		       uint16_t rport, flt_owner_t from, flt_owner_t to);
int flt_move_connected_addr(struct flt_table *t, uint8_t proto, uint16_t lport,
			    const struct flt_addr *rip, uint16_t rport, flt_owner_t from,
			    flt_owner_t to);

/* A listening TCP port or a bound UDP port. shared: the owner agrees to share the port
 * (SO_REUSEPORT, or a listener inherited across fork). -EEXIST if owner is already in
 * the group, -EADDRINUSE if another owner holds the port and either side is not shared,
 * -ENOSPC if the group already has FLT_GROUP_MAX owners, -EINVAL, -ENOMEM. */
int flt_add_listen(struct flt_table *t, uint8_t proto, uint16_t lport, flt_owner_t owner,
		   bool shared);
/* A process forked from a member joins the group of (proto, lport) whether or not it is
 * shared (it holds the same socket); with no group yet, it makes one. -EEXIST, -ENOSPC,
 * -EINVAL, -ENOMEM as above. */
int flt_join_listen(struct flt_table *t, uint8_t proto, uint16_t lport, flt_owner_t owner);
/* owner accepts connections on (proto, lport): the group's new connections go only to
 * such members once there is one. -ENOENT if owner is not a member, -ENOMEM. */
int flt_set_accepting(struct flt_table *t, uint8_t proto, uint16_t lport, flt_owner_t owner);
/* -ENOENT if owner is not in the group of (proto, lport). */
int flt_del_listen(struct flt_table *t, uint8_t proto, uint16_t lport, flt_owner_t owner);
/* The same for the families fams (FLT_FAM_*): one group per family, and an owner taking
 * both families is a member of both. flt_add_listen_fam changes nothing unless every
 * family takes the owner (the same errors as flt_add_listen); the others apply to each
 * family in fams and fail with the first family's error. flt_add_listen and the rest are
 * these with FLT_FAM_V4. */
int flt_add_listen_fam(struct flt_table *t, uint8_t proto, uint16_t lport, unsigned fams,
		       flt_owner_t owner, bool shared);
int flt_set_accepting_fam(struct flt_table *t, uint8_t proto, uint16_t lport, unsigned fams,
			  flt_owner_t owner);
int flt_del_listen_fam(struct flt_table *t, uint8_t proto, uint16_t lport, unsigned fams,
		       flt_owner_t owner);
/* flt_join_listen for each family in fams (the first error; the others still joined). */
int flt_join_listen_fam(struct flt_table *t, uint8_t proto, uint16_t lport, unsigned fams,
			flt_owner_t owner);

/* Remove every rule of owner (its lease ended); returns how many were removed, counting
 * each group membership as one. Walks the whole table: control path only. */
size_t flt_del_owner(struct flt_table *t, flt_owner_t owner);

/* Which owner gets this received frame, or FLT_NO_OWNER for the server. Order: the
 * connected rule of the exact tuple (local = the packet's destination), then the
 * listening group of (proto, dport), one member picked by a seeded hash of the 4-tuple so
 * that every segment of one connection reaches the same member. ARP, fragments (the server
 * reassembles), ICMP other than errors, and unmatched packets go to the server. An ICMP
 * error goes to the owner of the endpoint whose datagram it quotes. The destination
 * address is not checked: the caller has already decided the frame is for the node. */
flt_owner_t flt_lookup_rx(const struct flt_table *t, const struct flt_pkt *p);
/* An IPv6 frame is looked up the same way, in the FLT_FAM_V6 groups and with 16-octet
 * remote addresses; a fragment, or a packet whose upper layer the filter does not know,
 * goes to the server. */

/* May owner send this frame from a node with address node_ip (network order) and MAC
 * node_mac? 0, or -FLT_DENY_* (counted). See demux.c for the exact policy. */
int flt_check_tx(const struct flt_table *t, const struct flt_pkt *p, flt_owner_t owner,
		 uint32_t node_ip, const uint8_t node_mac[WIRE_ETH_ALEN]);

/* The node's IPv6 addresses (global and link-local), the only ones processes' IPv6
 * frames may come from; until it is called flt_check_tx refuses every IPv6 frame
 * (deny_proto). An IPv6 frame is checked as an IPv4 one is (demux.c): its source, then
 * its tuple against the sender's rules; the ICMPv6 a process may send are echo, neighbour
 * solicitation (lwIP resolving its peers, RFC 4861 §7.2.2) and destination unreachable
 * about one of its own endpoints. */
void flt_table_set_node_ip6(struct flt_table *t, const uint8_t global[16],
			    const uint8_t link_local[16]);

/* ---- Mirrors of the table ------------------------------------------------------------- */

/* Called after every change of an IPv4 rule (a connected rule with a v4-mapped remote, a
 * listening group of FLT_FAM_V4), so that a copy of the table (the direct data path's
 * BPF maps, server/bpf.c; IPv6 rules: flt_table_set_observer6) stays equal to it. FLT_RULE_CONNECTED: the tuple's owner now, or
 * FLT_NO_OWNER when the rule is gone. FLT_RULE_LISTEN: the group of (proto, lport) changed;
 * read it with flt_group_get (rip, rport and owner are 0). fn must not change the table. */
typedef void flt_change_fn(void *arg, enum flt_kind kind, uint8_t proto, uint16_t lport,
			   uint32_t rip, uint16_t rport, flt_owner_t owner);
void flt_table_set_observer(struct flt_table *t, flt_change_fn *fn, void *arg);

/* The same for IPv6 rules (a connected rule whose remote is not v4-mapped, a listening
 * group of FLT_FAM_V6), for the direct data path's IPv6 maps: rip is the remote address
 * (NULL for FLT_RULE_LISTEN, whose group flt_group_get_fam reads with FLT_FAM_V6). */
typedef void flt_change6_fn(void *arg, enum flt_kind kind, uint8_t proto, uint16_t lport,
			    const struct flt_addr *rip, uint16_t rport, flt_owner_t owner);
void flt_table_set_observer6(struct flt_table *t, flt_change6_fn *fn, void *arg);

/* The key of the table's hash and group picks, for a copy that picks as it does. */
void flt_table_key(const struct flt_table *t, uint64_t *k0, uint64_t *k1);

/* The IPv4 group of (proto, lport): every member into all[] (*n_all), and the members new
 * connections are picked from, in flt_lookup_rx's order, into pick[] (*n_pick); both
 * arrays hold FLT_GROUP_MAX. -ENOENT (counts 0) when there is no group. */
int flt_group_get(const struct flt_table *t, uint8_t proto, uint16_t lport, flt_owner_t *all,
		  uint32_t *n_all, flt_owner_t *pick, uint32_t *n_pick);
/* The same for the group of one family, fam FLT_FAM_V4 or FLT_FAM_V6 (-EINVAL else). */
int flt_group_get_fam(const struct flt_table *t, uint8_t proto, uint16_t lport, unsigned fam,
		      flt_owner_t *all, uint32_t *n_all, flt_owner_t *pick, uint32_t *n_pick);

/* ---- Introspection ------------------------------------------------------------------ */

struct flt_stats {
	uint64_t rx_drop[FLT_REASON_COUNT];  /* flt_count_rx_drop() */
	uint64_t tx_deny[FLT_REASON_COUNT];  /* flt_check_tx(), flt_count_tx_drop() */
	uint64_t rx_lookups;
	uint64_t rx_connected;      /* lookups answered by a connected rule */
	uint64_t rx_listen;         /* ... by a listening group */
	uint64_t rx_icmp_error;     /* ... of those, ICMP errors delivered to an owner */
	uint64_t rx_fragment;       /* fragments sent to the server for reassembly */
	uint64_t rx_no_owner;       /* everything else sent to the server */
	uint64_t tx_checks;
	uint64_t tx_allowed;
	uint64_t rules_connected;   /* current number of connected rules */
	uint64_t rules_listen;      /* current number of group memberships */
};

/* flt_parse() is pure; the caller reports its failures here so they show in the stats:
 * flt_count_rx_drop(t, -ret). Out-of-range reasons are ignored. */
void flt_count_rx_drop(const struct flt_table *t, enum flt_reason r);
void flt_count_tx_drop(const struct flt_table *t, enum flt_reason r);

void flt_table_stats(const struct flt_table *t, struct flt_stats *out);

/* One rule as flt_foreach() shows it. A group is shown as one rule per member. */
struct flt_rule {
	enum flt_kind kind;
	uint8_t proto;
	uint16_t lport;
	uint32_t rip;            /* network order; 0 for FLT_RULE_LISTEN and IPv6 rules */
	struct flt_addr rip6;    /* the remote address of either family (v4-mapped) */
	unsigned fam;            /* FLT_FAM_V4 or FLT_FAM_V6: the rule's family */
	uint16_t rport;          /* 0 for FLT_RULE_LISTEN */
	flt_owner_t owner;
	bool shared;             /* FLT_RULE_LISTEN: the group is shared */
};

/* Call fn for every rule, in no particular order, until it returns nonzero; returns that
 * value, or 0. fn must not change the table. */
typedef int (*flt_visit_fn)(const struct flt_rule *rule, void *arg);
int flt_foreach(const struct flt_table *t, flt_visit_fn fn, void *arg);

#endif
