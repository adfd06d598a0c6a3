"""RFC 8201 (path MTU discovery for IPv6) and RFC 4443 §3 (ICMPv6 errors to the upper layer)
for TCP and UDP over IPv6, on a node of its own (the stack6 fixture; docs/ipv6.md).

We play the peer and a router (ROUTER6) in front of it: the node's packets to us are
answered with ICMPv6 errors from ROUTER6 that quote them (RFC 4443 §2.4 (c)), and we check
what the node sends next or what its application was told. The pattern source (port 19)
sends full-sized segments (MSS 1440 at MTU 1500); the dial service (TCP 11, apps/ulsnode.c)
connects to us over IPv6 or sends a datagram from a connected UDPv6 socket and reports what
the call returned.

lwIP's destination cache keeps a path MTU for the node's lifetime (no aging: docs/ipv6.md),
so each test speaks from an IPv6 address of its own (fresh_src6): what one test lowered does
not change the next one's segments.
"""

from scapy.layers.inet import TCP, UDP
from scapy.layers.inet6 import ICMPv6DestUnreach, ICMPv6PacketTooBig, IPv6, IPv6ExtHdrFragment
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from conftest import TcpPeer, fresh_port, fresh_src6, requirement, wait_counter
from pmtu import collect, next_new_segment, offset, pattern, source_first_segment
from test_rfc1122_icmp_errors import Dial
from test_rfc8200_ipv6_stack import stack6  # noqa: F401 (the fixture)

ROUTER6 = "2001:db8:0:1::fe"   # a router on the path, as far as the node knows
QUOTE6_MAX = 1280 - 40 - 8     # RFC 4443 §3: the error within the minimum IPv6 MTU
MSS6 = 1440                    # the node's MTU 1500: full segments are 1500-octet packets


def icmp6_error(link, quoted, layer, seq=None):
    """An ICMPv6 error (layer: ICMPv6PacketTooBig(...) or ICMPv6DestUnreach(...)) from
    ROUTER6 to the node quoting as much of the node's packet `quoted` as fits, the TCP
    sequence number optionally replaced (our packets carry no extension header)."""
    node = link.node
    raw = bytearray(bytes(quoted[IPv6]))[:QUOTE6_MAX]
    if seq is not None:
        raw[40 + 4:40 + 8] = (seq & 0xFFFFFFFF).to_bytes(4, "big")
    pkt = (Ether(src=node.my_mac, dst=node.mac) / IPv6(src=ROUTER6, dst=node.ip6) /
           layer / Raw(bytes(raw)))
    link.send(pkt)
    return pkt


def _from_node(link, src6):
    node = link.node
    return lambda q: IPv6 in q and q[IPv6].src == node.ip6 and q[IPv6].dst == src6


def _source_first_segment(link, src6):
    """pmtu.source_first_segment from src6 (the stream's packets are told apart by it)."""
    return source_first_segment(link, MSS6, v6=True, src6=src6)


def _collect(link, peer, first, nbytes):
    """pmtu.collect from first's sequence number on, over every packet the node sends to
    peer's address, so that a test sees fragments too (a fragment is not a segment).
    Returns (bytes, data segments, all packets)."""
    mine = _from_node(link, peer.src6)
    return collect(peer, first[TCP].seq, nbytes, nxt=lambda t: link.recv(mine, t))


def _after_lowering(pkts, mtu):
    """(before, after): the packets before the first data segment of at most mtu octets
    and those from it on. The node sends in order and, once it has read the message, every
    segment fits; before that it may still send at the old size (its first RTO is 1 s,
    and a loaded machine may take that long to get the message there): such packets must
    be whole segments, never IPv6 fragments. Exact accounting instead of a timing margin."""
    i0 = next((i for i, p in enumerate(pkts) if TCP in p and IPv6ExtHdrFragment not in p
               and len(p[TCP].payload) > 0 and len(p[IPv6]) <= mtu), None)
    assert i0 is not None, f"no data segment of at most {mtu} octets"
    for p in pkts[:i0]:
        assert IPv6ExtHdrFragment not in p and TCP in p, "an IPv6 fragment"
    return pkts[:i0], pkts[i0:]


def _sizes_fit(pkts, mtu):
    """The packets above mtu octets, and the IPv6 fragments."""
    big = [len(p[IPv6]) for p in pkts if len(p[IPv6]) > mtu]
    frags = [p for p in pkts if IPv6ExtHdrFragment in p]
    return big, frags


@requirement(fix='hook stack/icmp6err.c, patch 0106, patch 0031', level="MUST",
             mutate="sed -i 's/m.too_big = true;/m.too_big = false;/' stack/icmp6err.c")
