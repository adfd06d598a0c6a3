/* TCP input checks: what lwIP 2.1.3 must not act on before it has checked it.
 *
 * Read first: RFC 9293 §3.10.7.4 (segment arrives in a synchronized state: first the
 * sequence number, then RST, then SYN, then the ACK bit and the ACK field), RFC 5961
 * (blind in-window attacks: §3 RST, §4 SYN, §5 ACK, §7 ACK throttling), RFC 7323 §5
 * (PAWS) and §4.3 (TS.Recent).
 *
 * lwIP calls stk__tcp_inpacket() (LWIP_HOOK_TCP_INPACKET_PCB) for each segment that
 * matched a pcb, after the checksum and header checks and before tcp_process(). lwIP
 * itself takes the send window and the ACK from a segment before it checks the segment's
 * sequence number, accepts data without the ACK bit, and has neither PAWS nor the RFC
 * 5961 ACK check: one spoofed segment with a far sequence number and a zero window
 * stalled a connection for good. Here every segment of a synchronized connection goes
 * through the checks in RFC 9293's order; what fails is dropped and counted, and the ACK
 * the RFCs ask for is sent (within a per-connection budget, RFC 5961 §7). What passes is
 * processed by lwIP unchanged.
 *
 * TIME-WAIT is left to lwIP's tcp_timewait_input() (and to the RFC 6191 work).
 */
#include "internal.h"

#include <stdlib.h>

#include "hooks.h"
#include "lwip/priv/tcp_priv.h"
#include "lwip/prot/tcp.h"
#include "lwip/tcp.h"

/* RFC 5961 §7: "An implementation SHOULD include an ACK throttling mechanism to be
 * conservative." Per connection, not per process: a counter shared by all connections
 * is the side channel of CVE-2016-5696 (Linux's per-host limit, now off by default; its
 * per-socket limit stays). Each connection may send CHALLENGE_ACK_LIMIT ACKs for segments
 * it drops per CHALLENGE_ACK_PERIOD_MS; more are withheld and counted. The budget covers
 * challenge ACKs (RST §3.2, SYN §4.2, ACK §5.2) and the ACK owed for an unacceptable
 * segment without data (seen in ACK loops); a segment with data always gets its ACK, as
 * RFC 9293 §3.10.7.4 asks, since a sender retransmitting data is not a loop. */
#define CHALLENGE_ACK_LIMIT      10
#define CHALLENGE_ACK_PERIOD_MS  5000u

/* RFC 7323 §5.5: TS.Recent is invalid once the connection has been idle (TS.Recent not
 * updated) for 24 days; the timestamp clock may have wrapped since. */
#define PAWS_IDLE_MS             (24ull * 24 * 3600 * 1000)

struct conn_checks {
	uint64_t ts_recent_at;    /* when TS.Recent was last taken from a segment (ms) */
	uint64_t budget_start;    /* start of the current throttling period (ms) */
	uint16_t budget_used;     /* ACKs for dropped segments sent in that period */
};

static u8_t ext_id = LWIP_TCP_PCB_NUM_EXT_ARG_ID_INVALID;

static void on_destroy(u8_t id, void *data)
{
	(void)id;
	free(data);
}

static const struct tcp_ext_arg_callbacks ext_cbs = { .destroy = on_destroy };

void stk__tcp_checks_init(void)
{
	if (ext_id == LWIP_TCP_PCB_NUM_EXT_ARG_ID_INVALID)
		ext_id = tcp_ext_arg_alloc_id();
}

