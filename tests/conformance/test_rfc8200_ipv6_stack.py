"""IPv6 (RFC 8200), ICMPv6 (RFC 4443), neighbour discovery (RFC 4861) and TCP over IPv6 on a
node of its own (docs/ipv6.md). ulsd's node has no IPv6 yet: there these tests skip.

The node has NODE_IP6 and its link-local address from the MAC; ulsnode serves its TCP echo
(port 7), greeting (13) and UDP echo (7) on IPv6-only sockets beside the IPv4 ones. Scapy
is SCAPY_IP6, and the responder thread (conftest.py) answers the node's neighbour
solicitations for it.
"""

import os

import pytest

from scapy.layers.inet import TCP
from scapy.layers.inet6 import (IPv6, ICMPv6EchoReply, ICMPv6EchoRequest, ICMPv6ND_NA,
                                ICMPv6ND_NS, ICMPv6NDOptDstLLAddr, ICMPv6NDOptSrcLLAddr,
                                ICMPv6ParamProblem, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment,
                                IPv6ExtHdrHopByHop)
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils6 import in6_getnsma, in6_getnsmac
from scapy.pton_ntop import inet_pton
import socket

from conftest import TcpPeer, requirement, tcp_opts, wait_counter

# NO_IP6_INPUT in the decorators below (spelled out: reqtable.py reads them as literals):
# every IPv6 frame the node takes goes to ip6_input (stack/ethif.c); the mutation sends
# none there, so nothing IPv6 is answered.


@pytest.fixture
def stack6(node):
    """A node of its own with IPv6 in its stack: the process answers (on ulsd's node the
    processes carry no IPv6 yet; ulsd's own IPv6 answers are test_rfc8200_ipv6.py's)."""
    if node.deployment != "own" or node.ip6 is None:
        pytest.skip("the process's IPv6 runs on a node of its own only (docs/ipv6.md)")
    return node


def _echo6(node, ident, payload=b"ping6", dst=None, **ip):
    return (Ether(src=node.my_mac, dst=node.mac) /
            IPv6(src=node.my_ip6, dst=dst or node.ip6, **ip) /
            ICMPv6EchoRequest(id=ident, seq=1, data=payload))


def _reply_to(node, ident):
    return lambda p: (ICMPv6EchoReply in p and p[IPv6].dst == node.my_ip6
                      and p[ICMPv6EchoReply].id == ident)


def _answers_ping6(node, link, ident):
    link.send(_echo6(node, ident))
    return link.recv(_reply_to(node, ident), 3)


def _link_local(mac):
    """RFC 4291 §2.5.1 / RFC 2464 §4: fe80::/64 with the modified EUI-64 of the MAC."""
    b = bytes(int(x, 16) for x in mac.split(":"))
    iid = bytes([b[0] ^ 0x02]) + b[1:3] + b"\xff\xfe" + b[3:6]
    return socket.inet_ntop(socket.AF_INET6, b"\xfe\x80" + b"\x00" * 6 + iid)


@requirement(fix='own: stack/ethif.c, stack/socket.c; lwIP 2.1.3', mutate="sed -i 's|= v6 ? ip6_input : ip4_input;|= ip4_input; (void)v6;  /* IPv6 dropped as a bad version */|' stack/tso.c")
def test_rfc9293_3_5_handshake_and_data_over_ipv6(stack6, link):
    """RFC 9293 §3.5 over IPv6 (RFC 8200 §8.1: "Any transport or other upper-layer protocol
    that includes the addresses from the IP header in its checksum computation must be
    modified for use over IPv6, to include the 128-bit IPv6 addresses instead of 32-bit IPv4
    addresses."): "The synchronization requires each side to send its own initial sequence
    number and to receive a confirmation of it in acknowledgment from the remote TCP peer."
    A SYN to the node's IPv6 address gets a SYN-ACK that acknowledges it, and data sent
    after the handshake comes back from the echo service over IPv6."""
    peer = TcpPeer(link, 7, v6=True)
    sa = peer.connect()
    assert sa[IPv6].src == stack6.ip6 and sa[IPv6].dst == stack6.my_ip6
    peer.send("PA", b"hello over IPv6\n")
    assert peer.recv_data(16) == b"hello over IPv6\n"