def test_rfc8201_4_packet_too_big_lowers_mss_and_lost_segment_resent_smaller(stack6, link,
                                                                             counters):
    """RFC 8201 §4: "When a node receives a Packet Too Big message, it must reduce its
    estimate of the PMTU for the relevant path, based on the value of the MTU field in the
    message." ... "The node must reduce the size of the packets it is sending along the
    path." §5.4: a packetization layer "should not send segments that would result in
    packets larger than the PMTU". After a Packet Too Big with MTU 1280 for the first
    segment of an established TCPv6 stream, that segment's data is sent again first, and
    every packet after it is a whole segment (no IPv6 fragment) of at most 1280 octets;
    every byte arrives intact."""
    c0 = counters()
    src6 = fresh_src6(stack6)
    peer, first = _source_first_segment(link, src6)
    assert len(first[IPv6]) == 1500
    icmp6_error(link, first, ICMPv6PacketTooBig(mtu=1280))
    n = 64 * 1024
    data, segs, pkts = _collect(link, peer, first, n)
    assert data == pattern(offset(peer, first), n), f"stream wrong or short ({len(data)} of {n})"
    before, after = _after_lowering(pkts, 1280)
    if not before:   # else an RTO resent it at the old size before the message was read
        assert after[0][TCP].seq == first[TCP].seq, "the lost segment was not resent first"
    big, frags = _sizes_fit(after, 1280)
    assert not frags, f"{len(frags)} IPv6 fragments: the MSS did not follow the path MTU"
    assert not big, f"packets above the path MTU after Packet Too Big: {big}"
    assert max(len(p[IPv6]) for p in after) == 1280, "the segments do not fill the new MTU"
    c1 = counters()
    assert c1["icmp_pmtu_lowered"] == c0["icmp_pmtu_lowered"] + 1
    assert c1["icmp6_ptb_to_dest_cache"] == c0["icmp6_ptb_to_dest_cache"] + 1
    peer.abort()


@requirement(fix='hook stack/icmp6err.c, patch 0106', level="MUST",
             mutate="sed -i 's/#define PMTU6_MIN 1280/#define PMTU6_MIN 576/' stack/icmp6err.c")
def test_rfc8201_4_packet_too_big_below_1280_discarded(stack6, link, counters):
    """RFC 8201 §4: "If a node receives a Packet Too Big message reporting a next-hop MTU
    that is less than the IPv6 minimum link MTU, it must discard it. A node must not reduce
    its estimate of the Path MTU below the IPv6 minimum link MTU on receipt of a Packet Too
    Big message." A Packet Too Big with MTU 1000 quoting the stream's real segment is
    counted (icmp6_ptb_below_min) and changes nothing: the next new segment is full-sized.
    Positive control: MTU 1280 then shrinks the segments to exactly 1280 octets, not
    less."""
    c0 = counters()
    src6 = fresh_src6(stack6)
    peer, first = _source_first_segment(link, src6)
    icmp6_error(link, first, ICMPv6PacketTooBig(mtu=1000))
    assert wait_counter(counters, "icmp6_ptb_below_min", c0["icmp6_ptb_below_min"] + 1) == \
        c0["icmp6_ptb_below_min"] + 1
    assert counters()["icmp_pmtu_lowered"] == c0["icmp_pmtu_lowered"]
    # the next new segment after the first flight must still be full-sized
    nxt = next_new_segment(peer, first, 1428)
    assert nxt is not None and len(nxt[IPv6]) == 1500, \
        "a Packet Too Big below 1280 shrank the segments"
    icmp6_error(link, nxt, ICMPv6PacketTooBig(mtu=1280))
    n = 32 * 1024
    data, segs, pkts = _collect(link, peer, nxt, n)
    assert data == pattern(offset(peer, nxt), n)
    _, after = _after_lowering(pkts, 1280)
    big, frags = _sizes_fit(after, 1280)
    assert not big and not frags, f"above 1280 after the control: {big}, {len(frags)} fragments"
    assert max(len(p[IPv6]) for p in after) == 1280, "the segments went below 1280"
    assert counters()["icmp_pmtu_lowered"] == c0["icmp_pmtu_lowered"] + 1
    peer.abort()


@requirement(fix='hook stack/icmperr.c, stack/icmp6err.c, patch 0106',
             mutate="sed -i 's/if (!(TCP_SEQ_GEQ(seq, pcb->lastack)/if (0 \\&\\& !(TCP_SEQ_GEQ(seq, pcb->lastack)/' stack/icmperr.c")
