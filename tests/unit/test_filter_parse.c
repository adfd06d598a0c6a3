/* filter/parse.c: bounds-checked frame parsing.
 *
 * Every drop must leave the output alone and must never read past the frame: the
 * truncation tests copy each prefix into a buffer of exactly that size, so that under
 * AddressSanitizer one octet too far is a crash, not a pass.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "filter/filter.h"
#include "netif/wire/wire.h"
#include "tests/unit/filter_frames.h"

/* An output block that a drop must leave alone. */
static struct flt_pkt poison(void)
{
	struct flt_pkt p;

	memset(&p, 0xa5, sizeof(p));
	return p;
}

static void assert_untouched(const struct flt_pkt *p)
{
	struct flt_pkt q = poison();

	assert_memory_equal(p, &q, sizeof(q));
}

/* Parse f; on a drop, check that the output was left alone. */
static int parse(const struct frame *f, struct flt_pkt *p)
{
	int ret;

	*p = poison();
	ret = flt_parse(f->b, f->len, p);
	if (ret < 0)
		assert_untouched(p);
	return ret;
}

/* Parse the first len octets of f from a heap copy of exactly len octets. */
static int parse_prefix(const struct frame *f, size_t len, struct flt_pkt *p)
{
	uint8_t *copy = malloc(len ? len : 1);
	int ret;

	assert_non_null(copy);
	memcpy(copy, f->b, len);
	*p = poison();
	ret = flt_parse(copy, len, p);
	if (ret < 0)
		assert_untouched(p);
	free(copy);
	return ret;
}

static void tcp_segment_parse_fills_every_field(void **state)
{
	struct frame f;
	struct flt_pkt p;
	(void)state;

	build(&f, &(struct fspec){ .payload = 100, .tcp_flags = WIRE_TCP_SYN | WIRE_TCP_ACK,
				   .id = 0x1234, .frag = 0x4000, .doff_words = 8 });
	assert_int_equal(parse(&f, &p), 0);
	assert_memory_equal(p.src_mac, peer_mac, 6);
	assert_memory_equal(p.dst_mac, node_mac, 6);
	assert_int_equal(p.ethertype, WIRE_ETHERTYPE_IPV4);
	assert_int_equal(p.ip.src, PEER_IP);
	assert_int_equal(p.ip.dst, NODE_IP);
	assert_int_equal(p.ip.proto, WIRE_IPPROTO_TCP);
	assert_int_equal(p.ip.hlen, 20);
	assert_int_equal(p.ip.total, 20 + 32 + 100);
	assert_int_equal(p.ip.id, 0x1234);
	assert_true(p.ip.df);
	assert_false(p.ip.mf);
	assert_false(p.ip.fragment);
	assert_true(p.has_ports);
	assert_int_equal(p.sport, 40000);
	assert_int_equal(p.dport, 80);
	assert_int_equal(p.tcp.seq, 0x01020304);
	assert_int_equal(p.tcp.ack, 0x05060708);
	assert_int_equal(p.tcp.flags, WIRE_TCP_SYN | WIRE_TCP_ACK);
	assert_int_equal(p.tcp.doff, 32);
	assert_int_equal(p.tcp.payload_len, 100);
	assert_int_equal(p.l3_off, 14);
	assert_int_equal(p.l4_off, 34);
	assert_int_equal(p.payload_off, 66);
}

static void tcp_frame_truncated_at_every_length_parse_drops(void **state)
{
	struct frame f;
	struct flt_pkt p;
	(void)state;

	build(&f, &(struct fspec){ .payload = 10, .doff_words = 6, .opt_len = 4 });
	assert_int_equal(parse_prefix(&f, f.len, &p), 0);
	for (size_t len = 0; len < f.len; len++) {
		int ret = parse_prefix(&f, len, &p);

		assert_true(ret < 0);
		assert_int_equal(ret, len < 14 ? -FLT_DROP_RUNT : -FLT_DROP_IPV4_HEADER);
	}
}

