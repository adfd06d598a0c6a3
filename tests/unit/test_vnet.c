/* netif/vnet.c: the virtio-net header of TAP frames, read (from the kernel) and written.
 *
 * Frames come from one template (an IPv4 TCP segment with a 12-octet option block and
 * 3000 octets of data, or a UDP datagram); each test spells out only what differs.
 */
#include <linux/virtio_net.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "netif/frame.h"
#include "netif/wire/wire.h"
#include "netif/vnet.h"

#define PAYLOAD 3000

struct spec {
	uint8_t proto;        /* 0: TCP */
	uint16_t frag;        /* flags and fragment offset field */
	size_t payload;       /* 0: PAYLOAD */
};

struct frame {
	uint8_t b[WIRE_ETH_HLEN + 40 + 32 + PAYLOAD + 16];
	size_t len;
};


static void build(struct frame *f, const struct spec *s)
{
	uint8_t *ip = f->b + WIRE_ETH_HLEN, *l4 = ip + 20;
	uint8_t proto = s->proto ? s->proto : 6;
	size_t l4h = proto == 6 ? 32 : 8, pay = s->payload ? s->payload : PAYLOAD;

	memset(f->b, 0, sizeof(f->b));
	wire_wr16(f->b + 12, WIRE_ETHERTYPE_IPV4);
	ip[0] = 0x45;
	wire_wr16(ip + 2, (uint16_t)(20 + l4h + pay));
	wire_wr16(ip + 6, s->frag);
	ip[8] = 64;
	ip[9] = proto;
	memcpy(ip + 12, "\xc6\x12\x00\x01\xc6\x12\x00\x02", 8);
	if (proto == 6)
		l4[12] = (uint8_t)(l4h / 4) << 4;
	else
		wire_wr16(l4 + 4, (uint16_t)(8 + pay));
	f->len = WIRE_ETH_HLEN + 20 + l4h + pay;
}

static void hdr(uint8_t h[NIF_VNET_HLEN], uint8_t flags, uint8_t gso_type, uint16_t gso_size,
		uint16_t csum_start, uint16_t csum_offset)
{
	h[0] = flags;
	h[1] = gso_type;
	h[2] = h[3] = 0;
	h[4] = (uint8_t)gso_size; h[5] = (uint8_t)(gso_size >> 8);
	h[6] = (uint8_t)csum_start; h[7] = (uint8_t)(csum_start >> 8);
	h[8] = (uint8_t)csum_offset; h[9] = (uint8_t)(csum_offset >> 8);
}

static void zero_header_gives_plain_frame(void **state)
{
	struct frame f;
	uint8_t h[NIF_VNET_HLEN] = { 0 };
	uint32_t off = 99;

	(void)state;
	build(&f, &(struct spec){ 0 });
	assert_int_equal(nif_vnet_parse(h, sizeof(h), f.b, f.len, &off), 0);
	assert_int_equal(off, 0);
}

static void tcp_gso_with_partial_csum_parsed(void **state)
{
	struct frame f;
	uint8_t h[NIF_VNET_HLEN];
	uint32_t off = 0;

	(void)state;
	build(&f, &(struct spec){ 0 });
	hdr(h, VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4, 1448, 34, 16);
	assert_int_equal(nif_vnet_parse(h, sizeof(h), f.b, f.len, &off), 0);
	assert_int_equal(nif_off_gso(off), 1448);
	assert_true(off & NIF_OFF_CSUM_PARTIAL);
	assert_true(nif_off_csum_ok(off));
}

static void data_valid_parsed(void **state)
{
	struct frame f;
	uint8_t h[NIF_VNET_HLEN];
	uint32_t off = 0;

	(void)state;
	build(&f, &(struct spec){ 0 });
	hdr(h, VIRTIO_NET_HDR_F_DATA_VALID, 0, 0, 0, 0);
	assert_int_equal(nif_vnet_parse(h, sizeof(h), f.b, f.len, &off), 0);
	assert_int_equal(off, NIF_OFF_CSUM_VALID);
}

