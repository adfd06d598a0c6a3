import sys, statistics as st, bisect; sys.path.insert(0, __import__('os').path.dirname(__import__('os').path.abspath(__file__))); from gaps import read
from collections import Counter
a=read(sys.argv[1]+'/cap1.pcap'); b=read(sys.argv[1]+'/cap2.pcap')
data1=[p for p in a if p[2]==6000 and p[5]>0]
data2=[p for p in b if p[2]==6000 and p[5]>0]
d2=Counter((p[3],p[5],p[8]) for p in data2)
acks2=[p for p in b if p[1]==6000]
acks1=[p for p in a if p[1]==6000]
hi=None; drops=[]
for p in data1:
    end=(p[3]+p[5])&0xffffffff
    if hi is None or ((end-hi)&0x80000000)==0 and end!=hi:
        hi=end
        if not d2[(p[3],p[5],p[8])]: drops.append(p)
R=[]
for p in drops:
    s=p[3]
    nx=[q for q in data2 if q[0]>p[0] and ((q[3]-s)&0xffffffff)<0x80000000 and q[3]!=s][:1]
    if not nx: continue
    t_ooo=nx[0][0]
    sk=[q for q in acks2 if q[0]>=t_ooo-1e-4 and q[4]==s and q[7]][:1]
    if not sk: continue
    sk1=[q for q in acks1 if q[0]>=sk[0][0]-1e-4 and q[4]==s and q[7]][:1]
    rx=[q for q in data1 if q[0]>p[0] and q[3]==s][:1]
    if not sk1 or not rx: continue
    R.append(((t_ooo-p[0])*1e3,(sk[0][0]-t_ooo)*1e3,(sk1[0][0]-sk[0][0])*1e3,(rx[0][0]-sk1[0][0])*1e3))
for k,n in enumerate(["drop->next frame at rcv","rcv: OOO frame -> SACK sent","bridge","sender: SACK -> rexmit"]):
    v=[r[k] for r in R]; print("%-30s median %.3f ms  p90 %.3f  max %.3f (n=%d)"%(n, st.median(v), sorted(v)[int(len(v)*.9)], max(v), len(v)))
# general: ACK (no sack) latency after the frame whose end == ack arrived
ends={}
for q in data2: ends.setdefault((q[3]+q[5])&0xffffffff, q[0])
v=[(q[0]-ends[q[4]])*1e3 for q in acks2 if not q[7] and q[4] in ends and q[0]>=ends[q[4]]]
print("in-order: frame end -> ACK sent median %.3f p90 %.3f (n=%d)"%(st.median(v), sorted(v)[int(len(v)*.9)], len(v)))
