/* The node's interfaces, as programs look for them: getifaddrs, if_nameindex,
 * if_nametoindex, if_indextoname, and the interface ioctls (SIOCGIF*) on sockets.
 *
 * A program under ulsrun has the node's address, not the kernel's: MPI's TCP transports,
 * Java's NetworkInterface and servers that bind per interface walk the interfaces and
 * bind to what they find, so they must find the node. Two interfaces are shown:
 *
 *   lo          index 1, 127.0.0.1/8, the kernel's loopback (traffic to 127.0.0.0/8
 *               passes to the kernel, DESIGN.md), flags and MTU as Linux gives a loopback
 *   the node's  the name and index of the node's TAP on the host that runs it (ulsd says
 *               them in HELLO), the node's IPv4 address and prefix, broadcast, MAC, MTU
 *               (uls_interface())
 *
 * Every call asks libuls (joining the node first, as a socket would), so getifaddrs,
 * if_nameindex and the ioctls always agree with each other and with the node's sockets.
 * Deviation: no IPv6 addresses are listed (the node has none yet; AF_INET6 sockets talk
 * IPv4, sockaddr.c); the AF_PACKET entries carry zeroed statistics; SIOCS* (setting) requests
 * and interface requests this file does not answer go to the kernel as before.
 */
#include "shim.h"

#include <ifaddrs.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <netinet/in.h>
#include <netpacket/packet.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "uls.h"

#ifndef IFF_LOWER_UP
#define IFF_LOWER_UP 0x10000  /* linux/if.h, which cannot be included with net/if.h */
#endif

#define LO_INDEX 1u
#define LO_MTU 65536u  /* Linux's loopback */

/* One interface as shown to the program. */
struct view_if {
	char name[IF_NAMESIZE];
	unsigned index;
	unsigned flags;
	unsigned mtu;
	unsigned short hatype;  /* ARPHRD_* */
	uint8_t mac[6];
	struct in_addr addr, mask, brd;
};

enum { VIEW_LO, VIEW_NODE, VIEW_N };

static struct in_addr mask_of(unsigned prefix_len)
{
	struct in_addr m = { htonl(prefix_len ? 0xffffffffu << (32 - prefix_len) : 0) };

	return m;
}

/* The two interfaces, asking libuls; joins the node first (-errno if it cannot). */
static int view(struct view_if v[VIEW_N])
{
	struct uls_interface ui;
	sigset_t old;

	shim__enter(&old);
	int rc = uls_attach(shim__ctl());  /* 0: joined now; -EALREADY: had a node */
	if (rc == 0 || rc == -EALREADY)
		rc = uls_interface(&ui);
	shim__leave(&old);
	if (rc < 0)
		return rc;
	memset(v, 0, sizeof(*v) * VIEW_N);
	memcpy(v[VIEW_LO].name, "lo", 3);
	v[VIEW_LO].index = LO_INDEX;
	v[VIEW_LO].flags = IFF_UP | IFF_LOOPBACK | IFF_RUNNING | IFF_LOWER_UP;
	v[VIEW_LO].mtu = LO_MTU;
	v[VIEW_LO].hatype = ARPHRD_LOOPBACK;
	v[VIEW_LO].addr.s_addr = htonl(INADDR_LOOPBACK);
	v[VIEW_LO].mask = mask_of(8);
	struct view_if *n = &v[VIEW_NODE];
	memcpy(n->name, ui.name, sizeof(n->name));
	n->name[sizeof(n->name) - 1] = '\0';
	n->index = ui.index;
	/* Deviation: no IFF_MULTICAST: the node's stacks do not join groups (no IGMP). */
	n->flags = IFF_UP | IFF_BROADCAST | IFF_RUNNING | IFF_LOWER_UP;
	n->mtu = ui.mtu;
	n->hatype = ARPHRD_ETHER;
	memcpy(n->mac, ui.mac, 6);
	n->addr = ui.addr;
	n->mask = mask_of(ui.prefix_len);
	n->brd.s_addr = ui.addr.s_addr | ~n->mask.s_addr;
	return 0;
}

static const struct view_if *by_name(const struct view_if v[VIEW_N], const char *name)
{
	for (int i = 0; i < VIEW_N; i++)
		if (!strncmp(v[i].name, name, IF_NAMESIZE))
			return &v[i];
	return NULL;
}

static const struct view_if *by_index(const struct view_if v[VIEW_N], unsigned index)
{
	for (int i = 0; i < VIEW_N; i++)
		if (v[i].index == index)
			return &v[i];
	return NULL;
}

/* ---- getifaddrs ---------------------------------------------------------------------- */

/* A list is one block, its first entry first (as glibc's is: free() of the head frees
 * it). The blocks handed out are remembered so that freeifaddrs() tells them from a list
 * the C library made. */
