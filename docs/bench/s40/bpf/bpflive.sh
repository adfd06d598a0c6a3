#!/bin/bash
# ns per run of the data path's BPF programs during one offload-off stream (bpf_stats):
# bpflive.sh BUILD OUTDIR. bpf_stats_enabled goes back to what it was, also on failure.
B=$1; OUT=$2; mkdir -p $OUT; TB=ulsbenchbl; export TB_SUFFIX=bl
. $(dirname $0)/../../cpu12/point.sh
old=$(cat /proc/sys/kernel/bpf_stats_enabled)
trap 'echo $old > /proc/sys/kernel/bpf_stats_enabled' EXIT
point_start --mode perproc --streams 1 --seconds 8 --offload off
echo 1 > /proc/sys/kernel/bpf_stats_enabled
bpftool -j prog show > $OUT/p0.json
sleep 3
bpftool -j prog show > $OUT/p1.json
echo $old > /proc/sys/kernel/bpf_stats_enabled
point_end
/usr/bin/python3 - $OUT <<'PY'
import json, sys, collections
o = sys.argv[1]
a = {p["id"]: p for p in json.load(open(o + "/p0.json"))}
b = {p["id"]: p for p in json.load(open(o + "/p1.json"))}
t = collections.defaultdict(lambda: [0, 0])
for i, p in b.items():
    if p.get("name") in ("txcheck", "steer", "synguard") and i in a:
        t[p["name"]][0] += p.get("run_time_ns", 0) - a[i].get("run_time_ns", 0)
        t[p["name"]][1] += p.get("run_cnt", 0) - a[i].get("run_cnt", 0)
r = json.load(open(o + "/run.json"))["runs"][0]
tot = 0
for n, (ns, cnt) in sorted(t.items()):
    tot += ns
    print(f"{n:9s} {cnt:9d} runs {ns / max(cnt, 1):6.1f} ns/run")
print(f"total {tot / 1e6:.0f} ms in 3 s; stream {r['aggregate_gbps']} Gbit/s")
PY
