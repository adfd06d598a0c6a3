/* Threads of one process blocked in libuls calls while frames arrive: run to completion
 * (stack/drive.c) with several application threads racing each other and the stack thread
 * (run by tests/node/test_rtc.py, on the direct data path and on the relay).
 *
 *   rtc server --ctl PATH --port P --conns K --count N --mode pingpong|duplex|nbsend|stream
 *   rtc client --ctl PATH --to IP:P --conns K --count N --mode pingpong|duplex|nbsend|stream
 *              [--pause-every M] [--fork] [--busy-poll US] [--idle-ms T]
 *
 * pingpong: K connections, one thread each on both sides; the client's thread sends N
 * 8-byte messages (connection, round), each echoed by the server's thread. Every M rounds
 * both sides pause 5 ms, longer than the stack thread's grace (drive.c), so that their next
 * blocking receive finds the stack thread back on the device.
 * duplex: one connection; on each side one thread sends N KiB of a pattern while another
 * thread of the same process receives the peer's N KiB on the same socket and checks it.
 * nbsend: one connection; the client sends N KiB of a pattern without ever blocking in a
 * call (MSG_DONTWAIT; on EAGAIN it yields the CPU and tries again, for at most 60 s), as
 * a program that polls does between its sends; the server receives and checks them.
 * stream: one connection; the client sends N KiB of a pattern in blocking 64 KiB sends, the
 * server receives them in blocking 64 KiB receives and checks them (a bulk transfer, as
 * ulsbench's: both application threads drive the stack while the stack threads park).
 * --fork (client, pingpong): once its threads are blocked in receives, the client forks; the
 * child attaches a stack of its own, opens one more connection (the server accepts K + 1)
 * and runs the same ping-pong on it, while the parent's threads go on.
 * --busy-poll US: SO_BUSY_POLL on every connection (read back to check).
 * --idle-ms T (client, pingpong): the client's threads wait T ms before their first
 * message, while the server's threads wait for it in recv (one of them on the device).
 * Every byte is checked. Prints "ok" and the stack's run-to-completion counters (name=value)
 * and exits 0; otherwise says what went wrong and exits 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "uls.h"

#define MAX_CONNS 16
#define CHUNK 1024

static const char *ctl;
static int conns = 1, count = 100, pause_every, busy_poll, idle_ms;
static bool duplex, nbsend, stream, do_fork;
static volatile int failed;

static void fail(const char *fmt, const char *what, long a, long b)
{
	fprintf(stderr, fmt, what, a, b);
	failed = 1;
}

static int send_all(int sd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = uls_send(sd, p, len, 0);
		if (n <= 0)
			return n < 0 ? (int)n : -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int recv_all(int sd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = uls_recv(sd, p, len, 0);
		if (n <= 0)
			return n < 0 ? (int)n : -ECONNRESET;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static uint8_t pattern(uint64_t i, int dir)
{
	return (uint8_t)(i * 7u + (uint64_t)dir * 13u + (i >> 10));
}

struct job {
	int sd, idx;
	bool server;
	int dir;  /* duplex: which direction this thread moves */
};

static void *pingpong(void *arg)
{
	struct job *j = arg;
	uint32_t msg[2], got[2];

	for (int r = 0; r < count && !failed; r++) {
		if (pause_every && r && r % pause_every == 0)
			usleep(5000);
		if (!j->server && r == 0 && idle_ms)
			usleep((useconds_t)idle_ms * 1000u);
		if (j->server) {
			int rc = recv_all(j->sd, got, sizeof(got));
			if (rc < 0) {
				fail("%s: server recv failed: %ld (round %ld)\n", "pingpong", rc, r);
				break;
			}
			if ((int)got[1] != r) {
				fail("%s: server got round %ld, want %ld\n", "pingpong", got[1], r);
				break;
			}
			if (send_all(j->sd, got, sizeof(got)) < 0) {
				fail("%s: server send failed%ld%ld\n", "pingpong", 0, 0);
				break;
			}
			continue;
		}
		msg[0] = (uint32_t)j->idx;
		msg[1] = (uint32_t)r;
		int rc = send_all(j->sd, msg, sizeof(msg));
		if (rc == 0)
			rc = recv_all(j->sd, got, sizeof(got));
		if (rc < 0) {
			fail("%s: client failed: %ld (round %ld)\n", "pingpong", rc, r);
			break;
		}
		if (got[0] != msg[0] || got[1] != msg[1]) {
			fail("%s: echo of round %ld came back as round %ld\n", "pingpong", r, got[1]);
			break;
		}
	}
	return NULL;
}

