/* ulsd's counters (counters.h): their names and their walk for STATS. */
#include "server/counters.h"

static const char *const counter_names[SRV_COUNTER_MAX] = {
	[SRV_CTL_MESSAGES] = "ctl_messages",
	[SRV_CTL_REFUSED] = "ctl_refused",
	[SRV_CTL_OUT_OF_ORDER] = "ctl_out_of_order",
	[SRV_CTL_DENIED] = "ctl_denied",
	[SRV_CTL_REPLY_LOST] = "ctl_reply_lost",
	[SRV_LEASES_OPENED] = "leases_opened",
	[SRV_LEASES_CLOSED] = "leases_closed",
	[SRV_FRAMES_DEMUXED] = "frames_demuxed",
	[SRV_FRAMES_TO_SERVER] = "frames_to_server",
	[SRV_FRAMES_SENT] = "frames_sent",
	[SRV_DROP_NOT_FOR_NODE] = "drop_not_for_node",
	[SRV_DROP_RX_RING_FULL] = "drop_rx_ring_full",
	[SRV_DROP_NO_OWNER] = "drop_no_owner",
	[SRV_DROP_TX_DENIED] = "drop_tx_denied",
	[SRV_DROP_TX_BAD_SLOT] = "drop_tx_bad_slot",
	[SRV_DROP_FRAGMENT] = "drop_fragment_reass",
	[SRV_DROP_ICMP_RATE] = "drop_icmp_rate",
	[SRV_ARP_REPLIES] = "arp_replies",
	[SRV_ARP_SHARED] = "arp_shared",
	[SRV_ICMP_ECHO_REPLIES] = "icmp_echo_replies",
	[SRV_RST_SENT] = "rst_sent",
	[SRV_ICMP_UNREACH_SENT] = "icmp_unreach_sent",
	[SRV_RST_PROBES] = "rst_probes",
	[SRV_HANDOFFS] = "handoffs",
	[SRV_HANDOFFS_EXPIRED] = "handoffs_expired",
	[SRV_DROP_IN_TRANSIT] = "drop_in_transit",
	[SRV_FRAMES_GSO_SENT] = "frames_gso_sent",
	[SRV_FRAMES_GSO_RECEIVED] = "frames_gso_received",
	[SRV_FRAMES_CSUM_PARTIAL_RECEIVED] = "frames_csum_partial_received",
	[SRV_DROP_TX_BAD_OFFLOAD] = "drop_tx_bad_offload",
	[SRV_DROP_RX_BAD_VNET] = "drop_rx_bad_vnet",
	[SRV_TX_RESERVE_TIMEOUTS] = "tx_reserve_timeouts",
	[SRV_DATA_FRAMES_RELAYED] = "data_frames_relayed",
	[SRV_LEASES_DIRECT] = "leases_direct",
	[SRV_LEASES_RELAY] = "leases_relay",
	[SRV_DIRECT_REFUSED] = "direct_refused",
	[SRV_DROP_DIRECT_UNSTEERED] = "drop_direct_unsteered",
	[SRV_DP_MAP_ERRORS] = "dp_map_errors",
	[SRV_DP_QUEUES_RECYCLED] = "dp_queues_recycled",
	[SRV_DP_QUEUES_RETIRED] = "dp_queues_retired",
	[SRV_REASS_IN_PROGRESS] = "reass_in_progress",
	[SRV_REASS_BYTES_HELD] = "reass_bytes_held",
	[SRV_REASS_PEAK] = "reass_peak",
	[SRV_REASS_DATAGRAMS] = "reass_datagrams",
	[SRV_REASS_FRAGMENTS] = "reass_fragments",
	[SRV_DROP_REASS_OVERLAP] = "drop_reass_overlap",
	[SRV_DROP_REASS_DUPLICATE] = "drop_reass_duplicate",
	[SRV_DROP_REASS_TIMEOUT] = "drop_reass_timeout",
	[SRV_DROP_REASS_LIMIT] = "drop_reass_limit",
	[SRV_REASS_FOR_NODE] = "reass_for_node",
	[SRV_REASS_ATOMIC] = "reass_atomic",
	[SRV_FRAGMENTS_SENT] = "fragments_sent",
	[SRV_DROP_REASS_BAD] = "drop_reass_bad",
	[SRV_DROP_REASS_UNSTEERED] = "drop_reass_unsteered",
	[SRV_DROP_REASS_IPV6_DIRECT] = "drop_reass_ipv6_direct",
	[SRV_ICMP_TIME_EXCEEDED_SENT] = "icmp_time_exceeded_sent",
	[SRV_DROP_RST_RATE] = "drop_rst_rate",
	[SRV_CONNTABS_GIVEN] = "conntabs_given",
	[SRV_CONNTAB_TORN] = "conntab_torn",
	[SRV_CONNTAB_BAD_HEADER] = "conntab_bad_header",
	[SRV_CONNTAB_BAD_ENTRIES] = "conntab_bad_entries",
	[SRV_CONNTAB_BAD_VERSION] = "conntab_bad_version",
	[SRV_CTL_ACCEPT_FAILED] = "ctl_accept_failed",
	[SRV_CTL_CONN_DROPPED] = "ctl_conn_dropped",
	[SRV_DROP_NO_TAP_SLOT] = "drop_no_tap_slot",
	[SRV_DROP_ARP_NOT_FOR_NODE] = "drop_arp_not_for_node",
	[SRV_DROP_RST_FOR_RST] = "drop_rst_for_rst",
	[SRV_DROP_RST_NOT_UNICAST] = "drop_rst_not_unicast",
	[SRV_DROP_ECHO_UNANSWERED] = "drop_echo_unanswered",
	[SRV_DROP_ICMP_ERROR_NOT_UNICAST] = "drop_icmp_error_not_unicast",
	[SRV_DROP_CUSTODY_NO_MEMORY] = "drop_custody_no_memory",
	[SRV_IPV6_FRAMES] = "ipv6_frames",
	[SRV_ND_SHARED] = "nd_shared",
	[SRV_IPV6_FRAMES_DEMUXED] = "ipv6_frames_demuxed",
	[SRV_ND_ADVERTS_SENT] = "nd_adverts_sent",
	[SRV_ND_ADVERTS_RECEIVED] = "nd_adverts_received",
	[SRV_ND_ADDRESS_CONFLICT] = "nd_address_conflict",
	[SRV_ICMPV6_PARAM_PROB_SENT] = "icmpv6_param_prob_sent",
	[SRV_DROP_IPV6_HEADER] = "drop_ipv6_header",
	[SRV_DROP_IPV6_EXT_HEADERS] = "drop_ipv6_ext_headers",
	[SRV_DROP_IPV6_FRAGMENT] = "drop_ipv6_fragment",
	[SRV_DROP_IPV6_NEXT_HEADER] = "drop_ipv6_next_header",
	[SRV_DROP_ICMPV6_HEADER] = "drop_icmpv6_header",
	[SRV_DROP_ICMPV6_CHECKSUM] = "drop_icmpv6_checksum",
	[SRV_DROP_ND_INVALID] = "drop_nd_invalid",
	[SRV_DROP_ND_NOT_FOR_NODE] = "drop_nd_not_for_node",
	[SRV_DROP_IPV6_OPTION] = "drop_ipv6_option",
	[SRV_ND_SOLICITS_SENT] = "nd_solicits_sent",
	[SRV_ND_RESOLVE_FAILED] = "nd_resolve_failed",
	[SRV_ND_ADVERTS_IGNORED] = "nd_adverts_ignored",
	[SRV_ND_CACHE_EVICTED] = "nd_cache_evicted",
	[SRV_RST_PROBES_DEFERRED] = "rst_probes_deferred",
	[SRV_DROP_PROBE_NO_NEIGHBOUR] = "drop_probe_no_neighbour",
	[SRV_ND_DAD_SOLICITS_SENT] = "nd_dad_solicits_sent",
	[SRV_ND_DAD_DUPLICATE] = "nd_dad_duplicate",
	[SRV_DROP_SYN_SHED] = "drop_syn_shed",
	[SRV_SYN_SHED_READMITTED] = "syn_shed_readmitted",
	[SRV_SYN_SHED_SUSPENDED] = "syn_shed_suspended",
	[SRV_SYN_SHED_KNOWN_PEER] = "syn_shed_known_peer",
	[SRV_SYN_SHED_MEMORY_FULL] = "syn_shed_memory_full",
	[SRV_DROP_TX_RST_RELEASED] = "drop_tx_rst_released",
	[SRV_CUSTODY_TIMEWAIT] = "custody_timewait",
	[SRV_CUSTODY_FINWAIT2] = "custody_finwait2",
	[SRV_CUSTODY_FIN_ACKED] = "custody_fin_acked",
	[SRV_CUSTODY_NOT_FIN] = "custody_not_fin",
	[SRV_CUSTODY_ACK_IGNORED] = "custody_ack_ignored",
	[SRV_CUSTODY_OLD_ACKED] = "custody_old_acked",
};

const char *srv__counter_name(enum srv_counter c)
{
	return (unsigned)c < SRV_COUNTER_MAX ? counter_names[c] : "unknown";
}

void srv__count_ctl_error(struct srv_counters *c, int err)
{
	int slot = -err - CTL_ERROR_BASE;

	/* ctl_check's reasons are CTL_ERROR_BASE + 1 .. CTL_ERROR_SLOTS - 1; anything else
	 * is counted in slot 0, which STATS does not name. */
	c->ctl_errors[slot > 0 && slot < CTL_ERROR_SLOTS ? slot : 0]++;
}

void srv__counters_each(const struct srv_counters *c, srv_counter_fn *fn, void *arg)
{
	for (int i = 0; i < SRV_COUNTER_MAX; i++)
		fn(arg, srv__counter_name((enum srv_counter)i), c->v[i]);
	for (int i = 1; i < CTL_ERROR_SLOTS; i++)
		fn(arg, ctl_error_name(CTL_ERROR_BASE + i), c->ctl_errors[i]);
}
