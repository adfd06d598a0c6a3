"""Fixtures for the shim's semantic tests: a testbed (TB_NAME ulsshim) with one ulsd node
and the kernel peer, peer.py running on the kernel's stack in the peer's namespace.

Each case of cases.py runs as its own program under `ulsrun --ctl NODE1` inside the node
namespace, which has no kernel address on the nodes' subnet: a socket that silently fell
back to the kernel could not reach the peer. Everything started here is stopped by PID,
and the testbed is torn down at the end, also on failure.
"""
import atexit
import os
import shlex
import subprocess
import tempfile
import time

import pytest

SRC = os.environ.get("ULS_SRCDIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("ULS_BUILDDIR") or os.path.join(SRC, "build")
TESTBED = os.path.join(SRC, "tests", "testbed", "testbed")
ULSRUN = os.path.join(BUILD, "apps", "ulsrun")
HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"
TB_NAME = "ulsshim"


def _testbed(*args):
    env = dict(os.environ, TB_NAME=TB_NAME, ULS_BUILDDIR=BUILD)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        r = subprocess.run([TESTBED, *args], env=env, stdout=out, stderr=err,
                           stdin=subprocess.DEVNULL, timeout=120)
        out.seek(0)
        err.seek(0)
        text, errors = out.read(), err.read()
    assert r.returncode == 0, f"testbed {' '.join(args)}: exit {r.returncode}\n{errors}"
    return text


def _exports(text):
    env = {}
    for line in text.splitlines():
        if line.startswith("export "):
            k, _, v = line[len("export "):].partition("=")
            env[k] = shlex.split(v)[0] if v else ""
    return env


class Bed:
    def __init__(self, env):
        self.env = env
        self.ns = env["TB_NETNS"]
        self.ctl = env["TB_NODE1_CTL"]
        self.ip = env["TB_NODE1_IP"]
        self.kip = env["TB_KERNEL_IP"]

    def ulsrun(self, argv, timeout=60, env=None):
        """Run argv under ulsrun on node 1, in the node namespace."""
        return subprocess.run(["ip", "netns", "exec", self.ns, ULSRUN, "--ctl", self.ctl, "--",
                               *argv], capture_output=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, env=env)

    def case(self, name):
        r = self.ulsrun([PYTHON, os.path.join(HERE, "cases.py"), name, self.kip, self.ip])
        out = r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")
        assert r.returncode == 0 and f"PASS {name}" in out, f"case {name} failed:\n{out}"


@pytest.fixture(scope="session")
def bed():
    _testbed("down")
    atexit.register(lambda: _testbed("down"))
    env = _exports(_testbed("up", "--nodes", "1"))
    peer = subprocess.Popen(["ip", "netns", "exec", env["TB_KERNEL_NETNS"], PYTHON,
                             os.path.join(HERE, "peer.py"), env["TB_KERNEL_IP"]],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    try:
        line = peer.stdout.readline()
        assert b"peer ready" in line, line
        yield Bed(env)
    finally:
        peer.kill()
        peer.wait(timeout=10)
        _testbed("down")
