"""Many processes on ulsd nodes: concurrency, isolation, robustness and cleanup.

Each process on a node runs its own lwIP stack and reaches the wire only through the rings
that node's ulsd gives it. These tests show what that organisation promises: data moves
without the connection server on the per-packet path, a process can neither take nor forge
nor overhear another's traffic, a malformed control message or a crash harms nobody else,
and ulsd answers for packets that no process owns. Every transfer verifies its bytes
(ulsbench's pattern, checked by the receiver).
"""
import errno
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

from conftest import HOSTILE, KERNEL_SINK_PORT, MIB, _alive, check_client, server_results

TRANSFER_TIMEOUT = 120
BIG = 256 * MIB


def delta(before, after, key):
    return after[key] - before[key]


def run_pairs(tb, npairs, nbytes, base_port):
    """npairs concurrent streams, each from its own process on node 1 to its own receiver
    process on node 2. Returns (wall seconds, total bytes); every stream verified on both
    ends."""
    servers = [tb.server(2, base_port + i, count=1) for i in range(npairs)]
    t0 = time.monotonic()
    clients = [tb.client(1, f"{tb.ip(2)}:{base_port + i}", nbytes, "send", name=f"pair{i}")
               for i in range(npairs)]
    for c in clients:
        check_client(c, TRANSFER_TIMEOUT)
    wall = time.monotonic() - t0
    for s in servers:
        (res,) = server_results(s, 1)
        assert res["bytes"] == nbytes, res
        assert s.wait(10) == 0, s.stderr()
    return wall, npairs * nbytes


# --- 1. the data path does not go through the connection server ---------------------------

def test_eight_concurrent_streams_verify_and_control_messages_do_not_grow_with_data(tb, capsys):
    """Eight processes on node 1 each stream 256 MiB to their own receiver on node 2 at the
    same time, all verified. The connection server runs per control message, never per
    packet (DESIGN.md "Data path"): node 1's ctl_messages delta for 8 x 256 MiB stays
    within 2x of the delta for 8 x 1 MiB, while frames_demuxed grows more than 100x."""
    c0 = tb.counters(1)
    run_pairs(tb, 8, 1 * MIB, 6010)
    c1 = tb.counters(1)
    wall, total = run_pairs(tb, 8, BIG, 6020)
    c2 = tb.counters(1)
    small_ctl, big_ctl = delta(c0, c1, "ctl_messages"), delta(c1, c2, "ctl_messages")
    small_fr, big_fr = delta(c0, c1, "frames_demuxed"), delta(c1, c2, "frames_demuxed")
    with capsys.disabled():
        print(f"\n8 x 256 MiB: {total * 8 / wall / 1e9:.3f} Gbit/s aggregate ({wall:.2f} s); "
              f"ctl_messages {small_ctl} (8 x 1 MiB) vs {big_ctl} (8 x 256 MiB); "
              f"frames_demuxed {small_fr} vs {big_fr}")
    assert small_ctl > 0
    assert big_ctl <= 2 * small_ctl and small_ctl <= 2 * big_ctl, (small_ctl, big_ctl)
    assert big_fr > 100 * small_fr, (small_fr, big_fr)


THROUGHPUT = {}


@pytest.mark.parametrize("pairs", [1, 2, 4, 8])
def test_concurrent_pairs_stream_256mib_each_verified_and_report_throughput(tb, pairs, capsys):
    """`pairs` processes on node 1 each stream 256 MiB to their own process on node 2 at
    once, every stream verified. Records the aggregate throughput (total bytes / wall time)
    for 1, 2, 4 and 8 pairs and prints the table: the lead's scaling figure."""
    wall, total = run_pairs(tb, pairs, BIG, 6100 + 10 * pairs)
    gbps = total * 8 / wall / 1e9
    THROUGHPUT[pairs] = (total, wall, gbps)
    with capsys.disabled():
        print(f"\n{'pairs':>5} {'MiB total':>10} {'wall s':>8} {'Gbit/s':>8}")
        for n in sorted(THROUGHPUT):
            t, w, g = THROUGHPUT[n]
            print(f"{n:>5} {t // MIB:>10} {w:>8.2f} {g:>8.3f}")


# --- 2. isolation -------------------------------------------------------------------------

