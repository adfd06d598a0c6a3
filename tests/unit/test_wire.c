/* netif/wire: the bounds-checked header views and the writers every module uses.
 *
 * Frames are built from one template (Ethernet, IPv4 without options, TCP without
 * options, 10 octets of data); each test spells out only what it changes. The property
 * every view must keep: it returns 0 and points only inside the octets it was given, or
 * returns a negated enum wire_reason and leaves its struct alone.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "netif/wire/wire.h"

#define DATA_LEN 10
#define TCP_LEN (WIRE_TCP_HLEN_MIN + DATA_LEN)
#define IP_LEN (WIRE_IPV4_HLEN_MIN + TCP_LEN)
#define FRAME_LEN (WIRE_ETH_HLEN + IP_LEN)

static const uint8_t mac_a[WIRE_ETH_ALEN] = { 0x02, 0x75, 0x6c, 0, 0, 1 };
static const uint8_t mac_b[WIRE_ETH_ALEN] = { 0x02, 0x75, 0x6c, 0, 0, 2 };
static const uint8_t addr_a[4] = { 198, 18, 0, 1 }, addr_b[4] = { 198, 18, 0, 2 };

struct frame {
	uint8_t b[256];
	size_t len;
};

/* The template, written with wire's own writers (their output is checked byte by byte in
 * writers_produce_rfc_layouts). */
static void build(struct frame *f)
{
	uint8_t *ip = f->b + WIRE_ETH_HLEN, *tcp = ip + WIRE_IPV4_HLEN_MIN;
	uint32_t a, b;

	memcpy(&a, addr_a, 4);
	memcpy(&b, addr_b, 4);
	memset(f->b, 0xa5, sizeof(f->b));
	wire_eth_write(f->b, mac_a, mac_b, WIRE_ETHERTYPE_IPV4);
	wire_ipv4_write(ip, WIRE_IPPROTO_TCP, b, a, IP_LEN, 0x1234, 64);
	wire_tcp_write(tcp, 40000, 80, 1000, 2000, WIRE_TCP_ACK | WIRE_TCP_PSH, 512);
	memset(tcp + WIRE_TCP_HLEN_MIN, 'x', DATA_LEN);
	f->len = FRAME_LEN;
}

static uint8_t *ip_of_frame(struct frame *f)
{
	return f->b + WIRE_ETH_HLEN;
}

/* Redo the header checksum after a test changed a field. */
static void ipv4_resum(uint8_t *ip, size_t hlen)
{
	wire_wr16(ip + WIRE_IPV4_OFF_CHECKSUM, 0);
	wire_wr16(ip + WIRE_IPV4_OFF_CHECKSUM, wire_sum_finish(wire_sum(0, ip, hlen)));
}

static void template_views_read_every_field(void **state)
{
	struct frame f;
	struct wire_eth eth;
	struct wire_ipv4 ip;
	struct wire_tcp tcp;
	uint32_t a;

	(void)state;
	build(&f);
	assert_int_equal(wire_eth_view(&eth, f.b, f.len), 0);
	assert_memory_equal(eth.dst, mac_a, WIRE_ETH_ALEN);
	assert_memory_equal(eth.src, mac_b, WIRE_ETH_ALEN);
	assert_int_equal(eth.type, WIRE_ETHERTYPE_IPV4);
	assert_int_equal(eth.payload_len, IP_LEN);

	assert_int_equal(wire_ipv4_view(&ip, eth.payload, eth.payload_len), 0);
	assert_int_equal(ip.hlen, WIRE_IPV4_HLEN_MIN);
	assert_int_equal(ip.total, IP_LEN);
	assert_int_equal(ip.proto, WIRE_IPPROTO_TCP);
	assert_int_equal(ip.ttl, 64);
	assert_int_equal(ip.id, 0x1234);
	memcpy(&a, addr_b, 4);
	assert_int_equal(ip.src, a);
	memcpy(&a, addr_a, 4);
	assert_int_equal(ip.dst, a);
	assert_int_equal(ip.options_len, 0);
	assert_int_equal(ip.data_len, TCP_LEN);
	assert_true(wire_ipv4_checksum_ok(&ip));
	assert_false(wire_ipv4_is_fragment(&ip));

	assert_int_equal(wire_tcp_view(&tcp, ip.data, ip.data_len), 0);
	assert_int_equal(tcp.sport, 40000);
	assert_int_equal(tcp.dport, 80);
	assert_int_equal(tcp.seq, 1000);
	assert_int_equal(tcp.ack, 2000);
	assert_int_equal(tcp.flags, WIRE_TCP_ACK | WIRE_TCP_PSH);
	assert_int_equal(tcp.window, 512);
	assert_int_equal(tcp.hlen, WIRE_TCP_HLEN_MIN);
	assert_int_equal(tcp.payload_len, DATA_LEN);
	assert_int_equal(tcp.payload[0], 'x');
	assert_int_equal(wire_tcp_seg_len(&tcp), DATA_LEN);
}

