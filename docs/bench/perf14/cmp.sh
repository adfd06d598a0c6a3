#!/bin/bash
# usage: cmp.sh TAG BUILD P T  -> prints GB, cpu-s cli, srv, s/GB
source /tmp/pf/tb.env
TAG=$1; B=$2; P=$3; T=$4
/tmp/pf/prof.sh $B /tmp/pf/x-$TAG $P $T >/dev/null
gb=$(python3 - /tmp/pf/x-$TAG-cli.txt <<'P'
import sys,re
t=open(sys.argv[1]).read().splitlines()
r=[l for l in t if 'receiver' in l][-1]
m=re.search(r'([\d.]+) (GBytes|MBytes)',r); v=float(m.group(1)); print(v if m.group(2)=='GBytes' else v/1024)
P
)
c=$(awk '/task-clock/{print $1/1000}' /tmp/pf/x-$TAG-cli.stat); s=$(awk '/task-clock/{print $1/1000}' /tmp/pf/x-$TAG-srv.stat)
cs=$(awk '/context-switches/{print $1}' /tmp/pf/x-$TAG-cli.stat); ss=$(awk '/context-switches/{print $1}' /tmp/pf/x-$TAG-srv.stat)
python3 -c "print('%-10s P%s %5.2f GB %5.2f Gbit/s cli %.2f srv %.2f s/GB cli %.3f srv %.3f  cs/GB cli %5.0f srv %5.0f'%('$TAG',$P,$gb,$gb*8.59/$T,$c,$s,$c/$gb,$s/$gb,$cs/$gb,$ss/$gb))"
