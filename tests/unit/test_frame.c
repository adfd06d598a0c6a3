/* netif/frame.c: the checks every received frame goes through before lwIP sees it.
 *
 * Frames are built from one template (an IPv4 or ARP frame to our MAC); each test spells
 * out only the field it changes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "netif/frame.h"
#include "netif/wire/wire.h"

#define MAX_FRAME (1500 + WIRE_ETH_HLEN)

static const uint8_t own_mac[WIRE_ETH_ALEN] = { 0x02, 0x75, 0x6c, 0x00, 0x00, 0x01 };
static const uint8_t peer_mac[WIRE_ETH_ALEN] = { 0x02, 0x75, 0x6c, 0x00, 0x00, 0x02 };
static const uint8_t other_mac[WIRE_ETH_ALEN] = { 0x02, 0x75, 0x6c, 0x00, 0x00, 0x09 };

/* What differs between test frames. Zero fields take the template's value. */
struct frame_spec {
	const uint8_t *dst;       /* NULL: own_mac */
	uint16_t ethertype;       /* 0: IPv4 */
	uint8_t ver_ihl;          /* 0: 0x45 */
	uint16_t ip_total;        /* 0: ip_payload + 20 */
	size_t ip_payload;        /* bytes after a 20-byte IPv4 header */
	size_t pad;               /* Ethernet padding after the IP datagram */
};

struct frame {
	uint8_t b[MAX_FRAME + 64];
	size_t len;
};

static void build(struct frame *f, const struct frame_spec *s)
{
	uint8_t *ip = f->b + WIRE_ETH_HLEN;
	size_t ip_len = WIRE_IPV4_HLEN_MIN + s->ip_payload;

	memset(f->b, 0xa5, sizeof(f->b));
	memcpy(f->b, s->dst ? s->dst : own_mac, WIRE_ETH_ALEN);
	memcpy(f->b + 6, peer_mac, WIRE_ETH_ALEN);
	wire_wr16(f->b + 12, s->ethertype ? s->ethertype : WIRE_ETHERTYPE_IPV4);
	memset(ip, 0, WIRE_IPV4_HLEN_MIN);
	ip[0] = s->ver_ihl ? s->ver_ihl : 0x45;
	wire_wr16(ip + 2, s->ip_total ? s->ip_total : (uint16_t)ip_len);
	ip[8] = 64;
	ip[9] = 17;
	memcpy(ip + 12, (const uint8_t[]){ 198, 18, 0, 2 }, 4);
	memcpy(ip + 16, (const uint8_t[]){ 198, 18, 0, 1 }, 4);
	memset(ip + WIRE_IPV4_HLEN_MIN, 0, s->ip_payload + s->pad);
	f->len = WIRE_ETH_HLEN + ip_len + s->pad;
}

/* An ARP request (RFC 826) for Ethernet/IPv4, broadcast. */
static void build_arp(struct frame *f)
{
	static const uint8_t bcast[WIRE_ETH_ALEN] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	uint8_t *a = f->b + WIRE_ETH_HLEN;

	build(f, &(struct frame_spec){ .dst = bcast, .ethertype = WIRE_ETHERTYPE_ARP });
	memset(a, 0, WIRE_ARP_LEN);
	wire_wr16(a, 1);                     /* hardware type: Ethernet */
	wire_wr16(a + 2, WIRE_ETHERTYPE_IPV4);
	a[4] = WIRE_ETH_ALEN;
	a[5] = 4;
	wire_wr16(a + 6, 1);                 /* request */
	memcpy(a + 8, peer_mac, WIRE_ETH_ALEN);
	memcpy(a + 14, (const uint8_t[]){ 198, 18, 0, 2 }, 4);
	memcpy(a + 24, (const uint8_t[]){ 198, 18, 0, 1 }, 4);
	/* Minimum Ethernet payload is 46 bytes: ARP frames arrive padded. */
	f->len = WIRE_ETH_HLEN + 46;
}

/* An info block that a drop must leave alone. */
static const struct nif_frame_info poison = { 0xdead, 0xbeef, 0x5a5a };

static enum nif_verdict check(const struct frame *f, struct nif_frame_info *info)
{
	*info = poison;
	return nif_frame_check(f->b, f->len, MAX_FRAME, own_mac, info);
}

static void assert_untouched(const struct nif_frame_info *info)
{
	assert_int_equal(info->l3_off, poison.l3_off);
	assert_int_equal(info->l3_len, poison.l3_len);
	assert_int_equal(info->flags, poison.flags);
}

