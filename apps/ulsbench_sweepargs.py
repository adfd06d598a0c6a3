#!/usr/bin/python3
"""The ulsbench sweep's fixed parameters, its command line and its plan (pure: no root, no
processes). Part of the sweep driver (ulsbench_sweep.py), next to which it is installed;
tests/bench/test_sweep_logic.py tests it through that module."""
import math
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ulsbench_common import (  # noqa: E402
    DEFAULT_OFFLOAD, UsageError, UsageParser, add_output_args, check_output_args)

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
FAMILIES = (4, 6)
# --family 6: every mode but raw runs over IPv6 (testbed up --ipv6; processes on ulsd's
# nodes carry IPv6 since control protocol 3, docs/ipv6.md).

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
                "during the point (their CPU-time clocks, in nanoseconds; perproc and "
                "central only); "
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


def parse_family(text, modes):
    """--family: 4 or 6; with 6, every mode but raw, which sends IPv4 frames of its own."""
    if (text or "").strip() not in ("4", "6"):
        raise UsageError("--family: '%s' is not 4 or 6" % text)
    fam = int(text.strip())
    if fam == 6:
        if "raw" in modes:
            raise UsageError("--family 6: raw mode writes IPv4 frames of its own; leave raw "
                             "out of --mode")
    return fam


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


def build_parser():
    p = UsageParser(
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
    p.add_argument("--family", default="4", metavar="4|6",
                   help="the IP version of the streams (default 4); 6 brings the testbed "
                        "up with IPv6 (testbed up --ipv6) and runs the kernel mode over it; "
                        "the ulstack modes refuse it until ulsd's nodes carry IPv6")
    add_output_args(p, "aggregate.png and per_stream.png", "plots")
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
    opts["family"] = parse_family(ns.family, opts["modes"])
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
    return check_output_args(opts)


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