struct ifa_block {
	struct ifaddrs ent[2 * VIEW_N];      /* AF_PACKET for each, then AF_INET for each */
	struct sockaddr_ll ll[VIEW_N];
	struct sockaddr_in in[VIEW_N][3];    /* address, netmask, broadcast */
	struct rtnl_link_stats stats[VIEW_N];
	char names[VIEW_N][IF_NAMESIZE];
	struct ifa_block *next_given;
};

static pthread_mutex_t given_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ifa_block *given;

static void sin_set(struct sockaddr_in *s, struct in_addr a)
{
	s->sin_family = AF_INET;
	s->sin_addr = a;
}

SHIM_EXPORT int getifaddrs(struct ifaddrs **out)
{
	static int (*real)(struct ifaddrs **);
	struct view_if v[VIEW_N];

	shim__real_init();
	if (!shim__enabled()) {
		if (!real)
			real = shim__next("getifaddrs");
		return real(out);
	}
	if (!out)
		return shim__ret(-EFAULT);
	int rc = view(v);
	if (rc < 0)
		return shim__ret(rc);
	struct ifa_block *b = calloc(1, sizeof(*b));
	if (!b)
		return shim__ret(-ENOMEM);
	for (int i = 0; i < VIEW_N; i++) {
		memcpy(b->names[i], v[i].name, IF_NAMESIZE);
		struct ifaddrs *p = &b->ent[i], *a = &b->ent[VIEW_N + i];
		struct sockaddr_ll *ll = &b->ll[i];
		ll->sll_family = AF_PACKET;
		ll->sll_ifindex = (int)v[i].index;
		ll->sll_hatype = v[i].hatype;
		ll->sll_halen = 6;
		memcpy(ll->sll_addr, v[i].mac, 6);
		p->ifa_name = b->names[i];
		p->ifa_flags = v[i].flags;
		p->ifa_addr = (struct sockaddr *)ll;
		p->ifa_data = &b->stats[i];
		a->ifa_name = b->names[i];
		a->ifa_flags = v[i].flags;
		sin_set(&b->in[i][0], v[i].addr);
		sin_set(&b->in[i][1], v[i].mask);
		a->ifa_addr = (struct sockaddr *)&b->in[i][0];
		a->ifa_netmask = (struct sockaddr *)&b->in[i][1];
		if (v[i].flags & IFF_BROADCAST) {
			sin_set(&b->in[i][2], v[i].brd);
			a->ifa_broadaddr = (struct sockaddr *)&b->in[i][2];
		}
	}
	for (int i = 0; i + 1 < 2 * VIEW_N; i++)
		b->ent[i].ifa_next = &b->ent[i + 1];
	pthread_mutex_lock(&given_lock);
	b->next_given = given;
	given = b;
	pthread_mutex_unlock(&given_lock);
	*out = &b->ent[0];
	return 0;
}

SHIM_EXPORT void freeifaddrs(struct ifaddrs *ifa)
{
	static void (*real)(struct ifaddrs *);
	struct ifa_block **pp;

	shim__real_init();
	if (!ifa)
		return;
	pthread_mutex_lock(&given_lock);
	for (pp = &given; *pp && &(*pp)->ent[0] != ifa; pp = &(*pp)->next_given)
		;
	struct ifa_block *b = *pp;
	if (b)
		*pp = b->next_given;
	pthread_mutex_unlock(&given_lock);
	if (b) {
		free(b);
		return;
	}
	if (!real)
		real = shim__next("freeifaddrs");
	real(ifa);
}

/* ---- if_nameindex and friends -------------------------------------------------------- */

SHIM_EXPORT struct if_nameindex *if_nameindex(void)
{
	static struct if_nameindex *(*real)(void);
	struct view_if v[VIEW_N];

	shim__real_init();
	if (!shim__enabled()) {
		if (!real)
			real = shim__next("if_nameindex");
		return real();
	}
	int rc = view(v);
	if (rc < 0) {
		errno = -rc;
		return NULL;
	}
	/* Laid out as the C library's, so that either if_freenameindex frees it. */
	struct if_nameindex *r = calloc(VIEW_N + 1, sizeof(*r));
	for (int i = 0; r && i < VIEW_N; i++) {
		r[i].if_index = v[i].index;
		r[i].if_name = strdup(v[i].name);
		if (!r[i].if_name) {
			if_freenameindex(r);
			r = NULL;
		}
	}
	if (!r)
		errno = ENOBUFS;  /* what the C library says when it runs out */
	return r;
}

SHIM_EXPORT void if_freenameindex(struct if_nameindex *ni)
{
	if (!ni)
		return;
	for (struct if_nameindex *p = ni; p->if_name || p->if_index; p++)
		free(p->if_name);
	free(ni);
}

SHIM_EXPORT unsigned if_nametoindex(const char *name)
{
	static unsigned (*real)(const char *);
	struct view_if v[VIEW_N];

	shim__real_init();
	if (!shim__enabled()) {
		if (!real)
			real = shim__next("if_nametoindex");
		return real(name);
	}
	int rc = view(v);
	if (rc < 0) {
		errno = -rc;
		return 0;
	}
	const struct view_if *i = name ? by_name(v, name) : NULL;
	if (!i) {
		errno = ENODEV;
		return 0;
	}
	return i->index;
}

