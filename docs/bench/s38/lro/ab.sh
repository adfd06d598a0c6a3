#!/bin/bash
# alternate ULS_RX_MERGE=0 / =1, one ulsbench run each, same build
OUT=$1; shift; PAIRS=$1; shift
cd /work/wt/lro13/build
for i in $(seq 1 $PAIRS); do
  for m in ${ORDER:-0 1}; do
    echo "== pair $i merge=$m $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
    ULS_RX_MERGE=$m TB_SUFFIX=l3 ULS_BENCH_FIFO=5 timeout 600 apps/ulsbench "$@" --json $OUT/m$m-$i.json > $OUT/m$m-$i.log 2>&1
    echo "rc=$?"
  done
done
