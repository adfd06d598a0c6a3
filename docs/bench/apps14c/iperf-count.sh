#!/bin/bash
# usage: iperf-count.sh BUILDDIR OUTPREFIX STREAMS [BYTES]
# iperf3 -c under ulsrun (node 2) sending BYTES to iperf3 -s under ulsrun (node 1), with
# perf stat counting the client's system calls and io_uring poll arms (exact counts; the
# time and rate are this shared machine's). Brings up its own testbed a5cnt (TB_SUFFIX a5)
# and takes it down.
set -u
B=$1; OUT=$2; P=$3; BYTES=${4:-2G}
export TB_SUFFIX=a5 TB_NAME=a5cnt ULS_BUILDDIR=$B
SRC=$(dirname "$B")
eval "$("$SRC"/tests/testbed/testbed up --nodes 2 2>"$OUT-tb.err")"
RUN="$B/apps/ulsrun"
ip netns exec "$TB_NETNS" "$RUN" --ctl "$TB_NODE1_CTL" -- iperf3 -4 -s -1 -p 5299 >/dev/null 2>&1 &
SP=$!
sleep 1
ip netns exec "$TB_NETNS" timeout 120 perf stat -e task-clock,context-switches,syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_select,syscalls:sys_enter_pselect6,io_uring:io_uring_poll_arm,io_uring:io_uring_submit_req \
	-o "$OUT.stat" -- "$RUN" --ctl "$TB_NODE2_CTL" -- iperf3 -4 -c "$TB_NODE1_IP" -p 5299 -P "$P" -n "$BYTES" > "$OUT.txt" 2>&1
wait $SP 2>/dev/null
"$SRC"/tests/testbed/testbed down 2>/dev/null
grep -E "sender|receiver" "$OUT.txt" | tail -2
grep -E "io_uring_enter|select|poll_arm|submit_req|task-clock|context" "$OUT.stat"
