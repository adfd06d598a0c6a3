/* libFuzzer target for the virtio-net header (netif/vnet.c): what the kernel puts before
 * every frame a TAP with offloads delivers, and what decides how far the stack trusts a
 * frame's checksum and whether it is a super-segment.
 *
 * Input: a 10-octet header, then the frame. Oracles besides the sanitizers: a header that
 * nif_vnet_parse() accepts yields an offload word whose checksum claim is one of the two
 * kinds and whose segment size is in range and only on TCP; a word that a sender could
 * also use (no "data valid" claim, which only the kernel makes) gives a header again
 * (nif_vnet_build) that parses back to the same word, or to the same without its segment
 * size when the segment's data fits in one piece (then it is not a super-segment).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "netif/vnet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t hdr[NIF_VNET_HLEN];
	uint32_t off = 0xdeadbeef, again = 0xdeadbeef;

	if (size < NIF_VNET_HLEN)
		return 0;
	const uint8_t *frame = data + NIF_VNET_HLEN;
	size_t len = size - NIF_VNET_HLEN;
	int e = nif_vnet_parse(data, NIF_VNET_HLEN, frame, len, &off);
	/* 0, or a reason that is no errno */
	CHECK(e == 0 || (-e >= NIF_VNET_REASON_BASE && -e < NIF_VNET_REASON_END));
	if (e < 0) {
		CHECK(off == 0xdeadbeef);  /* written only on success */
		return 0;
	}
	CHECK(!((off & NIF_OFF_CSUM_PARTIAL) && (off & NIF_OFF_CSUM_VALID)));
	if (nif_off_gso(off))
		CHECK(nif_off_gso(off) >= NIF_OFF_GSO_MIN && len >= 14 + 20 + 20 && frame[23] == 6);
	if (off & NIF_OFF_CSUM_VALID)
		return 0;
	CHECK(nif_vnet_build(hdr, frame, len, off) == 0);
	CHECK(nif_vnet_parse(hdr, NIF_VNET_HLEN, frame, len, &again) == 0);
	CHECK(again == off || (nif_off_gso(off) && again == (off & ~NIF_OFF_GSO_MASK)));
	return 0;
}
