#!/bin/bash
# Stop 44's end: issue 12's sweep and issue 13's loss points (docs/bench/s39/final/quiet.sh's
# first two steps), main build, REPEAT=5.
B=${1:-/work/main/build}; OUT=${2:-/tmp/quiet44}
cd $B
export TB_SUFFIX=qq ULS_BUILDDIR=$B ULS_SRCDIR=..
echo "start $(date +%T) $(cat /proc/loadavg)" >> $OUT/progress
timeout 1200 apps/ulsbench --mode kernel,perproc,central --streams 1,2,4,8,16,64 --repeat 5 --json $OUT/repeat.json --plot $OUT > $OUT/repeat.log 2>&1
echo "repeat rc=$? $(date +%T) $(cat /proc/loadavg)" >> $OUT/progress
timeout 900 apps/ulsbench --mode kernel,perproc --streams 1 --loss 0,0.1,1 --offload on,off --kernel-cc cubic --seconds 4 --repeat 3 --json $OUT/loss.json --plot $OUT > $OUT/loss.log 2>&1
echo "loss rc=$? $(date +%T) $(cat /proc/loadavg)" >> $OUT/progress
