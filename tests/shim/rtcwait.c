/* Blocking calls under ulsrun drive the stack (run to completion, uls_socket_drive):
 * threads racing each other and the stack thread, fork and exec while a thread is inside
 * such a wait (run by test_shim.py).
 *
 *   rtcwait PEER_IP TCP_ECHO_PORT threads|fork|exec
 *
 * threads  four threads each exchange 300 messages of 1 to 3000 bytes with the echo on
 *          their own connection, blocking in send and recv; every byte is checked.
 * fork     one thread exchanges messages with pauses (so that it keeps entering the
 *          device wait) while the main thread forks eight times; each child makes its own
 *          connection, exchanges a message and exits; the thread's exchange must go on.
 * exec     one thread blocks in recv with nothing on the way while the main thread execs
 *          this program again ("exec-child"), which makes a connection of its own and
 *          exchanges a message.
 * epoll    one epoll set holds a nonblocking connection and a pipe: 300 messages through
 *          the echo, each awaited in epoll_wait; then a byte another thread writes to the
 *          pipe 100 ms later wakes epoll_wait (a kernel descriptor among the sockets); then
 *          SIGALRM (SA_RESTART) during an epoll_wait with nothing on the way makes it fail
 *          with EINTR, as epoll_wait is never restarted (signal(7)).
 * poll     the same with poll() on the connection and the pipe.
 * select   the same with select(); and select() updates its timeout to the time left
 *          (Linux): after the signal at 100 ms of a 3 s wait, 2.5 to 2.95 s; and a
 *          select() with 200 ms to wait and nothing on the way returns 0 after 200 ms,
 *          its sets cleared and its timeout zero.
 * pselect  the same with pselect() and its signal mask (SIGALRM blocked outside the wait,
 *          the mask opens it), which leaves the timeout alone.
 * idle     this thread makes the process's first connection (so the device's first
 *          receive reads are its own), then waits 400 ms in epoll_wait on a set of a pipe
 *          alone while another thread exchanges 20 messages on that connection: the frames
 *          complete reads this thread armed, and io_uring's task work interrupts whatever
 *          this thread sleeps in; epoll_wait must still return 0 after its 400 ms, as the
 *          kernel's does when no handler ran (no EINTR).
 * epollring one epoll set holds a nonblocking connection alone: 300 messages through the
 *          echo, each awaited in epoll_wait; prints how many device waits the echoes took
 *          in poll(2) and as one io_uring_enter (dev_poll_waits, dev_ring_waits: with the
 *          wake-up in the receive ring, netif/qring.c, test_shim.py expects none in
 *          poll(2)). Then ten times: another thread
 *          writes a byte to a pipe and adds the pipe to the set while this thread waits in
 *          epoll_wait (2 s, nothing on the way); the wait must end with the pipe's event
 *          within 10 ms of the add (at most three of ten later; without the wake-up each
 *          took 19-23 ms, the next timer's), as Linux's epoll_ctl wakes an epoll_wait: the device's wait does not watch the kernel instance while the
 *          set has no kernel descriptor, and the add ends it (apps/preload/uepoll.c).
 * Prints "ok" and the stack's rtc_shim_* counters (uls_counters, through dlsym), exits 0;
 * or says what went wrong and exits 1.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rtccounters.h"

static struct sockaddr_in peer = { .sin_family = AF_INET };
static volatile int failed;


static int dial(void)
{
	int sd = socket(AF_INET, SOCK_STREAM, 0);

	if (sd < 0 || connect(sd, (struct sockaddr *)&peer, sizeof(peer)) < 0) {
		fprintf(stderr, "connect: %s\n", strerror(errno));
		return -1;
	}
	return sd;
}

/* Send len bytes of pattern seed and read them back from the echo. */
static int exchange(int sd, size_t len, unsigned seed)
{
	static __thread char out[4096], in[4096];

	for (size_t i = 0; i < len; i++)
		out[i] = (char)(seed * 31 + i);
	for (size_t o = 0; o < len;) {
		ssize_t n = send(sd, out + o, len - o, 0);
		if (n <= 0) {
			fprintf(stderr, "send: %zd %s\n", n, strerror(errno));
			return -1;
		}
		o += (size_t)n;
	}
	for (size_t o = 0; o < len;) {
		ssize_t n = recv(sd, in + o, len - o, 0);
		if (n <= 0) {
			fprintf(stderr, "recv: %zd %s\n", n, n < 0 ? strerror(errno) : "EOF");
			return -1;
		}
		o += (size_t)n;
	}
	if (memcmp(in, out, len) != 0) {
		fprintf(stderr, "echo differs (seed %u)\n", seed);
		return -1;
	}
	return 0;
}

