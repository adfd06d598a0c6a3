/* The bounded wait for transmit space on an io_uring, shared by netif/tap.c and
 * netif/qring.c (see txwait.c). */
#ifndef ULS_NETIF_TXWAIT_H
#define ULS_NETIF_TXWAIT_H

#include <liburing.h>
#include <stdbool.h>

/* Submits what the ring holds and waits for completions, in slices of 10 ms for at most
 * 500 ms, calling reap(arg) after each slice; true as soon as reap says a transmit buffer
 * is free, false when the time is up or the ring fails. The caller counts the outcome. */
bool nif__tx_wait(struct io_uring *ring, bool (*reap)(void *arg), void *arg);

#endif
