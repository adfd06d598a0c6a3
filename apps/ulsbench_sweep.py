#!/usr/bin/python3
"""ulsbench sweep: aggregate and per-stream throughput vs number of concurrent streams.

    ulsbench [--mode MODE[,MODE...]] [--streams N[,N...]] [--seconds S | --bytes B]
             [--mtu M[,M...]] [--offload on|off|on,off] [--loss PCT[,PCT...]]
             [--repeat R] [--json FILE] [--plot DIR]

This is the driver behind `ulsbench` when its first argument is not a worker subcommand
(`server`, `client`); it also runs on its own:

    ULS_BUILDDIR=build ULS_SRCDIR=. /usr/bin/python3 apps/ulsbench_sweep.py --mode kernel

Between the two nodes of a testbed it builds itself (tests/testbed/testbed, TB_NAME
"ulsbench") it runs N concurrent streams of 64 KiB messages for each N of --streams, in
each mode of --mode, at each MTU of --mtu (seed 004, section 4.3, Figures 5, 7 and 8):

  raw      frames pushed through the same TAP and bridge path without TCP (ulsraw)
  kernel   the Linux kernel's TCP between two namespaces on the same bridge and MTU
  perproc  ulstack: one process, one stack per stream (the paper's design), each process
           on ulsd's direct data path (a TAP queue of its own; --datapath direct); above
           64 streams, processes = 64 and several streams (threads) share a process
  relay    the same processes on ulsd's relay path (--datapath relay: every frame through
           ulsd's demultiplexer thread, as before the direct path)
  central  one ulstack process per node carries every stream (ulsrelay); the worker
           processes hand it their data over UNIX sockets (the OSF/1 "Unix server")

With --loss, every point runs again at each loss level: the testbed drops that percentage
of the frames entering its bridge at random (`testbed impair`: an nftables rule at the
ingress of every TAP and kernel-peer port, since this kernel has no netem), the same for
every mode, and each run records loss_pct, the offload setting, and the frames the rule
counted and dropped during that point (frames_seen, frames_dropped, per port in
`impairment`). The table then gives the median of the --repeat runs of each point and
each mode's ratio to the kernel's; the plots are throughput and that ratio against loss.
Under loss, --offload applies to the kernel peers as well (TSO/GSO on their veths), so
that with offload off every frame on the bridge is one wire segment in every mode.

For each point it reports the aggregate throughput (total verified bytes / the time the
streams moved data, see transfer_window), the per-stream throughput (each stream's
verified bytes / its own seconds: min, median, max), Jain's fairness index over the
per-stream throughputs, and CPU time. Every byte is verified by the workers; a worker that
reports an unverified stream or exits non-zero fails the whole run (exit 1): unverified
numbers are never reported.

Network safety: everything runs inside the namespaces the testbed creates; the only
processes signalled are the ones this driver started (by PID); the testbed is brought
down at the end, also on errors, SIGINT and SIGTERM. Every point has a time limit.

Importing this module runs nothing (the unit tests import it).
"""

import argparse
import datetime
import json
import math
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# The testbed, processes and CPU accounting this driver shares with ulsbench_apps.py: a
# module next to this file (the source tree's apps/, or pkglibexecdir when installed).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ulsbench_common import (  # noqa: E402
    DEFAULT_OFFLOAD, LOCK_FILE, POLL, BenchError, Procs, Testbed, UsageError,
    find_paths, log, loss_arg, machine_info, progress, read_cpu_ticks, run_guarded,
    take_lock, write_json)

# ---------------------------------------------------------------------------
# Fixed parameters
# ---------------------------------------------------------------------------
MODES = ("raw", "kernel", "perproc", "relay", "central")     # also the order they run in
ULSD_MODES = frozenset(("perproc", "relay", "central"))       # need the testbed's ulsd nodes
# The data path the ulstack processes of a mode ask ulsd for (ulsbench --datapath); central's
# relays take ulsd's default (direct).
DATAPATH = {"perproc": "direct", "relay": "relay", "central": "direct"}
DEFAULT_MODES = MODES
DEFAULT_STREAMS = (1, 2, 4, 8, 16, 32, 64)
DEFAULT_SECONDS = 2.0
# Seconds each stream runs before the measured --seconds (like iperf3 --omit): processes
# fault in their buffers and rings and TCP opens its windows; every byte is still verified.
DEFAULT_WARMUP = 1.0
MAX_WARMUP = 60.0
DEFAULT_MTUS = (1500,)
MAX_STREAMS = 1024
MAX_PROCS = 64              # above this, several streams (threads) share a process
MIN_SECONDS, MAX_SECONDS = 0.5, 60.0
MIN_BYTES, MAX_BYTES = 65536, 16 << 30
MIN_MTU, TAP_MAX_MTU = 576, 65521  # 65535 minus the 14-byte Ethernet header
# --loss: percentages below 100 with at most 3 decimals (the testbed's rule drops N of
# 100000 frames); without --mode, a loss sweep runs the TCP modes (raw is not TCP: under
# loss it only shows the drop rate).
LOSS_MODES = ("kernel", "perproc", "central")
MAX_REPEAT = 20
OFFLOADS = ("on", "off")
# Extra seconds a point may take under loss: a stream's last segments can wait for
# retransmission timeouts (and their backoff) after the sender's time is up.
LOSS_SLACK = 120.0
MSG_SIZE = 65536            # seed 004's 64 KB messages; the workers' fixed message size

KERNEL_PORT = 5201          # kernel mode: one receiver process in the K1 namespace
# Clients start together: a margin for the processes to start and connect, first.
START_MARGIN_S = 0.5
START_PER_PROCESS_S = 0.02
PERPROC_BASE_PORT = 6000    # perproc mode: receiver process i listens on 6000+i
CENTRAL_PORT = 7000         # central mode: the receiving node's relay
RAW_RECV_MAC = "02:75:6c:ff:00:02"

READY_TIMEOUT = 15.0        # a receiver/relay must be listening within this

CPU_INCLUDES = ("user+system CPU of every process the point started (senders, receivers, "
                "relays; from wait4 rusage) plus the CPU the testbed's ulsd daemons used "
                "during the point (/proc/PID/stat utime+stime; perproc and central only); "
                "each run's cpu.includes lists the parts its total has; kernel work done in "
                "softirq context is counted only where the kernel charges it to one of "
                "these processes")


