#!/bin/bash
# One perproc -> perproc stream at LOSS% with a header capture on node 2's side (receiver TAP seen from the bridge ns).
set -u
W=/work/wt/loss13; B=$W/build/apps/ulsbench; T=$W/tests/testbed/testbed
BUILD=${BUILD:-$W/build}
export TB_SUFFIX=h1 TB_NAME=h1cap ULS_BUILDDIR=$BUILD ULS_SRCDIR=$W ULS_TSO=1
B=$BUILD/apps/ulsbench
LOSS=$1; OUT=$2; SECS=${3:-4}; mkdir -p $OUT
$T up >$OUT/up.log 2>&1 || { echo up failed; cat $OUT/up.log; $T down; exit 1; }
eval "$($T env)"
$T impair --loss $LOSS >>$OUT/up.log 2>&1
$B server --ctl $TB_NODE2_CTL --port 6000 --count 1 > $OUT/srv.log 2>&1 & s=$!
sleep 1
cp=""
if [ -n "${CAP:-}" ]; then
  ip netns exec $TB_NETNS timeout $((SECS+5)) tcpdump -i uls1 -s 96 -w $OUT/cap1.pcap tcp > $OUT/tcpdump1.log 2>&1 & cp=$!
  ip netns exec $TB_NETNS timeout $((SECS+5)) tcpdump -i uls2 -s 96 -w $OUT/cap2.pcap tcp > $OUT/tcpdump2.log 2>&1 & cp="$cp $!"
  sleep 0.5
fi
timeout 60 $B client --ctl $TB_NODE1_CTL --to $TB_NODE2_IP:6000 --seconds $SECS --json $OUT/cli.json > $OUT/cli.log 2>&1
for i in $(seq 1 50); do kill -0 $s 2>/dev/null || break; sleep 0.2; done
kill $s 2>/dev/null
[ -n "$cp" ] && { sleep 0.5; kill $cp 2>/dev/null; wait $cp 2>/dev/null; }
$T impair-stats > $OUT/impair.json 2>/dev/null
$T down >>$OUT/up.log 2>&1
python3 -c "import json;d=json.load(open('$OUT/cli.json'));c=d.get('counters',{});print(d['gbps'], {k:v for k,v in c.items() if k.startswith('tcp_r') or k.startswith('tcp_t')})"
