#!/bin/bash
source /tmp/pf/tb.env
P=$1; T=$2; TAG=k$P
EV=task-clock,context-switches
ip netns exec $TB_KERNEL_NETNS perf stat -e $EV -o /tmp/pf/$TAG-srv.stat -- iperf3 -4 -s -1 -p 5298 > /tmp/pf/$TAG-srv.txt 2>&1 &
SP=$!; sleep 1
ip netns exec $TB_KERNEL2_NETNS timeout 60 perf stat -e $EV -o /tmp/pf/$TAG-cli.stat -- iperf3 -4 -c $TB_KERNEL_IP -p 5298 -P $P -t $T > /tmp/pf/$TAG-cli.txt 2>&1
wait $SP
gb=$(python3 -c "
import re
r=[l for l in open('/tmp/pf/$TAG-cli.txt') if 'receiver' in l][-1]
m=re.search(r'([\d.]+) (GBytes|MBytes)',r); print(float(m.group(1))*(1 if m.group(2)=='GBytes' else 1/1024))")
c=$(awk '/task-clock/{print $1/1000}' /tmp/pf/$TAG-cli.stat); s=$(awk '/task-clock/{print $1/1000}' /tmp/pf/$TAG-srv.stat)
python3 -c "print('kernel P$P %5.2f GB cli %.2f srv %.2f s/GB cli %.3f srv %.3f'%($gb,$c,$s,$c/$gb,$s/$gb))"
