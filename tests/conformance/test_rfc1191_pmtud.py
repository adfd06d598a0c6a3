"""RFC 1191: path MTU discovery for TCP.

We play both the peer and a router with a smaller MTU in front of it: the pattern source
(port 19) sends full-sized segments (MSS 1460, the node's MTU 1500); we answer the
first one with a Fragmentation Needed message (type 3, code 4) carrying a next-hop MTU, and
check what is sent next. Every echoed byte is compared with what we sent.
"""

import os
import time

from scapy.layers.inet import IP, TCP

from conftest import PMTU_AGE_S, TcpPeer, curated_pcap, requirement, wait_counter
from pmtu import collect, next_new_segment, offset, pattern, source_first_segment
from test_rfc1122_icmp_errors import icmp_error

MSS = 1460   # the node's MTU 1500: full segments are 1500-byte datagrams


@requirement(fix='patch 0030',
             mutate="tests/conformance/lwip-mutate core/ipv4/ip4.c 's/IPH_OFFSET_SET(iphdr, proto == IP_PROTO_TCP ? PP_HTONS(IP_DF) : 0);/IPH_OFFSET_SET(iphdr, 0);/'")
def test_rfc1191_3_tcp_segments_carry_df(link):
    """RFC 1191 §3: "The basic idea is that a source host initially assumes that the PMTU of
    a path is the (known) MTU of its first hop, and sends all datagrams on that path with the
    DF bit set." The SYN-ACK and the data segments of a connection carry DF."""
    peer = TcpPeer(link, 7)
    sa = peer.connect()
    assert sa[IP].flags.DF, "SYN-ACK without DF"
    peer.send("PA", payload=b"df?")
    seg = peer.recv(3, lambda q: len(q[TCP].payload) > 0)
    assert seg is not None and bytes(seg[TCP].payload) == b"df?"
    assert seg[IP].flags.DF, "data segment without DF"
    peer.abort()