/* duplex: dir 0 is the client's data, dir 1 the server's. */
static void *duplex_send(void *arg)
{
	struct job *j = arg;
	uint8_t buf[CHUNK];
	uint64_t off = 0;

	for (int c = 0; c < count && !failed; c++) {
		for (int i = 0; i < CHUNK; i++)
			buf[i] = pattern(off + (uint64_t)i, j->dir);
		int rc = send_all(j->sd, buf, sizeof(buf));
		if (rc < 0) {
			fail("%s: send failed: %ld at chunk %ld\n", "duplex", rc, c);
			break;
		}
		off += CHUNK;
	}
	return NULL;
}

/* nbsend: the client's side. Each call enters the stack and returns at once. */
static void *nb_send(void *arg)
{
	struct job *j = arg;
	static uint8_t buf[64 * CHUNK];
	uint64_t total = (uint64_t)count * CHUNK, off = 0, base = 0;
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (off < total && !failed) {
		if (off == base) {
			for (size_t i = 0; i < sizeof(buf); i++)
				buf[i] = pattern(base + i, 0);
		}
		size_t len = sizeof(buf) - (size_t)(off - base);
		if (len > total - off)
			len = (size_t)(total - off);
		ssize_t n = uls_send(j->sd, buf + (off - base), len, MSG_DONTWAIT);
		if (n == -EAGAIN) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (t.tv_sec - t0.tv_sec > 60) {
				fail("%s: no room for 60 s at byte %ld%ld\n", "nbsend", (long)off, 0);
				break;
			}
			sched_yield();
			continue;
		}
		if (n <= 0) {
			fail("%s: send failed: %ld at byte %ld\n", "nbsend", (long)n, (long)off);
			break;
		}
		off += (uint64_t)n;
		if (off - base == sizeof(buf))
			base = off;
	}
	return NULL;
}

/* stream: both sides, blocking 64 KiB calls. */
static void *stream_xfer(void *arg)
{
	struct job *j = arg;
	static uint8_t buf[64 * CHUNK];
	uint64_t total = (uint64_t)count * CHUNK, off = 0;

	while (off < total && !failed) {
		size_t len = sizeof(buf);
		if (len > total - off)
			len = (size_t)(total - off);
		if (!j->server) {
			for (size_t i = 0; i < len; i++)
				buf[i] = pattern(off + i, 0);
			int rc = send_all(j->sd, buf, len);
			if (rc < 0) {
				fail("%s: send failed: %ld at byte %ld\n", "stream", rc, (long)off);
				break;
			}
			off += len;
			continue;
		}
		ssize_t n = uls_recv(j->sd, buf, len, 0);
		if (n <= 0) {
			fail("%s: recv failed: %ld at byte %ld\n", "stream", (long)n, (long)off);
			break;
		}
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] != pattern(off + (uint64_t)i, 0)) {
				fail("%s: byte %ld wrong%ld\n", "stream", (long)(off + (uint64_t)i), 0);
				return NULL;
			}
		}
		off += (uint64_t)n;
	}
	return NULL;
}

static void *duplex_recv(void *arg)
{
	struct job *j = arg;
	uint8_t buf[CHUNK];
	uint64_t off = 0;

	for (int c = 0; c < count && !failed; c++) {
		int rc = recv_all(j->sd, buf, sizeof(buf));
		if (rc < 0) {
			fail("%s: recv failed: %ld at chunk %ld\n", "duplex", rc, c);
			break;
		}
		for (int i = 0; i < CHUNK; i++) {
			if (buf[i] != pattern(off + (uint64_t)i, j->dir)) {
				fail("%s: byte %ld wrong (chunk %ld)\n", "duplex", (long)off + i, c);
				return NULL;
			}
		}
		off += CHUNK;
	}
	return NULL;
}

