/* The descriptor table, socket lifetime, and the public socket calls, which check their
 * arguments and dispatch to stream.c (TCP) or dgram.c (UDP). Options: sockopt.c. */
#include "sock.h"

#include <errno.h>
#include <limits.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>

#include "lwip/ip.h"
#include "lwip/priv/tcp_priv.h"

static struct stk_sock **table;
static unsigned table_cap;
static unsigned table_next;  /* where the search for a free slot starts */

struct stk_sock *stk__sock_new(int type)
{
	struct stk_sock *s = calloc(1, sizeof(*s));
	pthread_condattr_t ca;

	if (!s)
		return NULL;
	s->sd = -1;
	s->type = type;
	s->opts.keep_idle_s = TCP_KEEPIDLE_DEFAULT / 1000u;
	s->opts.keep_intvl_s = TCP_KEEPINTVL_DEFAULT / 1000u;
	s->opts.keep_cnt = TCP_KEEPCNT_DEFAULT;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	return s;
}

/* Free a closed socket once no call is inside it any more. */
/* Sockets whose mirror lags (stk__sock_leave_owing), core lock held. */
static struct stk_sock *owed_head;
__thread struct stk_sock *stk__sock_calling __attribute__((tls_model("initial-exec")));

static void owed_unlink(struct stk_sock *s)
{
	for (struct stk_sock **p = &owed_head; *p; p = &(*p)->owed_next) {
		if (*p == s) {
			*p = s->owed_next;
			break;
		}
	}
	s->on_owed = false;
	s->owed_next = NULL;
}

void stk__sock_release(struct stk_sock *s)
{
	if (!s->closed || s->users || s->parked)
		return;
	if (s->on_owed)
		owed_unlink(s);
	stk__epi_detach(s);
	stk__mirror_free(s);
	stk__rxq_clear(&s->rxq);
	free(s->acq);
	pthread_cond_destroy(&s->cond);
	free(s);
}

void stk__sock_signal(struct stk_sock *s)
{
	stk__sock_signal_ev(s, STK_EV_ALL);
}

void stk__sock_signal_ev(struct stk_sock *s, short key)
{
	stk__sock_notify(s);
	if (s->epis && key)
		stk__epi_signal(s, key);
	/* The call this thread is in on s brings the mirror in line when it leaves: a state
	 * that comes and goes within the call (data that arrives while the caller drives
	 * and that it then takes) costs the mirror nothing. A kernel waiter on the mirror
	 * sees the socket's state as every call leaves it, as another thread of this process
	 * sees it through the core lock. */
	if (s != stk__sock_calling)
		stk__mirror_sync(s);
}

/* Slots are handed out round-robin, not lowest-first: a caller still holding the number
 * of a socket closed under it meets an empty slot, not at once a new socket. */
static int table_insert(struct stk_sock *s)
{
	unsigned i = table_cap;

	for (unsigned k = 0; k < table_cap; k++) {
		unsigned j = (table_next + k) % table_cap;
		if (!table[j]) {
			i = j;
			break;
		}
	}
	if (i == table_cap) {
		unsigned ncap = table_cap ? table_cap * 2 : 64;
		struct stk_sock **n = realloc(table, sizeof(*n) * ncap);
		if (!n)
			return -ENOMEM;
		memset(n + table_cap, 0, sizeof(*n) * (ncap - table_cap));
		table = n;
		table_cap = ncap;
	}
	table[i] = s;
	table_next = i + 1;
	s->sd = (int)i;
	return (int)i;
}

/* Look a descriptor up and enter it (core lock held). Pair with stk__sock_leave(). */
/* The socket sd names, no call counted (core lock held), or NULL. */
struct stk_sock *stk__sock_at(int sd)
{
	return sd < 0 || (unsigned)sd >= table_cap ? NULL : table[sd];
}