static void ipv4_to_own_mac_check_passes_with_offsets(void **state)
{
	struct frame f;
	struct nif_frame_info info;
	(void)state;

	build(&f, &(struct frame_spec){ .ip_payload = 100 });
	assert_int_equal(check(&f, &info), NIF_PASS_IPV4);
	assert_int_equal(info.l3_off, WIRE_ETH_HLEN);
	assert_int_equal(info.l3_len, 120);
	assert_int_equal(info.flags, 0);
}

static void shorter_than_ethernet_header_check_drops_runt(void **state)
{
	struct frame f;
	struct nif_frame_info info;
	(void)state;

	build(&f, &(struct frame_spec){ 0 });
	for (size_t len = 0; len < WIRE_ETH_HLEN; len++) {
		f.len = len;
		assert_int_equal(check(&f, &info), NIF_DROP_RUNT);
		assert_untouched(&info);
	}
}

static void longer_than_max_len_check_drops_oversize(void **state)
{
	struct frame f;
	struct nif_frame_info info;
	(void)state;

	build(&f, &(struct frame_spec){ .ip_payload = MAX_FRAME - WIRE_ETH_HLEN - 20 });
	assert_int_equal(check(&f, &info), NIF_PASS_IPV4);
	build(&f, &(struct frame_spec){ .ip_payload = MAX_FRAME - WIRE_ETH_HLEN - 20 + 1 });
	assert_int_equal(check(&f, &info), NIF_DROP_OVERSIZE);
	assert_untouched(&info);
}

static void unicast_to_other_mac_check_drops_not_ours(void **state)
{
	struct frame f;
	struct nif_frame_info info;
	(void)state;

	build(&f, &(struct frame_spec){ .dst = other_mac });
	assert_int_equal(check(&f, &info), NIF_DROP_NOT_OURS);
	assert_untouched(&info);
}

static void broadcast_check_passes_flagged_llbcast(void **state)
{
	static const uint8_t bcast[WIRE_ETH_ALEN] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	struct frame f;
	struct nif_frame_info info;
	(void)state;

	build(&f, &(struct frame_spec){ .dst = bcast });
	assert_int_equal(check(&f, &info), NIF_PASS_IPV4);
	assert_int_equal(info.flags, NIF_FRAME_LLBCAST);
}

static void multicast_check_passes_flagged_llmcast(void **state)
{
	static const uint8_t mcast[WIRE_ETH_ALEN] = { 0x01, 0x00, 0x5e, 0x00, 0x00, 0x01 };
	struct frame f;
	struct nif_frame_info info;
	(void)state;

	build(&f, &(struct frame_spec){ .dst = mcast });
	assert_int_equal(check(&f, &info), NIF_PASS_IPV4);
	assert_int_equal(info.flags, NIF_FRAME_LLMCAST);
}

/* An IPv6 packet (RFC 8200 §3) with plen octets of payload and pad octets of Ethernet
 * padding after it. */
static void build_ipv6(struct frame *f, uint16_t plen, size_t pad)
{
	uint8_t *ip = f->b + WIRE_ETH_HLEN;

	build(f, &(struct frame_spec){ .ethertype = WIRE_ETHERTYPE_IPV6 });
	memset(ip, 0, 40 + plen);
	ip[0] = 0x60;                    /* version 6, traffic class 0, flow label 0 */
	wire_wr16(ip + 4, plen);
	ip[6] = 59;                      /* no next header */
	ip[7] = 64;                      /* hop limit */
	ip[8] = 0x20;                    /* source 2001:db8::2, destination 2001:db8::1 */
	ip[9] = 0x01;
	ip[10] = 0x0d;
	ip[11] = 0xb8;
	ip[23] = 2;
	memcpy(ip + 24, ip + 8, 15);
	ip[39] = 1;
	f->len = WIRE_ETH_HLEN + 40 + plen + pad;
}

static void ipv6_check_passes_with_offsets(void **state)
{
	struct frame f;
	struct nif_frame_info info;
	(void)state;

	build_ipv6(&f, 100, 0);
	assert_int_equal(check(&f, &info), NIF_PASS_IPV6);
	assert_int_equal(info.l3_off, WIRE_ETH_HLEN);
	assert_int_equal(info.l3_len, 140);
	assert_int_equal(info.flags, 0);
}

static void ipv6_with_ethernet_padding_check_trims_to_payload_length(void **state)
{
	struct frame f;
	struct nif_frame_info info;
	(void)state;

	build_ipv6(&f, 0, 6);  /* a 54-octet frame padded to the 60-octet minimum */
	assert_int_equal(check(&f, &info), NIF_PASS_IPV6);
	assert_int_equal(info.l3_len, 40);
}

