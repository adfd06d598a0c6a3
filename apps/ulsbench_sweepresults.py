#!/usr/bin/python3
"""What the ulsbench sweep makes of a point's output (pure: no root, no processes): the
workers' reports checked and summed, the run records and their schema, the tables and the
plots. Part of the sweep driver (ulsbench_sweep.py), next to which it is installed;
tests/bench/test_sweep_logic.py tests it through that module."""
import json
import os
import shutil
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ulsbench_common import DEFAULT_OFFLOAD, BenchError, loss_arg  # noqa: E402
from ulsbench_sweepargs import *  # noqa: E402,F401,F403  (the parameters)


def _as_bool(v):
    return v is True


def client_streams(doc, expect, who):
    """Per-stream results of one `ulsbench client --json` document. Raises BenchError
    unless the document says every stream was verified and holds `expect` streams that
    each moved data. A document without a `streams` list (a single-stream client) counts
    as one stream."""
    if not isinstance(doc, dict):
        raise BenchError("%s: result is not a JSON object" % who)
    if not _as_bool(doc.get("verified")):
        raise BenchError("%s: the receiver did not verify every byte (verified=%r)"
                         % (who, doc.get("verified")))
    raw = doc.get("streams")
    if raw is None:
        raw = [{"bytes_verified": doc.get("bytes_verified"), "seconds": doc.get("seconds"),
                "verified": doc.get("verified")}]
    if not isinstance(raw, list) or len(raw) != expect:
        raise BenchError("%s: expected %d streams, got %s" % (
            who, expect, len(raw) if isinstance(raw, list) else type(raw).__name__))
    out = []
    for i, s in enumerate(raw):
        if not isinstance(s, dict) or not _as_bool(s.get("verified")):
            raise BenchError("%s: stream %d not verified" % (who, i))
        b, sec = s.get("bytes_verified"), s.get("seconds")
        if not isinstance(b, int) or b <= 0 or not isinstance(sec, (int, float)) or sec <= 0:
            raise BenchError("%s: stream %d moved no verified data (bytes_verified=%r, "
                             "seconds=%r)" % (who, i, b, sec))
        st = {"bytes": b, "seconds": float(sec), "gbps": b * 8 / sec / 1e9}
        if "measured_bytes" in s:
            # What the receiver took in after the warm-up, and when (monotonic seconds).
            mb, t0, t1 = s.get("measured_bytes"), s.get("measured_from"), s.get("measured_to")
            if (not isinstance(mb, int) or not 0 < mb <= b
                    or not all(isinstance(t, (int, float)) for t in (t0, t1)) or t1 <= t0):
                raise BenchError("%s: stream %d has no measured span (measured_bytes=%r, "
                                 "from=%r, to=%r)" % (who, i, mb, t0, t1))
            st.update({"measured_bytes": mb, "from": float(t0), "to": float(t1),
                       "seconds": float(t1 - t0), "gbps": mb * 8 / (t1 - t0) / 1e9})
        out.append(st)
    total = doc.get("bytes_verified")
    if isinstance(total, int) and total != sum(s["bytes"] for s in out):
        raise BenchError("%s: bytes_verified %d is not the sum of its streams (%d)"
                         % (who, total, sum(s["bytes"] for s in out)))
    return out