def test_port_held_by_listener_refuses_second_bind_and_listener_still_serves(tb):
    """A port belongs to the process that holds it: a hostile process's BIND of a port a
    listener holds gets EADDRINUSE (98), and the listener still accepts a verified
    stream afterwards."""
    port = 6200
    srv = tb.server(1, port, count=1)
    assert tb.hostile(1, "bind", "tcp", port).split() == ["errno", str(errno.EADDRINUSE)]
    check_client(tb.kernel_client(f"{tb.ip(1)}:{port}", 16 * MIB, "send"), TRANSFER_TIMEOUT)
    (res,) = server_results(srv, 1)
    assert res["bytes"] == 16 * MIB


def test_forged_segments_from_another_process_port_are_denied_and_not_sent(tb):
    """ulsd's transmit check, not libuls's manners, keeps a process to its own endpoints:
    COUNT RST segments a hostile process writes from a live victim's listening port grow
    deny_port (and drop_tx_denied) by COUNT, and none of them reaches the wire (a capture
    on the bridge sees no segment from that port)."""
    port, count = 6210, 10
    tb.server(1, port)
    pcap = os.path.join(tb.outdir, "forge.pcap")
    cap = tb.start(["tcpdump", "-i", "br0", "-nn", "-U", "-w", pcap, f"tcp and src port {port}"],
                   name="tcpdump-forge", netns=tb.env["TB_NETNS"])
    time.sleep(1.0)  # tcpdump needs a moment before it captures
    before = tb.counters(1)
    out = tb.hostile(1, "forge", port, tb.kernel_ip, 5555, count)
    assert out.split() == ["queued", str(count)], out
    time.sleep(0.3)
    after = tb.counters(1)
    cap.kill(signal.SIGINT)
    assert delta(before, after, "deny_port") == count, (before["deny_port"], after["deny_port"])
    assert delta(before, after, "drop_tx_denied") == count
    r = subprocess.run(["tcpdump", "-r", pcap, "-nn"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "", f"forged segments reached the wire:\n{r.stdout}"


def test_process_cannot_release_or_unbind_another_process_endpoint(tb):
    """The connection server answers to the lease, not to what a message claims: a hostile
    process that sends RELEASE for a victim's live connection and UNBIND for its port gets
    EPERM for both, HANDOFF of it EPERM and CLAIM of it ENOENT; ctl_denied grows by 3, and
    the victim's transfer completes verified."""
    port = 6250
    victim = tb.server(1, port, count=1)
    client = tb.kernel_client(f"{tb.ip(1)}:{port}", 256 * MIB, "send", name="kclient-victim")
    deadline = time.monotonic() + 10
    conn = None
    while conn is None and time.monotonic() < deadline:
        for e in tb.stat(1)["endpoints"]:
            if e["state"] == "connected" and e["local"].endswith(f":{port}"):
                conn = e
        time.sleep(0.05)
    assert conn is not None, "the victim's connection never appeared in ulsstat"
    assert conn["pid"] == victim.pid
    rip, rport = conn["remote"].rsplit(":", 1)
    before = tb.counters(1)
    out = tb.hostile(1, "release", port, rip, rport)
    assert out.split() == ["release", "status", "-1", "unbind", "status", "-1"], out
    # Nor can it move the connection to itself: HANDOFF is the holder's alone (EPERM),
    # and a CLAIM finds no connection in transit (ENOENT).
    out = tb.hostile(1, "steal", port, rip, rport)
    assert out.split() == ["handoff", "status", "-1", "claim", "status", "-2"], out
    after = tb.counters(1)
    assert delta(before, after, "ctl_denied") == 3
    check_client(client, TRANSFER_TIMEOUT)
    (res,) = server_results(victim, 1)
    assert res["verified"] and res["bytes"] == 256 * MIB


def test_frames_with_a_foreign_source_address_are_denied(tb):
    """A process cannot send as another host: three frames with a source IP that is not the
    node's grow deny_src_ip by 3."""
    before = tb.counters(1)
    out = tb.hostile(1, "spoofip", 3)
    assert out.split() == ["queued", "3"], out
    time.sleep(0.2)
    after = tb.counters(1)
    assert delta(before, after, "deny_src_ip") == 3


def test_process_cannot_receive_another_process_segments(tb):
    """The demultiplexer copies a frame only into the ring of the process that owns its
    endpoint: while a victim on node 1 streams 256 MiB to a receiver on node 2, a hostile
    process on node 2 that counts every frame ulsd delivers to it sees no TCP frame (ARP
    at most). The victim's transfer is verified."""
    port = 6220
    srv = tb.server(2, port, count=1)
    spy = tb.start([HOSTILE, tb.ctl(2), "listen", "2"], name="hostile-listen")
    time.sleep(0.2)  # its lease is open: the transfer runs inside its listening window
    before = tb.counters(2)
    victim = tb.client(1, f"{tb.ip(2)}:{port}", BIG, "send", name="victim")
    assert spy.wait(10) == 0, spy.stderr()
    during = tb.counters(2)
    check_client(victim, TRANSFER_TIMEOUT)
    server_results(srv, 1)
    words = spy.stdout().split()
    assert words[0::2] == ["frames", "tcp", "arp"], spy.stdout()
    frames, tcp, arp = map(int, words[1::2])
    # The victim's segments were flowing to node 2 while the spy listened.
    assert delta(before, during, "frames_demuxed") > 1000, (before["frames_demuxed"], during["frames_demuxed"])
    assert tcp == 0, spy.stdout()
    assert frames == arp, spy.stdout()


def test_unprivileged_process_cannot_bind_port_below_1024_but_root_can(tb):
    """Ports below 1024 are privileged on a ulsd node as on Linux: a process running as
    nobody (the control socket is mode 0666) gets EACCES (13) for port 81; root gets it."""
    # A copy of hostile that nobody can reach, whatever the build directory's permissions.
    d = tempfile.mkdtemp(prefix="uls-hostile-", dir=tb.outdir)
    os.chmod(tb.outdir, 0o755)
    os.chmod(d, 0o755)
    exe = os.path.join(d, "hostile")
    shutil.copy2(HOSTILE, exe)
    os.chmod(exe, 0o755)
    ctl = tb.ctl(1)
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", exe, ctl,
                        "bind", "tcp", "81"], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["errno", str(errno.EACCES)], r.stdout
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", exe, ctl,
                        "bind", "tcp", "6230"], capture_output=True, text=True, timeout=20)
    assert r.stdout.split() == ["ok", "6230"], (r.stdout, r.stderr)
    assert tb.hostile(1, "bind", "tcp", 81).split() == ["ok", "81"]


