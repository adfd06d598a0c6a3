/* ICMP errors for TCP connections (hard and soft errors, path MTU discovery) and for UDP
 * sockets.
 *
 * Read first: RFC 1122 §4.2.3.9 (which Destination Unreachable codes are soft, which are
 * hard), RFC 5927 (ICMP attacks against TCP: §4.1 the sequence-number check, §7.2 hard
 * errors in synchronized states treated as soft), RFC 5461 (soft errors), RFC 1191 (path
 * MTU discovery: DF on every segment, §4 the Next-Hop MTU field, §6.1 TCP's actions).
 *
 * lwIP 2.1.3 counts every ICMP error as an unsupported type and drops it. Our patch 0030
 * hands Destination Unreachable, Time Exceeded and Parameter Problem messages here
 * (LWIP_HOOK_ICMP_ERROR_INPUT, from icmp_input() after the IP header was checked and the
 * datagram reassembled), and sets DF on TCP segments (ip4.c). Patch 0031 cuts a segment
 * built for the old MSS to the new one when it is sent again.
 *
 * Linux for comparison (net/ipv4/tcp_ipv4.c, tcp_v4_err): in SYN-SENT every unreachable
 * ends the connect; in synchronized states errors are only remembered (sk_err_soft) and
 * reported if the connection times out. We follow RFC 1122 in SYN-SENT (Deviation below).
 *
 * UDP: RFC 1122 §4.1.3.3, "UDP MUST pass to the application layer all ICMP error messages
 * that it receives from the IP layer." As Linux without IP_RECVERR (net/ipv4/udp.c,
 * __udp4_lib_err): the error becomes the pending error of a connected socket whose
 * datagram it quotes, when Linux calls it fatal; the socket's next recv or send fails with
 * it, once (SO_ERROR reads it too).
 *
 * ICMPv6 (stack/icmp6err.c) reads its messages there and hands what they say about a
 * connection or socket to the same delivery here (stk__icmp_err_deliver): the 4-tuple and
 * sequence checks, the SYN-SENT abort, soft errors, the MSS decrease and the UDP error do
 * not depend on the family.
 */
#include "internal.h"
#include "sock.h"

#include <errno.h>
#include <stdlib.h>

#include "hooks.h"
#include "lwip/inet_chksum.h"
#include "lwip/ip.h"
#include "lwip/nd6.h"
#include "lwip/netif.h"
#include "lwip/pbuf.h"
#include "lwip/priv/tcp_priv.h"
#include "lwip/prot/icmp.h"
#include "lwip/tcp.h"
#include "lwip/udp.h"
#include "netif/wire/wire.h"

/* RFC 792 message types and RFC 792 / RFC 1812 Destination Unreachable codes. */
#define ICMP_T_DEST_UNREACH   3
#define ICMP_T_TIME_EXCEEDED  11
#define ICMP_T_PARAM_PROBLEM  12
#define DU_NET        0
#define DU_HOST       1
#define DU_PROTOCOL   2
#define DU_PORT       3
#define DU_FRAG_NEEDED 4

/* RFC 1191 §3: "A host MUST never reduce its estimate of the Path MTU below 68 octets."
 * Deviation: we never go below 576 (RFC 791's datagram every host must accept, and
 * RFC 1122 §3.3.3's minimum reassembly buffer), and ignore (count) smaller next-hop MTUs:
 * RFC 5927 §7.1 describes attackers forging frag-needed messages with tiny MTUs to make a
 * connection send tiny segments; Linux clamps at 552 (net.ipv4.route.min_pmtu) for the same
 * reason. A message without a next-hop MTU (an RFC 792 router writes 0) is also ignored:
 * the segment is retransmitted at the old size and its timer runs as usual. */
#define PMTU_MIN 576
#define IP_TCP_HDRS 40   /* IPv4 and TCP headers without options: MSS = MTU - 40 */

/* The bytes we read from the message: ICMP header (8), quoted IP header
 * (up to 60), the first 8 octets of the quoted TCP header (RFC 792: "Internet Header + 64
 * bits of Original Data Datagram"). */
