"""RFC 7323: TCP Extensions for High Performance (window scale, timestamps)."""

import time

from scapy.layers.inet import TCP

from conftest import TcpPeer, curated_pcap, requirement, tcp_opts


@requirement(fix='lwIP 2.1.3 (LWIP_WND_SCALE, TCP_RCV_SCALE 7)',
             mutate="sed -i 's/TCP_RCV_SCALE  *7/TCP_RCV_SCALE 6/; s/TCP_WND  *(4U/TCP_WND (2U/' stack/lwipopts.h")
def test_rfc7323_2_2_synack_carries_window_scale_shift_at_least_7(node, link):
    """RFC 7323 §2.2: "This option MAY be sent in an initial <SYN> segment (i.e., a segment
    with the SYN bit on and the ACK bit off). If a Window Scale option was received in the
    initial <SYN> segment, then this option MAY be sent in the <SYN,ACK> segment."
    ulstack's 4 MiB receive window needs a shift of at least 7
    (65535 << 6 is below 4 MiB)."""
    peer = TcpPeer(link, 7, wscale=7)
    sa = peer.connect()
    ws = tcp_opts(sa).get("WScale")
    assert ws is not None, f"no Window Scale in the SYN-ACK: {sa[TCP].options}"
    assert 7 <= ws <= 14, f"shift {ws}"


