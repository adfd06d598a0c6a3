#!/bin/bash
# ns per run of the data path's BPF programs during one offload-off stream (bpf_stats).
B=/work/main/build; OUT=/tmp/bpfst; mkdir -p $OUT; TB=ulsbenchl3; export TB_SUFFIX=l3
. /work/main/docs/bench/cpu12/point.sh
old=$(cat /proc/sys/kernel/bpf_stats_enabled)
trap 'echo $old > /proc/sys/kernel/bpf_stats_enabled' EXIT
point_start --mode perproc --streams 1 --seconds 8 --offload off
echo 1 > /proc/sys/kernel/bpf_stats_enabled
bpftool -j prog show > $OUT/p0.json
sleep 3
bpftool -j prog show > $OUT/p1.json
echo $old > /proc/sys/kernel/bpf_stats_enabled
point_end
