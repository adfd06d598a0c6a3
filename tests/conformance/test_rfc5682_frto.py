"""RFC 5682: Forward RTO-Recovery (F-RTO), detecting spurious retransmission timeouts.

Scapy is the data receiver of the node's source service (tests/conformance/flight.py).
After slow start the node sends a fresh window of W segments; we acknowledge none of it,
so its retransmission timer expires and resends the first segment. What we acknowledge
then plays either a receiver that was only late (the original segments arrive after the
retransmission: the timeout was spurious) or a real loss of the whole window. The receive
window is opened by each ACK (the right edge moves with it), so that the node may send new
data: F-RTO needs it (§2.1 step 2b: without new data to send it keeps to the conventional
recovery). No timestamps: with them the node decides already on the first ACK from its
TSecr (RFC 3522, patch 0130), which is not what these tests look at.

The level is MUST: F-RTO itself is optional (an Experimental RFC; §3.1 makes the
SACK-enhanced version a MAY), but §2.1 says "A TCP sender implementing the basic F-RTO
algorithm MUST take the following steps", and §3.1 holds a sender that applies the
SACK-enhanced version to its steps the same way; the steps quoted below carry no RFC 2119
word of their own.
"""

from scapy.layers.inet import TCP

from conftest import requirement, wait_counter
from flight import SMSS, Receiver, offsets

W = 20   # segments in the window the timeout finds outstanding


def _timeout(link, sack):
    """A connection whose window [s, s + W * SMSS) is outstanding when the retransmission
    timer expires; returns (receiver, s) once the timeout's retransmission of s arrived
    (a tail loss probe of the last segment may come first, on SACK connections)."""
    r = Receiver(link, window=W * SMSS, sack=sack)
    r.start()
    s = r.grow()
    r.window_of(s, W)
    p = r.segment(2.0, lambda q: q[TCP].seq == s)
    assert p is not None, "the first segment was not retransmitted within 2 s"
    assert len(p[TCP].payload) == SMSS, f"RTO retransmission {offsets([p], s)}"
    return r, s


def _counters(link):
    c = link.node._process_counters()
    c.setdefault("tcp_rto_spurious", 0)
    return c


def _step2_sends_new_data(r, s):
    """The ACK of the first two original segments (the retransmission was not needed):
    the node sends new data from s + W * SMSS, not segment s + 2 * SMSS again."""
    got = r.answers(r.ack(s + 2 * SMSS), 0.15)
    offs = offsets(got, s)
    assert got, "nothing sent after the first ACK that followed the timeout"
    assert all(o >= W * SMSS for o, _ in offs), \
        f"after the first ACK the node sent {offs}: the rest of the window again " \
        f"(go-back-N), not new data from offset {W * SMSS}"
    assert sum(n for _, n in offs) <= 2 * SMSS, f"more than two new segments: {offs}"
    return max(o + n for o, n in offs)


def _spurious_then_burst(link, r, s, new_end):
    """Step 3: an ACK of more original data declares the timeout spurious; the undo
    restores cwnd (the window before the timeout, W segments or more): acknowledging all
    brings the whole fresh window at once, where the timeout's slow start (cwnd of a few
    segments) would send a handful."""
    before = _counters(link)["tcp_rto_spurious"]
    sent = r.ack(s + 4 * SMSS)
    assert wait_counter(lambda: _counters(link), "tcp_rto_spurious", before + 1) == before + 1, \
        "the timeout was not declared spurious (tcp_rto_spurious)"
    early = [o for o, _ in offsets(r.answers(sent, 0.1), s) if o < W * SMSS]
    assert not early, f"segments below recover sent again after the undo: {early}"
    end = s + new_end
    burst = offsets(r.answers(r.ack(end), 0.2), s)
    fresh = sum(n for o, n in burst if o >= new_end)
    assert fresh >= (W - 4) * SMSS, \
        f"after the undo and an ACK of everything the node sent {fresh} octets ({burst}): " \
        "cwnd was not restored"
    r.peer.rcv_nxt = end


def _spurious_timeout_undone(link, sack):
    """Steps 2b and 3b (both algorithms), and the undo."""
    r, s = _timeout(link, sack=sack)
    new_end = _step2_sends_new_data(r, s)
    _spurious_then_burst(link, r, s, new_end)


