"""What the pytest suites share about the testbed script (tests/testbed/testbed)."""
import atexit
import contextlib
import json
import os
import shlex
import signal
import subprocess
import tempfile
import threading
import time

# The trees a suite runs against: the source tree ($ULS_SRCDIR, else the tree this file is
# in) and the build tree ($ULS_BUILDDIR, else SRC/build); the testbed script. A suite's
# conftest.py finds this file with one line, its own directory's parent on sys.path.
SRC = os.environ.get("ULS_SRCDIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BUILD = os.environ.get("ULS_BUILDDIR") or os.path.join(SRC, "build")
TESTBED = os.path.join(SRC, "tests", "testbed", "testbed")


def _interrupted(signum, frame):
    """The first SIGINT, SIGTERM or SIGHUP: pytest's own way out (KeyboardInterrupt), which
    tears the session's fixtures down, testbeds included. Later ones are ignored, so that
    a second signal (CI escalating, or the whole process group signalled) cannot cut that
    teardown short; it is bounded (run_testbed's timeout), and SIGKILL still ends it."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def stop_on_signals():
    """Make a suite that brings up testbeds come down on SIGTERM and SIGHUP as on SIGINT.
    Their default actions end Python without a `finally` or an atexit handler, leaving the
    namespaces behind; and a SIGINT a suite started in the background (`&` in a script)
    inherited as ignored would not stop it at all. Called when this module is imported
    (every suite's conftest does), in the main thread only."""
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, _interrupted)


stop_on_signals()


def run_testbed(testbed, tb_name, build, *args):
    """Run the testbed script; returns its stdout (the export lines). Output goes through
    files, not pipes: the ulsd daemons `up` starts inherit its stdout, so a pipe would not
    see end-of-file until they exit. The script runs in a session of its own: a signal
    for the suite's whole process group must not stop a `down` half-way (the suite itself
    gets it and tears down, _interrupted)."""
    env = dict(os.environ, TB_NAME=tb_name, ULS_BUILDDIR=build)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        r = subprocess.run([testbed, *args], env=env, stdout=out, stderr=err,
                           stdin=subprocess.DEVNULL, timeout=120, start_new_session=True)
        out.seek(0)
        err.seek(0)
        text, errors = out.read(), err.read()
    assert r.returncode == 0, f"testbed {' '.join(args)}: exit {r.returncode}\n{errors}"
    return text


@contextlib.contextmanager
def down_once(down):
    """Around a session testbed's life: `down` (stop what the suite started, keep the
    logs, `testbed down`) runs exactly once, when the block ends (also on failure) or, if
    pytest is interrupted before that, at interpreter exit."""
    done = []

    def once():
        if not done:
            done.append(True)
            down()

    atexit.register(once)
    try:
        yield
    finally:
        once()


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


class FileProc(OutputFiles):
    """A process a suite started, its output going to files (no pipe can fill up):
    OUTDIR/NAME.out (or the file `stdout`, when stdout is the program's data) and
    OUTDIR/NAME.err. With session=True it leads a session (and process group) of its own
    and stop() ends the whole group, children included."""

    def __init__(self, argv, outdir, name, stdin=None, stdout=None, env=None, session=True):
        self.name = name
        self.argv = list(argv)
        self.session = session
        self.data_out = stdout is not None    # stdout is the program's data, not text
        self.out_path = stdout or os.path.join(outdir, f"{name}.out")
        self.err_path = os.path.join(outdir, f"{name}.err")
        inp = open(stdin, "rb") if stdin else subprocess.DEVNULL
        try:
            with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
                # `ip netns exec` execs the program, so self.pid is the program's own PID
                # (or ulsrun's, if ulsrun stays as a parent): with a session, the group leader.
                self.p = subprocess.Popen(self.argv, stdin=inp, stdout=out, stderr=err, env=env,
                                          start_new_session=session, close_fds=True)
        finally:
            if stdin:
                inp.close()
        self.pid = self.p.pid
        self.started = time.monotonic()

    def poll(self):
        return self.p.poll()

    def wait(self, timeout):
        """The exit status; on timeout the process (group) is killed and the test fails,
        saying what stall_report() learnt before the kill."""
        try:
            return self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            report = self.stall_report()
            self.kill_now()
            raise AssertionError(f"{self.name} did not finish within {timeout} s:\n"
                                 f"{self.output()}{report}")

    def stall_report(self):
        """Asked before a process that ran out of time is killed (a suite may override
        it); what it returns ends the failure's message."""
        return ""

    def check(self, timeout):
        """Wait (bounded) for a clean exit; returns stdout."""
        rc = self.wait(timeout)
        assert rc == 0, f"{self.name} failed:\n{self.output()}"
        return self.stdout()

    def stdout(self):
        if self.data_out:
            return f"(data, to {self.out_path})"
        return super().stdout()

    def json_lines(self):
        """The JSON objects the process printed on stdout so far, one a line."""
        return [json.loads(line) for line in map(str.strip, self.stdout().splitlines())
                if line.startswith("{")]

    def last_json(self):
        """The last JSON line on stdout (a program's result), None if there is none."""
        lines = self.json_lines()
        return lines[-1] if lines else None

    def output(self):
        return f"{self.name} {self.argv}\nexit {self.p.returncode}\nstdout: " \
               f"{self.stdout()[-3000:]}\nstderr: {self.stderr()[-8000:]}"

    def kill_now(self):
        """SIGKILL, to the group with a session (a suite without one overrides this)."""
        self.stop(grace=0)

    def _signal_group(self, sig):
        """Signal our process group (ID = our recorded PID). ESRCH: nobody is left in it."""
        assert self.session, "only a session leader's group can be signalled"
        try:
            os.killpg(self.pid, sig)
            return True
        except ProcessLookupError:
            return False

    def group_alive(self):
        return self._signal_group(0)

    def stop(self, sig=signal.SIGTERM, grace=5.0):
        """Stop the process and everything in its group: `sig`, then SIGKILL after `grace`
        seconds. Returns the leader's exit status."""
        if self.p.poll() is None or self.group_alive():
            if grace > 0:
                self._signal_group(sig)
                deadline = time.monotonic() + grace
                while time.monotonic() < deadline:
                    if self.p.poll() is not None and not self.group_alive():
                        break
                    time.sleep(0.02)
            self._signal_group(signal.SIGKILL)
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass   # unkillable (D state): the testbed's `down` is the last resort
        return self.p.returncode
