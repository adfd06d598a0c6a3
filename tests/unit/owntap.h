/* A persistent TAP in a network namespace of the test process's own: the process moves
 * into a new namespace first (root only), so that nothing touches the machine's own, and
 * the namespace and the TAP go with the process. */
#ifndef ULS_TESTS_UNIT_OWNTAP_H
#define ULS_TESTS_UNIT_OWNTAP_H

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* 0, or -1 when this process cannot have a namespace and a TAP of its own. flags: more
 * of TUNSETIFF's (IFF_MULTI_QUEUE). */
static __attribute__((unused)) int owntap_make(const char *name, short flags)
{
	struct ifreq ifr = { 0 };
	int fd;

	if (geteuid() != 0 || unshare(CLONE_NEWNET) < 0)
		return -1;
	fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -1;
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name);
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | flags;
	int rc = ioctl(fd, TUNSETIFF, &ifr) < 0 || ioctl(fd, TUNSETPERSIST, 1) < 0 ? -1 : 0;
	close(fd);
	return rc;
}

#endif
