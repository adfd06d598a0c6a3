"""RFC 2883: An Extension to the Selective Acknowledgement (SACK) Option for TCP (D-SACK).

A receiver that reports the duplicate segments it gets lets the sender tell a spurious
retransmission from a loss (Linux undoes the congestion response and widens its reordering
window on a D-SACK). Each test sends data to the discard port, so only ACKs come back, then
sends some of it again and reads the ACK the duplicate draws.
"""

from scapy.layers.inet import TCP

from conftest import TcpPeer, curated_pcap, requirement, tcp_opts


def _seq(peer, off):
    return (peer.base + off) & 0xFFFFFFFF


def _blocks(p, base):
    """The SACK blocks of p as offsets from base, in the order they were sent."""
    sack = tcp_opts(p).get("SAck") or ()
    return [((sack[i] - base) & 0xFFFFFFFF, (sack[i + 1] - base) & 0xFFFFFFFF)
            for i in range(0, len(sack) - 1, 2)]


def _connect(link, sack=True):
    peer = TcpPeer(link, 9, sack=sack)   # discard: only ACKs come back
    peer.connect()
    peer.base = peer.snd_nxt
    return peer


def _ack_for(peer, ack_off, why, sack_wanted=True):
    """The next ACK of ack_off (an offset from base), with SACK blocks when sack_wanted."""
    want = _seq(peer, ack_off)
    p = peer.recv(3, lambda q: q[TCP].ack == want and
                  (not sack_wanted or tcp_opts(q).get("SAck")))
    with_sack = " with SACK blocks" if sack_wanted else ""
    assert p is not None, f"no ACK of {ack_off}{with_sack} ({why})"
    return p


def _settle(peer):
    """Consume the ACKs the data sent so far drew, so that the next one read is the answer
    to what is sent next."""
    peer.recv_all(0.3)


def _expect_blocks(p, peer, want, what):
    got = _blocks(p, peer.base)
    assert got == want, f"SACK blocks {got}: expected {want} ({what})"


def _send(peer, lo, hi, **kw):
    peer.send("PA", b"D" * (hi - lo), seq=_seq(peer, lo), **kw)


def _first_kilobyte(peer):
    """Octets 0..999 sent and acknowledged."""
    _send(peer, 0, 1000)
    _ack_for(peer, 1000, "the first copy", sack_wanted=False)


def _again(peer, lo, hi, ack_off, sack_wanted=True, **kw):
    """The ACKs drawn so far read; octets lo..hi-1 sent (again, in part or whole): the ACK
    of ack_off that they draw."""
    _settle(peer)
    _send(peer, lo, hi, **kw)
    return _ack_for(peer, ack_off, f"{lo}..{hi - 1} sent again", sack_wanted)


@requirement(fix="patch 0139 (D-SACK, RFC 2883)",
             mutate="tests/conformance/lwip-mutate core/tcp_in.c "
                    "'/^tcp_dsack_note(/,/^}/ s/if (pcb->flags \\& TF_SACK) {/if (0) {/'",
             level="SHOULD")
def test_rfc2883_4_duplicate_below_the_cumulative_ack_is_the_first_block(node, link):
    """RFC 2883 §4: "When D-SACK is used, the first block of the SACK option should be a
    D-SACK block specifying the sequence numbers for the duplicate segment that triggers
    the acknowledgement." ... "(3) The left edge of the D-SACK block specifies the first
    sequence number of the duplicate contiguous sequence, and the right edge of the D-SACK
    block specifies the sequence number immediately following the last sequence in the
    duplicate contiguous sequence." Octets 0..999 arrive and are acknowledged, then arrive
    again (a retransmission whose original was not lost): the ACK reports 0..1000 below
    its own acknowledgment number."""
    peer = _connect(link)
    _first_kilobyte(peer)
    p = _again(peer, 0, 1000, 1000)
    _expect_blocks(p, peer, [(0, 1000)], "one D-SACK block")
    curated_pcap(link, "test_rfc2883_4_duplicate_below_the_cumulative_ack_is_the_first_block.pcap")


@requirement(fix="patch 0139 (D-SACK, RFC 2883)",
             mutate="tests/conformance/lwip-mutate core/tcp_in.c "
                    "'/^tcp_dsack_note(/,/^}/ s/if (pcb->flags \\& TF_SACK) {/if (0) {/'",
             level="SHOULD")