#define QUOTE_MAX (WIRE_ICMP_HLEN + WIRE_IPV4_HLEN_MAX + WIRE_ICMP_QUOTE_DATA)


/* The errno a connection reports for this message (Linux's icmp_err_convert table, so
 * that programs see the same values), and whether RFC 1122 calls it hard. */
static int classify(u8_t type, u8_t code, bool *hard)
{
	*hard = false;
	if (type == ICMP_T_TIME_EXCEEDED)
		return -EHOSTUNREACH;  /* RFC 1122 §4.2.3.9: "the same way as ... codes 0, 1, 5" */
	if (type == ICMP_T_PARAM_PROBLEM)
		return -EPROTO;        /* ditto; Deviation: Linux treats it as hard */
	switch (code) {
	case DU_PROTOCOL:
		*hard = true;          /* RFC 1122 §4.2.3.9: "codes 2-4: ... hard error conditions" */
		return -ENOPROTOOPT;
	case DU_PORT:
		*hard = true;
		return -ECONNREFUSED;
	case DU_NET: case 6: case 9: case 11:
		return -ENETUNREACH;
	case 5:
		return -EOPNOTSUPP;
	default:
		/* 1 host, 7 host unknown, 8 isolated, 10, 12, 13-15 prohibited/precedence.
		 * Deviation: Linux treats 6-10 and 13-15 as hard; RFC 1122 names only 2-4. */
		return -EHOSTUNREACH;
	}
}

/* The errno a connected UDP socket gets for this message, or 0 when it gets none: Linux's
 * icmp_err_convert table and its "fatal" column, the only errors udp_err() reports to a
 * socket without IP_RECVERR. Deviation from RFC 1122 §4.1.3.3's "all": network and host
 * unreachable (codes 0, 1, 11, 12), source route failed (5) and time exceeded are
 * transient and not reported, as on Linux; fragmentation needed (4) neither: our UDP
 * datagrams do not carry DF (docs/limits.md). */
static int dgram_errno(u8_t type, u8_t code)
{
	if (type == ICMP_T_PARAM_PROBLEM)
		return -EPROTO;
	if (type != ICMP_T_DEST_UNREACH)
		return 0;
	switch (code) {
	case 2: case 3: case 6: case 7: case 8: case 9: case 10: case 13: case 14: case 15:
		break;
	default:
		return 0;
	}
	static const int err[16] = {
		[0] = ENETUNREACH, [1] = EHOSTUNREACH, [2] = ENOPROTOOPT, [3] = ECONNREFUSED,
		[4] = EMSGSIZE, [5] = EOPNOTSUPP, [6] = ENETUNREACH, [7] = EHOSTDOWN,
		[8] = ENONET, [9] = ENETUNREACH, [10] = EHOSTUNREACH, [11] = ENETUNREACH,
		[12] = EHOSTUNREACH, [13] = EHOSTUNREACH, [14] = EHOSTUNREACH, [15] = EHOSTUNREACH,
	};
	return -err[code];
}

/* An error about a UDP datagram we sent from lport to (remote, rport); err is what a
 * connected socket gets (0: nothing). -ENOENT when no socket holds the port. */
static int dgram_error(int err, const ip_addr_t *remote, u16_t lport, u16_t rport)
{
	struct udp_pcb *pcb, *any = NULL;

	/* The socket connected to the quoted destination, else one bound to the port. */
	for (pcb = udp_pcbs; pcb; pcb = pcb->next) {
		if (pcb->local_port != lport)
			continue;
		if (!(pcb->flags & UDP_FLAGS_CONNECTED)) {
			any = any ? any : pcb;
			continue;
		}
		if (pcb->remote_port == rport && ip_addr_cmp(&pcb->remote_ip, remote))
			break;
	}
	if (!pcb)
		pcb = any;
	if (!pcb) {
		stk__count(STK_CNT_ICMP_ERR_NO_CONN);
		return -ENOENT;
	}
	/* An unconnected socket may talk to many peers: one peer's error does not fail it
	 * (Linux: only with IP_RECVERR, which we do not offer). */
	if (!(pcb->flags & UDP_FLAGS_CONNECTED))
		err = 0;
	if (!err) {
		stk__count(STK_CNT_UDP_ICMP_ERR_IGNORED);
		return 0;
	}
	stk__count(STK_CNT_UDP_ICMP_ERR);
	stk__dgram_icmp_error(pcb->recv_arg, err);
	return 0;
}

