/* Bringing a node up and keeping it running: the core lock and the stack thread.
 *
 * lwIP runs with NO_SYS=1 under one mutex (the core lock). Application threads take it for
 * each socket call and call lwIP directly; a thread that blocks in a call drives the stack
 * itself, and the stack thread waits on the device when none does (drive.c). Because the
 * stack thread runs lwIP's timers, ACKs, retransmissions and keepalives go on while the
 * application computes or sleeps.
 */
#include "internal.h"
#include "hooks.h"
#include "drive.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <net/if.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lwip/etharp.h"
#include "lwip/ethip6.h"
#include "lwip/init.h"
#include "lwip/ip4_addr.h"
#include "lwip/ip6_addr.h"
#include "lwip/netif.h"
#include "lwip/priv/tcp_priv.h"
#include "lwip/timeouts.h"
#include <netif/ethernet.h>
#include "netif/opt/opt.h"
#include "netif/sys.h"

#define STOP_LINGER_MS 3000  /* uls_node_stop(): time closed connections get to finish */
/* ... looking again after every round of the stack and at least this often (ns). */
#define STOP_LOOK_NS 50000000u

struct stk_node stk__node = { .lock = PTHREAD_MUTEX_INITIALIZER };

void stk__lock(void)
{
	pthread_mutex_lock(&stk__node.lock);
	stk__core_owner_take();
	stk__now_held(true);
}

void stk__unlock_raw(void)
{
	stk__now_held(false);
	stk__core_owner_drop();
	pthread_mutex_unlock(&stk__node.lock);
}

void stk__unlock(void)
{
	stk__drive_owed();
	stk__leave();
	stk__unlock_raw();
}

int uls_parse_cidr(const char *s, struct in_addr *addr, unsigned *prefix_len)
{
	/* The one parser of the tree, shared with ulsd and the apps' --ip. */
	return opt__parse_cidr(s, addr, prefix_len);
}

