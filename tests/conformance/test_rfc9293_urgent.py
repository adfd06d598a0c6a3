"""RFC 9293 §3.8.5 and RFC 6093: urgent data (a documented Deviation, docs/compatibility.md).

ulstack keeps lwIP 2.1.3's handling: the urgent pointer of received segments is ignored and
every octet is delivered in band, in order, as Linux does with SO_OOBINLINE set. Nothing is
ever taken out of band (recv(MSG_OOB) fails with EINVAL, send(MSG_OOB) with EOPNOTSUPP).
This test pins down that urgent data is at least never lost or reordered.
"""

from scapy.layers.inet import TCP

from conftest import TcpPeer, requirement


@requirement(fix='lwIP 2.1.3 (Deviation: in band)',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c 's/^  flags = TCPH_FLAGS(tcphdr);\\r$/  flags = TCPH_FLAGS(tcphdr);\\r\\n  if (flags \\& TCP_URG) { pbuf_free(p); return; }\\r/'")
def test_rfc9293_3_8_5_urgent_data_delivered_in_band_not_lost(link):
    """RFC 9293 §3.8.5: "A TCP implementation MUST (MUST-32) inform the application layer
    asynchronously whenever it receives an urgent pointer and there was previously no
    pending urgent data, or whenever the urgent pointer advances in the data stream." Deviation (docs/compatibility.md): ulstack does not (lwIP ignores the urgent
    pointer); it delivers urgent octets in band, as Linux does with SO_OOBINLINE, which is
    what RFC 6093 §6 advises applications that still use urgent data to ask for. What must
    hold regardless: a segment with URG and an urgent pointer, between two ordinary ones,
    comes back from the echo service complete and in order, its urgent octets included."""
    peer = TcpPeer(link, 7)
    peer.connect()
    peer.send("PA", payload=b"before|")
    urg = peer.segment("PAU", payload=b"URGENT!")
    urg[TCP].urgptr = len(b"URGENT!")   # RFC 9293: points after the last urgent octet
    peer.link.send(urg)
    peer.snd_nxt = (peer.snd_nxt + len(b"URGENT!")) & 0xFFFFFFFF
    peer.send("PA", payload=b"|after")
    want = b"before|URGENT!|after"
    got = peer.recv_data(len(want), timeout=5)
    assert got == want, f"echo {got!r}, sent {want!r}"
    peer.abort()
