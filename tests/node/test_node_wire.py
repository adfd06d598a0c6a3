"""Many processes on ulsd nodes, continued from test_node.py: the packets no process owns
(ulsd answers for the node), and segmentation offload between the nodes and the kernel.
Every transfer verifies its bytes (ulsbench's pattern, checked by the receiver).
"""
import errno
import json
import os
import signal
import socket
import subprocess
import time

import pytest

from conftest import BUILD, DATAPATH, HOSTILE, MIB, _alive, _testbed, check_client, server_results
from test_node import TRANSFER_TIMEOUT, delta


# --- 8. packets no process owns -----------------------------------------------------------

def test_ulsd_answers_ping(tb):
    """ICMP echo to the node is answered by ulsd itself (no process owns ICMP echo)."""
    before = tb.counters(1)
    r = subprocess.run(["ip", "netns", "exec", tb.kernel_ns, "ping", "-c", "3", "-i", "0.2", "-W", "1",
                        tb.ip(1)], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stdout + r.stderr
    assert delta(before, tb.counters(1), "icmp_echo_replies") >= 3


def refused_from_kernel_peer(tb, script, port, name, counter):
    """Runs `script` on the kernel peer against node 1's `port`, where nothing listens: it
    must print ECONNREFUSED's number, and node 1's `counter` (what it answered) must grow."""
    before = tb.counters(1)
    p = tb.kernel_python(script, tb.ip(1), port, name=name)
    assert p.wait(15) == 0, p.stderr()
    assert p.stdout().strip() == str(errno.ECONNREFUSED), p.stdout()
    assert delta(before, tb.counters(1), counter) >= 1


CONNECT_CLOSED = r"""
import socket, sys
s = socket.socket()
s.settimeout(5)
try:
    s.connect((sys.argv[1], int(sys.argv[2])))
    print("connected")
except OSError as e:
    print(e.errno)
"""


def test_tcp_connect_to_closed_port_is_refused_with_rst(tb):
    """A SYN to a port no process holds is answered with RST (RFC 9293 §3.10.7.1): the
    kernel peer's connect fails with ECONNREFUSED and rst_sent grows."""
    refused_from_kernel_peer(tb, CONNECT_CLOSED, 6999, "connect-closed", "rst_sent")


UDP_CLOSED = r"""
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect((sys.argv[1], int(sys.argv[2])))
s.settimeout(3)
s.send(b"anyone?")
try:
    s.recv(100)
    print("reply")
except OSError as e:
    print(e.errno)
"""


def test_udp_datagram_to_closed_port_gets_port_unreachable(tb):
    """A datagram to a UDP port no process holds gets ICMP port unreachable (RFC 1122
    §3.2.2.1): the kernel peer's connected UDP socket gets ECONNREFUSED."""
    refused_from_kernel_peer(tb, UDP_CLOSED, 6998, "udp-closed", "icmp_unreach_sent")


UDP_ECHO_ULSRUN = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", int(sys.argv[1])))
print("ready", flush=True)
for _ in range(int(sys.argv[2])):
    d, a = s.recvfrom(65536)
    s.sendto(d, a)
"""

UDP_BIG_CLIENT = r"""
import os, socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
for n in (3000, 20000, 65507):
    d = os.urandom(n)
    s.sendto(d, (sys.argv[1], int(sys.argv[2])))
    r, _ = s.recvfrom(65536)
    print(n, "same" if r == d else "differs", flush=True)
"""


def test_fragmented_udp_datagrams_from_kernel_peer_reach_the_process_and_verify(tb):
    """IPv4 reassembly for processes (RFC 791 §3.2, server/reass.c): a Linux peer sends
    UDP datagrams of 3000, 20000 and 65507 octets (the kernel fragments them at MTU 1500:
    up to 45 fragments) to a python echo server under ulsrun on node 1; each echo comes back
    with the same bytes. ulsd collected each datagram once (reass_datagrams) and dropped no
    fragment; on the direct path its fragments reached the process through the kernel's
    steering (dp_frag), on the relay through its ring."""
    port = 6290
    ulsrun = os.path.join(BUILD, "apps", "ulsrun")
    before = tb.counters(1)
    srv = tb.start([ulsrun, "--ctl", tb.ctl(1), "--", "/usr/bin/python3", "-c", UDP_ECHO_ULSRUN,
                    str(port), "3"], name="udp-echo")
    deadline = time.monotonic() + 10
    while "ready" not in srv.stdout() and time.monotonic() < deadline and srv.poll() is None:
        time.sleep(0.05)
    assert "ready" in srv.stdout(), srv.stderr()
    cl = tb.kernel_python(UDP_BIG_CLIENT, tb.ip(1), port, name="udp-big")
    assert cl.wait(30) == 0, cl.stdout() + cl.stderr()
    assert cl.stdout().split("\n")[:3] == ["3000 same", "20000 same", "65507 same"], cl.stdout()
    assert srv.wait(10) == 0, srv.stderr()
    after = tb.counters(1)
    assert delta(before, after, "reass_datagrams") == 3
    assert delta(before, after, "reass_fragments") == 3 + 14 + 45
    for k in ("drop_fragment_reass", "drop_reass_unsteered", "reass_for_node"):
        assert delta(before, after, k) == 0, k
    assert after["reass_bytes_held"] == 0
    # The echo server's lease took the suite's data path.
    assert delta(before, after, "leases_direct" if DATAPATH == "direct" else "leases_relay") == 1


# --- 9. segmentation offload --------------------------------------------------------------

def restart_ulsd(tb, node, offload):
    """Stop node `node`'s ulsd (TERM, by its PID) and start it again the same way, with
    `--offload on` (True), `--offload off` (False), `--offload csum` ("csum") or without
    the option (None: the default, on; csum with ULS_TSO=0)."""
    argv = tb.ulsd_cmdline(node)
    while "--offload" in argv:
        i = argv.index("--offload")
        del argv[i:i + 2]
    if offload is not None:
        argv += ["--offload", offload if isinstance(offload, str) else "on" if offload else "off"]
    pid = tb.ulsd_pid(node)
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 5
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.02)
    tb.start_ulsd(node, argv)
    assert ("--offload" in tb.ulsd_cmdline(node)) == (offload is not None)


def _nodes_with(tb, offload):
    n = len(tb.procs)
    try:
        for node in (1, 2):
            restart_ulsd(tb, node, offload)
        yield tb
    finally:
        for p in tb.procs[n:]:   # this test's processes, before their nodes go away
            p.kill()
        for node in (1, 2):
            restart_ulsd(tb, node, None)


@pytest.fixture
def offload_nodes(tb):
    """Both nodes' ulsd with `--offload on` for one test, back to the default afterwards."""
    yield from _nodes_with(tb, True)


@pytest.fixture
def plain_nodes(tb):
    """Both nodes' ulsd with `--offload off` for one test, back to the default afterwards."""
    yield from _nodes_with(tb, False)


@pytest.fixture
def csum_nodes(tb):
    """Both nodes' ulsd with `--offload csum` for one test, back to the default afterwards."""
    yield from _nodes_with(tb, "csum")


def run_offload_pairs(tb, npairs, nbytes, base_port, direction, env=None):
    """npairs concurrent streams between their own processes on node 1 (clients, `direction`
    as ulsbench's --dir) and node 2 (servers); every stream verified by its receiver."""
    servers = [tb.server(2, base_port + i, count=1) for i in range(npairs)]
    clients = [tb.client(1, f"{tb.ip(2)}:{base_port + i}", nbytes, direction, name=f"gso{i}", env=env)
               for i in range(npairs)]
    for c in clients:
        check_client(c, TRANSFER_TIMEOUT)
    if direction == "send":
        for r in server_results_all(servers):
            assert r["bytes"] == nbytes, r
    for s in servers:
        assert s.wait(10) == 0, s.stderr()


def server_results_all(servers):
    return [r for s in servers for r in server_results(s, 1)]


# What a node's processes sent and received, on the suite's path: ulsd's own counters on the
# relay; on the direct path the kernel's, per queue, summed over the node's processes.
SENT = {"relay": "frames_sent", "direct": "direct_tx_passed"}
GSO_SENT = {"relay": "frames_gso_sent", "direct": "direct_tx_passed_gso"}
GSO_RECEIVED = {"relay": "frames_gso_received", "direct": "direct_steered_gso"}
# Frames refused for their offload or size: the relay's checks, and the kernel's (size).
OFFLOAD_DROPS = ("drop_tx_bad_offload", "drop_rx_bad_vnet", "direct_tx_dropped.size")


def cdelta(before, after, key):
    """A counter's growth; a counter this ulsd does not have (direct_* on the relay) is 0."""
    return after.get(key, 0) - before.get(key, 0)


def test_offload_concurrent_64mib_streams_both_ways_verify_and_move_as_super_segments(offload_nodes):
    """With `ulsd --offload on` at both nodes (TSO/GSO through the TAP's virtio-net header),
    eight processes stream 64 MiB each from node 1 to node 2 at once, then eight from node 2
    to node 1: every byte verified, and node 1 sends super-segments (frames_gso_sent; on
    the direct path the transmit check's direct_tx_passed_gso) that node 2 receives whole
    (frames_gso_received; direct_steered_gso), and back, with no bad offload header.

    The regression this guards: a super-segment carrying the FIN, split to fit the window,
    kept the FIN on its head (lwIP patch 0007), so about one transfer in six ended 0.5-9 KiB
    short. Sixteen TSO senders each end their stream with a FIN on a super-segment (with
    six pairs each way, one run in four of this test failed before the fix)."""
    tb = offload_nodes
    sent, received = GSO_SENT[DATAPATH], GSO_RECEIVED[DATAPATH]
    c1, c2 = tb.counters(1), tb.counters(2)
    run_offload_pairs(tb, 8, 64 * MIB, 6700, "send")
    d1, d2 = tb.counters(1), tb.counters(2)
    assert cdelta(c1, d1, sent) > 0, d1
    assert cdelta(c2, d2, received) > 0, d2
    run_offload_pairs(tb, 8, 64 * MIB, 6710, "recv")
    e1, e2 = tb.counters(1), tb.counters(2)
    assert cdelta(d2, e2, sent) > 0, e2
    assert cdelta(d1, e1, received) > 0, e1
    for c0, c in ((c1, e1), (c2, e2)):
        for k in OFFLOAD_DROPS:
            assert cdelta(c0, c, k) == 0, (k, c)


def test_without_offload_concurrent_64mib_streams_verify_as_wire_sized_frames(plain_nodes):
    """With `ulsd --offload off` (a plain TAP, no virtio-net header) 4 concurrent 64 MiB
    streams each way verify, at least 256 MiB / 1514 frames leave node 1 (frames_sent;
    direct: direct_tx_passed), and no super-segment is sent or received: the path every
    frame took before offloads, still whole."""
    wire_sized_streams_both_ways(plain_nodes, 6740)


def wire_sized_streams_both_ways(tb, base_port):
    """4 concurrent 64 MiB streams from node 1 to node 2, then 4 back, every byte verified:
    at least 256 MiB / 1514 frames leave node 1, and no super-segment is sent or received,
    no frame refused for its offload or size at either node."""
    c1, c2 = tb.counters(1), tb.counters(2)
    run_offload_pairs(tb, 4, 64 * MIB, base_port, "send")
    m1 = tb.counters(1)
    # 256 MiB left node 1 in frames of at most 1514 bytes, not in super-segments
    assert cdelta(c1, m1, SENT[DATAPATH]) >= 4 * 64 * MIB // 1514, m1
    run_offload_pairs(tb, 4, 64 * MIB, base_port + 10, "recv")
    d1, d2 = tb.counters(1), tb.counters(2)
    for c0, c in ((c1, d1), (c2, d2)):
        for k in (*GSO_SENT.values(), *GSO_RECEIVED.values(), *OFFLOAD_DROPS):
            assert cdelta(c0, c, k) == 0, (k, c)


def tap_features(tb, node):
    """`ethtool -k` of node `node`'s TAP: {feature: "on"/"off"}."""
    r = subprocess.run(["ip", "netns", "exec", tb.env["TB_NETNS"], "ethtool", "-k",
                        tb.env[f"TB_NODE{node}_TAP"]], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    return dict((k.strip(), v.split()[0]) for k, v in
                (line.split(":", 1) for line in r.stdout.splitlines()[1:] if ":" in line) if v.split())


def test_checksum_offload_alone_streams_wire_sized_frames_the_receiver_does_not_sum(csum_nodes):
    """With `ulsd --offload csum` at both nodes (a TAP with checksum offload and no TSO, as
    a NIC after `ethtool -K tso off gso off`): the TAP says so, 4 concurrent 64 MiB streams
    each way verify as wire-sized frames (no super-segment sent or received, at least
    256 MiB / 1514 frames from node 1, no offload drop), and a receiving process sums no
    segment's checksum: every one arrived partial from a sender on this machine
    (rx_csum_offloaded counts them; 0 on a node without offloads)."""
    tb = csum_nodes
    for node in (1, 2):
        feat = tap_features(tb, node)
        assert feat["tx-checksumming"] == "on", feat
        assert feat["tcp-segmentation-offload"] == "off", feat
    wire_sized_streams_both_ways(tb, 6760)
    nbytes = 16 * MIB
    rx = tb.server(2, 6780, count=1, env={"ULSBENCH_COUNTERS": "1"})
    check_client(tb.client(1, f"{tb.ip(2)}:6780", nbytes, "send", name="csum-rx"),
                 TRANSFER_TIMEOUT)
    assert rx.wait(10) == 0, rx.stderr()
    got = server_counters(rx)
    assert got.get("rx_csum_offloaded", 0) >= nbytes // 1448, got


def hostile_super_segments(tb, n, refused):
    """A hostile process on node 1 writes n TCP super-segments from its own port into its
    transmit path (tests/node/hostile.c gso): node 1 must have refused `refused` of them
    and let the rest out as super-segments."""
    before = tb.counters(1)
    h = tb.start([HOSTILE, tb.ctl(1), "gso", tb.kernel_ip, "9", str(n)], name="hostile-gso")
    assert h.wait(30) == 0, h.stderr()
    assert f"queued {n}" in h.stdout(), (h.stdout(), h.stderr())
    after = tb.counters(1)
    moved = {k: cdelta(before, after, k) for k in after if cdelta(before, after, k)}
    assert cdelta(before, after, GSO_REFUSED[DATAPATH]) == refused, moved
    assert cdelta(before, after, GSO_SENT[DATAPATH]) == n - refused, moved


# Where a node counts a process's super-segment that it let out, and one it refused.
GSO_REFUSED = {"relay": "drop_tx_bad_offload", "direct": "direct_tx_dropped.size"}


def test_checksum_offload_alone_refuses_a_processs_super_segments(csum_nodes):
    """On a node with `ulsd --offload csum` the TAP takes no super-segment, so a process
    that writes them anyway (its own device told otherwise: tests/node/hostile.c) has all
    N refused and counted: by ulsd's relay (drop_tx_bad_offload), or by the kernel's
    transmit check on the direct path (direct_tx_dropped.size). None leaves as one
    (frames_gso_sent, direct_tx_passed_gso). The positive control is the next test."""
    hostile_super_segments(csum_nodes, 20, refused=20)


def test_offload_node_lets_a_processs_super_segments_out(offload_nodes):
    """The control for the test above: with `ulsd --offload on` the same N super-segments
    from the same hostile process all leave as super-segments, none refused."""
    hostile_super_segments(offload_nodes, 20, refused=0)


def test_offload_node_serves_a_sender_with_tso_off(offload_nodes):
    """A process with ULS_TSO=0 on an offload node sends wire-sized segments (its node
    sends no super-segment meanwhile) and its 64 MiB stream to a TSO process on the other
    node verifies; so does a TSO sender's stream to a receiver with ULS_TSO=0."""
    tb = offload_nodes
    c1 = tb.counters(1)
    run_offload_pairs(tb, 2, 64 * MIB, 6720, "send", env={"ULS_TSO": "0"})
    d1 = tb.counters(1)
    assert cdelta(c1, d1, GSO_SENT[DATAPATH]) == 0, d1
    assert cdelta(c1, d1, SENT[DATAPATH]) >= 2 * 64 * MIB // 1514, d1
    run_offload_pairs(tb, 2, 64 * MIB, 6730, "recv", env={"ULS_TSO": "0"})
    e1 = tb.counters(1)
    for k in OFFLOAD_DROPS:
        assert cdelta(d1, e1, k) == 0, (k, e1)


def server_counters(p):
    """The stack counters a ulsbench server run with ULSBENCH_COUNTERS=1 printed at exit."""
    for line in p.stderr().splitlines():
        if line.startswith("ulsbench server: counters "):
            return json.loads(line[len("ulsbench server: counters "):])
    raise AssertionError(f"{p.name}: no counters: {p.stderr()}")


def sender_counters_under_loss(tb, port, nbytes, name):
    """node 2's server (ulsbench) sends nbytes to node 1's client (`name`) under 1% random
    loss at the bridge (testbed impair), verified: the sender's libuls counters."""
    _testbed("impair", "--loss", "1")
    try:
        tx = tb.server(2, port, count=1, env={"ULSBENCH_COUNTERS": "1"})
        check_client(tb.client(1, f"{tb.ip(2)}:{port}", nbytes, "recv", name=name),
                     TRANSFER_TIMEOUT)
        assert tx.wait(10) == 0, tx.stderr()
    finally:
        _testbed("unimpair")
    return server_counters(tx)


def test_offload_sender_resends_a_lost_super_segment_in_few_frames(offload_nodes):
    """RFC 6675 §5 (C): "If cwnd - pipe >= 1 SMSS, the sender SHOULD transmit one or more
    segments", and (C.5) goes on while cwnd - pipe >= 1 SMSS. With offload a lost frame is
    a super-segment (up to 45 wire segments), so a SACK recovery's hole is many wire
    segments; as many of them as cwnd - pipe allows leave as one super-segment (lwIP patch
    0103), not one frame each. A 64 MiB stream from node 2's process under 1% random
    loss at the bridge (testbed impair) verifies, and its sender's retransmissions in
    recovery (tcp_rexmit_in_recovery, one per frame resent) are at most 8 per SACK
    recovery (tcp_recovery_sack): before patch 0103, 370 in 10 recoveries at 1% (about 44
    per recovery at 0.1%); with it, 26 in 10, and up to 61 in 15 seen at load, where more
    holes fall in one recovery (4 per recovery was too tight a bound)."""
    c = sender_counters_under_loss(offload_nodes, 6766, 64 * MIB, "loss-recv")
    rec, rxt = c.get("tcp_recovery_sack", 0), c.get("tcp_rexmit_in_recovery", 0)
    assert rec >= 3, f"only {rec} SACK recoveries at 1% loss: {c}"
    assert rxt <= 8 * rec, f"{rxt} retransmissions in {rec} SACK recoveries: {c}"


def test_offload_sender_finds_most_losses_without_a_loss_probe(offload_nodes):
    """RFC 6675 §4 IsLost () and RFC 8985 §6.2 find a lost segment from the SACKs of
    segments sent after it; a segment with nothing sent after it is found only by a loss
    probe (RFC 8985 §7: a PTO of at least 2 ms here) and, if the probe or its ACK is lost
    too, by the 200 ms RTO. With offload and 1% random frame loss CUBIC's window is one
    super-segment and a part, and outside recovery lwIP held the part back until half
    the window was free (patch 0087): one frame alone in flight, so about half the losses
    were tails. With one segment in flight the part that fits now goes at once (patch
    0136). A 256 MiB stream from node 2's process under 1% loss verifies, and at most a
    quarter of its SACK recoveries began with a loss found by a probe (tcp_rack_tail_lost):
    0.37-0.50 of them without 0136 (four 3-s streams), 0.08-0.12 with it."""
    c = sender_counters_under_loss(offload_nodes, 6769, 256 * MIB, "tail-loss-recv")
    rec, tail = c.get("tcp_recovery_sack", 0), c.get("tcp_rack_tail_lost", 0)
    assert rec >= 10, f"only {rec} SACK recoveries at 1% loss: {c}"
    assert 4 * tail <= rec, f"{tail} of {rec} SACK recoveries found by a loss probe: {c}"


def test_plain_sender_retransmits_no_more_than_one_wire_segment(plain_nodes):
    """RFC 9293 §3.7.1: the data in a segment is at most Eff.snd.MSS = "min(SendMSS+20,
    MMS_S) - TCPhdrsize - IPoptionsize", where TCPhdrsize counts the TCP options. Without
    offload, a SACK recovery's retransmission (lwIP patch 0103 lets one span consecutive
    queued segments) carried the MSS in data plus the 12-byte timestamp option: 1,512-byte
    datagrams that lwIP cut into two IP fragments, each one more frame to lose and to
    reassemble. A 16 MiB stream from node 2's process under 1% random loss verifies, its
    sender retransmits in recovery, and it sends no IP fragment (ipfrag_xmit)."""
    c = sender_counters_under_loss(plain_nodes, 6768, 16 * MIB, "plain-loss-recv")
    assert c.get("tcp_rexmit_in_recovery", 0) >= 3, f"too few retransmissions to judge: {c}"
    assert c.get("ipfrag_xmit", 0) == 0, f"retransmissions fragmented: {c}"


def test_direct_path_moves_large_frames_without_a_copy_both_ways(tb):
    """Issue 12 item 5, "frames straight into pbufs": on the direct path (offload on, the
    default) a process receiving a 64 MiB stream keeps at least half of its super-segments
    where the kernel read them (rx_frames_in_place, the device's dev_rx_lent), and a
    process sending one writes its segments from lwIP's pbufs (tx_frames_gathered,
    dev_tx_gather) instead of copying them; both streams verified. On the relay neither
    happens (its rings are copied both ways), which is the control that the counters do
    count only the direct path's in-place frames."""
    env = {"ULSBENCH_COUNTERS": "1"}
    rx = tb.server(2, 6760, count=1, env=env)
    check_client(tb.client(1, f"{tb.ip(2)}:6760", 64 * MIB, "send", name="zc-send"),
                 TRANSFER_TIMEOUT)
    (res,) = server_results(rx, 1)
    assert res["bytes"] == 64 * MIB, res
    assert rx.wait(10) == 0, rx.stderr()
    tx = tb.server(2, 6761, count=1, env=env)
    check_client(tb.client(1, f"{tb.ip(2)}:6761", 64 * MIB, "recv", name="zc-recv"),
                 TRANSFER_TIMEOUT)
    assert tx.wait(10) == 0, tx.stderr()
    crx, ctx = server_counters(rx), server_counters(tx)
    if DATAPATH == "direct":
        # a super-segment carries up to 64 KiB: 1,024 of them hold 64 MiB
        assert crx.get("rx_frames_in_place", 0) >= 512, crx
        assert crx.get("dev_rx_lent", 0) == crx.get("rx_frames_in_place", 0), crx
        assert ctx.get("tx_frames_gathered", 0) >= 512, ctx
        assert ctx.get("dev_tx_gather", 0) == ctx.get("tx_frames_gathered", 0), ctx
    else:
        for c in (crx, ctx):
            for k in ("rx_frames_in_place", "dev_rx_lent", "tx_frames_gathered", "dev_tx_gather"):
                assert c.get(k, 0) == 0, (k, c)


def test_direct_path_receives_by_one_multishot_read_else_by_reads_per_slot(tb):
    """Issues 12 and 14: on the direct path a process's frames come by one multishot read of
    its queue (IORING_OP_READ_MULTISHOT from buffers it provides, netif/qring.c): every
    frame of a 16 MiB stream is one completion of it (dev_rx_mshot_cqes at least the
    frames delivered, dev_rx_frames) and none comes by a read of its own
    (dev_rx_read_cqes 0). The read stays armed; it is armed again only after it ended
    (ENOBUFS, an error, or cancelled): arms are its ends, or one more. The control,
    ULS_RX_MULTISHOT=0: the same stream comes by one read per slot (dev_rx_read_cqes),
    none by the multishot read. The multishot read is the default (stop 37: one task work
    per frame and nothing re-armed, 1-byte round trips 2-3 us shorter): without the
    variable the stream comes as with ULS_RX_MULTISHOT=1. On the relay neither counter
    moves (no io_uring)."""
    got = {}
    for mode, port in (("1", 6762), ("0", 6763), ("default", 6767)):
        env = {"ULSBENCH_COUNTERS": "1"}
        if mode != "default":
            env["ULS_RX_MULTISHOT"] = mode
        rx = tb.server(2, port, count=1, env=env)
        check_client(tb.client(1, f"{tb.ip(2)}:{port}", 16 * MIB, "send",
                               name=f"mshot-{mode}"), TRANSFER_TIMEOUT)
        (res,) = server_results(rx, 1)
        assert res["bytes"] == 16 * MIB, res
        assert rx.wait(10) == 0, rx.stderr()
        c = server_counters(rx)
        got[mode] = {k: c.get(k, 0) for k in (
            "dev_rx_frames", "dev_rx_read_cqes", "dev_rx_mshot_cqes", "dev_rx_mshot_arms",
            "dev_rx_mshot_ends", "dev_rx_mshot_nobufs", "dev_rx_mshot_refused",
            "dev_rx_reads_replaced", "dev_rx_reads_taken_over")}
    on, off, dflt = got["1"], got["0"], got["default"]
    if DATAPATH == "direct":
        assert 0 < dflt["dev_rx_frames"] <= dflt["dev_rx_mshot_cqes"], dflt
        assert dflt["dev_rx_read_cqes"] == 0 and dflt["dev_rx_mshot_refused"] == 0, dflt
        assert on["dev_rx_frames"] > 0 and on["dev_rx_mshot_cqes"] >= on["dev_rx_frames"], on
        assert on["dev_rx_read_cqes"] == 0 and on["dev_rx_mshot_refused"] == 0, on
        # armed once at the lease's start, then once after each end, or in place of a
        # read whose submitting thread exited or that a thread about to wait took over
        # from another (their ends are cancellations, counted with the replaced and the
        # taken-over reads: dev_rx_reads_replaced, dev_rx_reads_taken_over, which also
        # count the wake-up's); still armed or not at exit (arms 4, ends 2 in a run of
        # stop 34)
        extra = on["dev_rx_mshot_arms"] - on["dev_rx_mshot_ends"]
        assert 0 <= extra <= (1 + on["dev_rx_reads_replaced"]
                              + on["dev_rx_reads_taken_over"]), on
        assert on["dev_rx_mshot_ends"] >= on["dev_rx_mshot_nobufs"], on
        assert off["dev_rx_read_cqes"] >= off["dev_rx_frames"] > 0, off
        assert off["dev_rx_mshot_cqes"] == 0 and off["dev_rx_mshot_arms"] == 0, off
    else:
        for c in (on, off, dflt):
            for k in ("dev_rx_read_cqes", "dev_rx_mshot_cqes", "dev_rx_mshot_arms"):
                assert c[k] == 0, (k, c)


def test_direct_process_that_moved_little_made_few_receive_buffers(tb):
    """Issue 12, a process's first megabytes: receive buffers follow the traffic. A process
    that received 64 KiB made (and faulted in) a few of its device's 64 KiB buffers, with
    either receive (one read per slot, or the multishot read): each slot gets its buffer
    when first armed, 2 reads stay in flight while frames come few at a time, the multishot
    read's ring starts with 4. Before, all 64 were made at open (dev_rx_buffers 64). On the
    relay the process reads frames from ulsd's ring and makes none."""
    for mode, port in (("0", 6764), ("1", 6765)):
        env = {"ULSBENCH_COUNTERS": "1", "ULS_RX_MULTISHOT": mode}
        rx = tb.server(2, port, count=1, env=env)
        check_client(tb.client(1, f"{tb.ip(2)}:{port}", 64 * 1024, "send",
                               name=f"little-{mode}"), TRANSFER_TIMEOUT)
        (res,) = server_results(rx, 1)
        assert res["bytes"] == 64 * 1024, res
        assert rx.wait(10) == 0, rx.stderr()
        c = server_counters(rx)
        assert c.get("dev_rx_frames", 0) > 0, c
        if DATAPATH == "direct":
            assert 1 <= c.get("dev_rx_buffers", 0) <= 16, (mode, c.get("dev_rx_buffers"))
        else:
            assert c.get("dev_rx_buffers", 0) == 0, (mode, c.get("dev_rx_buffers"))


def test_ulsd_refuses_rings_already_enabled_or_with_files_or_restrictions(tb):
    """Issue 12 item 4: "ulsd refuses a ring that was already enabled or had files or
    restrictions registered." A hostile process offers HELLO rings of which the receive or
    the transmit ring was enabled, given restrictions of its own (NOP only), or given a
    file of its own before it offered them: each lease falls back to the relay, counted
    (direct_refused, 6 of 6). Refused at the transmit ring, the receive ring that ulsd
    had taken first never reaches the queue: the process can enable it itself (it was not
    yet restricted) but a write to fixed file 0 fails, and ulsd renews the queue it had
    registered (dp_queues_recycled), so that a read the process slipped in meanwhile could
    not get the next owner's frames. The control: untouched rings get the direct path."""
    before = tb.counters(1)
    refused = {}
    for kind in ("enabled", "restricted", "files"):
        for which in (0, 1):
            refused[(kind, which)] = tb.hostile(1, "badring", kind, which)
    control = tb.hostile(1, "badring", "none", 0)
    after = tb.counters(1)
    if DATAPATH == "direct":
        assert "datapath direct" in control, control
        for k, out in refused.items():
            assert "datapath relay" in out, (k, out)
            if k[1] == 1:
                write = int(out.split("queue_write ")[1].split()[0])
                assert write < 0, (k, out)
        assert delta(before, after, "direct_refused") == 6, after
        assert delta(before, after, "dp_queues_recycled") >= 3, (refused, after)
    else:
        for out in (*refused.values(), control):
            assert "datapath relay" in out, out
        assert delta(before, after, "direct_refused") == 0, after
