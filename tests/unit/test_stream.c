/* stack/stream.c: the TCP socket calls of a node, against the kernel's TCP as the peer
 * (tests/unit/node_fixture.h: a namespace and a TAP of the test's own). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>

#include <cmocka.h>

#include "node_fixture.h"

static uint16_t next_port = 6000;

/* stack/sock.h's STK_NOTSENT_FLOOR (not a public header). */
#define STK_NOTSENT_FLOOR_BYTES (256u * 1024u)

static int need_node(void **state)
{
	(void)state;
	if (!node_up)
		skip();
	return 0;
}

/* A connection the peer opened to a node listener, accepted. */
static struct fixture_conn connection(void)
{
	struct fixture_conn p;
	assert_int_equal(fixture_connect(next_port++, &p), 0);
	return p;
}

static void test_connect_to_a_port_nobody_listens_on_is_refused(void **state)
{
	need_node(state);
	int sd = uls_socket(SOCK_STREAM);
	struct sockaddr_in a = sin_of(PEER_ADDR, 9);  /* the kernel answers with RST */
	assert_true(sd >= 0);
	assert_int_equal(uls_connect(sd, &a), -ECONNREFUSED);
	uls_close(sd);
}

/* A ulstack socket connected to a kernel listener at la (the peer namespace), and the
 * accepted end (*peer) and the listener (*l), which the caller closes. rcvbuf: the
 * listener's SO_RCVBUF, which the accepted socket inherits (0: the default). */
