/* stack/tso.c: how large a segment lwIP builds on a device with offloads, and the offload
 * word each frame the stack sends gets (RFC 9293 §3.1 pseudo-header, §3.7.1 and RFC 6691
 * MSS, netif/vnet.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"
#include "hooks.h"
#include "lwip/priv/tcp_priv.h"
#include "netif/vnet.h"

static struct nif_dev dev = { .mtu = 1500 };
static struct netif nif;

static void offload(bool on)
{
	dev.offload = on;
	dev.csum_only = false;
	stk__tso_setup(&nif, &dev);
	stk__node.dev = &dev;
}

static struct tcp_pcb pcb_with(u16_t mss, bool timestamps)
{
	struct tcp_pcb p;
	memset(&p, 0, sizeof(p));
	p.mss = mss;
	p.flags = timestamps ? TF_TIMESTAMP : 0;
	p.local_port = 5001;
	p.remote_port = 80;
	return p;
}

static void test_without_offload_a_segment_is_one_mss(void **state)
{
	(void)state;
	offload(false);
	struct tcp_pcb p = pcb_with(1460, true);
	struct tcp_pcb nots = pcb_with(1460, false);
	assert_false(stk__tso_enabled());
	assert_int_equal(stk__tso_size(&p), 1460);
	/* RFC 9293 §3.7.1: a wire segment's data is the MSS less its options (loss recovery
	 * resends in these units: with 1,460 a retransmission was 12 octets too large) */
	assert_int_equal(stk__tso_unit(&p), 1448);
	assert_int_equal(stk__tso_unit(&nots), 1460);
}

static void test_super_segment_is_a_whole_number_of_wire_payloads_within_64k(void **state)
{
	(void)state;
	offload(true);
	struct tcp_pcb ts = pcb_with(1460, true);
	/* RFC 6691: the MSS counts no options; each wire segment carries 12 octets of
	 * timestamps, so its data is 1448, and the super-segment's options are sent once:
	 * 45 units, as a 46th would not fit the pbuf's 16-bit length with the Ethernet, IPv4
	 * and TCP headers in front. */
	assert_int_equal(stk__tso_unit(&ts), 1448);
	assert_int_equal(stk__tso_size(&ts), 45 * 1448 + 12);
	assert_true(stk__tso_size(&ts) + 54u <= 0xffffu);
}

static void test_peer_mss_too_small_for_segmentation_gives_plain_segments(void **state)
{
	(void)state;
	offload(true);
	struct tcp_pcb small = pcb_with(NIF_OFF_GSO_MIN + 11, true);   /* 495 of data */
	struct tcp_pcb enough = pcb_with(NIF_OFF_GSO_MIN + 12, true);  /* 496 of data */
	struct tcp_pcb nots = pcb_with(1460, false);
	assert_int_equal(stk__tso_unit(&small), small.mss - 12);
	assert_int_equal(stk__tso_size(&small), small.mss);
	/* without timestamps, plain segments too (as before the unit lost its options) */
	assert_int_equal(stk__tso_unit(&nots), 1460);
	assert_int_equal(stk__tso_size(&nots), 1460);
	assert_int_equal(stk__tso_unit(&enough), NIF_OFF_GSO_MIN);
	assert_true(stk__tso_size(&enough) > enough.mss);
}

static void test_abc_limit_grows_cwnd_by_a_whole_super_segment_per_ack(void **state)
{
	(void)state;
	offload(true);
	struct tcp_pcb p = pcb_with(1460, true);
	assert_int_equal(stk__tso_abc_limit(&p), stk__tso_size(&p));
	assert_true(stk__tso_abc_limit(&p) > 2u * p.mss);
}

/* A TCP header from 5001 to 80 (PSH, ACK) and payload octets of data after it. */
static void tcp_segment(uint8_t *tcp, size_t payload)
{
	tcp[0] = 5001 >> 8;
	tcp[1] = 5001 & 0xff;
	tcp[3] = 80;
	tcp[12] = 5 << 4;
	tcp[13] = 0x18;
	for (size_t i = 0; i < payload; i++)
		tcp[20 + i] = (uint8_t)(i * 7);
}

