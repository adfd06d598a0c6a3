"""RFC 9293 §3.8.3: R2, the point at which a connection whose segments go unacknowledged is
closed, set by the application for one connection (TCP_USER_TIMEOUT, lwIP patch 0138).

The node's port 22 is a pattern source (as port 19) on a listener with TCP_USER_TIMEOUT
1500 ms (apps/ulsnode.c USER_TIMEOUT_MS); port 19 has none (the controls). A UDP 11
request "PORT user_timeout=1500" makes the node connect to us with it set. Scapy never
acknowledges, or offers only a zero window, and then asks whether the connection still
exists: a segment for a connection the node dropped gets a reset (RFC 9293 §3.10.7.1),
one for a live connection does not.
"""

import time

from scapy.layers.inet import TCP

from conftest import TcpPeer, curated_pcap, requirement
from flight import dial

SOURCE = 19                # apps/ulsnode.c: pattern source, no user timeout (control)
SOURCE_TIMED = 22          # the same with TCP_USER_TIMEOUT USER_TIMEOUT_MS
USER_TIMEOUT = 1.5         # s
# The node ends the connection within two slow-timer ticks (100 ms) of the timeout, which
# counts from the first tick that saw the wait: a probe this long after the wait began
# finds it gone; one at EARLY finds it still there.
PROBE_AT = 2.2             # s
EARLY = 0.9                # s


def _alive(peer, window=None):
    """Whether the node still has the connection: a segment within its window (an ACK of
    nothing new, which moves no SND.UNA and so restarts no wait) gets no reset."""
    peer.send("A", ack=peer.rcv_nxt, window=window)
    r = peer.recv(0.5, lambda q: q[TCP].flags.R)
    return r is None


def _watch(peer, until, pred):
    """The node's segments matching pred until monotonic time `until`, with their arrival
    times."""
    got = []
    while True:
        left = until - time.monotonic()
        if left <= 0:
            return got
        p = peer.recv(left, pred)
        if p is not None:
            got.append((time.monotonic(), p))


def _unacknowledged(link, port):
    """Connect to port (a pattern source), take its first data segment and acknowledge
    nothing after the handshake: returns (the times of the first segment's retransmissions
    and of any reset from the node, until PROBE_AT; whether the connection was there at
    EARLY; whether it was at PROBE_AT), times from the first segment's arrival."""
    peer = TcpPeer(link, port)
    peer.connect()
    first = peer.recv(3, lambda q: len(q[TCP].payload) > 0)
    assert first is not None, f"port {port} sent no data"
    t0 = time.monotonic()
    data_or_rst = (lambda q: len(q[TCP].payload) > 0 or q[TCP].flags.R)
    segs = _watch(peer, t0 + EARLY, data_or_rst)
    early = _alive(peer)
    segs += _watch(peer, t0 + PROBE_AT, data_or_rst)
    rexmit = [t - t0 for t, p in segs if p[TCP].seq == first[TCP].seq and not p[TCP].flags.R]
    resets = [t - t0 for t, p in segs if p[TCP].flags.R]
    alive = _alive(peer)
    if alive:
        peer.abort()
    else:
        peer.closed = True
    return rexmit, resets, early, alive


@requirement(fix='patch 0138',
             mutate="tests/conformance/lwip-mutate core/tcp.c "
                    "'s/ut = (pcb->user_timeout != 0) ? tcp_user_timeout_check(pcb) : TCP_UT_WAIT;/ut = TCP_UT_WAIT;/'")
def test_rfc9293_3_8_3_application_sets_r2_for_unacknowledged_data(node, link):
    """RFC 9293 §3.8.3 (d): "An application MUST (MUST-21) be able to set the value for R2
    for a particular connection." A connection accepted by a listener with
    TCP_USER_TIMEOUT 1500 ms retransmits its unacknowledged data, is still there 0.9 s
    after that data first went, and is gone (a reset answers our next segment) at 2.2 s,
    with no reset of its own, as Linux ends it. Control: the same service without the
    option still has the connection then."""
    rexmit, resets, early, alive = _unacknowledged(link, SOURCE)
    assert rexmit, "control: the unacknowledged data was never retransmitted"
    assert alive, f"control: the connection without a user timeout was gone at {PROBE_AT} s"

    rexmit, resets, early, alive = _unacknowledged(link, SOURCE_TIMED)
    assert rexmit, "the unacknowledged data was never retransmitted before the node gave up"
    assert early, f"the connection was gone at {EARLY} s, before its {USER_TIMEOUT} s"
    assert not resets, f"the node sent a reset when it gave up (at {resets} s)"
    assert not alive, \
        f"the connection outlived its {USER_TIMEOUT} s user timeout (probed at {PROBE_AT} s)"
    curated_pcap(link, "test_rfc9293_3_8_3_application_sets_r2_for_unacknowledged_data.pcap")


@requirement(fix='patch 0138',
             mutate="tests/conformance/lwip-mutate core/tcp.c "
                    "'s/ || (pcb->lastack != pcb->ut_lastack))/)/'")
