import json, sys, statistics as st
d = json.load(open(sys.argv[1]))
agg, cpu = {}, {}
for r in d["runs"]:
    k = (r["mode"], r["streams"])
    agg.setdefault(k, []).append(r["aggregate_gbps"])
    if r.get("cpu_s_per_gb_measured"): cpu.setdefault(k, []).append(r["cpu_s_per_gb_measured"])
m = {k: st.median(v) for k, v in agg.items()}
c = {k: st.median(v) for k, v in cpu.items()}
streams = sorted({k[1] for k in m})
peak = max(m.get(("perproc", s), 0) for s in streams)
print("streams perproc kernel central p/k p/c cpu p/k")
for s in streams:
    p, k, ce = m.get(("perproc", s)), m.get(("kernel", s)), m.get(("central", s))
    print(s, "%.2f %.2f %.2f %.2fx %.2fx %.2fx" % (p, k, ce or 0, p / k, p / ce if ce else 0, c[("perproc", s)] / c[("kernel", s)]))
print("64 streams: %.0f%% of peak %.2f" % (100 * m[("perproc", 64)] / peak, peak) if ("perproc", 64) in m else "")
