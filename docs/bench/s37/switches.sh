#!/bin/bash
# Stop 37 (docs/benchmarks.md "Stop 37: 64 streams"): voluntary and involuntary context
# switches of a perproc point's threads over 3 s, by thread name (ulsbench: the
# application threads; uls-stack: the stack threads; ulsd), 2 s into the measured part of
# `BUILD/apps/ulsbench --mode perproc --streams N --seconds 9` (extra ulsbench arguments
# after OUT). Writes OUT/cs0.txt, OUT/cs1.txt (a Python dict: name -> [voluntary,
# nonvoluntary]), OUT/t0, OUT/t1, OUT/run.json.
#   TB_SUFFIX=xx ULS_BUILDDIR=B ULS_SRCDIR=S switches.sh B N OUT [ulsbench args]   (root)
B=$1; N=$2; OUT=$3; shift 3
TB=ulsbench${TB_SUFFIX:-}
mkdir -p $OUT
. "$(dirname "$0")/../cpu12/point.sh"
point_start --mode perproc --streams $N --seconds 9 "$@"
PIDS=$(point_pids)
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
point_end