struct stk_sock *stk__sock_enter(int sd)
{
	if (sd < 0 || (unsigned)sd >= table_cap || !table[sd])
		return NULL;
	stk__drive_entry();
	table[sd]->users++;
	return table[sd];
}

/* A round trip to ulsd for s is about to release the core lock (endpoints.c): wait until
 * no other thread is in one for s, then mark it. Bind, listen and connect of one socket
 * are so serialised, as Linux's socket lock serialises them. Returns 0, or -EBADF if s
 * was closed meanwhile. Core lock held. */
int stk__sock_ctl_begin(struct stk_sock *s)
{
	while (s->ctl_busy && !s->closed)
		stk__sock_sleep(s, NULL);
	if (s->closed)
		return -EBADF;
	s->ctl_busy = true;
	return 0;
}

/* The round trip is over and the core lock held again: let the next thread in, and say
 * whether s may still take what ulsd granted: 0, -EBADF (closed meanwhile: the caller
 * gives the grant back) or -ENETDOWN (the node stopped, or ulsd went away). */
int stk__sock_ctl_end(struct stk_sock *s)
{
	s->ctl_busy = false;
	stk__sock_notify(s);
	if (s->closed)
		return -EBADF;
	if (!stk__node.up || stk__node.lost)
		return -ENETDOWN;
	return 0;
}

/* A call leaves the socket: what it consumed may have changed what poll() should say. */
void stk__sock_leave(struct stk_sock *s)
{
	s->users--;
	s->owed = false;
	if (!s->closed)
		stk__mirror_sync(s);
	stk__sock_release(s);
}

/* The shim's blocking calls are two calls of libuls: wait until ready (uls_socket_drive),
 * then the operation. Bringing the mirror in line between them would write a token for
 * the data the second call takes at once, and take it back: two system calls per message.
 * The debt is paid by the next call's leave; should that call not come (a handler that
 * left the shim's call with siglongjmp), by the next round on the device, which comes
 * within GRACE_MS (drive.c caps its waits while the list is not empty). */
void stk__sock_leave_owing(struct stk_sock *s)
{
	s->users--;
	if (!s->closed) {
		s->owed = true;
		if (!s->on_owed) {
			s->on_owed = true;
			s->owed_next = owed_head;
			owed_head = s;
		}
	}
	stk__sock_release(s);
}

void stk__sock_pay_owed(void)
{
	while (owed_head) {
		struct stk_sock *s = owed_head;
		owed_head = s->owed_next;
		s->on_owed = false;
		s->owed_next = NULL;
		/* A call inside it now pays at its own leave. */
		if (s->owed && !s->users && !s->closed) {
			s->owed = false;
			stk__mirror_sync(s);
			stk__count(STK_CNT_MIRROR_DEBTS_PAID);
		}
	}
}

bool stk__sock_owing(void)
{
	return owed_head != NULL;
}


void stk__sockets_each(void (*fn)(struct stk_sock *s))
{
	for (unsigned i = 0; i < table_cap; i++)
		if (table[i])
			fn(table[i]);
}

void stk__sockets_shutdown(void)
{
	for (unsigned i = 0; i < table_cap; i++) {
		struct stk_sock *s = table[i];
		if (!s)
			continue;
		table[i] = NULL;
		if (s->type == SOCK_STREAM)
			stk__stream_close(s);
		else
			stk__dgram_close(s);
		s->closed = true;
		s->err = -ENETDOWN;
		stk__sock_signal(s);
		stk__sock_release(s);
	}
}

void stk__sockets_lost(void)
{
	for (unsigned i = 0; i < table_cap; i++) {
		struct stk_sock *s = table[i];
		if (!s)
			continue;
		if (s->type == SOCK_STREAM)
			stk__stream_lost(s);
		else
			stk__dgram_close(s);
		s->bound_port = 0;
		s->state = STK_S_DEAD;
		s->err = -ENETDOWN;
		stk__sock_signal(s);
	}
}

