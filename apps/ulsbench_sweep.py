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
Offload off is segmentation offload off: checksum offload stays on in every mode (ulsd
runs as with --offload csum; the kernel peers' veths keep tx-checksumming).

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
import statistics
import subprocess
import sys
import tempfile
import time

# The testbed, processes and CPU accounting this driver shares with ulsbench_apps.py: a
# module next to this file (the source tree's apps/, or pkglibexecdir when installed).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ulsbench_common import (  # noqa: E402
    DEFAULT_OFFLOAD, POLL, BenchError, Procs, Testbed, UsageError, find_paths, finish, log,
    driver_first, loss_arg, machine_info, parse_as_root, process_cpu_ns, progress, run_guarded,
    run_unwrapped, save_doc, save_plots, take_lock_or_say, tree_cpu_ns)
# The pure parts, in modules of their own next to this file: parameters, command line and
# plan; what the points' output means, tables and plots.
from ulsbench_sweepargs import *  # noqa: E402,F401,F403
from ulsbench_sweepresults import *  # noqa: E402,F401,F403


# ---------------------------------------------------------------------------
# One point
# ---------------------------------------------------------------------------
class Point:
    """Runs one (mode, N, mtu) point on an up testbed and returns its run object."""

    def __init__(self, procs, tb, paths, mode, n, mtu, seconds, nbytes, workdir, warmup=0.0,
                 loss=None, kernel_cc=None, family=4):
        self.procs, self.tb, self.paths = procs, tb, paths
        self.family = family
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
        self.start_at = None    # the clients' common start (CLOCK_MONOTONIC = time.monotonic)
        self.window_cpu = None  # CPU of the point's processes inside the measured part

    # -- helpers ---------------------------------------------------------------
    def spawn(self, name, argv, env=None):
        p = self.procs.spawn("%s-n%d-%s" % (self.mode, self.n, name), argv, env=env)
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

    def kernel_tcp_counters(self):
        """The kernel sender's namespace's TCP counters (/proc/net/snmp and netstat), so
        that a kernel point records its recoveries, probes and timeouts as a perproc point
        records its stack's counters; None when they cannot be read."""
        try:
            r = subprocess.run(["ip", "netns", "exec", self.tb.env["TB_KERNEL2_NETNS"], "cat",
                                "/proc/net/snmp", "/proc/net/netstat"],
                               capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return parse_proc_netstat(r.stdout) if r.returncode == 0 else None

    def ulsd_cpu(self):
        """CPU seconds of the node daemons (process_cpu_ns: nanoseconds, not 10 ms ticks)."""
        return sum(v for v in (process_cpu_ns(p) for p in self.tb.ulsd_pids())
                   if v is not None) / 1e9

    def run_senders(self, senders, wire_dev):
        """Waits for the senders, printing progress; returns the point's wall time (first
        sender started -> last sender exited). Any sender failing ends the point."""
        t0 = min(p.started for p in senders)
        b0 = self.tb.link_bytes(wire_dev) if wire_dev else None
        last_t, last_b = t0, b0
        next_report = t0 + 1.0
        total = self.seconds
        marks = self.window_marks()
        samples = []
        while True:
            if marks and time.monotonic() >= marks[0]:
                marks.pop(0)
                samples.append(self.cpu_sample())
                if not marks:
                    self.window_cpu = window_cpu(*samples)
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

    def window_marks(self):
        """When to sample the processes' CPU: the measured part's start (the clients'
        common start plus the warm-up) and 0.1 s before its planned end, while every
        process still runs. None without a time-limited measured part."""
        if self.seconds is None or self.start_at is None or self.seconds < 0.3:
            return None
        start = self.start_at + self.warmup
        return [start, start + self.seconds - 0.1]

    def cpu_sample(self):
        """(time, {pid: CPU ns}) of the point's processes (and ulsd's, in its modes)."""
        pids = [p.pid for p in self.started if p.alive]
        if self.mode in ULSD_MODES:
            pids += list(self.tb.ulsd_pids())
        t = time.monotonic()
        return t, {pid: tree_cpu_ns(pid) for pid in pids}

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
        load = os.getloadavg()[0]
        cpu0 = self.ulsd_cpu()
        frames0 = self.ulsd_frames() if self.mode in ULSD_MODES else None
        tcp0 = self.kernel_tcp_counters() if self.mode == "kernel" else None
        try:
            streams, wall, extra = getattr(self, "_run_" + self.mode)()
            extra["wall_seconds"] = round(wall, 6)
            if self.window is not None and 0 < self.window <= wall + 0.05:
                wall = self.window
            if self.window_cpu is not None:
                extra["cpu_window"] = self.window_cpu
        finally:
            self.procs.stop([p for p in self.started if p.alive])
        ulsd = max(0.0, self.ulsd_cpu() - cpu0) if self.mode in ULSD_MODES else 0.0
        if tcp0 is not None:
            tcp1 = self.kernel_tcp_counters()
            if tcp1 is not None:
                extra["sender_counters"] = kernel_counter_delta(tcp0, tcp1)
        if frames0 is not None:
            frames1 = self.ulsd_frames()
            extra["datapath"] = DATAPATH[self.mode]
            extra["node_frames"] = {k: frames1[k] - frames0[k] for k in frames0}
        cpu = cpu_breakdown(self.started, ulsd if self.mode in ULSD_MODES else None)
        extra["context_switches"] = cs_breakdown(self.started)
        extra["page_faults"] = fault_breakdown(self.started)
        rep = extra.pop("reported_cpu", None)
        if rep is not None:
            # What the workers measured of themselves (getrusage), for comparison.
            cpu[("receiver" if self.mode == "raw" else "senders") + "_self_reported"] = rep
        run = make_run(self.mode, self.n, self.mtu, wall, streams, cpu, extra)
        run["requested"] = ({"seconds": self.seconds} if self.seconds is not None
                            else {"bytes_per_stream": self.nbytes})
        run["warmup_seconds"] = self.warmup
        run["load_average"] = round(load, 2)
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
        self.start_at = start_at
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
        self.sender_counters = {}
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
            for k, v in (doc.get("counters") or {}).items():
                if isinstance(v, int):
                    self.sender_counters[k] = self.sender_counters.get(k, 0) + v
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
                                    "--port", str(KERNEL_PORT), "--count", str(self.n),
                                    "--family", str(self.family)])
        self.wait_ready([srv], lambda: self.listening_kernel(k1, KERNEL_PORT),
                        "kernel receiver")
        groups = split_streams(self.n)
        to = ("[%s]:%d" % (env["TB_KERNEL_IP6"], KERNEL_PORT) if self.family == 6
              else "%s:%d" % (env["TB_KERNEL_IP"], KERNEL_PORT))
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
        # The receivers print their stack counters on stderr at exit (receiver_counters).
        senv = dict(os.environ, ULSBENCH_COUNTERS="1")
        servers = [self.spawn("server%d" % i, [bench, "server", "--ctl", env["TB_NODE2_CTL"],
                                               "--port", str(port), "--count", str(k)] + dp,
                              env=senv)
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
                               "reported_cpu": rep,
                               "sender_counters": dict(sorted(self.sender_counters.items())),
                               "receiver_counters": server_counters(servers)}

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
        sdoc = self.read_json(sjs, send.name, [recv])
        rep = doc.get("cpu_seconds") if isinstance(doc.get("cpu_seconds"), (int, float)) else None
        # The end frames cross the same loss rule as the data frames: their counts on both
        # sides let the receiver's losses be compared exactly with the rule's drops.
        extra = {"processes": {"senders": 1, "receivers": 1}, "reported_cpu": rep,
                 "raw": {"frames": doc.get("frames"), "lost": doc.get("lost"),
                         "corrupt": doc.get("corrupt", 0),
                         "end_frames_sent": sdoc.get("end_frames"),
                         "end_frames_received": doc.get("end_frames"),
                         "receiver_seconds": doc.get("seconds")}}
        # The receiver's clock, not the sender's process lifetime, bounds what it counted.
        if isinstance(doc.get("seconds"), (int, float)) and doc["seconds"] > 0:
            self.window = float(doc["seconds"])
        return streams, wall, extra