# --- 3. control protocol robustness -------------------------------------------------------

GARBAGE_STATUS = {
    "truncated": -errno.EBADMSG,
    "oversized": -errno.EBADMSG,
    "bad_magic": -errno.EBADMSG,
    "bad_version": -errno.EPROTONOSUPPORT,
    "unknown_type": -errno.EBADMSG,
    "before_hello": -errno.EPROTO,
}


def test_malformed_control_messages_get_error_replies_and_ulsd_keeps_serving(tb):
    """A bad control message gets a counted refusal, never a crash (DESIGN.md "Quality
    bar"): each malformed case gets a reply with its negative status, the ctl_bad_* and
    ctl_out_of_order counters grow, and ulsd still serves a verified transfer."""
    pid = tb.ulsd_pid(1)
    before = tb.counters(1)
    out = tb.hostile(1, "garbage")
    got = {}
    for line in out.splitlines():
        name, _, rest = line.partition(" ")
        got[name] = rest
    assert got == {k: f"status {v}" for k, v in GARBAGE_STATUS.items()}, out
    after = tb.counters(1)
    assert delta(before, after, "ctl_bad_size") == 2     # truncated, oversized
    assert delta(before, after, "ctl_bad_magic") == 1
    assert delta(before, after, "ctl_bad_version") == 1
    assert delta(before, after, "ctl_bad_type") == 1
    assert delta(before, after, "ctl_out_of_order") == 1  # a request before HELLO
    assert tb.ulsd_alive(1) and tb.ulsd_pid(1) == pid
    check_client(tb.client(1, f"{tb.kernel_ip}:{KERNEL_SINK_PORT}", 16 * MIB, "send"), TRANSFER_TIMEOUT)


# --- 4. crashes ---------------------------------------------------------------------------

# A kernel receiver that reports, on the clock shared by all namespaces, when and how its
# connection ended.
RECEIVER = r"""
import json, socket, sys, time
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("0.0.0.0", int(sys.argv[1])))
ls.listen(1)
print("listening", flush=True)
ls.settimeout(30)
c, peer = ls.accept()
c.settimeout(30)
print(json.dumps({"accepted": time.monotonic()}), flush=True)
n = 0
buf = bytearray(1 << 20)
try:
    while True:
        k = c.recv_into(buf)
        if k == 0:
            print(json.dumps({"eof": True, "t": time.monotonic(), "bytes": n}), flush=True)
            break
        n += k
except OSError as e:
    print(json.dumps({"errno": e.errno, "t": time.monotonic(), "bytes": n}), flush=True)
"""