/* The pcb address type a socket's pcbs get: an AF_INET6 socket is dual-stack (lwIP's
 * IPADDR_TYPE_ANY pcb serves IPv4 and IPv6 peers) until IPV6_V6ONLY makes it IPv6 only. */
u8_t stk__sock_iptype(const struct stk_sock *s)
{
	if (s->family != AF_INET6)
		return IPADDR_TYPE_V4;
	return s->v6only ? IPADDR_TYPE_V6 : IPADDR_TYPE_ANY;
}

void stk__sock_any(const struct stk_sock *s, ip_addr_t *any)
{
	switch (stk__sock_iptype(s)) {
	case IPADDR_TYPE_V6:  ip_addr_copy(*any, *IP6_ADDR_ANY); break;
	case IPADDR_TYPE_ANY: ip_addr_copy(*any, *IP_ANY_TYPE); break;
	default:              ip_addr_copy(*any, *IP4_ADDR_ANY); break;
	}
}

/* A socket address from the application into lwIP's: an AF_INET socket takes sockaddr_in;
 * an AF_INET6 socket sockaddr_in6 (a v4-mapped address is the IPv4 peer, :: its wildcard)
 * and, as a Linux dual-stack datagram socket does, sockaddr_in. */
static int to_ip(const struct stk_sock *s, const struct sockaddr *sa, socklen_t len,
		 ip_addr_t *ip, uint16_t *port)
{
	if (!sa)
		return -EFAULT;
	if (len < (socklen_t)sizeof(sa_family_t))
		return -EINVAL;
	if (sa->sa_family == AF_INET) {
		struct sockaddr_in a;
		if (len < (socklen_t)sizeof(a))
			return -EINVAL;
		memcpy(&a, sa, sizeof(a));
		if (s->v6only)
			return -EAFNOSUPPORT;
		ip_addr_set_ip4_u32_val(*ip, a.sin_addr.s_addr);
		*port = ntohs(a.sin_port);
		return 0;
	}
	if (sa->sa_family != AF_INET6 || s->family != AF_INET6)
		return -EAFNOSUPPORT;
	struct sockaddr_in6 a;
	/* ipv6(7): Linux takes the RFC 2133 length (no scope ID) as well. */
	if (len < 24)
		return -EINVAL;
	memset(&a, 0, sizeof(a));
	memcpy(&a, sa, len < (socklen_t)sizeof(a) ? (size_t)len : sizeof(a));
	*port = ntohs(a.sin6_port);
	if (IN6_IS_ADDR_V4MAPPED(&a.sin6_addr)) {
		/* ipv6(7): an IPV6_V6ONLY socket has no IPv4 peers. */
		if (s->v6only)
			return -ENETUNREACH;
		uint32_t v4;
		memcpy(&v4, &a.sin6_addr.s6_addr[12], 4);
		ip_addr_set_ip4_u32_val(*ip, v4);
		return 0;
	}
	if (IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr)) {
		stk__sock_any(s, ip);
		return 0;
	}
	ip_addr_set_zero_ip6(ip);
	memcpy(ip_2_ip6(ip)->addr, a.sin6_addr.s6_addr, 16);
	/* RFC 4007 §6: a link-local address needs its zone; the node has one link. */
	if (ip6_addr_lacks_zone(ip_2_ip6(ip), IP6_UNKNOWN)) {
		ip6_addr_assign_zone(ip_2_ip6(ip), IP6_UNKNOWN, &stk__node.netif);
	}
	return 0;
}

/* lwIP's address out to the application, as getsockname(2) does: at most *len bytes
 * copied, *len the address's real length. An AF_INET6 socket names IPv4 peers v4-mapped
 * and the IPv4 wildcard ::. */
