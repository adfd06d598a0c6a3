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

#include "netif/chksum.h"

#define ETH_HLEN     14
#define IP_HLEN      20
#define TCP_HLEN     20
#define ICMP_HLEN    8
#define DEFAULT_TTL  64
#define ICMP_RATE_PER_S 100   /* RFC 1122 §3.2.2: ICMP errors SHOULD be rate-limited */
/* Resets for segments nobody owns, per second. Deviation: RFC 9293 §3.10.7.1 answers every
 * one; a flood of spoofed SYNs to a closed port would have ulsd's demultiplexer thread,
 * which also relays data, answer each (50,000/s took a fifth of a core). FreeBSD bounds
 * these resets too (net.inet.icmp.icmplim, 200/s); Linux does not. */
#define RST_RATE_PER_S  2000
#define ICMP_QUOTE_MAX  (576 - IP_HLEN - ICMP_HLEN)  /* RFC 1812 §4.3.2.3 */

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

static uint16_t csum_finish(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static void eth_header(uint8_t *f, const uint8_t dst[6], const uint8_t src[6], uint16_t type)
{
	memcpy(f, dst, 6);
	memcpy(f + 6, src, 6);
	put16(f + 12, type);
}

/* An IPv4 header without options; addresses in network order. */
static void ip_header(uint8_t *ip, uint8_t proto, uint32_t src, uint32_t dst, uint16_t total)
{
	uint16_t id;

	if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != sizeof(id))
		id = (uint16_t)srv_now_ms();
	memset(ip, 0, IP_HLEN);
	ip[0] = 0x45;
	put16(ip + 2, total);
	put16(ip + 4, id);
	ip[8] = DEFAULT_TTL;
	ip[9] = proto;
	memcpy(ip + 12, &src, 4);
	memcpy(ip + 16, &dst, 4);
	uint16_t c = (uint16_t)~nif_inet_chksum(ip, IP_HLEN);
	memcpy(ip + 10, &c, 2);  /* the sum is in memory order: store it as is */
}

/* TCP checksum over the pseudo-header (RFC 9293 §3.1) and the segment. */
static void tcp_checksum(uint8_t *ip, uint8_t *tcp, uint16_t tcplen)
{
	uint8_t pseudo[12];

	memcpy(pseudo, ip + 12, 8);
	pseudo[8] = 0;
	pseudo[9] = WIRE_IPPROTO_TCP;
	put16(pseudo + 10, tcplen);
	tcp[16] = tcp[17] = 0;
	uint32_t sum = (uint32_t)nif_inet_chksum(pseudo, sizeof(pseudo)) +
		       nif_inet_chksum(tcp, tcplen);
	uint16_t c = csum_finish(sum);
	memcpy(tcp + 16, &c, 2);
}

static void tcp_segment(struct srv *s, const uint8_t dst_mac[6], uint32_t dst_ip,
			uint16_t sport, uint16_t dport, uint32_t seq, uint32_t ack, uint8_t flags)
{
	uint8_t f[ETH_HLEN + IP_HLEN + TCP_HLEN];
	uint8_t *ip = f + ETH_HLEN, *tcp = ip + IP_HLEN;

	eth_header(f, dst_mac, s->mac, WIRE_ETHERTYPE_IPV4);
	ip_header(ip, WIRE_IPPROTO_TCP, s->ip, dst_ip, IP_HLEN + TCP_HLEN);
	memset(tcp, 0, TCP_HLEN);
	put16(tcp, sport);
	put16(tcp + 2, dport);
	put32(tcp + 4, seq);
	put32(tcp + 8, ack);
	tcp[12] = (TCP_HLEN / 4) << 4;
	tcp[13] = flags;
	tcp_checksum(ip, tcp, TCP_HLEN);
	srv_send_frame(s, f, sizeof(f));
}