@requirement(fix='lwIP 2.1.3 (tcp_in.c)', level="MUST",
             mutate="tests/conformance/lwip-mutate core/tcp_in.c "
                    "'s/u16_t chksum = ip_chksum_pseudo(p, IP_PROTO_TCP, p->tot_len,/"
                    "u16_t chksum = 0 \\&\\& ip_chksum_pseudo(p, IP_PROTO_TCP, p->tot_len,/'")
def test_rfc8200_8_1_tcp_checksum_over_ipv6_pseudo_header(stack6, link, counters):
    """RFC 8200 §8.1: "Any transport or other upper-layer protocol that includes the
    addresses from the IP header in its checksum computation must be modified for use over
    IPv6, to include the 128-bit IPv6 addresses", and RFC 9293 §3.1 (MUST-2/3): the
    checksum is checked. A data segment whose checksum is off by one bit is dropped and
    counted (tcp_chkerr), not echoed; the same data with a good checksum is."""
    peer = TcpPeer(link, 7, v6=True)
    peer.connect()
    good = peer.segment("PA", b"checksum6\n")
    good_sum = TCP(bytes(good[TCP])).chksum
    before = counters()["tcp_chkerr"]
    # the same segment, timestamps and all, but one bit of its checksum: built anew, the
    # TSval could move by 1 ms and an odd checksum XOR 1 would be right again
    bad = good.copy()
    bad[TCP].chksum = good_sum ^ 0x0001
    link.send(bad)
    assert wait_counter(counters, "tcp_chkerr", before + 1) == before + 1, \
        "tcp_chkerr did not grow by 1"
    assert peer.recv(1.0, lambda q: len(q[TCP].payload) > 0) is None, \
        "the segment with a bad checksum was echoed"
    peer.send("PA", b"checksum6\n")
    assert peer.recv_data(10) == b"checksum6\n", "control: the good segment was not echoed"


@requirement(fix='lwIP 2.1.3 (tcp.c tcp_eff_send_mss_netif)', level="MUST",
             mutate="tests/conformance/lwip-mutate core/tcp.c "
                    "'s/offset = IP6_HLEN + TCP_HLEN;/offset = IP_HLEN + TCP_HLEN;/'")
def test_rfc8200_8_3_mss_from_the_ipv6_mtu(stack6, link):
    """RFC 8200 §8.3: "When computing the maximum payload size available for upper-layer
    data, an upper-layer protocol must take into account the larger size of the IPv6 header
    relative to the IPv4 header." RFC 9293 §3.7.1: the MSS sent is the MTU less the fixed
    IP and TCP headers. Over IPv6 the node's SYN-ACK announces MTU - 60 (1440 at 1500),
    not IPv4's MTU - 40, to a peer that offered more."""
    mtu = int(stack6.env.get("TB_MTU", "1500"))
    peer = TcpPeer(link, 7, mss=65000, v6=True)
    sa = peer.connect()
    assert tcp_opts(sa).get("MSS") == mtu - 60, \
        f"SYN-ACK MSS {tcp_opts(sa).get('MSS')}, want {mtu - 60} (MTU {mtu} - 40 - 20)"


@requirement(fix='lwIP 2.1.3 (icmp6.c)',
             mutate="tests/conformance/lwip-mutate core/ipv6/icmp6.c "
                    "'s/case ICMP6_TYPE_EREQ:/case ICMP6_TYPE_EREQ: pbuf_free(p); return;/'")
