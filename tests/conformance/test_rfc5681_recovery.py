"""RFC 5681: TCP Congestion Control (sender side: fast retransmit, ssthresh, the RTO).

Scapy is the receiver of the node's source service (TCP 19) and plays losses by what it
acknowledges (tests/conformance/flight.py). No timestamps, no SACK: segments are exactly
1000 bytes and recovery is the RFC 5681 / RFC 6582 one.
"""

import time

from scapy.layers.inet import TCP

from conftest import TcpPeer, curated_pcap, requirement
from flight import SMSS, Receiver, offsets


@requirement(fix='lwIP 2.1.3, patch 0021',
             mutate="tests/conformance/lwip-mutate include/lwip/priv/tcp_priv.h 's/#define TCP_DUPTHRESH 3/#define TCP_DUPTHRESH 4/'")
def test_rfc5681_3_2_fast_retransmit_on_third_duplicate_ack(node, link):
    """RFC 5681 §3.2: "The TCP sender SHOULD use the "fast retransmit" algorithm to detect
    and repair loss, based on incoming duplicate ACKs. The fast retransmit algorithm uses
    the arrival of 3 duplicate ACKs (as defined in section 2, without any intervening ACKs
    which move SND.UNA) as an indication that a segment has been lost." Of the initial
    window we "lose" the first segment: two duplicate ACKs bring no retransmission of it,
    the third brings exactly that segment, at once."""
    r = Receiver(link)
    s = r.start()
    r.window_of(s, 4)
    sent = time.time()           # the 200 ms RTO cannot fire before sent + 0.15
    for i in (1, 2):
        r.ack(s)
        early = r.segments(0.02, lambda q: q[TCP].seq == s)
        assert not early, f"segment {s} retransmitted after {i} duplicate ACK(s)"
    r.ack(s)
    p = r.segment(0.1, lambda q: q[TCP].seq == s)
    assert p is not None, "no fast retransmit within 100 ms of the third duplicate ACK"
    assert len(p[TCP].payload) == SMSS, f"retransmitted {len(p[TCP].payload)} bytes"
    dt = p.time - sent           # the kernel's stamp of its arrival (conftest.Link)
    assert dt < 0.15, f"retransmission {dt:.3f} s after the window: the RTO's, not fast " \
        "retransmit's"
    curated_pcap(link, "test_rfc5681_3_2_fast_retransmit_on_third_duplicate_ack.pcap")


