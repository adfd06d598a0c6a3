"""RFC 6191 and RFC 9293 §3.6.1: a new SYN for a connection in TIME-WAIT.

Port 13 greets and closes first, so the node holds the connection in TIME-WAIT once we
acknowledged its FIN and sent ours. We then send a SYN from the same port, as a client that
reuses its ports does, and look at the answer.
"""

from scapy.layers.inet import TCP

from conftest import TcpPeer, curated_pcap, requirement, tcp_opts

GREETING = b"ulstack\n"


def _time_wait(link):
    """A connection to port 13 that the node closed first, now in TIME-WAIT at the node."""
    peer = TcpPeer(link, 13)
    peer.connect()
    assert peer.recv_data(len(GREETING)) == GREETING
    if peer.rcv_nxt != (peer.irs + 1 + len(GREETING) + 1) & 0xFFFFFFFF:
        fin = peer.recv(5, lambda q: q[TCP].flags.F)
        assert fin is not None, "the node did not close"
        peer.absorb(fin)
    _fin_after_the_nodes(peer)
    return peer


def _fin_after_the_nodes(peer):
    """Acknowledge the node's FIN, send ours and see it acknowledged: the node's side of
    the connection is in TIME-WAIT."""
    peer.ack()
    peer.send("FA")
    a = peer.recv(3, lambda q: q[TCP].ack == peer.snd_nxt)
    assert a is not None, "our FIN was not acknowledged"
    peer.closed = True


def _new_syn(old, isn, tsval):
    """A SYN of a new incarnation of old's connection, with our ISN and TSval."""
    new = TcpPeer(old.link, old.dport, sport=old.sport)
    new.iss = new.snd_nxt = isn & 0xFFFFFFFF
    opts = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (tsval & 0xFFFFFFFF, 0)),
            ("NOP", None), ("WScale", 7)]
    new.send("S", options=opts, ack=0)
    return new


