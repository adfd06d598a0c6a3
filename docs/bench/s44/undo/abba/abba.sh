#!/bin/bash
# order-balanced: odd rounds base first, even rounds new first
OUT=$1; R=$2; shift 2
M=/work/main/build; B=/work/wt/base/build
for r in $(seq 1 $R); do
  if [ $((r % 2)) = 1 ]; then V="base=$B:- new=$M:-"; else V="new=$M:- base=$B:-"; fi
  VARS="$V" /tmp/p44/ab2.sh $OUT/r$r 1 "$@"
done
echo done >> $OUT/progress
