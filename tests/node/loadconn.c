/* Load through libuls directly (test_load.py): the same roles as loadconn.py, without the
 * POSIX shim, so a socket costs the process no kernel descriptor at all (uls_socket()
 * returns a private number; only uls_socket_fd() would make a mirror).
 *
 *   loadconn server --ctl PATH --port P --count N
 *       accepts N connections, echoes one request on each, closes each at its end-of-file
 *       (in the order they came); prints {"phase": ...} lines "start", "accepted",
 *       "served", "closed" with its descriptors, heap and counters; SIGTERM ends it.
 *   loadconn hold --ctl PATH --to IP:PORT --count N --gate FILE
 *       N connections (blocking connects, one after another), then one verified round
 *       trip on each while all are open; prints {"phase": "open", ...}, waits for FILE,
 *       closes all, prints {"phase": "closed", ...}, and stays (its TIME-WAIT state lives
 *       in it) until SIGTERM. Exit 1 unless all N were verified.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "uls.h"

static volatile sig_atomic_t want_stop;

static void on_term(int sig)
{
	(void)sig;
	want_stop = 1;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int nfds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n - 3;  /* ".", "..", and the directory's own descriptor */
}

static long rss(void)
{
	long pages = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &res) != 2)
			res = 0;
		fclose(f);
	}
	return res * sysconf(_SC_PAGESIZE);
}

/* Descriptors, heap and the counters a drop or a lost notification would show. */
static void state_json(FILE *to)
{
	struct mallinfo2 mi = mallinfo2();
	struct uls_counter c[512];
	int n = uls_counters(c, 512);

	fprintf(to, "\"fds\": %d, \"heap_in_use\": %zu, \"rss\": %ld, \"counters\": {", nfds(),
		mi.uordblks + mi.hblkhd, rss());
	for (int i = 0; i < n && i < 512; i++)
		fprintf(to, "%s\"%s\": %llu", i ? ", " : "", c[i].name, (unsigned long long)c[i].value);
	fprintf(to, "}");
}

static int parse_to(const char *s, struct sockaddr_in *a)
{
	char ip[64];
	const char *colon = strrchr(s, ':');

	if (!colon || (size_t)(colon - s) >= sizeof(ip))
		return -1;
	memcpy(ip, s, (size_t)(colon - s));
	ip[colon - s] = 0;
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)atoi(colon + 1));
	return inet_pton(AF_INET, ip, &a->sin_addr) == 1 ? 0 : -1;
}

static void phase(const char *name, const char *extra)
{
	printf("{\"phase\": \"%s\", %s", name, extra);
	state_json(stdout);
	printf("}\n");
	fflush(stdout);
}

/* count connections, served in the order they were accepted, which is the order a
 * holder's blocking connects made them: accept all, answer each one's request, then
 * close each at its end-of-file. Every call blocks on one socket, so no call walks the
 * others (libuls has no poll of its own: a program that multiplexes uses
 * uls_socket_fd(), a descriptor per socket). */
static int serve(int port, int count)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int *conns = calloc((size_t)count, sizeof(int)), ls, served = 0, eof = 0;
	char buf[4096], extra[128];

	ls = uls_socket(SOCK_STREAM);
	if (!conns || ls < 0 || uls_bind(ls, &a) < 0 || uls_listen(ls, 4096) < 0) {
		fprintf(stderr, "loadconn: listen: %s\n", strerror(ls < 0 ? -ls : errno));
		return 1;
	}
	phase("start", "");
	fprintf(stderr, "listening on port %d\n", port);
	for (int i = 0; i < count; i++) {
		conns[i] = uls_accept(ls, NULL);
		if (conns[i] < 0) {
			fprintf(stderr, "loadconn: accept: %s\n", strerror(-conns[i]));
			return 1;
		}
	}
	phase("accepted", "");
	for (int i = 0; i < count; i++) {
		ssize_t r = uls_recv(conns[i], buf, sizeof(buf), 0);
		if (r > 0 && uls_send(conns[i], buf, (size_t)r, 0) == r)
			served++;
	}
	snprintf(extra, sizeof(extra), "\"served\": %d, ", served);
	phase("served", extra);
	for (int i = 0; i < count; i++) {
		ssize_t r;
		while ((r = uls_recv(conns[i], buf, sizeof(buf), 0)) > 0)
			;
		eof += r == 0;
		uls_close(conns[i]);
	}
	snprintf(extra, sizeof(extra), "\"served\": %d, \"eof\": %d, ", served, eof);
	phase("closed", extra);
	/* Keep the lease until told: the test reads ulsd's table while this process lives. */
	signal(SIGTERM, on_term);
	while (!want_stop)
		pause();
	uls_close(ls);
	return served == count && eof == count ? 0 : 1;
}

