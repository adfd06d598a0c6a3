"""RFC 2018: TCP Selective Acknowledgment Options."""

import os
import select

from scapy.layers.inet import TCP
from scapy.layers.l2 import Ether

from conftest import TcpPeer, curated_pcap, requirement, tcp_opts


@requirement(fix='lwIP 2.1.3 (LWIP_TCP_SACK_OUT)',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c 's/if ((pcb->state != SYN_RCVD) || (pcb->flags \\& TF_SACK)) {/if (0) {/'")
def test_rfc2018_2_synack_carries_sack_permitted(node, link):
    """RFC 2018 §2: "This two-byte option may be sent in a SYN by a TCP that has been
    extended to receive (and presumably process) the SACK option once the connection has
    opened." (the same holds for the <SYN,ACK> answering a SYN that carried it)."""
    peer = TcpPeer(link, 7, sack=True)
    sa = peer.connect()
    assert "SAckOK" in tcp_opts(sa), f"SYN-ACK options: {sa[TCP].options}"


@requirement(fix='lwIP 2.1.3 (LWIP_TCP_SACK_OUT)',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c '/^tcp_get_num_sacks/,/^}/ s/if (pcb->flags \\& TF_SACK) {/if (0) {/'")
def test_rfc2018_4_sack_block_reports_out_of_order_data(node, link):
    """RFC 2018 §4: "If sent at all, SACK options SHOULD be included in all ACKs which do
    not ACK the highest sequence number in the data receiver's queue." ... "The first SACK
    block (i.e., the one immediately following the kind and length fields in the option)
    MUST specify the contiguous block of data containing the segment which triggered this
    ACK". We send bytes 1000..1999 of a stream whose bytes 0..999 are missing."""
    peer = TcpPeer(link, 9, sack=True)   # discard: only ACKs come back
    peer.connect()
    base = peer.snd_nxt
    peer.send("PA", b"B" * 1000, seq=base + 1000)
    p = peer.recv(3, lambda q: q[TCP].ack == base)
    assert p is not None, "no ACK for the out-of-order segment"
    sack = tcp_opts(p).get("SAck")
    assert sack, f"no SACK option in the duplicate ACK: {p[TCP].options}"
    assert (sack[0], sack[1]) == ((base + 1000) & 0xFFFFFFFF, (base + 2000) & 0xFFFFFFFF), \
        f"first SACK block {sack[:2]}, expected ({base + 1000}, {base + 2000})"
    peer.send("PA", b"A" * 1000)        # fill the hole: everything is acknowledged
    peer.snd_nxt = (base + 2000) & 0xFFFFFFFF
    p = peer.recv(3, lambda q: q[TCP].ack == peer.snd_nxt)
    assert p is not None, "filling the hole was not acknowledged up to the end of the data"
    curated_pcap(link, "test_rfc2018_4_sack_block_reports_out_of_order_data.pcap")


@requirement(fix='patch 0085 (out-of-order segments appended at the tail of ooseq)',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c 's/  if (seqno != tail_end) {/  if (1) {/'")
def test_rfc2018_4_first_sack_block_is_the_whole_contiguous_block(node, link):
    """RFC 2018 §4: "The first SACK block (i.e., the one immediately following the kind and
    length fields in the option) MUST specify the contiguous block of data containing the
    segment which triggered this ACK, unless that segment advanced the Acknowledgment
    Number field in the header." Bytes 0..999 stay missing while segments arrive after the
    last one queued (contiguous with it and after a second hole), into the second hole, and
    after it again: each ACK's first block is the whole contiguous block, not just the new
    segment."""
    peer = TcpPeer(link, 9, sack=True)   # discard: only ACKs come back
    peer.connect()
    base = peer.snd_nxt

    def first_block(lo, hi, why):
        peer.send("PA", b"B" * 1000, seq=(base + lo) & 0xFFFFFFFF)
        p = peer.recv(3, lambda q: q[TCP].ack == base and tcp_opts(q).get("SAck"))
        assert p is not None, f"no duplicate ACK with SACK for the segment at {lo} ({why})"
        sack = tcp_opts(p)["SAck"]
        want = ((base + hi[0]) & 0xFFFFFFFF, (base + hi[1]) & 0xFFFFFFFF)
        assert (sack[0], sack[1]) == want, \
            f"{why}: first SACK block {sack[0] - base}..{sack[1] - base}, expected {hi[0]}..{hi[1]}"

    first_block(1000, (1000, 2000), "first out-of-order segment")
    first_block(2000, (1000, 3000), "contiguous with the last queued segment")
    first_block(4000, (4000, 5000), "after a second hole")
    first_block(5000, (4000, 6000), "contiguous again, after the second hole")
    first_block(3000, (1000, 6000), "filling the second hole")
    first_block(6000, (1000, 7000), "after the filled hole")
    peer.send("PA", b"A" * 1000)        # fill the first hole: everything is acknowledged
    peer.snd_nxt = (base + 7000) & 0xFFFFFFFF
    p = peer.recv(3, lambda q: q[TCP].ack == peer.snd_nxt)
    assert p is not None, "filling the first hole was not acknowledged up to the end of the data"


def _drain_last(link, mine, quiet=0.5):
    """Read every frame waiting on the link without parsing it (thousands of ACKs would take
    Python seconds), and return the last one mine() accepts, parsed."""
    ins = link.sock.ins
    tail = []
    while True:
        r, _, _ = select.select([ins], [], [], quiet)
        if not r:
            break
        tail = (tail + [ins.recv(65536)])[-64:]
    for data in reversed(tail):
        p = Ether(data)
        if mine(p):
            return p
    return None


@requirement(fix='patch 0128 (ooseq bounded to TCP_OOSEQ_MAX_SEGS segments)',
             mutate="rm stack/patches/0128-ooseq-bounded.patch", level="MAY")
def test_rfc2018_8_out_of_order_queue_bounded_and_connection_recovers(node, link, counters):
    """RFC 2018 §8: "the data receiver is permitted to discard data in its queue that has
    not been acknowledged to the data sender, even if the data has already been reported in
    a SACK option. Such discarding of SACKed packets is discouraged, but may be used if the
    receiver runs out of buffer space." Issue 13: no packet sequence may exhaust a process.
    The receive window alone bounded the out-of-order queue, and one octet in every other
    position of a 4 MiB window was two million segments (440 MB). We send 5,000 such
    segments: the node keeps the first 4,096 (TCP_OOSEQ_MAX_SEGS), drops and counts the rest
    (tcp_ooseq_limit), reports none of them in a SACK block, and when the holes are filled
    echoes every octet, in order."""
    n, bound = 5000, 4096
    peer = TcpPeer(link, 7, sack=True)
    peer.connect()
    base = peer.snd_nxt
    data = os.urandom(2 * n + 1)
    before = counters()["tcp_ooseq_limit"]
    out = link.sock.outs
    for i in range(n):
        off = 2 * i + 1
        out.send(bytes(peer.segment("A", data[off:off + 1], seq=(base + off) & 0xFFFFFFFF)))
    last = _drain_last(link, lambda q: peer.mine(q) and q[TCP].ack == base)
    assert last is not None, "no duplicate ACK for the out-of-order segments"
    blocks = dict(last[TCP].options).get("SAck", ())
    assert blocks, f"the last duplicate ACK carries no SACK block: {last[TCP].options}"
    highest = max((r - base) & 0xFFFFFFFF for r in blocks[1::2])
    assert highest <= 2 * bound, \
        f"a SACK block reaches octet {highest}: segments past the first {bound} were kept"
    dropped = counters()["tcp_ooseq_limit"] - before
    assert dropped >= n - bound - 100, f"tcp_ooseq_limit counted {dropped} drops"
    for off in range(0, len(data), 1000):
        peer.send("PA", data[off:off + 1000], seq=(base + off) & 0xFFFFFFFF)
    peer.snd_nxt = (base + len(data)) & 0xFFFFFFFF
    got = peer.recv_data(len(data), timeout=10)
    assert got == data, f"echo after the holes were filled: {len(got)} of {len(data)} octets"