# ---------------------------------------------------------------------------
# Pure logic (unit-tested in tests/bench/test_sweep_logic.py)
# ---------------------------------------------------------------------------
def jain(xs):
    """Jain's fairness index (sum x)^2 / (n * sum x^2): 1 when all are equal, 1/n when
    one stream has everything. An empty or all-zero vector is None (undefined)."""
    xs = [float(x) for x in xs]
    if not xs:
        return None
    sq = sum(x * x for x in xs)
    if sq == 0:
        return None
    return sum(xs) ** 2 / (len(xs) * sq)


def summarize(xs):
    """min, median, max of a non-empty list of numbers."""
    if not xs:
        raise ValueError("no values")
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs)}


def split_streams(n, max_procs=MAX_PROCS):
    """How N streams are spread over processes: min(N, max_procs) processes, each with
    N // procs streams and the first N % procs of them with one more. Returns the list of
    streams per process (sums to N)."""
    if not isinstance(n, int) or n < 1:
        raise ValueError("streams must be a positive integer")
    procs = min(n, max_procs)
    base, extra = divmod(n, procs)
    return [base + 1 if i < extra else base for i in range(procs)]


def parse_int_list(text, what, lo, hi):
    """'1,2,4' -> [1, 2, 4] (sorted, duplicates dropped); UsageError when malformed or out
    of lo..hi."""
    if text is None or not text.strip():
        raise UsageError("%s: empty list" % what)
    out = []
    for item in text.split(","):
        item = item.strip()
        if not re.fullmatch(r"[0-9]{1,7}", item):
            raise UsageError("%s: '%s' is not a positive integer" % (what, item))
        v = int(item)
        if v < lo or v > hi:
            raise UsageError("%s: %d is out of range %d..%d" % (what, v, lo, hi))
        if v not in out:
            out.append(v)
    return sorted(out)


def parse_modes(text):
    """'central,kernel' -> ['kernel', 'central'] (run order, duplicates dropped)."""
    if text is None or not text.strip():
        raise UsageError("--mode: empty list")
    seen = set()
    for item in text.split(","):
        item = item.strip()
        if item == "all":
            seen.update(MODES)
            continue
        if item not in MODES:
            raise UsageError("--mode: unknown mode '%s' (choose from %s, or all)"
                             % (item, ", ".join(MODES)))
        seen.add(item)
    return [m for m in MODES if m in seen]


def parse_mtus(text):
    out = []
    for item in (text or "").split(","):
        item = item.strip()
        if re.fullmatch(r"[0-9]{1,6}", item) and int(item) > TAP_MAX_MTU and int(item) <= 65535:
            raise UsageError("--mtu: %s is above the TAP device maximum of %d (65535 minus the "
                             "14-byte Ethernet header); use --mtu %d" % (item, TAP_MAX_MTU,
                                                                        TAP_MAX_MTU))
    return parse_int_list(text, "--mtu", MIN_MTU, TAP_MAX_MTU)


def parse_seconds(text):
    try:
        v = float(text)
    except (TypeError, ValueError):
        raise UsageError("--seconds: '%s' is not a number" % text)
    if not math.isfinite(v) or v < MIN_SECONDS or v > MAX_SECONDS:
        raise UsageError("--seconds: %s is out of range %g..%g" % (text, MIN_SECONDS, MAX_SECONDS))
    return v


def parse_warmup(text):
    try:
        v = float(text)
    except ValueError:
        raise UsageError("--warmup: %r is not a number of seconds" % text)
    if not 0 <= v <= MAX_WARMUP or math.isnan(v):
        raise UsageError("--warmup: %g is outside 0..%g" % (v, MAX_WARMUP))
    return v


def parse_bytes(text):
    """'64M' -> 67108864 (K, M, G are powers of 1024), a whole number of 64 KiB messages."""
    m = re.fullmatch(r"([0-9]{1,12})([KMG]?)", (text or "").strip(), re.I)
    if not m:
        raise UsageError("--bytes: '%s' is not a size (N, NK, NM or NG)" % text)
    v = int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2).upper()]
    if v < MIN_BYTES or v > MAX_BYTES:
        raise UsageError("--bytes: %s is out of range 64K..16G" % text)
    if v % MSG_SIZE:
        raise UsageError("--bytes: %s is not a multiple of the 64 KiB message size" % text)
    return v


def parse_loss(text):
    """'1,0,0.1' -> [0.0, 0.1, 1.0]: percentages 0 <= p < 100 with at most 3 decimals,
    sorted, duplicates dropped; UsageError otherwise."""
    if text is None or not text.strip():
        raise UsageError("--loss: empty list")
    out = []
    for item in text.split(","):
        item = item.strip()
        m = re.fullmatch(r"([0-9]{1,2})(?:\.([0-9]{1,3}))?", item)
        if not m:
            raise UsageError("--loss: '%s' is not a percentage 0..99.999 with at most 3 "
                             "decimals" % item)
        # Exact in thousandths, then one float per level.
        milli = int(m.group(1)) * 1000 + int((m.group(2) or "").ljust(3, "0"))
        v = milli / 1000.0
        if v not in out:
            out.append(v)
    return sorted(out)


def parse_offloads(text):
    """'off,on' -> ['on', 'off'] (on first, duplicates dropped)."""
    items = [x.strip() for x in (text or "").split(",")]
    bad = [x for x in items if x not in OFFLOADS]
    if bad or not items:
        raise UsageError("--offload: '%s' is not on, off or on,off" % text)
    return [o for o in OFFLOADS if o in items]


def parse_cc(text):
    """--kernel-cc: a congestion control's name as Linux spells them (TCP_CA_NAME_MAX 16)."""
    if text is None:
        return None
    if not re.fullmatch(r"[a-z][a-z0-9_]{0,14}", text):
        raise UsageError("--kernel-cc: '%s' is not a congestion control's name (e.g. cubic)"
                         % text)
    return text


