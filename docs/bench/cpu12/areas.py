#!/usr/bin/python3
"""Where a profiled point's CPU goes, per area and per verified GB (profile.sh's OUTDIR).

Reads OUTDIR/perf.data (perf record -a -g), pids.txt (the point's processes), stat.txt
(perf stat of those processes over the same 3 s), run.json (ulsbench) and snap0/snap1.txt
(frame counters). Keeps only the point's processes' samples and puts each in one area by
its leaf function and, for the kernel's, its call chain. CPU s per GB of an area = its
share of those samples x the processes' task-clock / the bytes moved in the window (the
point's aggregate rate x the window). Writes OUTDIR/areas.json and prints a summary.
User-space callers of memmove are not in the chains (no frame pointers), so the two user
copies (application -> pbuf, pbuf -> application) are one area.
"""
import collections
import json
import re
import subprocess
import sys

AREAS = [
    "pattern fill/check (the benchmark's)",
    "copy, user: application <-> pbuf",
    "copy, kernel: send (application -> skb)",
    "copy, kernel: receive (skb -> application)",
    "copy, kernel: TAP write (pbuf -> skb)",
    "copy, kernel: TAP read (skb -> rx buffer)",
    "copy, kernel: other",
    "kernel TCP/IP, skb, veth, bridge (not copies)",
    "kernel TAP: tun, skb, bridge, BPF (not copies)",
    "kernel: io_uring submit/complete",
    "kernel: wake-ups, scheduling, futex",
    "kernel: page faults",
    "kernel: timer interrupts",
    "kernel: system call entry/exit, other",
    "lwIP input",
    "lwIP output",
    "lwIP other",
    "ulstack: qring, rxpool, socket layer, drive, ethif, tso",
    "user: malloc/free, heap, pbuf alloc",
    "user: locks",
    "clock, timers (user)",
    "checksum",
    "other",
]

LWIP_IN = re.compile(r"^(tcp_input|tcp_receive|tcp_process|tcp_parseopt|ip4_input|ip_input|"
                     r"ethernet_input|tcp_oos|tcp_free_acked|tcp_ack|tcp_recved|"
                     r"tcp_update_rcv|tcp_listen_input|tcp_timewait|ip4addr|tcp_pcb_purge|"
                     r"pbuf_remove_header|pbuf_header|pbuf_cat|pbuf_chain|pbuf_realloc)")
LWIP_OUT = re.compile(r"^(tcp_output|tcp_write|tcp_enqueue|tcp_create_segment|tcp_send|"
                      r"tcp_rexmit|tcp_pbuf_prealloc|ip4_output|ip_output|etharp|"
                      r"ethernet_output|tcp_split|tcp_route|tcp_seg_add|pbuf_add_header)")
OURS = re.compile(r"^(q_|qring|tx_reap|arm_read|deliver|ring_wait|gather_output|nif_|stk__|"
                  r"drive|uls_|ethif|frame_|wire_|tso|vnet|linkoutput|on_recv|stream_|"
                  r"xfer|netops|lent_)")


def area(st):
    leaf = st[0] if st else "?"
    kst = [x[2:] for x in st if x.startswith("k:")]
    kchain = " ".join(kst[:60])
    if leaf.startswith("bench__pattern"):
        return AREAS[0]
    if leaf.startswith("k:"):
        k = leaf[2:]
        if (k in ("_copy_to_iter", "_copy_from_iter", "copy_page_to_iter",
                  "copy_page_from_iter", "rep_movs_alternative") or "copy_user" in k):
            if "tun_get_user" in kchain:
                return AREAS[4]
            if "tun_do_read" in kchain or "tun_put_user" in kchain:
                return AREAS[5]
            if "tcp_sendmsg" in kchain:
                return AREAS[2]
            if "tcp_recvmsg" in kchain:
                return AREAS[3]
            return AREAS[6]
        if re.search(r"clear_page|handle_mm_fault|exc_page_fault", kchain):
            return AREAS[11]
        if re.search(r"__schedule|finish_task_switch|try_to_wake_up|ttwu_|enqueue_task|"
                     r"dequeue_task|pick_next|update_curr|__switch_to|futex", kchain):
            return AREAS[10]
        if "csum" in k:
            return AREAS[21]
        if (re.search(r"hrtimer|apic_timer|tick_", kchain)
                and not re.search(r"tun_|tcp_|io_", kchain)):
            return AREAS[12]
        if re.search(r"tun_|bpf_prog|tcx", kchain):
            return AREAS[8]
        if re.search(r"tcp_|inet_|sock_|sk_|__sys_sendto|__sys_recvfrom|ip_|skb|veth|br_|"
                     r"netif_|net_rx|softirq|dev_queue_xmit|kmem_cache|kfree|page_frag", kchain):
            return AREAS[7]
        if re.search(r"io_uring|io_cqring|tctx_task_work|io_submit|io_issue", kchain):
            return AREAS[9]
        return AREAS[13]
    if "memmove" in leaf or "memcpy" in leaf:
        return AREAS[1]
    if "chksum" in leaf or "csum" in leaf:
        return AREAS[21]
    if re.match(r"(_int_malloc|_int_free|malloc|free|cfree|stk__heap|mem_malloc|mem_free|"
                r"pbuf_alloc|pbuf_free|memp_|tcp_seg_free|malloc_consolidate|unlink_chunk|"
                r"__libc_free|__libc_malloc|tcache|aligned_alloc|_mid_memalign)", leaf):
        return AREAS[18]
    if re.match(r"(pthread_mutex|__GI___pthread_mutex|__pthread_mutex|__lll_lock|lll_)", leaf):
        return AREAS[19]
    if re.search(r"clock_gettime|sys_now|sys_check_timeouts|sys_timeout|stk__now", leaf):
        return AREAS[20]
    if LWIP_IN.match(leaf):
        return AREAS[14]
    if LWIP_OUT.match(leaf):
        return AREAS[15]
    if OURS.match(leaf):
        return AREAS[17]
    if re.match(r"^(lwip_|sys_|mem_|memp_|pbuf|tcp|ip|netif|err_|inet_)", leaf):
        return AREAS[16]
    return AREAS[22]