static void unknown_flag_refused(void **state)
{
	struct frame f;
	uint8_t h[NIF_VNET_HLEN];
	uint32_t off = 7;

	(void)state;
	build(&f, &(struct spec){ 0 });
	hdr(h, 0x80, 0, 0, 0, 0);
	assert_int_equal(nif_vnet_parse(h, sizeof(h), f.b, f.len, &off), -NIF_VNET_BAD_FLAGS);
	assert_int_equal(off, 7);  /* untouched on failure */
}

static void short_header_refused(void **state)
{
	struct frame f;
	uint8_t h[NIF_VNET_HLEN] = { 0 };
	uint32_t off;

	(void)state;
	build(&f, &(struct spec){ 0 });
	assert_int_equal(nif_vnet_parse(h, 4, f.b, f.len, &off), -NIF_VNET_BAD_FLAGS);
}

/* TCPV6 names an IPv6 segment (below): on an IPv4 one it is a wrong GSO; UDP is no type
 * we take. */
static void tcpv6_on_ipv4_or_udp_gso_refused(void **state)
{
	struct frame f;
	uint8_t h[NIF_VNET_HLEN];
	uint32_t off;

	(void)state;
	build(&f, &(struct spec){ 0 });
	hdr(h, VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV6, 1448, 34, 16);
	assert_int_equal(nif_vnet_parse(h, sizeof(h), f.b, f.len, &off), -NIF_VNET_BAD_GSO);
	hdr(h, VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_UDP, 1448, 34, 16);
	assert_int_equal(nif_vnet_parse(h, sizeof(h), f.b, f.len, &off), -NIF_VNET_BAD_GSO_TYPE);
}

/* ---- IPv6 (RFC 8200): the same template behind a 40-octet header ---------------------- */

static void build6(struct frame *f, uint8_t nh, size_t payload)
{
	uint8_t *ip = f->b + WIRE_ETH_HLEN, *l4 = ip + 40;
	size_t l4h = 32;

	memset(f->b, 0, sizeof(f->b));
	wire_wr16(f->b + 12, WIRE_ETHERTYPE_IPV6);
	ip[0] = 0x60;
	wire_wr16(ip + 4, (uint16_t)(l4h + payload));
	ip[6] = nh;
	ip[7] = 64;
	memcpy(ip + 8, "\x20\x01\x0d\xb8", 4);
	ip[23] = 1;
	memcpy(ip + 24, "\x20\x01\x0d\xb8", 4);
	ip[39] = 2;
	l4[12] = (uint8_t)(l4h / 4) << 4;
	f->len = WIRE_ETH_HLEN + 40 + l4h + payload;
}

static void tcpv6_gso_with_partial_csum_parsed(void **state)
{
	struct frame f;
	uint8_t h[NIF_VNET_HLEN];
	uint32_t off = 0;

	(void)state;
	build6(&f, 6, 2000);
	hdr(h, VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV6, 1428, 54, 16);
	assert_int_equal(nif_vnet_parse(h, sizeof(h), f.b, f.len, &off), 0);
	assert_int_equal(off, NIF_OFF_CSUM_PARTIAL | 1428);
	/* The IPv4 type on an IPv6 segment, and offsets of an IPv4 header: refused. */
	hdr(h, VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4, 1428, 54, 16);
	assert_int_equal(nif_vnet_parse(h, sizeof(h), f.b, f.len, &off), -NIF_VNET_BAD_GSO);
	hdr(h, VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV6, 1428, 34, 16);
	assert_int_equal(nif_vnet_parse(h, sizeof(h), f.b, f.len, &off), -NIF_VNET_BAD_CSUM);
	/* An extension header before TCP: no offload there (vnet.c's Deviation). */
	build6(&f, WIRE_IPPROTO_DSTOPTS, 2000);
	hdr(h, VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_NONE, 0, 54, 16);
	assert_int_equal(nif_vnet_parse(h, sizeof(h), f.b, f.len, &off), -NIF_VNET_BAD_CSUM);
}

