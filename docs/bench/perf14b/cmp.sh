#!/bin/bash
# usage: cmp.sh TAG BUILD STREAMS SECONDS [kernel]; EXTRA: iperf3 options. Prints GB, Gbit/s, CPU s per GB of client and server (perf stat over each whole process)
set -u
source /tmp/p4/tb.env
TAG=$1; B=$2; P=$3; T=$4; K=${5:-}
O=/tmp/p4/w/c-$TAG; PORT=${PORT:-5398}
if [ -n "$K" ]; then
  S="ip netns exec $TB_KERNEL_NETNS"; C="ip netns exec $TB_KERNEL2_NETNS"; IP=$TB_KERNEL_IP
else
  S="ip netns exec $TB_NETNS $B/apps/ulsrun --ctl $TB_NODE1_CTL --"; C="ip netns exec $TB_NETNS $B/apps/ulsrun --ctl $TB_NODE2_CTL --"; IP=$TB_NODE1_IP
fi
perf stat -e task-clock,context-switches -o $O-srv.stat -- $S iperf3 -4 -s -1 -p $PORT > $O-srv.txt 2>&1 &
SP=$!
sleep 1
timeout 60 perf stat -e task-clock,context-switches -o $O-cli.stat -- $C iperf3 -4 -c $IP -p $PORT -P $P -t $T ${EXTRA:-} > $O-cli.txt 2>&1
wait $SP
python3 - $O $TAG $P $T <<'P'
import sys,re
o,tag,p,t=sys.argv[1:]
r=[l for l in open(o+'-cli.txt') if 'receiver' in l][-1]
m=re.search(r'([\d.]+) (GBytes|MBytes)',r); gb=float(m.group(1))*(1 if m.group(2)=='GBytes' else 1/1024)
def st(f,k):
    for l in open(f):
        if k in l: return float(l.split()[0].replace(',',''))
c=st(o+'-cli.stat','task-clock')/1000; s=st(o+'-srv.stat','task-clock')/1000
cc=st(o+'-cli.stat','context-switches'); sc=st(o+'-srv.stat','context-switches')
print('%-12s P%s %5.2f GB %5.2f Gbit/s  CPU s/GB cli %.3f srv %.3f  cs/GB cli %5.0f srv %5.0f'%(tag,p,gb,gb*8.59/float(t),c/gb,s/gb,cc/gb,sc/gb))
P