static struct tcp_pcb *find_pcb(const ip_addr_t *remote, u16_t lport, u16_t rport)
{
	for (struct tcp_pcb *pcb = tcp_active_pcbs; pcb; pcb = pcb->next)
		if (pcb->local_port == lport && pcb->remote_port == rport &&
		    ip_addr_cmp(&pcb->remote_ip, remote))
			return pcb;
	return NULL;
}

/* RFC 1191 §4: "An attempt to detect an increase (by sending a datagram larger than the
 * current estimate) MUST NOT be done less than 5 minutes after a Datagram Too Big message
 * has been received for the given destination ... We recommend setting these timers at
 * twice their minimum values (10 minutes ...)"; §6.3 (stale PMTU information): the
 * estimate goes back up, here to what the connection had. Per connection here (lwIP has no route cache): the MSS the connection
 * had before its first decrease comes back PMTU_AGE_MS after the latest one, when the
 * next segment arrives for it (stk__pmtu_age, from the input checks), as Linux's
 * ip_rt_mtu_expires (600 s). If the path is still narrow, its router says so again. */
struct pmtu_state {
	uint64_t lowered_at;   /* ms of the latest decrease; 0: none pending */
	u16_t mss_before;      /* the MSS before the first decrease */
};

static u8_t pmtu_ext = LWIP_TCP_PCB_NUM_EXT_ARG_ID_INVALID;

static void pmtu_destroy(u8_t id, void *data)
{
	(void)id;
	free(data);
}

static const struct tcp_ext_arg_callbacks pmtu_cbs = { .destroy = pmtu_destroy };

void stk__icmperr_init(void)
{
	if (pmtu_ext == LWIP_TCP_PCB_NUM_EXT_ARG_ID_INVALID)
		pmtu_ext = tcp_ext_arg_alloc_id();
}

/* Remember a decrease (the MSS before the first one). Without memory the MSS simply
 * stays low, as before aging existed. */
static void pmtu_lowered(struct tcp_pcb *pcb, u16_t old_mss)
{
	struct pmtu_state *st;

	if (pmtu_ext == LWIP_TCP_PCB_NUM_EXT_ARG_ID_INVALID)
		return;
	st = tcp_ext_arg_get(pcb, pmtu_ext);
	if (!st) {
		st = calloc(1, sizeof(*st));
		if (!st)
			return;
		tcp_ext_arg_set_callbacks(pcb, pmtu_ext, &pmtu_cbs);
		tcp_ext_arg_set(pcb, pmtu_ext, st);
	}
	if (!st->lowered_at)
		st->mss_before = old_mss;
	st->lowered_at = stk__now_ms();
}

/* The MSS the path lets the connection come back to. IPv6: lwIP's destination cache keeps
 * the path MTU a Packet Too Big lowered (nd6.c has no aging), and ip6_output would
 * fragment a larger segment, so the MSS comes back only as far as that path MTU allows.
 * Deviation: an IPv6 path MTU is therefore not raised again while its destination cache
 * entry lives (RFC 8201 §4: a node "may" detect increases). */
static u16_t pmtu_ceiling(struct tcp_pcb *pcb, u16_t mss)
{
#if LWIP_IPV6
	if (IP_IS_V6(&pcb->remote_ip)) {
		u16_t mtu = nd6_get_destination_mtu(ip_2_ip6(&pcb->remote_ip),
						    netif_get_by_index(pcb->netif_idx));
		if (mtu > IP6_TCP_HDRS && mss > mtu - IP6_TCP_HDRS)
			mss = (u16_t)(mtu - IP6_TCP_HDRS);
	}
#else
	(void)pcb;
#endif
	return mss;
}

