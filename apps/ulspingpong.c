/* ulspingpong: a ping-pong of small messages through the POSIX socket API, nothing else.
 *
 *   ulspingpong server --port P [--count N]
 *   ulspingpong client --to IP:PORT --size B (--seconds S | --round-trips N)
 *                      [--warmup K]
 *
 * The program `ulsbench apps` runs as its ping-pong, the same binary under ulsrun (the
 * preload gives its sockets to a ulstack node) and on the kernel's TCP: unlike ulsping it
 * is not linked with libuls, so what it measures is what any program doing send/recv gets.
 *
 * Wire format: the client sends the message size as 4 bytes, big-endian (1 .. 65536);
 * then each round trip is one message of that size from the client, which the server
 * reads whole and writes back whole. Byte j of message i is (i * 131 + j * 7 + 1) mod 256,
 * and the client checks every echoed byte, so a wrong echo fails the run instead of giving
 * a latency. Both ends set TCP_NODELAY (the messages are small).
 *
 * The client does K warm-up round trips (default 100; not measured), then round trips
 * until N are done or S seconds have passed, timing each with CLOCK_MONOTONIC, and prints
 * one JSON line: round trips measured, seconds, the rate, and p50/p99/min/max in
 * microseconds. The server prints one JSON line per connection with the round trips it
 * echoed (warm-up included), so the driver can check that both ends counted the same.
 * Every blocking call has a 10 s limit (SO_RCVTIMEO, SO_SNDTIMEO): a stalled peer fails
 * the run. Exit 0 only when every byte was checked and the connection closed cleanly.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "apps/xfer.h"
#include "netif/opt/opt.h"

#define PROG "ulspingpong"

#define MAX_SIZE 65536
#define MAX_ROUND_TRIPS 20000000L   /* bounds the sample array (160 MB of int64) */
#define IO_TIMEOUT_S 10

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int set_opts(int fd)
{
	int one = 1;
	struct timeval tv = { .tv_sec = IO_TIMEOUT_S };
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)))
		return -errno;
	return 0;
}

/* Reads exactly n bytes: n on success, 0 at end of stream before any byte, -errno (or
 * -EPIPE for an end of stream in the middle). */
static ssize_t read_full(int fd, uint8_t *buf, size_t n)
{
	bool clean_eof;
	int rc = bench__recv_whole(bench__sock_recv, fd, buf, n, &clean_eof);

	if (rc < 0)
		return rc == -EPIPE && clean_eof ? 0 : rc;
	return (ssize_t)n;
}

static int write_full(int fd, const uint8_t *buf, size_t n)
{
	return bench__send_whole(bench__sock_send, fd, buf, n);
}

static void fill(uint8_t *buf, size_t size, uint64_t i)
{
	for (size_t j = 0; j < size; j++)
		buf[j] = (uint8_t)(i * 131 + j * 7 + 1);
}

static int serve_one(int c)
{
	static uint8_t buf[MAX_SIZE];
	uint8_t hdr[4];
	long n = 0;
	int rc = set_opts(c);
	if (rc < 0) {
		fprintf(stderr, "ulspingpong server: setsockopt: %s\n", strerror(-rc));
		return 1;
	}
	ssize_t r = read_full(c, hdr, 4);
	uint32_t size = (uint32_t)hdr[0] << 24 | hdr[1] << 16 | hdr[2] << 8 | hdr[3];
	if (r != 4 || size < 1 || size > MAX_SIZE) {
		fprintf(stderr, "ulspingpong server: bad or missing size header\n");
		return 1;
	}
	for (;;) {
		r = read_full(c, buf, size);
		if (r == 0)
			break;
		if (r < 0) {
			fprintf(stderr, "ulspingpong server: recv: %s\n", strerror((int)-r));
			return 1;
		}
		rc = write_full(c, buf, size);
		if (rc < 0) {
			fprintf(stderr, "ulspingpong server: send: %s\n", strerror(-rc));
			return 1;
		}
		n++;
	}
	printf("{\"role\": \"server\", \"size\": %u, \"round_trips\": %ld}\n", size, n);
	fflush(stdout);
	return 0;
}

static int run_server(int port, long count)
{
	int one = 1, bad = 0;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_ANY) };
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(s, (struct sockaddr *)&a, sizeof(a)) || listen(s, 16)) {
		fprintf(stderr, "ulspingpong server: port %d: %s\n", port, strerror(errno));
		return 1;
	}
	fprintf(stderr, "ulspingpong server: listening on port %d\n", port);
	for (long i = 0; i < count; i++) {
		int c = accept(s, NULL, NULL);
		if (c < 0) {
			if (errno == EINTR) {
				i--;
				continue;
			}
			fprintf(stderr, "ulspingpong server: accept: %s\n", strerror(errno));
			close(s);
			return 1;
		}
		bad |= serve_one(c);
		close(c);
	}
	close(s);
	return bad;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* The q-quantile of sorted xs (nearest rank), in microseconds. */
static double quantile_us(const int64_t *xs, long n, double q)
{
	long k = (long)(q * (double)n + 0.999999999);
	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return (double)xs[k - 1] / 1000.0;
}

