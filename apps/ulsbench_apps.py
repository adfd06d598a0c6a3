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
    LOCK_FILE, BenchError, Interrupted, Procs, Testbed, UsageError, _raise_signal,
    find_paths, log, machine_info, progress, read_cpu_ticks, take_lock, tree_cpu,
    write_json)

# ---------------------------------------------------------------------------
# What runs
# ---------------------------------------------------------------------------
APPS = ("redis", "nginx", "iperf3", "pingpong")     # also the order they run in
STACKS = ("kernel", "ulstack")
DEFAULT_SECONDS = 5.0
MIN_SECONDS, MAX_SECONDS = 0.5, 120.0
MAX_REPEAT = 20

# Each program's configurations: the config label of the JSON records, and its arguments.
CONFIGS = {
    "redis": [{"config": "SET, 1 client", "test": "set", "clients": 1},
              {"config": "SET, 50 clients", "test": "set", "clients": 50},
              {"config": "GET, 1 client", "test": "get", "clients": 1},
              {"config": "GET, 50 clients", "test": "get", "clients": 50}],
    "nginx": [{"config": "1 connection", "threads": 1, "connections": 1},
              {"config": "32 connections", "threads": 2, "connections": 32}],
    "iperf3": [{"config": "1 stream", "streams": 1},
               {"config": "4 streams", "streams": 4}],
    "pingpong": [{"config": "1 B", "size": 1},
                 {"config": "1 KiB", "size": 1024}],
}
UNITS = {"redis": "req/s", "nginx": "req/s", "iperf3": "Gbit/s", "pingpong": "round trips/s"}

# The programs and the Debian packages they come from (build-aux/setup-debian installs them).
PROGRAMS = {"redis": {"redis-server": "redis-server", "redis-benchmark": "redis-tools",
                      "redis-cli": "redis-tools"},
            "nginx": {"nginx": "nginx", "wrk": "wrk"},
            "iperf3": {"iperf3": "iperf3"},
            "pingpong": {}}
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"

BASE_PORT = {"redis": 6400, "nginx": 8100, "iperf3": 5300, "pingpong": 7300}
PORTS_PER_APP = 100         # each run a fresh port: no TIME-WAIT of the previous run in the way

REDIS_KEY = "key:__rand_int__"   # redis-benchmark's key without -r (the placeholder stays)
REDIS_DATA = 3                   # its value's size (-d 3, the default); random bytes
# What the key holds before a run: a SET run must replace it with a REDIS_DATA-byte value;
# a GET run reads it back.
REDIS_SENTINEL = "ulsbench-apps-before"
# redis-benchmark has no time limit: a short probe run (also the warm-up) gives the rate,
# and the measured run makes rate * --seconds requests.
REDIS_PROBE = {1: 2000, 50: 20000}
REDIS_MIN_REQUESTS, REDIS_MAX_REQUESTS = 1000, 50_000_000
NGINX_WORKERS = 2
NGINX_BODY = 4096
PINGPONG_WARMUP = 100

READY_TIMEOUT = 15.0        # a server listens (and nginx has its workers) within this
STOP_TIMEOUT = 15.0         # a server stops (and writes its logs) within this


class RunFailed(BenchError):
    """A run's check failed: its numbers are not reported."""


# ---------------------------------------------------------------------------
# Pure logic (unit-tested in tests/bench/test_apps_logic.py)
# ---------------------------------------------------------------------------
def parse_apps(text):
    names = [x.strip() for x in text.split(",") if x.strip()]
    if names == ["all"]:
        return list(APPS)
    bad = [x for x in names if x not in APPS]
    if bad or not names:
        raise UsageError("--apps: unknown %s (choose from %s, or all)" % (
            ", ".join(bad) or "(empty)", ", ".join(APPS)))
    return [a for a in APPS if a in names]      # the fixed order, each once


