import json, re, statistics as st, sys
def segs(fn):
    out=[]; cur=None; prev=None
    for l in open(fn):
        r=json.loads(l); t=r['t']
        if r.get('uls'): m='U'
        elif r.get('ss'): m='K'
        else: continue
        if cur is None or t-prev>1 or cur['m']!=m:
            cur={'m':m,'s':[]}; out.append(cur)
        prev=t; cur['s'].append(r)
    return out
for fn in sys.argv[1:]:
    for s in segs(fn):
        if s['m']=='U':
            c=[x['uls'][0] for x in s['s'] if x['uls'][0]['srtt' if False else 'rtt_us']>0]
            if len(c)<5: continue
            lossy=c[-1]['retransmits']-c[0]['retransmits']>15
            print(fn, 'perproc', 'loss' if lossy else 'clean', 'n=%d cwnd %d ssth %d srtt_us %d inflight-limit: cwnd<sndwnd %d%%' % (len(c),
              st.median(x['cwnd']/1460 for x in c), st.median(min(x['ssthresh'],10**7)/1460 for x in c), st.median(x['rtt_us'] for x in c),
              100*sum(x['cwnd']<x['snd_wnd'] for x in c)/len(c)))
        else:
            v=[]
            for x in s['s']:
                ss=x['ss']; g=lambda k: re.search(r'\b'+k+r':([\d.]+)', ss)
                if g('bytes_acked') and g('cwnd') and g('rtt'):
                    v.append((int(g('cwnd').group(1)), float(g('rtt').group(1)), ss))
            if len(v)<5: continue
            lossy=any('lost:' in x[2] or 'retrans:' in x[2] for x in v)
            print(fn, 'kernel ', 'loss' if lossy else 'clean', 'n=%d cwnd %d rtt_ms %.3f' % (len(v), st.median(x[0] for x in v), st.median(x[1] for x in v)))
