#!/bin/bash
# A/B: BPF ns per frame (bpflive.sh) and one offload-off stream, alternated.
# A, B: two build directories; O: where the results go.
A=${A:?build A}; B=${B:?build B}; O=${O:-/tmp/ab}; mkdir -p $O
for i in 1 2 3; do
  for v in A B; do
    d=$A; [ $v = B ] && d=$B
    $(dirname $0)/bpflive.sh $d $O/live-$v$i > $O/live-$v$i.txt 2>&1
    TB_SUFFIX=ab ULS_BENCH_FIFO=5 $d/apps/ulsbench --mode kernel,perproc --streams 1 --loss 0,0.1 \
      --offload off --kernel-cc cubic --seconds 4 --json $O/off-$v$i.json > $O/off-$v$i.log 2>&1
  done
done
echo done
