"""RFC 9293 §3.8.6.1: zero-window probing (and RFC 7323 §3.2 for the probes' options).

One exchange, shared by the tests of this module (it takes ~11 s): port 19 sends; we take
its first burst, then acknowledge everything with window 0 and answer each probe with
window 0 again until five probes came; then we open the window and check that the data
goes on where it stopped. Capture: zero_window_exchange.pcap.
"""

import time

import pytest
from scapy.layers.inet import TCP

from conftest import Link, TcpPeer, _capture_dir, curated_pcap, requirement, tcp_opts


class _Exchange(dict):
    def __repr__(self):   # keeps pytest's failure reports short
        return f"<zero-window exchange: probes at {[round(t, 2) for t, _ in self['probes']]} s>"


@pytest.fixture(scope="module")
def zero_window(node):
    link = Link(node)
    peer = TcpPeer(link, 19)
    try:
        peer.connect()
        burst = []
        while True:   # the first flight, until the node waits for our ACK
            p = peer.recv(0.3 if burst else 5.0, lambda q: len(q[TCP].payload) > 0)
            if p is None:
                break
            burst.append(p)
            peer.absorb(p)
        assert burst, "the pattern source sent nothing"
        end = time.monotonic() + 16
        closed_at = peer.ack(window=0).time
        probes = []   # (seconds since the window closed, segment), on the kernel's stamps
        while len(probes) < 5 and time.monotonic() < end:
            p = peer.recv(max(0.0, end - time.monotonic()))
            if p is None:
                break
            probes.append((p.time - closed_at, p))
            peer.ack(window=0)   # the probe's byte (if any) is not accepted: RCV.WND = 0
        peer.ack()               # open the window again
        resumed = peer.recv_all(1.0, lambda q: len(q[TCP].payload) > 0)
        yield _Exchange(peer=peer, probes=probes, resumed=resumed,
                        rcv_nxt_when_closed=peer.rcv_nxt)
    finally:
        peer.abort()
        link.pcap(_capture_dir() / "zero_window_exchange.pcap")
        curated_pcap(link, "test_rfc9293_3_8_6_1_zero_window_is_probed.pcap")
        link.close()


@requirement(fix='lwIP 2.1.3',
             mutate="tests/conformance/lwip-mutate core/tcp.c 's/if (tcp_zero_window_probe(pcb) != ERR_OK) {/if (0) {/'")
def test_rfc9293_3_8_6_1_zero_window_is_probed(zero_window):
    """RFC 9293 §3.8.6.1: "The sending TCP peer must regularly transmit at least one octet
    of new data (if available), or retransmit to the receiving TCP peer even if the send
    window is zero, in order to "probe" the window. ... Probing of zero (offered) windows
    MUST be supported (MUST-36)." The first
    probe is due after about one RTO (SHLD-29): we allow 5 s; each probe starts at RCV.NXT
    so that its acknowledgment reports the window."""
    probes = zero_window["probes"]
    assert probes, "no zero-window probe within 16 s"
    assert probes[0][0] < 5.0, f"first probe only after {probes[0][0]:.1f} s"
    for _, p in probes:
        assert p[TCP].seq in (zero_window["rcv_nxt_when_closed"],
                              (zero_window["rcv_nxt_when_closed"] - 1) & 0xFFFFFFFF), \
            f"probe at seq {p[TCP].seq}, RCV.NXT {zero_window['rcv_nxt_when_closed']}"
        assert len(p[TCP].payload) <= 1, "a probe carried more than one byte into a zero window"


@requirement(fix='lwIP 2.1.3',
             mutate="tests/conformance/lwip-mutate core/tcp.c 's/pcb->persist_backoff++;/;/'")
