/* The process side of a ring pair to ulsd, as a generic device (netif/dev.h). */
#ifndef ULS_NETIF_RINGDEV_H
#define ULS_NETIF_RINGDEV_H

#include "netif/dev.h"
#include "netif/ring.h"

/* offload: ulsd's node carries offload words (netif/vnet.h) in both rings. Take over memfd (the ring pair), rx_efd (ours: ulsd signals it when frames arrive) and
 * tx_efd (ulsd's: we signal it after publishing frames); all three are closed by close().
 * hup_fd (the lease, not taken over) is watched for hang-up: when ulsd goes away, wait()
 * returns -ECONNRESET, once. */
int nif_ringdev_open(struct nif_dev **out, unsigned mtu, enum nif_offload offload, int memfd, int rx_efd,
		     int tx_efd, int hup_fd);

#endif
