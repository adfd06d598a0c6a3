"""RFC 9293: data transfer (checksum, reassembly)."""

import os

from scapy.layers.inet import TCP

from conftest import TcpPeer, requirement


@requirement(fix='lwIP 2.1.3 (CHECKSUM_CHECK_TCP)',
             mutate="sed -i 's/CHECKSUM_CHECK_TCP  *1/CHECKSUM_CHECK_TCP 0/' stack/lwipopts.h")
def test_rfc9293_3_1_bad_checksum_segment_dropped_and_counted(node, link, counters):
    """RFC 9293 §3.1: "The checksum field is the 16-bit ones' complement of the ones'
    complement sum of all 16-bit words in the header and text." ... "The TCP checksum is
    never optional. The sender MUST generate it (MUST-2) and the receiver MUST check it
    (MUST-3)." A segment whose checksum is wrong
    is dropped: it is neither acknowledged nor echoed, and the node counts it
    (tcp_chkerr). The same data with the right checksum is then echoed."""
    peer = TcpPeer(link, 7)
    peer.connect()
    payload = b"checksum test\n"
    good = peer.segment("PA", payload)
    good_sum = TCP(bytes(good[TCP])).chksum
    before = counters()["tcp_chkerr"]
    bad = good.copy()   # the same TSval: only the checksum differs
    bad[TCP].chksum = good_sum ^ 0x0101
    link.send(bad)
    answers = peer.recv_all(1.0)
    assert answers == [], f"node answered a bad-checksum segment: {[a.summary() for a in answers]}"
    assert counters()["tcp_chkerr"] == before + 1, "tcp_chkerr did not grow by 1"
    peer.send("PA", payload)
    assert peer.recv_data(len(payload)) == payload, "the well-formed retry was not echoed"


@requirement(fix='lwIP 2.1.3 (TCP_QUEUE_OOSEQ)',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c 's/pcb->ooseq = tcp_seg_copy(&inseg);/(void)0;/'")
def test_rfc9293_3_10_7_4_out_of_order_data_reassembled(node, link):
    """RFC 9293 §3.10.7.4: "Segments with higher beginning sequence numbers SHOULD be held
    for later processing (SHLD-31)." and §3.10: incoming segments "are first tested for
    proper sequence number (i.e., that their contents lie in the range of the expected
    "receive window" in the sequence number space) and then that they are generally queued
    and processed in sequence number order." The second half of a message is sent before
    the first; the echo service (port 7) returns every byte, in order."""
    peer = TcpPeer(link, 7)
    peer.connect()
    data = os.urandom(2000)
    base = peer.snd_nxt
    peer.send("PA", data[1000:], seq=base + 1000)
    peer.send("PA", data[:1000], seq=base)
    peer.snd_nxt = (base + 2000) & 0xFFFFFFFF
    got = peer.recv_data(len(data), timeout=5)
    assert got == data, f"echoed {len(got)} bytes, in order: {got == data[:len(got)]}"
