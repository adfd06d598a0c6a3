/* Socket calls racing close() and the reuse of the same descriptor numbers (run under
 * ulsrun by test_shim.py).
 *
 *   closerace SECONDS ROUNDS CHECKS LIMIT
 *
 * runs for SECONDS, and on until more than ROUNDS reopenings and CHECKS checked calls
 * have been made, for LIMIT seconds at most. The amount of racing is what the test needs,
 * not a time: ULS_DEBUG_LOOKUP_YIELD makes every lookup sched_yield() (below), and on a
 * machine whose CPUs other runnable threads share each yield gives one of them a time
 * slice, so a second holds 100 times fewer rounds at load 11 (4 busy loops: 16-21
 * reopenings in 3 s, against 1,600-2,600 idle).
 *
 * The shim looks descriptors up without a lock (apps/preload/fdtab.c) and reuses a closed
 * socket's memory for the next one, and does the same for its epoll instances
 * (uepoll.c). Here one thread keeps closing UDP sockets two at a time and opening new
 * ones, which take the same numbers (it is the only thread that opens descriptors, and
 * socket() takes the lowest free), and two epoll instances the same way; the other threads
 * call getsockname(), recv() and epoll_wait() on those numbers all the while. Run it with
 * ULS_DEBUG_LOOKUP_YIELD=1: the shim's lookups then yield where a close must be able to
 * land. Checks:
 *   - a socket's port tells its slot (port % SLOTS): getsockname() on a number names a
 *     socket of that number's slot, whatever overlapped the call (a stale lookup that
 *     counted itself in memory reused under the other number fails this);
 *   - two epoll instances, each holding a UDP socket of its own for EPOLLOUT with the
 *     instance's index as data, are closed and made again two at a time too: epoll_wait
 *     on one never reports the other's socket;
 *   - each number has a sequence count, odd while the closer changes it: a call made while
 *     it stayed even saw no close, so it must succeed and name that socket's own port (a
 *     file finished twice, or handed out after it was finished, fails this), or crash.
 *   - at the end, with every socket closed, every port the run used binds again (a
 *     socket the shim never closed, a count left in its file, keeps its port).
 * Prints "ok calls N checked M reopened R" and exits 0 (also when LIMIT ended the run
 * first: the caller judges the amount), else says what went wrong and exits 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 8
#define WORKERS 3

static int fds[SLOTS];
static int epfds[2];  /* two epoll instances, each with a socket always writable */
static atomic_uint seq[SLOTS];
static atomic_int port[SLOTS];
static atomic_bool stop;
static atomic_long calls, checked, reopened, wrong;

#define PORT_BASE 20000
#define PORT_GENS 2000  /* ports PORT_BASE + gen * SLOTS + slot, gen modulo this */

/* A UDP socket for slot i: its port tells which slot it belongs to (port % SLOTS). */
static int open_bound(unsigned i, unsigned gen)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int s = socket(AF_INET, SOCK_DGRAM, 0);

	if (s < 0)
		return -1;
	a.sin_port = htons((unsigned short)(PORT_BASE + (gen % PORT_GENS) * SLOTS + i));
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(s);
		return -1;
	}
	return s;
}

static int port_of(int s)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);

	if (getsockname(s, (struct sockaddr *)&a, &len) < 0)
		return -errno;
	/* Not an IPv4 socket's name: the number named the socket's mirror alone, between
	 * socket() making it and the shim taking it (a call overlapping the reopen). */
	if (len < sizeof(a) || a.sin_family != AF_INET)
		return -EAFNOSUPPORT;
	return ntohs(a.sin_port);
}

