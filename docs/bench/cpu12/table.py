#!/usr/bin/python3
"""The table in docs/benchmarks.md ("Where the CPU per byte goes"): per area, the median
CPU s per GB over the runs of each point (areas.json files under the given set
directories; a point's runs are the directories named MODE-STREAMS, with any suffix)."""
import collections
import json
import os
import re
import statistics
import sys

GROUPS = [
    ("pattern fill and check (the benchmark's own)", ["pattern"]),
    ("copies, user: application -> pbuf, pbuf -> application", ["copy, user"]),
    ("copies, kernel: TAP write (pbuf -> skb)", ["copy, kernel: TAP write"]),
    ("copies, kernel: TAP read (skb -> rx buffer)", ["copy, kernel: TAP read"]),
    ("copies, kernel: socket send + receive", ["copy, kernel: send", "copy, kernel: receive"]),
    ("**all copies**", ["copy"]),
    ("kernel TAP path, not copies (tun, skb, bridge, BPF)", ["kernel TAP"]),
    ("kernel TCP/IP, skb, veth, bridge, not copies", ["kernel TCP/IP"]),
    ("kernel io_uring submit and complete", ["kernel: io_uring"]),
    ("ulstack's code (qring, rxpool, socket layer, drive, ethif, tso)", ["ulstack"]),
    ("lwIP input, output, other", ["lwIP"]),
    ("malloc, heap, pbuf allocation", ["user: malloc"]),
    ("locks (user)", ["user: locks"]),
    ("wake-ups, scheduling, futex (kernel)", ["kernel: wake-ups"]),
    ("page faults", ["kernel: page faults"]),
    ("clocks and timers (user), timer interrupts", ["clock", "kernel: timer"]),
    ("system call entry and exit, checksum, other", ["kernel: system call", "checksum", "other"]),
]
POINTS = [("perproc", 8), ("kernel", 8), ("perproc", 1), ("kernel", 1)]


def main(dirs):
    runs = collections.defaultdict(list)
    for d in dirs:
        for name in sorted(os.listdir(d)):
            m = re.match(r"(perproc|kernel)-(\d+)", name)
            p = os.path.join(d, name, "areas.json")
            if m and os.path.exists(p):
                runs[(m.group(1), int(m.group(2)))].append(json.load(open(p)))
    med = lambda xs: statistics.median(xs) if xs else None
    head = ["area"] + ["%s %d (%d runs)" % (m, n, len(runs[(m, n)])) for m, n in POINTS]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    def row(label, f, fmt="%.3f", zero="-"):
        cells = []
        for pt in POINTS:
            v = med([f(r) for r in runs[pt]])
            cells.append(zero if v is None or v == 0 else fmt % v)
        print("| " + " | ".join([label] + cells) + " |")
    row("Gbit/s (the whole point)", lambda r: r["aggregate_gbps"], "%.2f")
    row("**CPU s per GB (the 3 s)**", lambda r: r["cpu_s_per_gb"])
    for label, prefixes in GROUPS:
        row(label, lambda r, pf=prefixes: sum(v["cpu_s_per_gb"] for k, v in r["areas"].items()
                                              if any(k.startswith(p) for p in pf)))
    row("**everything but pattern and copies**",
        lambda r: r["cpu_s_per_gb"] - sum(v["cpu_s_per_gb"] for k, v in r["areas"].items()
                                          if k.startswith(("pattern", "copy"))))
    row("context switches per GB", lambda r: r["per_gb"]["context-switches"], "%.0f", "0")
    row("system calls per GB", lambda r: r["per_gb"]["raw_syscalls:sys_enter"], "%.0f", "0")
    row("page faults per GB", lambda r: r["per_gb"]["page-faults"], "%.0f", "0")


if __name__ == "__main__":
    main(sys.argv[1:])
