"""RFC 9293 §3.5 and §3.10.7.3: simultaneous open, and what SYN-SENT does with a SYN,ACK.

The node dials Scapy on request (UDP 11, apps/ulsnode.c) and serves echo on the
connection once it is open. Instead of answering the node's SYN with a SYN,ACK, Scapy
sends a SYN of its own, as a peer whose connect crossed the node's would: RFC 9293
Figure 7. lwIP 2.1.3 handled only a SYN,ACK in SYN-SENT and dropped such a SYN.
"""

import os

from scapy.layers.inet import TCP

from conftest import curated_pcap, requirement, tcp_opts, wait_counter
from flight import SMSS, dial, syn_ack


def _echo(peer, data, timeout=5.0):
    peer.send("PA", data)
    return peer.recv_data(len(data), timeout=timeout)


def _crossing_syn(peer):
    """Scapy's own SYN, <SEQ=ISS><CTL=SYN>, sent while the node is in SYN-SENT."""
    opts = [("MSS", SMSS)]
    if peer.use_ts:
        opts.append(("Timestamp", (peer.tsval(), 0)))
    peer.send("S", options=opts, ack=0)


@requirement(fix='patch 0013',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c "
                    "'s/else if ((flags \\& TCP_SYN) \\&\\& !(flags \\& TCP_ACK)) {/else if (0) {/'")
def test_rfc9293_3_5_simultaneous_open_completes(node, link, counters):
    """RFC 9293 §3.5: "A TCP implementation MUST support simultaneous open attempts
    (MUST-10)." and §3.10.7.3 (SYN-SENT), fourth, check the SYN bit: "If the SYN bit is
    on ... RCV.NXT is set to SEG.SEQ+1, IRS is set to SEG.SEQ ... Otherwise, enter
    SYN-RECEIVED, form a SYN,ACK segment <SEQ=ISS><ACK=RCV.NXT><CTL=SYN,ACK> and send
    it." (Figure 7). The node's SYN and ours cross; the node answers ours with
    <SEQ=ISS><ACK=our ISS+1><CTL=SYN,ACK> (counted: tcp_simultaneous_open); our SYN,ACK
    then takes it to ESTABLISHED, and 3000 bytes are echoed back byte for byte."""
    before = counters()["tcp_simultaneous_open"]
    peer, syn, _ = dial(link)
    _crossing_syn(peer)
    sa = peer.recv(3, lambda q: q[TCP].flags.S)
    assert sa is not None, "no answer to a SYN received in SYN-SENT"
    assert sa[TCP].flags == "SA", f"flags {sa[TCP].flags}, expected SYN,ACK"
    assert sa[TCP].seq == syn[TCP].seq, "the SYN,ACK does not carry the node's ISS"
    assert sa[TCP].ack == peer.snd_nxt, "the SYN,ACK does not acknowledge our SYN"
    assert "MSS" in tcp_opts(sa), f"SYN,ACK options: {sa[TCP].options}"
    assert wait_counter(counters, "tcp_simultaneous_open", before + 1) == before + 1
    # Figure 7, line 6: our SYN,ACK, <SEQ=ISS><ACK=ISS+1><CTL=SYN,ACK>
    peer.send("SA", seq=(peer.snd_nxt - 1) & 0xFFFFFFFF, options=[("MSS", SMSS)])
    data = os.urandom(3000)
    got = b""
    for i in range(0, len(data), SMSS):
        got += _echo(peer, data[i:i + SMSS])
    assert got == data, f"echoed {len(got)} of {len(data)} bytes, equal so far: " \
        f"{got == data[:len(got)]}"
    curated_pcap(link, "test_rfc9293_3_5_simultaneous_open_completes.pcap")


