#!/bin/bash
# One profiled benchmark point (docs/benchmarks.md, "Where the CPU per byte goes").
#
#   TB_SUFFIX=xx docs/bench/cpu12/profile.sh BUILD MODE STREAMS OUTDIR [norecord]
#
# Runs `BUILD/apps/ulsbench --mode MODE --streams STREAMS --seconds 9` (its own testbed,
# ulsbench$TB_SUFFIX) and, 3 s into the measured part, for 3 s: `perf stat` of the point's
# own processes (the benchmark's clients and servers and the testbed's two ulsd; the
# machine is shared, so nothing system-wide), `perf record -a -g -F 999` (areas.py keeps
# the same processes' samples), and the nodes' frame counters (ulsstat) or the kernel
# namespaces' TCP counters (nstat) before and after. Then areas.py OUTDIR.
# Needs root (the testbed), perf; runs nothing outside the testbed's namespaces.
set -u
B=$1; MODE=$2; N=$3; OUT=$4; NOREC=${5:-}
: "${TB_SUFFIX:?set TB_SUFFIX}"
TB=ulsbench$TB_SUFFIX
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
"$B/apps/ulsbench" --mode "$MODE" --streams "$N" --seconds 9 --json "$OUT/run.json" \
    > "$OUT/bench.log" 2>&1 &
BP=$!
for _ in $(seq 1 300); do     # the testbed is up and the point has started
    grep -q "starting" "$OUT/bench.log" 2>/dev/null && break
    sleep 0.2
done
sleep 3                       # 1 s warm-up, then 2 s into the measured 9 s
desc() { local p; for p in $(cat /proc/"$1"/task/*/children 2>/dev/null); do echo "$p"; desc "$p"; done; }
PIDS=$(desc $BP | sort -u)
for p in $(pgrep -x ulsd); do
    grep -q "/$TB.d/" /proc/"$p"/cmdline 2>/dev/null && PIDS="$PIDS $p"
done
KEEP=""
for p in $PIDS; do
    case "$(cat /proc/"$p"/comm 2>/dev/null)" in ulsbench|ulsd|uls-*) KEEP="$KEEP $p";; esac
done
echo $KEEP > "$OUT/pids.txt"
snap() {
    { date +%s.%N
      for n in 1 2; do
          echo "node$n $("$B/apps/ulsstat" --ctl "/run/ulstack-testbed/$TB.d/node$n.ctl" --json 2>/dev/null |
              /usr/bin/python3 -c 'import json,sys
try:
    c = json.load(sys.stdin)["counters"]; print(c.get("direct_steered", 0), c.get("direct_tx_passed", 0))
except Exception:
    print("- -")')"
      done
      for ns in "$TB-k1" "$TB-k2"; do
          echo "$ns $(ip netns exec "$ns" nstat -az TcpInSegs TcpOutSegs 2>/dev/null |
              awk '/TcpInSegs/{i=$2} /TcpOutSegs/{o=$2} END{print i+0, o+0}')"
      done; } > "$1"
}
snap "$OUT/snap0.txt"
perf stat -e task-clock,context-switches,page-faults,raw_syscalls:sys_enter \
    -p "$(echo $KEEP | tr ' ' ,)" -o "$OUT/stat.txt" -- sleep 3 &
SP=$!
if [ -z "$NOREC" ]; then
    perf record -a -g -F 999 -o "$OUT/perf.data" -- sleep 3 > "$OUT/record.log" 2>&1
fi
wait $SP
snap "$OUT/snap1.txt"
wait $BP
rc=$?
[ -z "$NOREC" ] && /usr/bin/python3 "$HERE/areas.py" "$OUT" > "$OUT/areas.txt"
exit $rc
