/* One process's lease with ulsd under load (run by tests/node/test_lease.py).
 *
 *   leasectl stall --ctl PATH --echo IP:PORT --slow IP:PORT [--seconds S]
 *   leasectl churn --ctl PATH --to IP:PORT --conns N --batch B [--hold S]
 *   leasectl abandon --ctl PATH --slow IP:PORT
 *   leasectl late --ctl PATH --echo IP:PORT --slow IP:PORT
 *   leasectl hold --ctl PATH --to IP:PORT --conns N [--hold S]
 *
 * stall: one thread exchanges 1-byte messages with an echo peer for S seconds (3) and
 * records the longest gap between two completed round trips, while the main thread, after
 * 0.5 s, connects to --slow (a control peer in between delays ulsd's answer to that
 * CONNECT). Prints "max_gap_ms=G rounds=R connect_ms=C connect_rc=E", then
 * "start_ms=T per_10ms=N,N,...": the round trips completed in each 10 ms from T
 * (CLOCK_MONOTONIC, as Python's time.monotonic()).
 * churn: N connections to a peer that closes each one at once, B at a time: B connects,
 * B reads of the end of the stream, then B closes in a row (so that B RELEASEs reach ulsd
 * at once). Then, 1 s later, prints the lease's counters ("ok ctl_notify_queued=Q
 * ctl_notify_lost=L") and "done", and keeps its lease for S seconds (10) so that the test
 * can look at ulsd's endpoint table while the process still lives.
 * abandon: one thread connects to --slow (ulsd's answer is held back) and the main thread
 * closes the socket 300 ms into the wait. Prints "abandon_rc=E" (the connect's result).
 * late: connects to --slow, whose answer comes after the stack's 5 s timeout, then to
 * --echo. Prints "late_rc=E next_rc=E2", then "done", and keeps its lease for 10 s.
 * hold: N connections to a peer that keeps them open, made one after the other; prints
 * "ready N" and keeps them S seconds (10) (test_ulsstat.py: more connections than the
 * connection table lists).
 * Exits 0, or says what failed and exits 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "uls.h"

#define MAX_BATCH 1000

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int parse_to(const char *s, struct sockaddr_in *a)
{
	char ip[32];
	const char *colon = s ? strchr(s, ':') : NULL;

	if (!colon || (size_t)(colon - s) >= sizeof(ip))
		return -1;
	memcpy(ip, s, (size_t)(colon - s));
	ip[colon - s] = '\0';
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)atoi(colon + 1));
	return inet_pton(AF_INET, ip, &a->sin_addr) == 1 ? 0 : -1;
}

static int connect_to(const struct sockaddr_in *to)
{
	int sd = uls_socket(SOCK_STREAM), one = 1;

	if (sd < 0)
		return sd;
	uls_setsockopt(sd, IPPROTO_TCP, 1 /* TCP_NODELAY */, &one, sizeof(one));
	int rc = uls_connect(sd, to);
	if (rc < 0) {
		uls_close(sd);
		return rc;
	}
	return sd;
}

/* ---- stall ---------------------------------------------------------------------------- */

#define STALL_SECONDS_MAX 60
#define STALL_BUCKET_MS 10

struct pinger {
	int sd;
	double seconds, max_gap, start;
	long rounds;
	int err;
	unsigned per_bucket[STALL_SECONDS_MAX * 1000 / STALL_BUCKET_MS + 1];
};

static void *ping(void *arg)
{
	struct pinger *p = arg;
	double start = now_ms(), last = start;
	char c = 'x';

	p->start = start;
	while (now_ms() - start < p->seconds * 1e3) {
		if (uls_send(p->sd, &c, 1, 0) != 1 || uls_recv(p->sd, &c, 1, 0) != 1) {
			p->err = 1;
			return NULL;
		}
		double t = now_ms();
		if (t - last > p->max_gap)
			p->max_gap = t - last;
		last = t;
		p->rounds++;
		size_t b = (size_t)((t - start) / STALL_BUCKET_MS);
		if (b < sizeof(p->per_bucket) / sizeof(p->per_bucket[0]))
			p->per_bucket[b]++;
	}
	return NULL;
}

static int stall(const struct sockaddr_in *echo, const struct sockaddr_in *slow, double seconds)
{
	static struct pinger p;

	p.seconds = seconds;
	pthread_t t;

	p.sd = connect_to(echo);
	if (p.sd < 0) {
		fprintf(stderr, "connect to the echo peer: %s\n", strerror(-p.sd));
		return 1;
	}
	if (pthread_create(&t, NULL, ping, &p) != 0)
		return 1;
	usleep(500000);
	double t0 = now_ms();
	int rc = connect_to(slow);
	double t1 = now_ms();
	if (rc >= 0)
		uls_close(rc);
	pthread_join(t, NULL);
	uls_close(p.sd);
	if (p.err) {
		fprintf(stderr, "the echo connection failed\n");
		return 1;
	}
	printf("max_gap_ms=%.1f rounds=%ld connect_ms=%.1f connect_rc=%d\n", p.max_gap, p.rounds,
	       t1 - t0, rc < 0 ? rc : 0);
	printf("start_ms=%.3f per_10ms=", p.start);
	for (size_t b = 0; b <= (size_t)(seconds * 1000 / STALL_BUCKET_MS); b++)
		printf("%s%u", b ? "," : "", p.per_bucket[b]);
	printf("\n");
	return 0;
}

/* ---- abandon, late ------------------------------------------------------------------- */

struct connector {
	int sd;
	struct sockaddr_in to;
	int rc;
};

