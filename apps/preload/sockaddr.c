/* Socket addresses between the program and libuls: AF_INET as is, AF_INET6 as Linux's
 * dual-stack sockets see IPv4 (ipv6(7): an IPv4 peer is the v4-mapped address
 * ::ffff:a.b.c.d, RFC 4291 §2.5.5.2), and the IPPROTO_IPV6 options such a socket keeps.
 *
 * On a node without an IPv6 address (ulsd's nodes today), an AF_INET6 socket of the shim
 * is a libuls IPv4 socket whose addresses are converted here, both ways, and what is real
 * IPv6 (neither mapped, nor the wildcard, nor loopback) has no route: docs/limits.md,
 * docs/ipv6.md. On a node with one, it is a libuls AF_INET6 socket (native6) and its
 * addresses go to libuls's sockaddr calls as they are; the classification here still
 * picks the loopback ones out for the kernel.
 */
#include "shim.h"

#include <netinet/in.h>
#include <string.h>

#include "uls.h"

int shim__addr_in(const struct shim_file *f, const struct sockaddr *a, socklen_t len,
		  struct sockaddr_in *out)
{
	if (!a)
		return -EFAULT;
	if (len < (socklen_t)sizeof(sa_family_t))
		return -EINVAL;
	if (f->family == AF_INET6 && a->sa_family == AF_INET6) {
		struct sockaddr_in6 s6;
		/* ipv6(7): Linux takes the RFC 2133 length (no scope ID) as well. */
		if (len < 24)
			return -EINVAL;
		memset(&s6, 0, sizeof(s6));
		memcpy(&s6, a, len < (socklen_t)sizeof(s6) ? (size_t)len : sizeof(s6));
		memset(out, 0, sizeof(*out));
		out->sin_family = AF_INET;
		out->sin_port = s6.sin6_port;
		if (IN6_IS_ADDR_V4MAPPED(&s6.sin6_addr)) {
			memcpy(&out->sin_addr, &s6.sin6_addr.s6_addr[12], 4);
			return SHIM_SA_V4;
		}
		if (IN6_IS_ADDR_UNSPECIFIED(&s6.sin6_addr))
			return SHIM_SA_ANY;
		if (IN6_IS_ADDR_LOOPBACK(&s6.sin6_addr))
			return SHIM_SA_LOOP6;
		return SHIM_SA_REAL6;
	}
	/* udp(7)/ipv6(7): a dual-stack datagram socket also takes a plain sockaddr_in for
	 * sendto and connect; a stream socket wants its own family (tcp_v6_connect). */
	if (a->sa_family != AF_INET || (f->family == AF_INET6 && f->type != SOCK_DGRAM))
		return -EAFNOSUPPORT;
	if (len < (socklen_t)sizeof(struct sockaddr_in))
		return -EINVAL;
	memcpy(out, a, sizeof(*out));
	return out->sin_addr.s_addr == htonl(INADDR_ANY) ? SHIM_SA_ANY : SHIM_SA_V4;
}

void shim__addr_copy_out(const void *src, socklen_t srclen, struct sockaddr *a, socklen_t *len)
{
	if (!a || !len)
		return;
	memcpy(a, src, *len < srclen ? (size_t)*len : (size_t)srclen);
	*len = srclen;
}

bool shim__node_has_ip6(void)
{
	struct uls_interface ui;

	return uls_interface(&ui) == 0 && ui.prefix_len6 != 0;
}

