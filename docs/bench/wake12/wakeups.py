#!/usr/bin/python3
"""Reads `perf script` of sched:sched_wakeup and sched:sched_switch events with call
chains (wakeups.sh) and counts the wake-ups of the point's threads (PIDS, comma-separated
process ids; their threads' names are ulsbench and uls-stack) by target thread name and
cause, from the waker's call chain; and the switches out by thread name and state."""
import collections
import re
import sys

pids = set(sys.argv[1].split(",")) if len(sys.argv) > 1 else set()
wake = collections.Counter()
switch = collections.Counter()


def cause(stack):
    s = " ".join(stack)
    if "hrtimer_wakeup" in s:
        return "timeout (hrtimer)"
    if "io_req_task_work_add" in s or "task_work_add" in s or "io_req_normal_work_add" in s:
        return "io_uring completion (task work)"
    if "io_submit_flush_completions" in s or "io_cqring_wake" in s or "io_cqring_ev_posted" in s:
        return "io_uring completion (its ring's waiter)"
    if "futex_wake" in s or "futex_requeue" in s:
        if "pthread_cond_signal" in s or "pthread_cond_broadcast" in s:
            return "condition variable"
        if "pthread_mutex_unlock" in s or "lll_lock_wake" in s or "lll_unlock_wake" in s:
            return "mutex handed over (the core lock)"
        return "futex (other)"
    if "eventfd" in s:
        return "eventfd (device wake)"
    return "other"


def flush(ev):
    if not ev:
        return
    head, stack = ev[0], ev[1:]
    m = re.search(r"sched:sched_wakeup: (\S+?):(\d+)", head) or \
        re.search(r"sched:sched_wakeup: comm=(\S+) pid=(\d+)", head)
    if m:
        wake[(m.group(1), cause(stack))] += 1
        return
    m = re.search(r"sched:sched_switch: (\S+?):\d+ \[\d+\] (\S+) ==>", head) or \
        re.search(r"sched:sched_switch: prev_comm=(\S+) .*prev_state=(\S+) ==>", head)
    if m:
        switch[(m.group(1), m.group(2))] += 1


ev = []
for line in sys.stdin:
    if not line.strip():
        flush(ev)
        ev = []
        continue
    if ev:
        ev.append(line.strip().split()[-2] if len(line.split()) > 1 else line.strip())
    else:
        ev = [line]
flush(ev)
print("wake-ups of the point's threads, by thread name and cause:")
for (comm, c), k in wake.most_common():
    if comm.startswith("ulsbench") or comm.startswith("uls-"):
        print("  %6d  %-10s %s" % (k, comm, c))
print("switches out, by thread name and state (S sleeping, R preempted):")
for (comm, st), k in switch.most_common():
    if comm.startswith("ulsbench") or comm.startswith("uls-"):
        print("  %6d  %-10s %s" % (k, comm, st))
