#!/usr/bin/python3
"""Wake-ups per request of a traced run's own threads (by thread ID), by waker.
usage: chain.py RUNS.jsonl DIR"""
import json, re, subprocess, sys, collections
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["stack"] == "kernel":
        continue
    f = "%s/perf-%s-%d.data" % (sys.argv[2], r["stack"], r["seq"])
    out = subprocess.run(["perf", "script", "-i", f], capture_output=True, text=True).stdout
    name = {}
    for side in ("srv", "cli"):
        for t, v in r[side].items():
            name[t] = side + ":" + ("app" if v["comm"].startswith("redis") else "stack" if v["comm"] == "uls-stack" else v["comm"])
    c = collections.Counter()
    for m in re.finditer(r"^\s*\S+\s+(\d+)\s+\[\d+\]\s+[\d.]+:\s+sched:sched_wakeup: comm=\S+ pid=(\d+) ", out, re.M):
        waker, wakee = m.group(1), m.group(2)
        if wakee in name:
            c[(name.get(waker, "other"), name[wakee])] += 1
    req = c[("cli:app", "srv:app")]
    print(r["stack"], r["seq"], int(r["rps"]), "server wake-ups by the client:", req, "; per those:",
          ", ".join("%s>%s %.3f" % (k[0], k[1], v / max(1, req)) for k, v in sorted(c.items()) if k != ("cli:app", "srv:app")))