/* Every prefix shorter than a header is refused, whatever view reads it. */
static void headers_truncated_at_every_length_views_refuse(void **state)
{
	struct frame f;
	uint8_t *ip, *tcp;

	(void)state;
	build(&f);
	ip = ip_of_frame(&f);
	tcp = ip + WIRE_IPV4_HLEN_MIN;
	for (size_t n = 0; n < WIRE_ETH_HLEN; n++) {
		struct wire_eth v;
		assert_int_equal(wire_eth_view(&v, f.b, n), -WIRE_TRUNCATED);
	}
	for (size_t n = 0; n < WIRE_IPV4_HLEN_MIN; n++) {
		struct wire_ipv4 v;
		assert_int_equal(wire_ipv4_view(&v, ip, n), -WIRE_TRUNCATED);
		assert_int_equal(wire_ipv4_view_quoted(&v, ip, n), -WIRE_TRUNCATED);
	}
	/* A whole header but not the whole datagram Total Length announces. */
	for (size_t n = WIRE_IPV4_HLEN_MIN; n < IP_LEN; n++) {
		struct wire_ipv4 v;
		assert_int_equal(wire_ipv4_view(&v, ip, n), -WIRE_BAD_LENGTH);
	}
	for (size_t n = 0; n < WIRE_TCP_HLEN_MIN; n++) {
		struct wire_tcp v;
		struct wire_udp u;
		struct wire_icmp c;
		assert_int_equal(wire_tcp_view(&v, tcp, n), -WIRE_TRUNCATED);
		if (n < WIRE_UDP_HLEN)
			assert_int_equal(wire_udp_view(&u, tcp, n), -WIRE_TRUNCATED);
		if (n < WIRE_ICMP_HLEN)
			assert_int_equal(wire_icmp_view(&c, tcp, n), -WIRE_TRUNCATED);
	}
	for (size_t n = 0; n < WIRE_ARP_LEN; n++) {
		struct wire_arp v;
		assert_int_equal(wire_arp_view(&v, f.b, n), -WIRE_TRUNCATED);
	}
	for (size_t n = 0; n < WIRE_VNET_HLEN; n++) {
		struct wire_vnet v;
		assert_int_equal(wire_vnet_view(&v, f.b, n), -WIRE_TRUNCATED);
	}
}

static void null_pointer_views_refuse(void **state)
{
	struct wire_eth e;
	struct wire_ipv4 i;
	struct wire_tcp t;

	(void)state;
	assert_int_equal(wire_eth_view(&e, NULL, 100), -WIRE_TRUNCATED);
	assert_int_equal(wire_ipv4_view(&i, NULL, 100), -WIRE_TRUNCATED);
	assert_int_equal(wire_tcp_view(&t, NULL, 100), -WIRE_TRUNCATED);
}

/* RFC 791 §3.1: "the minimum value for a correct header is 5". */
static void ihl_below_five_ipv4_view_refuses(void **state)
{
	struct frame f;
	struct wire_ipv4 v;

	(void)state;
	for (uint8_t ihl = 0; ihl < 5; ihl++) {
		build(&f);
		ip_of_frame(&f)[0] = (uint8_t)(0x40 | ihl);
		assert_int_equal(wire_ipv4_view(&v, ip_of_frame(&f), IP_LEN), -WIRE_BAD_HLEN);
		assert_int_equal(wire_ipv4_view_quoted(&v, ip_of_frame(&f), IP_LEN),
				 -WIRE_BAD_HLEN);
	}
}

static void version_not_four_ipv4_view_refuses(void **state)
{
	struct frame f;
	struct wire_ipv4 v;

	(void)state;
	build(&f);
	ip_of_frame(&f)[0] = 0x65;
	assert_int_equal(wire_ipv4_view(&v, ip_of_frame(&f), IP_LEN), -WIRE_BAD_VERSION);
}

/* The header length past the octets given: options that do not fit. */
static void ihl_past_the_octets_ipv4_view_refuses(void **state)
{
	struct frame f;
	struct wire_ipv4 v;

	(void)state;
	build(&f);
	ip_of_frame(&f)[0] = 0x4f;  /* 60 octets of header */
	assert_int_equal(wire_ipv4_view(&v, ip_of_frame(&f), 40), -WIRE_BAD_HLEN);
	assert_int_equal(wire_ipv4_view_quoted(&v, ip_of_frame(&f), 59), -WIRE_BAD_HLEN);
}

/* Total Length beyond the frame (a lie or a truncation) and below the header are refused;
 * octets after Total Length are padding and not part of the datagram. */