static int connect_to_kernel_peer(const struct sockaddr_in *la, int rcvbuf, int *l, int *peer)
{
	int one = 1;

	*l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(*l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (rcvbuf)
		setsockopt(*l, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	assert_int_equal(bind(*l, (const struct sockaddr *)la, sizeof(*la)), 0);
	assert_int_equal(listen(*l, 4), 0);
	int sd = uls_socket(SOCK_STREAM);
	assert_int_equal(uls_connect(sd, la), 0);
	assert_true(wait_fd(*l, POLLIN, 5000));
	*peer = accept(*l, NULL, NULL);
	assert_true(*peer >= 0);
	return sd;
}

static void test_connect_reaches_a_peer_listener_and_data_flows_both_ways(void **state)
{
	need_node(state);
	struct sockaddr_in la = sin_of(PEER_ADDR, 7001);
	int l, peer, sd = connect_to_kernel_peer(&la, 0, &l, &peer);
	assert_int_equal(uls_send(sd, "ping", 4, 0), 4);
	char buf[8];
	assert_int_equal(peer_read(peer, buf, 4), 4);
	assert_memory_equal(buf, "ping", 4);
	assert_int_equal(write(peer, "pong", 4), 4);
	assert_int_equal(uls_recv(sd, buf, sizeof(buf), 0), 4);
	assert_memory_equal(buf, "pong", 4);
	struct sockaddr_in me, them;
	assert_int_equal(uls_getsockname(sd, &me), 0);
	assert_int_equal(uls_getpeername(sd, &them), 0);
	assert_int_equal(them.sin_port, la.sin_port);
	assert_int_equal(me.sin_addr.s_addr, sin_of(NODE_ADDR, 0).sin_addr.s_addr);
	uls_close(sd);
	close(peer);
	close(l);
}

static void test_accepted_connection_delivers_a_large_write_whole_and_in_order(void **state)
{
	need_node(state);
	struct fixture_conn p = connection();
	static uint8_t out[256 * 1024], in[sizeof(out)];
	for (size_t i = 0; i < sizeof(out); i++)
		out[i] = (uint8_t)(i * 31 + (i >> 8));
	assert_int_equal(uls_send(p.sd, out, sizeof(out), 0), sizeof(out));
	assert_int_equal(peer_read(p.peer, in, sizeof(in)), sizeof(in));
	assert_memory_equal(in, out, sizeof(out));
	fixture_done(&p);
}

static void test_recv_returns_zero_after_the_peer_closes(void **state)
{
	need_node(state);
	struct fixture_conn p = connection();
	char buf[8];
	assert_int_equal(write(p.peer, "bye", 3), 3);
	shutdown(p.peer, SHUT_WR);
	assert_int_equal(uls_recv(p.sd, buf, sizeof(buf), MSG_WAITALL), 3);
	assert_int_equal(uls_recv(p.sd, buf, sizeof(buf), 0), 0);
	assert_int_equal(uls_recv(p.sd, buf, sizeof(buf), 0), 0);  /* and stays so */
	fixture_done(&p);
}

static void test_recv_without_data_and_dontwait_fails_eagain(void **state)
{
	need_node(state);
	struct fixture_conn p = connection();
	char buf[8];
	assert_int_equal(uls_recv(p.sd, buf, sizeof(buf), MSG_DONTWAIT), -EAGAIN);
	fixture_done(&p);
}

static void test_peek_leaves_the_data_for_the_next_recv(void **state)
{
	need_node(state);
	struct fixture_conn p = connection();
	char buf[8];
	assert_int_equal(write(p.peer, "abcdef", 6), 6);
	assert_int_equal(uls_recv(p.sd, buf, 3, MSG_PEEK | MSG_WAITALL), 3);
	for (int i = 0; i < 500 && uls_recv(p.sd, buf, 6, MSG_PEEK) < 6; i++)
		usleep(10000);
	assert_int_equal(uls_recv(p.sd, buf, 6, MSG_PEEK), 6);
	assert_int_equal(uls_recv(p.sd, buf, sizeof(buf), 0), 6);
	assert_memory_equal(buf, "abcdef", 6);
	assert_int_equal(uls_recv(p.sd, buf, sizeof(buf), MSG_DONTWAIT), -EAGAIN);
	fixture_done(&p);
}

static void test_send_after_shutting_down_the_sending_side_fails_epipe_and_peer_sees_fin(
	void **state)
{
	need_node(state);
	struct fixture_conn p = connection();
	char buf[8];
	assert_int_equal(uls_shutdown(p.sd, SHUT_WR), 0);
	assert_int_equal(uls_send(p.sd, "x", 1, MSG_NOSIGNAL), -EPIPE);
	assert_int_equal(peer_read(p.peer, buf, 1), 0);  /* EOF: our FIN */
	/* The other direction still works (half close, RFC 9293 §3.6). */
	assert_int_equal(write(p.peer, "ok", 2), 2);
	assert_int_equal(uls_recv(p.sd, buf, 2, MSG_WAITALL), 2);
	fixture_done(&p);
}

static void test_close_with_unread_data_resets_the_connection(void **state)
{
	need_node(state);
	struct fixture_conn p = connection();
	char buf[8];
	assert_int_equal(write(p.peer, "unread", 6), 6);
	for (int i = 0; i < 500 && uls_recv(p.sd, buf, 6, MSG_PEEK) < 6; i++)
		usleep(10000);
	/* RFC 1122 §4.2.2.13: data the application never read is lost, so the peer must
	 * learn it by a RST, not a FIN. */
	uls_close(p.sd);
	assert_true(wait_fd(p.peer, POLLIN, 5000));
	errno = 0;
	assert_int_equal(read(p.peer, buf, sizeof(buf)), -1);
	assert_int_equal(errno, ECONNRESET);
	uls_close(p.lsd);
	close(p.peer);
}

static void test_peer_reset_makes_recv_fail_econnreset(void **state)
{
	need_node(state);
	struct fixture_conn p = connection();
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	char buf[8];
	setsockopt(p.peer, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(p.peer);  /* RST */
	assert_int_equal(uls_recv(p.sd, buf, sizeof(buf), 0), -ECONNRESET);
	uls_close(p.sd);
	uls_close(p.lsd);
}

static void test_bind_to_a_port_another_socket_holds_fails_eaddrinuse(void **state)
{
	need_node(state);
	int a = uls_socket(SOCK_STREAM), b = uls_socket(SOCK_STREAM);
	struct sockaddr_in sa = sin_of(NODE_ADDR, 6900);
	assert_int_equal(uls_bind(a, &sa), 0);
	assert_int_equal(uls_bind(b, &sa), -EADDRINUSE);
	uls_close(a);
	uls_close(b);
}

static void test_accept_on_a_socket_that_does_not_listen_fails_einval(void **state)
{
	need_node(state);
	int sd = uls_socket(SOCK_STREAM);
	assert_int_equal(uls_accept(sd, NULL), -EINVAL);
	uls_close(sd);
}

static void test_send_and_recv_on_an_unconnected_socket_fail_enotconn(void **state)
{
	need_node(state);
	int sd = uls_socket(SOCK_STREAM);
	char buf[4];
	assert_int_equal(uls_send(sd, "x", 1, MSG_NOSIGNAL), -ENOTCONN);
	assert_int_equal(uls_recv(sd, buf, sizeof(buf), 0), -ENOTCONN);
	assert_int_equal(uls_shutdown(sd, SHUT_RDWR), -ENOTCONN);
	uls_close(sd);
}

static void test_nonblocking_accept_without_a_connection_fails_eagain(void **state)
{
	need_node(state);
	int sd = uls_socket(SOCK_STREAM | SOCK_NONBLOCK);
	struct sockaddr_in a = sin_of(NODE_ADDR, 6901);
	assert_int_equal(uls_bind(sd, &a), 0);
	assert_int_equal(uls_listen(sd, 4), 0);
	assert_int_equal(uls_accept(sd, NULL), -EAGAIN);
	uls_close(sd);
}

/* What a send may queue beyond the flight (stack/sock.h, STK_NOTSENT_FLOOR): against a
 * peer that reads nothing through a small window, the socket takes the window's bytes
 * and STK_NOTSENT_FLOOR more, not its 4 MiB send buffer; and a blocked sender is woken
 * as the peer reads, so every byte arrives in order. */
struct bulk {
	int sd;
	const uint8_t *buf;
	size_t len;
	ssize_t rc;
};

static void *bulk_send(void *arg)
{
	struct bulk *b = arg;
	b->rc = uls_send(b->sd, b->buf, b->len, 0);
	return NULL;
}

/* Non-blocking sends of out[0..len) until 20 rounds 10 ms apart have passed (ACKs of the
 * peer's window come within the pauses) or all went: the bytes the socket took. */
static size_t send_nonblocking(int sd, const uint8_t *out, size_t len)
{
	size_t took = 0;

	for (int round = 0; round < 20 && took < len; round++) {
		ssize_t n = uls_send(sd, out + took, len - took, MSG_DONTWAIT);
		if (n > 0)
			took += (size_t)n;
		else
			assert_int_equal(n, -EAGAIN);
		usleep(10000);
	}
	return took;
}

/* The rest of out, from took, by a blocked sender that only the peer's reading can wake;
 * the peer, which read the first `got` bytes already, reads the rest of the len bytes into
 * in, which must then equal out. */
static void send_rest_blocked(int sd, int peer, const uint8_t *out, uint8_t *in, size_t len,
			      size_t took, size_t got)
{
	struct bulk b = { .sd = sd, .buf = out + took, .len = len - took };
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, bulk_send, &b), 0);
	assert_int_equal(peer_read(peer, in + got, len - got), (ssize_t)(len - got));
	pthread_join(t, NULL);
	assert_int_equal(b.rc, (ssize_t)(len - took));
	assert_memory_equal(in, out, len);
}

static void test_send_queues_no_more_unsent_bytes_than_the_flight_or_the_floor(void **state)
{
	need_node(state);
	struct sockaddr_in la = sin_of(PEER_ADDR, 7002);
	int l, peer, sd = connect_to_kernel_peer(&la, 16384, &l, &peer);
	enum { TOTAL = 4 << 20 };
	static uint8_t out[TOTAL], in[TOTAL];
	for (size_t i = 0; i < sizeof(out); i++)
		out[i] = (uint8_t)(i * 13 + (i >> 12));
	size_t took = send_nonblocking(sd, out, sizeof(out));
	/* The peer's window is tens of KiB (twice SO_RCVBUF at most, plus what its queue
	 * holds); without the bound the socket took its whole 4 MiB buffer. */
	print_message("# queued against a closed window: %zu bytes\n", took);
	assert_true(took > 0);
	assert_true(took <= STK_NOTSENT_FLOOR_BYTES + 512 * 1024);
	send_rest_blocked(sd, peer, out, in, sizeof(out), took, 0);
	uls_close(sd);
	close(peer);
	close(l);
}

/* SO_SNDBUF (stack/sockopt.c) bounds the octets a connection holds written and not yet
 * acknowledged. Against a peer that reads nothing through a small window, non-blocking
 * sends take the cap and what the peer's buffer holds, not STK_NOTSENT_FLOOR and more (the
 * test above, without SO_SNDBUF); the socket is not writable while more than half of the
 * cap is in use (after the peer read a quarter of it) and is once less is (after it read
 * five eighths, the peer's own buffer being far smaller); a blocked sender is woken as the
 * peer reads, and every byte arrives in order. */
static void test_so_sndbuf_bounds_the_unacknowledged_bytes_and_writability_waits_for_half(
	void **state)
{
	need_node(state);
	struct sockaddr_in la = sin_of(PEER_ADDR, 7010);
	int l, peer, sd = connect_to_kernel_peer(&la, 4096, &l, &peer);
	int cap = 131072, v = 0, peer_buf = 0;
	socklen_t vl = sizeof(v);
	assert_int_equal(uls_setsockopt(sd, SOL_SOCKET, SO_SNDBUF, &cap, sizeof(cap)), 0);
	assert_int_equal(uls_getsockopt(sd, SOL_SOCKET, SO_SNDBUF, &v, &vl), 0);
	assert_int_equal(v, 2 * cap);  /* reported doubled, as Linux does */
	vl = sizeof(peer_buf);
	assert_int_equal(getsockopt(peer, SOL_SOCKET, SO_RCVBUF, &peer_buf, &vl), 0);
	enum { TOTAL = 1 << 20 };
	static uint8_t out[TOTAL], in[TOTAL];
	for (size_t i = 0; i < sizeof(out); i++)
		out[i] = (uint8_t)(i * 7 + (i >> 11));
	size_t took = send_nonblocking(sd, out, sizeof(out));
	print_message("# took %zu bytes with SO_SNDBUF %d, the peer's buffer %d\n", took, cap,
		      peer_buf);
	assert_true(took >= (size_t)cap);
	assert_true(took <= (size_t)cap + (size_t)peer_buf);
	int fd = uls_socket_fd(sd, SOCK_CLOEXEC);
	assert_true(fd >= 0);
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	assert_int_equal(poll(&p, 1, 300), 0);  /* the cap is full: not writable */
	size_t got = (size_t)cap / 4;
	assert_int_equal(peer_read(peer, in, got), (ssize_t)got);
	assert_int_equal(poll(&p, 1, 300), 0);  /* three quarters in use */
	assert_int_equal(peer_read(peer, in + got, (size_t)cap * 3 / 8), (ssize_t)cap * 3 / 8);
	got += (size_t)cap * 3 / 8;
	assert_int_equal(poll(&p, 1, 1000), 1);  /* three eighths in use: writable */
	send_rest_blocked(sd, peer, out, in, sizeof(out), took, got);
	assert_int_equal(poll(&p, 1, 1000), 1);  /* all acknowledged: writable again */
	close(fd);
	uls_close(sd);
	close(peer);
	close(l);
}

/* SO_RCVBUF caps the window (patch 0137). The kernel peer writes without blocking until its
 * send buffer is full; what the node took is what the peer wrote less what it still holds
 * (SIOCOUTQ: sent but unacknowledged, and unsent). Then the node reads all of it through
 * the small window, every byte checked: the window opens again as it reads. */
enum { PEER_SNDBUF = 512 * 1024, FILL_MAX = 8 << 20 };

static uint8_t fill_byte(size_t i)
{
	return (uint8_t)(i * 7 + (i >> 10));
}

/* Write the pattern to the kernel socket until it would block: the bytes written. */
static size_t peer_fill_to(int peer, int sndbuf)
{
	static uint8_t chunk[65536];
	size_t off = 0;

	assert_int_equal(setsockopt(peer, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)), 0);
	fcntl(peer, F_SETFL, fcntl(peer, F_GETFL) | O_NONBLOCK);
	for (int idle = 0; idle < 3 && off < FILL_MAX;) {
		for (size_t i = 0; i < sizeof(chunk); i++)
			chunk[i] = fill_byte(off + i);
		ssize_t n = write(peer, chunk, sizeof(chunk));
		if (n > 0) {
			off += (size_t)n;
			idle = 0;
		} else {
			assert_int_equal(errno, EAGAIN);
			idle++;
			usleep(100000);  /* the node's ACKs may open more window meanwhile */
		}
	}
	return off;
}

