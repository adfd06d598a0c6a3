"""Processes on ulsd nodes speak IPv6 (issue 17, control protocol version 3; docs/ipv6.md).

Two ulsd nodes with `--ip6` (testbed `up --ipv6`) and their default offloads (TCP over
IPv6 leaves as partial-checksum super-segments, stack/tso.c), once on the relay path
(ULS_DATAPATH=relay) and once with ulsd's default, the direct path, where the kernel's
steering and transmit-check programs carry IPv6 (filter/datapath.bpf.c). Each
module-level testbed is brought up here and taken down at the end; processes are started
by this file and stopped by PID.

Each transfer checks its bytes: the peer echoes a deterministic stream, which is compared.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tblib import BUILD, TESTBED, parse_exports, run_testbed  # noqa: E402

ULSRUN = os.path.join(BUILD, "apps", "ulsrun")
STAT = os.path.join(BUILD, "apps", "ulsstat")
PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "v6peer.py")
PYTHON = "/usr/bin/python3"
MIB = 1 << 20


class Bed:
    def __init__(self, name, env):
        self.name, self.env = name, env
        self.procs = []
        self.outdir = tempfile.mkdtemp(prefix=f"uls-{name}-")

    def ctl(self, i):
        return self.env[f"TB_NODE{i}_CTL"]

    def ip(self, i):
        return self.env[f"TB_NODE{i}_IP"]

    def ip6(self, i):
        return self.env[f"TB_NODE{i}_IP6"]

    def uls(self, node, argv):
        return ["ip", "netns", "exec", self.env["TB_NETNS"], ULSRUN, "--ctl", self.ctl(node),
                "--", *argv]

    def kernel(self, argv):
        return ["ip", "netns", "exec", self.env["TB_KERNEL_NETNS"], *argv]

    def start(self, argv, name):
        o = open(os.path.join(self.outdir, f"{len(self.procs):02d}-{name}.out"), "w+")
        e = open(os.path.join(self.outdir, f"{len(self.procs):02d}-{name}.err"), "w+")
        p = subprocess.Popen(argv, stdout=o, stderr=e, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        p.files = (o, e)
        p.label = name
        self.procs.append(p)
        return p

    @staticmethod
    def text(p):
        p.files[0].flush()
        with open(p.files[0].name) as f:
            return f.read()

    def output(self, p):
        with open(p.files[1].name) as f:
            return f"{p.label} stdout:\n{self.text(p)}\nstderr:\n{f.read()}"

    def lines(self, p):
        return [json.loads(x) for x in self.text(p).splitlines() if x.startswith("{")]

    def wait_line(self, p, key, timeout=20.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for d in self.lines(p):
                if key in d:
                    return d
            if p.poll() is not None:
                for d in self.lines(p):
                    if key in d:
                        return d
                break
            time.sleep(0.05)
        raise AssertionError(f"no {key!r} line\n{self.output(p)}")

    def refused(self, node):
        """The frames node's ulsd refused to send, as its log names them (server/demux.c,
        log_refused), for a failure's message."""
        path = os.path.join(os.path.dirname(self.ctl(node)), f"ulsd{node}.log")
        try:
            with open(path, errors="replace") as f:
                return [x for x in f.read().splitlines() if "frame refused" in x]
        except OSError as e:
            return [f"{path}: {e}"]

    def stat(self, node):
        r = subprocess.run([STAT, "--ctl", self.ctl(node), "--json"], capture_output=True,
                           text=True, timeout=10)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def stop_all(self, first=0):
        for p in self.procs[first:]:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)   # its own session: ip netns exec's child
                except ProcessLookupError:
                    pass
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    pass
        del self.procs[first:]


