/* Frames the node sends itself, for packets no process owns.
 *
 * Read first: RFC 826 (ARP), RFC 792 and RFC 1122 §3.2.2 (ICMP), RFC 9293 §3.10.7.1 (a
 * segment for a CLOSED connection).
 *
 * Every function here runs with s->lock held and reads only fields that flt_parse() has
 * bounds-checked.
 */
#include "server/internal.h"

#include <arpa/inet.h>
#include <string.h>
#include <sys/random.h>

#include "netif/wire/wire.h"

#define ETH_HLEN     WIRE_ETH_HLEN
#define IP_HLEN      WIRE_IPV4_HLEN_MIN   /* the node sends no IPv4 options */
#define TCP_HLEN     WIRE_TCP_HLEN_MIN    /* nor TCP options */
#define ICMP_HLEN    WIRE_ICMP_HLEN
#define ICMP_RATE_PER_S SRV_ICMP_RATE_PER_S   /* RFC 1122 §3.2.2: ICMP errors SHOULD be rate-limited */
/* Resets for segments nobody owns, per second. Deviation: RFC 9293 §3.10.7.1 answers every
 * one; a flood of spoofed SYNs to a closed port would have ulsd's demultiplexer thread,
 * which also relays data, answer each (50,000/s took a fifth of a core). FreeBSD bounds
 * these resets too (net.inet.icmp.icmplim, 200/s); Linux does not. */
#define RST_RATE_PER_S  SRV_RST_RATE_PER_S
#define ICMP_QUOTE_MAX  (576 - IP_HLEN - ICMP_HLEN)  /* RFC 1812 §4.3.2.3 */

/* An IPv4 header without options; addresses in network order. The Identification is
 * random: the node keeps no per-destination counter (RFC 6864 §4.1 lets an atomic
 * datagram's be anything; errors and resets are not fragmented by us). */
static void put_ipv4(uint8_t *ip, uint8_t proto, uint32_t src, uint32_t dst, uint16_t total)
{
	uint16_t id;

	if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != sizeof(id))
		id = (uint16_t)srv__now_ms();
	wire_ipv4_write(ip, proto, src, dst, total, id, WIRE_IPV4_DEFAULT_TTL);
}

/* A segment without options or data, its checksum over the pseudo-header (RFC 9293 §3.1);
 * wnd: its window field. */
static void send_tcp(struct srv *s, const uint8_t dst_mac[WIRE_ETH_ALEN], uint32_t dst_ip,
		     uint16_t sport, uint16_t dport, uint32_t seq, uint32_t ack, uint8_t flags,
		     uint16_t wnd)
{
	uint8_t f[ETH_HLEN + IP_HLEN + TCP_HLEN];
	uint8_t *ip = f + ETH_HLEN, *tcp = ip + IP_HLEN;
	uint32_t sum;

	wire_eth_write(f, dst_mac, s->mac, WIRE_ETHERTYPE_IPV4);
	put_ipv4(ip, WIRE_IPPROTO_TCP, s->ip, dst_ip, IP_HLEN + TCP_HLEN);
	wire_tcp_write(tcp, sport, dport, seq, ack, flags, wnd);
	sum = wire_sum_pseudo4(0, s->ip, dst_ip, WIRE_IPPROTO_TCP, TCP_HLEN);
	wire_wr16(tcp + WIRE_TCP_OFF_CHECKSUM, wire_sum_finish(wire_sum(sum, tcp, TCP_HLEN)));
	srv__send_frame(s, f, sizeof(f));
}

void srv__reply_arp(struct srv *s, const struct flt_pkt *p)
{
	uint8_t f[ETH_HLEN + WIRE_ARP_LEN];

	/* RFC 826: answer requests for our address, swapping sender and target. A request
	 * for another station's address is that station's to answer. */
	if (p->arp.op != WIRE_ARP_OP_REQUEST || p->arp.tpa != s->ip) {
		s->ctr.v[SRV_DROP_ARP_NOT_FOR_NODE]++;
		return;
	}
	wire_eth_write(f, p->arp.sha, s->mac, WIRE_ETHERTYPE_ARP);
	wire_arp_write(f + ETH_HLEN, WIRE_ARP_OP_REPLY, s->mac, s->ip, p->arp.sha, p->arp.spa);
	srv__send_frame(s, f, sizeof(f));
	s->ctr.v[SRV_ARP_REPLIES]++;
}

