"""RFC 4861: Neighbor Discovery for IPv6, as ulsd answers it for the node (server/reply6.c).

The node's processes carry no IPv6 yet (docs/ipv6.md): these run in the ulsd deployment
only (the node6 fixture)."""

import ipaddress

from scapy.layers.inet6 import (ICMPv6ND_NA, ICMPv6ND_NS, ICMPv6NDOptDstLLAddr,
                                ICMPv6NDOptSrcLLAddr, IPv6, in6_getnsma, in6_getnsmac)
from scapy.layers.l2 import Ether
from scapy.utils6 import inet_pton, inet_ntop
import socket

from conftest import curated_pcap, requirement, wait_counter


def link_local(mac):
    """RFC 4291 §2.5.6 / Appendix A: fe80::/64 and the modified EUI-64 of mac."""
    b = bytes.fromhex(mac.replace(":", ""))
    iid = bytes([b[0] ^ 0x02]) + b[1:3] + b"\xff\xfe" + b[3:]
    return str(ipaddress.IPv6Address(b"\xfe\x80" + bytes(6) + iid))


def solicited(addr):
    """RFC 4291 §2.7.1: the solicited-node group of addr, and its Ethernet address."""
    g = inet_ntop(socket.AF_INET6, in6_getnsma(inet_pton(socket.AF_INET6, addr)))
    return g, in6_getnsmac(inet_pton(socket.AF_INET6, g))


def ns(node, target, src=None, dst=None, dmac=None, hlim=255, sll=True):
    g, gmac = solicited(target)
    p = (Ether(src=node.my_mac, dst=dmac or gmac) /
         IPv6(src=src or node.my_ip6, dst=dst or g, hlim=hlim) / ICMPv6ND_NS(tgt=target))
    if sll:
        p = p / ICMPv6NDOptSrcLLAddr(lladdr=node.my_mac)
    return p


def is_na(target):
    return lambda p: ICMPv6ND_NA in p and p[ICMPv6ND_NA].tgt == target


def check_na(node, r, target, dst, dmac, solicited_flag):
    assert r[Ether].src == node.mac and r[Ether].dst == dmac
    assert r[IPv6].hlim == 255, "RFC 4861 §7.1.2: an NA's hop limit is 255"
    assert r[IPv6].src == target and r[IPv6].dst == dst
    na = r[ICMPv6ND_NA]
    assert na.code == 0
    assert na.R == 0, "the node is not a router"
    assert na.S == solicited_flag
    assert na.O == 1
    assert ICMPv6NDOptDstLLAddr in r, "no target link-layer address option"
    assert r[ICMPv6NDOptDstLLAddr].lladdr == node.mac
    c = na.copy()
    c.cksum = None
    raw = bytes(IPv6(src=r[IPv6].src, dst=r[IPv6].dst, hlim=255) / c)
    assert IPv6(raw)[ICMPv6ND_NA].cksum == na.cksum, "bad ICMPv6 checksum"


@requirement(fix='ulsd: server/reply6.c',
             mutate="sed -i 's/flags |= WIRE_ND_NA_SOLICITED;/;/' server/reply6.c")
def test_rfc4861_ns_to_solicited_node_group_gets_solicited_na(node6, link):
    """RFC 4861 §7.2.4: "If the source of the solicitation is the unspecified address, the
    node MUST set the Solicited flag to zero and multicast the advertisement to the
    all-nodes address. Otherwise, the node MUST set the Solicited flag to one and unicast
    the advertisement to the Source Address of the solicitation." On the Override flag: "If the Target Address is either an
    anycast address or a unicast address for which the node is providing proxy service, or
    the Target Link-Layer Address option is not included, the Override flag SHOULD be set
    to zero. Otherwise, the Override flag SHOULD be set to one." §4.4, Target link-layer
    address: "MUST be included for multicast solicitations"."""
    node = node6
    link.send(ns(node, node.ip6))
    r = link.recv(is_na(node.ip6), 3)
    assert r is not None, "no neighbor advertisement"
    check_na(node, r, node.ip6, node.my_ip6, node.my_mac, 1)
    curated_pcap(link, "test_rfc4861_ns_to_solicited_node_group_gets_solicited_na.pcap")


@requirement(fix='ulsd: server/reply6.c',
             mutate="sed -i 's/if (!srv__is_node_ip6(s, ns->target)) {/if (!srv__is_node_ip6(s, ns->target) || !wire_ipv6_is_multicast(in->ip.dst)) {/' server/reply6.c")
def test_rfc4861_unicast_ns_gets_na(node6, link):
    """RFC 4861 §7.2.3: "A valid Neighbor Solicitation that does not meet any of the
    following requirements MUST be silently discarded: - The Target Address is a "valid"
    unicast or anycast address assigned to the receiving interface [ADDRCONF], ..."; §7.2.4:
    "A node sends a Neighbor Advertisement in response to a valid Neighbor Solicitation
    targeting one of the node's assigned addresses." It is answered whether it came to the solicited-node group or, as in neighbor
    unreachability detection (§7.3.1), to the address itself."""
    node = node6
    link.send(ns(node, node.ip6, dst=node.ip6, dmac=node.mac, sll=False))
    r = link.recv(is_na(node.ip6), 3)
    assert r is not None, "no neighbor advertisement for a unicast solicitation"
    check_na(node, r, node.ip6, node.my_ip6, node.my_mac, 1)


@requirement(fix='ulsd: server/reply6.c',
             mutate="sed -i 's/memcmp(a, s->ip6_ll, WIRE_IPV6_ALEN) == 0/0/' server/reply6.c")
