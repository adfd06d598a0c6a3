"""RFC 5681: TCP Congestion Control (receiver side: ACK generation)."""

import time

from scapy.layers.inet import TCP

from conftest import TcpPeer, curated_pcap, requirement


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
    curated_pcap(link, "test_rfc5681_4_2_immediate_dup_ack_for_each_out_of_order_segment.pcap")


@requirement(fix='patch 0002, patch 0091',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c 's/if (fills_gap) {/if (0 \\&\\& fills_gap) {/; "
                    "s/pcb->quickack = TCP_QUICKACK_SEGS;/pcb->quickack = 0;/g'")
def test_rfc5681_4_2_immediate_ack_when_hole_is_filled(node, link):
    """RFC 5681 §4.2: "A TCP receiver SHOULD send an immediate ACK when the incoming
    segment fills in all or part of a gap in the sequence space." The node delays the ACK
    of in-order data to its next 25 ms timer tick (stack/lwipopts.h TCP_TMR_INTERVAL), and
    a second in-order segment arriving before the tick sends one ACK for both: so timing
    alone cannot tell an immediate ACK from a delayed one here. Instead, five times: an
    out-of-order segment (its duplicate ACK comes at once), then back to back the segment
    that fills the hole and the next in-order one. An immediate ACK acknowledges exactly
    the filled range (up to the end of the queued segment) before the next segment is
    read; a delayed one would be merged into the ACK of the next segment (unless the tick
    falls between two frames sent back to back: a few percent of the time, so five rounds
    in a row cannot pass by chance). Positive control of the method: with no hole, the
    ACK of the first of two back-to-back in-order segments is merged into that of the
    second at least once in five rounds. Two mechanisms send that ACK: the filled gap
    itself (patch 0002), and the quick ACKs the out-of-order segment starts (patch 0091);
    the mutation disables both."""
    peer = TcpPeer(link, 9)
    peer.connect()
    peer.send("PA", b"0" * 500)
    assert peer.recv(2, lambda q: q[TCP].ack == peer.snd_nxt) is not None, "no ACK"
    # The control runs first: after a gap the node acknowledges every segment (patch 0091).
    merged = 0
    for _ in range(5):
        base = peer.snd_nxt
        peer.send("PA", b"4" * 500)
        peer.send("PA", b"5" * 500)
        acks = peer.recv_all(0.15, lambda q: len(q[TCP].payload) == 0)
        assert any(q[TCP].ack == peer.snd_nxt for q in acks), "control data not acknowledged"
        if not any(q[TCP].ack == (base + 500) & 0xFFFFFFFF for q in acks):
            merged += 1
    assert merged >= 1, "control: in-order segments were never acknowledged together, so " \
        "the method cannot tell a delayed ACK from an immediate one"
    separate = 0
    for _ in range(5):
        base = peer.snd_nxt
        peer.send("PA", b"2" * 500, seq=base + 500)
        assert peer.recv(2, lambda q: q[TCP].ack == base) is not None, "no duplicate ACK"
        peer.send("PA", b"1" * 500, seq=base)
        peer.send("PA", b"3" * 500, seq=base + 1000)
        peer.snd_nxt = (base + 1500) & 0xFFFFFFFF
        acks = peer.recv_all(0.15, lambda q: len(q[TCP].payload) == 0)
        assert any(q[TCP].ack == peer.snd_nxt for q in acks), "the data was not acknowledged"
        if any(q[TCP].ack == (base + 1000) & 0xFFFFFFFF for q in acks):
            separate += 1
    assert separate == 5, f"the filled hole was acknowledged on its own in {separate} of 5 " \
        "rounds: its ACK was delayed and merged with the next segment's"


@requirement(fix='patch 0024',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c "
                    "'s/if (tcplen >= 2 \\* (u32_t)pcb->mss) {/if (0 \\&\\& tcplen >= 2 * (u32_t)pcb->mss) {/'")
