#!/bin/bash
# The session-end quiet measurements (main build): sweep, loss, ping, apps. REPEAT:
# the sweep's --repeat (3; stop 40 ran 5).
B=${1:-/work/main/build}; OUT=${2:-/tmp/quiet}
mkdir -p $OUT; cd $B
export TB_SUFFIX=qq ULS_BUILDDIR=$B ULS_SRCDIR=..
echo "start $(date +%T) $(cat /proc/loadavg)" >> $OUT/progress
timeout 900 apps/ulsbench --mode kernel,perproc,central --streams 1,2,4,8,16,64 --repeat ${REPEAT:-3} --json $OUT/repeat.json > $OUT/repeat.log 2>&1
echo "repeat rc=$? $(date +%T) $(cat /proc/loadavg)" >> $OUT/progress
timeout 900 apps/ulsbench --mode kernel,perproc --streams 1 --loss 0,0.1,1 --offload on,off --kernel-cc cubic --seconds 4 --repeat 3 --json $OUT/loss.json > $OUT/loss.log 2>&1
echo "loss rc=$? $(date +%T) $(cat /proc/loadavg)" >> $OUT/progress
for i in 1 2 3; do timeout 300 apps/ulsping --mode perproc,kernel --sizes 1 --json $OUT/ping$i.json > $OUT/ping$i.log 2>&1; done
echo "ping rc=$? $(date +%T) $(cat /proc/loadavg)" >> $OUT/progress
timeout 600 apps/ulsbench apps --repeat 3 --seconds 2 --json $OUT/apps.json > $OUT/apps.log 2>&1
echo "apps rc=$? $(date +%T) $(cat /proc/loadavg)" >> $OUT/progress