static void build_tcpv6_super_segment_header(void **state)
{
	struct frame f;
	uint8_t h[NIF_VNET_HLEN], want[NIF_VNET_HLEN];

	(void)state;
	build6(&f, 6, 2000);
	assert_int_equal(nif_vnet_build(h, f.b, f.len, NIF_OFF_CSUM_PARTIAL | 1428), 0);
	hdr(want, VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV6, 1428, 54, 16);
	want[2] = 14 + 40 + 32;
	assert_memory_equal(h, want, NIF_VNET_HLEN);
	build6(&f, 6, 1000);
	assert_int_equal(nif_vnet_build(h, f.b, f.len, NIF_OFF_CSUM_PARTIAL | 1428), 0);
	assert_int_equal(h[1], VIRTIO_NET_HDR_GSO_NONE);
	assert_int_equal(h[6], 54);
}

static void pseudo_csum6_matches_rfc8200_pseudo_header(void **state)
{
	struct frame f;
	uint8_t *ip = f.b + WIRE_ETH_HLEN;

	(void)state;
	build6(&f, 6, 100);
	nif_vnet_pseudo_csum(ip, 40, 16);
	/* 2001 + 0db8 + 0001 + 2001 + 0db8 + 0002 + (32 + 100) + 0006 = 0x5bff */
	assert_int_equal(ip[40 + 16], 0x5b);
	assert_int_equal(ip[40 + 17], 0xff);
}

static void csum_offsets_not_at_tcp_checksum_refused(void **state)
{
	struct frame f;
	uint8_t h[NIF_VNET_HLEN];
	uint32_t off;

	(void)state;
	build(&f, &(struct spec){ 0 });
	hdr(h, VIRTIO_NET_HDR_F_NEEDS_CSUM, 0, 0, 34, 6);  /* UDP's offset on a TCP segment */
	assert_int_equal(nif_vnet_parse(h, sizeof(h), f.b, f.len, &off), -NIF_VNET_BAD_CSUM);
	hdr(h, VIRTIO_NET_HDR_F_NEEDS_CSUM, 0, 0, 60000, 16);  /* past the frame */
	assert_int_equal(nif_vnet_parse(h, sizeof(h), f.b, f.len, &off), -NIF_VNET_BAD_CSUM);
}

static void gso_on_udp_or_fragment_or_tiny_size_refused(void **state)
{
	struct frame f;
	uint8_t h[NIF_VNET_HLEN];
	uint32_t off;

	(void)state;
	build(&f, &(struct spec){ .proto = 17 });
	hdr(h, VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4, 1448, 34, 6);
	assert_int_equal(nif_vnet_parse(h, sizeof(h), f.b, f.len, &off), -NIF_VNET_BAD_GSO);
	build(&f, &(struct spec){ .frag = 0x2000 });  /* more fragments */
	hdr(h, VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4, 1448, 34, 16);
	assert_int_equal(nif_vnet_parse(h, sizeof(h), f.b, f.len, &off), -NIF_VNET_BAD_CSUM);
	build(&f, &(struct spec){ 0 });
	hdr(h, VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4, 8, 34, 16);
	assert_int_equal(nif_vnet_parse(h, sizeof(h), f.b, f.len, &off), -NIF_VNET_BAD_GSO);
	hdr(h, 0, VIRTIO_NET_HDR_GSO_TCPV4, 1448, 0, 0);  /* no checksum state at all */
	assert_int_equal(nif_vnet_parse(h, sizeof(h), f.b, f.len, &off), -NIF_VNET_BAD_GSO);
}

static void truncated_frame_with_needs_csum_refused(void **state)
{
	struct frame f;
	uint8_t h[NIF_VNET_HLEN];
	uint32_t off;

	(void)state;
	build(&f, &(struct spec){ 0 });
	hdr(h, VIRTIO_NET_HDR_F_NEEDS_CSUM, 0, 0, 34, 16);
	assert_int_equal(nif_vnet_parse(h, sizeof(h), f.b, 40, &off), -NIF_VNET_BAD_CSUM);
}

