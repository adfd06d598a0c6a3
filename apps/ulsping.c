/* ulsping: TCP round-trip latency, ping-pong style (seed 000: 3,000 round trips of one
 * message, the first 50 dropped, bandwidth from half the round trip); and, without a
 * subcommand, the driver that measures it on a testbed it builds itself.
 *
 *   ulsping server --port P [--breakdown FILE] [NODE OPTIONS]
 *   ulsping client --to IP:PORT --size B [--count N] [--skip K] [--json FILE]
 *                  [--breakdown FILE] [NODE OPTIONS]
 *   ulsping [--mode MODE[,MODE...]] [--sizes B[,B...]] [--json FILE] [--breakdown]
 *
 * NODE OPTIONS as in ulsbench: --ctl PATH [--datapath direct|relay] joins ulsd's node (on
 * the direct data path unless relay is asked for), --tap/--ip makes the process a
 * node of its own; without them the kernel's TCP is used.
 *
 * Wire format: the client sends the message size as 4 bytes, big-endian; then each round
 * trip is one message of that size from the client, echoed whole by the server. The
 * client fills message i with the pattern (apps/pattern.h) at stream offset i * size and
 * checks every echoed byte, so a benchmark that returns wrong data fails instead of
 * reporting a latency.
 *
 * Driver modes: perproc (server and client each a process joined to a ulsd node: server on
 * node 2, client on node 1, both on the direct data path), relay (the same on ulsd's relay:
 * --datapath relay) and kernel (kernel sockets, server in ${TB_NAME}-k1, client in
 * ${TB_NAME}-k2). Every process it starts is stopped by its PID, also on failure, and the
 * testbed is always taken down. TB_NAME is "ulsping" unless set in the environment.
 *
 * --breakdown (builds configured with --enable-breakdown; relay mode only: the stamps
 * travel in the relay's ring slots, and the direct path has no ulsd stage): the one-way
 * latency split by layer (seed 003's method, apps/breakdown.h). The workers note, per
 * message, when the application started sending and when it had received the message whole
 * (uls_breakdown_now(), the clock of the stack's stamps), and save that with their stack's
 * segment trace (uls_breakdown.h) into the file the driver names; the driver matches the
 * client's file with the server's.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "apps/breakdown.h"
#include "apps/netops.h"
#include "apps/clock.h"
#include "apps/instdirs.h"
#include "apps/pattern.h"
#include "uls_breakdown.h"

#define DEFAULT_COUNT   3000    /* seed 000: 3,000 round trips ... */
#define DEFAULT_SKIP    50      /* ... the first 50 dropped */
#define COUNT_MAX       10000000ull
#define SIZE_MAX_BYTES  (64ull << 20)
#define HDR_LEN         4
#define DEFAULT_SIZES   "1,64,1024,16384,65536"
#define DEFAULT_MODES   "perproc,relay,kernel"
#define MODES_MAX       3
#define BASE_PORT       7100
#define RUN_TIMEOUT_S   60.0    /* one client run, start to exit */
#define READY_TIMEOUT_S 10.0    /* a server's "listening" line */
#define TESTBED_TIMEOUT_S 120.0
#define SIZES_MAX       32
#define TB_NAME         "ulsping"
#define BD_SAVED_TIMEOUT_S 30.0 /* the server's "breakdown saved" line, after the client */
#define BD_READ_CHUNK   65536

static const struct netops *ops = &bench__kernel_ops;

/* ---- statistics (pure; tests/unit/test_pingstats.c) ---- */

