#!/usr/bin/python3
"""ulsbench apps: real programs on ulstack and on the kernel's TCP, side by side.

    ulsbench apps [--apps LIST] [--seconds S] [--repeat R] [--json FILE] [--plot DIR]

Each configuration runs twice in the same invocation, with the same programs and the same
arguments: once under `ulsrun` between the two ulsd nodes of a testbed (server on node 1,
client on node 2), once on the Linux kernel's TCP between the testbed's two kernel
namespaces (server in ${TB_NAME}-k1, client in ${TB_NAME}-k2), whose veths hang on the same
bridge as the nodes' TAPs. The programs (--apps, default all):

  redis     redis-server, and redis-benchmark -t set / -t get with 1 and 50 clients
  nginx     nginx (master and 2 workers, a 4 KiB file) and wrk with 1 and 32 connections
  iperf3    iperf3 -4 with 1 and 4 parallel streams (client sends)
  pingpong  ulspingpong (apps/ulspingpong.c): round trips of a 1 B and a 1 KiB message
            through send/recv, one connection

Every run is checked before its numbers count, and a run that fails its check fails the
whole benchmark (exit 1, nothing reported for it):
  redis     redis-server's own command counters (INFO commandstats) grew by exactly the
            requests redis-benchmark made, with no failed or rejected call, and a GET of
            the key redis-benchmark SETs returns the value it wrote
  nginx     wrk saw no socket error and no non-2xx response; nginx's access log has a
            line for every request wrk completed, each status 200 with the file's size
  iperf3    both ends' JSON reports agree on the bytes received, with no error
  pingpong  the client checked every echoed byte; the server echoed as many messages as
            the client sent
and on ulstack, the listener was a ulstack socket (ulsd lists it) and both nodes' ulsd
counters show frames moved for both processes (the node namespace has no kernel address
on the testbed's subnet, so a socket the shim missed could not have reached the peer).

Measures: throughput (requests/s, Gbit/s or round trips/s, as the tool reports it),
p50/p99 latency where the tool reports it (redis-benchmark, wrk --latency, ulspingpong),
and CPU seconds: the user+system CPU of the client (wait4 rusage), of the server and its
children during the client's run (/proc), and of the testbed's ulsd daemons during it
(ulstack only). Kernel work done in softirq context counts only where the kernel charges it
to one of these processes.

With --repeat R every configuration runs R times, the stacks alternating which goes first;
the table and the JSON records carry medians, the records also each run.

The programs inherit the driver's environment, so `ULS_SPIN_US=50 ulsbench apps` runs the
ulstack side with that setting (the kernel side ignores it); the JSON's options record the
ULS_* variables that were set.

Network safety: everything runs inside the namespaces the testbed creates (TB_NAME
ulsbench, TB_SUFFIX appended by the testbed script); the processes signalled are the
ones this driver started, by PID (nginx's workers through the process group led by the
master's recorded PID); every run has a time limit; the testbed comes down at the end,
also on errors, SIGINT, SIGTERM and SIGHUP.

Importing this module runs nothing (tests/bench/test_apps_logic.py imports it).
"""

import argparse
import csv
import datetime
import io
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ulsbench_common import (  # noqa: E402
    BenchError, Procs, Testbed, UsageError, finish, find_paths, log, machine_info,
    parse_as_root, process_cpu_ns, progress, run_guarded, save_doc, save_plots, take_lock_or_say,
    tree_cpu)
# The pure parts, in a module of their own next to this file.
from ulsbench_appslogic import *  # noqa: E402,F401,F403
from ulsbench_appslogic import _fmt  # noqa: E402
from ulsbench_nginx import nginx_conf  # noqa: E402


# ---------------------------------------------------------------------------
# Environment
# ---------------------------------------------------------------------------
def program_path(name):
    return shutil.which(name, path=SYSTEM_PATH)


