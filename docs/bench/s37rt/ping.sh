#!/bin/bash
# ulsping --mode perproc,kernel --sizes 1, base (dfe6fb8) and new alternated, SCHED_FIFO 5,
# without and with ULS_SPIN_US=50; JSON per run
NEW=/work/wt/apps14/build; BASE=/tmp/apps14-base/build
export TB_SUFFIX=h4
for r in 1 2 3; do
  for spin in 0 50; do
    for b in base new; do
      [ $b = base ] && B=$BASE S=/tmp/apps14-base || { B=$NEW; S=/work/wt/apps14; }
      echo "== run $r spin=$spin $b $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
      if [ $spin = 0 ]; then E=""; else E="ULS_SPIN_US=50"; fi
      env $E TB_NAME=ulsph4 ULS_BUILDDIR=$B ULS_SRCDIR=$S chrt -f 5 $B/apps/ulsping --mode perproc,kernel --sizes 1 --json /tmp/h4ab/ping-$b-s$spin-$r.json 2>&1 | grep -E "^(perproc|kernel) "
    done
  done
done
