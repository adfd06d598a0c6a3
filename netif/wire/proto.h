/* Protocol constants of the wire formats ulstack reads and writes, named as their
 * specifications name them.
 *
 * Read first: RFC 894 (IPv4 over Ethernet), RFC 826 (ARP), RFC 791 §3.1 (IPv4 header),
 * RFC 9293 §3.1 (TCP header), RFC 768 (UDP), RFC 792 (ICMP), the virtio specification
 * v1.2 §5.1.6 (struct virtio_net_hdr).
 *
 * This header defines macros and nothing else: no includes, no types. It is shared by the C
 * code of every module (through netif/wire/wire.h) and by the BPF programs
 * (filter/datapath.bpf.c, compiled with clang -target bpf), which cannot include libc's
 * headers. Offsets are in octets from the start of the header they belong to; multi-octet
 * fields are in network order (big-endian) except the virtio-net header's, which is
 * little-endian.
 *
 * IPv6 (RFC 8200 §3, §4), ICMPv6 (RFC 4443 §2) and Neighbor Discovery (RFC 4861 §4) have
 * their sections at the end, and their views in wire.h next to IPv4's.
 */
#ifndef ULS_NETIF_WIRE_PROTO_H
#define ULS_NETIF_WIRE_PROTO_H

/* ---- Ethernet (RFC 894; IEEE 802.3) ------------------------------------------------- */
#define WIRE_ETH_ALEN            6      /* an Ethernet address */
#define WIRE_ETH_HLEN            14     /* destination, source, type */
#define WIRE_ETH_OFF_DST         0
#define WIRE_ETH_OFF_SRC         6
#define WIRE_ETH_OFF_TYPE        12
#define WIRE_ETH_GROUP_BIT       0x01   /* I/G bit of the first destination octet */
#define WIRE_ETH_MIN_FRAME       60     /* without the FCS: shorter frames are padded */
#define WIRE_ETHERTYPE_IPV4      0x0800
#define WIRE_ETHERTYPE_ARP       0x0806
#define WIRE_ETHERTYPE_VLAN      0x8100 /* IEEE 802.1Q tag */
#define WIRE_ETHERTYPE_IPV6      0x86dd

/* ---- ARP (RFC 826), for Ethernet and IPv4 only -------------------------------------- */
#define WIRE_ARP_LEN             28     /* ar$hrd .. ar$tpa with hln 6, pln 4 */
#define WIRE_ARP_OFF_HRD         0      /* ar$hrd: hardware address space */
#define WIRE_ARP_OFF_PRO         2      /* ar$pro: protocol address space (an ethertype) */
#define WIRE_ARP_OFF_HLN         4
#define WIRE_ARP_OFF_PLN         5
#define WIRE_ARP_OFF_OP          6
#define WIRE_ARP_OFF_SHA         8
#define WIRE_ARP_OFF_SPA         14
#define WIRE_ARP_OFF_THA         18
#define WIRE_ARP_OFF_TPA         24
#define WIRE_ARP_HRD_ETHERNET    1      /* ares_hrd$Ethernet */
#define WIRE_ARP_PLN_IPV4        4
#define WIRE_ARP_OP_REQUEST      1      /* ares_op$REQUEST */
#define WIRE_ARP_OP_REPLY        2      /* ares_op$REPLY */