def test_rfc4443_4_1_echo_request_answered(stack6, link):
    """RFC 4443 §4.1/§4.2: "Every node MUST implement an ICMPv6 Echo responder function
    that receives Echo Requests and originates corresponding Echo Replies." ... "The data
    received in the ICMPv6 Echo Request message MUST be returned entirely and unmodified in
    the ICMPv6 Echo Reply message." Both to the global address and to the link-local one
    (RFC 4291 §2.5.6, from the MAC)."""
    payload = os.urandom(600)
    for ident, dst in ((0x6A01, stack6.ip6), (0x6A02, _link_local(stack6.mac))):
        src = stack6.my_ip6 if dst == stack6.ip6 else stack6.my_ll6
        link.send(Ether(src=stack6.my_mac, dst=stack6.mac) / IPv6(src=src, dst=dst) /
                  ICMPv6EchoRequest(id=ident, seq=3, data=payload))
        r = link.recv(lambda p: ICMPv6EchoReply in p and p[ICMPv6EchoReply].id == ident, 3)
        assert r is not None, f"no echo reply from {dst}"
        assert r[IPv6].src == dst and r[IPv6].dst == src
        assert r[ICMPv6EchoReply].seq == 3
        assert bytes(r[ICMPv6EchoReply].data) == payload, "echo data changed"


@requirement(fix='lwIP 2.1.3 (nd6.c)',
             mutate="tests/conformance/lwip-mutate core/ipv6/nd6.c "
                    "'s/case ICMP6_TYPE_NS: \\/\\* Neighbor solicitation. \\*\\//"
                    "case ICMP6_TYPE_NS: pbuf_free(p); return;/'")
def test_rfc4861_7_2_4_solicitation_answered_with_advertisement(stack6, link):
    """RFC 4861 §7.2.4: "A node sends a Neighbor Advertisement in response to a valid
    Neighbor Solicitation targeting one of the node's assigned addresses." ... "Otherwise
    [the source is not the unspecified address], the node MUST set the Solicited flag to one
    and unicast the advertisement to the Source Address of the solicitation.", with the
    target's link-layer address; §7.1.2: its Hop Limit is 255. A solicitation to
    the node's solicited-node group (RFC 4291 §2.7.1) gets such an advertisement; one for
    an address the node does not have gets none."""
    def ns(target):
        group = socket.inet_ntop(socket.AF_INET6,
                                 in6_getnsma(inet_pton(socket.AF_INET6, target)))
        return (Ether(src=stack6.my_mac, dst=in6_getnsmac(inet_pton(socket.AF_INET6, target))) /
                IPv6(src=stack6.my_ip6, dst=group, hlim=255) / ICMPv6ND_NS(tgt=target) /
                ICMPv6NDOptSrcLLAddr(lladdr=stack6.my_mac))

    def na_for(target):
        return lambda p: ICMPv6ND_NA in p and p[ICMPv6ND_NA].tgt == target

    link.send(ns(stack6.ip6))
    na = link.recv(na_for(stack6.ip6), 3)
    assert na is not None, "no neighbour advertisement"
    assert na[IPv6].dst == stack6.my_ip6, "not unicast to the solicitation's source"
    assert na[IPv6].hlim == 255
    assert na[ICMPv6ND_NA].S == 1, "Solicited flag not set"
    assert ICMPv6NDOptDstLLAddr in na and na[ICMPv6NDOptDstLLAddr].lladdr == stack6.mac
    other = "2001:db8:0:1::77"
    link.send(ns(other))
    assert link.recv(na_for(other), 1.0) is None, "advertised an address it does not have"


@requirement(fix='own: netif/frame.c',
             mutate="sed -i 's|if (avail < IPV6_HLEN \\|\\| ip\\[0\\] >> 4 != 6)|"
                    "if (avail < IPV6_HLEN)|' netif/frame.c")
