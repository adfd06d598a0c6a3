/* The demultiplexer: the data path of the node (seed 004, Figure 6).
 *
 * A frame read from the TAP is parsed once (filter/parse.c), looked up once
 * (flt_lookup_rx) and copied once into the ring of the process that owns its endpoint.
 * Frames from a process's ring are parsed, checked against that process's endpoints
 * (flt_check_tx: no spoofing, no sending as another process) and copied into the TAP's
 * transmit queue. Frames that no process owns get the node's own answer (reply.c). None of
 * this touches the connection server's code: the control thread only changes the tables.
 */
#include "server/internal.h"

#include <arpa/inet.h>
#include <string.h>

#include "netif/wire/wire.h"

#define RX_BUDGET 256

#ifdef ULS_BREAKDOWN
/* Latency stamps (netif/breakdown.h) into the slot headers: the receiving process finds
 * ours in its rx slots, the sending process takes back ours from its tx slots. */
static inline uint64_t bd_now(void)
{
	return nif_bd_now();
}

static void bd_rx_slot(uint8_t *slot, uint64_t t_read, uint64_t t_demux)
{
	uint64_t *st = nif_ring_stamps(slot);

	st[NIF_BD_SLOT_TAP_READ] = t_read;
	st[NIF_BD_SLOT_DEMUX] = t_demux;
	st[NIF_BD_SLOT_RX_RING] = nif_bd_now();
}

static void bd_tx_slot(const uint8_t *slot, uint64_t t_taken)
{
	uint64_t *st = nif_ring_stamps(slot);

	st[NIF_BD_SLOT_ULSD_TX] = t_taken;
	st[NIF_BD_SLOT_TAP_WRITE] = nif_bd_now();
}
#else
static inline uint64_t bd_now(void) { return 0; }
static inline void bd_rx_slot(uint8_t *slot, uint64_t t_read, uint64_t t_demux)
{
	(void)slot; (void)t_read; (void)t_demux;
}
static inline void bd_tx_slot(const uint8_t *slot, uint64_t t_taken)
{
	(void)slot; (void)t_taken;
}
#endif

/* t_read, t_demux: when the frame came off the TAP and when its owner was known (breakdown
 * builds; 0 otherwise). */
static void deliver(struct srv *s, struct srv_lease *l, const uint8_t *frame, size_t len,
		    uint32_t off, uint64_t t_read, uint64_t t_demux)
{
	uint8_t *slot;

	if (!l->has_rings) {
		/* A process on the direct path reads its own queue; what reaches ulsd for it
		 * (the kernel steered it here) has no way to it. */
		s->ctr.v[SRV_DROP_DIRECT_UNSTEERED]++;
		return;
	}
	slot = nif_ring_prod_slot(&l->rx, len);
	if (!slot) {
		/* The process is not keeping up: drop, as a NIC drops on a full ring; TCP
		 * retransmits. */
		l->rx_ring_full++;
		s->ctr.v[SRV_DROP_RX_RING_FULL]++;
		return;
	}
	memcpy(slot, frame, len);
	bd_rx_slot(slot, t_read, t_demux);
	nif_ring_prod_commit(&l->rx, len, off);
	l->rx_frames++;
	l->rx_bytes += len;
	if (!l->rx_pending) {
		l->rx_pending = true;
		s->pending[s->npending++] = l;
	}
	s->ctr.v[SRV_FRAMES_DEMUXED]++;
	s->ctr.v[SRV_DATA_FRAMES_RELAYED]++;
}

void srv__deliver(struct srv *s, struct srv_lease *l, const uint8_t *frame, size_t len)
{
	deliver(s, l, frame, len, 0, 0, 0);
}

/* ARP replies reach every process: each runs lwIP's ARP and learns from them. */
static void share_arp(struct srv *s, const uint8_t *frame, size_t len)
{
	for (uint32_t i = 1; i < SRV_MAX_LEASES; i++) {
		struct srv_lease *l = s->leases.by_id[i];
		/* Direct processes get their replies from the kernel (datapath.bpf.c). */
		if (l && !l->dead && l->has_rings)
			deliver(s, l, frame, len, 0, 0, 0);
	}
	s->ctr.v[SRV_ARP_SHARED]++;
}

