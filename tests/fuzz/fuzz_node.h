/* What fuzz_node.c (the harness: the oracles, the processes, the input's loop) shares with
 * fuzz_node_frames.c (the frames of its records). */
#ifndef ULS_TESTS_FUZZ_FUZZ_NODE_H
#define ULS_TESTS_FUZZ_FUZZ_NODE_H

#include <stddef.h>
#include <stdint.h>

#include "tests/fuzz/fuzz_input.h"
#include "tests/unit/faketap.h"

/* The peer: 198.18.0.2 and 2001:db8:0:1::2; another host 198.18.0.9. */
#define PEER4    0x020012c6u
#define OTHER4   0x090012c6u
#define CUSTODY_LPORT 5000
#define CUSTODY_RPORT 80
extern const uint8_t peer_mac[6], peer6[16], other6[16];
extern uint8_t peer_ll6[16];
/* Where the records build their frames (fuzz_node_frames.c). */
extern uint8_t frame_buf[FAKETAP_FRAME_MAX + 2048];

/* fuzz_node.c */
/* Fill out[0, n) from the input (at most from_input octets), the rest a pattern. */
void fill(struct input *in, uint8_t *out, size_t n, size_t from_input);
void frame(const uint8_t *f, size_t len);  /* one frame through one demux round, checked */

/* fuzz_node_frames.c: the records that send frames */
void rec_arp(struct input *in);
void rec_echo4(struct input *in);
void rec_echo6(struct input *in);
void rec_frag(struct input *in);
void rec_nd(struct input *in);
void rec_tcp(struct input *in);
void rec_udp(struct input *in);

#endif