def parse_repeat(text):
    if not re.fullmatch(r"[0-9]{1,3}", (text or "").strip()) or \
            not 1 <= int(text) <= MAX_REPEAT:
        raise UsageError("--repeat: '%s' is not a count 1..%d" % (text, MAX_REPEAT))
    return int(text)


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def build_parser():
    p = _Parser(
        prog="ulsbench",
        description="Concurrent-stream benchmark: aggregate and per-stream throughput of N "
                    "concurrent 64 KiB-message streams between two testbed nodes, in the "
                    "modes raw, kernel, perproc (ulstack, a stack per process) and central "
                    "(one ulstack process per node carries every stream).",
        epilog="Worker subcommands: ulsbench server ..., ulsbench client ... (ulsbench "
               "server --help). Runs as root; builds and removes its own testbed "
               "(TB_NAME=ulsbench).")
    p.add_argument("--mode", default=None, metavar="MODE[,MODE...]",
                   help="modes to run, from %s, or all (default: all; with --loss: %s)"
                        % (", ".join(MODES), ",".join(LOSS_MODES)))
    p.add_argument("--streams", default=",".join(map(str, DEFAULT_STREAMS)),
                   metavar="N[,N...]",
                   help="numbers of concurrent streams, 1..%d (default: %s)"
                        % (MAX_STREAMS, ",".join(map(str, DEFAULT_STREAMS))))
    g = p.add_mutually_exclusive_group()
    g.add_argument("--seconds", default=None, metavar="S",
                   help="seconds each point sends for, %g..%g (default %g)"
                        % (MIN_SECONDS, MAX_SECONDS, DEFAULT_SECONDS))
    g.add_argument("--bytes", default=None, metavar="B",
                   help="instead of --seconds: bytes per stream (N[K|M|G], a multiple of "
                        "64K; not for raw mode)")
    p.add_argument("--warmup", default=None, metavar="W",
                   help="seconds the streams of a point run before the measured --seconds "
                        "start, 0..%g (default %g; 0 with --bytes); not for raw mode, "
                        "whose path has nothing to warm" % (MAX_WARMUP, DEFAULT_WARMUP))
    p.add_argument("--offload", default=DEFAULT_OFFLOAD, metavar="on|off|on,off",
                   help="segmentation offload at the ulsd nodes (perproc and central; "
                        "ulsd --offload), default %s; on,off runs the sweep once with each. "
                        "With --loss it applies to the kernel peers' TSO/GSO too"
                        % DEFAULT_OFFLOAD)
    p.add_argument("--loss", default=None, metavar="PCT[,PCT...]",
                   help="run every point at each of these random frame-loss rates, in "
                        "percent (0..99.999, 0 allowed), applied to the frames entering "
                        "the testbed's bridge (testbed impair); each run records loss_pct "
                        "and the frames dropped")
    p.add_argument("--kernel-cc", default=None, metavar="CC",
                   help="the congestion control of the kernel mode's senders (ulsbench "
                        "client --congestion, i.e. TCP_CONGESTION), e.g. cubic, Linux's "
                        "default; without it the kernel peers use their namespace's "
                        "default, which is the host's net.ipv4.tcp_congestion_control. "
                        "Each kernel run records the one it used as `congestion`")
    p.add_argument("--repeat", default="1", metavar="R",
                   help="run each point R times (1..%d), interleaved: the table gives "
                        "medians (default 1)" % MAX_REPEAT)
    p.add_argument("--mtu", default=",".join(map(str, DEFAULT_MTUS)), metavar="M[,M...]",
                   help="link MTUs, %d..%d (default: 1500; 9000 and %d are the jumbo "
                        "points)" % (MIN_MTU, TAP_MAX_MTU, TAP_MAX_MTU))
    p.add_argument("--json", default=None, metavar="FILE", help="write the results as JSON")
    p.add_argument("--plot", default=None, metavar="DIR",
                   help="write aggregate.png and per_stream.png here (default: the "
                        "directory of --json; no plots without either)")
    return p


def parse_args(argv):
    """Validated options as a dict; UsageError on anything wrong."""
    ns = build_parser().parse_args(argv)
    loss = parse_loss(ns.loss) if ns.loss is not None else None
    offloads = parse_offloads(ns.offload)
    mode_text = ns.mode if ns.mode is not None else (
        ",".join(LOSS_MODES) if loss is not None else ",".join(DEFAULT_MODES))
    opts = {
        "modes": parse_modes(mode_text),
        "streams": parse_int_list(ns.streams, "--streams", 1, MAX_STREAMS),
        "mtus": parse_mtus(ns.mtu),
        "seconds": None,
        "bytes": None,
        "warmup": 0.0,
        "offload": ",".join(offloads),
        "offloads": offloads,
        "loss": loss,
        "repeat": parse_repeat(ns.repeat),
        "kernel_cc": parse_cc(ns.kernel_cc),
        "json": ns.json,
        "plot": ns.plot,
    }
    if ns.bytes is not None:
        opts["bytes"] = parse_bytes(ns.bytes)
        if "raw" in opts["modes"]:
            raise UsageError("--bytes: raw mode runs for a time only; use --seconds, or "
                             "leave raw out of --mode")
        if ns.warmup is not None and parse_warmup(ns.warmup) > 0:
            raise UsageError("--warmup: a transfer of --bytes is measured whole; use "
                             "--seconds with --warmup")
    else:
        opts["seconds"] = (parse_seconds(ns.seconds) if ns.seconds is not None
                           else DEFAULT_SECONDS)
        opts["warmup"] = (parse_warmup(ns.warmup) if ns.warmup is not None
                          else DEFAULT_WARMUP)
    if opts["plot"] is None and opts["json"]:
        opts["plot"] = os.path.dirname(os.path.abspath(opts["json"]))
    if opts["json"]:
        d = os.path.dirname(os.path.abspath(opts["json"]))
        if not os.path.isdir(d):
            raise UsageError("--json: directory %s does not exist" % d)
    return opts


def plan_phases(modes, mtus):
    """Group the runs by (mtu, needs ulsd): raw needs the TAPs free (no ulsd); perproc and
    central need ulsd; kernel needs neither, so it joins whichever phase exists (the no-ulsd
    one when raw runs). Modes keep the order raw, kernel, perproc, central."""
    phases = []
    for mtu in mtus:
        free = [m for m in modes if m == "raw"]
        node = [m for m in modes if m in ULSD_MODES]
        if "kernel" in modes:
            if free or not node:
                free.append("kernel")
            else:
                node.insert(0, "kernel")
        if free:
            phases.append({"mtu": mtu, "ulsd": False, "modes": free})
        if node:
            phases.append({"mtu": mtu, "ulsd": True, "modes": node})
    return phases


