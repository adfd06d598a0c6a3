/* Named counters: every drop and refusal in the stack, from lwIP's statistics, the frame
 * checks, the TAP, and the socket layer. Tests assert on these names; ulsstat prints them. */
#include "internal.h"

#include <string.h>

#include "lwip/priv/tcp_priv.h"
#include "lwip/stats.h"
#include "netif/copy.h"

static uint64_t own[STK_CNT__COUNT];
static uint64_t verdicts[NIF_VERDICT_COUNT];

static const char *const own_names[STK_CNT__COUNT] = {
	[STK_CNT_UDP_RCVBUF_FULL] = "udp_rcvbuf_full",
	[STK_CNT_TCP_ACCEPTQ_FULL] = "tcp_acceptq_full",
	[STK_CNT_RX_NOMEM] = "rx_nomem",
	[STK_CNT_TX_NOBUF] = "tx_nobuf",
	[STK_CNT_TX_OVERSIZE] = "tx_oversize",
	[STK_CNT_MIRROR_FAIL] = "mirror_syscall_failed",
	[STK_CNT_MIRROR_TOKENS] = "mirror_tokens_written",
	[STK_CNT_MIRROR_DEBTS_PAID] = "mirror_debts_paid_by_a_round",
	[STK_CNT_HANDOFF_OUT] = "handoff_given",
	[STK_CNT_HANDOFF_IN] = "handoff_claimed",
	[STK_CNT_HANDOFF_FAIL] = "handoff_failed",
	[STK_CNT_TSO_HINT_MISS] = "tso_hint_miss",
	[STK_CNT_RX_CSUM_OFFLOADED] = "rx_csum_offloaded",
	/* TCP input checks (stack/tcp_checks.c; lwIP patches 0010-0019) */
	[STK_CNT_TCP_MSS_NONSYN] = "tcp_mss_nonsyn_ignored",
	[STK_CNT_TCP_MSS_CLAMPED] = "tcp_mss_clamped",
	[STK_CNT_TCP_OOSEQ_TRIMMED] = "tcp_ooseq_trimmed",
	[STK_CNT_TCP_OOSEQ_LIMIT] = "tcp_ooseq_limit",
	[STK_CNT_TCP_PAST_FIN_DROPPED] = "tcp_data_past_fin_dropped",
	[STK_CNT_TCP_SEQ_UNACCEPTABLE] = "tcp_seq_unacceptable",
	[STK_CNT_TCP_RST_OUT_OF_WINDOW] = "tcp_rst_out_of_window",
	[STK_CNT_TCP_RST_CHALLENGED] = "tcp_rst_challenged",
	[STK_CNT_TCP_SYN_CHALLENGED] = "tcp_syn_challenged",
	[STK_CNT_TCP_NO_ACK_DROPPED] = "tcp_no_ack_dropped",
	[STK_CNT_TCP_ACK_UNACCEPTABLE] = "tcp_ack_unacceptable",
	[STK_CNT_TCP_CHALLENGE_ACK_SENT] = "tcp_challenge_ack_sent",
	[STK_CNT_TCP_CHALLENGE_ACK_LIMITED] = "tcp_challenge_ack_limited",
	[STK_CNT_TCP_PAWS_DROPPED] = "tcp_paws_dropped",
	[STK_CNT_TCP_TS_RECENT_EXPIRED] = "tcp_ts_recent_expired",
	[STK_CNT_TCP_SIMULTANEOUS_OPEN] = "tcp_simultaneous_open",
	/* ICMP errors for TCP (icmperr.c) */
	[STK_CNT_ICMP_ERR_MALFORMED] = "icmp_err_malformed",
	[STK_CNT_ICMP_ERR_NO_CONN] = "icmp_err_no_conn",
	[STK_CNT_ICMP_ERR_OUT_OF_WINDOW] = "icmp_err_out_of_window",
	[STK_CNT_ICMP_ERR_HARD] = "icmp_err_hard",
	[STK_CNT_ICMP_ERR_SOFT] = "icmp_err_soft",
	[STK_CNT_ICMP_PMTU_LOWERED] = "icmp_pmtu_lowered",
	[STK_CNT_ICMP_PMTU_IGNORED] = "icmp_pmtu_ignored",
	/* Loss recovery of the sending side (lwIP patches 0020-0029) */
	[STK_CNT_TCP_RTO] = "tcp_rto",
	[STK_CNT_TCP_RECOVERY_SACK] = "tcp_recovery_sack",
	[STK_CNT_TCP_RECOVERY_NEWRENO] = "tcp_recovery_newreno",
	[STK_CNT_TCP_REXMIT] = "tcp_rexmit_in_recovery",
	[STK_CNT_TCP_TLP] = "tcp_tlp_probe",
	[STK_CNT_TCP_TLP_REPAIRED] = "tcp_tlp_repaired_loss",
	[STK_CNT_TCP_RACK_TAIL] = "tcp_rack_tail_lost",
	[STK_CNT_TCP_REXMIT_LOST] = "tcp_rack_rexmit_lost",
	/* RFC 5682 F-RTO / RFC 3522 (lwIP patch 0130): timeouts found spurious and undone */
	[STK_CNT_TCP_RTO_SPURIOUS] = "tcp_rto_spurious",
	/* RFC 3708 / RFC 9438 section 4.9 (lwIP patch 0140): fast retransmits whose every
	 * resent copy a D-SACK reported received twice (the window restored if it was lower) */
	[STK_CNT_TCP_FR_SPURIOUS] = "tcp_fast_rexmit_spurious",
	/* ACKs sent by the delayed-ACK timer (lwIP patch 0113) */
	[STK_CNT_TCP_DELAYED_ACK_TIMER] = "tcp_delayed_ack_timer",
	/* IPv4 reassembly (lwIP patch 0050) */
	[STK_CNT_IP_REASS_OVERLAP] = "ip_reass_overlap",
	[STK_CNT_IP_REASS_DUPLICATE] = "ip_reass_duplicate",
	[STK_CNT_IP_REASS_TIMEOUT] = "ip_reass_timeout",
	[STK_CNT_IP_REASS_LIMIT] = "ip_reass_limit",
	/* ICMP errors for UDP sockets (icmperr.c) */
	[STK_CNT_UDP_ICMP_ERR] = "udp_icmp_err",
	[STK_CNT_UDP_ICMP_ERR_IGNORED] = "udp_icmp_err_ignored",
	/* RFC 1191 §6.3 path MTU aging (icmperr.c) */
	[STK_CNT_ICMP_PMTU_RAISED] = "icmp_pmtu_raised",
	/* ICMPv6 errors (icmp6err.c) */
	[STK_CNT_ICMP6_ERR_MALFORMED] = "icmp6_err_malformed",
	[STK_CNT_ICMP6_PTB_BELOW_MIN] = "icmp6_ptb_below_min",
	[STK_CNT_ICMP6_PTB_TO_DEST_CACHE] = "icmp6_ptb_to_dest_cache",
	/* zcopy: frames the direct path moved without a copy (stack/ethif.c) */
	[STK_CNT_RX_LENT] = "rx_frames_in_place",
	[STK_CNT_TX_GATHER] = "tx_frames_gathered",
	/* Run to completion (stack/drive.c) */
	[STK_CNT_RTC_ROUNDS] = "rtc_rounds",
	[STK_CNT_RTC_ENTRY_RX] = "rtc_entry_rx",
	[STK_CNT_RTC_PARK_TIMERS_LEFT] = "rtc_park_timers_left",
	[STK_CNT_RTC_PARK_WAKES] = "rtc_park_wakes",
	[STK_CNT_RTC_PARK_LONG] = "rtc_park_long",
	[STK_CNT_RTC_PARK_IDLE] = "rtc_park_idle",
	[STK_CNT_RTC_PARK_SIGNALLED] = "rtc_park_signalled",
	[STK_CNT_RTC_PARK_TIMER_WAITS] = "rtc_park_timer_waits",
	[STK_CNT_RTC_PARK_TIMERS_HANDED] = "rtc_park_timers_handed",
	[STK_CNT_RTC_PARK_HANDED] = "rtc_park_rounds_handed",
	[STK_CNT_RTC_OWED_TAKEN] = "rtc_owed_rounds_taken",
	[STK_CNT_RTC_HANDOVERS] = "rtc_stack_handovers",
	[STK_CNT_RTC_SPIN_HITS] = "rtc_spin_hits",
	/* ... for programs under ulsrun (uls_socket_drive) */
	[STK_CNT_RTC_SHIM_DRIVES] = "rtc_shim_waits_driven",
	[STK_CNT_RTC_SHIM_MIRROR] = "rtc_shim_waits_on_mirror",
	[STK_CNT_RTC_SHIM_EINTR] = "rtc_shim_waits_interrupted",
	[STK_CNT_RTC_POLL_DRIVES] = "rtc_shim_poll_rounds",
	[STK_CNT_RTC_POLL_KERNEL] = "rtc_shim_poll_in_kernel",
	/* User-level epoll (issue 14) */
	[STK_CNT_MIRROR_TOKENS_SKIPPED] = "mirror_tokens_skipped",
	[STK_CNT_UEPOLL_KICKS] = "uepoll_driver_kicks",
	[STK_CNT_UEPOLL_UNQUEUED] = "uepoll_events_unasked",
	[STK_CNT_UEPOLL_CTL_QUIET] = "uepoll_ctl_quiet",
	[STK_CNT_TX_FLUSH_DEFERRED] = "tx_flush_deferred",
	[STK_CNT_TX_FLUSH_AT_WAIT] = "tx_flush_at_wait",
	[STK_CNT_TX_FLUSH_BATCH_AT_ONCE] = "tx_flush_batch_at_once",
	/* SYN floods (stack/syncookie.c, lwIP patch 0090) */
	[STK_CNT_TCP_SYN_COOKIES_SENT] = "tcp_syn_cookies_sent",
	[STK_CNT_TCP_SYN_COOKIES_OK] = "tcp_syn_cookies_ok",
	[STK_CNT_TCP_SYN_COOKIES_BAD] = "tcp_syn_cookies_bad",
	[STK_CNT_TCP_SYN_BACKLOG_DROPS] = "tcp_syn_backlog_drops",
	[STK_CNT_SYN_SHED] = "syn_shed",
	[STK_CNT_SYN_SHED_READMITTED] = "syn_shed_readmitted",
	[STK_CNT_SYN_SHED_SUSPENDED] = "syn_shed_suspended",
	[STK_CNT_SYN_SHED_KNOWN_PEER] = "syn_shed_known_peer",
	[STK_CNT_SYN_SHED_MEMORY_FULL] = "syn_shed_memory_full",
	[STK_CNT_TCP_SYN_COOKIES_ACCEPTQ_FULL] = "tcp_syn_cookies_acceptq_full",
};

