#!/bin/bash
B=/work/wt/apps14/build
cd $B
export ULS_BENCH_FIFO=5 TB_SUFFIX=h4 ULS_BUILDDIR=$B ULS_SRCDIR=/work/wt/apps14
for r in 1 2; do
  for m in 1 0; do
    echo "== run $r mshot=$m $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
    ULS_RX_MULTISHOT=$m apps/ulsbench --mode perproc --streams 1,8 --seconds 3 --json /tmp/h4ab/sweep-m$m-$r.json > /tmp/h4ab/sweep-m$m-$r.log 2>&1
    echo rc=$?; grep -E "^perproc" /tmp/h4ab/sweep-m$m-$r.log
  done
done