def test_rfc5681_4_2_segment_of_two_full_sized_segments_acked_at_once(node, link, counters):
    """RFC 5681 §4.2: "The delayed ACK algorithm specified in [RFC1122] SHOULD be used by
    a TCP receiver. When using delayed ACKs, a TCP receiver MUST NOT excessively delay
    acknowledgments. Specifically, an ACK SHOULD be generated for at least every second
    full-sized segment". One segment that carries two full-sized segments' worth of data
    (our peer announced MSS 536 and sends 1200 octets at once, as a sender's offloaded
    super-segment arrives whole) is acknowledged at once, not by the delayed-ACK timer.
    Sixteen rounds, each answered by an ACK, and none of them sent by the timer: the
    node's count of the timer's ACKs (tcp_delayed_ack_timer, patch 0113) does not move.
    A delay would not tell: the timer ticks every 25 ms at a random phase and a loaded
    machine delays the immediate ACK as much. Positive control: then one segment of 100
    octets, less than a full-sized one, is acknowledged by the timer, counted once."""
    peer = TcpPeer(link, 9, mss=536)
    peer.connect()
    timer0 = counters()["tcp_delayed_ack_timer"]
    delays = []
    for k in range(16):
        peer.send("PA", bytes([65 + k]) * 1200)
        t0 = link.frames[-1][0]
        p = peer.recv(2, lambda q: q[TCP].ack == peer.snd_nxt)
        assert p is not None, f"round {k}: the segment was not acknowledged"
        delays.append(round(1000 * (p.time - t0), 1))   # the kernel's stamp (conftest.Link)
    # The node counts a timer's ACK before sending it: every count is in by now.
    timer = counters()["tcp_delayed_ack_timer"] - timer0
    assert timer == 0, f"{timer} of 16 ACKs of a 2-MSS segment came from the delayed-ACK " \
        f"timer (ACK delays in ms: {delays})"
    peer.send("PA", b"z" * 100)
    p = peer.recv(2, lambda q: q[TCP].ack == peer.snd_nxt)
    assert p is not None, "the 100-octet segment was not acknowledged"
    timer = counters()["tcp_delayed_ack_timer"] - timer0
    assert timer == 1, f"positive control: the ACK of one small segment counted {timer} " \
        "times as the delayed-ACK timer's, expected once"


@requirement(fix='patch 0127', level='MUST',
             mutate="tests/conformance/lwip-mutate core/timeouts.c 's/  tcp_timer_check();/  (void)0;/'")
def test_rfc5681_4_2_delayed_ack_after_an_idle_spell(node, link, counters):
    """RFC 5681 §4.2: "an ACK SHOULD be generated for at least every second full-sized
    segment, and MUST be generated within 500 ms of the arrival of the first
    unacknowledged packet." After 1.5 s with nothing in flight, while the node's TCP timer
    is off (patch 0127), one small segment is acknowledged by the delayed-ACK timer
    (counted once) within its tick: the segment's arrival starts the timer again (25 ms;
    0.2 s allows for this machine's scheduling)."""
    peer = TcpPeer(link, 9)
    peer.connect()
    time.sleep(1.5)
    timer0 = counters()["tcp_delayed_ack_timer"]
    peer.send("PA", b"i" * 100)
    t0 = link.frames[-1][0]
    p = peer.recv(2, lambda q: q[TCP].ack == peer.snd_nxt)
    assert p is not None, "the segment sent after the idle spell was not acknowledged"
    delay = p.time - t0
    assert delay <= 0.2, f"the delayed ACK left {delay:.3f} s after the segment"
    assert counters()["tcp_delayed_ack_timer"] - timer0 == 1, "not the delayed-ACK timer's ACK"


def _burst_acks(peer, n=8, size=500):
    """n in-order segments sent back to back (built first, so they reach the node within a
    few tens of microseconds, as a sender's flight does); the distinct ACK numbers of the
    pure ACKs that answer them within 150 ms."""
    base = peer.snd_nxt
    frames = [bytes(peer.segment("PA", bytes([48 + k]) * size,
                                 seq=(base + k * size) & 0xFFFFFFFF)) for k in range(n)]
    for f in frames:
        peer.link.frames.append((time.time(), f))
        peer.link.sock.outs.send(f)
    peer.snd_nxt = (base + n * size) & 0xFFFFFFFF
    acks = peer.recv_all(0.15, lambda q: len(q[TCP].payload) == 0)
    assert any(q[TCP].ack == peer.snd_nxt for q in acks), "the burst was not acknowledged"
    return {q[TCP].ack for q in acks}


def _fill_a_gap(peer):
    """A loss and its repair, as the node sees them: a segment one past the next expected
    (answered by a duplicate ACK of the gap's start), then the segment that fills the gap
    (answered by an ACK of both). Returns the gap's start, `base`."""
    base = peer.snd_nxt
    peer.send("PA", b"h" * 500, seq=base + 500)
    assert peer.recv(2, lambda q: q[TCP].ack == base) is not None, "no duplicate ACK"
    peer.send("PA", b"g" * 500, seq=base)
    peer.snd_nxt = (base + 1000) & 0xFFFFFFFF
    assert peer.recv(2, lambda q: q[TCP].ack == peer.snd_nxt) is not None, \
        "the filled gap was not acknowledged"
    return base


