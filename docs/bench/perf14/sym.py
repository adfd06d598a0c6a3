import subprocess,sys,re,collections
# usage: sym.py data GB ...  -> per-GB samples by (comm, sym)
def load(f):
    out=subprocess.run(['perf','report','-i',f,'--no-children','--sort','comm,sym','--stdio','-g','none','-q','--percent-limit','0'],capture_output=True,text=True).stdout
    tot=subprocess.run(['perf','report','-i',f,'--no-children','--stdio','-g','none','--sort','comm','-q','-n'],capture_output=True,text=True).stdout
    n=sum(int(l.split()[1]) for l in tot.splitlines() if l.strip())
    d={}
    for l in out.splitlines():
        m=re.match(r'\s*([\d.]+)%\s+(\S+)\s+(.*)$',l)
        if m: d[(m.group(2),m.group(3).strip())]=float(m.group(1))*n/100
    return d,n
args=sys.argv[1:]
cols=[]
for i in range(0,len(args),2):
    d,n=load(args[i]); gb=float(args[i+1]); cols.append(({k:v/gb for k,v in d.items()},n/gb))
keys=sorted(set().union(*[c[0] for c in cols]), key=lambda k:-sum(c[0].get(k,0) for c in cols))
print('total/GB', ' '.join('%8.0f'%c[1] for c in cols))
for k in keys[:int(__import__('os').environ.get('TOP','40'))]:
    print('%-60s'%(k[0][:9]+' '+k[1][:48]), ' '.join('%8.0f'%c[0].get(k,0) for c in cols))