static size_t peer_fill(int peer)
{
	return peer_fill_to(peer, PEER_SNDBUF);
}

/* What the node took of the peer's written bytes. */
static size_t node_took(int peer, size_t written)
{
	int outq = -1;

	usleep(300000);  /* the node's ACK of what it took, delayed or not */
	assert_int_equal(ioctl(peer, SIOCOUTQ, &outq), 0);
	return written - (size_t)outq;
}

/* The kernel's window probes so far (TcpExt TCPWinProbe of the test's own namespace). */
static long peer_window_probes(void)
{
	char names[4096], values[4096];
	FILE *f = fopen("/proc/net/netstat", "r");
	long v = -1;

	assert_non_null(f);
	while (fgets(names, sizeof(names), f) && fgets(values, sizeof(values), f)) {
		if (strncmp(names, "TcpExt:", 7))
			continue;
		char *sn, *sv, *n = strtok_r(names, " \n", &sn), *x = strtok_r(values, " \n", &sv);
		for (; n && x; n = strtok_r(NULL, " \n", &sn), x = strtok_r(NULL, " \n", &sv))
			if (!strcmp(n, "TCPWinProbe"))
				v = strtol(x, NULL, 10);
	}
	fclose(f);
	assert_true(v >= 0);
	return v;
}