static void udp_and_icmp_frames_truncated_at_every_length_parse_drops(void **state)
{
	struct frame f;
	struct flt_pkt p;
	(void)state;

	build(&f, &(struct fspec){ .proto = WIRE_IPPROTO_UDP, .payload = 3 });
	for (size_t len = 0; len < f.len; len++)
		assert_true(parse_prefix(&f, len, &p) < 0);
	build(&f, &(struct fspec){ .proto = WIRE_IPPROTO_ICMP, .icmp_type = 8 });
	for (size_t len = 0; len < f.len; len++)
		assert_true(parse_prefix(&f, len, &p) < 0);
}

static void ethernet_padding_after_datagram_parse_ignores_it(void **state)
{
	struct frame f;
	struct flt_pkt p;
	(void)state;

	/* A bare ACK is 54 octets; Ethernet pads it to 60. */
	build(&f, &(struct fspec){ .pad = 6 });
	assert_int_equal(parse(&f, &p), 0);
	assert_int_equal(p.ip.total, 40);
	assert_int_equal(p.tcp.payload_len, 0);
}

static void frame_shorter_than_ethernet_header_parse_drops_runt(void **state)
{
	struct flt_pkt p = poison();
	(void)state;

	assert_int_equal(flt_parse(NULL, 0, &p), -FLT_DROP_RUNT);
	assert_untouched(&p);
}

static void vlan_ethertype_parse_drops_ethertype(void **state)
{
	struct frame f;
	struct flt_pkt p;
	(void)state;

	build(&f, &(struct fspec){ .ethertype = 0x8100 });
	assert_int_equal(parse(&f, &p), -FLT_DROP_ETHERTYPE);
}

/* ---- IPv6 (RFC 8200) ---------------------------------------------------------------- */

static const uint8_t node6[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, [15] = 1 };
static const uint8_t peer6[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, [15] = 2 };

/* Ethernet, IPv6 from peer6 to node6, ext (ext_len octets of extension headers whose
 * first Next Header is first), then l4 (l4_len octets, its Next Header proto). */
static void build6(struct frame *f, uint8_t first, const uint8_t *ext, size_t ext_len,
		   const uint8_t *l4, size_t l4_len)
{
	memset(f->b, 0, sizeof(f->b));
	memcpy(f->b, node_mac, 6);
	memcpy(f->b + 6, peer_mac, 6);
	wire_wr16(f->b + 12, WIRE_ETHERTYPE_IPV6);
	wire_ipv6_write(f->b + 14, first, peer6, node6, (uint16_t)(ext_len + l4_len), 64);
	if (ext_len)  /* memcpy from NULL is undefined even for 0 octets (UBSan) */
		memcpy(f->b + 54, ext, ext_len);
	memcpy(f->b + 54 + ext_len, l4, l4_len);
	f->len = 54 + ext_len + l4_len;
}

static void tcp(uint8_t t[20])
{
	memset(t, 0, 20);
	wire_wr16(t, 40000);
	wire_wr16(t + 2, 80);
	t[12] = 5 << 4;
	t[13] = WIRE_TCP_SYN;
}

static void ipv6_tcp_parses_ports_and_goes_to_server(void **state)
{
	struct frame f;
	struct flt_pkt p;
	uint8_t t[20];
	struct flt_table *tb = flt_table_new();
	(void)state;

	tcp(t);
	build6(&f, WIRE_IPPROTO_TCP, NULL, 0, t, 20);
	assert_int_equal(parse(&f, &p), 0);
	assert_int_equal(p.ethertype, WIRE_ETHERTYPE_IPV6);
	assert_memory_equal(p.ip6.src, peer6, 16);
	assert_memory_equal(p.ip6.dst, node6, 16);
	assert_int_equal(p.ip6.proto, WIRE_IPPROTO_TCP);
	assert_int_equal(p.ip6.plen, 20);
	assert_int_equal(p.ip6.hlim, 64);
	assert_true(p.has_ports);
	assert_int_equal(p.sport, 40000);
	assert_int_equal(p.dport, 80);
	assert_int_equal(p.tcp.flags, WIRE_TCP_SYN);
	assert_int_equal(p.l4_off, 54);
	/* No process carries IPv6 yet: the server's, and never sent for a process. */
	assert_non_null(tb);
	assert_int_equal(flt_add_listen(tb, WIRE_IPPROTO_TCP, 80, 7, false), 0);
	assert_int_equal(flt_lookup_rx(tb, &p), FLT_NO_OWNER);
	memcpy(p.src_mac, node_mac, 6);
	assert_int_equal(flt_check_tx(tb, &p, 7, NODE_IP, node_mac), -FLT_DENY_PROTO);
	flt_table_free(tb);
}

