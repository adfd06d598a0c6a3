/* ulsrelay: the central protocol server of the comparison (seed 004 §4.3): one ulstack
 * process on a node carries every stream of the node's worker processes, which hand it
 * their data over UNIX sockets, as applications handed theirs to OSF/1's single "Unix
 * server". One stack, one stack thread, every stream's protocol work in one place.
 *
 *   ulsrelay --ctl CTL --unix-listen PATH --to IP:PORT   each UNIX connection -> a TCP one
 *   ulsrelay --ctl CTL --port P --unix-connect PATH      each TCP connection -> a UNIX one
 *
 * Bytes are relayed unchanged in both directions (the workers verify them end to end);
 * a side's FIN is passed on as a shutdown of the other side. SIGTERM stops it.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "apps/netops.h"
#include "netif/opt/opt.h"

#define CHUNK 65536

struct pair {
	int unix_fd;   /* kernel fd */
	int sd;        /* ulstack descriptor */
	int alive;     /* directions still running; the last one closes both */
	pthread_mutex_t lock;
};

static void pair_done(struct pair *p)
{
	pthread_mutex_lock(&p->lock);
	int last = --p->alive == 0;
	pthread_mutex_unlock(&p->lock);
	if (last) {
		close(p->unix_fd);
		uls_close(p->sd);
		pthread_mutex_destroy(&p->lock);
		free(p);
	}
}

/* One direction of a pair: what rd reads from one side, wr writes whole to the other;
 * at the end of the input (a FIN) the other side is shut for writing. */
struct side {
	ssize_t (*rd)(const struct pair *p, void *buf, size_t n);
	ssize_t (*wr)(const struct pair *p, const void *buf, size_t n);
	void (*shut_wr)(const struct pair *p);
};

static ssize_t unix_rd(const struct pair *p, void *buf, size_t n)
{
	return read(p->unix_fd, buf, n);
}

static ssize_t unix_wr(const struct pair *p, const void *buf, size_t n)
{
	return write(p->unix_fd, buf, n);
}

static void unix_shut_wr(const struct pair *p)
{
	shutdown(p->unix_fd, SHUT_WR);
}

static ssize_t tcp_rd(const struct pair *p, void *buf, size_t n)
{
	return uls_recv(p->sd, buf, n, 0);
}

static ssize_t tcp_wr(const struct pair *p, const void *buf, size_t n)
{
	return uls_send(p->sd, buf, n, 0);
}

static void tcp_shut_wr(const struct pair *p)
{
	uls_shutdown(p->sd, SHUT_WR);
}

static void copy(struct pair *p, const struct side *d)
{
	char *buf = malloc(CHUNK);

	for (ssize_t n; buf && (n = d->rd(p, buf, CHUNK)) > 0;) {
		for (ssize_t off = 0; off < n;) {
			ssize_t w = d->wr(p, buf + off, (size_t)(n - off));
			if (w < 0)
				goto out;
			off += w;
		}
	}
	d->shut_wr(p);
out:
	free(buf);
	pair_done(p);
}

static void *copy_unix_to_tcp(void *arg)
{
	static const struct side d = { unix_rd, tcp_wr, tcp_shut_wr };

	copy(arg, &d);
	return NULL;
}

static void *copy_tcp_to_unix(void *arg)
{
	static const struct side d = { tcp_rd, unix_wr, unix_shut_wr };

	copy(arg, &d);
	return NULL;
}

