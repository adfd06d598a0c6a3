#!/bin/bash
# One profiled benchmark point (docs/benchmarks.md, "Where the CPU per byte goes").
#
#   TB_SUFFIX=xx docs/bench/cpu12/profile.sh BUILD MODE STREAMS OUTDIR [norecord]
#   PROFILE_ARGS='--offload off' ... (more ulsbench options for the point; stop 37)
#
# Runs `BUILD/apps/ulsbench --mode MODE --streams STREAMS --seconds 9` (its own testbed,
# ulsbench$TB_SUFFIX) and, 2 s into the measured part, for 3 s: `perf stat` of the point's
# own processes (the benchmark's clients and servers and the testbed's two ulsd; the
# machine is shared, so nothing system-wide), `perf record -a -g -F 999` (areas.py keeps
# the same processes' samples), and the nodes' frame counters (ulsstat) or the kernel
# namespaces' TCP counters (nstat) before and after. Then areas.py OUTDIR.
# PROFILE_EVENTS=e1,e2 adds events to the perf stat (e.g. cpu-migrations,ipi:ipi_send_cpu,
# io_uring:io_uring_task_add); areas.py reports every counted event per GB.
# Needs root (the testbed), perf; runs nothing outside the testbed's namespaces.
set -u
B=$1; MODE=$2; N=$3; OUT=$4; NOREC=${5:-}
: "${TB_SUFFIX:?set TB_SUFFIX}"
TB=ulsbench$TB_SUFFIX
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
. "$HERE/point.sh"
point_start --mode "$MODE" --streams "$N" --seconds 9 ${PROFILE_ARGS:-}
KEEP=$(point_pids)
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
perf stat -e task-clock,context-switches,page-faults,raw_syscalls:sys_enter${PROFILE_EVENTS:+,$PROFILE_EVENTS} \
    -p "$(echo $KEEP | tr ' ' ,)" -o "$OUT/stat.txt" -- sleep 3 &
SP=$!
if [ -z "$NOREC" ]; then
    perf record -a -g -F 999 -o "$OUT/perf.data" -- sleep 3 > "$OUT/record.log" 2>&1
fi
wait $SP
snap "$OUT/snap1.txt"
point_end
rc=$?
[ -z "$NOREC" ] && /usr/bin/python3 "$HERE/areas.py" "$OUT" > "$OUT/areas.txt"
exit $rc
