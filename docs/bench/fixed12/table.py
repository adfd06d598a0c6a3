import json, statistics as st, sys
d=sys.argv[1]
rows={}
for b in ("base","mine"):
    for p in (1,2,3):
        for r in json.load(open("%s/%s-%d.json"%(d,b,p))):
            rows.setdefault((b,r["mode"]),[]).append((p,r))
for b in ("base","mine"):
    k=rows[(b,"kernel")]; u=rows[(b,"perproc")]
    med=lambda lst,f: st.median(f(r) for _,r in lst)
    print(b, "kernel client/server ms %.2f/%.2f faults %d/%d csw %d/%d" % (med(k,lambda r:r["client"]["cpu_ms"]),med(k,lambda r:r["server"]["cpu_ms"]),med(k,lambda r:r["client"]["faults"]),med(k,lambda r:r["server"]["faults"]),med(k,lambda r:r["client"]["csw"]),med(k,lambda r:r["server"]["csw"])))
    print(b, "perproc client/server ms %.2f/%.2f ulsd/process %.2f faults %d/%d csw %d/%d" % (med(u,lambda r:r["client"]["cpu_ms"]),med(u,lambda r:r["server"]["cpu_ms"]),med(u,lambda r:r["ulsd_ms_per_process"]),med(u,lambda r:r["client"]["faults"]),med(u,lambda r:r["server"]["faults"]),med(u,lambda r:r["client"]["csw"]),med(u,lambda r:r["server"]["csw"])))
    kr={(p,r["round"]):r for p,r in k}
    rat=[];extra=[]
    for p,r in u:
        kk=kr[(p,r["round"])]
        a=r["client"]["cpu_ms_mean"]+r["server"]["cpu_ms_mean"]+2*r["ulsd_ms_per_process"]
        bb=kk["client"]["cpu_ms_mean"]+kk["server"]["cpu_ms_mean"]
        rat.append(a/bb); extra.append((a-bb)/2)
    print(b, "pair ratio (perproc procs+ulsd)/(kernel)", " ".join("%.2f"%x for x in rat), "median %.2f"%st.median(rat), "| ms beyond the kernel per process", " ".join("%.2f"%x for x in extra), "median %.2f"%st.median(extra))