static int run_client(const char *host, int port, uint32_t size, double seconds, long count,
		      long warmup)
{
	static uint8_t out[MAX_SIZE], in[MAX_SIZE];
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
		fprintf(stderr, "ulspingpong client: bad address %s\n", host);
		return 2;
	}
	long cap = count > 0 ? count : MAX_ROUND_TRIPS;
	int64_t *rtt = malloc((size_t)cap * sizeof(*rtt));
	int s = socket(AF_INET, SOCK_STREAM, 0);
	int rc;
	if (!rtt || s < 0) {
		fprintf(stderr, "ulspingpong client: %s\n", strerror(errno));
		return 1;
	}
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) || (rc = set_opts(s)) < 0) {
		fprintf(stderr, "ulspingpong client: connect %s:%d: %s\n", host, port, strerror(errno));
		return 1;
	}
	uint8_t hdr[4] = { size >> 24, size >> 16, size >> 8, size };
	if ((rc = write_full(s, hdr, 4)) < 0)
		goto io_error;
	long n = 0;
	int64_t t_end = 0, t_start = 0;
	for (uint64_t i = 0;; i++) {
		bool measured = i >= (uint64_t)warmup;
		if (measured && n == 0) {
			t_start = now_ns();
			t_end = seconds > 0 ? t_start + (int64_t)(seconds * 1e9) : INT64_MAX;
		}
		if (measured && (n >= cap || (n > 0 && now_ns() >= t_end)))
			break;
		fill(out, size, i);
		int64_t t0 = now_ns();
		if ((rc = write_full(s, out, size)) < 0)
			goto io_error;
		ssize_t r = read_full(s, in, size);
		if (r != (ssize_t)size) {
			rc = r < 0 ? (int)r : -EPIPE;
			goto io_error;
		}
		int64_t t1 = now_ns();
		if (memcmp(in, out, size)) {
			size_t j = 0;
			while (in[j] == out[j])
				j++;
			fprintf(stderr, "ulspingpong client: round trip %llu: byte %zu came back "
				"0x%02x, sent 0x%02x\n", (unsigned long long)i, j, in[j], out[j]);
			return 1;
		}
		if (measured)
			rtt[n++] = t1 - t0;
	}
	double secs = (double)(now_ns() - t_start) / 1e9;
	if (shutdown(s, SHUT_WR)) {
		rc = -errno;
		goto io_error;
	}
	/* The server closes after our FIN: anything else before it is an error. */
	if (read_full(s, in, 1) != 0) {
		fprintf(stderr, "ulspingpong client: the server sent more than it echoed\n");
		return 1;
	}
	close(s);
	qsort(rtt, (size_t)n, sizeof(*rtt), cmp_i64);
	printf("{\"role\": \"client\", \"size\": %u, \"warmup\": %ld, \"round_trips\": %ld, "
	       "\"seconds\": %.6f, \"rate\": %.1f, \"p50_us\": %.2f, \"p99_us\": %.2f, "
	       "\"min_us\": %.2f, \"max_us\": %.2f, \"verified\": true}\n",
	       size, warmup, n, secs, secs > 0 ? (double)n / secs : 0.0,
	       quantile_us(rtt, n, 0.5), quantile_us(rtt, n, 0.99), quantile_us(rtt, n, 0.0),
	       quantile_us(rtt, n, 1.0));
	free(rtt);
	return 0;
io_error:
	fprintf(stderr, "ulspingpong client: %s\n", strerror(-rc));
	return 1;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: ulspingpong server --port P [--count N]\n"
		   "       ulspingpong client --to IP:PORT --size B (--seconds S | --round-trips N)"
		   " [--warmup K]\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "port", required_argument, NULL, 'p' }, { "count", required_argument, NULL, 'c' },
		{ "to", required_argument, NULL, 't' }, { "size", required_argument, NULL, 'z' },
		{ "seconds", required_argument, NULL, 's' },
		{ "round-trips", required_argument, NULL, 'n' },
		{ "warmup", required_argument, NULL, 'w' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned long long port = 0, count = 1, size = 1, rts = 0, warmup = 100;
	double seconds = 0;
	char host[64] = "";
	int c, rc = 0;

	if (argc < 2 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		usage(argc >= 2 && !strcmp(argv[1], "--help") ? stdout : stderr);
		return argc >= 2 && !strcmp(argv[1], "--help") ? 0 : 2;
	}
	bool server = !strcmp(argv[1], "server");
	optind = 2;
	while (rc == 0 && (c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'p': rc = opt__num(PROG, "port", optarg, 1, 65535, &port); break;
		case 'c': rc = opt__num(PROG, "count", optarg, 1, 1000000, &count); break;
		case 'z': rc = opt__num(PROG, "size", optarg, 1, MAX_SIZE, &size); break;
		case 'n': rc = opt__num(PROG, "round-trips", optarg, 0, MAX_ROUND_TRIPS, &rts); break;
		case 'w': rc = opt__num(PROG, "warmup", optarg, 0, 1000000, &warmup); break;
		case 's': rc = opt__seconds(PROG, "seconds", optarg, 0, 3600, &seconds); break;
		case 't': {
			const char *colon = strrchr(optarg, ':');
			if (!colon || (size_t)(colon - optarg) >= sizeof(host)) {
				fprintf(stderr, "ulspingpong: --to IP:PORT\n");
				return 2;
			}
			memcpy(host, optarg, (size_t)(colon - optarg));
			host[colon - optarg] = '\0';
			rc = opt__num(PROG, "to", colon + 1, 1, 65535, &port);
			break;
		}
		default: return opt__help_or_bad(c, usage);
		}
	}
	if (rc < 0)
		return 2;
	if (optind != argc || port == 0 || (!server && (!host[0] || (rts == 0) == (seconds == 0)))) {
		usage(stderr);
		return 2;
	}
	return server ? run_server((int)port, (long)count)
		      : run_client(host, (int)port, (uint32_t)size, seconds, (long)rts, (long)warmup);
}
