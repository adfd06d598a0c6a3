/* ulsbench: verified TCP streams between a ulstack node and any peer, with throughput; and,
 * without a subcommand, the concurrent-stream benchmark sweep (apps/ulsbench_sweep.py); with
 * `apps`, real programs under ulsrun against the same programs on the kernel's TCP
 * (apps/ulsbench_apps.py).
 *
 *   ulsbench server (--port P | --unix PATH) [--count N] [--reuseport] [--family 4|6]
 *                   [NODE OPTIONS]
 *   ulsbench client (--to IP[:PORT] | --to [IPV6]:PORT | --unix PATH)
 *                   (--bytes N | --seconds S [--warmup W])
 *                   [--streams K] [--dir send|recv] [--json FILE] [NODE OPTIONS]
 *   ulsbench [--mode MODE[,...]] [--streams N[,...]] [--seconds S] [--mtu M[,...]] ...
 *   ulsbench apps [--apps LIST] [--seconds S] [--repeat R] [--json FILE] [--plot DIR]
 *
 * NODE OPTIONS: --tap IF --ip A.B.C.D/NN [--mac M] [--gw G] [--mtu N] (a node of its own) or
 * --ctl PATH (join ulsd's node); without them the Linux kernel's TCP is used, so the same
 * tool measures every side of a comparison. --unix uses AF_UNIX stream sockets (the worker
 * side of the central-server organisation). IPv6: a client connects to an IPv6 --to; a
 * server with --family 6 listens on [::] (dual-stack, IPv4 peers too). ulstack carries IPv6
 * only on a node with an IPv6 address (bench__family_check says so and exits 2).
 *
 * Data moves in 64 KiB messages (seed 004's message size) and every byte is checked
 * against apps/pattern.h. The client reports throughput only for transfers the receiver
 * verified: the clock of a stream stops when the receiver's verdict arrives.
 *
 * A time-limited transfer may begin with a warm-up (--warmup W, like iperf3's --omit): the
 * sender sends for W + S seconds and every byte is verified, but the throughput is that of
 * the bytes the receiver's application took in from W seconds after the request on. So a
 * figure describes streams that run together in steady state, after each process has
 * faulted in its buffers and rings and TCP has opened its windows.
 *
 * The wire format of a stream (request, data, verdict) is apps/benchstream.h's.
 *
 * SIGUSR1 makes a running ulsbench report on stderr, like dd: the bytes its streams moved
 * so far and, on ulstack, the stack's non-zero counters. Two reports some seconds apart
 * tell a slow transfer from a stalled one, and which counters still move (retransmission
 * timeouts, drops) while it is stalled; the test suites ask for them before they kill a
 * transfer that ran out of time.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <time.h>
#include <unistd.h>

#include "apps/netops.h"
#include "netif/opt/opt.h"
#include "apps/clock.h"
#include "apps/instdirs.h"
#include "apps/pattern.h"
#include "apps/benchstream.h"

#define DEFAULT_PORT  5001
#define STREAMS_MAX   1024
#define PROG          "ulsbench"


static const struct netops *ops = &bench__kernel_ops;
/* --congestion: the kernel's congestion control for the client's sockets (TCP_CONGESTION;
 * NULL: the namespace's default). The benchmarks' kernel peers otherwise run whatever the
 * host's net.ipv4.tcp_congestion_control says, which need not be Linux's CUBIC. */
static const char *congestion;

/* What SIGUSR1's report says, besides the bytes moved (bench__moved): whether the stack
 * is ulstack's and up (under report_mtx, which uls_node_stop() waits for). */
static pthread_mutex_t report_mtx = PTHREAD_MUTEX_INITIALIZER;
static bool report_counters;

