/* Signals that arrive while a thread is inside the stack are held off and delivered when
 * it leaves (stack/sigdefer.c) as the kernel delivers them (run under ulsrun by
 * test_shim.py).
 *
 *   sigdefer PEER_IP UDP_ECHO_PORT
 *
 * The main thread makes socket calls in a loop on a user-level UDP socket. A second
 * thread sends it signals, one at a time, and waits for each handler:
 *   - SIGUSR2 with a value (pthread_sigqueue): the SA_SIGINFO handler must see SI_QUEUE
 *     and that value, exactly once per signal;
 *   - SIGUSR1 with SA_RESETHAND: the handler runs once, and afterwards the disposition is
 *     SIG_DFL (sigaction(2)).
 * Both handlers use the socket themselves (a handler that ran inside would wait for the
 * stack's lock forever). It goes on until at least MIN_DEFERRED signals of each kind were
 * deferred (libuls's signals_deferred counter moved during them), or ATTEMPTS.
 * Prints "ok queued=N deferred_queued=D resethand=M deferred_resethand=E" and exits 0 when
 * every handler saw what it should, 1 otherwise.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ATTEMPTS 400
#define MIN_DEFERRED 5

struct counter {  /* uls.h's struct uls_counter */
	const char *name;
	uint64_t value;
};

static int udp;
static pthread_t main_thread;
static atomic_bool stop;
static atomic_int runs;          /* handler runs since the attempt began */
static atomic_int seen_value, seen_code;
static atomic_int bad;           /* a handler saw something wrong */

static uint64_t deferred_now(void)
{
	static int (*get)(struct counter *, size_t);
	static struct counter c[512];

	if (!get)
		get = (int (*)(struct counter *, size_t))dlsym(RTLD_DEFAULT, "uls_counters");
	if (!get)
		return 0;
	int n = get(c, 512);
	for (int i = 0; i < n && i < 512; i++)
		if (strcmp(c[i].name, "signals_deferred") == 0)
			return c[i].value;
	return 0;
}

static void use_socket(void)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);

	if (getsockname(udp, (struct sockaddr *)&a, &len) < 0)
		atomic_store(&bad, 1);
}

static void on_usr2(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;

	(void)sig;
	(void)uc;
	use_socket();
	atomic_store(&seen_value, si->si_value.sival_int);
	atomic_store(&seen_code, si->si_code);
	atomic_fetch_add(&runs, 1);
	errno = saved;
}

static void on_usr1(int sig)
{
	int saved = errno;

	(void)sig;
	use_socket();
	atomic_fetch_add(&runs, 1);
	errno = saved;
}

/* Until the handler ran (bounded: 2 s). */
static bool wait_run(void)
{
	for (int i = 0; i < 20000 && atomic_load(&runs) == 0; i++) {
		struct timespec ts = { 0, 100000 };
		nanosleep(&ts, NULL);
	}
	return atomic_load(&runs) > 0;
}

static void *signaller(void *arg)
{
	int *result = arg;
	int queued = 0, dq = 0, reset = 0, dr = 0;

	for (int i = 1; i <= ATTEMPTS && (dq < MIN_DEFERRED || dr < MIN_DEFERRED); i++) {
		/* A queued signal with a value. */
		struct sigaction sa = { .sa_sigaction = on_usr2, .sa_flags = SA_SIGINFO };
		sigemptyset(&sa.sa_mask);
		sigaction(SIGUSR2, &sa, NULL);
		atomic_store(&runs, 0);
		uint64_t before = deferred_now();
		union sigval v = { .sival_int = 1000 + i };
		if (pthread_sigqueue(main_thread, SIGUSR2, v) != 0 || !wait_run()) {
			fprintf(stderr, "sigdefer: SIGUSR2 %d never handled\n", i);
			*result = 1;
			break;
		}
		usleep(200);
		if (atomic_load(&runs) != 1 || atomic_load(&seen_value) != 1000 + i ||
		    atomic_load(&seen_code) != SI_QUEUE) {
			fprintf(stderr, "sigdefer: SIGUSR2 %d: runs %d value %d code %d\n", i,
				atomic_load(&runs), atomic_load(&seen_value), atomic_load(&seen_code));
			*result = 1;
			break;
		}
		queued++;
		dq += deferred_now() != before;

		/* A handler that resets itself. */
		struct sigaction r = { .sa_handler = on_usr1, .sa_flags = SA_RESETHAND };
		sigemptyset(&r.sa_mask);
		sigaction(SIGUSR1, &r, NULL);
		atomic_store(&runs, 0);
		before = deferred_now();
		if (pthread_kill(main_thread, SIGUSR1) != 0 || !wait_run()) {
			fprintf(stderr, "sigdefer: SIGUSR1 %d never handled\n", i);
			*result = 1;
			break;
		}
		usleep(200);
		struct sigaction now;
		sigaction(SIGUSR1, NULL, &now);
		if (atomic_load(&runs) != 1 || now.sa_handler != SIG_DFL) {
			fprintf(stderr, "sigdefer: SIGUSR1 %d: runs %d, disposition %s\n", i,
				atomic_load(&runs), now.sa_handler == SIG_DFL ? "default" : "kept");
			*result = 1;
			break;
		}
		reset++;
		dr += deferred_now() != before;
	}
	if (atomic_load(&bad))
		*result = 1;
	printf("%s queued=%d deferred_queued=%d resethand=%d deferred_resethand=%d\n",
	       *result ? "FAIL" : "ok", queued, dq, reset, dr);
	atomic_store(&stop, true);
	return NULL;
}

int main(int argc, char **argv)
{
	struct sockaddr_in peer = { .sin_family = AF_INET };
	int result = 0;

	if (argc != 3 || inet_pton(AF_INET, argv[1], &peer.sin_addr) != 1)
		return 2;
	peer.sin_port = htons((unsigned short)atoi(argv[2]));
	udp = socket(AF_INET, SOCK_DGRAM, 0);
	if (udp < 0 || connect(udp, (struct sockaddr *)&peer, sizeof(peer)) < 0) {
		perror("sigdefer: setup");
		return 1;
	}
	main_thread = pthread_self();
	pthread_t t;
	if (pthread_create(&t, NULL, signaller, &result) != 0)
		return 1;
	/* Calls that enter the stack and the descriptor table, all the time. */
	char c = 'd';
	int sndbuf;
	socklen_t len = sizeof(sndbuf);
	while (!atomic_load(&stop)) {
		send(udp, &c, 1, MSG_DONTWAIT);
		getsockopt(udp, SOL_SOCKET, SO_SNDBUF, &sndbuf, &len);
		char in[16];
		recv(udp, in, sizeof(in), MSG_DONTWAIT);
	}
	pthread_join(t, NULL);
	return result;
}
