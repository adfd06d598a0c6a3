#!/usr/bin/python3
"""Where a profiled fixed.py run's processes spent their samples: `perf script` of a
`perf record -g` read from stdin, the samples of COMMS (default ulsbench, uls-stack) put
into the first area whose pattern one of their frames (innermost first) matches.

    perf script -i perf.data | docs/bench/fixed12/areas.py [COMM,...]
"""
import collections
import re
import sys

AREAS = [  # (area, frame patterns): the first area any frame matches, innermost frame first
    ("page faults", r"^(asm_exc_page_fault|exc_page_fault|do_user_addr_fault)$"),
    ("exec and the loader", r"^(do_execveat_common|load_elf_binary|_dl_\w+|_dl_start|dl_main|"
     r"__libc_start_main_impl|_dl_relocate_object|__cpu_indicator_init|get_available_features"
     r"\.constprop\.0|init_cpu_features|__libc_early_init|_dl_init|call_init)"),
    ("exit", r"^(do_exit|do_group_exit|exit_mmap|__x64_sys_exit_group|mmput|exit_files|"
     r"io_uring_release|io_ring_exit_work)$"),
    ("io_uring set-up", r"^(io_uring_setup|io_uring_queue_init_params|__io_uring_add_tctx_node"
     r"|io_uring_register_buf_ring|__do_sys_io_uring_register)"),
    ("thread creation", r"^(pthread_create@.*|clone3|__do_sys_clone3|__do_sys_clone)$"),
    ("mmap/munmap/mprotect", r"^(__x64_sys_mmap|__x64_sys_munmap|__x64_sys_mprotect|"
     r"ksys_mmap_pgoff|__vm_munmap|do_mprotect_pkey)$"),
    ("futex (park, wait, wake)", r"^(__x64_sys_futex|do_futex)$"),
    ("sleeps (nanosleep, poll)", r"^(common_nsleep|__x64_sys_clock_nanosleep|do_sys_poll|"
     r"__x64_sys_ppoll|__x64_sys_poll)$"),
    ("frames: TAP write (tx)", r"^(tun_chr_write_iter|tun_get_user)$"),
    ("frames: TAP read (rx)", r"^(tun_chr_read_iter|tun_do_read)$"),
    ("io_uring enter (other)", r"^(__do_sys_io_uring_enter|__x64_sys_io_uring_enter)$"),
    ("control socket (ulsd)", r"^(unix_\w+|__unix_\w+|__sys_connect|__x64_sys_connect)$"),
    ("file descriptors (fcntl, dup, close)", r"^(__x64_sys_fcntl|__x64_sys_close|__x64_sys_dup\w*"
     r"|__x64_sys_eventfd2)$"),
    ("other system calls", r"^(do_syscall_64|entry_SYSCALL_64.*)$"),
    ("ulsbench (pattern, table)", r"^(bench__\w+|table_init|pattern_\w+)$"),
    ("lwIP and libuls", r"^(tcp_\w+|ip4_\w+|pbuf_\w+|etharp_\w+|stk__\w+|nif_\w+|nif__\w+|"
     r"lwip_\w+|sys_\w+|uls_\w+)"),
]
RX = [(a, re.compile(p)) for a, p in AREAS]


def main():
    comms = set((sys.argv[1] if len(sys.argv) > 1 else "ulsbench,uls-stack").split(","))
    count, total = collections.Counter(), 0
    frames, comm = [], None
    for line in list(sys.stdin) + [""]:
        if not line.strip():
            if comm in comms:
                total += 1
                area = "other"
                for f in frames:
                    hit = next((a for a, r in RX if r.search(f)), None)
                    if hit:
                        area = hit
                        break
                if area == "other system calls":  # which one
                    area += ": " + next((f for f in frames if f.startswith("__x64_sys_") or
                                         f.startswith("__do_sys_")), "?")
                elif area == "other" and frames:
                    area += ": " + frames[0]
                count[area] += 1
            frames, comm = [], None
        elif not line[0].isspace():
            comm = line.split()[0]
        else:
            parts = line.split()
            if len(parts) >= 2:
                frames.append(re.sub(r"\+0x[0-9a-f]+$", "", parts[1]))
    print("%d samples of %s" % (total, ",".join(sorted(comms))))
    for a, n in count.most_common(40):
        print("%6.1f%%  %5d  %s" % (100.0 * n / max(total, 1), n, a))


if __name__ == "__main__":
    main()