def server_lines(text, expect, who):
    """The per-stream JSON lines of `ulsbench server`; BenchError unless there are exactly
    `expect` of them and each says verified."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            d = json.loads(line)
        except ValueError:
            raise BenchError("%s: malformed output line %r" % (who, line[:200]))
        if d.get("role") != "server":
            continue
        if not _as_bool(d.get("verified")):
            raise BenchError("%s: a received stream failed verification (%r)" % (who, d))
        if not isinstance(d.get("bytes"), int):
            raise BenchError("%s: bad byte count in %r" % (who, d))
        out.append(d)
    if len(out) != expect:
        raise BenchError("%s: %d verified streams reported, expected %d"
                         % (who, len(out), expect))
    return out


def raw_streams(doc, expect, who):
    """Per-stream results of `ulsraw recv --json`: BenchError on corrupt frames, an
    explicit verified=false, or a stream count other than `expect`."""
    if not isinstance(doc, dict):
        raise BenchError("%s: result is not a JSON object" % who)
    if doc.get("corrupt", 0) != 0:
        raise BenchError("%s: %r corrupt frames" % (who, doc.get("corrupt")))
    if "verified" in doc and not _as_bool(doc.get("verified")):
        raise BenchError("%s: verified=%r" % (who, doc.get("verified")))
    sec = doc.get("seconds")
    if not isinstance(sec, (int, float)) or sec <= 0:
        raise BenchError("%s: bad seconds %r" % (who, sec))
    raw = doc.get("streams")
    if not isinstance(raw, list) or len(raw) != expect:
        raise BenchError("%s: expected %d streams, got %s" % (
            who, expect, len(raw) if isinstance(raw, list) else raw))
    out = []
    for i, s in enumerate(raw):
        b = s.get("bytes_verified") if isinstance(s, dict) else None
        if not isinstance(b, int) or b <= 0:
            raise BenchError("%s: stream %d received no verified data" % (who, i))
        if "verified" in s and not _as_bool(s.get("verified")):
            raise BenchError("%s: stream %d verified=%r" % (who, i, s.get("verified")))
        # Frames carry no per-stream clock: every stream ran for the receiver's seconds
        # (the same clock as the aggregate, so one stream's rate equals the aggregate).
        out.append({"bytes": b, "seconds": float(sec), "gbps": b * 8 / sec / 1e9})
    total = doc.get("bytes_verified")
    if isinstance(total, int) and total != sum(s["bytes"] for s in out):
        raise BenchError("%s: bytes_verified %d is not the sum of its streams" % (who, total))
    return out


def transfer_window(ends):
    """The time during which a point's streams moved data, from (exit time, transfer
    seconds) of each sender process: from the earliest transfer start (exit - seconds) to
    the last exit. Excludes process start-up and connection set-up, includes any stagger
    between processes. None when a sender did not report its seconds."""
    if not ends or any(not isinstance(sec, (int, float)) or sec <= 0 for _, sec in ends):
        return None
    return max(e for e, _ in ends) - min(e - sec for e, sec in ends)


def window_cpu(first, last):
    """The CPU the point's processes used between two samples ((time, {pid: CPU ns}), see
    Point.cpu_sample): processes in both samples only (one that started or ended between
    them is left out and counted)."""
    (t0, a), (t1, b) = first, last
    both = [pid for pid in a if pid in b and b[pid] >= a[pid] > 0]
    return {"seconds": round(t1 - t0, 6),
            "cpu_seconds": round(sum(b[p] - a[p] for p in both) / 1e9, 4),
            "processes": len(both),
            "processes_left_out": len(set(a) ^ set(b)) + sum(1 for p in a if p in b
                                                              and p not in both)}


def make_run(mode, n, mtu, wall, streams, cpu, extra=None):
    """The JSON object of one point. `streams` are verified per-stream results
    ({bytes, seconds, gbps}); `wall` is the point's wall time; `cpu` is a dict with a
    `total` and its parts."""
    if len(streams) != n:
        raise BenchError("%s n=%d: %d stream results" % (mode, n, len(streams)))
    total = sum(s["bytes"] for s in streams)
    counted = total
    if streams and all("measured_bytes" in s for s in streams):
        # After a warm-up: the measured bytes over the span from the first stream's mark
        # to the last stream's last byte.
        counted = sum(s["measured_bytes"] for s in streams)
        wall = max(s["to"] for s in streams) - min(s["from"] for s in streams)
    if wall <= 0:
        raise BenchError("%s n=%d: no wall time" % (mode, n))
    rates = [s["gbps"] for s in streams]
    ps = summarize(rates)
    run = {
        "mode": mode,
        "streams": n,
        "mtu": mtu,
        "seconds": round(wall, 6),
        "bytes_verified": total,
        "measured_bytes": counted,
        "verified": True,
        "aggregate_gbps": round(counted * 8 / wall / 1e9, 4),
        "per_stream_gbps": {k: round(v, 4) for k, v in ps.items()},
        "jain": round(jain(rates), 4),
        "cpu_seconds": round(cpu["total"], 3),
        "cpu_s_per_gb": round(cpu["total"] / (total / 1e9), 3) if total else 0.0,
        "cpu": {k: (round(v, 3) if isinstance(v, float) else v) for k, v in cpu.items()},
        "message_bytes": MSG_SIZE,
    }
    if extra:
        run.update(extra)
    w = run.get("cpu_window")
    if w and w["seconds"] > 0 and counted and not w.get("processes_left_out"):
        # The steady state's CPU per GB: the processes' CPU per second inside the measured
        # part over the bytes per second of that part (process start, the warm-up and the
        # end are out of both). Not when the window left a process out (one that ended
        # before the late second sample on a loaded machine): its CPU would be missing,
        # and the figure read about 0 (helper thp12, stop 39); the table shows "-".
        run["cpu_s_per_gb_measured"] = round(w["cpu_seconds"] / w["seconds"] /
                                             (counted / wall / 1e9), 3)
    cs = run.get("context_switches")
    if cs and total:
        cs["per_gb"] = {k: round(v / (total / 1e9)) for k, v in cs.items()
                        if isinstance(v, int)}
    return run


IMPAIR_COUNTERS = ("frames", "bytes", "dropped", "dropped_bytes")


def impair_delta(before, after):
    """What the testbed's loss rule counted between two `testbed impair-stats` documents:
    the totals and each port's frames seen and dropped (and their bytes). BenchError when
    the two do not describe one rule running on (not impaired, another rate, other ports,
    or a counter that went back: the rule was replaced meanwhile)."""
    for d in (before, after):
        if not isinstance(d, dict) or d.get("impaired") is not True:
            raise BenchError("the testbed is not impaired (impair-stats: %r)" % (d,))
    if before.get("loss_pct") != after.get("loss_pct"):
        raise BenchError("the loss rate changed during the point (%r -> %r)"
                         % (before.get("loss_pct"), after.get("loss_pct")))
    pb, pa = before.get("ports") or {}, after.get("ports") or {}
    if set(pb) != set(pa) or not pa:
        raise BenchError("the impaired ports changed during the point (%s -> %s)"
                         % (sorted(pb), sorted(pa)))
    out = {"loss_pct": after["loss_pct"], "ports": {}}
    for port in sorted(pa):
        d = {}
        for k in IMPAIR_COUNTERS:
            a, b = pa[port].get(k), pb[port].get(k)
            if not isinstance(a, int) or not isinstance(b, int) or a < b:
                raise BenchError("impairment counter %s of %s went from %r to %r"
                                 % (k, port, b, a))
            d[k] = a - b
        out["ports"][port] = d
    for k in IMPAIR_COUNTERS:
        out[k] = sum(d[k] for d in out["ports"].values())
    # Every frame has at least its 14-byte Ethernet header: fewer bytes means a counter
    # was misread (the testbed's awk once printed them with %d, which saturates at 2^31).
    for port, d in out["ports"].items():
        if d["bytes"] < 14 * d["frames"] or d["dropped_bytes"] < 14 * d["dropped"]:
            raise BenchError("impairment counters of %s are not plausible: %r" % (port, d))
    return out


def loss_fields(loss, delta, offload):
    """The fields a run gets under --loss: the configured rate, the offload setting, and
    the frames the rule saw and dropped during the point (`impairment`: per port too)."""
    return {"loss_pct": loss, "offload": offload, "frames_seen": delta["frames"],
            "frames_dropped": delta["dropped"], "impairment": delta}


# The kernel sender's counters a loss point keeps (Tcp: from /proc/net/snmp; the others
# TcpExt: from /proc/net/netstat): segments, recovery episodes, probes, timeouts.
KERNEL_TCP_COUNTERS = (
    "Tcp.OutSegs", "Tcp.InSegs", "Tcp.RetransSegs", "TcpExt.TCPSackRecovery",
    "TcpExt.TCPRenoRecovery", "TcpExt.TCPFastRetrans", "TcpExt.TCPLossProbes",
    "TcpExt.TCPLossProbeRecovery", "TcpExt.TCPTimeouts", "TcpExt.TCPLostRetransmit",
    "TcpExt.TCPSlowStartRetrans", "TcpExt.TCPSACKReorder", "TcpExt.TCPSpuriousRTOs",
    "TcpExt.TCPDSACKRecv", "TcpExt.TCPSackRecoveryFail", "TcpExt.DelayedACKs",
    "TcpExt.TCPDelivered")


def parse_proc_netstat(text):
    """{"Tcp.OutSegs": n, ...} from the text of /proc/net/snmp and /proc/net/netstat
    (pairs of lines: "Proto: names" then "Proto: values")."""
    out, header = {}, None
    for line in text.splitlines():
        proto, _, rest = line.partition(":")
        fields = rest.split()
        if header and header[0] == proto and len(header[1]) == len(fields):
            for k, v in zip(header[1], fields):
                try:
                    out["%s.%s" % (proto, k)] = int(v)
                except ValueError:
                    pass
            header = None
        else:
            header = (proto, fields)
    return out


def kernel_counter_delta(before, after):
    """The kept counters' increase between two parse_proc_netstat() results."""
    return {k.split(".", 1)[1]: after[k] - before[k] for k in KERNEL_TCP_COUNTERS
            if k in before and k in after and after[k] >= before[k]}