static void start_pair(int unix_fd, int sd)
{
	struct pair *p = calloc(1, sizeof(*p));
	pthread_t t1, t2;

	if (!p) {
		close(unix_fd);
		uls_close(sd);
		return;
	}
	p->unix_fd = unix_fd;
	p->sd = sd;
	p->alive = 2;
	pthread_mutex_init(&p->lock, NULL);
	if (pthread_create(&t1, NULL, copy_unix_to_tcp, p) != 0) {
		p->alive = 1;
		pair_done(p);
		return;
	}
	pthread_detach(t1);
	if (pthread_create(&t2, NULL, copy_tcp_to_unix, p) != 0) {
		pair_done(p);
		return;
	}
	pthread_detach(t2);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: ulsrelay --ctl CTL --unix-listen PATH --to IP:PORT\n"
		   "       ulsrelay --ctl CTL --port P --unix-connect PATH\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "ctl", required_argument, NULL, 'c' }, { "unix-listen", required_argument, NULL, 'l' },
		{ "unix-connect", required_argument, NULL, 'u' }, { "to", required_argument, NULL, 't' },
		{ "port", required_argument, NULL, 'p' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	struct sockaddr_in to = { 0 }, local = { .sin_family = AF_INET };
	const char *ctl = NULL, *upath = NULL;
	bool listen_unix = false, have_to = false, have_port = false;
	unsigned long long v;
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'c': ctl = optarg; break;
		case 'l': upath = optarg; listen_unix = true; break;
		case 'u': upath = optarg; break;
		case 't':
			if (bench__parse_addr(optarg, &to, 5001) < 0) {
				fprintf(stderr, "ulsrelay: bad --to '%s'\n", optarg);
				return 2;
			}
			have_to = true;
			break;
		case 'p':
			if (opt__num("ulsrelay", "port", optarg, 1, 65535, &v) < 0)
				return 2;
			local.sin_port = htons((uint16_t)v);
			have_port = true;
			break;
		default: return opt__help_or_bad(c, usage);
		}
	}
	if (optind != argc || !ctl || !upath || strlen(upath) >= sizeof(un.sun_path) ||
	    (listen_unix ? !have_to || have_port : !have_port || have_to)) {
		usage(stderr);
		return 2;
	}
	memcpy(un.sun_path, upath, strlen(upath) + 1);
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	int rc = uls_attach(ctl);
	if (rc < 0) {
		fprintf(stderr, "ulsrelay: cannot join the node at %s: %s\n", ctl, strerror(-rc));
		return 1;
	}
	if (listen_unix) {
		int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		unlink(upath);
		if (lfd < 0 || bind(lfd, (struct sockaddr *)&un, sizeof(un)) < 0 || listen(lfd, 1024) < 0) {
			fprintf(stderr, "ulsrelay: %s: %s\n", upath, strerror(errno));
			return 1;
		}
		fprintf(stderr, "ulsrelay: relaying %s -> TCP\n", upath);
		for (;;) {
			int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
			if (fd < 0)
				continue;
			int sd = uls_socket(SOCK_STREAM);
			int one = 1;
			if (sd >= 0)
				uls_setsockopt(sd, IPPROTO_TCP, 1 /* TCP_NODELAY */, &one, sizeof(one));
			if (sd < 0 || (rc = uls_connect(sd, &to)) < 0) {
				fprintf(stderr, "ulsrelay: connect: %s\n", strerror(sd < 0 ? -sd : -rc));
				close(fd);
				if (sd >= 0)
					uls_close(sd);
				continue;
			}
			start_pair(fd, sd);
		}
	}
	int lsd = uls_socket(SOCK_STREAM), one = 1;
	if (lsd >= 0)
		uls_setsockopt(lsd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lsd < 0 || (rc = uls_bind(lsd, &local)) < 0 || (rc = uls_listen(lsd, 1024)) < 0) {
		fprintf(stderr, "ulsrelay: listen: %s\n", strerror(lsd < 0 ? -lsd : -rc));
		return 1;
	}
	fprintf(stderr, "ulsrelay: relaying TCP port %u -> %s\n", ntohs(local.sin_port), upath);
	for (;;) {
		int sd = uls_accept(lsd, NULL);
		if (sd < 0) {
			if (sd == -ENETDOWN)
				return 1;
			continue;
		}
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&un, sizeof(un)) < 0) {
			fprintf(stderr, "ulsrelay: %s: %s\n", upath, strerror(errno));
			if (fd >= 0)
				close(fd);
			uls_close(sd);
			continue;
		}
		start_pair(fd, sd);
	}
}