@requirement(fix='lwIP 2.1.3',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c 's/if ((pcb->state != SYN_RCVD) || (pcb->flags \\& TF_WND_SCALE)) {/if (1) {/'")
def test_rfc7323_2_2_no_window_scale_in_synack_without_one_in_syn(node, link):
    """RFC 7323 §2.2: "If a Window Scale option was received in the initial <SYN> segment,
    then this option MAY be sent in the <SYN,ACK> segment." Positive
    control: a SYN with Window Scale gets one back."""
    peer = TcpPeer(link, 7, wscale=None)
    sa = peer.connect()
    assert "WScale" not in tcp_opts(sa), f"SYN-ACK options: {sa[TCP].options}"
    ctl = TcpPeer(link, 7, wscale=7)
    sa = ctl.connect()
    assert "WScale" in tcp_opts(sa), f"control: SYN-ACK options: {sa[TCP].options}"


@requirement(fix='lwIP 2.1.3 (LWIP_TCP_TIMESTAMPS)',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c 's/if ((pcb->flags \\& TF_TIMESTAMP) || ((flags \\& TCP_SYN) \\&\\& (pcb->state != SYN_RCVD))) {/if (0) {/'")
def test_rfc7323_3_2_synack_carries_timestamps(node, link):
    """RFC 7323 §3.2: "A TCP MAY send the TSopt in an initial <SYN> segment (i.e., segment
    containing a SYN bit and no ACK bit), and MAY send a TSopt in <SYN,ACK> only if it
    received a TSopt in the initial <SYN> segment for the connection." and "The TSecr
    field is valid if the ACK bit is set in the TCP header. ... When the ACK bit is set in
    an outgoing segment, the sender MUST echo a recently received TSval sent by the remote
    TCP in the TSval field of a Timestamps option.": the SYN-ACK's TSecr carries the TSval
    of the SYN it answers."""
    peer = TcpPeer(link, 7)
    opts = peer.syn_options()
    syn_tsval = dict(opts)["Timestamp"][0]
    peer.send("S", options=opts, ack=0)
    sa = peer.recv(5, lambda q: q[TCP].flags.S and q[TCP].flags.A)
    assert sa is not None, "no SYN-ACK"
    peer.rcv_nxt = sa[TCP].seq + 1
    ts = tcp_opts(sa).get("Timestamp")
    assert ts is not None, f"no TSopt in the SYN-ACK: {sa[TCP].options}"
    assert ts[1] == syn_tsval, f"TSecr {ts[1]} does not echo our TSval {syn_tsval}"


@requirement(fix='lwIP 2.1.3',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c 's/if ((pcb->flags \\& TF_TIMESTAMP) || ((flags \\& TCP_SYN) \\&\\& (pcb->state != SYN_RCVD))) {/if (1) {/'")
def test_rfc7323_3_2_no_timestamps_in_synack_without_them_in_syn(node, link):
    """RFC 7323 §3.2: "... and MAY send a TSopt in <SYN,ACK> only if it received a TSopt
    in the initial <SYN> segment for the connection." Positive control: a SYN with TSopt
    gets one back."""
    peer = TcpPeer(link, 7, ts=False)
    sa = peer.connect()
    assert "Timestamp" not in tcp_opts(sa), f"SYN-ACK options: {sa[TCP].options}"
    ctl = TcpPeer(link, 7, ts=True)
    sa = ctl.connect()
    assert "Timestamp" in tcp_opts(sa), f"control: SYN-ACK options: {sa[TCP].options}"


@requirement(fix='lwIP 2.1.3',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c 's/pcb->ts_recent = lwip_ntohl(tsval);/(void)tsval;/g'")
def test_rfc7323_4_3_tsecr_echoes_our_tsval(node, link):
    """RFC 7323 §4.3: "(2) If: SEG.TSval >= TS.Recent and SEG.SEQ <= Last.ACK.sent then
    SEG.TSval is copied to TS.Recent; otherwise, it is ignored." ... "(3) When a TSopt is
    sent, its TSecr field is set to the current TS.Recent value." Data we send with TSval X
    is echoed (port 7) in a segment whose TSecr is X."""
    peer = TcpPeer(link, 7)
    peer.connect()
    assert peer.ts_ok, "timestamps not negotiated"
    tsval = 0x1357_9BDF
    peer.send("PA", b"timestamp probe\n",
              options=[("NOP", None), ("NOP", None), ("Timestamp", (tsval, peer.ts_recent))])
    p = peer.recv(5, lambda q: len(q[TCP].payload) > 0 or q[TCP].ack == peer.snd_nxt)
    assert p is not None, "no answer to our data"
    ts = tcp_opts(p).get("Timestamp")
    assert ts is not None, f"no TSopt in the node's segment: {p[TCP].options}"
    assert ts[1] == tsval, f"TSecr {ts[1]:#x}, expected our TSval {tsval:#x}"


@requirement(fix='lwIP 2.1.3 (LWIP_WND_SCALE)',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c 's/^            tcp_set_flags(pcb, TF_WND_SCALE);/            (void)0;/'")
def test_rfc7323_2_more_than_64k_in_flight_with_window_scale(node, link):
    """RFC 7323 §1.1/§2: "The TCP header uses a 16-bit field to report the receive window
    size to the sender. Therefore, the largest window that can be used is 2^16 = 64 KiB."
    ... "The window scale extension expands the definition of the TCP window to 30 bits".
    Once both SYNs carried Window Scale (we announce 65535 << 7 = 8 MiB), the node sends
    more than 65535 bytes beyond the highest acknowledgment we gave: we ACK what arrives
    so that the congestion window grows, then hold our ACKs for one burst and count."""
    peer = TcpPeer(link, 19, wscale=7, window=65535)
    sa = peer.connect()
    assert peer.peer_wscale is not None, "window scaling not agreed"
    last_ack = peer.rcv_nxt   # highest ACK we sent
    high = peer.rcv_nxt       # highest sequence number + length seen from the node
    best = 0
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        burst = []
        while True:   # one burst: everything until the node pauses (its cwnd is full)
            p = peer.recv(0.25 if burst else 3.0, lambda q: len(q[TCP].payload) > 0)
            if p is None:
                break
            burst.append(p)
            end = (p[TCP].seq + len(p[TCP].payload)) & 0xFFFFFFFF
            if ((end - high) & 0xFFFFFFFF) < 0x80000000:
                high = end
            peer.absorb(p)
        assert burst, "the pattern source stopped sending"
        best = max(best, (high - last_ack) & 0xFFFFFFFF)
        if best > 65535:
            break
        # ACK every second segment of the burst (slow start grows per ACK: RFC 5681 §3.1)
        ends = [(q[TCP].seq + len(q[TCP].payload)) & 0xFFFFFFFF for q in burst]
        for i, end in enumerate(ends):
            if i % 2 == 1 or i == len(ends) - 1:
                a = end if ((peer.rcv_nxt - end) & 0xFFFFFFFF) < 0x80000000 else peer.rcv_nxt
                peer.ack(ack=a)
                last_ack = a
        if peer.rcv_nxt != last_ack:
            peer.ack()
            last_ack = peer.rcv_nxt
    curated_pcap(link, "rfc7323_more_than_64k_in_flight.pcap")
    assert best > 65535, f"at most {best} bytes were ever unacknowledged"
