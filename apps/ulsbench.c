/* ulsbench: verified TCP streams between a ulstack node and any peer, with throughput.
 *
 *   ulsbench server [--port P] [--count N] [NODE OPTIONS]
 *   ulsbench client --to IP[:PORT] [--bytes N] [--dir send|recv] [--json FILE] [NODE OPTIONS]
 *
 * NODE OPTIONS (--tap IF --ip A.B.C.D/NN [--mac M] [--gw G] [--mtu N]) make the process a
 * ulstack node; without them it uses the Linux kernel's TCP, so the same tool measures both
 * sides of every comparison. Data moves in 64 KiB messages (seed 004's message size) and
 * every byte is checked against apps/pattern.h. The client reports throughput only for a
 * transfer the receiver verified: for --dir send the clock stops when the server's verdict
 * arrives, so every byte has been delivered and checked.
 *
 * Wire format: the client sends a 24-byte request {magic "ULSB", version 1, direction
 * (0: client sends, 1: server sends), 2 zero bytes, bytes (u64), seed (u64)}, big-endian;
 * the receiving side answers with a 16-byte verdict {status (u32: 0 ok, 1 corrupt, 2 short),
 * 4 zero bytes, bytes verified (u64)}.
 */
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <netinet/tcp.h>

#include "apps/netops.h"
#include "apps/pattern.h"

#define MSG_SIZE      65536
#define DEFAULT_PORT  5001
#define REQ_LEN       24
#define VERDICT_LEN   16
#define MAGIC         0x554c5342u  /* "ULSB" */

enum { DIR_CLIENT_SENDS = 0, DIR_SERVER_SENDS = 1 };
enum { ST_OK = 0, ST_CORRUPT = 1, ST_SHORT = 2 };

static const struct netops *ops = &bench__kernel_ops;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static int send_all(int sd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = ops->send(sd, p, len, 0);
		if (n < 0) {
			if (n == -EINTR)
				continue;
			return (int)n;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int recv_all(int sd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = ops->recv(sd, p, len, 0);
		if (n == -EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? (int)n : -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void put64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, 8);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return be64toh(v);
}

static void put32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, 4);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return be32toh(v);
}

/* Send `bytes` of the pattern in 64 KiB messages. */
static int stream_out(int sd, uint64_t seed, uint64_t bytes, uint8_t *buf)
{
	for (uint64_t off = 0; off < bytes;) {
		size_t n = bytes - off < MSG_SIZE ? (size_t)(bytes - off) : MSG_SIZE;
		bench__pattern_fill(seed, off, buf, n);
		int rc = send_all(sd, buf, n);
		if (rc < 0)
			return rc;
		off += n;
	}
	return 0;
}

/* Receive and verify `bytes`; returns a status and how many bytes were right. */
static int stream_in(int sd, uint64_t seed, uint64_t bytes, uint8_t *buf, uint64_t *good)
{
	uint64_t off = 0;

	while (off < bytes) {
		size_t want = bytes - off < MSG_SIZE ? (size_t)(bytes - off) : MSG_SIZE;
		ssize_t n = ops->recv(sd, buf, want, 0);
		if (n == -EINTR)
			continue;
		if (n <= 0)
			break;
		uint64_t bad = bench__pattern_check(seed, off, buf, (size_t)n);
		if (bad != UINT64_MAX) {
			*good = bad;
			return ST_CORRUPT;
		}
		off += (uint64_t)n;
	}
	*good = off;
	return off == bytes ? ST_OK : ST_SHORT;
}

static void *serve(void *arg)
{
	int sd = (int)(intptr_t)arg;
	uint8_t req[REQ_LEN], verdict[VERDICT_LEN] = { 0 };
	uint8_t *buf = malloc(MSG_SIZE);
	double t0 = now_s();

	if (!buf || recv_all(sd, req, REQ_LEN) < 0 || get32(req) != MAGIC || req[4] != 1) {
		fprintf(stderr, "ulsbench server: bad or missing request\n");
		goto out;
	}
	uint64_t bytes = get64(req + 8), seed = get64(req + 16), good = 0;
	if (req[5] == DIR_CLIENT_SENDS) {
		int st = stream_in(sd, seed, bytes, buf, &good);
		put32(verdict, (uint32_t)st);
		put64(verdict + 8, good);
		send_all(sd, verdict, VERDICT_LEN);
		double dt = now_s() - t0;
		printf("{\"role\": \"server\", \"dir\": \"recv\", \"bytes\": %llu, \"verified\": %s, "
		       "\"seconds\": %.6f, \"pid\": %d}\n", (unsigned long long)good,
		       st == ST_OK ? "true" : "false", dt, (int)getpid());
		fflush(stdout);
	} else if (req[5] == DIR_SERVER_SENDS) {
		if (stream_out(sd, seed, bytes, buf) == 0)
			recv_all(sd, verdict, VERDICT_LEN);
	}
out:
	free(buf);
	ops->close(sd);
	return NULL;
}

