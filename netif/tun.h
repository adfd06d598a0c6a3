/* The tun driver's side of a TAP (netif/tap.c's helpers): attaching a queue with the
 * device's own multi-queue setting and its offloads, counting its queues, its MTU, and
 * detaching a queue. Internal to netif/ (prefix nif__tun_). */
#ifndef ULS_NETIF_TUN_H
#define ULS_NETIF_TUN_H

#include <stdbool.h>

/* One queue of the TAP ifname: its descriptor, or -errno; *mq in: try multi-queue first,
 * out: what the device is. */
int nif__tun_attach_queue(const char *ifname, bool offload, bool *mq);
/* The first queue of a persistent TAP with its offloads set (-ENODEV if the device is not
 * persistent: TUNSETIFF would have created it; -EBUSY while a previous owner's queue keeps
 * the device on the other virtio-net header setting). */
int nif__tun_attach(const char *ifname, bool offload, bool tso, bool *mq);
/* Queues attached to the device (sysfs); 0 when sysfs does not show it. */
unsigned nif__tun_count_queues(const char *ifname);
int nif__tun_mtu(const char *ifname, unsigned *mtu);

#endif