/* SYN shedding (netif/synshed.c): every relay frame crosses this one thread, so a SYN
 * flood at 50,000 SYN/s, each SYN copied into the listener's ring and its SYN,ACK checked
 * and sent back, can keep it behind while the machine is busy, and the frames of
 * established connections then wait in the TAP's queue or are dropped at its tail (issue
 * 13; docs/limits.md). While the previous round of this thread's reads says it is behind a
 * flood, pure SYNs are dropped here, before the lookup and the copy; a shed SYN's
 * retransmission and a known peer's SYN are taken. Whether the IP packet at frame + l3_off
 * is shed (counted); s->lock held. */
static bool shed_syn(struct srv *s, const uint8_t *frame, size_t len, size_t l3_off, bool ipv6)
{
	switch (nif_synshed_frame(&s->shed, frame + l3_off, len - l3_off, ipv6)) {
	case NIF_SHED_DROP:
		s->ctr.v[SRV_DROP_SYN_SHED]++;
		return true;
	case NIF_SHED_READMITTED:
		s->ctr.v[SRV_SYN_SHED_READMITTED]++;
		return false;
	case NIF_SHED_KNOWN_PEER:
		s->ctr.v[SRV_SYN_SHED_KNOWN_PEER]++;
		return false;
	case NIF_SHED_MEMORY_FULL:
		s->ctr.v[SRV_SYN_SHED_MEMORY_FULL]++;
		return false;
	case NIF_SHED_PASS:
		break;
	}
	return false;
}

/* RFC 8200 on the relay path: a process's IPv6 (control protocol 3). A packet to one of
 * the node's unicast addresses that the filter gives a process goes to it; neighbour
 * advertisements are copied to every relay process, as ARP replies are, since each
 * process's lwIP resolves its own peers (RFC 4861 §7.2.5); ulsd's own cache (neigh6.c)
 * is for its probes only. Returns true when the frame is taken; else ulsd answers it itself
 * (reply6.c), as before. */
static bool relay_ip6(struct srv *s, const uint8_t *frame, size_t len, uint32_t off,
		      uint64_t t_read)
{
	struct flt_pkt p;

	if (flt_parse(frame, len, &p) < 0)
		return false;  /* reply6.c counts it */
	if (!wire_eth_is_group(p.dst_mac) && memcmp(p.dst_mac, s->mac, WIRE_ETH_ALEN) != 0)
		return false;
	if (p.ip6.proto == WIRE_IPPROTO_ICMPV6 && !p.ip6.fragment &&
	    p.icmp.type == WIRE_ND_NEIGHBOR_ADVERT) {
		for (uint32_t i = 1; i < SRV_MAX_LEASES; i++) {
			struct srv_lease *l = s->leases.by_id[i];
			if (l && !l->dead && l->has_rings)
				deliver(s, l, frame, len, 0, 0, 0);
		}
		s->ctr.v[SRV_ND_SHARED]++;
		return false;  /* ulsd looks at it too (an address conflict, reply6.c) */
	}
	if (!srv__is_node_ip6(s, p.ip6.dst))
		return false;
	if (shed_syn(s, frame, len, p.l3_off, true))
		return true;
	flt_owner_t o = flt_lookup_rx(s->flt, &p);
	if (o == SRV_IN_TRANSIT) {
		s->ctr.v[SRV_DROP_IN_TRANSIT]++;
		return true;
	}
	struct srv_lease *l = o != FLT_NO_OWNER ? srv__leases_live(&s->leases, o) : NULL;
	if (!l)
		return false;
	s->ctr.v[SRV_IPV6_FRAMES]++;
	s->ctr.v[SRV_IPV6_FRAMES_DEMUXED]++;
	deliver(s, l, frame, len, off, t_read, bd_now());
	return true;
}

static void answer_ip4(struct srv *s, const uint8_t *frame, size_t len, const struct flt_pkt *p);

static void for_server(struct srv *s, const uint8_t *frame, size_t len, const struct flt_pkt *p)
{
	s->ctr.v[SRV_FRAMES_TO_SERVER]++;
	if (p->ethertype == WIRE_ETHERTYPE_ARP) {
		if (p->arp.op == WIRE_ARP_OP_REQUEST)
			srv__reply_arp(s, p);
		else if (p->arp.op == WIRE_ARP_OP_REPLY && p->arp.tpa == s->ip)
			share_arp(s, frame, len);
		else  /* a reply to another station, or an operation RFC 826 does not name */
			s->ctr.v[SRV_DROP_ARP_NOT_FOR_NODE]++;
		return;
	}
	if (p->ip.fragment) {
		/* RFC 791 §3.2: only the whole datagram names its endpoint (reass.c). */
		srv__reass_input(s, frame, len, p);
		return;
	}
	answer_ip4(s, frame, len, p);
}

