"""RFC 1122 §3.2.1 / RFC 894: IP layer input checks of the node."""

import struct

from scapy.layers.inet import ICMP, IP
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Raw
from scapy.utils import checksum

from conftest import TcpPeer, requirement, wait_counter


def _echo(node, ident, **ipfields):
    return (Ether(src=node.my_mac, dst=node.mac) /
            IP(src=node.my_ip, dst=node.ip, **ipfields) / ICMP(type=8, id=ident, seq=1) /
            b"ping")


def _answers_ping(node, link, ident):
    link.send(_echo(node, ident))
    return link.recv(lambda p: ICMP in p and p[ICMP].type == 0 and p[ICMP].id == ident, 3)


@requirement(fix='ulsd: filter/parse.c; own: lwIP 2.1.3 (CHECKSUM_CHECK_IP)',
             mutate="sed -i 's/if (!wire_ipv4_checksum_ok(/if (0 \\&\\& !wire_ipv4_checksum_ok(/' filter/parse.c"
                    " && sed -i 's/CHECKSUM_CHECK_IP  *1/CHECKSUM_CHECK_IP 0/' stack/lwipopts.h")
def test_rfc1122_3_2_1_2_bad_ip_checksum_dropped_and_counted(node, link, counters):
    """RFC 1122 §3.2.1.2: "A host MUST verify the IP header checksum on every received
    datagram and silently discard every datagram that has a bad checksum." The drop is
    counted (ip_chkerr). Positive control: the same echo request with its checksum right
    is answered."""
    before = counters()["ip_chkerr"]
    good = _echo(node, 0x0C01)
    good_sum = IP(bytes(good[IP])).chksum
    link.send(_echo(node, 0x0C01, chksum=good_sum ^ 0x0101))
    r = link.recv(lambda p: ICMP in p and p[ICMP].id == 0x0C01, 1.0)
    assert r is None, "node answered a datagram with a bad header checksum"
    assert counters()["ip_chkerr"] == before + 1, "ip_chkerr did not grow by 1"
    assert _answers_ping(node, link, 0x0C01) is not None, \
        "control: the same request with a good checksum was not answered"


@requirement(fix='ulsd: filter/parse.c; own: netif/frame.c',
             mutate="sed -i 's/ret = -FLT_DROP_ETHERTYPE;/ret = -FLT_DROP_RUNT;/' filter/parse.c && sed -i 's/return NIF_DROP_ETHERTYPE;/return NIF_DROP_RUNT;/' netif/frame.c")
def test_rfc894_unknown_ethertype_dropped_and_counted(node, link, counters):
    """RFC 894: "The type field of the Ethernet frame must contain the value hexadecimal
    0800." for IP (RFC 826 uses 0806 for ARP); a frame of any other type is not for the
    IP layer. The node drops it, counts it (frame_ethertype) and keeps answering."""
    before = counters()["frame_ethertype"]
    link.send(Ether(src=node.my_mac, dst=node.mac, type=0x88B5) / (b"\x00" * 46))
    assert wait_counter(counters, "frame_ethertype", before + 1) == before + 1
    assert _answers_ping(node, link, 0x0E01) is not None, "no echo reply afterwards"


@requirement(fix='ulsd: filter/parse.c; own: netif/frame.c',
             mutate="sed -i '0,/return -FLT_DROP_IPV4_HEADER;/s//return -FLT_DROP_RUNT;/' filter/parse.c && sed -i '0,/return NIF_DROP_IPV4_HEADER;/s//return NIF_DROP_RUNT;/' netif/frame.c")
def test_rfc1122_3_2_1_1_truncated_ipv4_header_dropped_and_counted(node, link, counters):
    """RFC 1122 §3.2.1.1: "A datagram whose version number is not 4 MUST be silently
    discarded." and RFC 791: the IHL is "the length of the internet header in 32 bit
    words ... the minimum value for a correct header is 5". A type-0800 frame holding
    only 10 bytes of IPv4 header is dropped and counted (frame_ipv4_header); the node keeps
    answering ping (positive control)."""
    before = counters()["frame_ipv4_header"]
    hdr = bytes(IP(src=node.my_ip, dst=node.ip) / ICMP())[:10]
    link.send(Ether(src=node.my_mac, dst=node.mac, type=0x0800) / hdr)
    assert wait_counter(counters, "frame_ipv4_header", before + 1) == before + 1
    assert _answers_ping(node, link, 0x0E02) is not None, "no echo reply afterwards"


