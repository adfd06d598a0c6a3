#!/bin/bash
# A/B of ULS_RX_MULTISHOT on the base build, alternated
B=/tmp/apps14-base/build
cd $B
export ULS_BENCH_FIFO=5 TB_SUFFIX=h4 ULS_BUILDDIR=$B ULS_SRCDIR=/tmp/apps14-base
for r in 1 2; do
  for m in 1 0; do
    echo "== run $r mshot=$m $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
    ULS_RX_MULTISHOT=$m apps/ulsbench apps --apps redis,pingpong --repeat 3 --seconds 2 --json /tmp/h4ab/apps-m$m-$r.json > /tmp/h4ab/apps-m$m-$r.log 2>&1
    echo rc=$?
  done
done
