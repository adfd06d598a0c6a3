"""Two hosts (issue 16, item 4): a testbed of `tests/testbed/testbed up --hosts 2 --nodes 2`
(TB_NAME ulshosts), two network namespaces standing for two machines of a cluster, each
with its own bridge, ulsd nodes and Linux peer, joined by a veth pair that stands for the
physical network (MTU 1500, no TSO/GSO: it carries wire-sized frames).

    host 1: netns ulshosts                        host 2: netns ulshosts-h2
    +-------------------------------------+       +--------------------------------------+
    | node 1 198.18.0.1   node 2 .2       |       | node 1 198.18.0.33   node 2 .34      |
    |  [uls1]   [uls2]    [k1-br]--- k1 .100      |  [uls1]   [uls2]     [k1-br]--- h2k .110
    |    +--------+-- br0 --+--[wire0]----+-------+--[wire0]--+-- br0 --+---+              |
    +-------------------------------------+ veth  +--------------------------------------+

Programs on a node run in their host's namespace (`ip netns exec HOST ulsrun --ctl NODE`),
kernel programs in a peer's namespace. Every process is started in a session of its own
and stopped through its process group (SIGTERM, then SIGKILL after a bounded wait) at the
end of each test, also on failure; the testbed goes down at the end of the session, also
when pytest is interrupted. Every wait is bounded.
"""
import atexit
import json
import os
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tblib import BUILD, SRC, TESTBED, FileProc, parse_exports, run_testbed  # noqa: E402
ULSRUN = os.path.join(BUILD, "apps", "ulsrun")
BENCH = os.path.join(BUILD, "apps", "ulsbench")
STAT = os.path.join(BUILD, "apps", "ulsstat")
PYTHON = "/usr/bin/python3"
TB_NAME = "ulshosts"
WIRE_TABLE = "ulshosts_wire"


def watch_wire(env):
    """Count the frames that enter each host from the wire, and those longer than the MTU
    (at ingress `meta length` is the IP packet's length): a wire with TSO or GSO left on
    carries 64 KiB super-segments, which the tests then see. Inside the testbed's
    namespaces only; the tables die with them."""
    mtu = int(env["TB_MTU"])
    for ns in (env["TB_NETNS"], env["TB_H2_NETNS"]):
        rules = (f"table netdev {WIRE_TABLE} {{\n chain wire_in {{\n"
                 f"  type filter hook ingress device \"{env['TB_WIRE_IF']}\" priority 0; "
                 f"policy accept;\n  meta length > {mtu} counter\n  counter\n }}\n}}\n")
        subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=rules, text=True,
                       check=True)


def _tb(*args):
    return run_testbed(TESTBED, TB_NAME, BUILD, *args)


class Hosts:
    def __init__(self, env, tmp):
        self.env = env
        self.tmp = tmp
        self.procs = []

    # Where things are: host 1 or 2, node 1 or 2.
    def ns(self, host):
        return self.env["TB_NETNS"] if host == 1 else self.env["TB_H2_NETNS"]

    def kernel_ns(self, host):
        return self.env["TB_KERNEL_NETNS"] if host == 1 else self.env["TB_H2_KERNEL_NETNS"]

    def kernel_ip(self, host):
        return self.env["TB_KERNEL_IP"] if host == 1 else self.env["TB_H2_KERNEL_IP"]

    def _key(self, host, node, what):
        return f"TB_NODE{node}_{what}" if host == 1 else f"TB_H2_NODE{node}_{what}"

    def ip(self, host, node):
        return self.env[self._key(host, node, "IP")]

    def ctl(self, host, node):
        return self.env[self._key(host, node, "CTL")]

    # How things run.
    def on_node(self, host, node, argv):
        """argv under ulsrun on that node, in its host's namespace."""
        return ["ip", "netns", "exec", self.ns(host), ULSRUN, "--ctl", self.ctl(host, node),
                "--", *argv]

    def on_kernel(self, host, argv):
        return ["ip", "netns", "exec", self.kernel_ns(host), *argv]

    def start(self, argv, name):
        p = FileProc(argv, self.tmp, name)
        self.procs.append(p)
        return p

    def stop_all(self):
        for p in self.procs:
            p.stop(grace=3)
        self.procs = []

    def wire_counters(self):
        """What entered either host from the wire: (frames, bytes, frames above the MTU),
        from the nftables counters `watch_wire` put on each end's ingress."""
        frames = nbytes = over = 0
        for ns in (self.env["TB_NETNS"], self.env["TB_H2_NETNS"]):
            out = subprocess.run(["ip", "netns", "exec", ns, "nft", "-j", "list", "table",
                                  "netdev", WIRE_TABLE], capture_output=True, text=True,
                                 check=True).stdout
            for item in json.loads(out)["nftables"]:
                rule = item.get("rule")
                if not rule:
                    continue
                counter = next(e["counter"] for e in rule["expr"] if "counter" in e)
                if any("match" in e for e in rule["expr"]):
                    over += counter["packets"]
                else:
                    frames += counter["packets"]
                    nbytes += counter["bytes"]
        return frames, nbytes, over

    def node_counters(self, host, node):
        r = subprocess.run([STAT, "--ctl", self.ctl(host, node), "--json"], capture_output=True,
                           text=True, timeout=10)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["counters"]

    def wait_listening(self, host, node_or_kernel, port, proc, timeout=10):
        """Until something listens on port: on a node (ulsd's endpoints) or a kernel peer
        (node_or_kernel == 'kernel')."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"{proc.name} exited:\n{proc.output()}")
            if node_or_kernel == "kernel":
                r = subprocess.run(["ip", "netns", "exec", self.kernel_ns(host), "ss", "-Hltn",
                                    f"sport = :{port}"], capture_output=True, text=True)
                if r.stdout.strip():
                    return
            else:
                r = subprocess.run([STAT, "--ctl", self.ctl(host, node_or_kernel), "--json"],
                                   capture_output=True, text=True, timeout=10)
                if r.returncode == 0 and any(
                        e.get("proto") == "tcp" and e.get("state") == "listen"
                        and e.get("local", "").rpartition(":")[2] == str(port)
                        for e in json.loads(r.stdout).get("endpoints", [])):
                    return
            time.sleep(0.1)
        pytest.fail(f"nothing listens on port {port} after {timeout} s:\n{proc.output()}")


@pytest.fixture(scope="session")
def testbed():
    _tb("down")
    atexit.register(lambda: _tb("down"))
    env = parse_exports(_tb("up", "--hosts", "2", "--nodes", "2"))
    try:
        watch_wire(env)
        yield env
    finally:
        _tb("down")


@pytest.fixture
def hosts(testbed, tmp_path):
    h = Hosts(testbed, str(tmp_path))
    try:
        yield h
    finally:
        h.stop_all()