int uls_parse_cidr6(const char *s, struct in6_addr *addr, unsigned *prefix_len)
{
	char buf[INET6_ADDRSTRLEN + 8], *slash, *end;
	struct in6_addr a;
	unsigned long n;

	if (!s || !addr || !prefix_len || strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	slash = strchr(buf, '/');
	if (!slash || !isdigit((unsigned char)slash[1]))
		return -EINVAL;
	*slash = '\0';
	errno = 0;
	n = strtoul(slash + 1, &end, 10);
	if (errno || *end || n < 1 || n > 128 || inet_pton(AF_INET6, buf, &a) != 1)
		return -EINVAL;
	*addr = a;
	*prefix_len = (unsigned)n;
	return 0;
}

/* A node's IPv6 address must be a global (or unique local) unicast one: RFC 4291 §2.4.
 * The link-local one comes from the MAC. */
static int check_addr6(const struct in6_addr *a, unsigned prefix_len)
{
	if (prefix_len < 1 || prefix_len > 128)
		return -EINVAL;
	if (IN6_IS_ADDR_UNSPECIFIED(a) || IN6_IS_ADDR_LOOPBACK(a) || IN6_IS_ADDR_MULTICAST(a) ||
	    IN6_IS_ADDR_LINKLOCAL(a) || IN6_IS_ADDR_V4MAPPED(a) || IN6_IS_ADDR_V4COMPAT(a))
		return -EINVAL;
	return 0;
}

static int check_addr(struct in_addr addr, unsigned prefix_len)
{
	uint32_t a = ntohl(addr.s_addr);

	if (prefix_len < 1 || prefix_len > 30)
		return -EINVAL;
	/* A node address must be a unicast host address. */
	if (a == 0 || (a >> 24) == 127 || (a >> 28) >= 0xe)
		return -EINVAL;
	return 0;
}

static int check_config(const struct uls_node_config *cfg)
{
	if (!cfg || !cfg->tap || !*cfg->tap)
		return -EINVAL;
	if (check_addr(cfg->addr, cfg->prefix_len) < 0)
		return -EINVAL;
	if (cfg->mtu && (cfg->mtu < NIF_MTU_MIN || cfg->mtu > NIF_MTU_MAX))
		return -EINVAL;
	if (cfg->mac[0] & 0x01)  /* a multicast MAC cannot be a station address */
		return -EINVAL;
	if (!IN6_IS_ADDR_UNSPECIFIED(&cfg->addr6) && check_addr6(&cfg->addr6, cfg->prefix_len6) < 0)
		return -EINVAL;
	/* A router needs an IPv6 address to be reached from (the rest: stk__node_gw6). */
	if (!IN6_IS_ADDR_UNSPECIFIED(&cfg->gateway6) && IN6_IS_ADDR_UNSPECIFIED(&cfg->addr6))
		return -EINVAL;
	return 0;
}

int stk__node_ip6(const struct in6_addr *addr, unsigned prefix_len)
{
	struct netif *n = &stk__node.netif;
	ip6_addr_t a;
	s8_t idx;

	/* RFC 4862 §5.3 / RFC 4291 §2.5.1: fe80::/64 with the modified EUI-64 interface
	 * identifier from the MAC (RFC 2464 §4). Deviation: no duplicate address detection
	 * (RFC 4862 §5.4): on a node of its own the process owns the TAP, as it owns its
	 * IPv4 address without probing (RFC 5227 is not done either); both addresses are
	 * preferred at once. */
	netif_create_ip6_linklocal_address(n, 1);
	netif_ip6_addr_set_state(n, 0, IP6_ADDR_PREFERRED);
	memset(&a, 0, sizeof(a));
	memcpy(a.addr, addr->s6_addr, sizeof(a.addr));
	if (netif_add_ip6_address(n, &a, &idx) != ERR_OK) {
		netif_ip6_addr_set_state(n, 0, IP6_ADDR_INVALID);
		return -ENOMEM;
	}
	/* On-link is this address's prefix_len (stk__nd6_static_onlink, patch 0107);
	 * what is off it goes to the default router, once there is one (stk__node_gw6). */
	netif_ip6_addr_set_state(n, idx, IP6_ADDR_PREFERRED);
	n->output_ip6 = ethip6_output;
	stk__node.has_ip6 = true;
	stk__node.addr6 = *addr;
	stk__node.prefix_len6 = prefix_len;
	stk__node.has_gw6 = false;
	return 0;
}

/* Whether a is within the node's configured prefix (RFC 4291 §2.3 prefix notation). */
static bool in_node_prefix(const uint8_t a[16])
{
	const uint8_t *p = stk__node.addr6.s6_addr;
	unsigned bits = stk__node.prefix_len6, whole = bits / 8, rest = bits % 8;

	if (memcmp(a, p, whole) != 0)
		return false;
	return rest == 0 || ((a[whole] ^ p[whole]) & (uint8_t)(0xff00u >> rest)) == 0;
}

/* RFC 5942 §4: a statically configured address makes its configured prefix on-link, no
 * more and no less (lwIP assumed /64). Other static addresses (the link-local one,
 * fe80::/64, RFC 4291 §2.5.6) keep lwIP's /64. */
int stk__nd6_static_onlink(struct netif *netif, s8_t i, const ip6_addr_t *dest)
{
	const ip6_addr_t *mine = netif_ip6_addr(netif, i);

	if (stk__node.has_ip6 && netif == &stk__node.netif &&
	    memcmp(mine->addr, stk__node.addr6.s6_addr, 16) == 0)
		return in_node_prefix((const uint8_t *)dest->addr);
	return ip6_addr_netcmp(dest, mine);
}

/* RFC 4861 §5.2: a destination that is not on-link goes to a default router. The static
 * one (--gw6) comes first; without it lwIP's own list (empty unless a Router
 * Advertisement reached this lwIP) decides, and no router is ERR_RTE. */
const ip6_addr_t *stk__nd6_gateway(struct netif *netif, const ip6_addr_t *dest)
{
	(void)dest;
	return stk__node.has_gw6 && netif == &stk__node.netif ? &stk__node.gw6 : NULL;
}

int stk__node_gw6(const struct in6_addr *gw)
{
	const uint8_t *a = gw->s6_addr;
	uint8_t ll[16];

	if (!stk__node.has_ip6)
		return -EINVAL;
	if (IN6_IS_ADDR_UNSPECIFIED(gw) || IN6_IS_ADDR_LOOPBACK(gw) || IN6_IS_ADDR_MULTICAST(gw) ||
	    IN6_IS_ADDR_V4MAPPED(gw) || IN6_IS_ADDR_V4COMPAT(gw))
		return -EINVAL;
	/* A router is a neighbour (RFC 4861 §8.3: hosts know routers by their link-local
	 * addresses; a global one must be on-link), and not the node itself. */
	if (!IN6_IS_ADDR_LINKLOCAL(gw) && !in_node_prefix(a))
		return -EINVAL;
	memcpy(ll, netif_ip6_addr(&stk__node.netif, 0)->addr, 16);
	if (memcmp(a, stk__node.addr6.s6_addr, 16) == 0 || memcmp(a, ll, 16) == 0)
		return -EINVAL;
	memset(&stk__node.gw6, 0, sizeof(stk__node.gw6));
	memcpy(stk__node.gw6.addr, a, 16);
	stk__node.has_gw6 = true;
	return 0;
}

bool stk__ip6_routable(const ip6_addr_t *dest)
{
	if (stk__node.has_gw6 || ip6_addr_ismulticast(dest) || ip6_addr_islinklocal(dest) ||
	    ip6_addr_isloopback(dest) || ip6_addr_isany(dest))
		return true;
	return stk__node.has_ip6 && in_node_prefix((const uint8_t *)dest->addr);
}

/* Bring lwIP up on dev (core lock held, node down). Takes dev over, also on failure. */
int stk__node_up(struct nif_dev *dev, struct in_addr addr, unsigned prefix_len,
		 struct in_addr gateway, const uint8_t mac[6])
{
	ip4_addr_t ip, mask, gw;
	static bool core_initialised;
	int rc;

	stk__node.dev = dev;
	memcpy(stk__node.mac, mac, 6);
	if (!core_initialised) {
		lwip_init();
		stk__ep_init();
		stk__tcp_checks_init();
		stk__icmperr_init();
		core_initialised = true;
	}
	ip.addr = addr.s_addr;
	mask.addr = htonl(0xffffffffu << (32 - prefix_len));
	gw.addr = gateway.s_addr;
	if (!netif_add(&stk__node.netif, &ip, &mask, &gw, NULL, stk__ethif_init, ethernet_input)) {
		rc = -EINVAL;
		goto fail;
	}
	netif_set_default(&stk__node.netif);
	stk__node_set_up(true);
	netif_set_link_up(&stk__node.netif);
	netif_set_up(&stk__node.netif);  /* announces the address: gratuitous ARP */
	stk__node.running = true;
	stk__drive_init();
	/* Signals are the program's: the stack thread blocks them all, so that a handler
	 * always runs in one of the program's threads (and never in one holding the core
	 * lock on the program's behalf). */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = -pthread_create(&stk__node.thread, NULL, stk__stack_thread, &stk__node);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc == 0) {
		/* So that ps -L, top -H and perf tell it from the program's own threads. */
		pthread_setname_np(stk__node.thread, "uls-stack");
		return 0;
	}
	stk__node.running = false;
	stk__node_set_up(false);
	netif_remove(&stk__node.netif);
fail:
	dev->ops->close(dev);
	stk__node.dev = NULL;
	return rc;
}

