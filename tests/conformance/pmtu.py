"""Path MTU discovery over either family: the steps test_rfc1191_pmtud.py (IPv4, RFC 1191)
and test_rfc8201_pmtu6.py (IPv6, RFC 8201) share.

The pattern source (port 19, apps/ulsnode.c) sends full-sized segments; a test takes its
first flight off the link, answers a segment with an ICMP message about the path, and reads
what follows in order, comparing every byte with pattern() (apps/pattern.c's stream).
"""

import struct
import time

from scapy.layers.inet import TCP
from scapy.layers.inet6 import IPv6ExtHdrFragment

from conftest import TcpPeer

SOURCE_SEED = 19   # apps/ulsnode.c: port 19 sends the pattern of apps/pattern.c, seed 19
_MASK = (1 << 64) - 1


def _splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


_TABLE = [_splitmix64(i ^ 0x756C737461636B) for i in range(8192)]


def pattern(off, n, seed=SOURCE_SEED):
    """Bytes [off, off + n) of the stream apps/pattern.c generates (its Python twin)."""
    out = bytearray()
    w = off // 8
    while len(out) < n + (off % 8):
        key = _splitmix64((_splitmix64(seed) + w // 8192) & _MASK)
        out += struct.pack("<Q", _TABLE[w % 8192] ^ key)
        w += 1
    return bytes(out[off % 8: off % 8 + n])


def has_data(p):
    return len(p[TCP].payload) > 0


def drain(peer):
    """Take the rest of the flight the node is sending off the link (nothing acknowledged),
    so that every segment read later was sent later."""
    while peer.recv(0.3, has_data) is not None:
        pass


def source_first_segment(link, mss, **peer_args):
    """A connection to the pattern source (our MSS mss: full segments fill the node's MTU of
    1500) and the first segment of its first flight; the whole flight is taken off the link.
    No SACK: a tail loss probe (RFC 8985, SACK connections only) would resend the flight's
    last segment at the old size while a test's ICMP message is on its way. peer_args: the
    family's (v6, src6)."""
    peer = TcpPeer(link, 19, mss=mss, sack=False, **peer_args)
    peer.connect()
    first = peer.recv(3, has_data)
    assert first is not None, "the pattern source sent nothing"
    assert first[TCP].seq == peer.rcv_nxt
    drain(peer)
    return peer, first


def offset(peer, p):
    """Stream offset of segment p's first byte (the SYN takes one sequence number)."""
    return (p[TCP].seq - peer.irs - 1) & 0xFFFFFFFF


def collect(peer, seq, nbytes, nxt=None, timeout=8.0):
    """Data segments of peer's connection from sequence number seq on, acknowledging in
    order, until nbytes arrived. nxt(timeout) gives the next packet to look at (default:
    the connection's next data segment); a packet that is no data segment of the connection
    (an IPv6 fragment, say) is kept but not acknowledged. Returns (bytes, data segments,
    every packet)."""
    if nxt is None:
        def nxt(t):
            return peer.recv(t, has_data)
    data, segs, pkts = b"", [], []
    peer.rcv_nxt = seq
    deadline = time.monotonic() + timeout
    while len(data) < nbytes and time.monotonic() < deadline:
        p = nxt(max(0.0, deadline - time.monotonic()))
        if p is None:
            break
        pkts.append(p)
        if IPv6ExtHdrFragment in p or not peer.mine(p) or not has_data(p):
            continue
        segs.append(p)
        if p[TCP].seq == peer.rcv_nxt:
            data += bytes(p[TCP].payload)
            peer.absorb(p)
        peer.ack()
    return data[:nbytes], segs, pkts


def next_new_segment(peer, first, unit, flight=3):
    """After an ICMP message that must change nothing: acknowledge the whole first flight
    (flight segments of unit octets from first; with a short RTO some of it may have been
    sent again meanwhile) and return the next new segment (None if none came), the rest of
    its flight taken off the link so that a message about it comes before the next."""
    last = (first[TCP].seq + flight * unit) & 0xFFFFFFFF
    peer.rcv_nxt = last
    peer.ack()
    nxt = peer.recv(3, lambda q: has_data(q) and ((q[TCP].seq - last) & 0xFFFFFFFF) < 0x80000000)
    drain(peer)
    return nxt
