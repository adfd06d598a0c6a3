"""Medians of an alternated A/B (docs/bench/s41/depth/ab.sh's files): per variant, each
(mode, streams, offload, loss) point's Gbit/s, the perproc/kernel ratio within a run, and
the measured CPU s per GB. Usage: summ_ab.py DIR [VARIANT...]"""
import glob, json, statistics as st, sys

d = sys.argv[1]
variants = sys.argv[2:] or ["A", "B"]
pts = {}
for f in sorted(glob.glob(d + "/*-*.json")):
    name = f.split("/")[-1]
    kind, tag = name[:-5].split("-", 1)
    v = tag[:-1]   # the last character is the round (N <= 9)
    if v not in variants or kind in ("ping", "apps"):
        continue
    runs = json.load(open(f))["runs"]
    key = lambda r: (r["streams"], r.get("offload", (json.load(open(f))["options"] or {}).get("offload")), r.get("loss_pct"))
    by = {}
    for r in runs:
        by[(r["mode"],) + key(r)] = r
    for k, r in by.items():
        if k[0] != "perproc":
            continue
        kr = by.get(("kernel",) + k[1:])
        e = pts.setdefault((k[1:], v), [])
        e.append((r["aggregate_gbps"], r.get("cpu_s_per_gb_measured") or r["cpu_s_per_gb"],
                  r["aggregate_gbps"] / kr["aggregate_gbps"] if kr else float("nan")))
for (k, v), xs in sorted(pts.items(), key=lambda t: (str(t[0][0]), t[0][1])):
    print("%-28s %s n=%d perproc %6.2f Gbit/s  /kernel %.2fx  CPU s/GB %.3f   runs %s" % (
        k, v, len(xs), st.median(x[0] for x in xs), st.median(x[2] for x in xs),
        st.median(x[1] for x in xs), [round(x[0], 2) for x in xs]))
for v in variants:
    ps = []
    for f in sorted(glob.glob(d + "/ping-%s?.json" % v)):
        for r in json.load(open(f))["runs"]:
            ps.append((r["mode"], r["rtt_us"]["p50"]))
    if ps:
        print(v, "ping p50", ps)
