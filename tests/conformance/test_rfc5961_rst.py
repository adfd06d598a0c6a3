"""RFC 5961: Improving TCP's Robustness to Blind In-Window Attacks (§3, RST)."""

from scapy.layers.inet import TCP

from conftest import TcpPeer, curated_pcap, requirement


def _still_echoes(peer):
    msg = b"still here\n"
    peer.send("PA", msg)
    return peer.recv_data(len(msg)) == msg


@requirement(fix='hook stack/tcp_checks.c, lwIP 2.1.3',
             mutate="sed -i 's/stk__count(STK_CNT_TCP_RST_CHALLENGED);/return ERR_ABRT;/' stack/tcp_checks.c && tests/conformance/lwip-mutate core/tcp_in.c '/we send a challenge ACK/,+4 s/tcp_ack_now(pcb);/;/'")
def test_rfc5961_3_2_in_window_rst_gets_challenge_ack(node, link):
    """RFC 5961 §3.2: "3) If the RST bit is set and the sequence number does not exactly
    match the next expected sequence value, yet is within the current receive window
    (RCV.NXT < SEG.SEQ < RCV.NXT+RCV.WND), TCP MUST send an acknowledgment (challenge ACK):
    <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK> After sending the challenge ACK, TCP MUST drop the
    unacceptable segment and stop processing the incoming packet further." The connection
    survives."""
    peer = TcpPeer(link, 7)
    peer.connect()
    peer.send("R", seq=peer.snd_nxt + 1000, ack=0, options=[])
    c = peer.recv(2)
    assert c is not None, "no challenge ACK for an in-window RST"
    assert c[TCP].flags == "A", f"flags {c[TCP].flags}"
    assert c[TCP].seq == peer.rcv_nxt and c[TCP].ack == peer.snd_nxt, \
        "challenge ACK is not <SEQ=SND.NXT><ACK=RCV.NXT>"
    assert _still_echoes(peer), "the connection did not survive an in-window RST"
    curated_pcap(link, "test_rfc5961_3_2_in_window_rst_gets_challenge_ack.pcap")


@requirement(fix='hook stack/tcp_checks.c, lwIP 2.1.3',
             mutate="sed -i 's/stk__count(STK_CNT_TCP_RST_OUT_OF_WINDOW);/stk__count(STK_CNT_TCP_RST_OUT_OF_WINDOW); return ERR_OK;/' stack/tcp_checks.c && tests/conformance/lwip-mutate core/tcp_in.c 's/if (seqno == pcb->rcv_nxt) {/if (1) {/'")
def test_rfc5961_3_2_out_of_window_rst_ignored(node, link):
    """RFC 5961 §3.2: "1) If the RST bit is set and the sequence number is outside the
    current receive window, silently drop the segment." Positive control: the same RST
    at exactly RCV.NXT resets the connection."""
    peer = TcpPeer(link, 7)
    peer.connect()
    peer.send("R", seq=(peer.snd_nxt + 0x40000000) & 0xFFFFFFFF, ack=0, options=[])
    answers = peer.recv_all(1.0)
    assert answers == [], f"answered an out-of-window RST: {[a.summary() for a in answers]}"
    assert _still_echoes(peer), "an out-of-window RST affected the connection"
    assert peer.exact_rst_resets(), "control: the RST at RCV.NXT did not reset"


@requirement(fix='lwIP 2.1.3',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c 's/if (seqno == pcb->rcv_nxt) {/if (0) {/'")
def test_rfc5961_3_2_exact_rst_resets_connection(node, link):
    """RFC 5961 §3.2: "2) If the RST bit is set and the sequence number exactly matches the
    next expected sequence number (RCV.NXT), then TCP MUST reset the connection." Data on
    the old 4-tuple is then answered with a RST (RFC 9293 §3.10.7.1)."""
    peer = TcpPeer(link, 7)
    peer.connect()
    peer.send("R", seq=peer.snd_nxt, ack=0, options=[])
    peer.closed = True
    assert peer.recv_all(0.5) == [], "node answered the RST"
    peer.send("PA", b"anyone?\n")
    r = peer.recv(3)
    assert r is not None and r[TCP].flags.R, \
        f"data after the reset was not refused with RST: {r and r.summary()}"
