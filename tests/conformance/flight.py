"""Scapy as the data receiver of the node: helpers for the sender-side tests (RFC 6298,
5681, 3042, 6582, 6675).

The node's source service (TCP 19) sends a byte pattern as fast as the window allows; Scapy
decides which of its segments "arrive" by what it acknowledges (cumulative ACK, duplicate
ACKs, SACK blocks), and watches what the node retransmits. The node dials out on request
(UDP 11, see apps/ulsnode.c) for the tests of SYN retransmission.

Segments are 1000 bytes: our SYN announces MSS 1000 and the tests turn timestamps off where
they count bytes, so that no option shortens a segment.
"""

import time

from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from conftest import TcpPeer, fresh_port, tcp_opts

SMSS = 1000

# The node's counters (stack/counters.c) of the events after which it sends with a smaller
# cwnd or ssthresh: the retransmission timeout (RFC 5681 §3.1, RFC 9438 §4.8), entering
# recovery (RFC 6675, RFC 6582), a loss found by RACK or repaired by a loss probe (RFC 8985
# §6.2, §7.4.2). A loss probe alone (tcp_tlp_probe) changes neither.
CWND_EVENTS = ("tcp_rto", "tcp_recovery_sack", "tcp_recovery_newreno",
               "tcp_tlp_repaired_loss", "tcp_rack_tail_lost", "tcp_rack_rexmit_lost")
# Fresh connections grow() may try (see there).
GROW_ATTEMPTS = 4
# The longest grow() may leave the node without an ACK before its fresh window: well below
# the node's smallest RTO (200 ms), whose timer runs from the last ACK of slow start.
GROW_GAP_MAX = 0.18


def has_data(p):
    return len(p[TCP].payload) > 0


class Receiver:
    """One connection to the node's source service, with Scapy as the receiver."""

    def __init__(self, link, window=65535, sack=False, ts=False, port=19):
        self.link = link
        self._opts = dict(mss=SMSS, wscale=None, ts=ts, sack=sack, window=window)
        self._port = port
        self.peer = TcpPeer(link, port, **self._opts)
        self.window = window

    def start(self):
        """Handshake; returns the sequence number of the first data byte (SND.UNA)."""
        self.peer.connect()
        return self.peer.rcv_nxt

    def ack(self, ack, sack=(), window=None):
        """A pure ACK with acknowledgment number ack and the given SACK blocks
        ((left, right) pairs, at most 3 with no timestamps). Returns the time it left."""
        opts = list(self.peer.options())
        if sack:
            blocks = []
            for left, right in sack:
                blocks += [left & 0xFFFFFFFF, right & 0xFFFFFFFF]
            opts += [("NOP", None), ("NOP", None), ("SAck", tuple(blocks))]
        return self.peer.send("A", ack=ack & 0xFFFFFFFF, options=opts,
                              window=self.window if window is None else window).time

    def answers(self, sent, duration, pred=None):
        """segments(duration, pred) that left the node after `sent` (our frame's time):
        a tail loss probe that was due before a late ACK of ours arrived (this process,
        slow on a loaded machine) is no answer to it."""
        return [p for p in self.segments(duration, pred) if p.time >= sent]

    def segments(self, duration, pred=None):
        """Every data segment from the node within duration seconds (waits it out)."""
        return self.peer.recv_all(duration, lambda q: has_data(q) and (pred is None or pred(q)))

    def segment(self, timeout, pred=None):
        return self.peer.recv(timeout, lambda q: has_data(q) and (pred is None or pred(q)))

    def grow(self, acks=24):
        """Slow start: acknowledge every segment on its own until `acks` ACKs were sent, so
        that cwnd ends far above the window; then acknowledge everything and return the
        sequence number S at which the node sends a fresh window [S, S + window).

        The tests after it need a connection that has had no congestion event: one RTO
        (cwnd = 1 SMSS, ssthresh = FlightSize / 2) or recovery leaves cwnd below the window,
        and the window they wait for never comes whole. An RTO happens whenever this
        process is off the CPU for the node's RTO (200 ms) while data is outstanding (on
        this machine at load 20+ it was: window_of then got 3, 5 or 9 of 10 segments). So
        the node's own counts of those events (stack/counters.c, the process's counters)
        are read before and after; if one moved, the connection is not the one the tests
        need, and slow start is run again on a fresh connection (GROW_ATTEMPTS at most).
        The counters are read before the last ACK, so an RTO between that read and the ACK
        would not show: if the last ACK left more than GROW_GAP_MAX after slow start's last
        one (this process off the CPU), the connection is not trusted either.
        What the tests check starts after grow() returns; nothing they check is retried.
        The node's count of loss probes at that same read, before the fresh window left,
        is kept in tlp_before_window: a probe of the fresh window can leave before grow()
        returns (the PTO is 2 * SRTT, a few ms on this link)."""
        for attempt in range(GROW_ATTEMPTS):
            before = self._cwnd_events()
            una = self._grow_once(acks)
            # Read before the last ACK: the node's fresh window waits for no counter read
            # (a late answer to it draws a loss probe the tests would see).
            after = self._cwnd_events()
            moved = {k: after[k] - before[k] for k in CWND_EVENTS if after[k] != before[k]}
            if not moved:
                self.tlp_before_window = self._tlp_read
                self.peer.rcv_nxt = una
                gap = self.ack(una) - self._last_grow_ack
                if gap <= GROW_GAP_MAX:
                    return una
                moved = {"last ACK late (s)": round(gap, 3)}
            self.peer.abort()
            self.peer = TcpPeer(self.link, self._port, **self._opts)
            self.start()
        assert False, f"slow start had a congestion event in each of {GROW_ATTEMPTS} " \
            f"connections (the last: {moved})"

    def tlp_probes(self):
        """The node's count of RFC 8985 loss probes sent (tcp_tlp_probe)."""
        return self.link.node._process_counters()["tcp_tlp_probe"]

    def _cwnd_events(self):
        c = self.link.node._process_counters()
        self._tlp_read = c["tcp_tlp_probe"]
        return {k: c[k] for k in CWND_EVENTS}

    def _grow_once(self, acks):
        """Slow start proper; returns the end of the data received, not yet acknowledged."""
        una = self.peer.rcv_nxt
        sent = 0
        deadline = time.monotonic() + 10
        while sent < acks and time.monotonic() < deadline:
            got = self.segments(0.03)
            for p in sorted(got, key=lambda q: q[TCP].seq):
                end = (p[TCP].seq + len(p[TCP].payload)) & 0xFFFFFFFF
                if p[TCP].seq == una:
                    una = end
                    self._last_grow_ack = self.ack(una)
                    sent += 1
        assert sent >= acks, f"slow start stalled after {sent} ACKs"
        # Whatever is still in flight, take it all, then open a fresh window.
        for p in self.segments(0.1):
            if p[TCP].seq == una:
                una = (p[TCP].seq + len(p[TCP].payload)) & 0xFFFFFFFF
        return una

    def window_of(self, start, nseg, timeout=1.0):
        """Collect the nseg segments [start, start + nseg * SMSS) the node sends next;
        asserts they come, each SMSS long, at the expected offsets. Returns when the last
        of them arrived (the kernel's stamp, conftest.Link)."""
        seen, last = {}, 0.0
        deadline = time.monotonic() + timeout
        while len(seen) < nseg and time.monotonic() < deadline:
            p = self.segment(max(0.0, deadline - time.monotonic()))
            if p is None:
                break
            off = (p[TCP].seq - start) & 0xFFFFFFFF
            if off >= 0x80000000:
                # Below start: data we acknowledged already, sent again before our ACK
                # arrived (an RFC 8985 loss probe during grow()); not part of the window.
                continue
            seen[off] = len(p[TCP].payload)
            last = max(last, p.time)
        want = {i * SMSS: SMSS for i in range(nseg)}
        assert seen == want, f"expected {nseg} segments of {SMSS} from {start}, got " \
            f"offsets {sorted(seen.items())}"
        return last