def data_ports(mode, env):
    """(senders' port, receivers' port) of a mode's data direction among the impaired
    ports, or None when the mode has none of its own (raw, central)."""
    if mode == "kernel":
        return ("k2-br", "k1-br")
    if mode in ("perproc", "relay"):
        return (env.get("TB_NODE1_TAP", "uls1"), env.get("TB_NODE2_TAP", "uls2"))
    return None


def loss_directions(run, ports):
    """loss_by_direction of a loss point (see the JSON's definitions), {} without ports.
    Data frames are what enters the bridge from the senders' port (their ACKs of the
    receivers' few bytes included), ACK frames what enters from the receivers' port."""
    imp = run.get("impairment", {}).get("ports", {})
    if not ports or ports[0] not in imp or ports[1] not in imp:
        return {}
    gb = run.get("bytes_verified", 0) / 1e9
    out = {}
    for name, port in (("data", ports[0]), ("ack", ports[1])):
        d = imp[port]
        out[name] = {
            "port": port, "frames": d["frames"], "dropped": d["dropped"],
            "mean_frame_bytes": round(d["bytes"] / d["frames"]) if d["frames"] else 0,
            "mean_dropped_bytes": round(d["dropped_bytes"] / d["dropped"]) if d["dropped"] else 0,
            "dropped_per_gb": round(d["dropped"] / gb, 2) if gb else None}
    df = imp[ports[0]]["frames"]
    out["ack_frames_per_data_frame"] = round(imp[ports[1]]["frames"] / df, 4) if df else None
    return {"loss_by_direction": out}