void stk__tcp_note(enum stk_tcp_note what)
{
	static const enum stk_counter map[] = {
		[STK_TCP_NOTE_MSS_NONSYN] = STK_CNT_TCP_MSS_NONSYN,
		[STK_TCP_NOTE_MSS_CLAMPED] = STK_CNT_TCP_MSS_CLAMPED,
		[STK_TCP_NOTE_OOSEQ_TRIMMED] = STK_CNT_TCP_OOSEQ_TRIMMED,
		[STK_TCP_NOTE_OOSEQ_LIMIT] = STK_CNT_TCP_OOSEQ_LIMIT,
		[STK_TCP_NOTE_PAST_FIN] = STK_CNT_TCP_PAST_FIN_DROPPED,
		[STK_TCP_NOTE_SIMOPEN] = STK_CNT_TCP_SIMULTANEOUS_OPEN,
		[STK_TCP_NOTE_RTO] = STK_CNT_TCP_RTO,
		[STK_TCP_NOTE_RECOVERY_SACK] = STK_CNT_TCP_RECOVERY_SACK,
		[STK_TCP_NOTE_RECOVERY_NEWRENO] = STK_CNT_TCP_RECOVERY_NEWRENO,
		[STK_TCP_NOTE_REXMIT] = STK_CNT_TCP_REXMIT,
		[STK_TCP_NOTE_TLP] = STK_CNT_TCP_TLP,
		[STK_TCP_NOTE_TLP_REPAIRED] = STK_CNT_TCP_TLP_REPAIRED,
		[STK_TCP_NOTE_RACK_TAIL] = STK_CNT_TCP_RACK_TAIL,
		[STK_TCP_NOTE_REXMIT_LOST] = STK_CNT_TCP_REXMIT_LOST,
		[STK_TCP_NOTE_RTO_SPURIOUS] = STK_CNT_TCP_RTO_SPURIOUS,
		[STK_TCP_NOTE_FR_SPURIOUS] = STK_CNT_TCP_FR_SPURIOUS,
		[STK_TCP_NOTE_DELAYED_ACK] = STK_CNT_TCP_DELAYED_ACK_TIMER,
	};

	if ((unsigned)what < sizeof(map) / sizeof(map[0]))
		stk__count(map[what]);
}

/* A loss-recovery event of pcb: counted node-wide, and a retransmission (a range sent again,
 * or the retransmission timer's resend) also per connection (ulsstat's `retransmits`). */
void stk__tcp_loss_note(struct tcp_pcb *pcb, enum stk_tcp_note what)
{
	stk__tcp_note(what);
	if (what == STK_TCP_NOTE_REXMIT || what == STK_TCP_NOTE_RTO)
		stk__ep_count_rexmit(pcb);
}

/* The connection's check state, made on its first checked segment. NULL only when memory
 * ran out: the checks still run, without a budget (every owed ACK is sent). */
static struct conn_checks *conn_state(struct tcp_pcb *pcb, uint64_t now)
{
	struct conn_checks *c;

	if (ext_id == LWIP_TCP_PCB_NUM_EXT_ARG_ID_INVALID)
		return NULL;
	c = tcp_ext_arg_get(pcb, ext_id);
	if (c)
		return c;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->ts_recent_at = now;  /* TS.Recent came with the SYN */
	c->budget_start = now;
	tcp_ext_arg_set_callbacks(pcb, ext_id, &ext_cbs);
	tcp_ext_arg_set(pcb, ext_id, c);
	return c;
}

/* RFC 5961 §7: may this connection send one more ACK for a segment it drops? */
bool stk__tcp_ack_budget(uint64_t *start, uint16_t *used, uint64_t now)
{
	if (now - *start >= CHALLENGE_ACK_PERIOD_MS) {
		*start = now;
		*used = 0;
	}
	if (*used >= CHALLENGE_ACK_LIMIT)
		return false;
	(*used)++;
	return true;
}

/* Send the ACK owed for a dropped segment, <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>, if the
 * budget allows (always when limited is false). */
static void owed_ack(struct tcp_pcb *pcb, struct conn_checks *c, uint64_t now, bool limited,
		     bool challenge)
{
	if (limited && c && !stk__tcp_ack_budget(&c->budget_start, &c->budget_used, now)) {
		stk__count(STK_CNT_TCP_CHALLENGE_ACK_LIMITED);
		return;
	}
	if (challenge)
		stk__count(STK_CNT_TCP_CHALLENGE_ACK_SENT);
	tcp_send_empty_ack(pcb);
}

/* RFC 2883 §4: data below RCV.NXT that arrives again is reported in the ACK it draws, as
 * the first SACK block (patch 0139 writes it). §4.3: "The D-SACK block can be included in
 * the SACK option of the ACK, as outlined in Section 4, independently of the use of PAWS by
 * the TCP receiver", so a segment PAWS refuses is reported too. Only the part below RCV.NXT:
 * a refused segment may reach past it when the window is zero. */
