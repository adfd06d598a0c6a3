/* The Internet checksum (RFC 1071), shared by the stack (lwIP's LWIP_CHKSUM) and ulsd. */
#ifndef ULS_NETIF_CHKSUM_H
#define ULS_NETIF_CHKSUM_H

#include <stdint.h>

/* One's-complement sum of len bytes as 16-bit words in memory order, folded, not inverted,
 * in the byte order that stores correctly into a packet (lwIP's LWIP_CHKSUM contract). */
uint16_t nif_inet_chksum(const void *data, int len);

#endif
