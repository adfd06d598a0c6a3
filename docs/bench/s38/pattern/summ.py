import json,glob,statistics as st,sys,collections
d=sys.argv[1] if len(sys.argv)>1 else '/tmp/ab'
res=collections.defaultdict(lambda: collections.defaultdict(list))
cpu=collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob(d+'/*-[0-9].json')):
    v=f.split('/')[-1].rsplit('-',1)[0]
    j=json.load(open(f))
    for r in j['runs']:
        k=(r.get('mode'),r.get('streams'))
        g=r.get('aggregate_gbps') or r.get('gbps')
        res[v][k].append(g)
        cpu[v][k].append(r.get('cpu_s_per_gb_measured'))
for v in res:
    print(v)
    for k in sorted(res[v]):
        print('  ',k, ['%.2f'%x for x in res[v][k]], 'cpu/GB', cpu[v][k])
    for n in (1,8,16,64):
        try:
            p=st.median(res[v][('perproc',n)]); c=st.median(res[v][('central',n)]); kk=st.median(res[v][('kernel',n)])
            print('   n=%d perproc/central %.2f perproc/kernel %.2f'%(n,p/c,p/kk))
        except Exception as e: print(e)