static void from_ip(const struct stk_sock *s, struct sockaddr *sa, socklen_t *len,
		    const ip_addr_t *ip, uint16_t port)
{
	size_t n;

	if (s->family != AF_INET6) {
		struct sockaddr_in a;
		memset(&a, 0, sizeof(a));
		a.sin_family = AF_INET;
		a.sin_addr.s_addr = IP_IS_V4(ip) ? ip4_addr_get_u32(ip_2_ip4(ip)) : 0;
		a.sin_port = htons(port);
		n = *len < (socklen_t)sizeof(a) ? (size_t)*len : sizeof(a);
		memcpy(sa, &a, n);
		*len = sizeof(a);
		return;
	}
	struct sockaddr_in6 a;
	memset(&a, 0, sizeof(a));
	a.sin6_family = AF_INET6;
	a.sin6_port = htons(port);
	if (IP_IS_V6(ip)) {
		memcpy(a.sin6_addr.s6_addr, ip_2_ip6(ip)->addr, 16);
		/* The node's one link (RFC 4007 §6: a link-local address's zone). */
		if (ip6_addr_islinklocal(ip_2_ip6(ip)))
			a.sin6_scope_id = stk__node.ifindex;
	} else if (IP_IS_V4(ip) && !ip_addr_isany(ip)) {
		a.sin6_addr.s6_addr[10] = 0xff;
		a.sin6_addr.s6_addr[11] = 0xff;
		uint32_t v4 = ip4_addr_get_u32(ip_2_ip4(ip));
		memcpy(&a.sin6_addr.s6_addr[12], &v4, 4);
	}
	n = *len < (socklen_t)sizeof(a) ? (size_t)*len : sizeof(a);
	memcpy(sa, &a, n);
	*len = sizeof(a);
}

/* The old calls' struct sockaddr_in, for an AF_INET socket. */
#define SIN_LEN ((socklen_t)sizeof(struct sockaddr_in))

/* What an address is wrong for before the descriptor is looked at (the calls' order). */
static int addr_precheck(const struct sockaddr *sa, socklen_t len)
{
	if (!sa)
		return -EFAULT;
	if (len < (socklen_t)sizeof(sa_family_t))
		return -EINVAL;
	return sa->sa_family == AF_INET || sa->sa_family == AF_INET6 ? 0 : -EAFNOSUPPORT;
}

/* The same for the sockaddr_in calls: AF_INET only. */
static int sin_precheck(const struct sockaddr_in *a)
{
	if (!a)
		return -EFAULT;
	return a->sin_family == AF_INET ? 0 : -EAFNOSUPPORT;
}

int uls_socket(int type)
{
	return uls_socket_af(AF_INET, type);
}

int uls_socket_af(int domain, int type)
{
	int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct stk_sock *s;
	int rc;

	if (base != SOCK_STREAM && base != SOCK_DGRAM)
		return -EPROTONOSUPPORT;
	if (domain != AF_INET && domain != AF_INET6)
		return -EAFNOSUPPORT;
	if (!stk__node_up_hint()) {
		/* A process on a node gets its stack on its first socket (DESIGN.md). */
		const char *ctl = stk__getenv("ULS_CTL");
		if (ctl && *ctl) {
			rc = uls_attach(ctl);
			if (rc < 0 && rc != -EALREADY)
				return rc;
		}
	}
	stk__lock();
	if (!stk__node.up || stk__node.lost) {
		stk__unlock();
		return -ENETDOWN;
	}
	s = stk__sock_new(base);
	if (!s) {
		stk__unlock();
		return -ENOMEM;
	}
	s->nonblock = (type & SOCK_NONBLOCK) != 0;
	s->family = domain;
	rc = base == SOCK_STREAM ? stk__stream_open(s) : stk__dgram_open(s);
	if (rc == 0)
		rc = table_insert(s);
	if (rc < 0) {
		if (base == SOCK_STREAM)
			stk__stream_close(s);
		else
			stk__dgram_close(s);
		s->closed = true;
		stk__sock_release(s);
	}
	stk__unlock();
	return rc;
}