def parse_seconds(text):
    try:
        v = float(text)
    except ValueError:
        raise UsageError("--seconds: not a number: %r" % text)
    if not MIN_SECONDS <= v <= MAX_SECONDS:
        raise UsageError("--seconds must be %g..%g" % (MIN_SECONDS, MAX_SECONDS))
    return v


def parse_repeat(text):
    try:
        v = int(text)
    except ValueError:
        raise UsageError("--repeat: not an integer: %r" % text)
    if not 1 <= v <= MAX_REPEAT:
        raise UsageError("--repeat must be 1..%d" % MAX_REPEAT)
    return v


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def build_parser():
    p = _Parser(prog="ulsbench apps",
                description="Real programs (redis, nginx, iperf3, a ping-pong) under ulsrun "
                            "between two ulsd nodes and on the kernel's TCP between two "
                            "namespaces on the same bridge, with the same arguments; "
                            "throughput, p50/p99 latency, CPU seconds and the "
                            "ulstack/kernel ratio.",
                epilog="Runs as root; builds and removes its own testbed (TB_NAME=ulsbench). "
                       "The programs come from build-aux/setup-debian.")
    p.add_argument("--apps", default="all", metavar="LIST",
                   help="programs to run, from %s, or all (default)" % ", ".join(APPS))
    p.add_argument("--seconds", default=str(DEFAULT_SECONDS), metavar="S",
                   help="seconds each measured run lasts, %g..%g (default %g)"
                        % (MIN_SECONDS, MAX_SECONDS, DEFAULT_SECONDS))
    p.add_argument("--repeat", default="1", metavar="R",
                   help="runs of each configuration and stack, 1..%d, interleaved; the "
                        "table and records give medians (default 1)" % MAX_REPEAT)
    p.add_argument("--json", default=None, metavar="FILE", help="write the results as JSON")
    p.add_argument("--plot", default=None, metavar="DIR",
                   help="write apps_ratio.png here (default: the directory of --json; no "
                        "plot without either)")
    return p


def parse_args(argv):
    ns = build_parser().parse_args(argv)
    opts = {"apps": parse_apps(ns.apps), "seconds": parse_seconds(ns.seconds),
            "repeat": parse_repeat(ns.repeat), "json": ns.json, "plot": ns.plot}
    if opts["json"]:
        d = os.path.dirname(os.path.abspath(opts["json"]))
        if not os.path.isdir(d):
            raise UsageError("--json: directory %s does not exist" % d)
        if opts["plot"] is None:
            opts["plot"] = d
    return opts


def plan_runs(apps, repeat):
    """The runs in order: for each repeat, each program and configuration, both stacks;
    the stack that goes first alternates with the repeat (kernel first on even ones), so
    neither always runs on a machine the other just warmed."""
    plan = []
    for r in range(repeat):
        for app in apps:
            for cfg in CONFIGS[app]:
                order = STACKS if r % 2 == 0 else tuple(reversed(STACKS))
                for stack in order:
                    plan.append({"program": app, "config": cfg["config"], "args": cfg,
                                 "stack": stack, "repeat": r})
    return plan


def run_timeout(app, seconds):
    """The time limit of one measured client run: generous (a slow stack or a busy machine
    is not an error), but bounded."""
    return 4 * seconds + 30


def redis_requests(probe_rps, seconds):
    """redis-benchmark's -n for a run of about `seconds` at the probe's rate."""
    n = int(round(probe_rps * seconds))
    return max(REDIS_MIN_REQUESTS, min(REDIS_MAX_REQUESTS, n))


def redis_csv(text, test):
    """redis-benchmark --csv's row for `test` (SET or GET): rps and latencies in us."""
    rows = [r for r in csv.DictReader(io.StringIO(text)) if r.get("test") == test.upper()]
    if len(rows) != 1:
        raise ValueError("no %s row in redis-benchmark's CSV output" % test.upper())
    r = rows[0]
    return {"throughput": float(r["rps"]), "p50_us": float(r["p50_latency_ms"]) * 1000.0,
            "p99_us": float(r["p99_latency_ms"]) * 1000.0}


