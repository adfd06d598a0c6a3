/* ulsd's counters: one struct, what `ulsstat` shows (STATS, ctl.c).
 *
 * One owner: the counters are read and written with s->lock held (internal.h), by both
 * threads; nothing of the data path counts outside it. Every drop has one here (or in the
 * filter's reasons, filter/filter.h, or a lease's own figures).
 */
#ifndef ULS_SERVER_COUNTERS_H
#define ULS_SERVER_COUNTERS_H

#include <stdint.h>

#include "netif/ctl/ctl.h"

enum srv_counter {
	SRV_CTL_MESSAGES, SRV_CTL_REFUSED, SRV_CTL_OUT_OF_ORDER, SRV_CTL_DENIED,
	SRV_CTL_REPLY_LOST, SRV_LEASES_OPENED, SRV_LEASES_CLOSED,
	SRV_FRAMES_DEMUXED, SRV_FRAMES_TO_SERVER, SRV_FRAMES_SENT,
	SRV_DROP_NOT_FOR_NODE, SRV_DROP_RX_RING_FULL, SRV_DROP_NO_OWNER, SRV_DROP_TX_DENIED,
	SRV_DROP_TX_BAD_SLOT, SRV_DROP_FRAGMENT, SRV_DROP_ICMP_RATE,
	SRV_ARP_REPLIES, SRV_ARP_SHARED, SRV_ICMP_ECHO_REPLIES, SRV_RST_SENT,
	SRV_ICMP_UNREACH_SENT, SRV_RST_PROBES,
	SRV_HANDOFFS, SRV_HANDOFFS_EXPIRED, SRV_DROP_IN_TRANSIT,
	SRV_FRAMES_GSO_SENT, SRV_FRAMES_GSO_RECEIVED, SRV_FRAMES_CSUM_PARTIAL_RECEIVED,
	SRV_DROP_TX_BAD_OFFLOAD, SRV_DROP_RX_BAD_VNET, SRV_TX_RESERVE_TIMEOUTS,
	/* The direct data path (bpf.c) */
	SRV_DATA_FRAMES_RELAYED, SRV_LEASES_DIRECT, SRV_LEASES_RELAY, SRV_DIRECT_REFUSED,
	SRV_DROP_DIRECT_UNSTEERED, SRV_DP_MAP_ERRORS, SRV_DP_QUEUES_RECYCLED,
	SRV_DP_QUEUES_RETIRED,
	/* IPv4 and IPv6 reassembly for processes (reass.c); the first three are gauges */
	SRV_REASS_IN_PROGRESS, SRV_REASS_BYTES_HELD, SRV_REASS_PEAK,
	SRV_REASS_DATAGRAMS, SRV_REASS_FRAGMENTS, SRV_DROP_REASS_OVERLAP,
	SRV_DROP_REASS_DUPLICATE, SRV_DROP_REASS_TIMEOUT, SRV_DROP_REASS_LIMIT,
	SRV_REASS_FOR_NODE, SRV_REASS_ATOMIC, SRV_FRAGMENTS_SENT, SRV_DROP_REASS_BAD, SRV_DROP_REASS_UNSTEERED,
	SRV_DROP_REASS_IPV6_DIRECT,
	SRV_ICMP_TIME_EXCEEDED_SENT,
	SRV_DROP_RST_RATE,
	/* processes' connection tables (ctl.c, netif/conntab.h) */
	SRV_CONNTABS_GIVEN, SRV_CONNTAB_TORN, SRV_CONNTAB_BAD_HEADER, SRV_CONNTAB_BAD_ENTRIES,
	SRV_CONNTAB_BAD_VERSION,
	/* control connections that never got a lease (ctl.c) */
	SRV_CTL_ACCEPT_FAILED, SRV_CTL_CONN_DROPPED,
	/* the node's own answers not sent (demux.c, reply.c) */
	SRV_DROP_NO_TAP_SLOT, SRV_DROP_ARP_NOT_FOR_NODE, SRV_DROP_RST_FOR_RST,
	SRV_DROP_RST_NOT_UNICAST, SRV_DROP_ECHO_UNANSWERED, SRV_DROP_ICMP_ERROR_NOT_UNICAST,
	/* a dead process's connection not taken into custody: no memory (custody.c) */
	SRV_DROP_CUSTODY_NO_MEMORY,
	/* IPv6 for the node (reply6.c); the answers count in the IPv4 counters above */
	SRV_IPV6_FRAMES, SRV_ND_ADVERTS_SENT, SRV_ND_ADVERTS_RECEIVED, SRV_ND_ADDRESS_CONFLICT,
	SRV_ICMPV6_PARAM_PROB_SENT, SRV_DROP_IPV6_HEADER, SRV_DROP_IPV6_EXT_HEADERS,
	SRV_DROP_IPV6_FRAGMENT, SRV_DROP_IPV6_NEXT_HEADER, SRV_DROP_ICMPV6_HEADER,
	SRV_DROP_ICMPV6_CHECKSUM, SRV_DROP_ND_INVALID, SRV_DROP_ND_NOT_FOR_NODE,
	SRV_DROP_IPV6_OPTION,
	/* processes' IPv6 on the relay path (demux.c): neighbour advertisements copied to
	 * every relay process, frames delivered by the filter */
	SRV_ND_SHARED, SRV_IPV6_FRAMES_DEMUXED,
	/* ulsd's IPv6 neighbour cache (neigh6.c, reply6.c) and custody's probes without a
	 * peer's link-layer address (reply.c, reply6.c) */
	SRV_ND_SOLICITS_SENT, SRV_ND_RESOLVE_FAILED, SRV_ND_ADVERTS_IGNORED, SRV_ND_CACHE_EVICTED,
	SRV_RST_PROBES_DEFERRED, SRV_DROP_PROBE_NO_NEIGHBOUR,
	/* the node's duplicate address detection (reply6.c, RFC 4862 §5.4) */
	SRV_ND_DAD_SOLICITS_SENT, SRV_ND_DAD_DUPLICATE,
	/* SYN shedding on the relay path (demux.c, netif/synshed.c): pure SYNs dropped while
	 * the demux thread is behind a SYN flood, shed SYNs' retransmissions taken in, the
	 * times shedding stopped because shed SYNs came back, SYNs taken in under
	 * pressure from peers known by their ACKs, and SYNs taken in under pressure because
	 * the memory of shed SYNs was full */
	SRV_DROP_SYN_SHED, SRV_SYN_SHED_READMITTED, SRV_SYN_SHED_SUSPENDED,
	SRV_SYN_SHED_KNOWN_PEER, SRV_SYN_SHED_MEMORY_FULL,
	/* a process's RST for a connection it had released, refused but no denial
	 * (demux.c, late_rst) */
	SRV_DROP_TX_RST_RELEASED,
	/* connections taken into custody without probes: their process had left them in
	 * TIME-WAIT, as its connection table said at its end (lease.c) */
	SRV_CUSTODY_TIMEWAIT,
	/* connections taken into custody in FIN-WAIT-2 (lease.c); their peers' FINs
	 * acknowledged (a FIN-WAIT-2 one now in TIME-WAIT, or a TIME-WAIT one's retransmitted
	 * FIN); segments for such a tuple that were not its peer's FIN (data, a FIN at
	 * another SEQ or ACK), reset as for any dead connection; their peers' bare ACKs at
	 * RCV.NXT, ignored (reply.c, reply6.c); retransmissions of data the process had
	 * received and keepalive probes, acknowledged */
	SRV_CUSTODY_FINWAIT2, SRV_CUSTODY_FIN_ACKED, SRV_CUSTODY_NOT_FIN, SRV_CUSTODY_ACK_IGNORED,
	SRV_CUSTODY_OLD_ACKED,
	SRV_COUNTER_MAX
};

struct srv_counters {
	uint64_t v[SRV_COUNTER_MAX];
	uint64_t ctl_errors[CTL_ERROR_SLOTS];   /* refused control messages, by reason */
};

/* Its name in STATS ("unknown" out of range). */
const char *srv__counter_name(enum srv_counter c);
/* A control message refused by ctl_check with err (-CTL_BAD_*). */
void srv__count_ctl_error(struct srv_counters *c, int err);
/* Every counter and every refusal reason by its name, in STATS's order. */
typedef void srv_counter_fn(void *arg, const char *name, uint64_t value);
void srv__counters_each(const struct srv_counters *c, srv_counter_fn *fn, void *arg);

#endif
