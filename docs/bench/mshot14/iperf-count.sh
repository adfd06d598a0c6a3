#!/bin/bash
# usage: iperf-count.sh BUILDDIR OUTPREFIX STREAMS [BYTES]
# (after docs/bench/apps14c/iperf-count.sh) iperf3 -c under ulsrun (node 2) sends BYTES to
# iperf3 -s under ulsrun (node 1); perf stat counts, on the receiving server (whose
# direct-path receive side this branch changed) and on the client, context switches,
# io_uring_enter calls, io_uring poll arms and task-work additions (exact counts; the time
# and rate are this shared machine's). Extra environment for both sides in ULS_ENV (e.g.
# ULS_RX_MULTISHOT=0). Brings up its own testbed m4cnt (TB_SUFFIX m4) and takes it down.
set -u
B=$1; OUT=$2; P=$3; BYTES=${4:-1G}
export TB_SUFFIX=m4 TB_NAME=m4cnt ULS_BUILDDIR=$B
SRC=$(dirname "$B")
EV=task-clock,context-switches,syscalls:sys_enter_io_uring_enter,io_uring:io_uring_poll_arm,io_uring:io_uring_task_add
eval "$("$SRC"/tests/testbed/testbed up --nodes 2 2>"$OUT-tb.err")"
RUN="$B/apps/ulsrun"
ip netns exec "$TB_NETNS" env ${ULS_ENV:-} timeout 150 perf stat -e $EV -o "$OUT-server.stat" -- \
	"$RUN" --ctl "$TB_NODE1_CTL" -- iperf3 -4 -s -1 -p 5299 >/dev/null 2>&1 &
SP=$!
sleep 1
ip netns exec "$TB_NETNS" env ${ULS_ENV:-} timeout 120 perf stat -e $EV \
	-o "$OUT-client.stat" -- "$RUN" --ctl "$TB_NODE2_CTL" -- iperf3 -4 -c "$TB_NODE1_IP" -p 5299 -P "$P" -n "$BYTES" > "$OUT.txt" 2>&1
wait $SP 2>/dev/null
"$SRC"/tests/testbed/testbed down 2>/dev/null
grep -E "sender|receiver" "$OUT.txt" | tail -2
grep -E "io_uring_enter|poll_arm|task_add|task-clock|context" "$OUT-server.stat"