/* ---- IPv4 (RFC 791 §3.1) ------------------------------------------------------------ */
#define WIRE_IPV4_VERSION        4
#define WIRE_IPV4_HLEN_MIN       20     /* IHL 5 */
#define WIRE_IPV4_HLEN_MAX       60     /* IHL 15 */
#define WIRE_IPV4_OFF_VIHL       0      /* Version (high nibble), IHL (low nibble) */
#define WIRE_IPV4_OFF_TOS        1
#define WIRE_IPV4_OFF_TOTAL_LEN  2
#define WIRE_IPV4_OFF_ID         4
#define WIRE_IPV4_OFF_FRAG       6      /* Flags and Fragment Offset */
#define WIRE_IPV4_OFF_TTL        8
#define WIRE_IPV4_OFF_PROTOCOL   9
#define WIRE_IPV4_OFF_CHECKSUM   10
#define WIRE_IPV4_OFF_SRC        12
#define WIRE_IPV4_OFF_DST        16
#define WIRE_IPV4_DF             0x4000 /* Don't Fragment */
#define WIRE_IPV4_MF             0x2000 /* More Fragments */
#define WIRE_IPV4_OFFMASK        0x1fff /* Fragment Offset, in 8-octet units */
#define WIRE_IPV4_MAX_LEN        65535  /* §3.2: Total Length is 16 bits */
#define WIRE_IPV4_MIN_MTU        68     /* §3.2: every module must forward 68 octets */
#define WIRE_IPV4_DEFAULT_TTL    64     /* RFC 1700 / RFC 1122 §3.2.1.7 (recommended) */
#define WIRE_IPOPT_EOL           0      /* §3.1 End of Option List: one octet */
#define WIRE_IPOPT_NOP           1      /* §3.1 No Operation: one octet */
/* Assigned Internet Protocol Numbers (IANA; RFC 791 "Protocol"). */
#define WIRE_IPPROTO_ICMP        1
#define WIRE_IPPROTO_TCP         6
#define WIRE_IPPROTO_UDP         17

/* ---- TCP (RFC 9293 §3.1) ------------------------------------------------------------ */
#define WIRE_TCP_HLEN_MIN        20     /* Data Offset 5 */
#define WIRE_TCP_HLEN_MAX        60
#define WIRE_TCP_OFF_SPORT       0
#define WIRE_TCP_OFF_DPORT       2
#define WIRE_TCP_OFF_SEQ         4
#define WIRE_TCP_OFF_ACK         8
#define WIRE_TCP_OFF_DOFF        12     /* Data Offset (high nibble) */
#define WIRE_TCP_OFF_FLAGS       13
#define WIRE_TCP_OFF_WINDOW      14
#define WIRE_TCP_OFF_CHECKSUM    16
#define WIRE_TCP_OFF_URGENT      18
/* Control bits as they sit in octet 13. */
#define WIRE_TCP_FIN             0x01
#define WIRE_TCP_SYN             0x02
#define WIRE_TCP_RST             0x04
#define WIRE_TCP_PSH             0x08
#define WIRE_TCP_ACK             0x10
#define WIRE_TCP_URG             0x20
#define WIRE_TCP_ECE             0x40   /* RFC 3168 §6.1 */
#define WIRE_TCP_CWR             0x80
/* §3.2 options */
#define WIRE_TCPOPT_EOL          0
#define WIRE_TCPOPT_NOP          1
#define WIRE_TCPOPT_MSS          2
#define WIRE_TCPOPT_WS           3      /* RFC 7323 §2 */
#define WIRE_TCPOPT_SACK_PERM    4      /* RFC 2018 */
#define WIRE_TCPOPT_SACK         5
#define WIRE_TCPOPT_TS           8      /* RFC 7323 §3 */
#define WIRE_TCP_DEFAULT_MSS     536    /* §3.7.1: the MSS when none was announced */

/* ---- UDP (RFC 768) ------------------------------------------------------------------ */
#define WIRE_UDP_HLEN            8
#define WIRE_UDP_OFF_SPORT       0
#define WIRE_UDP_OFF_DPORT       2
#define WIRE_UDP_OFF_LEN         4
#define WIRE_UDP_OFF_CHECKSUM    6