/* A local address must be the node's own or the wildcard. */
static int check_local(const ip_addr_t *ip)
{
	if (ip_addr_isany(ip))
		return 0;
	if (IP_IS_V4(ip))
		return ip4_addr_get_u32(ip_2_ip4(ip)) == ip_2_ip4(&stk__node.netif.ip_addr)->addr
			       ? 0 : -EADDRNOTAVAIL;
	if (stk__node.has_ip6 && netif_get_ip6_addr_match(&stk__node.netif, ip_2_ip6(ip)) >= 0)
		return 0;
	return -EADDRNOTAVAIL;
}

/* A peer's address: IPv6 needs a node with IPv6, and an off-link peer a default router
 * (ENETUNREACH, what Linux says with no route). */
static int check_peer(const ip_addr_t *ip)
{
	if (!IP_IS_V6(ip))
		return 0;
	return stk__node.has_ip6 && stk__ip6_routable(ip_2_ip6(ip)) ? 0 : -ENETUNREACH;
}

/* The end of every call that entered a socket (stk__sock_enter under the lock): leave it
 * if there was one, and unlock. */
static void sock_exit(struct stk_sock *s)
{
	if (s)
		stk__sock_leave(s);
	stk__unlock();
}

/* The sockaddr_in calls (uls_bind, uls_connect): AF_INET checked, then the sockaddr call. */
static int sin_call(int (*call)(int, const struct sockaddr *, socklen_t), int sd,
		    const struct sockaddr_in *addr)
{
	int rc = sin_precheck(addr);

	return rc < 0 ? rc : call(sd, (const struct sockaddr *)addr, SIN_LEN);
}

/* bind and connect: first, in the calls' order, the address's own errors, the descriptor
 * (EBADF), the address for the socket's family; then op, on the socket entered under the
 * lock, with the address read. */
static int with_addr(int sd, const struct sockaddr *addr, socklen_t len,
		     int (*op)(struct stk_sock *s, const ip_addr_t *ip, uint16_t port))
{
	ip_addr_t ip;
	uint16_t port;
	struct stk_sock *s;
	int rc = addr_precheck(addr, len);

	if (rc < 0)
		return rc;
	stk__lock();
	s = stk__sock_enter(sd);
	rc = !s ? -EBADF : to_ip(s, addr, len, &ip, &port);
	if (rc == 0)
		rc = op(s, &ip, port);
	sock_exit(s);
	return rc;
}

int uls_bind(int sd, const struct sockaddr_in *addr)
{
	return sin_call(uls_bind_sa, sd, addr);
}

static int bind_op(struct stk_sock *s, const ip_addr_t *ip, uint16_t port)
{
	int rc = check_local(ip);

	if (rc < 0)
		return rc;
	return s->type == SOCK_STREAM ? stk__stream_bind(s, ip, port) :
					stk__dgram_bind(s, ip, port);
}

int uls_bind_sa(int sd, const struct sockaddr *addr, socklen_t len)
{
	return with_addr(sd, addr, len, bind_op);
}

int uls_listen(int sd, int backlog)
{
	stk__lock();
	struct stk_sock *s = stk__sock_enter(sd);
	int rc = !s ? -EBADF : s->type != SOCK_STREAM ? -EOPNOTSUPP : stk__stream_listen(s, backlog);
	sock_exit(s);
	return rc;
}

int uls_accept(int sd, struct sockaddr_in *peer)
{
	socklen_t len = SIN_LEN;

	return uls_accept_sa(sd, (struct sockaddr *)peer, peer ? &len : NULL);
}

