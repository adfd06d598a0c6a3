#!/bin/bash
# usage: tp.sh BUILDDIR OUTPREFIX [clients] [n] [test]
# prof.sh without perf record: perf stat of the ulstack redis-server's io_uring tracepoints
# (io_uring_enter and poll calls, poll arms, task-work items, completions, submissions)
RECORD=0 USTAT=task-clock,context-switches,syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_poll,io_uring:io_uring_poll_arm,io_uring:io_uring_task_add,io_uring:io_uring_complete,io_uring:io_uring_submit_req,io_uring:io_uring_queue_async_work \
	exec "$(dirname "$0")/prof.sh" "$@"
