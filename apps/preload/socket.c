/* The socket calls: socket, bind, listen, accept, connect, shutdown, options and names.
 *
 * Read first: socket(7), tcp(7), udp(7), ip(7) for the errors a program expects.
 */
#include "shim.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uls.h"

/* The node, as ULS_CTL named it when the program started: programs empty their
 * environment (nginx's workers keep only TZ), and a socket opened after that must still
 * find the node. */
static char *node_ctl;

void shim__set_ctl(const char *ctl)
{
	node_ctl = ctl && *ctl ? strdup(ctl) : NULL;
}

const char *shim__ctl(void)
{
	return node_ctl;
}

bool shim__enabled(void)
{
	return node_ctl != NULL;
}

/* A program whose sockets cannot reach the node must hear why, once, and not be moved
 * to the kernel behind its back. */
static void report(int err)
{
	static atomic_flag said = ATOMIC_FLAG_INIT;

	if (!atomic_flag_test_and_set(&said))
		fprintf(stderr, "ulstack: no user-level socket (node at ULS_CTL=%s): %s\n",
			node_ctl, strerror(-err));
}

static bool loopback(const struct sockaddr_in *a)
{
	return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
}

/* Make the kernel socket of the descriptor fd (and every other number naming f): traffic
 * to 127.0.0.0/8 and ::1 is the kernel's (DESIGN.md), and so is an IPv6-only socket while
 * libuls has no IPv6 (setsockopt below). Options set so far are replayed. */
static int to_kernel(int fd, struct shim_file *f)
{
	int k = shim__real.socket(f->family, f->type | (f->nonblock ? SOCK_NONBLOCK : 0), 0);

	if (k < 0)
		return -errno;
	for (unsigned i = 0; i < f->nopts; i++)
		shim__real.setsockopt(k, f->opts[i].level, f->opts[i].name, &f->opts[i].val,
				      sizeof(int));
	int hi = shim__maxfd();
	for (int n = 0; n <= hi; n++) {
		struct shim_file *g = shim__get(n);
		if (!g)
			continue;
		if (g == f) {
			int cloexec = shim__real.fcntl(n, F_GETFD) & FD_CLOEXEC;
			shim__uninstall(n);
			shim__real.dup3(k, n, cloexec ? O_CLOEXEC : 0);
		}
		shim__put(g);
	}
	shim__real.close(k);
	shim__uep_to_kernel(f);  /* its user-level epoll registrations follow it */
	(void)fd;
	return 0;
}

static int open_socket(int domain, int base, int type)
{
	sigset_t old;
	struct shim_file *f;

	shim__enter(&old);
	int sd = uls_attach(node_ctl);  /* joins the node once; -EALREADY after */
	bool native6 = false;
	if (sd == 0 || sd == -EALREADY) {
		native6 = domain == AF_INET6 && shim__node_has_ip6();
		sd = native6 ? uls_socket_af(AF_INET6, base | SOCK_NONBLOCK)
			     : uls_socket(base | SOCK_NONBLOCK);
	}
	int fd = sd < 0 ? sd : uls_socket_fd(sd, type & SOCK_CLOEXEC);
	if (sd >= 0 && fd < 0)
		uls_close(sd);
	shim__leave(&old);
	if (sd < 0) {
		report(sd);
		return sd;
	}
	if (fd < 0)
		return fd;
	f = shim__file_new(sd, domain, base, (type & SOCK_NONBLOCK) != 0);
	if (f)
		f->native6 = native6;
	if (!f || shim__install(fd, f) < 0) {
		shim__real.close(fd);
		shim__enter(&old);
		uls_close(sd);
		shim__leave(&old);
		shim__file_discard(f);
		return -ENOMEM;
	}
	return fd;
}

SHIM_EXPORT int socket(int domain, int type, int protocol)
{
	int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);

	shim__real_init();
	if ((domain != AF_INET && domain != AF_INET6) || !shim__enabled() ||
	    (base != SOCK_STREAM && base != SOCK_DGRAM) ||
	    (protocol && protocol != (base == SOCK_STREAM ? IPPROTO_TCP : IPPROTO_UDP)))
		return shim__real.socket(domain, type, protocol);
	return shim__ret(open_socket(domain, base, type));
}