static void build_zero_word_gives_zero_header(void **state)
{
	struct frame f;
	uint8_t h[NIF_VNET_HLEN];

	(void)state;
	build(&f, &(struct spec){ 0 });
	memset(h, 0xff, sizeof(h));
	assert_int_equal(nif_vnet_build(h, f.b, f.len, 0), 0);
	for (int i = 0; i < NIF_VNET_HLEN; i++)
		assert_int_equal(h[i], 0);
}

static void build_super_segment_header(void **state)
{
	struct frame f;
	uint8_t h[NIF_VNET_HLEN], want[NIF_VNET_HLEN];

	(void)state;
	build(&f, &(struct spec){ 0 });
	assert_int_equal(nif_vnet_build(h, f.b, f.len, NIF_OFF_CSUM_PARTIAL | 1448), 0);
	hdr(want, VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4, 1448, 34, 16);
	want[2] = 14 + 20 + 32;  /* hdr_len: the headers every wire segment copies */
	assert_memory_equal(h, want, NIF_VNET_HLEN);
}

static void build_one_segment_is_not_gso(void **state)
{
	struct frame f;
	uint8_t h[NIF_VNET_HLEN];

	(void)state;
	build(&f, &(struct spec){ .payload = 1000 });
	assert_int_equal(nif_vnet_build(h, f.b, f.len, NIF_OFF_CSUM_PARTIAL | 1448), 0);
	assert_int_equal(h[0], VIRTIO_NET_HDR_F_NEEDS_CSUM);
	assert_int_equal(h[1], VIRTIO_NET_HDR_GSO_NONE);
}

static void build_refuses_gso_on_udp_and_csum_valid_on_transmit(void **state)
{
	struct frame f;
	uint8_t h[NIF_VNET_HLEN];

	(void)state;
	build(&f, &(struct spec){ .proto = 17 });
	assert_int_equal(nif_vnet_build(h, f.b, f.len, NIF_OFF_CSUM_PARTIAL | 1448),
			 -NIF_VNET_BAD_GSO);
	assert_int_equal(h[0], 0);  /* zeroed on failure */
	build(&f, &(struct spec){ 0 });
	assert_int_equal(nif_vnet_build(h, f.b, f.len, NIF_OFF_CSUM_VALID), -NIF_VNET_BAD_FLAGS);
	assert_int_equal(nif_vnet_build(h, f.b, f.len, 1448), -NIF_VNET_BAD_GSO);  /* no csum */
}

static void pseudo_csum_matches_rfc9293_pseudo_header(void **state)
{
	struct frame f;
	uint8_t *ip = f.b + WIRE_ETH_HLEN;

	(void)state;
	build(&f, &(struct spec){ .payload = 100 });
	nif_vnet_pseudo_csum(ip, 20, 16);
	/* c612 + 0001 + c612 + 0002 + 0006 + (32 + 100) = 0x18cb1 -> 0x8cb2 */
	assert_int_equal(ip[20 + 16], 0x8c);
	assert_int_equal(ip[20 + 17], 0xb2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(zero_header_gives_plain_frame),
		cmocka_unit_test(tcp_gso_with_partial_csum_parsed),
		cmocka_unit_test(data_valid_parsed),
		cmocka_unit_test(unknown_flag_refused),
		cmocka_unit_test(short_header_refused),
		cmocka_unit_test(tcpv6_on_ipv4_or_udp_gso_refused),
		cmocka_unit_test(tcpv6_gso_with_partial_csum_parsed),
		cmocka_unit_test(build_tcpv6_super_segment_header),
		cmocka_unit_test(pseudo_csum6_matches_rfc8200_pseudo_header),
		cmocka_unit_test(csum_offsets_not_at_tcp_checksum_refused),
		cmocka_unit_test(gso_on_udp_or_fragment_or_tiny_size_refused),
		cmocka_unit_test(truncated_frame_with_needs_csum_refused),
		cmocka_unit_test(build_zero_word_gives_zero_header),
		cmocka_unit_test(build_super_segment_header),
		cmocka_unit_test(build_one_segment_is_not_gso),
		cmocka_unit_test(build_refuses_gso_on_udp_and_csum_valid_on_transmit),
		cmocka_unit_test(pseudo_csum_matches_rfc9293_pseudo_header),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
