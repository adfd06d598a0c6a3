#!/usr/bin/env python3
"""Before/after table of stop 28's sweeps: medians per (mode, streams) over the runs of each
build (sweep-base*.json: 037b210, sweep-main*.json: 750acfd), Gbit/s and CPU s per GB."""
import glob
import json
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))


def medians(pattern):
    pts = {}
    for f in sorted(glob.glob(os.path.join(HERE, pattern))):
        for r in json.load(open(f))["runs"]:
            if not r.get("verified"):
                raise SystemExit("%s: an unverified run" % f)
            k = (r["mode"], r["streams"])
            pts.setdefault(k, ([], []))
            pts[k][0].append(r["aggregate_gbps"])
            pts[k][1].append(r["cpu_s_per_gb"])
    return {k: (statistics.median(g), statistics.median(c), len(g)) for k, (g, c) in pts.items()}


def main():
    b, m = medians("sweep-base*.json"), medians("sweep-main*.json")
    print("| mode | streams | Gbit/s before | after | after/before | CPU s/GB before | after | runs |")
    print("|---|---|---|---|---|---|---|---|")
    for k in sorted(b):
        if k in m:
            print("| %s | %d | %.2f | %.2f | %.2fx | %.3f | %.3f | %d+%d |" % (
                k[0], k[1], b[k][0], m[k][0], m[k][0] / b[k][0], b[k][1], m[k][1], b[k][2],
                m[k][2]))
    for s in (1, 8):
        for name, d in (("before", b), ("after", m)):
            p, k, c = d.get(("perproc", s)), d.get(("kernel", s)), d.get(("central", s))
            if p and k and c:
                print("%s, %d streams: perproc/kernel %.2fx, perproc/central %.2fx, CPU/GB "
                      "perproc/kernel %.2fx" % (name, s, p[0] / k[0], p[0] / c[0], p[1] / k[1]))


if __name__ == "__main__":
    main()