def role_of(name):
    """sender, receiver or relay, from the name a point gives a process."""
    base = name.rsplit("-", 1)[-1]
    if base.startswith(("client", "send")):
        return "sender"
    if base.startswith("relay"):
        return "relay"
    return "receiver"


def cpu_breakdown(procs, ulsd=None):
    """CPU seconds of a point by role (senders, receivers, relays; from each process's
    rusage) plus ulsd's (None: not part of this mode). `includes` names what the total
    counts."""
    cpu = {"total": 0.0}
    for role in ("sender", "receiver", "relay"):
        mine = [p for p in procs if role_of(p.name) == role]
        if mine:
            cpu[role + "s"] = sum(p.cpu for p in mine)
    if ulsd is not None:
        cpu["ulsd"] = ulsd
    cpu["includes"] = [k for k in ("senders", "receivers", "relays", "ulsd") if k in cpu]
    cpu["total"] = sum(cpu[k] for k in cpu["includes"])
    return cpu


def cs_breakdown(procs):
    """Context switches of a point's processes by role (wait4 rusage, voluntary and
    involuntary, all threads, whole life; `*_voluntary`: the sleeps alone, each ended by a
    wake-up, where the involuntary ones are preemptions): where the wake-ups per byte go
    (issue 13)."""
    cs = {}
    for role in ("sender", "receiver", "relay"):
        mine = [p for p in procs if role_of(p.name) == role]
        if mine:
            cs[role + "s"] = sum(p.csw for p in mine)
            cs[role + "s_voluntary"] = sum(p.vcsw for p in mine)
    return cs


