#!/usr/bin/env python3
"""Medians of the ulsping A/B (ping-{base,new}-s{0,50}-{1,2,3}.json): p50 round trips."""
import glob, json, os, statistics as st, sys

D = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
for spin in (0, 50):
    for b in ("base", "new"):
        rows = []
        for f in sorted(glob.glob(os.path.join(D, "ping-%s-s%d-*.json" % (b, spin)))):
            p = {x["mode"]: x["rtt_us"]["p50"] for x in json.load(open(f))["runs"]}
            rows.append((p["perproc"], p["kernel"], p["perproc"] / p["kernel"]))
        if rows:
            print("spin %-2d %-4s %s | median p50 %.1f / %.1f us, median ratio %.2fx" % (
                spin, b, "  ".join("%.1f/%.1f (%.2fx)" % r for r in rows),
                st.median(r[0] for r in rows), st.median(r[1] for r in rows),
                st.median(r[2] for r in rows)))
