"""RFC 8985: The RACK-TLP Loss Detection Algorithm for TCP. Scapy is the data receiver
(tests/conformance/flight.py) and decides which of the node's segments "arrive".

ulstack implements TLP (§7) and the part of RACK's time-based rule (§6.2) that its
sequence-ordered sender can apply without a transmit time per wire segment: a hole sent
before a delivered loss probe, and a retransmission sent before delivered new data, are
lost (lwIP patch 0023)."""

import time

from scapy.layers.inet import TCP

from conftest import curated_pcap, requirement
from flight import SMSS, Receiver, offsets


def in_range(s, n):
    return lambda q: (q[TCP].seq - s) & 0xFFFFFFFF < n * SMSS


@requirement(fix='patch 0023',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c "
                    "'s/pcb->tlp_state = TCP_TLP_ARMED;/pcb->tlp_state = TCP_TLP_IDLE;/'")
def test_rfc8985_7_tail_loss_probe_before_the_rto(node, link):
    """RFC 8985 §7.2: "The sender SHOULD start or restart a loss probe PTO timer after
    transmitting new data (that was not itself a loss probe) or upon receiving an ACK that
    cumulatively acknowledges new data unless it is already in fast recovery, RTO
    recovery, or segments have been SACKed"; §7.3: when no new data may be sent (here the
    receive window is full), the probe is a retransmission of the most recently sent
    segment, and "After attempting to send a loss probe, regardless of whether a loss
    probe was sent, the sender MUST re-arm the RTO timer". Of a 10-segment window nothing
    is acknowledged: the first segment sent again is the last one (offset 9000), a probe,
    before the RTO, which would have resent offset 0 first. The order on the wire says
    which came first, not a wall-time bound: on a loaded machine grow()'s ACKs come late,
    the node's RTT estimate grows with them, and so do its PTO and RTO (a probe 0.9 s
    after the window was seen). (ulstack probes connections that use SACK, as Linux
    does.)"""
    r = Receiver(link, window=10 * SMSS, sack=True)
    r.start()
    s = r.grow()
    t0 = r.window_of(s, 10)   # when its last segment came (the kernel's stamp)
    p = r.segment(5.0, in_range(s, 10))
    assert p is not None, "nothing was sent again within 5 s"
    t = p.time - t0
    got = offsets([p], s)
    assert got == [(9 * SMSS, SMSS)], \
        f"first retransmission {got} after {t:.3f} s: expected the last segment (9000)"
    curated_pcap(link, "test_rfc8985_7_tail_loss_probe_before_the_rto.pcap")


@requirement(fix='patch 0023',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c "
                    "'s/(pcb->rack_lost_valid \\&\\& TCP_SEQ_LT(start, pcb->rack_lost))/"
                    "(0 \\&\\& TCP_SEQ_LT(start, pcb->rack_lost))/'")
def test_rfc8985_6_2_hole_sent_before_delivered_probe_is_lost(node, link):
    """RFC 8985 §6.2, RACK_detect_loss(): "For each segment, Segment, not acknowledged
    yet: If RACK_sent_after(RACK.xmit_ts, RACK.end_seq, Segment.xmit_ts,
    Segment.end_seq): remaining = Segment.xmit_ts + RACK.rtt + RACK.reo_wnd - Now() If
    remaining <= 0: Segment.lost = TRUE". The whole 10-segment window is "lost"; the tail
    loss probe (offset 9000) arrives and is SACKed. Every segment below it was sent a PTO
    before it, so all are lost at once and recovery starts: offsets 0 and 1000 go out
    before any cumulative ACK. Under RFC 6675 alone one SACKed segment is one duplicate
    ACK, not a loss, and the holes wait for the RTO, which resends offset 0 only."""
    r = Receiver(link, window=10 * SMSS, sack=True)
    r.start()
    s = r.grow()
    r.window_of(s, 10)
    p = r.segment(2.0, in_range(s, 10))
    assert p is not None and offsets([p], s) == [(9 * SMSS, SMSS)], \
        f"expected the loss probe of offset 9000, got {offsets([p], s) if p else None}"
    r.ack(s, sack=[(s + 9 * SMSS, s + 10 * SMSS)])
    got = r.segments(0.15, in_range(s, 10))
    offs = sorted(set(o for o, _ in offsets(got, s)))
    assert offs[:2] == [0, SMSS], \
        f"after the probe's SACK: {offsets(got, s)}, expected offsets 0 and 1000 at once"
    curated_pcap(link, "test_rfc8985_6_2_hole_sent_before_delivered_probe_is_lost.pcap")


@requirement(fix='patch 0023',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c "
                    "'s/if (TCP_SEQ_GT(pcb->sb\\[i\\].right, pcb->rxt_mark)) {/if (0) {/'")
def test_rfc8985_6_2_lost_retransmission_sent_again_without_rto(node, link):
    """RFC 8985 §6.2, RACK_detect_loss(): "For each segment, Segment, not acknowledged
    yet: If RACK_sent_after(RACK.xmit_ts, RACK.end_seq, Segment.xmit_ts,
    Segment.end_seq): remaining = Segment.xmit_ts + RACK.rtt + RACK.reo_wnd - Now() If
    remaining <= 0: Segment.lost = TRUE" applies to retransmissions too (§2.2: RACK-TLP
    detects "lost retransmissions"). Offset 0 of a 20-segment window is lost; a duplicate
    ACK SACKing the rest (and opening the window) starts recovery: offset 0 is resent and
    new data follows it. That retransmission is "lost" as well: our next ACK SACKs the
    new data sent after it. Offset 0 goes out a third time at once, not after the RTO (RFC
    6675 alone never resends a hole below HighRxt before the RTO)."""
    r = Receiver(link, window=20 * SMSS, sack=True)
    r.start()
    s = r.grow()
    r.window_of(s, 20)
    r.window = 40 * SMSS
    t0 = time.time()
    r.ack(s, sack=[(s + SMSS, s + 20 * SMSS)])
    got = r.segments(0.05, in_range(s, 40))
    # Offsets 1000-19999 are SACKed: recovery never sends them. One of them here is the
    # tail loss probe (offset 19000, the last segment), due before our ACK arrived when
    # this process was slow to send it on a loaded machine: not recovery's order.
    offs = [(o, n) for o, n in offsets(got, s) if not SMSS <= o < 20 * SMSS]
    assert offs[:1] == [(0, SMSS)], f"recovery did not resend offset 0 first: {offs}"
    new = [o + n for o, n in offs if o >= 20 * SMSS]
    assert new, f"no new data followed the retransmission: {offs}"
    r.ack(s, sack=[(s + SMSS, s + max(new))])
    again = r.segment(0.08, lambda q: (q[TCP].seq - s) & 0xFFFFFFFF == 0)
    t = again.time - t0 if again is not None else None   # the kernel's stamp (conftest.Link)
    # The RTO, armed when recovery began, fires 150 ms after it at the earliest.
    assert again is not None and t < 0.15, \
        f"the lost retransmission of offset 0 was not sent again before the RTO ({t} s)"
    curated_pcap(link, "test_rfc8985_6_2_lost_retransmission_sent_again_without_rto.pcap")
