/* ulsd's control thread (server/ctl.c) over a real control socket, as processes reach
 * it: srv__ctl_run runs in a thread of its own, with the rest of ulsd as it is and a fake
 * TAP (server_fixture.c). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <netinet/in.h>

#include "netif/ctl/ctl.h"
#include "netif/dev.h"
#include "netif/ring.h"
#include "netif/tap.h"
#include "server/internal.h"
#include "server_fixture.h"

/* ---- ctl.c: over a control socket, as processes reach it ------------------------------ */

static pthread_t ctl_thread;
static int ctl_listen = -1;
static struct sockaddr_un ctl_addr;

static void *ctl_main(void *arg)
{
	(void)arg;
	srv__ctl_run(&srv, ctl_listen);
	return NULL;
}

static int ctl_setup(void **state)
{
	if (setup(state) < 0)
		return -1;
	ctl_listen = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	memset(&ctl_addr, 0, sizeof(ctl_addr));
	ctl_addr.sun_family = AF_UNIX;
	/* Abstract: nothing left on disk. */
	snprintf(ctl_addr.sun_path + 1, sizeof(ctl_addr.sun_path) - 1, "uls-test-server-%d",
		 (int)getpid());
	if (bind(ctl_listen, (struct sockaddr *)&ctl_addr, sizeof(ctl_addr)) < 0 ||
	    listen(ctl_listen, 16) < 0)
		return -1;
	return pthread_create(&ctl_thread, NULL, ctl_main, NULL) == 0 ? 0 : -1;
}

static int ctl_connect(void)
{
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&ctl_addr, sizeof(ctl_addr)), 0);
	return fd;
}

static int ctl_teardown(void **state)
{
	pthread_mutex_lock(&srv.lock);
	srv.stop = true;
	pthread_mutex_unlock(&srv.lock);
	close(ctl_connect());  /* wakes its wait */
	pthread_join(ctl_thread, NULL);
	close(ctl_listen);
	return teardown(state);
}

/* One request, its reply (descriptors that come with it are closed, and counted). */
static struct ctl_msg ask(int fd, const struct ctl_msg *m, int *nfds)
{
	struct ctl_msg r;
	char cbuf[CMSG_SPACE(sizeof(int) * CTL_MAX_FDS)];
	struct iovec iov = { &r, sizeof(r) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	struct pollfd p = { .fd = fd, .events = POLLIN };

	assert_int_equal(send(fd, m, sizeof(*m), 0), sizeof(*m));
	assert_int_equal(poll(&p, 1, 5000), 1);
	assert_int_equal(recvmsg(fd, &mh, MSG_CMSG_CLOEXEC), sizeof(r));
	int n = 0;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (int i = 0; i < k; i++) {
			int got;
			memcpy(&got, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			close(got);
		}
		n += k;
	}
	if (nfds)
		*nfds = n;
	return r;
}

static uint64_t counter(enum srv_counter c)
{
	pthread_mutex_lock(&srv.lock);
	uint64_t v = srv.ctr.v[c];
	pthread_mutex_unlock(&srv.lock);
	return v;
}

static struct ctl_msg msg(enum ctl_type type, uint8_t proto, uint16_t lport)
{
	struct ctl_msg m;
	ctl_init(&m, type, 7);
	m.proto = proto;
	m.lport = lport;
	if (type != CTL_HELLO && type != CTL_STATS)
		m.family = AF_INET;  /* version 3: every port and tuple message has one */
	return m;
}

static int hello(void)
{
	int fd = ctl_connect(), nfds = 0;
	struct ctl_msg m = msg(CTL_HELLO, 0, 0);
	struct ctl_msg r = ask(fd, &m, &nfds);
	assert_int_equal(r.status, 0);
	assert_int_equal(nfds, 3);
	return fd;
}

static void test_ctl_answers_hello_with_the_node_and_the_relay_rings(void **state)
{
	(void)state;
	int fd = ctl_connect(), nfds = 0;
	struct ctl_msg m = msg(CTL_HELLO, 0, 0);
	struct ctl_msg r = ask(fd, &m, &nfds);
	assert_int_equal(r.type, CTL_HELLO);
	assert_int_equal(r.seq, 7);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.u.hello.addr, NODE_IP);
	assert_int_equal(r.u.hello.mtu, 1500);
	assert_int_equal(r.u.hello.prefix_len, 24);
	assert_memory_equal(r.u.hello.mac, node_mac, 6);
	assert_int_equal(r.u.hello.datapath, CTL_DP_RELAY);
	assert_int_equal(nfds, 3);  /* ring memory, two eventfds */
	assert_int_equal(counter(SRV_LEASES_RELAY), 1);
	close(fd);
}

