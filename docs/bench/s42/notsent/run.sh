#!/bin/bash
cd /work/wt/txasync/build
export TB_SUFFIX=ns ULS_BUILDDIR=$PWD ULS_SRCDIR=..
for i in 1 2 3 4 5; do
  for v in M C K; do
    case $v in C) export ULS_NOTSENT_CAP=262144;; K) export ULS_NOTSENT_CAP=1048576;; *) unset ULS_NOTSENT_CAP;; esac
    echo "$v$i $(date +%T) $(cut -d' ' -f1 /proc/loadavg)" >> /tmp/ns2/progress
    timeout 300 apps/ulsbench --mode perproc --streams 2,64 --seconds 3 --json /tmp/ns2/sweep-$v$i.json > /tmp/ns2/sweep-$v$i.log 2>&1
  done
done
echo "done $(date +%T)" >> /tmp/ns2/progress