def plan_sweep(modes, mtus, offloads, loss):
    """The phases of the whole sweep: plan_phases for each offload setting, each phase
    tagged with its "offload". Without --loss offload only changes the ulsd modes, so a
    second pass runs only those; under loss it changes the kernel peers too (and raw runs
    in each pass, if asked for)."""
    out = []
    for i, offload in enumerate(offloads):
        these = modes if (i == 0 or loss is not None) else [m for m in modes
                                                           if m in ULSD_MODES]
        for ph in plan_phases(these, mtus):
            out.append(dict(ph, offload=offload))
    return out


def plan_points(modes, streams, loss, repeat):
    """The points of one phase in the order they run: repeats outermost, then loss levels
    (None without --loss), then modes, then stream counts, so that the runs of a point are
    spread over the phase's time and the modes of one loss level run side by side."""
    return [{"repeat": r, "loss": l, "mode": m, "streams": n}
            for r in range(repeat) for l in (loss if loss is not None else [None])
            for m in modes for n in streams]


def point_timeout(n, seconds=None, nbytes=None, loss=False):
    """Upper bound on one point's wall time: the transfer, plus setup for every process,
    plus slack (more under loss: see LOSS_SLACK). For a byte count, assume at worst 20 MB/s
    aggregate."""
    setup = 20.0 + 0.1 * n + (LOSS_SLACK if loss else 0.0)
    if nbytes is not None:
        return min(900.0 + (LOSS_SLACK if loss else 0.0), setup + n * nbytes / 20e6)
    return setup + 3.0 * seconds


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
    head = ("%-8s %6s %7s %10s %9s %9s %9s %6s %8s %8s %12s" %
            ("mode", "mtu", "streams", "aggr Gb/s", "min Gb/s", "med Gb/s", "max Gb/s",
             "Jain", "CPU s", "CPU s/GB", "verified MB"))
    if loss:
        head = "%-7s %6s " % ("offload", "loss%") + head + " %9s %8s" % ("dropped", "frame B")
    lines = [head, "-" * len(head)]
    for r in runs:
        ps = r["per_stream_gbps"]
        per_gb = r["cpu_seconds"] / (r["bytes_verified"] / 1e9) if r["bytes_verified"] else 0
        line = "%-8s %6d %7d %10.3f %9.3f %9.3f %9.3f %6.3f %8.2f %8.3f %12.1f" % (
            r["mode"], r["mtu"], r["streams"], r["aggregate_gbps"], ps["min"], ps["median"],
            ps["max"], r["jain"], r["cpu_seconds"], per_gb, r["bytes_verified"] / 1e6)
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
        fig.tight_layout()
        path = os.path.join(outdir, kind + ".png")
        fig.savefig(path)
        plt.close(fig)
        paths.append(path)
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
        fig.tight_layout()
        path = os.path.join(outdir, kind + ".png")
        fig.savefig(path)
        plt.close(fig)
        paths.append(path)
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