def test_killed_sender_peer_gets_reset_within_a_second_and_other_streams_finish(tb):
    """kill -9 of a process mid-transfer: ulsd reclaims its connection and resets the peer
    within 1 s (RFC 9293 §3.10.7.1, DESIGN.md: the RSTs owed to peers of a process that
    died), the counters show it (rst_sent / rst_probes), the dead process's endpoints
    leave the table (custody entries, pid 0, may stay), and two other streams of the
    node that run meanwhile complete verified."""
    port = 6300
    rx = tb.kernel_python(RECEIVER, port, name="receiver")
    deadline = time.monotonic() + 5
    while "listening" not in rx.stdout():
        assert rx.poll() is None and time.monotonic() < deadline, rx.stderr()
        time.sleep(0.02)
    before = tb.counters(1)
    others = [tb.client(1, f"{tb.kernel_ip}:{KERNEL_SINK_PORT}", 1 << 30, "send", name=f"bystander{i}")
              for i in range(2)]
    victim = tb.client(1, f"{tb.kernel_ip}:{port}", "8G", "send", name="victim")
    deadline = time.monotonic() + 5
    while not rx.json_lines():
        assert victim.poll() is None and time.monotonic() < deadline, (victim.stderr(), rx.stderr())
        time.sleep(0.02)
    time.sleep(1.0)  # mid-transfer
    assert victim.poll() is None, victim.stderr()
    assert all(o.poll() is None for o in others), "the other streams ended before the crash"
    t_kill = time.monotonic()
    os.kill(victim.pid, signal.SIGKILL)
    victim.p.wait()
    assert rx.wait(10) == 0, rx.stderr()
    end = rx.json_lines()[-1]
    assert end.get("errno") == errno.ECONNRESET, f"peer saw {end}, not ECONNRESET"
    assert end["t"] - t_kill < 1.0, f"RST after {end['t'] - t_kill:.3f} s"
    # The dead process's endpoints are gone (custody entries carry no pid).
    deadline = time.monotonic() + 2
    while True:
        eps = [e for e in tb.stat(1)["endpoints"] if e["pid"] == victim.pid]
        if not eps or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert eps == [], eps
    for o in others:
        check_client(o, TRANSFER_TIMEOUT)
    after = tb.counters(1)
    rst, probes = delta(before, after, "rst_sent"), delta(before, after, "rst_probes")
    print(f"peer reset {end['t'] - t_kill:.3f} s after the kill; rst_sent +{rst}, rst_probes +{probes}")
    assert rst + probes > 0, (rst, probes)


def test_killed_listener_frees_its_port_for_a_new_process(tb):
    """kill -9 of a process listening on a port releases the port with its lease: a new
    process binds and listens on it right after and receives a verified stream."""
    port = 6310
    old = tb.server(1, port)
    os.kill(old.pid, signal.SIGKILL)
    old.p.wait()
    new = tb.server(1, port, count=1)
    check_client(tb.kernel_client(f"{tb.ip(1)}:{port}", 16 * MIB, "send"), TRANSFER_TIMEOUT)
    (res,) = server_results(new, 1)
    assert res["pid"] == new.pid


# --- 5. server restart --------------------------------------------------------------------

def test_ulsd_killed_mid_transfer_fails_client_promptly_and_restarted_ulsd_serves(tb):
    """When ulsd dies the node is gone: a client mid-transfer fails within 2 s with
    ENETDOWN ("Network is down") instead of hanging. ulsd started again the same way
    serves a new process's verified transfer."""
    argv = tb.ulsd_cmdline(1)
    pid = tb.ulsd_pid(1)
    assert pid is not None
    client = tb.client(1, f"{tb.kernel_ip}:{KERNEL_SINK_PORT}", "8G", "send", name="orphan")
    time.sleep(1.0)
    assert client.poll() is None, client.stderr()
    try:
        t_kill = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        try:
            rc = client.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            rc = None
        elapsed = time.monotonic() - t_kill
        deadline = time.monotonic() + 5
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        tb.start_ulsd(1, argv)
    assert rc is not None, "client still running 10 s after ulsd died"
    assert rc != 0
    assert "transfer failed: Network is down" in client.stderr(), client.stderr()
    assert elapsed < 2.0, f"client took {elapsed:.2f} s to fail"
    assert tb.ulsd_pid(1) != pid
    check_client(tb.client(1, f"{tb.kernel_ip}:{KERNEL_SINK_PORT}", 64 * MIB, "send"), TRANSFER_TIMEOUT)


