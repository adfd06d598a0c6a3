import sys; sys.path.insert(0, __import__('os').path.dirname(__import__('os').path.abspath(__file__))); from gaps import read
a=read(sys.argv[1]+'/cap1.pcap')
data1=[p for p in a if p[2]==6000 and p[5]>0]
T=data1[-1][0]-data1[0][0]
import collections
g=collections.Counter(); n=collections.Counter()
for x,y in zip(data1,data1[1:]):
    d=y[0]-x[0]
    k='>100ms' if d>0.1 else '1-100ms' if d>0.001 else '0.3-1ms' if d>0.0003 else None
    if k: g[k]+=d; n[k]+=1
print("span %.2f s"%T, {k:"%d gaps, %.3f s"%(n[k],g[k]) for k in g})
