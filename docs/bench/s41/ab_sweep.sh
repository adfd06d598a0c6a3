#!/bin/bash
# Alternated comparison of builds, the sweep only. VARIANTS="NAME=BUILD_DIR ..." (or A and B:
# build dirs, named A and B); STREAMS (1,2,64), MODES (perproc), N rounds, O output dir.
O=${O:-/tmp/ab}; N=${N:-3}; mkdir -p $O
VARIANTS=${VARIANTS:-"A=${A:?build A} B=${B:?build B}"}
export TB_SUFFIX=ab
for i in $(seq $N); do
  for vd in $VARIANTS; do
    v=${vd%%=*}; d=${vd#*=}
    cd $d; export ULS_BUILDDIR=$d ULS_SRCDIR=..
    echo "$v$i sweep $(date +%T) $(cut -d' ' -f1 /proc/loadavg)" >> $O/progress
    timeout 300 apps/ulsbench --mode ${MODES:-perproc} --streams ${STREAMS:-1,2,64} --seconds 3 \
      ${EXTRA} --json $O/sweep-$v$i.json > $O/sweep-$v$i.log 2>&1
  done
done
echo "done $(date +%T)" >> $O/progress
