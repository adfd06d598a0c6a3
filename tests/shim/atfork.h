/* fork handlers of a program (or of a library it loads) that use sockets: shared by
 * atfork.c and atforkhook.c (tests/shim). Each handler sends a UDP datagram, changes the
 * socket's events in an epoll instance and duplicates and closes it, the calls that take
 * the shim's locks (libuls's core lock, user-level epoll's, the table's). The state is
 * set by the program once it has the sockets; until then the handlers do nothing. */
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

struct atfork_state {
	int u, ep;                 /* -1: not set yet */
	struct sockaddr_in peer;
	int prepared, parented, childed;
	int failed;                /* bits: 1 sendto, 2 epoll_ctl, 4 dup and close */
};

static struct atfork_state *atfork_st;

static void atfork_ops(int *count)
{
	struct atfork_state *s = atfork_st;

	if (!s || s->u < 0)
		return;
	(*count)++;
	if (sendto(s->u, "x", 1, 0, (struct sockaddr *)&s->peer, sizeof(s->peer)) != 1)
		s->failed |= 1;
	struct epoll_event ev = { .events = EPOLLOUT | (*count & 1 ? EPOLLIN : 0) };
	if (epoll_ctl(s->ep, EPOLL_CTL_MOD, s->u, &ev) < 0)
		s->failed |= 2;
	int d = dup(s->u);
	if (d < 0 || close(d) < 0)
		s->failed |= 4;
}

static void atfork_prepare(void)
{
	if (atfork_st)
		atfork_ops(&atfork_st->prepared);
}

static void atfork_parent(void)
{
	if (atfork_st)
		atfork_ops(&atfork_st->parented);
}

static void atfork_child(void)
{
	if (atfork_st)
		atfork_ops(&atfork_st->childed);
}
