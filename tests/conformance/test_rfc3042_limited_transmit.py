"""RFC 3042: Enhancing TCP's Loss Recovery Using Limited Transmit (RFC 5681 §3.2)."""

from scapy.layers.inet import TCP

from conftest import requirement
from flight import SMSS, Receiver, offsets


@requirement(fix='patch 0021',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c 's/return pcb->cwnd + (u32_t)LWIP_MIN(pcb->dupacks, 2) \\* pcb->mss;/return pcb->cwnd;/'")
def test_rfc3042_2_new_segment_on_each_of_first_two_duplicate_acks(node, link):
    """RFC 3042 §2: "When a TCP sender has previously unsent data queued for transmission
    it SHOULD use the Limited Transmit algorithm, which calls for a TCP sender to transmit
    new data upon the arrival of the first two consecutive duplicate ACKs when the
    following conditions are satisfied: * The receiver's advertised window allows the
    transmission of the segment. * The amount of outstanding data would remain less than or
    equal to the congestion window plus 2 segments." The initial window is 4 segments and
    the first is "lost": each of the first two duplicate ACKs releases one new segment
    (offsets 4000 and 5000), and nothing is retransmitted yet."""
    r = Receiver(link)
    s = r.start()
    r.window_of(s, 4)
    for i, want in ((1, 4 * SMSS), (2, 5 * SMSS)):
        r.ack(s)
        got = r.segments(0.04)   # well inside the 200 ms RTO
        assert offsets(got, s) == [(want, SMSS)], \
            f"after duplicate ACK {i}: {offsets(got, s)}, expected [({want}, {SMSS})]"
    r.ack(s)
    p = r.segment(0.15, lambda q: q[TCP].seq == s)
    assert p is not None, "no fast retransmit after the third duplicate ACK"