/* Read n bytes of the pattern on the node socket, checking each. The window opens as the
 * node reads (an update at a quarter of it, patch 0137): the peer should not have to probe
 * for it. With lwIP's fixed threshold (min(TCP_WND / 4, 4 * MSS), 256 KiB here) a small
 * window's opening went out only with some other segment, and the peer's probes (its
 * persist timer, 200 ms and more) found it: 42 probes for 1 MiB through the 32 KiB window
 * of the second test below, 0 with the threshold at a quarter. */
static void node_read_pattern(int sd, size_t n)
{
	static uint8_t buf[65536];
	struct timeval tv = { .tv_sec = 10 };
	size_t got = 0;
	long probes = peer_window_probes();

	assert_int_equal(uls_setsockopt(sd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	while (got < n) {
		ssize_t r = uls_recv(sd, buf, sizeof(buf) < n - got ? sizeof(buf) : n - got, 0);
		if (r == -EAGAIN) {  /* a non-blocking socket: wait, bounded by SO_RCVTIMEO */
			assert_int_equal(uls_socket_wait(sd, POLLIN), 0);
			continue;
		}
		assert_true(r > 0);
		for (ssize_t i = 0; i < r; i++)
			if (buf[i] != fill_byte(got + (size_t)i))
				fail_msg("byte %zu differs", got + (size_t)i);
		got += (size_t)r;
	}
	probes = peer_window_probes() - probes;
	print_message("# the peer probed the window %ld times while the node read\n", probes);
	/* 0 seen; a few more allowed for readers that a loaded machine stalls past the peer's
	 * persist timer (200 ms): 10 for 1 MiB, against 42 without the update. */
	assert_true(probes <= 2 + (long)(n / (128 * 1024)));
}

/* A kernel listener on la (the peer namespace). */
static int kernel_listener(const struct sockaddr_in *la, int backlog)
{
	int one = 1, l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	assert_int_equal(bind(l, (const struct sockaddr *)la, sizeof(*la)), 0);
	assert_int_equal(listen(l, backlog), 0);
	return l;
}

/* The connection the kernel listener l accepts. */
static int kernel_accept(int l)
{
	assert_true(wait_fd(l, POLLIN, 5000));
	int peer = accept(l, NULL, NULL);
	assert_true(peer >= 0);
	return peer;
}

/* A node socket with SO_RCVBUF cap connected to a new kernel listener on la (*l), and the
 * kernel's accepted end (*peer). */
static int connect_capped(const struct sockaddr_in *la, int cap, int *l, int *peer)
{
	*l = kernel_listener(la, 4);
	int sd = uls_socket(SOCK_STREAM);
	assert_int_equal(uls_setsockopt(sd, SOL_SOCKET, SO_RCVBUF, &cap, sizeof(cap)), 0);
	assert_int_equal(uls_connect(sd, la), 0);
	*peer = kernel_accept(*l);
	return sd;
}

/* A node listener on port with SO_RCVBUF cap (0: none set), and a connection the kernel
 * opened to it: the accepted socket, *peer the kernel's end. */
static int accept_capped(uint16_t port, int cap, int *lsd, int *peer)
{
	struct sockaddr_in a = sin_of(NODE_ADDR, port);
	*lsd = uls_socket(SOCK_STREAM);
	if (cap)
		assert_int_equal(uls_setsockopt(*lsd, SOL_SOCKET, SO_RCVBUF, &cap, sizeof(cap)), 0);
	assert_int_equal(uls_bind(*lsd, &a), 0);
	assert_int_equal(uls_listen(*lsd, 4), 0);
	int sd = peer_connects(*lsd, port, peer);
	assert_true(sd >= 0);
	return sd;
}

/* The peer fills the node's window; the node took at least one octet and at most `most`
 * (and `least` or more when least > 0), then reads everything, checked. */
static void window_took(int sd, int peer, size_t least, size_t most)
{
	size_t written = peer_fill(peer), took = node_took(peer, written);

	print_message("# peer wrote %zu bytes, the node took %zu\n", written, took);
	assert_true(took > least);
	assert_true(took <= most);
	node_read_pattern(sd, written);
}

static void test_so_rcvbuf_caps_the_window_a_peer_may_fill_and_the_data_still_flows(void **state)
{
	need_node(state);
	struct sockaddr_in la = sin_of(PEER_ADDR, 7003);
	int l, peer, cap = 65536, v = 0;
	socklen_t vl = sizeof(v);
	int sd = connect_capped(&la, cap, &l, &peer);
	assert_int_equal(uls_getsockopt(sd, SOL_SOCKET, SO_RCVBUF, &v, &vl), 0);
	assert_int_equal(v, 2 * cap);  /* reported doubled, as Linux does */
	window_took(sd, peer, 0, (size_t)cap);  /* the default window took ~1 MiB here */
	uls_close(sd);
	close(peer);
	close(l);
}

static void test_an_accepted_connection_takes_its_listeners_so_rcvbuf(void **state)
{
	need_node(state);
	int lsd, peer, cap = 32768, v = 0;
	socklen_t vl = sizeof(v);
	int sd = accept_capped(next_port++, cap, &lsd, &peer);
	assert_int_equal(uls_getsockopt(sd, SOL_SOCKET, SO_RCVBUF, &v, &vl), 0);
	assert_int_equal(v, 2 * cap);
	window_took(sd, peer, 0, (size_t)cap);
	uls_close(sd);
	uls_close(lsd);
	close(peer);
}

/* SO_RCVBUF set while the SYN is out: the SYN announced the default's 65,535 octets, and
 * the peer's SYN,ACK with a window scale then met lwIP's assert that the SYN's window was
 * the cap's (an abort() of the process). The kernel peer's accept queue is held full so
 * that the first SYN is dropped and the connection stays in SYN-SENT for its
 * retransmission (1 s, RFC 6298 section 2.1's initial RTO). The window then starts at what
 * the SYN announced and does not shrink below it (RFC 9293 section 3.8.6). */
static void test_so_rcvbuf_set_while_the_syn_is_out_neither_aborts_nor_shrinks_the_window(void **state)
{
	need_node(state);
	struct sockaddr_in la = sin_of(PEER_ADDR, 7004);
	int l = kernel_listener(&la, 0);
	/* A connection of the kernel's own fills the accept queue (backlog 0: one). */
	int filler = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(filler, (const struct sockaddr *)&la, sizeof(la)), 0);
	assert_true(wait_fd(l, POLLIN, 5000));  /* it is in the queue before our SYN comes */

	int sd = uls_socket(SOCK_STREAM | SOCK_NONBLOCK), cap = 16384, err = -1;
	socklen_t el = sizeof(err);
	assert_int_equal(uls_connect(sd, &la), -EINPROGRESS);
	usleep(100000);  /* the SYN went, and the full queue dropped it */
	assert_int_equal(uls_setsockopt(sd, SOL_SOCKET, SO_RCVBUF, &cap, sizeof(cap)), 0);
	close(kernel_accept(l));  /* room for the retransmitted SYN */
	close(filler);
	int fd = uls_socket_fd(sd, SOCK_CLOEXEC);
	assert_true(fd >= 0);
	assert_true(wait_fd(fd, POLLOUT, 5000));
	assert_int_equal(uls_getsockopt(sd, SOL_SOCKET, SO_ERROR, &err, &el), 0);
	assert_int_equal(err, 0);
	int peer = kernel_accept(l);
	/* 20,000 octets in and read: the window is then the SYN's 65,535 less them, more than
	 * the cap (a window clamped to the cap at the read would take only 16 KiB). */
	static uint8_t first20k[20000];
	for (size_t i = 0; i < sizeof(first20k); i++)
		first20k[i] = fill_byte(i);
	assert_int_equal(write(peer, first20k, sizeof(first20k)), (ssize_t)sizeof(first20k));
	node_read_pattern(sd, sizeof(first20k));
	window_took(sd, peer, (size_t)cap, 65535);  /* not the 4 MiB default either */
	close(fd);
	uls_close(sd);
	close(peer);
	close(l);
}

/* A cap below what an unscaled SYN can announce, set before connect(): the SYN announces
 * the cap (tcp_connect set the default's 65,535 before, and the peer's SYN,ACK then met the
 * assert that the SYN had announced the cap's window). */
static void test_so_rcvbuf_below_64_kib_set_before_connect_is_the_syns_window(void **state)
{
	need_node(state);
	struct sockaddr_in la = sin_of(PEER_ADDR, 7005);
	int l, peer, cap = 16384;
	int sd = connect_capped(&la, cap, &l, &peer);
	window_took(sd, peer, 0, (size_t)cap);
	uls_close(sd);
	close(peer);
	close(l);
}

/* A cap raised on an open connection opens the window at once, and a clean close after
 * everything was read is a FIN: lwIP takes a window below its largest at close for unread
 * data and resets, and the window had stayed at the old cap. */
static void test_a_raised_so_rcvbuf_opens_the_window_and_a_clean_close_is_still_a_fin(void **state)
{
	need_node(state);
	int lsd, peer, cap = 32768, big = 1 << 20;
	int sd = accept_capped(next_port++, cap, &lsd, &peer);
	assert_int_equal(uls_setsockopt(sd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big)), 0);
	window_took(sd, peer, (size_t)cap, (size_t)big);  /* opened past the old cap */
	assert_int_equal(uls_close(sd), 0);
	char c;
	fcntl(peer, F_SETFL, fcntl(peer, F_GETFL) & ~O_NONBLOCK);
	assert_true(wait_fd(peer, POLLIN, 5000));
	assert_int_equal(read(peer, &c, 1), 0);  /* the FIN: end of file, not ECONNRESET */
	uls_close(lsd);
	close(peer);
}

