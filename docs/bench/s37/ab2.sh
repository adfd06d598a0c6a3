#!/bin/bash
W=/work/wt/loss13
run() { # v tag off
  uptime > ${OUTDIR:-/tmp/l13}/$2.up
  ULS_BUILDDIR=$W/$1 ULS_SRCDIR=$W ULS_BENCH_FIFO=5 TB_SUFFIX=h1 timeout 900 $W/$1/apps/ulsbench --mode kernel,perproc --streams 1 --loss 0,0.1,1 --offload $3 --kernel-cc cubic --seconds 4 --repeat 3 --json ${OUTDIR:-/tmp/l13}/$2.json > ${OUTDIR:-/tmp/l13}/$2.out 2>&1
}
run build-a ab-build-a-3 on; run build ab-build-3 on
run build-a off-build-a-1 off; run build off-build-1 off
echo done > ${OUTDIR:-/tmp/l13}/ab2.done