# --- 6. shared listeners ------------------------------------------------------------------

def test_reuseport_listeners_share_connections_and_all_streams_verify(tb):
    """Two processes listening on one port with SO_REUSEPORT form a listening group: 16
    kernel clients' streams all verify, and both processes serve at least one."""
    port = 6400
    a = tb.server(1, port, reuseport=True)
    b = tb.server(1, port, reuseport=True)
    for batch in range(4):
        clients = [tb.kernel_client(f"{tb.ip(1)}:{port}", 4 * MIB, "send", name=f"k{batch}-{i}")
                   for i in range(4)]
        for c in clients:
            check_client(c, TRANSFER_TIMEOUT)
    deadline = time.monotonic() + 5
    while len(a.json_lines()) + len(b.json_lines()) < 16 and time.monotonic() < deadline:
        time.sleep(0.05)
    results = a.json_lines() + b.json_lines()
    assert len(results) == 16, results
    assert all(r["verified"] and r["bytes"] == 4 * MIB for r in results), results
    served = {r["pid"] for r in results}
    assert served == {a.pid, b.pid}, f"served by {served}, listeners {a.pid} {b.pid}"


# --- 7. ulsstat ---------------------------------------------------------------------------

def test_ulsstat_json_shows_counters_drops_and_endpoints_of_a_running_transfer(tb):
    """ulsstat --json reports the counters (ctl_messages, frames_demuxed, ...), the drops
    by reason, and the endpoint table: while a transfer runs, the server's listening and
    connected endpoints with proto, local, remote, pid and state."""
    port = 6500
    srv = tb.server(1, port, count=1)
    client = tb.kernel_client(f"{tb.ip(1)}:{port}", BIG, "recv")
    deadline = time.monotonic() + 10
    while True:
        st = tb.stat(1)
        mine = [e for e in st["endpoints"] if e["local"] == f"*:{port}"]
        conn = [e for e in mine if e["state"] == "connected"]
        if conn or time.monotonic() > deadline or client.poll() is not None:
            break
        time.sleep(0.02)
    check_client(client, TRANSFER_TIMEOUT)
    assert isinstance(st["counters"], dict) and isinstance(st["drops"], dict)
    for k in ("ctl_messages", "frames_demuxed"):
        assert isinstance(st["counters"][k], int), k
    for e in st["endpoints"]:
        assert set(e) >= {"proto", "local", "remote", "pid", "state"}, e
    listen = [e for e in mine if e["state"] == "listen"]
    assert listen and listen[0]["proto"] == "tcp" and listen[0]["pid"] == srv.pid, mine
    assert conn, f"no connected endpoint while the transfer ran: {mine}"
    assert conn[0]["proto"] == "tcp" and conn[0]["pid"] == srv.pid, conn
    assert conn[0]["remote"].startswith(f"{tb.kernel_ip}:"), conn


# --- 8. packets no process owns -----------------------------------------------------------

