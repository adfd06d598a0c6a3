/* The byte pattern every transfer sends and verifies: word w of a stream (bytes 8w..8w+7,
 * little-endian) is T[w mod 8192] XOR K(seed, w / 8192), with T a fixed table of random
 * words and K a per-64-KiB-block key (pattern.c). Any corrupted, lost, duplicated or
 * reordered byte changes what the receiver sees at that offset. */
#ifndef ULS_APPS_PATTERN_H
#define ULS_APPS_PATTERN_H

#include <stddef.h>
#include <stdint.h>

/* Fill buf with the pattern bytes at stream offsets [off, off + len). */
void bench__pattern_fill(uint64_t seed, uint64_t off, void *buf, size_t len);
/* Check buf against the pattern at [off, off + len); returns the stream offset of the first
 * wrong byte, or UINT64_MAX when every byte is right. */
uint64_t bench__pattern_check(uint64_t seed, uint64_t off, const void *buf, size_t len);

#endif