void srv_reply_arp(struct srv *s, const struct flt_pkt *p)
{
	uint8_t f[ETH_HLEN + 28];
	uint8_t *a = f + ETH_HLEN;

	/* RFC 826: answer requests for our address, swapping sender and target. */
	if (p->arp.op != 1 || p->arp.tpa != s->ip)
		return;
	eth_header(f, p->arp.sha, s->mac, WIRE_ETHERTYPE_ARP);
	put16(a, 1);
	put16(a + 2, WIRE_ETHERTYPE_IPV4);
	a[4] = 6;
	a[5] = 4;
	put16(a + 6, 2);
	memcpy(a + 8, s->mac, 6);
	memcpy(a + 14, &s->ip, 4);
	memcpy(a + 18, p->arp.sha, 6);
	memcpy(a + 24, &p->arp.spa, 4);
	srv_send_frame(s, f, sizeof(f));
	s->ctr[SRV_ARP_REPLIES]++;
}

/* RFC 1122 §3.2.2.6: an echo reply returns the request's data unchanged. */
void srv_reply_echo(struct srv *s, const uint8_t *frame, size_t len, const struct flt_pkt *p)
{
	uint8_t f[ETH_HLEN + 65535];
	size_t icmp_len = (size_t)p->ip.total - p->ip.hlen;

	if (p->ip.fragment || p->icmp.type != 8 || p->ip.dst != s->ip ||
	    p->l4_off + icmp_len > len)
		return;
	eth_header(f, p->src_mac, s->mac, WIRE_ETHERTYPE_IPV4);
	ip_header(f + ETH_HLEN, WIRE_IPPROTO_ICMP, s->ip, p->ip.src, (uint16_t)(IP_HLEN + icmp_len));
	uint8_t *icmp = f + ETH_HLEN + IP_HLEN;
	memcpy(icmp, frame + p->l4_off, icmp_len);
	icmp[0] = 0;  /* echo reply */
	icmp[2] = icmp[3] = 0;
	uint16_t c = (uint16_t)~nif_inet_chksum(icmp, (int)icmp_len);
	memcpy(icmp + 2, &c, 2);
	srv_send_frame(s, f, ETH_HLEN + IP_HLEN + icmp_len);
	s->ctr[SRV_ICMP_ECHO_REPLIES]++;
}

/* RFC 9293 §3.10.7.1, CLOSED: "If the ACK bit is off, sequence number zero is used,
 * <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>. If the ACK bit is on, <SEQ=SEG.ACK><CTL=RST>".
 * An incoming RST is discarded. */
static bool tokens_allow(uint64_t *at_ms, unsigned *tokens, unsigned per_s);

void srv_reply_rst(struct srv *s, const uint8_t *frame, const struct flt_pkt *p)
{
	(void)frame;
	if (p->tcp.flags & WIRE_TCP_RST || p->ip.dst != s->ip)
		return;
	if (!tokens_allow(&s->rst_tokens_ms, &s->rst_tokens, RST_RATE_PER_S)) {
		s->ctr[SRV_DROP_RST_RATE]++;
		return;
	}
	if (p->tcp.flags & WIRE_TCP_ACK) {
		tcp_segment(s, p->src_mac, p->ip.src, p->dport, p->sport, p->tcp.ack, 0, WIRE_TCP_RST);
	} else {
		uint32_t seglen = p->tcp.payload_len + !!(p->tcp.flags & WIRE_TCP_SYN) +
				  !!(p->tcp.flags & WIRE_TCP_FIN);
		tcp_segment(s, p->src_mac, p->ip.src, p->dport, p->sport, 0, p->tcp.seq + seglen,
			    WIRE_TCP_RST | WIRE_TCP_ACK);
	}
	s->ctr[SRV_RST_SENT]++;
}