static void ipv6_version_4_check_drops_ipv6_header(void **state)
{
	struct frame f;
	struct nif_frame_info info;
	(void)state;

	/* The template's IPv4 header in a type-86dd frame: version 4. */
	build(&f, &(struct frame_spec){ .ethertype = WIRE_ETHERTYPE_IPV6, .ip_payload = 40 });
	assert_int_equal(check(&f, &info), NIF_DROP_IPV6_HEADER);
	build_ipv6(&f, 10, 0);
	f.b[WIRE_ETH_HLEN] = 0x70;
	assert_int_equal(check(&f, &info), NIF_DROP_IPV6_HEADER);
	assert_untouched(&info);
}

static void ipv6_shorter_than_fixed_header_check_drops_ipv6_header(void **state)
{
	struct frame f;
	struct nif_frame_info info;
	(void)state;

	build_ipv6(&f, 0, 0);
	f.len = WIRE_ETH_HLEN + 39;
	assert_int_equal(check(&f, &info), NIF_DROP_IPV6_HEADER);
	assert_untouched(&info);
}

static void ipv6_payload_length_beyond_frame_check_drops_ipv6_length(void **state)
{
	struct frame f;
	struct nif_frame_info info;
	(void)state;

	build_ipv6(&f, 100, 0);
	wire_wr16(f.b + WIRE_ETH_HLEN + 4, 101);
	assert_int_equal(check(&f, &info), NIF_DROP_IPV6_LENGTH);
	assert_untouched(&info);
	wire_wr16(f.b + WIRE_ETH_HLEN + 4, 100);  /* control: exactly the frame's */
	assert_int_equal(check(&f, &info), NIF_PASS_IPV6);
}

static void vlan_tagged_check_drops_ethertype(void **state)
{
	struct frame f;
	struct nif_frame_info info;
	(void)state;

	build(&f, &(struct frame_spec){ .ethertype = WIRE_ETHERTYPE_VLAN });
	assert_int_equal(check(&f, &info), NIF_DROP_ETHERTYPE);
	assert_untouched(&info);
}

static void ipv4_version_6_check_drops_ipv4_header(void **state)
{
	struct frame f;
	struct nif_frame_info info;
	(void)state;

	build(&f, &(struct frame_spec){ .ver_ihl = 0x65 });
	assert_int_equal(check(&f, &info), NIF_DROP_IPV4_HEADER);
	assert_untouched(&info);
}

static void ipv4_ihl_below_5_check_drops_ipv4_header(void **state)
{
	struct frame f;
	struct nif_frame_info info;
	(void)state;

	for (uint8_t ihl = 0; ihl < 5; ihl++) {
		build(&f, &(struct frame_spec){ .ver_ihl = (uint8_t)(0x40 | ihl), .ip_payload = 8 });
		assert_int_equal(check(&f, &info), NIF_DROP_IPV4_HEADER);
		assert_untouched(&info);
	}
}

static void ipv4_ihl_beyond_total_length_check_drops_ipv4_header(void **state)
{
	struct frame f;
	struct nif_frame_info info;
	(void)state;

	/* IHL 15 says 60 header bytes; Total Length says 28. */
	build(&f, &(struct frame_spec){ .ver_ihl = 0x4f, .ip_payload = 8, .pad = 40 });
	assert_int_equal(check(&f, &info), NIF_DROP_IPV4_HEADER);
	assert_untouched(&info);
}

/* RFC 791 §3.1: an option is one octet (EOL, NOP) or a type, a length counting itself and
 * the type, and data; lwIP never reads them, so the frame check refuses ones that cannot be
 * parsed (the cases are test_wire's). IHL 6: four octets of options. */
static void ipv4_option_of_length_1_check_drops_ipv4_options(void **state)
{
	struct frame f;
	struct nif_frame_info info;
	uint8_t *opt = f.b + WIRE_ETH_HLEN + WIRE_IPV4_HLEN_MIN;
	(void)state;

	build(&f, &(struct frame_spec){ .ver_ihl = 0x46, .ip_payload = 12 });
	memcpy(opt, (const uint8_t[]){ 0x07, 0x01, 0, 0 }, 4);
	assert_int_equal(check(&f, &info), NIF_DROP_IPV4_OPTIONS);
	assert_untouched(&info);
	memcpy(opt, (const uint8_t[]){ 0x94, 0x04, 0, 0 }, 4);  /* control: Router Alert */
	assert_int_equal(check(&f, &info), NIF_PASS_IPV4);
	assert_string_equal(nif_verdict_name(NIF_DROP_IPV4_OPTIONS), "frame_ipv4_options");
}

