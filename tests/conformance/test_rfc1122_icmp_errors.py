"""RFC 1122 §4.2.3.9 and RFC 5927: ICMP errors for TCP connections.

The node opens connections through its dial service (TCP port 11: we send "IP PORT", it
connects there and answers "ok" or "err ERRNAME"). Its SYN comes to us (Scapy); we answer
with an ICMP error from a router address quoting that SYN, and read what connect()
reported. For synchronized states we quote a data segment of the echo service.
"""

import struct
import time

from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import checksum

from conftest import TcpPeer, curated_pcap, fresh_port, requirement, wait_counter

ROUTER_IP = "198.18.0.254"   # a router on the path, as far as the node knows
SYN_TIMEOUT = 240            # seconds a connect may take to time out (SYN retransmissions)


def icmp_error(link, quoted_ip, icmp_type, code, mtu=0, seq=None):
    """An ICMP error from ROUTER_IP to the node quoting quoted_ip's IP header and first 8
    octets of its payload (RFC 792), the TCP sequence number optionally replaced."""
    node = link.node
    raw = bytearray(bytes(quoted_ip))
    ihl = (raw[0] & 0x0F) * 4
    quote = raw[:ihl + 8]
    if seq is not None:
        quote[ihl + 4:ihl + 8] = struct.pack("!I", seq & 0xFFFFFFFF)
    body = struct.pack("!BBHHH", icmp_type, code, 0, 0, mtu) + bytes(quote)
    body = body[:2] + struct.pack("!H", checksum(body)) + body[4:]
    pkt = (Ether(src=node.my_mac, dst=node.mac) /
           IP(src=ROUTER_IP, dst=node.ip, proto=1) / Raw(body))
    link.send(pkt)
    return pkt


class Dial:
    """One use of the node's dial service: the control connection and the node's SYN."""

    def __init__(self, link, port=None):
        self.link = link
        self.port = port or fresh_port()
        self.ctl = TcpPeer(link, 11)
        self.ctl.connect()
        self.ctl.send("PA", payload=f"{link.node.my_ip} {self.port}\n".encode())

    def is_syn(self, q):
        return (IP in q and TCP in q and q[IP].src == self.link.node.ip
                and q[TCP].dport == self.port
                and q[TCP].flags.S and not q[TCP].flags.A)

    def syn(self, timeout=5.0):
        return self.link.recv(self.is_syn, timeout)

    def answer(self, timeout):
        """The service's answer line, as soon as it is complete."""
        data = b""
        deadline = time.monotonic() + timeout
        while b"\n" not in data and time.monotonic() < deadline:
            p = self.ctl.recv(max(0.0, deadline - time.monotonic()),
                              lambda q: len(q[TCP].payload) > 0 or q[TCP].flags.F)
            if p is None:
                break
            if p[TCP].seq == self.ctl.rcv_nxt:
                data += bytes(p[TCP].payload)
                self.ctl.absorb(p)
            self.ctl.ack()
        return data.decode(errors="replace").strip()


@requirement(fix='hook stack/icmperr.c, patch 0030',
             mutate="sed -i 's/if (hard \\&\\& pcb->state == SYN_SENT) {/if (0 \\&\\& hard) {/' stack/icmperr.c")
def test_rfc1122_4_2_3_9_port_unreachable_fails_connect(link, counters):
    """RFC 1122 §4.2.3.9: "Destination Unreachable -- codes 2-4: These are hard error
    conditions, so TCP SHOULD abort the connection." A port unreachable for our SYN ends the
    connect at once with ECONNREFUSED (as on Linux), long before the SYN would time out, and
    the SYN is not sent again."""
    before = counters()["icmp_err_hard"]
    d = Dial(link)
    syn = d.syn()
    assert syn is not None, "the node did not send the SYN of its connect"
    t0 = time.monotonic()
    icmp_error(link, syn[IP], 3, 3)
    answer = d.answer(timeout=5)
    assert answer == "err ECONNREFUSED", f"connect reported {answer!r} (a port unreachable)"
    assert time.monotonic() - t0 < 2.0
    assert d.syn(timeout=1.5) is None, "the SYN was retransmitted after a hard error"
    assert counters()["icmp_err_hard"] == before + 1
    curated_pcap(link, "rfc1122_4_2_3_9_port_unreachable_fails_connect.pcap")


@requirement(fix='hook stack/icmperr.c, patch 0030',
             mutate="sed -i 's/if (hard \\&\\& pcb->state == SYN_SENT) {/if (0 \\&\\& hard) {/' stack/icmperr.c")
def test_rfc1122_4_2_3_9_protocol_unreachable_fails_connect(link):
    """RFC 1122 §4.2.3.9: "Destination Unreachable -- codes 2-4: These are hard error
    conditions, so TCP SHOULD abort the connection." Code 2 (protocol unreachable) ends
    the connect with ENOPROTOOPT, Linux's error for it."""
    d = Dial(link)
    syn = d.syn()
    assert syn is not None
    icmp_error(link, syn[IP], 3, 2)
    answer = d.answer(timeout=5)
    assert answer == "err ENOPROTOOPT", f"connect reported {answer!r} (protocol unreachable)"


@requirement(fix='hook stack/icmperr.c, patch 0030',
             mutate="sed -i 's/\\*hard = false;/*hard = true;/' stack/icmperr.c")
