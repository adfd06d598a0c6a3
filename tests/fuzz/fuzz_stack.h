/* What fuzz_stack.c (the harness: the device, the application, the input's loop) shares
 * with fuzz_stack_peer.c (the peer: the frames it builds and the records that send them).
 * Both are compiled into each of the three targets with the same FUZZ_OFFLOAD and
 * FUZZ_IPV6. */
#ifndef ULS_TESTS_FUZZ_FUZZ_STACK_H
#define ULS_TESTS_FUZZ_FUZZ_STACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lwip/tcp.h"
#include "netif/dev.h"
#include "tests/fuzz/fuzz_input.h"

#ifndef FUZZ_OFFLOAD
#define FUZZ_OFFLOAD 0
#endif
#ifndef FUZZ_IPV6
#define FUZZ_IPV6 0
#endif
/* The network-layer header the harness writes for the connection's segments. */
#define IPH (FUZZ_IPV6 ? 40u : 20u)

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

#define NODE_IP   0x0a000001u  /* 10.0.0.1 */
#define PEER_IP   0x0a000002u  /* 10.0.0.2 */
#define ECHO_PORT 7
#define MTU       1500u
#define FRAME_MAX (NIF_OFF_FRAME_MAX + 64)

extern const uint8_t node_mac[6], peer_mac[6];
extern const uint8_t node_ip6[16], peer_ip6[16], router_ip6[16];
extern uint8_t node_ll6[16], peer_ll6[16];

/* What the peer knows of the connection, from the frames the node sent. */
struct fuzz_peer {
	uint16_t port;        /* the peer's port of the current connection */
	uint32_t snd_nxt;     /* highest SEQ + LEN the node sent */
	uint32_t rcv_nxt;     /* what the peer sends next */
	uint32_t node_tsval;  /* the node's last TSval */
	uint32_t tsval;       /* the peer's TSval clock */
	bool synack_seen;
	uint8_t last_tcp[60]; /* the node's last TCP header, for ICMP quotes */
	uint8_t last_ip[40];  /* and its IPv4 or IPv6 header */
};
extern struct fuzz_peer peer;

extern struct tcp_pcb *conn;   /* the connection the input plays on, NULL once gone */

enum { REC_SEG, REC_RAW, REC_ICMP, REC_TIME, REC_APP, REC_FRAG, REC_ND };
/* IPv6 has two records more; fuzz_stack's inputs keep their meaning. */
#define REC_KINDS (FUZZ_IPV6 ? 7u : 5u)

/* fuzz_stack_peer.c */
void put16(uint8_t *p, uint16_t v);
void put32(uint8_t *p, uint32_t v);
/* A TCP segment from the peer's sport to the node's dport (vnet: its virtio-net header on
 * an offload device). */
void send_tcp_ports(uint16_t sport, uint16_t dport, uint32_t seq, uint32_t ack, uint8_t flags,
		    uint16_t wnd, const uint8_t *opts, size_t optlen, const uint8_t *data,
		    size_t dlen, bool bad_csum, const uint8_t *vnet);
void arp_request(void);
void introduce(void);           /* IPv6: the peer's neighbour solicitation */
bool handshake(uint8_t how);    /* a fresh connection; false if it did not open */
void rec_seg(struct input *in, bool ts);
void rec_raw(struct input *in);
void rec_icmp(struct input *in);
void rec_frag(struct input *in);
void rec_nd(struct input *in);
/* BURST: an APP record of FLOOD's (first octet with bits 2-7 set) whose 16 bits have bits
 * 5-7 set: BURST_MIN + BURST_STEP * (bits 0-4) one-octet out-of-order segments, always past
 * TCP_OOSEQ_MAX_SEGS (fewer are SEG's); order 0 ascending, 1 descending, 2 shuffled by the
 * high octet, 3 shuffled and then the holes filled. At most one per input: a shuffled one
 * costs seconds under ASan (each insert walks ooseq). */
#define BURST_MIN  (TCP_OOSEQ_MAX_SEGS + 1u)
#define BURST_STEP 8u
#define BURST_MAX  (BURST_MIN + 31u * BURST_STEP)
struct burst_stats {
	unsigned long bursts, limit_reached, filled;
};
extern struct burst_stats burst_stats;
void rec_burst(unsigned order, uint16_t v, bool ts);

#endif