static void *talker(void *arg)
{
	int rounds = (int)(intptr_t)arg, pause_us = rounds < 0 ? 2000 : 0;
	int sd = dial();

	if (rounds < 0)
		rounds = -rounds;
	if (sd < 0) {
		failed = 1;
		return NULL;
	}
	for (int i = 0; i < rounds && !failed; i++) {
		if (exchange(sd, 1 + (size_t)(i * 977) % 3000, (unsigned)i) < 0) {
			failed = 1;
			break;
		}
		if (pause_us)
			usleep(pause_us);
	}
	close(sd);
	return NULL;
}

static void *blocked_reader(void *arg)
{
	char c;

	(void)arg;
	int sd = dial();
	if (sd >= 0)
		recv(sd, &c, 1, 0);  /* nothing comes: exec ends this thread */
	return NULL;
}

static int pipefd[2];
static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

static void *pipe_writer(void *arg)
{
	(void)arg;
	usleep(100000);
	if (write(pipefd[1], "p", 1) != 1)
		failed = 1;
	return NULL;
}

enum waiter { W_EPOLL, W_POLL, W_SELECT, W_PSELECT };
static struct timeval sel_left;  /* select's timeout after the last W_SELECT wait */

/* Wait for the set (epoll) or the pair (poll, select, pselect); returns how many are ready
 * and the first ready descriptor in *which. */
static int wait_set(enum waiter how, int ep, int sd, int timeout, int *which)
{
	if (how == W_SELECT || how == W_PSELECT) {
		fd_set r;
		FD_ZERO(&r);
		FD_SET(sd, &r);
		FD_SET(pipefd[0], &r);
		int hi = (sd > pipefd[0] ? sd : pipefd[0]) + 1, n;
		if (how == W_SELECT) {
			sel_left = (struct timeval){ timeout / 1000, timeout % 1000 * 1000 };
			n = select(hi, &r, NULL, NULL, &sel_left);
		} else {
			/* SIGALRM is blocked outside the wait: only pselect's mask lets it in. */
			struct timespec ts = { timeout / 1000, timeout % 1000 * 1000000L };
			const struct timespec before = ts;
			sigset_t open;
			pthread_sigmask(SIG_SETMASK, NULL, &open);
			sigdelset(&open, SIGALRM);
			n = pselect(hi, &r, NULL, NULL, &ts, &open);
			if (ts.tv_sec != before.tv_sec || ts.tv_nsec != before.tv_nsec)
				return fprintf(stderr, "pselect changed its timeout\n"), -2;
		}
		*which = n > 0 ? (FD_ISSET(sd, &r) ? sd : pipefd[0]) : -1;
		if (n > 0 && FD_ISSET(sd, &r) + FD_ISSET(pipefd[0], &r) != n)
			return fprintf(stderr, "select said %d, sets say otherwise\n", n), -2;
		return n;
	}
	if (how == W_POLL) {
		struct pollfd p[2] = { { .fd = sd, .events = POLLIN },
				       { .fd = pipefd[0], .events = POLLIN } };
		int n = poll(p, 2, timeout);
		*which = n > 0 ? (p[0].revents ? sd : pipefd[0]) : -1;
		return n;
	}
	struct epoll_event got[4];
	int n = epoll_wait(ep, got, 4, timeout);
	*which = n > 0 ? got[0].data.fd : -1;
	return n;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* 300 rounds: 100 bytes sent, and their echo read back with a wait (how, on ep) before
 * each read. 0, or -1 said on stderr. */
static int echo_rounds(enum waiter how, int ep, int sd)
{
	char out[100], in[100];
	int which;

	for (int i = 0; i < 300; i++) {
		memset(out, 'a' + i % 26, sizeof(out));
		if (send(sd, out, sizeof(out), 0) != (ssize_t)sizeof(out))
			return fprintf(stderr, "send %d: %s\n", i, strerror(errno)), -1;
		for (size_t o = 0; o < sizeof(in);) {
			int n = wait_set(how, ep, sd, 5000, &which);
			if (n != 1 || which != sd)
				return fprintf(stderr, "epoll_wait %d: %d %s\n", i, n, strerror(errno)), -1;
			ssize_t r = recv(sd, in + o, sizeof(in) - o, 0);
			if (r < 0 && errno == EAGAIN)
				continue;
			if (r <= 0)
				return fprintf(stderr, "recv %d: %s\n", i, strerror(errno)), -1;
			o += (size_t)r;
		}
		if (memcmp(in, out, sizeof(in)) != 0)
			return fprintf(stderr, "echo %d differs\n", i), -1;
	}
	return 0;
}

static int epoll_mode(enum waiter how)
{
	struct epoll_event ev;
	int which;
	pthread_t t;
	int sd = dial(), ep = epoll_create1(0);

	if (sd < 0 || ep < 0 || pipe(pipefd) < 0)
		return -1;
	fcntl(sd, F_SETFL, O_NONBLOCK);
	if (how == W_PSELECT) {
		sigset_t alrm;
		sigemptyset(&alrm);
		sigaddset(&alrm, SIGALRM);
		pthread_sigmask(SIG_BLOCK, &alrm, NULL);
	}
	ev.events = EPOLLIN;
	ev.data.fd = sd;
	epoll_ctl(ep, EPOLL_CTL_ADD, sd, &ev);
	ev.data.fd = pipefd[0];
	epoll_ctl(ep, EPOLL_CTL_ADD, pipefd[0], &ev);
	if (echo_rounds(how, ep, sd) < 0)
		return -1;
	pthread_create(&t, NULL, pipe_writer, NULL);
	int n = wait_set(how, ep, sd, 5000, &which);
	pthread_join(t, NULL);
	if (n != 1 || which != pipefd[0])
		return fprintf(stderr, "pipe: epoll_wait %d\n", n), -1;
	char c;
	if (read(pipefd[0], &c, 1) != 1)
		return -1;
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = SA_RESTART };
	struct itimerval it = { .it_value = { 0, 100000 } };
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	n = wait_set(how, ep, sd, 3000, &which);
	if (!(n == -1 && errno == EINTR && alarms == 1))
		return fprintf(stderr, "signal: epoll_wait %d (%s), %d alarms\n", n,
			       strerror(errno), (int)alarms), -1;
	if (how == W_SELECT) {
		double left = sel_left.tv_sec * 1e3 + sel_left.tv_usec / 1e3;
		if (left < 2500 || left > 2950)
			return fprintf(stderr, "select left %.0f ms of 3000 after a signal at 100\n",
				       left), -1;
		double t0 = now_ms();
		n = wait_set(how, ep, sd, 200, &which);
		double took = now_ms() - t0;
		if (n != 0 || sel_left.tv_sec || sel_left.tv_usec || took < 195 || took > 1000)
			return fprintf(stderr, "select timeout: %d after %.0f ms, %ld.%06ld left\n",
				       n, took, (long)sel_left.tv_sec, (long)sel_left.tv_usec), -1;
	}
	return 0;
}