/* ---- ICMP (RFC 792) ----------------------------------------------------------------- */
#define WIRE_ICMP_HLEN           8      /* type, code, checksum, 4 octets by type */
#define WIRE_ICMP_OFF_TYPE       0
#define WIRE_ICMP_OFF_CODE       1
#define WIRE_ICMP_OFF_CHECKSUM   2
#define WIRE_ICMP_ECHO_REPLY     0
#define WIRE_ICMP_DEST_UNREACH   3
#define WIRE_ICMP_SOURCE_QUENCH  4
#define WIRE_ICMP_REDIRECT       5
#define WIRE_ICMP_ECHO           8
#define WIRE_ICMP_TIME_EXCEEDED  11
#define WIRE_ICMP_PARAM_PROBLEM  12
/* Destination Unreachable codes (RFC 792; RFC 1191 for 4) */
#define WIRE_ICMP_UNREACH_NET    0
#define WIRE_ICMP_UNREACH_HOST   1
#define WIRE_ICMP_UNREACH_PROTOCOL 2
#define WIRE_ICMP_UNREACH_PORT   3
#define WIRE_ICMP_UNREACH_NEEDFRAG 4
/* Time Exceeded codes */
#define WIRE_ICMP_TIMXCEED_INTRANS 0
#define WIRE_ICMP_TIMXCEED_REASS 1
/* An error quotes "the internet header plus the first 64 bits of the original datagram's
 * data". */
#define WIRE_ICMP_QUOTE_DATA     8

/* ---- virtio-net header (virtio v1.2 §5.1.6, without VIRTIO_NET_F_MRG_RXBUF) ---------- */
#define WIRE_VNET_HLEN           10
#define WIRE_VNET_OFF_FLAGS      0
#define WIRE_VNET_OFF_GSO_TYPE   1
#define WIRE_VNET_OFF_HDR_LEN    2
#define WIRE_VNET_OFF_GSO_SIZE   4
#define WIRE_VNET_OFF_CSUM_START 6
#define WIRE_VNET_OFF_CSUM_OFFSET 8
#define WIRE_VNET_F_NEEDS_CSUM   1      /* VIRTIO_NET_HDR_F_NEEDS_CSUM */
#define WIRE_VNET_F_DATA_VALID   2      /* VIRTIO_NET_HDR_F_DATA_VALID */
#define WIRE_VNET_GSO_NONE       0      /* VIRTIO_NET_HDR_GSO_NONE */
#define WIRE_VNET_GSO_TCPV4      1
#define WIRE_VNET_GSO_UDP        3
#define WIRE_VNET_GSO_TCPV6      4
#define WIRE_VNET_GSO_ECN        0x80

/* ---- IPv6 (RFC 8200 §3) ------------------------------------------------------------- */
#define WIRE_IPV6_VERSION        6
#define WIRE_IPV6_HLEN           40     /* the fixed header; options are extension headers */
#define WIRE_IPV6_ALEN           16
#define WIRE_IPV6_OFF_VTCFL      0      /* Version (4 bits), Traffic Class (8), Flow Label (20) */
#define WIRE_IPV6_OFF_PLEN       4      /* Payload Length: what follows the fixed header */
#define WIRE_IPV6_OFF_NEXT       6      /* Next Header */
#define WIRE_IPV6_OFF_HLIM       7      /* Hop Limit */
#define WIRE_IPV6_OFF_SRC        8
#define WIRE_IPV6_OFF_DST        24
#define WIRE_IPV6_MIN_MTU        1280   /* §5: every link carries 1280 octets */
#define WIRE_IPV6_DEFAULT_HLIM   64     /* Linux's net.ipv6.conf.*.hop_limit */
/* Extension headers (§4.1), Next Header values */
#define WIRE_IPPROTO_HOPOPTS     0      /* §4.3 Hop-by-Hop Options */
#define WIRE_IPPROTO_ROUTING     43     /* §4.4 */
#define WIRE_IPPROTO_FRAGMENT    44     /* §4.5 */
#define WIRE_IPPROTO_ICMPV6      58     /* RFC 4443 */
#define WIRE_IPPROTO_NONE        59     /* §4.7 No Next Header */
#define WIRE_IPPROTO_DSTOPTS     60     /* §4.6 Destination Options */
#define WIRE_IPV6_EXT_UNIT       8      /* Hdr Ext Len counts 8-octet units past the first 8 */
#define WIRE_IPV6_FRAG_HLEN      8      /* §4.5: Next Header, reserved, offset+M, Identification */
#define WIRE_IPV6_FRAG_OFFMASK   0xfff8 /* Fragment Offset in 8-octet units, shifted by 3 */
#define WIRE_IPV6_FRAG_M         0x0001 /* More Fragments */
/* How many extension headers wire_ipv6_upper() walks before it gives up (a chain longer
 * than any real packet carries is only there to exhaust a parser). */
