/* Ethernet frame checks done before any protocol code sees a frame.
 *
 * Read first: RFC 894 (IPv4 over Ethernet), RFC 826 (ARP), RFC 791 §3.1 (IPv4 header),
 * RFC 2464 (IPv6 over Ethernet), RFC 8200 §3 (IPv6 header).
 *
 * The checks are pure functions on byte arrays so that they can be unit-tested and fuzzed
 * without a device. Every frame gets exactly one verdict; each drop verdict has a counter.
 */
#ifndef ULS_NETIF_FRAME_H
#define ULS_NETIF_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "netif/wire/proto.h"

/* The MTUs an interface may be configured with. RFC 791: every host must accept 68-octet
 * datagrams; Total Length is 16 bits. */
#define NIF_MTU_MIN         WIRE_IPV4_MIN_MTU
#define NIF_MTU_MAX         WIRE_IPV4_MAX_LEN

/* Verdicts: the first ones pass the frame on, the rest are drop reasons. */
enum nif_verdict {
	NIF_PASS_IPV4,
	NIF_PASS_ARP,
	NIF_PASS_IPV6,
	NIF_DROP_RUNT,           /* shorter than an Ethernet header */
	NIF_DROP_OVERSIZE,       /* longer than MTU + header (or truncated by the device) */
	NIF_DROP_NOT_OURS,       /* unicast to another MAC (the bridge floods before it learns) */
	NIF_DROP_ETHERTYPE,      /* not IPv4, ARP or IPv6 (VLAN tags, ...) */
	NIF_DROP_IPV4_HEADER,    /* bad version, header length or total length */
	NIF_DROP_ARP_HEADER,     /* ARP not for Ethernet/IPv4, or too short */
	NIF_DROP_IPV6_HEADER,    /* IPv6: shorter than the fixed header, or version not 6 */
	NIF_DROP_IPV6_LENGTH,    /* IPv6: Payload Length runs past the end of the frame */
	NIF_DROP_IPV4_OPTIONS,   /* IPv4: an option of length 0 or 1, or past the header */
	NIF_VERDICT_COUNT
};

#define NIF_FRAME_LLBCAST 0x1u  /* link-layer broadcast */
#define NIF_FRAME_LLMCAST 0x2u  /* link-layer multicast */

/* What a passed frame holds: the network-layer bytes at frame[l3_off], l3_len long
 * (Ethernet padding already trimmed for IPv4 and IPv6). */
struct nif_frame_info {
	size_t l3_off;
	size_t l3_len;
	unsigned flags;
};

enum nif_verdict nif_frame_check(const uint8_t *frame, size_t len, size_t max_len,
				 const uint8_t own_mac[WIRE_ETH_ALEN],
				 struct nif_frame_info *info);
const char *nif_verdict_name(enum nif_verdict v);
bool nif_verdict_is_drop(enum nif_verdict v);

/* Parse "aa:bb:cc:dd:ee:ff"; returns false (and leaves mac alone) on anything else. */
bool nif_mac_parse(const char *s, uint8_t mac[WIRE_ETH_ALEN]);

#endif
