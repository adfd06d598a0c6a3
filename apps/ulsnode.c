/* ulsnode: one process that is a complete ulstack node on a TAP device, with the small
 * services the conformance tests talk to. It is the single-process mode of ulstack: no
 * daemon, the process owns the TAP.
 *
 *   TCP 7 echo, UDP 7 echo, TCP 9 discard, TCP 13 greet-and-close (active close),
 *   TCP 19 pattern source (apps/pattern.h, seed 19), TCP 10 hold (accepts, never reads),
 *   UDP 11 dial: a datagram holding a decimal port number makes the node connect to the
 *   sender's address at that port (an active open, for the tests of SYN retransmission)
 *   and serve echo on the connection;
 *   "PORT rcvbuf=N" and "PORT user_timeout=MS" (either or both) set SO_RCVBUF or
 *   TCP_USER_TIMEOUT before the connect (the tests of the SYN's window, and of R2);
 *   TCP 11 dial: reads one line "ADDR PORT" (ADDR IPv4 or IPv6), connects there (a
 *   blocking connect) and answers "ok" or "err ERRNAME" (e.g. "err ECONNREFUSED"), so that
 *   tests can watch the node's active open and what it reports to the application; a line
 *   "udp ADDR PORT" makes it send "probe" there from a connected UDP socket and recv (2 s
 *   timeout), answering "data", "timeout" or "err ERRNAME";
 *   TCP 12 half-close or echo: a first octet 'H' makes the node shut its sending side down
 *   (its FIN goes first), read to the peer's FIN, keep the socket HALF_HOLD_MS longer and
 *   close it, so the connection sits in TIME-WAIT while the application still holds it;
 *   any other first octet: echo, as port 7;
 *   UDP 12 probe: "C PORT", "S PORT" or "U PORT" makes the node send "probe" from a new
 *   UDP socket to the sender's address at PORT (C, S: a connected socket; U: sendto from an
 *   unconnected one), then call recv (C, U: 2 s timeout) or, 1 s later, send again (S), and
 *   answer the request with what that second call returned: "data", "timeout", "ok" or
 *   "err ERRNAME", so that tests can watch what ICMP errors do to UDP sockets;
 *   TCP 20 echo with a listen backlog of SMALL_BACKLOG, so that a few SYNs fill its bound on
 *   half-open connections (the SYN cookie tests, RFC 4987);
 *   TCP 21 hold with SO_RCVBUF SMALL_RCVBUF on the listener, and its backlog SMALL_BACKLOG,
 *   so that tests can watch a capped receive window fill, on connections from a SYN cookie
 *   too;
 *   TCP 22 pattern source (as 19) with TCP_USER_TIMEOUT USER_TIMEOUT_MS on the listener
 *   (R2 as the application's time: the tests of RFC 9293 §3.8.3);
 *   TCP 23 hold with keep-alive (SO_KEEPALIVE, TCP_KEEPIDLE and TCP_KEEPINTVL KEEPALIVE_S)
 *   and TCP_USER_TIMEOUT KEEPALIVE_USER_TIMEOUT_MS; TCP 24 the same without the user
 *   timeout; TCP 25 pattern source with that keep-alive (RFC 9293 §3.8.4, and with §3.8.3's
 *   R2)
 *
 * --stats PATH creates a UNIX socket; each connection to it receives the node's counters
 * as one JSON object and is closed. The socket appears once the node is up (tests wait for
 * it), and is removed at exit. SIGTERM or SIGINT stops the node.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "apps/netops.h"
#include "apps/pattern.h"
#include "uls.h"

#define SOURCE_LIMIT (1ull << 30)  /* bytes one source connection sends at most */
#define SOURCE_SEED  19
#define HOLD_SECONDS 120
#define HALF_HOLD_MS 1500
#define SMALL_BACKLOG 4           /* ports 20 and 21: their listen backlog */
#define SMALL_RCVBUF 16384        /* port 21: the listener's SO_RCVBUF */
#define USER_TIMEOUT_MS 1500      /* port 22: the listener's TCP_USER_TIMEOUT */
#define KEEPALIVE_S 1             /* ports 23-25: keep-alive idle time and interval */
#define KEEPALIVE_USER_TIMEOUT_MS 2500  /* port 23: TCP_USER_TIMEOUT with keep-alive */
#define OPT_REQ_MAX (1 << 30)     /* the largest option value a UDP 11 request may ask for */