@requirement(fix='patch 0021',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c 's/      if (dup) {/      if (!dup) { pcb->dupacks = 0; } else {/'")
def test_rfc5681_2_ack_carrying_data_does_not_reset_duplicate_count(node, link):
    """RFC 5681 §2: an acknowledgment is a DUPLICATE ACKNOWLEDGMENT when "(b) the incoming
    acknowledgment carries no data"; one that carries data is simply not a duplicate, and
    §3.2 counts "3 duplicate ACKs ... without any intervening ACKs which move SND.UNA". A
    data segment between the second and the third duplicate ACK moves nothing: the third
    still triggers fast retransmit (lwIP 2.1.3 reset its count on it)."""
    r = Receiver(link)
    s = r.start()
    r.window_of(s, 4)
    r.ack(s)
    r.ack(s)
    r.peer.send("PA", b"d" * 100, ack=s)
    assert not r.segments(0.04, lambda q: q[TCP].seq == s), "retransmitted too early"
    r.ack(s)
    p = r.segment(0.1, lambda q: q[TCP].seq == s)
    assert p is not None, "no fast retransmit after dup, dup, data, dup"


@requirement(fix='patch 0021',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c 's/LWIP_HOOK_TCP_CC_LOSS(pcb, tcp_loss_flight(pcb));/LWIP_HOOK_TCP_CC_LOSS(pcb, LWIP_MIN(pcb->cwnd, pcb->snd_wnd));/'")
def test_rfc5681_3_1_ssthresh_is_half_the_flight_size(node, link):
    """RFC 5681 §3.1, equation (4): "ssthresh = max (FlightSize / 2, 2*SMSS)" when a loss
    is detected, and §3.2 step 6 sets cwnd to ssthresh when recovery ends ("FlightSize" is
    "the amount of data that has been sent but not yet cumulatively acknowledged", not
    cwnd). We grow cwnd to tens of segments with echo traffic, then lose one of a 4-segment
    echo: ssthresh is 2 segments, and after recovery the node sends a 20-segment echo
    2-3 segments at a time (lwIP 2.1.3 used min(cwnd, rwnd) / 2: 10 or more). With
    patch 0040 the factor is RFC 9438's 0.7 of FlightSize (2.8 segments: still 2 whole
    segments; test_rfc9438_4_6_... tells the two factors apart)."""
    peer = TcpPeer(link, 7, mss=SMSS, wscale=None, ts=False, sack=False)
    peer.connect()
    def send_segments(n, byte):
        for _ in range(n):
            peer.send("PA", byte * SMSS)

    for _ in range(8):   # about 40 ACKed segments: cwnd well above 20 segments
        send_segments(5, b"g")
        got = 0
        while got < 5 * SMSS:
            p = peer.recv(2, lambda q: len(q[TCP].payload) > 0)
            assert p is not None, "echo stalled while growing cwnd"
            if peer.absorb(p):
                got += len(p[TCP].payload)
                peer.ack()
    send_segments(4, b"f")
    base = peer.rcv_nxt
    flight = []
    deadline = time.monotonic() + 2
    while len(flight) < 4 and time.monotonic() < deadline:
        p = peer.recv(0.5, lambda q: len(q[TCP].payload) > 0)
        if p is not None:
            flight.append(p)
    assert len(flight) == 4, f"echo of 4 segments came as {len(flight)}"
    for _ in range(3):               # the first of the four is "lost"
        peer.ack(ack=base)
    p = peer.recv(0.5, lambda q: len(q[TCP].payload) > 0 and q[TCP].seq == base)
    assert p is not None, "no fast retransmit"
    peer.rcv_nxt = (base + 4 * SMSS) & 0xFFFFFFFF
    peer.ack()                       # full ACK: recovery ends, cwnd = ssthresh
    time.sleep(0.05)
    send_segments(20, b"c")
    burst = peer.recv_all(0.15, lambda q: len(q[TCP].payload) > 0)
    sent = sum(len(q[TCP].payload) for q in burst)
    assert 0 < sent <= 3 * SMSS, f"after recovery the node sent {sent} bytes in one round " \
        "trip, expected cwnd = ssthresh = max(FlightSize/2, 2*SMSS) = 2000 (or one more SMSS)"
    peer.rcv_nxt = (peer.rcv_nxt + sent) & 0xFFFFFFFF
    peer.abort()


@requirement(fix='lwIP 2.1.3, patch 0021',
             mutate="tests/conformance/lwip-mutate core/tcp.c 's/pcb->cwnd = pcb->mss;/pcb->cwnd = 2 * pcb->mss;/'")
def test_rfc5681_3_1_after_rto_one_segment_is_sent(node, link):
    """RFC 5681 §3.1: "Furthermore, upon a timeout (as specified in [RFC2988]) cwnd MUST be
    set to no more than the loss window, LW, which equals 1 full-sized segment (regardless
    of the value of IW)." We acknowledge nothing of a 10-segment window: at the RTO exactly
    one segment is retransmitted, and nothing else until it is acknowledged. The ACK of
    it keeps the window's right edge where it was (no room for new data), so that the
    node goes on with the conventional recovery's slow start (RFC 5682 §2.1 step 2b: F-RTO,
    patch 0130, needs new data to send; test_rfc5682_frto.py)."""
    r = Receiver(link, window=10 * SMSS)
    r.start()
    s = r.grow()
    r.window_of(s, 10)
    p = r.segment(1.5)
    assert p is not None, "nothing retransmitted within 1.5 s"
    assert p[TCP].seq == s and len(p[TCP].payload) == SMSS, \
        f"RTO retransmission {offsets([p], s)}, expected the first segment"
    more = r.segments(0.1)
    assert not more, f"after the RTO more than one segment went out: {offsets(more, s)}"
    r.ack(s + SMSS, window=9 * SMSS)
    two = r.segments(0.1)
    assert [o for o, _ in offsets(two, s)][:2] == [SMSS, 2 * SMSS], \
        f"after the first ACK: {offsets(two, s)}"
