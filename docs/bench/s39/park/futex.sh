#!/bin/bash
# futex system calls and context switches of the offload-off sender, per GB: B=build OUT=dir
B=$1; OUT=$2; mkdir -p $OUT; TB=ulsbenchl2; export TB_SUFFIX=l2
. /work/main/docs/bench/cpu12/point.sh
point_start --mode perproc --streams 1 --seconds 8 --offload off
P=$(point_pids)
S=$(for p in $P; do c=$(cat /proc/$p/comm); [ "$c" = ulsbench ] && echo "$(awk '{print $14+$15}' /proc/$p/stat) $p"; done | sort -n | tail -1 | cut -d' ' -f2)
perf stat -e syscalls:sys_enter_futex,context-switches,task-clock -p $S -o $OUT/stat.txt -- sleep 3 > /dev/null 2>&1
point_end
