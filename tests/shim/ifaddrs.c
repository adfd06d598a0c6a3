/* The interfaces a C program finds under ulsrun (tests/shim/test_interfaces.py).
 *
 *   ifaddrs list        prints what getifaddrs, if_nameindex, if_nametoindex,
 *                       if_indextoname and the SIOCGIF* ioctls (on an AF_INET and an
 *                       AF_UNIX socket) say, one fact a line, for the test to compare
 *   ifaddrs serve PORT  walks getifaddrs for the first interface that is up, not the
 *                       loopback, with an IPv4 address; listens there on PORT, says
 *                       "serving IFNAME ADDR PORT", and echoes what one client sends
 *                       until it closes
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <netinet/in.h>
#include <netpacket/packet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *ip(const struct sockaddr *sa)
{
	static char buf[4][INET_ADDRSTRLEN];
	static int k;

	if (!sa)
		return "-";
	if (sa->sa_family != AF_INET)
		return "?";
	k = (k + 1) % 4;
	return inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf[k],
			 sizeof(buf[k]));
}

static const char *mac(const unsigned char *m)
{
	static char buf[18];

	snprintf(buf, sizeof(buf), "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4],
		 m[5]);
	return buf;
}

static void ioctls(const char *tag, int s, const char *name)
{
	struct ifreq r;

#define Q(req) (memset(&r, 0, sizeof(r)), snprintf(r.ifr_name, IFNAMSIZ, "%s", name), \
		ioctl(s, req, &r))
	if (Q(SIOCGIFINDEX) < 0) {
		printf("ioctl %s %s error %d\n", tag, name, errno);
		return;
	}
	int index = r.ifr_ifindex;
	Q(SIOCGIFFLAGS);
	int flags = r.ifr_flags & 0xffff;
	Q(SIOCGIFMTU);
	int mtu = r.ifr_mtu;
	Q(SIOCGIFADDR);
	char addr[INET_ADDRSTRLEN];
	snprintf(addr, sizeof(addr), "%s", ip(&r.ifr_addr));
	Q(SIOCGIFNETMASK);
	char mask[INET_ADDRSTRLEN];
	snprintf(mask, sizeof(mask), "%s", ip(&r.ifr_netmask));
	Q(SIOCGIFBRDADDR);
	char brd[INET_ADDRSTRLEN];
	snprintf(brd, sizeof(brd), "%s", ip(&r.ifr_broadaddr));
	Q(SIOCGIFHWADDR);
	int hatype = r.ifr_hwaddr.sa_family;
	printf("ioctl %s %s index %d flags 0x%x mtu %d addr %s mask %s brd %s hw %d %s\n", tag, name,
	       index, flags, mtu, addr, mask, brd, hatype,
	       mac((const unsigned char *)r.ifr_hwaddr.sa_data));
	memset(&r, 0, sizeof(r));
	r.ifr_ifindex = index;
	if (ioctl(s, SIOCGIFNAME, &r) == 0)
		printf("ioctl %s name %d %s\n", tag, index, r.ifr_name);
#undef Q
}

static int list(void)
{
	struct ifaddrs *ifa;

	if (getifaddrs(&ifa) < 0) {
		perror("getifaddrs");
		return 1;
	}
	for (struct ifaddrs *p = ifa; p; p = p->ifa_next) {
		if (!p->ifa_addr)
			continue;
		if (p->ifa_addr->sa_family == AF_PACKET) {
			const struct sockaddr_ll *ll = (const struct sockaddr_ll *)p->ifa_addr;
			printf("ifaddr %s packet index %d hatype %d mac %s flags 0x%x\n", p->ifa_name,
			       ll->sll_ifindex, ll->sll_hatype, mac(ll->sll_addr), p->ifa_flags);
		} else if (p->ifa_addr->sa_family == AF_INET) {
			printf("ifaddr %s inet %s mask %s brd %s flags 0x%x\n", p->ifa_name,
			       ip(p->ifa_addr), ip(p->ifa_netmask),
			       (p->ifa_flags & IFF_BROADCAST) ? ip(p->ifa_broadaddr) : "-",
			       p->ifa_flags);
		} else {
			printf("ifaddr %s family %d\n", p->ifa_name, p->ifa_addr->sa_family);
		}
	}
	struct if_nameindex *ni = if_nameindex();
	if (!ni) {
		perror("if_nameindex");
		return 1;
	}
	int inet = socket(AF_INET, SOCK_DGRAM, 0), unx = socket(AF_UNIX, SOCK_DGRAM, 0);
	if (inet < 0 || unx < 0) {
		perror("socket");
		return 1;
	}
	for (struct if_nameindex *p = ni; p->if_index; p++) {
		char back[IF_NAMESIZE];
		printf("nameindex %u %s\n", p->if_index, p->if_name);
		printf("nametoindex %s %u\n", p->if_name, if_nametoindex(p->if_name));
		printf("indextoname %u %s\n", p->if_index,
		       if_indextoname(p->if_index, back) ? back : "-");
		ioctls("inet", inet, p->if_name);
		ioctls("unix", unx, p->if_name);
	}
	errno = 0;
	unsigned none = if_nametoindex("nosuch0");
	printf("nametoindex nosuch %u errno %d\n", none, errno);
	/* SIOCGIFCONF: first the length a full answer needs, then the answer. */
	struct ifconf ifc = { .ifc_len = 0, .ifc_buf = NULL };
	if (ioctl(inet, SIOCGIFCONF, &ifc) < 0) {
		perror("SIOCGIFCONF");
		return 1;
	}
	printf("ifconf need %d\n", ifc.ifc_len);
	struct ifreq reqs[8];
	ifc.ifc_len = sizeof(reqs);
	ifc.ifc_req = reqs;
	if (ioctl(inet, SIOCGIFCONF, &ifc) < 0) {
		perror("SIOCGIFCONF");
		return 1;
	}
	for (int i = 0; i < ifc.ifc_len / (int)sizeof(struct ifreq); i++)
		printf("ifconf %s %s\n", reqs[i].ifr_name, ip(&reqs[i].ifr_addr));
	if_freenameindex(ni);
	freeifaddrs(ifa);
	close(inet);
	close(unx);
	return 0;
}