static void *serve(void *arg)
{
	int sd = (int)(intptr_t)arg;
	uint8_t req[BENCH_REQ_LEN], verdict[BENCH_VERDICT_LEN] = { 0 };
	uint8_t *buf = malloc(BENCH_MSG_SIZE);
	double t0 = bench__now_s();
	struct bench_req rq;

	if (!buf || bench__recv_all(ops, sd, req, BENCH_REQ_LEN, NULL) < 0 ||
	    bench__req_get(req, &rq) < 0) {
		fprintf(stderr, "ulsbench server: bad or missing request\n");
		goto out;
	}
	uint64_t good = 0;
	if (rq.dir == BENCH_CLIENT_SENDS) {
		struct bench_measure m = { 0 };
		double mark = bench__now_s() + rq.warmup_ms / 1000.0;
		int st = bench__stream_in(ops, sd, rq.seed, rq.bytes, buf, &good, mark, &m);
		bench__verdict_put(verdict, st, good, &m);
		bench__send_all(ops, sd, verdict, BENCH_VERDICT_LEN);
		double dt = bench__now_s() - t0;
		printf("{\"role\": \"server\", \"dir\": \"recv\", \"bytes\": %llu, \"verified\": %s, "
		       "\"seconds\": %.6f, \"pid\": %d}\n", (unsigned long long)good,
		       st == BENCH_OK ? "true" : "false", dt, (int)getpid());
		fflush(stdout);
	} else if (rq.dir == BENCH_SERVER_SENDS) {
		uint64_t sent;
		if (bench__stream_out(ops, sd, rq.seed, rq.bytes, rq.millis, buf, &sent) == 0)
			bench__recv_all(ops, sd, verdict, BENCH_VERDICT_LEN, NULL);
	}
out:
	free(buf);
	ops->close(sd);
	return NULL;
}

struct endpoint {
	bool unix_path;
	union bench_addr in;     /* AF_INET or AF_INET6 */
	struct sockaddr_un un;
};

/* Open a listening or connected socket on the endpoint; returns a descriptor or -errno.
 * AF_UNIX sockets are kernel fds, used through the kernel table. */
static int ep_socket(const struct endpoint *e)
{
	if (!e->unix_path)
		return ops->socket_af(e->in.sa.sa_family, SOCK_STREAM);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	return fd < 0 ? -errno : fd;
}

/* The stack's non-zero counters as a JSON object (ulstack only: the loss-recovery counters
 * tcp_rto, tcp_recovery_sack, ... say where a transfer's time went under loss). */
static void print_counters(FILE *f)
{
	int n = uls_counters(NULL, 0);
	struct uls_counter *c = n > 0 ? calloc((size_t)n, sizeof(*c)) : NULL;
	bool first = true;

	if (c)
		n = uls_counters(c, (size_t)n);
	fputc('{', f);
	for (int i = 0; c && i < n; i++)
		if (c[i].value) {
			fprintf(f, "%s\"%s\": %llu", first ? "" : ", ", c[i].name,
				(unsigned long long)c[i].value);
			first = false;
		}
	fputc('}', f);
	free(c);
}

/* SIGUSR1, taken by this thread alone (main blocks it before any other thread exists, so
 * every thread inherits the block): the report above. Counters take the stack's lock; a
 * report without them says a thread holds it. */
static void *report_on_usr1(void *arg)
{
	const sigset_t *usr1 = arg;
	int sig;

	while (sigwait(usr1, &sig) == 0) {
		fprintf(stderr, "ulsbench: pid %d: %llu bytes moved\n", (int)getpid(),
			(unsigned long long)__atomic_load_n(&bench__moved, __ATOMIC_RELAXED));
		pthread_mutex_lock(&report_mtx);
		if (report_counters) {
			fputs("ulsbench: counters ", stderr);
			print_counters(stderr);
			fputc('\n', stderr);
		}
		pthread_mutex_unlock(&report_mtx);
	}
	return NULL;
}

static void start_reporter(void)
{
	static sigset_t usr1;
	pthread_t t;

	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	if (pthread_sigmask(SIG_BLOCK, &usr1, NULL) == 0 &&
	    pthread_create(&t, NULL, report_on_usr1, &usr1) == 0)
		pthread_detach(t);
}