static void ipv6_extension_headers_walked_to_udp(void **state)
{
	struct frame f;
	struct flt_pkt p;
	uint8_t ext[8 + 16] = { WIRE_IPPROTO_DSTOPTS, 0, [8] = WIRE_IPPROTO_UDP, 1 };
	uint8_t u[12] = { 0x9c, 0x40, 0, 53, 0, 12 };
	(void)state;

	build6(&f, WIRE_IPPROTO_HOPOPTS, ext, sizeof(ext), u, sizeof(u));
	assert_int_equal(parse(&f, &p), 0);
	assert_int_equal(p.ip6.proto, WIRE_IPPROTO_UDP);
	assert_int_equal(p.ip6.nexthdrs, 2);
	assert_true(p.has_ports);
	assert_int_equal(p.dport, 53);
	assert_int_equal(p.l4_off, 54 + 24);
	/* UDP Length must match what the packet carries, as for IPv4. */
	u[5] = 14;
	build6(&f, WIRE_IPPROTO_HOPOPTS, ext, sizeof(ext), u, sizeof(u));
	assert_int_equal(parse(&f, &p), -FLT_DROP_UDP_HEADER);
}

static void ipv6_bad_headers_parse_drops(void **state)
{
	struct frame f;
	struct flt_pkt p;
	uint8_t t[20], ext[16 * WIRE_IPV6_EXT_MAX];
	(void)state;

	tcp(t);
	build6(&f, WIRE_IPPROTO_TCP, NULL, 0, t, 20);
	f.b[14] = 0x40;
	assert_int_equal(parse(&f, &p), -FLT_DROP_IPV6_HEADER);
	build6(&f, WIRE_IPPROTO_TCP, NULL, 0, t, 20);
	wire_wr16(f.b + 18, 21);
	assert_int_equal(parse(&f, &p), -FLT_DROP_IPV6_HEADER);
	/* WIRE_IPV6_EXT_MAX + 1 Destination Options headers. */
	memset(ext, 0, sizeof(ext));
	for (unsigned i = 0; i < WIRE_IPV6_EXT_MAX; i++)
		ext[8 * i] = WIRE_IPPROTO_DSTOPTS;
	build6(&f, WIRE_IPPROTO_DSTOPTS, ext, 8 * WIRE_IPV6_EXT_MAX, t, 20);
	assert_int_equal(parse(&f, &p), -FLT_DROP_IPV6_EXT);
	ext[8 * (WIRE_IPV6_EXT_MAX - 1)] = WIRE_IPPROTO_TCP;
	build6(&f, WIRE_IPPROTO_DSTOPTS, ext, 8 * WIRE_IPV6_EXT_MAX, t, 20);
	assert_int_equal(parse(&f, &p), 0);
	assert_int_equal(p.ip6.nexthdrs, WIRE_IPV6_EXT_MAX);
	/* Every prefix of a frame with extension headers: no read past it (ASan). */
	for (size_t len = 0; len < f.len; len++) {
		int rc = parse_prefix(&f, len, &p);
		assert_true(rc < 0);
	}
	/* A TCP header cut short by Payload Length. */
	build6(&f, WIRE_IPPROTO_TCP, NULL, 0, t, 12);
	assert_int_equal(parse(&f, &p), -FLT_DROP_TCP_HEADER);
}

