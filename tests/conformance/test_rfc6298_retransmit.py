"""RFC 6298: Computing TCP's Retransmission Timer (RFC 9293 §3.8.1)."""

from scapy.layers.inet import TCP

from conftest import TcpPeer, requirement


@requirement(fix='lwIP 2.1.3',
             mutate="sed -i 's/TCP_MAXRTX  *12/TCP_MAXRTX 0/' stack/lwipopts.h")
def test_rfc6298_5_unacknowledged_segment_is_retransmitted(node, link):
    """RFC 6298 §5: "(5.4) Retransmit the earliest segment that has not been acknowledged
    by the TCP receiver." when the retransmission timer expires; RFC 9293 §3.10.8
    (RETRANSMISSION TIMEOUT): "For any state if the retransmission timeout expires on a
    segment in the retransmission queue, send the segment at the front of the retransmission
    queue again, reinitialize the retransmission timer, and return." We never
    acknowledge the echo of our data; the node sends the same bytes at the same sequence
    number again, one RTO later: the handshake gave a LAN round trip, so the RTO is the
    200 ms floor (RFC 6298 §2.2, Deviation from §2.4's 1 s as Linux) on 50 ms ticks."""
    peer = TcpPeer(link, 7)
    peer.connect()
    msg = b"retransmit me\n"
    peer.send("PA", msg)
    first = peer.recv(5, lambda q: len(q[TCP].payload) > 0)
    assert first is not None, "no echo"
    again = peer.recv(3, lambda q: len(q[TCP].payload) > 0)
    assert again is not None, "the unacknowledged echo was not retransmitted within 3 s"
    assert again[TCP].seq == first[TCP].seq, "retransmission at another sequence number"
    assert bytes(again[TCP].payload) == bytes(first[TCP].payload) == msg
    dt = again.time - first.time   # the kernel's stamps (conftest.Link)
    assert 0.14 <= dt <= 0.35, f"retransmitted after {dt:.3f} s, expected the 0.2 s RTO floor"
    peer.absorb(again)
    peer.ack()