/* A cap lowered on an open connection and raised again: the window, still above the lower
 * cap, opens by the raise only up to the new largest window, never past TCP_WND (4 MiB;
 * an 8 MiB window, announced as 65,535 << 7, would have taken the peer's 8 MiB). */
static void test_a_lowered_then_raised_so_rcvbuf_never_opens_past_the_largest_window(void **state)
{
	need_node(state);
	int lsd, peer, low = 32768, high = 64 << 20;
	int sd = accept_capped(next_port++, 0, &lsd, &peer);
	assert_int_equal(uls_setsockopt(sd, SOL_SOCKET, SO_RCVBUF, &low, sizeof(low)), 0);
	assert_int_equal(uls_setsockopt(sd, SOL_SOCKET, SO_RCVBUF, &high, sizeof(high)), 0);
	size_t written = peer_fill_to(peer, 8 << 20), took = node_took(peer, written);
	print_message("# peer wrote %zu bytes, the node took %zu\n", written, took);
	assert_true(took > (size_t)low);
	assert_true(took <= 4u << 20);
	node_read_pattern(sd, written);
	uls_close(sd);
	uls_close(lsd);
	close(peer);
}

/* A cap lowered below the window before anything arrived, then a close: a FIN. lwIP took a
 * window other than its largest at close for unread data and reset; the window is above
 * the new cap until data arrives, and nothing was left unread. */
