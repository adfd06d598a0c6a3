import sys; sys.path.insert(0, __import__('os').path.dirname(__import__('os').path.abspath(__file__))); from gaps import read
a=read(sys.argv[1]+'/cap1.pcap'); b=read(sys.argv[1]+'/cap2.pcap')
A=int(sys.argv[2]) if len(sys.argv)>2 else 6
data1=[p for p in a if p[2]==6000]
from collections import Counter
d2=Counter((p[3],p[5],p[8]) for p in b if p[2]==6000)
a1=Counter((p[4],tuple(p[7]),p[8]) for p in a if p[1]==6000)
acks2=[p for p in b if p[1]==6000]
ev=sorted([(p[0],'D',p) for p in data1]+[(p[0],'A',p) for p in acks2])
last=None
for i,(t,k,p) in enumerate(ev):
    if k=='D' and last is not None and t-last>0.1:
        print("=== gap %.1f ms"%((t-last)*1e3))
        for (t2,k2,p2) in ev[max(0,i-5):i+A]:
            if k2=='D': st='ok' if d2[(p2[3],p2[5],p2[8])] else 'DROPPED'; print("  %.4f D seq=%d len=%d tsv=%d %s"%(t2,p2[3],p2[5],p2[8],st))
            else: st='ok' if a1[(p2[4],tuple(p2[7]),p2[8])] else 'DROPPED'; print("  %.4f A ack=%d sack=%s tsv=%d tse=%d %s"%(t2,p2[4],p2[7],p2[8],p2[9],st))
    if k=='D': last=t
