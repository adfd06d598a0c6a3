/* SipHash-2-4 (Aumasson & Bernstein, 2012): a keyed pseudorandom function for short
 * inputs, so that a sender who does not know the key cannot choose inputs that collide.
 * One implementation for the stack (ISNs, RFC 6528 §3; SYN cookies) and for SYN shedding
 * in both the stack and ulsd (netif/synshed.c). */
#ifndef ULS_NETIF_SIPHASH_H
#define ULS_NETIF_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t nif_siphash24(const uint8_t key[16], const void *data, size_t len);

#endif
