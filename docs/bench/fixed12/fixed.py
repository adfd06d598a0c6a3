#!/usr/bin/python3
"""The fixed cost of a process (docs/benchmarks.md, "What a ulstack process costs
beyond its data"): N receivers and N senders, each its own process, each moving one
64 KiB verified stream (`ulsbench server --count 1` / `ulsbench client --bytes 64K`),
on the kernel's TCP and on ulstack (perproc, direct data path), on one testbed.

    TB_SUFFIX=xx ULS_BUILDDIR=BUILD ULS_SRCDIR=SRC docs/bench/fixed12/fixed.py \
        [--n 64] [--rounds 1] [--modes kernel,perproc] [--bytes 64K] [--json FILE]

Each process's CPU (user + system, all its threads), page faults and context switches
come from the rusage wait4 returns when it is reaped (what `perf stat -e
task-clock,page-faults,context-switches` counts for one process); ulsd's from the
scheduler's clock of its threads before the receivers start and after the last process
ended. The kernel's processes are started from inside their namespace (the driver enters it
with setns() and spawns), so no `ip netns exec` start-up is charged to them. Needs root (the testbed); runs nothing
outside the testbed's namespaces. `perf record -g -- fixed.py ...` follows every process
it starts (ulsd included: the testbed is its child).
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

SRC = os.environ.get("ULS_SRCDIR") or os.path.join(os.path.dirname(__file__), "..", "..", "..")
sys.path.insert(0, os.path.join(SRC, "apps"))
import ulsbench_common as uc  # noqa: E402

CLONE_NEWNET = 0x40000000
BASE_PORT = 7300
libc = ctypes.CDLL(None, use_errno=True)


def setns(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns " + path)
    finally:
        os.close(fd)


def spawn_in(ns, argv, out):
    """Started from inside namespace ns (None: ours): the driver's one thread enters it,
    spawns (vfork: no copy of the driver is charged to the child, as a preexec_fn's fork
    would be) and comes back."""
    if ns:
        home = os.open("/proc/self/ns/net", os.O_RDONLY)
        setns("/run/netns/" + ns)
    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT)
    finally:
        if ns:
            try:
                if libc.setns(home, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "setns back")
            finally:
                os.close(home)


def listening(paths, tb, mode, n):
    if mode == "kernel":
        r = subprocess.run(["ip", "netns", "exec", tb.env["TB_KERNEL_NETNS"], "ss", "-Hltn"],
                           capture_output=True, text=True, timeout=5)
        return sum(1 for l in r.stdout.splitlines() if l.strip()) >= n
    r = subprocess.run([paths["ulsstat"], "--ctl", tb.env["TB_NODE2_CTL"], "--json"],
                       capture_output=True, text=True, timeout=5)
    try:
        eps = json.loads(r.stdout).get("endpoints", [])
    except ValueError:
        return False
    return sum(1 for e in eps if e.get("state") == "listen" and e.get("proto") == "tcp") >= n


def ulsd_ns(tb):
    return sum(uc.tree_cpu_ns(p) for p in tb.ulsd_pids())


def one_round(paths, tb, mode, n, nbytes, logdir):
    bench = paths["ulsbench"]
    procs = {}

    def start(role, i, argv, pre):
        out = open(os.path.join(logdir, "%s-%s%d.out" % (mode, role, i)), "w")
        p = spawn_in(pre, argv, out)
        out.close()
        procs[p.pid] = (role, p)

    u0 = ulsd_ns(tb)
    t0 = time.monotonic()
    for i in range(n):
        port = BASE_PORT + i
        if mode == "kernel":
            start("server", i, [bench, "server", "--port", str(port), "--count", "1"],
                  tb.env["TB_KERNEL_NETNS"])
        else:
            start("server", i, [bench, "server", "--ctl", tb.env["TB_NODE2_CTL"], "--port",
                                str(port), "--count", "1", "--datapath", "direct"], None)
    while not listening(paths, tb, mode, n):
        if time.monotonic() - t0 > 60 or any(p.poll() is not None for _, p in procs.values()):
            raise SystemExit("%s: receivers not ready" % mode)
        time.sleep(0.05)
    for i in range(n):
        port = BASE_PORT + i
        if mode == "kernel":
            start("client", i, [bench, "client", "--to", "%s:%d" % (tb.env["TB_KERNEL_IP"], port),
                                "--bytes", nbytes], tb.env["TB_KERNEL2_NETNS"])
        else:
            start("client", i, [bench, "client", "--ctl", tb.env["TB_NODE1_CTL"], "--to",
                                "%s:%d" % (tb.env["TB_NODE2_IP"], port), "--bytes", nbytes,
                                "--datapath", "direct"], None)
    res = {"server": [], "client": []}
    deadline = time.monotonic() + 120
    left = dict(procs)
    while left:
        pid, status, ru = os.wait4(-1, os.WNOHANG)
        if pid == 0:
            if time.monotonic() > deadline:
                for _, p in left.values():
                    p.kill()
                raise SystemExit("%s: processes did not end" % mode)
            time.sleep(0.01)
            continue
        if pid not in left:
            continue
        role, p = left.pop(pid)
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            raise SystemExit("%s %s pid %d exit %d" % (mode, role, pid, p.returncode))
        res[role].append({"cpu_ms": (ru.ru_utime + ru.ru_stime) * 1e3,
                          "faults": ru.ru_minflt + ru.ru_majflt,
                          "csw": ru.ru_nvcsw + ru.ru_nivcsw})
    time.sleep(0.3)  # ulsd ends the leases
    res["ulsd_ms"] = (ulsd_ns(tb) - u0) / 1e6
    res["wall_s"] = time.monotonic() - t0
    return res


def summary(mode, res, n):
    row = {"mode": mode}
    for role in ("client", "server"):
        xs = res[role]
        row[role] = {k: statistics.median(x[k] for x in xs) for k in ("cpu_ms", "faults", "csw")}
        row[role]["cpu_ms_mean"] = statistics.mean(x["cpu_ms"] for x in xs)
    row["ulsd_ms_per_process"] = res["ulsd_ms"] / (2 * n)
    row["wall_s"] = res["wall_s"]
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--modes", default="kernel,perproc")
    ap.add_argument("--bytes", default="64K")
    ap.add_argument("--json")
    o = ap.parse_args()
    paths = uc.run_unwrapped(uc.find_paths(), ["ulsbench", "ulsstat"])
    logdir = os.path.join("/tmp", "fixed12-%d" % os.getpid())
    os.makedirs(logdir)
    tb = uc.Testbed(paths, name="ulsfix")
    rows = []
    try:
        tb.up(1500, True)
        for r in range(o.rounds):
            for mode in o.modes.split(","):
                res = one_round(paths, tb, mode, o.n, o.bytes, logdir)
                row = summary(mode, res, o.n)
                row["round"] = r
                row["raw"] = res
                rows.append(row)
                c, s = row["client"], row["server"]
                print("%-8s round %d: client %.1f ms (mean %.1f) %d faults %d csw | server %.1f ms "
                      "(mean %.1f) %d faults %d csw | ulsd %.2f ms/process | %.1f s" % (
                          mode, r, c["cpu_ms"], c["cpu_ms_mean"], c["faults"], c["csw"],
                          s["cpu_ms"], s["cpu_ms_mean"], s["faults"], s["csw"],
                          row["ulsd_ms_per_process"], row["wall_s"]), flush=True)
    finally:
        tb.down()
        subprocess.run(["rm", "-rf", logdir])
    if o.json:
        with open(o.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
