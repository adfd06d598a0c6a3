/* The state of a connection as one process hands it to another (handoff.c): its layout and
 * its check, apart from the system calls that move it, so that a test and a fuzz target
 * can reach the check (tests/unit/test_hoffstate.c, tests/fuzz/fuzz_hoff.c).
 *
 * The taker reads it from a sealed memfd another process wrote: input it did not make. */
#ifndef ULS_STACK_HOFFSTATE_H
#define ULS_STACK_HOFFSTATE_H

#include <stddef.h>
#include <stdint.h>

#define STK_HOFF_MAGIC   0x554c5348u  /* "ULSH" */
/* 2: 16-octet addresses and the families (issue 17); 3: the receive window's cap (SO_RCVBUF,
 * patch 0137); 4: the user timeout (TCP_USER_TIMEOUT, patch 0138), where 3 had padding;
 * 5: the send buffer's cap (SO_SNDBUF), 8 octets more */
#define STK_HOFF_VERSION 5u
#define STK_HOFF_MAX     (64u << 20) /* no state is larger: two 4 MiB buffers and a header */

/* The connection, field by field: only values, nothing that points anywhere, so that it
 * can cross exec. The state and flag values are lwIP's own: giver and taker run the same
 * libuls (the same LD_PRELOAD library, or the same program after fork). */
struct stk_hoff_state {
	uint32_t magic, version;
	uint64_t nonce;
	/* Network order, 16 octets whatever the family: an IPv4 address as its IPv4-mapped
	 * IPv6 address ::ffff:a.b.c.d (RFC 4291 §2.5.5.2), as the control protocol's. */
	uint8_t local_ip[16], remote_ip[16];
	uint16_t local_port, remote_port;
	uint8_t family;                   /* the connection's: AF_INET or AF_INET6 */
	uint8_t sock_family;              /* the socket's: AF_INET, or AF_INET6 (whose IPv4
	                                   * connection is AF_INET: a dual-stack socket's) */
	uint8_t v6only;                   /* an AF_INET6 socket's IPV6_V6ONLY: 0 or 1 */
	uint8_t pad1;
	uint8_t state;                    /* ESTABLISHED or CLOSE_WAIT */
	uint8_t prio, so_options, tos, ttl;
	uint8_t snd_scale, rcv_scale;
	uint8_t in_recovery;              /* TF_INFR: fast recovery */
	uint32_t flags;                   /* TF_NODELAY, TF_WND_SCALE, TF_TIMESTAMP, TF_SACK */
	uint32_t rcv_nxt, rcv_wnd, rcv_ann_wnd, rcv_ann_right_edge;
	uint32_t lastack, snd_nxt, snd_wl1, snd_wl2, snd_lbb, snd_wnd, snd_wnd_max;
	uint32_t cwnd, ssthresh;
	uint32_t ts_recent, ts_lastacksent;
	uint32_t keep_idle, keep_intvl, keep_cnt;
	uint16_t mss;
	int16_t sa, sv, rto;
	/* Socket-level state. */
	uint8_t rx_eof, cork;
	uint8_t pad2[2];
	/* The receive window's cap (pcb->rcv_wnd_cap; 0: TCP_WND). Any value is safe: the
	 * taker holds it within STK_RCVBUF_MIN..TCP_WND (handoff.c, restore). */
	uint32_t rcv_wnd_cap;
	/* Then rx_len bytes the application had not read, and tx_len bytes from SND.UNA. */
	uint32_t rx_len, tx_len;
	/* TCP_USER_TIMEOUT in milliseconds (pcb->user_timeout; 0: the retransmission counts).
	 * Any value is safe: the taker holds it to INT_MAX, what setsockopt could have set. */
	uint32_t user_timeout;
	/* SO_SNDBUF's bound on unacknowledged octets (0: TCP_SND_BUF); the taker holds it
	 * within STK_SNDBUF_MIN..TCP_SND_BUF (stk__snd_buf_cap). */
	uint32_t snd_buf_cap;
	uint32_t pad3;                    /* the size a multiple of 8 without hidden padding */
};
/* The layout is the one contract between giver and taker: version 5's. */
_Static_assert(sizeof(struct stk_hoff_state) == 176, "stk_hoff_state: version 5 is 176 octets");
_Static_assert(offsetof(struct stk_hoff_state, rcv_wnd_cap) == 152,
	       "stk_hoff_state: version 5's window cap at 152");
_Static_assert(offsetof(struct stk_hoff_state, user_timeout) == 164,
	       "stk_hoff_state: version 5's user timeout at 164");

/* Why a state was refused (returned negated). */
enum stk_hoff_reason {
	STK_HOFF_OK,
	STK_HOFF_DROP_SHORT,        /* smaller than the header */
	STK_HOFF_DROP_LONG,         /* larger than STK_HOFF_MAX */
	STK_HOFF_DROP_MAGIC,        /* not a handoff state, or another layout */
	STK_HOFF_DROP_NONCE,        /* zero: never given */
	STK_HOFF_DROP_STATE,        /* neither ESTABLISHED nor CLOSE_WAIT */
	STK_HOFF_DROP_TUPLE,        /* a port or the MSS is zero */
	STK_HOFF_DROP_LENGTH,       /* header and data lengths do not add up to the size */
	STK_HOFF_DROP_SEND_QUEUE,   /* tx_len is not SND.LBB - SND.UNA, over TCP_SND_BUF, or
	                        * SND.NXT lies outside it */
	STK_HOFF_DROP_SCALE,        /* a window scale over 14 (RFC 7323 §2.3) */
	STK_HOFF_DROP_FAMILY,       /* a family other than AF_INET or AF_INET6, an IPv6
	                             * connection on an AF_INET socket, an IPv4 one on an
	                             * IPV6_V6ONLY socket, V6ONLY on an AF_INET socket */
	STK_HOFF_DROP_ADDRESS,      /* an address not of the family (IPv4 not v4-mapped, IPv6
	                             * v4-mapped), unspecified or multicast */
	STK_HOFF_REASON_MAX
};

/* Check the size octets at buf (any alignment) and copy the header to *h: 0, or
 * -enum stk_hoff_reason. The rx_len and tx_len octets of data follow the header in buf. */
int stk__hoff_parse(const void *buf, size_t size, struct stk_hoff_state *h);
const char *stk__hoff_reason_name(int reason);

#endif
