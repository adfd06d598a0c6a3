"""End-to-end fixtures: a one-node testbed with a Linux kernel peer.

    namespace ulse2e (TB_NETNS)            namespace ulse2e-k1 (TB_KERNEL_NETNS)
    +-------------------------------+      +------------------------------+
    | ulsbench --tap uls1 (ulstack) |      | ulsbench server (kernel TCP) |
    |        |                      |      |   eth0 198.18.0.100          |
    |      [uls1]--+--br0--+--[k1-br]------+                              |
    |              |       |                                              |
    |       tcpdump -i br0 (captures)                                     |
    +-------------------------------+      +------------------------------+

Everything lives in namespaces the testbed creates; the fixture tears them down at the end,
also when a test fails.
"""
import json
import os
import select
import signal
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tblib import BUILD, SRC, TESTBED, parse_exports, run_testbed  # noqa: E402
BENCH = os.path.join(BUILD, "apps", "ulsbench")
PORT = 5001


class Testbed:
    def __init__(self, env):
        self.env = env
        self.procs = []

    def node_args(self, i=1):
        e = self.env
        return ["--tap", e[f"TB_NODE{i}_TAP"], "--ip", f"{e[f'TB_NODE{i}_IP']}/{e['TB_PREFIX']}",
                "--mac", e[f"TB_NODE{i}_MAC"]]

    def start(self, netns, argv, **kw):
        p = subprocess.Popen(["ip", "netns", "exec", netns, *argv], **kw)
        self.procs.append(p)
        return p

    def stop(self, p):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def run(self, netns, argv, timeout):
        return subprocess.run(["ip", "netns", "exec", netns, *argv], capture_output=True,
                              text=True, timeout=timeout)


def wait_stderr_line(p, text, timeout=15.0):
    """Read p's stderr (a pipe) until it holds text: a program's own word that it is ready
    (a fixed pause was a guess a loaded machine could miss)."""
    deadline = time.monotonic() + timeout
    fd, seen = p.stderr.fileno(), b""
    while text.encode() not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"no {text!r} within {timeout} s: {seen!r}"
        r, _, _ = select.select([fd], [], [], min(left, 0.2))
        if r:
            chunk = os.read(fd, 4096)
            assert chunk, f"{p.args} exited ({p.poll()}) before {text!r}: {seen!r}"
            seen += chunk


@pytest.fixture(scope="session")
def testbed():
    if not os.path.exists(BENCH):
        pytest.fail(f"{BENCH} not built: run make first (ULS_BUILDDIR={BUILD})")
    name = "ulse2e"
    tb = Testbed({})
    try:
        tb.env = parse_exports(run_testbed(TESTBED, name, BUILD, "up", "--nodes", "1", "--no-ulsd"))
        server = tb.start(tb.env["TB_KERNEL_NETNS"], [BENCH, "server", "--port", str(PORT)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_stderr_line(server, "listening on")
        yield tb
    finally:
        for p in reversed(tb.procs):
            if p.poll() is None:
                p.kill()
            p.wait()
        run_testbed(TESTBED, name, BUILD, "down")


def transfer(tb, direction, nbytes, tmp_path, timeout=300):
    """One verified ulsbench transfer between node 1 (ulstack) and the kernel peer."""
    out = tmp_path / f"{direction}.json"
    r = tb.run(tb.env["TB_NETNS"],
               [BENCH, "client", *tb.node_args(), "--to", f"{tb.env['TB_KERNEL_IP']}:{PORT}",
                "--bytes", str(nbytes), "--dir", direction, "--json", str(out)], timeout)
    assert r.returncode == 0, f"ulsbench failed: {r.stdout}\n{r.stderr}"
    res = json.loads(out.read_text())
    print(r.stdout.strip())
    return res
