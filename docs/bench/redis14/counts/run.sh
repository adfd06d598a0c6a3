#!/bin/bash
# usage: run.sh uls|kern tag  [clients] [test] [n]  -- starts redis-server, runs redis-benchmark, strace/perf on server
set -u
. /tmp/r4-tb.env
B=${B:-/work/wt/redis14/build}
mode=$1; tag=$2; C=${3:-50}; T=${4:-set}; N=${5:-100000}
D=/tmp/r4/$tag; mkdir -p $D; rm -rf $D/*
if [ $mode = uls ]; then
  S="ip netns exec $TB_NETNS $B/apps/ulsrun --ctl $TB_NODE1_CTL --"
  Cl="ip netns exec $TB_NETNS $B/apps/ulsrun --ctl $TB_NODE2_CTL --"
  IP=$TB_NODE1_IP
else
  S="ip netns exec $TB_KERNEL_NETNS"; Cl="ip netns exec $TB_KERNEL2_NETNS"; IP=$TB_KERNEL_IP
fi
$S redis-server --port 6390 --bind 0.0.0.0 --protected-mode no --save "" --appendonly no --daemonize no --dir $D --logfile "" >$D/server.log 2>&1 &
SP=$!
sleep 1.5
RP=$(pgrep -P $SP redis-server || echo $SP)
# find the actual redis-server pid (ulsrun may exec)
RP=$(pgrep -n -f "^redis-server .*:6390")
echo server pid $RP
timeout 60 $Cl redis-benchmark -h $IP -p 6390 -t $T -c $C -d 3 -n 20000 --csv >$D/warm.csv 2>&1
case ${PROF:-none} in
 strace) timeout 120 strace -c -f -p $RP -o $D/strace.txt & PP=$!; sleep 0.5;;
 perfstat) timeout 120 perf stat -e $EV -p $RP -o $D/perfstat.txt & PP=$!; sleep 0.5;;
 perfrec) timeout 120 perf record -g -p $RP -o $D/perf.data >$D/perfrec.log 2>&1 & PP=$!; sleep 0.5;;
 none) PP=;;
esac
grep -E "voluntary" /proc/$RP/status > $D/ctx0.txt
for t in /proc/$RP/task/*; do echo "$(cat $t/comm) $(grep ctxt $t/status|tr '\n' ' ')"; done > $D/tctx0.txt
timeout 100 ${CPERF:+perf stat -e $EV -o $D/client-stat.txt} ${CREC:+perf record ${CEV:+-e $CEV} ${CG:--g} -o $D/client.data} $Cl redis-benchmark -h $IP -p 6390 -t $T -c $C -d 3 -n $N --csv >$D/bench.csv 2>&1
for t in /proc/$RP/task/*; do echo "$(cat $t/comm) $(grep ctxt $t/status|tr '\n' ' ')"; done > $D/tctx1.txt
[ -n "$PP" ] && { kill -INT $PP; wait $PP; }
kill $SP; sleep 0.5; kill -9 $SP 2>/dev/null; wait $SP 2>/dev/null
cat $D/bench.csv
