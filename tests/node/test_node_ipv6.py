"""IPv6 on ulsd nodes (issue 17): the transmit check and the steering keep processes apart
for IPv6 as for IPv4 (filter/datapath.bpf.c on the direct path, ulsd's filter on the
relay).

No process on a ulsd node holds an IPv6 endpoint yet (the control protocol's v3 brings
them), so these cases forge IPv6 frames from a process holding IPv4 endpoints (hostile
spoof6) and send IPv6 to the nodes from the kernel peer. The steering program's IPv6
rules are checked against the filter table in tests/unit/test_datapath6.
"""
import os
import signal
import subprocess
import time

import pytest

from conftest import (DATAPATH, check_client, counters_once, frames_moved, hostile_lease,
                      server_results, spy_counts, start_listen_spy, tx_dropped)

COUNT = 10
TRANSFER_TIMEOUT = 120


def delta(before, after, key):
    return after.get(key, 0) - before.get(key, 0)


@pytest.fixture
def ip6(tb):
    if "TB_NODE1_IP6" not in tb.env:
        pytest.skip("the testbed has no IPv6 (testbed up --ipv6)")
    return tb.env


def test_forged_ipv6_frames_are_dropped_and_counted_by_reason(tb, ip6):
    """A process writes COUNT IPv6 frames of each forgery: a source that is not the node's
    address, the node's address from a port it holds for IPv4 only, Next Header 47, a Router
    Advertisement, and a Neighbor Solicitation naming another's link-layer address. Each
    is dropped and counted: src_ip, port, proto, icmp (twice COUNT), on the direct path by
    the kernel's transmit check and on the relay by ulsd's filter (flt_check_tx). The
    control (COUNT echo requests from the node's address) passes on the direct path, so
    the drops are the check's and not a broken writer's."""
    before = tb.counters(1)
    out = tb.hostile(1, "spoof6", COUNT, ip6["TB_NODE1_IP6"], ip6["TB_KERNEL_IP6"], 5001)
    lines = dict(line.split()[1:] for line in out.splitlines() if line.startswith("queued"))
    assert lines == {k: str(COUNT) for k in ("src_ip", "port", "proto", "icmp", "nd", "control")}, out
    want = {"src_ip": COUNT, "port": COUNT, "proto": COUNT, "icmp": 2 * COUNT}
    after = counters_once(tb, 1, lambda c: all(tx_dropped(before, c, r) >= k
                                               for r, k in want.items()))
    if DATAPATH == "direct":
        got = {r: tx_dropped(before, after, r) for r in ("src_ip", "port", "proto", "icmp")}
        assert got == {"src_ip": COUNT, "port": COUNT, "proto": COUNT, "icmp": 2 * COUNT}, got
        assert delta(before, after, "direct_tx_dropped") == 5 * COUNT
        assert delta(before, after, "direct_tx_passed") >= COUNT
    else:
        got = {r: tx_dropped(before, after, r) for r in ("src_ip", "port", "proto", "icmp")}
        assert got == {"src_ip": COUNT, "port": COUNT, "proto": COUNT, "icmp": 2 * COUNT}, got


PING6 = r"""
import socket, struct, sys, time
dst, n, port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
# Echo requests (RFC 4443 §4.1) through the kernel's ICMPv6 datagram socket, and UDP and
# TCP SYNs to a port a process holds for IPv4: none of it is any process's.
# A raw socket (the kernel sums ICMPv6 itself, RFC 3542 §3.1): it sees every ICMPv6
# message for the peer, so it waits for the reply with this sequence number.
s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
s.settimeout(0.5)
u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
got = 0
for i in range(n):
    s.sendto(struct.pack("!BBHHH", 128, 0, 0, 0x5a5a, i) + b"x" * 32, (dst, 0))
    u.sendto(b"y" * 64, (dst, port))
    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        try:
            m = s.recv(2048)
        except OSError:
            break
        if m[0] == 129 and m[4:8] == struct.pack("!HH", 0x5a5a, i):
            got += 1
            break
    t = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    t.settimeout(0.5)
    try:
        t.connect((dst, port))
    except OSError:
        pass
    t.close()
    time.sleep(0.01)
print("replies", got, flush=True)
"""


