"""RFC 7323 §5 (PAWS) and §4.3 (which segments may update TS.Recent)."""

from scapy.layers.inet import TCP

from conftest import TcpPeer, curated_pcap, requirement, tcp_opts


def _ts(peer, tsval):
    return [("NOP", None), ("NOP", None), ("Timestamp", (tsval & 0xFFFFFFFF, peer.ts_recent))]


def _payload(peer, duration):
    return peer.recv_all(duration, lambda q: len(q[TCP].payload) > 0)


@requirement(fix='hook stack/tcp_checks.c',
             mutate="sed -i 's/if ((int32_t)(tsval - ts_recent) >= 0)/if ((int32_t)(tsval - ts_recent) >= 0 || 1)/' stack/tcp_checks.c")
def test_rfc7323_5_3_old_tsval_duplicate_dropped(node, link, counters):
    """RFC 7323 §5.3: "R1) If there is a Timestamps option in the arriving segment,
    SEG.TSval < TS.Recent, TS.Recent is valid (see later discussion), and if the RST bit is
    not set, then treat the arriving segment as not acceptable: Send an acknowledgment in
    reply as specified in Section 3.9 of [RFC0793], page 69, and drop the segment." A data
    segment at RCV.NXT (acceptable by its sequence number) whose TSval is 100 s older than
    the last one is answered with an ACK that does not cover it, is not delivered to the
    echo service, and is counted (tcp_paws_dropped). Positive control: the same segment with
    a fresh TSval is echoed."""
    peer = TcpPeer(link, 7)
    peer.connect()
    assert peer.ts_ok, "timestamps not agreed"
    peer.send("PA", b"fresh\n")
    assert peer.recv_data(6) == b"fresh\n"
    before = counters()["tcp_paws_dropped"]
    msg = b"old duplicate\n"
    peer.send("PA", msg, seq=peer.snd_nxt, options=_ts(peer, peer.tsval() - 100000))
    a = peer.recv(2)
    assert a is not None, "no ACK for a segment that failed PAWS"
    assert a[TCP].ack == peer.snd_nxt and not a[TCP].payload, f"PAWS failure taken: {a.summary()}"
    assert _payload(peer, 0.7) == [], "data with an old TSval was delivered"
    assert counters()["tcp_paws_dropped"] == before + 1, "PAWS drop not counted"
    peer.send("PA", msg)
    assert peer.recv_data(len(msg)) == msg, "control: the fresh-TSval segment was not echoed"
    curated_pcap(link, "test_rfc7323_5_3_old_tsval_duplicate_dropped.pcap")


@requirement(fix='hook stack/tcp_checks.c',
             mutate="sed -i '/^static err_t check_synchronized/,/^}/ {/if (fl \\& TCP_RST)$/{N;d}}' stack/tcp_checks.c")
def test_rfc7323_5_3_rst_not_subject_to_paws(node, link, counters):
    """RFC 7323 §5.3 R1 applies only "if the RST bit is not set" (and §5.2: "When an <RST>
    segment is received, it MUST NOT be subjected to the PAWS check by verifying an
    acceptable value in SEG.TSval, and information from the Timestamps option MUST NOT be
    used to update connection state information."). A RST at exactly RCV.NXT with a TSval
    100 s old still resets the connection: later data on the tuple is refused with a RST,
    and PAWS counted nothing."""
    peer = TcpPeer(link, 7)
    peer.connect()
    before = counters()["tcp_paws_dropped"]
    peer.send("R", seq=peer.snd_nxt, ack=0, options=_ts(peer, peer.tsval() - 100000))
    peer.closed = True
    peer.recv_all(0.3)
    peer.send("PA", b"anyone?\n")
    r = peer.recv(3)
    assert r is not None and r[TCP].flags.R, "a RST with an old TSval did not reset"
    assert counters()["tcp_paws_dropped"] == before


@requirement(fix='hook stack/tcp_checks.c',
             mutate="sed -i 's/if (!stk__tcp_ack_acceptable(/if (0 \\&\\& !stk__tcp_ack_acceptable(/' stack/tcp_checks.c")