def redis_info(text):
    """redis-cli INFO output as {key: value}."""
    res = {}
    for line in text.splitlines():
        k, sep, v = line.strip().partition(":")
        if sep and not k.startswith("#"):
            res[k] = v
    return res


def cmdstat(info, cmd):
    """INFO commandstats' line for cmd as {calls: N, failed_calls: N, rejected_calls: N}
    (zeros when the command never ran)."""
    res = {"calls": 0, "failed_calls": 0, "rejected_calls": 0}
    for part in info.get("cmdstat_" + cmd, "").split(","):
        k, sep, v = part.partition("=")
        if sep and k in res:
            res[k] = int(v)
    return res


_WRK_UNITS = {"us": 1.0, "ms": 1000.0, "s": 1e6, "m": 60e6, "h": 3600e6}


def wrk_duration_us(text):
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text.strip())
    if not m:
        raise ValueError("not a wrk duration: %r" % text)
    return float(m.group(1)) * _WRK_UNITS[m.group(2)]


def parse_wrk(text):
    """wrk --latency's report: requests completed, requests/s, p50/p99 (us), and its
    error lines (socket errors, non-2xx/3xx responses) as found."""
    m = re.search(r"^\s*(\d+) requests in ([\d.]+\w+), ", text, re.M)
    rps = re.search(r"^Requests/sec:\s*([\d.]+)", text, re.M)
    if not m or not rps:
        raise ValueError("no request count or rate in wrk's output")
    lat = {}
    block = text.split("Latency Distribution", 1)
    if len(block) == 2:
        for q, v in re.findall(r"^\s*(\d+)%\s+(\S+)", block[1], re.M):
            lat[int(q)] = wrk_duration_us(v)
    if 50 not in lat or 99 not in lat:
        raise ValueError("no latency distribution in wrk's output (--latency)")
    errors = re.findall(r"^\s*(Socket errors:.*|Non-2xx or 3xx responses:.*)$", text, re.M)
    return {"requests": int(m.group(1)), "throughput": float(rps.group(1)),
            "p50_us": lat[50], "p99_us": lat[99], "errors": errors}


def check_access_log(lines, requests, size):
    """nginx's access log (format '$status $body_bytes_sent "$request"') against wrk's
    count: a list of problems, empty when every line is a 200 with the file's size and
    there is one for every request wrk completed. wrk stops with requests in flight, which
    nginx may still have answered (and logged), so more lines than requests is fine."""
    problems = []
    bad = [ln for ln in lines if ln.split(" ", 2)[:2] != ["200", str(size)]]
    if bad:
        problems.append("%d of %d access-log lines are not '200 %d', e.g. %s"
                        % (len(bad), len(lines), size, bad[:3]))
    if len(lines) < requests:
        problems.append("the access log has %d lines, wrk completed %d requests"
                        % (len(lines), requests))
    return problems


def iperf3_result(client, server):
    """Gbit/s received and the bytes, from both ends' -J reports; ValueError when they do
    not agree or either reports an error."""
    for who, rep in (("client", client), ("server", server)):
        if "error" in rep:
            raise ValueError("iperf3 %s: %s" % (who, rep["error"]))
    c, s = client["end"]["sum_received"], server["end"]["sum_received"]
    if not c["bytes"] > 0:
        raise ValueError("iperf3: nothing received")
    if c["bytes"] != s["bytes"]:
        raise ValueError("iperf3: the client reports %d bytes received, the server %d"
                         % (c["bytes"], s["bytes"]))
    return {"throughput": c["bits_per_second"] / 1e9, "bytes": c["bytes"],
            "streams": client["start"]["test_start"]["num_streams"]}


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarize_runs(runs):
    """One record per (program, config, stack): the medians of its runs, and the runs."""
    groups = {}
    for r in runs:
        groups.setdefault((r["program"], r["config"], r["stack"]), []).append(r)
    records = []
    for (prog, cfg, stack), rs in groups.items():
        records.append({
            "program": prog, "config": cfg, "stack": stack,
            "throughput": median(r["throughput"] for r in rs), "unit": UNITS[prog],
            "p50_us": median(r["p50_us"] for r in rs),
            "p99_us": median(r["p99_us"] for r in rs),
            "cpu_seconds": median(r["cpu_seconds"] for r in rs),
            "seconds": median(r["seconds"] for r in rs),
            "verified": all(r["verified"] for r in rs),
            "repeats": len(rs),
            "runs": [{k: v for k, v in r.items() if k not in ("program", "config", "stack")}
                     for r in rs],
        })
    return sort_records(records)