/* The first size bytes of the caller's structure, the rest zero (uls.h). The fields
 * before addr6 are the oldest layout: a smaller size is no structure this library has
 * ever had. */
static int copy_config(struct uls_node_config *c, const struct uls_node_config *cfg,
		       size_t size)
{
	if (!cfg || size < offsetof(struct uls_node_config, addr6))
		return -EINVAL;
	if (size > sizeof(*c)) {
		const unsigned char *tail = (const unsigned char *)cfg + sizeof(*c);
		for (size_t i = 0; i < size - sizeof(*c); i++)
			if (tail[i])
				return -E2BIG;
		size = sizeof(*c);
	}
	memset(c, 0, sizeof(*c));
	memcpy(c, cfg, size);
	return 0;
}

#undef uls_node_start
int uls_node_start(const struct uls_node_config *cfg)
{
	return uls_node_start_sized(cfg, sizeof(*cfg));
}

int uls_node_start_sized(const struct uls_node_config *cfg, size_t size)
{
	struct nif_tap_config tcfg;
	struct nif_tap *tap;
	static const uint8_t zero[6];
	uint8_t mac[6];
	struct uls_node_config c;
	int rc;

	rc = copy_config(&c, cfg, size);
	if (rc < 0)
		return rc;
	/* The IPv6 address may come from the environment, as a program linked with libuls
	 * need not know about it (ULS_IP6=ADDR/PLEN; uls(3)). */
	const char *e6 = stk__getenv("ULS_IP6");
	if (IN6_IS_ADDR_UNSPECIFIED(&c.addr6) && e6 && *e6 &&
	    uls_parse_cidr6(e6, &c.addr6, &c.prefix_len6) < 0)
		return -EINVAL;
	/* The router likewise (ULS_GW6=ADDR). */
	const char *eg = stk__getenv("ULS_GW6");
	if (IN6_IS_ADDR_UNSPECIFIED(&c.gateway6) && eg && *eg &&
	    inet_pton(AF_INET6, eg, &c.gateway6) != 1)
		return -EINVAL;
	cfg = &c;
	rc = check_config(cfg);
	if (rc < 0)
		return rc;
	stk__lock();
	if (stk__node.up) {
		stk__unlock();
		return -EALREADY;
	}
	memset(&tcfg, 0, sizeof(tcfg));
	tcfg.ifname = cfg->tap;
	tcfg.mtu = cfg->mtu;
	rc = nif_tap_open(&tap, &tcfg);
	if (rc < 0) {
		stk__unlock();
		return rc;
	}
	if (memcmp(cfg->mac, zero, 6) != 0) {
		memcpy(mac, cfg->mac, 6);
	} else {
		/* Locally administered (bit 1 of the first octet), derived from the address. */
		uint32_t a = ntohl(cfg->addr.s_addr);
		uint8_t m[6] = { 0x02, 0x75, 0x6c, (uint8_t)(a >> 16), (uint8_t)(a >> 8), (uint8_t)a };
		memcpy(mac, m, 6);
	}
	stk__node_name(cfg->tap, nif_sys.if_nametoindex(cfg->tap));
	rc = stk__node_up(nif_tap_dev(tap), cfg->addr, cfg->prefix_len, cfg->gateway, mac);
	if (rc == 0 && !IN6_IS_ADDR_UNSPECIFIED(&cfg->addr6) &&
	    ((rc = stk__node_ip6(&cfg->addr6, cfg->prefix_len6)) < 0 ||
	     (!IN6_IS_ADDR_UNSPECIFIED(&cfg->gateway6) &&
	      (rc = stk__node_gw6(&cfg->gateway6)) < 0))) {
		stk__unlock();
		uls_node_stop();
		return rc;
	}
	stk__unlock();
	return rc;
}