# ---------------------------------------------------------------------------
# One point
# ---------------------------------------------------------------------------
class Point:
    """Runs one (mode, N, mtu) point on an up testbed and returns its run object."""

    def __init__(self, procs, tb, paths, mode, n, mtu, seconds, nbytes, workdir, warmup=0.0,
                 loss=None, kernel_cc=None):
        self.procs, self.tb, self.paths = procs, tb, paths
        self.kernel_cc = kernel_cc
        self.congestion = set()  # what the kernel clients report (TCP_CONGESTION)
        self.mode, self.n, self.mtu = mode, n, mtu
        self.seconds, self.nbytes = seconds, nbytes
        self.warmup = warmup if mode != "raw" and seconds is not None else 0.0
        self.workdir = workdir
        self.tag = "[%s n=%d mtu=%d%s]" % (mode, n, mtu, "" if loss is None
                                           else " loss=%s%%" % loss_arg(loss))
        self.started = []
        self.deadline = time.monotonic() + point_timeout(
            n, None if seconds is None else seconds + self.warmup, nbytes,
            loss=bool(loss))
        self.window = None      # seconds the streams moved data (see transfer_window)

    # -- helpers ---------------------------------------------------------------
    def spawn(self, name, argv):
        p = self.procs.spawn("%s-n%d-%s" % (self.mode, self.n, name), argv)
        self.started.append(p)
        return p

    def amount(self):
        if self.seconds is None:
            return ["--bytes", str(self.nbytes)]
        return ["--seconds", "%g" % self.seconds] + (
            ["--warmup", "%g" % self.warmup] if self.warmup > 0 else [])

    def fail(self, msg, procs=None):
        detail = []
        for p in procs or []:
            detail.append("  %s (pid %d): %s\n    $ %s\n%s" % (
                p.name, p.pid, p.describe(), " ".join(shlex.quote(a) for a in p.argv),
                p.stderr_tail()))
        raise BenchError("%s %s%s" % (self.tag, msg, ("\n" + "\n".join(detail)) if detail
                                      else ""))

    def check_time(self, what):
        if time.monotonic() > self.deadline:
            self.fail("timed out (%s)" % what,
                      [p for p in self.started if p.alive] or self.started[-3:])

    def wait_ready(self, procs, ready, what):
        """Until ready() is true; fails if one of procs exits first or the time is up."""
        limit = min(self.deadline, time.monotonic() + READY_TIMEOUT)
        while True:
            self.procs.poll()
            dead = [p for p in procs if not p.alive]
            if dead:
                self.fail("%s exited before it was ready" % what, dead)
            if ready():
                return
            if time.monotonic() > limit:
                self.fail("%s not ready within %.0f s" % (what, READY_TIMEOUT), procs)
            time.sleep(0.05)

    def listening_ulstack(self, ctl, ports):
        """True when ulsd at ctl has a listener on every one of ports."""
        try:
            r = subprocess.run([self.paths["ulsstat"], "--ctl", ctl, "--json"],
                               capture_output=True, text=True, timeout=5)
            eps = json.loads(r.stdout).get("endpoints", [])
        except (OSError, ValueError, subprocess.TimeoutExpired):
            return False
        have = set()
        for e in eps:
            if e.get("state") == "listen" and e.get("proto") == "tcp":
                try:
                    have.add(int(str(e.get("local", "")).rsplit(":", 1)[1]))
                except (IndexError, ValueError):
                    pass
        return set(ports) <= have

    def listening_kernel(self, ns, port):
        try:
            r = subprocess.run(["ip", "netns", "exec", ns, "ss", "-Hltn", "sport = :%d" % port],
                               capture_output=True, text=True, timeout=5)
            return bool(r.stdout.strip())
        except (OSError, subprocess.TimeoutExpired):
            return False

    def ulsd_frames(self):
        """Both nodes' frames between the TAP and their processes, by who moved them:
        ulsd (data_frames_relayed) or the kernel's direct path (steered to the processes'
        queues, and passed by the transmit check)."""
        tot = {"relayed_by_ulsd": 0, "direct": 0}
        for ctl in (self.tb.env["TB_NODE1_CTL"], self.tb.env["TB_NODE2_CTL"]):
            try:
                r = subprocess.run([self.paths["ulsstat"], "--ctl", ctl, "--json"],
                                   capture_output=True, text=True, timeout=10)
                c = json.loads(r.stdout)["counters"]
            except (OSError, ValueError, KeyError, subprocess.TimeoutExpired) as e:
                self.fail("ulsstat --ctl %s: %s" % (ctl, e))
            tot["relayed_by_ulsd"] += c.get("data_frames_relayed", 0)
            tot["direct"] += c.get("direct_steered", 0) + c.get("direct_tx_passed", 0)
        return tot

    def check_datapath(self, ctl, ports):
        """The listeners on `ports` belong to processes on the data path this mode asks
        for: a direct run that silently fell back to the relay measures the wrong thing."""
        want = DATAPATH[self.mode]
        try:
            r = subprocess.run([self.paths["ulsstat"], "--ctl", ctl, "--json"],
                               capture_output=True, text=True, timeout=10)
            eps = json.loads(r.stdout).get("endpoints", [])
        except (OSError, ValueError, subprocess.TimeoutExpired) as e:
            self.fail("ulsstat --ctl %s: %s" % (ctl, e))
        got = {e.get("datapath") for e in eps if e.get("state") == "listen" and
               str(e.get("local", "")).rsplit(":", 1)[-1] in {str(p) for p in ports}}
        if got != {want}:
            self.fail("the receivers are on the %s data path, not %s" %
                      (",".join(sorted(str(g) for g in got)) or "no", want))

    def ulsd_cpu(self):
        total = 0.0
        for pid in self.tb.ulsd_pids():
            v = read_cpu_ticks(pid)
            if v is not None:
                total += v
        return total

    def run_senders(self, senders, wire_dev):
        """Waits for the senders, printing progress; returns the point's wall time (first
        sender started -> last sender exited). Any sender failing ends the point."""
        t0 = min(p.started for p in senders)
        b0 = self.tb.link_bytes(wire_dev) if wire_dev else None
        last_t, last_b = t0, b0
        next_report = t0 + 1.0
        total = self.seconds
        while True:
            self.procs.poll()
            bad = [p for p in senders if not p.alive and p.rc != 0]
            if bad:
                self.fail("a sender failed", bad[:3])
            # A receiver or relay that dies while data flows dooms the point.
            others = [p for p in self.started if p not in senders and not p.alive and p.rc != 0]
            if others:
                self.fail("a receiver/relay failed", others[:3])
            running = [p for p in senders if p.alive]
            if not running:
                return max(p.ended for p in senders) - t0
            self.check_time("senders still running")
            now = time.monotonic()
            if now >= next_report:
                b = self.tb.link_bytes(wire_dev) if wire_dev else None
                rate = ""
                if b is not None and last_b is not None and now > last_t:
                    rate = "%.2f Gbit/s on the wire, " % ((b - last_b) * 8 / (now - last_t) / 1e9)
                last_t, last_b = now, b
                el = ("%.0f s of %g" % (now - t0, total)) if total else "%.0f s" % (now - t0)
                progress("%s %s%s, %d/%d senders running" % (self.tag, rate, el, len(running),
                                                             len(senders)))
                next_report = now + 1.0
            time.sleep(POLL)

    def wait_exit(self, procs, what):
        while True:
            self.procs.poll()
            live = [p for p in procs if p.alive]
            if not live:
                break
            if time.monotonic() > self.deadline:
                self.fail("timed out waiting for the %s to finish" % what, live)
            time.sleep(POLL)
        bad = [p for p in procs if p.rc != 0]
        if bad:
            self.fail("%s failed" % what, bad[:3])

    def read_json(self, path, who, procs):
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError) as e:
            self.fail("%s: no result in %s (%s)" % (who, path, e), procs)

    def read_out(self, p):
        with open(p.out, errors="replace") as f:
            return f.read()

    # -- modes -------------------------------------------------------------------
    def run(self):
        progress("%s starting %d stream%s" % (self.tag, self.n, "" if self.n == 1 else "s"))
        cpu0 = self.ulsd_cpu()
        frames0 = self.ulsd_frames() if self.mode in ULSD_MODES else None
        try:
            streams, wall, extra = getattr(self, "_run_" + self.mode)()
            extra["wall_seconds"] = round(wall, 6)
            if self.window is not None and 0 < self.window <= wall + 0.05:
                wall = self.window
        finally:
            self.procs.stop([p for p in self.started if p.alive])
        ulsd = max(0.0, self.ulsd_cpu() - cpu0) if self.mode in ULSD_MODES else 0.0
        if frames0 is not None:
            frames1 = self.ulsd_frames()
            extra["datapath"] = DATAPATH[self.mode]
            extra["node_frames"] = {k: frames1[k] - frames0[k] for k in frames0}
        cpu = cpu_breakdown(self.started, ulsd if self.mode in ULSD_MODES else None)
        rep = extra.pop("reported_cpu", None)
        if rep is not None:
            # What the workers measured of themselves (getrusage), for comparison.
            cpu[("receiver" if self.mode == "raw" else "senders") + "_self_reported"] = rep
        run = make_run(self.mode, self.n, self.mtu, wall, streams, cpu, extra)
        run["requested"] = ({"seconds": self.seconds} if self.seconds is not None
                            else {"bytes_per_stream": self.nbytes})
        run["warmup_seconds"] = self.warmup
        ps = run["per_stream_gbps"]
        progress("%s %.3f Gbit/s aggregate, per stream %.3f/%.3f/%.3f (min/median/max), "
                 "Jain %.3f, CPU %.1f s, %.0f MB verified" % (
                     self.tag, run["aggregate_gbps"], ps["min"], ps["median"], ps["max"],
                     run["jain"], run["cpu_seconds"], run["bytes_verified"] / 1e6), final=True)
        return run

    def _clients(self, groups, argv_for):
        """Starts one client process per group; returns [(proc, json path, k)]. Every
        client connects at once and then waits for one common start time (--start-at,
        CLOCK_MONOTONIC), so that the streams of 64 processes run together instead of
        starting one after another while the point's clock runs."""
        out = []
        start_at = time.monotonic() + START_MARGIN_S + START_PER_PROCESS_S * len(groups)
        for i, k in enumerate(groups):
            js = os.path.join(self.workdir, "%s-n%d-client%d.json" % (self.mode, self.n, i))
            try:
                os.unlink(js)
            except FileNotFoundError:
                pass
            argv = argv_for(i, k) + self.amount() + ["--json", js,
                                                     "--start-at", "%.6f" % start_at]
            if k > 1:
                argv += ["--streams", str(k)]
            out.append((self.spawn("client%d" % i, argv), js, k))
        return out

    def _collect_clients(self, clients):
        streams, cpu, ends = [], 0.0, []
        for p, js, k in clients:
            doc = self.read_json(js, p.name, [p])
            ends.append((p.ended, doc.get("seconds") if isinstance(doc, dict) else None))
            try:
                streams += client_streams(doc, k, p.name)
            except BenchError as e:
                self.fail(str(e), [p])
            if isinstance(doc.get("cpu_seconds"), (int, float)):
                cpu += doc["cpu_seconds"]
            if isinstance(doc.get("congestion"), str):
                self.congestion.add(doc["congestion"])
        self.window = transfer_window(ends)
        return streams, cpu

    def _check_servers(self, servers, expect_each, client_streams_):
        total = 0
        for p, k in zip(servers, expect_each):
            try:
                lines = server_lines(self.read_out(p), k, p.name)
            except BenchError as e:
                self.fail(str(e), [p])
            total += sum(d["bytes"] for d in lines)
        sent = sum(s["bytes"] for s in client_streams_)
        if total != sent:
            self.fail("the receivers verified %d bytes but the senders report %d"
                      % (total, sent), servers)

    def _run_kernel(self):
        env, bench = self.tb.env, self.paths["ulsbench"]
        k1, k2 = env["TB_KERNEL_NETNS"], env["TB_KERNEL2_NETNS"]
        srv = self.spawn("server", ["ip", "netns", "exec", k1, bench, "server",
                                    "--port", str(KERNEL_PORT), "--count", str(self.n)])
        self.wait_ready([srv], lambda: self.listening_kernel(k1, KERNEL_PORT),
                        "kernel receiver")
        groups = split_streams(self.n)
        to = "%s:%d" % (env["TB_KERNEL_IP"], KERNEL_PORT)
        cc = ["--congestion", self.kernel_cc] if self.kernel_cc else []
        clients = self._clients(groups, lambda i, k: ["ip", "netns", "exec", k2, bench,
                                                      "client", "--to", to] + cc)
        wall = self.run_senders([c[0] for c in clients], "k1-br")
        self.wait_exit([srv], "receiver")
        streams, rep = self._collect_clients(clients)
        self._check_servers([srv], [self.n], streams)
        extra = {"processes": {"senders": len(groups), "receivers": 1}, "reported_cpu": rep}
        if len(self.congestion) == 1:
            extra["congestion"] = next(iter(self.congestion))
        return streams, wall, extra

    def _run_perproc(self):
        env, bench = self.tb.env, self.paths["ulsbench"]
        dp = ["--datapath", DATAPATH[self.mode]]
        groups = split_streams(self.n)
        ports = [PERPROC_BASE_PORT + i for i in range(len(groups))]
        servers = [self.spawn("server%d" % i, [bench, "server", "--ctl", env["TB_NODE2_CTL"],
                                               "--port", str(port), "--count", str(k)] + dp)
                   for i, (port, k) in enumerate(zip(ports, groups))]
        self.wait_ready(servers, lambda: self.listening_ulstack(env["TB_NODE2_CTL"], ports),
                        "ulstack receivers")
        self.check_datapath(env["TB_NODE2_CTL"], ports)
        clients = self._clients(groups, lambda i, k: [
            bench, "client", "--ctl", env["TB_NODE1_CTL"],
            "--to", "%s:%d" % (env["TB_NODE2_IP"], ports[i])] + dp)
        wall = self.run_senders([c[0] for c in clients], "uls2")
        self.wait_exit(servers, "receivers")
        streams, rep = self._collect_clients(clients)
        self._check_servers(servers, groups, streams)
        return streams, wall, {"processes": {"senders": len(groups),
                                             "receivers": len(groups)},
                               "reported_cpu": rep}

    def _run_relay(self):
        return self._run_perproc()

    def _run_central(self):
        env, bench, relay = self.tb.env, self.paths["ulsbench"], self.paths["ulsrelay"]
        s1 = os.path.join(self.workdir, "central-in.sock")
        s2 = os.path.join(self.workdir, "central-out.sock")
        for s in (s1, s2):
            try:
                os.unlink(s)
            except FileNotFoundError:
                pass
        srv = self.spawn("server", [bench, "server", "--unix", s2, "--count", str(self.n)])
        self.wait_ready([srv], lambda: os.path.exists(s2), "UNIX receiver")
        r2 = self.spawn("relay2", [relay, "--ctl", env["TB_NODE2_CTL"],
                                   "--port", str(CENTRAL_PORT), "--unix-connect", s2])
        self.wait_ready([srv, r2],
                        lambda: self.listening_ulstack(env["TB_NODE2_CTL"], [CENTRAL_PORT]),
                        "receiving relay")
        r1 = self.spawn("relay1", [relay, "--ctl", env["TB_NODE1_CTL"], "--unix-listen", s1,
                                   "--to", "%s:%d" % (env["TB_NODE2_IP"], CENTRAL_PORT)])
        self.wait_ready([srv, r1, r2], lambda: os.path.exists(s1), "sending relay")
        groups = split_streams(self.n)
        clients = self._clients(groups, lambda i, k: [bench, "client", "--unix", s1])
        wall = self.run_senders([c[0] for c in clients], "uls2")
        self.wait_exit([srv], "receiver")
        # The relays run until told to stop; a relay that already died has failed.
        self.procs.poll()
        dead = [r for r in (r1, r2) if not r.alive]
        if dead:
            self.fail("a relay exited during the point", dead)
        self.procs.stop([r1, r2])
        streams, rep = self._collect_clients(clients)
        self._check_servers([srv], [self.n], streams)
        return streams, wall, {"processes": {"senders": len(groups), "relays": 2,
                                             "receivers": 1},
                               "reported_cpu": rep}

    def _run_raw(self):
        env, raw = self.tb.env, self.paths["ulsraw"]
        ns = env["TB_NETNS"]
        rjs = os.path.join(self.workdir, "raw-n%d-recv.json" % self.n)
        sjs = os.path.join(self.workdir, "raw-n%d-send.json" % self.n)
        for f in (rjs, sjs):
            try:
                os.unlink(f)
            except FileNotFoundError:
                pass
        rx_tap = env.get("TB_NODE2_TAP", "uls2")
        tx_tap = env.get("TB_NODE1_TAP", "uls1")
        # The previous point's ulsraw processes have exited, but the kernel may release
        # their TAPs a little later (io_uring tears down asynchronously): opening a busy
        # TAP fails with EBUSY, so wait until neither has a holder (no carrier).
        limit = time.monotonic() + READY_TIMEOUT
        while self.tb.link_up(rx_tap) or self.tb.link_up(tx_tap):
            if time.monotonic() > limit:
                self.fail("the TAPs %s/%s are still held by another process" % (tx_tap, rx_tap))
            time.sleep(0.05)
        recv = self.spawn("recv", ["ip", "netns", "exec", ns, raw, "recv", "--tap", rx_tap,
                                   "--mtu", str(self.mtu), "--seconds", "%g" % (self.seconds + 1),
                                   "--mac", RAW_RECV_MAC, "--json", rjs])
        self.wait_ready([recv], lambda: self.tb.link_up(rx_tap), "raw receiver")
        send = self.spawn("send", ["ip", "netns", "exec", ns, raw, "send", "--tap", tx_tap,
                                   "--mtu", str(self.mtu), "--dst-mac", RAW_RECV_MAC,
                                   "--seconds", "%g" % self.seconds, "--streams", str(self.n),
                                   "--json", sjs])
        wall = self.run_senders([send], rx_tap)
        self.wait_exit([recv], "raw receiver")
        doc = self.read_json(rjs, recv.name, [recv])
        try:
            streams = raw_streams(doc, self.n, recv.name)
        except BenchError as e:
            self.fail(str(e), [recv])
        rep = doc.get("cpu_seconds") if isinstance(doc.get("cpu_seconds"), (int, float)) else None
        extra = {"processes": {"senders": 1, "receivers": 1}, "reported_cpu": rep,
                 "raw": {"frames": doc.get("frames"), "lost": doc.get("lost"),
                         "corrupt": doc.get("corrupt", 0),
                         "receiver_seconds": doc.get("seconds")}}
        # The receiver's clock, not the sender's process lifetime, bounds what it counted.
        if isinstance(doc.get("seconds"), (int, float)) and doc["seconds"] > 0:
            self.window = float(doc["seconds"])
        return streams, wall, extra


