#!/bin/bash
# usage: prof.sh BUILDDIR OUTPREFIX STREAMS SECONDS ; perf stat --per-thread on both iperf3 processes, attached 1 s into the run for SECONDS-1.5 s
set -u
source /tmp/p4/tb.env
B=$1; OUT=$2; P=$3; T=$4
RUN="$B/apps/ulsrun"
EV=${EV:-task-clock,context-switches,syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_futex,syscalls:sys_enter_pselect6}
PORT=${PORT:-5399}
ip netns exec "$TB_NETNS" "$RUN" --ctl "$TB_NODE1_CTL" -- iperf3 -4 -s -1 -p $PORT > "$OUT-srv.txt" 2>&1 &
SP=$!
sleep 1
ip netns exec "$TB_NETNS" timeout 60 "$RUN" --ctl "$TB_NODE2_CTL" -- iperf3 -4 -c "$TB_NODE1_IP" -p $PORT -P "$P" -t "$T" ${EXTRA:-} > "$OUT-cli.txt" 2>&1 &
CP=$!
sleep 1
spid=$(pgrep -f "^iperf3 -4 -s -1 -p $PORT" | head -1); cpid=$(pgrep -f "^iperf3 -4 -c $TB_NODE1_IP -p $PORT" | head -1)
D=$(python3 -c "print($T-1.5)")
perf stat --per-thread -e $EV -p $spid -o "$OUT-srv.stat" -- sleep $D &
perf stat --per-thread -e $EV -p $cpid -o "$OUT-cli.stat" -- sleep $D
wait $SP $CP
grep -E "receiver" "$OUT-cli.txt" | tail -1
