"""RFC 1122 §4.1.3.3: ICMP errors for UDP sockets.

The node's UDP probe service (port 12, apps/ulsnode.c) opens a UDP socket per request and
sends "probe" to us (Scapy) at the port we name: "C PORT" from a connected socket, then a
recv (2 s timeout); "S PORT" from a connected socket, then, 1 s later, a second send; "U
PORT" with sendto from an unconnected socket, then a recvfrom. It answers the request with
what the second call returned: "data", "timeout", "ok" or "err ERRNAME". We answer the probe
with an ICMP error quoting it, as a host or router would.
"""

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from conftest import fresh_port, requirement, wait_counter
from test_rfc1122_icmp_errors import icmp_error

PROBE = 12


def probe(link, op, answer_with):
    """Ask the probe service for op ("C", "S" or "U"), answer its probe datagram with
    answer_with(probe_ip) (an ICMP error, or a UDP reply), return the service's answer."""
    node = link.node
    me, target = fresh_port(), fresh_port()
    link.send(Ether(src=node.my_mac, dst=node.mac) / IP(src=node.my_ip, dst=node.ip) /
              UDP(sport=me, dport=PROBE) / f"{op} {target}".encode())
    p = link.recv(lambda q: IP in q and UDP in q and q[IP].src == node.ip
                  and q[UDP].dport == target, 3)
    assert p is not None, "the probe service sent no probe"
    assert bytes(p[UDP].payload) == b"probe"
    answer_with(p[IP])
    r = link.recv(lambda q: IP in q and UDP in q and q[IP].src == node.ip and q[UDP].dport == me
                  and q[UDP].sport == PROBE, 5)
    assert r is not None, "the probe service did not answer"
    return bytes(r[UDP].payload).decode()


def port_unreachable(link):
    return lambda ip: icmp_error(link, ip, 3, 3)


def udp_reply(link):
    """The peer answers the probe with a datagram from the port it was sent to."""
    node = link.node

    def send(ip):
        link.send(Ether(src=node.my_mac, dst=node.mac) / IP(src=node.my_ip, dst=node.ip) /
                  UDP(sport=ip[UDP].dport, dport=ip[UDP].sport) / b"reply")
    return send


@requirement(fix="hook stack/icmperr.c, stack/dgram.c", mutate="sed -i 's/if (m->proto == IP_PROTO_UDP)/if (0)/' stack/icmperr.c",
             level="MUST")
def test_rfc1122_4_1_3_3_port_unreachable_fails_connected_udp_recv(node, link, counters):
    """RFC 1122 §4.1.3.3: "UDP MUST pass to the application layer all ICMP error messages
    that it receives from the IP layer." A port unreachable quoting a connected socket's
    datagram makes its next recv fail with ECONNREFUSED (as Linux). Control: a datagram
    from the peer instead is received."""
    assert probe(link, "C", udp_reply(link)) == "data", "control: the reply was not received"
    before = counters()["udp_icmp_err"]
    assert probe(link, "C", port_unreachable(link)) == "err ECONNREFUSED"
    assert wait_counter(counters, "udp_icmp_err", before + 1) == before + 1


@requirement(fix="hook stack/icmperr.c, stack/dgram.c", mutate="sed -i 's/if (m->proto == IP_PROTO_UDP)/if (0)/' stack/icmperr.c",
             level="MUST")
def test_rfc1122_4_1_3_3_port_unreachable_fails_next_connected_udp_send(node, link):
    """RFC 1122 §4.1.3.3: "UDP MUST pass to the application layer all ICMP error messages
    that it receives from the IP layer." After a port unreachable for a connected socket's
    datagram, its next send fails with ECONNREFUSED (the pending error, as Linux's
    sk_err), once. Control: without the error the second send succeeds."""
    assert probe(link, "S", lambda ip: None) == "ok", "control: the second send failed"
    assert probe(link, "S", port_unreachable(link)) == "err ECONNREFUSED"


@requirement(fix="hook stack/icmperr.c", mutate="sed -i 's/if (!(pcb->flags \\& UDP_FLAGS_CONNECTED))/if (0)/' stack/icmperr.c")
def test_rfc1122_4_1_3_3_unconnected_udp_socket_not_failed_by_icmp(node, link, counters):
    """RFC 1122 §4.1.3.3: "UDP MUST pass to the application layer all ICMP error messages
    that it receives from the IP layer." Deviation (as Linux without IP_RECVERR): an
    unconnected socket, which may talk to many peers, does not fail for one of them; the
    error is counted. Its recvfrom still times out, and the same socket receives a reply
    (control: the connected case fails, test above)."""
    before = counters()["udp_icmp_err_ignored"]
    assert probe(link, "U", port_unreachable(link)) == "timeout"
    assert wait_counter(counters, "udp_icmp_err_ignored", before + 1) == before + 1
    assert probe(link, "U", udp_reply(link)) == "data"
    assert probe(link, "C", port_unreachable(link)) == "err ECONNREFUSED", \
        "control: a connected socket was not failed"


@requirement(fix="hook stack/icmperr.c", mutate="sed -i 's/case 2: case 3: case 6:/case 0: case 1: case 2: case 3: case 6:/' stack/icmperr.c")
def test_rfc1122_4_1_3_3_net_unreachable_does_not_fail_connected_udp(node, link, counters):
    """RFC 1122 §4.1.3.3: "UDP MUST pass to the application layer all ICMP error messages
    that it receives from the IP layer." As Linux without IP_RECVERR, transient errors
    (network and host unreachable, codes 0 and 1; time exceeded) do not fail a connected
    socket: its recv times out. Control: a port unreachable (hard) does."""
    for code in (0, 1):
        before = counters()["udp_icmp_err_ignored"]
        assert probe(link, "C", lambda ip: icmp_error(link, ip, 3, code)) == "timeout"
        assert wait_counter(counters, "udp_icmp_err_ignored", before + 1) == before + 1
    assert probe(link, "C", lambda ip: icmp_error(link, ip, 11, 0)) == "timeout"
    assert probe(link, "C", port_unreachable(link)) == "err ECONNREFUSED"