def test_rfc5927_4_1_packet_too_big_quoting_sequence_outside_window_ignored(stack6, link,
                                                                           counters):
    """RFC 5927 §4.1 (Informational, no RFC 2119 level): "These implementations check that
    the TCP sequence number contained in the payload of the ICMP error message is within
    the range SND.UNA =< SEG.SEQ < SND.NXT."
    RFC 8201 §4: "Nodes should appropriately validate the payload of ICMPv6 PTB messages
    to ensure these are received in response to transmitted traffic". A Packet Too Big
    quoting a sequence number far outside the window is counted (icmp_err_out_of_window)
    and changes neither the connection nor the destination's path MTU: the next new
    segment is full-sized. The same message quoting the real segment (positive control)
    shrinks them."""
    c0 = counters()
    src6 = fresh_src6(stack6)
    peer, first = _source_first_segment(link, src6)
    icmp6_error(link, first, ICMPv6PacketTooBig(mtu=1280), seq=first[TCP].seq + 0x40000000)
    assert wait_counter(counters, "icmp_err_out_of_window",
                        c0["icmp_err_out_of_window"] + 1) == c0["icmp_err_out_of_window"] + 1
    c1 = counters()
    assert c1["icmp_pmtu_lowered"] == c0["icmp_pmtu_lowered"]
    assert c1["icmp6_ptb_to_dest_cache"] == c0["icmp6_ptb_to_dest_cache"]
    nxt = next_new_segment(peer, first, 1428)
    assert nxt is not None and len(nxt[IPv6]) == 1500, "a blind Packet Too Big shrank the segments"
    assert IPv6ExtHdrFragment not in nxt
    icmp6_error(link, nxt, ICMPv6PacketTooBig(mtu=1280))
    n = 32 * 1024
    data, segs, pkts = _collect(link, peer, nxt, n)
    assert data == pattern(offset(peer, nxt), n)
    big, frags = _sizes_fit(_after_lowering(pkts, 1280)[1], 1280)
    assert not big and not frags
    assert counters()["icmp_pmtu_lowered"] == c0["icmp_pmtu_lowered"] + 1
    peer.abort()


class Dial6(Dial):
    """The dial service, asked (over IPv4) to connect to [src6]:PORT or, with udp, to send
    a datagram there from a connected UDPv6 socket; answer() reads what the call said."""

    def __init__(self, link, src6, udp=False):
        self.link = link
        self.port = fresh_port()
        self.ctl = TcpPeer(link, 11)
        self.ctl.connect()
        self.ctl.send("PA", payload=f"{'udp ' if udp else ''}{src6} {self.port}\n".encode())


def _syn6(link, src6, port, timeout=5.0):
    node = link.node
    return link.recv(lambda q: TCP in q and IPv6 in q and q[IPv6].src == node.ip6 and
                     q[IPv6].dst == src6 and q[TCP].dport == port and q[TCP].flags.S and
                     not q[TCP].flags.A, timeout)


@requirement(fix='hook stack/icmp6err.c, stack/icmperr.c, patch 0106',
             mutate="sed -i 's/\\*hard = true;   \\/\\* RFC 4443 §3.1: the destination/*hard = false;   \\/* RFC 4443 §3.1: the destination/' stack/icmp6err.c")
def test_rfc4443_3_1_port_unreachable_fails_ipv6_connect(stack6, link, counters):
    """RFC 4443 §3.1 (Upper layer notification): "A node receiving the ICMPv6 Destination
    Unreachable message MUST notify the upper-layer process if the relevant process can be
    identified". A port unreachable (code 4) quoting the SYN of an IPv6 connect ends the
    connect at once with ECONNREFUSED (Linux: a fatal error in SYN-SENT), and the SYN is
    not sent again."""
    before = counters()["icmp_err_hard"]
    src6 = fresh_src6(stack6)
    d = Dial6(link, src6)
    syn = _syn6(link, src6, d.port)
    assert syn is not None, "the node did not send the SYN of its IPv6 connect"
    icmp6_error(link, syn, ICMPv6DestUnreach(code=4))
    answer = d.answer(timeout=5)
    assert answer == "err ECONNREFUSED", f"connect reported {answer!r} (a port unreachable)"
    assert _syn6(link, src6, d.port, timeout=1.5) is None, \
        "the SYN was retransmitted after a hard error"
    assert counters()["icmp_err_hard"] == before + 1


