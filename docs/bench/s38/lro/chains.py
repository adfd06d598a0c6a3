#!/usr/bin/python3
"""Per thread of a profiled point: its share of the point's samples and the share of its
samples whose call chain holds each of a few functions (user-space chains hold the leaf
only: no frame pointers). Usage: perf script -i OUT/perf.data --pid PIDS -F tid,ip,sym |
chains.py"""
import collections
import sys

KEYS = ("tun_chr_write_iter", "tun_chr_read_iter", "io_read_mshot", "io_cqring_wait",
        "sock_def_readable", "bpf_prog", "nif_inet_chksum", "tcp_input", "ip4_input",
        "stk__rxmerge_input")
tot = collections.Counter()
hit = collections.defaultdict(collections.Counter)
cur, syms = None, set()


def done():
    if cur is None:
        return
    tot[cur] += 1
    for k in KEYS:
        if any(k in s for s in syms):
            hit[cur][k] += 1


for line in sys.stdin:
    if not line.strip():
        done()
        cur, syms = None, set()
    elif not line[0].isspace():
        done()
        cur, syms = line.split()[0], set()
    else:
        parts = line.split()
        if len(parts) >= 2:
            syms.add(parts[1])
done()
T = sum(tot.values())
for t, n in tot.most_common(4):
    print(t, n, "samples, %.1f%% of the point's;" % (100 * n / T),
          ", ".join("%s %.0f%%" % (k, 100 * v / n) for k, v in hit[t].most_common()))
