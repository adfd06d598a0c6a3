#!/bin/bash
# A/B of two builds, alternated: one-stream loss points with offload on and off, the
# sweep at 2, 8 and 64 streams, ulsping 1 B; then the apps once each. A, B: build dirs.
A=${A:?build A}; B=${B:?build B}; O=${O:-/tmp/ab}; N=${N:-3}; mkdir -p $O
export TB_SUFFIX=ab
for i in $(seq $N); do
  for v in A B; do
    d=$A; [ $v = B ] && d=$B
    cd $d; export ULS_BUILDDIR=$d ULS_SRCDIR=..
    echo "$v$i loss $(date +%T) $(cut -d' ' -f1 /proc/loadavg)" >> $O/progress
    timeout 300 apps/ulsbench --mode kernel,perproc --streams 1 --loss 0,0.1 --offload on,off \
      --kernel-cc cubic --seconds 4 --json $O/loss-$v$i.json > $O/loss-$v$i.log 2>&1
    echo "$v$i sweep $(date +%T) $(cut -d' ' -f1 /proc/loadavg)" >> $O/progress
    timeout 300 apps/ulsbench --mode kernel,perproc --streams 2,8,64 --seconds 3 \
      --json $O/sweep-$v$i.json > $O/sweep-$v$i.log 2>&1
    timeout 120 apps/ulsping --mode perproc,kernel --sizes 1 --json $O/ping-$v$i.json > $O/ping-$v$i.log 2>&1
  done
done
for v in A B; do
  d=$A; [ $v = B ] && d=$B
  cd $d; export ULS_BUILDDIR=$d ULS_SRCDIR=..
  echo "$v apps $(date +%T)" >> $O/progress
  timeout 600 apps/ulsbench apps --repeat 1 --seconds 2 --json $O/apps-$v.json > $O/apps-$v.log 2>&1
done
echo "done $(date +%T)" >> $O/progress
