/* One socket interface over two implementations: ulstack (uls_*) or the Linux kernel, so
 * the same benchmark code measures both. Every call returns >= 0 or -errno. */
#ifndef ULS_APPS_NETOPS_H
#define ULS_APPS_NETOPS_H

#include <stdbool.h>
#include <stddef.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "uls.h"

/* An address of either family, as the apps parse it and hand it to the _sa calls. */
union bench_addr {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
};
static inline socklen_t bench__addr_len(const union bench_addr *a)
{
	return a->sa.sa_family == AF_INET6 ? (socklen_t)sizeof(a->in6) : (socklen_t)sizeof(a->in);
}
static inline uint16_t bench__addr_port(const union bench_addr *a)
{
	return ntohs(a->sa.sa_family == AF_INET6 ? a->in6.sin6_port : a->in.sin_port);
}

struct netops {
	const char *name;
	int (*socket)(int type);
	int (*bind)(int sd, const struct sockaddr_in *a);
	int (*listen)(int sd, int backlog);
	int (*accept)(int sd, struct sockaddr_in *peer);
	int (*connect)(int sd, const struct sockaddr_in *a);
	ssize_t (*send)(int sd, const void *buf, size_t len, int flags);
	ssize_t (*recv)(int sd, void *buf, size_t len, int flags);
	int (*setsockopt)(int sd, int level, int name, const void *v, socklen_t len);
	int (*shutdown)(int sd, int how);
	int (*close)(int sd);
	/* Either family (AF_INET, or AF_INET6: dual-stack, as Linux's default). */
	int (*socket_af)(int af, int type);
	int (*bind_sa)(int sd, const struct sockaddr *a, socklen_t len);
	int (*connect_sa)(int sd, const struct sockaddr *a, socklen_t len);
};

extern const struct netops bench__uls_ops;
extern const struct netops bench__kernel_ops;

/* Send all len bytes (retrying after EINTR); 0 or -errno. */
int bench__send_all(const struct netops *ops, int sd, const void *buf, size_t len);
/* Receive exactly len bytes: 0, -EPIPE on EOF before len bytes (with *clean_eof, when not
 * NULL, set if the EOF came before the first byte), or -errno. */
int bench__recv_all(const struct netops *ops, int sd, void *buf, size_t len, bool *clean_eof);

/* Node options shared by the apps: --tap IF --ip A.B.C.D/NN [--ip6 ADDR/NN] [--mac M]
 * [--gw G] [--gw6 G6] [--mtu N] (the process is a node of its own), or --ctl PATH [--datapath direct|relay] (the process
 * joins ulsd's node, offering the direct data path or not: default direct).
 * bench__node_opt() consumes one option (returns 1 if it took optarg, 0 if the option is not
 * a node option, -EINVAL with a message "PROG: bad --OPT ..." on stderr on a bad value). */
struct node_opts {
	struct uls_node_config cfg;
	bool have_tap, have_ip, have_ip6, have_gw6;
	const char *ctl;        /* --ctl PATH: join the node that ulsd serves there */
	const char *datapath;   /* --datapath: "direct", "relay", NULL: not given */
};
int bench__node_opt(struct node_opts *o, const char *prog, const char *opt, const char *arg);
/* The node options' getopt_long entries, each with val 'N': give those to bench__node_opt
 * with the entry's name. */
#define BENCH_NODE_OPTIONS \
	{ "tap", required_argument, NULL, 'N' }, { "ip", required_argument, NULL, 'N' }, \
	{ "ip6", required_argument, NULL, 'N' }, \
	{ "mac", required_argument, NULL, 'N' }, { "gw", required_argument, NULL, 'N' }, \
	{ "gw6", required_argument, NULL, 'N' }, \
	{ "mtu", required_argument, NULL, 'N' }, { "ctl", required_argument, NULL, 'N' }, \
	{ "datapath", required_argument, NULL, 'N' }
/* Start the node if --tap/--ip were given; returns 1 if started, 0 if not asked, -1 on error. */
int bench__node_start(struct node_opts *o, const char *prog);
int bench__parse_addr(const char *s, struct sockaddr_in *a, unsigned default_port);
/* A.B.C.D[:PORT], or an IPv6 address: [ADDR]:PORT, [ADDR] or ADDR (RFC 3986 §3.2.2's
 * brackets, needed with a port). 0 or -1 (a untouched). */
int bench__parse_addr_any(const char *s, union bench_addr *a, unsigned default_port);
/* Can ops carry family af here? ulstack carries IPv6 only on a node with an IPv6 address
 * (uls_interface: a node of its own with --ip6; on ulsd's nodes, once HELLO says the
 * node's IPv6 address, control protocol v3). 0, or -EAFNOSUPPORT after a message on
 * stderr naming prog. */
int bench__family_check(const struct netops *ops, int af, const char *prog);

#endif
