"""RFC 9293 §3.8.4: keep-alives, when they may be sent, and R2 (§3.8.3) as the application's
time for a connection whose probes go unanswered (lwIP patch 0138).

The node's ports 23 and 24 hold what they accept, with keep-alive on (1 s idle, 1 s
interval; apps/ulsnode.c KEEPALIVE_S), 23 with TCP_USER_TIMEOUT 2500 ms; port 25 is a
pattern source with the same keep-alive. Scapy answers nothing after the handshake.
"""

import time

from scapy.layers.inet import TCP

from conftest import TcpPeer, requirement

HOLD_KEEPALIVE_TIMED = 23
HOLD_KEEPALIVE = 24
SOURCE_KEEPALIVE = 25
USER_TIMEOUT = 2.5     # s, port 23


def _silent(link, port, watch):
    """Connect to port and answer nothing for `watch` seconds: the node's segments with
    their times from the end of the handshake, then the peer (for abort)."""
    peer = TcpPeer(link, port)
    peer.connect()
    t0 = time.monotonic()
    got = []
    while time.monotonic() < t0 + watch:
        p = peer.recv(max(0.0, t0 + watch - time.monotonic()))
        if p is not None:
            got.append((time.monotonic() - t0, p))
    return got, peer


def _probes(segs):
    """The keep-alive probes among the node's segments: no SYN, FIN or RST, at most one
    octet, and SEG.SEQ = SND.NXT-1 (§3.8.4), SND.NXT being the end of what it sent."""
    nxt = None
    out = []
    for t, p in segs:
        end = (p[TCP].seq + len(p[TCP].payload)) & 0xFFFFFFFF
        if nxt is None or ((end - nxt) & 0xFFFFFFFF) < 0x80000000:
            if len(p[TCP].payload) > 1:
                nxt = end
        flags = p[TCP].flags
        if not (flags.S or flags.F or flags.R) and len(p[TCP].payload) <= 1 and \
                nxt is not None and p[TCP].seq == (nxt - 1) & 0xFFFFFFFF:
            out.append(t)
    return out


@requirement(fix='patch 0138',
             mutate="tests/conformance/lwip-mutate core/tcp.c "
                    "'s/        (pcb_remove == 0) \\&\\& (pcb->unacked == NULL) \\&\\& "
                    "(pcb->unsent == NULL)) {/        1) {/'")
def test_rfc9293_3_8_4_keepalive_not_sent_while_data_is_outstanding(node, link):
    """RFC 9293 §3.8.4: "Keep-alive packets MUST only be sent when no sent data is
    outstanding, and no data or acknowledgment packets have been received for the
    connection within an interval (MUST-26)." A connection with keep-alive after 1 s idle
    whose data we never acknowledge retransmits it and sends no keep-alive probe in 3.5 s.
    Control: the same keep-alive on a connection with nothing to send probes at about
    1 s and 2 s."""
    segs, peer = _silent(link, HOLD_KEEPALIVE, 3.5)
    probes = [t for t, p in segs if not (p[TCP].flags.S or p[TCP].flags.F or p[TCP].flags.R)
              and len(p[TCP].payload) <= 1 and p[TCP].seq == (peer.rcv_nxt - 1) & 0xFFFFFFFF]
    peer.abort()
    assert len(probes) >= 2, f"control: keep-alive probes at {probes} s, expected ~1 and ~2"

    segs, peer = _silent(link, SOURCE_KEEPALIVE, 3.5)
    peer.abort()
    data = [t for t, p in segs if len(p[TCP].payload) > 1]
    assert data, "port 25 sent no data"
    probes = _probes(segs)
    assert not probes, f"keep-alive probes at {probes} s while sent data was outstanding"


@requirement(fix='patch 0138',
             mutate="tests/conformance/lwip-mutate core/tcp.c "
                    "'s/        if (pcb->user_timeout != 0 \\&\\& idle_ms >= pcb->user_timeout \\&\\&/"
                    "        if (0 \\&\\&/'")
def test_rfc9293_3_8_3_r2_ends_a_connection_whose_keepalives_go_unanswered(node, link):
    """RFC 9293 §3.8.3 (d): "An application MUST (MUST-21) be able to set the value for R2
    for a particular connection." and §3.8.4: "if a keep-alive mechanism is implemented it
    MUST NOT interpret failure to respond to any specific probe as a dead connection
    (MUST-29)." With keep-alive after 1 s idle every 1 s and TCP_USER_TIMEOUT 2500 ms, a
    peer that answers nothing gets probes at about 1 s and 2 s, not a reset after the
    first, and then, when the next probe is due at 3 s with the connection idle past its
    user timeout, a reset (as Linux ends it). Control: without the user timeout the probes
    go on (9 of them) and there is no reset within 4.5 s."""
    segs, peer = _silent(link, HOLD_KEEPALIVE, 4.5)
    resets = [t for t, p in segs if p[TCP].flags.R]
    peer.abort()
    assert not resets, f"control: a reset at {resets} s without a user timeout"

    segs, peer = _silent(link, HOLD_KEEPALIVE_TIMED, 4.5)
    peer.closed = True
    resets = [t for t, p in segs if p[TCP].flags.R]
    probes = [t for t, p in segs if not p[TCP].flags.R and len(p[TCP].payload) <= 1]
    assert resets, f"no reset within 4.5 s (probes at {probes} s)"
    assert USER_TIMEOUT <= resets[0] < USER_TIMEOUT + 1.3, \
        f"the reset came at {resets[0]:.2f} s, not when the probe after {USER_TIMEOUT} s was due"
    assert len([t for t in probes if t < resets[0]]) >= 2, \
        f"probes at {probes} s before the reset at {resets[0]:.2f} s: one unanswered probe " \
        "was taken for a dead connection"
