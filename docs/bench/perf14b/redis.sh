#!/bin/bash
# usage: redis.sh BUILDDIR OUTPREFIX TEST N [kernel] : redis-server on node1 (or k1), redis-benchmark -c 1 on node2 (or k2); perf stat per thread on both
set -u
source /tmp/p4/tb.env
B=$1; OUT=$2; TEST=$3; N=$4; K=${5:-}
EV=${EV:-task-clock,context-switches,raw_syscalls:sys_enter,syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_futex,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_read,syscalls:sys_enter_write}
PORT=${PORT:-6399}
D=$(mktemp -d /tmp/p4/rd.XXXX)
if [ -n "$K" ]; then
  S="ip netns exec $TB_KERNEL_NETNS"; C="ip netns exec $TB_KERNEL2_NETNS"; IP=$TB_KERNEL_IP
else
  S="ip netns exec $TB_NETNS $B/apps/ulsrun --ctl $TB_NODE1_CTL --"; C="ip netns exec $TB_NETNS $B/apps/ulsrun --ctl $TB_NODE2_CTL --"; IP=$TB_NODE1_IP
fi
$S redis-server --port $PORT --bind 0.0.0.0 --protected-mode no --save "" --appendonly no --daemonize no --dir $D --logfile "" > $OUT-srv.txt 2>&1 &
SP=$!
sleep 1
spid=$(pgrep -f "^redis-server 0.0.0.0:$PORT" | head -1)
perf stat --per-thread -e $EV -p $spid -o "$OUT-srv.stat" &
PP=$!
perf stat -e $EV -o "$OUT-cli.stat" -- $C redis-benchmark -h $IP -p $PORT -t $TEST -c 1 -d 3 -n $N --csv > $OUT-cli.txt 2>&1
kill -INT $PP; wait $PP
kill $SP; wait $SP 2>/dev/null
rm -rf $D
tail -1 $OUT-cli.txt
