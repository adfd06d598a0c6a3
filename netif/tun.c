/* The tun driver's side of a TAP: see tun.h. */
#include "netif/tun.h"
#include "netif/tap.h"
#include "netif/sys.h"
#include "netif/vnet.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

/* One queue of the TAP: TUNSETIFF with the device's own multi-queue setting (tun refuses
 * the other one with EINVAL). *mq says which it was. */
int nif__tun_attach_queue(const char *ifname, bool offload, bool *mq)
{
	struct ifreq ifr;
	int fd;

	if (!ifname || !*ifname || strlen(ifname) >= IFNAMSIZ)
		return -EINVAL;
	fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	for (int i = 0; i < 2; i++) {
		memset(&ifr, 0, sizeof(ifr));
		ifr.ifr_flags = IFF_TAP | IFF_NO_PI | (offload ? IFF_VNET_HDR : 0) |
				(*mq ? IFF_MULTI_QUEUE : 0);
		memcpy(ifr.ifr_name, ifname, strlen(ifname));
		if (nif_sys.ioctl(fd, TUNSETIFF, &ifr) == 0)
			return fd;
		if (errno != EINVAL || i == 1)
			break;
		*mq = !*mq;
	}
	int err = -errno;
	nif_sys.close(fd);
	return err;
}

int nif__tun_attach(const char *ifname, bool offload, bool tso, bool *mq)
{
	struct ifreq ifr;
	int fd;

	*mq = true;
	fd = nif__tun_attach_queue(ifname, offload, mq);
	if (fd < 0)
		return fd;
	/* TUNSETIFF creates the device when the name is free. The node must run on a TAP
	 * that someone configured (bridge, MTU), so a device we just created, which is not
	 * persistent, is an error; closing the fd removes it again. */
	if (nif_sys.ioctl(fd, TUNGETIFF, &ifr) < 0 || !(ifr.ifr_flags & IFF_PERSIST)) {
		nif_sys.close(fd);
		return -ENODEV;
	}
	/* tun takes a TUNSETIFF's features (IFF_VNET_HDR among them) only from the first
	 * queue of a device that has none, attached or detached. A previous owner's queue that
	 * outlives it (a killed process's io_uring goes after the process, with the files it
	 * holds) keeps that owner's setting, and every frame we write would then be read
	 * against the other one: each write failed (EINVAL), a node with no transmit at all
	 * (CI of stop 34, ulsd restarted from --offload on to off). Busy, as a queue that is
	 * still attached says (nif_tap_open): ulsd waits for it to go (server/ulsd.c). */
	if (!!(ifr.ifr_flags & IFF_VNET_HDR) != offload) {
		nif_sys.close(fd);
		return -EBUSY;
	}
	/* A persistent TAP keeps the offloads (and header size) a previous owner set: without
	 * a virtio-net header we must receive plain, fully checksummed frames, so reset them;
	 * with one, say exactly what we read: partial checksums and TCP super-segments of
	 * either family (linux/if_tun.h; netif/vnet.c takes GSO_TCPV4 and GSO_TCPV6, each
	 * only on a frame of its own family). The kernel then delivers GSO frames intact
	 * instead of segmenting them for us, and takes ours whole. Without tso, partial
	 * checksums alone: the kernel cuts any super-segment into wire-sized frames before
	 * it reaches us. */
	int hsz = NIF_VNET_HLEN;
	unsigned long feat = offload ? TUN_F_CSUM | (tso ? TUN_F_TSO4 | TUN_F_TSO6 : 0) : 0;
	if ((offload && nif_sys.ioctl(fd, TUNSETVNETHDRSZ, &hsz) < 0) ||
	    nif_sys.ioctl(fd, TUNSETOFFLOAD, feat) < 0) {
		int err = -errno;
		nif_sys.close(fd);
		return err;
	}
	return fd;
}

/* Queues attached to the device, from sysfs (tun keeps the real number of queues equal to
 * its attached ones); 0 when sysfs does not show the device. */
unsigned nif__tun_count_queues(const char *ifname)
{
	char path[96];
	unsigned n = 0;

	snprintf(path, sizeof(path), "/sys/class/net/%s/queues", ifname);
	DIR *d = opendir(path);
	if (!d)
		return 0;
	for (struct dirent *e; (e = readdir(d));)
		n += strncmp(e->d_name, "tx-", 3) == 0;
	closedir(d);
	return n;
}

int nif__tun_mtu(const char *ifname, unsigned *mtu)
{
	struct ifreq ifr;
	int s = nif_sys.socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (s < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, ifname, strlen(ifname));
	int rc = nif_sys.ioctl(s, SIOCGIFMTU, &ifr);
	int err = rc < 0 ? -errno : 0;
	nif_sys.close(s);
	if (err)
		return err;
	*mtu = (unsigned)ifr.ifr_mtu;
	return 0;
}

int nif_tap_queue_detach(int fd)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_DETACH_QUEUE;
	return nif_sys.ioctl(fd, TUNSETQUEUE, &ifr) < 0 ? -errno : 0;
}

