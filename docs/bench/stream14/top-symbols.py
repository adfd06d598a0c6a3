# (stream14 helper) Top leaf symbols per thread of a perf.data recorded with -g: python3 top-symbols.py perf.data [N]
import sys, collections, subprocess
data=sys.argv[1]
out=subprocess.run(['perf','script','-i',data,'-F','comm,tid,ip,sym,dso'],capture_output=True,text=True).stdout
# with -g recorded, perf script prints stacks; first line after header is leaf
cnt=collections.defaultdict(collections.Counter); tot=collections.Counter()
cur=None; take=False
for line in out.splitlines():
    if not line.strip(): cur=None; continue
    if not line.startswith('\t') and not line.startswith(' '):
        parts=line.split(); cur=(parts[0],parts[1]); take=True; continue
    if take and cur:
        f=line.strip().split(None,1); sym=f[1] if len(f)>1 else '?'
        sym=sym.split('+0x')[0]
        if '(' in sym and sym.endswith(')'): sym=sym
        cnt[cur][sym]+=1; tot[cur]+=1; take=False
for k,v in sorted(tot.items(), key=lambda x:-x[1]):
    print('==',k,v)
    for s,c in cnt[k].most_common(int(sys.argv[2]) if len(sys.argv)>2 else 12):
        print('   %5.1f%% %s'%(100*c/v,s))