static void note_duplicate(struct tcp_pcb *pcb, uint32_t seq, uint32_t datalen)
{
#if LWIP_TCP_SACK_OUT
	uint32_t end = seq + datalen;

	if (datalen == 0 || !TCP_SEQ_LT(seq, pcb->rcv_nxt))
		return;
	if (TCP_SEQ_GT(end, pcb->rcv_nxt))
		end = pcb->rcv_nxt;
	tcp_dsack_note(pcb, seq, end);
#else
	(void)pcb, (void)seq, (void)datalen;
#endif
}

/* RFC 7323 §5.3 R1 and §5.5: reject a segment whose TSval is older than TS.Recent, unless
 * TS.Recent has gone stale (not updated for 24 days), which *expired reports. Sequence
 * space arithmetic: "older" is TSval - TS.Recent < 0 as a signed 32-bit number. */
bool stk__tcp_paws_reject(uint32_t tsval, uint32_t ts_recent, uint64_t now,
			  uint64_t ts_recent_at, bool *expired)
{
	*expired = false;
	if ((int32_t)(tsval - ts_recent) >= 0)
		return false;
	if (now - ts_recent_at > PAWS_IDLE_MS) {
		*expired = true;
		return false;
	}
	return true;
}

/* RFC 9293 §3.10.7.4, "first check sequence number": the four cases of its table, with
 * RCV.WND the window we offered (the larger of lwIP's free space and the right edge it
 * last announced, which it must not retract, §3.8.6). A segment that starts exactly at
 * RCV.NXT passes while the window is zero: "special allowance should be made to accept
 * valid ACKs, URGs, and RSTs"; lwIP then acknowledges its data without taking it (a
 * zero-window probe), but reads its ACK and window. Linux does the same. */
bool stk__tcp_seq_acceptable(uint32_t seq, uint32_t len, uint32_t rcv_nxt, uint32_t rcv_wnd)
{
	if (rcv_wnd == 0)
		return seq == rcv_nxt;
	if (seq - rcv_nxt < rcv_wnd)
		return true;
	return len > 0 && seq + len - 1 - rcv_nxt < rcv_wnd;
}

/* RFC 5961 §5.2: "The ACK value is considered acceptable only if it is in the range of
 * ((SND.UNA - MAX.SND.WND) =< SEG.ACK =< SND.NXT)." */
bool stk__tcp_ack_acceptable(uint32_t ack, uint32_t snd_una, uint32_t snd_nxt,
			     uint32_t max_snd_wnd)
{
	uint32_t low = snd_una - max_snd_wnd;

	return ack - low <= snd_nxt - low;
}

static uint32_t offered_window(const struct tcp_pcb *pcb)
{
	uint32_t wnd = pcb->rcv_wnd;
	uint32_t ann = pcb->rcv_ann_right_edge - pcb->rcv_nxt;

	if ((int32_t)ann > 0 && ann > wnd)
		wnd = ann;
	return wnd;
}

/* The TSval of the segment's Timestamps option, if it has a well-formed one. The options
 * lie in [hdr + 20, +opt1len) and, when split across pbufs, [opt2, +optlen - opt1len). */
static bool find_tsval(const struct tcp_hdr *hdr, u16_t optlen, u16_t opt1len,
		       const u8_t *opt2, uint32_t *tsval)
{
	const u8_t *first = (const u8_t *)hdr + TCP_HLEN;
	u8_t b[40];
	u16_t i = 0;

	if (optlen > sizeof(b) || opt1len > optlen)
		return false;
	for (u16_t k = 0; k < optlen; k++)
		b[k] = k < opt1len ? first[k] : opt2 ? opt2[k - opt1len] : 0;
	if (!opt2 && opt1len < optlen)
		return false;
	while (i < optlen) {
		u8_t kind = b[i];
		if (kind == LWIP_TCP_OPT_EOL)
			return false;
		if (kind == LWIP_TCP_OPT_NOP) {
			i++;
			continue;
		}
		if (i + 1 >= optlen || b[i + 1] < 2 || i + b[i + 1] > optlen)
			return false;
		if (kind == LWIP_TCP_OPT_TS && b[i + 1] == LWIP_TCP_OPT_LEN_TS) {
			*tsval = (uint32_t)b[i + 2] << 24 | (uint32_t)b[i + 3] << 16 |
				 (uint32_t)b[i + 4] << 8 | b[i + 5];
			return true;
		}
		i = (u16_t)(i + b[i + 1]);
	}
	return false;
}

