#!/bin/bash
# usage: h4stat.sh BUILD MODE COUNT ; perf stat on both ends (all threads)
B=$1; M=$2; N=$3; shift 3; export "$@" 2>/dev/null
. /tmp/h4tb.env
EV=task-clock,context-switches,cpu-migrations,ipi:ipi_send_cpu,io_uring:io_uring_task_add,io_uring:io_uring_submit_req,raw_syscalls:sys_enter,io_uring:io_uring_poll_arm
P=$((20000 + RANDOM % 10000))
if [ $M = perproc ]; then
  $B/apps/ulsping server --port $P --ctl $TB_NODE2_CTL > /tmp/h4srv.out 2>&1 &
  SP=$!; sleep 0.5
  perf stat -x, -e $EV -p $SP -o /tmp/h4srv.stat & PP=$!
  sleep 0.3
  perf stat -x, -e $EV -o /tmp/h4cli.stat $B/apps/ulsping client --to $TB_NODE2_IP:$P --size 1 --count $N --ctl $TB_NODE1_CTL 2>&1 | tail -1
else
  ip netns exec $TB_KERNEL_NETNS $B/apps/ulsping server --port $P > /tmp/h4srv.out 2>&1 &
  SP=$!; sleep 0.5
  perf stat -x, -e $EV -p $(pgrep -P $SP || echo $SP) -o /tmp/h4srv.stat & PP=$!
  sleep 0.3
  ip netns exec $TB_KERNEL2_NETNS perf stat -x, -e $EV -o /tmp/h4cli.stat $B/apps/ulsping client --to $TB_KERNEL_IP:$P --size 1 --count $N 2>&1 | tail -1
fi
kill -INT $PP; wait $PP 2>/dev/null
kill $SP 2>/dev/null; wait $SP 2>/dev/null
for s in cli srv; do echo "== $s (per round trip)"; awk -F, -v n=$N '$1 ~ /^[0-9.]+$/ {v=$1/n; if ($3=="task-clock") v=v*1000; printf "  %-32s %10.2f\n", $3, v}' /tmp/h4$s.stat; done
