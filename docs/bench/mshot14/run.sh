#!/bin/sh
# Alternating base (037b210) and mine; each run under perf stat (context switches of the
# benchmark and all its children).
export TB_SUFFIX=m4
O=/tmp/m4bench
run() { # tag tree args...
  tag=$1; tree=$2; shift 2
  echo "== $(date +%T) $tag" >> $O/log
  ( cd $tree && perf stat -e context-switches,task-clock -x, -o $O/$tag.perf -- "$@" >> $O/$tag.out 2>&1 )
  echo "   rc $? $(date +%T)" >> $O/log
}
B=/work/wt/m4-base; M=/work/wt/mshot14
for r in 1 2; do
  if [ $r = 1 ]; then first=base; else first=mine; fi
  for w in $first $( [ $first = base ] && echo mine || echo base ); do
    t=$B; [ $w = mine ] && t=$M
    run sweep-$w-$r $t build/apps/ulsbench --mode perproc --streams 1,8 --seconds 3 --repeat 2 --json $O/sweep-$w-$r.json
  done
done
for w in base mine; do
  t=$B; [ $w = mine ] && t=$M
  run ping-$w $t build/apps/ulsping --mode perproc --sizes 1 --json $O/ping-$w.json
done
for w in mine base; do
  t=$B; [ $w = mine ] && t=$M
  run apps-$w $t build/apps/ulsbench apps --apps redis,pingpong --repeat 2 --seconds 2 --json $O/apps-$w.json
done
echo ALLDONE >> $O/log