static void ipv6_unknown_next_header_and_later_fragments_have_no_ports(void **state)
{
	struct frame f;
	struct flt_pkt p;
	/* Fragment header: Next Header TCP, offset 0 with M set, Identification 0x01020304. */
	uint8_t t[20], fr[8] = { WIRE_IPPROTO_TCP, 0, 0, 1, 1, 2, 3, 4 };
	(void)state;

	tcp(t);
	build6(&f, 253, NULL, 0, t, 20);
	assert_int_equal(parse(&f, &p), 0);
	assert_int_equal(p.ip6.proto, 253);
	assert_false(p.has_ports);
	/* The first fragment: its ports say whose the datagram will be (server/reass.c). */
	build6(&f, WIRE_IPPROTO_FRAGMENT, fr, sizeof(fr), t, 20);
	assert_int_equal(parse(&f, &p), 0);
	assert_true(p.ip6.fragment);
	assert_true(p.ip6.mf);
	assert_int_equal(p.ip6.frag_off, 0);
	assert_int_equal(p.ip6.frag_id, 0x01020304);
	assert_int_equal(p.ip6.frag_data_off, 40 + 8);
	assert_true(p.has_ports);
	/* A later one (offset 1480): its data is not a header. */
	fr[2] = 1480 >> 8;
	fr[3] = (uint8_t)(1480 & 0xf8);
	build6(&f, WIRE_IPPROTO_FRAGMENT, fr, sizeof(fr), t, 20);
	assert_int_equal(parse(&f, &p), 0);
	assert_true(p.ip6.fragment);
	assert_false(p.ip6.mf);
	assert_int_equal(p.ip6.frag_off, 1480);
	assert_false(p.has_ports);
}

static void icmpv6_error_quote_gives_inner_ports(void **state)
{
	struct frame f;
	struct flt_pkt p;
	uint8_t m[8 + 40 + 8] = { WIRE_ICMPV6_DST_UNREACH, WIRE_ICMPV6_UNREACH_PORT };
	(void)state;

	/* The quoted packet: ours, from node6:80 to peer6:40000. */
	wire_ipv6_write(m + 8, WIRE_IPPROTO_UDP, node6, peer6, 8, 64);
	wire_wr16(m + 48, 80);
	wire_wr16(m + 50, 40000);
	build6(&f, WIRE_IPPROTO_ICMPV6, NULL, 0, m, sizeof(m));
	assert_int_equal(parse(&f, &p), 0);
	assert_int_equal(p.icmp.type, WIRE_ICMPV6_DST_UNREACH);
	assert_true(p.icmp.has_inner);
	assert_true(p.icmp.inner.has_ports);
	assert_int_equal(p.icmp.inner.proto, WIRE_IPPROTO_UDP);
	assert_int_equal(p.icmp.inner.sport, 80);
	assert_int_equal(p.icmp.inner.dport, 40000);
	assert_memory_equal(p.icmp.inner.src6, node6, 16);
	assert_memory_equal(p.icmp.inner.dst6, peer6, 16);
	/* Echo: no quote. */
	m[0] = WIRE_ICMPV6_ECHO_REQUEST;
	build6(&f, WIRE_IPPROTO_ICMPV6, NULL, 0, m, sizeof(m));
	assert_int_equal(parse(&f, &p), 0);
	assert_false(p.icmp.has_inner);
}

static void ip_version_6_parse_drops_ipv4_header(void **state)
{
	struct frame f;
	struct flt_pkt p;
	(void)state;

	build(&f, &(struct fspec){ .ver_ihl = 0x65 });
	assert_int_equal(parse(&f, &p), -FLT_DROP_IPV4_HEADER);
}

static void ihl_below_five_parse_drops_ipv4_header(void **state)
{
	struct frame f;
	struct flt_pkt p;
	(void)state;

	for (uint8_t ihl = 0; ihl < 5; ihl++) {
		build(&f, &(struct fspec){ .ver_ihl = (uint8_t)(0x40 | ihl) });
		assert_int_equal(parse(&f, &p), -FLT_DROP_IPV4_HEADER);
	}
}

static void ihl_past_end_of_frame_parse_drops_ipv4_header(void **state)
{
	struct frame f;
	struct flt_pkt p;
	(void)state;

	/* IHL 15 claims 60 octets of header, the frame holds 20 + 20. */
	build(&f, &(struct fspec){ .ver_ihl = 0x4f });
	assert_int_equal(parse_prefix(&f, f.len, &p), -FLT_DROP_IPV4_HEADER);
	/* Options that overrun Total Length but not the frame (padding) are caught too. */
	build(&f, &(struct fspec){ .ver_ihl = 0x4f, .ip_total = 40, .pad = 40 });
	assert_int_equal(parse(&f, &p), -FLT_DROP_IPV4_HEADER);
}

