"""RFC 5681: TCP Congestion Control (receiver side: ACK generation)."""

from scapy.layers.inet import TCP

from conftest import TcpPeer, requirement


@requirement(fix='lwIP 2.1.3',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c '/so they can be included in the acknowledgment/,+1 s/tcp_send_empty_ack(pcb);/tcp_ack(pcb);/'")
def test_rfc5681_4_2_immediate_dup_ack_for_each_out_of_order_segment(node, link):
    """RFC 5681 §4.2: "A TCP receiver SHOULD send an immediate duplicate ACK when an
    out-of-order segment arrives. The purpose of this ACK is to inform the sender that a
    segment was received out-of-order and which sequence number is expected." Three
    out-of-order segments sent back to back get three duplicate ACKs (a delayed ACK would
    answer them with at most one)."""
    peer = TcpPeer(link, 9)
    peer.connect()
    base = peer.snd_nxt
    for off in (1000, 2000, 3000):
        peer.send("PA", b"o" * 500, seq=base + off)
    dups = peer.recv_all(1.0, lambda q: q[TCP].ack == base and len(q[TCP].payload) == 0)
    assert len(dups) >= 3, f"{len(dups)} duplicate ACKs for 3 out-of-order segments"


@requirement(fix='patch 0002',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c 's/if (fills_gap) {/if (0 \\&\\& fills_gap) {/'")
def test_rfc5681_4_2_immediate_ack_when_hole_is_filled(node, link):
    """RFC 5681 §4.2: "A TCP receiver SHOULD send an immediate ACK when the incoming
    segment fills in all or part of a gap in the sequence space." The node delays ACKs for
    in-order data with a periodic timer (RFC 9293 §3.8.6.3, up to 250 ms here); we first
    learn that timer's phase from the delayed ACK of one in-order segment, then send an
    out-of-order segment and, right after its duplicate ACK, the segment that fills the
    hole. Its ACK must come at once (under 100 ms), not with the next timer tick (~230 ms
    later)."""
    peer = TcpPeer(link, 9)
    peer.connect()
    peer.send("PA", b"0" * 500)
    assert peer.recv(2, lambda q: q[TCP].ack == peer.snd_nxt) is not None, "no ACK"
    base = peer.snd_nxt
    peer.send("PA", b"2" * 500, seq=base + 500)
    assert peer.recv(2, lambda q: q[TCP].ack == base) is not None, "no duplicate ACK"
    peer.send("PA", b"1" * 500, seq=base)
    t0 = link.frames[-1][0]
    p = peer.recv(2, lambda q: q[TCP].ack == (base + 1000) & 0xFFFFFFFF)
    assert p is not None, "the filled hole was not acknowledged"
    t1 = link.frames[-1][0]
    assert t1 - t0 < 0.1, f"the ACK for the hole fill came after {1000 * (t1 - t0):.0f} ms"


@requirement(fix='patch 0024',
             mutate='rm stack/patches/0024-*.patch')
def test_rfc5681_4_2_segment_of_two_full_sized_segments_acked_at_once(node, link):
    """RFC 5681 §4.2: "The delayed ACK algorithm specified in [RFC1122] SHOULD be used by
    a TCP receiver. When using delayed ACKs, a TCP receiver MUST NOT excessively delay
    acknowledgments. Specifically, an ACK SHOULD be generated for at least every second
    full-sized segment". One segment that carries two full-sized segments' worth of data
    (our peer announced MSS 536 and sends 1200 octets at once, as a sender's offloaded
    super-segment arrives whole) is acknowledged at once, not with the delayed-ACK timer.
    Eight rounds: the ACK of at least seven comes within 5 ms (a delayed ACK, due on a
    timer tick of random phase, would rarely)."""
    peer = TcpPeer(link, 9, mss=536)
    peer.connect()
    fast, delays = 0, []
    for k in range(8):
        peer.send("PA", bytes([65 + k]) * 1200)
        t0 = link.frames[-1][0]
        p = peer.recv(2, lambda q: q[TCP].ack == peer.snd_nxt)
        assert p is not None, f"round {k}: the segment was not acknowledged"
        d = link.frames[-1][0] - t0
        delays.append(round(1000 * d, 1))
        fast += d < 0.005
    assert fast >= 7, f"ACK delays (ms): {delays}: a 2-MSS segment waited for the timer"
