#!/bin/bash
# Stop 37 (docs/benchmarks.md "Stop 37: 64 streams"): page faults and RSS of a perproc point's
# processes over time. Runs `BUILD/apps/ulsbench --mode perproc --streams N --seconds 9`
# (testbed ulsbench$TB_SUFFIX), and from 2 s into the measured part samples every process's
# minflt and RSS (/proc/PID/stat) three times a second apart into OUT/samples.txt, then
# counts madvise/munmap/brk/mmap calls and page faults for 2 s (perf stat, OUT/stat.txt).
#   TB_SUFFIX=xx ULS_BUILDDIR=B ULS_SRCDIR=S faults.sh B N OUT      (root; perf)
B=$1; N=$2; OUT=$3
TB=ulsbench${TB_SUFFIX:-}
mkdir -p $OUT
. "$(dirname "$0")/../cpu12/point.sh"
point_start --mode perproc --streams $N --seconds 9
PIDS=$(point_pids)
echo "$PIDS" > $OUT/pids.txt
for t in 0 1 2; do
  for p in $PIDS; do
    echo "$t $p $(awk '{print $10, $24}' /proc/$p/stat 2>/dev/null) $(cat /proc/$p/comm 2>/dev/null)"
  done >> $OUT/samples.txt
  sleep 1
done
P=$(echo $PIDS | tr ' ' ,)
perf stat -e 'syscalls:sys_enter_madvise,syscalls:sys_enter_munmap,syscalls:sys_enter_brk,syscalls:sys_enter_mmap,page-faults' -p $P -- sleep 2 2> $OUT/stat.txt
point_end