/* An Ethernet + IPv4 + TCP frame from 5001 to 80 with payload octets of data. */
static size_t tcp_frame(uint8_t *f, size_t payload, uint16_t frag)
{
	uint8_t *ip = f + 14, *tcp = ip + 20;
	size_t total = 20 + 20 + payload;

	memset(f, 0, 14 + total);
	f[12] = 0x08;
	ip[0] = 0x45;
	ip[2] = (uint8_t)(total >> 8);
	ip[3] = (uint8_t)total;
	ip[6] = (uint8_t)(frag >> 8);
	ip[7] = (uint8_t)frag;
	ip[8] = 64;
	ip[9] = 6;
	memcpy(ip + 12, (const uint8_t[]){ 198, 18, 0, 1, 198, 18, 0, 2 }, 8);
	tcp_segment(tcp, payload);
	return 14 + total;
}

/* An Ethernet + IPv6 + TCP frame from [2001:db8::1]:5001 to [2001:db8::2]:80 (nh: the
 * fixed header's Next Header). */
static size_t tcp6_frame(uint8_t *f, size_t payload, uint8_t nh)
{
	uint8_t *ip = f + 14, *tcp = ip + 40;
	size_t plen = 20 + payload;

	memset(f, 0, 14 + 40 + plen);
	f[12] = 0x86;
	f[13] = 0xdd;
	ip[0] = 0x60;
	ip[4] = (uint8_t)(plen >> 8);
	ip[5] = (uint8_t)plen;
	ip[6] = nh;
	ip[7] = 64;
	memcpy(ip + 8, (const uint8_t[]){ 0x20, 0x01, 0x0d, 0xb8 }, 4);
	ip[23] = 1;
	memcpy(ip + 24, (const uint8_t[]){ 0x20, 0x01, 0x0d, 0xb8 }, 4);
	ip[39] = 2;
	tcp_segment(tcp, payload);
	return 14 + 40 + plen;
}

static uint32_t sum16(const uint8_t *p, size_t n, uint32_t sum)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		sum += (uint32_t)p[n - 1] << 8;
	return sum;
}

static uint16_t fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

/* ---- What each family's segment gets (RFC 9293 §3.1 over IPv4, RFC 8200 §8.1 over IPv6) */

/* One family's whole TCP segments, for the tests that run once per family. */
struct family {
	size_t iphlen;                 /* the IP header's length */
	size_t addr_off, addr_len;     /* its source and destination: the pseudo-header's */
	uint8_t gso_type;              /* the vnet header's: VIRTIO_NET_HDR_GSO_TCPV4, _TCPV6 */
	size_t (*frame)(uint8_t *f, size_t payload);
};

static size_t segment4(uint8_t *f, size_t payload)
{
	return tcp_frame(f, payload, 0x4000);  /* DF set, not a fragment */
}

static size_t segment6(uint8_t *f, size_t payload)
{
	return tcp6_frame(f, payload, 6);  /* TCP right after the fixed header */
}

static const struct family ipv4 = { 20, 12, 8, 1, segment4 };
static const struct family ipv6 = { 40, 8, 32, 4, segment6 };

/* The kernel completes the partial checksum into the segment's right one: it sums the
 * segment from the field on and stores the complement; then the pseudo-header (the
 * family's addresses, protocol 6 and the TCP length) plus the segment sums to 0xffff. */
static void test_sent_segment_is_marked_partial_with_the_pseudo_header_sum(void **state)
{
	const struct family *fam = *state;
	static uint8_t f[2048];
	size_t len;
	struct tcp_pcb p = pcb_with(1440, false);

	offload(true);
	len = fam->frame(f, 100);
	stk__tso_output(&p);
	assert_int_equal(stk__tso_tx_offload(f, len, len), NIF_OFF_CSUM_PARTIAL);
	uint8_t *tcp = f + 14 + fam->iphlen;
	uint16_t c = (uint16_t)~fold(sum16(tcp, 120, 0));
	tcp[16] = (uint8_t)(c >> 8);
	tcp[17] = (uint8_t)c;
	uint32_t pseudo = sum16(f + 14 + fam->addr_off, fam->addr_len, 0) + 6 + 120;
	assert_int_equal(fold(sum16(tcp, 120, pseudo)), 0xffff);
}

