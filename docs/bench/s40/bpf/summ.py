import json, sys, glob, statistics as st
rows = {}
for f in sorted(glob.glob(sys.argv[1] + "/[AB]*.json")):
    v = f.split("/")[-1][0]
    d = json.load(open(f))
    runs = {}
    for r in d["runs"]:
        runs[(r["mode"], r.get("loss_pct"))] = r
    for loss in sorted({k[1] for k in runs}):
        k, p = runs.get(("kernel", loss)), runs.get(("perproc", loss))
        if not k or not p: continue
        rows.setdefault((v, loss), []).append((p["aggregate_gbps"], k["aggregate_gbps"], p["aggregate_gbps"] / k["aggregate_gbps"],
            p["cpu"]["senders"] / (p["bytes_verified"] / 1e9), k["cpu"]["senders"] / (k["bytes_verified"] / 1e9)))
for (v, loss), xs in sorted(rows.items()):
    print(v, loss, "perproc", [round(x[0], 2) for x in xs], "kernel", [round(x[1], 2) for x in xs],
          "ratio", [round(x[2], 2) for x in xs], "median ratio %.2f" % st.median(x[2] for x in xs),
          "sender s/GB p %.2f k %.2f" % (st.median(x[3] for x in xs), st.median(x[4] for x in xs)))
