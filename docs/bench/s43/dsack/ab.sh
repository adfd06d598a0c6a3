#!/bin/sh
# A/B: base (9762461) vs D-SACK build, perproc 1 stream, loss 0.1 and 1, offload on; alternating.
cd ${OUT:-.}
for r in 1 2 3 4; do
  for v in base new; do
    if [ $v = base ]; then B=${BASE:?a build of 9762461}; else B=${NEW:?a build with patch 0139}; fi
    TB_SUFFIX=ab timeout 300 $B/apps/ulsbench --mode perproc --streams 1 --loss 0.1,1 --seconds 4 \
      --json ${OUT:-.}/$v-$r.json > ${OUT:-.}/$v-$r.log 2>&1
    echo "$v $r rc=$?"
  done
done
