"""RFC 4443: ICMPv6, as ulsd answers it for the node (server/reply6.c): echo, destination
unreachable, and the rules on when an error is sent. RFC 9293 §3.10.7.1 for TCP to a port
nobody holds, over IPv6. ulsd deployment only (the node6 fixture)."""

import os

from scapy.layers.inet import TCP, UDP
from scapy.layers.inet6 import (ICMPv6DestUnreach, ICMPv6EchoReply, ICMPv6EchoRequest,
                                IPv6, IPerror6)
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from conftest import fresh_port, requirement

# No process holds it. Not 9: the node's discard service listens there, on IPv6 too since
# processes on ulsd's nodes carry it (control protocol 3).
CLOSED_PORT = 4444


def checksum_ok(r, layer, field="cksum"):
    """Scapy recomputes the checksum on a copy with it unset: the same value."""
    c = r[IPv6].copy()
    setattr(c[layer], field, None)
    return getattr(IPv6(bytes(c))[layer], field) == getattr(r[layer], field)


@requirement(fix='ulsd: server/reply6.c',
             mutate="sed -i 's|icmp\\[WIRE_ICMPV6_OFF_TYPE\\] = WIRE_ICMPV6_ECHO_REPLY;|icmp[WIRE_ICMPV6_OFF_TYPE] = WIRE_ICMPV6_ECHO_REPLY; icmp[in->l4_len - 1] ^= 1;|' server/reply6.c")
def test_rfc4443_echo_reply_returns_identical_data(node6, link):
    """RFC 4443 §4.1: "Every node MUST implement an ICMPv6 Echo responder function that
    receives Echo Requests and originates corresponding Echo Replies." §4.2: "The data
    received in the ICMPv6 Echo Request message MUST be returned entirely and unmodified
    in the ICMPv6 Echo Reply message." """
    node = node6
    payload = os.urandom(1000)
    link.send(Ether(src=node.my_mac, dst=node.mac) / IPv6(src=node.my_ip6, dst=node.ip6) /
              ICMPv6EchoRequest(id=0x5A17, seq=7, data=payload))
    r = link.recv(lambda p: ICMPv6EchoReply in p and p[IPv6].src == node.ip6, 3)
    assert r is not None, "no echo reply"
    assert r[IPv6].dst == node.my_ip6 and r[Ether].dst == node.my_mac
    assert r[ICMPv6EchoReply].code == 0
    assert (r[ICMPv6EchoReply].id, r[ICMPv6EchoReply].seq) == (0x5A17, 7)
    assert r[ICMPv6EchoReply].data == payload, "echo reply data differs from the request's"
    assert checksum_ok(r, ICMPv6EchoReply), "bad ICMPv6 checksum in the reply"


@requirement(fix='ulsd: server/reply6.c',
             mutate="sed -i 's/WIRE_ICMPV6_DST_UNREACH, WIRE_ICMPV6_UNREACH_PORT/WIRE_ICMPV6_DST_UNREACH, WIRE_ICMPV6_UNREACH_ADDR/' server/reply6.c")
def test_rfc4443_udp_to_closed_port_gets_port_unreachable(node6, link):
    """RFC 4443 §3.1: "A destination node SHOULD originate a Destination Unreachable message
    with Code 4 in response to a packet for which the transport protocol (e.g., UDP) has no
    listener, if that transport protocol has no alternative means to inform the sender."
    §2.4 (c): "Every ICMPv6 error message (type < 128) MUST include as much of the IPv6
    offending (invoking) packet (the packet that caused the error) as possible without
    making the error message packet exceed the minimum IPv6 MTU [IPv6]." """
    node = node6
    port = fresh_port()
    payload = os.urandom(1400)   # the invoking packet is cut to fit 1280 octets
    link.send(Ether(src=node.my_mac, dst=node.mac) / IPv6(src=node.my_ip6, dst=node.ip6) /
              UDP(sport=port, dport=9) / Raw(payload))
    r = link.recv(lambda p: ICMPv6DestUnreach in p and p[IPv6].src == node.ip6, 3)
    assert r is not None, "no destination unreachable"
    assert r[ICMPv6DestUnreach].code == 4
    assert r[IPv6].dst == node.my_ip6
    assert len(bytes(r[IPv6])) == 1280, "the error does not fill the minimum MTU"
    q = bytes(r[ICMPv6DestUnreach].payload)
    assert q[8:24] == bytes(IPv6(src=node.my_ip6, dst=node.ip6))[8:24]   # source address
    assert q[40:42] == port.to_bytes(2, "big"), "the quote is not the invoking packet"
    assert checksum_ok(r, ICMPv6DestUnreach)


@requirement(fix='ulsd: server/reply6.c',
             mutate="sed -i 's/return !wire_ipv6_is_multicast(in->ip.dst) \\&\\& !wire_eth_is_group(in->eth.dst) \\&\\&/return/' server/reply6.c")
def test_rfc4443_no_error_for_packet_to_multicast(node6, link):
    """RFC 4443 §2.4 (e): "An ICMPv6 error message MUST NOT be originated as a result of
    receiving the following: ... (e.3) A packet destined to an IPv6 multicast address."
    Positive control: the same datagram to the node's unicast address gets its error."""
    node = node6
    link.send(Ether(src=node.my_mac, dst="33:33:00:00:00:01") /
              IPv6(src=node.my_ip6, dst="ff02::1") / UDP(sport=fresh_port(), dport=9) / b"x")
    r = link.recv(lambda p: ICMPv6DestUnreach in p and p[IPv6].src == node.ip6, 1.0)
    assert r is None, "an error was sent about a packet to a multicast address"
    link.send(Ether(src=node.my_mac, dst=node.mac) / IPv6(src=node.my_ip6, dst=node.ip6) /
              UDP(sport=fresh_port(), dport=9) / b"x")
    assert link.recv(lambda p: ICMPv6DestUnreach in p and p[IPv6].src == node.ip6, 3) \
        is not None, "control: no error for the unicast datagram"


@requirement(fix='ulsd: server/reply6.c',
             mutate="sed -i 's/t.seq + wire_tcp_seg_len(\\&t)/t.seq/' server/reply6.c")
def test_rfc9293_syn_to_closed_port_over_ipv6_gets_rst(node6, link):
    """RFC 9293 §3.10.7.1 (CLOSED STATE), for an IPv6 segment: "If the ACK bit is off,
    sequence number zero is used, <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>"; the checksum
    covers RFC 8200 §8.1's pseudo-header."""
    node = node6
    sport = fresh_port()
    link.send(Ether(src=node.my_mac, dst=node.mac) / IPv6(src=node.my_ip6, dst=node.ip6) /
              TCP(sport=sport, dport=CLOSED_PORT, flags="S", seq=123456))
    r = link.recv(lambda p: TCP in p and IPv6 in p and p[TCP].dport == sport, 3)
    assert r is not None, "no RST"
    assert r[TCP].flags == "RA"
    assert r[TCP].seq == 0 and r[TCP].ack == 123457
    assert r[IPv6].src == node.ip6 and r[IPv6].dst == node.my_ip6
    assert checksum_ok(r, TCP, "chksum"), "bad TCP checksum (IPv6 pseudo-header)"