void srv__input_ip4_whole(struct srv *s, const uint8_t *frame, size_t len)
{
	struct flt_pkt p;
	int rc = flt_parse(frame, len, &p);

	if (rc < 0) {
		flt_count_rx_drop(s->flt, (enum flt_reason)-rc);
		return;
	}
	answer_ip4(s, frame, len, &p);
}

/* An IPv4 packet for the node that no process owns: the node's own answer. */
static void answer_ip4(struct srv *s, const uint8_t *frame, size_t len, const struct flt_pkt *p)
{
	switch (p->ip.proto) {
	case WIRE_IPPROTO_ICMP:
		if (p->icmp.type == WIRE_ICMP_ECHO)
			srv__reply_echo(s, frame, len, p);
		else
			s->ctr.v[SRV_DROP_NO_OWNER]++;
		break;
	case WIRE_IPPROTO_TCP:
		srv__reply_rst(s, frame, p);
		break;
	case WIRE_IPPROTO_UDP:
		srv__reply_port_unreachable(s, frame, len, p);
		break;
	default:
		s->ctr.v[SRV_DROP_NO_OWNER]++;
		break;
	}
}

static void on_frame(void *arg, const uint8_t *frame, size_t len, uint32_t off)
{
	struct srv *s = arg;
	uint64_t t_read = bd_now();
	struct flt_pkt p;
	int rc;

	/* IPv6: a process's when the filter says so (relay_ip6), else the node's own
	 * (reply6.c); without --ip6 the node has no IPv6 and the frame is dropped as a type
	 * it does not speak. */
	if (len >= WIRE_ETH_HLEN && wire_rd16(frame + WIRE_ETH_OFF_TYPE) == WIRE_ETHERTYPE_IPV6) {
		if (!s->has_ip6)
			flt_count_rx_drop(s->flt, FLT_DROP_ETHERTYPE);
		else if (!relay_ip6(s, frame, len, off, t_read))
			srv__input_ip6(s, frame, len);
		return;
	}
	rc = flt_parse(frame, len, &p);
	if (rc < 0) {
		flt_count_rx_drop(s->flt, (enum flt_reason)-rc);
		return;
	}
	/* Frames for other stations (the bridge floods until it learns) and IPv4 packets
	 * for other addresses are not the node's. */
	if (!wire_eth_is_group(p.dst_mac) && memcmp(p.dst_mac, s->mac, WIRE_ETH_ALEN) != 0) {
		s->ctr.v[SRV_DROP_NOT_FOR_NODE]++;
		return;
	}
	if (p.ethertype == WIRE_ETHERTYPE_IPV4) {
		uint32_t bcast = s->ip | htonl(0xffffffffu >> s->prefix_len);
		if (p.ip.dst != s->ip && p.ip.dst != bcast && p.ip.dst != 0xffffffffu) {
			s->ctr.v[SRV_DROP_NOT_FOR_NODE]++;
			return;
		}
		if (shed_syn(s, frame, len, p.l3_off, false))
			return;
		/* Not from a SYN without ACK: a flood of them from spoofed sources (RFC 4987)
		 * would overwrite the entries of real peers, which their other segments keep. */
		if (p.ip.proto != WIRE_IPPROTO_TCP || p.ip.fragment ||
		    (p.tcp.flags & (WIRE_TCP_SYN | WIRE_TCP_ACK)) != WIRE_TCP_SYN)
			srv__learn_neighbour(s, p.ip.src, p.src_mac);
		flt_owner_t o = flt_lookup_rx(s->flt, &p);
		if (o == SRV_IN_TRANSIT) {
			/* Neither process may answer it (handoff.c): the peer sends it again. */
			s->ctr.v[SRV_DROP_IN_TRANSIT]++;
			return;
		}
		if (nif_off_gso(off))
			s->ctr.v[SRV_FRAMES_GSO_RECEIVED]++;
		if (off & NIF_OFF_CSUM_PARTIAL)
			s->ctr.v[SRV_FRAMES_CSUM_PARTIAL_RECEIVED]++;
		struct srv_lease *l = o != FLT_NO_OWNER ? srv__leases_live(&s->leases, o) : NULL;
		if (l) {
			deliver(s, l, frame, len, off, t_read, bd_now());
			return;
		}
	}
	for_server(s, frame, len, &p);
}

