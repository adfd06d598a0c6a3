# Sourced by profile.sh and docs/bench/s37's faults.sh and switches.sh: one benchmark point
# to look at from outside. Needs B (the build), TB (the testbed's name, ulsbench$TB_SUFFIX)
# and OUT set.
#
# The caller runs real-time while it looks: at 64 streams 128 busy processes, each a
# scheduling group of its own (autogroup), starved a normal shell for seconds, and the
# window slid past the point's end. The benchmark itself runs as usual. The caller goes
# back to the usual priority before it reaps the benchmark (point_end): reaping frees the
# dead processes' /proc entries, and a real-time reaper kept another task off its CPU
# while the kernel waited for it (apps/ulsbench_common.py, usual_priority).

# point_start ULSBENCH-ARGS...: starts the point (BP), returns 2 s into its measured part.
point_start() {
    chrt -f -p 10 $$ > /dev/null
    PYTHONUNBUFFERED=1 chrt -o 0 "$B/apps/ulsbench" "$@" --json "$OUT/run.json" \
        > "$OUT/bench.log" 2>&1 &
    BP=$!
    for _ in $(seq 1 300); do     # the point's processes run, the warm-up second is over
        grep -q " 1 s of " "$OUT/bench.log" 2>/dev/null && break
        sleep 0.2
    done
    sleep 2                       # 64 streams take 3 s to start
}

# point_pids: the point's processes (ulsbench, ulsd, central's ulsrelay, uls-* threads' processes), from one
# ps listing (a shell walk forks per process, and with 128 processes on a saturated
# machine it outlasted the point), and the testbed's ulsds.
point_pids() {
    local pids keep="" p c
    pids=$(ps -e -o pid=,ppid= | /usr/bin/python3 -c '
import sys
root, parent = sys.argv[1], dict(l.split() for l in sys.stdin if l.strip())
for p in parent:
    q, n = p, 0
    while q in parent and q != root and n < 64:
        q, n = parent[q], n + 1
    if q == root and p != root:
        print(p)' "$BP")
    for p in $(pgrep -x ulsd); do
        grep -q "/$TB.d/" /proc/"$p"/cmdline 2>/dev/null && pids="$pids $p"
    done
    for p in $pids; do
        c=""; read -r c < /proc/"$p"/comm 2>/dev/null     # no fork per process
        case "$c" in ulsbench|ulsd|ulsrelay|uls-*) keep="$keep $p";; esac
    done
    echo $keep
}

# point_end: waits for the point at the usual priority; its status.
point_end() {
    chrt -o -p 0 $$ > /dev/null
    wait "$BP"
}
