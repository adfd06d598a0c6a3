"""RFC 9438 §4.9 with RFC 3708's detection: a fast retransmit that D-SACKs (RFC 2883) show
to have been spurious is undone.

Scapy is the SACK receiver of the node's source service (tests/conformance/flight.py). A
flight of W segments leaves; our duplicate ACK SACKs three segments above a "hole", so
the node enters fast recovery (RFC 6675 §5 (2)), cuts cwnd to 0.7 of the flight (RFC 9438
§4.6) and resends the hole. Then the original arrives after all (reordering, not loss): we
acknowledge the whole flight, which ends recovery, and the node sends what its reduced
cwnd allows of the next window. Then the resent copy arrives too: our next ACK reports it
in a D-SACK block (RFC 2883 §4). If every octet resent in the recovery was reported so,
the reduction was for nothing, and the node restores the window it had (slow start left
it far above W) and sends the rest of the receive window at once.
"""

from scapy.layers.inet import TCP

from conftest import curated_pcap, requirement, wait_counter
from flight import SMSS, Receiver, offsets

W = 10        # segments in the flight with the hole(s)
WIDE = 4 * W  # the receive window once recovery is over, above the reduced cwnd (7)


def _counted(link):
    c = link.node._process_counters()
    c.setdefault("tcp_fast_rexmit_spurious", 0)
    return c


def _new_octets(r, sent, start, duration):
    """Octets the node sent at or above start within duration after our frame `sent`,
    and the end of the highest of them (start when none)."""
    got = offsets(r.answers(sent, duration), start)
    fresh = [(o, n) for o, n in got if o < 0x80000000]
    return sum(n for _, n in fresh), start + max((o + n for o, n in fresh), default=0)


def _reordered_flight(link, holes):
    """The flight [s, s + W * SMSS), the segments at `holes` (indices) late: duplicate ACKs
    SACK the rest, the node resends each hole; then the ACK of the whole flight (the late
    originals arrived) with the window opened to WIDE segments, and what the node sends
    on it. Returns (receiver, s, end of the flight, end of what the node sent after)."""
    r = Receiver(link, window=W * SMSS, sack=True)
    r.start()
    s = r.grow()
    r.window_of(s, W)
    blocks, left = [], None
    for k in range(W):
        if k in holes:
            if left is not None:
                blocks.append((s + left * SMSS, s + k * SMSS))
            left = None
        elif left is None:
            left = k
    if left is not None:
        blocks.append((s + left * SMSS, s + W * SMSS))
    # RFC 2018 §4: the most recently received block first
    sent = r.ack(s, sack=list(reversed(blocks))[:3])
    resent = set(o for o, _ in offsets(
        r.answers(sent, 0.15, lambda q: (q[TCP].seq - s) & 0xFFFFFFFF < W * SMSS), s))
    want = set(k * SMSS for k in holes)
    # A loss probe of the last segment (RFC 8985 §7.3) may have left before our ACK came.
    assert want <= resent <= want | {(W - 1) * SMSS}, \
        f"after a duplicate ACK SACKing all but {holes} the node resent offsets " \
        f"{sorted(resent)}"
    end = s + W * SMSS
    r.window = WIDE * SMSS
    sent = r.ack(end)
    after, hi = _new_octets(r, sent, end, 0.06)
    assert 0 < after <= 8 * SMSS, \
        f"after recovery the node sent {after} octets of new data, expected the reduced " \
        f"cwnd's (0.7 of {W} segments, and perhaps one loss probe)"
    r.peer.rcv_nxt = end
    # What follows must come within the node's RTO (200 ms at least) from this ACK: a
    # timeout is a loss of its own and drops the recovery's record.
    return r, s, end, hi


@requirement(fix='patch 0140',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c "
                    "'s/  pcb->fr_undo = (pcb->flags \\& TF_SACK) \\&\\& /  pcb->fr_undo = 0 \\&\\& /'")
def test_rfc9438_4_9_spurious_fast_retransmit_undone_on_dsack(node, link):
    """RFC 9438 §4.9: "CUBIC MAY implement an algorithm to detect spurious retransmissions,
    such as DSACK [RFC3708], Forward RTO-Recovery [RFC5682], or Eifel [RFC3522]. Once a
    spurious congestion event is detected, CUBIC SHOULD restore the original values of
    above-mentioned variables" (cwnd, ssthresh, W_max, K, epoch_start, W_est). Segment 0
    of a 10-segment flight is late: the node resends it in fast recovery, the late
    original ends recovery, and the node sends 7 segments' worth (its reduced cwnd). Our
    D-SACK of segment 0 then shows the retransmission was not needed: the node counts a
    spurious fast retransmit (tcp_fast_rexmit_spurious) and, with the window it had before
    recovery restored, sends at once far more of the 40-segment receive window."""
    before = _counted(link)["tcp_fast_rexmit_spurious"]
    r, s, end, hi = _reordered_flight(link, holes=[0])
    sent = r.ack(end, sack=[(s, s + SMSS)])
    more, _ = _new_octets(r, sent, hi, 0.04)
    assert wait_counter(lambda: _counted(link), "tcp_fast_rexmit_spurious", before + 1) \
        == before + 1, "the D-SACK of the only retransmission did not count a spurious " \
        "fast retransmit (tcp_fast_rexmit_spurious)"
    assert more >= 10 * SMSS, \
        f"after the D-SACK the node sent {more} more octets: cwnd was not restored " \
        "(the reduced cwnd allows none)"
    curated_pcap(link, "test_rfc9438_4_9_spurious_fast_retransmit_undone_on_dsack.pcap")


@requirement(fix='patch 0140', level='SHOULD',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c "
                    "'/^tcp_fr_undo_check/,/^}/ s/pcb->fr_undo_rexmit != 0 ||/0 ||/'")
def test_rfc9438_4_9_undo_waits_for_a_dsack_of_every_retransmission(node, link):
    """RFC 9438 §4.9: "Once a spurious congestion event is detected, CUBIC SHOULD restore
    the original values of above-mentioned variables", with the first detection it names,
    RFC 3708's D-SACKs: a retransmission was spurious when the duplicate it caused is
    reported, and a recovery only if each of its retransmissions was. Segments 0 and 4 are late and both resent. A D-SACK of
    segment 0 alone undoes nothing (no burst, nothing counted): segment 4's retransmission
    may have repaired a real loss. The D-SACK of segment 4 then completes the proof, and
    the node restores its window."""
    before = _counted(link)["tcp_fast_rexmit_spurious"]
    r, s, end, hi = _reordered_flight(link, holes=[0, 4])
    sent = r.ack(end, sack=[(s, s + SMSS)])
    more, hi2 = _new_octets(r, sent, hi, 0.04)
    assert more <= SMSS, \
        f"after a D-SACK of one of two retransmissions the node sent {more} more octets " \
        "(at most one loss probe expected): it undid the recovery"
    assert _counted(link)["tcp_fast_rexmit_spurious"] == before, \
        "a D-SACK of one of two retransmissions counted a spurious fast retransmit"
    sent = r.ack(end, sack=[(s + 4 * SMSS, s + 5 * SMSS)])
    more, _ = _new_octets(r, sent, max(hi, hi2), 0.04)
    assert wait_counter(lambda: _counted(link), "tcp_fast_rexmit_spurious", before + 1) \
        == before + 1, "the D-SACKs of both retransmissions did not count a spurious " \
        "fast retransmit"
    assert more >= 10 * SMSS, \
        f"after the D-SACKs of both retransmissions the node sent {more} more octets: " \
        "cwnd was not restored"
