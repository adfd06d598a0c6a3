import sys,re,collections
comms=set(sys.argv[1].split(",")); pat=re.compile(sys.argv[2]); 
c=collections.Counter(); frames=[]; comm=None
for line in list(sys.stdin)+[""]:
    if not line.strip():
        if comm in comms:
            for i,f in enumerate(frames):
                if pat.search(f):
                    c[" < ".join(frames[max(0,i-2):i+1])]+=1; break
        frames=[];comm=None
    elif not line[0].isspace(): comm=line.split()[0]
    else:
        p=line.split()
        if len(p)>=2: frames.append(re.sub(r"\+0x[0-9a-f]+$","",p[1]))
for k,n in c.most_common(int(sys.argv[3]) if len(sys.argv)>3 else 15): print(n,k)
