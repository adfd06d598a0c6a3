/* A signal while a thread is blocked in recv() under ulsrun (run by test_shim.py).
 *
 *   sigwait PEER_IP TCP_ECHO_PORT MODE
 *
 * The thread connects to a TCP echo and blocks in recv() with nothing on the way; 200 ms
 * later SIGALRM arrives. The handler is installed as MODE says, and signal(7) says what
 * recv() must do:
 *   intr          sigaction without SA_RESTART: fail with EINTR soon after the signal;
 *   restart       sigaction with SA_RESTART: go on, and return the byte another thread
 *                 sends to the echo 600 ms in;
 *   signal        signal() (glibc: BSD semantics, SA_RESTART): as restart;
 *   siginterrupt  signal() then siginterrupt(SIGALRM, 1): as intr;
 *   timeout       SA_RESTART, but SO_RCVTIMEO (5 s) is set on the socket: as intr (a
 *                 socket call with a timeout is never restarted).
 *   closeall      as restart, and the handler, which runs while the thread is inside the
 *                 stack's wait, closes every descriptor where the library keeps its own
 *                 (the top quarter of the soft limit, stack/privfd.c): each close must fail
 *                 with EBADF, and recv() must still get the byte.
 * In every mode the handler must run while the thread is still blocked, and sigaction must
 * report the program's own handler and flags. Prints "ok MS" (the time recv() took) and
 * the stack's rtc_shim_* counters (uls_counters, found with dlsym: the shim exports it),
 * and exits 0, or says what went wrong and exits 1.
 */
#include <dlfcn.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "rtccounters.h"

static volatile sig_atomic_t handled, closed;
static int sd, close_from = -1;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void on_alarm(int sig)
{
	int e = errno;

	(void)sig;
	handled++;
	/* Whatever the thread was doing, the program may not close the library's files. */
	for (int fd = close_from; close_from >= 0 && fd < close_from + 4096; fd++)
		if (close(fd) == 0)
			closed++;
	errno = e;
}

static void *late_sender(void *arg)
{
	(void)arg;
	usleep(600000);
	if (send(sd, "x", 1, 0) != 1)
		fprintf(stderr, "late send failed: %s\n", strerror(errno));
	return NULL;
}


int main(int argc, char **argv)
{
	struct sockaddr_in peer = { .sin_family = AF_INET };
	struct sigaction sa, now;
	struct itimerval it = { .it_value = { 0, 200000 } };
	pthread_t t;
	char c;

	if (argc != 4 || inet_pton(AF_INET, argv[1], &peer.sin_addr) != 1)
		return 2;
	const char *mode = argv[3];
	bool restart = strcmp(mode, "restart") == 0 || strcmp(mode, "signal") == 0 ||
		       strcmp(mode, "closeall") == 0;
	int want_flags = strcmp(mode, "intr") == 0 || strcmp(mode, "siginterrupt") == 0 ?
			 0 : SA_RESTART;
	peer.sin_port = htons((unsigned short)atoi(argv[2]));
	sd = socket(AF_INET, SOCK_STREAM, 0);
	if (sd < 0 || connect(sd, (struct sockaddr *)&peer, sizeof(peer)) < 0) {
		perror("connect");
		return 1;
	}
	if (strcmp(mode, "signal") == 0 || strcmp(mode, "siginterrupt") == 0) {
		if (signal(SIGALRM, on_alarm) == SIG_ERR)
			return 1;
		/* Deprecated, and still what older programs call. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
		if (strcmp(mode, "siginterrupt") == 0 && siginterrupt(SIGALRM, 1) < 0)
			return 1;
#pragma GCC diagnostic pop
	} else {
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_alarm;
		sa.sa_flags = want_flags;
		sigaction(SIGALRM, &sa, NULL);
	}
	if (strcmp(mode, "closeall") == 0) {
		struct rlimit rl;
		if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
		    rl.rlim_cur < 256) {
			fprintf(stderr, "closeall: no soft limit to find the library's files by\n");
			return 1;
		}
		close_from = (int)(rl.rlim_cur - rl.rlim_cur / 4);
	}
	if (strcmp(mode, "timeout") == 0) {
		struct timeval tv = { 5, 0 };
		if (setsockopt(sd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
			return 1;
	}
	if (sigaction(SIGALRM, NULL, &now) < 0 || now.sa_handler != on_alarm ||
	    (now.sa_flags & (SA_RESTART | SA_SIGINFO)) != want_flags) {
		fprintf(stderr, "sigaction reports handler %p flags %#x, want %p %#x\n",
			(void *)now.sa_handler, (unsigned)now.sa_flags, (void *)on_alarm,
			(unsigned)want_flags);
		return 1;
	}
	if (restart)
		pthread_create(&t, NULL, late_sender, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	double t0 = now_ms();
	ssize_t n = recv(sd, &c, 1, 0);
	int err = errno;
	double took = now_ms() - t0;
	if (restart)
		pthread_join(t, NULL);
	if (handled != 1) {
		fprintf(stderr, "handler ran %d times; recv returned %zd (%s) after %.0f ms\n",
			(int)handled, n, n < 0 ? strerror(err) : "data", took);
		return 1;
	}
	if (!restart && !(n < 0 && err == EINTR && took < 500)) {
		fprintf(stderr, "recv returned %zd (%s) after %.0f ms, want EINTR at 200 ms\n", n,
			n < 0 ? strerror(err) : "data", took);
		return 1;
	}
	if (restart && !(n == 1 && c == 'x' && took >= 500)) {
		fprintf(stderr, "recv returned %zd (%s) after %.0f ms, want the echoed byte at 600 ms\n",
			n, n < 0 ? strerror(err) : "data", took);
		return 1;
	}
	if (closed) {
		fprintf(stderr, "the handler closed %d of the library's descriptors\n",
			(int)closed);
		return 1;
	}
	printf("ok %.0f", took);
	print_counters();
	printf("\n");
	return 0;
}