/* RFC 5961 §3.2 for a RST in a synchronized state (or SYN-RECEIVED): outside the window,
 * drop it silently (rule 1); exactly RCV.NXT, let lwIP reset the connection (rule 2);
 * anywhere else in the window, a challenge ACK (rule 3). */
static err_t check_rst(struct tcp_pcb *pcb, struct conn_checks *c, uint32_t seq, uint32_t len,
		       uint64_t now)
{
	if (!stk__tcp_seq_acceptable(seq, len, pcb->rcv_nxt, offered_window(pcb))) {
		stk__count(STK_CNT_TCP_RST_OUT_OF_WINDOW);
		return ERR_ABRT;
	}
	if (seq == pcb->rcv_nxt)
		return ERR_OK;
	stk__count(STK_CNT_TCP_RST_CHALLENGED);
	owed_ack(pcb, c, now, true, true);
	return ERR_ABRT;
}

/* RFC 5961 §4.2: "If the SYN bit is set, irrespective of the sequence number, TCP MUST
 * send an ACK (also referred to as challenge ACK) to the remote peer ... After sending
 * the acknowledgment, TCP MUST drop the unacceptable segment and stop processing further."
 * (RFC 9293 §3.10.7.4, fourth, the same.) */
static err_t challenge_syn(struct tcp_pcb *pcb, struct conn_checks *c, uint64_t now)
{
	stk__count(STK_CNT_TCP_SYN_CHALLENGED);
	owed_ack(pcb, c, now, true, true);
	return ERR_ABRT;
}

static err_t check_synchronized(struct tcp_pcb *pcb, const struct tcp_hdr *hdr, u16_t optlen,
				u16_t opt1len, const u8_t *opt2, const struct pbuf *p)
{
	uint8_t fl = TCPH_FLAGS(hdr);
	uint32_t seq = hdr->seqno, ack = hdr->ackno;
	uint32_t datalen = p->tot_len;
	uint32_t len = datalen + !!(fl & TCP_SYN) + !!(fl & TCP_FIN);
	uint64_t now = stk__now_ms();
	struct conn_checks *c = conn_state(pcb, now);
	uint32_t tsval = 0;
	bool has_ts = (pcb->flags & TF_TIMESTAMP) && find_tsval(hdr, optlen, opt1len, opt2, &tsval);

	/* RSTs are not subject to PAWS (RFC 7323 §5.3 R1: "... and the RST bit is not set").
	 * RFC 9293 checks a RST's sequence number before anything else about it. */
	if (fl & TCP_RST)
		return check_rst(pcb, c, seq, len, now);
	if (fl & TCP_SYN)
		return challenge_syn(pcb, c, now);

	/* RFC 7323 §5.3 R1: "If there is a Timestamps option in the arriving segment,
	 * SEG.TSval < TS.Recent, TS.Recent is valid (see later discussion), and the RST bit is
	 * not set, then treat the arriving segment as not acceptable: Send an acknowledgment in
	 * reply as specified in [RFC793], page 69 and drop the segment." */
	if (has_ts) {
		bool expired;
		if (stk__tcp_paws_reject(tsval, pcb->ts_recent, now, c ? c->ts_recent_at : now,
					 &expired)) {
			stk__count(STK_CNT_TCP_PAWS_DROPPED);
			note_duplicate(pcb, seq, datalen);
			owed_ack(pcb, c, now, datalen == 0, false);
			return ERR_ABRT;
		}
		if (expired)
			stk__count(STK_CNT_TCP_TS_RECENT_EXPIRED);
	}

	/* RFC 9293 §3.10.7.4, first: "If an incoming segment is not acceptable, an
	 * acknowledgment should be sent in reply (unless the RST bit is set, if so drop the
	 * segment and return) ... After sending the acknowledgment, drop the unacceptable
	 * segment and return." Nothing of it reaches lwIP: not its window, not its ACK. */
	if (!stk__tcp_seq_acceptable(seq, len, pcb->rcv_nxt, offered_window(pcb))) {
		stk__count(STK_CNT_TCP_SEQ_UNACCEPTABLE);
		/* Data received already, coming again: a retransmission, most often a tail
		 * loss probe sent because our ACK of it was lost. With one ACK per receive
		 * batch (patch 0088) each lost ACK can stall the sender until such a probe, so
		 * the next in-order segments are acknowledged one by one (patch 0091). */
		if (datalen > 0 && TCP_SEQ_LEQ(seq + len, pcb->rcv_nxt))
			pcb->quickack = TCP_QUICKACK_SEGS;
		note_duplicate(pcb, seq, datalen);
		owed_ack(pcb, c, now, datalen == 0, false);
		return ERR_ABRT;
	}

	/* RFC 9293 §3.10.7.4, fifth: "if the ACK bit is off, drop the segment and return". */
	if (!(fl & TCP_ACK)) {
		stk__count(STK_CNT_TCP_NO_ACK_DROPPED);
		return ERR_ABRT;
	}

	/* RFC 5961 §5.2: "All incoming segments whose ACK value doesn't satisfy the above
	 * condition MUST be discarded and an ACK sent back." This covers RFC 9293's "If the
	 * ACK acks something not yet sent (SEG.ACK > SND.NXT), then send an ACK, drop the
	 * segment, and return": its data and FIN are not processed either. */
	if (!stk__tcp_ack_acceptable(ack, pcb->lastack, pcb->snd_nxt, pcb->snd_wnd_max)) {
		stk__count(STK_CNT_TCP_ACK_UNACCEPTABLE);
		owed_ack(pcb, c, now, true, true);
		return ERR_ABRT;
	}

	/* The segment is acceptable: lwIP's tcp_parseopt() takes its TSval as TS.Recent when
	 * SEG.SEQ <= Last.ACK.sent <= SEG.SEQ + SEG.LEN (RFC 7323 §5.3 R3 for an acceptable
	 * segment, whose TSval PAWS has just found not older). Note when, for §5.5. */
	if (has_ts && c && TCP_SEQ_BETWEEN(pcb->ts_lastacksent, seq, seq + len))
		c->ts_recent_at = now;
	return ERR_OK;
}

