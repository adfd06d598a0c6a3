/* Ready lists for the shim's user-level epoll (issue 14).
 *
 * A user-level epoll instance (apps/preload/uepoll.c) asked the state of every socket of
 * its set on each wait: O(sockets), and sets over 1,024 sockets went back to the
 * mirrors. Here each instance has a ready list, as Linux's eventpoll has (fs/eventpoll.c:
 * ep_poll_callback puts an item on its instance's rdllist when the file's wait queue is
 * woken with a key the item asks for). A registration (struct uls_epi) hangs on its
 * socket; a readiness change of the socket (stk__sock_signal_ev, with the events it may
 * have made true: its key) queues every registration of the socket that asks for one of
 * them, and a wait (uls_rl_collect) looks only at the queued ones: O(ready sockets).
 *
 * Semantics are Linux's: a queued registration is reported when its socket is ready for
 * it at the look, and dropped from the list otherwise; a level-triggered one goes back to
 * the tail after it is reported (so it is asked again, round-robin over the ready ones);
 * an edge-triggered one leaves the list, and comes back only with a new event of the
 * socket in a direction it asks for (a write-space event does not report an EPOLLIN-only
 * registration again); a one-shot one is disarmed once reported until uls_epi_mod. A new
 * or modified registration is queued at once, so that a socket already ready is reported
 * (ep_insert and ep_modify poll the file). Everything here runs under the core lock.
 *
 * epoll_ctl queues no frame and arms no timer: add, modify and delete leave the core lock
 * without the stack's leave (stk__unlock_raw), which would flush the transmit queue or
 * count against the event loop's round of sends (uls_tx_batch). redis-benchmark, under
 * ulsrun, deletes and adds a registration twice per request between its sends; each of
 * those leaves used up one send of the round's batch, and after a third of the round
 * every send was a system call of its own (0.92 io_uring_enter per request, against 0.08
 * for redis-server, which keeps its registrations). The lazy count of the socket
 * (uls_socket_watch) changes in the same hold (ULS_EPI_LAZY, uls_epi_del's unlazy): one
 * core lock per epoll_ctl instead of two or three.
 */
#include "sock.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>

#include "uls.h"

struct uls_rl {
	struct uls_epi *head, *tail;   /* the ready list (FIFO) */
	struct uls_epi *all;           /* every registration of the instance */
};

struct uls_epi {
	struct uls_rl *rl;
	struct stk_sock *s;            /* NULL once the socket is gone (stk__epi_detach) */
	struct uls_epi *snext;         /* the socket's registrations */
	struct uls_epi *rnext, *rprev; /* the ready list, while queued */
	struct uls_epi *anext, *aprev; /* the instance's registrations */
	void *cookie;
	short events;                  /* POLLIN, POLLOUT, POLLRDHUP asked; POLLERR, POLLHUP added */
	unsigned flags;                /* ULS_EPI_ET, ULS_EPI_ONESHOT */
	bool queued, disarmed;
};

#define ALWAYS (POLLERR | POLLHUP)

/* The lock's end for calls that queue no frame and arm no timer (see above). */
static void unlock_quiet(void)
{
	stk__count(STK_CNT_UEPOLL_CTL_QUIET);
	stk__unlock_raw();
}

/* uls_socket_watch(sd, delta, 0) inside a hold of the core lock: the user-level sets
 * holding s, and its mirror brought in line (no readable token while lazy). */
static void lazy_add(struct stk_sock *s, int delta)
{
	s->lazy = delta < 0 && s->lazy < (unsigned)-delta ? 0 : s->lazy + (unsigned)delta;
	if (!s->closed)
		stk__mirror_sync(s);
}

static void enqueue(struct uls_epi *e)
{
	struct uls_rl *rl = e->rl;

	if (e->queued)
		return;
	e->queued = true;
	e->rnext = NULL;
	e->rprev = rl->tail;
	if (rl->tail)
		rl->tail->rnext = e;
	else
		rl->head = e;
	rl->tail = e;
}

static void dequeue(struct uls_epi *e)
{
	struct uls_rl *rl = e->rl;

	if (!e->queued)
		return;
	if (e->rprev)
		e->rprev->rnext = e->rnext;
	else
		rl->head = e->rnext;
	if (e->rnext)
		e->rnext->rprev = e->rprev;
	else
		rl->tail = e->rprev;
	e->rnext = e->rprev = NULL;
	e->queued = false;
}

/* s had an event that may have made key's readiness true (core lock held): its
 * registrations that ask for one of them go onto their ready lists, and a driver waiting
 * for such a set looks again (stk__ready_note). */