static void total_length_beyond_frame_or_below_header_ipv4_view_refuses(void **state)
{
	struct frame f;
	struct wire_ipv4 v;
	uint8_t *ip;

	(void)state;
	build(&f);
	ip = ip_of_frame(&f);
	wire_wr16(ip + WIRE_IPV4_OFF_TOTAL_LEN, IP_LEN + 1);
	assert_int_equal(wire_ipv4_view(&v, ip, IP_LEN), -WIRE_BAD_LENGTH);
	wire_wr16(ip + WIRE_IPV4_OFF_TOTAL_LEN, WIRE_IPV4_HLEN_MIN - 1);
	assert_int_equal(wire_ipv4_view(&v, ip, IP_LEN), -WIRE_BAD_LENGTH);
	wire_wr16(ip + WIRE_IPV4_OFF_TOTAL_LEN, 0xffff);
	assert_int_equal(wire_ipv4_view(&v, ip, IP_LEN), -WIRE_BAD_LENGTH);

	wire_wr16(ip + WIRE_IPV4_OFF_TOTAL_LEN, IP_LEN - 4);
	assert_int_equal(wire_ipv4_view(&v, ip, IP_LEN), 0);
	assert_int_equal(v.total, IP_LEN - 4);
	assert_int_equal(v.data_len, TCP_LEN - 4);
}

/* A quoted header (RFC 792) describes a datagram that is not there: its Total Length is
 * not held against the octets, and data is what follows within them. */
static void quoted_header_total_length_not_checked(void **state)
{
	struct frame f;
	struct wire_ipv4 v;
	uint8_t *ip;

	(void)state;
	build(&f);
	ip = ip_of_frame(&f);
	assert_int_equal(wire_ipv4_view_quoted(&v, ip, WIRE_IPV4_HLEN_MIN + 8), 0);
	assert_int_equal(v.total, IP_LEN);
	assert_int_equal(v.data_len, 8);
}

/* Options: IHL 6 gives 4 octets of options, and the data starts after them. */
static void ipv4_options_view_points_past_them(void **state)
{
	uint8_t b[64];
	struct wire_ipv4 v;
	uint32_t a;

	(void)state;
	memcpy(&a, addr_a, 4);
	memset(b, 0, sizeof(b));
	wire_ipv4_write(b, WIRE_IPPROTO_UDP, a, a, 24 + 8, 1, 64);
	b[0] = 0x46;
	memcpy(b + 20, (const uint8_t[]){ 0x94, 0x04, 0, 0 }, 4);  /* Router Alert */
	ipv4_resum(b, 24);
	assert_int_equal(wire_ipv4_view(&v, b, 32), 0);
	assert_int_equal(v.hlen, 24);
	assert_int_equal(v.options_len, 4);
	assert_int_equal(v.options[0], 0x94);
	assert_ptr_equal(v.data, b + 24);
	assert_int_equal(v.data_len, 8);
	assert_true(wire_ipv4_checksum_ok(&v));
	b[21] ^= 1;
	assert_false(wire_ipv4_checksum_ok(&v));
}

/* RFC 791 §3.1: "Case 1: A single octet of option-type. Case 2: An option-type octet, an
 * option-length octet, and the actual option-data octets. The option-length octet counts
 * the option-type octet and the option-length octet as well as the option-data octets."
 * Every option area below is 8 octets (IHL 7). */
static void ipv4_options_malformed_check_refuses(void **state)
{
	static const struct {
		uint8_t o[8];
		int want;
	} cases[] = {
		{ { 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x00 }, 0 },   /* NOPs, EOL */
		{ { 0x00, 0x07, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff }, 0 },   /* EOL, then padding */
		{ { 0x94, 0x04, 0x00, 0x00, 0x9e, 0x04, 0x01, 0x02 }, 0 },   /* RA, an unknown one */
		{ { 0x07, 0x08, 0x04, 0, 0, 0, 0, 0 }, 0 },                  /* exactly the area */
		{ { 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x83, 0x02 }, 0 },   /* length 2, last */
		{ { 0x07, 0x00, 0, 0, 0, 0, 0, 0 }, -WIRE_BAD_OPTION },      /* length 0 */
		{ { 0x07, 0x01, 0, 0, 0, 0, 0, 0 }, -WIRE_BAD_OPTION },      /* length 1 */
		{ { 0x07, 0x09, 0x04, 0, 0, 0, 0, 0 }, -WIRE_BAD_OPTION },   /* one past the area */
		{ { 0x94, 0xff, 0, 0, 0, 0, 0, 0 }, -WIRE_BAD_OPTION },      /* far past it */
		{ { 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x83 }, -WIRE_BAD_OPTION }, /* no length */
		{ { 0x94, 0x04, 0, 0, 0x07, 0x05, 0x04, 0 }, -WIRE_BAD_OPTION },  /* the second past */
	};
	uint8_t b[40];
	struct wire_ipv4 v;
	uint32_t a;

	(void)state;
	memcpy(&a, addr_a, 4);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memset(b, 0, sizeof(b));
		wire_ipv4_write(b, WIRE_IPPROTO_UDP, a, a, 28 + 8, 1, 64);
		b[0] = 0x47;
		memcpy(b + 20, cases[i].o, 8);
		assert_int_equal(wire_ipv4_view(&v, b, 36), 0);
		assert_int_equal(wire_ipv4_options_check(&v), cases[i].want);
	}
	/* No options at all. */
	wire_ipv4_write(b, WIRE_IPPROTO_UDP, a, a, 20 + 8, 1, 64);
	assert_int_equal(wire_ipv4_view(&v, b, 28), 0);
	assert_int_equal(wire_ipv4_options_check(&v), 0);
	assert_string_equal(wire_reason_name(-WIRE_BAD_OPTION), "bad_option");
}