int uls_accept_sa(int sd, struct sockaddr *peer, socklen_t *plen)
{
	struct stk_sock *child = NULL;

	stk__lock();
	struct stk_sock *s = stk__sock_enter(sd);
	int rc = !s ? -EBADF : s->type != SOCK_STREAM ? -EOPNOTSUPP : stk__stream_accept(s, &child);
	if (rc == 0) {
		rc = table_insert(child);
		if (rc < 0) {
			stk__stream_close(child);
			child->closed = true;
			stk__sock_release(child);
		} else if (peer && plen) {
			ip_addr_t none = IPADDR4_INIT(0);
			if (child->tcp)
				from_ip(child, peer, plen, &child->tcp->remote_ip, child->tcp->remote_port);
			else
				from_ip(child, peer, plen, &none, 0);
		}
	}
	sock_exit(s);
	return rc;
}

int uls_connect(int sd, const struct sockaddr_in *addr)
{
	return sin_call(uls_connect_sa, sd, addr);
}

static int connect_op(struct stk_sock *s, const ip_addr_t *ip, uint16_t port)
{
	int rc;

	if (port == 0 && !ip_addr_isany(ip))
		return -EINVAL;
	rc = check_peer(ip);
	if (rc < 0)
		return rc;
	return s->type == SOCK_STREAM ? stk__stream_connect(s, ip, port) :
					stk__dgram_connect(s, ip, port);
}

int uls_connect_sa(int sd, const struct sockaddr *addr, socklen_t len)
{
	return with_addr(sd, addr, len, connect_op);
}

ssize_t uls_sendto(int sd, const void *buf, size_t len, int flags, const struct sockaddr_in *to)
{
	int rc = to ? sin_precheck(to) : 0;

	if (!buf && len)
		return -EFAULT;
	return rc < 0 ? rc : uls_sendto_sa(sd, buf, len, flags, (const struct sockaddr *)to, SIN_LEN);
}

ssize_t uls_sendto_sa(int sd, const void *buf, size_t len, int flags, const struct sockaddr *to,
		      socklen_t tolen)
{
	ip_addr_t ip = IPADDR4_INIT(0);
	uint16_t port = 0;
	ssize_t rc;
	int r;

	if (!buf && len)
		return -EFAULT;
	if (to && (r = addr_precheck(to, tolen)) < 0)
		return r;
	stk__lock();
	struct stk_sock *s = stk__sock_enter(sd);
	if (!s)
		rc = -EBADF;
	else if (to && ((r = to_ip(s, to, tolen, &ip, &port)) < 0 ||
			(s->type != SOCK_STREAM && (r = check_peer(&ip)) < 0)))
		rc = r;
	else if (s->type == SOCK_STREAM)
		rc = to ? -EISCONN : stk__stream_send(s, buf, len, flags);
	else
		rc = stk__dgram_sendto(s, buf, len, flags, &ip, port, to != NULL);
	sock_exit(s);
	return rc;
}

ssize_t uls_send(int sd, const void *buf, size_t len, int flags)
{
	return uls_sendto(sd, buf, len, flags, NULL);
}

ssize_t uls_recvfrom(int sd, void *buf, size_t len, int flags, struct sockaddr_in *from)
{
	socklen_t flen = SIN_LEN;

	return uls_recvfrom_sa(sd, buf, len, flags, (struct sockaddr *)from, from ? &flen : NULL);
}

ssize_t uls_recvfrom_sa(int sd, void *buf, size_t len, int flags, struct sockaddr *from,
			socklen_t *fromlen)
{
	ssize_t rc;
	ip_addr_t none = IPADDR4_INIT(0);

	if (from && !fromlen)
		from = NULL;

	if (!buf && len)
		return -EFAULT;
	stk__lock();
	struct stk_sock *s = stk__sock_enter(sd);
	if (!s) {
		rc = -EBADF;
	} else if (s->type == SOCK_STREAM) {
		rc = stk__stream_recv(s, buf, len, flags);
		if (rc >= 0 && from) {
			if (s->tcp)
				from_ip(s, from, fromlen, &s->tcp->remote_ip, s->tcp->remote_port);
			else
				from_ip(s, from, fromlen, &none, 0);
		}
	} else {
		ip_addr_t ip;
		uint16_t port;
		rc = stk__dgram_recvfrom(s, buf, len, flags, &ip, &port);
		if (rc >= 0 && from)
			from_ip(s, from, fromlen, &ip, port);
	}
	sock_exit(s);
	return rc;
}