struct rtt_stats {
	size_t n;
	double mean, p50, p99, min, max;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The pct-th percentile of n sorted samples by nearest rank: the smallest sample with at
 * least pct% of the samples at or below it, i.e. sorted[ceil(pct * n / 100) - 1]. Integer
 * arithmetic, so p99 of 100 samples is the 99th, never the 100th through rounding. */
static double percentile_sorted(const double *sorted, size_t n, unsigned pct)
{
	size_t rank = ((size_t)pct * n + 99) / 100;

	if (n == 0)
		return 0;
	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return sorted[rank - 1];
}

/* Mean, p50, p99, min and max of v[0..n); sorts v in place. Returns 0, or -EINVAL for no
 * samples (out is then untouched). */
static int stats_compute(double *v, size_t n, struct rtt_stats *out)
{
	double sum = 0;

	if (!v || n == 0)
		return -EINVAL;
	qsort(v, n, sizeof(*v), cmp_double);
	for (size_t i = 0; i < n; i++)
		sum += v[i];
	*out = (struct rtt_stats){
		.n = n, .mean = sum / (double)n, .min = v[0], .max = v[n - 1],
		.p50 = percentile_sorted(v, n, 50), .p99 = percentile_sorted(v, n, 99),
	};
	return 0;
}

/* Seed 000: "since each message is sent twice, the bandwidth is computed as half the
 * round-trip time": size * 8 bits in rtt / 2 microseconds, which is Mbit/s. */
static double bandwidth_mbps(unsigned long long size, double rtt_us)
{
	return rtt_us > 0 ? (double)size * 8 / (rtt_us / 2) : 0;
}

/* Check the echo of round trip `round` (message size `size`); returns 0 when every byte is
 * right, else -EBADMSG with the stream offset of the first wrong byte in *bad. */
static int echo_verify(uint64_t seed, uint64_t round, const void *buf, size_t size,
		       uint64_t *bad)
{
	uint64_t off = bench__pattern_check(seed, round * size, buf, size);

	if (off == UINT64_MAX)
		return 0;
	if (bad)
		*bad = off;
	return -EBADMSG;
}

/* ---- the workers ---- */

static int set_nodelay(int sd)
{
	int one = 1;
	return ops->setsockopt(sd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* ---- breakdown, worker side ---- */

/* Per message i: [0] this process started sending its message i, [1] it had received
 * message i whole (apps/breakdown.h). */
struct bd_app {
	uint64_t (*v)[2];
	size_t n, cap;
};

static int bd_app_note(struct bd_app *a, size_t i, unsigned which)
{
	if (i >= a->cap) {
		size_t cap = a->cap ? a->cap : 4096;
		while (cap <= i)
			cap *= 2;
		uint64_t (*v)[2] = realloc(a->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		memset(v + a->cap, 0, (cap - a->cap) * sizeof(*v));
		a->v = v;
		a->cap = cap;
	}
	a->v[i][which] = uls_breakdown_now();
	if (i >= a->n)
		a->n = i + 1;
	return 0;
}

/* Save the application's stamps and every segment the stack's trace holds to path. */
static int bd_save(const char *path, const struct bd_app *a, size_t *nseg)
{
	struct uls_bd_frame *fr = NULL;
	size_t n = 0, cap = 0;
	uint64_t lost = 0;
	ssize_t k;
	int rc;

	do {
		if (cap - n < BD_READ_CHUNK) {
			struct uls_bd_frame *p = realloc(fr, (cap + BD_READ_CHUNK) * sizeof(*fr));
			if (!p) {
				free(fr);
				return -ENOMEM;
			}
			fr = p;
			cap += BD_READ_CHUNK;
		}
		k = uls_breakdown_read(fr + n, cap - n, &lost);
		if (k > 0)
			n += (size_t)k;
	} while (k > 0);
	rc = k < 0 ? (int)k : bench__bd_save(path, (const uint64_t (*)[2])a->v, a->n, fr, n, lost);
	free(fr);
	*nseg = n;
	return rc;
}

/* Echo one connection: the size header, then messages of that size until EOF. With bd_path,
 * note each message's receive and echo and save them with the trace at EOF. */
static void echo_conn(int sd, const char *bd_path)
{
	uint8_t hdr[HDR_LEN], *buf = NULL;
	struct bd_app app = { 0 };
	uint32_t size;
	bool eof;
	int rc = set_nodelay(sd);

	if (rc < 0) {
		fprintf(stderr, "ulsping server: TCP_NODELAY: %s\n", strerror(-rc));
		goto out;
	}
	if (bench__recv_all(ops, sd, hdr, HDR_LEN, NULL) < 0) {
		fprintf(stderr, "ulsping server: no size header\n");
		goto out;
	}
	memcpy(&size, hdr, sizeof(size));
	size = be32toh(size);
	if (size == 0 || size > SIZE_MAX_BYTES || !(buf = malloc(size))) {
		fprintf(stderr, "ulsping server: refusing message size %u\n", size);
		goto out;
	}
	for (size_t i = 0;; i++) {
		rc = bench__recv_all(ops, sd, buf, size, &eof);
		if (rc < 0) {
			if (!eof)
				fprintf(stderr, "ulsping server: recv: %s\n",
					rc == -EPIPE ? "EOF inside a message" : strerror(-rc));
			break;
		}
		if (bd_path && (bd_app_note(&app, i, 1) < 0 || bd_app_note(&app, i, 0) < 0)) {
			fprintf(stderr, "ulsping server: out of memory for the breakdown\n");
			break;
		}
		rc = bench__send_all(ops, sd, buf, size);
		if (rc < 0) {
			fprintf(stderr, "ulsping server: send: %s\n", strerror(-rc));
			break;
		}
	}
	if (bd_path && eof) {
		size_t nseg = 0;
		rc = bd_save(bd_path, &app, &nseg);
		if (rc < 0)
			fprintf(stderr, "ulsping server: breakdown: %s\n", strerror(-rc));
		else
			printf("ulsping server: breakdown saved (%zu messages, %zu segments)\n",
			       app.n, nseg);
		fflush(stdout);
	}
out:
	free(app.v);
	free(buf);
	ops->close(sd);
}

/* Serve connections one at a time, forever (the driver stops the server by its PID). The
 * "listening" line on stdout is the driver's signal that connects will be accepted. */
static int run_server(const struct sockaddr_in *at, const char *bd_path)
{
	int one = 1, rc, sd = ops->socket(SOCK_STREAM);

	if (sd < 0) {
		fprintf(stderr, "ulsping server: socket: %s\n", strerror(-sd));
		return 1;
	}
	ops->setsockopt(sd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	rc = ops->bind(sd, at);
	if (rc == 0)
		rc = ops->listen(sd, 16);
	if (rc < 0) {
		fprintf(stderr, "ulsping server: listen on port %u: %s\n", ntohs(at->sin_port),
			strerror(-rc));
		return 1;
	}
	printf("ulsping server: listening on port %u (%s)\n", ntohs(at->sin_port), ops->name);
	fflush(stdout);
	for (;;) {
		int c = ops->accept(sd, NULL);
		if (c == -EINTR)
			continue;
		if (c < 0) {
			fprintf(stderr, "ulsping server: accept: %s\n", strerror(-c));
			return 1;
		}
		echo_conn(c, bd_path);
	}
}

/* Connect, retrying a refused connect for up to 2 s (a server that has just printed its
 * line may not be reachable through every table yet). */
static int connect_retry(const struct sockaddr_in *to)
{
	double deadline = bench__now_s() + 2;

	for (;;) {
		int sd = ops->socket(SOCK_STREAM);
		if (sd < 0)
			return sd;
		int rc = ops->connect(sd, to);
		if (rc == 0)
			return sd;
		ops->close(sd);
		if (rc != -ECONNREFUSED || bench__now_s() > deadline)
			return rc;
		nanosleep(&(struct timespec){ .tv_nsec = 50 * 1000 * 1000 }, NULL);
	}
}

static int write_client_json(const char *path, unsigned long long size, const char *stack,
			     const struct rtt_stats *st)
{
	FILE *f = fopen(path, "w");

	if (!f) {
		fprintf(stderr, "ulsping: %s: %s\n", path, strerror(errno));
		return -1;
	}
	fprintf(f, "{\"stack\": \"%s\", \"size\": %llu, \"count\": %zu, \"rtt_us\": {\"mean\": %.3f, "
		   "\"p50\": %.3f, \"p99\": %.3f, \"min\": %.3f, \"max\": %.3f}, "
		   "\"bandwidth_mbps\": %.3f, \"verified\": true}\n",
		stack, size, st->n, st->mean, st->p50, st->p99, st->min, st->max,
		bandwidth_mbps(size, st->p50));
	return fclose(f) == 0 ? 0 : -1;
}

static int run_client(const struct sockaddr_in *to, unsigned long long size,
		      unsigned long long count, unsigned long long skip, const char *json,
		      const char *bd_path)
{
	uint8_t *out = malloc(size), *in = malloc(size);
	double *rtt = calloc(count, sizeof(*rtt));
	struct bd_app app = { 0 };
	uint32_t hdr = htobe32((uint32_t)size);
	uint64_t seed, bad = 0;
	struct rtt_stats st = { 0 };
	int ret = 1, rc, sd = -1;

	if (!out || !in || !rtt || (bd_path && bd_app_note(&app, count - 1, 0) < 0)) {
		fprintf(stderr, "ulsping client: out of memory\n");
		goto out;
	}
	if (getrandom(&seed, sizeof(seed), 0) != (ssize_t)sizeof(seed))
		seed = (uint64_t)(bench__now_s() * 1e9);
	sd = connect_retry(to);
	if (sd < 0) {
		fprintf(stderr, "ulsping client: connect: %s\n", strerror(-sd));
		goto out;
	}
	rc = set_nodelay(sd);
	if (rc == 0)
		rc = bench__send_all(ops, sd, &hdr, HDR_LEN);
	if (rc < 0) {
		fprintf(stderr, "ulsping client: %s\n", strerror(-rc));
		goto out;
	}
	for (uint64_t i = 0; i < count; i++) {
		bench__pattern_fill(seed, i * size, out, size);
		double t0 = bench__now_s();
		if (bd_path)
			app.v[i][0] = uls_breakdown_now();
		rc = bench__send_all(ops, sd, out, size);
		if (rc == 0)
			rc = bench__recv_all(ops, sd, in, size, NULL);
		if (bd_path)
			app.v[i][1] = uls_breakdown_now();
		double t1 = bench__now_s();
		if (rc < 0) {
			fprintf(stderr, "ulsping client: round trip %llu: %s\n",
				(unsigned long long)i, rc == -EPIPE ? "EOF" : strerror(-rc));
			goto out;
		}
		if (echo_verify(seed, i, in, size, &bad) < 0) {
			fprintf(stderr, "ulsping client: CORRUPT ECHO in round trip %llu at byte %llu "
				"of the message\n", (unsigned long long)i,
				(unsigned long long)(bad - i * size));
			goto out;
		}
		rtt[i] = (t1 - t0) * 1e6;
	}
	stats_compute(rtt + skip, (size_t)(count - skip), &st);
	printf("size %llu: mean %.1f us, p50 %.1f us, p99 %.1f us, min %.1f .. max %.1f us "
	       "(%s, %zu round trips, %.1f Mbit/s, every byte verified)\n", size, st.mean, st.p50,
	       st.p99, st.min, st.max, ops->name, st.n, bandwidth_mbps(size, st.p50));
	fflush(stdout);
	ret = json && write_client_json(json, size, ops->name, &st) < 0 ? 1 : 0;
	if (bd_path) {
		size_t nseg = 0;
		rc = bd_save(bd_path, &app, &nseg);
		if (rc < 0) {
			fprintf(stderr, "ulsping client: breakdown: %s\n", strerror(-rc));
			ret = 1;
		}
	}
out:
	if (sd >= 0)
		ops->close(sd);
	free(app.v);
	free(out);
	free(in);
	free(rtt);
	return ret;
}

/* ---- the driver ---- */

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
	got_signal = sig;
}

struct testbed {
	char src[PATH_MAX], build[PATH_MAX], script[PATH_MAX + 32];
	char ulsd[PATH_MAX];              /* installed: the prefix's ulsd; "" for a build tree */
	char node1_ctl[PATH_MAX], node2_ctl[PATH_MAX], node2_ip[64];
	char k1_ns[128], k2_ns[128], kernel_ip[64];
	bool up;
};

struct run {
	const char *mode;
	unsigned long long size;
	bool ok;
	struct rtt_stats st;
	bool bd, bd_ok;                   /* breakdown asked for, and obtained */
	struct bench_bd_result fwd, rev;  /* client -> server, server -> client */
	uint64_t bd_lost;                 /* segments the two traces overwrote unread */
};

/* Start argv with stdout on out_fd (-1: ours); returns the PID or -errno. */
static pid_t spawn(char *const argv[], int out_fd)
{
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		signal(SIGPIPE, SIG_DFL);
		if (out_fd >= 0 && dup2(out_fd, STDOUT_FILENO) < 0)
			_exit(127);
		int devnull = open("/dev/null", O_RDONLY);
		if (devnull >= 0)
			dup2(devnull, STDIN_FILENO);
		execvp(argv[0], argv);
		fprintf(stderr, "ulsping: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	return pid;
}

/* Wait up to timeout_s for pid; returns its wait status, -ETIMEDOUT, or -EINTR when we got
 * a signal (the child is then still running). */
static int wait_for(pid_t pid, double timeout_s)
{
	double deadline = bench__now_s() + timeout_s;
	int status;

	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			return status;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (got_signal)
			return -EINTR;
		if (bench__now_s() > deadline)
			return -ETIMEDOUT;
		nanosleep(&(struct timespec){ .tv_nsec = 5 * 1000 * 1000 }, NULL);
	}
}

/* Stop a child we started: TERM, KILL after 2 s, and reap it. */
static void stop_child(pid_t pid)
{
	if (pid <= 0)
		return;
	if (waitpid(pid, NULL, WNOHANG) == pid)
		return;
	kill(pid, SIGTERM);
	double deadline = bench__now_s() + 2;
	while (bench__now_s() < deadline) {
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return;
		nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* The build tree: $ULS_BUILDDIR, else the tree this binary runs from (apps/ulsping or
 * libtool's apps/.libs/ulsping). The source tree: $ULS_SRCDIR, else the build tree's
 * abs_top_srcdir (from its Makefile). An installed ulsping (run from the configured bindir,
 * apps/instdirs.h) with neither variable set needs no tree: the testbed script is in
 * pkglibexecdir and ulsd in sbindir, under the root it runs from. */
static int find_trees(struct testbed *tb)
{
	const char *b = getenv("ULS_BUILDDIR"), *s = getenv("ULS_SRCDIR");
	char self[PATH_MAX];

	tb->ulsd[0] = '\0';
	if (!(b && *b) && !(s && *s) &&
	    uls_installed_path(tb->script, sizeof(tb->script), ULS_PKGLIBEXECDIR, "testbed") == 0) {
		if (uls_installed_path(tb->ulsd, sizeof(tb->ulsd), ULS_SBINDIR, "ulsd") < 0 ||
		    access(tb->script, X_OK) != 0 || access(tb->ulsd, X_OK) != 0) {
			fprintf(stderr, "ulsping: the installation is incomplete: %s or %s is "
				"missing\n", tb->script, tb->ulsd);
			return -1;
		}
		tb->build[0] = tb->src[0] = '\0';
		return 0;
	}
	if (b && *b) {
		snprintf(tb->build, sizeof(tb->build), "%s", b);
	} else {
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		char *p = NULL;
		if (n > 0) {
			self[n] = '\0';
			p = strstr(self, "/apps/.libs/");
			if (!p)
				p = strstr(self, "/apps/ulsping");
		}
		if (!p) {
			fprintf(stderr, "ulsping: set ULS_BUILDDIR (the build tree with server/ulsd): "
				"this binary runs neither from a build tree nor from %s\n", ULS_BINDIR);
			return -1;
		}
		*p = '\0';
		snprintf(tb->build, sizeof(tb->build), "%s", self);
	}
	if (s && *s) {
		snprintf(tb->src, sizeof(tb->src), "%s", s);
	} else {
		char mk[PATH_MAX + 16], line[PATH_MAX + 64];
		snprintf(mk, sizeof(mk), "%s/Makefile", tb->build);
		FILE *f = fopen(mk, "r");
		tb->src[0] = '\0';
		while (f && fgets(line, sizeof(line), f)) {
			if (strncmp(line, "abs_top_srcdir = ", 17) == 0) {
				size_t len = strcspn(line + 17, "\n");
				if (len < sizeof(tb->src)) {
					memcpy(tb->src, line + 17, len);
					tb->src[len] = '\0';
				}
				break;
			}
		}
		if (f)
			fclose(f);
		if (!tb->src[0]) {
			fprintf(stderr, "ulsping: set ULS_SRCDIR (the source tree with "
				"tests/testbed/testbed): not found in %s\n", mk);
			return -1;
		}
	}
	snprintf(tb->script, sizeof(tb->script), "%s/tests/testbed/testbed", tb->src);
	if (access(tb->script, X_OK) != 0) {
		fprintf(stderr, "ulsping: %s: %s (check ULS_SRCDIR)\n", tb->script, strerror(errno));
		return -1;
	}
	return 0;
}

/* Copy the value of "export KEY=VALUE" lines we need. */
static void tb_take(struct testbed *tb, const char *key, const char *val)
{
	static const struct { const char *key; size_t off, len; } want[] = {
#define W(k, f) { k, offsetof(struct testbed, f), sizeof(((struct testbed *)0)->f) }
		W("TB_NODE1_CTL", node1_ctl), W("TB_NODE2_CTL", node2_ctl),
		W("TB_NODE2_IP", node2_ip), W("TB_KERNEL_NETNS", k1_ns),
		W("TB_KERNEL2_NETNS", k2_ns), W("TB_KERNEL_IP", kernel_ip),
#undef W
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (strcmp(key, want[i].key) == 0)
			snprintf((char *)tb + want[i].off, want[i].len, "%s", val);
}

/* Run `testbed CMD [--nodes 2]`; its stdout goes to a file, not a pipe: the ulsd daemons
 * that `up` starts would hold a pipe open. On `up`, parse the export lines. */
static int testbed_run(struct testbed *tb, const char *cmd)
{
	char tmp[] = "/tmp/ulsping-tb-XXXXXX", line[PATH_MAX + 64];
	char *argv[] = { tb->script, (char *)cmd, "--nodes", "2", NULL };
	int fd = mkstemp(tmp), ret = -1;

	if (fd < 0) {
		fprintf(stderr, "ulsping: %s: %s\n", tmp, strerror(errno));
		return -1;
	}
	unlink(tmp);
	if (strcmp(cmd, "up") != 0)
		argv[2] = NULL;
	pid_t pid = spawn(argv, fd);
	int st = pid < 0 ? (int)pid : wait_for(pid, TESTBED_TIMEOUT_S);
	if (st == -ETIMEDOUT || st == -EINTR)
		stop_child(pid);
	if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "ulsping: testbed %s failed (%s)\n", cmd,
			st == -ETIMEDOUT ? "timed out" : st == -EINTR ? "interrupted" :
			st < 0 ? strerror(-st) : "see its messages above");
		goto out;
	}
	ret = 0;
	if (strcmp(cmd, "up") != 0)
		goto out;
	FILE *f = fdopen(dup(fd), "r");
	if (!f)
		goto out;
	rewind(f);
	while (fgets(line, sizeof(line), f)) {
		char *eq, *key = line;
		line[strcspn(line, "\n")] = '\0';
		if (strncmp(key, "export ", 7) != 0 || !(eq = strchr(key, '=')))
			continue;
		*eq = '\0';
		tb_take(tb, key + 7, eq + 1);
	}
	fclose(f);
	if (!tb->node1_ctl[0] || !tb->node2_ctl[0] || !tb->node2_ip[0] || !tb->k1_ns[0] ||
	    !tb->k2_ns[0] || !tb->kernel_ip[0]) {
		fprintf(stderr, "ulsping: testbed up did not export TB_NODE1_CTL, TB_NODE2_CTL, "
			"TB_NODE2_IP, TB_KERNEL_NETNS, TB_KERNEL2_NETNS and TB_KERNEL_IP\n");
		ret = -1;
	}
out:
	close(fd);
	return ret;
}

/* Wait up to timeout_s for a line of the server's containing `word` on fd; returns 0 or -1. */
static int wait_line(int fd, const char *word, double timeout_s)
{
	double deadline = bench__now_s() + timeout_s;
	char buf[256];
	size_t have = 0;

	while (!got_signal && bench__now_s() < deadline) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 50) < 0 && errno != EINTR)
			return -1;
		if (!(p.revents & (POLLIN | POLLHUP)))
			continue;
		ssize_t n = read(fd, buf + have, sizeof(buf) - 1 - have);
		if (n <= 0)
			return -1;      /* the server exited (its message is on stderr) */
		have += (size_t)n;
		buf[have] = '\0';
		if (strstr(buf, word))
			return 0;
		if (have == sizeof(buf) - 1)
			have = 0;
	}
	return -1;
}

/* A number after "key": in a JSON text, or -1. */
static double json_num(const char *text, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	const char *p = strstr(text, pat);
	return p ? strtod(p + strlen(pat), NULL) : -1;
}

/* The breakdown of a run whose client has exited: the server saves its file when the
 * client's connection ends; match the two files in both directions. */
static void measure_breakdown(struct run *r, int srv_out, const char *cpath, const char *spath)
{
	struct bench_bd_side c = { 0 }, s = { 0 };
	int rc = -ETIMEDOUT;

	if (wait_line(srv_out, "breakdown saved", BD_SAVED_TIMEOUT_S) == 0) {
		rc = bench__bd_load(cpath, &c);
		if (rc == 0)
			rc = bench__bd_load(spath, &s);
	}
	if (rc < 0) {
		fprintf(stderr, "ulsping: %s, %llu bytes: no breakdown from the %s (%s)\n", r->mode,
			r->size, c.app ? "server" : "client", strerror(-rc));
		goto out;
	}
	int f = bench__bd_analyse(&c, &s, DEFAULT_SKIP, &r->fwd);
	int b = bench__bd_analyse(&s, &c, DEFAULT_SKIP, &r->rev);
	r->bd_lost = c.lost + s.lost;
	r->bd_ok = f == 0 && b == 0;
	if (!r->bd_ok)
		fprintf(stderr, "ulsping: %s, %llu bytes: no complete breakdown sample (%s)\n",
			r->mode, r->size, strerror(-(f < 0 ? f : b)));
	else if (r->fwd.samples < r->fwd.messages || r->rev.samples < r->rev.messages)
		fprintf(stderr, "ulsping: %s, %llu bytes: breakdown of %zu and %zu of %zu messages "
			"(left out: %zu and %zu without a segment, %zu and %zu unmatched, %zu and "
			"%zu disordered; %llu segments lost)\n", r->mode, r->size, r->fwd.samples,
			r->rev.samples, r->fwd.messages, r->fwd.no_segment, r->rev.no_segment,
			r->fwd.unmatched, r->rev.unmatched, r->fwd.disordered, r->rev.disordered,
			(unsigned long long)r->bd_lost);
out:
	bench__bd_free(&c);
	bench__bd_free(&s);
}

/* One measurement: a server and a client of `mode` for `size`, each stopped by its PID. */
static int measure(const struct testbed *tb, char *self, struct run *r, unsigned port)
{
	char portarg[16], toarg[96], sizearg[32], jpath[] = "/tmp/ulsping-run-XXXXXX";
	char bdc[] = "/tmp/ulsping-bdc-XXXXXX", bds[] = "/tmp/ulsping-bds-XXXXXX";
	bool relay = strcmp(r->mode, "relay") == 0;
	bool perproc = relay || strcmp(r->mode, "perproc") == 0;
	char *dp = relay ? "relay" : "direct";
	pid_t srv = -1, cli = -1;
	int pfd[2] = { -1, -1 }, jfd, bdc_fd = -1, bds_fd = -1, ret = -1;

	snprintf(portarg, sizeof(portarg), "%u", port);
	snprintf(toarg, sizeof(toarg), "%s:%u", perproc ? tb->node2_ip : tb->kernel_ip, port);
	snprintf(sizearg, sizeof(sizearg), "%llu", r->size);
	jfd = mkstemp(jpath);
	if (r->bd) {
		bdc_fd = mkstemp(bdc);
		bds_fd = mkstemp(bds);
	}
	if (jfd < 0 || (r->bd && (bdc_fd < 0 || bds_fd < 0)) || pipe2(pfd, O_CLOEXEC) < 0) {
		fprintf(stderr, "ulsping: %s\n", strerror(errno));
		goto out;
	}
	char *sv_uls[] = { self, "server", "--port", portarg, "--ctl", (char *)tb->node2_ctl,
			   "--datapath", dp, r->bd ? "--breakdown" : NULL, bds, NULL };
	char *sv_k[] = { "ip", "netns", "exec", (char *)tb->k1_ns, self, "server", "--port",
			 portarg, NULL };
	char *cl_uls[] = { self, "client", "--to", toarg, "--size", sizearg, "--json", jpath,
			   "--ctl", (char *)tb->node1_ctl, "--datapath", dp,
			   r->bd ? "--breakdown" : NULL, bdc, NULL };
	char *cl_k[] = { "ip", "netns", "exec", (char *)tb->k2_ns, self, "client", "--to", toarg,
			 "--size", sizearg, "--json", jpath, NULL };

	srv = spawn(perproc ? sv_uls : sv_k, pfd[1]);
	close(pfd[1]);
	if (srv < 0 || wait_line(pfd[0], "listening", READY_TIMEOUT_S) < 0) {
		fprintf(stderr, "ulsping: %s server for size %llu did not start listening\n",
			r->mode, r->size);
		goto out;
	}
	cli = spawn(perproc ? cl_uls : cl_k, -1);
	int st = cli < 0 ? (int)cli : wait_for(cli, RUN_TIMEOUT_S);
	if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "ulsping: %s client for size %llu failed (%s)\n", r->mode, r->size,
			st == -ETIMEDOUT ? "timed out" : st == -EINTR ? "interrupted" :
			st < 0 ? strerror(-st) : WIFEXITED(st) ? "exit status" : "killed by a signal");
		goto out;
	}
	cli = -1;
	char text[1024];
	ssize_t n = pread(jfd, text, sizeof(text) - 1, 0);
	text[n > 0 ? n : 0] = '\0';
	r->st.mean = json_num(text, "mean");
	r->st.p50 = json_num(text, "p50");
	r->st.p99 = json_num(text, "p99");
	r->st.min = json_num(text, "min");
	r->st.max = json_num(text, "max");
	r->st.n = (size_t)json_num(text, "count");
	if (r->st.mean < 0 || r->st.p50 < 0 || r->st.p99 < 0) {
		fprintf(stderr, "ulsping: %s client for size %llu wrote no result\n", r->mode, r->size);
		goto out;
	}
	r->ok = true;
	ret = 0;
	if (r->bd)
		measure_breakdown(r, pfd[0], bdc, bds);
out:
	stop_child(cli);
	stop_child(srv);
	if (pfd[0] >= 0)
		close(pfd[0]);
	if (jfd >= 0) {
		close(jfd);
		unlink(jpath);
	}
	if (bdc_fd >= 0) {
		close(bdc_fd);
		unlink(bdc);
	}
	if (bds_fd >= 0) {
		close(bds_fd);
		unlink(bds);
	}
	return ret;
}

static int write_runs_json(const char *path, const struct run *runs, size_t n)
{
	FILE *f = fopen(path, "w");

	if (!f) {
		fprintf(stderr, "ulsping: %s: %s\n", path, strerror(errno));
		return -1;
	}
	fprintf(f, "{\"count\": %d, \"skip\": %d, \"runs\": [", DEFAULT_COUNT, DEFAULT_SKIP);
	for (size_t i = 0; i < n; i++) {
		const struct run *r = &runs[i];
		fprintf(f, "%s\n  {\"mode\": \"%s\", \"size\": %llu, \"ok\": %s", i ? "," : "",
			r->mode, r->size, r->ok ? "true" : "false");
		if (r->ok)
			fprintf(f, ", \"rtt_us\": {\"mean\": %.3f, \"p50\": %.3f, \"p99\": %.3f, "
				   "\"min\": %.3f, \"max\": %.3f}, \"bandwidth_mbps\": %.3f",
				r->st.mean, r->st.p50, r->st.p99, r->st.min, r->st.max,
				bandwidth_mbps(r->size, r->st.p50));
		if (r->bd && r->bd_ok) {
			fprintf(f, ", \"breakdown\": {\"skip\": %d, \"client_to_server\": ", DEFAULT_SKIP);
			bench__bd_json(f, &r->fwd, r->bd_lost);
			fputs(", \"server_to_client\": ", f);
			bench__bd_json(f, &r->rev, r->bd_lost);
			fputc('}', f);
		} else if (r->bd) {
			fputs(", \"breakdown\": null", f);
		}
		fputc('}', f);
	}
	fprintf(f, "\n]}\n");
	return fclose(f) == 0 ? 0 : -1;
}

/* The breakdown tables (seed 003's Tables 2-5: a row per size, a column per layer). */
static void print_breakdown(const struct run *runs, size_t n)
{
	static const char *const what[3] = {
		"client -> server (node 1 -> node 2), mean us; the stages add up to the one-way "
		"latency",
		"client -> server, median us (each stage's own median: they need not add up)",
		"server -> client (the echo, node 2 -> node 1), mean us",
	};

	for (unsigned t = 0; t < 3; t++) {
		printf("\nOne-way latency by layer, relay, %s\n", what[t]);
		bench__bd_table_header(stdout);
		for (size_t i = 0; i < n; i++) {
			const struct run *r = &runs[i];
			if (!r->bd)
				continue;
			if (!r->bd_ok) {
				printf("%9llu %7s\n", r->size, "FAILED");
				continue;
			}
			bench__bd_table_row(stdout, r->size, t == 2 ? &r->rev : &r->fwd, t == 1,
					    (t == 1 ? r->st.p50 : r->st.mean) / 2);
		}
	}
	printf("\nStages (a message is followed through the segment that carries its last "
	       "byte):\n");
	bench__bd_table_legend(stdout);
}

static int drive(const char **modes, size_t nmodes, const unsigned long long *sizes,
		 size_t nsizes, const char *json, bool breakdown)
{
	struct testbed tb = { 0 };
	struct run runs[2 * SIZES_MAX] = { 0 };
	char self[PATH_MAX];
	size_t nruns = 0;
	int ret = 1;

	if (geteuid() != 0) {
		fprintf(stderr, "ulsping: the driver must run as root (it builds a testbed of "
			"network namespaces)\n");
		return 1;
	}
	ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (sl <= 0) {
		fprintf(stderr, "ulsping: /proc/self/exe: %s\n", strerror(errno));
		return 1;
	}
	self[sl] = '\0';
	if (find_trees(&tb) < 0)
		return 1;
	setenv("TB_NAME", TB_NAME, 0);   /* a caller's own TB_NAME wins */
	if (tb.ulsd[0]) {
		setenv("ULSD", tb.ulsd, 0);   /* the testbed starts the prefix's ulsd */
	} else {
		setenv("ULS_BUILDDIR", tb.build, 1);
		setenv("ULS_SRCDIR", tb.src, 1);
	}
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	tb.up = true;   /* a failed `up` cleans up after itself; `down` is safe anyway */
	if (testbed_run(&tb, "up") < 0)
		goto down;
	for (size_t m = 0; m < nmodes && !got_signal; m++)
		for (size_t s = 0; s < nsizes && !got_signal; s++) {
			struct run *r = &runs[nruns];
			*r = (struct run){ .mode = modes[m], .size = sizes[s],
					   .bd = breakdown && strcmp(modes[m], "relay") == 0 };
			fprintf(stderr, "ulsping: %s, %llu bytes\n", r->mode, r->size);
			measure(&tb, self, r, BASE_PORT + (unsigned)nruns);
			nruns++;
		}
	printf("\n%-8s %9s %11s %11s %11s %12s\n", "mode", "size", "mean_us", "p50_us", "p99_us",
	       "Mbit/s@p50");
	bool all_ok = nruns == nmodes * nsizes;
	for (size_t i = 0; i < nruns; i++) {
		const struct run *r = &runs[i];
		if (r->ok)
			printf("%-8s %9llu %11.1f %11.1f %11.1f %12.1f\n", r->mode, r->size,
			       r->st.mean, r->st.p50, r->st.p99, bandwidth_mbps(r->size, r->st.p50));
		else
			printf("%-8s %9llu %11s\n", r->mode, r->size, "FAILED");
		all_ok = all_ok && r->ok && (!r->bd || r->bd_ok);
	}
	if (breakdown)
		print_breakdown(runs, nruns);
	if (json && write_runs_json(json, runs, nruns) < 0)
		all_ok = false;
	ret = all_ok ? 0 : 1;
down:
	if (tb.up) {
		sig_atomic_t saved = got_signal;
		got_signal = 0;      /* `down` must run even after ^C */
		if (testbed_run(&tb, "down") < 0)
			ret = 1;
		got_signal = saved;
	}
	if (got_signal) {
		fprintf(stderr, "ulsping: interrupted\n");
		ret = 1;
	}
	return ret;
}

/* ---- arguments ---- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ulsping [--mode MODE[,MODE...]] [--sizes B[,B...]] [--json FILE] [--breakdown]\n"
		"               MODE: perproc (direct data path), relay, kernel (default all);\n"
		"               sizes default " DEFAULT_SIZES "\n"
		"       ulsping server --port P [--breakdown FILE] [NODE OPTIONS]\n"
		"       ulsping client --to IP:PORT --size B [--count N (3000)] [--skip K (50)]\n"
		"                      [--json FILE] [--breakdown FILE] [NODE OPTIONS]\n"
		"--breakdown: one-way latency by layer (relay mode; a build configured with\n"
		"             --enable-breakdown); workers: save their stamps to FILE\n"
		"NODE OPTIONS: --tap IFNAME --ip A.B.C.D/NN [--mac MAC] [--gw A.B.C.D] [--mtu N]\n"
		"              (a node of its own), or --ctl PATH [--datapath direct|relay]\n"
		"              (join ulsd's node, on its direct data path by default);\n"
		"              without them the Linux kernel's TCP is used\n");
}

/* Split a comma list of modes into out (at most MODES_MAX, no repeats); returns the count
 * or -1. */
static int parse_modes(char *s, const char **out)
{
	static const char *const known[MODES_MAX] = { "perproc", "relay", "kernel" };
	int n = 0;

	for (char *save = NULL, *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		const char *m = NULL;
		for (int k = 0; k < MODES_MAX; k++)
			if (!strcmp(t, known[k]))
				m = known[k];
		for (int k = 0; m && k < n; k++)
			if (out[k] == m)
				m = NULL;
		if (!m || n == MODES_MAX) {
			fprintf(stderr, "ulsping: bad --mode '%s': perproc, relay or kernel, once each\n", t);
			return -1;
		}
		out[n++] = m;
	}
	if (n == 0)
		fprintf(stderr, "ulsping: empty --mode\n");
	return n ? n : -1;
}

static int parse_sizes(char *s, unsigned long long *out)
{
	int n = 0;

	if (!*s || s[strlen(s) - 1] == ',' || *s == ',' || strstr(s, ",,")) {
		fprintf(stderr, "ulsping: bad --sizes '%s'\n", s);
		return -1;
	}
	for (char *save = NULL, *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		unsigned long long v;
		if (bench__parse_size(t, &v) < 0 || v == 0 || v > SIZE_MAX_BYTES || n == SIZES_MAX) {
			fprintf(stderr, "ulsping: bad --sizes entry '%s': 1..%llu bytes, at most %d "
				"sizes\n", t, SIZE_MAX_BYTES, SIZES_MAX);
			return -1;
		}
		out[n++] = v;
	}
	return n;
}

static int driver_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "mode", required_argument, NULL, 'm' }, { "sizes", required_argument, NULL, 's' },
		{ "json", required_argument, NULL, 'j' }, { "breakdown", no_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	char defmodes[] = DEFAULT_MODES, defsizes[] = DEFAULT_SIZES;
	const char *modes[MODES_MAX], *json = NULL;
	char *mode_arg = defmodes, *size_arg = defsizes;
	unsigned long long sizes[SIZES_MAX];
	bool breakdown = false;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'm': mode_arg = optarg; break;
		case 's': size_arg = optarg; break;
		case 'j': json = optarg; break;
		case 'b': breakdown = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "ulsping: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (breakdown && !uls_breakdown_enabled()) {
		fprintf(stderr, "ulsping: --breakdown needs a build configured with "
			"--enable-breakdown: this one records no per-layer timestamps\n");
		return 2;
	}
	int nmodes = parse_modes(mode_arg, modes);
	int nsizes = nmodes < 0 ? -1 : parse_sizes(size_arg, sizes);
	if (nmodes < 0 || nsizes < 0)
		return 2;
	bool has_relay = false;
	for (int m = 0; m < nmodes; m++)
		has_relay |= strcmp(modes[m], "relay") == 0;
	if (breakdown && !has_relay) {
		fprintf(stderr, "ulsping: --breakdown is for the relay mode (the stamps travel in "
			"the relay's rings; the kernel's layers carry none)\n");
		return 2;
	}
	return drive(modes, (size_t)nmodes, sizes, (size_t)nsizes, json, breakdown);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "tap", required_argument, NULL, 'N' }, { "ip", required_argument, NULL, 'N' },
		{ "mac", required_argument, NULL, 'N' }, { "gw", required_argument, NULL, 'N' },
		{ "mtu", required_argument, NULL, 'N' }, { "ctl", required_argument, NULL, 'N' },
		{ "datapath", required_argument, NULL, 'N' },
		{ "port", required_argument, NULL, 'p' }, { "to", required_argument, NULL, 't' },
		{ "size", required_argument, NULL, 'z' }, { "count", required_argument, NULL, 'c' },
		{ "skip", required_argument, NULL, 'k' }, { "json", required_argument, NULL, 'j' },
		{ "breakdown", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	struct node_opts no = { 0 };
	struct sockaddr_in at = { .sin_family = AF_INET };
	unsigned long long size = 0, count = DEFAULT_COUNT, skip = DEFAULT_SKIP, v;
	bool have_port = false, have_to = false;
	const char *json = NULL, *bd_path = NULL;
	int c, idx;

	if (argc < 2 || (strcmp(argv[1], "server") && strcmp(argv[1], "client")))
		return driver_main(argc, argv);
	bool server = !strcmp(argv[1], "server");
	optind = 2;
	while ((c = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
		switch (c) {
		case 'N':
			if (bench__node_opt(&no, opts[idx].name, optarg) != 1)
				return 2;
			break;
		case 'p':
			if (!server || bench__parse_size(optarg, &v) < 0 || v == 0 || v > 65535) {
				fprintf(stderr, "ulsping: bad --port '%s'%s\n", optarg,
					server ? ": 1..65535" : ": for the server only");
				return 2;
			}
			at.sin_port = htons((uint16_t)v);
			have_port = true;
			break;
		case 't':
			if (server || bench__parse_addr(optarg, &at, 0) < 0 || at.sin_port == 0) {
				fprintf(stderr, "ulsping: bad --to '%s': expected A.B.C.D:PORT%s\n", optarg,
					server ? " (client only)" : "");
				return 2;
			}
			have_to = true;
			break;
		case 'z':
			if (bench__parse_size(optarg, &size) < 0 || size == 0 || size > SIZE_MAX_BYTES) {
				fprintf(stderr, "ulsping: bad --size '%s': 1..%llu bytes\n", optarg,
					SIZE_MAX_BYTES);
				return 2;
			}
			break;
		case 'c':
			if (bench__parse_size(optarg, &count) < 0 || count == 0 || count > COUNT_MAX) {
				fprintf(stderr, "ulsping: bad --count '%s': 1..%llu\n", optarg, COUNT_MAX);
				return 2;
			}
			break;
		case 'k':
			if (bench__parse_size(optarg, &skip) < 0) {
				fprintf(stderr, "ulsping: bad --skip '%s'\n", optarg);
				return 2;
			}
			break;
		case 'j':
			json = optarg;
			break;
		case 'b':
			bd_path = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "ulsping: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (bd_path && (!uls_breakdown_enabled() || !no.ctl)) {
		fprintf(stderr, "ulsping %s: --breakdown needs %s\n", argv[1],
			!uls_breakdown_enabled() ? "a build configured with --enable-breakdown" :
			"--ctl (a process on a ulsd node: the stamps come from the rings)");
		return 2;
	}
	if (server && !have_port) {
		fprintf(stderr, "ulsping server: --port is required\n");
		return 2;
	}
	if (!server && (!have_to || !size)) {
		fprintf(stderr, "ulsping client: --to IP:PORT and --size B are required\n");
		return 2;
	}
	if (!server && skip >= count) {
		fprintf(stderr, "ulsping client: --skip %llu leaves no samples of --count %llu\n",
			skip, count);
		return 2;
	}
	if (server && json) {
		fprintf(stderr, "ulsping server: --json is for the client\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	int started = bench__node_start(&no, "ulsping");
	if (started < 0)
		return 1;
	if (started)
		ops = &bench__uls_ops;
	int rc = server ? run_server(&at, bd_path) :
			  run_client(&at, size, count, skip, json, bd_path);
	if (started)
		uls_node_stop();
	return rc;
}
