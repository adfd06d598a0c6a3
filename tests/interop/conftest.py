"""Interop fixtures: unmodified programs (nc, curl, python3, iperf3, redis, nginx, wrk) on two
ulsd nodes through `ulsrun`, and against a Linux kernel peer.

    namespace ulsinterop (TB_NETNS): no kernel address on 198.18.0.0/24
    +------------------------------------------------------------------+
    |  ulsd node 1 (198.18.0.1)          ulsd node 2 (198.18.0.2)      |    namespace
    |  ulsrun --ctl NODE1 -- nginx ...   ulsrun --ctl NODE2 -- wrk ... |    ulsinterop-k1
    |      [uls1] -------+----- br0 -----+------ [uls2]                |    +----------------+
    |                    +---------------+--------------------[k1-br]--+----+ kernel TCP .100 |
    +------------------------------------------------------------------+    | iperf3 (plain) |
                                                                            +----------------+

Every program that should use ulstack runs as `ip netns exec $TB_NETNS ulsrun --ctl CTL --
PROGRAM ...`: that namespace has no kernel address on the nodes' subnet, so a socket the
shim failed to take over cannot reach the other node and the test fails instead of passing
through the kernel. Each test also reads ulsd's counters before and after and checks that
the node(s) moved at least as many frames as the bytes transferred need.

The session fixture brings the testbed up once (TB_NAME=ulsinterop, two nodes) and down at
the end, also when a test fails or pytest is interrupted (try/finally and atexit). Every
process is started in a session of its own; it is stopped through its process group, whose
ID is the PID this suite recorded (so nginx's workers and any child of ulsrun go with it):
SIGTERM, then SIGKILL after a bounded wait, at the end of each test, also on failure. Every
wait is bounded.
"""
import contextlib
import hashlib
import json
import os
import random
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
ULSRUN = os.path.join(BUILD, "apps", "ulsrun")
STAT = os.path.join(BUILD, "apps", "ulsstat")
ULSD = os.path.join(BUILD, "server", "ulsd")
HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"     # Debian's python3 (and pytest), never another on PATH
TB_NAME = "ulsinterop"

MIB = 1 << 20
PAYLOAD_BYTES = 100 * MIB       # the bulk transfers (nc, curl): 100 MiB, hash verified
PAYLOAD_SEED = 20250404

# A lower bound on the frames a node's ulsd must see for N bytes of TCP payload: no frame
# carries more than max(TB_MTU, 9000) bytes (the testbed's MTU is 1500), or 64 KiB where
# the node's frames carried super-segments (segmentation offload). A program whose sockets
# fell back to the kernel moves ~0 frames through ulsd, so even this loose bound tells the
# two apart.
FRAME_PAYLOAD_MAX = 9000
GSO_PAYLOAD_MAX = 65536      # a super-segment (ulsd --offload on, the default)

# The programs and the Debian packages they come from (build-aux/setup-debian installs them).
PROGRAMS = {
    "nc": "netcat-openbsd", "curl": "curl", "iperf3": "iperf3", "redis-server": "redis-server",
    "redis-benchmark": "redis-tools", "redis-cli": "redis-tools", "nginx": "nginx",
    "wrk": "wrk",
}


def program(name):
    """The absolute path of an installed program, or the test fails saying how to get it."""
    path = shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")
    if not path:
        pytest.fail(f"{name} is not installed: run build-aux/setup-debian (Debian package "
                    f"{PROGRAMS.get(name) or name})")
    return path






