"""RFC 9293 §3.10.7.4 in SYN-RECEIVED (passive open): what each kind of segment does to a
half-open connection of the echo service (port 7), whose SYN,ACK Scapy holds unanswered.

Before the handshake completes the node's RTO is the initial 1 s (RFC 6298 §2.1), so an
unanswered SYN,ACK comes again about 1 s after the first (test_rfc6298_rto.py).
"""

import os

from scapy.layers.inet import TCP

from conftest import TcpPeer, requirement


def _half_open(link, port=7, sport=None):
    """Send a SYN, take the node's SYN,ACK and do not answer it: the node is in
    SYN-RECEIVED. Returns (peer, synack)."""
    peer = TcpPeer(link, port, sport=sport)
    peer.send("S", options=peer.syn_options(), ack=0)
    sa = peer.recv(3, lambda q: q[TCP].flags.S and q[TCP].flags.A)
    assert sa is not None, "no SYN,ACK"
    assert sa[TCP].ack == peer.snd_nxt
    peer.synack = sa
    peer.irs = sa[TCP].seq
    peer.rcv_nxt = (sa[TCP].seq + 1) & 0xFFFFFFFF
    peer.ts_ok = peer.use_ts and "Timestamp" in dict(sa[TCP].options)
    return peer, sa


def _synack_again(peer, sa, timeout):
    return peer.recv(timeout, lambda q: q[TCP].flags.S and q[TCP].flags.A and
                     q[TCP].seq == sa[TCP].seq)


def _echoes(peer, data):
    got = b""
    for i in range(0, len(data), 1000):
        peer.send("PA", data[i:i + 1000])
        got += peer.recv_data(len(data[i:i + 1000]), timeout=3)
    return got == data