def sort_records(records):
    order = {(a, c["config"]): (i, j) for i, a in enumerate(APPS)
             for j, c in enumerate(CONFIGS[a])}
    return sorted(records, key=lambda r: (order.get((r["program"], r["config"]), (99, 99)),
                                          STACKS.index(r["stack"])))


def cpu_per_work(rec):
    work = (rec["throughput"] or 0) * (rec.get("seconds") or 0)
    return rec["cpu_seconds"] / work if work > 0 else None


def paired_ratio(k, u):
    """The median over the repeats both records ran of ulstack / kernel throughput."""
    kr = {x.get("repeat"): x["throughput"] for x in k.get("runs", [])}
    xs = [x["throughput"] / kr[x.get("repeat")] for x in u.get("runs", [])
          if kr.get(x.get("repeat"))]
    return round(statistics.median(xs), 3) if xs else None


def ratios(records):
    """ulstack / kernel for each configuration that has both: throughput, p50, p99, CPU
    seconds, and CPU seconds per unit of work (cpu_per_work: CPU seconds / (throughput *
    seconds), the CPU cost of one request, bit or round trip); and throughput_paired, the
    median over the repeats of the ratio of the two runs of one repeat (run one after the
    other, so a machine whose load drifts during the benchmark moves both)."""
    by = {(r["program"], r["config"], r["stack"]): r for r in records}
    res = []
    for r in records:
        if r["stack"] != "kernel":
            continue
        u = by.get((r["program"], r["config"], "ulstack"))
        if not u:
            continue

        def ratio(a, b):
            return round(a / b, 3) if a is not None and b else None
        res.append({"program": r["program"], "config": r["config"],
                    "throughput": ratio(u["throughput"], r["throughput"]),
                    "p50_us": ratio(u["p50_us"], r["p50_us"]),
                    "p99_us": ratio(u["p99_us"], r["p99_us"]),
                    "cpu_seconds": ratio(u["cpu_seconds"], r["cpu_seconds"]),
                    "cpu_per_work": ratio(cpu_per_work(u), cpu_per_work(r)),
                    "throughput_paired": paired_ratio(r, u)})
    return res


RECORD_KEYS = {"program": str, "config": str, "stack": str, "throughput": (int, float),
               "unit": str, "p50_us": (int, float, type(None)),
               "p99_us": (int, float, type(None)), "cpu_seconds": (int, float),
               "verified": bool}


