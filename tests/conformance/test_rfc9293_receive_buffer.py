"""RFC 9293 §3.8.6: the window a connection offers is the receive buffer its application
asked for (SO_RCVBUF, lwIP patch 0137).

The node's port 21 holds what it accepts without reading it, on a listener whose SO_RCVBUF
is 16384 octets and whose backlog is 4 (apps/ulsnode.c SMALL_RCVBUF, SMALL_BACKLOG); port
10 is the same service with neither set (the controls). A UDP 11 request "PORT rcvbuf=N"
makes the node connect to us with SO_RCVBUF set before its connect. Scapy sends data as far
as the node's window reaches and no further, and watches where the node puts the window's
right edge and what it acknowledges.
"""

import time

from scapy.layers.inet import TCP

from conftest import TcpPeer, curated_pcap, requirement, tcp_opts, wait_counter
from flight import SMSS, dial

HOLD = 10            # apps/ulsnode.c: hold, no SO_RCVBUF (control)
HOLD_CAPPED = 21     # hold, SO_RCVBUF SMALL_RCVBUF, backlog SMALL_BACKLOG
SMALL_RCVBUF = 16384
BACKLOG = 4
UNCAPPED_SYN_WINDOW = 65535   # the 4 MiB default window, as a SYN's unscaled field holds it


def _fill(peer, budget, synack):
    """Send data in segments of at most SMSS, each within the window the node offers,
    until budget octets went or the node's window closed and stayed closed for 0.5 s.
    Returns (octets acknowledged, the farthest right edge the node offered), both counted
    from our ISN+1."""
    start = (peer.iss + 1) & 0xFFFFFFFF
    # RFC 7323 §2.2: a SYN's window is never scaled; later ones by the node's shift when
    # both ends sent Window Scale
    shift = peer.peer_wscale if peer.wscale is not None and peer.peer_wscale is not None else 0
    acked, edge = 0, synack[TCP].window
    far = edge
    sent = 0
    quiet_since = None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        while sent < budget and sent < edge:
            n = min(SMSS, budget - sent, edge - sent)
            peer.send("PA", bytes([0x41 + sent % 26]) * n)
            sent += n
        got = peer.recv(0.5, lambda q: q[TCP].flags.A and not q[TCP].flags.S)
        if got is None:
            if acked == sent and (sent >= budget or sent >= edge):
                break
            continue
        off = (got[TCP].ack - start) & 0xFFFFFFFF
        if off <= sent:
            acked = max(acked, off)
            edge = max(edge, off + (got[TCP].window << shift))
            far = max(far, edge)
        if acked == sent and edge <= sent:
            if quiet_since is None:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since > 0.5:
                break
        else:
            quiet_since = None
    return acked, far


def _fill_to_the_cap(peer, synack):
    """The node's window, filled: its right edge never passes ISN+1+SMALL_RCVBUF and every
    octet up to it is acknowledged."""
    acked, far = _fill(peer, 2 * SMALL_RCVBUF, synack)
    assert far == SMALL_RCVBUF, f"the right edge reached ISN+1+{far}, beyond SO_RCVBUF"
    assert acked == SMALL_RCVBUF, \
        f"{acked} of the {SMALL_RCVBUF} octets the window offered were acknowledged"


@requirement(fix='patch 0137',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c "
                    "'/the listener.s SO_RCVBUF \\*\\//d'")
def test_rfc9293_3_8_6_listener_so_rcvbuf_is_the_window_of_what_it_accepts(node, link):
    """RFC 9293 §3.8.6: "The window sent in each segment indicates the range of sequence
    numbers the sender of the window (the data receiver) is currently prepared to accept.
    There is an assumption that this is related to the data buffer space currently
    available for this connection." A connection accepted by a listener whose SO_RCVBUF
    is 16384 offers 16384 in its SYN,ACK, never moves the right edge past ISN+1+16384
    while its application reads nothing, and acknowledges every octet up to that edge.
    Control: the listener without SO_RCVBUF takes 32768 octets the same way."""
    ctl = TcpPeer(link, HOLD)
    sa = ctl.connect()
    assert sa[TCP].window == UNCAPPED_SYN_WINDOW, f"control SYN,ACK window {sa[TCP].window}"
    acked, _ = _fill(ctl, 2 * SMALL_RCVBUF, sa)
    assert acked == 2 * SMALL_RCVBUF, f"control: {acked} of {2 * SMALL_RCVBUF} acknowledged"
    ctl.abort()

    peer = TcpPeer(link, HOLD_CAPPED)
    sa = peer.connect()
    assert peer.peer_wscale is not None, "Window Scale not agreed: the case needs it"
    assert sa[TCP].window == SMALL_RCVBUF, \
        f"SYN,ACK window {sa[TCP].window}, expected SO_RCVBUF's {SMALL_RCVBUF}"
    _fill_to_the_cap(peer, sa)
    peer.abort()
    curated_pcap(link, "test_rfc9293_3_8_6_listener_so_rcvbuf_is_the_window_of_what_it_accepts.pcap")


