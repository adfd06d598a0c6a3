/* fork handlers of the program that use sockets, registered before the shim could
 * register its own (run under ulsrun by test_shim.py).
 *
 *   atfork main|hook PEERIP FORKS
 *
 * glibc runs fork's prepare handlers last registered first, and the parent and child
 * handlers first registered first. The shim's prepare handlers take its locks (the
 * table's, user-level epoll's, libuls's core lock) and its parent and child handlers
 * give them back (apps/preload/fork.c): a program's handler that runs inside that span
 * and uses a socket waits for a lock its own thread holds. Here the handlers (atfork.h)
 * send a datagram to PEERIP, change an epoll registration and dup and close the socket.
 * "main": main registers them before its first socket call. "hook": atforkhook.so,
 * loaded with LD_PRELOAD after the shim, registered them from its constructor, which the
 * dynamic linker runs before the shim's. Then the program makes the sockets and forks
 * FORKS times; each child's handler ran and it exits 0 if its calls worked. A runner
 * process does the forks, watched for 20 s: "hung" if it does not end (a handler waits
 * for a lock forever), a child not ended in 5 s is killed and counted as hung too.
 * Prints "ok forks N prepare P parent Q" and exits 0, else says what went wrong and
 * exits 1.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "atfork.h"

static struct atfork_state own = { .u = -1, .ep = -1 };

static void pause_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* Waits up to ms for pid; kills it (by its pid) if it has not ended. Returns its status,
 * or -1 if it was killed. */
static int wait_for(pid_t pid, long ms)
{
	int st;

	for (long t = 0; t < ms; t += 10) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return st;
		pause_ms(10);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

static int run(const char *peer, int forks)
{
	struct atfork_state *s = atfork_st;

	s->u = socket(AF_INET, SOCK_DGRAM, 0);
	s->ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLOUT };
	if (s->u < 0 || s->ep < 0 || epoll_ctl(s->ep, EPOLL_CTL_ADD, s->u, &ev) < 0) {
		fprintf(stderr, "atfork: sockets: %s\n", strerror(errno));
		return 1;
	}
	s->peer.sin_family = AF_INET;
	s->peer.sin_port = htons(9);
	inet_pton(AF_INET, peer, &s->peer.sin_addr);
	for (int i = 0; i < forks; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("atfork: fork");
			return 1;
		}
		if (pid == 0)
			_exit(s->childed == 1 && !s->failed ? 0 : 10 + s->failed);
		int st = wait_for(pid, 5000);
		if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "atfork: fork %d: child %s %d\n", i,
				st < 0 ? "hung" : "failed", st < 0 ? 0 : WEXITSTATUS(st));
			return 1;
		}
	}
	if (s->failed || s->prepared != forks || s->parented != forks) {
		fprintf(stderr, "atfork: handlers: prepare %d parent %d failed %#x\n",
			s->prepared, s->parented, s->failed);
		return 1;
	}
	printf("ok forks %d prepare %d parent %d\n", forks, s->prepared, s->parented);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	bool hook = strcmp(argv[1], "hook") == 0;
	if (hook) {
		atfork_st = dlsym(RTLD_DEFAULT, "atfork_hook_state");
		if (!atfork_st) {
			fprintf(stderr, "atfork: atforkhook.so is not loaded\n");
			return 1;
		}
	} else {
		/* Before any socket call, as a program does at its start. */
		atfork_st = &own;
		pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
	}
	fflush(stdout);
	/* The handlers do nothing yet (no sockets): this fork is harmless. */
	pid_t runner = fork();
	if (runner < 0) {
		perror("atfork: fork");
		return 1;
	}
	if (runner == 0) {
		int rc = run(argv[2], atoi(argv[3]));
		fflush(stdout);
		_exit(rc);
	}
	int st = wait_for(runner, 20000);
	if (st < 0) {
		printf("hung\n");
		return 1;
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