def check_record_schema(rec):
    """Problems with one JSON record (empty list: fine)."""
    problems = []
    for k, t in RECORD_KEYS.items():
        if k not in rec:
            problems.append("missing %s" % k)
        elif not isinstance(rec[k], t) or (t is not bool and isinstance(rec[k], bool)):
            problems.append("%s has type %s" % (k, type(rec[k]).__name__))
    if problems:
        return problems
    if rec["program"] not in APPS:
        problems.append("unknown program %r" % rec["program"])
    elif rec["config"] not in [c["config"] for c in CONFIGS[rec["program"]]]:
        problems.append("unknown config %r of %s" % (rec["config"], rec["program"]))
    elif rec["unit"] != UNITS[rec["program"]]:
        problems.append("unit %r, expected %r" % (rec["unit"], UNITS[rec["program"]]))
    if rec["stack"] not in STACKS:
        problems.append("unknown stack %r" % rec["stack"])
    if not rec["throughput"] > 0:
        problems.append("throughput %r" % rec["throughput"])
    if rec["cpu_seconds"] < 0:
        problems.append("cpu_seconds %r" % rec["cpu_seconds"])
    for k in ("p50_us", "p99_us"):
        if rec[k] is not None and not rec[k] >= 0:
            problems.append("%s %r" % (k, rec[k]))
    if rec["p50_us"] is not None and rec["p99_us"] is not None and \
            rec["p99_us"] < rec["p50_us"]:
        problems.append("p99 %r below p50 %r" % (rec["p99_us"], rec["p50_us"]))
    if rec.get("program") == "iperf3" and (rec["p50_us"], rec["p99_us"]) != (None, None):
        problems.append("iperf3 reports no latency")
    return problems


def _fmt(v, digits=3):
    if v is None:
        return "-"
    if abs(v) >= 1000:
        return "%.0f" % v
    return "%.*g" % (digits, v)


def format_table(records):
    """The text table: per configuration, kernel and ulstack side by side and the ratio."""
    by = {(r["program"], r["config"], r["stack"]): r for r in records}
    rat = {(x["program"], x["config"]): x for x in ratios(records)}
    head = ("program", "config", "unit", "kernel", "ulstack", "ratio", "paired", "p50 us k/u",
            "p99 us k/u", "CPU s k/u", "CPU/work")
    rows = [head]
    seen = []
    for r in records:
        key = (r["program"], r["config"])
        if key in seen:
            continue
        seen.append(key)
        k, u = by.get(key + ("kernel",)), by.get(key + ("ulstack",))

        def pair(field):
            return "%s / %s" % (_fmt(k and k[field]), _fmt(u and u[field]))
        x = rat.get(key)
        rows.append((r["program"], r["config"], r["unit"], _fmt(k and k["throughput"]),
                     _fmt(u and u["throughput"]),
                     ("%.2fx" % x["throughput"]) if x and x["throughput"] else "-",
                     ("%.2fx" % x["throughput_paired"]) if x and x["throughput_paired"]
                     else "-",
                     pair("p50_us"), pair("p99_us"), pair("cpu_seconds"),
                     ("%.2fx" % x["cpu_per_work"]) if x and x["cpu_per_work"] else "-"))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(head))]
    out = []
    for i, row in enumerate(rows):
        out.append("  ".join(str(c).ljust(w) if j < 3 else str(c).rjust(w)
                             for j, (c, w) in enumerate(zip(row, widths))).rstrip())
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def plot_ratios(records, outdir, title_suffix=""):
    """A bar per configuration: ulstack's throughput / the kernel's, and its p50 latency
    / the kernel's where the tool reports one; lines at 1 (parity) and 0.8."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rs = ratios(records)
    labels = ["%s\n%s" % (x["program"], x["config"]) for x in rs]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.0 * len(rs) + 2), 4.5))
    w = 0.4
    xs = range(len(rs))
    tp = [x["throughput"] or 0 for x in rs]
    lat = [x["p50_us"] if x["p50_us"] is not None else 0 for x in rs]
    b1 = ax.bar([i - w / 2 for i in xs], tp, w, label="throughput, ulstack / kernel",
                color="#1f77b4")
    b2 = ax.bar([i + w / 2 for i in xs], lat, w, label="p50 latency, ulstack / kernel",
                color="#ff7f0e")
    for bars, vals in ((b1, tp), (b2, lat)):
        for b, v in zip(bars, vals):
            if v:
                ax.annotate("%.2f" % v, (b.get_x() + b.get_width() / 2, v), ha="center",
                            va="bottom", fontsize=7)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.axhline(0.8, color="grey", linewidth=0.8, linestyle="--",
               label="0.8 (throughput target)")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel("ratio")
    ax.set_title("ulsbench apps: ulstack / kernel" + title_suffix)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(outdir, "apps_ratio.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


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
        return sum(v for v in (read_cpu_ticks(p) for p in self.tb.ulsd_pids())
                   if v is not None)

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

    NGINX_CONF = """\
