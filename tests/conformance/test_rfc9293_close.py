"""RFC 9293: connection close and TIME-WAIT (port 13 greets and closes actively)."""

from scapy.layers.inet import TCP

from conftest import TcpPeer, requirement

GREETING = b"ulstack\n"


def _node_closes(peer):
    """Connect to port 13, take the greeting and the node's FIN, ACK both."""
    peer.connect()
    assert peer.recv_data(len(GREETING)) == GREETING
    if peer.rcv_nxt != (peer.irs + 1 + len(GREETING) + 1) & 0xFFFFFFFF:  # no FIN yet
        fin = peer.recv(5, lambda q: q[TCP].flags.F)
        assert fin is not None, "the node did not send FIN after its greeting"
        assert fin[TCP].seq == peer.rcv_nxt, "FIN not at the end of the data"
        peer.absorb(fin)
    peer.ack()


@requirement(fix='lwIP 2.1.3',
             mutate="tests/conformance/lwip-mutate core/tcp.c 's/err = tcp_send_fin(pcb);/err = ERR_OK;/'")
def test_rfc9293_3_6_active_close_fin_handshake(node, link):
    """RFC 9293 §3.6 (Case 1: Local user initiates the close): "a FIN segment can be
    constructed and placed on the outgoing segment queue ... the TCP endpoint enters
    FIN-WAIT-1 ... any remaining data will be delivered"; and in FIN-WAIT-2 / TIME-WAIT
    (§3.10.7.4, "eighth, check the FIN bit"): "If the FIN bit is set, signal the user
    'connection closing' ... advance RCV.NXT over the FIN, and send an acknowledgment for
    the FIN." The node sends its data and FIN; our FIN is acknowledged."""
    peer = TcpPeer(link, 13)
    _node_closes(peer)
    peer.send("FA")
    a = peer.recv(3, lambda q: q[TCP].flags.A and q[TCP].ack == peer.snd_nxt)
    assert a is not None, "our FIN was not acknowledged"
    assert not a[TCP].flags.R and not a[TCP].flags.F
    assert a[TCP].seq == peer.rcv_nxt
    peer.closed = True


@requirement(fix='lwIP 2.1.3',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c '/^tcp_timewait_input/,/^}/ s/tcp_ack_now(pcb);/;/'")
def test_rfc9293_3_6_time_wait_acks_retransmitted_fin(node, link):
    """RFC 9293 §3.10.7.4, TIME-WAIT, "eighth, check the FIN bit": "TIME-WAIT STATE:
    Remain in the TIME-WAIT state. Restart the 2 MSL time-wait timeout." and "first, check
    sequence number ... If an incoming segment is not acceptable, an acknowledgment should
    be sent in reply"; §3.6: the TIME-WAIT state exists so that a lost ACK of the peer's
    FIN can be repeated. A retransmission of our FIN gets the same ACK again."""
    peer = TcpPeer(link, 13)
    _node_closes(peer)
    fin_seq = peer.snd_nxt
    peer.send("FA")
    first = peer.recv(3, lambda q: q[TCP].ack == peer.snd_nxt)
    assert first is not None, "our FIN was not acknowledged"
    peer.send("FA", seq=fin_seq)   # as if that ACK had been lost
    again = peer.recv(3, lambda q: q[TCP].ack == peer.snd_nxt)
    assert again is not None, "the retransmitted FIN was not acknowledged in TIME-WAIT"
    assert again[TCP].flags == "A", f"flags {again[TCP].flags}"
    assert again[TCP].seq == first[TCP].seq
    peer.closed = True
