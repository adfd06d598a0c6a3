/* The Internet checksum (RFC 1071), 64 bits at a time.
 *
 * lwIP's LWIP_CHKSUM contract: the one's-complement sum of the data taken as 16-bit words in
 * memory order, folded to 16 bits, not inverted, returned so that storing it in native
 * order puts the bytes right in the packet. Summing native loads gives exactly that (RFC 1071
 * §2(B): the sum is independent of byte order), so wider native loads are a free speedup:
 * 8 bytes per addition instead of 2 (baselines: 5.2 -> 12.6 GB/s on this machine).
 */
#include <endian.h>
#include <stdint.h>
#include <string.h>

#include "netif/chksum.h"

static uint64_t add_carry(uint64_t sum, uint64_t v)
{
	sum += v;
	return sum + (sum < v);
}

uint16_t nif_inet_chksum(const void *data, int len)
{
	const uint8_t *p = data;
	uint64_t sum = 0;
	size_t n = len > 0 ? (size_t)len : 0;

	while (n >= 32) {
		uint64_t w[4];
		memcpy(w, p, sizeof(w));
		sum = add_carry(sum, w[0]);
		sum = add_carry(sum, w[1]);
		sum = add_carry(sum, w[2]);
		sum = add_carry(sum, w[3]);
		p += 32;
		n -= 32;
	}
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, p, sizeof(w));
		sum = add_carry(sum, w);
		p += 8;
		n -= 8;
	}
	while (n >= 2) {
		uint16_t w;
		memcpy(&w, p, sizeof(w));
		sum = add_carry(sum, w);
		p += 2;
		n -= 2;
	}
	if (n) {
		/* The odd last byte is the first byte of a zero-padded 16-bit word. */
#if __BYTE_ORDER == __LITTLE_ENDIAN
		sum = add_carry(sum, p[0]);
#else
		sum = add_carry(sum, (uint64_t)p[0] << 8);
#endif
	}
	/* Fold 64 -> 16 bits with end-around carry. */
	sum = (sum & 0xffffffffu) + (sum >> 32);
	sum = (sum & 0xffffffffu) + (sum >> 32);
	sum = (sum & 0xffffu) + (sum >> 16);
	sum = (sum & 0xffffu) + (sum >> 16);
	return (uint16_t)sum;
}
