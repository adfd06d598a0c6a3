"""RFC 9438 §4.9 with RFC 3708's detection: a fast retransmit that D-SACKs (RFC 2883) show
to have been spurious is undone.

Scapy is the SACK receiver of the node's source service (tests/conformance/flight.py). A
flight of W segments leaves; our duplicate ACK SACKs the segments above a "hole" (or two),
so the node enters fast recovery (RFC 6675 §5 (2)), cuts cwnd to 0.7 of the flight (RFC
9438 §4.6) and resends the holes. Then the originals arrive after all (reordering, not
loss): we acknowledge the whole flight, which ends recovery, and the node sends what its
reduced cwnd allows of the next window (14 of 20 segments, and perhaps a loss probe). Then
the resent copies arrive too: our next ACKs report them in D-SACK blocks (RFC 2883 §4),
at the same acknowledgment number. Once every copy resent in the recovery was reported so,
the reduction was for nothing: the node restores the window it had (the 20-segment flight;
patch 0140 saves cwnd as at most the flight, a Deviation) and sends the difference at once.

The node's RTO (200 ms at least) counts from the ACK of the flight; a timeout is a loss of
its own and drops the recovery's record, so every exchange after that ACK is kept short.
"""

from scapy.layers.inet import TCP

from conftest import curated_pcap, requirement, wait_counter
from flight import SMSS, Receiver, offsets

W = 20        # segments in the flight with the hole(s); the reduced cwnd is 14
WIDE = 2 * W  # the receive window once recovery is over: above the flight


def _counted(link):
    c = link.node._process_counters()
    for k in ("tcp_fast_rexmit_spurious", "tcp_rto"):
        c.setdefault(k, 0)
    return c


def _new_octets(r, sent, start, duration):
    """Octets the node sent at or above start within duration after our frame `sent`,
    and the end of the highest of them (start when none)."""
    got = offsets(r.answers(sent, duration), start)
    fresh = [(o, n) for o, n in got if o < 0x80000000]
    return sum(n for _, n in fresh), start + max((o + n for o, n in fresh), default=0)


def _reordered_flight(link, holes):
    """The flight [s, s + W * SMSS), the segments at `holes` (indices) late: a duplicate ACK
    SACKs the rest and the node resends each hole; then the ACK of the whole flight (the
    late originals arrived) with the window opened to WIDE segments, and what the node
    sends on it. Returns (receiver, s, end of the flight, end of what the node sent)."""
    r = Receiver(link, window=W * SMSS, sack=True)
    r.start()
    s = r.grow(acks=30)
    r.window_of(s, W)
    blocks, left = [], None
    for k in range(W):
        if k in holes and left is not None:
            blocks.append((s + left * SMSS, s + k * SMSS))
            left = None
        elif k not in holes and left is None:
            left = k
    if left is not None:
        blocks.append((s + left * SMSS, s + W * SMSS))
    sent = r.ack(s, sack=list(reversed(blocks))[:3])   # RFC 2018 §4: the latest first
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
    after, hi = _new_octets(r, sent, end, 0.05)
    assert 0 < after <= 15 * SMSS, \
        f"after recovery the node sent {after} octets of new data, expected its reduced " \
        f"cwnd's (0.7 of {W} segments, and perhaps one loss probe)"
    r.peer.rcv_nxt = end
    return r, s, end, hi


@requirement(fix='patch 0140',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c "
                    "'s/  pcb->fr_undo = (pcb->flags \\& TF_SACK) \\&\\& /  pcb->fr_undo = 0 \\&\\& /'")
