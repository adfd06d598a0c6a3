#!/usr/bin/python3
"""What the ulsbench drivers share: the testbed they build, the processes they start, and
how those are stopped and their CPU counted.

apps/ulsbench_sweep.py (the concurrent-stream sweep, `ulsbench` without a subcommand) and
apps/ulsbench_apps.py (`ulsbench apps`: real programs, ulstack against the kernel) import
this module from the directory they are in (the source tree's apps/, or pkglibexecdir when
installed).

Everything a driver starts goes through Procs: each process in a session of its own (a
terminal's ^C reaches only the driver, which stops them in order), tracked by its PID,
stopped by that PID (SIGTERM, SIGKILL after GRACE seconds) and reaped with wait4, whose
rusage is the process's CPU time. The testbed (tests/testbed/testbed, TB_NAME "ulsbench",
TB_SUFFIX appended by the script) is only read and signalled through its own script.

Importing this module runs nothing.
"""

import argparse
import contextlib
import errno
import fcntl
import json
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TB_NAME = "ulsbench"
STATE_DIR = "/run/ulstack-testbed"
# One ulsbench driver at a time per testbed name: drivers share TB_NAME, and the testbed
# script appends TB_SUFFIX to it, so engineers who set different suffixes on one machine
# get testbeds and locks of their own (their numbers still share the CPU).
LOCK_FILE = "/run/lock/ulsbench-sweep%s.lock" % os.environ.get("TB_SUFFIX", "")
# The testbed's ulsd nodes run with segmentation offload (64 KiB super-segments through the
# TAP's virtio-net header), as ulsd does by default, unless a driver asks for it off.
DEFAULT_OFFLOAD = "on"
GRACE = 2.0                 # SIGTERM -> SIGKILL
POLL = 0.01


class UsageError(Exception):
    """Bad command line: exit 2."""


class BenchError(Exception):
    """The run cannot go on (a worker failed, data unverified, a timeout): exit 1."""


class Interrupted(Exception):
    """SIGINT/SIGTERM/SIGHUP arrived."""

    def __init__(self, signum):
        super().__init__("interrupted by signal %d" % signum)
        self.signum = signum



# ---------------------------------------------------------------------------
# Command lines: a driver's parser, its --json and --plot, its start
# ---------------------------------------------------------------------------
class UsageParser(argparse.ArgumentParser):
    """argparse's parser, but a bad command line raises UsageError (exit 2) instead of
    exiting: the drivers' tests call parse_args."""

    def error(self, message):
        raise UsageError(message)


def add_output_args(p, plots, plot_word):
    """--json FILE and --plot DIR; `plots` names the files --plot writes."""
    p.add_argument("--json", default=None, metavar="FILE", help="write the results as JSON")
    p.add_argument("--plot", default=None, metavar="DIR",
                   help="write %s here (default: the directory of --json; no %s without "
                        "either)" % (plots, plot_word))


def check_output_args(opts):
    """--json's directory must exist (UsageError); --plot defaults to it."""
    if opts["json"]:
        d = os.path.dirname(os.path.abspath(opts["json"]))
        if not os.path.isdir(d):
            raise UsageError("--json: directory %s does not exist" % d)
        if opts["plot"] is None:
            opts["plot"] = d
    return opts


def parse_as_root(prog, argv, parse_args, build_parser):
    """A driver's start: (its options, None), or (None, the exit status) after saying why:
    2 for a bad command line, 1 when not root."""
    try:
        opts = parse_args(argv)
    except UsageError as e:
        sys.stderr.write("%s: %s\n" % (prog, e))
        sys.stderr.write(build_parser().format_usage())
        return None, 2
    if os.geteuid() != 0:
        log("must run as root (the testbed creates network namespaces)")
        return None, 1
    return opts, None