@requirement(fix='patch 0032',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c 's/if (TCP_SEQ_GT(tsval, pcb->ts_recent)) {/if (0) {/'")
def test_rfc6191_2_syn_with_higher_timestamp_reopens_time_wait(link):
    """RFC 6191 §2: "If TCP Timestamps would be enabled for the new incarnation of the
    connection, and the timestamp contained in the incoming SYN segment is greater than the
    last timestamp seen on the previous incarnation of the connection (for that direction
    of the data transfer), honor the connection request (creating a connection in the
    SYN-RECEIVED state)." (RFC 9293 §3.6.1, MAY-2.) The SYN gets a SYN-ACK, not a reset,
    and the new connection works (the greeting comes again)."""
    old = _time_wait(link)
    new = _new_syn(old, old.snd_nxt + 100000, old.tsval() + 1000)
    sa = new.recv(3, lambda q: q[TCP].flags.S or q[TCP].flags.R or q[TCP].flags.A)
    assert sa is not None, "no answer to the SYN"
    assert sa[TCP].flags.S and sa[TCP].flags.A, f"answered {sa[TCP].flags}, not SYN-ACK"
    assert sa[TCP].ack == new.snd_nxt
    new.synack, new.irs = sa, sa[TCP].seq
    new.rcv_nxt = (sa[TCP].seq + 1) & 0xFFFFFFFF
    new.ts_ok = "Timestamp" in tcp_opts(sa)
    new.ack()
    assert new.recv_data(len(GREETING)) == GREETING, "the reopened connection does not work"
    curated_pcap(link, "rfc6191_2_syn_with_higher_timestamp_reopens_time_wait.pcap")
    new.abort()


@requirement(fix='patch 0032',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c 's/return TCP_SEQ_GEQ(seqno, pcb->rcv_nxt);/return 0;/'")
def test_rfc6191_2_syn_with_higher_isn_and_no_timestamps_reopens(link):
    """RFC 6191 §2: "If TCP Timestamps would not be enabled for the new incarnation of the
    connection, but the Sequence Number of the incoming SYN segment is greater than the last
    sequence number seen on the previous incarnation of the connection (for the same
    direction of the data transfer), honor the incoming connection request". A SYN without
    TSopt and with an ISN above the old RCV.NXT gets a SYN-ACK."""
    old = _time_wait(link)
    new = TcpPeer(link, 13, sport=old.sport, ts=False)
    new.iss = new.snd_nxt = (old.snd_nxt + 5000) & 0xFFFFFFFF
    new.send("S", options=[("MSS", 1460)], ack=0)
    sa = new.recv(3)
    assert sa is not None, "no answer to the SYN"
    assert sa[TCP].flags.S and sa[TCP].flags.A, f"answered {sa[TCP].flags}, not SYN-ACK"
    new.rcv_nxt = (sa[TCP].seq + 1) & 0xFFFFFFFF
    new.ack()
    assert new.recv_data(len(GREETING)) == GREETING
    new.abort()


@requirement(fix='patch 0032',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c 's/if ((pcb->flags \\& TF_TIMESTAMP) \\&\\& has_ts) {/if (0) {/'")
def test_rfc6191_2_syn_with_older_timestamp_gets_challenge_ack_not_reset(link):
    """RFC 6191 §2: if the SYN's timestamp is not greater than the last one seen (and the
    sequence number not greater either), the connection is not reopened; RFC 9293
    §3.10.7.4 (fourth, check the SYN bit, for TIME-WAIT): "RFC 5961 recommends that in
    these synchronized states, if the SYN bit is set, irrespective of the sequence number,
    TCP endpoints MUST send a "challenge ACK" to the remote peer". (RFC 6191 asks to drop
    it silently; Linux sends the ACK, as we do.) lwIP answered with a reset whose SEQ was
    the SYN's ACK field. The answer is an ACK of the old connection's RCV.NXT, no RST; a SYN
    with a newer timestamp (positive control) then reopens it."""
    old = _time_wait(link)
    stale = _new_syn(old, old.snd_nxt + 100000, old.tsval() - 100000)
    ans = stale.recv(3)
    assert ans is not None, "no answer to the SYN (expected a challenge ACK)"
    assert not ans[TCP].flags.R, f"reset ({ans[TCP].flags}, seq {ans[TCP].seq})"
    assert not ans[TCP].flags.S, "the connection was reopened for an old timestamp"
    assert ans[TCP].flags.A and ans[TCP].ack == old.snd_nxt, "not an ACK of the old RCV.NXT"
    good = _new_syn(old, old.snd_nxt + 200000, old.tsval() + 1000)
    sa = good.recv(3, lambda q: q[TCP].flags.S)
    assert sa is not None and sa[TCP].flags.A, "a newer SYN did not reopen (positive control)"
    good.rcv_nxt = (sa[TCP].seq + 1) & 0xFFFFFFFF
    good.abort()


@requirement(fix='patch 0032',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c 's/return TCP_SEQ_GEQ(seqno, pcb->rcv_nxt);/return 1;/'")
def test_rfc6191_2_syn_with_lower_isn_and_no_timestamps_not_reopened(link):
    """RFC 6191 §2 (previous incarnation without timestamps): "If TCP Timestamps would not
    be enabled for the new incarnation of the connection, but the Sequence Number of the
    incoming SYN segment is greater than the last sequence number seen on the previous
    incarnation of the connection (for the same direction of the data transfer), honor the
    incoming connection request", and "Otherwise, silently drop the incoming SYN segment,
    thus leaving the previous incarnation of the connection in the TIME-WAIT state." A SYN
    below RCV.NXT gets a challenge ACK (RFC 9293 §3.10.7.4),
    not a SYN-ACK; one above it (positive control) reopens the connection."""
    old = TcpPeer(link, 13, ts=False)
    old.connect()
    assert old.recv_data(len(GREETING)) == GREETING
    if old.rcv_nxt != (old.irs + 1 + len(GREETING) + 1) & 0xFFFFFFFF:
        fin = old.recv(5, lambda q: q[TCP].flags.F)
        assert fin is not None
        old.absorb(fin)
    old.ack()
    old.send("FA")
    assert old.recv(3, lambda q: q[TCP].ack == old.snd_nxt) is not None
    old.closed = True
    low = TcpPeer(link, 13, sport=old.sport, ts=False)
    low.iss = low.snd_nxt = (old.snd_nxt - 5000) & 0xFFFFFFFF
    low.send("S", options=[("MSS", 1460)], ack=0)
    ans = low.recv(3)
    assert ans is not None and not ans[TCP].flags.S and not ans[TCP].flags.R, \
        f"a SYN below RCV.NXT got {ans[TCP].flags if ans else None}"
    assert ans[TCP].ack == old.snd_nxt
    high = TcpPeer(link, 13, sport=old.sport, ts=False)
    high.iss = high.snd_nxt = (old.snd_nxt + 5000) & 0xFFFFFFFF
    high.send("S", options=[("MSS", 1460)], ack=0)
    sa = high.recv(3, lambda q: q[TCP].flags.S)
    assert sa is not None, "a SYN above RCV.NXT did not reopen (positive control)"
    high.rcv_nxt = (sa[TCP].seq + 1) & 0xFFFFFFFF
    high.abort()


@requirement(fix='patch 0080',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c '/tcp_timewait_forget(pcb);/d'")
def test_rfc6191_2_reopening_a_time_wait_the_application_holds_leaves_the_new_connection_alone(link):
    """RFC 6191 §2: a SYN with a greater timestamp is honoured, "creating a connection in
    the SYN-RECEIVED state" -- the old incarnation is gone. RFC 9293 §3.10.7.4 names what
    the application may still do with it: in TIME-WAIT a CLOSE gets "error: connection
    closing", it does not reach any other connection. Port 12 shuts its sending side down
    ('H'), reads to our FIN and keeps the socket 1.5 s before closing it, so the node
    holds the connection in TIME-WAIT while the application still has it. lwIP 2.1.3 freed
    the TIME-WAIT pcb for the new SYN without telling the application; the new
    connection's pcb then took the same memory, and the late close() of the old socket
    closed the new connection (a use after free a peer triggers at will). The new
    connection echoes before and after the old socket's close, and gets no FIN from it."""
    old = TcpPeer(link, 12)
    old.connect()
    old.send("PA", b"H")
    fin = old.recv(5, lambda q: q[TCP].flags.F)
    assert fin is not None, "port 12 did not shut its sending side down"
    old.absorb(fin)
    _fin_after_the_nodes(old)
    new = _new_syn(old, old.snd_nxt + 100000, old.tsval() + 1000)
    sa = new.recv(3, lambda q: q[TCP].flags.S and q[TCP].flags.A)
    assert sa is not None, "the SYN did not reopen the connection"
    new.rcv_nxt = (sa[TCP].seq + 1) & 0xFFFFFFFF
    new.ts_ok = "Timestamp" in tcp_opts(sa)
    new.ack()
    new.send("PA", b"ping\n")
    assert new.recv_data(5) == b"ping\n", "the reopened connection does not echo"
    # The old socket is closed 1.5 s after our FIN; watch the new connection past that.
    late = new.recv_all(2.5, lambda q: q[TCP].flags.F or q[TCP].flags.R)
    assert not late, f"the old socket's close reached the new connection: {late[0][TCP].flags}"
    new.send("PA", b"pong\n")
    assert new.recv_data(5) == b"pong\n", "the new connection stopped echoing"
    new.abort()