def test_rfc9438_4_9_spurious_fast_retransmit_undone_on_dsack(node, link):
    """RFC 9438 §4.9: "CUBIC MAY implement an algorithm to detect spurious retransmissions,
    such as DSACK [RFC3708], Forward RTO-Recovery [RFC5682], or Eifel [RFC3522]. Once a
    spurious congestion event is detected, CUBIC SHOULD restore the original values of
    above-mentioned variables" (cwnd, ssthresh, W_max, K, epoch_start, W_est). Segment 0
    of a 20-segment flight is late: the node resends it in fast recovery, the late
    original ends recovery, and the node sends 14 segments' worth (its reduced cwnd). Our
    D-SACK of segment 0 then shows the retransmission was not needed: the node counts a
    spurious fast retransmit (tcp_fast_rexmit_spurious) and, with the window of before
    recovery restored, sends the rest of it at once (4 segments or more)."""
    before = _counted(link)
    r, s, end, hi = _reordered_flight(link, holes=[0])
    sent = r.ack(end, sack=[(s, s + SMSS)])
    more, _ = _new_octets(r, sent, hi, 0.03)
    after = _counted(link)
    assert after["tcp_rto"] == before["tcp_rto"], "a retransmission timeout came first"
    assert wait_counter(lambda: _counted(link), "tcp_fast_rexmit_spurious",
                        before["tcp_fast_rexmit_spurious"] + 1) \
        == before["tcp_fast_rexmit_spurious"] + 1, \
        "the D-SACK of the only retransmission did not count a spurious fast retransmit " \
        "(tcp_fast_rexmit_spurious)"
    assert more >= 4 * SMSS, \
        f"after the D-SACK the node sent {more} more octets: cwnd was not restored " \
        "(the reduced cwnd allows none)"
    curated_pcap(link, "test_rfc9438_4_9_spurious_fast_retransmit_undone_on_dsack.pcap")


@requirement(fix='patch 0140', level='SHOULD',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c "
                    "'/^tcp_fr_undo_dsack/,/^}/ s/n += tcp_fr_undo_overlap(\\&pcb->fr_rxt\\[i\\], left, right);/n += right - left;/'")
def test_rfc9438_4_9_undo_needs_a_dsack_of_each_resent_copy_and_of_nothing_else(node, link):
    """RFC 9438 §4.9: "Once a spurious congestion event is detected, CUBIC SHOULD restore
    the original values of above-mentioned variables", with the first detection it names,
    RFC 3708's D-SACKs: a retransmission was spurious when the duplicate it caused is
    reported, and a recovery only if each of its retransmissions was. Segments 0 and 8 are
    late and both resent. A D-SACK of segment 14, which was never resent (the network
    duplicated it), undoes nothing; nor does the D-SACK of segment 0 alone: segment 8's
    retransmission may have repaired a real loss. The D-SACK of segment 8 completes the
    proof, and the node restores its window."""
    before = _counted(link)
    r, s, end, hi = _reordered_flight(link, holes=[0, 8])
    sent = r.ack(end, sack=[(s + 14 * SMSS, s + 15 * SMSS)])
    other, hi = _new_octets(r, sent, hi, 0.02)
    sent = r.ack(end, sack=[(s, s + SMSS)])
    one, hi = _new_octets(r, sent, hi, 0.02)
    sent = r.ack(end, sack=[(s + 8 * SMSS, s + 9 * SMSS)])
    both, _ = _new_octets(r, sent, hi, 0.03)
    after = _counted(link)
    assert after["tcp_rto"] == before["tcp_rto"], "a retransmission timeout came first"
    assert other <= SMSS and one <= SMSS, \
        f"after a D-SACK of a segment never resent the node sent {other} more octets, " \
        f"after one of the two retransmissions {one} (at most one loss probe expected): " \
        "it undid the recovery too early"
    assert after["tcp_fast_rexmit_spurious"] == before["tcp_fast_rexmit_spurious"] + 1, \
        "expected exactly one spurious fast retransmit counted, after the last D-SACK: " \
        f"{after['tcp_fast_rexmit_spurious'] - before['tcp_fast_rexmit_spurious']}"
    assert both >= 4 * SMSS, \
        f"after the D-SACKs of both retransmissions the node sent {both} more octets: " \
        "cwnd was not restored"
