/* fork(): the child's stack starts empty.
 *
 * After fork() the child holds a copy of the parent's lwIP state, but the connections,
 * the lease, the rings and the stack thread are the parent's: two stacks answering for one
 * connection would corrupt it. So the child forgets them all without a word on the wire
 * (its copies of the lease and ring descriptors close; ulsd sees nothing, the parent
 * keeps them), and its sockets are marked inherited. A socket becomes the child's own
 * with uls_adopt(): a listener listens again on its port, joining the node's group of
 * listeners there, so new connections spread over parent and child (DESIGN.md: listening
 * sockets stay usable in both); an unconnected socket starts afresh. A connected socket
 * moves to the child once the parent has closed its copy (handoff.c: uls_adopt says
 * ULS_ADOPT_CLAIM, and the caller claims it).
 */
#include "sock.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lwip/priv/tcp_priv.h"
#include "lwip/udp.h"
#include "netif/ctl/ctl.h"
#include "netif/qring.h"

static void prepare(void)
{
	stk__lock();
}

static void parent(void)
{
	if (stk__node.up)
		stk__handoff_forked();
	stk__now_held(false);
	stk__core_owner_drop();
	pthread_mutex_unlock(&stk__node.lock);
}

static void forget_socket(struct stk_sock *s)
{
	/* Any mirror's files are the parent's, an inherited socket's too (fixedfd.c). */
	stk__mirror_free(s);
	s->lazy = s->armed = 0;  /* the parent's epoll sets; the child's shim counts its own */
	if (s->inherited)
		return;
	s->inherited = true;
	s->inh_listen = s->state == STK_S_LISTEN;
	s->inh_backlog = (int)s->acq_cap / 2;  /* stream.c: twice the backlog */
	s->inh_port = s->tcp ? s->tcp->local_port : s->udp ? s->udp->local_port : 0;
	s->inh_connected = s->state == STK_S_CONNECTED || s->state == STK_S_CONNECTING;
	/* The pcbs, queued connections and buffers are copies of the parent's: dropped,
	 * never freed through lwIP (that would send or unbind on the parent's behalf). */
	s->tcp = NULL;
	s->udp = NULL;
	s->acq_count = 0;
	s->bound_port = 0;
	s->rxq.count = 0;
	s->rxq.bytes = 0;
	s->rxq.off = 0;
	s->rxq.tail_room = 0;
	s->rx_eof = s->rd_shut = s->wr_shut = false;
	s->users = 0;
	s->ctl_busy = false;  /* a parent's thread was with ulsd for it: not this process's */
	pthread_cond_init(&s->cond, NULL);
	stk__mirror_free(s);
	s->state = STK_S_DEAD;
	s->err = -ENOTCONN;
}

static void child(void)
{
	pthread_mutex_init(&stk__node.lock, NULL);
	stk__core_owner_take();
	stk__now_held(true);  /* the parent's reading is not ours */
	stk__drive_forked();  /* a parent's thread may have been inside */
	stk__ffd_forget();    /* the mirrors' fixed files are the parent's (fixedfd.c) */
	stk__signal_fork_child();
	if (stk__node.up) {
		stk__sockets_each(forget_socket);
		stk__handoff_forget();
		tcp_active_pcbs = NULL;
		tcp_tw_pcbs = NULL;
		tcp_bound_pcbs = NULL;
		tcp_listen_pcbs.listen_pcbs = NULL;
		udp_pcbs = NULL;
		netif_remove(&stk__node.netif);
		stk__lease_forget();  /* closes the child's copies of lease and rings */
		stk__node.dev = NULL;
		stk__node_set_up(false);
		stk__node.running = false;
		stk__node.lost = false;
	}
	stk__now_held(false);
	stk__core_owner_drop();
}

static void register_handlers(void)
{
	/* The rings' child handler first, whenever this runs (even before the rings'
	 * constructor, from another library's fork handler registration: shim fork.c). */
	nif_qring_fork_init();
	pthread_atfork(prepare, parent, child);
}

/* Before the first attach takes the core lock (lease.c): a fork() in another thread
 * while the attach holds it must wait for it (prepare), or the child would inherit the
 * lock held by a thread it does not have and hang in its own first socket call (seen:
 * tests/shim rtcwait fork, a thread connecting while the main thread forks). */
void stk__fork_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, register_handlers);
}

void uls_fork_init(void)
{
	stk__fork_init();
}

int uls_inherited(int sd)
{
	stk__lock();
	struct stk_sock *s = stk__sock_enter(sd);
	int rc = !s ? -EBADF : !s->inherited ? 0 : s->inh_connected ? 2 : 1;
	if (s)
		stk__sock_leave(s);
	stk__unlock();
	return rc;
}

static int adopt(struct stk_sock *s)
{
	ip_addr_t any;
	int rc;

	stk__sock_any(s, &any);
	if (s->inh_connected)
		return ULS_ADOPT_CLAIM;  /* the parent must let go of it first (handoff.c) */
	s->inherited = false;
	s->err = 0;
	s->state = STK_S_NEW;
	rc = s->type == SOCK_STREAM ? stk__stream_open(s) : stk__dgram_open(s);
	if (rc < 0 || !s->inh_port)
		return rc;
	s->share_inherited = true;
	rc = s->type == SOCK_STREAM ? stk__stream_bind(s, &any, s->inh_port) :
				      stk__dgram_bind(s, &any, s->inh_port);
	if (rc == 0 && s->inh_listen)
		rc = stk__stream_listen(s, s->inh_backlog);
	return rc;
}

int uls_adopt(int sd)
{
	int rc;

	stk__lock();
	bool up = stk__node.up;
	stk__unlock();
	if (!up) {
		rc = stk__lease_reattach();
		if (rc < 0 && rc != -EALREADY)
			return rc;
	}
	stk__lock();
	struct stk_sock *s = stk__sock_enter(sd);
	if (!s)
		rc = -EBADF;
	else if (!s->inherited)
		rc = 0;
	else
		rc = adopt(s);
	if (s)
		stk__sock_leave(s);
	stk__unlock();
	return rc;
}

int uls_accepting(int sd)
{
	stk__lock();
	struct stk_sock *s = stk__sock_enter(sd);
	if (s && s->type == SOCK_STREAM)
		stk__stream_accepting(s);
	if (s)
		stk__sock_leave(s);
	stk__unlock();
	return s ? 0 : -EBADF;
}
