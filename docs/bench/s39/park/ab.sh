#!/bin/bash
D=/tmp/fin2
run() { local tag=$1 B=$2; shift 2
  cd $B && TB_SUFFIX=f1 ULS_BUILDDIR=$B ULS_SRCDIR=.. timeout 600 apps/ulsbench "$@" --json $D/$tag.json > $D/$tag.log 2>&1
  echo "$tag rc=$? $(date +%T) $(cat /proc/loadavg)" >> $D/progress; }
for i in 1 2 3; do
  run onP$i /work/main/build --mode kernel,perproc --streams 1,8,64
  run onN$i /work/wt/nopark/build --mode kernel,perproc --streams 1,8,64
done
