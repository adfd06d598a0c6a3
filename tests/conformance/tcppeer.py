"""A synchronous TCP peer for the conformance suite: Scapy's end of one connection to the
node, driven step by step so that each test reads as the exchange it checks (conftest.py
holds the node, the link and the fixtures)."""
import itertools
import random
import time

from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

_ports = itertools.count(20000 + random.randrange(0, 20000))


def fresh_port():
    """A source port no earlier test of this session used."""
    return next(_ports)


def tcp_opts(p):
    """TCP options of a segment as a dict name -> value."""
    return {name: val for name, val in p[TCP].options}


class TcpPeer:
    """Scapy's end of one TCP connection to the node. Sequence numbers are absolute;
    snd_nxt/rcv_nxt track the connection as the tests drive it."""

    def __init__(self, link, dport, sport=None, mss=1460, wscale=7, ts=True, sack=True,
                 window=65535, v6=False, src6=None):
        self.v6 = v6      # over IPv6 (node.ip6), not IPv4
        self.src6 = src6 or link.node.my_ip6   # Scapy's IPv6 address (fresh_src6)
        self.link = link
        self.node = link.node
        self.dport = dport
        self.sport = sport or fresh_port()
        self.mss, self.wscale, self.use_ts, self.sack = mss, wscale, ts, sack
        self.window = window
        self.iss = random.randrange(1 << 32)
        self.snd_nxt = self.iss
        self.rcv_nxt = None
        self.irs = None
        self.ts_ok = False        # both SYNs carried TSopt
        self.ts_recent = 0        # last TSval seen from the node
        self.peer_wscale = None
        self.synack = None
        self.closed = False
        link.peers.append(self)

    # -- building and sending -------------------------------------------------
    def tsval(self):
        return int(time.monotonic() * 1000) & 0xFFFFFFFF

    def syn_options(self):
        opts = []
        if self.mss is not None:
            opts.append(("MSS", self.mss))
        if self.sack:
            opts.append(("SAckOK", b""))
        if self.use_ts:
            opts.append(("Timestamp", (self.tsval(), 0)))
        if self.wscale is not None:
            opts += [("NOP", None), ("WScale", self.wscale)]
        return opts

    def options(self):
        if self.ts_ok:
            return [("NOP", None), ("NOP", None), ("Timestamp", (self.tsval(), self.ts_recent))]
        return []

    def segment(self, flags="A", payload=b"", seq=None, ack=None, window=None,
                options=None, chksum=None):
        """An Ether/IP/TCP frame of this connection; only the differing fields spelled out."""
        tcp = TCP(sport=self.sport, dport=self.dport, flags=flags,
                  seq=self.snd_nxt if seq is None else seq,
                  ack=(self.rcv_nxt or 0) if ack is None else ack,
                  window=self.window if window is None else window,
                  options=self.options() if options is None else options)
        if chksum is not None:
            tcp.chksum = chksum
        if self.v6:
            ip = IPv6(src=self.src6, dst=self.node.ip6)
        else:
            ip = IP(src=self.node.my_ip, dst=self.node.ip)
        pkt = Ether(src=self.node.my_mac, dst=self.node.mac) / ip / tcp
        if payload:
            pkt = pkt / Raw(payload)
        return pkt

    def send(self, flags="A", payload=b"", seq=None, **kw):
        """Send a segment; when seq is not given it is SND.NXT and SND.NXT advances."""
        pkt = self.segment(flags, payload, seq=seq, **kw)
        if seq is None:
            self.snd_nxt = (self.snd_nxt + len(payload) + ("S" in flags) + ("F" in flags)) \
                & 0xFFFFFFFF
        pkt.time = self.link.send(pkt)
        return pkt

    def ack(self, **kw):
        return self.send("A", **kw)

    # -- receiving ------------------------------------------------------------
    def mine(self, p):
        if self.v6:
            return (TCP in p and IPv6 in p and p[IPv6].src == self.node.ip6
                    and p[IPv6].dst == self.src6
                    and p[TCP].sport == self.dport and p[TCP].dport == self.sport)
        return (TCP in p and IP in p and p[IP].src == self.node.ip and p[IP].dst == self.node.my_ip
                and p[TCP].sport == self.dport and p[TCP].dport == self.sport)

    def recv(self, timeout=3.0, pred=None):
        """Next segment of this connection from the node (optionally satisfying pred)."""
        p = self.link.recv(lambda q: self.mine(q) and (pred is None or pred(q)), timeout)
        if p is not None:
            opts = tcp_opts(p)
            if "Timestamp" in opts:
                self.ts_recent = opts["Timestamp"][0]
        return p

    def recv_all(self, duration, pred=None):
        out = []
        deadline = time.monotonic() + duration
        while True:
            p = self.recv(max(0.0, deadline - time.monotonic()), pred)
            if p is None:
                return out
            out.append(p)

    def absorb(self, p):
        """Advance RCV.NXT over p if it is the next in-order segment; True if it was."""
        if p[TCP].seq != self.rcv_nxt:
            return False
        n = len(p[TCP].payload) + (1 if p[TCP].flags.F else 0)
        self.rcv_nxt = (self.rcv_nxt + n) & 0xFFFFFFFF
        return True

    # -- conversations --------------------------------------------------------
    def connect(self, timeout=5.0):
        """Three-way handshake with the options chosen at construction; returns SYN-ACK."""
        self.send("S", options=self.syn_options(), ack=0)
        sa = self.recv(timeout, lambda q: q[TCP].flags.S and q[TCP].flags.A)
        assert sa is not None, f"no SYN-ACK from {self.node.ip}:{self.dport}"
        assert sa[TCP].ack == self.snd_nxt, "SYN-ACK does not acknowledge our SYN"
        self.synack = sa
        self.irs = sa[TCP].seq
        self.rcv_nxt = (sa[TCP].seq + 1) & 0xFFFFFFFF
        opts = tcp_opts(sa)
        self.ts_ok = self.use_ts and "Timestamp" in opts
        self.peer_wscale = opts.get("WScale")
        self.ack()
        return sa

    def recv_data(self, nbytes, timeout=5.0, ack=True):
        """Collect nbytes of in-order payload from the node, ACKing as it arrives."""
        data = b""
        deadline = time.monotonic() + timeout
        while len(data) < nbytes:
            p = self.recv(max(0.0, deadline - time.monotonic()),
                          lambda q: len(q[TCP].payload) > 0 or q[TCP].flags.F)
            if p is None:
                break
            if p[TCP].seq == self.rcv_nxt:
                data += bytes(p[TCP].payload)
                self.absorb(p)
            if ack:
                self.ack()
        return data

    def exact_rst_resets(self):
        """Positive control of the RST tests: a RST at exactly RCV.NXT (RFC 5961 §3.2 rule 2)
        resets the connection, so that later data is refused with a RST. Waits for the RST
        itself: a delayed ACK of an earlier echo's request (sent before the echo when the
        echo thread is slow) may still be pending and says nothing about the reset."""
        self.send("R", seq=self.snd_nxt, ack=0, options=[])
        self.closed = True
        self.send("PA", b"gone?\n")
        r = self.recv(3, lambda q: q[TCP].flags.R or len(q[TCP].payload) > 0)
        return r is not None and bool(r[TCP].flags.R)

    def abort(self):
        """RST at SND.NXT (exactly what the node expects), so nothing outlives the test."""
        if not self.closed and self.rcv_nxt is not None:
            self.send("R", seq=self.snd_nxt, ack=0, options=[])
        self.closed = True
