"""Voluntary sleeps of a `perf script` of sched:sched_switch with call chains, by thread
name and the first frames outside the scheduler (sleeps.sh)."""
import collections, re, sys

SKIP = re.compile(r"^(__schedule|schedule|schedule_\w+|__x64_sys_\w+|x64_sys_call|do_syscall_64|"
                  r"entry_SYSCALL\w*|\[unknown\]|io_schedule|__io_uring_\w+|io_cqring_wait|"
                  r"futex_wait_queue|__futex_wait|futex_wait|do_futex|__x64_sys_futex|syscall|"
                  r"do_nanosleep|hrtimer_nanosleep|common_nsleep|__x64_sys_clock_nanosleep)$")
tot, where = collections.Counter(), collections.Counter()
for block in open(sys.argv[1]).read().split("\n\n"):
    lines = [l for l in block.strip().split("\n") if l.strip()]
    if not lines:
        continue
    m = re.search(r"prev_comm=(\S+) .*prev_state=(\S+)", lines[0])
    if not m:
        continue
    comm, state = m.group(1), m.group(2)
    tot[(comm, state)] += 1
    if state.startswith("R"):
        continue
    syms = [l.split()[-1] for l in lines[1:]]
    kernel = [s for s in syms if not SKIP.match(s)]
    where[(comm, " < ".join(kernel[:5]))] += 1
for k, v in sorted(tot.items(), key=lambda t: -t[1]):
    print("%7d %s %s" % (v, k[0], k[1]))
print()
for (comm, w), v in where.most_common(30):
    print("%7d %-10s %s" % (v, comm, w))
