"""Node fixtures: two ulsd nodes with many processes each, and Linux kernel peers.

    namespace ulsnode (TB_NETNS)                           namespace ulsnode-k1
    +-------------------------------------------------+    +-------------------------+
    |  ulsd (node 1, 198.18.0.1)  ulsd (node 2, .2)    |    | kernel TCP 198.18.0.100 |
    |     |  [uls1]                  |  [uls2]         |    | ulsbench server :5001   |
    |     +----------+---- br0 ------+-----------------+----+ (and per-test peers)    |
    |                |                                 |    +-------------------------+
    +----------------|---------------------------------+    namespace ulsnode-k2 (.101)
                     |
      control sockets /run/ulstack-testbed/ulsnode.d/node{1,2}.ctl (mode 0666)
                     |
    root namespace:  ulsbench / hostile / ulsstat --ctl NODEi  (user-level stacks; they
                     never touch kernel networking, so they run outside the namespaces)

Every address lives in the namespaces `tests/testbed/testbed up` creates. The session
fixture brings the testbed up once and down at the end, also when a test fails or pytest is
interrupted (try/finally and atexit). Processes are stopped by the PIDs this suite started,
never by name; a ulsd a test restarts is registered in the testbed's PID file so that
`testbed down` stops it too, and is killed by PID afterwards if it is still alive.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tblib import (BUILD, SRC, TESTBED, FileProc, TestbedEnv, down_once,  # noqa: E402
                   parse_exports, run_testbed)
BENCH = os.path.join(BUILD, "apps", "ulsbench")
STAT = os.path.join(BUILD, "apps", "ulsstat")
HOSTILE = os.path.join(BUILD, "tests", "node", "hostile")
ULSD = os.path.join(BUILD, "server", "ulsd")
PYTHON = "/usr/bin/python3"
TB_NAME = "ulsnode"
# The data path the suite runs on: ulsd's default (auto: direct where it can be had), or the
# relay when ULS_DATAPATH=relay (tests/node/run-relay), which ulsd and every process started
# here inherit. Tests check the counters of the path they run on; tests marked `direct`
# are about the direct path alone and are deselected (not skipped) on the relay.
DATAPATH = "relay" if os.environ.get("ULS_DATAPATH") == "relay" else "direct"
KERNEL_SINK_PORT = 5001
STALL_REPORT_GAP = 2.0    # s between the two SIGUSR1 reports asked before a kill   # a kernel ulsbench server in ulsnode-k1 for the whole session

MIB = 1 << 20


def _testbed(*args):
    return run_testbed(TESTBED, TB_NAME, BUILD, *args)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is not alive for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Proc(FileProc):
    """A process this suite started (tblib.FileProc), in the test runner's session: it is
    stopped by its PID."""

    def __init__(self, argv, outdir, name, netns=None, env=None, peers=()):
        full = ["ip", "netns", "exec", netns, *argv] if netns else list(argv)
        super().__init__(full, outdir, name, env=env, session=False)
        self.peers = peers      # the testbed's processes (this one among them)

    def stall_report(self):
        """Before a timed-out process is killed: every live ulsbench on a node (this one
        too) reports twice on SIGUSR1, STALL_REPORT_GAP s apart: the bytes it moved
        and its stack's counters. Bytes that did not move between the two, and the
        counters that did (retransmission timeouts, a drop), say where a transfer is stuck;
        no counters in a report say a thread held the stack's lock."""
        bench = [p for p in self.peers
                 if BENCH in p.argv and "--ctl" in p.argv and p.poll() is None]
        for _ in range(2):
            for p in bench:
                if p.poll() is None:
                    p.p.send_signal(signal.SIGUSR1)
            time.sleep(STALL_REPORT_GAP)
        return "".join(f"\n--- {p.name} {p.argv}, stderr:\n{p.stderr()[-8000:]}"
                       for p in bench if p is not self)

    def kill_now(self):
        self.kill()

    def kill(self, sig=signal.SIGKILL):
        if self.p.poll() is None:
            self.p.send_signal(sig)
            try:
                self.p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