@requirement(fix='ulsd: filter/parse.c; own: netif/frame.c',
             mutate="sed -i 's/return -FLT_DROP_ARP;/return -FLT_DROP_RUNT;/' filter/parse.c && sed -i 's/return NIF_DROP_ARP_HEADER;/return NIF_DROP_RUNT;/' netif/frame.c")
def test_rfc826_truncated_arp_dropped_and_counted(node, link, counters):
    """RFC 826 packet format: an Ethernet/IPv4 ARP packet carries 28 bytes (hardware and
    protocol types, lengths 6 and 4, opcode, two address pairs). A type-0806 frame cut
    after 12 bytes of it is dropped and counted (frame_arp_header), and not answered.
    Positive control: the whole request is answered."""
    before = counters()["frame_arp_header"]
    arp = bytes(ARP(op=1, hwsrc=node.my_mac, psrc=node.my_ip, pdst=node.ip))[:12]
    link.send(Ether(src=node.my_mac, dst=node.mac, type=0x0806) / arp)
    assert wait_counter(counters, "frame_arp_header", before + 1) == before + 1
    assert link.recv(lambda p: ARP in p and p[ARP].op == 2, 0.5) is None, \
        "node answered a truncated ARP request"
    link.send(Ether(src=node.my_mac, dst=node.mac, type=0x0806) /
              ARP(op=1, hwsrc=node.my_mac, psrc=node.my_ip, pdst=node.ip))
    assert link.recv(lambda p: ARP in p and p[ARP].op == 2, 3) is not None, \
        "control: the whole ARP request was not answered"


@requirement(fix='ulsd: server/demux.c, server/reply.c; own: lwIP 2.1.3',
             mutate="sed -i 's/if (p.ip.dst != s->ip \\&\\& p.ip.dst != bcast/if (0 \\&\\& p.ip.dst != s->ip \\&\\& p.ip.dst != bcast/' server/demux.c && sed -i 's/p->icmp.type != WIRE_ICMP_ECHO || p->ip.dst != s->ip ||/p->icmp.type != WIRE_ICMP_ECHO ||/' server/reply.c && tests/conformance/lwip-mutate core/ipv4/ip4.c 's/if (ip4_addr_cmp(ip4_current_dest_addr(), netif_ip4_addr(netif)) ||/if (1 ||/'")
def test_rfc1122_3_2_1_3_datagram_for_other_address_not_answered(node, link, counters):
    """RFC 1122 §3.2.1.3: "A host MUST silently discard an incoming datagram that is not
    destined for the host. An incoming datagram is destined for the host if the datagram's
    destination address field is: (1) (one of) the host's IP address(es); or (2) an IP
    broadcast address valid for the connected network; or (3) the address for a multicast
    group of which the host is a member on the incoming physical interface." A unicast echo request to another address, delivered to the node's
    MAC, is not answered. Positive control: the same request to the node's address is
    answered."""
    link.send(Ether(src=node.my_mac, dst=node.mac) / IP(src=node.my_ip, dst="198.18.0.77") /
              ICMP(type=8, id=0x0E03, seq=1))
    r = link.recv(lambda p: ICMP in p and p[ICMP].id == 0x0E03, 1.0)
    assert r is None, "node answered a datagram addressed to another host"
    assert _answers_ping(node, link, 0x0E03) is not None, \
        "control: the same request to the node's address was not answered"


# IPv4 option areas (RFC 791 §3.1) that no correct header carries: what each gets wrong.
BAD_IPV4_OPTIONS = [
    ("length 0", b"\x07\x00\x00\x00"),               # Record Route, length octet 0
    ("length 1", b"\x07\x01\x00\x00"),               # shorter than type + length
    ("past the IHL", b"\x94\x08\x00\x00"),           # Router Alert claiming 8 of 4
    ("no length octet", b"\x01\x01\x01\x83"),        # LSRR in the area's last octet
    ("second option past", b"\x01\x94\x04\x00\x00\x07\x0b\x04"),  # RR of 11 in 3
]
# Well-formed ones, accepted: padding, End of Option List then anything (RFC 791: "the end
# of the option list ... might not coincide with the end of the internet header"), a
# Router Alert (RFC 2113), and an option nobody knows (RFC 1122 §3.2.1.8: ignored).
GOOD_IPV4_OPTIONS = [
    ("NOPs", b"\x01\x01\x01\x00"),
    ("EOL then garbage", b"\x00\x07\x00\xff"),
    ("Router Alert", b"\x94\x04\x00\x00"),
    ("unknown option", b"\x9e\x06\x00\x00\x00\x00\x01\x00"),
]