void srv__send_frame(struct srv *s, const uint8_t *frame, size_t len)
{
	pthread_mutex_lock(&s->tx_lock);
	uint8_t *slot = nif_tap_tx_slot(s->tap);
	if (slot) {
		memcpy(slot, frame, len);
		nif_tap_tx_queue(s->tap, slot, len, 0);
	}
	pthread_mutex_unlock(&s->tx_lock);
	if (!slot) {
		/* Every TAP transmit buffer is queued: the node's own answer is lost like a
		 * frame on a full NIC queue (the peer retransmits, or asks again). */
		s->ctr.v[SRV_DROP_NO_TAP_SLOT]++;
		return;
	}
	s->ctr.v[SRV_FRAMES_SENT]++;
}

/* Hand the queued frames to the kernel (one system call), with no lock but the TAP's own:
 * the caller has released s->lock (demux loop, control loop). */
void srv__tx_flush(struct srv *s)
{
	pthread_mutex_lock(&s->tx_lock);
	nif_tap_tx_flush(s->tap);
	pthread_mutex_unlock(&s->tx_lock);
}

/* Whether a process's frame may go out as it is: at most the MTU, or, on a node with
 * offloads, a super-segment whose every piece on the wire fits the MTU. The TAP then checks
 * the offload word against the headers (nif_vnet_build). */
static bool tx_size_ok(const struct srv *s, const struct flt_pkt *p, size_t len, uint32_t off)
{
	unsigned gso = nif_off_gso(off);

	if (off && !s->offload)
		return false;
	if (gso && s->csum_only)
		return false;   /* no super-segment through a TAP without TSO */
	if (!gso)
		return len <= (size_t)s->mtu + WIRE_ETH_HLEN;
	if (len > NIF_OFF_FRAME_MAX || !p->has_ports)
		return false;
	if (p->ethertype == WIRE_ETHERTYPE_IPV4)
		return p->ip.proto == WIRE_IPPROTO_TCP &&
		       (size_t)p->ip.hlen + p->tcp.doff + gso <= (size_t)s->mtu;
	/* TCP over IPv6 (VIRTIO_NET_HDR_GSO_TCPV6, stack/tso.c): only with TCP right after
	 * the fixed header, as the offload word describes it (netif/vnet.c). */
	return p->ethertype == WIRE_ETHERTYPE_IPV6 && p->ip6.proto == WIRE_IPPROTO_TCP &&
	       !p->ip6.fragment && p->l4_off - p->l3_off == WIRE_IPV6_HLEN &&
	       (size_t)WIRE_IPV6_HLEN + p->tcp.doff + gso <= (size_t)s->mtu;
}

/* Frames longer than this leave from the process's ring (nif_tap_tx_send_split): ulsd
 * copies only their first TX_HEAD_COPY bytes, which hold every header it checks (Ethernet,
 * IPv4 and TCP with options at most 14 + 60 + 60 bytes; an ICMP error's quote ends by
 * 14 + 60 + 8 + 60 + 8). Copying a 64 KiB super-segment cost ulsd more than the system
 * call that sends it (docs/benchmarks.md, "Profile"). Shorter frames are copied whole
 * and go out in one batch. */
#define TX_SPLIT_MIN 2048
#define TX_HEAD_COPY 256
_Static_assert(TX_HEAD_COPY <= TX_SPLIT_MIN, "a split frame's head fits its buffer");

/* Is this refused frame a RST the process sends on a TCP tuple it released (CTL_RELEASE)?
 * lwIP frees a connection in LAST-ACK on the peer's ACK of its FIN and the process
 * releases the tuple then; a segment of the peer that ulsd had already delivered to the
 * process's ring (a duplicate of that ACK, seen at load) then meets no connection there,
 * and the process answers it as RFC 9293 §3.10.7.1 says for the CLOSED state ("If the ACK
 * bit is on, <SEQ=SEG.ACK><CTL=RST>"). The tuple is the node's again by then, and ulsd
 * answers the peer's later segments itself (reply.c), so the frame is refused as any
 * other whose tuple is not the sender's (the filter counts it in deny_port), but it is
 * no denial (drop_tx_denied): it has its own counter, drop_tx_rst_released. */
