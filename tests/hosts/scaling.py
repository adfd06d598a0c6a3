#!/usr/bin/python3
"""The figures of docs/deployment.md, "How it scales": run by hand as root, not in make check.

    tests/hosts/scaling.py [--seconds S] [--runs R] [--json FILE]

On a two-host testbed of its own (`testbed up --hosts 2 --nodes 1`, TB_NAME ulsscale plus
$TB_SUFFIX), across the wire (MTU 1500, no TSO/GSO), every stream verified by ulsbench:

  wire     throughput of 1 and 4 streams: kernel to kernel, ulstack node to ulstack node
           (one process per stream), ulstack node to the kernel peer; medians of R runs
  procs    K = 1, 2, 4, 8 processes on host 1's node, one stream each to K server
           processes on host 2's node: the aggregate
  conns    one process under ulsrun opens C = 100, 1000, 4000 connections to a Linux peer
           on the other host, each echoing 16 verified bytes: time to open them all,
           the process's resident memory, ulsd's

Prints a table; --json writes the numbers. The testbed goes down at the end, also on error.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tblib import BUILD, SRC, TESTBED, parse_exports, run_testbed  # noqa: E402

BENCH = os.path.join(BUILD, "apps", "ulsbench")
ULSRUN = os.path.join(BUILD, "apps", "ulsrun")
PYTHON = "/usr/bin/python3"
TB_NAME = "ulsscale"

CONN_SERVER = r"""
import selectors, socket, sys
sel = selectors.DefaultSelector()
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("0.0.0.0", int(sys.argv[1])))
l.listen(4096)
sel.register(l, selectors.EVENT_READ)
print("ready", flush=True)
while True:
    for k, _ in sel.select():
        if k.fileobj is l:
            c, _ = l.accept()
            sel.register(c, selectors.EVENT_READ)
        else:
            d = k.fileobj.recv(4096)
            if d:
                k.fileobj.sendall(d)
            else:
                sel.unregister(k.fileobj)
                k.fileobj.close()
"""

CONN_CLIENT = r"""
import os, resource, socket, sys, time
n, host, port = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
t0 = time.monotonic()
socks = []
for i in range(n):
    s = socket.create_connection((host, port), timeout=30)
    socks.append(s)
t1 = time.monotonic()
for i, s in enumerate(socks):
    s.sendall(b"%016d" % i)
for i, s in enumerate(socks):
    got = b""
    while len(got) < 16:
        got += s.recv(16 - len(got))
    assert got == b"%016d" % i, (i, got)
t2 = time.monotonic()
rss = [l for l in open("/proc/self/status") if l.startswith("VmRSS")][0].split()[1]
print("connect_s %.3f echo_s %.3f rss_kib %s" % (t1 - t0, t2 - t1, rss), flush=True)
try:
    input()  # hold the connections until told (stdin closes)
except EOFError:
    pass
