#!/bin/bash
# Stop 37 (docs/benchmarks.md "Stop 37: 64 streams"): voluntary and involuntary context
# switches of a perproc point's threads over 3 s, by thread name (ulsbench: the
# application threads; uls-stack: the stack threads; ulsd), 2 s into the measured part of
# `BUILD/apps/ulsbench --mode perproc --streams N --seconds 9` (extra ulsbench arguments
# after OUT). Writes OUT/cs0.txt, OUT/cs1.txt (a Python dict: name -> [voluntary,
# nonvoluntary]), OUT/t0, OUT/t1, OUT/run.json.
#   TB_SUFFIX=xx ULS_BUILDDIR=B ULS_SRCDIR=S switches.sh B N OUT [ulsbench args]   (root)
B=$1; N=$2; OUT=$3; shift 3
mkdir -p $OUT
chrt -f -p 10 $$ >/dev/null
PYTHONUNBUFFERED=1 chrt -o 0 $B/apps/ulsbench --mode perproc --streams $N --seconds 9 --json $OUT/run.json "$@" > $OUT/bench.log 2>&1 &
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
    if q==root and p!=root and (comm[p].startswith("uls")): print(p)' $BP)
for p in $(pgrep -x ulsd); do grep -q "/ulsbench$TB_SUFFIX.d/" /proc/$p/cmdline 2>/dev/null && PIDS="$PIDS $p"; done
snap() { python3 - $PIDS <<'PY'
import sys,os,glob
v=n=0; per={}
for p in sys.argv[1:]:
    for t in glob.glob('/proc/%s/task/*/status'%p):
        try:
            s=open(t).read()
            comm=open(t.replace('status','comm')).read().strip()
        except OSError: continue
        a=int(s.split('voluntary_ctxt_switches:')[1].split()[0]); b=int(s.split('nonvoluntary_ctxt_switches:')[1].split()[0])
        k=per.setdefault(comm,[0,0]); k[0]+=a; k[1]+=b
print(repr(per))
PY
}
snap > $OUT/cs0.txt; date +%s.%N > $OUT/t0
sleep 3
snap > $OUT/cs1.txt; date +%s.%N > $OUT/t1
wait $BP
