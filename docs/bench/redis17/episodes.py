#!/usr/bin/python3
"""Split episodes of a traced run: spans during which redis-server's and redis-benchmark's main
threads last ran on different CPUs (from sched_switch 'next_pid' events), and the fraction of
the pair's wake-ups whose target CPU differs from the waker's. usage: episodes.py RUNS.jsonl DIR"""
import json, re, subprocess, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    f = "%s/perf-%s-%d.data" % (sys.argv[2], r["stack"], r["seq"])
    try:
        out = subprocess.run(["perf", "script", "-i", f], capture_output=True, text=True).stdout
    except OSError:
        continue
    mains = {t for side in ("srv", "cli") for t, v in r[side].items() if v["comm"] in ("redis-server", "redis-benchmark")}
    cpu = {}
    split_since = None
    eps = []
    same = cross = 0
    t_first = t_last = None
    migs = []  # (ts, mover context is a pair thread?, moved tid)
    for m in re.finditer(r"^\s*(\S+)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:(sched_switch|sched_wakeup|sched_migrate_task): (.*)$", out, re.M):
        comm, pid, c, ts, ev, rest = m.group(1), m.group(2), int(m.group(3)), float(m.group(4)), m.group(5), m.group(6)
        if ev == "sched_migrate_task":
            mm = re.search(r"pid=(\d+) ", rest)
            if mm and mm.group(1) in mains:
                migs.append((ts, "wake" if pid in mains else "other:" + comm))
            continue
        if ev == "sched_switch":
            nm = re.search(r"next_pid=(\d+)", rest)
            if nm and nm.group(1) in mains:
                cpu[nm.group(1)] = c
                t_first = t_first or ts
                t_last = ts
                if len(cpu) == 2:
                    a, b = cpu.values()
                    if a != b and split_since is None:
                        split_since = ts
                    elif a == b and split_since is not None:
                        eps.append(ts - split_since)
                        split_since = None
        else:
            w = re.search(r"pid=(\d+) .*target_cpu=(\d+)", rest)
            if pid in mains and w.group(1) in mains:
                if int(w.group(2)) == c:
                    same += 1
                else:
                    cross += 1
    if split_since is not None and t_last:
        eps.append(t_last - split_since)
    span = (t_last - t_first) if t_first else 0
    kinds = {}
    for ts, k in migs:
        k = "by-peer" if k == "wake" else "by-other"
        kinds[k] = kinds.get(k, 0) + 1
    print("%-7s %2d migrations of the pair %s; rps %6.0f p50 %3.0f | pair wake-ups %5d, cross-CPU %.2f | split episodes %d, split %.0f%% of %.2f s, longest %.1f ms"
          % (r["stack"], r["seq"], kinds, r["rps"], r["p50"], same + cross, cross / max(1, same + cross), len(eps),
             100 * sum(eps) / span if span else 0, span, 1e3 * max(eps) if eps else 0))
