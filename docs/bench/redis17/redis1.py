#!/usr/bin/python3
"""redis GET/SET with one client, repeated short runs, per-thread scheduling facts (helper redis17).
usage: redis1.py BUILD OUT.jsonl RUNS N TEST STACKS [PORT]
  STACKS: comma-separated, run in turn each round: ulstack (both under ulsrun on the testbed's
  nodes 1 and 2), ulspin (the same with ULS_SPIN_US=50), kernel (the testbed's k1 and k2).
  The testbed's variables are read from /tmp/r7/tb.env
  (TB_SUFFIX=r7 TB_NAME=r7tb tests/testbed/testbed up --nodes 2 > /tmp/r7/tb.env).
  SRV_CPU / CLI_CPU: pin the server / the client (taskset -c) for the pinned runs.
  PERF=1: perf record -a of the scheduler's events for the first 2 s of the client (1 s for
  perf.jsonl and perf2.jsonl)
  (/tmp/r7/perf-STACK-SEQ.data; episodes.py reads them).
Per run: a fresh redis-server, then redis-benchmark -c 1 -d 3 -n N --csv: rate/p50/p99/avg;
per thread of server (during the client's run) and client (its whole life): CPU run time and
run-queue wait (/proc/PID/task/TID/schedstat), voluntary/involuntary switches, migrations
(se.nr_migrations), and every 5 ms the CPU each main thread last ran on: same_cpu is the
fraction of those samples in which the two main threads' CPUs were the same."""
import json, os, re, signal, subprocess, sys, time

B, OUT, RUNS, N, TEST, STACKS = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6].split(",")
PORT = int(sys.argv[7]) if len(sys.argv) > 7 else 6391
env = {}
for line in open("/tmp/r7/tb.env"):
    m = re.match(r"export (\w+)=(.*)", line.strip())
    if m:
        env[m.group(1)] = m.group(2)
ULSRUN = os.path.join(B, "apps/ulsrun")
EXTRA_ENV = dict(os.environ)


PIN = {1: os.environ.get("SRV_CPU"), 2: os.environ.get("CLI_CPU")}


def on(stack, side, argv, pin=False):
    if pin and PIN[side] is not None:
        argv = ["taskset", "-c", PIN[side], *argv]
    if stack == "ulspin":
        return ["ip", "netns", "exec", env["TB_NETNS"], "env", "ULS_SPIN_US=50", ULSRUN, "--ctl", env["TB_NODE%d_CTL" % side], "--", *argv]
    if stack == "ulstack":
        return ["ip", "netns", "exec", env["TB_NETNS"], ULSRUN, "--ctl", env["TB_NODE%d_CTL" % side], "--", *argv]
    return ["ip", "netns", "exec", env["TB_KERNEL_NETNS"] if side == 1 else env["TB_KERNEL2_NETNS"], *argv]


def ip(stack):
    return env["TB_NODE1_IP"] if stack in ("ulstack", "ulspin") else env["TB_KERNEL_IP"]


def tasks(pid):
    res = {}
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return res
    for t in tids:
        d = "/proc/%d/task/%s/" % (pid, t)
        try:
            run, wait, slices = (int(x) for x in open(d + "schedstat").read().split())
            st = open(d + "stat").read()
            comm = st[st.index("(") + 1:st.rindex(")")]
            f = st[st.rindex(")") + 2:].split()
            cpu = int(f[36])
            mig = 0
            for line in open(d + "sched"):
                if line.startswith("se.nr_migrations"):
                    mig = int(line.split(":")[1])
            vcs = ivcs = 0
            for line in open(d + "status"):
                if line.startswith("voluntary_ctxt_switches"):
                    vcs = int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches"):
                    ivcs = int(line.split()[1])
        except (OSError, ValueError):
            continue
        res[t] = dict(comm=comm, run=run, wait=wait, slices=slices, cpu=cpu, mig=mig, vcs=vcs, ivcs=ivcs)
    return res


def cpu_idle():
    f = open("/proc/stat").readline().split()[1:]
    v = [int(x) for x in f]
    return sum(v), v[3] + v[4]