def test_rfc8200_3_version_not_6_dropped_and_counted(stack6, link, counters):
    """RFC 8200 §3: "Version 4-bit Internet Protocol version number = 6." A type-86dd frame
    whose header says version 5 is not IPv6: the node drops it before lwIP, counts it
    (frame_ipv6_header) and does not answer the echo request inside; the same request with
    version 6 is answered."""
    before = counters()["frame_ipv6_header"]
    raw = bytearray(bytes(_echo6(stack6, 0x6B01)))
    raw[14] = (5 << 4) | (raw[14] & 0x0F)
    link.send(bytes(raw))
    assert wait_counter(counters, "frame_ipv6_header", before + 1) == before + 1
    assert link.recv(_reply_to(stack6, 0x6B01), 1.0) is None, "answered a version-5 packet"
    assert _answers_ping6(stack6, link, 0x6B02) is not None, "control: no echo reply"


@requirement(fix='own: netif/frame.c',
             mutate="sed -i 's|if (plen > avail - IPV6_HLEN)|if (0)|' netif/frame.c")
def test_rfc8200_3_payload_length_beyond_frame_dropped_and_counted(stack6, link, counters):
    """RFC 8200 §3: "Payload Length 16-bit unsigned integer. Length of the IPv6 payload,
    i.e., the rest of the packet following this IPv6 header, in octets." A packet whose
    Payload Length claims 8 octets more than the frame holds is truncated: the node drops
    it (frame_ipv6_length) and does not answer; the same request with its true length is
    answered. Padding after the payload is not part of it: a short request padded to the
    Ethernet minimum is answered."""
    before = counters()["frame_ipv6_length"]
    pkt = _echo6(stack6, 0x6C01, payload=b"x" * 64)
    raw = bytearray(bytes(pkt))
    plen = int.from_bytes(raw[18:20], "big")
    raw[18:20] = (plen + 8).to_bytes(2, "big")
    link.send(bytes(raw))
    assert wait_counter(counters, "frame_ipv6_length", before + 1) == before + 1
    assert link.recv(_reply_to(stack6, 0x6C01), 1.0) is None, "answered a truncated packet"
    link.send(bytes(_echo6(stack6, 0x6C02, payload=b"")) + b"\x00" * 8)
    assert link.recv(_reply_to(stack6, 0x6C02), 3) is not None, \
        "control: the padded request was not answered"


@requirement(fix='lwIP 2.1.3 (ip6.c)',
             mutate="tests/conformance/lwip-mutate core/ipv6/ip6.c "
                    "'s/IP6H_HOPLIM_SET(ip6hdr, hl);/IP6H_HOPLIM_SET(ip6hdr, 0);/'")
def test_rfc8200_3_sent_packets_have_nonzero_hop_limit(stack6, link):
    """RFC 8200 §3: "Hop Limit 8-bit unsigned integer. Decremented by 1 by each node that
    forwards the packet. ... discarded if Hop Limit was zero when received or is
    decremented to zero." A packet the node sends with Hop Limit 0 would die at the first
    router: its TCP segments and echo replies leave with a nonzero Hop Limit (the default,
    64, RFC 4861 §6.3.2 CurHopLimit's recommended value in RFC 8200's §3 sense of "the
    Internet")."""
    peer = TcpPeer(link, 13, v6=True)
    sa = peer.connect()
    assert sa[IPv6].hlim > 0, "SYN-ACK with Hop Limit 0"
    r = _answers_ping6(stack6, link, 0x6D01)
    assert r is not None, "no echo reply"
    assert r[IPv6].hlim > 0, "echo reply with Hop Limit 0"


@requirement(fix='own: stack/socket.c, stack/dgram.c; lwIP 2.1.3', mutate="sed -i 's|= v6 ? ip6_input : ip4_input;|= ip4_input; (void)v6;  /* IPv6 dropped as a bad version */|' stack/tso.c")
def test_rfc768_udp_echo_over_ipv6(stack6, link):
    """RFC 768 over IPv6 (RFC 8200 §8.1: UDP's checksum covers the IPv6 pseudo-header and is
    mandatory). A datagram to the node's UDP echo port comes back to its source address and
    port with a valid, nonzero checksum."""
    sport = 40000 + (os.getpid() % 20000)
    from scapy.layers.inet import UDP
    link.send(Ether(src=stack6.my_mac, dst=stack6.mac) /
              IPv6(src=stack6.my_ip6, dst=stack6.ip6) / UDP(sport=sport, dport=7) /
              Raw(b"udp over ipv6"))
    r = link.recv(lambda p: UDP in p and IPv6 in p and p[UDP].dport == sport, 3)
    assert r is not None, "no UDP echo over IPv6"
    assert r[IPv6].src == stack6.ip6 and r[UDP].sport == 7
    assert bytes(r[UDP].payload) == b"udp over ipv6"
    assert r[UDP].chksum != 0
    got = r[UDP].chksum
    r[UDP].chksum = None
    assert UDP(bytes(r[UDP])).chksum == got, "bad UDP checksum"