def test_rfc9293_3_8_6_1_zero_window_probe_interval_grows(zero_window):
    """RFC 9293 §3.8.6.1: "The transmitting host SHOULD send the first zero-window probe
    when a zero window has existed for the retransmission timeout period (SHLD-29)
    (Section 3.8.1), and SHOULD increase exponentially the interval between successive
    probes (SHLD-30)." The node doubles its interval (0.15, 0.3, 0.6, 1.2 s on 50 ms
    ticks): the fourth interval is at least four times the first. (Judged over four
    intervals, not two: a node held up for a few hundred ms on a loaded machine lengthens
    one interval, which made the second look no longer than the first; a constant
    interval, the mutation, still stays far below four times.)"""
    t = [at for at, _ in zero_window["probes"]]
    assert len(t) >= 5, f"only {len(t)} probes in 16 s: at {t}"
    i = [round(b - a, 3) for a, b in zip(t, t[1:])]
    assert i[3] > 4 * i[0], f"probe intervals {i} s do not back off"


@requirement(fix='lwIP 2.1.3',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c 's/pcb->snd_wnd = SND_WND_SCALE(pcb, tcphdr->wnd);/if (pcb->snd_wnd != 0) pcb->snd_wnd = SND_WND_SCALE(pcb, tcphdr->wnd);/'")
def test_rfc9293_3_8_6_1_transfer_resumes_when_window_opens(zero_window):
    """RFC 9293 §3.8.6.1: "This retransmission is essential to guarantee that when either
    TCP peer has a zero window the reopening of the window will be reliably reported to the
    other."; once we announce a non-zero window the data continues at the first unacknowledged byte. Within 1 s of
    our window update (the next probe would be due seconds later) full segments come, not
    only one-byte probes, the first at the first unacknowledged byte."""
    r = zero_window["resumed"]
    assert r, "no data within 1 s after the window opened"
    assert r[0][TCP].seq == zero_window["rcv_nxt_when_closed"]
    sizes = [len(p[TCP].payload) for p in r]
    assert max(sizes) > 1, f"only probe-sized segments after the window opened: {sizes}"


@requirement(fix='patch 0003',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c 's/u8_t optflags = tcp_ts_optflags(pcb);/u8_t optflags = 0;/'")
def test_rfc7323_3_2_zero_window_probe_carries_timestamps(zero_window):
    """RFC 7323 §3.2: "Once TSopt has been successfully negotiated, that is both <SYN> and
    <SYN,ACK> contain TSopt, the TSopt MUST be sent in every non-<RST> segment for the
    duration of the connection". Zero-window probes are no exception."""
    probes = zero_window["probes"]
    assert zero_window["peer"].ts_ok, "timestamps not negotiated"
    assert probes, "no zero-window probe"
    missing = [round(at, 2) for at, p in probes if "Timestamp" not in tcp_opts(p)]
    assert not missing, f"probes without TSopt (sent at {missing} s)"


@requirement(fix='patch 0125',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c "
                    "'s/if (pcb->unsent == NULL \\&\\& pcb->persist_backoff > 0) {/if (0) {/'")
def test_rfc9293_3_8_6_1_probe_octet_acked_into_a_still_zero_window_ends_probing(node, link):
    """RFC 9293 §3.8.6.1: "The sending TCP peer must regularly transmit at least one octet
    of new data (if available), or retransmit to the receiving TCP peer even if the send
    window is zero, in order to "probe" the window." Probing is for
    data waiting to be sent: when the peer acknowledges the probe's only octet and keeps
    its window at zero, nothing is left to probe with. The echo service's one-octet answer
    meets our zero window; its probe carries that octet, we acknowledge it with window 0
    again, and the connection (and the process) must go on: 1.5 s later, with the window
    open, a second octet is echoed at once. lwIP's slow timer asserted that the persist
    timer never ticks with nothing unsent, so this acknowledgment aborted the process
    (found by tests/fuzz/fuzz_stack6)."""
    peer = TcpPeer(link, 7)
    peer.connect()
    peer.send("PA", b"x", window=0)   # its echo cannot be sent: one octet waits
    probe = peer.recv(5.0, lambda q: len(q[TCP].payload) > 0)
    assert probe is not None, "no zero-window probe within 5 s"
    assert bytes(probe[TCP].payload) == b"x", f"the probe carried {bytes(probe[TCP].payload)!r}"
    assert peer.absorb(probe), f"probe at seq {probe[TCP].seq}, RCV.NXT {peer.rcv_nxt}"
    peer.ack(window=0)                 # the octet taken, the window still closed
    time.sleep(1.5)                    # many persist-timer ticks (50 ms each)
    assert node.alive(), "the node's process died after its probe octet was acknowledged"
    peer.send("PA", b"y")              # the window open again
    data = peer.recv_data(1, timeout=3.0)
    assert data == b"y", f"after the probe octet was acknowledged, echo gave {data!r}"
    peer.abort()


@requirement(fix='lwIP 2.1.3',
             mutate="tests/conformance/lwip-mutate core/tcp.c "
                    "'s/if (tcp_split_unsent_seg(pcb, (u16_t)split) == ERR_OK) {/if (0) {/'")
def test_rfc1122_4_2_2_17_window_opened_below_one_segment_by_a_probe_ack_gets_data(node, link):
    """RFC 1122 §4.2.2.17: "As long as the receiving TCP continues to send acknowledgments
    in response to the probe segments, the sending TCP MUST allow the connection to stay
    open", and RFC 9293 §3.8.6.2.1 lets a sender wait for a window of less than a segment
    only until "(4) ... the override timeout occurs". Issue 13 asks whether data can be
    left queued with nothing in flight and neither the persist nor the retransmission
    timer running. We take port 19's first flight and close the window; we acknowledge
    the first probe's octet and open the window to 512 octets only (4 << 7), less than
    one segment, so the head of the send queue (a super-segment with offload) now begins
    one octet below SND.UNA and fits neither whole nor cut to a segment. Within 5 s the
    node must send data that fits the 512 octets; then, with the window open, the stream
    goes on."""
    peer = TcpPeer(link, 19)
    try:
        peer.connect()
        assert peer.peer_wscale is not None, "window scaling was not agreed: the case needs it"
        while True:   # the first flight, until the node waits for our ACK
            first = peer.rcv_nxt == (peer.irs + 1) & 0xFFFFFFFF
            p = peer.recv(5.0 if first else 0.3, lambda q: len(q[TCP].payload) > 0)
            if p is None:
                break
            peer.absorb(p)
        assert peer.rcv_nxt != (peer.irs + 1) & 0xFFFFFFFF, "the pattern source sent nothing"
        peer.ack(window=0)
        probe = peer.recv(5.0, lambda q: len(q[TCP].payload) > 0)
        assert probe is not None, "no zero-window probe within 5 s"
        assert peer.absorb(probe), f"probe at seq {probe[TCP].seq}, RCV.NXT {peer.rcv_nxt}"
        assert len(probe[TCP].payload) == 1, f"probe of {len(probe[TCP].payload)} octets"
        right = (peer.rcv_nxt + (4 << 7)) & 0xFFFFFFFF
        peer.ack(window=4)   # the probe's octet taken; RCV.WND = 512 octets
        p = peer.recv(5.0, lambda q: len(q[TCP].payload) > 0 and
                      ((q[TCP].seq + len(q[TCP].payload) - peer.rcv_nxt) & 0xFFFFFFFF) > 0 and
                      ((q[TCP].seq + len(q[TCP].payload) - peer.rcv_nxt) & 0xFFFFFFFF) < 1 << 31)
        assert p is not None, \
            "no new data within 5 s after a probe's ACK opened the window to 512 octets"
        end = (p[TCP].seq + len(p[TCP].payload)) & 0xFFFFFFFF
        assert ((right - end) & 0xFFFFFFFF) < 1 << 31, \
            f"data past the offered window: ends {(end - right) & 0xFFFFFFFF} octets beyond it"
        # what lies below RCV.NXT (the probe's octet sent again) is not new data
        peer.rcv_nxt = end
        peer.ack()            # the window open again
        more = peer.recv_data(20000, timeout=5.0)
        assert len(more) >= 20000, f"with the window open only {len(more)} more octets came"
    finally:
        peer.abort()
