"""Fixtures for the shim's semantic tests: a testbed (TB_NAME ulsshim) with one ulsd node
and the kernel peer, peer.py running on the kernel's stack in the peer's namespace.

Each case of cases.py runs as its own program under `ulsrun --ctl NODE1` inside the node
namespace, which has no kernel address on the nodes' subnet: a socket that silently fell
back to the kernel could not reach the peer. Everything started here is stopped by PID,
and the testbed is torn down at the end, also on failure.
"""
import atexit
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tblib import BUILD, SRC, TESTBED, parse_exports, run_testbed  # noqa: E402
ULSRUN = os.path.join(BUILD, "apps", "ulsrun")
HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"
TB_NAME = "ulsshim"


def _tb(*args):
    return run_testbed(TESTBED, TB_NAME, BUILD, *args)


class Bed:
    def __init__(self, env):
        self.env = env
        self.ns = env["TB_NETNS"]
        self.ctl = env["TB_NODE1_CTL"]
        self.ip = env["TB_NODE1_IP"]
        self.kip = env["TB_KERNEL_IP"]
        # The IPv6 testbed (bed6): the cases learn both IPv6 addresses (casebase.py).
        self.ip6 = env.get("TB_NODE1_IP6")
        self.kip6 = env.get("TB_KERNEL_IP6")

    def ulsrun(self, argv, timeout=60, env=None):
        """Run argv under ulsrun on node 1, in the node namespace."""
        return subprocess.run(["ip", "netns", "exec", self.ns, ULSRUN, "--ctl", self.ctl, "--",
                               *argv], capture_output=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, env=env)

    def case(self, name, env=None):
        if self.ip6:
            env = dict(env if env is not None else os.environ, CASE_KIP6=self.kip6,
                       CASE_NIP6=self.ip6)
        r = self.ulsrun([PYTHON, os.path.join(HERE, "cases.py"), name, self.kip, self.ip],
                        env=env)
        out = r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")
        assert r.returncode == 0 and f"PASS {name}" in out, f"case {name} failed:\n{out}"


def _bed(name, *up):
    _tb_name = lambda *a: run_testbed(TESTBED, name, BUILD, *a)  # noqa: E731
    _tb_name("down")
    atexit.register(lambda: _tb_name("down"))
    env = parse_exports(_tb_name("up", "--nodes", "1", *up))
    ips = [env["TB_KERNEL_IP"]] + ([env["TB_KERNEL_IP6"]] if "--ipv6" in up else [])
    peer = subprocess.Popen(["ip", "netns", "exec", env["TB_KERNEL_NETNS"], PYTHON,
                             os.path.join(HERE, "peer.py"), *ips],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    try:
        line = peer.stdout.readline()
        assert b"peer ready" in line, line
        yield Bed(env)
    finally:
        peer.kill()
        peer.wait(timeout=10)
        _tb_name("down")


@pytest.fixture(scope="session")
def bed():
    yield from _bed(TB_NAME)


@pytest.fixture(scope="session")
def bed6():
    """The same with IPv6 on the node (ulsd --ip6, testbed up --ipv6): AF_INET6 sockets
    are then libuls's own (the shim's native6), over IPv6 or with v4-mapped IPv4 peers."""
    yield from _bed(TB_NAME + "6", "--ipv6")