/* RFC 1122 §3.2.2.6: an echo reply returns the request's data unchanged. */
void srv__reply_echo(struct srv *s, const uint8_t *frame, size_t len, const struct flt_pkt *p)
{
	uint8_t f[ETH_HLEN + 65535];
	size_t icmp_len = (size_t)p->ip.total - p->ip.hlen;

	/* Not for a fragment (reass.c has the whole datagram's), nor for a broadcast
	 * (RFC 1122 §3.2.2.6: MAY be silently discarded; Linux's icmp_echo_ignore_broadcasts
	 * default). */
	if (p->ip.fragment || p->icmp.type != WIRE_ICMP_ECHO || p->ip.dst != s->ip ||
	    p->l4_off + icmp_len > len) {
		s->ctr.v[SRV_DROP_ECHO_UNANSWERED]++;
		return;
	}
	wire_eth_write(f, p->src_mac, s->mac, WIRE_ETHERTYPE_IPV4);
	put_ipv4(f + ETH_HLEN, WIRE_IPPROTO_ICMP, s->ip, p->ip.src, (uint16_t)(IP_HLEN + icmp_len));
	uint8_t *icmp = f + ETH_HLEN + IP_HLEN;
	memcpy(icmp, frame + p->l4_off, icmp_len);
	icmp[WIRE_ICMP_OFF_TYPE] = WIRE_ICMP_ECHO_REPLY;
	wire_wr16(icmp + WIRE_ICMP_OFF_CHECKSUM, 0);
	wire_wr16(icmp + WIRE_ICMP_OFF_CHECKSUM, wire_sum_finish(wire_sum(0, icmp, icmp_len)));
	srv__send_ip4(s, f, ETH_HLEN + IP_HLEN + icmp_len);
	s->ctr.v[SRV_ICMP_ECHO_REPLIES]++;
}

/* A segment for a tuple in custody that its process left in FIN-WAIT-2 or TIME-WAIT
 * (custody.h, srv__custody_segment), counted: SRV_CUSTODY_ACK for the peer's FIN, which
 * gets <SEQ=*seq><ACK=*ack><CTL=ACK>, and SRV_CUSTODY_ACK_OLD for a retransmission of data
 * the process had received, which gets one too; SRV_CUSTODY_IGNORE for its bare ACK, which gets
 * nothing; anything else gets a RST. The ACK is not rate-limited as resets are: only the
 * peer, which knows both sequence numbers, draws one, one for each of its FINs. */
enum srv_custody_verdict srv__custody_answer(struct srv *s, uint16_t lport,
					     const struct flt_addr *rip, uint16_t rport,
					     const struct srv_custody_seg *g, uint32_t *seq,
					     uint32_t *ack)
{
	enum srv_custody_verdict v =
		srv__custody_segment(&s->custody, srv__now_ms(), lport, rip, rport, g, seq, ack);

	if (v == SRV_CUSTODY_ACK)
		s->ctr.v[SRV_CUSTODY_FIN_ACKED]++;
	else if (v == SRV_CUSTODY_ACK_OLD)
		s->ctr.v[SRV_CUSTODY_OLD_ACKED]++;
	else if (v == SRV_CUSTODY_IGNORE)
		s->ctr.v[SRV_CUSTODY_ACK_IGNORED]++;
	else if (v == SRV_CUSTODY_RST_BAD_FIN)
		s->ctr.v[SRV_CUSTODY_NOT_FIN]++;
	return v;
}

/* RFC 9293 §3.10.7.1, CLOSED: "If the ACK bit is off, sequence number zero is used,
 * <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>. If the ACK bit is on, <SEQ=SEG.ACK><CTL=RST>".
 * An incoming RST is discarded. */