def fault_breakdown(procs):
    """Minor page faults of a point's processes by role (wait4 rusage, all threads, whole
    life: start-up, the data, exit) and per process (`per_process`: the mean over them): what
    a process touches for the first time, which the kernel's sockets do not pay (issue 12,
    "a process's first megabytes")."""
    out = {}
    n = total = 0
    for role in ("sender", "receiver", "relay"):
        mine = [p for p in procs if role_of(p.name) == role]
        if mine:
            out[role + "s"] = sum(getattr(p, "minflt", 0) for p in mine)
            n += len(mine)
            total += out[role + "s"]
    if n:
        out["per_process"] = round(total / n)
    return out


RUN_KEYS = ("mode", "streams", "mtu", "seconds", "bytes_verified", "aggregate_gbps",
            "per_stream_gbps", "jain", "cpu_seconds")


def check_run_schema(run):
    """A list of what is wrong with a run object (empty when it is fine)."""
    bad = [k for k in RUN_KEYS if k not in run]
    if bad:
        return ["missing %s" % k for k in bad]
    errs = []
    if run["mode"] not in MODES:
        errs.append("mode")
    for k in ("streams", "mtu", "bytes_verified"):
        if not isinstance(run[k], int) or isinstance(run[k], bool) or run[k] <= 0:
            errs.append(k)
    for k in ("seconds", "aggregate_gbps", "jain", "cpu_seconds"):
        if not isinstance(run[k], (int, float)) or isinstance(run[k], bool) or run[k] < 0:
            errs.append(k)
    ps = run["per_stream_gbps"]
    if not isinstance(ps, dict) or set(("min", "median", "max")) - set(ps):
        errs.append("per_stream_gbps")
    elif not ps["min"] <= ps["median"] <= ps["max"]:
        errs.append("per_stream_gbps order")
    if isinstance(run["jain"], (int, float)) and run["streams"] and \
            not (1.0 / run["streams"] - 1e-3 <= run["jain"] <= 1.0 + 1e-3):
        errs.append("jain range")
    if "offload" in run and run["offload"] not in OFFLOADS:
        errs.append("offload")
    if "loss_pct" in run:
        lp, fd, fs = run["loss_pct"], run.get("frames_dropped"), run.get("frames_seen")
        if not isinstance(lp, (int, float)) or isinstance(lp, bool) or not 0 <= lp < 100:
            errs.append("loss_pct")
        if not isinstance(fd, int) or isinstance(fd, bool) or fd < 0:
            errs.append("frames_dropped")
        elif not isinstance(fs, int) or isinstance(fs, bool) or fs < fd:
            errs.append("frames_seen")
        if "offload" not in run:
            errs.append("offload")
    return errs


