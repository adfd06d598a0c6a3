/* Bulk copies of packet data that avoid the string instruction where it is slow. */
#ifndef ULS_NETIF_COPY_H
#define ULS_NETIF_COPY_H

#include <stddef.h>

/* memcpy (no overlap), for any length: packet payload into and out of pbufs. */
void nif_copy(void *dst, const void *src, size_t len);

/* Copies nif_copy made with vector moves because of their short distance (for tests and
 * the benchmarks; not a drop, so not one of the node's counters). */
unsigned long nif_copy_short_distance(void);

#endif