static void fragment_fields_ipv4_view_decodes(void **state)
{
	struct frame f;
	struct wire_ipv4 v;
	uint8_t *ip;

	(void)state;
	build(&f);
	ip = ip_of_frame(&f);
	wire_wr16(ip + WIRE_IPV4_OFF_FRAG, WIRE_IPV4_MF | 185);
	assert_int_equal(wire_ipv4_view(&v, ip, IP_LEN), 0);
	assert_true(wire_ipv4_mf(&v));
	assert_false(wire_ipv4_df(&v));
	assert_int_equal(wire_ipv4_frag_offset(&v), 1480);
	assert_true(wire_ipv4_is_fragment(&v));
	wire_wr16(ip + WIRE_IPV4_OFF_FRAG, WIRE_IPV4_DF);
	assert_int_equal(wire_ipv4_view(&v, ip, IP_LEN), 0);
	assert_false(wire_ipv4_is_fragment(&v));
	assert_true(wire_ipv4_df(&v));
}

/* RFC 9293 §3.1: Data Offset counts 32-bit words, at least 5, and the header (options
 * included) must lie within the segment. */
static void tcp_data_offset_below_five_or_past_segment_view_refuses(void **state)
{
	struct frame f;
	struct wire_tcp v;
	uint8_t *tcp;

	(void)state;
	build(&f);
	tcp = ip_of_frame(&f) + WIRE_IPV4_HLEN_MIN;
	for (uint8_t d = 0; d < 5; d++) {
		tcp[WIRE_TCP_OFF_DOFF] = (uint8_t)(d << 4);
		assert_int_equal(wire_tcp_view(&v, tcp, TCP_LEN), -WIRE_BAD_HLEN);
	}
	tcp[WIRE_TCP_OFF_DOFF] = 8 << 4;  /* 32 octets: past a 30-octet segment */
	assert_int_equal(wire_tcp_view(&v, tcp, TCP_LEN), -WIRE_BAD_HLEN);
}

static void tcp_options_view_points_at_them_and_payload_after(void **state)
{
	uint8_t seg[40];
	struct wire_tcp v;

	(void)state;
	memset(seg, 0, sizeof(seg));
	wire_tcp_write(seg, 1, 2, 3, 4, WIRE_TCP_SYN, 65535);
	seg[WIRE_TCP_OFF_DOFF] = 6 << 4;
	memcpy(seg + 20, (const uint8_t[]){ WIRE_TCPOPT_MSS, 4, 0x05, 0xb4 }, 4);
	assert_int_equal(wire_tcp_view(&v, seg, 24), 0);
	assert_int_equal(v.options_len, 4);
	assert_int_equal(v.options[0], WIRE_TCPOPT_MSS);
	assert_int_equal(v.payload_len, 0);
	assert_int_equal(wire_tcp_seg_len(&v), 1);  /* a SYN occupies one */
}

static void udp_view_reports_length_field_unchecked(void **state)
{
	uint8_t d[12] = { 0x12, 0x34, 0x00, 0x35, 0x00, 0x03, 0xab, 0xcd, 1, 2, 3, 4 };
	struct wire_udp v;

	(void)state;
	assert_int_equal(wire_udp_view(&v, d, sizeof(d)), 0);
	assert_int_equal(v.sport, 0x1234);
	assert_int_equal(v.dport, 53);
	assert_int_equal(v.len, 3);          /* below 8: the caller's to refuse */
	assert_int_equal(v.checksum, 0xabcd);
	assert_int_equal(v.payload_len, 4);
}

static void icmp_view_and_error_types(void **state)
{
	uint8_t d[8] = { WIRE_ICMP_DEST_UNREACH, WIRE_ICMP_UNREACH_PORT, 0, 0, 0, 0, 0, 0 };
	struct wire_icmp v;

	(void)state;
	assert_int_equal(wire_icmp_view(&v, d, sizeof(d)), 0);
	assert_int_equal(v.type, WIRE_ICMP_DEST_UNREACH);
	assert_int_equal(v.code, WIRE_ICMP_UNREACH_PORT);
	assert_int_equal(v.body_len, 0);
	assert_true(wire_icmp_is_error(WIRE_ICMP_DEST_UNREACH));
	assert_true(wire_icmp_is_error(WIRE_ICMP_TIME_EXCEEDED));
	assert_false(wire_icmp_is_error(WIRE_ICMP_ECHO));
	assert_false(wire_icmp_is_error(WIRE_ICMP_ECHO_REPLY));
}

