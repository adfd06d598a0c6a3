#!/bin/bash
# Directed pairs at one loss rate: who sends, who receives. Usage: directed.sh LOSS ROUNDS OUT
set -u
W=/work/wt/loss13d; B=$W/build/apps/ulsbench; T=$W/tests/testbed/testbed
export TB_SUFFIX=l3 TB_NAME=l3dir ULS_BUILDDIR=$W/build ULS_SRCDIR=$W
LOSS=$1; ROUNDS=$2; OUT=$3; mkdir -p $OUT
$T up >$OUT/up.log 2>&1 || { echo up failed; exit 1; }
eval "$($T env)"
for ns in $TB_KERNEL_NETNS $TB_KERNEL2_NETNS; do ip netns exec $ns ethtool -K eth0 tso on gso on >/dev/null; done
$T impair --loss $LOSS >>$OUT/up.log 2>&1
srv_k() { ip netns exec $TB_KERNEL_NETNS $B server --port 5201 --count 1 > $OUT/srv.$1.log 2>&1 & echo $!; }
srv_u() { $B server --ctl $TB_NODE2_CTL --port 6000 --count 1 > $OUT/srv.$1.log 2>&1 & echo $!; }
for r in $(seq 1 $ROUNDS); do
  for pair in KtoK UtoK KtoU UtoU; do
    tag=$pair.$r
    case $pair in
      ?toK) s=$(srv_k $tag) ;; *) s=$(srv_u $tag) ;;
    esac
    sleep 1
    case $pair in
      KtoK) ip netns exec $TB_KERNEL2_NETNS $B client --to $TB_KERNEL_IP:5201 --seconds 4 --congestion cubic --json $OUT/$tag.json ;;
      KtoU) ip netns exec $TB_KERNEL2_NETNS $B client --to $TB_NODE2_IP:6000 --seconds 4 --congestion cubic --json $OUT/$tag.json ;;
      UtoK) $B client --ctl $TB_NODE1_CTL --to $TB_KERNEL_IP:5201 --seconds 4 --json $OUT/$tag.json ;;
      UtoU) $B client --ctl $TB_NODE1_CTL --to $TB_NODE2_IP:6000 --seconds 4 --json $OUT/$tag.json ;;
    esac > $OUT/cli.$tag.log 2>&1
    for i in $(seq 1 50); do kill -0 $s 2>/dev/null || break; sleep 0.2; done
    kill $s 2>/dev/null
    echo "$tag $(python3 -c "import json;d=json.load(open('$OUT/$tag.json'));c=d.get('counters',{});print(d['gbps'], c.get('tcp_recovery_sack'), c.get('tcp_tlp_probe'), c.get('tcp_rto'))")"
  done
done
$T down >>$OUT/up.log 2>&1