@requirement(fix='patch 0013',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c 's/if (pcb->flags \\& TF_ACTIVE_OPEN) {/if (0) {/'")
def test_rfc9293_3_10_7_4_simultaneous_open_completed_by_plain_ack(node, link):
    """RFC 9293 §3.10.7.4, SYN-RECEIVED, fifth, check the ACK field: "If SND.UNA < SEG.ACK
    =< SND.NXT, then enter ESTABLISHED state and continue processing". After a
    simultaneous open the peer may answer the node's SYN,ACK with a plain ACK (an RFC 9293
    peer in SYN-RECEIVED finds that SYN,ACK's SEQ below RCV.NXT, unacceptable, and sends
    <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK>). That ACK completes the node's connect: a
    SYN-RECEIVED reached from SYN-SENT has no listener to hand the connection to (lwIP
    2.1.3 would abort it), and the node echoes 3000 bytes."""
    peer, syn, _ = dial(link)
    _crossing_syn(peer)
    sa = peer.recv(3, lambda q: q[TCP].flags.S and q[TCP].flags.A)
    assert sa is not None, "no SYN,ACK for a SYN received in SYN-SENT"
    peer.ack()
    data = os.urandom(3000)
    got = b""
    for i in range(0, len(data), SMSS):
        got += _echo(peer, data[i:i + SMSS])
    assert got == data, f"echoed {len(got)} of {len(data)} bytes after the plain ACK"


@requirement(fix='lwIP 2.1.3, patch 0014',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c '/send a RST to bring the other side in a non-synchronized state/,+1 s/tcp_rst(pcb, ackno, seqno + tcplen, ip_current_dest_addr(),/if (0) tcp_rst(pcb, ackno, seqno + tcplen, ip_current_dest_addr(),/'")
def test_rfc9293_3_10_7_3_synack_with_wrong_ack_gets_rst(node, link):
    """RFC 9293 §3.10.7.3 (SYN-SENT), first, check the ACK bit: "If the ACK bit is set, If
    SEG.ACK =< ISS or SEG.ACK > SND.NXT, send a reset (unless the RST bit is set, if so
    drop the segment and return) <SEQ=SEG.ACK><CTL=RST> and discard the segment.
    Return." A SYN,ACK acknowledging 1000 past the node's SYN gets a RST with SEQ=SEG.ACK
    and is discarded: the Window Scale option it carried is not used (the node's later
    segments announce an unscaled window, as no valid SYN,ACK offered scaling). Positive
    control: a SYN,ACK with the right ACK, answering the retransmitted SYN, opens the
    connection and it echoes."""
    peer, syn, _ = dial(link)
    bad_ack = (syn[TCP].seq + 1000) & 0xFFFFFFFF
    peer.send("SA", ack=bad_ack, options=[("MSS", SMSS), ("NOP", None), ("WScale", 14)])
    r = peer.recv(3, lambda q: q[TCP].flags.R)
    assert r is not None, "no RST for a SYN,ACK acknowledging unsent data"
    assert r[TCP].seq == bad_ack, f"RST SEQ {r[TCP].seq:#x}, expected SEG.ACK {bad_ack:#x}"
    peer.snd_nxt = (peer.snd_nxt - 1) & 0xFFFFFFFF   # that SYN does not count
    again = peer.recv(3, lambda q: q[TCP].flags.S and q[TCP].seq == syn[TCP].seq)
    assert again is not None, "the node gave up its connect after the bogus SYN,ACK"
    a = syn_ack(peer)
    assert a[TCP].window > 40000, \
        f"window {a[TCP].window}: scaled by the Window Scale of a discarded SYN,ACK"
    msg = b"after the reset\n"
    assert _echo(peer, msg) == msg, "control: the right SYN,ACK did not open the connection"
    curated_pcap(link, "test_rfc9293_3_10_7_3_synack_with_wrong_ack_gets_rst.pcap")


@requirement(fix='patch 0014',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c 's/if ((flags \\& TCP_ACK) \\&\\& ackno == pcb->snd_nxt) {/if (ackno == pcb->snd_nxt) {/'")
def test_rfc9293_3_10_7_3_rst_without_ack_ignored_in_syn_sent(node, link):
    """RFC 9293 §3.10.7.3 (SYN-SENT), "Second, check the RST bit:": "If the RST bit
    is set, ... If the ACK was acceptable, then signal to the user "error: connection reset", drop the
    segment, enter CLOSED state, delete TCB, and return. Otherwise (no ACK), drop the
    segment and return." A RST without the ACK bit, even with the acknowledgment field
    that would be acceptable (ISS+1), leaves the node's connect going: its SYN is
    retransmitted and a SYN,ACK then opens the connection. Positive control: a RST,ACK
    acknowledging the SYN of a second dial ends that connect (no SYN retransmission for
    1.6 s, past the 1 s initial RTO)."""
    peer, syn, _ = dial(link)
    peer.send("R", seq=0, ack=(syn[TCP].seq + 1) & 0xFFFFFFFF, options=[])
    again = peer.recv(3, lambda q: q[TCP].flags.S and q[TCP].seq == syn[TCP].seq)
    assert again is not None, "a RST without ACK ended the node's connect"
    syn_ack(peer)
    msg = b"survived\n"
    assert _echo(peer, msg) == msg, "no echo after a RST without ACK was ignored"

    ctl, csyn, _ = dial(link)
    ctl.send("RA", seq=0, ack=(csyn[TCP].seq + 1) & 0xFFFFFFFF, options=[])
    ctl.closed = True
    late = ctl.recv_all(1.6, lambda q: q[TCP].flags.S)
    assert late == [], "control: the node kept dialling after a RST,ACK acknowledging its SYN"