/* HELLO may ask for the connection table (CTL_HELLO_F_CONNTAB): it comes as the reply's
 * fourth descriptor, the reply keeps the flag, and a CONNTAB after it is refused as the
 * second request for one. Without the flag: three descriptors, no flag, CONNTAB gives it. */
static void test_ctl_sends_the_connection_table_with_hello_when_asked(void **state)
{
	(void)state;
	int fd = ctl_connect(), nfds = 0;
	struct ctl_msg m = msg(CTL_HELLO, 0, 0);
	m.u.hello.flags = CTL_HELLO_F_CONNTAB;
	struct ctl_msg r = ask(fd, &m, &nfds);
	assert_int_equal(r.status, 0);
	assert_true(r.u.hello.flags & CTL_HELLO_F_CONNTAB);
	assert_int_equal(nfds, 4);  /* ring memory, two eventfds, the table */
	assert_int_equal(counter(SRV_CONNTABS_GIVEN), 1);
	struct ctl_msg t = msg(CTL_CONNTAB, 0, 0);
	t.family = 0;
	assert_int_equal(ask(fd, &t, &nfds).status, -EALREADY);
	assert_int_equal(nfds, 0);
	close(fd);

	fd = hello();  /* no flag */
	assert_int_equal(counter(SRV_CONNTABS_GIVEN), 1);
	r = ask(fd, &t, &nfds);
	assert_int_equal(r.status, 0);
	assert_int_equal(nfds, 1);
	assert_int_equal(counter(SRV_CONNTABS_GIVEN), 2);
	close(fd);
}

static void test_ctl_refuses_any_request_before_hello(void **state)
{
	(void)state;
	int fd = ctl_connect();
	struct ctl_msg m = msg(CTL_BIND, IPPROTO_TCP, 5001);
	assert_int_equal(ask(fd, &m, NULL).status, -EPROTO);
	assert_int_equal(counter(SRV_CTL_OUT_OF_ORDER), 1);
	assert_int_equal(counter(SRV_LEASES_OPENED), 0);
	close(fd);
}

static void test_ctl_refuses_a_second_hello(void **state)
{
	(void)state;
	int fd = hello();
	struct ctl_msg m = msg(CTL_HELLO, 0, 0);
	assert_int_equal(ask(fd, &m, NULL).status, -EPROTO);
	assert_int_equal(counter(SRV_LEASES_OPENED), 1);
	close(fd);
}

static void test_ctl_refuses_a_malformed_message_and_counts_why(void **state)
{
	(void)state;
	int fd = hello();
	struct ctl_msg m = msg(CTL_BIND, IPPROTO_TCP, 5001);
	m.magic ^= 1;
	struct ctl_msg r = ask(fd, &m, NULL);
	assert_int_equal(r.type, CTL_END);
	assert_int_equal(r.status, -EBADMSG);
	assert_int_equal(counter(SRV_CTL_REFUSED), 1);
	pthread_mutex_lock(&srv.lock);
	assert_int_equal(srv.ctr.ctl_errors[CTL_BAD_MAGIC - CTL_ERROR_BASE], 1);
	pthread_mutex_unlock(&srv.lock);
	close(fd);
}

/* ulsd's replies go out through these (they take the place of libc's in this program):
 * each counts the replies without descriptors sent while the state lock was held. */
static unsigned replies_sent, plain_replies_under_lock;

static bool lock_held_elsewhere_or_here(void)
{
	if (pthread_mutex_trylock(&srv.lock) != 0)
		return true;
	pthread_mutex_unlock(&srv.lock);
	return false;
}

ssize_t sendmsg(int fd, const struct msghdr *mh, int flags)
{
	__atomic_add_fetch(&replies_sent, 1, __ATOMIC_RELAXED);
	if (!mh->msg_controllen && lock_held_elsewhere_or_here())
		__atomic_add_fetch(&plain_replies_under_lock, 1, __ATOMIC_RELAXED);
	return syscall(SYS_sendmsg, fd, mh, flags);
}

int sendmmsg(int fd, struct mmsghdr *mm, unsigned n, int flags)
{
	__atomic_add_fetch(&replies_sent, 1, __ATOMIC_RELAXED);
	if (lock_held_elsewhere_or_here())
		__atomic_add_fetch(&plain_replies_under_lock, 1, __ATOMIC_RELAXED);
	return (int)syscall(SYS_sendmmsg, fd, mm, n, flags);
}

/* A reply is a system call on a socket a process may have let fill up: the control thread
 * makes it after releasing the state lock, so the demux thread never waits for it. Only
 * an answer passing descriptors (HELLO's rings) goes out under the lock. */
