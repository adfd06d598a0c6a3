/* The kernel and ulstack socket tables, and the node options the apps share. */
#include "apps/netops.h"
#include "apps/xfer.h"
#include "netif/opt/opt.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "netif/frame.h"

#define K(expr) ((expr) < 0 ? -errno : 0)

static int k_socket(int type)
{
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
	return fd < 0 ? -errno : fd;
}
static int k_socket_af(int af, int type)
{
	int fd = socket(af, type | SOCK_CLOEXEC, 0);
	return fd < 0 ? -errno : fd;
}

static int k_bind_sa(int sd, const struct sockaddr *a, socklen_t len)
{
	return K(bind(sd, a, len));
}

static int k_connect_sa(int sd, const struct sockaddr *a, socklen_t len)
{
	return K(connect(sd, a, len));
}

static int k_bind(int sd, const struct sockaddr_in *a)
{
	return K(bind(sd, (const struct sockaddr *)a, sizeof(*a)));
}
static int k_listen(int sd, int backlog)
{
	return K(listen(sd, backlog));
}
static int k_accept(int sd, struct sockaddr_in *peer)
{
	socklen_t len = sizeof(*peer);
	int fd = accept4(sd, (struct sockaddr *)peer, peer ? &len : NULL, SOCK_CLOEXEC);
	return fd < 0 ? -errno : fd;
}
static int k_connect(int sd, const struct sockaddr_in *a)
{
	return K(connect(sd, (const struct sockaddr *)a, sizeof(*a)));
}
static int k_setsockopt(int sd, int level, int name, const void *v, socklen_t len)
{
	return K(setsockopt(sd, level, name, v, len));
}
static int k_shutdown(int sd, int how)
{
	return K(shutdown(sd, how));
}
static int k_close(int sd)
{
	return K(close(sd));
}

const struct netops bench__kernel_ops = {
	"kernel", k_socket, k_bind, k_listen, k_accept, k_connect, bench__sock_send, bench__sock_recv,
	k_setsockopt, k_shutdown, k_close, k_socket_af, k_bind_sa, k_connect_sa,
};

const struct netops bench__uls_ops = {
	"ulstack", uls_socket, uls_bind, uls_listen, uls_accept, uls_connect, uls_send, uls_recv,
	uls_setsockopt, uls_shutdown, uls_close, uls_socket_af, uls_bind_sa, uls_connect_sa,
};

int bench__parse_addr_any(const char *s, union bench_addr *a, unsigned default_port)
{
	char host[INET6_ADDRSTRLEN];
	const char *end, *port = NULL;
	unsigned long p = default_port;
	union bench_addr out;

	if (!strchr(s, '[') && (!strchr(s, ':') || strchr(s, ':') == strrchr(s, ':'))) {
		struct sockaddr_in in;
		if (bench__parse_addr(s, &in, default_port) < 0)
			return -1;
		memset(&out, 0, sizeof(out));
		out.in = in;
		*a = out;
		return 0;
	}
	if (*s == '[') {
		s++;
		end = strchr(s, ']');
		if (!end || (end[1] && end[1] != ':'))
			return -1;
		if (end[1] == ':')
			port = end + 2;
	} else {
		end = s + strlen(s);
	}
	if (end == s || (size_t)(end - s) >= sizeof(host))
		return -1;
	memcpy(host, s, (size_t)(end - s));
	host[end - s] = '\0';
	if (port) {
		char *e;
		if (!isdigit((unsigned char)*port))
			return -1;
		errno = 0;
		p = strtoul(port, &e, 10);
		if (errno || *e || p == 0 || p > 65535)
			return -1;
	}
	memset(&out, 0, sizeof(out));
	out.in6.sin6_family = AF_INET6;
	out.in6.sin6_port = htons((uint16_t)p);
	if (inet_pton(AF_INET6, host, &out.in6.sin6_addr) != 1)
		return -1;
	*a = out;
	return 0;
}

int bench__family_check(const struct netops *ops, int af, const char *prog)
{
	struct uls_interface ifc;
	static const struct in6_addr none;

	if (af != AF_INET6 || ops != &bench__uls_ops)
		return 0;
	if (uls_interface(&ifc) == 0 && memcmp(&ifc.addr6, &none, sizeof(none)) != 0)
		return 0;
	fprintf(stderr, "%s: IPv6 needs an IPv6 address on the node: --ip6 for a node of its "
		"own; a ulsd node's HELLO gives none yet (control protocol v3, docs/ipv6.md)\n",
		prog);
	return -EAFNOSUPPORT;
}

int bench__parse_addr(const char *s, struct sockaddr_in *a, unsigned default_port)
{
	char host[INET_ADDRSTRLEN];
	const char *colon = strchr(s, ':');
	unsigned long port = default_port;
	size_t hl = colon ? (size_t)(colon - s) : strlen(s);

	if (hl == 0 || hl >= sizeof(host))
		return -1;
	memcpy(host, s, hl);
	host[hl] = '\0';
	if (colon) {
		char *end;
		if (!isdigit((unsigned char)colon[1]))
			return -1;
		errno = 0;
		port = strtoul(colon + 1, &end, 10);
		if (errno || *end || port == 0 || port > 65535)
			return -1;
	}
	struct sockaddr_in out = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (inet_pton(AF_INET, host, &out.sin_addr) != 1)
		return -1;
	*a = out;
	return 0;
}