def test_rfc2883_4_partly_duplicate_segment_reports_only_the_duplicate_part(node, link):
    """RFC 2883 §4: "(3) The left edge of the D-SACK block specifies the first sequence
    number of the duplicate contiguous sequence, and the right edge of the D-SACK block
    specifies the sequence number immediately following the last sequence in the duplicate
    contiguous sequence." Octets 0..999 arrive, then a segment 500..1499 (a repacketized
    retransmission): its first half is a duplicate, its second half new data. The ACK
    acknowledges 1500 and reports 500..1000, not the whole segment."""
    peer = _connect(link)
    _first_kilobyte(peer)
    p = _again(peer, 500, 1500, 1500)
    _expect_blocks(p, peer, [(500, 1000)], "the duplicate part only")


@requirement(fix="patch 0139 (D-SACK, RFC 2883)",
             mutate="tests/conformance/lwip-mutate core/tcp_in.c "
                    "'/^tcp_dsack_note(/,/^}/ s/if (pcb->flags \\& TF_SACK) {/if (0) {/'",
             level="SHOULD")
def test_rfc2883_4_1_3_duplicate_out_of_order_segment_then_its_block(node, link):
    """RFC 2883 §4: "(4) If the D-SACK block reports a duplicate contiguous sequence from a
    (possibly larger) block of data in the receiver's data queue above the cumulative
    acknowledgement, then the second SACK block in that SACK option should specify that
    (possibly larger) block of data." and "(5) Following the SACK blocks described above
    for reporting duplicate segments, additional SACK blocks can be used for reporting
    additional blocks of data, as specified in RFC 2018." Octets 0..999 stay missing; 1000..
    2999 and 4000..4999 arrive out of order, then 1000..1999 again. The ACK's blocks are
    the duplicate, the block 1000..3000 that holds it, then the other block."""
    peer = _connect(link)
    _send(peer, 1000, 2000)
    _send(peer, 2000, 3000)
    _send(peer, 4000, 5000)
    p = peer.recv(3, lambda q: q[TCP].ack == _seq(peer, 0) and
                  _blocks(q, peer.base) == [(4000, 5000), (1000, 3000)])
    assert p is not None, "no ACK reporting the blocks 4000..5000 and 1000..3000"
    p = _again(peer, 1000, 2000, 0)
    _expect_blocks(p, peer, [(1000, 2000), (1000, 3000), (4000, 5000)],
                   "the D-SACK block, its block, the other")
    _send(peer, 0, 1000)                 # the hole filled; 3000..3999 still missing
    p = _ack_for(peer, 3000, "the filled hole")
    _expect_blocks(p, peer, [(4000, 5000)], "after the hole was filled")
    curated_pcap(link, "test_rfc2883_4_1_3_duplicate_out_of_order_segment_then_its_block.pcap")


@requirement(fix="patch 0139 (D-SACK, RFC 2883)",
             mutate="tests/conformance/lwip-mutate core/tcp_in.c "
                    "'/^tcp_dsack_note(/,/^}/ s/if (pcb->flags \\& TF_SACK) {/if (0) {/'",
             level="SHOULD")
def test_rfc2883_4_2_partial_overlap_with_queued_data_reports_the_overlap(node, link):
    """RFC 2883 §4: "When D-SACK is used, the first block of the SACK option should be a
    D-SACK block specifying the sequence numbers for the duplicate segment that triggers
    the acknowledgement." Octets 0..999 stay missing; 2000..2999 arrive out of order, then
    1500..2499, half of it already queued. The ACK reports the overlap 2000..2500 first,
    then the block 1500..3000 that now holds it."""
    peer = _connect(link)
    _send(peer, 2000, 3000)
    _ack_for(peer, 0, "the out-of-order segment")
    p = _again(peer, 1500, 2500, 0)
    _expect_blocks(p, peer, [(2000, 2500), (1500, 3000)], "the overlap, then its block")


@requirement(fix="patch 0139 (D-SACK, RFC 2883)",
             mutate="tests/conformance/lwip-mutate core/tcp_in.c "
                    "'/^tcp_dsack_note(/,/^}/ s/if (pcb->flags \\& TF_SACK) {/if (0) {/'",
             level="SHOULD")