@requirement(fix='own: stack/ethif.c', mutate="sed -i 's|= v6 ? ip6_input : ip4_input;|= ip4_input; (void)v6;  /* IPv6 dropped as a bad version */|' stack/tso.c")
def test_rfc4213_2_ipv4_and_ipv6_on_one_port(stack6, link):
    """RFC 4213 §2 (Dual IP Layer Operation); the RFC's Abstract: "Dual stack implies
    providing complete implementations of both versions of the Internet Protocol (IPv4 and
    IPv6)". With IPv6 on, the node's IPv4 TCP service answers as before, and an IPv6
    connection on the same port answers too."""
    p4 = TcpPeer(link, 7)
    p4.connect()
    p4.send("PA", b"v4\n")
    assert p4.recv_data(3) == b"v4\n"
    p6 = TcpPeer(link, 7, v6=True)
    p6.connect()
    p6.send("PA", b"v6\n")
    assert p6.recv_data(3) == b"v6\n"


@requirement(fix='patch 0120', level="MUST",
             mutate="rm stack/patches/0120-udp6-zero-checksum-dropped.patch")
def test_rfc8200_8_1_udp_zero_checksum_dropped_and_counted(stack6, link, counters):
    """RFC 8200 §8.1: "Unlike IPv4, the default behavior when UDP packets are originated by
    an IPv6 node is that the UDP checksum is not optional." ... "IPv6 receivers must
    discard UDP packets containing a zero checksum and should log the error." A datagram
    to the UDP echo port with checksum 0 is dropped and counted (udp_chkerr), not echoed;
    the same datagram with its checksum is echoed."""
    from scapy.layers.inet import UDP
    sport = 40000 + ((os.getpid() + 1) % 20000)

    def dgram(chksum):
        u = UDP(sport=sport, dport=7)
        if chksum is not None:
            u.chksum = chksum
        return (Ether(src=stack6.my_mac, dst=stack6.mac) /
                IPv6(src=stack6.my_ip6, dst=stack6.ip6) / u / Raw(b"zero sum"))

    def echoed(p):
        return UDP in p and IPv6 in p and p[UDP].dport == sport

    before = counters()["udp_chkerr"]
    link.send(dgram(0))
    assert wait_counter(counters, "udp_chkerr", before + 1) == before + 1, \
        "udp_chkerr did not grow by 1"
    assert link.recv(echoed, 1.0) is None, "a zero-checksum datagram was echoed"
    link.send(dgram(None))
    assert link.recv(echoed, 3) is not None, "control: the checksummed datagram was not echoed"