void stk__node_name(const char *ifname, unsigned ifindex)
{
	size_t n = ifname ? strnlen(ifname, sizeof(stk__node.ifname) - 1) : 0;

	memset(stk__node.ifname, 0, sizeof(stk__node.ifname));
	if (n)
		memcpy(stk__node.ifname, ifname, n);
	else
		memcpy(stk__node.ifname, STK_IFNAME_DEFAULT, sizeof(STK_IFNAME_DEFAULT));
	stk__node.ifindex = ifindex && ifindex != 1 ? ifindex : STK_IFINDEX_DEFAULT;
}

/* The node's interface as the node's own sockets use it: what the POSIX shim shows
 * programs that look for their interfaces (apps/preload/ifaddr.c). */
int uls_interface(struct uls_interface *out)
{
	if (!out)
		return -EFAULT;
	stk__lock();
	if (!stk__node.up) {
		stk__unlock();
		return -ENETDOWN;
	}
	memset(out, 0, sizeof(*out));
	memcpy(out->name, stk__node.ifname, sizeof(out->name));
	out->index = stk__node.ifindex;
	const struct netif *n = &stk__node.netif;
	out->addr.s_addr = ip4_addr_get_u32(netif_ip4_addr(n));
	uint32_t mask = ntohl(ip4_addr_get_u32(netif_ip4_netmask(n)));
	out->prefix_len = (unsigned)__builtin_popcount(mask);
	out->gateway.s_addr = ip4_addr_get_u32(netif_ip4_gw(n));
	memcpy(out->mac, stk__node.mac, 6);
	out->mtu = stk__node.dev->mtu;
	if (stk__node.has_ip6) {
		out->addr6 = stk__node.addr6;
		out->prefix_len6 = stk__node.prefix_len6;
	}
	stk__unlock();
	return 0;
}