/* A super-segment is cut at the connection's MSS; the vnet header names the family's
 * segmentation and starts the checksum after the IP header. Its headers must be in the
 * first buffer, or it gets no offload. */
static void test_super_segment_is_cut_at_the_connections_mss(void **state)
{
	const struct family *fam = *state;
	static uint8_t f[8192];
	uint8_t h[NIF_VNET_HLEN];
	size_t len;
	struct tcp_pcb p = pcb_with(1200, false);

	offload(true);
	len = fam->frame(f, 3000);
	stk__tso_output(&p);
	uint32_t off = stk__tso_tx_offload(f, 14 + fam->iphlen + 20, len);
	assert_true(off & NIF_OFF_CSUM_PARTIAL);
	assert_int_equal(nif_off_gso(off), 1200);
	assert_int_equal(nif_vnet_build(h, f, len, off), 0);
	assert_int_equal(h[1], fam->gso_type);
	assert_int_equal(h[6] | h[7] << 8, 14 + fam->iphlen);   /* csum_start */
	assert_int_equal(stk__tso_tx_offload(f, 14 + fam->iphlen + 19, len), 0);
}

/* Checksum offload alone (ulsd --offload csum, or ULS_TSO=0 on an offload node): wire-sized
 * segments, each still left partial (as the kernel's TCP leaves them on a device with
 * checksum offload and TSO off), never a super-segment: not even a frame longer than the
 * MTU, which only lwIP's own bug could build, gets a gso_size (the TAP would refuse it). */
static void test_checksum_offload_alone_sends_partial_wire_sized_segments(void **state)
{
	const struct family *fam = *state;
	static uint8_t f[8192];
	struct tcp_pcb p = pcb_with(1460, true);
	struct tcp_pcb hinted = pcb_with(1200, false);
	static const uint8_t data[100] = { 1, 2, 3 };
	uint8_t copy[100];

	dev.offload = true;
	dev.csum_only = true;
	stk__tso_setup(&nif, &dev);
	stk__node.dev = &dev;
	assert_false(stk__tso_enabled());
	assert_int_equal(stk__tso_size(&p), 1460);
	assert_int_equal(stk__tso_abc_limit(&p), 0xffff);
	/* the data is copied, not summed: the sum would never be read */
	assert_int_equal(stk__chksum_copy(copy, data, sizeof(data)), 0);
	assert_memory_equal(copy, data, sizeof(data));
	assert_false(nif.chksum_flags & NETIF_CHECKSUM_GEN_TCP);
	assert_true(nif.chksum_flags & NETIF_CHECKSUM_CHECK_TCP);
	size_t len = fam->frame(f, 100);
	stk__tso_output(&hinted);
	assert_int_equal(stk__tso_tx_offload(f, len, len), NIF_OFF_CSUM_PARTIAL);
	len = fam->frame(f, 3000);
	assert_int_equal(stk__tso_tx_offload(f, len, len), NIF_OFF_CSUM_PARTIAL);
	assert_false(stk__tso_ip4_output_whole(&nif, IP_PROTO_TCP));
	dev.csum_only = false;
}

/* RFC 9293 §3.7.1's default MSS when the frame is not the connection the hint names. */
static void test_unhinted_super_segment_is_cut_at_536(void **state)
{
	(void)state;
	offload(true);
	static uint8_t f[8192];
	size_t len = tcp_frame(f, 3000, 0);
	struct tcp_pcb other = pcb_with(1460, false);
	other.local_port = 7;
	stk__tso_output(&other);
	assert_int_equal(nif_off_gso(stk__tso_tx_offload(f, 14 + 40, len)), 536);
}

