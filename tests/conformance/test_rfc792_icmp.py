"""RFC 792 / RFC 1122 §3.2.2.6: ICMP echo."""

import os

from scapy.layers.inet import ICMP, IP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from conftest import requirement


@requirement(fix='ulsd: server/reply.c; own: lwIP 2.1.3',
             mutate="sed -i 's|icmp\\[WIRE_ICMP_OFF_TYPE\\] = WIRE_ICMP_ECHO_REPLY;|icmp[WIRE_ICMP_OFF_TYPE] = WIRE_ICMP_ECHO_REPLY; icmp[icmp_len - 1] ^= 1;|' server/reply.c")
def test_rfc1122_3_2_2_6_echo_reply_returns_identical_data(node, link):
    """RFC 1122 §3.2.2.6: "Every host MUST implement an ICMP Echo server function that
    receives Echo Requests and sends corresponding Echo Replies." ... "Data received in
    an ICMP Echo Request MUST be entirely included in the resulting Echo Reply."
    RFC 792: "The data received in the echo message must be returned in the echo reply
    message." and "The identifier and sequence number ... may be used by the echo sender
    to aid in matching the replies with the echo requests." """
    payload = os.urandom(1000)
    ident, seq = 0x5A17, 7
    link.send(Ether(src=node.my_mac, dst=node.mac) /
              IP(src=node.my_ip, dst=node.ip) /
              ICMP(type=8, id=ident, seq=seq) / Raw(payload))
    r = link.recv(lambda p: ICMP in p and p[IP].src == node.ip and p[ICMP].type == 0, 3)
    assert r is not None, "no echo reply"
    assert r[IP].dst == node.my_ip
    assert r[ICMP].code == 0
    assert (r[ICMP].id, r[ICMP].seq) == (ident, seq)
    assert bytes(r[ICMP].payload) == payload, "echo reply data differs from the request's"
    # the reply's checksum is right (Scapy recomputes it on a copy with chksum unset)
    c = r[ICMP].copy()
    c.chksum = None
    assert ICMP(bytes(c)).chksum == r[ICMP].chksum, "bad ICMP checksum in the reply"