def format_table(runs):
    """The results table (a string); runs of a loss sweep get their offload, loss rate,
    the frames dropped during the point and the mean size of the frames the rule saw."""
    loss = any("loss_pct" in r for r in runs)
    head = ("%-8s %6s %7s %10s %9s %9s %9s %6s %8s %8s %12s %9s" %
            ("mode", "mtu", "streams", "aggr Gb/s", "min Gb/s", "med Gb/s", "max Gb/s",
             "Jain", "CPU s", "CPU s/GB", "verified MB", "meas s/GB"))
    if loss:
        head = "%-7s %6s " % ("offload", "loss%") + head + " %9s %8s" % ("dropped", "frame B")
    lines = [head, "-" * len(head)]
    for r in runs:
        ps = r["per_stream_gbps"]
        per_gb = r["cpu_seconds"] / (r["bytes_verified"] / 1e9) if r["bytes_verified"] else 0
        line = "%-8s %6d %7d %10.3f %9.3f %9.3f %9.3f %6.3f %8.2f %8.3f %12.1f" % (
            r["mode"], r["mtu"], r["streams"], r["aggregate_gbps"], ps["min"], ps["median"],
            ps["max"], r["jain"], r["cpu_seconds"], per_gb, r["bytes_verified"] / 1e6)
        # the steady state's CPU per GB (cpu_s_per_gb_measured), "-" without a window
        meas = r.get("cpu_s_per_gb_measured")
        line += " %9s" % ("-" if meas is None else "%.3f" % meas)
        if loss:
            imp = r.get("impairment") or {}
            mean = (imp.get("bytes", 0) / imp["frames"]) if imp.get("frames") else 0
            line = "%-7s %6s " % (r.get("offload", "-"), loss_arg(r.get("loss_pct", 0))) + \
                line + " %9d %8.0f" % (r.get("frames_dropped", 0), mean)
        lines.append(line)
    return "\n".join(lines)


def sort_runs(runs):
    order = {m: i for i, m in enumerate(MODES)}
    off = {o: i for i, o in enumerate(OFFLOADS)}
    return sorted(runs, key=lambda r: (r["mtu"], off.get(r.get("offload"), -1),
                                       r.get("loss_pct", -1), order.get(r["mode"], 99),
                                       r["streams"], r.get("repeat", 0)))


def loss_summary(runs):
    """The runs of a loss sweep grouped by (mtu, offload, loss, streams): for each mode the
    median, min and max aggregate throughput over its repeats, the median frames dropped,
    and the ratio of its median to the kernel's median (None without a kernel run)."""
    groups = {}
    for r in runs:
        key = (r["mtu"], r.get("offload", DEFAULT_OFFLOAD), r.get("loss_pct", 0.0),
               r["streams"])
        groups.setdefault(key, {}).setdefault(r["mode"], []).append(r)
    off = {o: i for i, o in enumerate(OFFLOADS)}
    rows = []
    for key in sorted(groups, key=lambda k: (k[0], off.get(k[1], 9), k[2], k[3])):
        modes = {}
        for m in MODES:
            rs = groups[key].get(m)
            if not rs:
                continue
            g = [r["aggregate_gbps"] for r in rs]
            modes[m] = {"gbps": statistics.median(g), "min": min(g), "max": max(g),
                        "runs": len(rs),
                        "frames_dropped": statistics.median(r.get("frames_dropped", 0)
                                                            for r in rs)}
            ccs = {r["congestion"] for r in rs if "congestion" in r}
            if len(ccs) == 1:
                modes[m]["congestion"] = ccs.pop()
        k = modes.get("kernel", {}).get("gbps")
        for m, d in modes.items():
            d["ratio"] = d["gbps"] / k if k else None
        rows.append({"mtu": key[0], "offload": key[1], "loss_pct": key[2],
                     "streams": key[3], "modes": modes})
    return rows