static void test_ctl_replies_after_releasing_the_state_lock(void **state)
{
	(void)state;
	int a = hello();
	struct ctl_msg m = msg(CTL_BIND, IPPROTO_TCP, 5001);
	struct ctl_msg bad = msg(CTL_LISTEN, IPPROTO_TCP, 5002);
	__atomic_store_n(&replies_sent, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&plain_replies_under_lock, 0, __ATOMIC_RELAXED);
	assert_int_equal(ask(a, &m, NULL).status, 0);
	assert_int_equal(ask(a, &bad, NULL).status, -EPERM);
	assert_int_equal(__atomic_load_n(&replies_sent, __ATOMIC_RELAXED), 2);
	assert_int_equal(__atomic_load_n(&plain_replies_under_lock, __ATOMIC_RELAXED), 0);
	close(a);
}

static void test_ctl_refuses_a_bind_of_a_port_another_process_holds(void **state)
{
	(void)state;
	int a = hello(), b = hello();
	struct ctl_msg m = msg(CTL_BIND, IPPROTO_TCP, 5001);
	struct ctl_msg r = ask(a, &m, NULL);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.lport, 5001);
	assert_int_equal(ask(b, &m, NULL).status, -EADDRINUSE);
	close(a);
	close(b);
}

static void test_ctl_refuses_a_listen_on_a_port_the_process_does_not_hold(void **state)
{
	(void)state;
	int a = hello(), b = hello();
	struct ctl_msg bind = msg(CTL_BIND, IPPROTO_TCP, 5001);
	struct ctl_msg listen = msg(CTL_LISTEN, IPPROTO_TCP, 5001);
	assert_int_equal(ask(a, &bind, NULL).status, 0);
	assert_int_equal(ask(b, &listen, NULL).status, -EPERM);
	assert_int_equal(counter(SRV_CTL_DENIED), 1);
	assert_int_equal(ask(a, &listen, NULL).status, 0);
	close(a);
	close(b);
}

static void test_ctl_answers_a_release_of_a_connection_the_process_does_not_hold(void **state)
{
	(void)state;
	int a = hello();
	struct ctl_msg rel = msg(CTL_RELEASE, IPPROTO_TCP, 5001);
	ctl_set_rip4(&rel, PEER_IP);
	rel.rport = 80;
	assert_int_equal(ask(a, &rel, NULL).status, -ENOENT);
	assert_int_equal(counter(SRV_CTL_DENIED), 1);
	close(a);
}

static void test_ctl_frees_a_process_ports_when_its_control_connection_closes(void **state)
{
	(void)state;
	int a = hello(), b = hello();
	struct ctl_msg m = msg(CTL_BIND, IPPROTO_TCP, 5001);
	assert_int_equal(ask(a, &m, NULL).status, 0);
	close(a);  /* the process died */
	for (int i = 0; i < 500 && counter(SRV_LEASES_CLOSED) == 0; i++)
		nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
	assert_int_equal(counter(SRV_LEASES_CLOSED), 1);
	assert_int_equal(ask(b, &m, NULL).status, 0);
	close(b);
}

static void test_ctl_connect_installs_the_tuple_for_the_process(void **state)
{
	(void)state;
	int a = hello();
	struct ctl_msg m = msg(CTL_CONNECT, IPPROTO_TCP, 0);
	ctl_set_rip4(&m, PEER_IP);
	m.rport = 80;
	struct ctl_msg r = ask(a, &m, NULL);
	assert_int_equal(r.status, 0);
	assert_true(r.lport >= SRV_EPHEMERAL_LO && r.lport <= SRV_EPHEMERAL_HI);
	pthread_mutex_lock(&srv.lock);
	assert_int_equal(owner_of(r.lport, 80), 1);
	pthread_mutex_unlock(&srv.lock);
	close(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define C(f) cmocka_unit_test_setup_teardown(f, ctl_setup, ctl_teardown)
		C(test_ctl_answers_hello_with_the_node_and_the_relay_rings),
		C(test_ctl_sends_the_connection_table_with_hello_when_asked),
		C(test_ctl_refuses_any_request_before_hello),
		C(test_ctl_refuses_a_second_hello),
		C(test_ctl_refuses_a_malformed_message_and_counts_why),
		C(test_ctl_replies_after_releasing_the_state_lock),
		C(test_ctl_refuses_a_bind_of_a_port_another_process_holds),
		C(test_ctl_refuses_a_listen_on_a_port_the_process_does_not_hold),
		C(test_ctl_answers_a_release_of_a_connection_the_process_does_not_hold),
		C(test_ctl_frees_a_process_ports_when_its_control_connection_closes),
		C(test_ctl_connect_installs_the_tuple_for_the_process),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
