/* ulsraw's frames (apps/ulsraw.c describes the format): building data, hello and end frames,
 * and the receiver's check and loss accounting of each frame (pure apart from the clock;
 * tests/unit/test_rawframe.c). */
#ifndef ULS_APPS_RAWFRAME_H
#define ULS_APPS_RAWFRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "netif/frame.h"

#define RAW_ETHERTYPE     0x88b5  /* IEEE 802 local experimental EtherType 1 */
#define RAW_HDR_LEN       16
#define RAW_DATA_OFF      (WIRE_ETH_HLEN + RAW_HDR_LEN)
#define RAW_CTL_FRAME_LEN 60      /* minimum Ethernet frame without FCS */
#define RAW_MAGIC_DATA    "ULSR"
#define RAW_MAGIC_HELLO   "ULSH"
#define RAW_MAGIC_END     "ULSE"
#define RAW_STREAMS_MAX   1024u

extern const uint8_t bench__raw_mac_sender[WIRE_ETH_ALEN];     /* send's default --mac */
extern const uint8_t bench__raw_mac_receiver[WIRE_ETH_ALEN];   /* recv's default --mac */
extern const uint8_t bench__raw_mac_broadcast[WIRE_ETH_ALEN];

struct raw_rx_stream {
	uint64_t next;      /* one past the highest sequence seen */
	uint64_t frames;
	uint64_t bytes;
	uint64_t gaps;      /* sequences skipped when a later one arrived */
	uint64_t late;      /* frames that arrived behind a later one */
	uint64_t tail;      /* frames after the last one seen, known from the end frame */
	size_t frame_len;   /* of the first frame: every frame of a stream has the same length */
};

struct raw_rx {
	uint8_t mac[WIRE_ETH_ALEN];
	struct raw_rx_stream s[RAW_STREAMS_MAX];
	unsigned nstreams;  /* highest stream id seen + 1 (or the end frame's count) */
	uint64_t frames, bytes, corrupt, ignored;
	uint64_t first_bytes;
	double t_first, t_last;
	bool end_seen;
	unsigned end_frames;  /* end frames received, repeats included */
};

/* A data frame of frame_len (> RAW_DATA_OFF) bytes: header, then the stream's pattern. */
void bench__raw_build_data(uint8_t *f, size_t frame_len, const uint8_t dst[WIRE_ETH_ALEN],
			   const uint8_t src[WIRE_ETH_ALEN], uint32_t stream, uint64_t seq);
/* A hello or end frame (magic RAW_MAGIC_HELLO or RAW_MAGIC_END); returns its length. */
size_t bench__raw_build_ctl(uint8_t *f, const uint8_t dst[WIRE_ETH_ALEN],
			    const uint8_t src[WIRE_ETH_ALEN], const char *magic, uint32_t a,
			    uint64_t b);
/* Verify and count one received frame; the first corrupt frames are described on stderr. */
void bench__raw_rx_frame(struct raw_rx *rx, const uint8_t *f, size_t len);
/* Frames of a stream lost: gaps not filled by late frames, plus the tail the end frame
 * showed. */
uint64_t bench__raw_stream_lost(const struct raw_rx_stream *s);
/* How many of `total` round-robin frames went to stream i of n. */
uint64_t bench__raw_sent_to_stream(uint64_t total, unsigned n, unsigned i);

#endif