def test_rfc2883_4_each_duplicate_reported_in_one_ack_only(node, link):
    """RFC 2883 §4: "(1) A D-SACK block is only used to report a duplicate contiguous
    sequence of data received by the receiver in the most recent packet." and "(2) Each
    duplicate contiguous sequence of data received is reported in at most one D-SACK block.
    (I.e., the receiver sends two identical D-SACK blocks in subsequent packets only if
    the receiver receives two duplicate segments.)" Octets 0..999 stay missing and 1000..
    1999 arrive; then 1000..1999 again (reported), then 2000..2999 (new data): the second
    ACK reports only the block 1000..3000. A positive control first: the duplicate was
    reported."""
    peer = _connect(link)
    _send(peer, 1000, 2000)
    _ack_for(peer, 0, "the out-of-order segment")
    p = _again(peer, 1000, 2000, 0)
    _expect_blocks(p, peer, [(1000, 2000), (1000, 2000)],
                   "the duplicate and its block: the positive control")
    p = _again(peer, 2000, 3000, 0)   # new data, not a duplicate
    _expect_blocks(p, peer, [(1000, 3000)], "new data only: no second report")


@requirement(fix="patch 0139 (D-SACK, RFC 2883); hook stack/tcp_checks.c (note_duplicate)",
             mutate="sed -i '/stk__count(STK_CNT_TCP_PAWS_DROPPED);/{n;/note_duplicate/d}' "
                    "stack/tcp_checks.c",
             level="SHOULD")
def test_rfc2883_4_3_duplicate_refused_by_paws_still_reported(node, link, counters):
    """RFC 2883 §4.3: "Since PAWS still requires sending an ACK, there is no harmful
    interaction between PAWS and the use of D-SACK. The D-SACK block can be included in the
    SACK option of the ACK, as outlined in Section 4, independently of the use of PAWS by the
    TCP receiver, and independently of the determination by PAWS of the validity or
    invalidity of the data segment." Octets 0..999 arrive; then 500..1499 with an older
    TSval. The sequence check alone would take the segment (its second half is new), so only
    PAWS refuses it: the ACK does not move past 1000 (the positive control) and still reports
    500..1000."""
    peer = _connect(link)
    _first_kilobyte(peer)
    before = counters()["tcp_paws_dropped"]
    older = (peer.tsval() - 100000) & 0xFFFFFFFF
    p = _again(peer, 500, 1500, 1000, sack_wanted=False,
               options=[("NOP", None), ("NOP", None), ("Timestamp", (older, peer.ts_recent))])
    assert counters()["tcp_paws_dropped"] == before + 1, "PAWS did not refuse the segment"
    _expect_blocks(p, peer, [(500, 1000)], "the duplicate part only")


@requirement(fix="lwIP 2.1.3 (LWIP_TCP_SACK_OUT); patch 0139",
             mutate="tests/conformance/lwip-mutate core/tcp_in.c "
                    "'/^tcp_dsack_note(/,/^}/ s/if (pcb->flags \\& TF_SACK) {/if (1) {/' && "
                    "tests/conformance/lwip-mutate core/tcp_out.c "
                    "'/^tcp_get_num_sacks/,/^}/ s/if (pcb->flags \\& TF_SACK) {/if (1) {/'",
             level="MUST NOT")
def test_rfc2018_4_no_sack_option_even_for_a_duplicate_without_sack_permitted(node, link):
    """RFC 2018 §4: "If the data receiver has not received a SACK-Permitted option for a
    given connection, it MUST NOT send SACK options on that connection." (RFC 2883 §2:
    "The use of D-SACK does not require separate negotiation between a TCP sender and
    receiver that have already negotiated SACK capability.") A connection whose SYN had no
    SACK-permitted gets a duplicate: its ACK carries no SACK option. A positive control
    first: the same exchange with SACK permitted draws a D-SACK block."""
    ctl = _connect(link)
    _first_kilobyte(ctl)
    _again(ctl, 0, 1000, 1000)          # the control: a SACK option with SACK permitted
    peer = _connect(link, sack=False)
    _first_kilobyte(peer)
    p = _again(peer, 0, 1000, 1000, sack_wanted=False)
    assert "SAck" not in tcp_opts(p), f"SACK option without SACK-permitted: {p[TCP].options}"
