/* stack/mirror.c: the kernel descriptor whose poll state is a socket's (uls_socket_fd),
 * against the kernel's TCP as the peer (tests/unit/node_fixture.h). Linux's tcp_poll is
 * the reference for what each state reports. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>

#include <cmocka.h>

#include "node_fixture.h"
#include "counter_fixture.h"

static uint16_t next_port = 7000;

static void need_node(void)
{
	if (!node_up)
		skip();
}

/* poll()'s answer for fd within ms (0 if nothing). */
static short events_of(int fd, short want, int ms)
{
	struct pollfd p = { .fd = fd, .events = want };
	return poll(&p, 1, ms) == 1 ? p.revents : 0;
}

/* Wait until fd reports all of want, at most 5 s. */
static bool becomes(int fd, short want)
{
	for (int i = 0; i < 500; i++) {
		if ((events_of(fd, want, 10) & want) == want)
			return true;
	}
	return false;
}

/* An accepted connection with its readiness descriptor. */
static struct fixture_conn connection(void)
{
	struct fixture_conn c;
	assert_int_equal(fixture_connect(next_port++, &c), 0);
	c.fd = uls_socket_fd(c.sd, SOCK_CLOEXEC);
	assert_true(c.fd >= 0);
	return c;
}

static void test_new_socket_polls_writable_and_not_readable(void **state)
{
	(void)state;
	need_node();
	int sd = uls_socket(SOCK_STREAM), fd = uls_socket_fd(sd, 0);
	assert_true(fd >= 0);
	assert_int_equal(events_of(fd, POLLIN | POLLOUT, 100), POLLOUT);
	close(fd);
	uls_close(sd);
}

static void test_socket_fd_refuses_flags_other_than_cloexec_and_unknown_sockets(void **state)
{
	(void)state;
	need_node();
	int sd = uls_socket(SOCK_STREAM);
	assert_int_equal(uls_socket_fd(sd, SOCK_NONBLOCK), -EINVAL);
	assert_int_equal(uls_socket_fd(-1, 0), -EBADF);
	assert_int_equal(uls_socket_wait(sd, POLLIN | POLLOUT), -EINVAL);
	uls_close(sd);
}

static void test_listener_becomes_readable_when_a_connection_waits(void **state)
{
	(void)state;
	need_node();
	uint16_t port = next_port++;
	int lsd = node_listener(port), fd = uls_socket_fd(lsd, 0), peer = peer_socket();
	struct sockaddr_in a = sin_of(NODE_ADDR, port);
	assert_int_equal(events_of(fd, POLLIN, 100), 0);
	connect(peer, (struct sockaddr *)&a, sizeof(a));
	assert_true(becomes(fd, POLLIN));
	int sd = uls_accept(lsd, NULL);
	assert_true(sd >= 0);
	assert_true(!(events_of(fd, POLLIN, 100) & POLLIN));  /* the queue is empty again */
	uls_close(sd);
	close(fd);
	uls_close(lsd);
	close(peer);
}

static void test_becomes_readable_when_data_arrives_and_not_once_it_is_read(void **state)
{
	(void)state;
	need_node();
	struct fixture_conn c = connection();
	char buf[16];
	assert_int_equal(events_of(c.fd, POLLIN, 100), 0);
	assert_int_equal(write(c.peer, "data", 4), 4);
	assert_true(becomes(c.fd, POLLIN));
	assert_int_equal(uls_recv(c.sd, buf, sizeof(buf), 0), 4);
	assert_int_equal(events_of(c.fd, POLLIN, 100), 0);
	assert_true(events_of(c.fd, POLLOUT, 0) & POLLOUT);
	fixture_done(&c);
}

static void test_wait_for_input_returns_once_data_is_there(void **state)
{
	(void)state;
	need_node();
	struct fixture_conn c = connection();
	assert_int_equal(write(c.peer, "x", 1), 1);
	assert_int_equal(uls_socket_wait(c.sd, POLLIN), 0);
	assert_true(events_of(c.fd, POLLIN, 0) & POLLIN);
	fixture_done(&c);
}

static void test_peer_fin_reports_rdhup_and_readable_without_hup(void **state)
{
	(void)state;
	need_node();
	struct fixture_conn c = connection();
	shutdown(c.peer, SHUT_WR);
	assert_true(becomes(c.fd, POLLIN | POLLRDHUP));
	assert_false(events_of(c.fd, POLLIN, 0) & POLLHUP);  /* we may still send */
	fixture_done(&c);
}

static void test_both_directions_closed_reports_hup(void **state)
{
	(void)state;
	need_node();
	struct fixture_conn c = connection();
	shutdown(c.peer, SHUT_WR);
	assert_true(becomes(c.fd, POLLRDHUP));
	assert_int_equal(uls_shutdown(c.sd, SHUT_WR), 0);
	assert_true(becomes(c.fd, POLLHUP));
	fixture_done(&c);
}

