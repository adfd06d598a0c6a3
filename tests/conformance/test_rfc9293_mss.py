"""RFC 9293 §3.7.1: the MSS option is read from SYNs only, and a tiny one cannot break us.

lwIP 2.1.3 read an MSS option from any segment: one ACK carrying MSS=1 on an established
connection made the next send assert and abort the process (issue 13)."""

import os

from scapy.layers.inet import TCP

from conftest import TcpPeer, curated_pcap, requirement, wait_counter


def _echo(peer, data, timeout=5.0):
    peer.send("PA", data)
    return peer.recv_data(len(data), timeout=timeout)


def _echo_segments(peer, data, what, chunk=1000):
    """Sends data to the echo port in segments of `chunk` bytes and reads the echo back,
    ACKing every segment: (the echo's in-order segments, the bytes they carried)."""
    for i in range(0, len(data), chunk):
        peer.send("PA", data[i:i + chunk])
    segs, got = [], b""
    while len(got) < len(data):
        p = peer.recv(5, lambda q: len(q[TCP].payload) > 0)
        assert p is not None, f"{what} stopped after {len(got)} of {len(data)} bytes"
        if p[TCP].seq == peer.rcv_nxt:
            got += bytes(p[TCP].payload)
            segs.append(p)
            peer.absorb(p)
        peer.ack()
    return segs, got


def _sizes(segs, options=False):
    """Each segment's data octets (with options=True, its TCP options' octets added)."""
    return [len(p[TCP].payload) + (p[TCP].dataofs * 4 - 20 if options else 0) for p in segs]


@requirement(fix='patch 0010',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c 's/if (!(flags \\& TCP_SYN) || !tcp_syn_opts_ok(pcb)) {/if (0) {/'")
def test_rfc9293_3_7_1_mss_option_in_non_syn_ignored(node, link, counters):
    """RFC 9293 §3.7.1: "TCP endpoints MUST implement both sending and receiving the MSS
    Option (MUST-14)." and §3.2, Maximum Segment Size Option: "This field may be sent in
    the initial connection request (i.e., in segments with the SYN control bit set) and
    MUST NOT be sent in other segments (MUST-65)." An MSS option in an ACK of an
    established echo connection (port 7) is ignored and counted (tcp_mss_nonsyn_ignored):
    echo still works, its segments stay full-size, and the node stays up. Positive
    control: the same option in a SYN (MSS=500) is honoured: that connection's echo comes
    in segments of at most 500 bytes."""
    peer = TcpPeer(link, 7)
    peer.connect()
    assert _echo(peer, b"before\n") == b"before\n"
    before = counters()["tcp_mss_nonsyn_ignored"]
    peer.ack(options=peer.options() + [("MSS", 1)])
    data = os.urandom(3000)
    segs, got = _echo_segments(peer, data, "echo")
    segs = _sizes(segs)
    assert got == data, "echoed bytes differ"
    assert max(segs) >= 1000, f"segments shrank after an MSS option in an ACK: {segs}"
    assert node.alive(), "the node died"
    assert wait_counter(counters, "tcp_mss_nonsyn_ignored", before + 1) == before + 1, \
        "the MSS option in a non-SYN segment was not counted as ignored"
    ctl = TcpPeer(link, 7, mss=500)
    ctl.connect()
    segs, got = _echo_segments(ctl, data, "control echo")
    segs = _sizes(segs)
    assert got == data and max(segs) <= 500, f"control: MSS 500 in a SYN gave {segs}"


@requirement(fix='patch 0010, TCP_MSS_FLOOR',
             mutate="sed -i 's/#define TCP_MSS_FLOOR  *48/#define TCP_MSS_FLOOR 1/' stack/lwipopts.h")
def test_rfc9293_3_7_1_tiny_syn_mss_clamped_to_48(node, link, counters):
    """RFC 9293 §3.7.1: "The maximum size of a segment that a TCP endpoint really sends, the
    "effective send MSS", MUST be the smaller (MUST-16) of the send MSS ... and the largest
    transmission size permitted by the IP layer (EMTU_S [19]): Eff.snd.MSS = min(SendMSS+20,
    MMS_S) - TCPhdrsize - IPoptionsize". A SYN with
    MSS=1 would make every segment carry at most one byte (and left lwIP's segmentation
    no room for its 12-byte timestamp option). Deviation: as Linux (net.ipv4.
    tcp_min_snd_mss, default 48), ulstack raises an announced MSS below 48 to 48 and counts
    it (tcp_mss_clamped). A 600-byte echo then comes back in segments whose options and
    data fit in 48 bytes, each carrying more than one byte, and the node stays up.
    Positive control: a SYN with MSS=100 is honoured as is (segments of at most 100)."""
    before = counters()["tcp_mss_clamped"]
    peer = TcpPeer(link, 7, mss=1)
    peer.connect()
    data = os.urandom(600)
    segs, got = _echo_segments(peer, data, "echo", chunk=len(data))
    sizes = _sizes(segs, options=True)
    assert got == data
    assert max(sizes) <= 48, f"segment (options + data) above the 48-byte floor: {sizes}"
    assert min(sizes) > 13, f"segments of a byte or so: the MSS was not raised: {sizes}"
    assert node.alive()
    assert counters()["tcp_mss_clamped"] == before + 1, "tiny MSS not counted as clamped"

    ctl = TcpPeer(link, 7, mss=100)
    ctl.connect()
    assert counters()["tcp_mss_clamped"] == before + 1, "an MSS of 100 was clamped"
    segs, got = _echo_segments(ctl, data, "control echo", chunk=len(data))
    sizes = _sizes(segs, options=True)
    assert got == data and max(sizes) <= 100 and max(sizes) > 48, sizes
    curated_pcap(link, "test_rfc9293_3_7_1_tiny_syn_mss_clamped_to_48.pcap")