static void ipv4_total_length_beyond_frame_check_drops_ipv4_header(void **state)
{
	struct frame f;
	struct nif_frame_info info;
	(void)state;

	build(&f, &(struct frame_spec){ .ip_payload = 100, .ip_total = 121 });
	assert_int_equal(check(&f, &info), NIF_DROP_IPV4_HEADER);
	assert_untouched(&info);
}

static void ipv4_total_length_below_header_check_drops_ipv4_header(void **state)
{
	struct frame f;
	struct nif_frame_info info;
	(void)state;

	build(&f, &(struct frame_spec){ .ip_payload = 100, .ip_total = 19 });
	assert_int_equal(check(&f, &info), NIF_DROP_IPV4_HEADER);
	assert_untouched(&info);
}

static void ipv4_shorter_than_min_header_check_drops_ipv4_header(void **state)
{
	struct frame f;
	struct nif_frame_info info;
	(void)state;

	build(&f, &(struct frame_spec){ 0 });
	f.len = WIRE_ETH_HLEN + WIRE_IPV4_HLEN_MIN - 1;
	assert_int_equal(check(&f, &info), NIF_DROP_IPV4_HEADER);
	assert_untouched(&info);
}

static void ipv4_with_ethernet_padding_check_trims_to_total_length(void **state)
{
	struct frame f;
	struct nif_frame_info info;
	(void)state;

	/* A 28-byte datagram in a minimum-size (60-byte) frame carries 18 bytes of padding. */
	build(&f, &(struct frame_spec){ .ip_payload = 8, .pad = 18 });
	assert_int_equal(f.len, 60);
	assert_int_equal(check(&f, &info), NIF_PASS_IPV4);
	assert_int_equal(info.l3_off, WIRE_ETH_HLEN);
	assert_int_equal(info.l3_len, 28);
}

static void arp_request_check_passes_arp(void **state)
{
	struct frame f;
	struct nif_frame_info info;
	(void)state;

	build_arp(&f);
	assert_int_equal(check(&f, &info), NIF_PASS_ARP);
	assert_int_equal(info.l3_off, WIRE_ETH_HLEN);
	assert_int_equal(info.l3_len, WIRE_ARP_LEN);
	assert_int_equal(info.flags, NIF_FRAME_LLBCAST);
}

static void arp_wrong_hardware_type_check_drops_arp_header(void **state)
{
	struct frame f;
	struct nif_frame_info info;
	(void)state;

	build_arp(&f);
	wire_wr16(f.b + WIRE_ETH_HLEN, 6);  /* IEEE 802 */
	assert_int_equal(check(&f, &info), NIF_DROP_ARP_HEADER);
	assert_untouched(&info);
}

static void arp_wrong_protocol_or_lengths_check_drops_arp_header(void **state)
{
	struct frame f;
	struct nif_frame_info info;
	(void)state;

	build_arp(&f);
	wire_wr16(f.b + WIRE_ETH_HLEN + 2, 0x86dd);
	assert_int_equal(check(&f, &info), NIF_DROP_ARP_HEADER);
	build_arp(&f);
	f.b[WIRE_ETH_HLEN + 4] = 8;
	assert_int_equal(check(&f, &info), NIF_DROP_ARP_HEADER);
	build_arp(&f);
	f.b[WIRE_ETH_HLEN + 5] = 16;
	assert_int_equal(check(&f, &info), NIF_DROP_ARP_HEADER);
	assert_untouched(&info);
}

static void arp_shorter_than_28_bytes_check_drops_arp_header(void **state)
{
	struct frame f;
	struct nif_frame_info info;
	(void)state;

	build_arp(&f);
	f.len = WIRE_ETH_HLEN + WIRE_ARP_LEN - 1;
	assert_int_equal(check(&f, &info), NIF_DROP_ARP_HEADER);
	assert_untouched(&info);
	f.len = WIRE_ETH_HLEN + WIRE_ARP_LEN;
	assert_int_equal(check(&f, &info), NIF_PASS_ARP);
}

static void every_verdict_name_is_unique_and_nonempty(void **state)
{
	(void)state;

	for (int a = 0; a < NIF_VERDICT_COUNT; a++) {
		const char *na = nif_verdict_name((enum nif_verdict)a);
		assert_non_null(na);
		assert_true(na[0] != '\0');
		assert_string_not_equal(na, "unknown");
		for (int b = 0; b < a; b++)
			assert_string_not_equal(na, nif_verdict_name((enum nif_verdict)b));
	}
	assert_string_equal(nif_verdict_name(NIF_VERDICT_COUNT), "unknown");
	assert_string_equal(nif_verdict_name((enum nif_verdict)-1), "unknown");
}

