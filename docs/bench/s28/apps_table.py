#!/usr/bin/env python3
"""Stop 28's `ulsbench apps` before/after: per program and configuration, the median over
each build's runs (apps-base*.json: 037b210, apps-main*.json: 750acfd) of ulstack/kernel
throughput and CPU per unit of work, as each run's JSON "ratios" gives them."""
import glob
import json
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))


def ratios(pattern):
    out = {}
    for f in sorted(glob.glob(os.path.join(HERE, pattern))):
        for r in json.load(open(f))["ratios"]:
            k = (r["program"], r["config"])
            out.setdefault(k, {"t": [], "c": []})
            out[k]["t"].append(r["throughput"])
            out[k]["c"].append(r["cpu_per_work"])
    return out


def main():
    b, m = ratios("apps-base*.json"), ratios("apps-main*.json")
    print("| program | configuration | ulstack/kernel before | after | CPU per work before | after |")
    print("|---|---|---|---|---|---|")
    for k in b:
        if k in m:
            print("| %s | %s | %.2fx (%s) | %.2fx (%s) | %.2fx | %.2fx |" % (
                k[0], k[1], statistics.median(b[k]["t"]),
                ", ".join("%.2f" % x for x in b[k]["t"]), statistics.median(m[k]["t"]),
                ", ".join("%.2f" % x for x in m[k]["t"]), statistics.median(b[k]["c"]),
                statistics.median(m[k]["c"])))


if __name__ == "__main__":
    main()
