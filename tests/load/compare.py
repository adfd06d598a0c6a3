"""The load tests' loads against ulstack and the kernel's TCP, side by side in one run
(docs/benchmarks.md, "Load and scale").

    ULS_BUILDDIR=build TB_SUFFIX=... /usr/bin/python3 tests/load/compare.py [--reps 3]
        [--churn 100000] [--hold 6000] [--fill 8] [--json OUT]

On a testbed of its own (TB_NAME ulscmp), the same program (tests/node/loadconn.py) runs
under ulsrun on the two ulsd nodes (server on node 2, clients on node 1) and as is in the
two kernel namespaces (server in ...-k2, clients in ...-k1):
  churn  short connections (connect, request, echo verified, the server's close) from 4
         client processes: connections per second;
  hold   N connections at once from one process, one verified round trip on each:
         connects per second, and memory per connection: the processes' heap (mallinfo2:
         lwIP's pcbs and buffers for ulstack, python's socket objects for both) and the
         kernel's (/proc/meminfo Slab: the kernel's sockets, or ulstack's readiness
         mirrors and ulsd's maps);
  fill   K connections to a server that never reads, each sending until nothing moves:
         memory per connection with full windows (ulstack: heap; kernel: the TCP memory
         of /proc/net/sockstat).
Each load runs --reps times, alternating ulstack and kernel; the medians are printed.
The machine may be shared: Slab and sockstat are machine-wide.
"""
import argparse
import importlib.util
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("node_conftest", os.path.join(HERE, "..", "node", "conftest.py"))
nc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nc)
nc.TB_NAME = "ulscmp"
from tblib import parse_exports  # noqa: E402  (nc put tests/ on sys.path)

LOADPY = os.path.join(nc.SRC, "tests", "node", "loadconn.py")
ULSRUN = os.path.join(nc.BUILD, "apps", "ulsrun")


def slab_kib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("Slab:"):
                return int(line.split()[1])
    return 0


def tcp_mem_pages():
    with open("/proc/net/sockstat") as f:
        for line in f:
            if line.startswith("TCP:"):
                w = line.split()
                return int(w[w.index("mem") + 1])
    return 0


class Side:
    """Where the server and the clients of one stack run."""

    def __init__(self, tb, kind):
        self.tb, self.kind = tb, kind

    def start(self, role, *args, name):
        argv = [nc.PYTHON, LOADPY, *map(str, args)]
        if self.kind == "ulstack":
            node = 2 if role == "server" else 1
            return self.tb.start([ULSRUN, "--ctl", self.tb.ctl(node), "--", *argv], name=name)
        ns = self.tb.env["TB_KERNEL2_NETNS"] if role == "server" else self.tb.env["TB_KERNEL_NETNS"]
        return self.tb.start(argv, name=name, netns=ns)

    @property
    def server_ip(self):
        return self.tb.ip(2) if self.kind == "ulstack" else self.tb.env["TB_KERNEL2_IP"]