/* Called with the core lock held, like every other counter update. */
void stk__count(enum stk_counter c)
{
	own[c]++;
}

void stk__count_verdict(enum nif_verdict v)
{
	if ((unsigned)v < NIF_VERDICT_COUNT)
		verdicts[v]++;
}

struct sink {
	struct uls_counter *out;
	size_t n, i;
};

static void put(struct sink *k, const char *name, uint64_t v)
{
	if (k->i < k->n) {
		k->out[k->i].name = name;
		k->out[k->i].value = v;
	}
	k->i++;
}

#define PROTO(k, pfx, s)                                   \
	do {                                               \
		put(k, pfx "_recv", (s).recv);             \
		put(k, pfx "_xmit", (s).xmit);             \
		put(k, pfx "_drop", (s).drop);             \
		put(k, pfx "_chkerr", (s).chkerr);         \
		put(k, pfx "_lenerr", (s).lenerr);         \
		put(k, pfx "_memerr", (s).memerr);         \
		put(k, pfx "_rterr", (s).rterr);           \
		put(k, pfx "_proterr", (s).proterr);       \
		put(k, pfx "_opterr", (s).opterr);         \
		put(k, pfx "_err", (s).err);               \
	} while (0)

int uls_counters(struct uls_counter *out, size_t n)
{
	struct sink k = { out, out ? n : 0, 0 };
	struct nif_dev_stats ts;

	stk__lock();
	/* Counted without the core lock (drive.c, park()). */
	own[STK_CNT_RTC_PARK_HANDED] = __atomic_load_n(&stk__node.park_handed, __ATOMIC_RELAXED);
	for (int v = 0; v < NIF_VERDICT_COUNT; v++)
		if (nif_verdict_is_drop((enum nif_verdict)v))
			put(&k, nif_verdict_name((enum nif_verdict)v), verdicts[v]);
	for (int c = 0; c < STK_CNT__COUNT; c++)
		put(&k, own_names[c], own[c]);
	/* The lease's notifications (lease.c): counted outside the core lock. */
	uint64_t queued, lost;
	stk__lease_counters(&queued, &lost);
	put(&k, "ctl_notify_queued", queued);
	put(&k, "ctl_notify_lost", lost);
	/* Signals held off inside the stack (sigdefer.c): counted by their handlers. */
	uint64_t deferred, redelivered;
	stk__signal_counters(&deferred, &redelivered);
	put(&k, "signals_deferred", deferred);
	put(&k, "signals_redelivered", redelivered);
	/* Bulk copies made without `rep movsb` (netif/copy.c): counted by the copy. */
	put(&k, "copy_short_distance", nif_copy_short_distance());
	/* Gauges: connections the process holds, TIME-WAIT apart (its memory stays for
	 * 2 MSL after the application closed: the load tests account for it). A walk of the
	 * lists, only when counters are read. */
	uint64_t active = 0, time_wait = 0;
	for (struct tcp_pcb *p = tcp_active_pcbs; p; p = p->next)
		active++;
	for (struct tcp_pcb *p = tcp_tw_pcbs; p; p = p->next)
		time_wait++;
	put(&k, "tcp_pcbs_active", active);
	put(&k, "tcp_pcbs_time_wait", time_wait);
	PROTO(&k, "link", lwip_stats.link);
	PROTO(&k, "etharp", lwip_stats.etharp);
	PROTO(&k, "ip", lwip_stats.ip);
	PROTO(&k, "ipfrag", lwip_stats.ip_frag);
	PROTO(&k, "icmp", lwip_stats.icmp);
	PROTO(&k, "udp", lwip_stats.udp);
	PROTO(&k, "tcp", lwip_stats.tcp);
	/* IPv6 (a node of its own with an IPv6 address: docs/ipv6.md). */
	PROTO(&k, "ip6", lwip_stats.ip6);
	PROTO(&k, "ip6frag", lwip_stats.ip6_frag);
	PROTO(&k, "icmp6", lwip_stats.icmp6);
	PROTO(&k, "nd6", lwip_stats.nd6);
	memset(&ts, 0, sizeof(ts));
	if (stk__node.dev)
		stk__node.dev->ops->get_stats(stk__node.dev, &ts);
	put(&k, "dev_rx_frames", ts.rx_frames);
	put(&k, "dev_rx_bytes", ts.rx_bytes);
	put(&k, "dev_rx_errors", ts.rx_errors);
	put(&k, "dev_tx_frames", ts.tx_frames);
	put(&k, "dev_tx_bytes", ts.tx_bytes);
	put(&k, "dev_tx_errors", ts.tx_errors);
	put(&k, "dev_tx_waits", ts.tx_waits);
	put(&k, "dev_rx_wakeups", ts.rx_wakeups);
	put(&k, "dev_rx_dropped", ts.rx_dropped);
	put(&k, "dev_rx_gso", ts.rx_gso);
	put(&k, "dev_tx_gso", ts.tx_gso);
	put(&k, "dev_rx_csum_partial", ts.rx_csum_partial);
	put(&k, "dev_rx_csum_valid", ts.rx_csum_valid);
	put(&k, "dev_rx_bad_vnet", ts.rx_bad_vnet);
	put(&k, "dev_tx_bad_offload", ts.tx_bad_offload);
	put(&k, "dev_rx_lent", ts.rx_lent);
	put(&k, "dev_rx_pool_empty", ts.rx_pool_empty);
	put(&k, "dev_tx_gather", ts.tx_gather);
	put(&k, "dev_spin_enters", ts.spin_enters);
	put(&k, "dev_ring_waits", ts.ring_waits);
	put(&k, "dev_poll_waits", ts.poll_waits);
	put(&k, "dev_rx_read_cqes", ts.rx_read_cqes);
	put(&k, "dev_rx_mshot_cqes", ts.rx_mshot_cqes);
	put(&k, "dev_rx_mshot_arms", ts.rx_mshot_arms);
	put(&k, "dev_rx_mshot_ends", ts.rx_mshot_ends);
	put(&k, "dev_rx_mshot_nobufs", ts.rx_mshot_nobufs);
	put(&k, "dev_rx_mshot_refused", ts.rx_mshot_refused);
	put(&k, "dev_rx_reads_cancelled", ts.rx_reads_cancelled);
	put(&k, "dev_tx_reserve_timeouts", ts.tx_reserve_timeouts);
	put(&k, "dev_rx_reads_replaced", ts.rx_reads_replaced);
	put(&k, "dev_rx_reads_taken_over", ts.rx_reads_taken_over);
	put(&k, "dev_rx_buffers", ts.rx_buffers);
	put(&k, "dev_rx_armed_at_wait", ts.rx_armed_at_wait);
	put(&k, "dev_rx_nowait_cqes", ts.rx_nowait_cqes);
	put(&k, "dev_rx_nowait_again", ts.rx_nowait_again);
	put(&k, "dev_rx_nowait_refused", ts.rx_nowait_refused);
	/* Reading queues no frame and arms no timer: no stack leave, which would flush or
	 * use up a send of the thread's round (uls_tx_batch), so that a program (a test) may
	 * read its counters between the sends of a round without changing what it reads. */
	stk__unlock_raw();
	return (int)k.i;
}
