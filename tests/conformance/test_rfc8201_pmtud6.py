"""RFC 8201: path MTU discovery for IPv6, what a Packet Too Big message may not do to a
process's stack (on a node of its own: the stack6 fixture of test_rfc8200_ipv6_stack.py).

We play the peer and a router in front of it: the echo service (port 7) sends back what we
send it, in full-sized segments (our MSS 1440: 1500-octet IPv6 packets); we answer one with
a Packet Too Big and check the next one.
"""

from scapy.layers.inet import TCP
from scapy.layers.inet6 import ICMPv6PacketTooBig, IPv6, IPv6ExtHdrFragment
from scapy.layers.l2 import Ether

from conftest import TcpPeer, requirement
from test_rfc8200_ipv6_stack import stack6  # noqa: F401 (a fixture)

MSS6 = 1440   # 1500 - 40 - 20


def _full_segment(peer, payload):
    """Send payload to the echo; the node's first data segment of the echo, or None."""
    peer.send("PA", payload)
    p = peer.recv(3, lambda q: len(q[TCP].payload) > 0)
    if p is not None:
        peer.absorb(p)
        peer.ack()
    return p


@requirement(fix="patch 0123", level="MUST",
             mutate="tests/conformance/lwip-mutate core/ipv6/nd6.c "
                    "'s/if (pmtu < IP6_MIN_MTU_LENGTH ||/if (0 \\&\\& pmtu < IP6_MIN_MTU_LENGTH ||/'")
def test_rfc8201_4_packet_too_big_below_the_minimum_mtu_not_taken(stack6, link):  # noqa: F811
    """RFC 8201 §4: "If a node receives a Packet Too Big message reporting a next-hop MTU
    that is less than the IPv6 minimum link MTU, it must discard it. A node MUST NOT reduce
    its estimate of the Path MTU below the IPv6 minimum link MTU on receipt of a Packet Too
    Big message." A Packet Too Big naming a next-hop MTU of 1000 (below 1280), quoting
    the node's full-sized segment, changes nothing: the next full-sized segment goes whole,
    a 1500-octet packet without a Fragment header. (A next-hop MTU below 56 made lwIP cut
    fragments of no data and loop for ever: tests/fuzz/fuzz_stack6, lwIP patch 0123.)"""
    peer = TcpPeer(link, 7, mss=MSS6, ts=False, v6=True)  # no options: 1500-octet packets
    peer.connect()
    first = _full_segment(peer, bytes(range(256)) * 5 + bytes(160))
    assert first is not None, "the echo sent nothing"
    assert len(first[TCP].payload) == MSS6 and IPv6ExtHdrFragment not in first
    quote = bytes(first[IPv6])[:1280 - 48]
    link.send(Ether(src=link.node.my_mac, dst=link.node.mac) /
              IPv6(src=link.node.my_ip6, dst=link.node.ip6) /
              ICMPv6PacketTooBig(mtu=1000) / quote)
    nxt = _full_segment(peer, bytes(reversed(range(256))) * 5 + bytes(160))
    assert nxt is not None, "the echo sent nothing after the Packet Too Big"
    assert IPv6ExtHdrFragment not in nxt, "the node fragmented for a next-hop MTU of 1000"
    assert len(nxt[TCP].payload) == MSS6
    assert len(bytes(nxt[IPv6])) == 40 + 20 + MSS6 + len(bytes(nxt[TCP])) - 20 - MSS6 > 1280
    peer.abort()