static bool late_rst(const struct srv_lease *l, const struct flt_pkt *p)
{
	const uint8_t *rip;
	uint8_t mapped[16] = { [10] = 0xff, [11] = 0xff };

	if (!p->has_ports || !(p->tcp.flags & WIRE_TCP_RST) || p->tcp.payload_len)
		return false;
	if (p->ethertype == WIRE_ETHERTYPE_IPV6 && p->ip6.proto == WIRE_IPPROTO_TCP) {
		rip = p->ip6.dst;
	} else if (p->ethertype == WIRE_ETHERTYPE_IPV4 && p->ip.proto == WIRE_IPPROTO_TCP) {
		memcpy(mapped + 12, &p->ip.dst, 4);
		rip = mapped;
	} else {
		return false;
	}
	for (unsigned i = 0; i < SRV_RELEASED_KEEP; i++) {
		const struct srv_released *r = &l->released[i];
		if (r->lport && r->lport == p->sport && r->rport == p->dport &&
		    memcmp(r->rip, rip, sizeof(r->rip)) == 0)
			return true;
	}
	return false;
}

/* A refused frame in ulsd's log, with what names it: addresses, ports, TCP flags or the
 * ICMP type, so that a refusal can be told from the log alone (which segment of which
 * connection, which ND message). */
static void log_refused(const struct srv_lease *l, const struct flt_pkt *p, const char *why)
{
	char src[INET6_ADDRSTRLEN] = "-", dst[INET6_ADDRSTRLEN] = "-";
	uint8_t proto = 0;

	if (p->ethertype == WIRE_ETHERTYPE_IPV4) {
		inet_ntop(AF_INET, &p->ip.src, src, sizeof(src));
		inet_ntop(AF_INET, &p->ip.dst, dst, sizeof(dst));
		proto = p->ip.proto;
	} else if (p->ethertype == WIRE_ETHERTYPE_IPV6) {
		inet_ntop(AF_INET6, p->ip6.src, src, sizeof(src));
		inet_ntop(AF_INET6, p->ip6.dst, dst, sizeof(dst));
		proto = p->ip6.proto;
	}
	srv__log(1, "lease %u (pid %d): frame refused (%s): ethertype 0x%04x proto %u "
		 "%s:%u -> %s:%u tcp flags 0x%02x seq %u ack %u len %u icmp type %u",
		 l->id, (int)l->pid, why, p->ethertype, proto, src, p->sport, dst, p->dport,
		 p->tcp.flags, p->tcp.seq, p->tcp.ack, p->tcp.payload_len, p->icmp.type);
}

/* A process's frame, once checked, goes out from what ulsd copied, never again from the
 * ring: the process can rewrite its ring at any time, and a header rewritten between the
 * check and the send would get past the filter. The rest of a split frame is data, which
 * is the process's own to send.
 *
 * check_tx: whether the frame in slot (its first bytes copied from the ring) may leave as
 * process l's; a refused one's slot is given back and counted. s->lock and s->tx_lock held. */
static int check_tx(struct srv *s, struct srv_lease *l, uint8_t *slot, size_t len, uint32_t off)
{
	struct flt_pkt p;
	int rc = flt_parse(slot, len, &p);
	bool parsed = rc == 0, size_ok = parsed && tx_size_ok(s, &p, len, off);

	if (rc < 0) {
		flt_count_tx_drop(s->flt, (enum flt_reason)-rc);
	} else if (!size_ok) {
		/* Longer than the MTU without a valid super-segment, or an offload word on a
		 * node without offloads. */
		s->ctr.v[SRV_DROP_TX_BAD_OFFLOAD]++;
		rc = -FLT_DENY_PROTO;
	} else {
		rc = flt_check_tx(s->flt, &p, l->id, s->ip, s->mac);
	}
	if (rc == -FLT_DENY_PORT && late_rst(l, &p)) {
		nif_tap_tx_unused(s->tap, slot);
		s->ctr.v[SRV_DROP_TX_RST_RELEASED]++;
		return rc;
	}
	if (rc < 0) {
		nif_tap_tx_unused(s->tap, slot);
		s->ctr.v[SRV_DROP_TX_DENIED]++;
		/* Rate-limited: a misbehaving process must not flood the log. */
		if (++l->tx_denied <= 5 && parsed)
			log_refused(l, &p, size_ok ? flt_reason_name((enum flt_reason)-rc)
						   : "size or offload");
	}
	return rc;
}

