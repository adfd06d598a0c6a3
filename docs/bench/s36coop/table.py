import json, glob, statistics as st, os, collections
import sys
D=sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
sw=collections.defaultdict(list)
for f in sorted(glob.glob(D+'/sweep-*.json')):
    v,i=os.path.basename(f)[6:-5].split('-')
    d=json.load(open(f))
    for r in d['runs']:
        sw[(r['mode'],r['streams'],v)].append((r['aggregate_gbps'],r.get('cpu_s_per_gb_measured'),r.get('cpu_s_per_gb'), i))
for k in sorted(sw): print(k, [(round(a,2),b,c) for a,b,c,i in sw[k]], 'median', round(st.median(x[0] for x in sw[k]),2))
ap=collections.defaultdict(list)
for f in sorted(glob.glob(D+'/apps-*.json')):
    v,i=os.path.basename(f)[5:-5].split('-')
    d=json.load(open(f))
    for r in d['apps']:
        ap[(r['program'],r['config'],r['stack'],v)].append((r['throughput'],r.get('p50_us'),r.get('cpu_seconds')))
for k in sorted(ap): print(k, ap[k])
