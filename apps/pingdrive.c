/* apps/pingdrive.c: ulsping's driver (ping.h): builds the testbed, runs a server and a
 * client of each mode for each size as processes of their own, each stopped by its PID (also
 * on failure), and always takes the testbed down. TB_NAME is "ulsping" unless set in the
 * environment. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "apps/breakdown.h"
#include "apps/clock.h"
#include "apps/instdirs.h"
#include "apps/ping.h"
#include "apps/pingstats.h"
#include "uls.h"

#define BASE_PORT       7100
#define RUN_TIMEOUT_S   60.0    /* one client run, start to exit */
#define READY_TIMEOUT_S 10.0    /* a server's "listening" line */
#define TESTBED_TIMEOUT_S 120.0
#define TB_NAME         "ulsping"
#define BD_SAVED_TIMEOUT_S 30.0 /* the server's "breakdown saved" line, after the client */

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
	char kernel_ip6[64];              /* family 6 (testbed up --ipv6) */
	int family;
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
		W("TB_KERNEL_IP6", kernel_ip6),
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
	char *argv[] = { tb->script, (char *)cmd, "--nodes", "2", NULL, NULL };
	int fd = mkstemp(tmp), ret = -1;

	if (fd < 0) {
		fprintf(stderr, "ulsping: %s: %s\n", tmp, strerror(errno));
		return -1;
	}
	unlink(tmp);
	if (strcmp(cmd, "up") != 0)
		argv[2] = NULL;
	else if (tb->family == 6)
		argv[4] = "--ipv6";
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
	} else if (tb->family == 6 && !tb->kernel_ip6[0]) {
		fprintf(stderr, "ulsping: testbed up --ipv6 did not export TB_KERNEL_IP6\n");
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
	int f = bench__bd_analyse(&c, &s, PING_DEFAULT_SKIP, &r->fwd);
	int b = bench__bd_analyse(&s, &c, PING_DEFAULT_SKIP, &r->rev);
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
	if (tb->family == 6 && !perproc)
		snprintf(toarg, sizeof(toarg), "[%s]:%u", tb->kernel_ip6, port);
	else
		snprintf(toarg, sizeof(toarg), "%s:%u", perproc ? tb->node2_ip : tb->kernel_ip, port);
	char *fam = tb->family == 6 ? "6" : "4";
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
			 portarg, "--family", fam, NULL };
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

static int write_runs_json(const char *path, const struct run *runs, size_t n, int family)
{
	FILE *f = fopen(path, "w");

	if (!f) {
		fprintf(stderr, "ulsping: %s: %s\n", path, strerror(errno));
		return -1;
	}
	fprintf(f, "{\"count\": %d, \"skip\": %d, \"family\": %d, \"runs\": [", PING_DEFAULT_COUNT,
		PING_DEFAULT_SKIP, family);
	for (size_t i = 0; i < n; i++) {
		const struct run *r = &runs[i];
		fprintf(f, "%s\n  {\"mode\": \"%s\", \"size\": %llu, \"ok\": %s", i ? "," : "",
			r->mode, r->size, r->ok ? "true" : "false");
		if (r->ok)
			fprintf(f, ", \"rtt_us\": {\"mean\": %.3f, \"p50\": %.3f, \"p99\": %.3f, "
				   "\"min\": %.3f, \"max\": %.3f}, \"bandwidth_mbps\": %.3f",
				r->st.mean, r->st.p50, r->st.p99, r->st.min, r->st.max,
				bench__bandwidth_mbps(r->size, r->st.p50));
		if (r->bd && r->bd_ok) {
			fprintf(f, ", \"breakdown\": {\"skip\": %d, \"client_to_server\": ", PING_DEFAULT_SKIP);
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

int bench__ping_drive(const char *const *modes, size_t nmodes, const unsigned long long *sizes,
		      size_t nsizes, const char *json, bool breakdown, int family)
{
	struct testbed tb = { .family = family };
	struct run runs[2 * PING_SIZES_MAX] = { 0 };
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
			       r->st.mean, r->st.p50, r->st.p99, bench__bandwidth_mbps(r->size, r->st.p50));
		else
			printf("%-8s %9llu %11s\n", r->mode, r->size, "FAILED");
		all_ok = all_ok && r->ok && (!r->bd || r->bd_ok);
	}
	if (breakdown)
		print_breakdown(runs, nruns);
	if (json && write_runs_json(json, runs, nruns, family) < 0)
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
