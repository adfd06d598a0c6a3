"""What the pytest suites share about the testbed script (tests/testbed/testbed)."""
import os
import shlex
import subprocess
import tempfile

# The trees a suite runs against: the source tree ($ULS_SRCDIR, else the tree this file is
# in) and the build tree ($ULS_BUILDDIR, else SRC/build); the testbed script. A suite's
# conftest.py finds this file with one line, its own directory's parent on sys.path.
SRC = os.environ.get("ULS_SRCDIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BUILD = os.environ.get("ULS_BUILDDIR") or os.path.join(SRC, "build")
TESTBED = os.path.join(SRC, "tests", "testbed", "testbed")


def run_testbed(testbed, tb_name, build, *args):
    """Run the testbed script; returns its stdout (the export lines). Output goes through
    files, not pipes: the ulsd daemons `up` starts inherit its stdout, so a pipe would not
    see end-of-file until they exit."""
    env = dict(os.environ, TB_NAME=tb_name, ULS_BUILDDIR=build)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        r = subprocess.run([testbed, *args], env=env, stdout=out, stderr=err,
                           stdin=subprocess.DEVNULL, timeout=120)
        out.seek(0)
        err.seek(0)
        text, errors = out.read(), err.read()
    assert r.returncode == 0, f"testbed {' '.join(args)}: exit {r.returncode}\n{errors}"
    return text


def parse_exports(text):
    """The `export K=V` lines of `testbed up` as a dict."""
    env = {}
    for line in text.splitlines():
        if line.startswith("export "):
            k, _, v = line[len("export "):].partition("=")
            env[k] = shlex.split(v)[0] if v else ""
    return env


# A python client for echo servers: it sends random.Random(SEED).randbytes(NBYTES) to
# HOST:PORT from one thread while it reads the echo back, and prints "match" when what came
# back is exactly what it sent ("mismatch N" otherwise). Run it as
# [python, "-c", ECHO_CLIENT, HOST, PORT, SEED, NBYTES], in whichever namespace or under
# ulsrun as the test needs.
ECHO_CLIENT = r"""
import random, socket, sys, threading
data = random.Random(int(sys.argv[3])).randbytes(int(sys.argv[4]))
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
t = threading.Thread(target=lambda: (s.sendall(data), s.shutdown(socket.SHUT_WR)))
t.start()
got = bytearray()
while True:
    b = s.recv(65536)
    if not b:
        break
    got += b
t.join()
print("match" if bytes(got) == data else "mismatch %d" % len(got))
"""


class TestbedEnv:
    """The names `testbed up` exported (self.env, parse_exports) that every suite asks
    for: node i's control socket and address, the namespaces, the kernel peer."""

    def ctl(self, i):
        return self.env[f"TB_NODE{i}_CTL"]

    def ip(self, i):
        return self.env[f"TB_NODE{i}_IP"]

    @property
    def netns(self):
        return self.env["TB_NETNS"]

    @property
    def kernel_ns(self):
        return self.env["TB_KERNEL_NETNS"]

    @property
    def kernel_ip(self):
        return self.env["TB_KERNEL_IP"]


class OutputFiles:
    """For a test's process whose stdout and stderr go to the files out_path and err_path
    (a pipe could fill up and stall it): what it wrote so far."""

    def stdout(self):
        with open(self.out_path, errors="replace") as f:
            return f.read()

    def stderr(self):
        with open(self.err_path, errors="replace") as f:
            return f.read()
