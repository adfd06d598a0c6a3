#!/bin/sh
# A/B: base (157f761) vs new (main), alternated
out=/tmp/ab; 
for i in 1 2 3; do
  if [ $((i % 2)) -eq 1 ]; then order="base new"; else order="new base"; fi
  for v in $order; do
    if [ $v = base ]; then S=/work/wt/base; else S=/work/main; fi
    TB_SUFFIX=ab ULS_BUILDDIR=$S/build ULS_SRCDIR=$S $S/build/apps/ulsbench --mode kernel,perproc,central --streams 1,8,16,64 --json $out/$v-$i.json > $out/$v-$i.log 2>&1
    echo "$v-$i rc=$? $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)" >> $out/progress
  done
done
echo done >> $out/progress
