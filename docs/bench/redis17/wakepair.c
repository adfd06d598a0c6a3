/* Two processes ping-pong one byte N times through a wake-up of a given kind, and report the
 * rate and how often the two ran on the same CPU. Kinds:
 *   pipe    read(2)/write(2) on two pipes: the writer wakes the reader synchronously
 *           (pipe_write: wake_up_interruptible_sync_poll, WF_SYNC)
 *   eventfd read(2)/write(2) on two eventfds: a plain wake-up (eventfd_write: wake_up_locked_poll)
 *   uring   the reader's read of its pipe goes through io_uring (one io_uring_enter that submits
 *           and waits): the pipe's wake-up reaches the reader as io_uring task work, as a
 *           ulstack thread's device wait does.
 * With a third argument the two start pinned to different CPUs (parent CPU 0, child CPU 1)
 * and are freed to both CPUs after 1,000 round trips: how long the pair stays split then.
 * WORK_US=W: each side computes W microseconds per round trip (a busy loop on the clock).
 * usage: wakepair KIND N [split] */
#define _GNU_SOURCE
#include <liburing.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int kind;	/* 0 pipe, 1 eventfd, 2 uring */
static double work_s;

static void work(void)
{
	if (work_s <= 0)
		return;
	double end = now() + work_s;
	while (now() < end)
		;
}

static void rd(int fd, struct io_uring *r)
{
	uint64_t v;
	if (kind == 2) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(r);
		struct io_uring_cqe *cqe;
		io_uring_prep_read(sqe, fd, &v, 1, 0);
		if (io_uring_submit_and_wait(r, 1) < 0 || io_uring_wait_cqe(r, &cqe) < 0 || cqe->res != 1) {
			fprintf(stderr, "uring read failed\n");
			exit(1);
		}
		io_uring_cqe_seen(r, cqe);
		return;
	}
	if (read(fd, &v, kind == 1 ? 8 : 1) <= 0) {
		perror("read");
		exit(1);
	}
}

static void wr(int fd)
{
	uint64_t v = 1;
	if (write(fd, &v, kind == 1 ? 8 : 1) <= 0) {
		perror("write");
		exit(1);
	}
}

int main(int argc, char **argv)
{
	if (argc != 3 && argc != 4)
		return 2;
	int split = argc == 4;
	cpu_set_t one, all;
	CPU_ZERO(&all);
	CPU_SET(0, &all);
	CPU_SET(1, &all);
	kind = !strcmp(argv[1], "pipe") ? 0 : !strcmp(argv[1], "eventfd") ? 1 : 2;
	long n = atol(argv[2]);
	const char *w = getenv("WORK_US");
	work_s = w ? atof(w) / 1e6 : 0;
	if (n <= 0 || n > 10000000)
		return 2;
	int a[2], b[2];
	if (kind == 1) {
		a[0] = a[1] = eventfd(0, 0);
		b[0] = b[1] = eventfd(0, 0);
	} else if (pipe(a) || pipe(b)) {
		return 1;
	}
	int *cpus = mmap(NULL, 2 * n * sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (cpus == MAP_FAILED)
		return 1;
	pid_t c = fork();
	if (c == 0) {
		struct io_uring r;
		if (split) {
			CPU_ZERO(&one);
			CPU_SET(1, &one);
			sched_setaffinity(0, sizeof(one), &one);
		}
		if (kind == 2 && io_uring_queue_init(4, &r, 0))
			_exit(1);
		for (long i = 0; i < n; i++) {
			rd(a[0], &r);
			if (split && i == 1000)
				sched_setaffinity(0, sizeof(all), &all);
			cpus[n + i] = sched_getcpu();
			work();
			wr(b[1]);
		}
		_exit(0);
	}
	struct io_uring r;
	if (kind == 2 && io_uring_queue_init(4, &r, 0))
		return 1;
	if (split) {
		CPU_ZERO(&one);
		CPU_SET(0, &one);
		sched_setaffinity(0, sizeof(one), &one);
	}
	double t0 = now();
	for (long i = 0; i < n; i++) {
		if (split && i == 1000)
			sched_setaffinity(0, sizeof(all), &all);
		cpus[i] = sched_getcpu();
		work();
		wr(a[1]);
		rd(b[0], &r);
	}
	double t = now() - t0;
	waitpid(c, NULL, 0);
	long same = 0, first = -1, from = split ? 1001 : 0;
	for (long i = from; i < n; i++) {
		same += cpus[i] == cpus[n + i];
		if (first < 0 && cpus[i] == cpus[n + i])
			first = i - from;
	}
	printf("%-7s %8.0f round trips/s  same CPU %.3f", argv[1], n / t, (double)same / (n - from));
	if (split)
		printf("  first together after %ld round trips", first);
	printf("\n");
	return 0;
}
