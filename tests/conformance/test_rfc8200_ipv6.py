"""RFC 8200: the IPv6 header and extension headers, as ulsd reads them for the node
(netif/wire/wire.c, server/reply6.c). Each malformed packet is an echo request that would
be answered if it were read; a positive control sends it well formed. ulsd deployment only
(the node6 fixture)."""

from scapy.layers.inet6 import (HBHOptUnknown, ICMPv6EchoReply, ICMPv6EchoRequest,
                                ICMPv6ParamProblem, IPv6, IPv6ExtHdrDestOpt)
from scapy.layers.l2 import Ether

from conftest import requirement


def echo(node, ident, ext=None):
    p = Ether(src=node.my_mac, dst=node.mac) / IPv6(src=node.my_ip6, dst=node.ip6)
    if ext is not None:
        p = p / ext
    return p / ICMPv6EchoRequest(id=ident, seq=1, data=b"conformance")


def reply_to(ident):
    return lambda p: ICMPv6EchoReply in p and p[ICMPv6EchoReply].id == ident


def discarded_and_counted(node, link, raw, ident, what):
    """raw, echo request `ident` made malformed, is not answered (AssertionError `what` if
    it is) and grows ulsd's drop_ipv6_header by one; positive control: the well-formed
    request ident + 1 is answered."""
    before = node.ulsd_counters()["drop_ipv6_header"]
    link.send(bytes(raw))
    assert link.recv(reply_to(ident), 1.0) is None, what
    assert node.ulsd_counters()["drop_ipv6_header"] == before + 1
    link.send(echo(node, ident + 1))
    assert link.recv(reply_to(ident + 1), 3) is not None, "control: no echo reply"


@requirement(fix='ulsd: netif/wire/wire.c',
             mutate="sed -i 's/if (vtcfl >> 28 != WIRE_IPV6_VERSION)/if (0)/' netif/wire/wire.c")
def test_rfc8200_version_not_6_discarded(node6, link):
    """RFC 8200 §3: "Version 4-bit Internet Protocol version number = 6." A packet of the
    IPv6 ethertype whose Version is not 6 is not an IPv6 packet (RFC 2464 §3 carries only
    IPv6 under 86DD): discarded and counted. Positive control: Version 6 is answered."""
    raw = bytearray(bytes(echo(node6, 0x601)))
    raw[14] = (raw[14] & 0x0f) | 0x40
    discarded_and_counted(node6, link, raw, 0x601, "a Version 4 header was answered")


@requirement(fix='ulsd: netif/wire/wire.c',
             mutate="sed -i 's/if ((size_t)WIRE_IPV6_HLEN + o.plen > len)/if ((size_t)WIRE_IPV6_HLEN + o.plen > len \\&\\& (o.plen = (uint16_t)(len - WIRE_IPV6_HLEN), 0))/' netif/wire/wire.c")
def test_rfc8200_payload_length_beyond_frame_discarded(node6, link):
    """RFC 8200 §3: "Payload Length 16-bit unsigned integer. Length of the IPv6 payload,
    i.e., the rest of the packet following this IPv6 header, in octets." A packet whose
    Payload Length claims more than arrived is truncated: discarded, not read short.
    Positive control: the same request with the right length is answered."""
    raw = bytearray(bytes(echo(node6, 0x603)))
    plen = int.from_bytes(raw[18:20], "big")
    raw[18:20] = (plen + 8).to_bytes(2, "big")
    discarded_and_counted(node6, link, raw, 0x603, "a truncated packet was answered")


@requirement(fix='ulsd: netif/wire/wire.c',
             mutate="sed -i 's/\t\tcase WIRE_IPPROTO_DSTOPTS:/\t\tcase 255:/' netif/wire/wire.c")
def test_rfc8200_destination_options_header_skipped(node6, link):
    """RFC 8200 §4: "A full implementation of IPv6 includes implementation of the following
    extension headers: Hop-by-Hop Options, Fragment, Destination Options, Routing, ..."; a
    Destination Options header whose options are all Pad ("skip over this option", §4.2)
    leaves the packet to the upper layer: the echo request behind it is answered."""
    node = node6
    link.send(echo(node, 0x605, IPv6ExtHdrDestOpt()))
    assert link.recv(reply_to(0x605), 3) is not None, \
        "an echo request behind a Destination Options header was not answered"


@requirement(fix='ulsd: server/reply6.c',
             mutate="sed -i 's/(uint32_t)in->up.nh_off/(uint32_t)in->up.off/' server/reply6.c")
def test_rfc8200_unrecognized_next_header_gets_parameter_problem(node6, link):
    """RFC 8200 §4: "If, as a result of processing a header, the destination node is
    required to proceed to the next header but the Next Header value in the current header
    is unrecognized by the node, it should discard the packet and send an ICMP Parameter
    Problem message to the source of the packet, with an ICMP Code value of 1
    ("unrecognized Next Header type encountered") and the ICMP Pointer field containing
    the offset of the unrecognized value within the original packet." """
    node = node6
    link.send(Ether(src=node.my_mac, dst=node.mac) / IPv6(src=node.my_ip6, dst=node.ip6) /
              IPv6ExtHdrDestOpt(nh=253) / b"experimental payload")
    r = link.recv(lambda p: ICMPv6ParamProblem in p and p[IPv6].src == node.ip6, 3)
    assert r is not None, "no parameter problem"
    assert r[ICMPv6ParamProblem].code == 1
    assert r[ICMPv6ParamProblem].ptr == 40, \
        "the pointer is not the offset of the Destination Options header's Next Header"


@requirement(fix='ulsd: server/reply6.c',
             mutate="sed -i 's/if (type != 1 \\&\\& action != 0) {/if (0) {/' server/reply6.c")
def test_rfc8200_unrecognized_option_10_discards_with_parameter_problem(node6, link):
    """RFC 8200 §4.2: "The Option Type identifiers are internally encoded such that their
    highest-order 2 bits specify the action that must be taken if the processing IPv6 node
    does not recognize the Option Type: ... 10 - discard the packet and, regardless of
    whether or not the packet's Destination Address was a multicast address, send an ICMP
    Parameter Problem, Code 2, message to the packet's Source Address, pointing to the
    unrecognized Option Type." The echo request behind the option is not answered."""
    node = node6
    opt = HBHOptUnknown(otype=0xBE, optdata=b"\xab\xcd")
    link.send(echo(node, 0x606, IPv6ExtHdrDestOpt(options=[opt])))
    r = link.recv(lambda p: ICMPv6ParamProblem in p and p[IPv6].src == node.ip6, 3)
    assert r is not None, "no parameter problem for an unrecognized option of type 10xxxxxx"
    assert r[ICMPv6ParamProblem].code == 2
    assert r[ICMPv6ParamProblem].ptr == 42, "the pointer is not the option type's offset"
    assert link.recv(reply_to(0x606), 0.5) is None, "the packet was not discarded"
