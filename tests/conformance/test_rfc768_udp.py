"""RFC 768: User Datagram Protocol."""

import os

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from conftest import fresh_port, requirement


@requirement(fix='lwIP 2.1.3, stack/dgram.c',
             mutate="sed -i 's/uls_sendto(sd, buf, (size_t)n, 0, &from);/{ from.sin_port ^= htons(1); uls_sendto(sd, buf, (size_t)n, 0, \\&from); }/' apps/ulsnode.c")
def test_rfc768_echo_datagram_returned_to_source_port(node, link):
    """RFC 768: "Source Port is an optional field, when meaningful, it indicates the port
    of the sending process, and may be assumed to be the port to which a reply should be
    addressed in the absence of any other information." The UDP echo service (port 7)
    returns the datagram's data to the source address and port, with a valid checksum
    ("Checksum is the 16-bit one's complement of the one's complement sum of a pseudo
    header ...")."""
    sport, payload = fresh_port(), os.urandom(512)
    link.send(Ether(src=node.my_mac, dst=node.mac) / IP(src=node.my_ip, dst=node.ip) /
              UDP(sport=sport, dport=7) / payload)
    r = link.recv(lambda p: UDP in p and p[UDP].dport == sport, 3)
    assert r is not None, "no UDP echo"
    assert r[IP].src == node.ip and r[UDP].sport == 7
    assert bytes(r[UDP].payload) == payload
    assert r[UDP].len == 8 + len(payload)
    c = r[IP].copy()
    c[UDP].chksum = None
    assert r[UDP].chksum in (0, IP(bytes(c))[UDP].chksum), "bad UDP checksum"
