#!/bin/bash
# usage: h4pin.sh BUILD MODE COUNT CPU_SRV CPU_CLI [env...]
B=$1; M=$2; N=$3; CS=$4; CC=$5; shift 5
. /tmp/h4tb.env
P=$((20000 + RANDOM % 10000))
if [ $M = perproc ]; then
  env "$@" chrt -f 5 taskset -c $CS $B/apps/ulsping server --port $P --ctl $TB_NODE2_CTL > /tmp/h4srv.out 2>&1 &
  SP=$!; sleep 0.5
  env "$@" chrt -f 5 taskset -c $CC $B/apps/ulsping client --to $TB_NODE2_IP:$P --size 1 --count $N --ctl $TB_NODE1_CTL 2>&1 | tail -1
else
  ip netns exec $TB_KERNEL_NETNS chrt -f 5 taskset -c $CS $B/apps/ulsping server --port $P > /tmp/h4srv.out 2>&1 &
  SP=$!; sleep 0.5
  ip netns exec $TB_KERNEL2_NETNS chrt -f 5 taskset -c $CC $B/apps/ulsping client --to $TB_KERNEL_IP:$P --size 1 --count $N 2>&1 | tail -1
fi
kill $SP 2>/dev/null; wait $SP 2>/dev/null
