/* SYN shedding on the direct data path, in the kernel: synguard, a tcx egress program on
 * the node's TAP, drops a SYN flood's SYNs before tun queues them for a process, so that a
 * flood never wakes the listener (docs/benchmarks.md, "SYN flood"). Included by
 * filter/datapath.bpf.c after its maps and filter/datapath_pick.bpf.h.
 *
 * Read first: RFC 4987 §3 (SYN flooding and the defences), RFC 6298 §2 and §5 (a client
 * retransmits its SYN after its RTO, 1 s), RFC 9293 §3.8.1 (a retransmitted SYN carries the
 * same ISN), §3.10.7.2 (a SYN to a listener).
 *
 * Why here: on the direct path every SYN of a flood was steered to the listener's queue;
 * the process woke, read it and shed it in user space (stack/synshed.c). On a busy 2-vCPU
 * host the listener then ran 0.68 s and waited 2.3 s for a CPU in a 7.1 s flood, time its
 * streams needed. tcx egress runs in __dev_queue_xmit before the TAP's queue is picked
 * (the steering program) and before tun_net_xmit queues the frame, and can drop it; the
 * steering program cannot (tun takes its return value modulo the number of queues). A
 * SYN shed here costs the sender's softirq one parse, one lookup and a hash, as the
 * kernel's own listener pays in softirq.
 *
 * The rule, per process queue (a pure SYN, SYN without ACK, RST or FIN, to a listener's
 * pick: not one of a tuple a process holds, and only for a queue of the direct path, never
 * ulsd's queue 0):
 * - a SYN from a known peer passes (counted syn_known_peer when the queue is over its
 *   budget): the steering program notes the source of every handshake-completing ACK to
 *   a listener (dp_known, LRU); a flood's spoofed sources send SYNs only. A burst of real
 *   clients from one address (make check-load: 10,000 at once) becomes a known peer with
 *   its first completed handshake;
 * - the retransmission of a SYN shed here passes (syn_readmitted): shed SYNs are
 *   remembered, keyed SipHash of addresses, ports and ISN, in a Bloom filter of two
 *   generations (2 x 2^22 bits, two bits per SYN); the older generation is cleared when the
 *   newer is SYN_GEN_NS old, so a shed SYN is remembered at least that long (the client's
 *   retransmissions after 1 s and 3 s more). A Bloom filter has no false negatives and
 *   never fills: at 50,000 SYN/s a flood SYN passes as a retransmission with a probability
 *   of about 0.5% (150,000 SYNs in 2^22 bits), 3% at 130,000 SYN/s;
 * - otherwise a queue takes cfg.syn_budget such SYNs per FLT_DP_SYN_WINDOW_NS and the rest
 *   are shed (syn_shed). Deviation from the process's rule (a receive round that is long
 *   and mostly SYNs, netif/synshed.c): the kernel cannot see how far behind the process
 *   is, so the rate itself is the pressure; more than 2,000 SYN/s from unknown sources to
 *   one process is a flood or a burst, and a burst's SYNs come back;
 * - when a quarter of the SYNs shed for a queue (SYN_JUDGE_MIN or more, halved every
 *   SYN_GEN_NS) came back, they are a burst of real clients: the queue takes every SYN
 *   for SYN_SUSPEND_NS (syn_suspended), as netif/synshed.c does.
 *
 * One shedder per path: a process whose queue this program guards does not shed too
 * (ulsd says so in the hello, CTL_HELLO_F_KSHED; stack/synshed.c), as a SYN readmitted
 * here and shed again there would cost its client a second RTO.
 *
 * Concurrency: both CPUs run this program. The per-queue state is updated without locks
 * (a lost update moves a count by one); the memory's generation turns over under a spin
 * lock, so that one CPU clears the older generation, once.
 */
#ifndef ULS_FILTER_DATAPATH_SYN_BPF_H
#define ULS_FILTER_DATAPATH_SYN_BPF_H

#define SYN_GEN_NS 3000000000ull        /* a generation of the shed memory */
#define SYN_JUDGE_MIN 256               /* shed SYNs before their comebacks are judged */
#define SYN_SUSPEND_NS 10000000000ull   /* no shedding this long after a real burst */
#define SYN_CLEAR_STEP 8                /* words a bpf_loop step clears */

/* A salt for the fingerprint's key: the cfg's key is the group pick's, and a fingerprint
 * must not be a pick's hash of the same words. */
#define SYN_KEY_SALT 0x73796e736865640aull

struct syn_gen {
	struct bpf_spin_lock lock;
	__u32 cur;               /* the newer generation: where shed SYNs go */
	__u64 start_ns;          /* when it became the newer */
	__u32 used[2];           /* SYNs put in each since it was cleared */
};