static void test_peer_reset_reports_an_error(void **state)
{
	(void)state;
	need_node();
	struct fixture_conn c = connection();
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	setsockopt(c.peer, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(c.peer);
	c.peer = -1;
	assert_true(becomes(c.fd, POLLERR));
	assert_true(events_of(c.fd, POLLIN, 0) & POLLHUP);
	close(c.fd);
	uls_close(c.sd);
	uls_close(c.lsd);
}

static void test_full_send_buffer_is_not_writable_until_the_peer_reads(void **state)
{
	(void)state;
	need_node();
	struct fixture_conn c = connection();
	static char chunk[65536];
	int rcvbuf = 4096;
	ssize_t n;
	size_t queued = 0;
	setsockopt(c.peer, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	/* Fill what the peer takes and our send buffer (bounded: 64 MiB). */
	for (int i = 0; i < 1024; i++) {
		n = uls_send(c.sd, chunk, sizeof(chunk), MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n == -EAGAIN) {
			usleep(20000);  /* the peer's window may still open once */
			n = uls_send(c.sd, chunk, sizeof(chunk), MSG_DONTWAIT | MSG_NOSIGNAL);
			if (n == -EAGAIN)
				break;
		}
		assert_true(n > 0);
		queued += (size_t)n;
	}
	assert_int_equal(n, -EAGAIN);
	assert_false(events_of(c.fd, POLLOUT, 100) & POLLOUT);
	/* The peer reads it all: the socket is writable again. */
	static char sink[65536];
	size_t got = 0;
	for (int i = 0; got < queued && i < 100000; i++) {
		if (!wait_fd(c.peer, POLLIN, 5000))
			break;
		ssize_t r = read(c.peer, sink, sizeof(sink));
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	assert_int_equal(got, queued);
	assert_true(becomes(c.fd, POLLOUT));
	fixture_done(&c);
}

/* --- the shim's blocking calls: wait (uls_socket_drive), then the operation ----------- */

static void *write_later(void *arg)
{
	int *fd = arg;

	usleep(30000);
	assert_int_equal(write(*fd, "d", 1), 1);
	return NULL;
}

/* Data that arrives while the caller drives and that its next call takes never reaches
 * the mirror: no token written and taken back (two system calls per message). The stack
 * thread may still be on the device when the byte comes (a loaded machine), and then
 * it, not the caller, takes it and writes a token: of 20 messages, at least 5 must pass
 * without one (with every state change mirrored at once, none does). */
static void test_data_taken_by_the_call_after_a_driven_wait_writes_no_token(void **state)
{
	(void)state;
	need_node();
	struct fixture_conn c = connection();
	sigset_t mask;
	char buf[16];

	pthread_sigmask(SIG_SETMASK, NULL, &mask);
	int without = 0;
	for (int i = 0; i < 20; i++) {
		pthread_t th;
		uint64_t before = counter("mirror_tokens_written");
		assert_int_equal(pthread_create(&th, NULL, write_later, &c.peer), 0);
		assert_int_equal(uls_socket_drive(c.sd, POLLIN, &mask), 0);
		pthread_join(th, NULL);
		assert_int_equal(uls_recv(c.sd, buf, sizeof(buf), MSG_DONTWAIT), 1);
		without += counter("mirror_tokens_written") == before;
	}
	assert_true(without >= 5);
	assert_int_equal(events_of(c.fd, POLLIN, 50), 0);
	fixture_done(&c);
}

/* Should the operation not follow (a handler left the call with siglongjmp), the mirror
 * still comes in line: the next round pays what the wait left owing. */
static void test_mirror_comes_in_line_when_no_call_follows_a_driven_wait(void **state)
{
	(void)state;
	need_node();
	struct fixture_conn c = connection();
	sigset_t mask;
	pthread_t th;
	char buf[16];

	pthread_sigmask(SIG_SETMASK, NULL, &mask);
	uint64_t paid = counter("mirror_debts_paid_by_a_round");
	assert_int_equal(pthread_create(&th, NULL, write_later, &c.peer), 0);
	assert_int_equal(uls_socket_drive(c.sd, POLLIN, &mask), 0);
	pthread_join(th, NULL);
	assert_true(becomes(c.fd, POLLIN));
	assert_int_equal(counter("mirror_debts_paid_by_a_round") - paid, 1);
	assert_int_equal(uls_recv(c.sd, buf, sizeof(buf), MSG_DONTWAIT), 1);
	assert_int_equal(events_of(c.fd, POLLIN, 50), 0);
	fixture_done(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_new_socket_polls_writable_and_not_readable),
		cmocka_unit_test(test_socket_fd_refuses_flags_other_than_cloexec_and_unknown_sockets),
		cmocka_unit_test(test_listener_becomes_readable_when_a_connection_waits),
		cmocka_unit_test(test_becomes_readable_when_data_arrives_and_not_once_it_is_read),
		cmocka_unit_test(test_wait_for_input_returns_once_data_is_there),
		cmocka_unit_test(test_peer_fin_reports_rdhup_and_readable_without_hup),
		cmocka_unit_test(test_both_directions_closed_reports_hup),
		cmocka_unit_test(test_peer_reset_reports_an_error),
		cmocka_unit_test(test_full_send_buffer_is_not_writable_until_the_peer_reads),
		cmocka_unit_test(test_data_taken_by_the_call_after_a_driven_wait_writes_no_token),
		cmocka_unit_test(test_mirror_comes_in_line_when_no_call_follows_a_driven_wait),
	};
	return NODE_FIXTURE_RUN(tests);
}
