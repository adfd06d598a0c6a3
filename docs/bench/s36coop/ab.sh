#!/bin/bash
# A/B of the cooperative receive ring: ULS_RX_COOP=0 (A) vs default (B), alternated, with
# ULS_BENCH_FIFO=5; the sweep (kernel,perproc at 1 and 8 streams) then apps.
B=$BUILD_SRC/build; S=$BUILD_SRC; OUT=$OUT
export ULS_BENCH_FIFO=5 ULS_BUILDDIR=$B ULS_SRCDIR=$S TB_SUFFIX=cf
for i in 1 2 3; do
  for v in A B; do
    if [ $v = A ]; then export ULS_RX_COOP=0; else unset ULS_RX_COOP; fi
    uptime > $OUT/sweep-$v-$i.load
    timeout 300 $B/apps/ulsbench --mode kernel,perproc --streams 1,8 --seconds 4 --json $OUT/sweep-$v-$i.json > $OUT/sweep-$v-$i.log 2>&1
  done
done
for i in 1 2; do
  for v in A B; do
    if [ $v = A ]; then export ULS_RX_COOP=0; else unset ULS_RX_COOP; fi
    uptime > $OUT/apps-$v-$i.load
    timeout 600 $B/apps/ulsbench apps --apps iperf3,redis,pingpong --seconds 2 --json $OUT/apps-$v-$i.json > $OUT/apps-$v-$i.log 2>&1
  done
done
echo done > $OUT/finished
