"""RFC 9293 §3.10.7.4: segments are trimmed to the window before they are kept.

lwIP 2.1.3 queued an out-of-order segment that straddled the right window edge without
trimming it, and asserted (abort) when the gap before it filled (lwIP bug #56397); and
an in-order segment that covered a queued FIN took the FIN one past the window, with the
same end. Both are reached by one peer on one connection. The hold service (port 10)
never reads, so the window the node offers only closes as the test fills it."""

import os

from scapy.layers.inet import TCP

from conftest import TcpPeer, requirement, wait_counter

CHUNK = 1400


def _hold(link):
    """A connection to the hold service without window scaling: the node offers a
    65535-byte window whose right edge stays put while nobody reads."""
    peer = TcpPeer(link, 10, wscale=None)
    sa = peer.connect()
    return peer, (peer.snd_nxt + sa[TCP].window) & 0xFFFFFFFF


def _fill(peer, upto):
    """Send in-order data from SND.NXT up to (not including) sequence number upto."""
    while peer.snd_nxt != upto:
        n = min(CHUNK, (upto - peer.snd_nxt) & 0xFFFFFFFF)
        peer.send("A", os.urandom(n))


def _ack_of(peer, value, timeout=3.0):
    return peer.recv(timeout, lambda q: q[TCP].ack == value)


@requirement(fix='patch 0011',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c 's/if (TCP_SEQ_GT(seqno + tcplen, right_edge)) {/if (0) {/'")
def test_rfc9293_3_10_7_4_out_of_order_segment_past_right_edge_trimmed(node, link, counters):
    """RFC 9293 §3.10.7.4: "In the following it is assumed that the segment is the
    idealized segment that begins at RCV.NXT and does not exceed the window. One could
    tailor actual segments to fit this assumption by trimming off any portions that lie
    outside the window (including SYN and FIN) and only processing further if the
    segment then begins at RCV.NXT." An out-of-order segment that starts 100 bytes before
    the right edge and runs 900 past it is kept trimmed (tcp_ooseq_trimmed); when the gap
    before it fills, the node acknowledges exactly the right edge and stays up."""
    peer, edge = _hold(link)
    before = counters()["tcp_ooseq_trimmed"]
    start = peer.snd_nxt
    peer.send("A", os.urandom(1000), seq=(edge - 100) & 0xFFFFFFFF)
    dup = peer.recv(2, lambda q: q[TCP].ack == start)
    assert dup is not None, "no duplicate ACK for the out-of-order segment"
    _fill(peer, (edge - 100) & 0xFFFFFFFF)
    a = _ack_of(peer, edge, 5)
    assert node.alive(), "the node died when the gap before a straddling segment filled"
    assert a is not None, "the node did not acknowledge up to the right edge"
    late = peer.recv_all(0.5, lambda q: 0 < (q[TCP].ack - edge) & 0xFFFFFFFF < 0x80000000)
    assert late == [], f"acknowledged past the window it offered: {[q.summary() for q in late]}"
    assert counters()["tcp_ooseq_trimmed"] >= before + 1, "trim not counted"


@requirement(fix='patch 0011',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c 's/if (TCP_SEQ_GT(seqno + inseg.len, fin_at)) {/if (0) {/; s/if (TCP_SEQ_GT(seqno + cseg->len, fin_at)) {/if (0) {/'")
def test_rfc9293_3_10_7_4_data_past_queued_fin_not_taken(node, link, counters):
    """RFC 9293 §3.10.7.4, "Eighth, check the FIN bit:": "If the FIN bit is set, signal the
    user "connection closing" and return any pending RECEIVEs with same message, advance
    RCV.NXT over the FIN, and send an acknowledgment for the FIN. Note that FIN implies PUSH
    for any segment text not yet delivered to the user.", and §3.4: the FIN occupies the sequence number after the last data octet, so nothing
    follows it. A FIN is queued out of order 100 bytes before the right edge; then one
    segment covers the gap, the FIN's place and the rest of the window. The node keeps the
    first FIN (its data past the FIN is dropped and counted: tcp_data_past_fin_dropped),
    acknowledges the FIN exactly, and stays up."""
    peer, edge = _hold(link)
    before = counters()["tcp_data_past_fin_dropped"]
    _fill(peer, (edge - 1000) & 0xFFFFFFFF)
    base = peer.snd_nxt
    assert _ack_of(peer, base, 5) is not None, "the fill was not acknowledged"
    fin_at = (edge - 100) & 0xFFFFFFFF
    peer.send("FA", os.urandom(100), seq=(fin_at - 100) & 0xFFFFFFFF)
    assert peer.recv(2, lambda q: q[TCP].ack == base) is not None, \
        "no duplicate ACK for the out-of-order FIN"
    peer.send("A", os.urandom(CHUNK), seq=base)
    a = _ack_of(peer, (fin_at + 1) & 0xFFFFFFFF, 5)
    assert node.alive(), "the node died when data covered a queued FIN"
    assert a is not None, "the FIN (at its first place) was not acknowledged"
    assert wait_counter(counters, "tcp_data_past_fin_dropped", before + 1) >= before + 1