SHIM_EXPORT int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct shim_file *f = shim__get(fd);
	struct sockaddr_in a;
	sigset_t old;
	int rc;

	shim__real_init();
	if (!f)
		return shim__real.bind(fd, addr, len);
	rc = shim__addr_in(f, addr, len, &a);
	if (rc == SHIM_SA_LOOP6 || (rc == SHIM_SA_V4 && loopback(&a))) {
		rc = to_kernel(fd, f);
		shim__put(f);
		return rc < 0 ? shim__ret(rc) : shim__real.bind(fd, addr, len);
	}
	if (rc == SHIM_SA_REAL6 && !f->native6)
		rc = -EADDRNOTAVAIL;  /* the node has no IPv6 address (docs/limits.md) */
	if (rc >= 0) {
		shim__enter(&old);
		/* native6: libuls takes the address as it is (:: stays dual-stack). */
		rc = f->native6 ? uls_bind_sa(f->sd, addr, len) : uls_bind(f->sd, &a);
		shim__leave(&old);
		f->bound |= rc == 0;
	}
	shim__put(f);
	return shim__ret(rc);
}

SHIM_EXPORT int listen(int fd, int backlog)
{
	struct shim_file *f = shim__get(fd);
	sigset_t old;

	shim__real_init();
	if (!f)
		return shim__real.listen(fd, backlog);
	shim__enter(&old);
	int rc = uls_listen(f->sd, backlog);
	shim__leave(&old);
	if (rc == 0)
		f->listening = f->bound = true;  /* bound now, if it was not */
	shim__put(f);
	return shim__ret(rc);
}

static int do_accept(struct shim_file *f, struct sockaddr *addr, socklen_t *len, int flags)
{
	struct sockaddr_in peer;
	struct sockaddr_in6 peer6;
	socklen_t peer6len = sizeof(peer6);
	sigset_t old;
	int csd, cfd = -1, rc;

	if (flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC))
		return -EINVAL;
	if (addr && !len)
		return -EFAULT;
	f->active = true;  /* uls_accept() tells ulsd */
	for (;;) {
		shim__enter(&old);
		peer6len = sizeof(peer6);
		csd = f->native6 ? uls_accept_sa(f->sd, (struct sockaddr *)&peer6, &peer6len)
				 : uls_accept(f->sd, &peer);
		if (csd >= 0) {
			cfd = uls_socket_fd(csd, flags & SOCK_CLOEXEC);
			if (cfd < 0)
				uls_close(csd);
		}
		shim__leave(&old);
		if (csd != -EAGAIN || f->nonblock)
			break;
		rc = shim__wait(f, POLLIN);
		if (rc < 0)
			return rc;
	}
	if (csd < 0)
		return csd;
	if (cfd < 0)
		return cfd;
	struct shim_file *c = shim__file_new(csd, f->family, SOCK_STREAM, (flags & SOCK_NONBLOCK) != 0);
	if (c) {
		c->native6 = f->native6;
		/* ipv6(7): the connection inherits the listener's IPv6 options. */
		c->bound = true;
		c->v6set = f->v6set;
		memcpy(c->v6val, f->v6val, sizeof(c->v6val));
	}
	if (!c || shim__install(cfd, c) < 0) {
		shim__real.close(cfd);
		shim__enter(&old);
		uls_close(csd);
		shim__leave(&old);
		shim__file_discard(c);
		return -ENOMEM;
	}
	if (f->native6)
		shim__addr_copy_out(&peer6, peer6len, addr, len);
	else
		shim__addr_out(f, &peer, addr, len);
	return cfd;
}

SHIM_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	struct shim_file *f = shim__get(fd);

	shim__real_init();
	if (!f)
		return shim__real.accept4(fd, addr, len, flags);
	int rc = do_accept(f, addr, len, flags);
	shim__put(f);
	return shim__ret(rc);
}

SHIM_EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	return accept4(fd, addr, len, 0);
}

