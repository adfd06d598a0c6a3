/* Declarations for the functions lwIP calls through its hooks (LWIP_HOOK_FILENAME). */
#ifndef ULS_STACK_HOOKS_H
#define ULS_STACK_HOOKS_H

#include "lwip/err.h"
#include "lwip/ip_addr.h"

u32_t stk__tcp_isn(const ip_addr_t *local_ip, u16_t local_port,
                   const ip_addr_t *remote_ip, u16_t remote_port);

/* Segmentation offload (stack/tso.c, stack/patches/0006). */
struct tcp_pcb;
struct netif;
u16_t stk__tso_size(const struct tcp_pcb *pcb);
u16_t stk__tso_unit(const struct tcp_pcb *pcb);
u32_t stk__tso_abc_limit(const struct tcp_pcb *pcb);
void stk__tso_output(const struct tcp_pcb *pcb);
int stk__tso_ip4_output_whole(const struct netif *netif, u8_t proto);

/* IPv6 next hops (stack/core.c, patch 0107): the node's default router for what is not
 * on-link, and on-link by the configured prefix length instead of lwIP's /64. */
const ip6_addr_t *stk__nd6_gateway(struct netif *netif, const ip6_addr_t *dest);
int stk__nd6_static_onlink(struct netif *netif, s8_t i, const ip6_addr_t *dest);

/* One tcp_output() per connection per receive batch (stack/outbatch.c, patch 0088). */
int stk__outbatch_defer(struct tcp_pcb *pcb);
void stk__outbatch_forget(struct tcp_pcb *pcb);


/* TCP input checks (stack/tcp_checks.c): what lwIP's input path reports from our patches
 * (LWIP_HOOK_TCP_INPUT_NOTE, patches 0010-0019), each counted by name. */
enum stk_tcp_note {
	STK_TCP_NOTE_MSS_NONSYN,     /* MSS option in a segment without SYN, ignored */
	STK_TCP_NOTE_MSS_CLAMPED,    /* MSS option below the floor, raised to it */
	STK_TCP_NOTE_OOSEQ_TRIMMED,  /* out-of-order data beyond the window, cut off */
	STK_TCP_NOTE_OOSEQ_LIMIT,    /* out-of-order segment past TCP_OOSEQ_MAX_SEGS (0128) */
	STK_TCP_NOTE_PAST_FIN,       /* data beyond the peer's FIN, cut off */
	STK_TCP_NOTE_SIMOPEN,        /* SYN-SENT received a SYN: simultaneous open */
	/* loss recovery of the sending side (LWIP_HOOK_TCP_LOSS_NOTE, patches 0022-0029) */
	STK_TCP_NOTE_RTO,              /* the retransmission timer expired (data) */
	STK_TCP_NOTE_RECOVERY_SACK,    /* RFC 6675 loss recovery entered */
	STK_TCP_NOTE_RECOVERY_NEWRENO, /* RFC 6582 loss recovery entered */
	STK_TCP_NOTE_REXMIT,           /* a segment resent in recovery (not by the RTO) */
	STK_TCP_NOTE_TLP,              /* RFC 8985 tail loss probe sent */
	STK_TCP_NOTE_TLP_REPAIRED,     /* a retransmitted probe repaired a loss */
	STK_TCP_NOTE_RACK_TAIL,        /* octets below a SACKed probe declared lost */
	STK_TCP_NOTE_REXMIT_LOST,      /* recovery's retransmissions declared lost again */
	STK_TCP_NOTE_RTO_SPURIOUS,     /* a timeout found spurious and undone (patch 0130) */
	STK_TCP_NOTE_FR_SPURIOUS,      /* a fast retransmit found spurious (0140)   */
	/* timers (LWIP_HOOK_TCP_TIMER_NOTE, patch 0113) */
	STK_TCP_NOTE_DELAYED_ACK,      /* an ACK sent by the delayed-ACK timer (tcp_fasttmr) */
};
void stk__tcp_note(enum stk_tcp_note what);
void stk__tcp_loss_note(struct tcp_pcb *pcb, enum stk_tcp_note what);
struct tcp_hdr;
struct pbuf;
err_t stk__tcp_inpacket(struct tcp_pcb *pcb, struct tcp_hdr *hdr, u16_t optlen, u16_t opt1len,
                        u8_t *opt2, struct pbuf *p);

/* SYN retransmissions before connect gives up (stack/tcpconf.c, stack/patches/0020). */
u8_t stk__syn_retries(void);

/* ICMP errors for TCP connections (stack/icmperr.c, stack/patches/0030). */
int stk__icmp_error_input(struct pbuf *p, struct netif *inp);
/* ICMPv6 errors for TCP connections and UDP sockets (stack/icmp6err.c, stack/patches/0106):
 * 1 when the message was taken (handled or counted), 0 for a genuine Packet Too Big that
 * nd6_input is to apply to the destination cache. */
int stk__icmp6_error_input(struct pbuf *p, struct netif *inp);
/* RFC 1191 §4, §6.3: a lowered MSS comes back after stk__pmtu_age_ms() (tcpconf.c). */
void stk__pmtu_age(struct tcp_pcb *pcb);
uint64_t stk__pmtu_age_ms(void);

/* IPv4 reassembly (stack/tcpconf.c, stack/patches/0050): the timeout in seconds, and what
 * lwIP's reassembly reports (LWIP_HOOK_IP4_REASS_NOTE), each counted by name. */
u8_t stk__ip_reass_maxage(void);
u8_t stk__ip6_reass_maxage(void);
enum stk_reass_note {
	STK_REASS_NOTE_OVERLAP,    /* overlapping fragment: the whole datagram dropped */
	STK_REASS_NOTE_DUPLICATE,  /* the same fragment again: that copy dropped */
	STK_REASS_NOTE_TIMEOUT,    /* incomplete datagram expired */
	STK_REASS_NOTE_LIMIT,      /* the bound on datagrams or pbufs held was reached */
};
void stk__ip_reass_note(enum stk_reass_note what);

/* SYN floods (stack/syncookie.c, stack/patches/0090): what a SYN to a listener gets, and
 * the SYN cookies of RFC 4987 §3.6. */
struct tcp_pcb_listen;
struct tcp_syncookie;
u8_t stk__syn_admit(struct tcp_pcb_listen *lpcb);
void stk__syncookie_make(struct tcp_pcb_listen *lpcb, struct tcp_syncookie *c);
int stk__syncookie_check(struct tcp_pcb_listen *lpcb, struct tcp_syncookie *c);
void stk__syncookie_acceptq_full(struct tcp_pcb_listen *lpcb);

#endif