#define WIRE_IPV6_EXT_MAX        8

/* ---- ICMPv6 (RFC 4443 §2.1) ---------------------------------------------------------- */
#define WIRE_ICMPV6_HLEN         8      /* type, code, checksum, and 4 octets every message has */
#define WIRE_ICMPV6_OFF_TYPE     0
#define WIRE_ICMPV6_OFF_CODE     1
#define WIRE_ICMPV6_OFF_CHECKSUM 2
#define WIRE_ICMPV6_DST_UNREACH  1      /* errors: types 0..127 */
#define WIRE_ICMPV6_PACKET_TOO_BIG 2
#define WIRE_ICMPV6_TIME_EXCEEDED 3
#define WIRE_ICMPV6_PARAM_PROB   4
#define WIRE_ICMPV6_ECHO_REQUEST 128    /* informational: 128..255 */
#define WIRE_ICMPV6_ECHO_REPLY   129
#define WIRE_ICMPV6_ERROR_MAX_TYPE 127  /* §2.1: "bit is 0 ... error messages" */
/* Destination Unreachable codes (§3.1) */
#define WIRE_ICMPV6_UNREACH_NOROUTE 0
#define WIRE_ICMPV6_UNREACH_ADMIN 1
#define WIRE_ICMPV6_UNREACH_ADDR 3
#define WIRE_ICMPV6_UNREACH_PORT 4
/* §2.4 (c): an error carries "as much of invoking packet as possible without the ICMPv6
 * packet exceeding the minimum IPv6 MTU". */
#define WIRE_ICMPV6_ERROR_MAX    WIRE_IPV6_MIN_MTU

/* ---- Neighbor Discovery (RFC 4861 §4) ------------------------------------------------ */
#define WIRE_ND_ROUTER_SOLICIT   133
#define WIRE_ND_ROUTER_ADVERT    134
#define WIRE_ND_NEIGHBOR_SOLICIT 135
#define WIRE_ND_NEIGHBOR_ADVERT  136
#define WIRE_ND_REDIRECT         137
#define WIRE_ND_NS_LEN           24     /* §4.3: type .. Target Address, before options */
#define WIRE_ND_NA_LEN           24     /* §4.4 */
#define WIRE_ND_OFF_FLAGS        4      /* NA: R, S, O in the first octet of Reserved */
#define WIRE_ND_OFF_TARGET       8
#define WIRE_ND_NA_ROUTER        0x80
#define WIRE_ND_NA_SOLICITED     0x40
#define WIRE_ND_NA_OVERRIDE      0x20
#define WIRE_ND_HOP_LIMIT        255    /* §7.1.1: off-link senders cannot send 255 */
/* Options (§4.6): type, length in units of 8 octets, value */
#define WIRE_ND_OPT_UNIT         8
#define WIRE_ND_OPT_SRC_LLADDR   1
#define WIRE_ND_OPT_TGT_LLADDR   2
#define WIRE_ND_OPT_LLADDR_LEN   8      /* §4.6.1 for Ethernet: type, 1, 6 octets */
/* Ethernet mapping of IPv6 multicast (RFC 2464 §7): 33:33 and the last 4 octets. */
#define WIRE_ETH_IPV6_MCAST0     0x33
#define WIRE_ETH_IPV6_MCAST1     0x33

#endif