def test_ulsd_answers_ping(tb):
    """ICMP echo to the node is answered by ulsd itself (no process owns ICMP echo)."""
    before = tb.counters(1)
    r = subprocess.run(["ip", "netns", "exec", tb.kernel_ns, "ping", "-c", "3", "-i", "0.2", "-W", "1",
                        tb.ip(1)], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stdout + r.stderr
    assert delta(before, tb.counters(1), "icmp_echo_replies") >= 3


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
    before = tb.counters(1)
    p = tb.kernel_python(CONNECT_CLOSED, tb.ip(1), 6999, name="connect-closed")
    assert p.wait(15) == 0, p.stderr()
    assert p.stdout().strip() == str(errno.ECONNREFUSED), p.stdout()
    assert delta(before, tb.counters(1), "rst_sent") >= 1


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
    before = tb.counters(1)
    p = tb.kernel_python(UDP_CLOSED, tb.ip(1), 6998, name="udp-closed")
    assert p.wait(15) == 0, p.stderr()
    assert p.stdout().strip() == str(errno.ECONNREFUSED), p.stdout()
    assert delta(before, tb.counters(1), "icmp_unreach_sent") >= 1


# --- 9. segmentation offload --------------------------------------------------------------

def restart_ulsd(tb, node, offload):
    """Stop node `node`'s ulsd (TERM, by its PID) and start it again the same way, with
    `--offload on` (True), `--offload off` (False) or without the option (None: the
    default, on unless ULS_TSO=0)."""
    argv = tb.ulsd_cmdline(node)
    while "--offload" in argv:
        i = argv.index("--offload")
        del argv[i:i + 2]
    if offload is not None:
        argv += ["--offload", "on" if offload else "off"]
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


def test_offload_concurrent_64mib_streams_both_ways_verify_and_move_as_super_segments(offload_nodes):
    """With `ulsd --offload on` at both nodes (TSO/GSO through the TAP's virtio-net header),
    eight processes stream 64 MiB each from node 1 to node 2 at once, then eight from node 2
    to node 1: every byte verified, and node 1 sends super-segments (frames_gso_sent) that
    node 2 receives whole (frames_gso_received), and back, with no bad offload header.

    The regression this guards: a super-segment carrying the FIN, split to fit the window,
    kept the FIN on its head (lwIP patch 0007), so about one transfer in six ended 0.5-9 KiB
    short. Sixteen TSO senders each end their stream with a FIN on a super-segment (with
    six pairs each way, one run in four of this test failed before the fix)."""
    tb = offload_nodes
    c1, c2 = tb.counters(1), tb.counters(2)
    run_offload_pairs(tb, 8, 64 * MIB, 6700, "send")
    d1, d2 = tb.counters(1), tb.counters(2)
    assert delta(c1, d1, "frames_gso_sent") > 0, d1
    assert delta(c2, d2, "frames_gso_received") > 0, d2
    run_offload_pairs(tb, 8, 64 * MIB, 6710, "recv")
    e1, e2 = tb.counters(1), tb.counters(2)
    assert delta(d2, e2, "frames_gso_sent") > 0, e2
    assert delta(d1, e1, "frames_gso_received") > 0, e1
    for c0, c in ((c1, e1), (c2, e2)):
        for k in ("drop_tx_bad_offload", "drop_rx_bad_vnet"):
            assert delta(c0, c, k) == 0, (k, c)


def test_without_offload_concurrent_64mib_streams_verify_as_wire_sized_frames(plain_nodes):
    """With `ulsd --offload off` (a plain TAP, no virtio-net header) 4 concurrent 64 MiB
    streams each way verify, and no super-segment is sent or received: the path every
    frame took before offloads, still whole."""
    tb = plain_nodes
    c1, c2 = tb.counters(1), tb.counters(2)
    run_offload_pairs(tb, 4, 64 * MIB, 6740, "send")
    m1 = tb.counters(1)
    # 256 MiB left node 1 in frames of at most 1514 bytes, not in super-segments
    assert delta(c1, m1, "frames_sent") >= 4 * 64 * MIB // 1514, m1
    run_offload_pairs(tb, 4, 64 * MIB, 6750, "recv")
    d1, d2 = tb.counters(1), tb.counters(2)
    for c0, c in ((c1, d1), (c2, d2)):
        for k in ("frames_gso_sent", "frames_gso_received", "drop_tx_bad_offload",
                  "drop_rx_bad_vnet"):
            assert delta(c0, c, k) == 0, (k, c)


def test_offload_node_serves_a_sender_with_tso_off(offload_nodes):
    """A process with ULS_TSO=0 on an offload node sends wire-sized segments (its node
    sends no super-segment meanwhile) and its 64 MiB stream to a TSO process on the other
    node verifies; so does a TSO sender's stream to a receiver with ULS_TSO=0."""
    tb = offload_nodes
    c1 = tb.counters(1)
    run_offload_pairs(tb, 2, 64 * MIB, 6720, "send", env={"ULS_TSO": "0"})
    d1 = tb.counters(1)
    assert delta(c1, d1, "frames_gso_sent") == 0, d1
    run_offload_pairs(tb, 2, 64 * MIB, 6730, "recv", env={"ULS_TSO": "0"})
    e1 = tb.counters(1)
    assert delta(d1, e1, "drop_rx_bad_vnet") == 0, e1
