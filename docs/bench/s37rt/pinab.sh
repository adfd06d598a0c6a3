#!/bin/bash
# pin.sh A/B: base and new builds alternated, both ends on CPU 1 (one CPU) and on CPUs 0/1
NEW=/work/wt/apps14/build; BASE=/tmp/apps14-base/build; P=/work/wt/apps14/docs/bench/s37rt/pin.sh
for r in 1 2 3; do
  for cpus in "1 1" "0 1"; do
    for b in base new kernel; do
      case $b in base) B=$BASE M=perproc;; new) B=$NEW M=perproc;; kernel) B=$NEW M=kernel;; esac
      echo "round $r cpus ${cpus/ //} $b: $($P $B $M 20000 $cpus | sed 's/ (.*//')"
    done
  done
done