SHIM_EXPORT char *if_indextoname(unsigned index, char name[IF_NAMESIZE])
{
	static char *(*real)(unsigned, char *);
	struct view_if v[VIEW_N];

	shim__real_init();
	if (!shim__enabled()) {
		if (!real)
			real = shim__next("if_indextoname");
		return real(index, name);
	}
	int rc = view(v);
	if (rc < 0) {
		errno = -rc;
		return NULL;
	}
	const struct view_if *i = by_index(v, index);
	if (!i) {
		errno = ENXIO;  /* as glibc says for an index nobody has */
		return NULL;
	}
	memcpy(name, i->name, IF_NAMESIZE);
	return name;
}

/* ---- SIOCGIF* ------------------------------------------------------------------------ */

bool shim__if_request(unsigned long req)
{
	switch (req) {
	case SIOCGIFCONF:
	case SIOCGIFNAME:
	case SIOCGIFINDEX:
	case SIOCGIFFLAGS:
	case SIOCGIFADDR:
	case SIOCGIFNETMASK:
	case SIOCGIFBRDADDR:
	case SIOCGIFHWADDR:
	case SIOCGIFMTU:
	case SIOCGIFMETRIC:
		return true;
	default:
		return false;
	}
}

static void ifr_sin(struct sockaddr *sa, struct in_addr a)
{
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_addr = a };

	memcpy(sa, &s, sizeof(s));
}

/* SIOCGIFCONF: the interfaces with an IPv4 address, as netdevice(7) says. With a null
 * buffer, the length a full answer needs. */
static int ifconf(const struct view_if v[VIEW_N], struct ifconf *ifc)
{
	if (!ifc->ifc_buf) {
		ifc->ifc_len = (int)(VIEW_N * sizeof(struct ifreq));
		return 0;
	}
	if (ifc->ifc_len < 0)
		return -EINVAL;
	size_t room = (size_t)ifc->ifc_len / sizeof(struct ifreq), n = 0;
	for (int i = 0; i < VIEW_N && n < room; i++, n++) {
		struct ifreq r;
		memset(&r, 0, sizeof(r));
		memcpy(r.ifr_name, v[i].name, IF_NAMESIZE);
		ifr_sin(&r.ifr_addr, v[i].addr);
		memcpy(&ifc->ifc_req[n], &r, sizeof(r));
	}
	ifc->ifc_len = (int)(n * sizeof(struct ifreq));
	return 0;
}

/* An interface request (shim__if_request) on descriptor fd: the node's view instead of
 * the kernel's. The kernel answers these on sockets only, and so does this. */
int shim__if_ioctl(int fd, unsigned long req, void *arg)
{
	struct view_if v[VIEW_N];
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISSOCK(st.st_mode))
		return -ENOTTY;
	if (!arg)
		return -EFAULT;
	int rc = view(v);
	if (rc < 0)
		return rc;
	if (req == SIOCGIFCONF)
		return ifconf(v, arg);
	struct ifreq *ifr = arg;
	const struct view_if *i;
	if (req == SIOCGIFNAME) {
		i = by_index(v, (unsigned)ifr->ifr_ifindex);
		if (!i)
			return -ENODEV;
		memcpy(ifr->ifr_name, i->name, IF_NAMESIZE);
		return 0;
	}
	char name[IF_NAMESIZE];
	memcpy(name, ifr->ifr_name, IF_NAMESIZE);
	name[IF_NAMESIZE - 1] = '\0';  /* as the kernel does */
	i = by_name(v, name);
	if (!i)
		return -ENODEV;
	switch (req) {
	case SIOCGIFINDEX:
		ifr->ifr_ifindex = (int)i->index;
		break;
	case SIOCGIFFLAGS:
		ifr->ifr_flags = (short)(i->flags & 0xffff);
		break;
	case SIOCGIFADDR:
		ifr_sin(&ifr->ifr_addr, i->addr);
		break;
	case SIOCGIFNETMASK:
		ifr_sin(&ifr->ifr_netmask, i->mask);
		break;
	case SIOCGIFBRDADDR:
		ifr_sin(&ifr->ifr_broadaddr, i->brd);  /* 0.0.0.0 for lo, as Linux says */
		break;
	case SIOCGIFHWADDR:
		memset(&ifr->ifr_hwaddr, 0, sizeof(ifr->ifr_hwaddr));
		ifr->ifr_hwaddr.sa_family = i->hatype;
		memcpy(ifr->ifr_hwaddr.sa_data, i->mac, 6);
		break;
	case SIOCGIFMTU:
		ifr->ifr_mtu = (int)i->mtu;
		break;
	case SIOCGIFMETRIC:
		ifr->ifr_metric = 0;
		break;
	default:
		return -ENOTTY;
	}
	return 0;
}
