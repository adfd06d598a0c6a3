#!/usr/bin/python3
"""Medians of the before/after ulsbench runs in this directory (docs/bench/wake12/README.md):
   table.py [PREFIX...]  (default: bench)  ->  mode, streams, version, runs, Gbit/s,
   CPU s per GB, context switches per GB of the senders and of the receivers."""
import glob
import json
import statistics
import sys
import os

here = os.path.dirname(os.path.abspath(__file__))
prefixes = sys.argv[1:] or ["bench"]
rows = {}
for pre in prefixes:
    for path in sorted(glob.glob(os.path.join(here, pre + "-*.json"))):
        ver = os.path.basename(path)[len(pre) + 1:].split("-")[0]
        d = json.load(open(path))
        for r in d.get("runs", d.get("points", [])):
            cs = r.get("context_switches", {}).get("per_gb", {})
            rows.setdefault((r["mode"], r["streams"], ver), []).append(
                (r["aggregate_gbps"], r["cpu_s_per_gb"], cs.get("senders"), cs.get("receivers"),
                 cs.get("senders_voluntary"), cs.get("receivers_voluntary")))
med = lambda xs: statistics.median([x for x in xs if x is not None]) if any(
    x is not None for x in xs) else float("nan")
print("| mode | streams | build | runs | Gbit/s | CPU s/GB | cs/GB senders (voluntary) "
      "| cs/GB receivers (voluntary) |")
print("|---|---|---|---|---|---|---|---|")
for (mode, n, ver), v in sorted(rows.items()):
    print("| %s | %d | %s | %d | %.2f | %.3f | %.0f (%.0f) | %.0f (%.0f) |" % (
        mode, n, ver, len(v), med([x[0] for x in v]), med([x[1] for x in v]),
        med([x[2] for x in v]), med([x[4] for x in v]), med([x[3] for x in v]),
        med([x[5] for x in v])))