def test_rfc9293_3_8_3_r2_counts_from_the_last_acknowledgment(node, link):
    """RFC 9293 §3.8.3: "Excessive retransmission of the same segment by a TCP endpoint
    indicates some failure of the remote host or the internetwork path." and (d) "An
    application MUST (MUST-21) be able to set the value for R2 for a particular
    connection." A peer that acknowledges one more segment every 0.5 s keeps a connection
    with TCP_USER_TIMEOUT 1500 ms for 4 s and more: each ACK that moves SND.UNA starts
    the wait again, so a slow peer is not taken for a dead one."""
    peer = TcpPeer(link, SOURCE_TIMED)
    peer.connect()
    t0 = time.monotonic()
    acked = 0
    while time.monotonic() < t0 + 4.0:
        tick = time.monotonic() + 0.5
        got = _watch(peer, tick, lambda q: len(q[TCP].payload) > 0 or q[TCP].flags.R)
        assert not any(p[TCP].flags.R for _, p in got), "the node reset the connection"
        nxt = [p for _, p in got if p[TCP].seq == peer.rcv_nxt]
        if nxt:
            peer.absorb(nxt[0])   # one segment more, no further
            peer.ack()
            acked += 1
    assert acked >= 6, f"only {acked} segments came to acknowledge in 4 s"
    assert _alive(peer), "the connection was gone though every 0.5 s an ACK moved SND.UNA"
    peer.abort()


@requirement(fix='patch 0138',
             mutate="tests/conformance/lwip-mutate core/tcp.c "
                    "'s/    kind = 2;/    kind = 0;/'")
def test_rfc9293_3_8_3_r2_ends_a_window_that_stays_closed(node, link):
    """RFC 9293 §3.8.3 (d): "An application MUST (MUST-21) be able to set the value for R2
    for a particular connection." With TCP_USER_TIMEOUT 1500 ms, a connection whose peer
    answers every zero-window probe with a zero window is gone 2.2 s later, as tcp(7)
    defines the option ("buffered data may remain untransmitted (due to zero window
    size)"). Control: without the option it keeps probing, and is there."""
    for port, want_alive in ((SOURCE, True), (SOURCE_TIMED, False)):
        peer = TcpPeer(link, port, window=0)
        peer.connect()
        t0 = time.monotonic()
        probes = 0
        while time.monotonic() < t0 + PROBE_AT:
            p = peer.recv(max(0.0, t0 + PROBE_AT - time.monotonic()),
                          lambda q: len(q[TCP].payload) > 0 or q[TCP].flags.R)
            if p is None:
                break
            assert not p[TCP].flags.R, f"port {port}: a reset while probing"
            assert len(p[TCP].payload) <= 1, \
                f"port {port}: {len(p[TCP].payload)} octets into a zero window"
            probes += 1
            peer.send("A", ack=peer.rcv_nxt, window=0)   # the window stays shut
        assert probes >= 1, f"port {port}: no zero-window probe in {PROBE_AT} s"
        alive = _alive(peer, window=0)
        if alive:
            peer.abort()
        else:
            peer.closed = True
        assert alive == want_alive, \
            f"port {port}: alive {alive} at {PROBE_AT} s with the window shut ({probes} probes)"


def _dial_syns(link, request, watch):
    """Ask the node to connect to us (UDP 11) and never answer: the arrival times of its
    SYNs, from the first, over `watch` seconds."""
    peer, _, t0 = dial(link, options=request)
    peer.closed = True        # never opened: nothing to reset at the end
    times = [0.0]
    while time.monotonic() < t0 + watch:
        p = peer.recv(max(0.0, t0 + watch - time.monotonic()),
                      lambda q: q[TCP].flags.S and not q[TCP].flags.A)
        if p is not None:
            times.append(time.monotonic() - t0)
    return times


@requirement(fix='patch 0138',
             mutate="tests/conformance/lwip-mutate core/tcp.c "
                    "'s/ut = (pcb->user_timeout != 0) ? tcp_user_timeout_check(pcb) : TCP_UT_WAIT;/ut = TCP_UT_WAIT;/'")
def test_rfc9293_3_8_3_r2_set_by_the_application_shortens_an_open_attempt(node, link):
    """RFC 9293 §3.8.3: "SYN retransmissions MUST be handled in the general way just
    described for data retransmissions" and (d) "An application MUST (MUST-21) be able to
    set the value for R2 for a particular connection." An active open with
    TCP_USER_TIMEOUT 1500 ms retransmits its SYN after the initial 1 s RTO and then gives
    up: no SYN after 2 s (Linux 6.18 fails such a connect with ETIMEDOUT after 2 s).
    Control: without it the SYN goes again at 3 s (RTO backed off to 2 s)."""
    ctl = _dial_syns(link, "", 4.0)
    assert any(2.5 < t < 4.0 for t in ctl), f"control: SYNs at {ctl} s, none near 3 s"

    syns = _dial_syns(link, f" user_timeout={int(USER_TIMEOUT * 1000)}", 4.0)
    assert len(syns) >= 2, f"SYNs at {syns} s: the SYN was never retransmitted"
    assert max(syns) < USER_TIMEOUT + 0.5, \
        f"SYNs at {syns} s: still trying past the {USER_TIMEOUT} s user timeout"


@requirement(fix='patch 0138',
             mutate="tests/conformance/lwip-mutate core/tcp.c "
                    "'s/          pcb->rtime = pcb->rto;/          ;/'")
def test_rfc9293_3_8_3_r2_shorter_than_the_rto_retransmits_once_first(node, link):
    """RFC 9293 §3.8.3: "When the number of transmissions of the same segment reaches a
    threshold R2 greater than R1, close the connection." and (d) "An application MUST
    (MUST-21) be able to set the value for R2 for a particular connection." A user timeout
    (500 ms) shorter than the initial 1 s RTO still lets the segment go twice: the
    retransmission timer expires when the time is up (Linux clamps its RTO to the user
    timeout), the SYN goes again at about 0.5 s, and the node then gives up: no SYN at
    1 s or later."""
    syns = _dial_syns(link, " user_timeout=500", 2.5)
    again = [t for t in syns[1:] if 0.3 < t < 0.9]
    assert again, f"SYNs at {syns} s: no retransmission when the 0.5 s user timeout was up"
    assert max(syns) < 0.9, f"SYNs at {syns} s: still trying after the 0.5 s user timeout"
