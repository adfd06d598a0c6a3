/* fork while other threads are inside user-level epoll's locks (run under ulsrun by
 * test_shim.py).
 *
 *   uepfork FORKS
 *
 * The shim keeps epoll instances itself (apps/preload/uepoll.c): one lock for the table
 * of instances and one per instance. A fork copies a lock that another thread holds at
 * that moment as held, by a thread the child does not have. Here one thread adds and
 * removes a UDP socket in an epoll instance in a loop (the instance's lock), another
 * makes and closes epoll instances in a loop (the table's lock), and the main thread
 * forks FORKS times. Each child, alarm-free (the locks are taken with signals held),
 * must within 5 s: add the inherited socket to the inherited instance (or find it there
 * already), see it writable through epoll_wait, and make and close an instance of its
 * own. A child that does not end within 5 s is killed and counted as hung; the run stops
 * at the first. Prints "ok forks N" and exits 0, else "hung N failed M" and exits 1.
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int ep, s;
static atomic_bool stop;

static void *ctl_loop(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		struct epoll_event ev = { .events = EPOLLOUT };
		epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev);
		epoll_ctl(ep, EPOLL_CTL_DEL, s, NULL);
	}
	return NULL;
}

static void *create_loop(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		int e = epoll_create1(EPOLL_CLOEXEC);
		if (e >= 0)
			close(e);
	}
	return NULL;
}

static int child(void)
{
	struct epoll_event ev = { .events = EPOLLOUT, .data.u32 = 7 };

	if (epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) < 0 && errno != EEXIST) {
		fprintf(stderr, "uepfork: child: epoll_ctl: %s\n", strerror(errno));
		return 1;
	}
	int n = epoll_wait(ep, &ev, 1, 2000);
	if (n != 1 || !(ev.events & EPOLLOUT)) {
		fprintf(stderr, "uepfork: child: epoll_wait %d (%s), events %#x\n", n,
			n < 0 ? strerror(errno) : "-", n == 1 ? ev.events : 0);
		return 1;
	}
	int e = epoll_create1(EPOLL_CLOEXEC);
	if (e < 0) {
		fprintf(stderr, "uepfork: child: epoll_create1: %s\n", strerror(errno));
		return 1;
	}
	close(e);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	int forks = atoi(argv[1]), hung = 0, failed = 0, done = 0;
	struct sockaddr_in a = { .sin_family = AF_INET };

	ep = epoll_create1(EPOLL_CLOEXEC);
	s = socket(AF_INET, SOCK_DGRAM, 0);
	if (ep < 0 || s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("uepfork: setup");
		return 1;
	}
	pthread_t t[2];
	pthread_create(&t[0], NULL, ctl_loop, NULL);
	pthread_create(&t[1], NULL, create_loop, NULL);
	for (int i = 0; i < forks && !hung; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("uepfork: fork");
			failed++;
			break;
		}
		if (pid == 0)
			_exit(child());
		int st = 0;
		pid_t w = 0;
		for (int k = 0; k < 500 && (w = waitpid(pid, &st, WNOHANG)) == 0; k++) {
			struct timespec ts = { 0, 10 * 1000 * 1000 };
			nanosleep(&ts, NULL);
		}
		if (w == 0) {
			fprintf(stderr, "uepfork: child %d of fork %d hung\n", (int)pid, i);
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			hung++;
		} else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			failed++;
		}
		done++;
	}
	atomic_store(&stop, true);
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	if (hung || failed) {
		printf("hung %d failed %d of %d\n", hung, failed, done);
		return 1;
	}
	printf("ok forks %d\n", done);
	return 0;
}