struct syn_mem {
	__u64 w[FLT_DP_SHED_WORDS];
};

DP_MAP(BPF_MAP_TYPE_ARRAY, FLT_DP_QUEUES, __u32, struct flt_dp_synq) dp_synq SEC(".maps");
DP_MAP(BPF_MAP_TYPE_LRU_HASH, FLT_DP_KNOWN_MAX, struct ip6key, __u32) dp_known SEC(".maps");
DP_MAP(BPF_MAP_TYPE_ARRAY, 1, __u32, struct syn_gen) dp_syngen SEC(".maps");
DP_MAP(BPF_MAP_TYPE_ARRAY, 2, __u32, struct syn_mem) dp_synmem SEC(".maps");

/* The source of a handshake-completing ACK to a listener (steer_frame, steer6): a known
 * peer from now on. IPv4 addresses are kept v4-mapped (RFC 4291 §2.5.5.2). */
static __always_inline void syn_known_note(const struct ip6key *k)
{
	__u32 one = 1;

	if (!bpf_map_lookup_elem(&dp_known, k))   /* the lookup refreshes it in the LRU */
		bpf_map_update_elem(&dp_known, k, &one, BPF_ANY);
}

static __always_inline void syn_v4_key(struct ip6key *k, __u32 a)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->a[10] = 0xff;
	k->a[11] = 0xff;
	__builtin_memcpy(k->a + 12, &a, 4);
}

static __always_inline int syn_bit(const struct syn_mem *m, __u32 b)
{
	b &= FLT_DP_SHED_BITS - 1;
	return (m->w[b / 64] >> (b % 64)) & 1;
}

/* Whether fp was shed and is remembered (either generation). */
static __always_inline int syn_in(__u32 g, __u64 fp)
{
	const struct syn_mem *m = bpf_map_lookup_elem(&dp_synmem, &g);

	return m && syn_bit(m, (__u32)fp) && syn_bit(m, (__u32)(fp >> 32));
}

static __always_inline int syn_remembered(__u64 fp)
{
	return syn_in(0, fp) || syn_in(1, fp);
}

static long syn_clear_step(__u32 i, void *ctx)
{
	__u32 g = *(__u32 *)ctx & 1;
	struct syn_mem *m = bpf_map_lookup_elem(&dp_synmem, &g);

	if (!m)
		return 1;
	for (__u32 k = 0; k < SYN_CLEAR_STEP; k++)
		m->w[(i * SYN_CLEAR_STEP + k) & (FLT_DP_SHED_WORDS - 1)] = 0;
	return 0;
}

/* Remember fp in the newer generation; first turn the generations over when the newer
 * one is SYN_GEN_NS old: the older is cleared (by the one CPU that claimed the turn under
 * the lock) and becomes the newer. Returns 0, or -1 when there is no memory (the SYN is
 * then taken: a SYN that cannot be remembered is never shed). */
static __always_inline int syn_remember(__u64 fp, __u64 now)
{
	__u32 zero = 0, clear = 2;
	struct syn_gen *s = bpf_map_lookup_elem(&dp_syngen, &zero);

	if (!s)
		return -1;
	bpf_spin_lock(&s->lock);
	/* Signed: now was read before the lock, and another CPU may have turned the
	 * generations over since, at a later reading (start_ns > now). Unsigned, that
	 * difference wrapped to 2^64 - x and turned them over again, clearing the generation
	 * with the SYNs shed in the last SYN_GEN_NS (their clients lost a second RTO). */
	if (s->used[s->cur & 1] && (__s64)(now - s->start_ns) >= (__s64)SYN_GEN_NS) {
		clear = (s->cur & 1) ^ 1;
		s->start_ns = now;    /* claimed: no other CPU turns it over now */
	}
	bpf_spin_unlock(&s->lock);
	if (clear < 2) {
		bpf_loop(FLT_DP_SHED_WORDS / SYN_CLEAR_STEP, syn_clear_step, &clear, 0);
		bpf_spin_lock(&s->lock);
		s->cur = clear;
		if (clear)
			s->used[1] = 0;
		else
			s->used[0] = 0;
		bpf_spin_unlock(&s->lock);
	}
	__u32 g = s->cur & 1;
	struct syn_mem *m = bpf_map_lookup_elem(&dp_synmem, &g);
	if (!m)
		return -1;
	__u32 b1 = (__u32)fp & (FLT_DP_SHED_BITS - 1), b2 = (__u32)(fp >> 32) & (FLT_DP_SHED_BITS - 1);
	__sync_fetch_and_or(&m->w[b1 / 64], 1ull << (b1 % 64));
	__sync_fetch_and_or(&m->w[b2 / 64], 1ull << (b2 % 64));
	bpf_spin_lock(&s->lock);
	if (g)   /* not used[g]: the verifier loses g's bound across the spill */
		s->used[1]++;
	else
		s->used[0]++;
	bpf_spin_unlock(&s->lock);
	return 0;
}

