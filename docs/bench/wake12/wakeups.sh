#!/bin/bash
# Wake-ups of one ulsbench point's threads by cause (docs/bench/wake12/README.md).
#
#   TB_SUFFIX=xx docs/bench/wake12/wakeups.sh BUILD STREAMS OUTDIR
#
# Runs `BUILD/apps/ulsbench --mode perproc --streams STREAMS --seconds 6` and, 2 s into its
# measured part, `perf record -g -e sched:sched_wakeup -e sched:sched_switch` of the point's
# processes for 2 s; then wakeups.py classifies each wake-up by its target thread and the
# waker's call chain. Needs root and perf; runs nothing outside the testbed's namespaces.
set -u
B=$1; N=$2; OUT=$3
: "${TB_SUFFIX:?set TB_SUFFIX}"
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
"$B/apps/ulsbench" --mode perproc --streams "$N" --seconds 6 --json "$OUT/run.json" \
    > "$OUT/bench.log" 2>&1 &
BP=$!
for _ in $(seq 1 300); do
    grep -q "starting" "$OUT/bench.log" 2>/dev/null && break
    sleep 0.2
done
sleep 3
desc() { local p; for p in $(cat /proc/"$1"/task/*/children 2>/dev/null); do echo "$p"; desc "$p"; done; }
KEEP=""
for p in $(desc $BP | sort -u); do
    case "$(cat /proc/"$p"/comm 2>/dev/null)" in ulsbench|uls-*) KEEP="$KEEP $p";; esac
done
echo $KEEP > "$OUT/pids.txt"
perf record -g -e sched:sched_wakeup -e sched:sched_switch -p "$(echo $KEEP | tr ' ' ,)" \
    -o "$OUT/perf.data" -- sleep 2 > "$OUT/record.log" 2>&1
wait $BP
rc=$?
perf script -i "$OUT/perf.data" 2>/dev/null | /usr/bin/python3 "$HERE/wakeups.py" \
    "$(echo $KEEP | tr ' ' ,)" > "$OUT/wakeups.txt"
[ -n "${KEEP_PERF:-}" ] || rm -f "$OUT/perf.data"
cat "$OUT/wakeups.txt"
exit $rc
