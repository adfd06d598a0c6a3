"""RFC 9293: connection close and TIME-WAIT (port 13 greets and closes actively)."""

from scapy.layers.inet import TCP

from conftest import TcpPeer, curated_pcap, requirement

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


def _reset(peer, what):
    """The node answers what we just sent with a RST (AssertionError `what` if none comes
    in 3 s) whose SEQ is our segment's SEG.ACK, which is RCV.NXT (RFC 9293 §3.10.7.1:
    <SEQ=SEG.ACK><CTL=RST>); the connection is then gone."""
    r = peer.recv(3, lambda q: q[TCP].flags.R)
    assert r is not None, what
    assert r[TCP].seq == peer.rcv_nxt, \
        f"RST SEQ {r[TCP].seq:#x}, expected SEG.ACK {peer.rcv_nxt:#x}"
    peer.closed = True


@requirement(fix='lwIP 2.1.3',
             mutate="tests/conformance/lwip-mutate core/tcp.c 's/err = tcp_send_fin(pcb);/err = ERR_OK;/'")
def test_rfc9293_3_6_active_close_fin_handshake(node, link):
    """RFC 9293 §3.6 (Case 1: Local user initiates the close): "In this case, a FIN segment
    can be constructed and placed on the outgoing segment queue. No further SENDs from the
    user will be accepted by the TCP implementation, and it enters the FIN-WAIT-1 state.
    ... All segments preceding and including FIN will be retransmitted until
    acknowledged."; and in FIN-WAIT-2 / TIME-WAIT (§3.10.7.4, "Eighth, check the FIN
    bit"): "If the FIN bit is set, signal the user "connection closing" and return any
    pending RECEIVEs with same message, advance RCV.NXT over the FIN, and send an
    acknowledgment for the FIN." The node sends its data and FIN; our FIN is acknowledged."""
    peer = TcpPeer(link, 13)
    _node_closes(peer)
    peer.send("FA")
    a = peer.recv(3, lambda q: q[TCP].flags.A and q[TCP].ack == peer.snd_nxt)
    assert a is not None, "our FIN was not acknowledged"
    assert not a[TCP].flags.R and not a[TCP].flags.F
    assert a[TCP].seq == peer.rcv_nxt
    peer.closed = True
    curated_pcap(link, "test_rfc9293_3_6_active_close_fin_handshake.pcap")


@requirement(fix='lwIP 2.1.3',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c '/^tcp_timewait_input/,/^}/ s/tcp_ack_now(pcb);/;/'")
def test_rfc9293_3_6_time_wait_acks_retransmitted_fin(node, link):
    """RFC 9293 §3.10.7.4, "Eighth, check the FIN bit", in TIME-WAIT STATE: "Remain in the
    TIME-WAIT state. Restart the 2 MSL time-wait timeout." and "First, check sequence
    number: ... If an incoming segment is not acceptable, an acknowledgment should be sent
    in reply"; §3.6: the TIME-WAIT state exists so that a lost ACK of the peer's
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


@requirement(fix='lwIP 2.1.3',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c '/TCP connection closed: LAST_ACK/,+2 s/recv_flags |= TF_CLOSED;/;/'")
def test_rfc9293_3_10_7_4_last_ack_closes_when_fin_acknowledged(node, link):
    """RFC 9293 §3.10.7.4, fifth, check the ACK field, LAST-ACK STATE: "The only thing that
    can arrive in this state is an acknowledgment of our FIN. If our FIN is now
    acknowledged, delete the TCB, enter the CLOSED state, and return." Our FIN makes the
    echo service (port 7) close too (passive close: CLOSE-WAIT, then LAST-ACK). Positive
    control: while we do not acknowledge the node's FIN it is sent again (the connection
    is still there). Once we acknowledge it, the TCB is gone: data on the tuple is refused
    with <SEQ=SEG.ACK><CTL=RST> (§3.10.7.1)."""
    peer = TcpPeer(link, 7)
    peer.connect()
    peer.send("FA")
    fin = peer.recv(3, lambda q: q[TCP].flags.F)
    assert fin is not None, "the echo service did not close after our FIN"
    assert fin[TCP].ack == peer.snd_nxt, "our FIN was not acknowledged"
    again = peer.recv(2.5, lambda q: q[TCP].flags.F and q[TCP].seq == fin[TCP].seq)
    assert again is not None, "control: the unacknowledged FIN was not sent again"
    peer.absorb(fin)
    peer.ack()
    peer.recv_all(0.3)
    peer.send("PA", b"anyone?\n", seq=peer.snd_nxt)
    _reset(peer, "data after the last ACK was not refused: the TCB is still there")


@requirement(fix='lwIP 2.1.3',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c '/received data although already closed -> abort (send RST) to/,+8 s/tcp_abort(pcb);/;/'")
def test_rfc1122_4_2_2_13_data_after_close_gets_rst(node, link):
    """RFC 1122 §4.2.2.13: "A host MAY implement a "half-duplex" TCP close sequence, so
    that an application that has called CLOSE cannot continue to read data from the
    connection. If such a host issues a CLOSE call while received data is still pending in
    TCP, or if new data is received after CLOSE is called, its TCP SHOULD send a RST to
    show that data was lost." Port 13 greets and closes (FIN-WAIT-2 once we acknowledge
    its FIN); data we send then is answered with a RST. Positive control: in the same
    state a FIN without data is acknowledged, with no RST."""
    ctl = TcpPeer(link, 13)
    _node_closes(ctl)
    ctl.send("FA")
    a = ctl.recv(3, lambda q: q[TCP].ack == ctl.snd_nxt or q[TCP].flags.R)
    assert a is not None and not a[TCP].flags.R, \
        f"control: our FIN after the node's close was not simply acknowledged: {a}"
    ctl.closed = True

    peer = TcpPeer(link, 13)
    _node_closes(peer)
    peer.send("PA", b"too late\n")
    _reset(peer, "data received after CLOSE got no RST")


@requirement(fix='lwIP 2.1.3',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c 's/if ((tcplen > 0) \\&\\& (pcb->state < CLOSE_WAIT)) {/if (tcplen > 0) {/'")
def test_rfc9293_3_10_7_4_text_after_fin_ignored_in_close_wait(node, link):
    """RFC 9293 §3.10.7.4, "Seventh, process the segment text:", for CLOSE-WAIT, CLOSING,
    LAST-ACK and TIME-WAIT STATE: "This should not occur since a FIN has been received from
    the remote side. Ignore the segment text." The hold service (port 10)
    never reads, so our FIN leaves the node in CLOSE-WAIT; 100 bytes sent after the FIN
    are not acknowledged (no ACK beyond our FIN). Positive control: the same 100 bytes
    before the FIN were acknowledged."""
    peer = TcpPeer(link, 10)
    peer.connect()
    peer.send("PA", b"d" * 100)
    a = peer.recv(2, lambda q: q[TCP].ack == peer.snd_nxt)
    assert a is not None, "control: data before the FIN was not acknowledged"
    peer.send("FA")
    fin_end = peer.snd_nxt
    a = peer.recv(2, lambda q: q[TCP].ack == fin_end)
    assert a is not None, "our FIN was not acknowledged"
    peer.send("PA", b"e" * 100, seq=fin_end)
    beyond = peer.recv_all(0.7, lambda q: q[TCP].flags.A and
                           0 < (q[TCP].ack - fin_end) & 0xFFFFFFFF < 0x80000000)
    assert beyond == [], f"text after our FIN was acknowledged: {[q.summary() for q in beyond]}"
    assert node.alive()
