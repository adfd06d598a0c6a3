import struct,sys
def read(fn):
    f=open(fn,'rb'); gh=f.read(24); out=[]
    while True:
        h=f.read(16)
        if len(h)<16: break
        ts,tu,il,ol=struct.unpack('<IIII',h); d=f.read(il)
        if len(d)<54 or d[12:14]!=b'\x08\x00': continue
        ihl=(d[14]&15)*4; ip=d[14:]; tl=struct.unpack('>H',ip[2:4])[0]
        t=ip[ihl:]; sp,dp,seq,ack=struct.unpack('>HHII',t[:12]); off=(t[12]>>4)*4; fl=t[13]
        plen=tl-ihl-off
        sacks=[]; tsv=tse=None
        o=t[20:off]; i=0
        while i<len(o):
            k=o[i]
            if k==0: break
            if k==1: i+=1; continue
            if i+1>=len(o): break
            l=o[i+1]
            if l<2: break
            if k==5: sacks=[struct.unpack('>II',o[j:j+8]) for j in range(i+2,i+l,8)]
            if k==8: tsv,tse=struct.unpack('>II',o[i+2:i+10])
            i+=l
        out.append((ts+tu/1e6,sp,dp,seq,ack,plen,fl,sacks,tsv,tse))
    return out
