/* First-touch cost of fresh anonymous memory, 4 KiB pages against 2 MiB ones (stop 39).
 *
 *   gcc -O2 faults.c -o faults; ./faults PAUSE_S MIB
 *
 * Three rounds: MIB MiB madvised MADV_NOHUGEPAGE, touched once per 4 KiB, unmapped; then
 * the same madvised MADV_HUGEPAGE; PAUSE_S seconds after each (time for the balloon's free
 * page reporting to hand freed 2 MiB blocks back to the host). Prints microseconds per
 * MiB touched. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define HUGE ((size_t)2 << 20)

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static double touch(int huge, size_t len)
{
	uint8_t *m = mmap(NULL, len + HUGE, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	uint8_t *a = (uint8_t *)(((uintptr_t)m + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
	madvise(a, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	double t0 = now();
	for (size_t i = 0; i < len; i += 4096)
		a[i] = 1;
	double t = now() - t0;
	munmap(m, len + HUGE);
	return t;
}

int main(int argc, char **argv)
{
	int pause = argc > 1 ? atoi(argv[1]) : 0;
	size_t mib = argc > 2 ? (size_t)atoi(argv[2]) : 64;

	for (int r = 0; r < 3; r++) {
		double s = touch(0, mib << 20);
		if (pause)
			sleep(pause);
		double h = touch(1, mib << 20);
		if (pause)
			sleep(pause);
		printf("%zu MiB, pause %d s: 4 KiB pages %.1f us/MiB, 2 MiB pages %.1f us/MiB\n",
		       mib, pause, s * 1e6 / mib, h * 1e6 / mib);
	}
	return 0;
}