static void *worker(void *arg)
{
	unsigned i = (unsigned)(size_t)arg;
	char buf[16];

	while (!atomic_load(&stop)) {
		i = (i * 1103515245u + 12345u) % SLOTS;
		unsigned before = atomic_load(&seq[i]);
		int want = atomic_load(&port[i]);
		int p = port_of(fds[i]);
		ssize_t r = recv(fds[i], buf, sizeof(buf), MSG_DONTWAIT);
		int rerr = errno;
		struct epoll_event ev;
		unsigned j = i & 1;
		int e = epoll_wait(epfds[j], &ev, 1, 0);
		int eerr = errno;
		if (e == 1 && ev.data.u32 != j) {
			/* Whatever overlapped the call, it waited on the other instance. */
			if (atomic_fetch_add(&wrong, 1) < 5)
				fprintf(stderr, "closerace: epoll instance %u (fd %d) reported "
					"instance %u's socket\n", j, epfds[j], ev.data.u32);
			continue;
		}
		atomic_fetch_add(&calls, 3);
		if (p > 0 && (p < PORT_BASE || (unsigned)p % SLOTS != i)) {
			/* Whatever overlapped the call, it acted on another slot's socket (0:
			 * a new one not bound yet). */
			if (atomic_fetch_add(&wrong, 1) < 5)
				fprintf(stderr, "closerace: slot %u fd %d named port %d, a socket of "
					"slot %d\n", i, fds[i], p, p % SLOTS);
			continue;
		}
		if (before & 1 || atomic_load(&seq[i]) != before)
			continue;  /* closed or reopened meanwhile: an error may come */
		atomic_fetch_add(&checked, 1);
		if (p != want || (r < 0 && rerr != EAGAIN) || r > 0 ||
		    (e < 0 && eerr != EBADF)) {
			if (atomic_fetch_add(&wrong, 1) < 5)
				fprintf(stderr, "closerace: slot %u fd %d: port %d (want %d), "
					"recv %zd (%s), epoll_wait %d (%s)\n", i, fds[i], p,
					want, r, strerror(rerr), e, strerror(eerr));
		}
	}
	return NULL;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	pthread_t t[WORKERS];

	if (argc != 5)
		return 2;
	int seconds = atoi(argv[1]), limit = atoi(argv[4]);
	long want_rounds = atol(argv[2]), want_checks = atol(argv[3]);
	if (seconds <= 0 || limit < seconds || want_rounds < 0 || want_checks < 0)
		return 2;
	for (int i = 0; i < SLOTS; i++) {
		fds[i] = open_bound((unsigned)i, 0);
		if (fds[i] < 0) {
			perror("closerace: socket");
			return 1;
		}
		atomic_store(&port[i], port_of(fds[i]));
	}
	/* Each instance holds a UDP socket of its own for EPOLLOUT, which a UDP socket
	 * always has, with the instance's index as its data. */
	int wsock[2];
	for (unsigned j = 0; j < 2; j++) {
		wsock[j] = socket(AF_INET, SOCK_DGRAM, 0);
		epfds[j] = epoll_create1(0);
		struct epoll_event ev = { .events = EPOLLOUT, .data.u32 = j };
		if (wsock[j] < 0 || epfds[j] < 0 ||
		    epoll_ctl(epfds[j], EPOLL_CTL_ADD, wsock[j], &ev) < 0) {
			perror("closerace: epoll");
			return 1;
		}
	}
	for (int i = 0; i < WORKERS; i++)
		pthread_create(&t[i], NULL, worker, (void *)(size_t)(i + 1));
	double start = now_s();
	bool failed = false;
	unsigned last_gen = 0;  /* the ports the run used: generations 0 to this */
	for (unsigned n = 0; !failed; n++) {
		double ran = now_s() - start;
		if (ran >= limit || (ran >= seconds && atomic_load(&reopened) > want_rounds &&
				   atomic_load(&checked) > want_checks))
			break;
		/* Two at a time: the second closed is reopened first (the shim reuses the
		 * last freed memory first), so a stale lookup finds its file under the other
		 * number. */
		unsigned i = (2 * n) % SLOTS, gen = 1 + n / (SLOTS / 2);
		last_gen = gen;
		atomic_fetch_add(&seq[i], 1);
		atomic_fetch_add(&seq[i + 1], 1);
		close(fds[i]);
		close(fds[i + 1]);
		for (unsigned k = i; k <= i + 1; k++) {
			int s = open_bound(k, gen);
			if (s != fds[k]) {
				fprintf(stderr, "closerace: reopened as %d, not %d\n", s, fds[k]);
				atomic_fetch_add(&wrong, 1);
				failed = true;
				break;
			}
			atomic_store(&port[k], port_of(s));
		}
		atomic_fetch_add(&seq[i], 1);
		atomic_fetch_add(&seq[i + 1], 1);
		if (failed)
			break;
		if (i == 0) {
			/* The epoll instances too, two at a time as the sockets. */
			close(epfds[0]);
			close(epfds[1]);
			for (unsigned j = 0; j < 2; j++) {
				int ne = epoll_create1(0);
				struct epoll_event ev = { .events = EPOLLOUT, .data.u32 = j };
				if (ne != epfds[j] ||
				    epoll_ctl(ne, EPOLL_CTL_ADD, wsock[j], &ev) < 0) {
					fprintf(stderr, "closerace: epoll reopened as %d, not %d\n",
						ne, epfds[j]);
					atomic_fetch_add(&wrong, 1);
					failed = true;
					break;
				}
			}
			if (failed)
				break;
		}
		atomic_fetch_add(&reopened, 1);
	}
	atomic_store(&stop, true);
	for (int i = 0; i < WORKERS; i++)
		pthread_join(t[i], NULL);
	/* Every socket still answers for itself. */
	for (int i = 0; i < SLOTS; i++)
		if (port_of(fds[i]) != atomic_load(&port[i])) {
			fprintf(stderr, "closerace: slot %d names port %d, not %d\n", i,
				port_of(fds[i]), atomic_load(&port[i]));
			atomic_fetch_add(&wrong, 1);
		}
	/* A socket the shim never closed (a count left in its file that no thread drops)
	 * is invisible above: its number was reused all the same. Its port is not: once
	 * every socket is closed, every port the run used must bind again. */
	for (int i = 0; i < SLOTS; i++)
		close(fds[i]);
	for (unsigned j = 0; j < 2; j++) {
		close(epfds[j]);
		close(wsock[j]);
	}
	unsigned gens = last_gen + 1 < PORT_GENS ? last_gen + 1 : PORT_GENS, bound = 0;
	for (unsigned g = 0; g < gens; g++)
		for (unsigned i = 0; i < SLOTS; i++) {
			int s = open_bound(i, g);
			if (s < 0)
				bound++;
			else
				close(s);
		}
	if (bound) {
		fprintf(stderr, "closerace: %u ports still bound after close\n", bound);
		atomic_fetch_add(&wrong, 1);
	}
	printf("%s calls %ld checked %ld reopened %ld\n", atomic_load(&wrong) ? "wrong" : "ok",
	       atomic_load(&calls), atomic_load(&checked), atomic_load(&reopened));
	return atomic_load(&wrong) ? 1 : 0;
}