/* The decision for a pure SYN to queue q's listener from src (v4-mapped for IPv4) whose
 * fingerprint is fp: TCX_PASS or TCX_DROP (the header comment has the rule). */
static __attribute__((noinline)) int syn_decide(const struct flt_dp_cfg *c, __u32 q,
						const struct ip6key *src, __u64 fp)
{
	struct flt_dp_synq *sq = bpf_map_lookup_elem(&dp_synq, &q);
	struct flt_dp_qstat *st = bpf_map_lookup_elem(&dp_qstat, &q);
	__u64 now = bpf_ktime_get_ns();

	if (!sq || !st)
		return TCX_PASS;
	/* Signed differences: the other CPU may have started a window (or a judgement
	 * period) at a clock reading later than this one's; that is the current window, not
	 * one 2^64 ns old to start again with a fresh budget. */
	if ((__s64)(now - sq->win_start_ns) >= (__s64)FLT_DP_SYN_WINDOW_NS) {
		sq->win_start_ns = now;
		sq->win_syns = 0;
	}
	if ((__s64)(now - sq->judge_start_ns) >= (__s64)SYN_GEN_NS) {
		sq->judge_start_ns = now;
		sq->judge_shed /= 2;
		sq->judge_back /= 2;
	}
	if (bpf_map_lookup_elem(&dp_known, src)) {
		if (sq->win_syns >= c->syn_budget)
			st->syn_known_peer++;
		return TCX_PASS;
	}
	if (syn_remembered(fp)) {
		st->syn_readmitted++;
		sq->judge_back++;
		/* Shed SYNs that come back are a burst of real clients, not a flood. */
		if (sq->judge_shed >= SYN_JUDGE_MIN && sq->judge_back * 4 >= sq->judge_shed) {
			sq->suspend_until_ns = now + SYN_SUSPEND_NS;
			sq->judge_shed = sq->judge_back = 0;
			st->syn_suspended++;
		}
		return TCX_PASS;
	}
	if (now < sq->suspend_until_ns)
		return TCX_PASS;
	if (++sq->win_syns <= c->syn_budget)
		return TCX_PASS;
	if (syn_remember(fp, now) < 0)
		return TCX_PASS;
	sq->judge_shed++;
	st->syn_shed++;
	return TCX_DROP;
}

static __always_inline __u32 syn_queue_of(__u32 owner)
{
	__u32 *q = owner ? bpf_map_lookup_elem(&dp_lease_q, &owner) : 0;

	return q && *q < FLT_DP_QUEUES ? *q : 0;
}

/* Whether the TCP header at l4 is a pure SYN's; its ports and ISN (network order). */
static __always_inline int syn_pure(struct __sk_buff *skb, __u32 l4, __u16 ports[2], __u32 *seq)
{
	__u8 h[WIRE_TCP_OFF_FLAGS + 1];

	if (bpf_skb_load_bytes(skb, l4, h, sizeof(h)) < 0 ||
	    (h[WIRE_TCP_OFF_FLAGS] & TCP_CTL) != WIRE_TCP_SYN)
		return 0;
	__builtin_memcpy(ports, h, 4);
	__builtin_memcpy(seq, h + 4, 4);
	return 1;
}

/* An IPv4 frame: the queue of the listener a pure SYN goes to (0: not one, or ulsd's). */
static __attribute__((noinline)) int syn_guard4(struct __sk_buff *skb, const struct flt_dp_cfg *c)
{
	__u8 ip[WIRE_IPV4_HLEN_MIN];
	__u16 ports[2];
	__u32 src, dst, seq;
	int exact;

	if (bpf_skb_load_bytes(skb, WIRE_ETH_HLEN, ip, sizeof(ip)) < 0 ||
	    IPV4_VERSION(ip) != WIRE_IPV4_VERSION || IPV4_HLEN(ip) < WIRE_IPV4_HLEN_MIN ||
	    ip[WIRE_IPV4_OFF_PROTOCOL] != WIRE_IPPROTO_TCP ||
	    (RD16(ip, WIRE_IPV4_OFF_FRAG) & (WIRE_IPV4_MF | WIRE_IPV4_OFFMASK)))
		return TCX_PASS;
	__builtin_memcpy(&src, ip + WIRE_IPV4_OFF_SRC, 4);
	__builtin_memcpy(&dst, ip + WIRE_IPV4_OFF_DST, 4);
	if (dst != c->node_ip || !syn_pure(skb, WIRE_ETH_HLEN + IPV4_HLEN(ip), ports, &seq))
		return TCX_PASS;
	struct tup t = { .lip = dst, .rip = src, .lport = bpf_ntohs(ports[1]),
			 .rport = bpf_ntohs(ports[0]), .proto = WIRE_IPPROTO_TCP };
	__u32 q = syn_queue_of(endpoint_owner(c, &t, &exact));
	if (!q || exact)
		return TCX_PASS;
	struct ip6key k;
	syn_v4_key(&k, src);
	__u64 m0 = (__u64)src << 32 | dst, m1 = (__u64)ports[0] << 48 | (__u64)ports[1] << 32 | seq;
	return syn_decide(c, q, &k, flt__siphash13(c->k0 ^ SYN_KEY_SALT, c->k1, m0, m1));
}