void srv__reply_rst(struct srv *s, const uint8_t *frame, const struct flt_pkt *p)
{
	(void)frame;
	/* "An incoming segment containing a RST is discarded." */
	if (p->tcp.flags & WIRE_TCP_RST) {
		s->ctr.v[SRV_DROP_RST_FOR_RST]++;
		return;
	}
	/* A segment to a broadcast address opens no connection to be reset (RFC 1122
	 * §4.2.3.10: a SYN to a broadcast or multicast address is discarded). */
	if (p->ip.dst != s->ip) {
		s->ctr.v[SRV_DROP_RST_NOT_UNICAST]++;
		return;
	}
	struct flt_addr rip = flt_addr_v4(p->ip.src);
	struct srv_custody_seg g = { p->tcp.seq, p->tcp.ack, p->tcp.flags, p->tcp.payload_len };
	uint32_t seq, ack;
	switch (srv__custody_answer(s, p->dport, &rip, p->sport, &g, &seq, &ack)) {
	case SRV_CUSTODY_ACK:
	case SRV_CUSTODY_ACK_OLD:
		send_tcp(s, p->src_mac, p->ip.src, p->dport, p->sport, seq, ack, WIRE_TCP_ACK,
			 SRV_CUSTODY_ACK_WND);
		return;
	case SRV_CUSTODY_IGNORE:
		return;
	default:
		break;
	}
	if (!srv__tokens_allow(&s->rst_tokens_ms, &s->rst_tokens, RST_RATE_PER_S)) {
		s->ctr.v[SRV_DROP_RST_RATE]++;
		return;
	}
	if (p->tcp.flags & WIRE_TCP_ACK) {
		send_tcp(s, p->src_mac, p->ip.src, p->dport, p->sport, p->tcp.ack, 0, WIRE_TCP_RST, 0);
	} else {
		uint32_t seglen = p->tcp.payload_len + !!(p->tcp.flags & WIRE_TCP_SYN) +
				  !!(p->tcp.flags & WIRE_TCP_FIN);
		send_tcp(s, p->src_mac, p->ip.src, p->dport, p->sport, 0, p->tcp.seq + seglen,
			    WIRE_TCP_RST | WIRE_TCP_ACK, 0);
	}
	s->ctr.v[SRV_RST_SENT]++;
}

/* A token bucket of per_s tokens a second, at most per_s saved: may one more go out? */
bool srv__tokens_allow(uint64_t *at_ms, unsigned *tokens, unsigned per_s)
{
	uint64_t now = srv__now_ms();

	if (now - *at_ms >= 1000 / per_s) {
		uint64_t add = (now - *at_ms) * per_s / 1000;
		*tokens = (unsigned)(*tokens + add > per_s ? per_s : *tokens + add);
		*at_ms = now;
	}
	if (!*tokens)
		return false;
	(*tokens)--;
	return true;
}

static bool may_send_icmp(struct srv *s)
{
	return srv__tokens_allow(&s->icmp_tokens_ms, &s->icmp_tokens, ICMP_RATE_PER_S);
}

static int send_icmp_error(struct srv *s, const uint8_t *frame, size_t len, const struct flt_pkt *p,
		      uint8_t type, uint8_t code);

/* RFC 1122 §4.1.3.1: a UDP datagram for a port nobody listens on SHOULD get ICMP port
 * unreachable; §3.2.2 says never for a broadcast or multicast destination. */
void srv__reply_port_unreachable(struct srv *s, const uint8_t *frame, size_t len,
				const struct flt_pkt *p)
{
	if (p->ip.dst != s->ip || wire_eth_is_group(p->dst_mac) || p->ip.fragment) {
		s->ctr.v[SRV_DROP_ICMP_ERROR_NOT_UNICAST]++;
		return;
	}
	if (send_icmp_error(s, frame, len, p, WIRE_ICMP_DEST_UNREACH, WIRE_ICMP_UNREACH_PORT) == 0)
		s->ctr.v[SRV_ICMP_UNREACH_SENT]++;
}

/* RFC 1122 §3.3.2: when reassembly times out, "an ICMP Time Exceeded message sent to the
 * source host (if fragment zero has been received)"; frame is fragment zero. */
void srv__reply_reass_time_exceeded(struct srv *s, const uint8_t *frame, size_t len,
				   const struct flt_pkt *p)
{
	if (p->ip.dst != s->ip || wire_eth_is_group(p->dst_mac)) {
		s->ctr.v[SRV_DROP_ICMP_ERROR_NOT_UNICAST]++;
		return;
	}
	if (send_icmp_error(s, frame, len, p, WIRE_ICMP_TIME_EXCEEDED, WIRE_ICMP_TIMXCEED_REASS) == 0)
		s->ctr.v[SRV_ICMP_TIME_EXCEEDED_SENT]++;
}