/* A token bucket of per_s tokens a second, at most per_s saved: may one more go out? */
static bool tokens_allow(uint64_t *at_ms, unsigned *tokens, unsigned per_s)
{
	uint64_t now = srv_now_ms();

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

static bool icmp_allowed(struct srv *s)
{
	return tokens_allow(&s->icmp_tokens_ms, &s->icmp_tokens, ICMP_RATE_PER_S);
}

static int icmp_error(struct srv *s, const uint8_t *frame, size_t len, const struct flt_pkt *p,
		      uint8_t type, uint8_t code);

/* RFC 1122 §4.1.3.1: a UDP datagram for a port nobody listens on SHOULD get ICMP port
 * unreachable; §3.2.2 says never for a broadcast or multicast destination. */
void srv_reply_port_unreachable(struct srv *s, const uint8_t *frame, size_t len,
				const struct flt_pkt *p)
{
	if (p->ip.dst != s->ip || (p->dst_mac[0] & 1) || p->ip.fragment)
		return;
	if (icmp_error(s, frame, len, p, 3, 3) == 0)  /* destination unreachable, port */
		s->ctr[SRV_ICMP_UNREACH_SENT]++;
}

/* RFC 1122 §3.3.2: when reassembly times out, "an ICMP Time Exceeded message sent to the
 * source host (if fragment zero has been received)"; frame is fragment zero. */
void srv_reply_reass_time_exceeded(struct srv *s, const uint8_t *frame, size_t len,
				   const struct flt_pkt *p)
{
	if (p->ip.dst != s->ip || (p->dst_mac[0] & 1))
		return;
	if (icmp_error(s, frame, len, p, 11, 1) == 0)  /* fragment reassembly time exceeded */
		s->ctr[SRV_ICMP_TIME_EXCEEDED_SENT]++;
}

/* An ICMP error about the datagram in frame (RFC 792: its IP header and at least its first
 * 64 bits of data), to its source, within the node's rate limit. */
static int icmp_error(struct srv *s, const uint8_t *frame, size_t len, const struct flt_pkt *p,
		      uint8_t type, uint8_t code)
{
	uint8_t f[ETH_HLEN + IP_HLEN + ICMP_HLEN + ICMP_QUOTE_MAX];

	if (!icmp_allowed(s)) {
		s->ctr[SRV_DROP_ICMP_RATE]++;
		return -1;
	}
	size_t quote = p->ip.total < len - p->l3_off ? p->ip.total : len - p->l3_off;
	if (quote > ICMP_QUOTE_MAX)
		quote = ICMP_QUOTE_MAX;
	eth_header(f, p->src_mac, s->mac, WIRE_ETHERTYPE_IPV4);
	ip_header(f + ETH_HLEN, WIRE_IPPROTO_ICMP, s->ip, p->ip.src,
		  (uint16_t)(IP_HLEN + ICMP_HLEN + quote));
	uint8_t *icmp = f + ETH_HLEN + IP_HLEN;
	memset(icmp, 0, ICMP_HLEN);
	icmp[0] = type;
	icmp[1] = code;
	memcpy(icmp + ICMP_HLEN, frame + p->l3_off, quote);
	uint16_t c = (uint16_t)~nif_inet_chksum(icmp, (int)(ICMP_HLEN + quote));
	memcpy(icmp + 2, &c, 2);
	srv_send_frame(s, f, ETH_HLEN + IP_HLEN + ICMP_HLEN + quote);
	return 0;
}

void srv_learn_neighbour(struct srv *s, uint32_t ip, const uint8_t mac[6])
{
	unsigned i = ntohl(ip) & 0xff;

	if (s->neigh[i].ip != ip || memcmp(s->neigh[i].mac, mac, 6) != 0) {
		s->neigh[i].ip = ip;
		memcpy(s->neigh[i].mac, mac, 6);
	}
}

/* A connection's process died and its sequence numbers died with it. An ACK that is far
 * outside the peer's window makes the peer answer with <SEQ=SND.NXT><ACK=RCV.NXT> (RFC
 * 9293 §3.10.7.4, first check; RFC 5961 §5.2 for an unacceptable ACK); that answer matches
 * no endpoint, so ulsd resets it with SEQ = its ACK field, exactly in the peer's window. */
void srv_send_probe(struct srv *s, const struct srv_custody *c)
{
	unsigned i = ntohl(c->rip) & 0xff;
	uint32_t seq;

	if (s->neigh[i].ip != c->rip) {
		uint8_t mac[6];
		/* A process on the direct path: the kernel saw the peer, not ulsd. */
		if (srv_dp_neighbour(s, c->rip, mac) < 0)
			return;  /* never heard from it: it will get a RST for its next segment */
		srv_learn_neighbour(s, c->rip, mac);
	}
	if (getrandom(&seq, sizeof(seq), GRND_NONBLOCK) != sizeof(seq))
		seq = (uint32_t)srv_now_ms();
	tcp_segment(s, s->neigh[i].mac, c->rip, c->lport, c->rport, seq, seq ^ 0x80000000u,
		    WIRE_TCP_ACK);
	s->ctr[SRV_RST_PROBES]++;
}
