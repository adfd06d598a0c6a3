#!/usr/bin/python3
"""What `ulsbench apps` runs and what it makes of the programs' output (pure: no root, no
processes): the command line, the plan, the parsers of redis, wrk and iperf3 output, the
records, ratios, table and plot. Part of the driver (ulsbench_apps.py), next to which it
is installed; tests/bench/test_apps_logic.py tests it through that module."""
import csv
import io
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ulsbench_common import (  # noqa: E402
    BenchError, UsageError, UsageParser, add_output_args, check_output_args)

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


def build_parser():
    p = UsageParser(prog="ulsbench apps",
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
    add_output_args(p, "apps_ratio.png", "plot")
    return p


def parse_args(argv):
    ns = build_parser().parse_args(argv)
    opts = {"apps": parse_apps(ns.apps), "seconds": parse_seconds(ns.seconds),
            "repeat": parse_repeat(ns.repeat), "json": ns.json, "plot": ns.plot}
    return check_output_args(opts)


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