/* An ICMP error about the datagram in frame (RFC 792: its IP header and at least its first
 * 64 bits of data), to its source, within the node's rate limit. */
static int send_icmp_error(struct srv *s, const uint8_t *frame, size_t len, const struct flt_pkt *p,
		      uint8_t type, uint8_t code)
{
	uint8_t f[ETH_HLEN + IP_HLEN + ICMP_HLEN + ICMP_QUOTE_MAX];

	if (!may_send_icmp(s)) {
		s->ctr.v[SRV_DROP_ICMP_RATE]++;
		return -1;
	}
	size_t quote = p->ip.total < len - p->l3_off ? p->ip.total : len - p->l3_off;
	if (quote > ICMP_QUOTE_MAX)
		quote = ICMP_QUOTE_MAX;
	wire_eth_write(f, p->src_mac, s->mac, WIRE_ETHERTYPE_IPV4);
	put_ipv4(f + ETH_HLEN, WIRE_IPPROTO_ICMP, s->ip, p->ip.src,
		 (uint16_t)(IP_HLEN + ICMP_HLEN + quote));
	uint8_t *icmp = f + ETH_HLEN + IP_HLEN;
	memset(icmp, 0, ICMP_HLEN);
	icmp[WIRE_ICMP_OFF_TYPE] = type;
	icmp[WIRE_ICMP_OFF_CODE] = code;
	memcpy(icmp + ICMP_HLEN, frame + p->l3_off, quote);
	wire_wr16(icmp + WIRE_ICMP_OFF_CHECKSUM,
		  wire_sum_finish(wire_sum(0, icmp, ICMP_HLEN + quote)));
	srv__send_frame(s, f, ETH_HLEN + IP_HLEN + ICMP_HLEN + quote);
	return 0;
}

void srv__learn_neighbour(struct srv *s, uint32_t ip, const uint8_t mac[WIRE_ETH_ALEN])
{
	unsigned i = ntohl(ip) & 0xff;

	if (s->neigh[i].ip != ip || memcmp(s->neigh[i].mac, mac, WIRE_ETH_ALEN) != 0) {
		s->neigh[i].ip = ip;
		memcpy(s->neigh[i].mac, mac, WIRE_ETH_ALEN);
	}
}

/* A connection's process died and its sequence numbers died with it. An ACK that is far
 * outside the peer's window makes the peer answer with <SEQ=SND.NXT><ACK=RCV.NXT> (RFC
 * 9293 §3.10.7.4, first check; RFC 5961 §5.2 for an unacceptable ACK); that answer matches
 * no endpoint, so ulsd resets it with SEQ = its ACK field, exactly in the peer's window. */
void srv__send_probe(void *arg, struct srv_custody *c)
{
	struct srv *s = arg;
	uint32_t rip = flt_addr_v4_of(&c->rip);
	unsigned i = ntohl(rip) & 0xff;
	uint32_t seq;

	if (!flt_addr_is_v4(&c->rip)) {
		srv__send_probe6(s, c);  /* reply6.c, with neighbour discovery */
		return;
	}
	if (s->neigh[i].ip != rip) {
		uint8_t mac[WIRE_ETH_ALEN];
		/* A process on the direct path: the kernel saw the peer, not ulsd. */
		if (srv__dp_neighbour(s, rip, mac) < 0) {
			/* Never heard from it: it will get a RST for its next segment. */
			s->ctr.v[SRV_DROP_PROBE_NO_NEIGHBOUR]++;
			return;
		}
		srv__learn_neighbour(s, rip, mac);
	}
	if (getrandom(&seq, sizeof(seq), GRND_NONBLOCK) != sizeof(seq))
		seq = (uint32_t)srv__now_ms();
	send_tcp(s, s->neigh[i].mac, rip, c->lport, c->rport, seq, seq ^ 0x80000000u,
		    WIRE_TCP_ACK, 0);
	s->ctr.v[SRV_RST_PROBES]++;
	srv__custody_probed(c);
}
