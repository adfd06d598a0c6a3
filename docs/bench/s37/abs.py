import json,sys,statistics as st,glob,collections
D=sys.argv[1] if len(sys.argv) > 1 else '.'
R=collections.defaultdict(list)
for v in ('build-a','build'):
    for f in sorted(glob.glob(f'{D}/ab-{v}-[0-9].json')):
        d=json.load(open(f))
        for r in d['runs']:
            sc=r.get('sender_counters') or {}
            R[(v,r['offload'],r['loss_pct'],r['mode'])].append((r['aggregate_gbps'],sc,r.get('load_average'),r['loss_by_direction']['data']['mean_frame_bytes'] if r.get('loss_by_direction') else 0))
for k in sorted(R):
    v=R[k]; g=[x[0] for x in v]
    s=lambda n: sum(x[1].get(n,0) for x in v)
    extra=''
    if k[3]=='perproc': extra='rto %d (spur %d) rec %d tail %d tlp %d'%(s('tcp_rto'),s('tcp_rto_spurious'),s('tcp_recovery_sack'),s('tcp_rack_tail_lost'),s('tcp_tlp_probe'))
    else: extra='TCPTimeouts %d rec %d probes %d'%(s('TCPTimeouts'),s('TCPSackRecovery'),s('TCPLossProbes'))
    print(k, 'n=%d median %.2f'%(len(g),st.median(g)), ' '.join('%.2f'%x for x in g), 'frame %.0f'%st.median([x[3] for x in v]), extra)