def one(stack, seq):
    port = PORT + seq % 50
    d = "/tmp/r7/rd%d" % seq
    os.makedirs(d, exist_ok=True)
    srv = subprocess.Popen(on(stack, 1, ["redis-server", "--port", str(port), "--bind", "0.0.0.0",
                                         "--protected-mode", "no", "--save", "", "--appendonly", "no",
                                         "--daemonize", "no", "--dir", d, "--logfile", ""], pin=True),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        for _ in range(200):
            r = subprocess.run(on(stack, 2, ["redis-cli", "-h", ip(stack), "-p", str(port), "SET", "key:__rand_int__", "abc"]),
                               capture_output=True, text=True, timeout=10)
            if r.stdout.strip() == "OK":
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("server not ready")
        load = open("/proc/loadavg").read().split()[0]
        t0, i0 = cpu_idle()
        s0 = tasks(srv.pid)
        cli = subprocess.Popen(on(stack, 2, ["redis-benchmark", "-h", ip(stack), "-p", str(port), "-t", TEST, "-c", "1",
                                              "-d", "3", "-n", str(N), "--csv"], pin=True),
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        c0 = None
        perf = None
        if os.environ.get("PERF"):
            perf = subprocess.Popen(["perf", "record", "-q", "-a", "-o", "/tmp/r7/perf-%s-%d.data" % (stack, seq), "-e",
                                     "sched:sched_switch,sched:sched_waking,sched:sched_wakeup,sched:sched_migrate_task,sched:sched_wakeup_new",
                                     "--", "sleep", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        last_c = {}
        samples = []
        while cli.poll() is None:
            c = tasks(cli.pid)
            if c and c0 is None:
                c0 = c
            if c:
                last_c = c
                s = tasks(srv.pid)
                samples.append(({k: v["cpu"] for k, v in s.items()}, {k: v["cpu"] for k, v in c.items()}))
            time.sleep(0.005)
        out = cli.stdout.read()
        if perf:
            perf.wait()
        s1 = tasks(srv.pid)
        t1, i1 = cpu_idle()
    finally:
        os.kill(srv.pid, signal.SIGTERM)
        try:
            srv.wait(5)
        except subprocess.TimeoutExpired:
            os.kill(srv.pid, signal.SIGKILL)
            srv.wait()
        subprocess.run(["rm", "-rf", d])
    row = [x.strip('"') for x in out.strip().splitlines()[-1].split(",")]
    hdr = [x.strip('"') for x in out.strip().splitlines()[0].split(",")]
    m = dict(zip(hdr, row))

    def delta(a, b):
        r = {}
        for t, v in b.items():
            z = a.get(t, {k: 0 for k in ("run", "wait", "slices", "mig", "vcs", "ivcs")})
            r[t] = {"comm": v["comm"], **{k: v[k] - z[k] for k in ("run", "wait", "slices", "mig", "vcs", "ivcs")}}
        return r
    sd = delta(s0, s1)
    cd = delta({}, last_c)  # the client's whole life
    # co-location of the two main threads (tid == pid) in the samples
    sp, cp = str(srv.pid), str(cli.pid)
    same = sum(1 for s, c in samples if sp in s and cp in c and s[sp] == c[cp])
    ncpu = {}
    for s, c in samples:
        ncpu.setdefault("srv", {}).setdefault(s.get(sp), 0)
        ncpu["srv"][s.get(sp)] += 1
        ncpu.setdefault("cli", {}).setdefault(c.get(cp), 0)
        ncpu["cli"][c.get(cp)] += 1
    rec = dict(seq=seq, stack=stack, test=TEST, n=N, load=float(load), rps=float(m["rps"]),
               p50=float(m.get("p50_latency_ms", 0)) * 1000, p99=float(m.get("p99_latency_ms", 0)) * 1000,
               avg=float(m.get("avg_latency_ms", 0)) * 1000,
               idle_frac=round((i1 - i0) / max(1, t1 - t0), 3), srv=sd, cli=cd, samples=len(samples),
               same_cpu=round(same / max(1, len(samples)), 3), cpus=ncpu)
    return rec


if __name__ == "__main__":
    with open(OUT, "a") as f:
        seq = 0
        for i in range(RUNS):
            for st in STACKS:
                rec = one(st, seq)
                seq += 1
                f.write(json.dumps(rec) + "\n")
                f.flush()
                srv_run = sum(v["run"] for v in rec["srv"].values()) / 1e3 / N
                srv_wait = sum(v["wait"] for v in rec["srv"].values()) / 1e3 / N
                cli_run = sum(v["run"] for v in rec["cli"].values()) / 1e3 / N
                cli_wait = sum(v["wait"] for v in rec["cli"].values()) / 1e3 / N
                mig = sum(v["mig"] for v in rec["srv"].values()) + sum(v["mig"] for v in rec["cli"].values())
                print("%-7s %3d load %5.2f rps %7.0f p50 %4.0f avg %5.0f p99 %5.0f | us/req srv run %5.1f wait %5.1f cli run %5.1f wait %5.1f | mig %5d same %.2f idle %.2f"
                      % (st, rec["seq"], rec["load"], rec["rps"], rec["p50"], rec["avg"], rec["p99"], srv_run, srv_wait,
                         cli_run, cli_wait, mig, rec["same_cpu"], rec["idle_frac"]), flush=True)
