#!/bin/bash
# usage: prof.sh BUILDDIR OUTPREFIX [clients] [n] [test]
# profiles redis-server (ulsrun) with perf record -g during redis-benchmark; also perf stat
#   RECORD=0      no perf record (tp.sh: counts only)
#   USTAT=EVENTS  the events perf stat counts for the ulstack server
#   SKIPK=1       the ulstack server only, not the kernel's
set -u
RECORD=${RECORD:-1}
USTAT=${USTAT:-task-clock,context-switches,cycles,instructions}
B=$1; OUT=$2; C=${3:-50}; N=${4:-200000}; T=${5:-get}
export TB_SUFFIX=a4 TB_NAME=a4prof ULS_BUILDDIR=$B
SRC=$(dirname $B)
eval "$($SRC/tests/testbed/testbed up --nodes 2 2>/tmp/a4/tb.err)"
RUN="$B/apps/ulsrun"
D=$(mktemp -d); chmod 755 $D
# ulstack
ip netns exec $TB_NETNS $RUN --ctl $TB_NODE1_CTL -- redis-server --port 6400 --bind 0.0.0.0 --protected-mode no --save "" --appendonly no --daemonize no --dir $D --logfile "" >/dev/null 2>&1 &
SP=$!
sleep 1.5
RPID=$(pgrep -P $SP -x redis-server || echo $SP)
# find actual redis-server pid (ulsrun may exec)
RPID=$(pgrep -f "redis-server.*6400" | head -1)
ip netns exec $TB_NETNS timeout 60 $RUN --ctl $TB_NODE2_CTL -- redis-benchmark -h $TB_NODE1_IP -p 6400 -t $T -c $C -d 3 -n 20000 --csv >/dev/null 2>&1
PR=
[ "$RECORD" = 1 ] && { timeout 60 perf record -g -p $RPID -o $OUT-uls-server.data 2>/dev/null & PR=$!; }
timeout 60 perf stat -e $USTAT -p $RPID -o $OUT-uls-server.stat &
PS=$!
sleep 0.3
ip netns exec $TB_NETNS timeout 60 perf stat -o $OUT-uls-bench.stat -- $RUN --ctl $TB_NODE2_CTL -- redis-benchmark -h $TB_NODE1_IP -p 6400 -t $T -c $C -d 3 -n $N --csv > $OUT-uls-bench.csv 2>&1
kill -INT $PR $PS; wait $PR $PS 2>/dev/null
kill $RPID; wait $SP 2>/dev/null
if [ -z "${SKIPK:-}" ]; then
# kernel
ip netns exec $TB_KERNEL_NETNS redis-server --port 6400 --bind 0.0.0.0 --protected-mode no --save "" --appendonly no --daemonize no --dir $D --logfile "" >/dev/null 2>&1 &
SP=$!
sleep 1
ip netns exec $TB_KERNEL2_NETNS timeout 60 redis-benchmark -h $TB_KERNEL_IP -p 6400 -t $T -c $C -d 3 -n 20000 --csv >/dev/null 2>&1
PR=
[ "$RECORD" = 1 ] && { timeout 60 perf record -g -p $SP -o $OUT-k-server.data 2>/dev/null & PR=$!; }
timeout 60 perf stat -e task-clock,context-switches,cycles,instructions -p $SP -o $OUT-k-server.stat &
PS=$!
sleep 0.3
ip netns exec $TB_KERNEL2_NETNS timeout 60 perf stat -o $OUT-k-bench.stat -- redis-benchmark -h $TB_KERNEL_IP -p 6400 -t $T -c $C -d 3 -n $N --csv > $OUT-k-bench.csv 2>&1
kill -INT $PR $PS; wait $PR $PS 2>/dev/null
kill $SP; wait $SP 2>/dev/null
fi
$SRC/tests/testbed/testbed down 2>/dev/null
rm -rf $D
cat $OUT-uls-bench.csv $OUT-k-bench.csv