static int run_server(unsigned port, long count, bool reuseport)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int one = 1, sd = ops->socket(SOCK_STREAM);

	if (sd < 0) {
		fprintf(stderr, "ulsbench server: socket: %s\n", strerror(-sd));
		return 1;
	}
	ops->setsockopt(sd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (reuseport)
		ops->setsockopt(sd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	int rc = ops->bind(sd, &a);
	if (rc == 0)
		rc = ops->listen(sd, 64);
	if (rc < 0) {
		fprintf(stderr, "ulsbench server: port %u: %s\n", port, strerror(-rc));
		return 1;
	}
	fprintf(stderr, "ulsbench server: listening on port %u (%s)\n", port, ops->name);
	pthread_t *threads = calloc(count > 0 ? (size_t)count : 1, sizeof(*threads));
	for (long i = 0; count <= 0 || i < count; i++) {
		int c = ops->accept(sd, NULL);
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
	return 0;
}

static int run_client(const struct sockaddr_in *to, uint64_t bytes, int dir, const char *json)
{
	uint8_t req[REQ_LEN] = { 0 }, verdict[VERDICT_LEN] = { 0 };
	uint8_t *buf = malloc(MSG_SIZE);
	uint64_t seed = ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL), good = 0;
	int st = ST_SHORT, rc, sd = ops->socket(SOCK_STREAM);
	double cpu0 = cpu_s(), t0, t1;

	if (sd < 0 || !buf) {
		fprintf(stderr, "ulsbench client: socket: %s\n", strerror(sd < 0 ? -sd : ENOMEM));
		return 1;
	}
	rc = ops->connect(sd, to);
	if (rc < 0) {
		fprintf(stderr, "ulsbench client: connect: %s\n", strerror(-rc));
		return 1;
	}
	put32(req, MAGIC);
	req[4] = 1;
	req[5] = (uint8_t)dir;
	put64(req + 8, bytes);
	put64(req + 16, seed);
	t0 = now_s();
	rc = send_all(sd, req, REQ_LEN);
	if (rc == 0 && dir == DIR_CLIENT_SENDS) {
		rc = stream_out(sd, seed, bytes, buf);
		if (rc == 0)
			rc = recv_all(sd, verdict, VERDICT_LEN);
		if (rc == 0) {
			st = (int)get32(verdict);
			good = get64(verdict + 8);
		}
	} else if (rc == 0) {
		st = stream_in(sd, seed, bytes, buf, &good);
		put32(verdict, (uint32_t)st);
		put64(verdict + 8, good);
		send_all(sd, verdict, VERDICT_LEN);
	}
	t1 = now_s();
	double cpu = cpu_s() - cpu0;
	ops->close(sd);
	free(buf);
	if (rc < 0) {
		fprintf(stderr, "ulsbench client: transfer failed: %s\n", strerror(-rc));
		return 1;
	}
	bool ok = st == ST_OK && good == bytes;
	double secs = t1 - t0, gbps = secs > 0 ? (double)good * 8 / secs / 1e9 : 0;
	printf("%s %s: %llu bytes in %.3f s = %.3f Gbit/s, %s\n", ops->name,
	       dir == DIR_CLIENT_SENDS ? "send" : "recv", (unsigned long long)good, secs, gbps,
	       ok ? "every byte verified" :
	       st == ST_CORRUPT ? "CORRUPT DATA" : "SHORT TRANSFER");
	if (json) {
		FILE *f = fopen(json, "w");
		if (!f) {
			fprintf(stderr, "ulsbench: %s: %s\n", json, strerror(errno));
			return 1;
		}
		fprintf(f, "{\"stack\": \"%s\", \"dir\": \"%s\", \"bytes\": %llu, "
			   "\"bytes_verified\": %llu, \"verified\": %s, \"seconds\": %.6f, "
			   "\"gbps\": %.4f, \"cpu_seconds\": %.3f}\n",
			ops->name, dir == DIR_CLIENT_SENDS ? "send" : "recv",
			(unsigned long long)bytes, (unsigned long long)(ok ? good : 0),
			ok ? "true" : "false", secs, gbps, cpu);
		fclose(f);
	}
	return ok ? 0 : 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ulsbench server [--port P] [--count N] [--reuseport] [NODE OPTIONS]\n"
		"       ulsbench client --to IP[:PORT] [--bytes N[K|M|G]] [--dir send|recv]\n"
		"                       [--json FILE] [NODE OPTIONS]\n"
		"NODE OPTIONS: --tap IFNAME --ip A.B.C.D/NN [--mac MAC] [--gw A.B.C.D] [--mtu N]\n"
		"              (a node of its own), or --ctl PATH (join ulsd's node);\n"
		"              without them the Linux kernel's TCP is used\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "tap", required_argument, NULL, 'N' }, { "ip", required_argument, NULL, 'N' },
		{ "mac", required_argument, NULL, 'N' }, { "gw", required_argument, NULL, 'N' },
		{ "mtu", required_argument, NULL, 'N' }, { "ctl", required_argument, NULL, 'N' },
		{ "port", required_argument, NULL, 'p' },
		{ "count", required_argument, NULL, 'c' }, { "to", required_argument, NULL, 't' },
		{ "bytes", required_argument, NULL, 'b' }, { "dir", required_argument, NULL, 'd' },
		{ "json", required_argument, NULL, 'j' }, { "help", no_argument, NULL, 'h' },
		{ "reuseport", no_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 },
	};
	struct node_opts no = { 0 };
	struct sockaddr_in to;
	bool have_to = false;
	unsigned long long bytes = 1ull << 30, v;
	unsigned port = DEFAULT_PORT;
	long count = 0;
	int dir = DIR_CLIENT_SENDS, c, idx;
	bool reuseport = false;
	const char *json = NULL;

	if (argc < 2 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		usage(argc < 2 ? stderr : strcmp(argv[1], "--help") ? stderr : stdout);
		return argc >= 2 && !strcmp(argv[1], "--help") ? 0 : 2;
	}
	bool server = !strcmp(argv[1], "server");
	optind = 2;
	while ((c = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
		switch (c) {
		case 'N':
			if (bench__node_opt(&no, opts[idx].name, optarg) != 1)
				return 2;
			break;
		case 'p':
			if (bench__parse_size(optarg, &v) < 0 || v == 0 || v > 65535) {
				fprintf(stderr, "ulsbench: bad --port '%s'\n", optarg);
				return 2;
			}
			port = (unsigned)v;
			break;
		case 'c':
			if (bench__parse_size(optarg, &v) < 0 || v == 0 || v > 1000000) {
				fprintf(stderr, "ulsbench: bad --count '%s'\n", optarg);
				return 2;
			}
			count = (long)v;
			break;
		case 't':
			if (bench__parse_addr(optarg, &to, DEFAULT_PORT) < 0) {
				fprintf(stderr, "ulsbench: bad --to '%s': expected A.B.C.D[:PORT]\n", optarg);
				return 2;
			}
			have_to = true;
			break;
		case 'b':
			if (bench__parse_size(optarg, &bytes) < 0) {
				fprintf(stderr, "ulsbench: bad --bytes '%s'\n", optarg);
				return 2;
			}
			break;
		case 'd':
			if (!strcmp(optarg, "send"))
				dir = DIR_CLIENT_SENDS;
			else if (!strcmp(optarg, "recv"))
				dir = DIR_SERVER_SENDS;
			else {
				fprintf(stderr, "ulsbench: bad --dir '%s': send or recv\n", optarg);
				return 2;
			}
			break;
		case 'j':
			json = optarg;
			break;
		case 'r':
			reuseport = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc || (!server && !have_to)) {
		usage(stderr);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	int started = bench__node_start(&no, "ulsbench");
	if (started < 0)
		return 1;
	if (started)
		ops = &bench__uls_ops;
	int rc = server ? run_server(port, count, reuseport) : run_client(&to, bytes, dir, json);
	if (started)
		uls_node_stop();
	return rc;
}