static int hold(const char *to, int count, const char *gate)
{
	struct sockaddr_in a;
	int *s = calloc((size_t)count, sizeof(int));
	int open = 0, verified = 0, connect_err = 0, rt_err = 0;
	double t0 = now(), t_conn, t1, t_rt;
	char want[64], got[64];

	if (!s || parse_to(to, &a) < 0)
		return 2;
	phase("start", "");
	for (int i = 0; i < count; i++) {
		int sd = uls_socket(SOCK_STREAM);
		int rc = sd < 0 ? sd : uls_connect(sd, &a);
		if (rc < 0) {
			if (sd >= 0)
				uls_close(sd);
			connect_err++;
			continue;
		}
		s[open++] = sd;
		if (now() - t0 > 300)
			break;
	}
	t_conn = now() - t0;
	/* One request on every connection, then every echo: all are open at once, and the
	 * server finds many requests per sweep of its connections. */
	t1 = now();
	for (int i = 0; i < open; i++) {
		int len = snprintf(want, sizeof(want), "%d:%d:hold\n", (int)getpid(), i);
		if (uls_send(s[i], want, (size_t)len, 0) != len)
			rt_err++;
	}
	for (int i = 0; i < open; i++) {
		int len = snprintf(want, sizeof(want), "%d:%d:hold\n", (int)getpid(), i);
		ssize_t k = 0;
		while (k < len) {
			ssize_t g = uls_recv(s[i], got + k, sizeof(got) - (size_t)k, 0);
			if (g <= 0)
				break;
			k += g;
		}
		if (k == len && memcmp(want, got, (size_t)len) == 0)
			verified++;
		else
			rt_err++;
	}
	t_rt = now() - t1;
	printf("{\"phase\": \"open\", \"open\": %d, \"verified\": %d, \"connect_errors\": %d, "
	       "\"roundtrip_errors\": %d, \"connect_s\": %.3f, \"roundtrip_s\": %.3f, ", open,
	       verified, connect_err, rt_err, t_conn, t_rt);
	state_json(stdout);
	printf("}\n");
	fflush(stdout);
	for (double end = now() + 120; gate && access(gate, F_OK) != 0 && now() < end;)
		usleep(50000);
	t1 = now();
	for (int i = 0; i < open; i++)
		uls_close(s[i]);
	snprintf(want, sizeof(want), "\"close_s\": %.3f, ", now() - t1);
	phase("closed", want);
	/* Stay until told to go (SIGTERM): the FINs and the TIME-WAIT state live in this
	 * process, and a holder that exits at once leaves them to ulsd's custody. */
	signal(SIGTERM, on_term);
	while (!want_stop)
		pause();
	return verified == count ? 0 : 1;
}

int main(int argc, char **argv)
{
	const char *ctl = NULL, *to = NULL, *gate = NULL;
	int port = 0, count = 0, rc;

	if (argc < 2)
		goto usage;
	for (int i = 2; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--ctl"))
			ctl = argv[i + 1];
		else if (!strcmp(argv[i], "--to"))
			to = argv[i + 1];
		else if (!strcmp(argv[i], "--gate"))
			gate = argv[i + 1];
		else if (!strcmp(argv[i], "--port"))
			port = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--count"))
			count = atoi(argv[i + 1]);
		else
			goto usage;
	}
	if (!ctl)
		goto usage;
	rc = uls_attach(ctl);
	if (rc < 0) {
		fprintf(stderr, "loadconn: attach %s: %s\n", ctl, strerror(-rc));
		return 1;
	}
	if (!strcmp(argv[1], "server") && port && count > 0)
		return serve(port, count);
	if (!strcmp(argv[1], "hold") && to && count > 0)
		return hold(to, count, gate);
usage:
	fprintf(stderr, "usage: loadconn server --ctl PATH --port P --count N\n"
			"       loadconn hold --ctl PATH --to IP:PORT --count N [--gate FILE]\n");
	return 2;
}