static void test_a_close_after_lowering_so_rcvbuf_with_nothing_unread_is_a_fin(void **state)
{
	need_node(state);
	int lsd, peer, low = 32768;
	int sd = accept_capped(next_port++, 0, &lsd, &peer);
	assert_int_equal(uls_setsockopt(sd, SOL_SOCKET, SO_RCVBUF, &low, sizeof(low)), 0);
	assert_int_equal(uls_close(sd), 0);
	char c;
	assert_true(wait_fd(peer, POLLIN, 5000));
	assert_int_equal(read(peer, &c, 1), 0);  /* the FIN: end of file, not ECONNRESET */
	uls_close(lsd);
	close(peer);
}

static double mono_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* TCP_USER_TIMEOUT (lwIP patch 0138, RFC 9293 §3.8.3 (d)): once the peer stops
 * acknowledging, the connection ends when the time set has passed, and the application's
 * next call fails with ETIMEDOUT (tcp(7)), not ECONNRESET. The peer's kernel is cut off by a
 * drop rule on its input, in this test's own namespace (it goes with the process). The
 * receive is bounded by SO_RCVTIMEO: without the option it would give EAGAIN after 10 s
 * (lwIP's own retransmission limit takes minutes). */
static void test_user_timeout_ends_a_connection_the_peer_stopped_acknowledging_with_etimedout(
	void **state)
{
	need_node(state);
	struct fixture_conn p = connection();
	struct timeval tv = { .tv_sec = 10 };
	int ut = 800;
	char out[1000] = { 0 }, in[64];
	ssize_t r;

	assert_int_equal(uls_setsockopt(p.sd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, sizeof(ut)), 0);
	assert_int_equal(uls_setsockopt(p.sd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	assert_int_equal(system("nft add table ip ulsut_blackhole && "
				"nft add chain ip ulsut_blackhole in "
				"'{ type filter hook input priority 0; }' && "
				"nft add rule ip ulsut_blackhole in ip saddr " NODE_ADDR " drop"), 0);
	double t0 = mono_s();
	assert_int_equal(uls_send(p.sd, out, sizeof(out), 0), (ssize_t)sizeof(out));
	for (;;) {  /* blocking, or polled when non-blocking; 10 s at most either way */
		r = uls_recv(p.sd, in, sizeof(in), 0);
		if (r != -EAGAIN || mono_s() - t0 >= 10)
			break;
		usleep(10000);
	}
	double took = mono_s() - t0;
	int rc = system("nft delete table ip ulsut_blackhole");
	assert_int_equal(r, -ETIMEDOUT);
	assert_true(took >= 0.75);   /* not before the time set (less the clock's tick) */
	assert_true(took < 5.0);
	assert_int_equal(rc, 0);
	fixture_done(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_connect_to_a_port_nobody_listens_on_is_refused),
		cmocka_unit_test(test_connect_reaches_a_peer_listener_and_data_flows_both_ways),
		cmocka_unit_test(test_accepted_connection_delivers_a_large_write_whole_and_in_order),
		cmocka_unit_test(test_recv_returns_zero_after_the_peer_closes),
		cmocka_unit_test(test_recv_without_data_and_dontwait_fails_eagain),
		cmocka_unit_test(test_peek_leaves_the_data_for_the_next_recv),
		cmocka_unit_test(test_send_after_shutting_down_the_sending_side_fails_epipe_and_peer_sees_fin),
		cmocka_unit_test(test_close_with_unread_data_resets_the_connection),
		cmocka_unit_test(test_peer_reset_makes_recv_fail_econnreset),
		cmocka_unit_test(test_bind_to_a_port_another_socket_holds_fails_eaddrinuse),
		cmocka_unit_test(test_accept_on_a_socket_that_does_not_listen_fails_einval),
		cmocka_unit_test(test_send_and_recv_on_an_unconnected_socket_fail_enotconn),
		cmocka_unit_test(test_nonblocking_accept_without_a_connection_fails_eagain),
		cmocka_unit_test(test_send_queues_no_more_unsent_bytes_than_the_flight_or_the_floor),
		cmocka_unit_test(test_so_sndbuf_bounds_the_unacknowledged_bytes_and_writability_waits_for_half),
		cmocka_unit_test(test_so_rcvbuf_caps_the_window_a_peer_may_fill_and_the_data_still_flows),
		cmocka_unit_test(test_an_accepted_connection_takes_its_listeners_so_rcvbuf),
		cmocka_unit_test(test_so_rcvbuf_set_while_the_syn_is_out_neither_aborts_nor_shrinks_the_window),
		cmocka_unit_test(test_so_rcvbuf_below_64_kib_set_before_connect_is_the_syns_window),
		cmocka_unit_test(test_a_raised_so_rcvbuf_opens_the_window_and_a_clean_close_is_still_a_fin),
		cmocka_unit_test(test_a_lowered_then_raised_so_rcvbuf_never_opens_past_the_largest_window),
		cmocka_unit_test(test_a_close_after_lowering_so_rcvbuf_with_nothing_unread_is_a_fin),
		cmocka_unit_test(test_user_timeout_ends_a_connection_the_peer_stopped_acknowledging_with_etimedout),
	};
	return NODE_FIXTURE_RUN(tests);
}