static void total_length_lies_parse_drops_ipv4_header(void **state)
{
	struct frame f;
	struct flt_pkt p;
	(void)state;

	build(&f, &(struct fspec){ .ip_total = 41 });          /* one past the frame */
	assert_int_equal(parse(&f, &p), -FLT_DROP_IPV4_HEADER);
	build(&f, &(struct fspec){ .ip_total = 19 });          /* shorter than the header */
	assert_int_equal(parse(&f, &p), -FLT_DROP_IPV4_HEADER);
	build(&f, &(struct fspec){ .ip_total = 65535 });
	assert_int_equal(parse(&f, &p), -FLT_DROP_IPV4_HEADER);
}

static void bad_header_checksum_parse_drops_ipv4_checksum(void **state)
{
	struct frame f;
	struct flt_pkt p;
	(void)state;

	build(&f, &(struct fspec){ .bad_csum = true });
	assert_int_equal(parse(&f, &p), -FLT_DROP_IPV4_CHECKSUM);
}

static void ipv4_options_parse_finds_tcp_after_them(void **state)
{
	struct frame f;
	struct flt_pkt p;
	(void)state;

	build(&f, &(struct fspec){ .opt_len = 40, .dport = 8080 });
	assert_int_equal(parse(&f, &p), 0);
	assert_int_equal(p.ip.hlen, 60);
	assert_int_equal(p.l4_off, 74);
	assert_int_equal(p.dport, 8080);
}

/* RFC 791 §3.1 / RFC 792: an option of length 1 cannot be parsed (the cases are test_wire's):
 * the datagram is dropped before its TCP header is read; the checksum is made right again so
 * that only the option is wrong. */
static void ipv4_option_of_length_1_parse_drops_ipv4_options(void **state)
{
	struct frame f;
	struct flt_pkt p;
	uint8_t *ip = f.b + 14;
	(void)state;

	build(&f, &(struct fspec){ .opt_len = 4 });
	ip[20] = 0x07;
	ip[21] = 0x01;
	wire_wr16(ip + 10, 0);
	wire_wr16(ip + 10, ip_csum(ip, 24));
	assert_int_equal(parse(&f, &p), -FLT_DROP_IPV4_OPTIONS);
	ip[21] = 0x04;                           /* control: Record Route of 4 octets */
	wire_wr16(ip + 10, 0);
	wire_wr16(ip + 10, ip_csum(ip, 24));
	assert_int_equal(parse(&f, &p), 0);
	assert_string_equal(flt_reason_name(FLT_DROP_IPV4_OPTIONS), "drop_ipv4_options");
}

static void tcp_data_offset_below_five_parse_drops_tcp_header(void **state)
{
	struct frame f;
	struct flt_pkt p;
	(void)state;

	for (uint8_t doff = 0; doff < 5; doff++) {
		build(&f, &(struct fspec){ .payload = 20 });
		f.b[14 + 20 + 12] = (uint8_t)(doff << 4);
		assert_int_equal(parse(&f, &p), -FLT_DROP_TCP_HEADER);
	}
}

static void tcp_data_offset_past_datagram_parse_drops_tcp_header(void **state)
{
	struct frame f;
	struct flt_pkt p;
	(void)state;

	/* 24 octets of TCP in the datagram, Data Offset says 28; padding follows so
	 * the frame itself is long enough: only Total Length tells. */
	build(&f, &(struct fspec){ .doff_words = 6, .pad = 20 });
	f.b[14 + 20 + 12] = 7 << 4;
	assert_int_equal(parse(&f, &p), -FLT_DROP_TCP_HEADER);
}

static void udp_datagram_parse_fills_ports_and_length(void **state)
{
	struct frame f;
	struct flt_pkt p;
	(void)state;

	build(&f, &(struct fspec){ .proto = WIRE_IPPROTO_UDP, .sport = 5353, .dport = 53,
				   .payload = 12, .pad = 6 });
	assert_int_equal(parse(&f, &p), 0);
	assert_true(p.has_ports);
	assert_int_equal(p.sport, 5353);
	assert_int_equal(p.dport, 53);
	assert_int_equal(p.udp.len, 20);
	assert_int_equal(p.payload_off, 14 + 20 + 8);
}