def test_rfc1122_4_2_3_9_soft_error_does_not_abort_connect(link, counters):
    """RFC 1122 §4.2.3.9: "Destination Unreachable -- codes 0, 1, 5: Since these Unreachable
    messages indicate soft error conditions, TCP MUST NOT abort the connection". After a
    host unreachable the SYN is still retransmitted, and (positive control) once we answer
    it the connect succeeds."""
    before = counters()["icmp_err_soft"]
    d = Dial(link)
    syn = d.syn()
    assert syn is not None
    icmp_error(link, syn[IP], 3, 1)
    assert wait_counter(counters, "icmp_err_soft", before + 1) == before + 1, \
        "the host unreachable was not taken as a soft error"
    again = d.syn(timeout=5)
    assert again is not None, "the SYN was not retransmitted after a soft error"
    synack = (Ether(src=link.node.my_mac, dst=link.node.mac) /
              IP(src=link.node.my_ip, dst=link.node.ip) /
              TCP(sport=d.port, dport=again[TCP].sport, flags="SA", seq=1000,
                  ack=again[TCP].seq + 1, window=65535, options=[("MSS", 1460)]))
    link.send(synack)
    answer = d.answer(timeout=5)
    assert answer == "ok", f"connect reported {answer!r} after a soft error"
    # the node closes the dialed connection at once: reset it so nothing lingers
    rst = (Ether(src=link.node.my_mac, dst=link.node.mac) /
           IP(src=link.node.my_ip, dst=link.node.ip) /
           TCP(sport=d.port, dport=again[TCP].sport, flags="R", seq=1001))
    link.send(rst)


@requirement(fix='hook stack/icmperr.c, patch 0030, stack/stream.c',
             mutate="sed -i '/STK_CNT_ICMP_ERR_SOFT/,+1 s/stk__stream_icmp_error(pcb, err);/(void)err;/' stack/icmperr.c")
def test_rfc1122_4_2_3_9_soft_error_reported_on_timeout(link):
    """RFC 1122 §4.2.3.9: for soft errors TCP "SHOULD make the information available to
    the application. DISCUSSION: TCP could report the soft error condition directly to the
    application layer ... or it could merely note the message and report it to the
    application only when and if the TCP connection times out." A connect whose SYN got a
    host unreachable and no answer fails with EHOSTUNREACH, not ETIMEDOUT (as on Linux)."""
    d = Dial(link)
    syn = d.syn()
    assert syn is not None
    icmp_error(link, syn[IP], 3, 1)
    answer = d.answer(timeout=SYN_TIMEOUT)
    assert answer == "err EHOSTUNREACH", f"connect reported {answer!r}"


@requirement(fix='hook stack/icmperr.c, patch 0030',
             mutate="sed -i 's/if (!(TCP_SEQ_GEQ(seq, pcb->lastack)/if (0 \\&\\& !(TCP_SEQ_GEQ(seq, pcb->lastack)/' stack/icmperr.c")
def test_rfc5927_4_1_icmp_quoting_sequence_outside_window_ignored(link, counters):
    """RFC 5927 §4.1 (Informational, no RFC 2119 level): "These implementations check that
    the TCP sequence number contained in the payload of the ICMP error message is within
    the range SND.UNA =< SEG.SEQ < SND.NXT.
    ... If an ICMP error message does not pass this check, it is discarded." A port
    unreachable quoting ISS + 1000 is dropped and counted, the connect goes on; the same
    message with the SYN's own sequence number (positive control) then fails it."""
    c0 = counters()
    d = Dial(link)
    syn = d.syn()
    assert syn is not None
    icmp_error(link, syn[IP], 3, 3, seq=syn[TCP].seq + 1000)
    assert wait_counter(counters, "icmp_err_out_of_window",
                        c0["icmp_err_out_of_window"] + 1) == c0["icmp_err_out_of_window"] + 1
    assert d.syn(timeout=5) is not None, "the connect was abandoned for a blind ICMP error"
    assert counters()["icmp_err_hard"] == c0["icmp_err_hard"]
    icmp_error(link, syn[IP], 3, 3)
    answer = d.answer(timeout=5)
    assert answer == "err ECONNREFUSED", f"connect reported {answer!r} (positive control)"


@requirement(fix='hook stack/icmperr.c, patch 0030',
             mutate="sed -i 's/if (hard \\&\\& pcb->state == SYN_SENT) {/if (hard) {/' stack/icmperr.c")
def test_rfc5927_5_2_hard_error_does_not_reset_established_connection(link, counters):
    """RFC 5927 §5.2: "Based on this
    analysis, most popular TCP implementations treat all ICMP "hard errors" received for
    connections in any of the synchronized states (ESTABLISHED, FIN-WAIT-1, FIN-WAIT-2,
    CLOSE-WAIT, CLOSING, LAST-ACK, or TIME-WAIT) as "soft errors"." (the counter-measure
    against the blind connection-reset attack; Linux does it). A port unreachable quoting an
    unacknowledged echo segment of an established connection is taken (counted as a soft
    error: the sequence check passed) and the connection goes on: the echo still answers."""
    before = counters()["icmp_err_soft"]
    peer = TcpPeer(link, 7)
    peer.connect()
    peer.send("PA", payload=b"first")
    seg = peer.recv(3, lambda q: len(q[TCP].payload) > 0)
    assert seg is not None and bytes(seg[TCP].payload) == b"first"
    icmp_error(link, seg[IP], 3, 3)          # quotes SND.UNA: passes RFC 5927 §4.1
    assert wait_counter(counters, "icmp_err_soft", before + 1) == before + 1
    peer.absorb(seg)
    peer.send("PA", payload=b"second")
    got = peer.recv_data(6, timeout=5)
    assert got == b"second", "the connection did not survive a port unreachable"
    peer.abort()
