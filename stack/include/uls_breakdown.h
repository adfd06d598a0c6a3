/* ulstack's latency breakdown: per-frame timestamps from one clock at each layer (seed 003's
 * method), for the tools of this tree (ulsping --breakdown). Not installed.
 *
 * Only a build configured with --enable-breakdown records anything. There, a process on a
 * ulsd node keeps, for each of its recent TCP segments that carry data (or SYN/FIN), the
 * segment's 4-tuple, sequence number and length and four timestamps: for a segment it sent,
 * when lwIP handed it to the netif, when it was in the tx ring, when ulsd took it and when
 * ulsd queued its TAP write; for a segment it received, when ulsd read it from the TAP, when
 * ulsd had found its owner, when ulsd had put it into the ring and when this process took it
 * off the ring. All stamps are uls_breakdown_now() values, a clock shared by every process
 * of the machine, so a tool can match a segment as sent by one process with the same segment
 * as received by another and subtract.
 */
#ifndef ULS_BREAKDOWN_API_H
#define ULS_BREAKDOWN_API_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "uls.h"

#ifdef __cplusplus
extern "C" {
#endif

enum uls_bd_dir { ULS_BD_SENT = 1, ULS_BD_RECEIVED = 2 };

/* Index into uls_bd_frame.t for a sent segment ... */
enum uls_bd_sent { ULS_BD_STACK_OUT, ULS_BD_TX_RING, ULS_BD_ULSD_TX, ULS_BD_TAP_WRITE };
/* ... and for a received one. */
enum uls_bd_received { ULS_BD_TAP_READ, ULS_BD_DEMUX, ULS_BD_RX_RING, ULS_BD_STACK_IN };
#define ULS_BD_STAMPS 4

struct uls_bd_frame {
	uint64_t t[ULS_BD_STAMPS];  /* ns, uls_breakdown_now(); 0: not stamped */
	uint32_t saddr, daddr;      /* network order */
	uint16_t sport, dport;      /* host order */
	uint32_t seq;               /* TCP sequence number */
	uint32_t len;               /* TCP payload bytes */
	uint8_t flags;              /* TCP flags */
	uint8_t dir;                /* enum uls_bd_dir */
};

/* 1 if this library was built with --enable-breakdown, else 0. */
ULS_EXTERN int uls_breakdown_enabled(void);
/* The stamps' clock (CLOCK_MONOTONIC), in nanoseconds. */
ULS_EXTERN uint64_t uls_breakdown_now(void);
/* Move up to n of the oldest recorded segments into out; returns how many (0: none left).
 * *lost (if given): segments overwritten before they were read, since the node came up.
 * -ENOTSUP without --enable-breakdown or on a node of its own (no ulsd: no rings, no
 * stamps), -ENOTCONN when the process has no node. */
ULS_EXTERN ssize_t uls_breakdown_read(struct uls_bd_frame *out, size_t n, uint64_t *lost);

#ifdef __cplusplus
}
#endif
#endif