int bench__node_opt(struct node_opts *o, const char *prog, const char *opt, const char *arg)
{
	if (strcmp(opt, "ctl") == 0) {
		o->ctl = arg;
		return 1;
	}
	if (strcmp(opt, "tap") == 0) {
		o->cfg.tap = arg;
		o->have_tap = true;
		return 1;
	}
	if (strcmp(opt, "ip") == 0) {
		if (opt__parse_cidr(arg, &o->cfg.addr, &o->cfg.prefix_len) < 0)
			return opt__bad(prog, opt, arg, "expected A.B.C.D/NN with NN in 1..30");
		o->have_ip = true;
		return 1;
	}
	if (strcmp(opt, "ip6") == 0) {
		if (uls_parse_cidr6(arg, &o->cfg.addr6, &o->cfg.prefix_len6) < 0)
			return opt__bad(prog, opt, arg, "expected an IPv6 ADDR/NN with NN in 1..128");
		o->have_ip6 = true;
		return 1;
	}
	if (strcmp(opt, "mac") == 0) {
		uint8_t mac[6];
		if (!nif_mac_parse(arg, mac) || (mac[0] & 1))
			return opt__bad(prog, opt, arg, "expected a unicast aa:bb:cc:dd:ee:ff");
		memcpy(o->cfg.mac, mac, sizeof(mac));
		return 1;
	}
	if (strcmp(opt, "gw") == 0) {
		if (inet_pton(AF_INET, arg, &o->cfg.gateway) != 1)
			return opt__bad(prog, opt, arg, "expected A.B.C.D");
		return 1;
	}
	if (strcmp(opt, "gw6") == 0) {
		struct in6_addr a;
		/* The rest (on-link, not the node's own) is checked when the node starts. */
		if (inet_pton(AF_INET6, arg, &a) != 1 || IN6_IS_ADDR_UNSPECIFIED(&a) ||
		    IN6_IS_ADDR_MULTICAST(&a) || IN6_IS_ADDR_V4MAPPED(&a))
			return opt__bad(prog, opt, arg, "expected a unicast IPv6 address");
		o->cfg.gateway6 = a;
		o->have_gw6 = true;
		return 1;
	}
	if (strcmp(opt, "mtu") == 0) {
		return opt__uint(prog, opt, arg, NIF_MTU_MIN, NIF_MTU_MAX, &o->cfg.mtu) < 0 ? -EINVAL : 1;
	}
	if (strcmp(opt, "datapath") == 0) {
		static const char *const paths[] = { "direct", "relay" };
		if (opt__word(prog, opt, arg, paths, 2) < 0)
			return -EINVAL;
		o->datapath = arg;
		return 1;
	}
	return 0;
}

int bench__node_start(struct node_opts *o, const char *prog)
{
	if (o->ctl) {
		if (o->have_tap || o->have_ip || o->have_ip6 || o->have_gw6) {
			fprintf(stderr, "%s: --ctl and --tap/--ip/--ip6/--gw6 exclude each other "
				"(ulsd --gw6 gives the node's processes their router)\n", prog);
			return -1;
		}
		/* libuls offers the direct path unless ULS_DATAPATH is relay; ulsd decides
		 * (it gives the relay where the direct path cannot be had). libuls read its
		 * variables when it was loaded: it reads them again (no other thread yet). */
		if (o->datapath && setenv("ULS_DATAPATH", o->datapath, 1) < 0)
			return -1;
		uls_env_reload();
		int rc = uls_attach(o->ctl);
		if (rc < 0) {
			fprintf(stderr, "%s: cannot join the node at %s: %s\n", prog, o->ctl,
				strerror(-rc));
			return -1;
		}
		return 1;
	}
	if (o->datapath) {
		fprintf(stderr, "%s: --datapath is for a process on ulsd's node (--ctl)\n", prog);
		return -1;
	}
	if (!o->have_tap && !o->have_ip)
		return 0;
	if (!o->have_tap || !o->have_ip) {
		fprintf(stderr, "%s: --tap and --ip go together\n", prog);
		return -1;
	}
	if (o->have_gw6 && !o->have_ip6) {
		fprintf(stderr, "%s: --gw6 needs --ip6\n", prog);
		return -1;
	}
	int rc = uls_node_start(&o->cfg);
	if (rc == -EINVAL && o->have_gw6) {
		fprintf(stderr, "%s: cannot start node on %s: %s (--gw6 must be a link-local "
			"address or one within --ip6's prefix, not the node's own)\n", prog,
			o->cfg.tap, strerror(-rc));
		return -1;
	}
	if (rc < 0) {
		fprintf(stderr, "%s: cannot start node on %s: %s\n", prog, o->cfg.tap, strerror(-rc));
		return -1;
	}
	return 1;
}

int bench__send_all(const struct netops *ops, int sd, const void *buf, size_t len)
{
	return bench__send_whole(ops->send, sd, buf, len);
}

int bench__recv_all(const struct netops *ops, int sd, void *buf, size_t len, bool *clean_eof)
{
	return bench__recv_whole(ops->recv, sd, buf, len, clean_eof);
}