@requirement(fix='hook stack/icmperr.c, patch 0031',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c 's/if (seg->len > LWIP_HOOK_TCP_TSO_SIZE(pcb) - (LWIP_TCP_OPT_LENGTH_SEGMENT(seg->flags, pcb)) \\&\\&/if (0 \\&\\& seg->len > 0 \\&\\&/'")
def test_rfc1191_6_4_frag_needed_lowers_mss_and_lost_segment_resent_smaller(link, counters):
    """RFC 1191 §6.4 (TCP layer actions): "The TCP layer must
    track the PMTU for the destination of a connection; it should not send datagrams that
    would be larger than this." and §4: the router's message carries "the MTU of that
    next-hop network". After a Fragmentation Needed with MTU 1280 for the first echoed
    segment, that segment's data is sent again in datagrams of at most 1280 octets, and so
    is everything after it; every byte arrives intact."""
    before = counters()["icmp_pmtu_lowered"]
    peer, first = source_first_segment(link, MSS)
    assert len(first[IP]) == 1500
    icmp_error(link, first[IP], 3, 4, mtu=1280)
    n = 64 * 1024
    data, segs, _ = collect(peer, first[TCP].seq, n)
    assert data == pattern(offset(peer, first), n), f"stream wrong or short ({len(data)} of {n})"
    assert segs and segs[0][TCP].seq == first[TCP].seq, "the lost segment was not resent first"
    big = [len(p[IP]) for p in segs if len(p[IP]) > 1280]
    assert not big, f"datagrams above the path MTU after frag-needed: {big}"
    assert counters()["icmp_pmtu_lowered"] == before + 1
    curated_pcap(link, "rfc1191_6_4_frag_needed_lowers_mss_and_lost_segment_resent_smaller.pcap")
    peer.abort()


@requirement(fix='hook stack/icmperr.c',
             mutate="sed -i 's/#define PMTU_MIN 576/#define PMTU_MIN 68/' stack/icmperr.c")
def test_rfc1191_3_frag_needed_below_576_ignored(link, counters):
    """RFC 1191 §3: "A host MUST never reduce its estimate of the Path MTU below 68 octets."
    We keep a higher floor, 576 (Deviation, docs/limits.md; RFC 5927 §7.1's attack shrinks
    segments with forged tiny MTUs): a next-hop MTU of 300 is counted and ignored, segments
    keep their size; a next-hop MTU of 1000 (positive control) then shrinks them."""
    c0 = counters()
    peer, first = source_first_segment(link, MSS)
    icmp_error(link, first[IP], 3, 4, mtu=300)
    assert wait_counter(counters, "icmp_pmtu_ignored",
                        c0["icmp_pmtu_ignored"] + 1) == c0["icmp_pmtu_ignored"] + 1
    assert counters()["icmp_pmtu_lowered"] == c0["icmp_pmtu_lowered"]
    icmp_error(link, first[IP], 3, 4, mtu=1000)
    n = 32 * 1024
    data, segs, _ = collect(peer, first[TCP].seq, n)
    assert data == pattern(offset(peer, first), n)
    # Beyond the first flight every segment fits 1000 octets. (A retransmission of the first
    # flight may leave at the old size while the message is on its way: the RTO is 200 ms
    # and Scapy takes longer than that to send it.)
    flight_end = (first[TCP].seq + 3 * 1448) & 0xFFFFFFFF
    later = [p for p in segs if ((p[TCP].seq - flight_end) & 0xFFFFFFFF) < 0x80000000]
    assert later and max(len(p[IP]) for p in later) <= 1000, "MTU 1000 was not applied"
    assert counters()["icmp_pmtu_lowered"] == c0["icmp_pmtu_lowered"] + 1
    peer.abort()


@requirement(fix='hook stack/icmperr.c, patch 0030',
             mutate="sed -i 's/if (!(TCP_SEQ_GEQ(seq, pcb->lastack)/if (0 \\&\\& !(TCP_SEQ_GEQ(seq, pcb->lastack)/' stack/icmperr.c")
def test_rfc5927_4_1_frag_needed_quoting_sequence_outside_window_ignored(link, counters):
    """RFC 5927 §4.1 (Informational, no RFC 2119 level): "These implementations check that
    the TCP sequence number contained in the payload of the ICMP error message is within
    the range SND.UNA =< SEG.SEQ < SND.NXT."
    (§7.1: forged frag-needed messages degrade throughput). A frag-needed quoting a sequence
    number far outside the window is counted and ignored: the next segment is full-sized;
    the same message quoting the real segment (positive control) shrinks it."""
    c0 = counters()
    peer, first = source_first_segment(link, MSS)
    icmp_error(link, first[IP], 3, 4, mtu=1280, seq=first[TCP].seq + 0x40000000)
    assert wait_counter(counters, "icmp_err_out_of_window",
                        c0["icmp_err_out_of_window"] + 1) == c0["icmp_err_out_of_window"] + 1
    assert counters()["icmp_pmtu_lowered"] == c0["icmp_pmtu_lowered"]
    # the next new segment after the first flight must still be full-sized
    nxt = next_new_segment(peer, first, 1448)
    assert nxt is not None and len(nxt[IP]) == 1500, "a blind frag-needed shrank the segments"
    icmp_error(link, nxt[IP], 3, 4, mtu=1280)
    assert wait_counter(counters, "icmp_pmtu_lowered",
                        c0["icmp_pmtu_lowered"] + 1) == c0["icmp_pmtu_lowered"] + 1
    n = 32 * 1024
    rest, segs, _ = collect(peer, nxt[TCP].seq, n)
    assert bytes(first[TCP].payload) == pattern(0, len(first[TCP].payload))
    assert rest == pattern(offset(peer, nxt), n)
    assert max(len(p[IP]) for p in segs) <= 1280
    peer.abort()


def _echo_round(peer, msg, timeout=5.0):
    """Send msg to the echo service in segments of at most 1400 octets; collect its echo,
    acknowledging in order. Returns (echo, the echo's segments)."""
    for i in range(0, len(msg), 1400):
        peer.send("PA", payload=msg[i:i + 1400])
    data, segs, _ = collect(peer, peer.rcv_nxt, len(msg), timeout=timeout)
    return data, segs


@requirement(fix='hook stack/icmperr.c, stack/tcpconf.c',
             mutate="sed -i 's/if (st->mss_before > pcb->mss) {/if (0) {/' stack/icmperr.c")
def test_rfc1191_6_3_lowered_pmtu_raised_again_after_aging(link, counters):
    """RFC 1191 §6.3 (purging stale PMTU information) by §3's rule: "Hosts MAY detect
    increases in Path MTU, but ... this MUST be done at infrequent intervals. An attempt to
    detect an increase (by sending a datagram larger than the current estimate) MUST NOT be
    done less than 5 minutes after a Datagram Too Big message has been received for the
    given destination ... We recommend setting these timers at twice their minimum values
    (10 minutes and 2 minutes, respectively)." After a
    frag-needed with MTU 1280 the echo service's segments stay within 1280 octets (control:
    an echo at once); once the aging interval (ULS_PMTU_AGE, 5 s in this suite; 10 minutes
    by default) has passed, the next echo leaves in datagrams above 1280 octets again (up to
    1500, as the echo's writes allow). Every echoed byte is compared."""
    c0 = counters()
    peer = TcpPeer(link, 7, mss=MSS, sack=False)
    peer.connect()
    msg = os.urandom(4000)
    for i in range(0, len(msg), 1400):
        peer.send("PA", payload=msg[i:i + 1400])
    first = peer.recv(3, lambda q: len(q[TCP].payload) > 0)
    assert first is not None and len(first[IP]) > 1280, "the echo did not start above 1280"
    icmp_error(link, first[IP], 3, 4, mtu=1280)
    t_icmp = time.monotonic()
    data, segs, _ = collect(peer, first[TCP].seq, len(msg))
    assert data == msg, "echo wrong or short after frag-needed"
    assert wait_counter(counters, "icmp_pmtu_lowered", c0["icmp_pmtu_lowered"] + 1) == \
        c0["icmp_pmtu_lowered"] + 1
    # Control: right away the path MTU is still 1280.
    msg = os.urandom(6000)
    data, segs = _echo_round(peer, msg)
    assert data == msg
    assert max(len(p[IP]) for p in segs) <= 1280, "the lowered MSS did not hold"
    assert time.monotonic() - t_icmp < PMTU_AGE_S, "too slow to test the control"
    time.sleep(max(0.0, t_icmp + PMTU_AGE_S + 0.5 - time.monotonic()))
    msg = os.urandom(6000)
    data, segs = _echo_round(peer, msg)
    assert data == msg
    assert max(len(p[IP]) for p in segs) > 1280, "the path MTU was not tried again"
    assert counters()["icmp_pmtu_raised"] == c0["icmp_pmtu_raised"] + 1
    peer.abort()