static void test_frames_other_than_whole_tcp_segments_get_no_offload(void **state)
{
	(void)state;
	static uint8_t f[2048];
	struct tcp_pcb p = pcb_with(1460, false);
	size_t len;

	offload(true);
	stk__tso_output(&p);
	len = tcp_frame(f, 100, 0x2000);  /* MF: a fragment */
	assert_int_equal(stk__tso_tx_offload(f, len, len), 0);
	len = tcp_frame(f, 100, 0);
	f[14 + 9] = 17;  /* UDP */
	assert_int_equal(stk__tso_tx_offload(f, len, len), 0);
	len = tcp_frame(f, 10, 0);
	f[14 + 20 + 12] = 15 << 4;  /* a TCP header longer than the datagram */
	assert_int_equal(stk__tso_tx_offload(f, len, len), 0);
	len = tcp_frame(f, 100, 0);
	offload(false);
	assert_int_equal(stk__tso_tx_offload(f, len, len), 0);
}

/* ---- TCP over IPv6 (RFC 8200 §8.1, VIRTIO_NET_HDR_GSO_TCPV6) --------------------------- */

/* An IPv6 packet with an extension header or a fragment before TCP gets no offload. */
static void test_ipv6_extension_header_before_tcp_gets_no_offload(void **state)
{
	(void)state;
	static uint8_t f[2048];
	struct tcp_pcb p = pcb_with(1200, false);
	size_t len;

	offload(true);
	stk__tso_output(&p);
	len = tcp6_frame(f, 100, 44);
	assert_int_equal(stk__tso_tx_offload(f, len, len), 0);
	len = tcp6_frame(f, 100, 60);
	assert_int_equal(stk__tso_tx_offload(f, len, len), 0);
}

/* RFC 8200: the IPv6 header is 20 octets longer, so an IPv6 connection's super-segment
 * has room for 20 octets less and still fits the pbuf's 16 bits. */
static void test_ipv6_super_segment_fits_16_bits_with_its_header(void **state)
{
	(void)state;
	offload(true);
	struct tcp_pcb v4 = pcb_with(1321, true), v6 = pcb_with(1321, true);
	IP_SET_TYPE_VAL(v6.remote_ip, IPADDR_TYPE_V6);
	IP_SET_TYPE_VAL(v4.remote_ip, IPADDR_TYPE_V4);
	/* Units of 1309 (1321 less 12 of timestamps): 50 fit after 54 octets of Ethernet,
	 * IPv4 and TCP headers (50 * 1309 + 12 + 54 = 65516), and 49 after IPv6's 74. */
	assert_int_equal(stk__tso_unit(&v6), 1309);
	assert_int_equal(stk__tso_size(&v4), 50 * 1309 + 12);
	assert_int_equal(stk__tso_size(&v6), 49 * 1309 + 12);
	assert_true(stk__tso_size(&v6) + 74u <= 0xffffu);
}

/* A test run for one family, named after both. */
#define FAMILY_TEST(f, fam) { #f "_" #fam, f, NULL, NULL, (void *)&(fam) }

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_without_offload_a_segment_is_one_mss),
		cmocka_unit_test(test_super_segment_is_a_whole_number_of_wire_payloads_within_64k),
		cmocka_unit_test(test_peer_mss_too_small_for_segmentation_gives_plain_segments),
		cmocka_unit_test(test_abc_limit_grows_cwnd_by_a_whole_super_segment_per_ack),
		FAMILY_TEST(test_sent_segment_is_marked_partial_with_the_pseudo_header_sum, ipv4),
		FAMILY_TEST(test_sent_segment_is_marked_partial_with_the_pseudo_header_sum, ipv6),
		FAMILY_TEST(test_super_segment_is_cut_at_the_connections_mss, ipv4),
		FAMILY_TEST(test_super_segment_is_cut_at_the_connections_mss, ipv6),
		cmocka_unit_test(test_unhinted_super_segment_is_cut_at_536),
		FAMILY_TEST(test_checksum_offload_alone_sends_partial_wire_sized_segments, ipv4),
		FAMILY_TEST(test_checksum_offload_alone_sends_partial_wire_sized_segments, ipv6),
		cmocka_unit_test(test_frames_other_than_whole_tcp_segments_get_no_offload),
		cmocka_unit_test(test_ipv6_extension_header_before_tcp_gets_no_offload),
		cmocka_unit_test(test_ipv6_super_segment_fits_16_bits_with_its_header),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
