# Samples the perproc sender's endpoints (ulsstat) and the kernel sender's sockets (ss -tin)
# every 0.2 s while a ulsbench sweep runs; bounded by --seconds.
import json, subprocess, sys, time, os
W = "/work/wt/loss13d"
out = open(sys.argv[1], "w")
end = time.time() + float(sys.argv[2])
env = {}
def getenv():
    r = subprocess.run([W + "/tests/testbed/testbed", "env"], capture_output=True, text=True,
                       env=dict(os.environ, TB_SUFFIX="l3", TB_NAME="ulsbench"), timeout=10)
    e = {}
    for l in r.stdout.splitlines():
        if l.startswith("export "):
            k, _, v = l[7:].partition("=")
            e[k] = v.strip("'\"")
    return e
while time.time() < end:
    t = time.time()
    if not env.get("TB_NODE1_CTL"):
        try:
            env = getenv()
        except Exception:
            env = {}
    rec = {"t": t}
    if env.get("TB_NODE1_CTL"):
        r = subprocess.run([W + "/build/apps/ulsstat", "--ctl", env["TB_NODE1_CTL"], "--json"],
                           capture_output=True, text=True, timeout=5)
        try:
            d = json.loads(r.stdout)
            rec["uls"] = d.get("connections", [])
        except ValueError:
            env = {}
    if env.get("TB_KERNEL2_NETNS"):
        r = subprocess.run(["ip", "netns", "exec", env["TB_KERNEL2_NETNS"], "ss", "-tinH", "state", "established"],
                           capture_output=True, text=True, timeout=5)
        if r.stdout.strip():
            rec["ss"] = r.stdout
    if len(rec) > 1:
        out.write(json.dumps(rec) + "\n"); out.flush()
    time.sleep(max(0, 0.2 - (time.time() - t)))