@requirement(fix='hook stack/icmp6err.c, stack/icmperr.c, patch 0106',
             mutate="sed -i 's/case DU6_ADMIN: case DU6_POLICY:/case DU6_POLICY:/' stack/icmp6err.c")
def test_rfc4443_3_1_administratively_prohibited_fails_ipv6_connect(stack6, link):
    """RFC 4443 §3.1: "A node receiving the ICMPv6 Destination Unreachable message MUST
    notify the upper-layer process if the relevant process can be identified"; code 1,
    "communication with destination administratively prohibited". For the SYN of an IPv6
    connect it ends the connect with EACCES (Linux's errno for codes 1, 5 and 6)."""
    src6 = fresh_src6(stack6)
    d = Dial6(link, src6)
    syn = _syn6(link, src6, d.port)
    assert syn is not None
    icmp6_error(link, syn, ICMPv6DestUnreach(code=1))
    answer = d.answer(timeout=5)
    assert answer == "err EACCES", f"connect reported {answer!r} (administratively prohibited)"


@requirement(fix='hook stack/icmp6err.c, stack/icmperr.c, patch 0106', level="MUST",
             mutate="sed -i 's/case DU6_SCOPE: case DU6_ADDRESS:/case DU6_SCOPE: case DU6_ADDRESS: *hard = true;/' stack/icmp6err.c")
def test_rfc4443_3_1_address_unreachable_is_a_soft_error_for_ipv6_connect(stack6, link,
                                                                         counters):
    """RFC 4443 §3.1: the upper layer is notified of a Destination Unreachable; which ones
    end a connection is RFC 1122 §4.2.3.9's rule for ICMPv4, "Since these Unreachable
    messages indicate soft error conditions, TCP MUST NOT abort the connection", applied as
    Linux applies it to ICMPv6 (no route, beyond scope and address unreachable are soft).
    An address unreachable (code 3) quoting the SYN of an IPv6 connect is counted as a
    soft error and the SYN is retransmitted; a port unreachable then ends the connect."""
    before = counters()["icmp_err_soft"]
    src6 = fresh_src6(stack6)
    d = Dial6(link, src6)
    syn = _syn6(link, src6, d.port)
    assert syn is not None
    icmp6_error(link, syn, ICMPv6DestUnreach(code=3))
    assert wait_counter(counters, "icmp_err_soft", before + 1) == before + 1
    assert _syn6(link, src6, d.port, timeout=5) is not None, \
        "the SYN was not retransmitted after a soft error"
    icmp6_error(link, syn, ICMPv6DestUnreach(code=4))
    assert d.answer(timeout=5) == "err ECONNREFUSED"


def _udp_probe6(link, src6, answer_with):
    """The dial service's connected UDPv6 probe to [src6]:PORT, answered with
    answer_with(probe); returns the service's answer line."""
    node = link.node
    d = Dial6(link, src6, udp=True)
    p = link.recv(lambda q: UDP in q and IPv6 in q and q[IPv6].src == node.ip6 and
                  q[IPv6].dst == src6 and q[UDP].dport == d.port, 3)
    assert p is not None, "the node sent no UDPv6 probe"
    assert bytes(p[UDP].payload) == b"probe"
    answer_with(p)
    return d.answer(timeout=5)


@requirement(fix='hook stack/icmp6err.c, stack/icmperr.c, stack/dgram.c, patch 0106',
             mutate="sed -i 's/m.dgram_err = m.hard ? m.err : 0;/m.dgram_err = 0;/' stack/icmp6err.c")
def test_rfc4443_3_1_port_unreachable_fails_connected_udp6_recv(stack6, link, counters):
    """RFC 4443 §3.1: "A node receiving the ICMPv6 Destination Unreachable message MUST
    notify the upper-layer process if the relevant process can be identified". A port
    unreachable quoting a connected UDPv6 socket's datagram makes its next recv fail with
    ECONNREFUSED (as Linux). Control: a datagram from the peer instead is received."""
    node = link.node
    src6 = fresh_src6(stack6)

    def reply(p):
        link.send(Ether(src=node.my_mac, dst=node.mac) / IPv6(src=src6, dst=node.ip6) /
                  UDP(sport=p[UDP].dport, dport=p[UDP].sport) / b"reply")
    assert _udp_probe6(link, src6, reply) == "data", "control: the reply was not received"
    before = counters()["udp_icmp_err"]
    answer = _udp_probe6(link, src6, lambda p: icmp6_error(link, p, ICMPv6DestUnreach(code=4)))
    assert answer == "err ECONNREFUSED", f"recv reported {answer!r} (a port unreachable)"
    assert counters()["udp_icmp_err"] == before + 1