def test_rfc4861_ns_for_link_local_address_gets_na(node6, link):
    """RFC 4291 §2.1: "All interfaces are required to have at least one Link-Local unicast
    address"; §2.5.6 builds it from the interface identifier (modified EUI-64 of the MAC,
    Appendix A). RFC 4861 §7.2.3 answers solicitations for every address assigned to the
    interface, the link-local one included."""
    node = node6
    ll, my_ll = link_local(node.mac), link_local(node.my_mac)
    link.send(ns(node, ll, src=my_ll))
    r = link.recv(is_na(ll), 3)
    assert r is not None, f"no neighbor advertisement for the link-local address {ll}"
    check_na(node, r, ll, my_ll, node.my_mac, 1)


@requirement(fix='ulsd: server/reply6.c',
             mutate="sed -i 's/if (in->ip.hlim != WIRE_ND_HOP_LIMIT || nd->code != 0 ||/if (nd->code != 0 ||/' server/reply6.c")
def test_rfc4861_ns_with_hop_limit_not_255_discarded(node6, link):
    """RFC 4861 §7.1.1: "A node MUST silently discard any received Neighbor Solicitation
    messages that do not satisfy all of the following validity checks: - The IP Hop Limit
    field has a value of 255, i.e., the packet could not possibly have been forwarded by a
    router." Positive control: the same solicitation with hop limit 255 is answered."""
    node = node6
    before = node.ulsd_counters()["drop_nd_invalid"]
    link.send(ns(node, node.ip6, hlim=254))
    r = link.recv(is_na(node.ip6), 1.0)
    assert r is None, "a solicitation with hop limit 254 was answered"
    assert node.ulsd_counters()["drop_nd_invalid"] == before + 1
    link.send(ns(node, node.ip6))
    assert link.recv(is_na(node.ip6), 3) is not None, "control: hop limit 255 not answered"


@requirement(fix='ulsd: server/reply6.c',
             mutate="sed -i 's/if (!srv__is_node_ip6(s, ns->target)) {/if (0) {/' server/reply6.c")
def test_rfc4861_ns_for_other_target_not_answered(node6, link):
    """RFC 4861 §7.2.3: "A valid Neighbor Solicitation that does not meet any of the
    following requirements MUST be silently discarded: - The Target Address is a "valid"
    unicast or anycast address assigned to the receiving interface [ADDRCONF], ..." (the
    node offers no proxy service). Positive
    control: the node's own address is answered."""
    node = node6
    other = str(ipaddress.IPv6Address(node.ip6) + 0x76)
    # Sent to the node itself, so that only the target tells it is not the node's.
    link.send(ns(node, other, dst=node.ip6, dmac=node.mac))
    assert link.recv(is_na(other), 1.0) is None, "the node answered for another address"
    assert node.ulsd_counters()["drop_nd_not_for_node"] >= 1
    link.send(ns(node, node.ip6))
    assert link.recv(is_na(node.ip6), 3) is not None, "control: own address not answered"


@requirement(fix='ulsd: server/reply6.c',
             mutate="sed -i 's/dst = all_nodes;/dst = in->ip.src; flags |= WIRE_ND_NA_SOLICITED;/' server/reply6.c")
def test_rfc4861_dad_solicitation_answered_to_all_nodes(node6, link):
    """RFC 4861 §7.2.4: "If the source of the solicitation is the unspecified address, the
    node MUST set the Solicited flag to zero and multicast the advertisement to the
    all-nodes address." (Another node's duplicate address detection, RFC 4862 §5.4.3.)"""
    node = node6
    link.send(ns(node, node.ip6, src="::", sll=False))
    r = link.recv(is_na(node.ip6), 3)
    assert r is not None, "no advertisement for a duplicate address detection probe"
    check_na(node, r, node.ip6, "ff02::1", "33:33:00:00:00:01", 0)


@requirement(fix='ulsd: server/reply6.c',
             mutate="sed -i 's/if (in->ip.hlim != WIRE_ND_HOP_LIMIT || nd->code != 0 ||/if (nd->code != 0 ||/' server/reply6.c")
def test_rfc4861_na_with_hop_limit_not_255_discarded(node6, link):
    """RFC 4861 §7.1.2: "A node MUST silently discard any received Neighbor Advertisement
    messages that do not satisfy all of the following validity checks: - The IP Hop Limit
    field has a value of 255, i.e., the packet could not possibly have been forwarded by a
    router." An unsolicited advertisement with hop limit 254 from an address ulsd's
    neighbour cache does not hold is counted invalid (drop_nd_invalid, exactly one); the
    same with hop limit 255, sent after it, passes the checks and meets §7.2.5's "If no
    entry exists, the advertisement SHOULD be silently discarded" (nd_adverts_ignored),
    which also tells that the first one was seen (one path, in order)."""
    node = node6
    other = str(ipaddress.IPv6Address(node.my_ip6) + 0x99)
    before = node.ulsd_counters()

    def na(hlim):
        return (Ether(src=node.my_mac, dst=node.mac) /
                IPv6(src=other, dst=node.ip6, hlim=hlim) /
                ICMPv6ND_NA(tgt=other, R=0, S=0, O=1) /
                ICMPv6NDOptDstLLAddr(lladdr=node.my_mac))
    link.send(na(254))
    link.send(na(255))
    ignored = wait_counter(node.ulsd_counters, "nd_adverts_ignored",
                           before["nd_adverts_ignored"] + 1)
    assert ignored >= before["nd_adverts_ignored"] + 1, "the valid advertisement was not seen"
    assert node.ulsd_counters()["drop_nd_invalid"] == before["drop_nd_invalid"] + 1
