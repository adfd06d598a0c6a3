#!/bin/bash
# usage: VARS="name=BUILDDIR:ENV ..." ab2.sh OUTDIR ROUNDS ULSBENCH-ARGS...
OUT=$1; R=$2; shift 2
mkdir -p $OUT
for r in $(seq 1 $R); do
  for v in $VARS; do
    name=${v%%=*}; rest=${v#*=}; b=${rest%%:*}; e=${rest#*:}; [ "$e" = "-" ] && e="X_NONE=1"; e=${e//,/ }
    (cd $b && env TB_SUFFIX=pf ULS_BUILDDIR=$b ULS_SRCDIR=$b/.. $e timeout 600 apps/ulsbench "$@" --json $OUT/$name-$r.json > $OUT/$name-$r.log 2>&1)
    echo "$name $r rc=$? $(date +%T) $(cut -d' ' -f1 /proc/loadavg)" >> $OUT/progress
  done
done
