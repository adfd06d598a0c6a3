/* apps/pingwork.c: ulsping's workers (ping.h): the echo server and the client that times
 * round trips and checks every echoed byte (wire format: apps/ulsping.c). */
#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#include "apps/breakdown.h"
#include "apps/clock.h"
#include "apps/netops.h"
#include "apps/pattern.h"
#include "apps/ping.h"
#include "apps/pingstats.h"
#include "uls_breakdown.h"

#define HDR_LEN         4       /* the message size, big-endian */
#define BD_READ_CHUNK   65536

/* The worker's sockets: set once by its entry point (a process runs one worker). */
static const struct netops *ops;

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
	if (size == 0 || size > PING_SIZE_MAX || !(buf = malloc(size))) {
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
int bench__ping_server(const struct netops *o, const union bench_addr *at, const char *bd_path)
{
	ops = o;
	int one = 1, rc, sd = ops->socket_af(at->sa.sa_family, SOCK_STREAM);

	if (sd < 0) {
		fprintf(stderr, "ulsping server: socket: %s\n", strerror(-sd));
		return 1;
	}
	ops->setsockopt(sd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	rc = ops->bind_sa(sd, &at->sa, bench__addr_len(at));
	if (rc == 0)
		rc = ops->listen(sd, 16);
	if (rc < 0) {
		fprintf(stderr, "ulsping server: listen on port %u: %s\n", bench__addr_port(at),
			strerror(-rc));
		return 1;
	}
	printf("ulsping server: listening on port %u (%s%s)\n", bench__addr_port(at), ops->name,
	       at->sa.sa_family == AF_INET6 ? ", IPv6 and IPv4" : "");
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
static int connect_retry(const union bench_addr *to)
{
	double deadline = bench__now_s() + 2;

	for (;;) {
		int sd = ops->socket_af(to->sa.sa_family, SOCK_STREAM);
		if (sd < 0)
			return sd;
		int rc = ops->connect_sa(sd, &to->sa, bench__addr_len(to));
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
		bench__bandwidth_mbps(size, st->p50));
	return fclose(f) == 0 ? 0 : -1;
}

int bench__ping_client(const struct netops *o, const union bench_addr *to,
		       unsigned long long size, unsigned long long count, unsigned long long skip,
		       const char *json, const char *bd_path)
{
	ops = o;
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
		if (bench__echo_verify(seed, i, in, size, &bad) < 0) {
			fprintf(stderr, "ulsping client: CORRUPT ECHO in round trip %llu at byte %llu "
				"of the message\n", (unsigned long long)i,
				(unsigned long long)(bad - i * size));
			goto out;
		}
		rtt[i] = (t1 - t0) * 1e6;
	}
	bench__stats_compute(rtt + skip, (size_t)(count - skip), &st);
	printf("size %llu: mean %.1f us, p50 %.1f us, p99 %.1f us, min %.1f .. max %.1f us "
	       "(%s, %zu round trips, %.1f Mbit/s, every byte verified)\n", size, st.mean, st.p50,
	       st.p99, st.min, st.max, ops->name, st.n, bench__bandwidth_mbps(size, st.p50));
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