def _real_loss_goes_back_n(link, sack):
    """Step 3a (both algorithms): the retransmission is acknowledged alone, the node sends
    new data (step 2b), and a duplicate ACK follows (with SACK, of that new data only): the
    node resends the window from s + SMSS, at most 3 segments before the next ACK, and
    counts no spurious timeout."""
    r, s = _timeout(link, sack=sack)
    before = _counters(link)["tcp_rto_spurious"]
    got = offsets(r.answers(r.ack(s + SMSS, window=(W + 1) * SMSS), 0.15), s)
    assert got and all(o >= W * SMSS for o, _ in got), f"step 2b sent {got}, expected new data"
    hi = max(o + n for o, n in got)
    blocks = [(s + W * SMSS, s + hi)] if sack else ()
    sent = r.ack(s + SMSS, sack=blocks, window=(W + 1) * SMSS)
    again = offsets(r.answers(sent, 0.15), s)
    assert again and again[0] == (SMSS, SMSS), \
        f"after the duplicate ACK the node sent {again}, expected the rest of the window " \
        f"from offset {SMSS}"
    assert len([o for o, _ in again if o < W * SMSS]) <= 3, f"more than 3 SMSS: {again}"
    assert _counters(link)["tcp_rto_spurious"] == before, "a real loss counted as spurious"


@requirement(fix='patch 0130', level='MUST',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c "
                    "'s/  pcb->frto = TCP_FRTO_STEP2;/  pcb->frto = TCP_FRTO_OFF;/'")
def test_rfc5682_3_1_spurious_timeout_sends_new_data_and_restores_cwnd(node, link):
    """RFC 5682 §3.1 (SACK-enhanced F-RTO), step 2: "b) Else, if the Cumulative
    Acknowledgment field does not cover "RecoveryPoint" but is larger than SND.UNA,
    transmit up to two new (previously unsent) segments and proceed to step 3." Step 3:
    "b) If the Cumulative Acknowledgment field or a SACK information in the ACK does not
    cover more than "RecoveryPoint" AND it acknowledges data that was not acknowledged
    earlier (either with cumulative acknowledgment or using SACK information), declare
    the timeout spurious and set SpuriousRecovery to SPUR_TO." What follows a spurious
    timeout is a response algorithm's (RFC 5682 leaves it to one such as RFC 4015's). After
    the timeout's retransmission we acknowledge two original segments: the node sends new
    data (not segment 2 again); the next ACK of original data makes it count a spurious
    timeout (tcp_rto_spurious), resend nothing below RecoveryPoint, and, with cwnd and
    ssthresh as the timeout found them (patch 0130's response), send the whole next window
    at once."""
    _spurious_timeout_undone(link, sack=True)


@requirement(fix='patch 0130', level='MUST',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c "
                    "'s/      goto real_loss;/      tcp_frto_spurious(pcb); return;/'")
def test_rfc5682_3_1_real_loss_falls_back_to_conventional_recovery(node, link):
    """RFC 5682 §3.1 step 3: "a) If the Cumulative Acknowledgment field or the SACK
    information covers more than "RecoveryPoint", set the congestion window to no more
    than 3 * MSS and proceed with the conventional RTO recovery, retransmitting
    unacknowledged segments." The whole window was lost: the retransmission is
    acknowledged alone, the node sends new data (step 2b), and our duplicate ACK SACKs only
    that new data. The node resends the rest of the window from s + SMSS (go-back-N, at
    most 3 segments before the next ACK) and counts no spurious timeout."""
    _real_loss_goes_back_n(link, sack=True)


@requirement(fix='patch 0130', level='MUST',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c "
                    "'/section 2.1 step 3 \\*\\//,+2 s/  if (advanced) {/  if (0) {/'")
def test_rfc5682_2_1_basic_spurious_timeout_without_sack(node, link):
    """RFC 5682 §2.1 (the basic algorithm, for a connection without SACK), step 2: "b)
    Else, if the acknowledgment advances the window AND the Acknowledgment field does not
    cover "recover", transmit up to two new (previously unsent) segments and enter step 3
    of this algorithm."; step 3: "b) If the acknowledgment advances the window (i.e., if
    it acknowledges data that was not retransmitted after the timeout), declare the timeout
    spurious, set SpuriousRecovery to SPUR_TO, and set the value of the "recover" variable
    to SND.UNA (the oldest unacknowledged sequence number [Pos81])." The exchange of the
    SACK test, without SACK: new data after the first ACK, a spurious timeout counted after
    the second, cwnd restored."""
    _spurious_timeout_undone(link, sack=False)


@requirement(fix='patch 0130', level='MUST',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c "
                    "'/section 2.1 step 3 \\*\\//,+2 s/  if (advanced) {/  if (1) {/'")
def test_rfc5682_2_1_basic_duplicate_ack_falls_back_to_conventional_recovery(node, link):
    """RFC 5682 §2.1 step 3: "a) If the acknowledgment is a duplicate ACK, set the
    congestion window to no more than 3 * MSS (where MSS indicates Maximum Segment Size),
    and continue with the slow-start algorithm retransmitting unacknowledged segments."
    Without SACK: the retransmission is acknowledged alone, new data goes out, and a
    duplicate ACK follows: the node resends the window from s + SMSS, at most 3 segments,
    and counts no spurious timeout."""
    _real_loss_goes_back_n(link, sack=False)