/* Does a closed connection still owe its peer something: data not yet acknowledged, or a
 * FIN? (core lock held) */
static bool close_pending(void)
{
	if (stk__handoff_pending())
		return true;  /* a fork child may still claim a connection (handoff.c) */
	for (struct tcp_pcb *p = tcp_active_pcbs; p; p = p->next) {
		if (p->unsent || p->unacked || p->state == FIN_WAIT_1 || p->state == CLOSING ||
		    p->state == LAST_ACK)
			return true;
	}
	return false;
}

void uls_node_stop(void)
{
	stk__lock();
	if (!stk__node.up) {
		stk__unlock_raw();
		return;
	}
	stk__sockets_shutdown();
	/* What the application sent before it closed must still arrive: the kernel keeps a
	 * closed socket's last segments going after close() and exit, but this stack dies with
	 * the process. So the stack thread runs on until closed connections have had their data
	 * and FIN acknowledged, for at most STOP_LINGER_MS (a peer that stopped answering
	 * gets nothing more; ulsd resets it once the lease ends).
	 *
	 * It waits for the stack's rounds (stop_cond), not in 5 ms naps: a receiver whose
	 * peer exited before it acknowledged the receiver's FIN (ulsbench's sender does:
	 * traced 2026-11-28) waits out the FIN's retransmission timeout, about 170 ms, and
	 * its 34 naps were a third of its context switches (docs/benchmarks.md, "What a
	 * ulstack process costs beyond its data"). */
	uint64_t deadline = stk__now_ms() + STOP_LINGER_MS;
	stk__node.stopping = true;
	while (!stk__node.lost && close_pending() && stk__now_ms() < deadline) {
		/* what stk__unlock() does before it lets go: what is queued leaves, and the
		 * stack thread learns that nobody drives */
		stk__drive_owed();
		stk__leave();
		stk__cond_wait_until(&stk__node.stop_cond, stk__now_ns() + STOP_LOOK_NS);
	}
	stk__node.stopping = false;
	stk__node.dev->ops->tx_flush(stk__node.dev);
	stk__node.running = false;
	stk__node.dev->ops->wake(stk__node.dev);
	stk__park_wake();
	stk__unlock_raw();
	pthread_join(stk__node.thread, NULL);
	stk__lock();
	stk__drive_stop();
	/* Connections left in FIN-WAIT-2 go to ulsd as they are (endpoints.c): listed in the
	 * last table, and not released, before netif_remove aborts their pcbs (the interface
	 * is down by then: no RST leaves). */
	stk__ep_keep_fin_wait_2();
	stk__conntab_last();
	netif_set_down(&stk__node.netif);
	netif_remove(&stk__node.netif);
	stk__node_set_up(false);
	stk__node.has_ip6 = false;
	stk__node.has_gw6 = false;
	stk__lease_unmark_rings();
	stk__node.dev->ops->close(stk__node.dev);
	stk__node.dev = NULL;
	stk__node_down_hook();
	stk__unlock_raw();
}
