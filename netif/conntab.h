/* The connection table a process publishes for ulsstat (docs/architecture.md, "What
 * ulsstat sees of a process's connections").
 *
 * Each process's TCP state lives in its own lwIP, so ulsd cannot see its connections'
 * queues, RTT or congestion window. Instead of asking the process (which would put a
 * request into the stack's path), the process's stack writes a small table into a
 * shared-memory page set that ulsd created and mapped itself (a sealed memfd, handed over
 * with CTL_CONNTAB), every ULS_CONNTAB_PERIOD_MS while it has connections, under a
 * sequence lock. ulsd copies it when ulsstat asks (CTL_STATS) and never waits for the
 * process: the data path never stops for a query, and a process that writes nonsense only
 * costs ulsd a counted drop.
 *
 * Layout (native byte order, both ends on one host; addresses in network order):
 *   header (64 bytes), then `capacity` entries of 96 bytes. Version 2 (issue 17): entries
 *   carry 16-octet addresses and the connection's family; version 1's were IPv4 only.
 *   Version 3: the last 8 octets carry SND.NXT and RCV.NXT (ulsd answers the peer's FIN
 *   for a connection its process left in FIN-WAIT-2, server/custody.h).
 *   ulsd writes the header's magic, version, entry size and capacity and refuses (and
 *   counts) a table whose process changed them; the process refuses a table whose header
 *   it does not know (an older or newer ulsd), and then publishes nothing.
 * The writer makes seq odd, writes the entries and count, then makes seq even again; a
 * reader that sees an odd seq, or a different seq after its copy, copies again (a few
 * times, then gives up and counts it).
 */
#ifndef ULS_NETIF_CONNTAB_H
#define ULS_NETIF_CONNTAB_H

#include "netif/ctl/ctl.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ULS_CONNTAB_MAGIC     0x554c5354u  /* "ULST" */
#define ULS_CONNTAB_VERSION   3u
#define ULS_CONNTAB_CAPACITY  1024u        /* connections listed per process; more are counted */
#define ULS_CONNTAB_PERIOD_MS 250u         /* how often the stack rewrites its table */

struct uls_conntab_hdr {
	uint32_t magic;         /* written by ulsd */
	uint16_t version;       /* ulsd */
	uint16_t entry_size;    /* ulsd */
	uint32_t capacity;      /* ulsd: entries that follow the header */
	uint32_t seq;           /* the process: odd while it writes */
	uint32_t count;         /* the process: entries written, <= capacity */
	uint32_t total;         /* the process: its TCP connections (> count: table full) */
	uint64_t published_ns;  /* the process: CLOCK_MONOTONIC of the last write */
	uint8_t pad[32];
};

/* One connection. Byte figures are bytes; times microseconds. */
struct uls_conntab_ent {
	/* Network order, 16 octets whatever the family: an IPv4 address as its IPv4-mapped
	 * IPv6 address ::ffff:a.b.c.d (RFC 4291 §2.5.5.2), as the control protocol carries
	 * them (netif/ctl/ctl.h). A dual-stack socket's IPv4 connection is AF_INET. */
	uint8_t rip[16];
	uint8_t lip[16];        /* the node's address the connection uses */
	uint16_t lport, rport;  /* host order */
	uint8_t family;         /* AF_INET or AF_INET6: the connection's addresses */
	uint8_t pad0[3];
	uint8_t state;          /* enum uls_tcp_state */
	uint8_t snd_wscale;     /* the peer's window shift (RFC 7323 §2.3); 0: none */
	uint8_t rcv_wscale;     /* ours */
	uint8_t flags;          /* ULS_CONNTAB_F_* */
	uint32_t send_queue;    /* written by the application, not yet acknowledged */
	uint32_t recv_queue;    /* received, not yet read by the application */
	uint32_t rtt_us;        /* RFC 6298 SRTT; 0: no sample yet */
	uint32_t rttvar_us;     /* RFC 6298 RTTVAR */
	uint32_t rto_us;
	uint32_t cwnd;          /* bytes */
	uint32_t ssthresh;      /* bytes */
	uint32_t retransmits;   /* segments (ranges) sent again, and retransmission timeouts */
	uint32_t mss;
	uint32_t snd_wnd;       /* the peer's advertised window, bytes */
	uint32_t rcv_wnd;       /* ours, bytes */
	uint32_t snd_nxt;       /* RFC 9293 §3.3.1 SND.NXT: past our FIN once it is sent */
	uint32_t rcv_nxt;       /* RCV.NXT: past the peer's FIN once it arrived */
};

#define ULS_CONNTAB_F_TIMESTAMPS 0x01u
#define ULS_CONNTAB_F_SACK       0x02u
#define ULS_CONNTAB_F_WSCALE     0x04u

_Static_assert(sizeof(struct uls_conntab_hdr) == 64, "conntab header size");
_Static_assert(sizeof(struct uls_conntab_ent) == 96, "conntab entry size");

static inline size_t uls_conntab_size(uint32_t capacity)
{
	return sizeof(struct uls_conntab_hdr) + (size_t)capacity * sizeof(struct uls_conntab_ent);
}

/* ulsd: a sealed memfd of the table's size with its header written, mapped shared at
 * *map. Returns the descriptor or -errno. */
int uls_conntab_create(uint32_t capacity, void **map);

/* The process: check a table ulsd handed over (magic, version, sizes) before writing to
 * it; 0 or -errno. */
int uls_conntab_check_header(const void *map, size_t len);

/* The process: the seqlock's writer side. */
void uls_conntab_write_begin(struct uls_conntab_hdr *h);
void uls_conntab_write_end(struct uls_conntab_hdr *h, uint32_t count, uint32_t total,
			   uint64_t now_ns);

/* Why a reader refused (part of) a table: each is a counter in ulsd. */
enum uls_conntab_refusal {
	ULS_CONNTAB_OK = 0,
	ULS_CONNTAB_TORN,       /* the writer was always mid-write: no consistent copy */
	ULS_CONNTAB_BAD_HEADER, /* count beyond capacity, capacity changed */
	ULS_CONNTAB_BAD_VERSION,/* magic, version or entry size not what ulsd wrote */
};

/* ulsd: copy a consistent snapshot of the table (capacity entries mapped at map) into
 * out (room for capacity entries). Returns an enum uls_conntab_refusal; on OK *count,
 * *total and *published_ns are set. Entries are not validated here (uls_conntab_ent_ok). */
int uls_conntab_snapshot(const void *map, uint32_t capacity, struct uls_conntab_ent *out,
			 uint32_t *count, uint32_t *total, uint64_t *published_ns);

/* One entry's fields in range: a state, nonzero ports, a family and both addresses of
 * it (AF_INET: v4-mapped, not 0.0.0.0; AF_INET6: not v4-mapped, ::, or multicast). Whether
 * the local address is the node's is the reader's to check (it knows the node). */
bool uls_conntab_ent_ok(const struct uls_conntab_ent *e);

/* "ESTABLISHED", "SYN-SENT", ... (RFC 9293's spelling); "UNKNOWN" out of range. */
const char *uls_tcp_state_name(unsigned state);

#endif