enum service { SVC_ECHO, SVC_DISCARD, SVC_GREET, SVC_SOURCE, SVC_HOLD, SVC_DIAL, SVC_HALF };

struct conn {
	int sd;
	enum service svc;
};

/* A connected UDP socket of addr's family sends "probe" there and waits 2 s for an answer
 * (the dial service's "udp" line): 0 when one came, else -errno. */
static int dial_udp(const struct sockaddr *addr, socklen_t alen)
{
	struct timeval tv = { .tv_sec = 2 };
	char buf[64];
	int sd = uls_socket_af(addr->sa_family, SOCK_DGRAM);
	int rc = sd;

	if (sd >= 0) {
		rc = uls_setsockopt(sd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		if (rc == 0)
			rc = uls_connect_sa(sd, addr, alen);
		if (rc == 0) {
			ssize_t n = uls_send(sd, "probe", 5, 0);
			if (n >= 0)
				n = uls_recv(sd, buf, sizeof(buf), 0);
			rc = n < 0 ? (int)n : 0;
		}
		uls_close(sd);
	}
	return rc;
}

/* The dial service: one request line, one connect, one answer line. The line is
 * "ADDR PORT" (a TCP connect) or "udp ADDR PORT" (dial_udp); ADDR is IPv4 or IPv6. */
static void dial(int sd, char *b, size_t cap)
{
	size_t len = 0;
	ssize_t n;

	while (len < cap - 1 && !memchr(b, '\n', len) &&
	       (n = uls_recv(sd, b + len, cap - 1 - len, 0)) > 0)
		len += (size_t)n;
	b[len] = 0;
	char ip[64];
	unsigned port;
	bool udp = strncmp(b, "udp ", 4) == 0;
	struct sockaddr_in to = { .sin_family = AF_INET };
	struct sockaddr_in6 to6 = { .sin6_family = AF_INET6 };
	const struct sockaddr *addr = NULL;
	socklen_t alen = 0;
	const char *answer = "err EINVAL\n";
	char line[64];
	if (sscanf(b + (udp ? 4 : 0), "%63s %u", ip, &port) == 2 && port > 0 && port < 65536) {
		if (inet_pton(AF_INET, ip, &to.sin_addr) == 1) {
			to.sin_port = htons((uint16_t)port);
			addr = (const struct sockaddr *)&to;
			alen = sizeof(to);
		} else if (inet_pton(AF_INET6, ip, &to6.sin6_addr) == 1) {
			to6.sin6_port = htons((uint16_t)port);
			addr = (const struct sockaddr *)&to6;
			alen = sizeof(to6);
		}
	}
	if (addr) {
		int rc;
		if (udp) {
			rc = dial_udp(addr, alen);
		} else {
			int c = uls_socket_af(addr->sa_family, SOCK_STREAM);
			rc = c < 0 ? c : uls_connect_sa(c, addr, alen);
			if (c >= 0)
				uls_close(c);
		}
		if (rc == 0) {
			answer = udp ? "data\n" : "ok\n";
		} else {
			const char *name = rc == -EAGAIN ? "timeout" : strerrorname_np(-rc);
			snprintf(line, sizeof(line), "%s%s\n", rc == -EAGAIN ? "" : "err ",
				 name ? name : "?");
			answer = line;
		}
	}
	uls_send(sd, answer, strlen(answer), 0);
}

static void *serve_conn(void *arg)
{
	struct conn c = *(struct conn *)arg;
	char *b = malloc(65536);
	uint64_t off = 0;
	ssize_t n;

	free(arg);
	if (!b) {
		uls_close(c.sd);
		return NULL;
	}
	switch (c.svc) {
	case SVC_HALF:
		n = uls_recv(c.sd, b, 65536, 0);
		if (n > 0 && b[0] == 'H') {
			uls_shutdown(c.sd, SHUT_WR);
			while (uls_recv(c.sd, b, 65536, 0) > 0)
				;
			usleep(HALF_HOLD_MS * 1000);
			break;
		}
		if (n <= 0 || uls_send(c.sd, b, (size_t)n, 0) != n)
			break;
		/* fall through: echo the rest */
	case SVC_ECHO:
		while ((n = uls_recv(c.sd, b, 65536, 0)) > 0)
			if (uls_send(c.sd, b, (size_t)n, 0) != n)
				break;
		break;
	case SVC_DISCARD:
		while (uls_recv(c.sd, b, 65536, 0) > 0)
			;
		break;
	case SVC_GREET:
		uls_send(c.sd, "ulstack\n", 8, 0);
		break;
	case SVC_DIAL:
		dial(c.sd, b, 65536);
		break;
	case SVC_SOURCE:
		while (off < SOURCE_LIMIT) {
			bench__pattern_fill(SOURCE_SEED, off, b, 65536);
			if ((n = uls_send(c.sd, b, 65536, 0)) <= 0)
				break;
			off += (uint64_t)n;  /* a short send continues from where it stopped */
		}
		break;
	case SVC_HOLD:
		/* Never read: the receive window closes and the peer must probe it. Hold the
		 * connection until it is reset or times out, at most HOLD_SECONDS. */
		for (int i = 0; i < HOLD_SECONDS; i++) {
			struct sockaddr_in peer;
			if (uls_getpeername(c.sd, &peer) < 0)
				break;
			sleep(1);
		}
		break;
	}
	free(b);
	uls_close(c.sd);
	return NULL;
}

struct listener {
	int sd;
	enum service svc;
};

static void *accept_loop(void *arg)
{
	struct listener *l = arg;

	for (;;) {
		int sd = uls_accept(l->sd, NULL);
		if (sd < 0) {
			if (sd == -EBADF || sd == -ENETDOWN)
				return NULL;
			continue;
		}
		struct conn *c = malloc(sizeof(*c));
		pthread_t t;
		if (!c) {
			uls_close(sd);
			continue;
		}
		c->sd = sd;
		c->svc = l->svc;
		if (pthread_create(&t, NULL, serve_conn, c) != 0) {
			free(c);
			uls_close(sd);
			continue;
		}
		pthread_detach(t);
	}
}

/* Listen on sd, which the caller bound (rc: how that went), and start its accept thread. */
static int start_listener(int sd, int rc, enum service svc, int backlog)
{
	struct listener *l;
	pthread_t t;

	if (rc == 0)
		rc = uls_listen(sd, backlog);
	if (rc < 0)
		return rc;
	l = malloc(sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->sd = sd;
	l->svc = svc;
	if (pthread_create(&t, NULL, accept_loop, l) != 0) {
		free(l);
		return -EAGAIN;
	}
	pthread_detach(t);
	return 0;
}

/* An IPv4 service: its port, what it does, its listen backlog, and options of the listener
 * that the connections it accepts take (0: not set): SO_RCVBUF, TCP_USER_TIMEOUT (ms), and
 * keep-alive (SO_KEEPALIVE with TCP_KEEPIDLE and TCP_KEEPINTVL both keepalive_s). */
struct listen_spec {
	unsigned port;
	enum service svc;
	int backlog, rcvbuf, user_timeout, keepalive_s;
};

static int set_int(int sd, int level, int name, int v)
{
	return uls_setsockopt(sd, level, name, &v, sizeof(v));
}

static int listen_on(const struct listen_spec *l)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)l->port) };
	int sd = uls_socket(SOCK_STREAM), rc = 0;

	if (sd < 0)
		return sd;
	set_int(sd, SOL_SOCKET, SO_REUSEADDR, 1);
	if (l->rcvbuf)
		rc = set_int(sd, SOL_SOCKET, SO_RCVBUF, l->rcvbuf);
	if (rc == 0 && l->user_timeout)
		rc = set_int(sd, IPPROTO_TCP, TCP_USER_TIMEOUT, l->user_timeout);
	if (rc == 0 && l->keepalive_s) {
		rc = set_int(sd, SOL_SOCKET, SO_KEEPALIVE, 1);
		if (rc == 0)
			rc = set_int(sd, IPPROTO_TCP, TCP_KEEPIDLE, l->keepalive_s);
		if (rc == 0)
			rc = set_int(sd, IPPROTO_TCP, TCP_KEEPINTVL, l->keepalive_s);
	}
	if (rc == 0)
		rc = uls_bind(sd, &a);
	return start_listener(sd, rc, l->svc, l->backlog);
}