ssize_t uls_recv(int sd, void *buf, size_t len, int flags)
{
	return uls_recvfrom(sd, buf, len, flags, NULL);
}

int uls_shutdown(int sd, int how)
{
	int rc;

	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return -EINVAL;
	stk__lock();
	struct stk_sock *s = stk__sock_enter(sd);
	if (!s)
		rc = -EBADF;
	else if (s->type != SOCK_STREAM)
		rc = s->state == STK_S_CONNECTED ? 0 : -ENOTCONN;
	else
		rc = stk__stream_shutdown(s, how != SHUT_WR, how != SHUT_RD);
	sock_exit(s);
	return rc;
}

int uls_close(int sd)
{
	stk__lock();
	if (sd < 0 || (unsigned)sd >= table_cap || !table[sd]) {
		stk__unlock();
		return -EBADF;
	}
	struct stk_sock *s = table[sd];
	table[sd] = NULL;
	if (s->type == SOCK_STREAM && stk__handoff_park(s)) {
		/* Another process holds the socket too: the connection waits for it to
		 * claim it or let go (handoff.c). */
		s->closed = true;
		s->err = -EBADF;
		stk__sock_notify(s);
		stk__unlock();
		return 0;
	}
	if (s->type == SOCK_STREAM)
		stk__stream_close(s);
	else
		stk__dgram_close(s);
	s->closed = true;
	s->err = -EBADF;
	stk__sock_notify(s);               /* threads blocked in this socket return EBADF */
	stk__mirror_hangup(s);             /* and so do those waiting on its mirror */
	stk__sock_release(s);
	stk__unlock();
	return 0;
}

static int name_of(int sd, struct sockaddr *addr, socklen_t *len, bool peer)
{
	int rc = 0;

	if (!addr || !len)
		return -EFAULT;
	stk__lock();
	struct stk_sock *s = stk__sock_enter(sd);
	if (!s) {
		rc = -EBADF;
	} else if (s->tcp) {
		if (peer && s->state != STK_S_CONNECTED)
			rc = -ENOTCONN;
		else if (peer)
			from_ip(s, addr, len, &s->tcp->remote_ip, s->tcp->remote_port);
		else
			from_ip(s, addr, len, &s->tcp->local_ip, s->tcp->local_port);
	} else if (s->udp) {
		if (peer && s->state != STK_S_CONNECTED)
			rc = -ENOTCONN;
		else if (peer)
			from_ip(s, addr, len, &s->udp->remote_ip, s->udp->remote_port);
		else
			from_ip(s, addr, len, &s->udp->local_ip, s->udp->local_port);
	} else if (!peer && s->conn_port) {
		from_ip(s, addr, len, &s->conn_ip, s->conn_port);  /* the connection is gone */
	} else {
		rc = peer ? -ENOTCONN : -EINVAL;
	}
	sock_exit(s);
	return rc;
}

int uls_getsockname(int sd, struct sockaddr_in *addr)
{
	socklen_t len = SIN_LEN;

	return name_of(sd, (struct sockaddr *)addr, &len, false);
}

int uls_getpeername(int sd, struct sockaddr_in *addr)
{
	socklen_t len = SIN_LEN;

	return name_of(sd, (struct sockaddr *)addr, &len, true);
}

int uls_getsockname_sa(int sd, struct sockaddr *addr, socklen_t *len)
{
	return name_of(sd, addr, len, false);
}

int uls_getpeername_sa(int sd, struct sockaddr *addr, socklen_t *len)
{
	return name_of(sd, addr, len, true);
}