/* The TAP took a checked frame (rc 0) or refused its offload word (s->lock held). */
static void count_sent(struct srv *s, struct srv_lease *l, size_t len, uint32_t off, int rc)
{
	if (rc < 0) {
		s->ctr.v[SRV_DROP_TX_BAD_OFFLOAD]++;
		l->tx_denied++;
		return;
	}
	s->ctr.v[SRV_FRAMES_SENT]++;
	s->ctr.v[SRV_DATA_FRAMES_RELAYED]++;
	if (nif_off_gso(off) && len > (size_t)s->mtu + WIRE_ETH_HLEN)
		s->ctr.v[SRV_FRAMES_GSO_SENT]++;
	l->tx_frames++;
	l->tx_bytes += len;
}

/* Check and send what process l published (s->lock held; s->tx_lock is taken here, after
 * it). hold: the demux thread's call, which leaves the first long frame (it goes out in a
 * system call of its own, nif_tap_tx_send_split) in s->held, to be sent after s->lock is
 * released (send_held); the frames after it wait in the ring, so the process's frames
 * leave in order. */
static void drain(struct srv *s, struct srv_lease *l, bool hold)
{
	size_t len;
	uint32_t off;
	const uint8_t *f;

	if (!l->has_rings || l->tx_held)
		return;
	pthread_mutex_lock(&s->tx_lock);
	while ((f = nif_ring_cons_peek(&l->tx, &len, &off, &l->bad_slots))) {
		uint64_t t_taken = bd_now();
		if (len > nif_tap_tx_room(s->tap)) {
			/* Longer than any frame this node sends, super-segments included. */
			s->ctr.v[SRV_DROP_TX_BAD_OFFLOAD]++;
			s->ctr.v[SRV_DROP_TX_DENIED]++;
			l->tx_denied++;
			nif_ring_cons_release(&l->tx);
			continue;
		}
		uint8_t *slot = nif_tap_tx_slot(s->tap);
		if (!slot)
			break;  /* the TAP is gone; the frames wait in the ring */
		size_t head = len > TX_SPLIT_MIN ? TX_HEAD_COPY : len;
		memcpy(slot, f, head);
		int rc = check_tx(s, l, slot, len, off);
		if (rc == 0 && head < len && hold && s->nheld < SRV_MAX_LEASES) {
			s->held[s->nheld++] = (struct srv_tx_held){
				.l = l, .slot = slot, .head = head, .f = f, .len = len, .off = off,
				.t_taken = t_taken,
			};
			l->tx_held = true;
			break;
		}
		if (rc == 0) {
			rc = head < len ? nif_tap_tx_send_split(s->tap, slot, head, f + head, len - head,
								off)
					: nif_tap_tx_queue(s->tap, slot, len, off);
			count_sent(s, l, len, off, rc);
			if (rc == 0)
				bd_tx_slot(f, t_taken);
		}
		nif_ring_cons_release(&l->tx);
	}
	pthread_mutex_unlock(&s->tx_lock);
	s->ctr.v[SRV_DROP_TX_BAD_SLOT] += l->bad_slots;
	l->bad_slots = 0;
}

/* The control thread's drain (RELEASE, UNBIND, HANDOFF, a lease's end; s->lock held): a
 * frame of the ring the demux thread is sending without the lock goes first, and the
 * frames after it leave here, before the caller changes the process's rules. */
void srv__drain_tx(struct srv *s, struct srv_lease *l)
{
	while (l->tx_held)
		pthread_cond_wait(&s->tx_released, &s->lock);
	drain(s, l, false);
}

/* The long frames drain() held: sent without s->lock (each under s->tx_lock alone), then
 * given back to their rings under it; their leases are drained again at the next round
 * (s->again), where the frames after them wait. Demux thread. */