/* The same service for IPv6 peers, on a node with an IPv6 address: an IPv6-only socket
 * (IPV6_V6ONLY) beside the IPv4 one, so that IPv4 traffic meets the same sockets as on a
 * node without IPv6. */
static int listen_on6(unsigned port, enum service svc, int backlog)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port) };
	int sd = uls_socket_af(AF_INET6, SOCK_STREAM), one = 1;

	if (sd < 0)
		return sd;
	uls_setsockopt(sd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	int rc = uls_setsockopt(sd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (rc == 0)
		rc = uls_bind_sa(sd, (struct sockaddr *)&a, sizeof(a));
	return start_listener(sd, rc, svc, backlog);
}

static void *serve_udp_echo6(void *arg)
{
	int sd = *(int *)arg;
	static char buf[65536];

	for (;;) {
		struct sockaddr_in6 from;
		socklen_t len = sizeof(from);
		ssize_t n = uls_recvfrom_sa(sd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &len);
		if (n == -EBADF || n == -ENETDOWN)
			return NULL;
		if (n >= 0)
			uls_sendto_sa(sd, buf, (size_t)n, 0, (struct sockaddr *)&from, len);
	}
	return NULL;
}

static void *serve_udp_echo(void *arg)
{
	int sd = *(int *)arg;
	static char buf[65536];

	for (;;) {
		struct sockaddr_in from;
		ssize_t n = uls_recvfrom(sd, buf, sizeof(buf), 0, &from);
		if (n == -EBADF || n == -ENETDOWN)
			return NULL;
		if (n >= 0)
			uls_sendto(sd, buf, (size_t)n, 0, &from);
	}
}

struct dial_req {
	struct sockaddr_in to;
	int rcvbuf;                 /* SO_RCVBUF before the connect; 0: not set */
	int user_timeout;           /* TCP_USER_TIMEOUT before the connect; 0: not set */
};

static void *dial_conn(void *arg)
{
	struct dial_req req = *(struct dial_req *)arg;
	int sd = uls_socket(SOCK_STREAM);
	char *b = malloc(65536);
	ssize_t n;

	free(arg);
	if (sd >= 0 && ((req.rcvbuf &&
			 uls_setsockopt(sd, SOL_SOCKET, SO_RCVBUF, &req.rcvbuf, sizeof(int)) < 0) ||
			(req.user_timeout &&
			 uls_setsockopt(sd, IPPROTO_TCP, TCP_USER_TIMEOUT, &req.user_timeout,
					sizeof(int)) < 0))) {
		uls_close(sd);
		sd = -1;
	}
	if (sd >= 0 && b && uls_connect(sd, &req.to) == 0)
		while ((n = uls_recv(sd, b, 65536, 0)) > 0)
			if (uls_send(sd, b, (size_t)n, 0) != n)
				break;
	free(b);
	if (sd >= 0)
		uls_close(sd);
	return NULL;
}

struct probe_req {
	int sd;                     /* the service's socket: the answer leaves from it */
	struct sockaddr_in from;    /* who asked */
	char op;
	uint16_t port;
	int rcvbuf, user_timeout;   /* UDP 11's "rcvbuf=N", "user_timeout=MS"; 0: not given */
};

/* The next request to the UDP services 11 and 12: "PORT" followed by options
 * " rcvbuf=N" and " user_timeout=MS" (11), or with ops "OP PORT" where OP is one of ops
 * (12). Fills *r; -EBADF or -ENETDOWN once the socket is gone. Anything else that arrives,
 * an unknown option, a value out of 1..OPT_REQ_MAX or anything after the options too, is
 * not a request and is skipped. */
static int next_request(int sd, const char *ops, struct probe_req *r)
{
	char buf[64];

	for (;;) {
		ssize_t n = uls_recvfrom(sd, buf, sizeof(buf) - 1, 0, &r->from);
		if (n == -EBADF || n == -ENETDOWN)
			return (int)n;
		if (n <= 0)
			continue;
		buf[n] = 0;
		const char *p = buf;
		r->op = 0;
		if (ops) {
			if (n < 3 || !buf[0] || !strchr(ops, buf[0]) || buf[1] != ' ')
				continue;
			r->op = buf[0];
			p = buf + 2;
		}
		char *end;
		unsigned long port = strtoul(p, &end, 10);
		if (end == p || port == 0 || port > 65535)
			continue;
		r->rcvbuf = r->user_timeout = 0;
		bool bad = false;
		while (!ops && !bad && *end == ' ') {
			static const char rb[] = "rcvbuf=", ut[] = "user_timeout=";
			const char *q = end + 1;
			int *to = NULL;
			if (strncmp(q, rb, sizeof(rb) - 1) == 0) {
				to = &r->rcvbuf;
				q += sizeof(rb) - 1;
			} else if (strncmp(q, ut, sizeof(ut) - 1) == 0) {
				to = &r->user_timeout;
				q += sizeof(ut) - 1;
			}
			/* digits only: strtoul would also take spaces and a sign */
			unsigned long v = to && *q >= '0' && *q <= '9' ? strtoul(q, &end, 10) : 0;
			bad = v == 0 || v > OPT_REQ_MAX;
			if (!bad)
				*to = (int)v;
		}
		/* UDP 11's request is the whole datagram: one cut short by the buffer, or with
		 * anything after its options, is not one */
		if (bad || (!ops && ((size_t)n == sizeof(buf) - 1 || (*end && *end != '\n'))))
			continue;
		r->sd = sd;
		r->port = (uint16_t)port;
		return 0;
	}
}

/* A thread per request; arg is the thread's to free. */
static void spawn_detached(void *(*fn)(void *), void *arg)
{
	pthread_t t;

	if (pthread_create(&t, NULL, fn, arg) != 0) {
		free(arg);
		return;
	}
	pthread_detach(t);
}

/* UDP 11: "PORT [rcvbuf=N] [user_timeout=MS]" -> connect to the sender's address at PORT,
 * one thread per request. */
static void *serve_udp_dial(void *arg)
{
	int sd = *(int *)arg;
	struct probe_req req;

	while (next_request(sd, NULL, &req) == 0) {
		struct dial_req *d = malloc(sizeof(*d));
		if (!d)
			continue;
		d->to = req.from;
		d->to.sin_port = htons(req.port);
		d->rcvbuf = req.rcvbuf;
		d->user_timeout = req.user_timeout;
		spawn_detached(dial_conn, d);
	}
	return NULL;
}

static void *probe_run(void *arg)
{
	struct probe_req *r = arg;
	struct sockaddr_in to = r->from;
	struct timeval tv = { .tv_sec = 2 };
	char buf[64], answer[48];
	int sd = uls_socket(SOCK_DGRAM);
	ssize_t n = -EBADF;

	to.sin_port = htons(r->port);
	if (sd >= 0 && uls_setsockopt(sd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0) {
		if (r->op == 'U') {
			n = uls_sendto(sd, "probe", 5, 0, &to);
			if (n >= 0) {
				struct sockaddr_in peer;
				n = uls_recvfrom(sd, buf, sizeof(buf), 0, &peer);
			}
		} else if ((n = uls_connect(sd, &to)) == 0 && (n = uls_send(sd, "probe", 5, 0)) >= 0) {
			if (r->op == 'S') {
				sleep(1);
				n = uls_send(sd, "again", 5, 0);
			} else {
				n = uls_recv(sd, buf, sizeof(buf), 0);
			}
		}
	}
	if (n >= 0)
		snprintf(answer, sizeof(answer), "%s", r->op == 'S' ? "ok" : "data");
	else if (n == -EAGAIN)
		snprintf(answer, sizeof(answer), "timeout");
	else
		snprintf(answer, sizeof(answer), "err %s",
			 strerrorname_np((int)-n) ? strerrorname_np((int)-n) : "?");
	uls_sendto(r->sd, answer, strlen(answer), 0, &r->from);
	if (sd >= 0)
		uls_close(sd);
	free(r);
	return NULL;
}

/* UDP 12: "C PORT", "S PORT", "U PORT" -> one probe thread per request. */
static void *serve_udp_probe(void *arg)
{
	int sd = *(int *)arg;
	struct probe_req req;

	while (next_request(sd, "CSU", &req) == 0) {
		struct probe_req *r = malloc(sizeof(*r));
		if (!r)
			continue;
		*r = req;
		spawn_detached(probe_run, r);
	}
	return NULL;
}

static int write_stats(int fd)
{
	int n = uls_counters(NULL, 0);
	struct uls_counter *c = calloc((size_t)n, sizeof(*c));
	FILE *f = fdopen(fd, "w");

	if (!c || !f) {
		free(c);
		if (f)
			fclose(f);
		else
			close(fd);
		return -ENOMEM;
	}
	n = uls_counters(c, (size_t)n);
	fprintf(f, "{\"counters\": {");
	for (int i = 0; i < n; i++)
		fprintf(f, "%s\"%s\": %llu", i ? ", " : "", c[i].name, (unsigned long long)c[i].value);
	fprintf(f, "}}\n");
	fclose(f);
	free(c);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: ulsnode --tap IFNAME --ip A.B.C.D/NN [--ip6 ADDR/NN] [--mac MAC]\n"
		   "               [--gw A.B.C.D] [--gw6 ADDR] [--mtu N] [--stats PATH]\n"
		   "       ulsnode --ctl PATH [--stats PATH]\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "tap", required_argument, NULL, 't' }, { "ip", required_argument, NULL, 'i' },
		{ "ip6", required_argument, NULL, '6' },
		{ "mac", required_argument, NULL, 'm' }, { "gw", required_argument, NULL, 'g' },
		{ "gw6", required_argument, NULL, 'G' },
		{ "mtu", required_argument, NULL, 'u' }, { "stats", required_argument, NULL, 's' },
		{ "ctl", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	struct node_opts no = { 0 };
	const char *stats = NULL;
	int c, idx;

	while ((c = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return 0;
		}
		if (c == 's') {
			stats = optarg;
			continue;
		}
		if (c == '?' || bench__node_opt(&no, "ulsnode", opts[idx].name, optarg) != 1) {
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc || (!no.ctl && (!no.have_tap || !no.have_ip))) {
		usage(stderr);
		return 2;
	}
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	if (stats && strlen(stats) >= sizeof(sun.sun_path)) {
		fprintf(stderr, "ulsnode: --stats path too long\n");
		return 2;
	}

	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);  /* threads inherit: only main sees them */

	if (bench__node_start(&no, "ulsnode") < 0)
		return 1;
	static const struct listen_spec svcs[] = {
		{ 7, SVC_ECHO, 128, 0, 0, 0 }, { 9, SVC_DISCARD, 128, 0, 0, 0 },
		{ 10, SVC_HOLD, 128, 0, 0, 0 }, { 11, SVC_DIAL, 128, 0, 0, 0 },
		{ 12, SVC_HALF, 128, 0, 0, 0 }, { 13, SVC_GREET, 128, 0, 0, 0 },
		{ 19, SVC_SOURCE, 128, 0, 0, 0 }, { 20, SVC_ECHO, SMALL_BACKLOG, 0, 0, 0 },
		{ 21, SVC_HOLD, SMALL_BACKLOG, SMALL_RCVBUF, 0, 0 },
		{ 22, SVC_SOURCE, 128, 0, USER_TIMEOUT_MS, 0 },
		{ 23, SVC_HOLD, 128, 0, KEEPALIVE_USER_TIMEOUT_MS, KEEPALIVE_S },
		{ 24, SVC_HOLD, 128, 0, 0, KEEPALIVE_S },
		{ 25, SVC_SOURCE, 128, 0, 0, KEEPALIVE_S },
	};
	for (size_t i = 0; i < sizeof(svcs) / sizeof(svcs[0]); i++) {
		int rc = listen_on(&svcs[i]);
		if (rc < 0) {
			fprintf(stderr, "ulsnode: port %u: %s\n", svcs[i].port, strerror(-rc));
			return 1;
		}
	}
	int usd = uls_socket(SOCK_DGRAM);
	struct sockaddr_in ua = { .sin_family = AF_INET, .sin_port = htons(7) };
	pthread_t ut;
	if (usd < 0 || uls_bind(usd, &ua) < 0 || pthread_create(&ut, NULL, serve_udp_echo, &usd) != 0) {
		fprintf(stderr, "ulsnode: UDP echo failed\n");
		return 1;
	}
	pthread_detach(ut);
	static int dsd;
	struct sockaddr_in da = { .sin_family = AF_INET, .sin_port = htons(11) };
	dsd = uls_socket(SOCK_DGRAM);
	if (dsd < 0 || uls_bind(dsd, &da) < 0 || pthread_create(&ut, NULL, serve_udp_dial, &dsd) != 0) {
		fprintf(stderr, "ulsnode: UDP dial failed\n");
		return 1;
	}
	pthread_detach(ut);
	static int psd;
	struct sockaddr_in pa = { .sin_family = AF_INET, .sin_port = htons(12) };
	psd = uls_socket(SOCK_DGRAM);
	if (psd < 0 || uls_bind(psd, &pa) < 0 || pthread_create(&ut, NULL, serve_udp_probe, &psd) != 0) {
		fprintf(stderr, "ulsnode: UDP probe failed\n");
		return 1;
	}
	pthread_detach(ut);
	struct uls_interface ui;
	if (uls_interface(&ui) == 0 && ui.prefix_len6) {
		static const unsigned ports6[][2] = {
			{ 7, SVC_ECHO }, { 9, SVC_DISCARD }, { 10, SVC_HOLD }, { 13, SVC_GREET },
			{ 19, SVC_SOURCE },
		};
		for (size_t i = 0; i < sizeof(ports6) / sizeof(ports6[0]); i++) {
			int rc = listen_on6(ports6[i][0], (enum service)ports6[i][1], 128);
			if (rc < 0) {
				fprintf(stderr, "ulsnode: IPv6 port %u: %s\n", ports6[i][0], strerror(-rc));
				return 1;
			}
		}
		static int usd6;
		struct sockaddr_in6 ua6 = { .sin6_family = AF_INET6, .sin6_port = htons(7) };
		int one = 1;
		usd6 = uls_socket_af(AF_INET6, SOCK_DGRAM);
		if (usd6 < 0 || uls_setsockopt(usd6, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0 ||
		    uls_bind_sa(usd6, (struct sockaddr *)&ua6, sizeof(ua6)) < 0 ||
		    pthread_create(&ut, NULL, serve_udp_echo6, &usd6) != 0) {
			fprintf(stderr, "ulsnode: IPv6 UDP echo failed\n");
			return 1;
		}
		pthread_detach(ut);
	}

	int ssd = -1;
	if (stats) {
		memcpy(sun.sun_path, stats, strlen(stats) + 1);
		unlink(stats);
		ssd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (ssd < 0 || bind(ssd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
		    listen(ssd, 16) < 0) {
			fprintf(stderr, "ulsnode: --stats %s: %s\n", stats, strerror(errno));
			return 1;
		}
	}
	fprintf(stderr, "ulsnode: up on %s\n", no.ctl ? no.ctl : no.cfg.tap);

	/* Main thread: serve stats requests and wait for a stop signal. */
	for (;;) {
		struct timespec tick = { 0, 50 * 1000 * 1000 };
		int sig = sigtimedwait(&sigs, NULL, &tick);
		if (sig == SIGTERM || sig == SIGINT)
			break;
		if (ssd >= 0) {
			int fd = accept4(ssd, NULL, NULL, SOCK_CLOEXEC);
			if (fd >= 0)
				write_stats(fd);
		}
	}
	if (stats)
		unlink(stats);
	uls_node_stop();
	return 0;
}
