"""RFC 4987 (TCP SYN flooding attacks and common mitigations): SYN cookies on a listener
whose bound on half-open connections is reached.

The node's port 20 is an echo service listening with a backlog of 4 (apps/ulsnode.c), so
4 SYNs that Scapy leaves unanswered fill its half-open bound (stack/syncookie.c); the
next SYN gets a SYN,ACK whose ISN is a cookie, and the node keeps nothing for it.
"""

import random

from scapy.layers.inet import TCP

from conftest import TcpPeer, requirement, tcp_opts, wait_counter

PORT = 20
BACKLOG = 4          # apps/ulsnode.c SMALL_BACKLOG


def _half_open(link, n):
    """n connections left in SYN-RECEIVED: SYN sent, SYN,ACK taken and not answered (the
    link fixture resets them at the end of the test)."""
    peers = []
    for _ in range(n):
        p = TcpPeer(link, PORT)
        p.send("S", options=p.syn_options(), ack=0)
        sa = p.recv(3, lambda q: q[TCP].flags.S and q[TCP].flags.A)
        assert sa is not None, "no SYN,ACK while the backlog had room"
        p.irs = sa[TCP].seq
        p.rcv_nxt = (sa[TCP].seq + 1) & 0xFFFFFFFF
        peers.append(p)
    return peers


def _cookie_synack(link, counters):
    """With the half-open bound reached, a SYN: returns (peer, its SYN,ACK), which the
    node counted as a cookie."""
    _half_open(link, BACKLOG)
    sent = counters()["tcp_syn_cookies_sent"]
    peer = TcpPeer(link, PORT)
    peer.send("S", options=peer.syn_options(), ack=0)
    sa = peer.recv(3, lambda q: q[TCP].flags.S and q[TCP].flags.A)
    assert sa is not None, "a SYN beyond the half-open bound got no SYN,ACK"
    assert sa[TCP].ack == peer.snd_nxt, "the SYN,ACK does not acknowledge the SYN"
    assert wait_counter(counters, "tcp_syn_cookies_sent", sent + 1) == sent + 1, \
        "the SYN,ACK beyond the bound was not a cookie"
    peer.synack = sa
    peer.irs = sa[TCP].seq
    peer.rcv_nxt = (sa[TCP].seq + 1) & 0xFFFFFFFF
    opts = tcp_opts(sa)
    peer.ts_ok = "Timestamp" in opts
    peer.peer_wscale = opts.get("WScale")
    return peer, sa


@requirement(fix="patch 0090, hook stack/syncookie.c", mutate="sed -i 's/#define SYNCOOKIES_DEFAULT 1/#define SYNCOOKIES_DEFAULT 0/' stack/syncookie.c")
def test_rfc4987_3_6_syn_beyond_backlog_gets_cookie_whose_ack_opens_connection(node, link, counters):
    """RFC 4987 §3.6: "SYN cookies modify the TCP protocol handling of the server by
    delaying allocation of resources until the client address has been verified." With 4
    half-open connections on a listener of backlog 4, a fifth SYN gets a SYN,ACK (counted
    as a cookie) that carries the options a pcb's would (MSS, Timestamps echoing the SYN's
    TSval, Window Scale, SACK-permitted) and is never retransmitted (no state holds it);
    the ACK that returns the cookie, with data, opens a connection that echoes the data,
    with the window scaling the cookie carried in its TSval."""
    peer, sa = _cookie_synack(link, counters)
    opts = tcp_opts(sa)
    assert "MSS" in opts and opts.get("WScale", 0) >= 7 and "SAckOK" in opts, sa[TCP].options
    assert "Timestamp" in opts and abs(opts["Timestamp"][1] - peer.tsval()) < 5000, \
        f"TSecr does not echo the SYN's TSval: {opts}"
    again = peer.recv(1.6, lambda q: q[TCP].flags.S and q[TCP].flags.A)
    assert again is None, "the cookie's SYN,ACK was retransmitted: the node kept state for it"

    ok = counters()["tcp_syn_cookies_ok"]
    msg = b"cookie %d\n" % random.randrange(1 << 30)
    peer.send("PA", msg)
    echo = peer.recv(3, lambda q: len(q[TCP].payload) > 0)
    assert echo is not None and bytes(echo[TCP].payload) == msg, \
        f"the connection the cookie opened did not echo: {echo!r}"
    peer.absorb(echo)
    peer.ack()
    assert counters()["tcp_syn_cookies_ok"] == ok + 1
    # RFC 7323 §2.3: the node's window is scaled by the shift its SYN,ACK announced;
    # unscaled it would be at most 64 KiB
    assert echo[TCP].window << peer.peer_wscale > 65535, \
        f"window {echo[TCP].window} << {peer.peer_wscale}: no window scaling on the connection"


@requirement(fix="patch 0090, hook stack/syncookie.c", mutate="sed -i 's/#define SYNCOOKIES_DEFAULT 1/#define SYNCOOKIES_DEFAULT 0/' stack/syncookie.c")
def test_rfc4987_3_6_ack_with_wrong_cookie_opens_nothing_and_is_counted(node, link, counters):
    """RFC 4987 §3.6: "SYN cookies modify the TCP protocol handling of the server by
    delaying allocation of resources until the client address has been verified." While
    the listener sends cookies, an ACK whose acknowledgment number is not a cookie of
    ours (a guess), and the right cookie returned with the wrong sequence number (not the
    peer's ISN + 1), open no connection: each is counted and answered with the reset an
    ACK in LISTEN gets (RFC 9293 §3.10.7.2), and the data is not echoed. Positive control:
    the right SEQ then opens the connection."""
    peer, sa = _cookie_synack(link, counters)
    bad = counters()["tcp_syn_cookies_bad"]

    guess = TcpPeer(link, PORT)
    guess.irs = random.randrange(1 << 32)
    guess.rcv_nxt = (guess.irs + 1) & 0xFFFFFFFF
    guess.ack(options=[("NOP", None), ("NOP", None), ("Timestamp", (guess.tsval(), 0))])
    r = guess.recv(2, lambda q: q[TCP].flags.R or len(q[TCP].payload) > 0)
    assert r is not None and r[TCP].flags.R, "a guessed cookie was not refused with a reset"
    assert r[TCP].seq == guess.rcv_nxt, "RST not <SEQ=SEG.ACK>"
    guess.closed = True

    peer.send("PA", b"wrong seq\n", seq=(peer.snd_nxt + 1000) & 0xFFFFFFFF)
    r = peer.recv(2, lambda q: q[TCP].flags.R or len(q[TCP].payload) > 0)
    assert r is not None and r[TCP].flags.R, "a cookie returned with the wrong SEQ was accepted"
    assert wait_counter(counters, "tcp_syn_cookies_bad", bad + 2) == bad + 2

    # positive control: the same cookie with the right SEQ opens the connection
    msg = b"right seq\n"
    peer.send("PA", msg)
    assert peer.recv_data(len(msg), timeout=3) == msg, "control: the right ACK opened nothing"