@requirement(fix='patch 0137',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c "
                    "'/npcb->rcv_wnd_cap = pcb->rcv_wnd_cap;  \\/\\* ulstack (patch 0137) \\*\\//d'")
def test_rfc9293_3_8_6_syn_cookie_connection_keeps_its_listeners_so_rcvbuf(node, link, counters):
    """RFC 9293 §3.8.6: "The window sent in each segment indicates the range of sequence
    numbers the sender of the window (the data receiver) is currently prepared to accept.
    There is an assumption that this is related to the data buffer space currently
    available for this connection." With the listener's 4 half-open connections taken, a
    SYN gets a cookie (counted), whose SYN,ACK offers SO_RCVBUF's 16384; the connection
    the cookie's ACK opens, which the listener never held, keeps that window: its right
    edge stays at ISN+1+16384 and every octet up to it is acknowledged."""
    for _ in range(BACKLOG):
        p = TcpPeer(link, HOLD_CAPPED)
        p.send("S", options=p.syn_options(), ack=0)
        assert p.recv(3, lambda q: q[TCP].flags.S and q[TCP].flags.A) is not None, \
            "no SYN,ACK while the backlog had room"
    sent = counters()["tcp_syn_cookies_sent"]
    peer = TcpPeer(link, HOLD_CAPPED)
    peer.send("S", options=peer.syn_options(), ack=0)
    sa = peer.recv(3, lambda q: q[TCP].flags.S and q[TCP].flags.A)
    assert sa is not None, "a SYN beyond the half-open bound got no SYN,ACK"
    assert wait_counter(counters, "tcp_syn_cookies_sent", sent + 1) == sent + 1, \
        "the SYN,ACK beyond the bound was not a cookie"
    assert sa[TCP].window == SMALL_RCVBUF, \
        f"cookie SYN,ACK window {sa[TCP].window}, expected SO_RCVBUF's {SMALL_RCVBUF}"
    peer.irs = sa[TCP].seq
    peer.rcv_nxt = (sa[TCP].seq + 1) & 0xFFFFFFFF
    opts = tcp_opts(sa)
    peer.ts_ok = "Timestamp" in opts
    peer.peer_wscale = opts.get("WScale")
    assert peer.peer_wscale is not None, "Window Scale not agreed: the case needs it"
    ok = counters()["tcp_syn_cookies_ok"]
    _fill_to_the_cap(peer, sa)
    assert counters()["tcp_syn_cookies_ok"] == ok + 1, "no connection came of the cookie"
    peer.abort()


@requirement(fix='patch 0137',
             mutate="tests/conformance/lwip-mutate core/tcp.c "
                    "'s|TCPWND_MIN16(TCP_WND_CAP(pcb));  /\\* ulstack (patch 0137) \\*/|"
                    "TCPWND_MIN16(TCP_WND);|'")
def test_rfc9293_3_8_6_so_rcvbuf_set_before_connect_is_the_syns_window(node, link):
    """RFC 9293 §3.8.6: "The window sent in each segment indicates the range of sequence
    numbers the sender of the window (the data receiver) is currently prepared to accept.
    There is an assumption that this is related to the data buffer space currently
    available for this connection." A connection whose application set SO_RCVBUF to 16384
    before connect offers 16384 in its SYN and, with no window scaling agreed, in the ACK
    that completes the handshake. Control: a connect without SO_RCVBUF offers 65535."""
    ctl, syn, _ = dial(link)
    assert syn[TCP].window == UNCAPPED_SYN_WINDOW, f"control SYN window {syn[TCP].window}"
    ctl.abort()

    peer, syn, _ = dial(link, options=f" rcvbuf={SMALL_RCVBUF}")
    assert syn[TCP].window == SMALL_RCVBUF, \
        f"SYN window {syn[TCP].window}, expected SO_RCVBUF's {SMALL_RCVBUF}"
    peer.send("SA", options=[("MSS", SMSS)])
    a = peer.recv(3, lambda q: q[TCP].flags.A and q[TCP].ack == peer.snd_nxt)
    assert a is not None, "the node did not acknowledge our SYN,ACK"
    assert a[TCP].window == SMALL_RCVBUF, \
        f"window {a[TCP].window} after the handshake, expected {SMALL_RCVBUF}"
    peer.abort()