# ---------------------------------------------------------------------------
# The sweep
# ---------------------------------------------------------------------------
def sweep_phases(opts):
    return plan_sweep(opts["modes"], opts["mtus"], opts.get("offloads", [DEFAULT_OFFLOAD]),
                      opts.get("loss"))


def count_points(opts):
    levels = len(opts["loss"]) if opts.get("loss") is not None else 1
    return sum(len(opts["streams"]) * len(ph["modes"]) for ph in sweep_phases(opts)) * \
        levels * opts.get("repeat", 1)


def estimate_seconds(opts):
    """A rough wall-time estimate of the sweep (for the start message)."""
    per = (opts["seconds"] or 2.0) + opts.get("warmup", 0.0) + 1.0
    return count_points(opts) * per + len(sweep_phases(opts)) * 4


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        opts = parse_args(argv)
    except UsageError as e:
        sys.stderr.write("ulsbench: %s\n" % e)
        sys.stderr.write(build_parser().format_usage())
        return 2

    if os.geteuid() != 0:
        log("must run as root (the testbed creates network namespaces)")
        return 1
    paths = find_paths()
    missing = check_tools(paths, opts["modes"], opts["loss"] is not None, opts["offloads"])
    if missing:
        for m in missing:
            log(m)
        log("build the tree (make) or choose other modes with --mode")
        return 1

    lock = take_lock()
    if lock is None:
        log("another ulsbench driver is running (lock %s held)" % LOCK_FILE)
        return 1

    started = datetime.datetime.now(datetime.timezone.utc)
    workdir = tempfile.mkdtemp(prefix="ulsbench-")
    procs = Procs(workdir)
    tb = Testbed(paths, offload=opts["offloads"][0])
    runs = []
    t_start = time.monotonic()
    loss = opts["loss"]
    phases = sweep_phases(opts)
    log("%d points (modes %s; streams %s; MTU %s; %s per point%s%s%s), about %.0f s; "
        "logs in %s" % (
            count_points(opts), ",".join(opts["modes"]),
            ",".join(map(str, opts["streams"])), ",".join(map(str, opts["mtus"])),
            ("%g s" % opts["seconds"]) if opts["seconds"] is not None
            else "%d bytes per stream" % opts["bytes"],
            "" if loss is None else "; loss %s%%" % ",".join(map(loss_arg, loss)),
            "" if len(opts["offloads"]) == 1 else "; offload %s" % opts["offload"],
            "" if opts["repeat"] == 1 else "; %d runs each" % opts["repeat"],
            estimate_seconds(opts), workdir))

    def body():
        for ph in phases:
            log("testbed up: MTU %d, %s, offload %s" % (
                ph["mtu"], "ulsd nodes" if ph["ulsd"] else "TAPs free (no ulsd)",
                ph["offload"]))
            tb.is_up = True     # start clean: also removes a testbed a killed run left
            tb.down()
            tb.offload = ph["offload"]
            tb.up(ph["mtu"], ph["ulsd"])
            if loss is not None and "kernel" in ph["modes"]:
                tb.kernel_offload(ph["offload"] == "on")
            level = None
            for spec in plan_points(ph["modes"], opts["streams"], loss, opts["repeat"]):
                if spec["loss"] is not None and spec["loss"] != level:
                    tb.impair(spec["loss"])
                    level = spec["loss"]
                before = tb.impair_stats() if level is not None else None
                pt = Point(procs, tb, paths, spec["mode"], spec["streams"], ph["mtu"],
                           opts["seconds"], opts["bytes"], workdir, opts["warmup"],
                           loss=spec["loss"], kernel_cc=opts["kernel_cc"])
                run = pt.run()
                if level is not None:
                    run.update(loss_fields(level, impair_delta(before, tb.impair_stats()),
                                           ph["offload"]))
                elif spec["mode"] in ULSD_MODES:
                    run["offload"] = ph["offload"]
                if opts["repeat"] > 1:
                    run["repeat"] = spec["repeat"]
                runs.append(run)
            tb.down()
    error, rc = run_guarded(body, procs, tb)

    elapsed = time.monotonic() - t_start
    runs = sort_runs(runs)
    if error:
        log("FAILED: %s" % error)
    if runs:
        print(format_table(runs))
        if loss is not None:
            print()
            print(format_loss_table(loss_summary(runs)))
        sys.stdout.flush()
    doc = {
        "benchmark": "ulsbench concurrent streams",
        "command": ["ulsbench"] + list(argv),
        "started": started.isoformat(timespec="seconds"),
        "elapsed_seconds": round(elapsed, 1),
        "complete": error is None,
        "machine": machine_info(paths),
        "options": {"modes": opts["modes"], "streams": opts["streams"], "mtus": opts["mtus"],
                    "seconds": opts["seconds"], "bytes_per_stream": opts["bytes"],
                    "warmup_seconds": opts["warmup"], "offload": opts["offload"],
                    "message_bytes": MSG_SIZE, "max_processes": MAX_PROCS,
                    "kernel_cc": opts["kernel_cc"]},
        "definitions": {
            "aggregate_gbps": "measured_bytes * 8 / seconds",
            "warmup_seconds": "how long the streams ran before the measured span began "
                              "(like iperf3 --omit); their bytes are verified but not "
                              "measured. 0 for raw mode and for transfers of --bytes",
            "measured_bytes": "the bytes the receivers' applications took in after the "
                              "warm-up (all bytes_verified when there is none)",
            "bytes_verified": "every byte the receivers verified, warm-up included",
            "seconds": "the measured span: from the first stream's end of warm-up (as "
                       "its receiver saw it) to the last stream's last byte; without a "
                       "warm-up, from the earliest transfer start (a sender process's "
                       "exit time minus the transfer seconds it reports) to the last "
                       "sender's exit; raw mode: the receiver's measured seconds. "
                       "Process start-up and connection set-up are excluded",
            "wall_seconds": "first sender process started -> last sender exited, as the "
                            "driver saw it (start-up included)",
            "per_stream_gbps": "each stream's measured bytes * 8 / its own measured span "
                               "(end of warm-up -> last byte, on the receiver's clock; "
                               "without a warm-up, request sent -> receiver's verdict "
                               "received): min, median, max",
            "jain": "(sum x)^2 / (n * sum x^2) over the per-stream throughputs",
            "congestion": "kernel runs: the senders' congestion control as their sockets "
                          "reported it (TCP_CONGESTION): --kernel-cc, or the namespace's "
                          "default, which is the host's net.ipv4.tcp_congestion_control "
                          "(bbr on the guest of docs/benchmarks.md, not Linux's cubic)",
            "cpu_seconds": CPU_INCLUDES,
        },
        "runs": runs,
    }
    if loss is not None or opts["repeat"] > 1 or len(opts["offloads"]) > 1:
        doc["options"].update({"loss_pct": loss, "repeat": opts["repeat"],
                               "offloads": opts["offloads"]})
    if loss is not None:
        doc["definitions"].update({
            "loss_pct": "the configured rate: the testbed's nftables rule (testbed impair) "
                        "drops this percentage of the frames entering the bridge from each "
                        "TAP and kernel-peer port, at random (numgen random mod 100000), in "
                        "both directions; every mode of the level runs through the same rule",
            "frames_dropped": "the frames the rule dropped during this point (the delta of "
                              "its counters around the point, connection set-up included); "
                              "with offload on a frame can be a super-segment of up to 64 "
                              "KiB, i.e. a burst of wire segments",
            "frames_seen": "the frames that entered the bridge through the impaired ports "
                           "during the point, the dropped ones included",
            "impairment": "those counters (and their bytes) in total and per port",
            "offload": "segmentation offload of the senders: ulsd's TSO through the TAP, "
                       "and under --loss the kernel peers' TSO/GSO too",
        })
        doc["loss_summary"] = loss_summary(runs)
    if error:
        doc["error"] = error
    if opts["json"]:
        try:
            write_json(opts["json"], doc)
            log("wrote %s%s" % (opts["json"], "" if error is None else
                                " (incomplete: only the points that finished and verified)"))
        except OSError as e:
            log("cannot write %s: %s" % (opts["json"], e))
            rc = rc or 1
    if not opts["plot"]:
        log("no plots (give --json FILE or --plot DIR)")
    elif runs and error is None:
        try:
            os.makedirs(opts["plot"], exist_ok=True)
            mt = "" if len(opts["mtus"]) > 1 else " (MTU %d)" % opts["mtus"][0]
            for p in (plot_runs if loss is None else plot_loss)(runs, opts["plot"], mt):
                log("wrote %s" % p)
        except Exception as e:      # plotting is a report, not a measurement
            log("plots failed: %s: %s" % (type(e).__name__, e))
            rc = rc or 1
    if error is None:
        shutil.rmtree(workdir, ignore_errors=True)
        log("done in %.0f s" % elapsed)
    else:
        log("worker logs kept in %s" % workdir)
    return rc


if __name__ == "__main__":
    sys.exit(main())
