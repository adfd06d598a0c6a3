"""RFC 9293 §3.10.7.4 (segment arrives, synchronized states): the order of the checks.

lwIP 2.1.3 took the send window and the ACK from a segment before it checked the
segment's sequence number, and accepted data without the ACK bit (issue 13)."""

import os

from scapy.layers.inet import TCP

from conftest import TcpPeer, requirement, wait_counter


def _echoes(peer, msg=b"still here\n"):
    peer.send("PA", msg)
    return peer.recv_data(len(msg)) == msg


def _payload(peer, duration):
    return peer.recv_all(duration, lambda q: len(q[TCP].payload) > 0)


@requirement(fix='hook stack/tcp_checks.c',
             mutate="sed -i '/Nothing of it reaches lwIP/,/STK_CNT_TCP_SEQ_UNACCEPTABLE/ s/if (!stk__tcp_seq_acceptable(/if (0 \\&\\& !stk__tcp_seq_acceptable(/' stack/tcp_checks.c")
def test_rfc9293_3_10_7_4_unacceptable_segment_acked_and_dropped(node, link, counters):
    """RFC 9293 §3.10.7.4, first check sequence number: "If an incoming segment is not
    acceptable, an acknowledgment should be sent in reply (unless the RST bit is set, if
    so drop the segment and return): <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK> After sending the
    acknowledgment, drop the unacceptable segment and return." Data 1 GiB ahead of
    RCV.NXT is answered with exactly that ACK, not echoed, and counted
    (tcp_seq_unacceptable). Positive control: the same data at RCV.NXT is echoed."""
    peer = TcpPeer(link, 7)
    peer.connect()
    before = counters()["tcp_seq_unacceptable"]
    msg = b"far away\n"
    peer.send("PA", msg, seq=(peer.snd_nxt + (1 << 30)) & 0xFFFFFFFF)
    a = peer.recv(2)
    assert a is not None, "no ACK for an unacceptable segment"
    assert a[TCP].flags == "A" and a[TCP].seq == peer.rcv_nxt and a[TCP].ack == peer.snd_nxt, \
        f"not <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>: {a.summary()}"
    assert _payload(peer, 0.7) == [], "the unacceptable segment's data was echoed"
    assert counters()["tcp_seq_unacceptable"] == before + 1, "drop not counted"
    assert _echoes(peer, msg), "the same data at RCV.NXT was not echoed"


@requirement(fix='hook stack/tcp_checks.c, patch 0012',
             mutate="sed -i '/Nothing of it reaches lwIP/,/STK_CNT_TCP_SEQ_UNACCEPTABLE/ s/if (!stk__tcp_seq_acceptable(/if (0 \\&\\& !stk__tcp_seq_acceptable(/' stack/tcp_checks.c")
def test_rfc9293_3_10_7_4_far_seq_zero_window_ack_does_not_stall(node, link, counters):
    """RFC 9293 §3.10.7.4: the sequence number is checked first ("If an incoming segment
    is not acceptable ... drop the unacceptable segment and return"), and only then "If
    SND.UNA =< SEG.ACK =< SND.NXT, the send window should be updated. If (SND.WL1 < SEG.SEQ
    or (SND.WL1 = SEG.SEQ and SND.WL2 =< SEG.ACK)), set SND.WND <- SEG.WND". The blind
    attack of issue 13: one spoofed ACK with a sequence number 2^30 ahead and WND=0. lwIP
    2.1.3 took its window (and its SEQ as SND.WL1), so the echo stalled for good. The
    node must drop it (tcp_seq_unacceptable) and keep echoing 20 KB, byte for byte."""
    peer = TcpPeer(link, 7)
    peer.connect()
    assert _echoes(peer, b"warm up\n")
    before = counters()["tcp_seq_unacceptable"]
    peer.send("A", seq=(peer.snd_nxt + (1 << 30)) & 0xFFFFFFFF,
              ack=(peer.rcv_nxt - 500) & 0xFFFFFFFF, window=0)
    peer.recv_all(0.3)
    data = os.urandom(20000)
    got = b""
    for i in range(0, len(data), 1000):
        peer.send("PA", data[i:i + 1000])
        got += peer.recv_data(1000, timeout=3)
        if len(got) < i + 1000:
            break
    assert got == data, f"echo stalled after {len(got)} of {len(data)} bytes"
    assert counters()["tcp_seq_unacceptable"] == before + 1, "spoofed ACK not counted"