void stk__epi_signal(struct stk_sock *s, short key)
{
	bool queued = false;

	for (struct uls_epi *e = s->epis; e; e = e->snext) {
		if (e->disarmed || e->queued || !(key & (e->events | ALWAYS)))
			continue;
		enqueue(e);
		queued = true;
	}
	if (queued)
		stk__ready_note();
	else if (s->epis)
		stk__count(STK_CNT_UEPOLL_UNQUEUED);
}

/* s is being freed: its registrations stay (the shim deletes them) but point nowhere. */
void stk__epi_detach(struct stk_sock *s)
{
	struct uls_epi *e = s->epis;

	while (e) {
		struct uls_epi *next = e->snext;
		dequeue(e);
		e->s = NULL;
		e->snext = NULL;
		e = next;
	}
	s->epis = NULL;
}

struct uls_rl *uls_rl_new(void)
{
	return calloc(1, sizeof(struct uls_rl));
}

static void unlink_sock(struct uls_epi *e)
{
	if (!e->s)
		return;
	for (struct uls_epi **p = &e->s->epis; *p; p = &(*p)->snext) {
		if (*p == e) {
			*p = e->snext;
			break;
		}
	}
	e->s = NULL;
}

static void epi_free(struct uls_epi *e)
{
	struct uls_rl *rl = e->rl;

	dequeue(e);
	unlink_sock(e);
	if (e->aprev)
		e->aprev->anext = e->anext;
	else
		rl->all = e->anext;
	if (e->anext)
		e->anext->aprev = e->aprev;
	free(e);
}

void uls_rl_free(struct uls_rl *rl)
{
	if (!rl)
		return;
	stk__lock();
	while (rl->all)
		epi_free(rl->all);
	stk__unlock();
	free(rl);
}

int uls_epi_add(struct uls_rl *rl, int sd, short events, unsigned flags, void *cookie,
		struct uls_epi **out)
{
	struct uls_epi *e = calloc(1, sizeof(*e));

	if (!e)
		return -ENOMEM;
	stk__lock();
	struct stk_sock *s = stk__sock_at(sd);
	if (!s || s->closed) {
		unlock_quiet();
		free(e);
		return -EBADF;
	}
	*e = (struct uls_epi){ .rl = rl, .s = s, .cookie = cookie,
			       .events = (short)(events | ALWAYS),
			       .flags = flags & ~ULS_EPI_LAZY };
	if (flags & ULS_EPI_LAZY)
		lazy_add(s, 1);
	e->snext = s->epis;
	s->epis = e;
	e->anext = rl->all;
	if (rl->all)
		rl->all->aprev = e;
	rl->all = e;
	enqueue(e);  /* ep_insert: reported at once if the socket is ready */
	stk__ready_note();
	unlock_quiet();
	*out = e;
	return 0;
}

int uls_epi_mod(struct uls_epi *e, short events, unsigned flags)
{
	stk__lock();
	e->events = (short)(events | ALWAYS);
	e->flags = flags & ~ULS_EPI_LAZY;
	e->disarmed = false;
	if (e->s)
		enqueue(e);  /* ep_modify: the socket is asked again */
	stk__ready_note();
	unlock_quiet();
	return 0;
}

void uls_epi_del(struct uls_epi *e, int unlazy)
{
	if (!e)
		return;
	stk__lock();
	if (unlazy && e->s)
		lazy_add(e->s, -1);
	epi_free(e);
	unlock_quiet();
}

void uls_rl_requeue(struct uls_rl *rl)
{
	stk__lock();
	for (struct uls_epi *e = rl->all; e; e = e->anext)
		if (e->s && !e->disarmed)
			enqueue(e);
	stk__unlock();
}

int uls_rl_collect(struct uls_rl *rl, struct uls_rlev *out, unsigned max, unsigned *ready_gen)
{
	unsigned n = 0;

	stk__lock();
	stk__drive_entry();  /* frames nobody waits for: taken now, so the answer sees them */
	/* Only those queued before the look: a level-triggered one reported goes back to the
	 * tail and is not asked twice in one look. */
	struct uls_epi *last = rl->tail;
	while (n < max && rl->head) {
		struct uls_epi *e = rl->head;
		bool end = e == last;
		dequeue(e);
		struct stk_sock *s = e->s;
		if (s && !s->closed && !e->disarmed) {
			short r = (short)(stk__sock_revents(s) & e->events);
			if (r) {
				out[n++] = (struct uls_rlev){ .cookie = e->cookie, .revents = r };
				if (e->flags & ULS_EPI_ONESHOT)
					e->disarmed = true;
				else if (!(e->flags & ULS_EPI_ET))
					enqueue(e);  /* level-triggered: asked again next time */
			}
		}
		if (end)
			break;
	}
	if (ready_gen)
		*ready_gen = stk__node.ready_gen;
	stk__unlock();
	return (int)n;
}
