"""RFC 9293 §3.8.6.2.1: a peer that only ever offers a tiny window.

lwIP 2.1.3 sized its segments from half the largest window the peer ever offered, raised to
the timestamp option's length plus one octet; the option takes 12 octets with its padding,
so with a maximum window below 22 octets the room left for data came out negative, wrapped
to 65535, and the next send hit an assertion: any peer could abort a process that sends
(found by tests/fuzz/fuzz_stack). Port 19 sends as soon as it accepts.
"""

from scapy.layers.inet import TCP

from conftest import TcpPeer, requirement


def _first_octets(link, n, **kw):
    """The first n octets port 19 sends on a connection opened with kw."""
    peer = TcpPeer(link, 19, **kw)
    peer.connect()
    data = peer.recv_data(n, timeout=5)
    peer.abort()
    return data[:n]


@requirement(fix='patch 0083',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c "
                    "'s/mss_local = LWIP_MAX(mss_local, (u16_t)(optlen + 1));/;/'")
def test_rfc9293_3_8_6_2_1_peer_offering_a_two_octet_window_gets_the_data(link):
    """RFC 9293 §3.8.6.2.1: the sender may send data "(3) or if at least a fraction Fs of
    the maximum window can be sent, i.e., if: [SND.NXT = SND.UNA and] min(D,U) >= Fs *
    Max(SND.WND); ... Here Fs is a fraction whose recommended value is 1/2."
    With timestamps agreed and a peer whose largest window is 2 octets, the node sends
    segments of one or two octets of data (no more than the window), the bytes are the
    ones a normal connection gets, and the process lives on: the echo service answers."""
    expected = _first_octets(link, 8)
    assert len(expected) == 8, "port 19 sent nothing on a normal connection (control)"
    peer = TcpPeer(link, 19, window=2, wscale=None)
    peer.connect()
    assert peer.ts_ok, "timestamps were not agreed: the case needs them"
    data = b""
    sizes = []
    for _ in range(16):
        if len(data) >= 8:
            break
        p = peer.recv(3, lambda q: len(q[TCP].payload) > 0)
        assert p is not None, f"no data after {len(data)} octets (the process may have died)"
        sizes.append(len(p[TCP].payload))
        if peer.absorb(p):
            data += bytes(p[TCP].payload)
        peer.ack()
    assert data[:8] == expected, "the bytes differ from a normal connection's"
    assert max(sizes) <= 2, f"segments larger than the offered window: {sizes}"
    peer.abort()
    echo = TcpPeer(link, 7)
    echo.connect()
    echo.send("PA", b"alive?\n")
    assert echo.recv_data(7) == b"alive?\n", "the node no longer answers"
    echo.abort()