@requirement(fix='hook stack/tcp_checks.c',
             mutate="sed -i 's/if (!(fl \\& TCP_ACK)) {/if (0) {/' stack/tcp_checks.c")
def test_rfc9293_3_10_7_4_data_without_ack_bit_dropped(node, link, counters):
    """RFC 9293 §3.10.7.4, fifth, check the ACK field: "if the ACK bit is off, drop the
    segment and return". Data at RCV.NXT without the ACK bit is not echoed and is counted
    (tcp_no_ack_dropped). Positive control: the same segment with the ACK bit is echoed,
    once."""
    peer = TcpPeer(link, 7)
    peer.connect()
    before = counters()["tcp_no_ack_dropped"]
    msg = b"no ack bit\n"
    peer.send("P", msg, seq=peer.snd_nxt, ack=0)
    assert _payload(peer, 1.0) == [], "data without the ACK bit was echoed"
    assert counters()["tcp_no_ack_dropped"] == before + 1, "drop not counted"
    assert _echoes(peer, msg), "the same data with the ACK bit was not echoed"
    assert _payload(peer, 0.5) == [], "echoed twice"


@requirement(fix='hook stack/tcp_checks.c',
             mutate="sed -i 's/if (!stk__tcp_ack_acceptable(/if (0 \\&\\& !stk__tcp_ack_acceptable(/' stack/tcp_checks.c")
def test_rfc9293_3_10_7_4_fin_with_ack_above_snd_nxt_not_processed(node, link, counters):
    """RFC 9293 §3.10.7.4, fifth (ESTABLISHED): "If the ACK acks something not yet sent
    (SEG.ACK > SND.NXT), then send an ACK, drop the segment, and return." A FIN whose ACK
    is 1000 beyond SND.NXT is answered with an ACK that does not acknowledge the FIN, the
    echo service does not see end of file (no FIN from the node), and the connection
    still echoes. Positive control: the FIN with a right ACK closes the echo service
    (the node answers with its own FIN)."""
    peer = TcpPeer(link, 7)
    peer.connect()
    before = counters()["tcp_ack_unacceptable"]
    bad_ack = (peer.rcv_nxt + 1000) & 0xFFFFFFFF
    peer.send("FA", seq=peer.snd_nxt, ack=bad_ack)
    a = peer.recv(2)
    assert a is not None, "no ACK for a FIN that acknowledged unsent data"
    assert a[TCP].ack == peer.snd_nxt, "the FIN was acknowledged"
    assert not a[TCP].flags.F and peer.recv_all(0.7, lambda q: q[TCP].flags.F) == [], \
        "the node closed: the FIN was processed"
    assert counters()["tcp_ack_unacceptable"] == before + 1
    assert _echoes(peer), "the connection stopped echoing"
    peer.send("FA")
    fin = peer.recv(3, lambda q: q[TCP].flags.F)
    assert fin is not None, "control: a proper FIN did not close the echo service"
    peer.absorb(fin)
    peer.ack()
    peer.closed = True


@requirement(fix='hook stack/tcp_checks.c',
             mutate="sed -i 's/if (!stk__tcp_ack_acceptable(/if (0 \\&\\& !stk__tcp_ack_acceptable(/' stack/tcp_checks.c")
def test_rfc5961_5_2_ack_above_snd_nxt_data_dropped(node, link, counters):
    """RFC 5961 §5.2: "The ACK value is considered acceptable only if it is in the range
    of ((SND.UNA - MAX.SND.WND) <= SEG.ACK <= SND.NXT). All incoming segments whose ACK
    value doesn't satisfy the above condition MUST be discarded and an ACK sent back."
    Data at RCV.NXT whose ACK is beyond SND.NXT is not echoed; a challenge ACK comes back
    (tcp_ack_unacceptable, tcp_challenge_ack_sent). Positive control: the same data with
    the right ACK is echoed."""
    peer = TcpPeer(link, 7)
    peer.connect()
    c0 = counters()
    msg = b"ack from the future\n"
    peer.send("PA", msg, seq=peer.snd_nxt, ack=(peer.rcv_nxt + 5000) & 0xFFFFFFFF)
    a = peer.recv(2)
    assert a is not None and a[TCP].ack == peer.snd_nxt and not a[TCP].payload, \
        f"no challenge ACK, or the data was taken: {a and a.summary()}"
    assert _payload(peer, 0.7) == [], "the data was echoed"
    c1 = counters()
    assert c1["tcp_ack_unacceptable"] == c0["tcp_ack_unacceptable"] + 1
    assert c1["tcp_challenge_ack_sent"] == c0["tcp_challenge_ack_sent"] + 1
    assert _echoes(peer, msg), "control: the same data with a valid ACK was not echoed"


