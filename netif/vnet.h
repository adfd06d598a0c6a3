/* The virtio-net header in front of every TAP frame when offloads are on, and the offload
 * word that travels with a frame through ulstack (ring slots, device calls).
 *
 * Read first: the virtio specification v1.2 §5.1.6 (struct virtio_net_hdr, "Packet
 * Transmission" and "Processing of Incoming Packets"), linux/virtio_net.h, linux/if_tun.h
 * (IFF_VNET_HDR, TUNSETOFFLOAD, TUNSETVNETHDRSZ), RFC 9293 §3.1 (the TCP checksum and its
 * pseudo-header), RFC 768 (the UDP checksum).
 *
 * The kernel is trusted to be the kernel, but what it hands us is still parsed like any
 * other input: a header that does not describe the frame behind it is refused with a reason
 * (counted by the caller), never followed.
 */
#ifndef ULS_NETIF_VNET_H
#define ULS_NETIF_VNET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "netif/wire/proto.h"

/* struct virtio_net_hdr without VIRTIO_NET_F_MRG_RXBUF: 10 octets, little-endian on every
 * machine we run on (TUNSETVNETLE is never needed on x86 and arm64). Its layout is the wire
 * module's (struct wire_vnet). */
#define NIF_VNET_HLEN WIRE_VNET_HLEN

/* The offload word: what a frame's checksum and segmentation are, in one uint32_t.
 * gso_size (low 16 bits) != 0: the frame is a TCP super-segment; the wire carries its
 * payload in pieces of gso_size octets, each with a copy of the headers. */
#define NIF_OFF_GSO_MASK     0xffffu
/* The TCP or UDP checksum field holds only the pseudo-header sum (RFC 9293 §3.1) of this
 * frame: on transmit, "complete it" (or let the receiver trust it); on receive, the frame
 * came from a sender on this machine and was never corrupted by a wire. */
#define NIF_OFF_CSUM_PARTIAL 0x10000u
/* Receive: the kernel verified the transport checksum (VIRTIO_NET_HDR_F_DATA_VALID). */
#define NIF_OFF_CSUM_VALID   0x20000u
#define NIF_OFF_KNOWN        (NIF_OFF_GSO_MASK | NIF_OFF_CSUM_PARTIAL | NIF_OFF_CSUM_VALID)

static inline unsigned nif_off_gso(uint32_t off) { return off & NIF_OFF_GSO_MASK; }
/* Whether a receiver may skip verifying the transport checksum. */
static inline bool nif_off_csum_ok(uint32_t off)
{
	return (off & (NIF_OFF_CSUM_PARTIAL | NIF_OFF_CSUM_VALID)) != 0;
}

/* The largest frame with offloads: a 65535-octet IPv4 datagram and its Ethernet header. */
#define NIF_OFF_FRAME_MAX (65535u + 14u)
/* The smallest gso_size we accept or produce: RFC 9293 §3.7.1's default MSS less the
 * largest TCP options. */
#define NIF_OFF_GSO_MIN 496u

/* Why a header was refused (the caller counts each). The functions return the negated
 * value, or 0. The values start above every errno (MAX_ERRNO is 4095) and past the wire
 * module's reasons, so a reason is never mistaken for an -errno. */
enum nif_vnet_reason {
	NIF_VNET_REASON_BASE = 4160,
	NIF_VNET_BAD_FLAGS = NIF_VNET_REASON_BASE, /* unknown flag bits, or a header shorter
	                                            * than 10 octets */
	NIF_VNET_BAD_GSO_TYPE,    /* not NONE, TCPV4 or TCPV6 (UDP, ECN alone, ...) */
	NIF_VNET_BAD_CSUM,        /* NEEDS_CSUM offsets not at a TCP/UDP checksum of the frame */
	NIF_VNET_BAD_GSO,         /* TCPV4 (TCPV6) on a frame that is not an unfragmented
	                           * IPv4 (IPv6) TCP segment, or a gso_size out of range */
	NIF_VNET_REASON_END
};
/* A short stable name for a reason (negated or not); "unknown" for anything else. */
const char *nif_vnet_reason_name(int reason);

/* Receive: read the header at hdr (hlen octets, NIF_VNET_HLEN) that the kernel put before
 * frame[0, len) and turn it into an offload word in *off. Returns 0 or -NIF_VNET_*; *off is
 * written only on success. */
int nif_vnet_parse(const uint8_t *hdr, size_t hlen, const uint8_t *frame, size_t len,
		   uint32_t *off);

/* Transmit: write the header for frame[0, len) with offload word off into hdr
 * (NIF_VNET_HLEN octets). off == 0 gives the all-zero header. The frame's own IPv4 or
 * IPv6 and TCP/UDP headers decide csum_start, csum_offset and the GSO type (TCPV4, TCPV6);
 * off only asks. Returns 0, or -NIF_VNET_* when
 * the request does not fit the frame (then hdr is zeroed). */
int nif_vnet_build(uint8_t hdr[NIF_VNET_HLEN], const uint8_t *frame, size_t len, uint32_t off);

/* The pseudo-header sum (RFC 9293 §3.1: source, destination, zero, protocol, length) of the
 * IPv4 datagram at ip, folded and not inverted, stored into the transport checksum field at
 * ip + ip_hlen + csum_off: what a sender with NEEDS_CSUM leaves there. For an IPv6 packet
 * (version 6 at ip) RFC 8200 §8.1's pseudo-header: the upper-layer length is the Payload
 * Length less the extension headers (ip_hlen - 40). */
void nif_vnet_pseudo_csum(uint8_t *ip, size_t ip_hlen, size_t csum_off);

#endif
