#!/bin/bash
# Alternate base and branch: ulsbench --mode kernel,perproc --streams 1,8, then the 0.1% loss run.
set -u
OUT=/tmp/p12/ab; mkdir -p $OUT
for i in 1 2 3; do
  for b in base new; do
    if [ $b = base ]; then B=/work/wt/perf12-base/build; else B=/work/wt/perf12/build; fi
    TB_SUFFIX=p2 $B/apps/ulsbench --mode kernel,perproc --streams 1,8 --seconds 3 --json $OUT/s-$b-$i.json > $OUT/s-$b-$i.log 2>&1
    echo "$(date +%T) s $b $i rc=$? load=$(cut -d' ' -f1 /proc/loadavg)" >> $OUT/progress
  done
done
for i in 1 2 3; do
  for b in base new; do
    if [ $b = base ]; then B=/work/wt/perf12-base/build; else B=/work/wt/perf12/build; fi
    TB_SUFFIX=p2 $B/apps/ulsbench --mode kernel,perproc --streams 1 --loss 0.1 --seconds 4 --json $OUT/l-$b-$i.json > $OUT/l-$b-$i.log 2>&1
    echo "$(date +%T) l $b $i rc=$? load=$(cut -d' ' -f1 /proc/loadavg)" >> $OUT/progress
  done
done
