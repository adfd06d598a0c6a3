/* A node of our stack and the kernel's TCP as its peer, for tests of the socket layer
 * (test_stream, test_mirror). The test process moves into a network namespace of its own
 * first (root only; without root the tests skip), makes a TAP there, gives the kernel's
 * side of it PEER_ADDR and starts the node on it at NODE_ADDR: nothing touches the
 * machine's own namespace, and the namespace goes with the process. */
#ifndef ULS_TESTS_UNIT_NODE_FIXTURE_H
#define ULS_TESTS_UNIT_NODE_FIXTURE_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "uls.h"
#include "tests/unit/owntap.h"

#define NODE_ADDR "198.18.0.1"
#define PEER_ADDR "198.18.0.2"
#define FIXTURE_TAP "ulsut0"

static bool node_up;


static __attribute__((unused)) struct sockaddr_in sin_of(const char *ip, uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

/* 0, or -1 when this process cannot have a namespace of its own (the tests skip). */
static __attribute__((unused)) int node_fixture_start(void)
{
	if (owntap_make(FIXTURE_TAP, 0) < 0)
		return -1;
	if (system("ip link set lo up && ip addr add " PEER_ADDR "/24 dev " FIXTURE_TAP
		   " && ip link set " FIXTURE_TAP " up") != 0)
		return -1;
	struct uls_node_config c = { .tap = FIXTURE_TAP, .prefix_len = 24 };
	inet_pton(AF_INET, NODE_ADDR, &c.addr);
	if (uls_node_start(&c) != 0)
		return -1;
	node_up = true;
	return 0;
}

/* The body of main() for a group of cmocka tests on the fixture (expanded where cmocka.h
 * is included): start the node, run them, stop it. */
#define NODE_FIXTURE_RUN(tests) __extension__({ \
	if (node_fixture_start() < 0) \
		fprintf(stderr, "# no network namespace of its own (not root?): tests skip\n"); \
	int rc_ = cmocka_run_group_tests(tests, NULL, NULL); \
	if (node_up) \
		uls_node_stop(); \
	rc_; \
})

/* A kernel socket of the peer's, non-blocking. */
static __attribute__((unused)) int peer_socket(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static __attribute__((unused)) bool wait_fd(int fd, short events, int ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	return poll(&p, 1, ms) == 1;
}

/* The peer connects to the node's port; the node's listener lsd accepts. Returns the
 * accepted socket, *peer the kernel's connected one. */
static __attribute__((unused)) int peer_connects(int lsd, uint16_t port, int *peer)
{
	struct sockaddr_in a = sin_of(NODE_ADDR, port);
	*peer = peer_socket();
	if (connect(*peer, (struct sockaddr *)&a, sizeof(a)) < 0 && errno != EINPROGRESS)
		return -errno;
	int sd = uls_accept(lsd, NULL);
	if (sd >= 0 && !wait_fd(*peer, POLLOUT, 5000))
		return -ETIMEDOUT;
	return sd;
}

/* A listening node socket on port. */
static __attribute__((unused)) int node_listener(uint16_t port)
{
	int sd = uls_socket(SOCK_STREAM);
	struct sockaddr_in a = sin_of(NODE_ADDR, port);
	if (sd < 0 || uls_bind(sd, &a) < 0 || uls_listen(sd, 8) < 0)
		return -1;
	return sd;
}

/* A connection the peer opened to a node listener on port, accepted: its listener, the
 * node's socket, the kernel's socket, and a readiness descriptor (-1 until a test asks). */
struct fixture_conn { int lsd, sd, peer, fd; };

static __attribute__((unused)) int fixture_connect(uint16_t port, struct fixture_conn *c)
{
	c->fd = c->peer = c->sd = -1;
	c->lsd = node_listener(port);
	if (c->lsd < 0)
		return -1;
	c->sd = peer_connects(c->lsd, port, &c->peer);
	return c->sd < 0 ? -1 : 0;
}

static __attribute__((unused)) void fixture_done(struct fixture_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	uls_close(c->sd);
	uls_close(c->lsd);
	if (c->peer >= 0)
		close(c->peer);
}

/* Read exactly n octets from the kernel socket within 5 s. */
static __attribute__((unused)) ssize_t peer_read(int fd, void *buf, size_t n)
{
	size_t got = 0;
	while (got < n && wait_fd(fd, POLLIN, 5000)) {
		ssize_t r = read(fd, (char *)buf + got, n - got);
		if (r <= 0)
			return r < 0 ? -errno : (ssize_t)got;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

#endif