class Testbed(TestbedEnv):
    def __init__(self):
        self.env = {}
        self.procs = []
        self.restarted = []    # ulsd processes a test started again (Popen)
        self.outdir = tempfile.mkdtemp(prefix="uls-node-")
        self.seq = 0

    # --- addresses: ctl(i), ip(i), netns, kernel_ns, kernel_ip (tblib.TestbedEnv) -------
    @property
    def daemon_dir(self):
        return os.path.dirname(self.ctl(1))

    # --- processes ---------------------------------------------------------------------
    def start(self, argv, name=None, netns=None, env=None):
        """env: variables to add to (or, with None as value, drop from) this environment."""
        self.seq += 1
        if env is not None:
            env = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
        p = Proc(argv, self.outdir, f"{self.seq:03d}-{name or os.path.basename(argv[0])}", netns=netns,
                 env=env, peers=self.procs)
        self.procs.append(p)
        return p

    def server(self, node, port, count=None, reuseport=False, env=None):
        """A ulsbench server on node `node` (ulsd's node), listening once this returns."""
        argv = [BENCH, "server", "--ctl", self.ctl(node), "--port", str(port)]
        if count is not None:
            argv += ["--count", str(count)]
        if reuseport:
            argv.append("--reuseport")
        p = self.start(argv, name=f"server-n{node}-{port}", env=env)
        self.wait_listening(p)
        return p

    def kernel_server(self, port, netns=None):
        p = self.start([BENCH, "server", "--port", str(port)], name=f"kserver-{port}",
                       netns=netns or self.kernel_ns)
        self.wait_listening(p)
        return p

    def wait_listening(self, p, timeout=5.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "listening on port" in p.stderr():
                return
            if p.poll() is not None:
                break
            time.sleep(0.02)
        raise AssertionError(f"{p.name} is not listening (exit {p.poll()}): {p.stderr()}")

    def client(self, node, to, nbytes, direction="send", name=None, env=None):
        """A ulsbench client on node `node`; `to` is "IP:PORT"."""
        return self.start([BENCH, "client", "--ctl", self.ctl(node), "--to", to, "--bytes", str(nbytes),
                           "--dir", direction], name=name or f"client-n{node}", env=env)

    def kernel_client(self, to, nbytes, direction="send", name=None):
        return self.start([BENCH, "client", "--to", to, "--bytes", str(nbytes), "--dir", direction],
                          name=name or "kclient", netns=self.kernel_ns)

    def hostile(self, node, *args, user=None, timeout=20):
        """Run hostile to the end; its stdout. The data path its lease got is checked
        against the suite's (hostile_lease)."""
        argv = [HOSTILE, self.ctl(node), *map(str, args)]
        if user is not None:
            argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *argv]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        assert r.returncode == 0, f"hostile {args}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
        if "hostile: lease" in r.stderr:
            hostile_lease(r.stderr)
        return r.stdout

    def kernel_python(self, code, *args, name="kpy"):
        return self.start([PYTHON, "-c", code, *map(str, args)], name=name, netns=self.kernel_ns)

    # --- ulsd ----------------------------------------------------------------------------
    def stat(self, node):
        r = subprocess.run([STAT, "--ctl", self.ctl(node), "--json"], capture_output=True, text=True,
                           timeout=10)
        assert r.returncode == 0, f"ulsstat node {node}: {r.stderr}"
        return json.loads(r.stdout)

    def counters(self, node):
        return self.stat(node)["counters"]

    def ulsd_pid(self, node):
        """The PID of node `node`'s ulsd, or None. testbed's ulsdI.pid may hold the PID of
        the shell that started ulsd in the namespace rather than ulsd's own; then ulsd is
        the process in the node namespace whose command line is ulsd with this node's
        control socket."""
        with open(os.path.join(self.daemon_dir, f"ulsd{node}.pid")) as f:
            pid = int(f.read().strip())
        if self._is_ulsd(pid, node):
            return pid
        r = subprocess.run(["ip", "netns", "pids", self.env["TB_NETNS"]], capture_output=True,
                           text=True, timeout=10)
        for p in r.stdout.split():
            if self._is_ulsd(int(p), node):
                return int(p)
        return None

    def _is_ulsd(self, pid, node):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            return False
        return (_alive(pid) and bool(argv) and os.path.basename(argv[0]) == "ulsd"
                and self.ctl(node) in argv)

    def ulsd_alive(self, node):
        return self.ulsd_pid(node) is not None

    def ulsd_cmdline(self, node):
        pid = self.ulsd_pid(node)
        assert pid is not None, f"no ulsd for node {node}"
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode() for a in f.read().split(b"\0") if a]

    def start_ulsd(self, node, argv, timeout=120.0):
        """Start ulsd for `node` again, the way the testbed did (in its namespace, in the
        foreground, its log appended), record its PID for `testbed down`, and wait until it
        answers on its control socket (it creates it once it does, after loading its data
        path's program: 0.5 s on a quiet machine, 8-16 s at load 20-30, when 5 s were not
        enough).

        In a session of its own, as the testbed's ulsd is (the testbed script runs in one,
        tblib.run_testbed) and a daemon would be: with autogroup scheduling
        (kernel.sched_autogroup_enabled) a session shares the CPUs as one, and in the test
        runner's session ulsd shared that share with what the tests start there, synflood
        at nice -10 first. Under a SYN flood on the relay, on a machine other jobs kept
        busy, such a ulsd ran 0.11-0.17 CPUs and waited for one 42-77% of the time; its
        TAP dropped 11,800-27,400 of the flood's 250,000 frames (3 runs of 4), a client's
        SYNs with them, and once neither of them was shed and taken back in
        (test_relay_ulsd_sheds_a_syn_flood..., node/run-relay)."""
        log = open(os.path.join(self.daemon_dir, f"ulsd{node}.log"), "ab")
        p = subprocess.Popen(["ip", "netns", "exec", self.env["TB_NETNS"], *argv], stdout=log,
                             stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        self.restarted.append(p)
        with open(os.path.join(self.daemon_dir, f"ulsd{node}.pid"), "w") as f:
            f.write(f"{p.pid}\n")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert p.poll() is None, f"restarted ulsd for node {node} exited with {p.returncode}"
            r = subprocess.run([STAT, "--ctl", self.ctl(node)], capture_output=True, timeout=10)
            if r.returncode == 0:
                return p
            time.sleep(0.05)
        raise AssertionError(f"restarted ulsd for node {node} does not answer on {self.ctl(node)}")

    def ulsd_log_tail(self, node, lines=10):
        try:
            with open(os.path.join(self.daemon_dir, f"ulsd{node}.log"), errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError as e:
            return str(e)

    def save_logs(self):
        """Keep the ulsd logs (testbed down deletes them) next to the processes' output."""
        if self.env:
            for node in (1, 2):
                src = os.path.join(self.daemon_dir, f"ulsd{node}.log")
                if os.path.exists(src):
                    shutil.copy(src, os.path.join(self.outdir, f"ulsd{node}.log"))

    def cleanup_procs(self):
        for p in reversed(self.procs):
            p.kill()
        self.procs = []


def _ulsd_argv_from_env(tb, node):
    """The command line testbed's start_daemons() uses (if a test lost the original)."""
    e = tb.env
    argv = [ULSD, "--tap", e[f"TB_NODE{node}_TAP"], "--ip", f"{e[f'TB_NODE{node}_IP']}/{e['TB_PREFIX']}",
            "--mac", e[f"TB_NODE{node}_MAC"], "--mtu", e["TB_MTU"], "--ctl", tb.ctl(node), "-f"]
    # testbed --ipv6 (and its router): without these a restored node lost IPv6, and every
    # IPv6 test after the one that killed its ulsd failed too.
    if e.get(f"TB_NODE{node}_IP6"):
        argv += ["--ip6", f"{e[f'TB_NODE{node}_IP6']}/{e['TB_PREFIX6']}"]
    if node == 1 and e.get("TB_ROUTER6"):
        argv += ["--gw6", e["TB_ROUTER6_LL"]]
    return argv


def ensure_ulsd(tb, node):
    """Restore a node's ulsd if a test killed it (and did not restart it)."""
    if not tb.ulsd_alive(node):
        tb.start_ulsd(node, _ulsd_argv_from_env(tb, node))


def pytest_configure(config):
    config.addinivalue_line("markers", "direct: about the direct data path alone (deselected "
                            "when the suite runs on the relay)")


def pytest_collection_modifyitems(config, items):
    if DATAPATH == "direct":
        return
    drop = [i for i in items if i.get_closest_marker("direct")]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = [i for i in items if not i.get_closest_marker("direct")]


@pytest.fixture(scope="session")
def testbed():
    for prog in (BENCH, STAT, HOSTILE, ULSD):
        if not os.path.exists(prog):
            pytest.fail(f"{prog} not built: run `make` and `make tests/node/hostile` in {BUILD}")
    tb = Testbed()

    def down():
        tb.cleanup_procs()
        try:
            tb.save_logs()
            _testbed("down")
        finally:
            # `down` stops the daemons by the PIDs it recorded, which include a restarted
            # ulsd; anything we restarted and that still runs is ours to stop.
            for p in tb.restarted:
                if p.poll() is None:
                    p.kill()
                p.wait()

    with down_once(down):
        # --ipv6: each ulsd has an IPv6 address (--ip6), so that the IPv6 cases
        # (test_node_ipv6.py) meet the node's IPv6 steering and transmit check.
        tb.env = parse_exports(_testbed("up", "--nodes", "2", "--ipv6"))
        assert tb.env.get("TB_ULSD") == "1", tb.env
        tb.kernel_server(KERNEL_SINK_PORT)
        yield tb


@pytest.fixture
def tb(testbed):
    """The session testbed; processes a test started are stopped when it ends, and both
    nodes' ulsd are alive again afterwards."""
    n = len(testbed.procs)
    try:
        yield testbed
    finally:
        for p in reversed(testbed.procs[n:]):
            p.kill()
        del testbed.procs[n:]
        died = [node for node in (1, 2) if not testbed.ulsd_alive(node)]
        logs = {node: testbed.ulsd_log_tail(node) for node in died}
        for node in died:
            ensure_ulsd(testbed, node)
        # A test that kills ulsd on purpose restarts it itself: a dead one here crashed.
        assert not died, f"ulsd of node(s) {died} died during the test (restarted for the next " \
                         f"test); end of their logs: {logs}"


def start_listen_spy(tb, node, seconds, name):
    """tests/node/hostile `listen` on node: a process that counts for `seconds` what the
    node delivers to it, once its lease is open (it said so on stderr)."""
    spy = tb.start([HOSTILE, tb.ctl(node), "listen", str(seconds)], name=name)
    deadline = time.monotonic() + 5
    while "hostile: lease" not in spy.stderr():
        assert spy.poll() is None and time.monotonic() < deadline, spy.stderr()
        time.sleep(0.02)
    return spy


def spy_counts(spy):
    """What a finished listen spy (start_listen_spy) counted: (frames, tcp, arp)."""
    words = spy.stdout().split()
    assert words[0::2] == ["frames", "tcp", "arp"], spy.stdout()
    frames, tcp, arp = map(int, words[1::2])
    return frames, tcp, arp


def hostile_lease(stderr):
    """The queue of a hostile process's lease (None on the relay), from what it says on
    stderr; its data path must be the suite's."""
    for line in stderr.splitlines():
        if line.startswith("hostile: lease "):
            words = line.split()
            assert words[2] == DATAPATH, f"hostile got the {words[2]} path, the suite runs {DATAPATH}"
            return int(words[4]) if words[2] == "direct" else None
    raise AssertionError(f"hostile said nothing about its lease: {stderr}")


def frames_moved(before, after):
    """Frames that moved between the node's TAP and its processes, both ways: on the relay
    every one is ulsd's (data_frames_relayed); on the direct path the kernel steers them to
    the processes' queues and checks what they write (direct_steered, direct_tx_passed)."""
    d = {k: after.get(k, 0) - before.get(k, 0) for k in
         ("data_frames_relayed", "direct_steered", "direct_tx_passed")}
    return d["data_frames_relayed"] + d["direct_steered"] + d["direct_tx_passed"]


def tx_dropped(before, after, reason):
    """Frames the node refused to send for `reason` (src_mac, src_ip, arp, proto, port,
    shared_peer, icmp): ulsd's deny_<reason> on the relay, the transmit check's
    direct_tx_dropped.<reason> on the direct path."""
    key = f"deny_{reason}" if DATAPATH == "relay" else f"direct_tx_dropped.{reason}"
    return after.get(key, 0) - before.get(key, 0)


def counters_once(tb, node, done, timeout=15.0):
    """Node `node`'s counters once done(counters) holds: frames a process queued are counted
    when ulsd (relay) or the kernel (direct) has taken them, which on a loaded machine may
    be later than any fixed pause. Read once more 0.3 s after done first held, so that a
    count that goes past its mark shows that as before; after timeout s, the last reading."""
    deadline = time.monotonic() + timeout
    while not done(tb.counters(node)) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.3)
    return tb.counters(node)


def check_client(p, timeout):
    """A ulsbench client exited 0 and says every byte was verified."""
    rc = p.wait(timeout)
    assert rc == 0 and "every byte verified" in p.stdout(), \
        f"{p.name} failed (exit {rc}): {p.stdout()} {p.stderr()}"
    return p.stdout()


def server_results(p, n, timeout=10.0):
    """Wait for n JSON result lines from a ulsbench server; every one verified."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = p.json_lines()
        if len(lines) >= n:
            break
        time.sleep(0.05)
    lines = p.json_lines()
    assert len(lines) >= n, f"{p.name}: {len(lines)} results, expected {n}: {p.stdout()} {p.stderr()}"
    for r in lines:
        assert r["verified"] is True, f"{p.name}: {r}"
    return lines


def delta(before, after, key):
    return after[key] - before[key]


def capture(tb, pcap, flt, name):
    """tcpdump on the bridge (where every frame a node sends arrives), once it captures.
    Immediate mode: otherwise frames wait in the kernel's capture buffer for up to a second,
    and a capture stopped sooner misses them (0 captured, N received by filter); a 32 MiB
    buffer, since a burst overflowed the default on this busy machine. stop_capture checks
    that it lost nothing."""
    cap = tb.start(["tcpdump", "-i", "br0", "-nn", "--immediate-mode", "-B", "32768", "-U", "-w",
                    pcap, flt], name=name, netns=tb.env["TB_NETNS"])
    deadline = time.monotonic() + 10
    while "listening on" not in cap.stderr():
        assert cap.poll() is None and time.monotonic() < deadline, cap.stderr()
        time.sleep(0.05)
    time.sleep(0.2)
    return cap


def stop_capture(cap):
    """Stop a capture; a capture that dropped frames could make "nothing seen" vacuous."""
    time.sleep(0.5)
    cap.kill(signal.SIGINT)
    err = cap.stderr()
    assert "0 packets dropped by kernel" in err, err
