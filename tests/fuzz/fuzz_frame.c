/* libFuzzer target for the stack's first look at a received frame (netif/frame.c,
 * nif_frame_check): Ethernet, then the IPv4, ARP or IPv6 header's own lengths.
 *
 * Input: one octet that picks the largest frame the device allows, then the frame.
 * Oracles besides the sanitizers: the verdict is in range; a frame that passes as IPv4
 * or ARP names network-layer bytes inside the frame, and for IPv4 exactly the datagram's
 * total length (Ethernet padding trimmed).
 */
#include <stddef.h>
#include <stdint.h>

#include "netif/frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

static const uint8_t own_mac[WIRE_ETH_ALEN] = { 0x02, 0x75, 0x6c, 0x00, 0x00, 0x01 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t max_len[] = { 1514, 9014, 65549, 60, 14 };
	struct nif_frame_info info = { 0 };

	if (size < 1)
		return 0;
	size_t max = max_len[data[0] % (sizeof(max_len) / sizeof(max_len[0]))];
	const uint8_t *frame = data + 1;
	size_t len = size - 1;
	enum nif_verdict v = nif_frame_check(frame, len, max, own_mac, &info);
	CHECK((unsigned)v < NIF_VERDICT_COUNT);
	CHECK(nif_verdict_name(v) != NULL);
	if (nif_verdict_is_drop(v))
		return 0;
	CHECK(len <= max);
	CHECK(info.l3_off <= len && info.l3_len <= len - info.l3_off);
	if (v == NIF_PASS_IPV4) {
		CHECK(info.l3_len >= 20);
		CHECK(info.l3_len == (size_t)(frame[info.l3_off + 2] << 8 | frame[info.l3_off + 3]));
	}
	if (v == NIF_PASS_IPV6) {  /* RFC 8200 §3: 40 octets of header, then Payload Length */
		CHECK(info.l3_len >= 40 && frame[info.l3_off] >> 4 == 6);
		CHECK(info.l3_len == 40 + (size_t)(frame[info.l3_off + 4] << 8 | frame[info.l3_off + 5]));
	}
	return 0;
}
