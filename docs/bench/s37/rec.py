import sys, statistics as st; sys.path.insert(0, __import__('os').path.dirname(__import__('os').path.abspath(__file__))); from gaps import read
from collections import Counter
a=read(sys.argv[1]+'/cap1.pcap'); b=read(sys.argv[1]+'/cap2.pcap')
data1=[p for p in a if p[2]==6000 and p[5]>0]
d2=Counter((p[3],p[5],p[8]) for p in b if p[2]==6000)
acks1=[p for p in a if p[1]==6000]   # acks delivered to sender
t0=data1[0][0]; t1=data1[-1][0]
tot=sum(p[5] for p in data1)
print("duration %.3f s, %.2f Gbit/s sent, %d frames, mean %.0f B"%(t1-t0, tot*8/(t1-t0)/1e9, len(data1), tot/len(data1)))
# new data vs retransmissions
hi=None; news=[]; rex=[]
for p in data1:
    end=(p[3]+p[5])&0xffffffff
    if hi is None or (end-hi)&0x80000000==0 and end!=hi:
        news.append(p); hi=end
    else: rex.append(p)
print("retransmitted frames", len(rex), "bytes", sum(p[5] for p in rex))
drops=[p for p in news if not d2[(p[3],p[5],p[8])]]
print("new-data frames dropped", len(drops))
# for each drop: time to first rexmit covering its seq, time to cumulative ack passing its end
import bisect
ackt=[p[0] for p in acks1]
res=[]
for p in drops:
    s=p[3]; e=(p[3]+p[5])&0xffffffff
    rx=[q for q in rex if q[0]>p[0] and ((q[3]-s)&0xffffffff)<p[5]]
    i=bisect.bisect(ackt,p[0])
    done=None
    for q in acks1[i:]:
        if ((q[4]-e)&0xffffffff)<0x80000000: done=q[0]; break
    # bytes of new data sent in 2ms before and during recovery
    nb=[q for q in news if p[0]-0.002<=q[0]<p[0]]
    nd=[q for q in news if p[0]<q[0]<=(done or p[0])]
    res.append(((rx[0][0]-p[0])*1e3 if rx else None, (done-p[0])*1e3 if done else None, len(rx),
                sum(q[5] for q in nb)*8/0.002/1e9, (sum(q[5] for q in nd)*8/((done-p[0]) if done and done>p[0] else 1)/1e9)))
for r in res[:25]: print("  first rexmit %.3f ms, recovered %.3f ms, %d rexmit frames, rate before %.1f Gb/s, during %.1f"%tuple(x if x is not None else -1 for x in r))
f=[r[1] for r in res if r[1]]
print("median recovered ms", st.median(f), "sum", sum(f))
print("median first rexmit ms", st.median([r[0] for r in res if r[0]]))
# rate by time since the last drop
import collections
bins=collections.defaultdict(int); cnt=collections.defaultdict(float)
dt=[p[0] for p in drops]
for q in news:
    i=bisect.bisect(dt,q[0])-1
    if i<0: continue
    bins[int((q[0]-dt[i])*1e3/2)]+=q[5]
# time coverage per bin
for i,t in enumerate(dt):
    nxt=dt[i+1] if i+1<len(dt) else t1
    for k in range(0,40):
        lo=t+k*0.002; hi=min(t+(k+1)*0.002,nxt)
        if hi>lo: cnt[k]+=hi-lo
print("rate by ms since drop:", " ".join("%d:%.1f"%(k*2, bins[k]*8/cnt[k]/1e9) for k in range(0,30,2) if cnt[k]>0.01))