def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(4 * MIB)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def wait_while_running(proc, found, timeout, waiting_for, missing):
    """found()'s first true value, asked every 50 ms for `timeout` seconds while proc runs;
    AssertionError if proc exits first ("exited before WAITING_FOR") or time runs out
    (MISSING), with proc's output."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = found()
        if got:
            return got
        if proc.poll() is not None:
            raise AssertionError(f"{proc.name} exited before {waiting_for}:\n{proc.output()}")
        time.sleep(0.05)
    raise AssertionError(f"{missing}\n{proc.output()}")


def make_payload(path, nbytes, seed):
    """A deterministic pseudo-random file of nbytes; returns its SHA-256."""
    rng = random.Random(seed)
    h = hashlib.sha256()
    with open(path, "wb") as f:
        left = nbytes
        while left:
            b = rng.randbytes(min(left, 8 * MIB))
            h.update(b)
            f.write(b)
            left -= len(b)
    return h.hexdigest()


def _tb(*args):
    return run_testbed(TESTBED, TB_NAME, BUILD, *args)


class Testbed(TestbedEnv):
    def __init__(self):
        self.env = {}
        self.procs = []
        self.outdir = tempfile.mkdtemp(prefix="uls-interop-")
        os.chmod(self.outdir, 0o755)   # nginx's workers (user nobody) serve files from here
        self.seq = 0

    # --- addresses: ctl(i), ip(i), netns, kernel_ns, kernel_ip (tblib.TestbedEnv) -------
    # --- command lines -------------------------------------------------------------------
    def uls(self, node, argv):
        """`argv` as a program on ulstack node `node`: under ulsrun, in the node namespace."""
        return ["ip", "netns", "exec", self.netns, ULSRUN, "--ctl", self.ctl(node), "--", *argv]

    def kernel(self, argv):
        """`argv` as a plain program on the Linux kernel peer (its own namespace)."""
        return ["ip", "netns", "exec", self.kernel_ns, *argv]

    # --- processes ---------------------------------------------------------------------
    def start(self, argv, name, stdin=None, stdout=None):
        self.seq += 1
        p = FileProc(argv, self.outdir, f"{self.seq:03d}-{name}", stdin=stdin, stdout=stdout)
        self.procs.append(p)
        return p

    def run(self, argv, name, timeout, stdin=None, stdout=None):
        """Start and wait (bounded); returns the finished Proc."""
        p = self.start(argv, name, stdin=stdin, stdout=stdout)
        p.wait(timeout)
        return p

    # --- ulsd ----------------------------------------------------------------------------
    def stat(self, node):
        r = subprocess.run([STAT, "--ctl", self.ctl(node), "--json"], capture_output=True, text=True,
                           timeout=10)
        assert r.returncode == 0, f"ulsstat node {node}: {r.stderr}"
        return json.loads(r.stdout)

    def counters(self):
        """Both nodes' ulsd counters: {node: {name: value}}."""
        return {node: self.stat(node)["counters"] for node in (1, 2)}

    def listeners(self, node, port):
        return [e for e in self.stat(node).get("endpoints", [])
                if e.get("proto") == "tcp" and e.get("state") == "listen"
                and e.get("local", "").rpartition(":")[2] == str(port)]

    def wait_listening(self, node, port, proc, timeout=15.0):
        """Wait until node `node`'s ulsd has a TCP listener on `port` (the program's socket
        is a ulstack socket, not a kernel one), while `proc` runs."""
        return wait_while_running(
            proc, lambda: self.listeners(node, port), timeout,
            f"listening on node {node} port {port}",
            f"no ulstack listener on node {node} port {port} after {timeout} s (did the "
            f"program's socket fall back to the kernel?)")

    def wait_kernel_listening(self, port, proc, timeout=15.0):
        """Wait until a kernel socket listens on `port` in the kernel peer's namespace."""
        def ss():
            return subprocess.run(["ip", "netns", "exec", self.kernel_ns, "ss", "-Hltn",
                                   f"sport = :{port}"], capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        wait_while_running(proc, ss, timeout, f"listening on port {port}",
                           f"nothing listens on port {port} in {self.kernel_ns} after {timeout} s")

    def assert_through_ulstack(self, before, received=None, sent=None):
        """The bytes went through ulstack's node: node n's processes received at least
        received[n] / F frames (frames_demuxed: ulsd relayed them; direct_steered: the kernel
        steered them to their queues on the direct data path) and sent at least sent[n] / F
        frames (frames_sent, direct_tx_passed), F = FRAME_PAYLOAD_MAX, or 64 KiB at a node
        whose frames carried super-segments (segmentation offload: frames_gso_sent,
        frames_gso_received or their direct_* counterparts grew)."""
        after = self.counters()
        problems = []
        for what, counters in ((received or {}, ("frames_demuxed", "direct_steered")),
                               (sent or {}, ("frames_sent", "direct_tx_passed"))):
            for node, nbytes in what.items():
                gso = any(after[node].get(k, 0) > before[node].get(k, 0)
                          for k in ("frames_gso_sent", "frames_gso_received",
                                    "direct_tx_passed_gso", "direct_steered_gso"))
                per = GSO_PAYLOAD_MAX if gso else FRAME_PAYLOAD_MAX
                need = nbytes // max(per, int(self.env.get("TB_MTU", "1500")))
                got = sum(after[node].get(c, 0) - before[node].get(c, 0) for c in counters)
                counter = " + ".join(counters)
                if got < need:
                    problems.append(f"node {node}: {counter} grew by {got}, but {nbytes} bytes need "
                                    f">= {need} frames")
        assert not problems, "traffic did not go through ulstack: " + "; ".join(problems)
        return after

    def ulsd_log_tail(self, node, lines=10):
        try:
            with open(os.path.join(os.path.dirname(self.ctl(node)), f"ulsd{node}.log"),
                      errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError as e:
            return str(e)

    def ulsd_alive(self, node):
        """Node `node`'s ulsd answers on its control socket."""
        r = subprocess.run([STAT, "--ctl", self.ctl(node)], capture_output=True, timeout=10)
        return r.returncode == 0

    def save_logs(self):
        """Keep the ulsd logs (testbed down deletes them) next to the processes' output."""
        if self.env:
            for node in (1, 2):
                src = os.path.join(os.path.dirname(self.ctl(node)), f"ulsd{node}.log")
                if os.path.exists(src):
                    shutil.copy(src, os.path.join(self.outdir, f"ulsd{node}.log"))

    def stop_procs(self, first=0):
        for p in reversed(self.procs[first:]):
            p.stop()
        del self.procs[first:]


_failed = []   # node IDs of tests that failed: their outputs are kept


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if outcome.get_result().failed:
        _failed.append(item.nodeid)


@pytest.fixture(scope="session")
def testbed():
    for prog in (ULSRUN, STAT, ULSD):
        if not os.path.exists(prog):
            pytest.fail(f"{prog} not built: run `make` in {BUILD} (ULS_BUILDDIR)")
    # SIGTERM (a harness's timeout) unwinds like ^C, so that the fixtures' cleanup runs.
    def on_term(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_term)
    tb = Testbed()

    def down():
        tb.stop_procs()
        tb.save_logs()
        _tb("down")

    try:
        with down_once(down):
            tb.env = parse_exports(_tb("up", "--nodes", "2"))
            assert tb.env.get("TB_ULSD") == "1", tb.env
            print(f"interop outputs in {tb.outdir}")
            yield tb
    finally:
        if _failed:
            print(f"interop outputs kept in {tb.outdir}")
        else:
            shutil.rmtree(tb.outdir, ignore_errors=True)


@contextlib.contextmanager
def procs_stopped_ulsd_alive(bed):
    """Around a test on testbed `bed`: the processes the test started are stopped when it
    ends (also on failure), and both nodes' ulsd must still be alive."""
    n = len(bed.procs)
    try:
        yield bed
    finally:
        bed.stop_procs(n)
        died = [node for node in (1, 2) if not bed.ulsd_alive(node)]
        assert not died, f"ulsd of node(s) {died} died during the test; end of their logs: " \
                         f"{ {node: bed.ulsd_log_tail(node) for node in died} }"


@pytest.fixture
def tb(testbed):
    """The session testbed, for one test (procs_stopped_ulsd_alive)."""
    with procs_stopped_ulsd_alive(testbed):
        yield testbed


@pytest.fixture(scope="session")
def datadir():
    """A directory for the big files (payload, received copies), removed at the end."""
    d = tempfile.mkdtemp(prefix="uls-interop-data-")
    os.chmod(d, 0o755)   # nginx's workers run as nobody
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def payload(datadir):
    """(path, sha256) of a deterministic pseudo-random 100 MiB file."""
    path = os.path.join(datadir, "payload.bin")
    digest = make_payload(path, PAYLOAD_BYTES, PAYLOAD_SEED)
    os.chmod(path, 0o644)
    return path, digest


def received_file(datadir, name):
    """A fresh path for a received copy (removed first if a previous test left it)."""
    path = os.path.join(datadir, name)
    if os.path.exists(path):
        os.unlink(path)
    return path


def check_copy(path, digest, nbytes):
    """The received copy has the payload's size and SHA-256; then it is removed."""
    try:
        size = os.path.getsize(path) if os.path.exists(path) else None
        assert size == nbytes, f"{path}: {size} bytes received, expected {nbytes}"
        got = sha256_file(path)
        assert got == digest, f"{path}: SHA-256 {got}, expected {digest}"
    finally:
        if os.path.exists(path):
            os.unlink(path)
