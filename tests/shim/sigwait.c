/* A signal while a thread is blocked in recv() under ulsrun (run by test_shim.py).
 *
 *   sigwait PEER_IP TCP_ECHO_PORT intr|restart
 *
 * The thread connects to a TCP echo and blocks in recv() with nothing on the way; 200 ms
 * later SIGALRM arrives. intr: the handler has no SA_RESTART, so recv() must fail with
 * EINTR (signal(7)) soon after the signal. restart: the handler has SA_RESTART, so recv()
 * goes on and returns the byte another thread sends to the echo 400 ms later. In both the
 * handler must run while the thread is still blocked. Prints "ok MS" (the time recv()
 * took) and exits 0, or says what went wrong and exits 1.
 */
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
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t handled;
static int sd;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void on_alarm(int sig)
{
	(void)sig;
	handled++;
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
	struct sigaction sa;
	struct itimerval it = { .it_value = { 0, 200000 } };
	pthread_t t;
	char c;

	if (argc != 4 || inet_pton(AF_INET, argv[1], &peer.sin_addr) != 1)
		return 2;
	bool restart = strcmp(argv[3], "restart") == 0;
	peer.sin_port = htons((unsigned short)atoi(argv[2]));
	sd = socket(AF_INET, SOCK_STREAM, 0);
	if (sd < 0 || connect(sd, (struct sockaddr *)&peer, sizeof(peer)) < 0) {
		perror("connect");
		return 1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = restart ? SA_RESTART : 0;
	sigaction(SIGALRM, &sa, NULL);
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
		fprintf(stderr, "handler ran %d times\n", (int)handled);
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
	printf("ok %.0f\n", took);
	return 0;
}