/* RFC 826: only Ethernet hardware addresses and IPv4 protocol addresses are read. */
static void arp_not_ethernet_ipv4_view_refuses(void **state)
{
	uint8_t a[WIRE_ARP_LEN + 18];
	struct wire_arp v;
	uint32_t spa, tpa;

	(void)state;
	memcpy(&spa, addr_a, 4);
	memcpy(&tpa, addr_b, 4);
	memset(a, 0, sizeof(a));
	wire_arp_write(a, WIRE_ARP_OP_REQUEST, mac_a, spa, mac_b, tpa);
	assert_int_equal(wire_arp_view(&v, a, sizeof(a)), 0);  /* padding after it */
	assert_int_equal(v.op, WIRE_ARP_OP_REQUEST);
	assert_memory_equal(v.sha, mac_a, WIRE_ETH_ALEN);
	assert_int_equal(v.spa, spa);
	assert_memory_equal(v.tha, mac_b, WIRE_ETH_ALEN);
	assert_int_equal(v.tpa, tpa);
	static const size_t fields[] = { WIRE_ARP_OFF_HRD + 1, WIRE_ARP_OFF_PRO,
					 WIRE_ARP_OFF_HLN, WIRE_ARP_OFF_PLN };
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		a[fields[i]] ^= 0x10;
		assert_int_equal(wire_arp_view(&v, a, sizeof(a)), -WIRE_BAD_FORMAT);
		a[fields[i]] ^= 0x10;
	}
}

/* The layouts the writers produce, octet by octet, against the RFC figures. */
static void writers_produce_rfc_layouts(void **state)
{
	struct frame f;
	static const uint8_t ip_want[20] = {
		0x45, 0, 0, IP_LEN, 0x12, 0x34, 0, 0, 64, 6, 0, 0,
		198, 18, 0, 2, 198, 18, 0, 1 };
	static const uint8_t tcp_want[20] = {
		0x9c, 0x40, 0, 80, 0, 0, 0x03, 0xe8, 0, 0, 0x07, 0xd0, 0x50, 0x18, 0x02, 0x00,
		0, 0, 0, 0 };
	uint8_t ip[20];

	(void)state;
	build(&f);
	assert_memory_equal(f.b, mac_a, 6);
	assert_memory_equal(f.b + 6, mac_b, 6);
	assert_int_equal(f.b[12], 0x08);
	assert_int_equal(f.b[13], 0x00);
	memcpy(ip, ip_of_frame(&f), 20);
	/* RFC 1071: the checksum makes the header sum to all ones. */
	assert_int_equal(wire_sum_finish(wire_sum(0, ip, 20)), 0);
	ip[10] = ip[11] = 0;
	assert_memory_equal(ip, ip_want, 20);
	assert_memory_equal(ip_of_frame(&f) + 20, tcp_want, 20);
}

/* RFC 1071 §3 example: the sum of 00 01 f2 03 f4 f5 f6 f7 is 0xddf2; an odd length is
 * padded with a zero octet. */
static void internet_checksum_matches_rfc1071_example(void **state)
{
	static const uint8_t d[] = { 0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7 };

	(void)state;
	assert_int_equal(wire_sum_finish(wire_sum(0, d, sizeof(d))), (uint16_t)~0xddf2);
	assert_int_equal(wire_sum_finish(wire_sum(0, (const uint8_t[]){ 0x12 }, 1)),
			 (uint16_t)~0x1200);
}

static void vnet_header_little_endian_round_trip(void **state)
{
	uint8_t b[WIRE_VNET_HLEN];
	struct wire_vnet in = { .flags = WIRE_VNET_F_NEEDS_CSUM, .gso_type = WIRE_VNET_GSO_TCPV4,
				.hdr_len = 66, .gso_size = 1448, .csum_start = 34,
				.csum_offset = 16 }, out;

	(void)state;
	wire_vnet_write(b, &in);
	assert_int_equal(b[WIRE_VNET_OFF_GSO_SIZE], 1448 & 0xff);  /* little-endian */
	assert_int_equal(b[WIRE_VNET_OFF_GSO_SIZE + 1], 1448 >> 8);
	assert_int_equal(wire_vnet_view(&out, b, sizeof(b)), 0);
	assert_memory_equal(&in, &out, sizeof(in));
}

/* A view that refuses leaves its struct as it was. */
static void refused_view_leaves_struct_untouched(void **state)
{
	struct frame f;
	struct wire_ipv4 v, before;

	(void)state;
	build(&f);
	memset(&v, 0x5a, sizeof(v));
	before = v;
	ip_of_frame(&f)[0] = 0x44;
	assert_true(wire_ipv4_view(&v, ip_of_frame(&f), IP_LEN) < 0);
	assert_memory_equal(&v, &before, sizeof(v));
}

/* ---- IPv6, ICMPv6, ND ---------------------------------------------------------------- */