@requirement(fix='hook stack/tcp_checks.c',
             mutate="sed -i 's/if (!stk__tcp_ack_acceptable(/if (0 \\&\\& !stk__tcp_ack_acceptable(/' stack/tcp_checks.c")
def test_rfc5961_5_2_ack_below_snd_una_minus_max_window_dropped(node, link, counters):
    """RFC 5961 §5.2: "... ((SND.UNA - MAX.SND.WND) <= SEG.ACK <= SND.NXT). All incoming
    segments whose ACK value doesn't satisfy the above condition MUST be discarded and an
    ACK sent back." Our window is 65535 << 7 (8 MiB) here, so an ACK 16 MiB below SND.UNA
    is out of range: its data is not echoed, and a challenge ACK comes back. Positive
    control: an ACK 1 MiB below SND.UNA, within MAX.SND.WND, is acceptable ("If the ACK is
    a duplicate ... it can be ignored"), so that segment's data is echoed."""
    peer = TcpPeer(link, 7, wscale=7, window=65535)
    peer.connect()
    assert _echoes(peer, b"x\n")
    before = counters()["tcp_ack_unacceptable"]
    msg = b"ack from the past\n"
    peer.send("PA", msg, seq=peer.snd_nxt, ack=(peer.rcv_nxt - (16 << 20)) & 0xFFFFFFFF)
    a = peer.recv(2)
    assert a is not None and a[TCP].ack == peer.snd_nxt, "no challenge ACK"
    assert _payload(peer, 0.7) == [], "data with an ACK below SND.UNA - MAX.SND.WND echoed"
    assert counters()["tcp_ack_unacceptable"] == before + 1
    peer.send("PA", msg, ack=(peer.rcv_nxt - (1 << 20)) & 0xFFFFFFFF)
    assert peer.recv_data(len(msg)) == msg, \
        "control: data with an old ACK within MAX.SND.WND was not echoed"


@requirement(fix='hook stack/tcp_checks.c',
             mutate="sed -i 's/stk__count(STK_CNT_TCP_SYN_CHALLENGED);/return ERR_ABRT;/' stack/tcp_checks.c")
def test_rfc5961_4_2_syn_in_established_gets_challenge_ack(node, link, counters):
    """RFC 5961 §4.2: "If the SYN bit is set, irrespective of the sequence number, TCP
    MUST send an ACK (also referred to as challenge ACK) to the remote peer:
    <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK> After sending the acknowledgment, TCP MUST drop the
    unacceptable segment and stop processing further." An in-window SYN carrying data on
    an established echo connection gets that ACK (tcp_syn_challenged), its data is not
    echoed, and the connection goes on."""
    peer = TcpPeer(link, 7)
    peer.connect()
    before = counters()["tcp_syn_challenged"]
    peer.send("S", b"syn data\n", seq=(peer.snd_nxt + 100) & 0xFFFFFFFF, ack=0,
              options=peer.syn_options())
    a = peer.recv(2)
    assert a is not None, "no challenge ACK for a SYN on an established connection"
    assert a[TCP].flags == "A" and a[TCP].seq == peer.rcv_nxt and a[TCP].ack == peer.snd_nxt
    assert _payload(peer, 0.5) == [], "the SYN's data was echoed"
    assert counters()["tcp_syn_challenged"] == before + 1
    assert _echoes(peer), "the connection did not survive the SYN"


@requirement(fix='hook stack/tcp_checks.c',
             mutate="sed -i 's/#define CHALLENGE_ACK_LIMIT  *10$/#define CHALLENGE_ACK_LIMIT 1000/' stack/tcp_checks.c")
