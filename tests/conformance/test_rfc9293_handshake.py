"""RFC 9293: connection establishment and segments to closed ports."""

from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether

from conftest import TcpPeer, fresh_port, requirement, tcp_opts

CLOSED_PORT = 4444


@requirement(fix='lwIP 2.1.3',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c 's/optflags = TF_SEG_OPTS_MSS;/optflags = 0;/'")
def test_rfc9293_3_7_1_synack_carries_mss(node, link):
    """RFC 9293 §3.7.1: "TCP implementations SHOULD send an MSS Option in every SYN
    segment when its receive MSS differs from the default 536 for IPv4 or 1220 for IPv6
    (SHLD-5), and MAY send it always (MAY-3)." The node's MTU is 1500, so its receive MSS is 1500 - 40 = 1460."""
    peer = TcpPeer(link, 7)
    sa = peer.connect()
    assert tcp_opts(sa).get("MSS") == 1460, f"SYN-ACK options: {sa[TCP].options}"


@requirement(fix='lwIP 2.1.3',
             mutate="tests/conformance/lwip-mutate core/tcp_in.c 's/pcb->mss = ((mss > TCP_MSS) || (mss == 0)) ? TCP_MSS : mss;/pcb->mss = TCP_MSS;/'")
def test_rfc9293_3_7_1_peer_mss_respected(node, link):
    """RFC 9293 §3.7.1: "The MSS value to be sent in an MSS Option must be less than or
    equal to: MMS_R - 20" and "The maximum size of a segment that a TCP endpoint really
    sends, the "effective send MSS", MUST be the smaller (MUST-16) of the send MSS ... and
    the largest transmission size permitted by the IP layer": Eff.snd.MSS = min(SendMSS+20, MMS_S) - TCPhdrsize - IPoptionsize,
    where TCPhdrsize counts the options. With our MSS option of 536 and timestamps agreed
    (12 bytes of options on every segment), no segment from the node carries more than
    524 bytes of data, and the source's segments are that full (at least 500). Positive
    control: with MSS 1460 the same source sends segments above 536 bytes."""
    def sizes_from(peer):
        peer.connect()
        assert peer.ts_ok, "timestamps not agreed"
        sizes = []
        for _ in range(40):
            p = peer.recv(5, lambda q: len(q[TCP].payload) > 0)
            assert p is not None, "the pattern source stopped sending"
            sizes.append((len(p[TCP].payload), p[TCP].dataofs * 4 - 20))
            peer.absorb(p)
            peer.ack()
        peer.abort()
        return sizes

    sizes = sizes_from(TcpPeer(link, 19, mss=536))
    assert max(d for d, _ in sizes) <= 524, f"(data, options) sizes from the node: {sizes}"
    assert max(d + o for d, o in sizes) <= 536, f"(data, options) sizes: {sizes}"
    assert max(d for d, _ in sizes) >= 500, f"segments far below the MSS: {sizes}"
    ctl = sizes_from(TcpPeer(link, 19, mss=1460))
    assert max(d for d, _ in ctl) > 536, f"control: MSS 1460 gave segments {ctl}"


@requirement(fix='ulsd: server/reply.c; own: lwIP 2.1.3',
             mutate="sed -i 's/\\tif (p->tcp.flags \\& WIRE_TCP_RST) {/\\tif (1) {/' server/reply.c && tests/conformance/lwip-mutate core/tcp_in.c 's/if (!(TCPH_FLAGS(tcphdr) \\& TCP_RST)) {/if (0) {/'")
def test_rfc9293_3_10_7_1_syn_to_closed_port_gets_rst(node, link):
    """RFC 9293 §3.10.7.1 (CLOSED): "If the ACK bit is off, sequence number zero is used,
    <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>" (a SYN counts one in SEG.LEN)."""
    sport, seq = fresh_port(), 0x1234ABCD
    link.send(Ether(src=node.my_mac, dst=node.mac) / IP(src=node.my_ip, dst=node.ip) /
              TCP(sport=sport, dport=CLOSED_PORT, flags="S", seq=seq,
                  options=[("MSS", 1460)]))
    r = link.recv(lambda p: TCP in p and p[TCP].dport == sport, 3)
    assert r is not None, "no RST for a SYN to a closed port"
    assert r[TCP].sport == CLOSED_PORT
    assert r[TCP].flags == "RA", f"flags {r[TCP].flags}"
    assert r[TCP].seq == 0
    assert r[TCP].ack == seq + 1


@requirement(fix='ulsd: server/reply.c; own: patch 0001',
             mutate="sed -i 's/p->dport, p->sport, 0, p->tcp.seq + seglen,/p->dport, p->sport, p->tcp.ack, p->tcp.seq + seglen,/' server/reply.c && tests/conformance/lwip-mutate core/tcp_in.c 's/(TCPH_FLAGS(tcphdr) \\& TCP_ACK) ? ackno : 0/ackno/'")
def test_rfc9293_3_10_7_1_rst_seq_zero_when_ack_bit_off(node, link):
    """RFC 9293 §3.10.7.1 (CLOSED): "If the ACK bit is off, sequence number zero is used,
    <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>". With the ACK bit off the acknowledgment
    field carries no meaning (§3.1: "If the ACK control bit is set, this field contains
    the value of the next sequence number ..."), so a non-zero value left in it must not
    leak into the RST's sequence number."""
    sport, seq = fresh_port(), 0x0BADCAFE
    link.send(Ether(src=node.my_mac, dst=node.mac) / IP(src=node.my_ip, dst=node.ip) /
              TCP(sport=sport, dport=CLOSED_PORT, flags="S", seq=seq, ack=0x55667788))
    r = link.recv(lambda p: TCP in p and p[TCP].dport == sport, 3)
    assert r is not None, "no RST for a SYN to a closed port"
    assert r[TCP].flags == "RA", f"flags {r[TCP].flags}"
    assert r[TCP].seq == 0, f"RST SEQ={r[TCP].seq:#x} (the ignored ACK field was 0x55667788)"
    assert r[TCP].ack == seq + 1


@requirement(fix='ulsd: server/reply.c; own: lwIP 2.1.3',
             mutate="sed -i 's/p->dport, p->sport, p->tcp.ack, 0, WIRE_TCP_RST, 0)/p->dport, p->sport, p->tcp.ack + 1, 0, WIRE_TCP_RST, 0)/' server/reply.c && tests/conformance/lwip-mutate core/tcp_in.c 's/(TCPH_FLAGS(tcphdr) \\& TCP_ACK) ? ackno : 0/(TCPH_FLAGS(tcphdr) \\& TCP_ACK) ? ackno + 1 : 0/'")
def test_rfc9293_3_10_7_1_ack_to_closed_port_gets_rst_with_seq_ack(node, link):
    """RFC 9293 §3.10.7.1 (CLOSED): "If the ACK bit is on, <SEQ=SEG.ACK><CTL=RST>"."""
    sport, ack = fresh_port(), 0x7000_0001
    link.send(Ether(src=node.my_mac, dst=node.mac) / IP(src=node.my_ip, dst=node.ip) /
              TCP(sport=sport, dport=CLOSED_PORT, flags="A", seq=99, ack=ack) / b"xyz")
    r = link.recv(lambda p: TCP in p and p[TCP].dport == sport, 3)
    assert r is not None, "no RST for an ACK to a closed port"
    assert r[TCP].flags.R
    assert r[TCP].seq == ack