static size_t unhex(uint8_t *out, const char *hex)
{
	size_t n = 0;

	for (; hex[0] && hex[1]; hex += 2) {
		unsigned v;
		sscanf(hex, "%2x", &v);
		out[n++] = (uint8_t)v;
	}
	return n;
}

/* Scapy's IPv6()/ICMPv6EchoRequest(id=0x1234, seq=1, data=b'abcd') from 2001:db8::1 to
 * 2001:db8::2: checksum 0x4d48. */
#define ECHO6_HEX "60000000000c3a4020010db800000000000000000000000120010db800000000" \
		  "000000000000000280004d481234000161626364"
/* Scapy's NS from fe80::200:ff:fe00:1 to ff02::1:ff00:2 for 2001:db8::2, with a Source
 * Link-Layer Address option 02:00:00:00:00:01: checksum 0x4a5f. */
#define NS_HEX "6000000000203afffe80000000000000020000fffe000001ff02000000000000" \
	       "00000001ff00000287004a5f0000000020010db8000000000000000000000002" \
	       "0101020000000001"

static void ipv6_view_reads_fields_and_icmpv6_checksum_matches_scapy(void **state)
{
	uint8_t b[128];
	size_t n = unhex(b, ECHO6_HEX);
	struct wire_ipv6 v;
	struct wire_icmp ic;
	struct wire_ipv6_upper u;

	(void)state;
	assert_int_equal(wire_ipv6_view(&v, b, n), 0);
	assert_int_equal(v.plen, 12);
	assert_int_equal(v.next, WIRE_IPPROTO_ICMPV6);
	assert_int_equal(v.hlim, 64);
	assert_ptr_equal(v.src, b + 8);
	assert_ptr_equal(v.dst, b + 24);
	assert_int_equal(v.payload_len, 12);
	assert_int_equal(wire_ipv6_upper(&u, &v), 0);
	assert_int_equal(u.proto, WIRE_IPPROTO_ICMPV6);
	assert_int_equal(u.off, WIRE_IPV6_HLEN);
	assert_int_equal(u.nh_off, WIRE_IPV6_OFF_NEXT);
	assert_false(u.fragment);
	assert_int_equal(wire_icmp_view(&ic, v.payload, v.payload_len), 0);
	assert_int_equal(ic.type, WIRE_ICMPV6_ECHO_REQUEST);
	assert_int_equal(ic.checksum, 0x4d48);
	assert_true(wire_icmpv6_checksum_ok(v.src, v.dst, v.payload, v.payload_len));
	/* set_checksum recomputes the same value; one flipped bit is caught. */
	wire_icmpv6_set_checksum(v.src, v.dst, b + 40, 12);
	assert_int_equal(wire_rd16(b + 42), 0x4d48);
	b[47] ^= 1;
	assert_false(wire_icmpv6_checksum_ok(v.src, v.dst, v.payload, v.payload_len));
	/* The pseudo-header's Next Header and length count (RFC 8200 §8.1). */
	b[47] ^= 1;
	uint32_t sum = wire_sum_pseudo6(0, v.src, v.dst, WIRE_IPPROTO_UDP, 12);
	assert_int_not_equal(wire_sum_finish(wire_sum(sum, b + 40, 12)), 0);
}

static void ipv6_version_and_payload_length_view_refuses(void **state)
{
	uint8_t b[128];
	size_t n = unhex(b, ECHO6_HEX);
	struct wire_ipv6 v;

	(void)state;
	for (size_t l = 0; l < WIRE_IPV6_HLEN; l++)
		assert_int_equal(wire_ipv6_view(&v, b, l), -WIRE_TRUNCATED);
	/* Payload Length beyond the octets: refused; shorter: the rest is padding. */
	assert_int_equal(wire_ipv6_view(&v, b, n - 1), -WIRE_BAD_LENGTH);
	assert_int_equal(wire_ipv6_view(&v, b, n + 6), 0);
	assert_int_equal(v.payload_len, 12);
	/* The quoted view does not hold Payload Length against the octets. */
	assert_int_equal(wire_ipv6_view_quoted(&v, b, n - 4), 0);
	assert_int_equal(v.payload_len, 8);
	b[0] = 0x40;
	assert_int_equal(wire_ipv6_view(&v, b, n), -WIRE_BAD_VERSION);
	assert_int_equal(wire_ipv6_view_quoted(&v, b, n), -WIRE_BAD_VERSION);
}