def test_rfc7323_4_3_ts_recent_not_taken_from_unacceptable_segment(node, link, counters):
    """RFC 7323 §4.3: "(2) If: SEG.TSval >= TS.Recent and SEG.SEQ <= Last.ACK.sent then
    SEG.TSval is copied to TS.Recent; otherwise, it is ignored." and §5.3 R3 ("If an
    arriving segment satisfies SEG.TSval >= TS.Recent and SEG.SEQ <= Last.ACK.sent (see
    Section 4.3), then record its timestamp in TS.Recent."). Deviation (docs/limits.md):
    R3 comes after the PAWS and window checks (R1, R2) but before the ACK is looked at, so
    RFC 7323 alone would record the TSval of this segment; ulstack, like Linux (tcp_ack's
    FLAG_UPDATE_TS_RECENT), records it only from a segment whose ACK is acceptable. A
    segment at RCV.NXT whose ACK acknowledges unsent data is dropped (RFC 5961 §5.2), so its
    TSval, 2^30 ahead, must not become TS.Recent: the challenge ACK echoes a good TSval
    (within the last minute), and a following segment with a normal TSval is accepted and
    echoed (had TS.Recent jumped, PAWS would now drop it)."""
    peer = TcpPeer(link, 7)
    peer.connect()
    good = peer.tsval()
    peer.send("PA", b"good\n", options=_ts(peer, good))
    assert peer.recv_data(5) == b"good\n"
    peer.send("PA", b"bad\n", seq=peer.snd_nxt, ack=(peer.rcv_nxt + 4000) & 0xFFFFFFFF,
              options=_ts(peer, good + (1 << 30)))
    a = peer.recv(2)
    assert a is not None, "no ACK for a segment with an unacceptable ACK"
    tsecr = tcp_opts(a)["Timestamp"][1]
    # the last good TSval is that of "good" or of the ACK recv_data sent after it
    assert (tsecr - good) & 0xFFFFFFFF < 60000, \
        f"TS.Recent taken from an unacceptable segment: TSecr {tsecr:#x}, good {good:#x}"
    msg = b"normal tsval\n"
    peer.send("PA", msg)
    assert peer.recv_data(len(msg)) == msg, "a normal TSval was refused afterwards"


@requirement(fix='hook stack/tcp_checks.c',
             mutate="sed -i 's/if ((int32_t)(tsval - ts_recent) >= 0)/if ((int32_t)(tsval - ts_recent) >= 0 || 1)/' stack/tcp_checks.c")
def test_rfc7323_4_3_ts_recent_follows_acceptable_segments(node, link):
    """RFC 7323 §4.3: "(2) If: SEG.TSval >= TS.Recent and SEG.SEQ <= Last.ACK.sent then
    SEG.TSval is copied to TS.Recent; otherwise, it is ignored." Positive counterpart of the
    PAWS tests: an acceptable segment with a TSval far ahead (2^30, still "newer") becomes
    TS.Recent, the node's ACK echoes it, and from then on a TSval below it fails PAWS (not
    echoed)."""
    peer = TcpPeer(link, 7)
    peer.connect()
    ahead = peer.tsval() + (1 << 30)
    peer.send("PA", b"jump\n", options=_ts(peer, ahead))
    a = peer.recv(3, lambda q: len(q[TCP].payload) > 0)
    assert a is not None and bytes(a[TCP].payload) == b"jump\n"
    assert tcp_opts(a)["Timestamp"][1] == ahead & 0xFFFFFFFF, "TS.Recent did not follow"
    peer.absorb(a)
    # Acknowledge the echo now, with a valid TSval: the PAWS-dropped segment below carries
    # the same ACK, and an echo left unacknowledged would come back after the RTO (200 ms).
    peer.ack(options=_ts(peer, ahead))
    peer.send("PA", b"behind\n", options=_ts(peer, ahead - 1000))
    assert _payload(peer, 0.7) == [], "a TSval below the new TS.Recent was delivered"
    peer.send("PA", b"behind\n", seq=(peer.snd_nxt - 7) & 0xFFFFFFFF,
              options=_ts(peer, ahead + 10))
    assert peer.recv_data(7) == b"behind\n"