@requirement(fix='patch 0091', level='SHOULD',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c 's/pcb->quickack = TCP_QUICKACK_SEGS;/pcb->quickack = 0;/g'")
def test_rfc5681_4_2_after_a_gap_each_segment_is_acked_at_once(node, link):
    """RFC 5681 §4.2: "A TCP receiver SHOULD send an immediate ACK when the incoming
    segment fills in all or part of a gap in the sequence space", and "an ACK SHOULD be
    generated for at least every second full-sized segment". Deviation: the node answers a
    receive batch with one ACK (patch 0088). After a loss it acknowledges the next
    in-order segments at once, each (patch 0091): a sender that has just lost a segment
    runs a small window, which one ACK per batch turns into stop-and-wait, and one lost
    ACK into a stall until the sender's probe timeout. Control first: eight in-order
    segments back to back get fewer than eight ACKs (every second segment, or one per
    batch). Then a gap (an out-of-order segment, its duplicate ACK, the segment that
    fills it): the next eight segments sent the same way get eight ACKs, one for each."""
    peer = TcpPeer(link, 9)
    peer.connect()
    peer.send("PA", b"s" * 500)
    assert peer.recv(2, lambda q: q[TCP].ack == peer.snd_nxt) is not None, "no ACK"
    control = _burst_acks(peer)
    assert len(control) < 8, f"control: {len(control)} ACKs for 8 segments without a loss: " \
        "the method cannot tell quick ACKs from the usual ones"
    _fill_a_gap(peer)
    quick = _burst_acks(peer)
    assert len(quick) == 8, f"{len(quick)} ACKs for 8 segments after a gap (control: " \
        f"{len(control)}): they were not acknowledged one by one"
    curated_pcap(link, "test_rfc5681_4_2_after_a_gap_each_segment_is_acked_at_once.pcap")


@requirement(fix='hook stack/tcp_checks.c', level='SHOULD',
             mutate="sed -i 's/pcb->quickack = TCP_QUICKACK_SEGS;/pcb->quickack = 0;/' stack/tcp_checks.c")
def test_rfc5681_4_2_after_a_segment_received_twice_each_segment_is_acked_at_once(node, link):
    """RFC 5681 §4.2: "an ACK SHOULD be generated for at least every second full-sized
    segment". Deviation: the node answers a receive batch with one ACK (patch 0088); a
    segment it has received and acknowledged already, coming again, shows that an ACK
    was lost (the sender's tail loss probe), and the node then acknowledges the next
    in-order segments at once, each (patch 0091). The next eight segments sent back to
    back get eight ACKs. Control as in the gap test: fewer than eight without it."""
    peer = TcpPeer(link, 9)
    peer.connect()
    peer.send("PA", b"s" * 500)
    assert peer.recv(2, lambda q: q[TCP].ack == peer.snd_nxt) is not None, "no ACK"
    control = _burst_acks(peer)
    assert len(control) < 8, f"control: {len(control)} ACKs for 8 segments without a loss"
    last = (peer.snd_nxt - 500) & 0xFFFFFFFF
    peer.send("PA", b"7" * 500, seq=last)
    assert peer.recv(2, lambda q: q[TCP].ack == peer.snd_nxt) is not None, \
        "the segment received twice was not acknowledged"
    quick = _burst_acks(peer)
    assert len(quick) == 8, f"{len(quick)} ACKs for 8 segments after a segment received " \
        f"twice (control: {len(control)})"


@requirement(fix='patch 0091',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c 's/if ((recv_flags \\& TF_GOT_FIN) != 0) {/if (0) {/'")
def test_rfc9293_3_10_7_4_fin_after_a_gap_acknowledged_once(node, link):
    """RFC 9293 §3.10.7.4, eighth, check the FIN bit: the FIN is acknowledged, once. After a
    loss the node acknowledges each in-order segment at once (patch 0091, RFC 5681 §4.2);
    the FIN's segment was acknowledged there and again by the state change that takes the
    FIN (lwIP's tcp_process() sets TF_ACK_NOW after tcp_receive() returns), so the same
    empty ACK went out twice, microseconds apart (seen on br0 at the end of
    test_ipv6.py's transfer; a copy that reached a peer whose LAST-ACK connection was
    already gone drew an RST). A gap filled, then the peer's FIN: the segments that
    acknowledge it carry no two alike."""
    peer = TcpPeer(link, 9)
    peer.connect()
    peer.send("PA", b"s" * 500)
    assert peer.recv(2, lambda q: q[TCP].ack == peer.snd_nxt) is not None, "no ACK"
    _fill_a_gap(peer)
    peer.send("FA")
    # The node's own FIN (the discard service closes at EOF), which it retransmits while
    # unacknowledged, is left out: only empty ACKs are counted.
    acks = peer.recv_all(1.0, lambda q: q[TCP].ack == peer.snd_nxt and not q[TCP].payload
                         and not q[TCP].flags.F)
    assert acks, "the FIN was not acknowledged by an empty ACK"
    seen = [(int(q[TCP].seq), str(q[TCP].flags), int(q[TCP].window), bytes(q[TCP].options and
             str(q[TCP].options), "ascii")) for q in acks]
    assert len(set(seen)) == len(seen), f"the FIN acknowledged twice alike: {seen}"
    curated_pcap(link, "test_rfc9293_3_10_7_4_fin_after_a_gap_acknowledged_once.pcap")
