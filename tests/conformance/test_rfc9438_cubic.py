"""RFC 9438: CUBIC for Fast and Long-Distance Networks (the sender's congestion response).

Scapy is the receiver of the node's source service (TCP 19) and plays losses by what it
acknowledges (tests/conformance/flight.py). No timestamps, no SACK: segments are exactly
1000 bytes, and the window the node may send is read off what it sends in one round trip
(Scapy acknowledges nothing until the node stops).
"""

from scapy.layers.inet import TCP

from conftest import curated_pcap, requirement
from flight import SMSS, Receiver, offsets

FLIGHT = 20


def new_data(r, start, duration=0.15):
    """Bytes of new data (at or above start) the node sends within duration, and the
    highest sequence number it reached."""
    got = r.segments(duration, lambda q: (q[TCP].seq - start) & 0xFFFFFFFF < 0x80000000)
    end = start
    for p in got:
        e = (p[TCP].seq + len(p[TCP].payload)) & 0xFFFFFFFF
        if (e - end) & 0xFFFFFFFF < 0x80000000:
            end = e
    return (end - start) & 0xFFFFFFFF, got


def fast_retransmit_of_full_flight(link):
    """A 20-segment flight (the receive window's limit, cwnd far above it) of which the
    first segment is "lost": three duplicate ACKs, the fast retransmit, then a full ACK
    that ends recovery. Returns (receiver, sequence number after the flight)."""
    r = Receiver(link, window=FLIGHT * SMSS)
    r.start()
    s = r.grow(acks=30)
    r.window_of(s, FLIGHT)
    for _ in range(3):
        r.ack(s)
    p = r.segment(0.2, lambda q: q[TCP].seq == s)
    assert p is not None, "no fast retransmit after three duplicate ACKs"
    end = (s + FLIGHT * SMSS) & 0xFFFFFFFF
    r.peer.rcv_nxt = end
    r.ack(end)                       # full ACK: recovery ends, cwnd = ssthresh
    return r, end


@requirement(fix='patch 0040',
             mutate="sed -i 's/^#define CUBIC_BETA .*/#define CUBIC_BETA 0.5/' stack/cubic.c")
def test_rfc9438_4_6_window_after_fast_retransmit_is_0_7_of_flight_size(node, link):
    """RFC 9438 §4.6: "When a congestion event is detected by the mechanisms described in
    Section 3.1, CUBIC updates W_max and reduces cwnd and ssthresh immediately" with
    "ssthresh = flight_size * β_cubic", "cwnd = max(ssthresh, 2)" on a loss, and "β_cubic
    SHOULD be set to 0.7" (RFC 5681's Reno takes half). A 20-segment flight (cwnd far
    above it: the receive window is the limit) loses its first segment; after the fast
    retransmit and the full ACK the node sends 14 segments of new data in one round trip
    (Reno: 10; 0.7 of cwnd instead of the flight: all 20 the window allows)."""
    r, end = fast_retransmit_of_full_flight(link)
    sent, got = new_data(r, end)
    assert 13 * SMSS <= sent <= 15 * SMSS, \
        f"after recovery the node sent {sent} bytes in one round trip, expected " \
        f"0.7 x FlightSize = 14000 ({offsets(got, end)})"
    curated_pcap(link, "test_rfc9438_4_6_window_after_fast_retransmit_is_0_7_of_flight_size.pcap")
    r.peer.abort()


@requirement(fix='patch 0105',
             mutate="tests/conformance/lwip-mutate core/tcp_out.c "
                    "'s/return LWIP_MAX(flight, pcb->flight_out);/return flight;/'")
def test_rfc9438_4_6_flight_size_is_what_was_sent_before_a_stretch_ack(node, link):
    """RFC 9438 §4.6: "ssthresh = flight_size * β_cubic" on a congestion event, with
    FlightSize "the amount of data that has been sent but not yet cumulatively
    acknowledged" (RFC 5681 §2). ulstack sends once per batch of received segments
    (patch 0088), so a batch's ACKs first empty the flight and a loss found at its end saw
    only what lay above the hole; one stretch ACK does the same. A 20-segment flight (the
    receive window's limit, cwnd far above it) with SACK: one ACK acknowledges segments
    0-14, SACKs 16-19 and opens the window to 40 segments. Segment 15 is resent and, with
    cwnd = 0.7 x 20, 13 segments of new data follow at once (patch 0105 takes the flight
    as the last output left it); with the 5 segments above the hole as FlightSize, 2."""
    r = Receiver(link, window=FLIGHT * SMSS, sack=True)
    r.start()
    s = r.grow(acks=30)
    r.window_of(s, FLIGHT)
    r.ack(s + 15 * SMSS, sack=[(s + 16 * SMSS, s + FLIGHT * SMSS)], window=40 * SMSS)
    got = r.segments(0.1)
    rexmit = [p for p in got if p[TCP].seq == (s + 15 * SMSS) & 0xFFFFFFFF]
    new = sum(len(p[TCP].payload) for p in got
              if (p[TCP].seq - s) & 0xFFFFFFFF < 0x80000000 and
              (p[TCP].seq - s) & 0xFFFFFFFF >= FLIGHT * SMSS)
    assert rexmit, f"segment 15 not resent: {offsets(got, s)}"
    assert 11 * SMSS <= new <= 14 * SMSS, \
        f"{new} bytes of new data after the loss, expected 13000 (cwnd 0.7 x 20 segments, " \
        f"one resent): {offsets(got, s)}"
    r.peer.abort()