static void udp_length_field_lies_parse_drops_udp_header(void **state)
{
	static const uint16_t lies[] = { 0, 7, 19, 21, 65535 };
	struct frame f;
	struct flt_pkt p;
	(void)state;

	for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
		build(&f, &(struct fspec){ .proto = WIRE_IPPROTO_UDP, .payload = 12,
					   .udp_len = lies[i] });
		if (lies[i] == 0)
			f.b[14 + 20 + 4] = f.b[14 + 20 + 5] = 0;
		assert_int_equal(parse(&f, &p), -FLT_DROP_UDP_HEADER);
	}
}

static void first_fragment_parse_has_ports_and_fragment_flag(void **state)
{
	struct frame f;
	struct flt_pkt p;
	(void)state;

	/* More fragments, offset 0: the UDP Length counts the whole datagram. */
	build(&f, &(struct fspec){ .proto = WIRE_IPPROTO_UDP, .frag = 0x2000, .payload = 64,
				   .udp_len = 3000, .id = 77 });
	assert_int_equal(parse(&f, &p), 0);
	assert_true(p.ip.mf);
	assert_true(p.ip.fragment);
	assert_int_equal(p.ip.frag_off, 0);
	assert_int_equal(p.ip.id, 77);
	assert_true(p.has_ports);
	assert_int_equal(p.dport, 53);
}

static void non_first_fragment_parse_passes_without_ports(void **state)
{
	struct frame f;
	struct flt_pkt p;
	(void)state;

	/* Offset 185 * 8 = 1480, last fragment; the bytes where ports would be are junk. */
	build(&f, &(struct fspec){ .proto = WIRE_IPPROTO_UDP, .frag = 185, .payload = 100 });
	assert_int_equal(parse(&f, &p), 0);
	assert_true(p.ip.fragment);
	assert_false(p.ip.mf);
	assert_int_equal(p.ip.frag_off, 1480);
	assert_false(p.has_ports);
	assert_int_equal(p.sport, 0);
	assert_int_equal(p.dport, 0);
	/* The same for TCP, where 4 octets suffice: no transport header is looked at. */
	build(&f, &(struct fspec){ .proto = 99, .frag = 0x2000 | 2, .payload = 4 });
	f.b[14 + 9] = WIRE_IPPROTO_TCP;
	wire_wr16(f.b + 14 + 10, 0);
	wire_wr16(f.b + 14 + 10, ip_csum(f.b + 14, 20));
	assert_int_equal(parse(&f, &p), 0);
	assert_false(p.has_ports);
}

static void tcp_fragment_at_offset_8_parse_drops_fragment(void **state)
{
	struct frame f;
	struct flt_pkt p;
	(void)state;

	/* RFC 1858 §4: FO = 1 with TCP can only be an overlapping-fragment attack. */
	build(&f, &(struct fspec){ .proto = 99, .frag = 1, .payload = 24 });
	f.b[14 + 9] = WIRE_IPPROTO_TCP;
	wire_wr16(f.b + 14 + 10, 0);
	wire_wr16(f.b + 14 + 10, ip_csum(f.b + 14, 20));
	assert_int_equal(parse(&f, &p), -FLT_DROP_FRAGMENT);
}

static void tiny_first_tcp_fragment_parse_drops_tcp_header(void **state)
{
	struct frame f;
	struct flt_pkt p;
	(void)state;

	/* RFC 1858 §3.2: a first fragment holding only 16 octets of TCP header. */
	build(&f, &(struct fspec){ .frag = 0x2000, .ip_total = 36, .pad = 20 });
	assert_int_equal(parse(&f, &p), -FLT_DROP_TCP_HEADER);
}

static void fragment_past_65535_parse_drops_fragment(void **state)
{
	struct frame f;
	struct flt_pkt p;
	(void)state;

	/* Offset 8189 * 8 = 65512, plus 100 octets of data: the "ping of death". */
	build(&f, &(struct fspec){ .proto = WIRE_IPPROTO_ICMP, .frag = 8189, .payload = 92 });
	assert_int_equal(parse(&f, &p), -FLT_DROP_FRAGMENT);
	/* Exactly up to 65535 is fine. */
	build(&f, &(struct fspec){ .proto = WIRE_IPPROTO_ICMP, .frag = 8189, .payload = 15 });
	assert_int_equal(parse(&f, &p), 0);
}