def test_no_process_receives_ipv6_frames_meant_for_the_node(tb, ip6):
    """While a process on node 2 counts every frame delivered to it (its queue, or its ring)
    and a process on node 2 streams IPv4 from node 1, the kernel peer sends node 2 40 echo
    requests, 40 UDP datagrams and 40 TCP SYNs over IPv6 to the port the stream's server
    holds for IPv4. The counting process sees no IPv6 frame (ARP at most), the IPv4
    stream is verified, and ulsd answered the echo requests (so IPv6 reached the node)."""
    port = 6620
    srv = tb.server(2, port, count=1)
    spy = start_listen_spy(tb, 2, 4, "hostile-listen6")
    hostile_lease(spy.stderr())
    before = tb.counters(2)
    victim = tb.client(1, f"{tb.ip(2)}:{port}", 64 << 20, "send", name="victim6")
    pinger = tb.kernel_python(PING6, ip6["TB_NODE2_IP6"], 40, port, name="kping6")
    assert pinger.wait(60) == 0, pinger.stderr()
    assert spy.wait(10) == 0, spy.stderr()
    during = tb.counters(2)
    check_client(victim, TRANSFER_TIMEOUT)
    server_results(srv, 1)
    frames, tcp, arp = spy_counts(spy)
    assert tcp == 0 and frames == arp, spy.stdout()
    replies = int(pinger.stdout().split()[1])
    assert replies >= 30, pinger.stdout()
    assert frames_moved(before, during) > 100, (before, during)


def _dad_done(tb, node, log_from, timeout=10.0):
    """Wait for ulsd's duplicate address detection to end (its log line after offset
    log_from: done, or a duplicate) and return ulsd's counters then."""
    path = os.path.join(tb.daemon_dir, f"ulsd{node}.log")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(path, errors="replace") as f:
            f.seek(log_from)
            text = f.read()
        if "duplicate address detection done" in text or "duplicate IPv6 address" in text:
            return tb.counters(node), text
        time.sleep(0.05)
    raise AssertionError(f"no end of duplicate address detection in ulsd's log:\n{text}")


def _restart_ulsd(tb, node, argv):
    pid = tb.ulsd_pid(node)
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while tb.ulsd_pid(node) == pid and time.monotonic() < deadline:
            time.sleep(0.05)
    log_from = os.path.getsize(os.path.join(tb.daemon_dir, f"ulsd{node}.log"))
    tb.start_ulsd(node, argv)
    return log_from


def test_duplicate_address_detection_reports_a_kernel_peer_with_the_node_address(tb, ip6):
    """RFC 4862 §5.4, optimistic (RFC 4429): a starting ulsd solicits each of its two IPv6
    addresses once from :: and, unanswered for RetransTimer, logs them unique. Started
    again while the kernel peer also has node 1's address (added without its own
    detection), it logs the duplicate with the address and counts it (nd_dad_duplicate 1,
    nd_address_conflict); with the address gone from the peer, the next start is clean
    again. Its own solicitations never count as another node's (on the direct path the
    transmit check once sent them back to ulsd)."""
    argv = tb.ulsd_cmdline(1)
    addr = ip6["TB_NODE1_IP6"]
    kif = next(line.split()[0].split("@")[0] for line in subprocess.run(
        ["ip", "-n", tb.kernel_ns, "-br", "link"], capture_output=True, text=True,
        check=True).stdout.splitlines() if not line.startswith("lo "))
    added = False
    try:
        log_from = _restart_ulsd(tb, 1, argv)
        c, log = _dad_done(tb, 1, log_from)
        assert "duplicate address detection done" in log, log
        assert c["nd_dad_solicits_sent"] == 2 and c["nd_dad_duplicate"] == 0, c
        subprocess.run(["ip", "-n", tb.kernel_ns, "addr", "add", f"{addr}/128", "dev", kif,
                        "nodad"], check=True)
        added = True
        log_from = _restart_ulsd(tb, 1, argv)
        c, log = _dad_done(tb, 1, log_from)
        assert f"duplicate IPv6 address {addr} " in log, log
        assert c["nd_dad_duplicate"] == 1 and c["nd_address_conflict"] >= 1, c
        subprocess.run(["ip", "-n", tb.kernel_ns, "addr", "del", f"{addr}/128", "dev", kif],
                       check=True)
        added = False
        log_from = _restart_ulsd(tb, 1, argv)
        c, log = _dad_done(tb, 1, log_from)
        assert "duplicate address detection done" in log, log
        assert c["nd_dad_duplicate"] == 0, c
    finally:
        if added:
            subprocess.run(["ip", "-n", tb.kernel_ns, "addr", "del", f"{addr}/128", "dev", kif])
        if not tb.ulsd_alive(1):
            tb.start_ulsd(1, argv)
