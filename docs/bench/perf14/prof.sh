#!/bin/bash
# usage: prof.sh BUILDDIR OUTPREFIX STREAMS SECONDS [record]
# assumes testbed env exported (TB_*). perf stat on both iperf3 processes (+ optionally record -g)
set -u
B=$1; OUT=$2; P=$3; T=$4; REC=${5:-}
RUN="$B/apps/ulsrun"
EV=task-clock,context-switches,raw_syscalls:sys_enter,syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_pselect6,syscalls:sys_enter_futex,syscalls:sys_enter_write,syscalls:sys_enter_read
if [ -n "$REC" ]; then
  ip netns exec "$TB_NETNS" perf record ${CG:--g} -F ${FREQ:-999} -o "$OUT-srv.data" -- "$RUN" --ctl "$TB_NODE1_CTL" -- iperf3 -4 -s -1 -p 5299 > "$OUT-srv.txt" 2>&1 &
else
  ip netns exec "$TB_NETNS" ${SRVPERF:-perf stat -e $EV} -o "$OUT-srv.stat" -- "$RUN" --ctl "$TB_NODE1_CTL" -- iperf3 -4 -s -1 -p 5299 > "$OUT-srv.txt" 2>&1 &
fi
SP=$!
sleep 1
if [ -n "$REC" ]; then
  ip netns exec "$TB_NETNS" timeout 60 perf record ${CG:--g} -F ${FREQ:-999} -o "$OUT-cli.data" -- "$RUN" --ctl "$TB_NODE2_CTL" -- iperf3 -4 -c "$TB_NODE1_IP" -p 5299 -P "$P" -t "$T" ${EXTRA:-} > "$OUT-cli.txt" 2>&1
else
  ip netns exec "$TB_NETNS" timeout 60 ${CLIPERF:-perf stat -e $EV} -o "$OUT-cli.stat" -- "$RUN" --ctl "$TB_NODE2_CTL" -- iperf3 -4 -c "$TB_NODE1_IP" -p 5299 -P "$P" -t "$T" ${EXTRA:-} > "$OUT-cli.txt" 2>&1
fi
wait $SP
grep -E "sender|receiver" "$OUT-cli.txt" | tail -2