static void arp_request_parse_fills_addresses(void **state)
{
	struct frame f;
	struct flt_pkt p;
	(void)state;

	build_arp(&f, 1, peer_mac, PEER_IP, NODE_IP);
	assert_int_equal(parse(&f, &p), 0);
	assert_int_equal(p.ethertype, WIRE_ETHERTYPE_ARP);
	assert_int_equal(p.arp.op, 1);
	assert_memory_equal(p.arp.sha, peer_mac, 6);
	assert_int_equal(p.arp.spa, PEER_IP);
	assert_int_equal(p.arp.tpa, NODE_IP);
	assert_false(p.has_ports);
}

static void arp_not_ethernet_ipv4_or_short_parse_drops_arp(void **state)
{
	struct frame f;
	struct flt_pkt p;
	(void)state;

	build_arp(&f, 1, peer_mac, PEER_IP, NODE_IP);
	f.b[14 + 1] = 6;                         /* hardware type IEEE 802 */
	assert_int_equal(parse(&f, &p), -FLT_DROP_ARP);
	build_arp(&f, 1, peer_mac, PEER_IP, NODE_IP);
	f.b[14 + 5] = 16;                        /* protocol address length 16 */
	assert_int_equal(parse(&f, &p), -FLT_DROP_ARP);
	build_arp(&f, 1, peer_mac, PEER_IP, NODE_IP);
	for (size_t len = 14; len < 14 + 28; len++)
		assert_int_equal(parse_prefix(&f, len, &p), -FLT_DROP_ARP);
	assert_int_equal(parse_prefix(&f, 14 + 28, &p), 0);
}

static void icmp_port_unreachable_parse_fills_quoted_datagram(void **state)
{
	struct frame inner, f;
	struct flt_pkt p;
	(void)state;

	/* The node sent UDP 7777 -> peer:9999; the peer answers port unreachable with
	 * the IPv4 header and the first 8 octets of that datagram. */
	build(&inner, &(struct fspec){ .proto = WIRE_IPPROTO_UDP, .src = NODE_IP, .dst = PEER_IP,
				       .sport = 7777, .dport = 9999, .payload = 30 });
	build(&f, &(struct fspec){ .proto = WIRE_IPPROTO_ICMP, .icmp_type = 3, .icmp_code = 3,
				   .quote = inner.b + 14, .quote_len = 28 });
	assert_int_equal(parse(&f, &p), 0);
	assert_int_equal(p.icmp.type, 3);
	assert_int_equal(p.icmp.code, 3);
	assert_true(p.icmp.has_inner);
	assert_int_equal(p.icmp.inner.src, NODE_IP);
	assert_int_equal(p.icmp.inner.dst, PEER_IP);
	assert_int_equal(p.icmp.inner.proto, WIRE_IPPROTO_UDP);
	assert_true(p.icmp.inner.has_ports);
	assert_int_equal(p.icmp.inner.sport, 7777);
	assert_int_equal(p.icmp.inner.dport, 9999);

	/* A quote cut short is still a valid ICMP message, just without the quote. */
	build(&f, &(struct fspec){ .proto = WIRE_IPPROTO_ICMP, .icmp_type = 3,
				   .quote = inner.b + 14, .quote_len = 27 });
	assert_int_equal(parse(&f, &p), 0);
	assert_false(p.icmp.has_inner);
}

static void icmp_shorter_than_header_parse_drops_icmp_header(void **state)
{
	struct frame f;
	struct flt_pkt p;
	(void)state;

	build(&f, &(struct fspec){ .proto = WIRE_IPPROTO_ICMP, .icmp_type = 8, .ip_total = 27,
				   .pad = 10 });
	assert_int_equal(parse(&f, &p), -FLT_DROP_ICMP_HEADER);
}

static void other_ip_protocol_parse_passes_without_ports(void **state)
{
	struct frame f;
	struct flt_pkt p;
	(void)state;

	build(&f, &(struct fspec){ .proto = 132, .payload = 3 });   /* SCTP */
	assert_int_equal(parse(&f, &p), 0);
	assert_int_equal(p.ip.proto, 132);
	assert_false(p.has_ports);
}

