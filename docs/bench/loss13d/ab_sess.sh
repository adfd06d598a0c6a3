#!/bin/bash
# One testbed; per round: UtoU and KtoK each in the caller's session and with setsid (own
# session, so own autogroup), alternating. Usage: ab_sess.sh LOSS ROUNDS OUT
set -u
W=/work/wt/loss13d; B=$W/build/apps/ulsbench; T=$W/tests/testbed/testbed
export TB_SUFFIX=l3 TB_NAME=ulsbench ULS_BUILDDIR=$W/build ULS_SRCDIR=$W ULS_TSO=1
LOSS=$1; ROUNDS=$2; OUT=$3; mkdir -p $OUT
$T up --nodes 2 --mtu 1500 >$OUT/up.log 2>&1 || { echo up failed; exit 1; }
eval "$($T env)"
for ns in $TB_KERNEL_NETNS $TB_KERNEL2_NETNS; do ip netns exec $ns ethtool -K eth0 tso on gso on >/dev/null; done
[ "$LOSS" != 0 ] && $T impair --loss $LOSS >>$OUT/up.log 2>&1
sa() { python3 -c "import time;print('--start-at', '%.6f' % (time.monotonic()+0.6))"; }
for r in $(seq 1 $ROUNDS); do
  for pair in UtoU KtoK; do
    for ss in "" setsid; do
      tag=$pair${ss:+-setsid}.$r
      if [ $pair = UtoU ]; then
        $ss $B server --ctl $TB_NODE2_CTL --port 6000 --count 1 --datapath direct > $OUT/srv.$tag.log 2>&1 & s=$!
        sleep 1
        $ss $B client --ctl $TB_NODE1_CTL --to $TB_NODE2_IP:6000 --seconds 4 --datapath direct $(sa) --json $OUT/$tag.json > $OUT/cli.$tag.log 2>&1
      else
        $ss ip netns exec $TB_KERNEL_NETNS $B server --port 5201 --count 1 > $OUT/srv.$tag.log 2>&1 & s=$!
        sleep 1
        $ss ip netns exec $TB_KERNEL2_NETNS $B client --to $TB_KERNEL_IP:5201 --seconds 4 --congestion cubic $(sa) --json $OUT/$tag.json > $OUT/cli.$tag.log 2>&1
      fi
      for i in $(seq 1 50); do kill -0 $s 2>/dev/null || break; sleep 0.2; done
      kill $s 2>/dev/null
      echo "$tag $(python3 -c "import json;d=json.load(open('$OUT/$tag.json'));c=d.get('counters',{});print(d['gbps'], d['cpu_seconds'], c.get('tcp_recovery_sack'), c.get('tcp_tlp_probe'), c.get('tcp_rto'))")"
    done
  done
done
uptime
$T down >>$OUT/up.log 2>&1