def test_rfc5961_7_challenge_acks_rate_limited(node, link, counters):
    """RFC 5961 §7: "An implementation SHOULD include an ACK throttling mechanism to be
    conservative." ulstack allows each connection 10 challenge ACKs per 5 s (per
    connection, since a budget shared by all is the side channel of CVE-2016-5696). 30
    in-window RSTs in a burst get between 1 and 10 challenge ACKs; the rest are counted
    (tcp_challenge_ack_limited) and the connection survives."""
    peer = TcpPeer(link, 7)
    peer.connect()
    c0 = counters()
    for i in range(30):
        peer.send("R", seq=(peer.snd_nxt + 1000 + i) & 0xFFFFFFFF, ack=0, options=[])
    acks = peer.recv_all(1.0, lambda q: q[TCP].flags == "A")
    c1 = counters()
    assert 1 <= len(acks) <= 10, f"{len(acks)} challenge ACKs for 30 in-window RSTs"
    assert c1["tcp_rst_challenged"] == c0["tcp_rst_challenged"] + 30
    assert c1["tcp_challenge_ack_limited"] >= c0["tcp_challenge_ack_limited"] + 20
    assert _echoes(peer), "the connection did not survive"


@requirement(fix='hook stack/tcp_checks.c',
             mutate="sed -i 's/stk__count(STK_CNT_TCP_RST_OUT_OF_WINDOW);/;/' stack/tcp_checks.c")
def test_rfc5961_3_2_rst_out_of_window_counted_not_answered(node, link, counters):
    """RFC 5961 §3.2: "1) If the RST bit is set and the sequence number is outside the
    current receive window, silently drop the segment." (RFC 9293 §3.10.7.4: an
    unacceptable RST is dropped with no ACK.) A RST one window below RCV.NXT gets no
    answer, is counted (tcp_rst_out_of_window) and the connection echoes on. Positive
    control: the RST at exactly RCV.NXT resets it."""
    peer = TcpPeer(link, 7)
    peer.connect()
    before = counters()["tcp_rst_out_of_window"]
    peer.send("R", seq=(peer.snd_nxt - 100) & 0xFFFFFFFF, ack=0, options=[])
    assert peer.recv_all(0.7) == [], "answered an out-of-window RST"
    assert counters()["tcp_rst_out_of_window"] == before + 1
    assert _echoes(peer)
    assert peer.exact_rst_resets(), "control: the exact RST did not reset"


@requirement(fix='patch 0012',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c 's/if (TCP_SEQ_GEQ(ackno, pcb->lastack) \\&\\& TCP_SEQ_LEQ(ackno, pcb->snd_nxt) \\&\\&/if (1 || TCP_SEQ_GEQ(ackno, pcb->lastack) \\&\\& TCP_SEQ_LEQ(ackno, pcb->snd_nxt) \\&\\&/'")
def test_rfc9293_3_10_7_4_window_update_needs_newer_segment(node, link):
    """RFC 9293 §3.10.7.4 (ESTABLISHED, fifth): "If (SND.WL1 < SEG.SEQ or (SND.WL1 =
    SEG.SEQ and SND.WL2 =< SEG.ACK)), set SND.WND <- SEG.WND ... The check here prevents
    using old segments to update the window." The pattern source (port 19) sends; the
    peer closes its window with a pure ACK at SEQ S; then a reordered older segment (SEQ
    S-10, 20 bytes, so it is acceptable) offers a large window with the same ACK. The
    window must stay closed: for 0.7 s nothing but one-byte zero-window probes. Positive
    control: a pure ACK at SEQ S+10 opens it and the source sends again."""
    peer = TcpPeer(link, 19, wscale=None, window=2000)
    peer.connect()
    assert len(peer.recv_data(6000)) >= 6000, "the source did not send"
    for p in peer.recv_all(0.3, lambda q: len(q[TCP].payload) > 0):
        peer.absorb(p)
    peer.ack(window=0)
    for p in peer.recv_all(0.3, lambda q: len(q[TCP].payload) > 0):
        peer.absorb(p)
    peer.ack(window=0)
    s = peer.snd_nxt
    peer.send("A", b"0123456789abcdefghij", seq=(s - 10) & 0xFFFFFFFF, window=65535)
    peer.snd_nxt = (s + 10) & 0xFFFFFFFF
    sent = peer.recv_all(0.7, lambda q: len(q[TCP].payload) > 1)
    assert sent == [], f"an older segment reopened the window: {len(sent)} data segments"
    peer.ack(window=65535)
    more = peer.recv(3, lambda q: len(q[TCP].payload) > 1)
    assert more is not None, "control: a newer window update did not reopen the window"
