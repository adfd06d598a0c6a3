#!/bin/bash
# alternate base (build-a) and 0136 (build) sweeps
W=/work/wt/loss13
for i in $(seq 1 ${PAIRS:-2}); do for v in build-a build; do
  uptime > ${OUTDIR:-/tmp/l13}/ab-$v-$i.up
  ULS_BUILDDIR=$W/$v ULS_SRCDIR=$W ULS_BENCH_FIFO=5 TB_SUFFIX=h1 timeout 900 $W/$v/apps/ulsbench --mode kernel,perproc --streams 1 --loss ${LOSS:-0,0.1,1} --offload ${OFF:-on} --kernel-cc cubic --seconds 4 --repeat 3 --json ${OUTDIR:-/tmp/l13}/ab-$v-$i.json > ${OUTDIR:-/tmp/l13}/ab-$v-$i.out 2>&1
done; done
echo done > ${OUTDIR:-/tmp/l13}/ab.done