/* The same for IPv6 (RFC 8200), for TCP directly after the fixed header. */
static __attribute__((noinline)) int syn_guard6(struct __sk_buff *skb, const struct flt_dp_cfg *c)
{
	__u8 ip[WIRE_IPV6_HLEN];
	__u16 ports[2];
	__u32 seq;
	int exact;

	if (!c->has_ip6 || bpf_skb_load_bytes(skb, WIRE_ETH_HLEN, ip, sizeof(ip)) < 0 ||
	    ip[WIRE_IPV6_OFF_VTCFL] >> 4 != WIRE_IPV6_VERSION ||
	    ip[WIRE_IPV6_OFF_NEXT] != WIRE_IPPROTO_TCP || !node_ip6(c, ip + WIRE_IPV6_OFF_DST) ||
	    !syn_pure(skb, WIRE_ETH_HLEN + WIRE_IPV6_HLEN, ports, &seq))
		return TCX_PASS;
	struct tup6 t = { .proto = WIRE_IPPROTO_TCP, .lport = bpf_ntohs(ports[1]),
			  .rport = bpf_ntohs(ports[0]) };
	__builtin_memcpy(t.lip, ip + WIRE_IPV6_OFF_DST, 16);
	__builtin_memcpy(t.rip, ip + WIRE_IPV6_OFF_SRC, 16);
	__u32 q = syn_queue_of(endpoint_owner6(c, &t, &exact));
	if (!q || exact)
		return TCX_PASS;
	struct ip6key k;
	__u64 s[2], d[2];
	__builtin_memcpy(k.a, ip + WIRE_IPV6_OFF_SRC, 16);
	__builtin_memcpy(s, ip + WIRE_IPV6_OFF_SRC, 16);
	__builtin_memcpy(d, ip + WIRE_IPV6_OFF_DST, 16);
	__u64 k0 = c->k0 ^ SYN_KEY_SALT;
	__u64 h = flt__siphash13(k0, c->k1, s[0], s[1]);
	h = flt__siphash13(k0, c->k1 ^ h, d[0], d[1]);
	h = flt__siphash13(k0, c->k1 ^ h, (__u64)ports[0] << 48 | (__u64)ports[1] << 32 | seq, 6);
	return syn_decide(c, q, &k, h);
}

SEC("tc")
int synguard(struct __sk_buff *skb)
{
	__u32 zero = 0;
	const struct flt_dp_cfg *c = bpf_map_lookup_elem(&dp_cfg, &zero);
	__u8 h[PEEK_LEN];

	if (!c || !c->syn_budget || skb->gso_size)
		return TCX_PASS;
	/* Nearly every frame is a data segment or an ACK of IPv4 without options: one read
	 * tells, and it passes here without a call. */
	int whole = peek(skb, h);
	if (whole < 0)
		return TCX_PASS;
	__u16 type = RD16(h, WIRE_ETH_OFF_TYPE);
	if (whole && type == WIRE_ETHERTYPE_IPV4 &&
	    h[WIRE_ETH_HLEN + WIRE_IPV4_OFF_VIHL] == (WIRE_IPV4_VERSION << 4 | 5) &&
	    (h[WIRE_ETH_HLEN + WIRE_IPV4_OFF_PROTOCOL] != WIRE_IPPROTO_TCP ||
	     (h[PEEK_L4 + WIRE_TCP_OFF_FLAGS] & TCP_CTL) != WIRE_TCP_SYN))
		return TCX_PASS;
	if (type == WIRE_ETHERTYPE_IPV4)
		return syn_guard4(skb, c);
	if (type == WIRE_ETHERTYPE_IPV6)
		return syn_guard6(skb, c);
	return TCX_PASS;
}

#endif