def line(p, phase, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for d in p.json_lines():
            if d.get("phase") == phase:
                return d
        if p.poll() is not None and not any(d.get("phase") == phase for d in p.json_lines()):
            raise RuntimeError(f"{p.name} exited {p.poll()}: {p.stderr()[-1500:]}")
        time.sleep(0.05)
    raise RuntimeError(f"{p.name}: no {phase} in {timeout} s")


def report(p, path, timeout=10):
    import signal
    if os.path.exists(path):
        os.unlink(path)
    p.p.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{p.name}: no report")
        time.sleep(0.05)
    with open(path) as f:
        return json.loads(f.read())


def server(side, port, *extra):
    path = os.path.join(side.tb.outdir, f"{side.kind}-{port}-{time.monotonic_ns()}.report")
    p = side.start("server", "server", port, "--report", path, *extra, name=f"{side.kind}-server-{port}")
    side.tb.wait_listening(p, timeout=10)
    return p, path


def churn(side, port, total):
    srv, _ = server(side, port)
    clients = [side.start("client", "churn", side.server_ip, port, total // 4, name=f"{side.kind}-churn{k}")
               for k in range(4)]
    t0 = time.monotonic()
    lines = [line(c, "churn", 900) for c in clients]
    wall = time.monotonic() - t0
    ok = sum(d["ok"] for d in lines)
    srv.kill()
    if ok != total // 4 * 4:
        raise RuntimeError(f"{side.kind} churn: {ok} verified of {total}: {[d['errors'] for d in lines]}")
    return {"per_s": ok / wall, "seconds": wall}


def hold(side, port, n):
    srv, path = server(side, port)
    s0 = report(srv, path)
    slab0 = slab_kib()
    gate = os.path.join(side.tb.outdir, f"gate-{side.kind}-{port}-{time.monotonic_ns()}")
    c = side.start("client", "hold", side.server_ip, port, n, "--gate", gate, name=f"{side.kind}-hold")
    st, o = line(c, "start", 10), line(c, "open", 300)
    s1 = report(srv, path)
    slab1 = slab_kib()
    open(gate, "w").close()
    line(c, "closed", 60)
    c.wait(60)
    srv.kill()
    if o["verified"] != n:
        raise RuntimeError(f"{side.kind} hold: {o['verified']} of {n} verified: {o['errors']}")
    return {"connect_per_s": n / o["connect_s"],
            "client_heap_per_conn": (o["heap_in_use"] - st["heap_in_use"]) / n,
            "server_heap_per_conn": (s1["heap_in_use"] - s0["heap_in_use"]) / n,
            "kernel_slab_per_conn": (slab1 - slab0) * 1024 / n,
            "client_fds_per_conn": (o["fds"] - st["fds"]) / n,
            "server_fds_per_conn": (s1["fds"] - s0["fds"]) / n}


def fill(side, port, k):
    srv, path = server(side, port, "--stall")
    s0 = report(srv, path)
    mem0 = tcp_mem_pages()
    c = side.start("client", "fill", side.server_ip, port, k, 20, name=f"{side.kind}-fill")
    f = line(c, "full", 60)
    s1 = report(srv, path)
    mem1 = tcp_mem_pages()
    c.wait(30)
    srv.kill()
    return {"sent_per_conn": statistics.median(f["sent"]),
            "client_heap_per_conn": (f["heap_in_use"] - f["start"]["heap_in_use"]) / k,
            "server_heap_per_conn": (s1["heap_in_use"] - s0["heap_in_use"]) / k,
            "kernel_tcp_mem_per_conn": (mem1 - mem0) * 4096 / k}


def med(runs, key):
    return statistics.median(r[key] for r in runs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--churn", type=int, default=100000)
    ap.add_argument("--hold", type=int, default=6000)
    ap.add_argument("--fill", type=int, default=8)
    ap.add_argument("--json")
    a = ap.parse_args()
    tb = nc.Testbed()
    res = {"ulstack": {"churn": [], "hold": [], "fill": []}, "kernel": {"churn": [], "hold": [], "fill": []}}
    try:
        tb.env = parse_exports(nc._testbed("up", "--nodes", "2"))
        port = 7000
        for rep in range(a.reps):
            for kind in ("ulstack", "kernel"):
                side = Side(tb, kind)
                for load, fn, arg in (("churn", churn, a.churn), ("hold", hold, a.hold), ("fill", fill, a.fill)):
                    port += 1
                    r = fn(side, port, arg)
                    res[kind][load].append(r)
                    print(f"rep {rep + 1} {kind} {load}: " + ", ".join(f"{k} {v:.1f}" for k, v in r.items()),
                          flush=True)
                    tb.cleanup_procs()
    finally:
        tb.cleanup_procs()
        nc._testbed("down")
    print(f"\nmedians of {a.reps} ({a.churn} short connections, {a.hold} held, {a.fill} full):")
    for kind in ("ulstack", "kernel"):
        r = res[kind]
        print(f"{kind:8s} churn {med(r['churn'], 'per_s'):.0f}/s; hold: connects "
              f"{med(r['hold'], 'connect_per_s'):.0f}/s, heap per connection client "
              f"{med(r['hold'], 'client_heap_per_conn'):.0f} B server {med(r['hold'], 'server_heap_per_conn'):.0f} B, "
              f"kernel slab per connection (both ends) {med(r['hold'], 'kernel_slab_per_conn'):.0f} B, "
              f"descriptors per socket {med(r['hold'], 'client_fds_per_conn'):.2f}; full windows: "
              f"sent {med(r['fill'], 'sent_per_conn'):.0f} B per connection, heap client "
              f"{med(r['fill'], 'client_heap_per_conn'):.0f} B server {med(r['fill'], 'server_heap_per_conn'):.0f} B, "
              f"kernel TCP memory {med(r['fill'], 'kernel_tcp_mem_per_conn'):.0f} B")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