void stk__pmtu_age(struct tcp_pcb *pcb)
{
	struct pmtu_state *st;

	if (pmtu_ext == LWIP_TCP_PCB_NUM_EXT_ARG_ID_INVALID)
		return;
	st = tcp_ext_arg_get(pcb, pmtu_ext);
	if (!st || !st->lowered_at || stk__now_ms() - st->lowered_at < stk__pmtu_age_ms())
		return;
	st->lowered_at = 0;
	if (st->mss_before > pcb->mss) {
		u16_t back = pmtu_ceiling(pcb, st->mss_before);
		if (back > pcb->mss) {
			pcb->mss = back;
			stk__count(STK_CNT_ICMP_PMTU_RAISED);
		}
	}
}

/* tcp_write() must not fill the last unsent pbuf up to the old MSS any more: it keeps
 * the room left in it (TCP_OVERSIZE) to append to. */
static void drop_oversize(struct tcp_pcb *pcb)
{
#if TCP_OVERSIZE
	pcb->unsent_oversize = 0;
#if TCP_OVERSIZE_DBGCHECK
	struct tcp_seg *last = pcb->unsent;
	while (last && last->next)
		last = last->next;
	if (last)
		last->oversize_left = 0;
#endif
#else
	(void)pcb;
#endif
}

/* RFC 1191 §6.1 (TCP layer actions): the connection's MSS follows the new PMTU estimate,
 * and what was dropped for being too big is retransmitted at once without a congestion
 * response (as Linux's tcp_simple_retransmit): the segments in flight go back to the head
 * of the unsent queue, and tcp_output() (patch 0031) cuts each to the new size. Neither
 * cwnd nor ssthresh shrinks: nothing was lost to congestion. */
static void lower_mss(struct tcp_pcb *pcb, u32_t mtu, u16_t hdrs, u16_t mtu_min)
{
	if (mtu == 0 || mtu < mtu_min) {
		stk__count(STK_CNT_ICMP_PMTU_IGNORED);
		return;
	}
	if (mtu >= (u32_t)pcb->mss + hdrs) {
		/* RFC 1191 §3, RFC 8201 §4: it never raises the estimate; a stale message says
		 * nothing new. */
		stk__count(STK_CNT_ICMP_PMTU_IGNORED);
		return;
	}
	pmtu_lowered(pcb, pcb->mss);
	pcb->mss = (u16_t)(mtu - hdrs);
	stk__count(STK_CNT_ICMP_PMTU_LOWERED);
	if (pcb->state == SYN_SENT || pcb->state == SYN_RCVD)
		return;  /* no data yet; the SYN's own retransmission is small */
	bool resend = tcp_rexmit_rto_prepare(pcb) == ERR_OK;
	drop_oversize(pcb);
	if (resend || pcb->unsent)
		tcp_output(pcb);
}

