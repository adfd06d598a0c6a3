#!/bin/bash
# Stop 39's A/B: base38 (A, d431242) vs main (B), alternated.
D=/tmp/fin
run() { # tag build args...
  local tag=$1 B=$2; shift 2
  cd $B && TB_SUFFIX=f1 ULS_BUILDDIR=$B ULS_SRCDIR=.. timeout 600 apps/ulsbench "$@" --json $D/$tag.json > $D/$tag.log 2>&1
  echo "$tag rc=$? $(date +%T) $(cat /proc/loadavg)" >> $D/progress
}
for i in 1 2 3; do
  run offA$i /work/wt/base38/build --mode kernel,perproc --streams 1 --loss 0,0.1 --offload off --kernel-cc cubic --seconds 4
  run offB$i /work/main/build --mode kernel,perproc --streams 1 --loss 0,0.1 --offload off --kernel-cc cubic --seconds 4
done
for i in 1 2; do
  run onA$i /work/wt/base38/build --mode kernel,perproc --streams 1,8,64
  run onB$i /work/main/build --mode kernel,perproc --streams 1,8,64
done