# ---------------------------------------------------------------------------
# The sweep
# ---------------------------------------------------------------------------
def server_counters(servers):
    """The receivers' stack counters, summed: each ulsbench server's "counters" line on
    stderr (ULSBENCH_COUNTERS); {} where none printed one."""
    tot = {}
    for p in servers:
        try:
            with open(p.err, errors="replace") as f:
                lines = [l for l in f if l.startswith("ulsbench server: counters ")]
            doc = json.loads(lines[-1].split("counters ", 1)[1]) if lines else {}
        except (OSError, ValueError):
            doc = {}
        for k, v in doc.items():
            if isinstance(v, int):
                tot[k] = tot.get(k, 0) + v
    return dict(sorted(tot.items()))


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
    opts, rc = parse_as_root("ulsbench", argv, parse_args, build_parser)
    if opts is None:
        return rc
    paths = run_unwrapped(find_paths(), ("ulsbench", "ulsrelay", "ulsraw", "ulsstat"))
    driver_first()
    lock = take_lock_or_say(check_tools(paths, opts["modes"], opts["loss"] is not None,
                                        opts["offloads"]),
                            "build the tree (make) or choose other modes with --mode")
    if lock is None:
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
            tb.up(ph["mtu"], ph["ulsd"], ipv6=opts["family"] == 6)
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
                           loss=spec["loss"], kernel_cc=opts["kernel_cc"],
                           family=opts["family"])
                run = pt.run()
                if level is not None:
                    run.update(loss_fields(level, impair_delta(before, tb.impair_stats()),
                                           ph["offload"]))
                    run.update(loss_directions(run, data_ports(spec["mode"], tb.env)))
                elif spec["mode"] in ULSD_MODES:
                    run["offload"] = ph["offload"]
                if opts["repeat"] > 1:
                    run["repeat"] = spec["repeat"]
                runs.append(run)
            tb.down()
    error, rc = run_guarded(body, procs, tb)
    driver_first(False)     # plots and files at the usual priority

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
                    "kernel_cc": opts["kernel_cc"], "family": opts["family"]},
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
            "cpu_s_per_gb": "cpu_seconds / (bytes_verified / 1e9): whole lives, start-up, "
                            "warm-up and exit included; at 64 streams the start and end of "
                            "128 processes weigh on a point of a few seconds",
            "cpu_window": "the point's processes' CPU (their threads' and descendants' "
                          "scheduler run time, /proc/PID/task/TID/schedstat; ulsd's too in "
                          "its modes) between two samples the driver takes while all of "
                          "them run: at the end of the warm-up and 0.1 s before the "
                          "measured part's planned end. Only with --seconds",
            "receiver_counters": "perproc and relay: the receivers' stack counters over "
                                 "their lives, summed (ulsbench server's last stderr line "
                                 "with ULSBENCH_COUNTERS set)",
            "cpu_s_per_gb_measured": "the steady state's CPU per GB: cpu_window's CPU "
                                     "seconds per second over measured_bytes per second "
                                     "of the measured span; absent when the window left "
                                     "a process out",
            "load_average": "the machine's 1-minute load average when the point started "
                            "(other sessions' work included: on a shared machine it says how "
                            "much CPU the point's processes could get)",
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
            "loss_by_direction": "the impairment split by direction (single-sender modes: "
                                 "the senders' port carries the data, the receivers' port "
                                 "the ACKs): frames seen and dropped, the mean size of a "
                                 "frame seen and of one dropped, dropped frames per GB "
                                 "verified, and ACK frames per data frame",
            "sender_counters": "the senders' TCP counters over the point: ulstack's stack "
                               "counters (ulsbench client), or for kernel runs the delta of "
                               "the sender namespace's /proc/net/snmp and netstat (Tcp "
                               "OutSegs/RetransSegs count wire segments; TCPSackRecovery "
                               "and TCPTimeouts are recovery episodes and RTOs)",
            "offload": "segmentation offload of the senders (checksum offload stays on "
                       "in every mode): ulsd's TSO through the TAP, "
                       "and under --loss the kernel peers' TSO/GSO too",
        })
        doc["loss_summary"] = loss_summary(runs)
    if error:
        doc["error"] = error
    if opts["json"]:
        if not save_doc(opts["json"], doc, error, "points"):
            rc = rc or 1
    if not opts["plot"]:
        log("no plots (give --json FILE or --plot DIR)")
    elif runs and error is None:
        mt = "" if len(opts["mtus"]) > 1 else " (MTU %d)" % opts["mtus"][0]
        plot = plot_runs if loss is None else plot_loss
        if not save_plots(opts["plot"], lambda d: plot(runs, d, mt), "plots"):
            rc = rc or 1
    finish(error, workdir, elapsed, "worker logs")
    return rc


if __name__ == "__main__":
    sys.exit(main())
