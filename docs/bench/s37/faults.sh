#!/bin/bash
# Stop 37 (docs/benchmarks.md "Stop 37: 64 streams"): page faults and RSS of a perproc point's
# processes over time. Runs `BUILD/apps/ulsbench --mode perproc --streams N --seconds 9`
# (testbed ulsbench$TB_SUFFIX), and from 2 s into the measured part samples every process's
# minflt and RSS (/proc/PID/stat) three times a second apart into OUT/samples.txt, then
# counts madvise/munmap/brk/mmap calls and page faults for 2 s (perf stat, OUT/stat.txt).
#   TB_SUFFIX=xx ULS_BUILDDIR=B ULS_SRCDIR=S faults.sh B N OUT      (root; perf)
B=$1; N=$2; OUT=$3
mkdir -p $OUT
chrt -f -p 10 $$ >/dev/null
PYTHONUNBUFFERED=1 chrt -o 0 $B/apps/ulsbench --mode perproc --streams $N --seconds 9 --json $OUT/run.json > $OUT/bench.log 2>&1 &
BP=$!
for _ in $(seq 1 300); do grep -q " 1 s of " $OUT/bench.log 2>/dev/null && break; sleep 0.2; done
sleep 2
PIDS=$(ps -e -o pid=,ppid=,comm= | python3 -c '
import sys
root=sys.argv[1]; par={}; comm={}
for l in sys.stdin:
    f=l.split()
    if len(f)<3: continue
    par[f[0]]=f[1]; comm[f[0]]=f[2]
for p in par:
    q,n=p,0
    while q in par and q!=root and n<64: q,n=par[q],n+1
    if q==root and p!=root and comm[p].startswith("uls"): print(p, comm[p])' $BP)
echo "$PIDS" > $OUT/pids.txt
for t in 0 1 2; do
  for p in $(echo "$PIDS" | awk '{print $1}'); do
    echo "$t $p $(awk '{print $10, $24}' /proc/$p/stat 2>/dev/null) $(cat /proc/$p/comm 2>/dev/null)"
  done >> $OUT/samples.txt
  sleep 1
done
P=$(echo "$PIDS" | awk '{print $1}' | paste -sd,)
perf stat -e 'syscalls:sys_enter_madvise,syscalls:sys_enter_munmap,syscalls:sys_enter_brk,syscalls:sys_enter_mmap,page-faults' -p $P -- sleep 2 2> $OUT/stat.txt
wait $BP