@pytest.fixture(scope="module", params=["relay", "default"])
def bed(request):
    name = "ulsv6r" if request.param == "relay" else "ulsv6a"
    saved = {k: os.environ.get(k) for k in ("ULS_DATAPATH",)}
    if request.param == "relay":
        os.environ["ULS_DATAPATH"] = "relay"
    else:
        os.environ.pop("ULS_DATAPATH", None)
    b = None
    try:
        env = parse_exports(run_testbed(TESTBED, name, BUILD, "up", "--nodes", "2", "--ipv6"))
        b = Bed(env["TB_NAME"], env)
        b.mode = request.param
        yield b
    finally:
        if b:
            b.stop_all()
        run_testbed(TESTBED, name, BUILD, "down")
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def tb(bed):
    n = len(bed.procs)
    try:
        yield bed
    finally:
        bed.stop_all(n)


def wait_endpoint(tb, node, pred, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        eps = [e for e in tb.stat(node).get("endpoints", []) if pred(e)]
        if eps:
            return eps
        time.sleep(0.05)
    raise AssertionError(f"no such endpoint on node {node}: {tb.stat(node).get('endpoints')}")


def listening(port, local_prefix="[::]"):
    return lambda e: e["state"] == "listen" and e["local"] == f"{local_prefix}:{port}"


def serve_tcp(tb, port, name, *args, groups=("[::]",)):
    """Start the peer's TCP server on node 1 (port, and args) and wait until it says it
    listens and ulsd lists its listening endpoint in each group (a local address prefix:
    "[::]" the IPv6 group, "*" the IPv4 one)."""
    srv = tb.start(tb.uls(1, [PYTHON, PEER, "server", "--port", str(port), *args]), name)
    tb.wait_line(srv, "listening")
    for group in groups:
        wait_endpoint(tb, 1, listening(port, group))
    return srv


def test_tcp_over_ipv6_between_two_nodes(tb):
    """A process on node 2 connects to node 1's IPv6 address; 4 MiB echoed and compared.
    Both ends name each other by IPv6 addresses, ulsd lists the connection with its IPv6
    remote. On the relay node 1's ulsd delivered the IPv6 frames to the process
    (ipv6_frames_demuxed); on the direct path the process took the direct path and the
    frames did not cross ulsd. With the nodes' default offloads the server's stack took
    the client's TCPv6 super-segments whole (dev_rx_gso): the TAP asks for them
    (TUN_F_TSO6), where the kernel would otherwise cut each into wire-sized frames."""
    port = 7601
    srv = serve_tcp(tb, port, "tcp6-server")
    before = tb.stat(1)["counters"]
    cli = tb.start(tb.uls(2, [PYTHON, PEER, "client", "--to", tb.ip6(1), "--port", str(port),
                              "--bytes", str(4 * MIB)]), "tcp6-client")
    c = tb.wait_line(cli, "match", 60)
    assert c["match"] and c["bytes"] == 4 * MIB, tb.output(cli)
    assert c["peername"] == [tb.ip6(1), port] and c["sockname"][0] == tb.ip6(2), c
    s = tb.wait_line(srv, "accepted", 20)
    assert s["accepted"] == [tb.ip6(2), c["sockname"][1]] and s["bytes"] == 4 * MIB, s
    assert s["counters"]["dev_rx_gso"] > 0, s
    # The server's last frames (its FIN, the end of its linger) are counted too: read
    # node 1's counters once it has exited.
    srv.wait(20)
    after = tb.stat(1)["counters"]
    # Every frame either way was taken: no super-segment refused, no IPv6 frame counted
    # as a type the node does not speak.
    for k in ("drop_tx_bad_offload", "drop_ethertype"):
        assert after.get(k, 0) == before.get(k, 0), (k, before.get(k), after.get(k))
    # No frame of the server was denied. One may be refused without being a denial
    # (drop_tx_rst_released, server/demux.c late_rst): the RST lwIP answers a duplicate of
    # the client's last ACK with, when that duplicate reached the server after its
    # connection was gone (seen once in 30 suite runs at load, relay). The one cause of
    # such a duplicate found so far was our own: lwIP patch 0091 acknowledged a FIN's
    # segment twice (fixed; conformance case
    # test_rfc9293_3_10_7_4_fin_after_a_gap_acknowledged_once). A peer may still
    # duplicate an ACK, so the refusal stays allowed.
    denied = after.get("drop_tx_denied", 0) - before.get("drop_tx_denied", 0)
    assert denied == 0, (denied, tb.refused(1))
    relayed = after["ipv6_frames_demuxed"] - before["ipv6_frames_demuxed"]
    if tb.mode == "relay":
        # At least the client's 4 MiB, in super-segments of at most 64 KiB.
        assert relayed >= 4 * MIB // 65536, after
        assert after["leases_relay"] > 0, after
    else:
        assert after["leases_direct"] > 0, after
        assert relayed < 20, f"{relayed} IPv6 frames crossed ulsd on the direct path"


def udp6_echo(tb, port, nbytes, name):
    """One UDP datagram of nbytes from v6peer under ulsrun on node 2 to one on node 1, to
    node 1's IPv6 address, echoed and compared: returns what the client and the server
    said (their JSON lines)."""
    srv = tb.start(tb.uls(1, [PYTHON, PEER, "server", "--udp", "--port", str(port)]),
                   f"{name}-server")
    tb.wait_line(srv, "listening")
    wait_endpoint(tb, 1, lambda e: e["proto"] == "udp" and e["local"] == f"[::]:{port}")
    cli = tb.start(tb.uls(2, [PYTHON, PEER, "client", "--udp", "--to", tb.ip6(1), "--port",
                              str(port), "--bytes", str(nbytes)]), f"{name}-client")
    c = tb.wait_line(cli, "match", 30)
    assert c["match"], tb.output(cli)
    s = tb.wait_line(srv, "datagram", 10)
    assert s["datagram"] == nbytes, s
    return c, s


def test_udp_over_ipv6_between_two_nodes(tb):
    port = 7602
    c, s = udp6_echo(tb, port, 1200, "udp6")
    assert c["peer"] == [tb.ip6(1), port], c
    assert s["peer"][0] == tb.ip6(2), s


def test_udp_datagram_larger_than_the_link_crosses_in_fragments(tb):
    """RFC 8200 §4.5: a 20,000-octet UDP datagram (the testbed's MTU is 9,000) between two nodes leaves each process's
    lwIP in fragments; each ulsd reassembles it (server/reass.c) and hands its fragments to
    the owner, through dp_frag6 on the direct path, whose lwIP puts it together; the echo
    comes back the same way and is compared."""
    port = 7607
    before = tb.stat(1)["counters"]
    udp6_echo(tb, port, 20000, "frag6")
    after = tb.stat(1)["counters"]
    assert after["reass_datagrams"] > before["reass_datagrams"], after
    assert after["dp_map_errors"] == before["dp_map_errors"], after
    assert after["drop_reass_ipv6_direct"] == before["drop_reass_ipv6_direct"], after


def test_dual_stack_listener_takes_an_ipv4_peer_as_v4_mapped(tb):
    """ipv6(7): a [::] socket without IPV6_V6ONLY holds the port for IPv4 too; an IPv4
    client from the other node is accepted as ::ffff:a.b.c.d. Then an IPv6 one."""
    port = 7603
    srv = serve_tcp(tb, port, "dual-server", "--count", "2", groups=("*", "[::]"))
    for to in (tb.ip(1), tb.ip6(1)):
        cli = tb.start(tb.uls(2, [PYTHON, PEER, "client", "--to", to, "--port", str(port),
                                  "--bytes", str(MIB)]), f"dual-client-{to}")
        c = tb.wait_line(cli, "match", 60)
        assert c["match"], tb.output(cli)
    acc = [d for d in tb.lines(srv) if "accepted" in d]
    deadline = time.monotonic() + 10
    while len(acc) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
        acc = [d for d in tb.lines(srv) if "accepted" in d]
    assert [a["accepted"][0] for a in acc] == ["::ffff:" + tb.ip(2), tb.ip6(2)], acc
    assert acc[0]["sockname"][0] == "::ffff:" + tb.ip(1) and acc[1]["sockname"][0] == tb.ip6(1)


def test_ipv6_only_and_ipv4_sockets_share_a_port_a_dual_stack_one_does_not(tb):
    """Linux's port sharing across families: an IPV6_V6ONLY listener and an AF_INET one on
    the same port both bind (each takes its own family's peers); a dual-stack listener on
    that port is refused (EADDRINUSE)."""
    port = 7604
    s6 = tb.start(tb.uls(1, [PYTHON, PEER, "server", "--v6only", "1", "--port", str(port)]),
                  "v6only-server")
    tb.wait_line(s6, "listening")
    s4 = tb.start(tb.uls(1, [PYTHON, PEER, "server4", "--port", str(port)]), "v4-server")
    tb.wait_line(s4, "listening")
    dual = tb.start(tb.uls(1, [PYTHON, PEER, "server", "--port", str(port)]), "dual-refused")
    assert dual.wait(20) != 0 and "Address already in use" in tb.output(dual), tb.output(dual)
    for to, srv in ((tb.ip6(1), s6), (tb.ip(1), s4)):
        cli = tb.start(tb.uls(2, [PYTHON, PEER, "client", "--to", to, "--port", str(port),
                                  "--bytes", str(MIB)]), f"share-client-{to}")
        c = tb.wait_line(cli, "match", 60)
        assert c["match"], tb.output(cli)
        s = tb.wait_line(srv, "accepted", 10)
        assert s["accepted"][0] in (tb.ip6(2), tb.ip(2)) and s["bytes"] == MIB, s


def test_kernel_peer_reaches_a_node_over_ipv6(tb):
    """The kernel peer (Linux's IPv6 and neighbour discovery) connects to a process on
    node 1 over IPv6: 2 MiB echoed and compared."""
    port = 7605
    srv = serve_tcp(tb, port, "k-server")
    cli = tb.start(tb.kernel([PYTHON, PEER, "client", "--to", tb.ip6(1), "--port", str(port),
                              "--bytes", str(2 * MIB)]), "k-client")
    c = tb.wait_line(cli, "match", 60)
    assert c["match"] and c["bytes"] == 2 * MIB, tb.output(cli)
    s = tb.wait_line(srv, "accepted", 10)
    assert s["accepted"][0] == tb.env["TB_KERNEL_IP6"], s


def test_ipv6_connection_of_a_killed_process_goes_to_custody_and_its_peer_gets_a_reset(tb):
    """A process on node 1 holds an IPv6 connection to the kernel peer and is killed
    (SIGKILL): ulsd keeps the tuple in custody (RFC 9293 §3.4.2, listed as custody with its
    IPv6 remote) and the peer's next segments get a RST (§3.10.7.1), which it reports as
    ECONNRESET (or EPIPE after it)."""
    port = 7606
    go = os.path.join(tb.outdir, "go-custody")
    ks = tb.start(tb.kernel([PYTHON, PEER, "kserver", "--port", str(port), "--go", go]),
                  "custody-kserver")
    tb.wait_line(ks, "listening")
    time.sleep(0.2)
    h = tb.start(tb.uls(1, [PYTHON, PEER, "hold", "--to", tb.env["TB_KERNEL_IP6"], "--port",
                            str(port)]), "custody-holder")
    held = tb.wait_line(h, "connected", 30)
    lport = held["connected"][1]
    tb.wait_line(ks, "accepted", 10)
    remote = f"[{tb.env['TB_KERNEL_IP6']}]:{port}"
    wait_endpoint(tb, 1, lambda e: e["state"] == "connected" and e["remote"] == remote)
    os.killpg(h.pid, signal.SIGKILL)
    h.wait(10)
    eps = wait_endpoint(tb, 1, lambda e: e["state"] == "custody" and e["remote"] == remote)
    assert eps[0]["local"].endswith(f":{lport}"), eps
    open(go, "w").close()
    r = tb.wait_line(ks, "reset", 20)
    assert r["reset"] in ("ECONNRESET", "EPIPE"), tb.output(ks)


def test_idle_peer_of_a_killed_process_is_reset_by_the_probe(tb):
    """A process on node 1 holds an IPv6 connection to the kernel peer, which only reads
    (it never sends, so no segment of its own can meet a RST), and is killed (SIGKILL).
    ulsd probes the peer as for IPv4 (RFC 9293 §3.10.7.4, RFC 5961 §5.2: an ACK outside
    its window; the peer's challenge ACK gets a RST with SEQ = its ACK), addressing it from
    its IPv6 neighbour cache (server/neigh6.c; by a neighbour solicitation when it does not
    know the peer, or from the steering program's dp_neigh6 on the direct path). The peer's
    read fails with ECONNRESET within seconds (the probe's bound: one solicitation
    round, RFC 4861 §7.2.2's retransmission at 1 s at worst), and rst_probes counts it."""
    port = 7608
    ks = tb.start(tb.kernel([PYTHON, PEER, "kserver", "--port", str(port), "--idle"]),
                  "probe-kserver")
    tb.wait_line(ks, "listening")
    h = tb.start(tb.uls(1, [PYTHON, PEER, "hold", "--to", tb.env["TB_KERNEL_IP6"], "--port",
                            str(port)]), "probe-holder")
    tb.wait_line(h, "connected", 30)
    tb.wait_line(ks, "accepted", 10)
    remote = f"[{tb.env['TB_KERNEL_IP6']}]:{port}"
    wait_endpoint(tb, 1, lambda e: e["state"] == "connected" and e["remote"] == remote)
    before = tb.stat(1)["counters"]
    t_kill = time.monotonic()
    os.killpg(h.pid, signal.SIGKILL)
    h.wait(10)
    r = tb.wait_line(ks, "reset", 40)
    after = tb.stat(1)["counters"]
    got = {k: after.get(k, 0) - before.get(k, 0)
           for k in ("rst_probes", "rst_probes_deferred", "nd_solicits_sent", "rst_sent",
                     "drop_probe_no_neighbour")}
    print(f"{tb.mode}: peer reset {r['t'] - t_kill:.3f} s after the kill; {got}")
    assert r["reset"] == "ECONNRESET", (r, got, tb.output(ks))
    assert r["t"] - t_kill < 5.0, (r["t"] - t_kill, got)
    assert got["rst_probes"] >= 1 and got["drop_probe_no_neighbour"] == 0, got
    # This connection's own entry: a dead process's, probed.
    eps = [e for e in tb.stat(1)["endpoints"] if e["state"] == "custody" and
           e["remote"] == f"[{tb.env['TB_KERNEL_IP6']}]:{port}"]
    assert len(eps) == 1 and eps[0]["custody"] == "dead" and eps[0]["probes"] >= 1, eps


def test_connection_its_process_left_in_time_wait_goes_to_custody_unprobed(tb):
    """A client on node 2 closes first (its FIN, then the server's), so its connection is in
    TIME-WAIT when the process exits; ulsd keeps the tuple in custody for 2 MSL (RFC 9293
    §3.4.2) but sends its peer no probe: TIME-WAIT sends nothing of its own (§3.3.2, "The
    only thing that can arrive in this state is a retransmission of the remote FIN"), and
    node 1's closed end would only answer each probe with a RST (§3.10.7.1). ulsd knows the
    state from the table the client's stack writes a last time when it stops
    (stack/conntab.c). ulsstat lists the entry as custody in TIME-WAIT with no probe sent
    over the probes' whole schedule (4 at 250 ms); custody_timewait counts it.

    Per connection, not node-wide: rst_probes may move meanwhile for an earlier test's
    process killed at its teardown (a dead connection, probed once its peer's address
    resolves), as it did in stop 39's CI run."""
    port = 7610
    srv = serve_tcp(tb, port, "tw-server")
    before = tb.stat(2)["counters"]
    cli = tb.start(tb.uls(2, [PYTHON, PEER, "client", "--to", tb.ip6(1), "--port", str(port),
                              "--bytes", "100000"]), "tw-client")
    c = tb.wait_line(cli, "match", 60)
    assert c["match"], tb.output(cli)
    assert cli.wait(20) == 0, tb.output(cli)
    remote = f"[{tb.ip6(1)}]:{port}"

    def ours(e):
        return (e["state"] == "custody" and e["remote"] == remote and
                e["local"].endswith(f":{c['sockname'][1]}"))
    wait_endpoint(tb, 2, ours)
    time.sleep(1.2)   # past the last probe a dead connection's schedule would have sent
    st = tb.stat(2)
    eps = [e for e in st["endpoints"] if ours(e)]
    custody = [e for e in st["endpoints"] if e["state"] == "custody"]
    assert len(eps) == 1 and eps[0]["custody"] == "TIME-WAIT" and eps[0]["probes"] == 0, custody
    got = {k: st["counters"].get(k, 0) - before.get(k, 0)
           for k in ("custody_timewait", "drop_custody_no_memory")}
    assert got["custody_timewait"] >= 1 and got["drop_custody_no_memory"] == 0, (got, custody)


def test_ulsstat_lists_ipv6_connections_with_their_state(tb):
    """The connection table each process publishes (netif/conntab.h, since version 2) carries
    16-octet addresses and the family: ulsstat lists a TCPv6 connection at both ends as
    [addr]:port, ESTABLISHED, with the echoed octet the holder left unread in its Recv-Q,
    and a dual-stack listener's IPv4 connection (v4-mapped to the program; it waits in the
    accept queue) with its IPv4 addresses; no entry is refused as out of range."""
    port = 7609
    srv = serve_tcp(tb, port, "stat-server", "--count", "2", groups=("[::]", "*"))
    before = [tb.stat(i)["drops"]["conntab_bad_entries"] for i in (1, 2)]
    h6 = tb.start(tb.uls(2, [PYTHON, PEER, "hold", "--to", tb.ip6(1), "--port", str(port)]),
                  "stat-hold6")
    lport6 = tb.wait_line(h6, "connected", 30)["connected"][1]
    h4 = tb.start(tb.uls(2, [PYTHON, PEER, "hold", "--to", tb.ip(1), "--port", str(port)]),
                  "stat-hold4")
    lport4 = tb.wait_line(h4, "connected", 30)["connected"][1]
    want = {
        1: [(f"[{tb.ip6(1)}]:{port}", f"[{tb.ip6(2)}]:{lport6}"),
            (f"{tb.ip(1)}:{port}", f"{tb.ip(2)}:{lport4}")],
        2: [(f"[{tb.ip6(2)}]:{lport6}", f"[{tb.ip6(1)}]:{port}"),
            (f"{tb.ip(2)}:{lport4}", f"{tb.ip(1)}:{port}")],
    }
    # The tables are rewritten every 250 ms (ULS_CONNTAB_PERIOD_MS): poll, bounded.
    deadline = time.monotonic() + 20
    while True:
        got = {i: {(c["local"], c["remote"]): c for c in tb.stat(i)["connections"]}
               for i in (1, 2)}
        # (The server echoes one connection at a time: only the first holder has its
        # octet back.)
        if all(k in got[i] and got[i][k]["state"] == "ESTABLISHED" for i in (1, 2)
               for k in want[i]) and got[2][want[2][0]]["recv_queue"] == 1:
            break
        assert time.monotonic() < deadline, json.dumps({"want": want, "got": {
            i: [(c["local"], c["remote"], c["state"], c["recv_queue"]) for c in got[i].values()]
            for i in got}})
        time.sleep(0.1)
    after = [tb.stat(i)["drops"]["conntab_bad_entries"] for i in (1, 2)]
    assert after == before, (before, after)
    r = subprocess.run([STAT, "--ctl", tb.ctl(1)], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    rows = [ln.split() for ln in r.stdout.splitlines() if ln.startswith("ESTABLISHED")]
    assert [f"[{tb.ip6(1)}]:{port}", f"[{tb.ip6(2)}]:{lport6}"] in [row[3:5] for row in rows], \
        r.stdout