static int serve(int port)
{
	struct ifaddrs *ifa;
	struct sockaddr_in a;
	char name[IF_NAMESIZE] = "";

	if (getifaddrs(&ifa) < 0) {
		perror("getifaddrs");
		return 1;
	}
	for (struct ifaddrs *p = ifa; p && !name[0]; p = p->ifa_next) {
		if (!p->ifa_addr || p->ifa_addr->sa_family != AF_INET ||
		    (p->ifa_flags & IFF_LOOPBACK) || !(p->ifa_flags & IFF_UP))
			continue;
		memcpy(&a, p->ifa_addr, sizeof(a));
		snprintf(name, sizeof(name), "%s", p->ifa_name);
	}
	freeifaddrs(ifa);
	if (!name[0]) {
		fprintf(stderr, "no interface with an IPv4 address\n");
		return 1;
	}
	a.sin_port = htons((unsigned short)port);
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 4) < 0) {
		perror("listen");
		return 1;
	}
	printf("serving %s %s %d\n", name, ip((struct sockaddr *)&a), port);
	fflush(stdout);
	int c = accept(l, NULL, NULL);
	if (c < 0) {
		perror("accept");
		return 1;
	}
	static char buf[65536];
	long total = 0;
	for (;;) {
		ssize_t n = read(c, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			perror("read");
			return 1;
		}
		if (n == 0)
			break;
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(c, buf + off, (size_t)(n - off));
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0) {
				perror("write");
				return 1;
			}
			off += w;
		}
		total += n;
	}
	printf("echoed %ld\n", total);
	close(c);
	close(l);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 2 && !strcmp(argv[1], "list"))
		return list();
	if (argc == 3 && !strcmp(argv[1], "serve"))
		return serve(atoi(argv[2]));
	fprintf(stderr, "usage: ifaddrs list | ifaddrs serve PORT\n");
	return 2;
}