def _frag6(node, ident, offset, data, m):
    """One fragment of an ICMPv6 datagram from Scapy to the node: data at offset octets."""
    from scapy.layers.inet6 import IPv6ExtHdrFragment
    return (Ether(src=node.my_mac, dst=node.mac) / IPv6(src=node.my_ip6, dst=node.ip6) /
            IPv6ExtHdrFragment(nh=58, offset=offset // 8, m=int(m), id=ident) / Raw(data))


@requirement(fix="patches 0134, 0135", level="SHOULD",
             mutate="rm stack/patches/0134-reass6-evicted-no-time-exceeded.patch")
def test_rfc8200_4_5_time_exceeded_only_for_datagrams_whose_time_limit_passed(stack6, link):
    """RFC 8200 §4.5: "If insufficient fragments are received to complete reassembly of a
    packet within 60 seconds of the reception of the first-arriving fragment of that
    packet, reassembly of that packet must be abandoned ... If the first fragment ... has
    been received, an ICMP Time Exceeded -- Fragment Reassembly Time Exceeded message
    should be sent to the source of that fragment." (The limit is REASS_TIMEOUT_S here:
    ULS_REASS_TIMEOUT.) A datagram dropped to make room for others has not run out of
    time: 300 first fragments of different datagrams (more than IP_REASS_MAX_PBUFS holds)
    get no Time Exceeded before the first one's limit; lwIP sent one for each datagram it
    evicted (44), to any source address the fragments named (patch 0134; 0129 is IPv4's).
    Positive control: once the limit has passed, the datagrams held get theirs, each
    quoting the Fragment header as sent (RFC 4443 §3.3; patch 0135: lwIP restored 8 of the
    12 octets its helper overwrote, and the Identification quoted was the helper's); and a
    datagram in two fragments sent after the flood is reassembled and answered."""
    from scapy.layers.inet6 import ICMPv6EchoRequest, ICMPv6TimeExceeded, IPv6ExtHdrFragment
    from conftest import REASS_TIMEOUT_S
    import time
    node = stack6
    base = 0x5a000000 + (os.getpid() % 0x10000) * 0x100
    idents = [base + i for i in range(300)]
    head = bytes(IPv6(src=node.my_ip6, dst=node.ip6) /
                 ICMPv6EchoRequest(id=0x7e57, seq=1, data=bytes(56)))[40:]
    frames = [_frag6(node, ident, 0, head[:16], True) for ident in idents]
    t0 = time.monotonic()
    for f in frames:
        link.send(f)
    took = time.monotonic() - t0
    assert took < 1.5, f"sending the 300 fragments took {took:.2f} s"

    def time_exceeded(p):
        # matched by the quoted echo's identifier: the quoted Identification is checked below
        return (ICMPv6TimeExceeded in p and p[ICMPv6TimeExceeded].code == 1 and
                ICMPv6EchoRequest in p[ICMPv6TimeExceeded].payload and
                p[ICMPv6TimeExceeded].payload[ICMPv6EchoRequest].id == 0x7e57)
    early = link.recv_all(time_exceeded, min(1.0, t0 + REASS_TIMEOUT_S - 0.5 - time.monotonic()))
    assert early == [], f"{len(early)} Time Exceeded messages before any time limit passed"
    ident = base + 300
    data = bytes(IPv6(src=node.my_ip6, dst=node.ip6) /
                 ICMPv6EchoRequest(id=0x7e58, seq=1, data=bytes(120)))[40:]
    link.send(_frag6(node, ident, 0, data[:64], True))
    link.send(_frag6(node, ident, 64, data[64:], False))
    r = link.recv(_reply_to(node, 0x7e58), 3)
    assert r is not None, "control: the datagram in two fragments was not answered"
    late = link.recv_all(time_exceeded, REASS_TIMEOUT_S + 3)
    assert late, "no Time Exceeded once the reassembly time limit had passed"
    quoted = {p[ICMPv6TimeExceeded].payload[IPv6ExtHdrFragment].id for p in late}
    assert quoted <= set(idents), \
        f"Identification quoted not as sent: {sorted(hex(q) for q in quoted - set(idents))[:3]}"


@requirement(fix='lwIP 2.1.3 (ip6.c)',
             mutate="tests/conformance/lwip-mutate core/ipv6/ip6.c '0,/if (\\*nexth == IP6_NEXTH_HOPBYHOP) {/s//if (0) {/'")
def test_rfc8200_4_hop_by_hop_not_first_gets_parameter_problem(stack6, link, counters):
    """RFC 8200 §4.3: "The Hop-by-Hop Options header ... is identified by a Next Header
    value of 0 in the IPv6 header"; §4: "extension headers ... are not processed ... until
    the packet reaches the node ... identified in the Destination Address field", except
    that "the Hop-by-Hop Options header ... is restricted to appear immediately after an
    IPv6 header only" (§4.1). An echo request whose Hop-by-Hop header follows a Destination
    Options header (or a first Hop-by-Hop header) is not answered: the process answers with
    Parameter Problem code 1 pointing at the Next Header that names it (what Linux does) and
    counts the drop (ip6_drop). Positive control: a Hop-by-Hop header first, and a chain of
    40 Destination Options headers, are answered."""
    node = stack6
    for ident, ext in ((0x7A01, IPv6ExtHdrDestOpt() / IPv6ExtHdrHopByHop()),
                       (0x7A02, IPv6ExtHdrHopByHop() / IPv6ExtHdrHopByHop())):
        before = counters()["ip6_drop"]
        link.send(Ether(src=node.my_mac, dst=node.mac) / IPv6(src=node.my_ip6, dst=node.ip6) /
                  ext / ICMPv6EchoRequest(id=ident, seq=1, data=b"hbh"))
        r = link.recv(lambda p: (ICMPv6EchoReply in p and p[ICMPv6EchoReply].id == ident) or
                      ICMPv6ParamProblem in p, 3)
        assert r is not None and ICMPv6ParamProblem in r, \
            f"no Parameter Problem for a Hop-by-Hop header not first: {r!r}"
        assert (r[ICMPv6ParamProblem].code, r[ICMPv6ParamProblem].ptr) == (1, 40)
        assert counters()["ip6_drop"] == before + 1
    chain = IPv6ExtHdrDestOpt()
    for _ in range(39):
        chain = chain / IPv6ExtHdrDestOpt()
    for ident, ext in ((0x7A03, IPv6ExtHdrHopByHop()), (0x7A04, chain)):
        link.send(Ether(src=node.my_mac, dst=node.mac) / IPv6(src=node.my_ip6, dst=node.ip6) /
                  ext / ICMPv6EchoRequest(id=ident, seq=1, data=b"hbh"))
        assert link.recv(lambda p: ICMPv6EchoReply in p and p[ICMPv6EchoReply].id == ident,
                         3) is not None, "control: the echo request was not answered"


@requirement(fix='lwIP 2.1.3 (ip6.c)',
             mutate="tests/conformance/lwip-mutate core/ipv6/ip6.c '/This is a 1-fragment packet/{n;s/pbuf_remove_header(p, hlen);/pbuf_free(p); goto ip6_input_cleanup;/}'")
def test_rfc6946_4_atomic_fragment_inside_a_chain_processed_in_isolation(stack6, link):
    """RFC 6946 §4: "A host that receives an IPv6 packet that includes a Fragment Header
    with the "Fragment Offset" equal to 0 and the "M" flag equal to 0 MUST process that
    packet in isolation from any other packets/fragments, even if such packets/fragments
    contain the same set {IPv6 Source Address, IPv6 Destination Address, Fragment
    Identification}." Echo requests carrying such a Fragment header alone, behind a
    Destination Options header, and twice with one Identification, are each answered at
    once."""
    node = stack6
    for ident, ext in ((0x7B01, IPv6ExtHdrFragment(offset=0, m=0, id=0x7B00)),
                       (0x7B02, IPv6ExtHdrDestOpt() / IPv6ExtHdrFragment(offset=0, m=0, id=0x7B00)),
                       (0x7B03, IPv6ExtHdrFragment(offset=0, m=0, id=0x7B00) /
                        IPv6ExtHdrFragment(offset=0, m=0, id=0x7B00))):
        link.send(Ether(src=node.my_mac, dst=node.mac) / IPv6(src=node.my_ip6, dst=node.ip6) /
                  ext / ICMPv6EchoRequest(id=ident, seq=1, data=b"atomic"))
        assert link.recv(lambda p: ICMPv6EchoReply in p and p[ICMPv6EchoReply].id == ident,
                         3) is not None, f"the atomic fragment {ident:#x} was not answered"