static void pass_verdicts_is_drop_false_others_true(void **state)
{
	(void)state;

	for (int v = 0; v < NIF_VERDICT_COUNT; v++)
		assert_int_equal(nif_verdict_is_drop((enum nif_verdict)v),
				 v != NIF_PASS_IPV4 && v != NIF_PASS_ARP && v != NIF_PASS_IPV6);
}

static void mac_good_parse_returns_bytes(void **state)
{
	uint8_t mac[WIRE_ETH_ALEN];
	static const uint8_t want[WIRE_ETH_ALEN] = { 0x02, 0xab, 0xCD, 0x00, 0x9f, 0xff };
	(void)state;

	assert_true(nif_mac_parse("02:ab:CD:00:9f:ff", mac));
	assert_memory_equal(mac, want, sizeof(want));
}

static void mac_bad_parse_fails_leaves_output(void **state)
{
	static const char *const bad[] = {
		NULL,
		"",
		"02:ab:cd:00:9f",           /* too short */
		"02:ab:cd:00:9f:ff:",       /* too long */
		"02:ab:cd:00:9f:f",
		"02-ab-cd-00-9f-ff",        /* wrong separator */
		"02:ab:cd:00:9fff:",        /* separator missing */
		"02:ab:cd:00:9f.ff",
		"0g:ab:cd:00:9f:ff",        /* not hex */
		"02:ab:cd:00:9f:f ",
		" 2:ab:cd:00:9f:ff",
		"+2:ab:cd:00:9f:ff",
	};
	uint8_t mac[WIRE_ETH_ALEN];
	static const uint8_t sentinel[WIRE_ETH_ALEN] = { 0x11, 0x22, 0x33, 0x44, 0x55, 0x66 };
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memcpy(mac, sentinel, sizeof(mac));
		assert_false(nif_mac_parse(bad[i], mac));
		assert_memory_equal(mac, sentinel, sizeof(mac));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ipv4_to_own_mac_check_passes_with_offsets),
		cmocka_unit_test(shorter_than_ethernet_header_check_drops_runt),
		cmocka_unit_test(longer_than_max_len_check_drops_oversize),
		cmocka_unit_test(unicast_to_other_mac_check_drops_not_ours),
		cmocka_unit_test(broadcast_check_passes_flagged_llbcast),
		cmocka_unit_test(multicast_check_passes_flagged_llmcast),
		cmocka_unit_test(ipv6_check_passes_with_offsets),
		cmocka_unit_test(ipv6_with_ethernet_padding_check_trims_to_payload_length),
		cmocka_unit_test(ipv6_version_4_check_drops_ipv6_header),
		cmocka_unit_test(ipv6_shorter_than_fixed_header_check_drops_ipv6_header),
		cmocka_unit_test(ipv6_payload_length_beyond_frame_check_drops_ipv6_length),
		cmocka_unit_test(vlan_tagged_check_drops_ethertype),
		cmocka_unit_test(ipv4_version_6_check_drops_ipv4_header),
		cmocka_unit_test(ipv4_ihl_below_5_check_drops_ipv4_header),
		cmocka_unit_test(ipv4_ihl_beyond_total_length_check_drops_ipv4_header),
		cmocka_unit_test(ipv4_option_of_length_1_check_drops_ipv4_options),
		cmocka_unit_test(ipv4_total_length_beyond_frame_check_drops_ipv4_header),
		cmocka_unit_test(ipv4_total_length_below_header_check_drops_ipv4_header),
		cmocka_unit_test(ipv4_shorter_than_min_header_check_drops_ipv4_header),
		cmocka_unit_test(ipv4_with_ethernet_padding_check_trims_to_total_length),
		cmocka_unit_test(arp_request_check_passes_arp),
		cmocka_unit_test(arp_wrong_hardware_type_check_drops_arp_header),
		cmocka_unit_test(arp_wrong_protocol_or_lengths_check_drops_arp_header),
		cmocka_unit_test(arp_shorter_than_28_bytes_check_drops_arp_header),
		cmocka_unit_test(every_verdict_name_is_unique_and_nonempty),
		cmocka_unit_test(pass_verdicts_is_drop_false_others_true),
		cmocka_unit_test(mac_good_parse_returns_bytes),
		cmocka_unit_test(mac_bad_parse_fails_leaves_output),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