/* One of the stack's counters by name (uls_counters through dlsym); -1 without it. */
static long long counter(const char *name)
{
	int (*get)(struct counter *, size_t) =
		(int (*)(struct counter *, size_t))dlsym(RTLD_DEFAULT, "uls_counters");
	static struct counter c[512];

	if (!get)
		return -1;
	int n = get(c, 512);
	for (int i = 0; i < n && i < 512; i++)
		if (strcmp(c[i].name, name) == 0)
			return (long long)c[i].value;
	return -1;
}

static int ring_ep;
static double ring_added_ms;
static long long ring_delta, poll_delta;  /* epollring: the echoes' device waits */

static void *pipe_adder(void *arg)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = pipefd[0] };

	(void)arg;
	usleep(30000);
	if (write(pipefd[1], "p", 1) != 1)
		failed = 1;
	ring_added_ms = now_ms();
	if (epoll_ctl(ring_ep, EPOLL_CTL_ADD, pipefd[0], &ev) < 0)
		failed = 1;
	return NULL;
}

static int epollring_mode(void)
{
	struct epoll_event ev = { .events = EPOLLIN }, got;
	pthread_t t;
	int sd = dial();

	ring_ep = epoll_create1(0);
	if (sd < 0 || ring_ep < 0 || pipe(pipefd) < 0)
		return -1;
	fcntl(sd, F_SETFL, O_NONBLOCK);
	ev.data.fd = sd;
	epoll_ctl(ring_ep, EPOLL_CTL_ADD, sd, &ev);
	long long ring0 = counter("dev_ring_waits"), poll0 = counter("dev_poll_waits");
	if (echo_rounds(W_EPOLL, ring_ep, sd) < 0)
		return -1;
	ring_delta = counter("dev_ring_waits") - ring0;
	poll_delta = counter("dev_poll_waits") - poll0;
	int late = 0;
	for (int i = 0; i < 10 && !failed; i++) {
		char c;
		pthread_create(&t, NULL, pipe_adder, NULL);
		int n = epoll_wait(ring_ep, &got, 1, 2000);
		double took = now_ms() - ring_added_ms;
		pthread_join(t, NULL);
		if (n != 1 || got.data.fd != pipefd[0])
			return fprintf(stderr, "add %d: epoll_wait %d (%s)\n", i, n,
				       n < 0 ? strerror(errno) : "-"), -1;
		if (took > 10)
			late++;
		fprintf(stderr, "add%d=%.0fms\n", i, took);
		if (epoll_ctl(ring_ep, EPOLL_CTL_DEL, pipefd[0], NULL) < 0 ||
		    read(pipefd[0], &c, 1) != 1)
			return -1;
	}
	if (late > 3)
		return fprintf(stderr, "%d of 10 adds ended the wait more than 10 ms later\n",
			       late), -1;
	return failed ? -1 : 0;
}

