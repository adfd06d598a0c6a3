"""RFC 2018: TCP Selective Acknowledgment Options."""

from scapy.layers.inet import TCP

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