@requirement(fix='lwIP 2.1.3, hook stack/tcp_checks.c',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c 's/if (seqno == pcb->rcv_nxt) {/if (0) {/'")
def test_rfc9293_3_10_7_4_rst_in_syn_received_returns_to_listen(node, link):
    """RFC 9293 §3.10.7.4, SYN-RECEIVED, second, check the RST bit: "If this connection
    was initiated with a passive OPEN (i.e., came from the LISTEN state), then return this
    connection to LISTEN state and return. The user need not be informed." A RST at
    RCV.NXT ends the half-open connection: its SYN,ACK is not sent again (1.6 s, past the
    1 s RTO), an ACK completing the old handshake is refused with a RST (RFC 9293
    §3.10.7.1: no TCB), and the port still answers a new SYN. Positive control: an
    unreset half-open connection sends its SYN,ACK again within that time."""
    ctl, csa = _half_open(link)
    assert _synack_again(ctl, csa, 1.6) is not None, \
        "control: an unanswered SYN,ACK was not retransmitted"
    ctl.send("R", seq=ctl.snd_nxt, ack=0, options=[])
    ctl.closed = True

    peer, sa = _half_open(link)
    peer.send("R", seq=peer.snd_nxt, ack=0, options=[])
    again = _synack_again(peer, sa, 1.6)
    assert again is None, "the SYN,ACK was retransmitted after a RST at RCV.NXT"
    peer.ack()
    r = peer.recv(2, lambda q: q[TCP].flags.R)
    assert r is not None, "the reset connection accepted the ACK of its SYN,ACK"
    assert r[TCP].seq == peer.rcv_nxt, "RST not <SEQ=SEG.ACK>"
    peer.closed = True
    new = TcpPeer(link, 7, sport=peer.sport)
    new.connect()
    msg = os.urandom(100)
    assert _echoes(new, msg), "the listener did not take a new connection on the port"


@requirement(fix='hook stack/tcp_checks.c, lwIP 2.1.3',
             mutate="sed -i 's/stk__count(STK_CNT_TCP_RST_CHALLENGED);/return ERR_ABRT;/' stack/tcp_checks.c && tests/conformance/lwip-mutate core/tcp_in.c '/we send a challenge ACK/,+4 s/tcp_ack_now(pcb);/;/'")
def test_rfc5961_3_2_in_window_rst_in_syn_received_gets_challenge_ack(node, link):
    """RFC 5961 §3.2 (which applies "In all states except SYN-SENT"): "3) If the RST bit
    is set and the sequence number does not exactly match the next expected sequence
    value, yet is within the current receive window (RCV.NXT < SEG.SEQ < RCV.NXT+RCV.WND),
    TCP MUST send an acknowledgment (challenge ACK): <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>
    After sending the challenge ACK, TCP MUST drop the unacceptable segment". A RST 100 bytes into the window of a
    half-open connection gets that ACK, and the handshake then completes: the connection
    echoes 2000 bytes."""
    peer, sa = _half_open(link)
    peer.send("R", seq=(peer.snd_nxt + 100) & 0xFFFFFFFF, ack=0, options=[])
    c = peer.recv(2, lambda q: not q[TCP].flags.S)
    assert c is not None, "no challenge ACK for an in-window RST in SYN-RECEIVED"
    assert c[TCP].flags == "A", f"flags {c[TCP].flags}"
    assert c[TCP].seq == (sa[TCP].seq + 1) & 0xFFFFFFFF and c[TCP].ack == peer.snd_nxt, \
        "challenge ACK is not <SEQ=SND.NXT><ACK=RCV.NXT>"
    peer.ack()
    assert _echoes(peer, os.urandom(2000)), "the connection did not survive"


@requirement(fix='lwIP 2.1.3',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c '/incorrect ACK number, send RST/,+1 s/tcp_rst(pcb, ackno,/if (0) tcp_rst(pcb, ackno,/'")
def test_rfc9293_3_10_7_4_unacceptable_ack_in_syn_received_gets_rst(node, link):
    """RFC 9293 §3.10.7.4, SYN-RECEIVED, fifth, check the ACK field: "If SND.UNA < SEG.ACK
    =< SND.NXT, then enter ESTABLISHED state and continue processing ... If the segment
    acknowledgment is not acceptable, form a reset segment <SEQ=SEG.ACK><CTL=RST> and send
    it." An ACK 1000 beyond the node's SYN,ACK gets that RST and does not open the
    connection. Positive control: the right ACK then opens it, and it echoes."""
    peer, sa = _half_open(link)
    bad = (peer.rcv_nxt + 1000) & 0xFFFFFFFF
    peer.send("A", b"too far\n", seq=peer.snd_nxt, ack=bad)
    r = peer.recv(2, lambda q: q[TCP].flags.R)
    assert r is not None, "no RST for an unacceptable ACK in SYN-RECEIVED"
    assert r[TCP].seq == bad, f"RST SEQ {r[TCP].seq:#x}, expected SEG.ACK {bad:#x}"
    assert peer.recv_all(0.3, lambda q: len(q[TCP].payload) > 0) == [], \
        "the segment with the unacceptable ACK was echoed"
    peer.ack()
    assert _echoes(peer, os.urandom(1500)), "control: the right ACK did not open it"


@requirement(fix='lwIP 2.1.3',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c '/If there was any data contained within this ACK/,+2 s/tcp_receive(pcb);/;/'")
def test_rfc9293_3_10_7_4_data_on_ack_completing_handshake_delivered(node, link):
    """RFC 9293 §3.10.7.4, SYN-RECEIVED, fifth: "If SND.UNA < SEG.ACK =< SND.NXT, then
    enter ESTABLISHED state and continue processing with the variables below set to ...",
    and seventh, process the segment text (ESTABLISHED): "Once in the ESTABLISHED state,
    it is possible to deliver segment data to user RECEIVE buffers." The ACK that completes
    the handshake carries 1000 bytes: they are echoed without being sent again."""
    peer, sa = _half_open(link)
    data = os.urandom(1000)
    peer.send("PA", data)
    assert peer.recv_data(len(data), timeout=3) == data, \
        "data on the handshake's last ACK was not delivered"


@requirement(fix='lwIP 2.1.3',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c '/Looks like another copy of the SYN/,+1 s/tcp_rexmit(pcb);/;/'")
def test_rfc9293_3_10_7_4_duplicate_syn_in_syn_received_gets_synack_again(node, link):
    """RFC 9293 §3.10.7.4, first, check sequence number (SYN-RECEIVED among the states):
    "If an incoming segment is not acceptable, an acknowledgment should be sent in reply".
    A copy of the peer's SYN (its SEQ is IRS, below RCV.NXT) means our SYN,ACK was lost:
    the node answers it with its SYN,ACK at once (its SYN is not yet acknowledged, so its
    acknowledgment is the SYN,ACK; Linux does the same), not only when the 1 s timer
    fires. The handshake then completes and echoes."""
    peer, sa = _half_open(link)
    peer.send("S", seq=(peer.snd_nxt - 1) & 0xFFFFFFFF, options=peer.syn_options(), ack=0)
    again = _synack_again(peer, sa, 0.5)
    assert again is not None, "a duplicate SYN in SYN-RECEIVED got no SYN,ACK within 0.5 s"
    assert again[TCP].ack == peer.snd_nxt
    peer.ack()
    assert _echoes(peer, os.urandom(500))


@requirement(fix='hook stack/tcp_checks.c',
             mutate="sed -i 's/stk__count(STK_CNT_TCP_SYN_CHALLENGED);/return ERR_ABRT;/' stack/tcp_checks.c")
def test_rfc5961_4_2_new_syn_in_syn_received_gets_challenge_ack(node, link, counters):
    """RFC 5961 §4.2: "If the SYN bit is set, irrespective of the sequence number, TCP MUST
    send an ACK (also referred to as challenge ACK) to the remote peer:
    <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK> After sending the acknowledgment, TCP MUST drop
    the unacceptable segment and stop processing further." (RFC 9293 §3.10.7.4, fourth,
    for SYN-RECEIVED.) A SYN with another initial sequence number on a half-open
    connection's tuple gets a plain ACK, not a SYN,ACK for a new handshake nor a RST
    (tcp_syn_challenged); the original handshake then completes and echoes."""
    peer, sa = _half_open(link)
    before = counters()["tcp_syn_challenged"]
    peer.send("S", seq=(peer.snd_nxt + 5000) & 0xFFFFFFFF, options=peer.syn_options(), ack=0)
    c = peer.recv(2)
    assert c is not None, "no answer to a new SYN in SYN-RECEIVED"
    assert c[TCP].flags == "A", f"flags {c[TCP].flags}, expected a challenge ACK"
    assert c[TCP].seq == (sa[TCP].seq + 1) & 0xFFFFFFFF and c[TCP].ack == peer.snd_nxt
    assert counters()["tcp_syn_challenged"] == before + 1
    peer.ack()
    assert _echoes(peer, os.urandom(500)), "the original handshake did not complete"
