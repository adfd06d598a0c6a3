import json,sys,glob,statistics as st,collections
d=sys.argv[1]
rows=collections.defaultdict(list)
for m in ('0','1'):
    for f in sorted(glob.glob(f'{d}/m{m}-*.json')):
        j=json.load(open(f))
        for r in j['runs']:
            c=r['cpu']; cpg=r['cpu_s_per_gb']; tot=c['total'] or 1
            rc=r.get('receiver_counters',{})
            rows[(r.get('offload'),r['streams'],r.get('loss_pct'),r['mode'],m)].append(
                dict(g=r['aggregate_gbps'],cpg=cpg,snd=cpg*c['senders']/tot,rcv=cpg*c['receivers']/tot,
                     mf=rc.get('rx_merge_frames',0),ms=rc.get('rx_merge_segments',0)))
keys=sorted({k[:3] for k in rows})
for k in keys:
    kg={}
    for m in ('0','1'):
        kern=rows.get(k+('kernel',m),[])
        pp=rows.get(k+('perproc',m),[])
        if not pp: continue
        kg[m]=st.median([x['g'] for x in kern]) if kern else None
        gs=[x['g'] for x in pp]
        ratios=[p['g']/q['g'] for p,q in zip(pp,kern)] if kern else []
        print(f"off={k[0]} n={k[1]} loss={k[2]} merge={m}: perproc {st.median(gs):.2f} {[round(x,2) for x in gs]} Gbit/s, kernel {kg[m] if kg[m] is None else round(kg[m],2)} {[round(x['g'],2) for x in kern]}, ratio med-of-meds {st.median(gs)/kg[m] if kg[m] else 0:.2f} per-pair {[round(x,2) for x in ratios]}; perproc CPU s/GB {st.median([x['cpu'] if 'cpu' in x else x['cpg'] for x in pp]):.2f} (snd {st.median([x['snd'] for x in pp]):.2f} rcv {st.median([x['rcv'] for x in pp]):.2f}); kernel s/GB {st.median([x['cpg'] for x in kern]) if kern else 0:.2f} (snd {st.median([x['snd'] for x in kern]) if kern else 0:.2f} rcv {st.median([x['rcv'] for x in kern]) if kern else 0:.2f}); merged frames/segments {st.median([x['mf'] for x in pp]):.0f}/{st.median([x['ms'] for x in pp]):.0f}")
