"""RFC 4861 §8 (Redirect) on a node of its own with IPv6 in its stack (the stack6 fixture of
test_rfc8200_ipv6_stack.py: lwIP's nd6.c answers there; ulsd's node carries no process IPv6).

A destination enters the node's destination cache when the node sends to it: Scapy pings
the node from an on-link address of its own (fresh_src6, which the responder thread
resolves to Scapy's MAC), and the echo reply leaves towards that MAC. A Redirect for that
destination then names another first hop, with a Target Link-Layer Address option of a MAC
no one else uses; the next echo reply shows which first hop the node took: the Ethernet
destination of the reply.
"""

import pytest

from scapy.layers.inet6 import (IPv6, ICMPv6EchoReply, ICMPv6EchoRequest, ICMPv6ND_Redirect,
                                ICMPv6NDOptDstLLAddr)
from scapy.layers.l2 import Ether

from conftest import fresh_src6, requirement

NEW_HOP_MAC = "02:00:00:00:01:26"   # the Redirect's target's link-layer address
# On the node's prefix, not the destination, and not answered by the responder thread.
OTHER_GLOBAL = "2001:db8:0:1::126"


@pytest.fixture
def stack6(node):
    """A node of its own with IPv6 in its stack (as in test_rfc8200_ipv6_stack.py)."""
    if node.deployment != "own" or node.ip6 is None:
        pytest.skip("the process's IPv6 runs on a node of its own only (docs/ipv6.md)")
    return node


def _first_hop_of_reply(node, link, src, ident):
    """Ping the node from src; the Ethernet destination of its echo reply (None: no reply)."""
    link.send(Ether(src=node.my_mac, dst=node.mac) / IPv6(src=src, dst=node.ip6) /
              ICMPv6EchoRequest(id=ident, seq=1, data=b"redirect"))
    r = link.recv(lambda p: (ICMPv6EchoReply in p and p[IPv6].dst == src and
                             p[ICMPv6EchoReply].id == ident), 3)
    return None if r is None else r[Ether].dst.lower()


def _redirect(node, target, dest, lladdr=NEW_HOP_MAC):
    """RFC 4861 §4.5 from Scapy's link-local address with Hop Limit 255 (§8.1's checks that
    lwIP makes), for destination dest, to target, with a Target Link-Layer Address option."""
    return (Ether(src=node.my_mac, dst=node.mac) /
            IPv6(src=node.my_ll6, dst=node.ip6, hlim=255) /
            ICMPv6ND_Redirect(tgt=target, dst=dest) /
            ICMPv6NDOptDstLLAddr(lladdr=lladdr))


@requirement(fix='patch 0126', level="MUST",
             mutate="tests/conformance/lwip-mutate core/ipv6/nd6.c "
                    "'s/    if (!ip6_addr_islinklocal(\\&target_address) \\&\\&/"
                    "    if (0 \\&\\& !ip6_addr_islinklocal(\\&target_address) \\&\\&/'")
def test_rfc4861_8_1_redirect_to_global_target_other_than_destination_discarded(stack6, link):
    """RFC 4861 §8.1: "A host MUST silently discard any received Redirect message that does
    not satisfy all of the following validity checks: ... - The ICMP Target Address is
    either a link-local address (when redirected to a router) or the same as the ICMP
    Destination Address (when redirected to the on-link destination)." A Redirect whose
    target is a global address other than its destination, and one whose target is the
    unspecified address (which lwIP matched with a free neighbour entry, lwIP patch 0126),
    change nothing: the node's next packet to the destination still goes to the
    destination's own MAC. Control: a valid Redirect (a link-local target) for the same
    destination is honoured, the next packet goes to the target's MAC (§8.3: "A host
    receiving a valid redirect SHOULD update its Destination Cache accordingly so that
    subsequent traffic goes to the specified target." and "If the redirect contains a Target
    Link-Layer Address option, the host either creates or updates the Neighbor Cache entry
    for the target.")."""
    dest = fresh_src6(stack6)
    assert _first_hop_of_reply(stack6, link, dest, 0x1261) == stack6.my_mac.lower(), \
        "the node's reply to an on-link address did not go to its resolved MAC"

    for target in (OTHER_GLOBAL, "::"):
        link.send(_redirect(stack6, target, dest))
        hop = _first_hop_of_reply(stack6, link, dest, 0x1262)
        assert hop == stack6.my_mac.lower(), \
            f"after a Redirect with target {target} (neither link-local nor the destination) " \
            f"the reply went to {hop}, not the destination's MAC {stack6.my_mac}"

    link.send(_redirect(stack6, "fe80::126", dest))
    hop = _first_hop_of_reply(stack6, link, dest, 0x1263)
    assert hop == NEW_HOP_MAC, \
        f"control: after a valid Redirect to fe80::126 the reply went to {hop}, not {NEW_HOP_MAC}"