static void print_counters(void)
{
	struct uls_counter c[256];
	int n = uls_counters(c, 256);

	printf("ok");
	for (int i = 0; i < n && i < 256; i++)
		if (strncmp(c[i].name, "rtc_", 4) == 0)
			printf(" %s=%llu", c[i].name, (unsigned long long)c[i].value);
	printf("\n");
	fflush(stdout);
}

/* Both ends shut down their sending side once done and wait for the peer's: the peer
 * sends its FIN only after it received everything, so no process exits (and has ulsd
 * reset its connections) while its data is still on the way. */
static int finish(const int *sds, int k)
{
	char c;

	for (int i = 0; i < k; i++)
		uls_shutdown(sds[i], SHUT_WR);
	for (int i = 0; i < k; i++) {
		ssize_t n = uls_recv(sds[i], &c, 1, 0);
		if (n != 0) {
			fprintf(stderr, "connection %d: %zd at the end, want EOF\n", i, n);
			return 1;
		}
		uls_close(sds[i]);
	}
	return 0;
}

/* SO_BUSY_POLL on every connection (socket(7)), read back. */
static int set_busy_poll(const int *sds, int k)
{
	for (int i = 0; i < k && busy_poll; i++) {
		int v = 0;
		socklen_t len = sizeof(v);
		if (uls_setsockopt(sds[i], SOL_SOCKET, SO_BUSY_POLL, &busy_poll, sizeof(int)) < 0 ||
		    uls_getsockopt(sds[i], SOL_SOCKET, SO_BUSY_POLL, &v, &len) < 0 || v != busy_poll) {
			fprintf(stderr, "SO_BUSY_POLL %d: read back %d\n", busy_poll, v);
			return 1;
		}
	}
	return 0;
}

static int run_threads(int *sds, int k, bool server)
{
	pthread_t t[2 * MAX_CONNS];
	struct job jobs[2 * MAX_CONNS];
	int nt = 0;

	for (int i = 0; i < k; i++) {
		if (stream) {
			jobs[nt] = (struct job){ sds[i], i, server, 0 };
			pthread_create(&t[nt], NULL, stream_xfer, &jobs[nt]);
			nt++;
		} else if (nbsend) {
			jobs[nt] = (struct job){ sds[i], i, server, 0 };
			pthread_create(&t[nt], NULL, server ? duplex_recv : nb_send, &jobs[nt]);
			nt++;
		} else if (duplex) {
			jobs[nt] = (struct job){ sds[i], i, server, server ? 1 : 0 };
			pthread_create(&t[nt], NULL, duplex_send, &jobs[nt]);
			nt++;
			jobs[nt] = (struct job){ sds[i], i, server, server ? 0 : 1 };
			pthread_create(&t[nt], NULL, duplex_recv, &jobs[nt]);
			nt++;
		} else {
			jobs[nt] = (struct job){ sds[i], i, server, 0 };
			pthread_create(&t[nt], NULL, pingpong, &jobs[nt]);
			nt++;
		}
	}
	for (int i = 0; i < nt; i++)
		pthread_join(t[i], NULL);
	return failed ? 1 : finish(sds, k);
}

static int connect_to(const struct sockaddr_in *to)
{
	int sd = uls_socket(SOCK_STREAM);
	int one = 1;

	if (sd < 0)
		return sd;
	uls_setsockopt(sd, IPPROTO_TCP, 1 /* TCP_NODELAY */, &one, sizeof(one));
	int rc = uls_connect(sd, to);
	return rc < 0 ? rc : sd;
}

static int forked_child(const struct sockaddr_in *to)
{
	int rc = uls_attach(ctl);

	if (rc < 0 && rc != -EALREADY) {
		fprintf(stderr, "child: attach failed: %d\n", rc);
		return 1;
	}
	int sd = connect_to(to);
	if (sd < 0) {
		fprintf(stderr, "child: connect failed: %d\n", sd);
		return 1;
	}
	struct job j = { sd, conns, false, 0 };
	pingpong(&j);
	return failed ? 1 : finish(&sd, 1);
}