int stk__icmp_err_deliver(const struct stk_icmp_err *m)
{
	const u8_t *th = m->th;

	if (m->proto == IP_PROTO_UDP)
		return dgram_error(m->dgram_err, m->remote, wire_rd16(th), wire_rd16(th + 2));
	struct tcp_pcb *pcb = find_pcb(m->remote, wire_rd16(th), wire_rd16(th + 2));
	if (!pcb) {
		stk__count(STK_CNT_ICMP_ERR_NO_CONN);
		return -ENOENT;
	}
	/* RFC 5927 §4.1: "TCP SHOULD check that the TCP sequence number contained in the
	 * payload of the ICMP error message is within the range SND.UNA =< SEG.SEQ <
	 * SND.NXT." lwIP's lastack is SND.UNA in every state (in SYN-SENT its SYN's own
	 * sequence number, with SND.NXT one above). */
	u32_t seq = wire_rd32(th + WIRE_TCP_OFF_SEQ);
	if (!(TCP_SEQ_GEQ(seq, pcb->lastack) && TCP_SEQ_LT(seq, pcb->snd_nxt))) {
		stk__count(STK_CNT_ICMP_ERR_OUT_OF_WINDOW);
		return -ERANGE;
	}
	if (m->too_big) {
		lower_mss(pcb, m->mtu, m->hdrs, m->mtu_min);
		return 0;
	}
	bool hard = m->hard;
	int err = m->err;
	if (hard && pcb->state == SYN_SENT) {
		/* RFC 1122 §4.2.3.9: "codes 2-4: These are hard error conditions, so TCP SHOULD
		 * abort the connection." connect() fails with the error (ECONNREFUSED for a port
		 * unreachable), as on Linux. */
		stk__count(STK_CNT_ICMP_ERR_HARD);
		stk__stream_icmp_error(pcb, err);
		tcp_abandon(pcb, 0);  /* no RST: the peer's port is closed, as Linux's tcp_done */
		return 0;
	}
	/* RFC 1122 §4.2.3.9: soft errors: "TCP MUST NOT abort the connection, and it SHOULD make
	 * the information available to the application"; reported when the connection times
	 * out (as Linux reports sk_err_soft). RFC 5927 §7.2: hard errors in synchronized
	 * states are treated as soft too, so a forged port unreachable cannot reset an
	 * established connection. */
	stk__count(STK_CNT_ICMP_ERR_SOFT);
	stk__stream_icmp_error(pcb, err);
	return 0;
}

/* Called by icmp_input() (patch 0030) for Destination Unreachable, Time Exceeded and
 * Parameter Problem; p->payload is the ICMP header. Returns 1: the message was ours to
 * judge (handled or counted), lwIP only frees it. */
int stk__icmp_error_input(struct pbuf *p, struct netif *inp)
{
	u8_t b[QUOTE_MAX];
	u16_t n = pbuf_copy_partial(p, b, sizeof(b), 0);

	struct wire_icmp icmp;
	struct wire_ipv4 ip;

	/* RFC 792: the quote is "the internet header plus the first 64 bits of the original
	 * datagram's data". */
	if (wire_icmp_view(&icmp, b, n) < 0 || inet_chksum_pbuf(p) != 0 ||
	    wire_ipv4_view_quoted(&ip, icmp.body, icmp.body_len) < 0 ||
	    ip.data_len < WIRE_ICMP_QUOTE_DATA) {
		stk__count(STK_CNT_ICMP_ERR_MALFORMED);
		return 1;
	}
	ip4_addr_t src;
	ip4_addr_set_u32(&src, ip.src);
	/* The quoted datagram must be one we sent (RFC 5927 §4.1's first check is the 4-tuple,
	 * the source address ours), of TCP or UDP, and its first fragment (the ports). */
	if ((ip.proto != WIRE_IPPROTO_TCP && ip.proto != WIRE_IPPROTO_UDP) ||
	    wire_ipv4_frag_offset(&ip) != 0 || !ip4_addr_cmp(&src, netif_ip4_addr(inp))) {
		stk__count(STK_CNT_ICMP_ERR_NO_CONN);
		return 1;
	}
	ip_addr_t dst;
	ip_addr_set_ip4_u32_val(dst, ip.dst);
	struct stk_icmp_err m = {
		.remote = &dst, .proto = ip.proto, .th = ip.data,
		.dgram_err = dgram_errno(icmp.type, icmp.code),
	};
	if (icmp.type == ICMP_T_DEST_UNREACH && icmp.code == DU_FRAG_NEEDED) {
		m.too_big = true;
		m.mtu = wire_rd16(icmp.rest + 2);  /* RFC 1191 §4: Next-Hop MTU */
		m.hdrs = IP_TCP_HDRS;
		m.mtu_min = PMTU_MIN;
	} else {
		m.err = classify(icmp.type, icmp.code, &m.hard);
	}
	stk__icmp_err_deliver(&m);
	return 1;
}