static void send_held(struct srv *s)
{
	if (!s->nheld)
		return;
	for (unsigned i = 0; i < s->nheld; i++) {
		struct srv_tx_held *h = &s->held[i];
		pthread_mutex_lock(&s->tx_lock);
		h->rc = nif_tap_tx_send_split(s->tap, h->slot, h->head, h->f + h->head,
					      h->len - h->head, h->off);
		pthread_mutex_unlock(&s->tx_lock);
	}
	pthread_mutex_lock(&s->lock);
	for (unsigned i = 0; i < s->nheld; i++) {
		struct srv_tx_held *h = &s->held[i];
		count_sent(s, h->l, h->len, h->off, h->rc);
		if (h->rc == 0)
			bd_tx_slot(h->f, h->t_taken);
		nif_ring_cons_release(&h->l->tx);
		h->l->tx_held = false;
		s->again[s->nagain++] = h->l;
	}
	s->nheld = 0;
	pthread_cond_broadcast(&s->tx_released);
	pthread_mutex_unlock(&s->lock);
}

/* The leases whose long frame went out in the last round: their next frames (s->lock
 * held; before sync_leases, which may free a dead one). */
static void drain_again(struct srv *s)
{
	unsigned n = s->nagain;

	s->nagain = 0;
	for (unsigned i = 0; i < n; i++)
		if (!s->again[i]->dead)
			drain(s, s->again[i], true);
}

static void on_event(void *arg, uint64_t tag)
{
	struct srv *s = arg;

	struct srv_lease *l = srv__leases_live(&s->leases, tag);

	if (l)
		drain(s, l, true);
}

/* Start watching new leases, stop watching and free dead ones. */
static void sync_leases(struct srv *s)
{
	if (!s->leases.changed)
		return;
	s->leases.changed = false;
	for (uint32_t i = 1; i < SRV_MAX_LEASES; i++) {
		struct srv_lease *l = s->leases.by_id[i];
		if (!l)
			continue;
		if (l->dead) {
			if (l->watched)
				nif_tap_unwatch(s->tap, l->id);
			srv__lease_free(s, l);
		} else if (!l->watched && l->has_rings) {
			if (nif_tap_watch(s->tap, l->tx_efd, l->id) == 0)
				l->watched = true;
			drain(s, l, true);  /* frames it queued before we watched */
		}
	}
}

/* Make delivered frames visible: one index store per process per batch, and one eventfd
 * write only for a process that is asleep. Without s->lock: s->pending and the producer
 * side of every rx ring are this thread's alone (deliver() runs only here), and a lease in
 * s->pending stays allocated until this thread frees it in sync_leases(). */
static void publish(struct srv *s)
{
	for (unsigned i = 0; i < s->npending; i++) {
		struct srv_lease *l = s->pending[i];
		l->rx_pending = false;
		if (nif_ring_prod_publish(&l->rx))
			nif_ring_signal(&l->rx);
	}
	s->npending = 0;
}

void *srv__demux_thread(void *arg)
{
	struct srv *s = arg;

	nif_tap_set_event_fn(s->tap, on_event, s);
	while (!srv__stopping(s)) {
		/* Frames wait in a ring behind a long one sent last round: no sleep. */
		nif_tap_wait(s->tap, s->nagain ? 0 : 500);
		/* The tables' state: under the lock, the frames are looked up, copied into
		 * the rings and the TAP's transmit buffers. */
		pthread_mutex_lock(&s->lock);
		drain_again(s);
		sync_leases(s);
		srv__reass_tick(s);
		/* One read of the TAP's queue is one round of SYN shedding. */
		nif_synshed_round_begin(&s->shed);
		nif_tap_rx(s->tap, on_frame, s, RX_BUDGET);
		if (nif_synshed_round_end(&s->shed))
			s->ctr.v[SRV_SYN_SHED_SUSPENDED]++;
		struct nif_dev_stats ts;
		pthread_mutex_lock(&s->tx_lock);
		nif_tap_get_stats(s->tap, &ts);
		pthread_mutex_unlock(&s->tx_lock);
		s->ctr.v[SRV_DROP_RX_BAD_VNET] = ts.rx_bad_vnet;
		s->ctr.v[SRV_TX_RESERVE_TIMEOUTS] = ts.tx_reserve_timeouts;
		pthread_mutex_unlock(&s->lock);
		/* The system calls of the batch (eventfd writes, the TAP's writes): without
		 * s->lock, so the control thread never waits for them. */
		publish(s);
		srv__tx_flush(s);
		send_held(s);
	}
	return NULL;
}