int main(int argc, char **argv)
{
	const char *to_s = NULL;
	int port = 0, sds[MAX_CONNS + 1];
	bool server;

	if (argc < 2)
		return 2;
	server = strcmp(argv[1], "server") == 0;
	for (int i = 2; i + 1 < argc || (i < argc && strcmp(argv[i], "--fork") == 0); i += 2) {
		if (!strcmp(argv[i], "--fork")) {
			do_fork = true;
			i--;
		} else if (!strcmp(argv[i], "--ctl")) {
			ctl = argv[i + 1];
		} else if (!strcmp(argv[i], "--port")) {
			port = atoi(argv[i + 1]);
		} else if (!strcmp(argv[i], "--to")) {
			to_s = argv[i + 1];
		} else if (!strcmp(argv[i], "--conns")) {
			conns = atoi(argv[i + 1]);
		} else if (!strcmp(argv[i], "--count")) {
			count = atoi(argv[i + 1]);
		} else if (!strcmp(argv[i], "--busy-poll")) {
			busy_poll = atoi(argv[i + 1]);
		} else if (!strcmp(argv[i], "--idle-ms")) {
			idle_ms = atoi(argv[i + 1]);
		} else if (!strcmp(argv[i], "--pause-every")) {
			pause_every = atoi(argv[i + 1]);
		} else if (!strcmp(argv[i], "--mode")) {
			duplex = strcmp(argv[i + 1], "duplex") == 0;
			nbsend = strcmp(argv[i + 1], "nbsend") == 0;
			stream = strcmp(argv[i + 1], "stream") == 0;
		} else {
			return 2;
		}
	}
	if (!ctl || conns < 1 || conns > MAX_CONNS || count < 1 || ((duplex || nbsend || stream) && conns != 1))
		return 2;
	int rc = uls_attach(ctl);
	if (rc < 0) {
		fprintf(stderr, "attach %s: %d\n", ctl, rc);
		return 1;
	}
	int k = conns;
	if (server) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
		int l = uls_socket(SOCK_STREAM), one = 1;
		if (l < 0 || uls_bind(l, &a) < 0 || uls_listen(l, 16) < 0) {
			fprintf(stderr, "listen on %d failed\n", port);
			return 1;
		}
		printf("listening\n");
		fflush(stdout);
		/* --fork on the client: one more connection, from its child */
		int want = k + (getenv("RTC_EXTRA_CONN") ? 1 : 0);
		for (int i = 0; i < want; i++) {
			sds[i] = uls_accept(l, NULL);
			if (sds[i] < 0) {
				fprintf(stderr, "accept failed: %d\n", sds[i]);
				return 1;
			}
			uls_setsockopt(sds[i], IPPROTO_TCP, 1, &one, sizeof(one));
		}
		k = want;
	} else {
		struct sockaddr_in to = { .sin_family = AF_INET };
		char ip[32];
		const char *colon = to_s ? strchr(to_s, ':') : NULL;
		if (!colon || (size_t)(colon - to_s) >= sizeof(ip))
			return 2;
		memcpy(ip, to_s, (size_t)(colon - to_s));
		ip[colon - to_s] = '\0';
		if (inet_pton(AF_INET, ip, &to.sin_addr) != 1)
			return 2;
		to.sin_port = htons((uint16_t)atoi(colon + 1));
		for (int i = 0; i < k; i++) {
			sds[i] = connect_to(&to);
			if (sds[i] < 0) {
				fprintf(stderr, "connect failed: %d\n", sds[i]);
				return 1;
			}
		}
		if (do_fork) {
			pthread_t t[MAX_CONNS];
			struct job jobs[MAX_CONNS];
			for (int i = 0; i < k; i++) {
				jobs[i] = (struct job){ sds[i], i, false, 0 };
				pthread_create(&t[i], NULL, pingpong, &jobs[i]);
			}
			usleep(20000);  /* the threads are inside receives by now */
			fflush(stdout);
			pid_t pid = fork();
			if (pid == 0)
				_exit(forked_child(&to));
			int st = 0;
			for (int i = 0; i < k; i++)
				pthread_join(t[i], NULL);
			if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
			    WEXITSTATUS(st) != 0) {
				fprintf(stderr, "forked child failed (status %#x)\n", st);
				return 1;
			}
			if (failed || finish(sds, k))
				return 1;
			print_counters();
			return 0;
		}
	}
	if (set_busy_poll(sds, k) || run_threads(sds, k, server) != 0)
		return 1;
	print_counters();
	return 0;
}