def read_samples(d, pids):
    out = subprocess.run(["perf", "script", "-i", d + "/perf.data", "-F",
                          "comm,pid,tid,ip,sym"], capture_output=True, text=True).stdout
    samples, cur = [], None
    for line in out.split("\n"):
        if not line.strip():
            if cur is not None:
                samples.append(cur)
            cur = None
        elif not line.startswith((" ", "\t")):
            m = re.match(r"\s*(.+?)\s+(\d+)/(\d+)", line)
            cur = {"pid": m.group(2), "stack": []} if m and m.group(2) in pids else None
        elif cur is not None:
            parts = line.strip().split(None, 1)
            sym = parts[1] if len(parts) > 1 else "?"
            cur["stack"].append(("k:" + sym) if parts[0].startswith("ffffffff") else sym)
    if cur is not None:
        samples.append(cur)
    return samples, out.count("\n\n")


def stat(d):
    got = {}
    for line in open(d + "/stat.txt"):
        m = re.match(r"\s*([\d,.]+)\s+(?:msec\s+)?([\w:-]+)", line)
        if m:
            got[m.group(2)] = float(m.group(1).replace(",", ""))
    return got


def snap(path):
    try:
        lines = open(path).read().split("\n")
        res = {"t": float(lines[0])}
    except (OSError, ValueError):
        return None
    for line in lines[1:]:
        f = line.split()
        if len(f) == 3 and f[1] != "-":
            res[f[0]] = (int(f[1]), int(f[2]))
    return res


def main(d):
    pids = set(open(d + "/pids.txt").read().split())
    run = json.load(open(d + "/run.json"))["runs"][0]
    st = stat(d)
    samples, _ = read_samples(d, pids)
    counts = collections.Counter(area(s["stack"]) for s in samples)
    n = len(samples)
    window_s = 3.0
    gb = run["aggregate_gbps"] / 8.0 * window_s
    cpu_s = st.get("task-clock", 0.0) / 1000.0
    res = {"mode": run["mode"], "streams": run["streams"], "aggregate_gbps": run["aggregate_gbps"],
           "run_cpu_s_per_gb": run["cpu_s_per_gb"], "window_seconds": window_s,
           "window_gb": round(gb, 3), "cpu_seconds": round(cpu_s, 3),
           "cpu_s_per_gb": round(cpu_s / gb, 4), "samples": n,
           "per_gb": {k: round(v / gb) for k, v in st.items() if k not in ("task-clock", "seconds")},
           "areas": {}}
    for a in AREAS:
        if counts.get(a):
            share = counts[a] / n
            res["areas"][a] = {"share_pct": round(100 * share, 2),
                               "cpu_s_per_gb": round(share * cpu_s / gb, 4)}
    s0, s1 = snap(d + "/snap0.txt"), snap(d + "/snap1.txt")
    if s0 is None or s1 is None:
        s0 = s1 = {"t": 0.0}
    dt = (s1["t"] - s0["t"]) or 1.0
    gbps_bytes = run["aggregate_gbps"] / 8.0    # GB per second
    def per_gb(key, i):
        return round((s1[key][i] - s0[key][i]) / dt / gbps_bytes) if key in s0 and key in s1 else None
    if run["mode"] == "kernel":
        k1, k2 = [k for k in s0 if k.endswith("-k1")], [k for k in s0 if k.endswith("-k2")]
        if k1 and k2:
            res["frames_per_gb"] = {"data segments received (receiver TcpInSegs)": per_gb(k1[0], 0),
                                    "ACKs sent (receiver TcpOutSegs)": per_gb(k1[0], 1)}
    else:
        res["frames_per_gb"] = {"data frames received (node2 steered)": per_gb("node2", 0),
                                "ACK frames sent (node2 transmitted)": per_gb("node2", 1),
                                "data frames sent (node1 transmitted)": per_gb("node1", 1)}
    json.dump(res, open(d + "/areas.json", "w"), indent=1)
    print("%s %d streams: %.2f Gbit/s, %.3f CPU s/GB in the window (%d samples); per GB: %s; %s"
          % (res["mode"], res["streams"], res["aggregate_gbps"], res["cpu_s_per_gb"], n,
             res["per_gb"], res.get("frames_per_gb")))
    for a, v in sorted(res["areas"].items(), key=lambda kv: -kv[1]["share_pct"]):
        print("%6.2f%%  %.4f s/GB  %s" % (v["share_pct"], v["cpu_s_per_gb"], a))


if __name__ == "__main__":
    main(sys.argv[1])
