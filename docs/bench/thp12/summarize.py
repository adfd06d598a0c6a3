#!/usr/bin/python3
"""Medians of the A/B sets (docs/benchmarks.md, stop 39): per build, mode and stream count,
aggregate Gbit/s, CPU s per GB over the measured part (runs whose window left processes
out are not counted), page faults per process (senders / receivers); then per set perproc 64
as a share of perproc 2 and perproc/kernel CPU per GB at 64 streams.

    summarize.py DIR [PREFIX ...]   (default prefixes: base thp)
"""
import glob
import json
import os
import statistics
import sys

d = sys.argv[1]
prefixes = sys.argv[2:] or ["base", "thp"]
med = statistics.median
for pre in prefixes:
    files = sorted(glob.glob(os.path.join(d, pre + "[0-9]*.json")))
    pts, shares, ratios = {}, [], []
    for f in files:
        runs = json.load(open(f))["runs"]
        byk = {}
        for r in runs:
            k = (r["mode"], r["streams"])
            byk.setdefault(k, []).append(r)
            p = pts.setdefault(k, {"g": [], "c": [], "fs": [], "fr": [], "fp": []})
            p["g"].append(r["aggregate_gbps"])
            if r.get("cpu_window", {}).get("processes_left_out", 1) == 0:
                p["c"].append(r["cpu_s_per_gb_measured"])
            pf = r.get("page_faults") or {}
            n = r["streams"]
            if pf:
                p["fs"].append(pf["senders"] / n)
                p["fr"].append(pf["receivers"] / n)
                p["fp"].append(pf["per_process"])
        def m(k, key):
            v = [r["aggregate_gbps"] for r in byk.get(k, [])] if key == "g" else \
                [r["cpu_s_per_gb_measured"] for r in byk.get(k, [])
                 if r.get("cpu_window", {}).get("processes_left_out", 1) == 0]
            return med(v) if v else None
        a, b = m(("perproc", 64), "g"), m(("perproc", 2), "g")
        if a and b:
            shares.append(a / b)
        a, b = m(("perproc", 64), "c"), m(("kernel", 64), "c")
        if a and b:
            ratios.append(a / b)
    print("%s: %d sets" % (pre, len(files)))
    for k in sorted(pts):
        p = pts[k]
        print("  %-8s %3d  Gbit/s %6.2f (%s)  CPU s/GB %s (%d runs)  faults/process %s" % (
            k[0], k[1], med(p["g"]), ", ".join("%.1f" % x for x in p["g"]),
            "%.3f" % med(p["c"]) if p["c"] else "-", len(p["c"]),
            "%.0f (senders %.0f / receivers %.0f)" % (med(p["fp"]), med(p["fs"]), med(p["fr"]))
            if p["fp"] else "-"))
    print("  perproc 64 / perproc 2 per set: %s; median %.0f%%" % (
        ", ".join("%.0f%%" % (100 * x) for x in shares), 100 * med(shares) if shares else 0))
    print("  CPU/GB perproc/kernel at 64 per set: %s; median %.2fx" % (
        ", ".join("%.2fx" % x for x in ratios), med(ratios) if ratios else 0))
