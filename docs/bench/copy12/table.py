#!/usr/bin/python3
"""Medians and perproc/kernel ratios of the A/B runs in DIR (s-BUILD-I.json: the 1 and 8
stream points; l-BUILD-I.json: one stream at 0.1% loss). Usage: table.py DIR"""
import json, glob, statistics, collections, sys, os
import sys
D = sys.argv[1]
rows = collections.defaultdict(list)   # (kind, build, mode, streams) -> [(gbps, cpu)]
ratio = collections.defaultdict(list)  # (kind, build, streams) -> [(perproc/kernel gbps, cpu ratio)]
for f in sorted(glob.glob(D + '/*.json')):
    kind, build, i = os.path.basename(f)[:-5].split('-')
    d = json.load(open(f)); per = {}
    for r in d['runs']:
        loss = r.get('loss_percent', r.get('loss', 0))
        k = (kind, build, r['mode'], r['streams'])
        rows[k].append((r['aggregate_gbps'], r['cpu_s_per_gb'])); per[(r['mode'], r['streams'])] = r
    for n in (1, 8):
        if ('perproc', n) in per and ('kernel', n) in per:
            p, kk = per[('perproc', n)], per[('kernel', n)]
            ratio[(kind, build, n)].append((p['aggregate_gbps'] / kk['aggregate_gbps'], p['cpu_s_per_gb'] / kk['cpu_s_per_gb']))
med = lambda xs: statistics.median(xs)
print('| run | mode | streams | build | Gbit/s (each) | median | CPU s/GB (each) | median |')
print('|---|---|---|---|---|---|---|---|')
for k in sorted(rows):
    v = rows[k]
    print('| %s | %s | %d | %s | %s | %.2f | %s | %.3f |' % (k[0], k[2], k[3], k[1], ', '.join('%.2f' % g for g, _ in v), med([g for g, _ in v]), ', '.join('%.3f' % c for _, c in v), med([c for _, c in v])))
print()
print('| run | streams | build | perproc/kernel Gbit/s (each) | median | CPU/GB perproc/kernel (each) | median |')
print('|---|---|---|---|---|---|---|')
for k in sorted(ratio):
    v = ratio[k]
    print('| %s | %d | %s | %s | %.2fx | %s | %.2fx |' % (k[0], k[2], k[1], ', '.join('%.2f' % g for g, _ in v), med([g for g, _ in v]), ', '.join('%.2f' % c for _, c in v), med([c for _, c in v])))
