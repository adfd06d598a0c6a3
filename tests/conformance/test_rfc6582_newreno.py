"""RFC 6582: The NewReno Modification to TCP's Fast Recovery Algorithm (no SACK)."""

from scapy.layers.inet import TCP

from conftest import curated_pcap, requirement
from flight import SMSS, Receiver, offsets


@requirement(fix='patch 0021',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c '/the first unacknowledged segment goes out again/ s/pcb->high_rxt = pcb->lastack;/;/'")
def test_rfc6582_3_2_partial_ack_retransmits_next_hole_at_once(node, link):
    """RFC 6582 §3.2, step 3 ("Response to newly acknowledged data"), "Partial
    acknowledgments": "If this ACK does *not* acknowledge
    all of the data up to and including recover, then this is a partial ACK. In this case,
    retransmit the first unacknowledged segment." Two segments of a 10-segment window are
    "lost" (offsets 0 and 4000). Three duplicate ACKs bring fast retransmit of the first;
    its ACK (to 4000) is partial, and must bring the retransmission of 4000 at once, and
    only that (lwIP 2.1.3 left recovery and waited for three more duplicates or the RTO)."""
    r = Receiver(link, window=10 * SMSS)
    r.start()
    s = r.grow()
    r.window_of(s, 10)
    for _ in range(3):
        r.ack(s)
    p = r.segment(0.15, lambda q: q[TCP].seq == s)
    assert p is not None, "no fast retransmit"
    for _ in range(5):               # segments 5..9 arrive: more duplicates
        r.ack(s)
    r.ack(s + 4 * SMSS)              # the retransmission filled the first hole: partial ACK
    got = r.segments(0.12, lambda q: (q[TCP].seq - s) & 0xFFFFFFFF < 10 * SMSS)
    assert offsets(got, s)[:1] == [(4 * SMSS, SMSS)], \
        f"after the partial ACK: {offsets(got, s)}, expected the hole at 4000 first"
    assert all(o == 4 * SMSS for o, _ in offsets(got, s)), \
        f"more than the first unacknowledged segment retransmitted: {offsets(got, s)}"
    curated_pcap(link, "test_rfc6582_3_2_partial_ack_retransmits_next_hole_at_once.pcap")
