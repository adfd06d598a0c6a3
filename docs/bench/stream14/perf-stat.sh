#!/bin/bash
# (stream14 helper, 2026-11-27) Ran on a testbed from `TB_NAME=s14tb TB_SUFFIX=s1 tests/testbed/testbed up --nodes 2`, its env in /tmp/s14-tb.env; base = a build of f955e94, mine = branch stream14.
# usage: s14-pstat.sh base|mine|kern P T -> one line: build P Gbit/s, per GB: cpu_s ctxsw futex uring
source /tmp/s14-tb.env
b=$1; P=$2; T=$3
if [ $b = kern ]; then
  S="ip netns exec $TB_KERNEL_NETNS"; C="ip netns exec $TB_KERNEL2_NETNS"; IP=$TB_KERNEL_IP
else
  if [ $b = base ]; then B=/work/wt/stream14-base/build; else B=/work/wt/stream14/build; fi
  S="ip netns exec $TB_NETNS $B/apps/ulsrun --ctl $TB_NODE1_CTL --"; C="ip netns exec $TB_NETNS $B/apps/ulsrun --ctl $TB_NODE2_CTL --"; IP=$TB_NODE1_IP
fi
$S iperf3 -4 -s -1 -p 5205 > /dev/null 2>&1 &
sleep 0.5
$C iperf3 -4 -c $IP -p 5205 -P $P -t $T -J > /tmp/s14-ps-cli.json 2>&1 &
sleep 0.3
pids=$(for p in $(pgrep -x iperf3); do grep -q 5205 /proc/$p/cmdline 2>/dev/null && echo $p; done | paste -sd,)
echo "pids=$pids" >&2; timeout -s INT $((T-1)) perf stat -x, -e task-clock,context-switches,syscalls:sys_enter_futex,syscalls:sys_enter_io_uring_enter -p $pids -o /tmp/s14-ps.txt >/dev/null 2>&1
wait
/usr/bin/python3 - $b $P <<'PY'
import json,sys
b,P=sys.argv[1:3]
d=json.load(open('/tmp/s14-ps-cli.json'));e=d['end']
v={}
for l in open('/tmp/s14-ps.txt'):
    f=l.strip().split(',')
    if len(f)>3 and f[0] and f[0][0].isdigit(): v[f[2]]=float(f[0])
# perf stat covers T-0.3 s of the T s run: scale bytes by the covered share
gbps=e['sum_received']['bits_per_second']/1e9
cover=float(d['start']['test_start']['duration'])
gb=gbps/8*(cover-1.0)
print('%s P=%s %.2f Gbit/s  perGB: cpu_s %.3f ctxsw %d futex %d uring %d' % (b,P,gbps, v.get('task-clock',0)/1000/gb, v.get('context-switches',0)/gb, v.get('syscalls:sys_enter_futex',0)/gb, v.get('syscalls:sys_enter_io_uring_enter',0)/gb))
PY