/* A blocking connect() waits for the handshake on the mirror; a signal ends the wait with
 * EINTR and the connection goes on (connect(2)). */
static int do_connect(struct shim_file *f, const struct sockaddr *a, socklen_t alen)
{
	sigset_t old;
	int rc;

	shim__enter(&old);
	rc = uls_connect_sa(f->sd, a, alen);
	shim__leave(&old);
	if (rc != -EINPROGRESS || f->nonblock || f->type != SOCK_STREAM)
		return rc;
	for (;;) {
		rc = shim__wait(f, POLLOUT);
		if (rc < 0)
			return rc == -EAGAIN ? -EINPROGRESS : rc;
		int err = 0;
		socklen_t l = sizeof(err);
		struct sockaddr_in6 peer;
		socklen_t plen = sizeof(peer);
		shim__enter(&old);
		rc = uls_getsockopt(f->sd, SOL_SOCKET, SO_ERROR, &err, &l);
		if (rc == 0 && err)
			rc = -err;
		else if (rc == 0)
			rc = uls_getpeername_sa(f->sd, (struct sockaddr *)&peer, &plen) == 0 ? 0 : 1;
		shim__leave(&old);
		if (rc <= 0)
			return rc;
	}
}

SHIM_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct shim_file *f = shim__get(fd);
	struct sockaddr_in a;
	int rc;

	shim__real_init();
	if (!f)
		return shim__real.connect(fd, addr, len);
	if (addr && len >= (socklen_t)sizeof(sa_family_t) && addr->sa_family == AF_UNSPEC &&
	    f->type == SOCK_DGRAM) {
		/* connect(2): AF_UNSPEC dissolves a datagram socket's association. */
		memset(&a, 0, sizeof(a));
		a.sin_family = AF_INET;
		rc = SHIM_SA_V4;
	} else {
		rc = shim__addr_in(f, addr, len, &a);
		/* ipv6(7)/tcp_v6_connect: connecting to :: means the loopback address. */
		if (rc == SHIM_SA_ANY && addr->sa_family == AF_INET6)
			rc = SHIM_SA_LOOP6;
	}
	if (rc == SHIM_SA_LOOP6 || ((rc == SHIM_SA_V4 || rc == SHIM_SA_ANY) && loopback(&a))) {
		rc = to_kernel(fd, f);
		shim__put(f);
		return rc < 0 ? shim__ret(rc) : shim__real.connect(fd, addr, len);
	}
	/* No IPv6 on the node: what Linux says for a destination no route reaches. */
	if (rc == SHIM_SA_REAL6 && !f->native6)
		rc = -ENETUNREACH;
	if (rc >= 0) {
		/* native6: libuls takes the program's address as it is (AF_UNSPEC: a's
		 * 0.0.0.0:0 dissolves the association as for IPv4). */
		bool as_is = f->native6 && addr->sa_family != AF_UNSPEC;
		rc = as_is ? do_connect(f, addr, len)
			   : do_connect(f, (const struct sockaddr *)&a, sizeof(a));
		f->bound |= rc == 0 || rc == -EINPROGRESS;
	}
	shim__put(f);
	return shim__ret(rc);
}

SHIM_EXPORT int shutdown(int fd, int how)
{
	struct shim_file *f = shim__get_io(fd);
	sigset_t old;

	shim__real_init();
	if (!f)
		return shim__real.shutdown(fd, how);
	shim__enter(&old);
	int rc = uls_shutdown(f->sd, how);
	shim__leave(&old);
	shim__put(f);
	return shim__ret(rc);
}

SHIM_EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	struct shim_file *f = shim__get(fd);
	sigset_t old;

	shim__real_init();
	if (!f)
		return shim__real.getsockopt(fd, level, name, val, len);
	int rc;
	if (f->family == AF_INET6 && level == IPPROTO_IPV6) {
		rc = shim__v6opt_get(f, name, val, len);
	} else {
		shim__enter(&old);
		rc = uls_getsockopt(f->sd, level, name, val, len);
		shim__leave(&old);
		if (rc == 0 && level == SOL_SOCKET && name == SO_DOMAIN)
			memcpy(val, &f->family, sizeof(int));  /* libuls knows IPv4 only */
	}
	shim__put(f);
	return shim__ret(rc);
}