static void *do_connect(void *arg)
{
	struct connector *c = arg;

	c->rc = uls_connect(c->sd, &c->to);
	return NULL;
}

static int abandon(const struct sockaddr_in *slow)
{
	struct connector c = { .to = *slow };
	pthread_t t;

	c.sd = uls_socket(SOCK_STREAM);
	if (c.sd < 0 || pthread_create(&t, NULL, do_connect, &c) != 0)
		return 1;
	usleep(300000);
	uls_close(c.sd);
	pthread_join(t, NULL);
	printf("abandon_rc=%d\n", c.rc);
	return 0;
}

static int late(const struct sockaddr_in *echo, const struct sockaddr_in *slow)
{
	int a = connect_to(slow);
	int b = connect_to(echo);

	printf("late_rc=%d next_rc=%d\n", a < 0 ? a : 0, b < 0 ? b : 0);
	printf("done\n");
	fflush(stdout);
	sleep(10);
	return 0;
}

/* ---- churn ---------------------------------------------------------------------------- */

static uint64_t counter(const char *name)
{
	int n = uls_counters(NULL, 0);
	struct uls_counter *c = calloc((size_t)n, sizeof(*c));
	uint64_t v = UINT64_MAX;

	if (!c)
		return v;
	n = uls_counters(c, (size_t)n);
	for (int i = 0; i < n; i++)
		if (!strcmp(c[i].name, name))
			v = c[i].value;
	free(c);
	return v;
}

static int churn(const struct sockaddr_in *to, int conns, int batch, int hold)
{
	static int sds[MAX_BATCH];
	char buf[16];

	for (int done = 0; done < conns;) {
		int k = conns - done < batch ? conns - done : batch;
		for (int i = 0; i < k; i++) {
			sds[i] = connect_to(to);
			if (sds[i] < 0) {
				fprintf(stderr, "connect %d: %s\n", done + i, strerror(-sds[i]));
				return 1;
			}
		}
		/* The peer closed each one: read the end of the stream, so that the close below
		 * ends the connection at once (LAST-ACK, no TIME-WAIT on this side). */
		for (int i = 0; i < k; i++) {
			ssize_t n;
			while ((n = uls_recv(sds[i], buf, sizeof(buf), 0)) > 0)
				;
			if (n < 0 && n != -ECONNRESET) {
				fprintf(stderr, "recv %d: %s\n", done + i, strerror((int)-n));
				return 1;
			}
		}
		for (int i = 0; i < k; i++)
			uls_close(sds[i]);
		done += k;
	}
	sleep(1);
	printf("ok ctl_notify_queued=%llu ctl_notify_lost=%llu\n",
	       (unsigned long long)counter("ctl_notify_queued"),
	       (unsigned long long)counter("ctl_notify_lost"));
	printf("done\n");
	fflush(stdout);
	sleep((unsigned)hold);
	return 0;
}

static int hold_conns(const struct sockaddr_in *to, int conns, int hold)
{
	for (int i = 0; i < conns; i++) {
		int sd = connect_to(to);
		if (sd < 0) {
			fprintf(stderr, "connect %d: %s\n", i, strerror(-sd));
			return 1;
		}
	}
	printf("ready %d\n", conns);
	fflush(stdout);
	sleep((unsigned)hold);
	return 0;
}

int main(int argc, char **argv)
{
	const char *ctl = NULL, *to_s = NULL, *echo_s = NULL, *slow_s = NULL;
	int conns = 0, batch = 100, hold = 10;
	double seconds = 3;

	if (argc < 2)
		return 2;
	for (int i = 2; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--ctl"))
			ctl = argv[i + 1];
		else if (!strcmp(argv[i], "--to"))
			to_s = argv[i + 1];
		else if (!strcmp(argv[i], "--echo"))
			echo_s = argv[i + 1];
		else if (!strcmp(argv[i], "--slow"))
			slow_s = argv[i + 1];
		else if (!strcmp(argv[i], "--conns"))
			conns = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--batch"))
			batch = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--hold"))
			hold = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[i + 1]);
		else
			return 2;
	}
	if (!ctl)
		return 2;
	int rc = uls_attach(ctl);
	if (rc < 0) {
		fprintf(stderr, "attach %s: %s\n", ctl, strerror(-rc));
		return 1;
	}
	struct sockaddr_in a, b;
	if (!strcmp(argv[1], "stall")) {
		if (parse_to(echo_s, &a) < 0 || parse_to(slow_s, &b) < 0 || seconds <= 0.5 ||
		    seconds > STALL_SECONDS_MAX)
			return 2;
		return stall(&a, &b, seconds);
	}
	if (!strcmp(argv[1], "abandon"))
		return parse_to(slow_s, &b) < 0 ? 2 : abandon(&b);
	if (!strcmp(argv[1], "late"))
		return parse_to(echo_s, &a) < 0 || parse_to(slow_s, &b) < 0 ? 2 : late(&a, &b);
	if (!strcmp(argv[1], "churn")) {
		if (parse_to(to_s, &a) < 0 || conns < 1 || conns > 1000000 || batch < 1 ||
		    batch > MAX_BATCH || hold < 0 || hold > 600)
			return 2;
		return churn(&a, conns, batch, hold);
	}
	if (!strcmp(argv[1], "hold")) {
		if (parse_to(to_s, &a) < 0 || conns < 1 || conns > 100000 || hold < 0 || hold > 600)
			return 2;
		return hold_conns(&a, conns, hold);
	}
	return 2;
}