static int idle_sd;

static void *idle_talker(void *arg)
{
	(void)arg;
	usleep(50000);
	for (int i = 0; i < 20 && !failed; i++)
		if (exchange(idle_sd, 100, (unsigned)i) < 0)
			failed = 1;
	return NULL;
}

static int idle_mode(void)
{
	struct epoll_event ev = { .events = EPOLLIN }, got;
	struct timespec t0, t1;
	pthread_t t;

	idle_sd = dial();
	int ep = epoll_create1(0);
	if (idle_sd < 0 || ep < 0 || pipe(pipefd) < 0)
		return -1;
	ev.data.fd = pipefd[0];
	epoll_ctl(ep, EPOLL_CTL_ADD, pipefd[0], &ev);
	pthread_create(&t, NULL, idle_talker, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int n = epoll_wait(ep, &got, 1, 400);
	int err = errno;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	pthread_join(t, NULL);
	double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	if (n != 0 || ms < 390)
		return fprintf(stderr, "idle: epoll_wait %d (%s) after %.0f ms of 400\n", n,
			       n < 0 ? strerror(err) : "-", ms), -1;
	return failed ? -1 : 0;
}

int main(int argc, char **argv)
{
	pthread_t t[4];

	if (argc != 4 || inet_pton(AF_INET, argv[1], &peer.sin_addr) != 1)
		return 2;
	peer.sin_port = htons((unsigned short)atoi(argv[2]));
	const char *mode = argv[3];
	if (strcmp(mode, "threads") == 0) {
		for (int i = 0; i < 4; i++)
			pthread_create(&t[i], NULL, talker, (void *)(intptr_t)300);
		for (int i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
	} else if (strcmp(mode, "fork") == 0) {
		pthread_create(&t[0], NULL, talker, (void *)(intptr_t)-200);
		for (int i = 0; i < 8 && !failed; i++) {
			usleep(30000);
			pid_t pid = fork();
			if (pid == 0) {
				int sd = dial();
				_exit(sd >= 0 && exchange(sd, 100, 7) == 0 ? 0 : 1);
			}
			int st;
			if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
			    WEXITSTATUS(st) != 0) {
				fprintf(stderr, "child %d failed\n", i);
				failed = 1;
			}
		}
		pthread_join(t[0], NULL);
	} else if (strcmp(mode, "exec") == 0) {
		pthread_create(&t[0], NULL, blocked_reader, NULL);
		usleep(200000);
		execl(argv[0], argv[0], argv[1], argv[2], "exec-child", (char *)NULL);
		fprintf(stderr, "exec: %s\n", strerror(errno));
		return 1;
	} else if (strcmp(mode, "epoll") == 0 || strcmp(mode, "poll") == 0 ||
		   strcmp(mode, "select") == 0 || strcmp(mode, "pselect") == 0) {
		enum waiter w = strcmp(mode, "poll") == 0 ? W_POLL :
				strcmp(mode, "select") == 0 ? W_SELECT :
				strcmp(mode, "pselect") == 0 ? W_PSELECT : W_EPOLL;
		if (epoll_mode(w) < 0)
			failed = 1;
	} else if (strcmp(mode, "epollring") == 0) {
		if (epollring_mode() < 0)
			failed = 1;
	} else if (strcmp(mode, "idle") == 0) {
		if (idle_mode() < 0)
			failed = 1;
	} else if (strcmp(mode, "exec-child") == 0) {
		int sd = dial();
		if (sd < 0 || exchange(sd, 1000, 3) < 0)
			failed = 1;
	} else {
		return 2;
	}
	if (failed)
		return 1;
	printf("ok");
	print_counters();
	if (strcmp(mode, "epollring") == 0)
		printf(" echo_ring_waits=%lld echo_poll_waits=%lld", ring_delta, poll_delta);
	printf("\n");
	return 0;
}