static void remember(struct shim_file *f, int level, int name, const void *val, socklen_t len)
{
	unsigned i;

	if (!val || len != (socklen_t)sizeof(int))
		return;
	for (i = 0; i < f->nopts; i++)
		if (f->opts[i].level == level && f->opts[i].name == name)
			break;
	if (i == sizeof(f->opts) / sizeof(f->opts[0]))
		return;
	f->opts[i].level = level;
	f->opts[i].name = name;
	memcpy(&f->opts[i].val, val, sizeof(int));
	if (i == f->nopts)
		f->nopts++;
}

SHIM_EXPORT int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	struct shim_file *f = shim__get_io(fd);
	sigset_t old;

	shim__real_init();
	if (!f)
		return shim__real.setsockopt(fd, level, name, val, len);
	int rc;
	if (f->family == AF_INET6 && level == IPPROTO_IPV6) {
		rc = shim__v6opt_set(f, name, val, len);
		if (rc == 0 && name == IPV6_V6ONLY && f->native6) {
			/* On a node with IPv6 libuls carries IPv6 itself: the option is the
			 * socket's, and ulsd then holds its port in IPv6 only (ipv6(7)). */
			shim__enter(&old);
			rc = uls_setsockopt(f->sd, level, name, val, len);
			shim__leave(&old);
		} else if (rc == 0 && name == IPV6_V6ONLY && f->v6val[0]) {
			/* An IPv6-only socket carries no IPv4, and libuls carries nothing else
			 * yet: it stays the kernel's, as every AF_INET6 socket was before. Its
			 * port is then not the node's: an IPv4 peer gets ulsd's RST, as a
			 * [::] listener with IPV6_V6ONLY refuses it on Linux, and an AF_INET
			 * socket may take the same port (nginx: listen 80; listen [::]:80). */
			remember(f, level, name, val, len);
			rc = to_kernel(fd, f);
			shim__put(f);
			return shim__ret(rc);
		}
	} else {
		shim__enter(&old);
		rc = uls_setsockopt(f->sd, level, name, val, len);
		shim__leave(&old);
	}
	if (rc == 0 && level == SOL_SOCKET && (name == SO_RCVTIMEO || name == SO_SNDTIMEO)) {
		/* Blocking calls wait in the kernel on the mirror: it keeps the timeout. */
		if (shim__real.setsockopt(fd, level, name, val, len) < 0)
			rc = -errno;
	}
	if (rc == 0)
		remember(f, level, name, val, len);
	shim__put(f);
	return shim__ret(rc);
}

static int name_of(int fd, struct sockaddr *addr, socklen_t *len, bool peer)
{
	struct shim_file *f = shim__get_io(fd);
	struct sockaddr_in a;
	sigset_t old;

	shim__real_init();
	if (!f)
		return peer ? shim__real.getpeername(fd, addr, len) :
			      shim__real.getsockname(fd, addr, len);
	if (!addr || !len) {
		shim__put(f);
		return shim__ret(-EFAULT);
	}
	if (f->native6) {
		struct sockaddr_in6 a6;
		socklen_t l6 = sizeof(a6);
		shim__enter(&old);
		int rc = peer ? uls_getpeername_sa(f->sd, (struct sockaddr *)&a6, &l6)
			      : uls_getsockname_sa(f->sd, (struct sockaddr *)&a6, &l6);
		shim__leave(&old);
		if (rc == 0)
			shim__addr_copy_out(&a6, l6, addr, len);
		shim__put(f);
		return shim__ret(rc);
	}
	shim__enter(&old);
	int rc = peer ? uls_getpeername(f->sd, &a) : uls_getsockname(f->sd, &a);
	shim__leave(&old);
	if (rc == 0)
		shim__addr_out(f, &a, addr, len);
	shim__put(f);
	return shim__ret(rc);
}

SHIM_EXPORT int getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	return name_of(fd, addr, len, false);
}

SHIM_EXPORT int getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	return name_of(fd, addr, len, true);
}
