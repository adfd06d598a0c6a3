"""RFC 8200 §4.5: the Fragment header and reassembly, as ulsd reassembles IPv6 datagrams
for the node's processes (server/reass.c; its answers in server/reply6.c). The fragments
carry an echo request to the node: a datagram nobody owns is answered by ulsd once whole
(its reply fragmented by server/fragment.c when longer than the link), so these tests
watch ulsd's answers and counters. ulsd deployment only (the node6 fixture); the
reassembly timeout is REASS_TIMEOUT_S."""
import os
import random
import time

from scapy.layers.inet6 import (ICMPv6EchoReply, ICMPv6EchoRequest, ICMPv6ParamProblem,
                                ICMPv6TimeExceeded, IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment)
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from conftest import REASS_TIMEOUT_S, requirement, wait_counter

ICMPV6 = 58


def frag(node, ident, offset, data, m):
    """One fragment of an ICMPv6 datagram to the node: data at offset octets (a multiple
    of 8) of its fragmentable part."""
    return (Ether(src=node.my_mac, dst=node.mac) / IPv6(src=node.my_ip6, dst=node.ip6) /
            IPv6ExtHdrFragment(nh=ICMPV6, offset=offset // 8, m=int(m), id=ident) / Raw(data))


def param_problem(ptr):
    return lambda p: (ICMPv6ParamProblem in p and p[ICMPv6ParamProblem].code == 0 and
                      p[ICMPv6ParamProblem].ptr == ptr)


def time_exceeded(ident):
    return lambda p: (ICMPv6TimeExceeded in p and p[ICMPv6TimeExceeded].code == 1 and
                      IPv6ExtHdrFragment in p[ICMPv6TimeExceeded].payload and
                      p[ICMPv6TimeExceeded].payload[IPv6ExtHdrFragment].id == ident)


def echo_head(n):
    """An echo request's first n octets (type 128, code 0, checksum left 0, then data)."""
    return bytes([128, 0, 0, 0, 0, 1, 0, 1]) + bytes(n - 8)


@requirement(fix='ulsd: server/reass.c',
             mutate="sed -i 's/if (x->mf \\&\\& (x->end - x->off) % 8) {/if (0) {/' server/reass.c")
def test_rfc8200_fragment_not_a_multiple_of_8_gets_parameter_problem(node6, link):
    """RFC 8200 §4.5: "If the length of a fragment, as derived from the fragment packet's
    Payload Length field, is not a multiple of 8 octets and the M flag of that fragment is
    1, then that fragment must be discarded and an ICMP Parameter Problem, Code 0, message
    should be sent to the source of the fragment, pointing to the Payload Length field of
    the fragment packet." Positive control: the same fragment with 1000 octets is taken
    (no answer, one datagram more in progress)."""
    node = node6
    link.send(frag(node, 0x8001, 0, echo_head(1001), True))
    assert link.recv(param_problem(4), 3) is not None, "no Parameter Problem pointing at Payload Length"
    assert wait_counter(node.ulsd_counters, "drop_reass_bad", 1) >= 1
    before = node.ulsd_counters()["reass_fragments"]
    link.send(frag(node, 0x8002, 0, echo_head(1000), True))
    assert link.recv(param_problem(4), 1.0) is None, "control: a fragment of 1000 octets was refused"
    assert node.ulsd_counters()["reass_in_progress"] >= 1
    assert node.ulsd_counters()["reass_fragments"] == before


@requirement(fix='ulsd: server/reass.c',
             mutate="sed -i 's/if (unfrag + x->end > SRV_REASS6_MAX_PAYLOAD) {/if (unfrag \\&\\& 0) {/' server/reass.c")
def test_rfc8200_fragment_past_65535_octets_gets_parameter_problem(node6, link):
    """RFC 8200 §4.5: "If the length and offset of a fragment are such that the Payload
    Length of the packet reassembled from that fragment would exceed 65,535 octets, then
    that fragment must be discarded and an ICMP Parameter Problem, Code 0, message should
    be sent to the source of the fragment, pointing to the Fragment Offset field of the
    fragment packet." The Fragment header follows the IPv6 header, so the field is at
    octet 42. Positive control: a fragment ending at 65,535 octets of payload is taken."""
    node = node6
    link.send(frag(node, 0x8003, 65528, bytes(16), True))  # 8 + 65528 + 16 > 65535
    assert link.recv(param_problem(42), 3) is not None, "no Parameter Problem pointing at Fragment Offset"
    link.send(frag(node, 0x8004, 65504, bytes(16), True))  # 8 + 65504 + 16 <= 65535
    assert link.recv(param_problem(42), 1.0) is None, "control: a fragment within 65,535 was refused"


@requirement(fix='ulsd: server/reass.c',
             mutate="sed -i 's/srv__reply6_reass_time_exceeded(s, d->frags->frame, d->frags->len);/(void)0;/' server/reass.c")
def test_rfc8200_incomplete_reassembly_abandoned_with_time_exceeded(node6, link):
    """RFC 8200 §4.5: "If insufficient fragments are received to complete reassembly of a
    packet within 60 seconds of the reception of the first-arriving fragment of that
    packet, reassembly of that packet must be abandoned and all the fragments that have
    been received for that packet must be discarded. If the first fragment (i.e., the one
    with a Fragment Offset of zero) has been received, an ICMP Time Exceeded -- Fragment
    Reassembly Time Exceeded message should be sent to the source of that fragment."
    (The timeout is REASS_TIMEOUT_S here, not 60 s.) Negative control: a datagram whose
    first fragment never came expires without an answer."""
    node = node6
    before = node.ulsd_counters()["drop_reass_timeout"]
    link.send(frag(node, 0x8005, 0, echo_head(1232), True))
    link.send(frag(node, 0x8006, 1232, bytes(64), True))
    got = link.recv(time_exceeded(0x8005), REASS_TIMEOUT_S + 3)
    assert got is not None, "no Time Exceeded (code 1) quoting the first fragment"
    assert link.recv(time_exceeded(0x8006), 1.5) is None, \
        "Time Exceeded for a datagram whose first fragment never came"
    assert wait_counter(node.ulsd_counters, "drop_reass_timeout", before + 2) >= before + 2
    time.sleep(0.1)


def echo_request(node, ident, payload):
    """A whole echo request's ICMPv6 message (its checksum over the node's addresses)."""
    whole = IPv6(src=node.my_ip6, dst=node.ip6) / ICMPv6EchoRequest(id=ident, seq=1, data=payload)
    return bytes(whole)[40:]


def recv_reply(link, node, ident, timeout=3.0, sizes=None):
    """The node's echo reply with identifier ident, reassembled from its fragments when it
    comes in them: its data (bytes) or None. sizes gets every frame's Payload Length."""
    held, deadline = {}, time.monotonic() + timeout
    while True:
        p = link.recv(lambda q: IPv6 in q and q[IPv6].src == node.ip6 and
                      q[IPv6].dst == node.my_ip6 and
                      (ICMPv6EchoReply in q or IPv6ExtHdrFragment in q),
                      max(0.0, deadline - time.monotonic()))
        if p is None:
            return None
        if sizes is not None:
            sizes.append(p[IPv6].plen)
        if IPv6ExtHdrFragment not in p:
            if p[ICMPv6EchoReply].id == ident:
                return bytes(p[ICMPv6EchoReply].data)
            continue
        fh = p[IPv6ExtHdrFragment]
        frags = held.setdefault(fh.id, {})
        frags[fh.offset * 8] = (bytes(fh.payload), not fh.m)
        data, off = b"", 0
        while off in frags:
            chunk, last = frags[off]
            data, off = data + chunk, off + len(chunk)
            if last:
                del held[fh.id]
                r = ICMPv6EchoReply(data)
                if r.type == 129 and r.id == ident:
                    return bytes(r.data)
                break


@requirement(fix='ulsd: server/reass.c (for_node), server/fragment.c',
             mutate="sed -i 's/release(s, d, !for_node(/release(s, d, 1 || !for_node(/' "
                    "server/reass.c")
def test_rfc4443_4_2_fragmented_echo_request_answered_with_all_its_data(node6, link):
    """RFC 4443 §4.2: "The data received in the ICMPv6 Echo Request message MUST be
    returned entirely and unmodified in the ICMPv6 Echo Reply message." An echo request of
    3000 octets of data in three fragments: ulsd reassembles it (no process owns it) and
    answers with the same 3000 octets, in fragments that fit the link (1500 octets)."""
    node = node6
    ident, payload = random.randrange(1, 1 << 16), os.urandom(3000)
    msg, ipid, sizes = echo_request(node, ident, payload), random.randrange(1, 1 << 32), []
    for off in range(0, len(msg), 1232):
        link.send(frag(node, ipid, off, msg[off:off + 1232], off + 1232 < len(msg)))
    got = recv_reply(link, node, ident, 3, sizes)
    assert got is not None, "no echo reply to the fragmented echo request"
    assert got == payload, f"the reply's data differs ({len(got)} octets)"
    assert max(sizes) <= 1500 - 40, f"a frame of the reply is longer than the link: {sizes}"
    assert wait_counter(node.ulsd_counters, "reass_for_node", 1) >= 1


@requirement(fix='ulsd: server/reass.c (atomic6)',
             mutate="sed -i 's/if (x.k.v6 \\&\\& off == 0 \\&\\& !x.mf \\&\\&$/if (0 \\&\\&/' "
                    "server/reass.c")
def test_rfc6946_4_atomic_fragment_to_the_node_processed_in_isolation(node6, link):
    """RFC 6946 §4: "A host that receives an IPv6 packet that includes a Fragment Header
    with the "Fragment Offset" equal to 0 and the "M" flag equal to 0 MUST process that
    packet in isolation from any other packets/fragments, even if such packets/fragments
    contain the same set {IPv6 Source Address, IPv6 Destination Address, Fragment
    Identification}." The first fragment of an echo request is held by ulsd; an atomic
    fragment with the same Identification, carrying another echo request, is answered at
    once; then the held datagram's last fragment comes and it is answered too, whole:
    neither spoiled the other."""
    node = node6
    ipid = random.randrange(1, 1 << 32)
    a, b = random.randrange(1, 1 << 15), random.randrange(1 << 15, 1 << 16)
    pa, pb = os.urandom(2000), os.urandom(100)
    ma = echo_request(node, a, pa)
    link.send(frag(node, ipid, 0, ma[:1232], True))
    link.send(frag(node, ipid, 0, echo_request(node, b, pb), False))
    assert recv_reply(link, node, b) == pb, "the atomic fragment's echo request was not answered"
    link.send(frag(node, ipid, 1232, ma[1232:], False))
    assert recv_reply(link, node, a) == pa, \
        "the datagram in progress did not survive the atomic fragment of its Identification"
    assert wait_counter(node.ulsd_counters, "reass_atomic", 1) >= 1


@requirement(fix='ulsd: server/reass.c (atomic6, rebuild, for_node)',
             mutate="sed -i 's/if (rc == 0 \\&\\& q.ip6.fragment \\&\\& q.ip6.frag_off == 0 \\&\\& !q.ip6.mf) {/if (0) {/' "
                    "server/reass.c")
def test_rfc6946_4_atomic_fragment_in_an_atomic_fragment_to_the_node_processed_in_isolation(node6, link):
    """RFC 6946 §4: "A host that receives an IPv6 packet that includes a Fragment Header
    with the "Fragment Offset" equal to 0 and the "M" flag equal to 0 MUST process that
    packet in isolation from any other packets/fragments, even if such packets/fragments
    contain the same set {IPv6 Source Address, IPv6 Destination Address, Fragment
    Identification}." Echo requests to the node carrying such a Fragment header twice, and
    twice with a Destination Options header between the two and the first one's Reserved
    octet not zero (RFC 8200 §4.5: "8-bit reserved field. Initialized to zero for
    transmission; ignored on reception."), are each answered at once, as the processes' lwIP
    answers them (rfc6946_4_atomic_fragment_inside_a_chain_processed_in_isolation); so is a
    fragmented echo request whose first fragment came behind such a header. Positive
    control: the same request behind one such header."""
    node = node6
    ipid = random.randrange(1, 1 << 32)
    one = IPv6ExtHdrFragment(offset=0, m=0, id=ipid)
    cases = ((0x7E01, one),
             (0x7E02, IPv6ExtHdrFragment(offset=0, m=0, id=ipid) /
              IPv6ExtHdrFragment(offset=0, m=0, id=ipid)),
             (0x7E03, IPv6ExtHdrFragment(offset=0, m=0, id=ipid, res1=0xff) / IPv6ExtHdrDestOpt() /
              IPv6ExtHdrFragment(offset=0, m=0, id=ipid)))
    for ident, ext in cases:
        link.send(Ether(src=node.my_mac, dst=node.mac) / IPv6(src=node.my_ip6, dst=node.ip6) /
                  ext / ICMPv6EchoRequest(id=ident, seq=1, data=b"nested atomic"))
        assert link.recv(lambda p: ICMPv6EchoReply in p and p[ICMPv6EchoReply].id == ident,
                         3) is not None, f"the echo request {ident:#x} was not answered"
    # What such a header carries may be the first fragment of a datagram: once whole, it is
    # answered with all of its data.
    ident, payload = 0x7E04, os.urandom(2000)
    msg, ipid2 = echo_request(node, ident, payload), random.randrange(1, 1 << 32)
    link.send(Ether(src=node.my_mac, dst=node.mac) / IPv6(src=node.my_ip6, dst=node.ip6) /
              IPv6ExtHdrFragment(offset=0, m=0, id=ipid) /
              IPv6ExtHdrFragment(nh=ICMPV6, offset=0, m=1, id=ipid2) / Raw(msg[:1224]))
    link.send(frag(node, ipid2, 1224, msg[1224:], False))
    assert recv_reply(link, node, ident) == payload, \
        "the fragmented echo request whose first fragment was wrapped was not answered whole"


@requirement(fix='ulsd: server/reass.c (outer_first_fragment6)', level='MUST',
             mutate="sed -i 's/if (nh != WIRE_IPPROTO_FRAGMENT || at + WIRE_IPV6_FRAG_HLEN >= "
                    "p->ip6.frag_data_off)/if (1)/' server/reass.c")
def test_rfc8200_4_first_fragment_wrapping_an_atomic_fragment_reassembled_by_its_outer_header(node6, link):
    """RFC 8200 §4: "Therefore, extension headers must be processed strictly in the order
    they appear in the packet; a receiver must not, for example, scan through a packet
    looking for a particular kind of extension header and process that header prior to
    processing all preceding ones." The first fragment of an echo request (outer Fragment
    header: offset 0, M 1) whose Fragmentable Part begins with an atomic Fragment header of
    another Identification: the outer header keys the datagram, and once its last fragment
    came the node answers it whole (the inner header is then processed in isolation, RFC
    6946 §4). Before, ulsd took the packet for the inner atomic fragment, rebuilt it as a
    fragment nobody owns and dropped it; the datagram never completed. Positive control:
    the same datagram with the outer header alone."""
    node = node6
    ident, payload = random.randrange(1, 1 << 15), os.urandom(2000)
    msg, outer, inner = (echo_request(node, ident, payload), random.randrange(1, 1 << 32),
                         random.randrange(1, 1 << 32))
    link.send(Ether(src=node.my_mac, dst=node.mac) / IPv6(src=node.my_ip6, dst=node.ip6) /
              IPv6ExtHdrFragment(offset=0, m=1, id=outer) /
              IPv6ExtHdrFragment(nh=ICMPV6, offset=0, m=0, id=inner) / Raw(msg[:1224]))
    link.send(frag(node, outer, 8 + 1224, msg[1224:], False))
    assert recv_reply(link, node, ident) == payload, \
        "the echo request whose first fragment wrapped an atomic fragment was not answered whole"
    ident2, ipid = ident + (1 << 15), random.randrange(1, 1 << 32)
    msg2 = echo_request(node, ident2, payload)
    link.send(frag(node, ipid, 0, msg2[:1232], True))
    link.send(frag(node, ipid, 1232, msg2[1232:], False))
    assert recv_reply(link, node, ident2) == payload, "control: the plain datagram was not answered"


@requirement(fix='ulsd: server/reass.c (srv__reass_input)', level='SHOULD',
             mutate="sed -i 's/(dlen || frame\\[p->l3_off/(dlen \\&\\& frame[p->l3_off/' server/reass.c")
def test_rfc8200_4_7_atomic_fragment_with_no_next_header_processed_as_a_whole_packet(node6, link):
    """RFC 8200 §4.5: "If the fragment is a whole datagram (that is, both the Fragment
    Offset field and the M flag are zero), then it does not need any further reassembly and
    should be processed as a fully reassembled packet". §4.7: "The value 59 in the Next
    Header field of an IPv6 header or any extension header indicates that there is nothing
    following that header." An atomic fragment to the node whose Next Header is 59 and that
    carries nothing is such a packet: processed in isolation (reass_atomic), ignored as any
    No Next Header packet is (drop_no_owner), no ICMPv6 error, not counted a bad fragment
    (drop_reass_bad). Before, it was dropped as drop_reass_bad. Control: the same with 16
    octets after the header ("those octets must be ignored")."""
    node = node6
    c0 = node.ulsd_counters()
    for n, ipid in ((0, random.randrange(1, 1 << 32)), (16, random.randrange(1, 1 << 32))):
        link.send(Ether(src=node.my_mac, dst=node.mac) / IPv6(src=node.my_ip6, dst=node.ip6) /
                  IPv6ExtHdrFragment(nh=59, offset=0, m=0, id=ipid) / Raw(bytes(n)))
    assert wait_counter(node.ulsd_counters, "reass_atomic", c0["reass_atomic"] + 2) == \
        c0["reass_atomic"] + 2, "the atomic fragments were not both processed as whole packets"
    assert wait_counter(node.ulsd_counters, "drop_no_owner", c0["drop_no_owner"] + 2) >= \
        c0["drop_no_owner"] + 2
    assert node.ulsd_counters()["drop_reass_bad"] == c0["drop_reass_bad"], \
        "a well-formed atomic fragment counted a bad fragment"
    assert link.recv(lambda p: ICMPv6ParamProblem in p, 1.0) is None, "an ICMPv6 error was sent"