# ---------------------------------------------------------------------------
# Processes: everything started here is tracked by PID and reaped with wait4
# ---------------------------------------------------------------------------
class Proc:
    def __init__(self, name, argv, popen, out, err):
        self.name, self.argv, self.popen = name, argv, popen
        self.pid = popen.pid
        self.out, self.err = out, err
        self.rc = None
        self.cpu = 0.0
        self.csw = 0            # context switches, voluntary + involuntary (wait4)
        self.vcsw = 0           # ... voluntary alone (the thread slept: a wake-up follows)
        self.minflt = 0         # minor page faults, all threads, whole life (wait4)
        self.started = time.monotonic()
        self.ended = None

    @property
    def alive(self):
        return self.rc is None

    def describe(self):
        if self.rc is None:
            return "running"
        if self.rc < 0:
            return "killed by signal %d" % -self.rc
        return "exit %d" % self.rc

    def stderr_tail(self, n=8):
        try:
            with open(self.err, errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            return ""
        return "\n".join("    " + l for l in lines[-n:])


def fifo_priority():
    """ULS_BENCH_FIFO=N (1-50): what the drivers start runs at SCHED_FIFO priority N, so
    that on a shared machine other sessions' work does not take the point's CPUs (the
    kernel's real-time throttling still leaves them 5%). For A/B comparisons of a change
    on a busy machine; a real service does not run so, and the targets are judged without
    it. 0: unset, or refused with a message."""
    v = os.environ.get("ULS_BENCH_FIFO", "")
    if not v:
        return 0
    if v.isdigit() and 1 <= int(v) <= 50:
        return int(v)
    if not getattr(fifo_priority, "said", False):
        log("ULS_BENCH_FIFO=%s refused: expected 1 to 50; normal scheduling" % v)
        fifo_priority.said = True
    return 0


class Procs:
    """Starts processes in their own session (so a terminal's ^C reaches only this
    driver, which stops them in order), and stops them by PID."""

    def __init__(self, logdir):
        self.logdir = logdir
        self.all = []
        self.seq = 0

    def spawn(self, name, argv, env=None):
        self.seq += 1
        base = os.path.join(self.logdir, "%04d-%s" % (self.seq, re.sub(r"[^\w.-]", "_", name)))
        out, err = base + ".out", base + ".err"
        prio = fifo_priority()
        if prio:
            argv = ["chrt", "-f", str(prio)] + list(argv)
        with open(out, "wb") as fo, open(err, "wb") as fe:
            try:
                p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fo, stderr=fe,
                                     env=env, start_new_session=True, close_fds=True)
            except OSError as e:
                raise BenchError("cannot start %s (%s): %s" % (name, argv[0], e))
        proc = Proc(name, argv, p, out, err)
        self.all.append(proc)
        return proc

    def reap(self, proc, block=False):
        if proc.rc is not None:
            return True
        try:
            with usual_priority():
                pid, status, ru = os.wait4(proc.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            pid, status, ru = proc.pid, 0, None
        if pid == 0:
            return False
        proc.rc = os.waitstatus_to_exitcode(status)
        proc.popen.returncode = proc.rc     # keep Popen from reaping again
        if ru is not None:
            proc.cpu = ru.ru_utime + ru.ru_stime
            proc.csw = ru.ru_nvcsw + ru.ru_nivcsw
            proc.vcsw = ru.ru_nvcsw
            proc.minflt = ru.ru_minflt
        proc.ended = time.monotonic()
        return True

    def poll(self):
        """Reaps the processes that exited. One waitid(WNOWAIT) looks first: when none
        did, a poll is one system call, not one wait4 per live process (130 of them every
        POLL at 64 streams)."""
        try:
            if os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
                return
        except ChildProcessError:
            pass    # no child left: reap() marks the lost ones
        with usual_priority():
            for p in self.all:
                if p.rc is None:
                    self.reap(p)

    def stop(self, procs, grace=GRACE):
        """SIGTERM, then SIGKILL after `grace` seconds, each by its PID; reaps them."""
        live = [p for p in procs if p.rc is None and not self.reap(p)]
        for p in live:
            self._signal(p, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            live = [p for p in live if not self.reap(p)]
            if not live:
                return
            time.sleep(POLL)
        for p in live:
            self._signal(p, signal.SIGKILL)
        for p in live:
            self.reap(p, block=True)

    @staticmethod
    def _signal(p, sig):
        try:
            os.kill(p.pid, sig)
        except ProcessLookupError:
            pass

    def stop_all(self):
        self.stop([p for p in self.all if p.rc is None])


# ---------------------------------------------------------------------------
# Environment: binaries, testbed
# ---------------------------------------------------------------------------
def find_paths(environ=None):
    """Where the binaries and the testbed script are. ULS_BUILDDIR/ULS_SRCDIR when set
    (the build tree), else next to this script's installed location and $PATH."""
    env = os.environ if environ is None else environ
    here = os.path.dirname(os.path.abspath(__file__))
    src = env.get("ULS_SRCDIR") or (os.path.dirname(here)
                                    if os.path.exists(os.path.join(here, "..", "tests",
                                                                   "testbed", "testbed"))
                                    else None)
    build = env.get("ULS_BUILDDIR")
    if not build and src and os.path.exists(os.path.join(src, "build", "apps", "ulsbench")):
        build = os.path.join(src, "build")
    prefix = os.path.dirname(os.path.dirname(here))   # <prefix>/libexec/ulstack -> <prefix>

    def binary(sub, name):
        if build:
            return os.path.join(build, sub, name)
        for d in (os.path.join(prefix, "bin"), os.path.join(prefix, "sbin")):
            if os.access(os.path.join(d, name), os.X_OK):
                return os.path.join(d, name)
        return shutil.which(name) or name

    testbed = None
    for cand in ([os.path.join(src, "tests", "testbed", "testbed")] if src else []) + \
            [os.path.join(here, "testbed")]:
        if os.path.exists(cand):
            testbed = cand
            break
    return {
        "src": src, "build": build, "testbed": testbed,
        "ulsbench": binary("apps", "ulsbench"),
        "ulsrelay": binary("apps", "ulsrelay"),
        "ulsraw": binary("apps", "ulsraw"),
        "ulsstat": binary("apps", "ulsstat"),
        "ulsd": binary("server", "ulsd"),
        "ulsrun": binary("apps", "ulsrun"),
        # ulsbench apps' ping-pong pair: a program of the build tree, installed in
        # pkglibexecdir (next to these modules) rather than on $PATH
        "pingpong": (os.path.join(build, "apps", "ulspingpong") if build
                     else os.path.join(here, "ulspingpong")),
    }



def loss_arg(pct):
    """A loss level as `testbed impair --loss` takes it: 0.1 -> '0.1', 1.0 -> '1'."""
    milli = int(round(pct * 1000))
    whole, frac = divmod(milli, 1000)
    return str(whole) if not frac else ("%d.%03d" % (whole, frac)).rstrip("0")


def read_cpu_ticks(pid):
    """utime+stime of a process in seconds, or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
    except OSError:
        return None
    fields = s[s.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_cpu_ns(pid):
    """CPU time (user + system, nanoseconds) of a process, every thread it ever had
    included, from its CPU-time clock (clock_getcpuclockid(3): the clock id of a process is
    (~pid << 3) | CPUCLOCK_SCHED), the scheduler's own count rather than /proc/PID/stat's
    10 ms ticks; None when it is gone."""
    try:
        return time.clock_gettime_ns(((~pid) << 3) | 2)
    except OSError:
        return None


def tree_cpu_ns(pid):
    """CPU time (user + system, nanoseconds) of a process's threads and its descendants',
    from the scheduler's own clock (/proc/PID/task/TID/schedstat), not from the 10 ms
    ticks of /proc/PID/stat: a window of a few seconds over 128 processes needs better;
    0 when it is gone."""
    total, todo, seen = 0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            tids = os.listdir("/proc/%d/task" % p)
        except OSError:
            continue
        for tid in tids:
            try:
                with open("/proc/%d/task/%s/schedstat" % (p, tid)) as f:
                    total += int(f.read().split()[0])
                with open("/proc/%d/task/%s/children" % (p, tid)) as f:
                    todo += [int(c) for c in f.read().split()]
            except (OSError, ValueError, IndexError):
                continue
    return total


_driver_fifo = False    # driver_first(True) took effect


@contextlib.contextmanager
def usual_priority():
    """The driver at its usual scheduling while it reaps. Reaping a child frees its /proc
    entries (wait4 -> release_task -> proc_invalidate_siblings_dcache), and the kernel's
    walk of those dentries retries while another task is busy with them; at SCHED_FIFO
    the driver kept that task off its CPU and spun in the kernel for minutes (stop 37: a
    64-stream point's driver at 92% of a CPU in d_walk, SIGKILL pending, the machine's
    load average at 221 until it was made SCHED_OTHER)."""
    if not _driver_fifo:
        yield
        return
    driver_first(False)
    try:
        yield
    finally:
        driver_first(True)


def driver_first(on=True):
    """Lets a driver that runs as root take its samples on time: at 64 streams its 128
    worker processes, each a scheduling group of its own (autogroup), kept a normal
    process off the CPU for seconds. SCHED_FIFO with SCHED_RESET_ON_FORK: what it starts
    runs as usual. The driver sleeps between its polls; its own CPU is a few percent of
    one core. on=False: back to the usual policy (for the plots, which are CPU work).
    Returns whether it took effect."""
    global _driver_fifo
    try:
        if on:
            os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK,
                                  os.sched_param(10))
        else:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        _driver_fifo = on
        return True
    except (OSError, AttributeError):
        return False


def _comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return None


def _children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


LIBTOOL_LIBPATH = re.compile(r'^\s*LD_LIBRARY_PATH="([^"$]*):\$LD_LIBRARY_PATH"', re.M)


def unwrap_libtool(path):
    """(program, library directories) to run PATH as: in the build tree, a program that
    links libuls is a libtool wrapper script whose every start costs a shell, sed and ls
    (about 15 ms of CPU idle, more on a busy machine). A benchmark that starts 128 such
    processes per point would charge that start-up to the mode with the most processes,
    which an installed program never pays, so the sweep runs the program the wrapper
    would exec (`.libs/NAME`) with the wrapper's LD_LIBRARY_PATH. Anything that is not
    such a wrapper comes back as it is, with no directories."""
    try:
        with open(path, "rb") as f:
            head = f.read(65536)
    except OSError:
        return path, []
    if not head.startswith(b"#!") or b"libtool" not in head:
        return path, []
    real = os.path.join(os.path.dirname(path), ".libs", os.path.basename(path))
    m = LIBTOOL_LIBPATH.search(head.decode("utf-8", "replace"))
    if not os.access(real, os.X_OK) or m is None:
        return path, []
    return real, [d for d in m.group(1).split(":") if d]


def run_unwrapped(paths, names, environ=None):
    """Points paths[NAME] for each NAME at the program its libtool wrapper would run,
    and puts the wrapper's library directories in front of environ's LD_LIBRARY_PATH
    (os.environ by default: what the processes a driver starts inherit)."""
    env = os.environ if environ is None else environ
    dirs = []
    for name in names:
        if paths.get(name):
            paths[name], more = unwrap_libtool(paths[name])
            dirs += [d for d in more if d not in dirs]
    if dirs:
        old = [d for d in env.get("LD_LIBRARY_PATH", "").split(":") if d and d not in dirs]
        env["LD_LIBRARY_PATH"] = ":".join(dirs + old)
    return paths


class Testbed:
    def __init__(self, paths, name=TB_NAME, offload=DEFAULT_OFFLOAD):
        self.paths, self.name = paths, name
        self.offload = offload
        self.env = {}
        self.is_up = False

    def _env(self):
        e = dict(os.environ)
        e["TB_NAME"] = self.name
        # ulsd reads ULS_TSO when it has no --offload (the testbed starts it without one):
        # 0 is `--offload csum`, segmentation off and checksum offload kept, as the kernel
        # peers' veths keep theirs (kernel_offload)
        e["ULS_TSO"] = "1" if self.offload == "on" else "0"
        if self.paths["build"]:
            e["ULS_BUILDDIR"] = self.paths["build"]
        e.setdefault("ULSD", self.paths["ulsd"])
        return e

    def _run(self, argv, timeout=120):
        """Runs the testbed script with its output in files, not pipes: the daemons that
        `up` starts inherit its descriptors, so a pipe would never see end-of-file.
        Returns (exit code or None on timeout, stdout, stderr)."""
        with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
            try:
                r = subprocess.run(argv, env=self._env(), stdin=subprocess.DEVNULL,
                                   stdout=fo, stderr=fe, timeout=timeout)
                rc = r.returncode
            except subprocess.TimeoutExpired:
                rc = None
            fo.seek(0)
            fe.seek(0)
            return rc, fo.read(), fe.read()

    def up(self, mtu, ulsd, ipv6=False):
        argv = [self.paths["testbed"], "up", "--nodes", "2", "--mtu", str(mtu)]
        if not ulsd:
            argv.append("--no-ulsd")
        if ipv6:
            argv.append("--ipv6")
        self.is_up = True       # a failed `up` cleans up itself; `down` is safe anyway
        rc, out, err = self._run(argv)
        if rc != 0:
            raise BenchError("testbed up --mtu %d%s failed (%s):\n%s" % (
                mtu, "" if ulsd else " --no-ulsd",
                "timed out" if rc is None else "exit %d" % rc, err.strip()))
        env = {}
        for line in out.splitlines():
            m = re.fullmatch(r"export (TB_\w+)=(.*)", line.strip())
            if m:
                v = m.group(2)
                env[m.group(1)] = shlex.split(v)[0] if v else ""
        need = ["TB_NETNS", "TB_NODE1_IP", "TB_NODE2_IP", "TB_KERNEL_NETNS",
                "TB_KERNEL2_NETNS", "TB_KERNEL_IP"]
        if ulsd:
            need += ["TB_NODE1_CTL", "TB_NODE2_CTL"]
        if ipv6:
            need += ["TB_KERNEL_IP6", "TB_KERNEL2_IP6"]
        lost = [k for k in need if k not in env]
        if lost:
            raise BenchError("testbed up did not export %s" % ", ".join(lost))
        self.env = env
        return env

    def down(self):
        if not self.is_up or not self.paths["testbed"]:
            return
        rc, _, err = self._run([self.paths["testbed"], "down"])
        if rc != 0:
            log("warning: testbed down %s: %s" % ("timed out" if rc is None else
                                                  "failed (exit %d)" % rc, err.strip()))
        self.is_up = False
        self.env = {}

    def impair(self, loss):
        """Random loss of `loss` percent on the frames entering the bridge (testbed
        impair); the rule's counters start at 0."""
        rc, _, err = self._run([self.paths["testbed"], "impair", "--loss", loss_arg(loss)],
                               timeout=30)
        if rc != 0:
            raise BenchError("testbed impair --loss %s failed (%s):\n%s" % (
                loss_arg(loss), "timed out" if rc is None else "exit %d" % rc, err.strip()))

    def impair_stats(self):
        rc, out, err = self._run([self.paths["testbed"], "impair-stats"], timeout=30)
        try:
            doc = json.loads(out) if rc == 0 else None
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            raise BenchError("testbed impair-stats failed (%s):\n%s" % (
                "timed out" if rc is None else "exit %d" % rc, (err + out).strip()))
        return doc

    def kernel_offload(self, on):
        """TSO/GSO of the kernel peers' interfaces (inside their namespaces): off makes the
        kernel's TCP hand the bridge wire-sized frames, as ulsd does with offload off."""
        for ns in (self.env["TB_KERNEL_NETNS"], self.env["TB_KERNEL2_NETNS"]):
            argv = ["ip", "netns", "exec", ns, "ethtool", "-K", "eth0",
                    "tso", "on" if on else "off", "gso", "on" if on else "off"]
            try:
                r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
            except (OSError, subprocess.TimeoutExpired) as e:
                raise BenchError("%s: %s" % (" ".join(argv), e))
            if r.returncode != 0:
                raise BenchError("%s failed: %s" % (" ".join(argv), r.stderr.strip()))

    def ulsd_pids(self):
        """The PIDs of the testbed's ulsd processes (only read, never signalled). The PID
        file may name the ulsd itself or the shell that started it; then its ulsd child."""
        pids = []
        # The name the testbed really used: it appends TB_SUFFIX to TB_NAME.
        name = self.env.get("TB_NAME", self.name)
        for i in (1, 2):
            try:
                with open(os.path.join(STATE_DIR, name + ".d", "ulsd%d.pid" % i)) as f:
                    pid = int(f.read().strip())
            except (OSError, ValueError):
                continue
            todo, depth = [pid], 0
            while todo and depth < 3:
                nxt = []
                for p in todo:
                    if _comm(p) == "ulsd":
                        pids.append(p)
                    else:
                        nxt += _children(p)
                todo, depth = nxt, depth + 1
        return pids

    def link_bytes(self, dev, direction="tx"):
        """A device's byte counter in the node namespace (for progress), or None."""
        try:
            r = subprocess.run(["ip", "-n", self.env["TB_NETNS"], "-s", "-j", "link", "show",
                                "dev", dev], capture_output=True, text=True, timeout=5)
            return int(json.loads(r.stdout)[0]["stats64"][direction]["bytes"])
        except (OSError, ValueError, KeyError, IndexError, subprocess.TimeoutExpired):
            return None

    def link_up(self, dev):
        try:
            r = subprocess.run(["ip", "-n", self.env["TB_NETNS"], "-j", "link", "show", "dev",
                                dev], capture_output=True, text=True, timeout=5)
            return "LOWER_UP" in json.loads(r.stdout)[0].get("flags", [])
        except (OSError, ValueError, KeyError, IndexError, subprocess.TimeoutExpired):
            return False


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------
_TTY = sys.stderr.isatty()
_progress_open = False


def log(msg):
    global _progress_open
    if _progress_open:
        sys.stderr.write("\n")
        _progress_open = False
    sys.stderr.write("ulsbench: %s\n" % msg)
    sys.stderr.flush()


def progress(msg, final=False):
    """A progress line on stderr: rewritten in place on a terminal, one line a second
    otherwise."""
    global _progress_open
    if _TTY:
        sys.stderr.write("\r\033[K" + msg + ("\n" if final else ""))
        _progress_open = not final
    else:
        sys.stderr.write(msg + "\n")
    sys.stderr.flush()



def machine_info(paths):
    info = {"hostname": platform.node(), "kernel": platform.release(),
            "machine": platform.machine(), "cpus": os.cpu_count(),
            "python": platform.python_version()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            info["memory_kib"] = int(f.readline().split()[1])
    except (OSError, ValueError, IndexError):
        pass
    # Every process of a point runs in a session of its own (Procs.spawn), which with
    # autogroup scheduling is a scheduling group of its own: on a machine shared with other
    # sessions that decides how much CPU a ulstack process (whose TCP runs in it) gets,
    # where the kernel's TCP runs in softirq (docs/benchmarks.md, "One stream at 0.1%").
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            info["sched_autogroup_enabled"] = int(f.read().strip())
    except (OSError, ValueError):
        pass
    # Real-time workers (ULS_BENCH_FIFO): not how a service runs; said in every record.
    info["bench_fifo_priority"] = fifo_priority()
    if paths.get("src"):
        try:
            r = subprocess.run(["git", "-C", paths["src"], "describe", "--always", "--dirty"],
                               capture_output=True, text=True, timeout=10)
            if r.returncode == 0:
                info["source"] = r.stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            pass
    return info


def write_json(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def _raise_signal(signum, frame):
    raise Interrupted(signum)


def run_guarded(body, procs, tb, cleanup=None):
    """Run body() with SIGINT, SIGTERM and SIGHUP raising Interrupted. Whatever happens,
    every process is stopped, cleanup() runs (when given) and the testbed comes down, with
    those signals ignored meanwhile so a second one cannot cut that short. Returns
    (error, rc): (None, 0) when body() returned."""
    old = {s: signal.signal(s, _raise_signal) for s in (signal.SIGINT, signal.SIGTERM,
                                                        signal.SIGHUP)}
    error, rc = None, 0
    try:
        body()
    except BenchError as e:
        error, rc = str(e), 1
    except Interrupted as e:
        error, rc = str(e), 128 + e.signum
    except KeyboardInterrupt:
        error, rc = "interrupted", 130
    finally:
        for s in old:
            signal.signal(s, signal.SIG_IGN)
        procs.stop_all()
        if cleanup is not None:
            cleanup()
        tb.down()
        for s, h in old.items():
            signal.signal(s, h)
    return error, rc


def take_lock():
    """The drivers' lock (an open file holding flock), or None when another driver holds
    it."""
    os.makedirs(os.path.dirname(LOCK_FILE), exist_ok=True)
    lock = open(LOCK_FILE, "a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        lock.close()
        if e.errno in (errno.EAGAIN, errno.EACCES):
            return None
        raise
    return lock


def take_lock_or_say(missing, hint=None):
    """Before a driver's runs: None after saying each of `missing` (what the runs need and
    the host lacks) and then hint; else take_lock(), saying so when another driver holds
    the lock (None then)."""
    if missing:
        for m in missing:
            log(m)
        if hint:
            log(hint)
        return None
    lock = take_lock()
    if lock is None:
        log("another ulsbench driver is running (lock %s held)" % LOCK_FILE)
    return lock


def save_doc(path, doc, error, what):
    """Write a driver's JSON document (write_json) and say so; an incomplete one (error)
    holds only the `what` that finished and verified. False when it cannot be written."""
    try:
        write_json(path, doc)
        log("wrote %s%s" % (path, "" if error is None else
                            " (incomplete: only the %s that finished and verified)" % what))
        return True
    except OSError as e:
        log("cannot write %s: %s" % (path, e))
        return False


def save_plots(outdir, make, what):
    """make(outdir), a plotting function that returns the files it wrote, and say what it
    wrote. The plots are a report, not a measurement: a failure is said, not raised
    (False then); `what` names them in the message."""
    try:
        os.makedirs(outdir, exist_ok=True)
        for p in make(outdir):
            log("wrote %s" % p)
        return True
    except Exception as e:
        log("%s failed: %s: %s" % (what, type(e).__name__, e))
        return False


def finish(error, workdir, elapsed, kept):
    """A driver's last words: its working directory removed after a complete run, kept
    (`kept` names what is in it) after a failed one."""
    if error is None:
        shutil.rmtree(workdir, ignore_errors=True)
        log("done in %.0f s" % elapsed)
    else:
        log("%s kept in %s" % (kept, workdir))


def process_tree(pid):
    """pid and its descendants that are alive now (read from /proc; a bounded walk)."""
    res, todo = [], [pid]
    while todo and len(res) < 4096:
        p = todo.pop()
        if read_cpu_ticks(p) is None:
            continue
        res.append(p)
        todo += _children(p)
    return res


def tree_cpu(pid):
    """CPU seconds (user + system) of pid and its live descendants (process_cpu_ns)."""
    return sum(v for v in (process_cpu_ns(p) for p in process_tree(pid)) if v is not None) / 1e9