/* A packet with Hop-by-Hop, Destination Options, Fragment and then UDP. */
static size_t ext_chain(uint8_t *b, unsigned ndst)
{
	static const uint8_t a[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 1 };
	size_t off = WIRE_IPV6_HLEN;

	memset(b, 0, 512);
	b[off] = WIRE_IPPROTO_DSTOPTS;       /* hop-by-hop, 8 octets */
	b[off + 1] = 0;
	off += 8;
	for (unsigned i = 0; i < ndst; i++) {
		b[off] = i + 1 < ndst ? WIRE_IPPROTO_DSTOPTS : WIRE_IPPROTO_FRAGMENT;
		b[off + 1] = 1;                  /* 16 octets */
		off += 16;
	}
	b[off] = WIRE_IPPROTO_UDP;
	wire_wr16(b + off + 2, 185 << 3 | WIRE_IPV6_FRAG_M);
	wire_wr32(b + off + 4, 0xdeadbeef);
	off += 8;
	off += 8;                                /* the UDP header */
	wire_ipv6_write(b, WIRE_IPPROTO_HOPOPTS, a, a, (uint16_t)(off - WIRE_IPV6_HLEN), 64);
	return off;
}

static void ipv6_extension_headers_walked_bounded(void **state)
{
	uint8_t b[512];
	size_t n = ext_chain(b, 1);
	struct wire_ipv6 v;
	struct wire_ipv6_upper u;

	(void)state;
	assert_int_equal(wire_ipv6_view(&v, b, n), 0);
	assert_int_equal(wire_ipv6_upper(&u, &v), 0);
	assert_int_equal(u.proto, WIRE_IPPROTO_UDP);
	assert_int_equal(u.off, WIRE_IPV6_HLEN + 8 + 16 + 8);
	assert_int_equal(u.nh_off, WIRE_IPV6_HLEN + 8 + 16);
	assert_int_equal(u.nhdrs, 3);
	assert_true(u.fragment);
	assert_true(u.frag_more);
	assert_int_equal(u.frag_off, 185 * 8);
	assert_int_equal(u.frag_id, 0xdeadbeef);
	/* A later fragment: its data starts after the Fragment header, and is not walked
	 * as headers even when the Fragment header names one (RFC 8200 §4.5). */
	assert_int_equal(u.frag_data_off, WIRE_IPV6_HLEN + 8 + 16 + 8);
	b[WIRE_IPV6_HLEN + 8 + 16] = WIRE_IPPROTO_DSTOPTS;
	b[u.off + 1] = 200;                      /* as a header it would run past the end */
	assert_int_equal(wire_ipv6_upper(&u, &v), 0);
	assert_int_equal(u.proto, WIRE_IPPROTO_DSTOPTS);
	assert_int_equal(u.off, WIRE_IPV6_HLEN + 8 + 16 + 8);
	b[WIRE_IPV6_HLEN + 8 + 16] = WIRE_IPPROTO_UDP;
	b[u.off + 1] = 0;
	/* An extension header cut off by Payload Length. */
	wire_wr16(b + WIRE_IPV6_OFF_PLEN, 8 + 10);
	assert_int_equal(wire_ipv6_view(&v, b, n), 0);
	assert_int_equal(wire_ipv6_upper(&u, &v), -WIRE_BAD_LENGTH);
	/* Too many: WIRE_IPV6_EXT_MAX are walked, one more is refused. */
	n = ext_chain(b, WIRE_IPV6_EXT_MAX - 2);
	assert_int_equal(wire_ipv6_view(&v, b, n), 0);
	assert_int_equal(wire_ipv6_upper(&u, &v), 0);
	n = ext_chain(b, WIRE_IPV6_EXT_MAX - 1);
	assert_int_equal(wire_ipv6_view(&v, b, n), 0);
	assert_int_equal(wire_ipv6_upper(&u, &v), 0);  /* a later fragment: the walk ends there */
	wire_wr16(b + WIRE_IPV6_HLEN + 8 + (WIRE_IPV6_EXT_MAX - 1) * 16 + 2, WIRE_IPV6_FRAG_M);
	assert_int_equal(wire_ipv6_upper(&u, &v), -WIRE_TOO_DEEP);  /* a first one: walked on */
	/* Hop-by-Hop anywhere but first (RFC 8200 §4.1). */
	n = ext_chain(b, 1);
	b[WIRE_IPV6_HLEN] = WIRE_IPPROTO_HOPOPTS;
	assert_int_equal(wire_ipv6_view(&v, b, n), 0);
	assert_int_equal(wire_ipv6_upper(&u, &v), -WIRE_BAD_FORMAT);
}