def format_loss_table(rows):
    """Medians over the repeats, and each mode's ratio to the kernel (a string)."""
    present = [m for m in MODES if any(m in r["modes"] for r in rows)]
    mtus = len({r["mtu"] for r in rows}) > 1
    head = "%-7s %7s %7s %4s" % ("offload", "loss%", "streams", "runs")
    if mtus:
        head = "%6s " % "mtu" + head
    for m in present:
        head += " %11s" % (m + " Gb/s") + ("" if m == "kernel" else " %8s" % "x kernel")
    head += "   frames dropped (median per run, %s)" % "/".join(present)
    lines = [head, "-" * len(head)]
    for r in rows:
        md = r["modes"]
        line = "%-7s %7s %7d %4d" % (r["offload"], loss_arg(r["loss_pct"]), r["streams"],
                                      max(d["runs"] for d in md.values()))
        if mtus:
            line = "%6d " % r["mtu"] + line
        for m in present:
            d = md.get(m)
            line += " %11s" % ("%.3f" % d["gbps"] if d else "-")
            if m != "kernel":
                line += " %8s" % ("%.3fx" % d["ratio"] if d and d["ratio"] is not None
                                  else "-")
        line += "   " + "/".join("%g" % md[m]["frames_dropped"] if m in md else "-"
                                 for m in present)
        lines.append(line)
    ccs = sorted({r["modes"]["kernel"]["congestion"] for r in rows
                  if "congestion" in r["modes"].get("kernel", {})})
    if ccs:
        lines.append("(the kernel's congestion control: %s)" % ", ".join(ccs))
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Plots
# ---------------------------------------------------------------------------
MODE_STYLE = {
    "raw": {"color": "tab:gray", "marker": "s", "label": "raw frames (no TCP)"},
    "kernel": {"color": "tab:blue", "marker": "o", "label": "Linux kernel TCP"},
    "perproc": {"color": "tab:green", "marker": "^",
                "label": "ulstack, stack per process (direct path)"},
    "relay": {"color": "tab:olive", "marker": "D",
              "label": "ulstack, stack per process (relay through ulsd)"},
    "central": {"color": "tab:red", "marker": "v", "label": "ulstack, central server"},
}
MTU_LINES = ("-", "--", ":", "-.")


