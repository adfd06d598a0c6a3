"""RFC 6675: A Conservative Loss Recovery Algorithm Based on Selective Acknowledgment
(SACK) for TCP, with the SACK blocks of RFC 2018 sent by Scapy."""

import time

from scapy.layers.inet import TCP

from conftest import curated_pcap, requirement
from flight import SMSS, Receiver, offsets

W = 10 * SMSS


def in_window(s):
    return lambda q: (q[TCP].seq - s) & 0xFFFFFFFF < W


def _full_window_and_its_tail_probe(link):
    """A SACK receiver whose 10-segment window the node fills (no new data may go), then
    the node's tail loss probe (RFC 8985 §7.3: the last segment, offset 9000, sent again),
    which the receiver takes as lost too: (the receiver, the window's first sequence
    number)."""
    r = Receiver(link, window=W, sack=True)
    r.start()
    s = r.grow()
    r.window_of(s, 10)
    probe = r.segment(1.0, lambda q: (q[TCP].seq - s) & 0xFFFFFFFF == 9 * SMSS)
    assert probe is not None, "no tail loss probe of offset 9000 (the setup's first loss)"
    return r, s


@requirement(fix='patch 0021',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c '/^tcp_recovery_send/,/^}/ s/if (!(pcb->flags \\& TF_SACK)) {/if (1) {/'")
def test_rfc6675_5_both_holes_retransmitted_without_waiting_for_an_ack(node, link):
    """RFC 6675 §5, step (4.3): "Retransmit the first data segment presumed dropped", then
    (C): "If cwnd - pipe >= 1 SMSS, the sender SHOULD transmit one or more segments as
    follows: (C.1) The scoreboard MUST be queried via NextSeg () for the sequence number
    range of the next segment to transmit", where NextSeg's rule (1) picks the first "S2
    that meets ... (1.a) S2 is greater than HighRxt. (1.b) S2 is less than the highest octet
    covered by any received SACK. (1.c) IsLost (S2) returns true." Of a 10-segment window,
    offsets 0 and 4000 are "lost"; our duplicate ACKs SACK everything else. Both holes are
    retransmitted before any cumulative ACK, and no SACKed segment is."""
    r = Receiver(link, window=W, sack=True)
    r.start()
    s = r.grow()
    # Counted before the fresh window left, not now: the node's PTO (2 * SRTT, a few ms
    # here) may expire, and 9000 go again, while this process reads the counters: run
    # alone, where this is a fresh node's first test, 4 of 10 runs saw such a probe that a
    # count read here had already included.
    probes = r.tlp_before_window
    r.window_of(s, 10)
    # Our ACKs open the window: NextSeg () rule (2) has new data to send, so rules (3) and
    # (4) (test_rfc6675_4_rule_3_..., ..._rescue_...) stay out of this test.
    r.window = 2 * W
    for k in range(2, 5):            # segments 1..3 arrive
        r.ack(s, sack=[(s + SMSS, s + k * SMSS)])
    for k in range(6, 11):           # segments 5..9 arrive
        r.ack(s, sack=[(s + 5 * SMSS, s + k * SMSS), (s + SMSS, s + 4 * SMSS)])
    got = offsets(r.segments(0.15, in_window(s)), s)
    # A loss probe (RFC 8985 §7.3: the window is full, so it resends the last segment,
    # 9000) is due a PTO after the window when no ACK came: on a loaded machine this process
    # sent its first ACK later than that. The node counts each probe; as many copies of
    # 9000 as it counted are probes, not recovery's choice (3 runs of 3 had one when a
    # counter read delayed the first ACK by a few ms).
    for _ in range(r.tlp_probes() - probes):
        if (9 * SMSS, SMSS) in got:
            got.remove((9 * SMSS, SMSS))
    offs = sorted(set(o for o, _ in got))
    assert offs == [0, 4 * SMSS], f"retransmitted {got}, expected the holes " \
        "at 0 and 4000 and nothing that was SACKed"
    curated_pcap(link, "test_rfc6675_5_both_holes_retransmitted_without_waiting_for_an_ack.pcap")


@requirement(fix='patch 0021',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c 's/((pcb->flags \\& TF_SACK) \\&\\& tcp_sack_first_hole_lost(pcb))) {/0) {/'")
def test_rfc6675_5_one_duplicate_ack_sacking_three_segments_starts_recovery(node, link):
    """RFC 6675 §5: "(2) If DupAcks < DupThresh but IsLost (HighACK + 1) returns true --
    indicating at least three segments have arrived above the current cumulative
    acknowledgment point, which is taken to indicate loss -- go to step (4)." with §4:
    IsLost "returns true when either DupThresh discontiguous SACKed sequences have arrived
    above 'SeqNum' or more than (DupThresh - 1) * SMSS bytes with sequence numbers greater
    than 'SeqNum' have been SACKed." One duplicate ACK SACKs segments 1..3 at once (the
    ACKs between were lost, or they arrived as one offloaded super-segment): segment 0 is
    retransmitted at once."""
    r = Receiver(link, window=W, sack=True)
    r.start()
    s = r.grow()
    r.window_of(s, 10)
    sent = r.ack(s, sack=[(s + SMSS, s + 4 * SMSS)])
    got = r.answers(sent, 0.15, in_window(s))
    assert offsets(got, s)[:1] == [(0, SMSS)], \
        f"after one duplicate ACK SACKing 3 segments: {offsets(got, s)}, expected offset 0"


@requirement(fix='patch 0021',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c 's/tcp_sack_pipe(pcb) + pcb->mss <= pcb->cwnd/(pcb->snd_nxt - pcb->lastack) + pcb->mss <= pcb->cwnd/'")
def test_rfc6675_5_burst_of_lost_segments_retransmitted_in_one_round_trip(node, link):
    """RFC 6675 §5 (C): "If cwnd - pipe >= 1 SMSS, the sender SHOULD transmit one or more
    segments", each chosen by NextSeg (); the pipe counts a lost segment only once it is
    retransmitted (SetPipe: "(a) If IsLost (S1) returns false: Pipe is incremented by 1
    octet. (b) If S1 <= HighRxt: Pipe is incremented by 1 octet."). Three consecutive
    segments (offsets 0-2999) of a 10-segment window are "lost", the other seven SACKed:
    cwnd = FlightSize / 2 = 5 segments leaves room for all three, which are retransmitted
    before any cumulative ACK (Reno's recovery repairs one per round trip)."""
    r = Receiver(link, window=W, sack=True)
    r.start()
    s = r.grow()
    r.window_of(s, 10)
    r.window = 2 * W                 # new data for rule (2): no rescue (rule 4) here
    for k in range(4, 11):
        r.ack(s, sack=[(s + 3 * SMSS, s + k * SMSS)])
    got = r.segments(0.15, in_window(s))
    offs = sorted(set(o for o, _ in offsets(got, s)))
    assert offs == [0, SMSS, 2 * SMSS], \
        f"retransmitted {offsets(got, s)}, expected offsets 0, 1000, 2000"


@requirement(fix='patch 0041',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c "
                    "'/ulstack (patch 0041)/,/tcp_recovery_enter(pcb);/ "
                    "s/tcp_sack_first_hole_lost(pcb)) {/0) {/'")
def test_rfc6675_5_cumulative_ack_sacking_three_segments_starts_recovery(node, link):
    """RFC 6675 §5: "Upon the receipt of any ACK containing SACK information, the
    scoreboard MUST be updated via the Update () routine", and loss recovery starts when
    "IsLost (HighACK + 1) returns true -- indicating at least three segments have arrived
    above the current cumulative acknowledgment point". The ACK that tells it may also
    move the cumulative point (RFC 8985 §6.2 looks for losses on every ACK): of a
    10-segment window, segments 0-1 arrive, 2 is "lost", 3-5 arrive, and one ACK says so
    (ACK 2000, SACK 3000-6000), after which nothing more comes back. Segment 2 is
    retransmitted at once, not at the RTO (lwIP with patch 0021 entered recovery only on
    a duplicate ACK, and a loss probe is not armed while segments are SACKed: the
    connection waited for its retransmission timer)."""
    r = Receiver(link, window=W, sack=True)
    r.start()
    s = r.grow()
    r.window_of(s, 10)
    sent = r.ack(s + 2 * SMSS, sack=[(s + 3 * SMSS, s + 6 * SMSS)])
    got = r.answers(sent, 0.1, lambda q: (q[TCP].seq - s) & 0xFFFFFFFF < W)
    assert offsets(got, s)[:1] == [(2 * SMSS, SMSS)], \
        f"within 100 ms of the ACK: {offsets(got, s)}, expected offset 2000 retransmitted"
    curated_pcap(link, "test_rfc6675_5_cumulative_ack_sacking_three_segments_starts_recovery.pcap")


@requirement(fix='patch 0043',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c "
                    "'/patch 0043): rule (4), the rescue retransmission/,+3 "
                    "s/tcp_recovery_rescue(pcb, netif, unit);/;/'")
def test_rfc6675_5_rescue_retransmission_of_the_tail(node, link):
    """RFC 6675 §4, NextSeg (): "(4) If the conditions for (1), (2), and (3) fail, but
    there exists outstanding unSACKed data, we provide the opportunity for a single
    "rescue" retransmission per entry into loss recovery. If HighACK is greater than
    RescueRxt (or RescueRxt is undefined), then one segment of up to SMSS octets that MUST
    include the highest outstanding unSACKed sequence number SHOULD be returned, and
    RescueRxt set to RecoveryPoint." Of a 10-segment window (the receive window is full:
    no new data may go) the first and the last segment are "lost", and so is the tail
    loss probe (RFC 8985 §7.3: the last segment, offset 9000, sent again); then our
    duplicate ACKs SACK segments 1-8. Nothing above the last segment can ever make it
    IsLost (); recovery resends offset 0 (rule 1) and then offset 9000 as its rescue
    retransmission, before any cumulative ACK; SACKed segments are not resent, and the
    rescue happens once (a further duplicate ACK brings no second copy)."""
    r, s = _full_window_and_its_tail_probe(link)
    for k in range(2, 10):           # segments 1..8 arrive, 9 is lost at the tail
        r.ack(s, sack=[(s + SMSS, s + k * SMSS)])
    got = r.segments(0.15, in_window(s))
    offs = sorted(set(o for o, _ in offsets(got, s)))
    assert offs == [0, 9 * SMSS], f"retransmitted {offsets(got, s)}, expected offset 0 " \
        "(a lost hole) and offset 9000 (the rescue retransmission) and nothing SACKed"
    r.ack(s, sack=[(s + SMSS, s + 9 * SMSS)])   # nothing new: no second rescue
    again = r.segments(0.1, lambda q: (q[TCP].seq - s) & 0xFFFFFFFF == 9 * SMSS)
    assert not again, f"a second rescue retransmission in one recovery: {offsets(again, s)}"
    curated_pcap(link, "test_rfc6675_5_rescue_retransmission_of_the_tail.pcap")


@requirement(fix='patch 0043',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c 's/for (rule = 1; rule <= 3 \\&\\& !found; rule += 2)/for (rule = 1; rule <= 1 \\&\\& !found; rule += 2)/'")
def test_rfc6675_4_rule_3_resends_holes_not_yet_lost(node, link):
    """RFC 6675 §4, NextSeg (): "(3) If the conditions for rules (1) and (2) fail, but
    there exists an unSACKed sequence number 'S3' that meets the criteria for detecting
    loss given in steps (1.a) and (1.b) above (specifically excluding step (1.c)), then
    one segment of up to SMSS octets starting with S3 SHOULD be returned." Of a 10-segment
    window (the receive window is full: rule (2) has no new data to send) segments 0, 6, 8
    and 9 are "lost", and so is the tail loss probe (offset 9000); our duplicate ACKs SACK
    segments 1-5 and 7. Segment 0 is lost by IsLost () (rule 1); the hole at 6000 has only
    one segment SACKed above it, so it is not, but it lies below the highest SACKed octet:
    rule (3) resends it, and rule (4) the tail (9000), before any cumulative ACK.
    SACKed segments are not resent."""
    r, s = _full_window_and_its_tail_probe(link)
    for k in range(2, 7):            # segments 1..5 arrive
        r.ack(s, sack=[(s + SMSS, s + k * SMSS)])
    r.ack(s, sack=[(s + 7 * SMSS, s + 8 * SMSS), (s + SMSS, s + 6 * SMSS)])
    got = r.segments(0.15, in_window(s))
    offs = sorted(set(o for o, _ in offsets(got, s)))
    assert offs == [0, 6 * SMSS, 9 * SMSS], f"retransmitted {offsets(got, s)}, expected " \
        "offsets 0 (rule 1), 6000 (rule 3) and 9000 (rule 4), nothing SACKed"


# With timestamps every segment carries 12 octets of options (RFC 7323 §3, two NOPs and
# the 10-octet option as lwIP sends them): one wire segment holds SMSS - 12 data octets.
TS_UNIT = SMSS - 12


@requirement(fix='patch 0112',
             mutate="rm stack/patches/0112-recovery-sends-new-data-without-deferral.patch")
def test_rfc6675_4_rule_2_new_data_in_recovery_with_super_segments(offload, link, counters):
    """RFC 6675 §4, NextSeg (): "(2) If no sequence number 'S2' per rule (1) exists but
    there exists available unsent data and the receiver's advertised window allows, the
    sequence range of one segment of up to SMSS octets of previously unsent data starting
    with sequence number HighData+1 MUST be returned." and §5 (C): "If cwnd - pipe >= 1
    SMSS, the sender SHOULD transmit one or more segments". With segmentation offload (the
    default deployment; timestamps and SACK negotiated, as every Linux peer does) the node
    queues super-segments of up to 65 wire segments and, outside recovery, defers one until
    half the window has room (patch 0087, as Linux's tcp_tso_should_defer). In recovery it
    must not: a 32-segment window is sent, its first segment "lost", and one duplicate ACK
    SACKs the next 12 and opens the receive window. CUBIC's cwnd = 0.7 * 32 = 22.4
    segments, pipe = 32 - 1 (lost) - 12 (SACKed) + 1 (retransmitted) = 20 segments: room
    for the retransmission and 2 segments of new data, which must leave at once, before
    the RTO sends the hole a second time (with 0087's rule the node waited for 11 segments
    of room, never came, and the RTO repaired)."""
    w = 32 * TS_UNIT
    r = Receiver(link, window=w, sack=True, ts=True)
    gso = counters()["dev_tx_gso"]
    r.start()
    assert r.peer.ts_ok, "the node did not agree to timestamps (RFC 7323 §3.2)"
    s = r.grow()
    # The window, as the node cuts it: whole wire segments (the bridge hands them to us cut
    # by the kernel), up to the last one that fits.
    segs, end = {}, 0
    deadline = time.monotonic() + 2.0
    while end <= w - TS_UNIT and time.monotonic() < deadline:
        p = r.segment(max(0.0, deadline - time.monotonic()),
                      lambda q: (q[TCP].seq - s) & 0xFFFFFFFF < w)
        if p is None:
            break
        off, n = offsets([p], s)[0]
        segs[off] = n
        while end in segs:
            end += segs[end]
    assert end > w - TS_UNIT, f"the window [0, {w}) did not arrive within 2 s: " \
        f"{sorted(segs.items())} (offset, length)"
    bounds = sorted(segs)
    assert len(bounds) >= 14, f"{sorted(segs.items())}: expected 32 wire segments"
    r.window = 65535                 # room for new data: rule (2), not the rescue (4)
    # Segment 0 "lost", segments 1-12 SACKed, one ACK.
    sent = r.ack(s, sack=[(s + bounds[1], s + bounds[13])])

    def offset(q):
        return (q[TCP].seq - s) & 0xFFFFFFFF

    seen, holes = [], 0
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        p = r.segment(max(0.0, deadline - time.monotonic()),
                      lambda q: q.time >= sent and (offset(q) == 0 or end <= offset(q) < 1 << 31))
        if p is None:
            break
        seen += offsets([p], s)
        if seen[-1][0] == 0:
            holes += 1
        else:
            break
    assert seen and seen[-1][0] == end, f"after the duplicate ACK: {seen} (offset, length), " \
        f"expected new data from offset {end} within 1 s"
    assert holes <= 1, f"the hole was sent {holes} times before new data: {seen} " \
        "(the second, by the RTO)"
    # Read after the exchange, not before the ACK: ulsstat's start would stand between
    # the window and the ACK, against the 200 ms RTO the test must not reach.
    assert counters()["dev_tx_gso"] > gso, \
        "the node sent no super-segment (dev_tx_gso) on this connection: offload is off"
