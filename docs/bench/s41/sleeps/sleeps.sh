#!/bin/bash
# Where a perproc point's threads go to sleep: `perf record -e sched:sched_switch -g` of the
# point's own processes for 1 s, 2 s into the measured part of
# `BUILD/apps/ulsbench --mode perproc --streams N --seconds 9`, then sleeps.py OUT.
#   TB_SUFFIX=xx ULS_BUILDDIR=B ULS_SRCDIR=S sleeps.sh B N OUT [ulsbench args]   (root)
B=$1; N=$2; OUT=$3; shift 3
TB=ulsbench${TB_SUFFIX:-}
mkdir -p $OUT
. "$(dirname "$0")/../../cpu12/point.sh"
point_start --mode perproc --streams $N --seconds 9 "$@"
PIDS=$(point_pids)
perf record -m 4096 -g -e sched:sched_switch -p "$(echo $PIDS | tr ' ' ,)" -o $OUT/perf.data -- sleep 1 > $OUT/record.log 2>&1
point_end
perf script -i $OUT/perf.data -F comm,tid,event,trace,ip,sym > $OUT/sw.txt 2>/dev/null
python3 "$(dirname "$0")/sleeps.py" $OUT/sw.txt > $OUT/sleeps.txt