/* Linux copies out at most *len bytes and always says how long the address really is. */
void shim__addr_out(const struct shim_file *f, const struct sockaddr_in *in, struct sockaddr *a,
		    socklen_t *len)
{
	if (!a || !len)
		return;
	if (f->family != AF_INET6) {
		size_t n = *len < (socklen_t)sizeof(*in) ? (size_t)*len : sizeof(*in);
		memcpy(a, in, n);
		*len = sizeof(*in);
		return;
	}
	struct sockaddr_in6 s6;
	memset(&s6, 0, sizeof(s6));
	s6.sin6_family = AF_INET6;
	s6.sin6_port = in->sin_port;
	/* The wildcard stays the IPv6 wildcard (a socket bound to [::] names [::]); any other
	 * address is an IPv4 one, shown mapped. */
	if (in->sin_addr.s_addr != htonl(INADDR_ANY)) {
		s6.sin6_addr.s6_addr[10] = 0xff;
		s6.sin6_addr.s6_addr[11] = 0xff;
		memcpy(&s6.sin6_addr.s6_addr[12], &in->sin_addr, 4);
	}
	size_t n = *len < (socklen_t)sizeof(s6) ? (size_t)*len : sizeof(s6);
	memcpy(a, &s6, n);
	*len = sizeof(s6);
}

/* The IPPROTO_IPV6 options a dual-stack socket keeps for getsockopt. None of them changes
 * IPv4 traffic on Linux either: a socket talking to a v4-mapped peer sends IPv4 packets,
 * whose TOS and TTL come from IP_TOS and IP_TTL (net/ipv6/tcp_ipv6.c, ipv6_mapped), so
 * keeping the value is all Linux does with it until the socket speaks IPv6. Options that
 * would promise control messages (IPV6_RECVPKTINFO, IPV6_RECVTCLASS) are refused with
 * ENOPROTOOPT, as their IPv4 counterparts are (stack/socket.c). */
static const struct v6opt {
	int name, min, max, dflt;
} v6opts[SHIM_V6OPTS] = {
	{ IPV6_V6ONLY, 0, 1, 0 },            /* first (socket.c reads v6val[0]); bindv6only's
					      * default, 0 */
	{ IPV6_TCLASS, -1, 255, 0 },         /* -1: the default, 0 */
	{ IPV6_UNICAST_HOPS, -1, 255, 64 },  /* -1: the route's hop limit, 64 */
	{ IPV6_MULTICAST_HOPS, -1, 255, 1 },
	{ IPV6_MULTICAST_LOOP, 0, 1, 1 },
	{ IPV6_MTU_DISCOVER, 0, 5, 1 },      /* IPV6_PMTUDISC_DONT .. OMIT; WANT */
};

static int v6opt_index(int name)
{
	for (int i = 0; i < SHIM_V6OPTS; i++)
		if (v6opts[i].name == name)
			return i;
	return -1;
}

int shim__v6opt_set(struct shim_file *f, int name, const void *val, socklen_t len)
{
	int i = v6opt_index(name), v;

	if (i < 0)
		return -ENOPROTOOPT;
	if (!val || len < (socklen_t)sizeof(int))
		return -EINVAL;
	memcpy(&v, val, sizeof(v));
	if (name == IPV6_MULTICAST_LOOP || name == IPV6_V6ONLY)
		v = v != 0;  /* ipv6(7): booleans; Linux takes any non-zero int as 1 */
	if (v < v6opts[i].min || v > v6opts[i].max)
		return -EINVAL;
	/* ipv6(7): IPV6_V6ONLY is fixed once the socket is bound (Linux: EINVAL). */
	if (name == IPV6_V6ONLY && f->bound)
		return -EINVAL;
	f->v6val[i] = v == -1 ? v6opts[i].dflt : v;
	f->v6set |= 1u << i;
	return 0;
}

int shim__v6opt_get(const struct shim_file *f, int name, void *val, socklen_t *len)
{
	int i = v6opt_index(name);

	if (i < 0)
		return -ENOPROTOOPT;
	if (!val || !len)
		return -EFAULT;
	if (*len < (socklen_t)sizeof(int))
		return -EINVAL;
	int v = (f->v6set & (1u << i)) ? f->v6val[i] : v6opts[i].dflt;
	memcpy(val, &v, sizeof(v));
	*len = sizeof(v);
	return 0;
}