/* SYN-RECEIVED: lwIP answers a retransmitted SYN with its SYN,ACK again and completes a
 * simultaneous open on the peer's SYN,ACK (patch 0013); any other SYN gets a challenge
 * ACK (RFC 5961 §4.2) instead of being read as a new handshake's options. A RST is checked
 * as in a synchronized state; a segment with neither ACK nor SYN nor RST is dropped. */
static err_t check_syn_rcvd(struct tcp_pcb *pcb, const struct tcp_hdr *hdr,
			    const struct pbuf *p)
{
	uint8_t fl = TCPH_FLAGS(hdr);
	uint64_t now = stk__now_ms();
	struct conn_checks *c = conn_state(pcb, now);
	uint32_t len = p->tot_len + !!(fl & TCP_SYN) + !!(fl & TCP_FIN);

	if (fl & TCP_RST)
		return check_rst(pcb, c, hdr->seqno, len, now);
	if (fl & TCP_SYN) {
		if (hdr->seqno == pcb->rcv_nxt - 1 &&
		    (!(fl & TCP_ACK) || hdr->ackno == pcb->snd_nxt))
			return ERR_OK;
		return challenge_syn(pcb, c, now);
	}
	if (!(fl & TCP_ACK)) {
		stk__count(STK_CNT_TCP_NO_ACK_DROPPED);
		return ERR_ABRT;
	}
	return ERR_OK;
}

/* LWIP_HOOK_TCP_INPACKET_PCB: ERR_OK lets lwIP process the segment, anything else drops
 * it (lwIP frees it). Runs under the core lock, with the header in host byte order. */
err_t stk__tcp_inpacket(struct tcp_pcb *pcb, struct tcp_hdr *hdr, u16_t optlen, u16_t opt1len,
			u8_t *opt2, struct pbuf *p)
{
	switch (pcb->state) {
	case ESTABLISHED:
	case FIN_WAIT_1:
	case FIN_WAIT_2:
	case CLOSE_WAIT:
	case CLOSING:
	case LAST_ACK:
		stk__pmtu_age(pcb);  /* RFC 1191 §6.3 (icmperr.c) */
		return check_synchronized(pcb, hdr, optlen, opt1len, opt2, p);
	case SYN_RCVD:
		return check_syn_rcvd(pcb, hdr, p);
	default:
		return ERR_OK;
	}
}