def offsets(segs, start):
    """(offset from start, length) of each segment, in arrival order."""
    return [((p[TCP].seq - start) & 0xFFFFFFFF, len(p[TCP].payload)) for p in segs]


def dial(link, timeout=3.0, ts=False, options=""):
    """Ask the node to connect to us (UDP 11, apps/ulsnode.c; options: the request's
    " rcvbuf=N user_timeout=MS" part, set on the node's socket before its connect); returns
    (peer, syn, t) with the node's SYN and the time it arrived. The peer is ready to answer
    with syn_ack()."""
    node = link.node
    port = fresh_port()
    link.send(Ether(src=node.my_mac, dst=node.mac) /
              IP(src=node.my_ip, dst=node.ip) / UDP(sport=port, dport=11) /
              Raw(f"{port}{options}".encode()))
    syn = link.recv(lambda q: IP in q and TCP in q and q[IP].src == node.ip
                    and q[TCP].dport == port and q[TCP].flags.S and not q[TCP].flags.A, timeout)
    t = time.monotonic()
    assert syn is not None, "the node did not dial out"
    peer = TcpPeer(link, syn[TCP].sport, sport=port, mss=SMSS, wscale=None, ts=ts, sack=False)
    peer.irs = syn[TCP].seq
    peer.rcv_nxt = (syn[TCP].seq + 1) & 0xFFFFFFFF
    opts = tcp_opts(syn)
    peer.ts_ok = ts and "Timestamp" in opts
    if "Timestamp" in opts:
        peer.ts_recent = opts["Timestamp"][0]
    return peer, syn, t


def syn_ack(peer):
    """Answer the node's SYN; returns once the node's ACK of our SYN arrived."""
    opts = [("MSS", SMSS)]
    if peer.ts_ok:
        opts.append(("Timestamp", (peer.tsval(), peer.ts_recent)))
    peer.send("SA", options=opts)
    a = peer.recv(3, lambda q: q[TCP].flags.A and q[TCP].ack == peer.snd_nxt)
    assert a is not None, "the node did not acknowledge our SYN-ACK"
    return a