def save_figure(plt, fig, outdir, kind):
    """Lay fig out, write it to OUTDIR/KIND.png and free it; returns the path."""
    fig.tight_layout()
    path = os.path.join(outdir, kind + ".png")
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_runs(runs, outdir, title_suffix=""):
    """aggregate.png and per_stream.png in outdir; returns the paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, ScalarFormatter, NullLocator

    mtus = sorted({r["mtu"] for r in runs})
    ns = sorted({r["streams"] for r in runs})
    paths = []
    for kind in ("aggregate", "per_stream"):
        fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
        for mode in MODES:
            for j, mtu in enumerate(mtus):
                pts = sorted((r for r in runs if r["mode"] == mode and r["mtu"] == mtu),
                             key=lambda r: r["streams"])
                if not pts:
                    continue
                st = MODE_STYLE[mode]
                label = st["label"] + ("" if len(mtus) == 1 else ", MTU %d" % mtu)
                x = [r["streams"] for r in pts]
                kw = dict(color=st["color"], marker=st["marker"],
                          linestyle=MTU_LINES[j % len(MTU_LINES)], label=label)
                if kind == "aggregate":
                    ax.plot(x, [r["aggregate_gbps"] for r in pts], **kw)
                else:
                    med = [r["per_stream_gbps"]["median"] for r in pts]
                    lo = [m - r["per_stream_gbps"]["min"] for m, r in zip(med, pts)]
                    hi = [r["per_stream_gbps"]["max"] - m for m, r in zip(med, pts)]
                    ax.errorbar(x, med, yerr=[lo, hi], capsize=3, **kw)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(ns))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("concurrent streams (64 KiB messages)")
        if kind == "aggregate":
            ax.set_ylabel("aggregate throughput (Gbit/s)")
            ax.set_title("Aggregate throughput vs concurrent streams" + title_suffix)
        else:
            ax.set_ylabel("per-stream throughput (Gbit/s), median, min..max")
            ax.set_yscale("log")
            ax.set_title("Throughput per stream vs concurrent streams" + title_suffix)
        ax.set_ylim(bottom=0 if kind == "aggregate" else None)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
        paths.append(save_figure(plt, fig, outdir, kind))
    return paths


STREAM_LINES = ("-", "--", ":", "-.")


def plot_loss(runs, outdir, title_suffix=""):
    """loss.png (aggregate throughput against the loss rate, median of the repeats with
    their min..max, one panel per offload setting) and loss_ratio.png (each ulstack mode's
    median over the kernel's) in outdir; returns the paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = loss_summary(runs)
    offs = [o for o in OFFLOADS if any(r["offload"] == o for r in rows)]
    levels = sorted({r["loss_pct"] for r in rows})
    ns = sorted({r["streams"] for r in rows})
    mtus = sorted({r["mtu"] for r in rows})
    paths = []
    for kind in ("loss", "loss_ratio"):
        fig, axes = plt.subplots(1, len(offs), figsize=(6.5 * len(offs), 5), dpi=110,
                                 squeeze=False, sharey=True)
        for ax, off in zip(axes[0], offs):
            for mode in MODES:
                if kind == "loss_ratio" and mode == "kernel":
                    continue
                for j, n in enumerate(ns):
                    for mtu in mtus:
                        pts = [(levels.index(r["loss_pct"]), r["modes"][mode]) for r in rows
                               if r["offload"] == off and r["streams"] == n and
                               r["mtu"] == mtu and mode in r["modes"]]
                        if kind == "loss_ratio":
                            pts = [(x, d) for x, d in pts if d["ratio"] is not None]
                        if not pts:
                            continue
                        st = MODE_STYLE[mode]
                        label = "%s, %d stream%s%s" % (st["label"], n, "" if n == 1 else "s",
                                                       "" if len(mtus) == 1 else
                                                       ", MTU %d" % mtu)
                        kw = dict(color=st["color"], marker=st["marker"], label=label,
                                  linestyle=STREAM_LINES[j % len(STREAM_LINES)])
                        x = [p[0] for p in pts]
                        if kind == "loss":
                            med = [p[1]["gbps"] for p in pts]
                            lo = [m - p[1]["min"] for m, p in zip(med, pts)]
                            hi = [p[1]["max"] - m for m, p in zip(med, pts)]
                            ax.errorbar(x, med, yerr=[lo, hi], capsize=3, **kw)
                        else:
                            ax.plot(x, [p[1]["ratio"] for p in pts], **kw)
            if kind == "loss_ratio":
                ax.axhline(1.0, color="tab:blue", linewidth=1, alpha=0.6)
            ax.set_yscale("log")
            ax.set_xticks(range(len(levels)))
            ax.set_xticklabels([loss_arg(l) + "%" for l in levels])
            ax.set_xlim(-0.3, len(levels) - 0.7)
            ax.set_xlabel("random loss of the frames entering the bridge")
            ax.set_title("offload %s%s" % (off, title_suffix))
            ax.grid(True, which="both", alpha=0.3)
        axes[0][0].set_ylabel("aggregate throughput (Gbit/s), median, min..max"
                              if kind == "loss" else "throughput / kernel's (medians)")
        axes[0][-1].legend(fontsize="x-small")
        fig.suptitle("Throughput under random frame loss" if kind == "loss" else
                     "ulstack's throughput relative to the kernel's under loss")
        paths.append(save_figure(plt, fig, outdir, kind))
    return paths


NEEDS = {"raw": ("ulsraw",), "kernel": ("ulsbench",), "perproc": ("ulsbench", "ulsd"),
         "relay": ("ulsbench", "ulsd"),
         "central": ("ulsbench", "ulsrelay", "ulsd")}


def check_tools(paths, modes, loss=False, offloads=(DEFAULT_OFFLOAD,)):
    missing = []
    if loss and not shutil.which("nft"):
        missing.append("--loss needs 'nft' (nftables; build-aux/setup-debian installs it)")
    if loss and "off" in offloads and "kernel" in modes and not shutil.which("ethtool"):
        missing.append("--loss with --offload off needs 'ethtool' (kernel peers' TSO/GSO)")
    for m in modes:
        for tool in NEEDS[m]:
            p = paths[tool]
            if not (os.path.isfile(p) and os.access(p, os.X_OK)):
                missing.append("%s mode needs %s (not found at %s)" % (m, tool, p))
    if not paths["testbed"]:
        missing.append("the testbed script tests/testbed/testbed was not found (set ULS_SRCDIR)")
    for t in ("ip",):
        if not shutil.which(t):
            missing.append("'%s' (iproute2) not found" % t)
    return missing