"""


def tb(*args):
    return run_testbed(TESTBED, TB_NAME, BUILD, *args)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1])
    return 0


def ulsd_pid(env, host):
    name = "ulsd1.pid" if host == 1 else "ulsd-h2-1.pid"
    with open(os.path.join("/run/ulstack-testbed", env["TB_NAME"] + ".d", name)) as f:
        return int(f.read())


class Run:
    def __init__(self, env, seconds, tmp):
        self.env, self.seconds, self.tmp = env, seconds, tmp
        self.port = 6000

    def where(self, side):
        """argv prefix and address of ("node", host) or ("kernel", host)."""
        kind, host = side
        e = self.env
        if kind == "node":
            ctl = e["TB_NODE1_CTL"] if host == 1 else e["TB_H2_NODE1_CTL"]
            ns = e["TB_NETNS"] if host == 1 else e["TB_H2_NETNS"]
            ip = e["TB_NODE1_IP"] if host == 1 else e["TB_H2_NODE1_IP"]
            return ["ip", "netns", "exec", ns], ["--ctl", ctl], ip
        ns = e["TB_KERNEL_NETNS"] if host == 1 else e["TB_H2_KERNEL_NETNS"]
        ip = e["TB_KERNEL_IP"] if host == 1 else e["TB_H2_KERNEL_IP"]
        return ["ip", "netns", "exec", ns], [], ip

    def streams(self, server, client, procs, streams_per_proc=1):
        """procs client processes, each with streams_per_proc streams, to procs server
        processes; returns the aggregate Gbit/s (None if any stream failed verification)."""
        spre, sopt, sip = self.where(server)
        cpre, copt, _ = self.where(client)
        servers, clients, outs = [], [], []
        for i in range(procs):
            self.port += 1
            servers.append((self.port, subprocess.Popen(
                [*spre, BENCH, "server", "--port", str(self.port), "--count",
                 str(streams_per_proc), *sopt], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL)))
        time.sleep(0.5)
        start = time.clock_gettime(time.CLOCK_MONOTONIC) + 1.0
        for port, _ in servers:
            out = os.path.join(self.tmp, f"c{port}.json")
            outs.append(out)
            clients.append(subprocess.Popen(
                [*cpre, BENCH, "client", "--to", f"{sip}:{port}", "--seconds", str(self.seconds),
                 "--streams", str(streams_per_proc), "--start-at", f"{start:.3f}", "--json", out,
                 *copt], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        total, ok = 0.0, True
        for c, out in zip(clients, outs):
            c.wait(timeout=self.seconds + 60)
            try:
                with open(out) as f:
                    r = json.load(f)
                ok = ok and r["verified"]
                total += r["gbps"]
            except (OSError, ValueError):
                ok = False
        for _, s in servers:
            try:
                s.wait(timeout=20)
            except subprocess.TimeoutExpired:
                s.kill()
                s.wait()
        return total if ok else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--conns", default="100,1000,4000")
    ap.add_argument("--procs", default="1,2,4,8")
    a = ap.parse_args()
    res = {"seconds": a.seconds, "runs": a.runs, "wire": {}, "procs": {}, "conns": {}}
    tb("down")
    try:
        env = parse_exports(tb("up", "--hosts", "2", "--nodes", "1"))
        with tempfile.TemporaryDirectory() as tmp:
            r = Run(env, a.seconds, tmp)
            cases = {
                "kernel->kernel": (("kernel", 2), ("kernel", 1)),
                "ulstack->ulstack": (("node", 2), ("node", 1)),
                "ulstack->kernel": (("kernel", 2), ("node", 1)),
                "kernel->ulstack": (("node", 2), ("kernel", 1)),
            }
            for name, (server, client) in cases.items():
                for n in (1, 4):
                    # one process per stream, on both sides (ulstack's design: a stack each)
                    vals = [r.streams(server, client, n) for _ in range(a.runs)]
                    good = [v for v in vals if v is not None]
                    res["wire"][f"{name} x{n}"] = {
                        "median_gbps": statistics.median(good) if good else None,
                        "runs": vals}
                    print(f"wire {name:18s} {n} stream(s): "
                          f"{' '.join('%.2f' % v if v is not None else 'FAIL' for v in vals)}"
                          f"  median {statistics.median(good) if good else float('nan'):.2f} Gbit/s",
                          flush=True)
            for k in [int(x) for x in a.procs.split(",") if x]:
                v = r.streams(("node", 2), ("node", 1), k)
                res["procs"][k] = v
                print(f"procs {k}: aggregate {v if v is not None else float('nan'):.2f} Gbit/s",
                      flush=True)
            kns = env["TB_H2_KERNEL_NETNS"]
            srv = subprocess.Popen(["ip", "netns", "exec", kns, PYTHON, "-c", CONN_SERVER, "7400"],
                                   stdout=subprocess.PIPE, text=True)
            try:
                assert srv.stdout.readline().strip() == "ready"
                for c in [int(x) for x in a.conns.split(",") if x]:
                    u1, u2 = ulsd_pid(env, 1), ulsd_pid(env, 2)
                    before = (rss_kib(u1), rss_kib(u2))
                    cl = subprocess.Popen(["ip", "netns", "exec", env["TB_NETNS"], ULSRUN, "--ctl",
                                           env["TB_NODE1_CTL"], "--", PYTHON, "-c", CONN_CLIENT,
                                           str(c), env["TB_H2_KERNEL_IP"], "7400"],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                    line = cl.stdout.readline().split()
                    after = (rss_kib(u1), rss_kib(u2))
                    cl.stdin.close()
                    cl.wait(timeout=60)
                    if len(line) != 6:
                        res["conns"][c] = None
                        print(f"conns {c}: FAILED", flush=True)
                        continue
                    d = {"connect_s": float(line[1]), "echo_s": float(line[3]),
                         "process_rss_kib": int(line[5]), "ulsd_rss_kib_before": before[0],
                         "ulsd_rss_kib_after": after[0]}
                    res["conns"][c] = d
                    print(f"conns {c}: opened in {d['connect_s']:.2f} s "
                          f"({c / d['connect_s']:.0f}/s), echo {d['echo_s']:.2f} s, process RSS "
                          f"{d['process_rss_kib'] / 1024:.1f} MiB, ulsd RSS {before[0] / 1024:.1f}"
                          f" -> {after[0] / 1024:.1f} MiB", flush=True)
                    time.sleep(2)
            finally:
                srv.kill()
                srv.wait()
    finally:
        tb("down")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