def _with_ipv4_options(pkt, opts):
    """pkt (Ether/IP/...) with opts (a multiple of 4 octets) in its IPv4 header: IHL,
    Total Length and the header checksum follow; the transport checksum does not change
    (its pseudo-header has no options)."""
    ip = bytes(pkt[IP])
    hdr = bytearray(ip[:20] + opts)
    hdr[0] = 0x40 | len(hdr) // 4
    struct.pack_into("!H", hdr, 2, len(ip) + len(opts))
    struct.pack_into("!H", hdr, 10, 0)
    struct.pack_into("!H", hdr, 10, checksum(bytes(hdr)))
    return Ether(src=pkt[Ether].src, dst=pkt[Ether].dst, type=0x0800) / Raw(bytes(hdr) + ip[20:])


@requirement(fix='ulsd: filter/parse.c; own and processes: netif/frame.c (netif/wire/wire.c)',
             mutate="sed -i 's/return -WIRE_BAD_OPTION;/return 0;/' netif/wire/wire.c")
def test_rfc791_3_1_malformed_ipv4_options_on_a_connection_dropped_and_counted(node, link,
                                                                               counters):
    """RFC 791 §3.1: an option is "Case 1: A single octet of option-type" or "Case 2: An
    option-type octet, an option-length octet, and the actual option-data octets. The
    option-length octet counts the option-type octet and the option-length octet as well
    as the option-data octets." RFC 792 (Parameter Problem): "If the gateway or host
    processing a datagram finds a problem with the header parameters such that it cannot
    complete processing the datagram it must discard the datagram. One potential source of
    such a problem is with incorrect arguments in an option." A data segment of a live echo
    connection whose IPv4 options have length 0 or 1, run past the header, or lack their
    length octet is discarded (not acknowledged, not echoed) and counted
    (frame_ipv4_options). Positive control: the same data with well-formed options (NOPs,
    EOL then anything, Router Alert, an unknown option, RFC 1122 §3.2.1.8: "silently
    ignore the others") is echoed, and the connection goes on."""
    peer = TcpPeer(link, 7)
    peer.connect()
    try:
        for what, opts in BAD_IPV4_OPTIONS:
            before = counters().get("frame_ipv4_options", 0)
            link.send(_with_ipv4_options(peer.segment("PA", b"bad options\n"), opts))
            r = peer.recv(0.7)
            assert r is None, f"options with {what}: the node answered {r!r}"
            assert wait_counter(counters, "frame_ipv4_options", before + 1) == before + 1, \
                f"options with {what}: frame_ipv4_options did not grow by 1"
        for what, opts in GOOD_IPV4_OPTIONS:
            data = f"good options: {what}\n".encode()
            link.send(_with_ipv4_options(peer.segment("PA", data), opts))
            peer.snd_nxt = (peer.snd_nxt + len(data)) & 0xFFFFFFFF
            assert peer.recv_data(len(data)) == data, \
                f"control: the data with options ({what}) was not echoed"
    finally:
        peer.abort()


@requirement(fix='ulsd: filter/parse.c; own and processes: netif/frame.c (netif/wire/wire.c)',
             mutate="sed -i 's/return -WIRE_BAD_OPTION;/return 0;/' netif/wire/wire.c")
def test_rfc791_3_1_malformed_ipv4_options_on_echo_request_dropped_and_counted(node, link,
                                                                              counters):
    """RFC 791 §3.1 and RFC 792 as above, for what no process owns (ulsd answers echo
    requests on a ulsd node; lwIP on a node of its own): an echo request whose options have
    length 0 or 1, run past the header or lack their length octet is discarded, not
    answered, and counted (frame_ipv4_options). Positive control: with well-formed options
    it is answered."""
    for i, (what, opts) in enumerate(BAD_IPV4_OPTIONS):
        before = counters().get("frame_ipv4_options", 0)
        link.send(_with_ipv4_options(_echo(node, 0x0E10 + i), opts))
        r = link.recv(lambda p: ICMP in p and p[ICMP].id == 0x0E10 + i, 0.7)
        assert r is None, f"options with {what}: echo request answered"
        assert wait_counter(counters, "frame_ipv4_options", before + 1) == before + 1, \
            f"options with {what}: frame_ipv4_options did not grow by 1"
    for i, (what, opts) in enumerate(GOOD_IPV4_OPTIONS):
        link.send(_with_ipv4_options(_echo(node, 0x0E20 + i), opts))
        r = link.recv(lambda p: ICMP in p and p[ICMP].type == 0 and p[ICMP].id == 0x0E20 + i, 3)
        assert r is not None, f"control: the echo request with options ({what}) not answered"