worker_processes {workers};
daemon off;
master_process on;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{
    worker_connections 1024;
}}
http {{
    log_format apps '$status $body_bytes_sent "$request"';
    access_log {d}/access.log apps buffer=64k;
    client_body_temp_path {d}/tmp/client_body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 65;
    keepalive_requests 1000000;
    server {{
        listen {port};
        root {d}/www;
    }}
}}
"""

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
            f.write(self.NGINX_CONF.format(workers=NGINX_WORKERS, d=d, port=self.port))
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
    try:
        opts = parse_args(argv)
    except UsageError as e:
        sys.stderr.write("ulsbench apps: %s\n" % e)
        sys.stderr.write(build_parser().format_usage())
        return 2
    if os.geteuid() != 0:
        log("must run as root (the testbed creates network namespaces)")
        return 1
    paths = find_paths()
    missing = check_tools(paths, opts["apps"])
    if missing:
        for m in missing:
            log(m)
        return 1
    lock = take_lock()
    if lock is None:
        log("another ulsbench driver is running (lock %s held)" % LOCK_FILE)
        return 1

    started = datetime.datetime.now(datetime.timezone.utc)
    workdir = tempfile.mkdtemp(prefix="ulsbench-apps-")
    os.chmod(workdir, 0o755)
    procs = Procs(workdir)
    tb = Testbed(paths)
    plan = plan_runs(opts["apps"], opts["repeat"])
    runs, error, rc = [], None, 0
    old = {s: signal.signal(s, _raise_signal) for s in (signal.SIGINT, signal.SIGTERM,
                                                        signal.SIGHUP)}
    t_start = time.monotonic()
    log("%d runs (%s; %g s each%s), about %.0f s; logs in %s" % (
        len(plan), ",".join(opts["apps"]), opts["seconds"],
        "" if opts["repeat"] == 1 else "; %d of each" % opts["repeat"],
        len(plan) * (opts["seconds"] + 2.5) + 10, workdir))
    try:
        tb.is_up = True     # start clean: also removes a testbed a killed run left
        tb.down()
        log("testbed up: two ulsd nodes and two kernel namespaces on one bridge")
        tb.up(1500, True)
        for seq, spec in enumerate(plan):
            r = Run(procs, tb, paths, spec, opts["seconds"], workdir, seq).run()
            r["repeat"] = spec["repeat"]
            runs.append(r)
            procs.stop_all()
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
        # Anything a stopped process left in the group it led (nginx's workers when the
        # master had to be killed): each group's ID is the PID recorded at its start.
        for p in procs.all:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        tb.down()
        for s, h in old.items():
            signal.signal(s, h)
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
        try:
            write_json(opts["json"], doc)
            log("wrote %s%s" % (opts["json"], "" if error is None else
                                " (incomplete: only the runs that finished and verified)"))
        except OSError as e:
            log("cannot write %s: %s" % (opts["json"], e))
            rc = rc or 1
    if opts["plot"] and records and error is None:
        try:
            os.makedirs(opts["plot"], exist_ok=True)
            for p in plot_ratios(records, opts["plot"]):
                log("wrote %s" % p)
        except Exception as e:      # the plot is a report, not a measurement
            log("plot failed: %s: %s" % (type(e).__name__, e))
            rc = rc or 1
    if error is None:
        shutil.rmtree(workdir, ignore_errors=True)
        log("done in %.0f s" % elapsed)
    else:
        log("logs kept in %s" % workdir)
    return rc


if __name__ == "__main__":
    sys.exit(main())