static void nd_view_finds_lladdr_and_refuses_bad_options(void **state)
{
	uint8_t b[128];
	size_t n = unhex(b, NS_HEX);
	struct wire_ipv6 v;
	struct wire_nd nd;
	static const uint8_t mac[6] = { 2, 0, 0, 0, 0, 1 };

	(void)state;
	assert_int_equal(wire_ipv6_view(&v, b, n), 0);
	assert_true(wire_icmpv6_checksum_ok(v.src, v.dst, v.payload, v.payload_len));
	assert_int_equal(wire_nd_view(&nd, v.payload, v.payload_len), 0);
	assert_int_equal(nd.type, WIRE_ND_NEIGHBOR_SOLICIT);
	assert_ptr_equal(nd.target, b + 40 + 8);
	assert_non_null(nd.lladdr);
	assert_memory_equal(nd.lladdr, mac, 6);
	/* Without options: no address; shorter than 24: refused (RFC 4861 §7.1.1). */
	assert_int_equal(wire_nd_view(&nd, v.payload, 24), 0);
	assert_null(nd.lladdr);
	assert_int_equal(wire_nd_view(&nd, v.payload, 23), -WIRE_TRUNCATED);
	/* An option of length 0 (§4.6), or past the end. */
	b[40 + 24 + 1] = 0;
	assert_int_equal(wire_nd_view(&nd, v.payload, v.payload_len), -WIRE_BAD_FORMAT);
	b[40 + 24 + 1] = 2;
	assert_int_equal(wire_nd_view(&nd, v.payload, v.payload_len), -WIRE_BAD_LENGTH);
	/* Not NS or NA. */
	b[40 + 24 + 1] = 1;
	b[40] = WIRE_ICMPV6_ECHO_REQUEST;
	assert_int_equal(wire_nd_view(&nd, v.payload, v.payload_len), -WIRE_BAD_FORMAT);
}

static void ipv6_address_helpers_follow_rfc4291_and_rfc2464(void **state)
{
	static const uint8_t mac[6] = { 0x02, 0x75, 0x6c, 0x00, 0x00, 0x01 };
	static const uint8_t ll[16] = { 0xfe, 0x80, [8] = 0x00, 0x75, 0x6c, 0xff, 0xfe, 0x00, 0x00, 0x01 };
	uint8_t a[16], out[16], m[6], want[16];

	(void)state;
	wire_ipv6_link_local(out, mac);
	assert_memory_equal(out, ll, 16);
	unhex(a, "20010db8000000000000000012345678");
	unhex(want, "ff0200000000000000000001ff345678");   /* scapy in6_getnsma */
	wire_ipv6_solicited_node(out, a);
	assert_memory_equal(out, want, 16);
	assert_true(wire_ipv6_is_multicast(out));
	assert_false(wire_ipv6_is_multicast(a));
	wire_ipv6_mcast_mac(m, out);
	static const uint8_t wm[6] = { 0x33, 0x33, 0xff, 0x34, 0x56, 0x78 };
	assert_memory_equal(m, wm, 6);
	memset(a, 0, 16);
	assert_true(wire_ipv6_is_unspecified(a));
}

/* Reasons are not errnos, and each has its own name. */
static void reasons_above_errno_range_with_distinct_names(void **state)
{
	(void)state;
	assert_true(WIRE_REASON_BASE > 4095);
	for (int r = WIRE_REASON_BASE; r < WIRE_REASON_END; r++) {
		assert_string_not_equal(wire_reason_name(-r), "unknown");
		for (int q = WIRE_REASON_BASE; q < r; q++)
			assert_string_not_equal(wire_reason_name(q), wire_reason_name(r));
	}
	assert_string_equal(wire_reason_name(-EINVAL), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(template_views_read_every_field),
		cmocka_unit_test(headers_truncated_at_every_length_views_refuse),
		cmocka_unit_test(null_pointer_views_refuse),
		cmocka_unit_test(ihl_below_five_ipv4_view_refuses),
		cmocka_unit_test(version_not_four_ipv4_view_refuses),
		cmocka_unit_test(ihl_past_the_octets_ipv4_view_refuses),
		cmocka_unit_test(total_length_beyond_frame_or_below_header_ipv4_view_refuses),
		cmocka_unit_test(quoted_header_total_length_not_checked),
		cmocka_unit_test(ipv4_options_view_points_past_them),
		cmocka_unit_test(ipv4_options_malformed_check_refuses),
		cmocka_unit_test(fragment_fields_ipv4_view_decodes),
		cmocka_unit_test(tcp_data_offset_below_five_or_past_segment_view_refuses),
		cmocka_unit_test(tcp_options_view_points_at_them_and_payload_after),
		cmocka_unit_test(udp_view_reports_length_field_unchecked),
		cmocka_unit_test(icmp_view_and_error_types),
		cmocka_unit_test(arp_not_ethernet_ipv4_view_refuses),
		cmocka_unit_test(writers_produce_rfc_layouts),
		cmocka_unit_test(internet_checksum_matches_rfc1071_example),
		cmocka_unit_test(vnet_header_little_endian_round_trip),
		cmocka_unit_test(refused_view_leaves_struct_untouched),
		cmocka_unit_test(reasons_above_errno_range_with_distinct_names),
		cmocka_unit_test(ipv6_view_reads_fields_and_icmpv6_checksum_matches_scapy),
		cmocka_unit_test(ipv6_version_and_payload_length_view_refuses),
		cmocka_unit_test(ipv6_extension_headers_walked_bounded),
		cmocka_unit_test(nd_view_finds_lladdr_and_refuses_bad_options),
		cmocka_unit_test(ipv6_address_helpers_follow_rfc4291_and_rfc2464),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