static void every_reason_name_is_distinct(void **state)
{
	(void)state;

	for (int i = 0; i < FLT_REASON_COUNT; i++) {
		assert_string_not_equal(flt_reason_name((enum flt_reason)(FLT_REASON_BASE + i)), "unknown");
		for (int j = 0; j < i; j++)
			assert_string_not_equal(flt_reason_name((enum flt_reason)(FLT_REASON_BASE + i)),
						flt_reason_name((enum flt_reason)(FLT_REASON_BASE + j)));
	}
	assert_string_equal(flt_reason_name(FLT_REASON_END), "unknown");
	assert_string_equal(flt_reason_name((enum flt_reason)EINVAL), "unknown");
}

/* A negative return of the parser is a reason, not an errno: the two never overlap
 * (docs/architecture.md, return conventions). */
static void drop_reasons_do_not_overlap_errno(void **state)
{
	(void)state;
	assert_true(FLT_REASON_NONE > 4095);
	assert_true(FLT_DROP_RUNT > 4095);
	for (int i = 0; i < FLT_REASON_COUNT; i++)
		assert_true(FLT_REASON_INDEX(FLT_REASON_BASE + i) == (unsigned)i);
	struct flt_pkt p;
	uint8_t runt[4] = { 0 };
	int rc = flt_parse(runt, sizeof(runt), &p);
	assert_int_equal(rc, -FLT_DROP_RUNT);
	assert_true(-rc > 4095);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(tcp_segment_parse_fills_every_field),
		cmocka_unit_test(tcp_frame_truncated_at_every_length_parse_drops),
		cmocka_unit_test(udp_and_icmp_frames_truncated_at_every_length_parse_drops),
		cmocka_unit_test(ethernet_padding_after_datagram_parse_ignores_it),
		cmocka_unit_test(frame_shorter_than_ethernet_header_parse_drops_runt),
		cmocka_unit_test(vlan_ethertype_parse_drops_ethertype),
		cmocka_unit_test(ipv6_tcp_parses_ports_and_goes_to_server),
		cmocka_unit_test(ipv6_extension_headers_walked_to_udp),
		cmocka_unit_test(ipv6_bad_headers_parse_drops),
		cmocka_unit_test(ipv6_unknown_next_header_and_later_fragments_have_no_ports),
		cmocka_unit_test(icmpv6_error_quote_gives_inner_ports),
		cmocka_unit_test(ip_version_6_parse_drops_ipv4_header),
		cmocka_unit_test(ihl_below_five_parse_drops_ipv4_header),
		cmocka_unit_test(ihl_past_end_of_frame_parse_drops_ipv4_header),
		cmocka_unit_test(total_length_lies_parse_drops_ipv4_header),
		cmocka_unit_test(bad_header_checksum_parse_drops_ipv4_checksum),
		cmocka_unit_test(ipv4_options_parse_finds_tcp_after_them),
		cmocka_unit_test(ipv4_option_of_length_1_parse_drops_ipv4_options),
		cmocka_unit_test(tcp_data_offset_below_five_parse_drops_tcp_header),
		cmocka_unit_test(tcp_data_offset_past_datagram_parse_drops_tcp_header),
		cmocka_unit_test(udp_datagram_parse_fills_ports_and_length),
		cmocka_unit_test(udp_length_field_lies_parse_drops_udp_header),
		cmocka_unit_test(first_fragment_parse_has_ports_and_fragment_flag),
		cmocka_unit_test(non_first_fragment_parse_passes_without_ports),
		cmocka_unit_test(tcp_fragment_at_offset_8_parse_drops_fragment),
		cmocka_unit_test(tiny_first_tcp_fragment_parse_drops_tcp_header),
		cmocka_unit_test(fragment_past_65535_parse_drops_fragment),
		cmocka_unit_test(arp_request_parse_fills_addresses),
		cmocka_unit_test(arp_not_ethernet_ipv4_or_short_parse_drops_arp),
		cmocka_unit_test(icmp_port_unreachable_parse_fills_quoted_datagram),
		cmocka_unit_test(icmp_shorter_than_header_parse_drops_icmp_header),
		cmocka_unit_test(other_ip_protocol_parse_passes_without_ports),
		cmocka_unit_test(every_reason_name_is_distinct),
		cmocka_unit_test(drop_reasons_do_not_overlap_errno),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