def check_tools(paths, apps):
    missing = []
    for tool in ("ulsd", "ulsrun", "ulsstat"):
        p = paths[tool]
        if not (os.path.isfile(p) and os.access(p, os.X_OK)):
            missing.append("%s not found at %s (build the tree: make)" % (tool, p))
    if "pingpong" in apps and not os.access(paths["pingpong"], os.X_OK):
        missing.append("ulspingpong not found at %s (build the tree: make)" % paths["pingpong"])
    for app in apps:
        for prog, pkg in PROGRAMS[app].items():
            if not program_path(prog):
                missing.append("%s needs %s (Debian package %s: run build-aux/setup-debian)"
                               % (app, prog, pkg))
    if not paths["testbed"]:
        missing.append("the testbed script tests/testbed/testbed was not found (set ULS_SRCDIR)")
    if not shutil.which("ip"):
        missing.append("'ip' (iproute2) not found")
    return missing


# ---------------------------------------------------------------------------
# One run
# ---------------------------------------------------------------------------
class Run:
    """One (program, configuration, stack) run on the up testbed: starts the server, the
    client, checks the result, stops everything it started; returns the measurement."""

    ULSD_FRAMES_IN = ("frames_demuxed", "direct_steered")
    ULSD_FRAMES_OUT = ("frames_sent", "direct_tx_passed")

    def __init__(self, procs, tb, paths, spec, seconds, workdir, seq):
        self.procs, self.tb, self.paths = procs, tb, paths
        self.app, self.cfg, self.stack = spec["program"], spec["args"], spec["stack"]
        self.seconds = seconds
        self.port = BASE_PORT[self.app] + seq % PORTS_PER_APP
        self.tag = "[%s %s, %s]" % (self.app, self.cfg["config"], self.stack)
        self.dir = os.path.join(workdir, "%03d-%s-%s" % (seq, self.app, self.stack))
        os.makedirs(self.dir)
        os.chmod(self.dir, 0o755)     # nginx's workers (user nobody) read files here
        self.started = []
        self.env = tb.env

    # -- where things run --------------------------------------------------------
    @property
    def server_ip(self):
        return self.env["TB_NODE1_IP"] if self.stack == "ulstack" else self.env["TB_KERNEL_IP"]

    def on(self, side, argv):
        """argv on the server side (1) or the client side (2) of this run's stack."""
        if self.stack == "ulstack":
            return ["ip", "netns", "exec", self.env["TB_NETNS"], self.paths["ulsrun"],
                    "--ctl", self.env["TB_NODE%d_CTL" % side], "--", *argv]
        ns = self.env["TB_KERNEL_NETNS"] if side == 1 else self.env["TB_KERNEL2_NETNS"]
        return ["ip", "netns", "exec", ns, *argv]

    def spawn(self, name, side, argv):
        p = self.procs.spawn("%s-%s-%s" % (self.app, self.stack, name), self.on(side, argv))
        self.started.append(p)
        return p

    def fail(self, msg, procs=()):
        detail = []
        for p in procs:
            detail.append("  %s (pid %d): %s\n    $ %s\n%s" % (
                p.name, p.pid, p.describe(), " ".join(p.argv), p.stderr_tail()))
        raise RunFailed("%s %s%s" % (self.tag, msg, ("\n" + "\n".join(detail)) if detail
                                     else ""))

    def read(self, proc):
        with open(proc.out, errors="replace") as f:
            return f.read()

    def wait(self, proc, timeout, what):
        """Waits for proc to exit (bounded); fails unless it exits 0."""
        deadline = time.monotonic() + timeout
        while not self.procs.reap(proc):
            if time.monotonic() > deadline:
                self.procs.stop([proc])
                self.fail("%s did not finish within %.0f s" % (what, timeout), [proc])
            time.sleep(0.02)
        if proc.rc != 0:
            self.fail("%s failed" % what, [proc])

    def helper(self, side, argv, name, timeout=15.0):
        """A short helper command (redis-cli) on a side; returns its stdout."""
        p = self.spawn(name, side, argv)
        self.wait(p, timeout, name)
        return self.read(p)

    # -- readiness ------------------------------------------------------------------
    def listening(self):
        if self.stack == "ulstack":
            try:
                r = subprocess.run([self.paths["ulsstat"], "--ctl", self.env["TB_NODE1_CTL"],
                                    "--json"], capture_output=True, text=True, timeout=5)
                eps = json.loads(r.stdout).get("endpoints", [])
            except (OSError, ValueError, subprocess.TimeoutExpired):
                return False
            return any(e.get("proto") == "tcp" and e.get("state") == "listen" and
                       str(e.get("local", "")).rpartition(":")[2] == str(self.port)
                       for e in eps)
        try:
            r = subprocess.run(["ip", "netns", "exec", self.env["TB_KERNEL_NETNS"], "ss",
                                "-Hltn", "sport = :%d" % self.port],
                               capture_output=True, text=True, timeout=5)
            return bool(r.stdout.strip())
        except (OSError, subprocess.TimeoutExpired):
            return False

    def wait_ready(self, server, extra=None):
        """Until the server listens on the port (a ulstack listener on node 1 for
        ulstack: a socket the shim missed would show up nowhere) and extra() holds."""
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            if self.procs.reap(server):
                self.fail("the server exited before it listened", [server])
            if self.listening() and (extra is None or extra()):
                return
            if time.monotonic() > deadline:
                self.fail("the server was not ready within %.0f s" % READY_TIMEOUT, [server])
            time.sleep(0.05)

    # -- accounting -------------------------------------------------------------------
    def ulsd_counters(self):
        if self.stack != "ulstack":
            return None
        res = {}
        for node in (1, 2):
            try:
                r = subprocess.run([self.paths["ulsstat"], "--ctl",
                                    self.env["TB_NODE%d_CTL" % node], "--json"],
                                   capture_output=True, text=True, timeout=10)
                res[node] = json.loads(r.stdout)["counters"]
            except (OSError, ValueError, KeyError, subprocess.TimeoutExpired) as e:
                self.fail("ulsstat of node %d: %s" % (node, e))
        return res

    def ulsd_cpu(self):
        if self.stack != "ulstack":
            return 0.0
        return sum(v for v in (process_cpu_ns(p) for p in self.tb.ulsd_pids())
                   if v is not None) / 1e9

    def snapshot(self, server):
        return {"server": tree_cpu(server.pid) if server.alive else None,
                "ulsd": self.ulsd_cpu(), "counters": self.ulsd_counters()}

    def through_ulstack(self, before, after):
        """Both nodes moved frames in both directions during the run (ulstack only)."""
        if before is None:
            return None
        moved = {}
        for node in (1, 2):
            d = {k: after[node].get(k, 0) - before[node].get(k, 0)
                 for k in self.ULSD_FRAMES_IN + self.ULSD_FRAMES_OUT}
            moved[node] = {"in": sum(d[k] for k in self.ULSD_FRAMES_IN),
                           "out": sum(d[k] for k in self.ULSD_FRAMES_OUT)}
            if not (moved[node]["in"] > 0 and moved[node]["out"] > 0):
                self.fail("node %d's ulsd moved no frames one way (%s): the traffic did not "
                          "go through ulstack" % (node, moved[node]))
        return moved

    def cpu(self, client, server, before, server_after, ulsd_after):
        """Client (rusage, whole life) + server tree during the run + ulsd during it."""
        if server_after is None:        # the server exited by itself: its rusage
            server_after = server.cpu
        parts = {"client": round(client.cpu, 3),
                 "server": round(max(0.0, server_after - (before["server"] or 0.0)), 3)}
        if self.stack == "ulstack":
            parts["ulsd"] = round(max(0.0, ulsd_after - before["ulsd"]), 3)
        return round(sum(parts.values()), 3), parts

    def stop_server(self, server, sig=signal.SIGTERM):
        """Stops the server by its PID (sig, then SIGKILL), and whatever is left in the
        process group it leads (nginx's workers, if the master died first)."""
        if server.alive:
            try:
                os.kill(server.pid, sig)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + STOP_TIMEOUT
            while not self.procs.reap(server) and time.monotonic() < deadline:
                time.sleep(0.02)
        self.procs.stop([server])
        try:
            os.killpg(server.pid, signal.SIGKILL)   # the group's ID is the recorded PID
        except (ProcessLookupError, PermissionError):
            pass

    def end(self, server, oneshot=False):
        """The snapshot right after the client exited 0 (before any check runs a helper):
        a one-off server's CPU comes from its rusage when it exits (None here)."""
        return {"server": None if oneshot else tree_cpu(server.pid),
                "ulsd": self.ulsd_cpu(), "counters": self.ulsd_counters()}

    def finish(self, client, server, before, after, measured, server_sig=signal.SIGTERM,
               oneshot=False):
        """CPU, the ulstack check, the server stopped (or, one-off, its exit awaited): the
        run record."""
        moved = self.through_ulstack(before["counters"], after["counters"])
        if oneshot:
            self.wait(server, STOP_TIMEOUT, "the server")
        else:
            self.stop_server(server, server_sig)
        total, parts = self.cpu(client, server, before, after["server"], after["ulsd"])
        rec = {"program": self.app, "config": self.cfg["config"], "stack": self.stack,
               "throughput": measured["throughput"], "unit": UNITS[self.app],
               "p50_us": measured.get("p50_us"), "p99_us": measured.get("p99_us"),
               "cpu_seconds": total, "cpu": parts,
               "seconds": round(measured["seconds"], 3), "verified": True,
               "check": measured["check"]}
        # Minor page faults, whole life (wait4): the memory each process touched for the
        # first time (issue 12); the server's only once it was reaped.
        rec["page_faults"] = {"client": getattr(client, "minflt", 0)}
        if not server.alive:
            rec["page_faults"]["server"] = getattr(server, "minflt", 0)
        if moved is not None:
            rec["ulsd_frames"] = moved
        return rec

    # -- the programs ------------------------------------------------------------------
    def run(self):
        progress("%s running" % self.tag)
        rec = getattr(self, "run_" + self.app)()
        progress("%s %s %s%s, CPU %.2f s" % (
            self.tag, _fmt(rec["throughput"]), rec["unit"],
            "" if rec["p50_us"] is None else ", p50 %s us, p99 %s us" % (
                _fmt(rec["p50_us"]), _fmt(rec["p99_us"])), rec["cpu_seconds"]), final=True)
        return rec

    def run_redis(self):
        test, clients = self.cfg["test"], self.cfg["clients"]
        server_bin, bench, cli = (program_path(p) for p in
                                  ("redis-server", "redis-benchmark", "redis-cli"))
        server = self.spawn("server", 1, [
            server_bin, "--port", str(self.port), "--bind", "0.0.0.0", "--protected-mode", "no",
            "--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", self.dir,
            "--logfile", ""])
        self.wait_ready(server)
        addr = ["-h", self.server_ip, "-p", str(self.port)]

        def info():
            return redis_info(self.helper(2, [cli, *addr, "INFO", "all"], "redis-cli-info"))

        base = ["-t", test, "-c", str(clients), "-d", str(REDIS_DATA), "--csv"]
        probe_n = REDIS_PROBE[clients]
        probe = self.spawn("probe", 2, [bench, *addr, *base, "-n", str(probe_n)])
        self.wait(probe, 60, "redis-benchmark (probe)")
        try:
            rate = redis_csv(self.read(probe), test)["throughput"]
        except (ValueError, KeyError) as e:
            self.fail("redis-benchmark (probe): %s" % e, [probe])
        n = redis_requests(rate, self.seconds)
        if self.helper(2, [cli, *addr, "SET", REDIS_KEY, REDIS_SENTINEL],
                       "redis-cli-set").strip() != "OK":
            self.fail("redis-cli SET did not answer OK")
        info0 = info()
        before = self.snapshot(server)
        t0 = time.monotonic()
        client = self.spawn("benchmark", 2, [bench, *addr, *base, "-n", str(n)])
        self.wait(client, run_timeout(self.app, self.seconds), "redis-benchmark")
        wall = time.monotonic() - t0
        after = self.end(server)
        out = self.read(client)
        try:
            m = redis_csv(out, test)
        except (ValueError, KeyError) as e:
            self.fail("redis-benchmark: %s" % e, [client])
        # The server's own counts: what redis-server did during the measured run.
        info1 = info()
        c0, c1 = cmdstat(info0, test), cmdstat(info1, test)
        calls = c1["calls"] - c0["calls"]
        problems = []
        if calls != n:
            problems.append("redis-server counted %d %s calls, redis-benchmark made %d"
                            % (calls, test.upper(), n))
        for k in ("failed_calls", "rejected_calls"):
            if c1[k] != c0[k]:
                problems.append("%s %s grew by %d" % (test, k, c1[k] - c0[k]))
        if info1.get("rejected_connections", "0") != "0":
            problems.append("rejected_connections %s" % info1.get("rejected_connections"))
        got = self.helper(2, [cli, *addr, "STRLEN", REDIS_KEY], "redis-cli-strlen").strip()
        want = REDIS_DATA if test == "set" else len(REDIS_SENTINEL)
        if got != str(want):
            problems.append("after the %s run %s holds %s bytes, expected %d (%s)" % (
                test.upper(), REDIS_KEY, got, want, "redis-benchmark's value"
                if test == "set" else "the value set before"))
        if problems:
            self.fail("; ".join(problems), [client])
        # the requests' time: n / rps (redis-benchmark's own clock), not start-up
        m.update(seconds=n / m["throughput"] if m["throughput"] else wall,
                 check="redis-server counted %d %s calls = the requests made, none failed; "
                       "%s" % (calls, test.upper(),
                               "the key now holds a %d-byte value (redis-benchmark's), not "
                               "the one set before" % REDIS_DATA if test == "set" else
                               "the key still holds the value set before"))
        rec = self.finish(client, server, before, after, m)
        rec["requests"] = n
        return rec

    def run_nginx(self):
        nginx, wrk = program_path("nginx"), program_path("wrk")
        d = self.dir
        for sub in ("www", "tmp"):
            os.makedirs(os.path.join(d, sub))
            os.chmod(os.path.join(d, sub), 0o755)
        body = os.path.join(d, "www", "small.bin")
        with open(body, "wb") as f:
            f.write(bytes(range(256)) * (NGINX_BODY // 256))
        os.chmod(body, 0o644)
        conf = os.path.join(d, "nginx.conf")
        with open(conf, "w") as f:
            f.write(nginx_conf(d, NGINX_WORKERS, '$status $body_bytes_sent "$request"',
                               "    server {\n        listen %d;\n        root %s/www;\n    }\n"
                               % (self.port, d), access_log_opts=" buffer=64k",
                               http_extra="    keepalive_requests 1000000;\n"))
        server = self.spawn("server", 1, [nginx, "-p", d, "-c", conf, "-e",
                                          os.path.join(d, "error.log")])

        def workers():
            return len(self_children(server.pid)) >= NGINX_WORKERS
        self.wait_ready(server, workers)
        before = self.snapshot(server)
        secs = max(1, int(round(self.seconds)))
        client = self.spawn("wrk", 2, [
            wrk, "-t%d" % self.cfg["threads"], "-c%d" % self.cfg["connections"],
            "-d%ds" % secs, "--timeout", "5s", "--latency",
            "http://%s:%d/small.bin" % (self.server_ip, self.port)])
        self.wait(client, run_timeout(self.app, secs), "wrk")
        after = self.end(server)
        try:
            m = parse_wrk(self.read(client))
        except ValueError as e:
            self.fail("wrk: %s" % e, [client])
        if m["errors"]:
            self.fail("wrk: %s" % "; ".join(m["errors"]), [client])
        # SIGQUIT: graceful; the master flushes the access log's buffer and waits for its
        # workers.
        rec = self.finish(client, server, before, after,
                          dict(m, seconds=secs, check=""), server_sig=signal.SIGQUIT)
        if server.rc != 0:
            self.fail("nginx exited %s after SIGQUIT" % server.describe(), [server])
        with open(os.path.join(d, "access.log"), errors="replace") as f:
            lines = f.read().splitlines()
        problems = check_access_log(lines, m["requests"], NGINX_BODY)
        if problems:
            self.fail("; ".join(problems))
        rec["check"] = ("wrk: no socket error, no non-2xx; nginx logged %d responses (wrk "
                        "completed %d), every one 200 with %d bytes"
                        % (len(lines), m["requests"], NGINX_BODY))
        rec["requests"] = m["requests"]
        return rec

    def run_iperf3(self):
        iperf3 = program_path("iperf3")
        server = self.spawn("server", 1, [iperf3, "-4", "-s", "-1", "-J", "-p", str(self.port)])
        self.wait_ready(server)
        before = self.snapshot(server)
        secs = max(1, int(round(self.seconds)))
        client = self.spawn("client", 2, [
            iperf3, "-4", "-c", self.server_ip, "-p", str(self.port), "-P",
            str(self.cfg["streams"]), "-t", str(secs), "-J", "--connect-timeout", "5000"])
        self.wait(client, run_timeout(self.app, secs), "iperf3 client")
        after = self.end(server, oneshot=True)
        try:
            crep = json.loads(self.read(client))
        except ValueError:
            self.fail("iperf3 client wrote no JSON report", [client])
        # the one-off server (-s -1) exits after its test; finish() waits for it
        rec = self.finish(client, server, before, after, {"throughput": 0, "seconds": secs,
                                                    "check": ""}, oneshot=True)
        try:
            srep = json.loads(self.read(server))
            m = iperf3_result(crep, srep)
        except (ValueError, KeyError) as e:
            self.fail("iperf3: %s" % e, [client, server])
        if m["streams"] != self.cfg["streams"]:
            self.fail("iperf3 ran %d streams, not %d" % (m["streams"], self.cfg["streams"]))
        rec.update(throughput=round(m["throughput"], 3), bytes=m["bytes"],
                   seconds=round(crep["end"]["sum_received"]["seconds"], 3),
                   check="both ends report %d bytes received, no error" % m["bytes"])
        return rec

    def run_pingpong(self):
        pp = self.paths["pingpong"]
        server = self.spawn("server", 1, [pp, "server", "--port", str(self.port),
                                          "--count", "1"])
        self.wait_ready(server)
        before = self.snapshot(server)
        client = self.spawn("client", 2, [
            pp, "client", "--to", "%s:%d" % (self.server_ip, self.port), "--size",
            str(self.cfg["size"]), "--seconds", "%g" % self.seconds, "--warmup",
            str(PINGPONG_WARMUP)])
        self.wait(client, run_timeout(self.app, self.seconds), "ulspingpong client")
        after = self.end(server, oneshot=True)
        try:
            c = json.loads(self.read(client).strip().splitlines()[-1])
        except (ValueError, IndexError):
            self.fail("ulspingpong client wrote no JSON line", [client])
        rec = self.finish(client, server, before, after,
                          {"throughput": c["rate"], "p50_us": c["p50_us"],
                           "p99_us": c["p99_us"], "seconds": c["seconds"], "check": ""},
                          oneshot=True)
        try:
            s = json.loads(self.read(server).strip().splitlines()[-1])
        except (ValueError, IndexError):
            self.fail("ulspingpong server wrote no JSON line", [server])
        total = c["round_trips"] + c["warmup"]
        if not c.get("verified") or s.get("round_trips") != total:
            self.fail("ulspingpong: the client made %d round trips (verified: %s), the "
                      "server echoed %s" % (total, c.get("verified"), s.get("round_trips")))
        rec["check"] = ("the client checked every echoed byte of %d round trips; the server "
                        "echoed %d" % (total, s["round_trips"]))
        rec["round_trips"] = c["round_trips"]
        return rec


def self_children(pid):
    """The live child PIDs of pid (nginx's workers)."""
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------
DEFINITIONS = {
    "throughput": "as the tool reports it: redis-benchmark's requests/s, wrk's Requests/sec, "
                  "iperf3's received bits/s (client's report) in Gbit/s, ulspingpong's "
                  "measured round trips / seconds",
    "p50_us, p99_us": "the tool's latency percentiles in microseconds (redis-benchmark "
                      "--csv, wrk --latency, ulspingpong's own per-round-trip clock); null "
                      "where the tool reports none (iperf3)",
    "cpu_seconds": "user+system CPU of the client (wait4 rusage, its whole life), of the "
                   "server and its children during the client's run (/proc utime+stime), "
                   "and of both ulsd daemons during it (ulstack only); kernel work in "
                   "softirq context counts only where the kernel charges it to one of these",
    "seconds": "the measured span: redis requests / rate, wrk's and iperf3's -d/-t, "
               "ulspingpong's measured seconds",
    "stack": "ulstack: server and client under ulsrun on two ulsd nodes of the testbed; "
             "kernel: the same command lines on the kernel's TCP, in two namespaces whose "
             "veths are on the same bridge",
    "ratios": "ulstack / kernel of the medians; a throughput ratio above 1 and a latency "
              "ratio below 1 favour ulstack; throughput_paired: the median over the repeats "
              "of the ratio of one repeat's two runs (run one after the other); cpu_per_work: the ratio of CPU seconds / "
              "(throughput * seconds), the CPU one request, bit or round trip cost",
    "verified": "the run passed its check (each run's `check` says what was checked)",
}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    opts, rc = parse_as_root("ulsbench apps", argv, parse_args, build_parser)
    if opts is None:
        return rc
    paths = find_paths()
    lock = take_lock_or_say(check_tools(paths, opts["apps"]))
    if lock is None:
        return 1

    started = datetime.datetime.now(datetime.timezone.utc)
    workdir = tempfile.mkdtemp(prefix="ulsbench-apps-")
    os.chmod(workdir, 0o755)
    procs = Procs(workdir)
    tb = Testbed(paths)
    plan = plan_runs(opts["apps"], opts["repeat"])
    runs = []
    t_start = time.monotonic()
    log("%d runs (%s; %g s each%s), about %.0f s; logs in %s" % (
        len(plan), ",".join(opts["apps"]), opts["seconds"],
        "" if opts["repeat"] == 1 else "; %d of each" % opts["repeat"],
        len(plan) * (opts["seconds"] + 2.5) + 10, workdir))

    def body():
        tb.is_up = True     # start clean: also removes a testbed a killed run left
        tb.down()
        log("testbed up: two ulsd nodes and two kernel namespaces on one bridge")
        tb.up(1500, True)
        for seq, spec in enumerate(plan):
            r = Run(procs, tb, paths, spec, opts["seconds"], workdir, seq).run()
            r["repeat"] = spec["repeat"]
            runs.append(r)
            procs.stop_all()

    def kill_groups():
        # Anything a stopped process left in the group it led (nginx's workers when the
        # master had to be killed): each group's ID is the PID recorded at its start.
        for p in procs.all:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    try:
        error, rc = run_guarded(body, procs, tb, cleanup=kill_groups)
    finally:
        lock.close()

    elapsed = time.monotonic() - t_start
    records = summarize_runs(runs)
    if error:
        log("FAILED: %s" % error)
    if records:
        print(format_table(records))
        sys.stdout.flush()
    doc = {
        "benchmark": "ulsbench apps",
        "command": ["ulsbench", "apps"] + list(argv),
        "started": started.isoformat(timespec="seconds"),
        "elapsed_seconds": round(elapsed, 1),
        "complete": error is None,
        "machine": machine_info(paths),
        "options": {"apps": opts["apps"], "seconds": opts["seconds"],
                    "repeat": opts["repeat"], "nginx_workers": NGINX_WORKERS,
                    "nginx_body_bytes": NGINX_BODY, "pingpong_warmup": PINGPONG_WARMUP,
                    # the programs inherit the driver's environment: ULS_SPIN_US=50
                    # ulsbench apps measures ulstack with spinning
                    "uls_environment": {k: v for k, v in sorted(os.environ.items())
                                        if k.startswith("ULS_") and
                                        k not in ("ULS_SRCDIR", "ULS_BUILDDIR")}},
        "definitions": DEFINITIONS,
        "apps": records,
        "ratios": ratios(records),
    }
    if error:
        doc["error"] = error
    if opts["json"]:
        if not save_doc(opts["json"], doc, error, "runs"):
            rc = rc or 1
    if opts["plot"] and records and error is None:
        if not save_plots(opts["plot"], lambda d: plot_ratios(records, d), "plot"):
            rc = rc or 1
    finish(error, workdir, elapsed, "logs")
    return rc


if __name__ == "__main__":
    sys.exit(main())
