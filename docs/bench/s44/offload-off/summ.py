import json,glob,sys,statistics as st,collections
d=collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1]+'/*.json')):
    name=f.split('/')[-1].rsplit('-',1)[0]
    j=json.load(open(f))
    for r in j.get('runs',[j]):
        key=(name,r.get('mode'),r.get('streams'),r.get('offload'),r.get('loss_pct'))
        d[key].append((r['aggregate_gbps'],r.get('cpu_s_per_gb_measured')))
for k in sorted(d, key=lambda k:(str(k[1:]),k[0])):
    v=d[k]; g=[x[0] for x in v]; c=[x[1] for x in v if x[1]]
    print(k, 'n=%d gbps med %.2f runs %s  cpu/GB med %.3f'%(len(v),st.median(g),[round(x,2) for x in g], st.median(c) if c else -1))