static int run_server(const struct endpoint *e, long count, bool reuseport)
{
	int one = 1, rc, sd = ep_socket(e);

	if (sd < 0) {
		fprintf(stderr, "ulsbench server: socket: %s\n", strerror(-sd));
		return 1;
	}
	if (e->unix_path) {
		unlink(e->un.sun_path);
		rc = bind(sd, (const struct sockaddr *)&e->un, sizeof(e->un)) < 0 ||
		     listen(sd, 1024) < 0 ? -errno : 0;
	} else {
		ops->setsockopt(sd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (reuseport)
			ops->setsockopt(sd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
		rc = ops->bind_sa(sd, &e->in.sa, bench__addr_len(&e->in));
		if (rc == 0)
			rc = ops->listen(sd, 1024);
	}
	if (rc < 0) {
		fprintf(stderr, "ulsbench server: listen: %s\n", strerror(-rc));
		return 1;
	}
	if (e->unix_path)
		fprintf(stderr, "ulsbench server: listening on %s (unix)\n", e->un.sun_path);
	else
		fprintf(stderr, "ulsbench server: listening on port %u (%s)\n",
			bench__addr_port(&e->in), ops->name);
	pthread_t *threads = calloc(count > 0 ? (size_t)count : 1, sizeof(*threads));
	for (long i = 0; count <= 0 || i < count; i++) {
		int c = e->unix_path ? accept4(sd, NULL, NULL, SOCK_CLOEXEC) : ops->accept(sd, NULL);
		if (e->unix_path && c < 0)
			c = -errno;
		if (c < 0) {
			fprintf(stderr, "ulsbench server: accept: %s\n", strerror(-c));
			return 1;
		}
		pthread_t t;
		if (pthread_create(&t, NULL, serve, (void *)(intptr_t)c) != 0) {
			ops->close(c);
			continue;
		}
		if (count > 0)
			threads[i] = t;
		else
			pthread_detach(t);
	}
	for (long i = 0; i < count; i++)
		pthread_join(threads[i], NULL);
	free(threads);
	ops->close(sd);
	if (e->unix_path)
		unlink(e->un.sun_path);
	return 0;
}

struct stream {
	const struct endpoint *to;
	uint64_t bytes;
	uint32_t millis;  /* the sender's time limit, the warm-up included */
	uint32_t warmup;  /* milliseconds not measured at the start */
	int dir;
	double start_at;  /* CLOCK_MONOTONIC seconds to start moving data at (0: at once) */
	pthread_t thread;
	/* results */
	int rc, st;
	uint64_t good;
	double secs;
	struct bench_measure m;
	char cc[16];      /* the kernel socket's congestion control, "" for ulstack */
};

static void *client_stream(void *arg)
{
	struct stream *s = arg;
	uint8_t req[BENCH_REQ_LEN], verdict[BENCH_VERDICT_LEN] = { 0 };
	uint8_t *buf = malloc(BENCH_MSG_SIZE);
	uint64_t seed, sent = 0;
	int sd = ep_socket(s->to);

	s->st = BENCH_SHORT;
	if (getrandom(&seed, sizeof(seed), 0) != (ssize_t)sizeof(seed))
		seed = (uint64_t)bench__now_s() ^ (uint64_t)(uintptr_t)s;
	if (sd < 0 || !buf) {
		s->rc = sd < 0 ? sd : -ENOMEM;
		free(buf);
		return NULL;
	}
	if (congestion && setsockopt(sd, IPPROTO_TCP, TCP_CONGESTION, congestion,
				     (socklen_t)strlen(congestion)) < 0) {
		s->rc = -errno;
		goto out;
	}
	s->rc = s->to->unix_path ?
		(connect(sd, (const struct sockaddr *)&s->to->un, sizeof(s->to->un)) < 0 ? -errno : 0) :
		ops->connect_sa(sd, &s->to->in.sa, bench__addr_len(&s->to->in));
	if (s->rc < 0)
		goto out;
	if (ops == &bench__kernel_ops && !s->to->unix_path) {
		socklen_t len = sizeof(s->cc) - 1;
		if (getsockopt(sd, IPPROTO_TCP, TCP_CONGESTION, s->cc, &len) < 0)
			s->cc[0] = 0;
	}
	bench__req_put(req, &(struct bench_req){ .dir = s->dir, .bytes = s->bytes, .seed = seed,
						  .millis = s->millis, .warmup_ms = s->warmup });
	/* Connected and ready: wait for the common start, so that the streams of many
	 * processes run at the same time instead of one after another. */
	for (double now = bench__now_s(); s->start_at > now; now = bench__now_s()) {
		double wait = s->start_at - now;
		struct timespec ts = { (time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9) };
		nanosleep(&ts, NULL);
	}
	double t0 = bench__now_s();
	s->rc = bench__send_all(ops, sd, req, BENCH_REQ_LEN);
	if (s->rc == 0 && s->dir == BENCH_CLIENT_SENDS) {
		s->rc = bench__stream_out(ops, sd, seed, s->bytes, s->millis, buf, &sent);
		if (s->rc == 0)
			s->rc = bench__recv_all(ops, sd, verdict, BENCH_VERDICT_LEN, NULL);
		if (s->rc == 0) {
			bench__verdict_get(verdict, &s->st, &s->good, &s->m);
			/* the receiver must have verified exactly what we sent */
			if (s->st == BENCH_OK && s->good != sent)
				s->st = BENCH_SHORT;
		}
	} else if (s->rc == 0) {
		s->st = bench__stream_in(ops, sd, seed, s->bytes, buf, &s->good,
					 t0 + s->warmup / 1000.0, &s->m);
		bench__verdict_put(verdict, s->st, s->good, &s->m);
		bench__send_all(ops, sd, verdict, BENCH_VERDICT_LEN);
	}
	s->secs = bench__now_s() - t0;
out:
	ops->close(sd);
	free(buf);
	return NULL;
}

static int run_client(const struct endpoint *to, uint64_t bytes, uint32_t millis,
		      uint32_t warmup, int dir, unsigned nstreams, double start_at, const char *json)
{
	struct stream *st = calloc(nstreams, sizeof(*st));
	double cpu0 = bench__cpu_s(), t0 = start_at > bench__now_s() ? start_at : bench__now_s();
	uint64_t total = 0;
	bool ok = true;

	if (!st)
		return 1;
	for (unsigned i = 0; i < nstreams; i++) {
		st[i] = (struct stream){ .to = to, .bytes = bytes, .millis = millis + warmup,
					 .warmup = warmup, .dir = dir, .start_at = start_at };
		if (pthread_create(&st[i].thread, NULL, client_stream, &st[i]) != 0) {
			fprintf(stderr, "ulsbench client: cannot start stream %u\n", i);
			return 1;
		}
	}
	for (unsigned i = 0; i < nstreams; i++) {
		pthread_join(st[i].thread, NULL);
		bool good = st[i].rc == 0 && st[i].st == BENCH_OK && (!bytes || st[i].good == bytes);
		if (st[i].rc < 0 && nstreams == 1)
			fprintf(stderr, "ulsbench client: transfer failed: %s\n", strerror(-st[i].rc));
		else if (st[i].rc < 0)
			fprintf(stderr, "ulsbench client: stream %u failed: %s\n", i, strerror(-st[i].rc));
		else if (!good)
			fprintf(stderr, "ulsbench client: stream %u: %s after %llu bytes\n", i,
				st[i].st == BENCH_CORRUPT ? "CORRUPT DATA" : "SHORT TRANSFER",
				(unsigned long long)st[i].good);
		ok = ok && good;
		total += st[i].good;
	}
	double wall = bench__now_s() - t0, cpu = bench__cpu_s() - cpu0;
	/* The measured span of all streams together: first mark to last byte. */
	double from = 0, to_s = 0;
	uint64_t measured = 0;
	for (unsigned i = 0; i < nstreams; i++) {
		if (i == 0 || st[i].m.from < from)
			from = st[i].m.from;
		if (i == 0 || st[i].m.to > to_s)
			to_s = st[i].m.to;
		measured += st[i].m.bytes;
	}
	double span = to_s - from;
	double gbps = span > 0 ? (double)measured * 8 / span / 1e9 : 0;
	if (!(nstreams == 1 && st[0].rc < 0))
		printf("%s %s: %u stream%s, %llu bytes in %.3f s, %s; %.3f Gbit/s%s\n",
		       to->unix_path ? "unix" : ops->name, dir == BENCH_CLIENT_SENDS ? "send" : "recv",
		       nstreams, nstreams == 1 ? "" : "s", (unsigned long long)total, wall,
		       ok ? "every byte verified" : "NOT VERIFIED", gbps,
		       warmup ? " after the warm-up" : "");
	if (json) {
		FILE *f = fopen(json, "w");
		if (!f) {
			fprintf(stderr, "ulsbench: %s: %s\n", json, strerror(errno));
			return 1;
		}
		fprintf(f, "{\"stack\": \"%s\", \"dir\": \"%s\", \"streams\": [",
			to->unix_path ? "unix" : ops->name, dir == BENCH_CLIENT_SENDS ? "send" : "recv");
		for (unsigned i = 0; i < nstreams; i++) {
			bool good = st[i].rc == 0 && st[i].st == BENCH_OK;
			const struct bench_measure *m = &st[i].m;
			double sp = m->to - m->from;
			fprintf(f, "%s{\"bytes_verified\": %llu, \"seconds\": %.6f, "
				   "\"measured_bytes\": %llu, \"measured_from\": %.6f, "
				   "\"measured_to\": %.6f, \"gbps\": %.4f, \"verified\": %s}",
				i ? ", " : "", (unsigned long long)(good ? st[i].good : 0), st[i].secs,
				(unsigned long long)(good ? m->bytes : 0), m->from, m->to,
				good && sp > 0 ? (double)m->bytes * 8 / sp / 1e9 : 0,
				good ? "true" : "false");
		}
		fprintf(f, "], \"bytes\": %llu, \"bytes_verified\": %llu, \"verified\": %s, "
			   "\"seconds\": %.6f, \"warmup_seconds\": %.3f, \"measured_bytes\": %llu, "
			   "\"measured_seconds\": %.6f, \"gbps\": %.4f, \"cpu_seconds\": %.3f",
			(unsigned long long)(bytes * nstreams), (unsigned long long)(ok ? total : 0),
			ok ? "true" : "false", wall, warmup / 1000.0,
			(unsigned long long)(ok ? measured : 0), span, ok ? gbps : 0, cpu);
		if (nstreams > 0 && st[0].cc[0])
			fprintf(f, ", \"congestion\": \"%s\"", st[0].cc);
		if (ops != &bench__kernel_ops) {
			fputs(", \"counters\": ", f);
			print_counters(f);
		}
		fputs("}\n", f);
		fclose(f);
	}
	free(st);
	return ok ? 0 : 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ulsbench server (--port P | --unix PATH) [--count N] [--reuseport]\n"
		"                       [--family 4|6] [NODE OPTIONS]   (6: listen on [::])\n"
		"       ulsbench client (--to IP[:PORT] | --to [IPV6]:PORT | --unix PATH)\n"
		"                       (--bytes N[K|M|G] | --seconds S [--warmup W])\n"
		"                       [--streams K] [--dir send|recv] [--start-at T] [--json FILE]\n"
		"                       [--congestion CC] [NODE OPTIONS]\n"
		"                       (T: CLOCK_MONOTONIC seconds to start at; W: seconds sent\n"
		"                       before the measured S, default 0; CC: the kernel's\n"
		"                       congestion control for these sockets, e.g. cubic)\n"
		"       ulsbench [--mode MODE[,MODE...]] [--streams N[,N...]] [--seconds S]\n"
		"                [--mtu M[,M...]] [--json FILE] [--plot DIR]   (the benchmark sweep)\n"
		"       ulsbench apps [--apps LIST] [--seconds S] [--repeat R] [--json FILE]\n"
		"                [--plot DIR]   (redis, nginx, iperf3, ping-pong: ulstack vs kernel)\n"
		"NODE OPTIONS: --tap IFNAME --ip A.B.C.D/NN [--ip6 ADDR/NN] [--mac MAC] [--gw A.B.C.D]\n"
		"              [--gw6 ADDR] [--mtu N]\n"
		"              (a node of its own), or --ctl PATH [--datapath direct|relay]\n"
		"              (join ulsd's node, on its direct data path by default);\n"
		"              without them the Linux kernel's TCP is used\n");
}

/* The drivers live in Python (they drive many processes and draw plots): the sweep, or
 * with `apps` as the first argument the application benchmark (which gets the rest). */
static int exec_sweep(char **argv)
{
	const char *name = "ulsbench_sweep.py";
	if (argv[1] && !strcmp(argv[1], "apps")) {
		name = "ulsbench_apps.py";
		argv++;
	}
	char self[PATH_MAX], script[PATH_MAX + 64];
	const char *src = getenv("ULS_SRCDIR");
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n > 0) {
		self[n] = '\0';
		/* Run from a build tree (libtool puts the binary in apps/.libs)? */
		char *p = strstr(self, "/apps/.libs/");
		if (!p)
			p = strstr(self, "/apps/ulsbench");
		if (p && !getenv("ULS_BUILDDIR")) {
			*p = '\0';
			char mk[PATH_MAX + 16];
			snprintf(mk, sizeof(mk), "%s/Makefile", self);
			if (access(mk, F_OK) == 0) {
				setenv("ULS_BUILDDIR", self, 0);
				/* and the sweep of the source tree it was built from */
				if (!src)
					src = ULS_BUILD_SRCDIR;
			}
		}
	}
	if (src && snprintf(script, sizeof(script), "%s/apps/%s", src, name) > 0 &&
	    access(script, R_OK) == 0) {
		/* the source tree's copy */
	} else if (uls_installed_path(script, sizeof(script), ULS_PKGLIBEXECDIR, name) == 0) {
		/* installed: the drivers find the rest next to themselves; ulsd is the one
		 * installed with this program (a caller's ULSD wins) */
		char ulsd[PATH_MAX];
		if (uls_installed_path(ulsd, sizeof(ulsd), ULS_SBINDIR, "ulsd") == 0)
			setenv("ULSD", ulsd, 0);
	} else {
		snprintf(script, sizeof(script), "%s/%s", ULS_PKGLIBEXECDIR, name);
	}
	size_t argc = 0;
	while (argv[argc])
		argc++;
	char **args = calloc(argc + 3, sizeof(*args));
	if (!args)
		return 1;
	args[0] = "python3";
	args[1] = script;
	for (size_t i = 1; i < argc; i++)
		args[i + 1] = argv[i];
	execv("/usr/bin/python3", args);
	fprintf(stderr, "ulsbench: cannot run %s: %s\n", script, strerror(errno));
	return 1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		BENCH_NODE_OPTIONS,
		{ "port", required_argument, NULL, 'p' }, { "unix", required_argument, NULL, 'u' },
		{ "count", required_argument, NULL, 'c' }, { "to", required_argument, NULL, 't' },
		{ "bytes", required_argument, NULL, 'b' }, { "seconds", required_argument, NULL, 's' },
		{ "streams", required_argument, NULL, 'k' }, { "dir", required_argument, NULL, 'd' },
		{ "json", required_argument, NULL, 'j' }, { "reuseport", no_argument, NULL, 'r' },
		{ "start-at", required_argument, NULL, 'a' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "congestion", required_argument, NULL, 'C' },
		{ "family", required_argument, NULL, 'F' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	struct node_opts no = { 0 };
	struct endpoint ep = { .in.in = { .sin_family = AF_INET, .sin_port = htons(DEFAULT_PORT) } };
	bool have_to = false, reuseport = false, have_bytes = false;
	int family = 0;            /* --family: AF_INET, AF_INET6, 0 not given */
	uint16_t port = DEFAULT_PORT;
	unsigned long long bytes = 1ull << 30, v;
	uint32_t millis = 0, warmup = 0;
	double start_at = 0;
	unsigned nstreams = 1;
	long count = 0;
	int dir = BENCH_CLIENT_SENDS, c, idx;
	const char *json = NULL;

	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		usage(stdout);
		return 0;
	}
	if (argc < 2 || (strcmp(argv[1], "server") && strcmp(argv[1], "client")))
		return exec_sweep(argv);
	bool server = !strcmp(argv[1], "server");
	optind = 2;
	while ((c = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
		switch (c) {
		case 'N':
			if (bench__node_opt(&no, PROG, opts[idx].name, optarg) != 1)
				return 2;
			break;
		case 'p':
			if (opt__num(PROG, "port", optarg, 1, 65535, &v) < 0)
				return 2;
			port = (uint16_t)v;
			break;
		case 'u':
			if (strlen(optarg) >= sizeof(ep.un.sun_path) || !*optarg) {
				fprintf(stderr, "ulsbench: bad --unix '%s'\n", optarg);
				return 2;
			}
			ep.unix_path = true;
			ep.un.sun_family = AF_UNIX;
			memcpy(ep.un.sun_path, optarg, strlen(optarg) + 1);
			have_to = true;
			break;
		case 'c':
			if (opt__num(PROG, "count", optarg, 1, 1000000, &v) < 0)
				return 2;
			count = (long)v;
			break;
		case 't':
			if (bench__parse_addr_any(optarg, &ep.in, DEFAULT_PORT) < 0) {
				fprintf(stderr, "ulsbench: bad --to '%s': expected A.B.C.D[:PORT] or "
					"[IPV6]:PORT\n", optarg);
				return 2;
			}
			have_to = true;
			break;
		case 'b':
			if (opt__parse_size(optarg, &bytes) < 0 || bytes == 0) {
				opt__bad(PROG, "bytes", optarg, "a size above 0 (K, M, G allowed)");
				return 2;
			}
			have_bytes = true;
			break;
		case 's': {
			double s;
			if (opt__seconds(PROG, "seconds", optarg, 0.1, 3600, &s) < 0)
				return 2;
			millis = (uint32_t)(s * 1000);
			break;
		}
		case 'k':
			if (opt__uint(PROG, "streams", optarg, 1, STREAMS_MAX, &nstreams) < 0)
				return 2;
			break;
		case 'd': {
			static const char *const dirs[] = { "send", "recv" };
			int d = opt__word(PROG, "dir", optarg, dirs, 2);
			if (d < 0)
				return 2;
			dir = d == 0 ? BENCH_CLIENT_SENDS : BENCH_SERVER_SENDS;
			break;
		}
		case 'j':
			json = optarg;
			break;
		case 'r':
			reuseport = true;
			break;
		case 'a':
			if (opt__parse_seconds(optarg, &start_at) < 0 ||
			    start_at > bench__now_s() + 600) {
				opt__bad(PROG, "start-at", optarg, "monotonic seconds, at most 600 s ahead");
				return 2;
			}
			break;
		case 'F':
			if (strcmp(optarg, "4") && strcmp(optarg, "6")) {
				opt__bad(PROG, "family", optarg, "4 or 6");
				return 2;
			}
			family = optarg[0] == '6' ? AF_INET6 : AF_INET;
			break;
		case 'C':
			if (!*optarg || strlen(optarg) >= 16) {
				opt__bad(PROG, "congestion", optarg, "a congestion control's name (up to 15 characters)");
				return 2;
			}
			congestion = optarg;
			break;
		case 'w': {
			double s;
			if (opt__seconds(PROG, "warmup", optarg, 0, 600, &s) < 0)
				return 2;
			warmup = (uint32_t)(s * 1000);
			break;
		}
		default:
			return opt__help_or_bad(c, usage);
		}
	}
	if (millis && have_bytes) {
		fprintf(stderr, "ulsbench: --bytes and --seconds exclude each other\n");
		return 2;
	}
	if (warmup && !millis) {
		fprintf(stderr, "ulsbench: --warmup needs --seconds (a time-limited transfer)\n");
		return 2;
	}
	if (millis)
		bytes = 0;
	if (congestion && (server || ep.unix_path || no.ctl || no.have_tap || no.have_ip)) {
		fprintf(stderr, "ulsbench: --congestion is for a client on the kernel's TCP\n");
		return 2;
	}
	if (optind != argc || (!server && !have_to)) {
		usage(stderr);
		return 2;
	}
	if (server && !ep.unix_path) {
		/* --family 6: [::], dual-stack. */
		memset(&ep.in, 0, sizeof(ep.in));
		ep.in.sa.sa_family = (sa_family_t)(family ? family : AF_INET);
		if (family == AF_INET6)
			ep.in.in6.sin6_port = htons(port);
		else
			ep.in.in.sin_port = htons(port);
	} else if (family && !ep.unix_path && family != ep.in.sa.sa_family) {
		fprintf(stderr, "ulsbench: --family %d and --to %s differ\n",
			family == AF_INET6 ? 6 : 4, ep.in.sa.sa_family == AF_INET6 ? "IPv6" : "IPv4");
		return 2;
	}
	if (ep.unix_path && (no.ctl || no.have_tap || no.have_ip)) {
		fprintf(stderr, "ulsbench: --unix streams use the kernel; no node options with it\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	start_reporter();
	int started = bench__node_start(&no, "ulsbench");
	if (started < 0)
		return 1;
	if (started) {
		ops = &bench__uls_ops;
		pthread_mutex_lock(&report_mtx);
		report_counters = true;
		pthread_mutex_unlock(&report_mtx);
	}
	if (!ep.unix_path && bench__family_check(ops, ep.in.sa.sa_family, "ulsbench") < 0) {
		if (started)
			uls_node_stop();
		return 2;
	}
	int rc = server ? run_server(&ep, count, reuseport)
			: run_client(&ep, bytes, millis, warmup, dir, nstreams, start_at, json);
	if (started && server && getenv("ULSBENCH_COUNTERS")) {
		fputs("ulsbench server: counters ", stderr);
		print_counters(stderr);
		fputc('\n', stderr);
	}
	pthread_mutex_lock(&report_mtx);
	report_counters = false;
	pthread_mutex_unlock(&report_mtx);
	if (started)
		uls_node_stop();
	return rc;
}
