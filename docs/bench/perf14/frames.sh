#!/bin/bash
source /tmp/pf/tb.env
B=$1; P=$2; T=$3; TAG=$4
for n in 1 2; do ip netns exec $TB_NETNS $B/apps/ulsstat --ctl $(eval echo \$TB_NODE${n}_CTL) --json > /tmp/pf/f$TAG-n$n-a.json; done
/tmp/pf/prof.sh $B /tmp/pf/f$TAG $P $T > /dev/null
for n in 1 2; do ip netns exec $TB_NETNS $B/apps/ulsstat --ctl $(eval echo \$TB_NODE${n}_CTL) --json > /tmp/pf/f$TAG-n$n-b.json; done
python3 - $TAG <<'P'
import json,sys,re
t=sys.argv[1]
r=[l for l in open(f'/tmp/pf/f{t}-cli.txt') if 'receiver' in l][-1]
m=re.search(r'([\d.]+) (GBytes|MBytes)',r); gb=float(m.group(1))*(1 if m.group(2)=='GBytes' else 1/1024)
def d(n,k):
    a=json.load(open(f'/tmp/pf/f{t}-n{n}-a.json'))['counters']; b=json.load(open(f'/tmp/pf/f{t}-n{n}-b.json'))['counters']; return b[k]-a[k]
print(t, '%.2f GB'%gb, 'data frames/GB %.0f (gso %.0f)  ack frames/GB %.0f  bytes/dataframe %.0f' % (d(1,'direct_steered')/gb, d(1,'direct_steered_gso')/gb, d(2,'direct_steered')/gb, gb*2**30/d(1,'direct_steered')))
P
