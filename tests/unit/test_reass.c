/* server/reass.c: IPv4 and IPv6 reassembly for the node's processes (RFC 791 §3.2, RFC
 * 1122 §3.3.2, RFC 8200 §4.5, RFC 5722 §4). Fragments are built from one template per
 * family; only the offset, the M flag and the length differ. What reass.c hands on is
 * recorded by stubs. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <netinet/in.h>

#include "netif/chksum.h"
#include "server/internal.h"

/* Stubs for what reass.c needs from the rest of ulsd. */
static uint64_t now_ms = 1000;
static unsigned delivered, sent, time_exceeded, steered, unsteered;
static unsigned time_exceeded6, param_problems6, steered6, unsteered6;
static bool with_dstopts;   /* fragment6: a Destination Options header before the Fragment header */
static uint32_t param_pointer6;
static uint16_t delivered_off[80];
static unsigned for_node;   /* whole datagrams handed to the node's own answers */
static uint8_t whole[14 + 65535];
static size_t whole_len;
uint64_t srv__now_ms(void) { return now_ms; }
void srv__log(int level, const char *fmt, ...) { (void)level; (void)fmt; }
void srv__deliver(struct srv *s, struct srv_lease *l, const uint8_t *frame, size_t len)
{
	(void)s; (void)l; (void)len;
	if (delivered < 80 && frame[12] == 0x86)    /* IPv6: the Fragment header's offset */
		delivered_off[delivered] = (uint16_t)((frame[54 + 2] << 8 | frame[54 + 3]) & 0xfff8);
	else if (delivered < 80)
		delivered_off[delivered] = (uint16_t)(((frame[20] << 8 | frame[21]) & 0x1fff) * 8);
	delivered++;
}
void srv__send_frame(struct srv *s, const uint8_t *frame, size_t len)
{
	(void)len;
	assert_memory_equal(frame, s->mac, 6);  /* for the node: back into the TAP */
	sent++;
}
void srv__input_ip4_whole(struct srv *s, const uint8_t *frame, size_t len)
{
	(void)s;
	memcpy(whole, frame, len);
	whole_len = len;
	for_node++;
}
void srv__input_ip6_whole(struct srv *s, const uint8_t *frame, size_t len)
{
	srv__input_ip4_whole(s, frame, len);
}
int srv__dp_frag_steer(struct srv *s, uint32_t src, uint16_t id, uint8_t proto, uint32_t owner)
{
	(void)s; (void)src; (void)id; (void)proto;
	if (owner)
		steered++;
	else
		unsteered++;
	return 0;
}
void srv__reply_reass_time_exceeded(struct srv *s, const uint8_t *frame, size_t len,
				   const struct flt_pkt *p)
{
	(void)s; (void)frame; (void)len;
	assert_int_equal(p->ip.frag_off, 0);
	time_exceeded++;
}

int srv__dp_frag6_steer(struct srv *s, const uint8_t src[16], uint32_t id, uint32_t owner)
{
	(void)s; (void)src; (void)id;
	if (owner)
		steered6++;
	else
		unsteered6++;
	return 0;
}
void srv__reply6_param_problem(struct srv *s, const uint8_t *frame, size_t len, uint8_t code,
			       uint32_t pointer)
{
	(void)s; (void)frame; (void)len;
	assert_int_equal(code, 0);
	param_pointer6 = pointer;
	param_problems6++;
}
void srv__reply6_reass_time_exceeded(struct srv *s, const uint8_t *frame, size_t len)
{
	(void)s; (void)len;
	assert_int_equal((frame[54 + 2] << 8 | frame[54 + 3]) & 0xfff8, 0);  /* the first */
	time_exceeded6++;
}

#define NODE_IP  0x010012c6u   /* 198.18.0.1, network order on little-endian */
#define PEER_IP  0xc80012c6u   /* 198.18.0.200 */
#define PORT     7

static struct srv srv;
static struct srv_lease relay = { .id = 1, .has_rings = true };
static struct srv_lease direct = { .id = 2, .has_rings = false };

/* An Ethernet/IPv4 fragment of a UDP datagram to PORT: data octets [off, off + len) of a
 * datagram whose UDP Length is 3008; returns the frame length. */
static size_t fragment(uint8_t *f, uint16_t id, uint16_t off, uint16_t len, bool mf)
{
	uint8_t *ip = f + 14;

	memset(f, 0, 14 + 20 + len);
	memset(f, 0xff, 6);   /* broadcast: what goes back into the TAP gets the node's MAC */
	f[12] = 0x08;
	ip[0] = 0x45;
	ip[2] = (uint8_t)((20 + len) >> 8);
	ip[3] = (uint8_t)(20 + len);
	ip[4] = (uint8_t)(id >> 8);
	ip[5] = (uint8_t)id;
	uint16_t fo = (uint16_t)((off / 8) | (mf ? 0x2000 : 0));
	ip[6] = (uint8_t)(fo >> 8);
	ip[7] = (uint8_t)fo;
	ip[8] = 64;
	ip[9] = 17;
	uint32_t src = PEER_IP, dst = NODE_IP;
	memcpy(ip + 12, &src, 4);
	memcpy(ip + 16, &dst, 4);
	uint16_t c = (uint16_t)~nif_inet_chksum(ip, 20);
	memcpy(ip + 10, &c, 2);
	if (off == 0) {
		uint8_t *u = ip + 20;
		u[0] = 0x9c; u[1] = 0x40;        /* source port 40000 */
		u[2] = 0; u[3] = PORT;
		u[4] = 3008 >> 8; u[5] = 3008 & 0xff;
	}
	return 14 + 20 + len;
}

static void input(uint16_t id, uint16_t off, uint16_t len, bool mf)
{
	static uint8_t f[2048];
	struct flt_pkt p;
	size_t n = fragment(f, id, off, len, mf);

	assert_int_equal(flt_parse(f, n, &p), 0);
	srv__reass_input(&srv, f, n, &p);
}

/* An Ethernet/IPv6 fragment of a UDP datagram to PORT from 2001:db8::200 to 2001:db8::1:
 * data octets [off, off + len) after its Fragment header (Identification id), of a
 * datagram whose UDP Length is 3008; returns the frame length. */
static size_t fragment6(uint8_t *f, uint32_t id, uint32_t off, uint16_t len, bool more)
{
	static const uint8_t src[16] = { 0x20, 0x01, 0x0d, 0xb8, [14] = 2 };
	static const uint8_t dst[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 1 };
	size_t x = with_dstopts ? 8 : 0;
	uint8_t *ip = f + 14, *fh = ip + 40 + x;

	memset(f, 0, 14 + 40 + x + 8 + len);
	memset(f, 0xff, 6);
	f[12] = 0x86;
	f[13] = 0xdd;
	ip[0] = 0x60;
	ip[4] = (uint8_t)((x + 8 + len) >> 8);
	ip[5] = (uint8_t)(x + 8 + len);
	ip[6] = x ? 60 : 44;                 /* Destination Options, or Fragment */
	ip[40] = x ? 44 : ip[40];            /* the options (all padding) name the Fragment header */
	ip[7] = 64;
	memcpy(ip + 8, src, 16);
	memcpy(ip + 24, dst, 16);
	fh[0] = 17;
	uint16_t fo = (uint16_t)((off & 0xfff8) | (more ? 1 : 0));
	fh[2] = (uint8_t)(fo >> 8);
	fh[3] = (uint8_t)fo;
	fh[4] = (uint8_t)(id >> 24); fh[5] = (uint8_t)(id >> 16);
	fh[6] = (uint8_t)(id >> 8); fh[7] = (uint8_t)id;
	if (off == 0) {
		uint8_t *u = fh + 8;
		u[0] = 0x9c; u[1] = 0x40;
		u[2] = 0; u[3] = PORT;
		/* An atomic fragment is a whole datagram of len octets. */
		uint16_t ul = more ? 3008 : len;
		u[4] = (uint8_t)(ul >> 8); u[5] = (uint8_t)ul;
	}
	return 14 + 40 + x + 8 + len;
}

static void input6(uint32_t id, uint32_t off, uint16_t len, bool more)
{
	static uint8_t f[2048];
	struct flt_pkt p;
	size_t n = fragment6(f, id, off, len, more);

	assert_int_equal(flt_parse(f, n, &p), 0);
	srv__reass_input(&srv, f, n, &p);
}

static int setup_with(struct srv_lease *owner)
{
	memset(&srv, 0, sizeof(srv));
	srv.ip = NODE_IP;
	memcpy(srv.mac, "\x02\x75\x6c\x00\x00\x01", 6);
	srv.flt = flt_table_new();
	srv.leases.by_id[owner->id] = owner;
	now_ms = 1000;
	delivered = sent = time_exceeded = steered = unsteered = for_node = 0;
	time_exceeded6 = param_problems6 = param_pointer6 = steered6 = unsteered6 = 0;
	with_dstopts = false;
	if (!srv.flt || srv__reass_init(&srv) < 0)
		return -1;
	return flt_add_listen_fam(srv.flt, WIRE_IPPROTO_UDP, PORT, FLT_FAM_V4 | FLT_FAM_V6,
				  owner->id, false) < 0 ? -1 : 0;
}

static int setup_relay(void **state) { (void)state; return setup_with(&relay); }
static int setup_direct(void **state) { (void)state; return setup_with(&direct); }

static int teardown(void **state)
{
	(void)state;
	/* Everything held expires: nothing may be left. */
	now_ms += 200000;
	srv__reass_tick(&srv);
	assert_int_equal(srv.ctr.v[SRV_REASS_IN_PROGRESS], 0);
	assert_int_equal(srv.ctr.v[SRV_REASS_BYTES_HELD], 0);
	flt_table_free(srv.flt);
	free(srv.reass);
	return 0;
}

static void fragments_in_order_delivered_to_owner_in_order(void **state)
{
	(void)state;
	input(1, 0, 1480, true);
	input(1, 1480, 1480, true);
	assert_int_equal(delivered, 0);
	assert_int_equal(srv.ctr.v[SRV_REASS_IN_PROGRESS], 1);
	input(1, 2960, 48, false);
	assert_int_equal(delivered, 3);
	assert_int_equal(srv.ctr.v[SRV_REASS_DATAGRAMS], 1);
	assert_int_equal(srv.ctr.v[SRV_REASS_IN_PROGRESS], 0);
	assert_int_equal(srv.ctr.v[SRV_REASS_BYTES_HELD], 0);
}

static void fragments_out_of_order_delivered_sorted_by_offset(void **state)
{
	(void)state;
	input(2, 2960, 48, false);
	input(2, 0, 1480, true);
	input(2, 1480, 1480, true);
	assert_int_equal(delivered, 3);
	assert_int_equal(delivered_off[0], 0);
	assert_int_equal(delivered_off[1], 1480);
	assert_int_equal(delivered_off[2], 2960);
}

static void overlap_drops_whole_datagram_and_later_fragments_do_not_complete_it(void **state)
{
	(void)state;
	input(3, 0, 1480, true);
	input(3, 1472, 1480, true);   /* overlaps the first by 8 */
	assert_int_equal(srv.ctr.v[SRV_DROP_REASS_OVERLAP], 1);
	assert_int_equal(srv.ctr.v[SRV_REASS_IN_PROGRESS], 0);
	input(3, 1480, 1480, true);
	input(3, 2960, 48, false);
	assert_int_equal(delivered, 0);
	assert_int_equal(srv.ctr.v[SRV_DROP_FRAGMENT], 2);
}

static void exact_duplicate_dropped_alone(void **state)
{
	(void)state;
	input(4, 0, 1480, true);
	input(4, 0, 1480, true);
	assert_int_equal(srv.ctr.v[SRV_DROP_REASS_DUPLICATE], 1);
	input(4, 1480, 1480, true);
	input(4, 2960, 48, false);
	assert_int_equal(delivered, 3);
}

static void same_offset_other_length_is_an_overlap(void **state)
{
	(void)state;
	input(5, 1480, 1480, true);
	input(5, 1480, 16, true);
	assert_int_equal(srv.ctr.v[SRV_DROP_REASS_OVERLAP], 1);
}

static void data_past_the_last_fragment_is_bad(void **state)
{
	(void)state;
	input(7, 1480, 1480, false);    /* the datagram ends at 2960 */
	input(7, 2960, 48, true);       /* beyond the end */
	assert_int_equal(srv.ctr.v[SRV_DROP_REASS_BAD], 1);
	input(8, 0, 1001, true);       /* not a multiple of 8 */
	assert_int_equal(srv.ctr.v[SRV_DROP_REASS_BAD], 2);
}

static void incomplete_datagram_expires_with_time_exceeded_when_first_came(void **state)
{
	(void)state;
	input(9, 0, 1480, true);
	input(10, 1480, 1480, true);   /* no fragment zero */
	assert_true(srv.ctr.v[SRV_REASS_BYTES_HELD] > 0);
	now_ms += 29999;
	srv__reass_tick(&srv);
	assert_int_equal(srv.ctr.v[SRV_DROP_REASS_TIMEOUT], 0);
	now_ms += 1;
	srv__reass_tick(&srv);
	assert_int_equal(srv.ctr.v[SRV_DROP_REASS_TIMEOUT], 2);
	assert_int_equal(time_exceeded, 1);
	assert_int_equal(srv.ctr.v[SRV_REASS_BYTES_HELD], 0);
}

static void flood_of_first_fragments_held_up_to_the_bound(void **state)
{
	(void)state;
	for (unsigned i = 0; i < 300; i++)
		input((uint16_t)(100 + i), 0, 16, true);
	assert_int_equal(srv.ctr.v[SRV_REASS_IN_PROGRESS], 256);
	assert_int_equal(srv.ctr.v[SRV_REASS_PEAK], 256);
	assert_int_equal(srv.ctr.v[SRV_DROP_REASS_LIMIT], 44);
}

static void too_many_fragments_in_one_datagram_drop_it(void **state)
{
	(void)state;
	/* One past the 128 fragments ulsd keeps of a datagram (server/reass.c). */
	for (unsigned i = 0; i < 129; i++)
		input(11, (uint16_t)(i * 16), 16, true);
	assert_int_equal(srv.ctr.v[SRV_DROP_REASS_LIMIT], 1);
	assert_int_equal(srv.ctr.v[SRV_REASS_IN_PROGRESS], 0);
}

/* A datagram nobody owns goes to the node's own answers (a port unreachable here), whole:
 * one IPv4 header with the whole Total Length, no MF, offset 0, a valid checksum, and the
 * fragments' data in order. */
static void unowned_datagram_rebuilt_whole_for_the_node(void **state)
{
	(void)state;
	flt_del_listen(srv.flt, WIRE_IPPROTO_UDP, PORT, relay.id);
	input(12, 1480, 16, false);
	input(12, 0, 1480, true);
	assert_int_equal(delivered, 0);
	assert_int_equal(for_node, 1);
	assert_int_equal(srv.ctr.v[SRV_REASS_FOR_NODE], 1);
	assert_int_equal(whole_len, 14 + 20 + 1496);
	const uint8_t *ip = whole + 14;
	assert_int_equal(ip[2] << 8 | ip[3], 20 + 1496);
	assert_int_equal(ip[6] << 8 | ip[7], 0);
	assert_int_equal(nif_inet_chksum(ip, 20), 0xffff);
	assert_int_equal(ip[20 + 4] << 8 | ip[20 + 5], 3008);   /* the first fragment's UDP header */
	assert_int_equal(srv.ctr.v[SRV_REASS_IN_PROGRESS], 0);
}

/* RFC 791 §3.2: Total Length is 16 bits. The filter lets a fragment's data reach octet
 * 65535 (filter/parse.c), but with its header the whole datagram would be longer: it is
 * not rebuilt into anything. */
static void unowned_datagram_past_65535_octets_dropped(void **state)
{
	(void)state;
	flt_del_listen(srv.flt, WIRE_IPPROTO_UDP, PORT, relay.id);
	input(15, 0, 1480, true);
	input(15, 65512, 16, false);   /* data ends at 65528: 65548 octets with the header */
	for (uint16_t off = 1480; off < 65512; off = (uint16_t)(off + 1480))
		input(15, off, (uint16_t)(65512 - off < 1480 ? 65512 - off : 1480), true);
	assert_int_equal(for_node, 0);
	assert_int_equal(srv.ctr.v[SRV_DROP_REASS_BAD], 1);
}

static void direct_owner_gets_fragments_through_the_tap_and_steering(void **state)
{
	(void)state;
	input(13, 0, 1480, true);
	input(13, 1480, 16, false);
	assert_int_equal(steered, 1);
	assert_int_equal(sent, 2);
	assert_int_equal(delivered, 0);
	/* A fragment of that datagram that comes back to ulsd was not steered: dropped. */
	input(13, 0, 1480, true);
	assert_int_equal(srv.ctr.v[SRV_DROP_REASS_UNSTEERED], 1);
	/* The key leaves the steering map after a second. */
	now_ms += 1000;
	srv__reass_tick(&srv);
	assert_int_equal(unsteered, 1);
	input(13, 0, 1480, true);
	assert_int_equal(srv.ctr.v[SRV_REASS_IN_PROGRESS], 1);
}

/* RFC 8200 §4.5: the datagram is keyed by source, destination and Identification, its
 * fragments' data follows their Fragment headers, and the owner gets them in order. */
static void ipv6_fragments_out_of_order_delivered_to_owner_in_order(void **state)
{
	(void)state;
	input6(0x10000001, 2464, 544, false);
	input6(0x10000001, 0, 1232, true);
	input6(0x20000001, 0, 1232, true);    /* another Identification: another datagram */
	assert_int_equal(delivered, 0);
	input6(0x10000001, 1232, 1232, true);
	assert_int_equal(delivered, 3);
	assert_int_equal(delivered_off[0], 0);
	assert_int_equal(delivered_off[1], 1232);
	assert_int_equal(delivered_off[2], 2464);
	assert_int_equal(srv.ctr.v[SRV_REASS_DATAGRAMS], 1);
	assert_int_equal(srv.ctr.v[SRV_REASS_IN_PROGRESS], 1);
}

/* RFC 8200 §4.5: "If the fragment is a whole datagram (that is, both the Fragment Offset
 * field and the M flag are zero), then it does not need any further reassembly and should
 * be processed as a fully reassembled packet". */
static void ipv6_atomic_fragment_delivered_at_once(void **state)
{
	(void)state;
	input6(7, 0, 64, false);
	assert_int_equal(delivered, 1);
	assert_int_equal(srv.ctr.v[SRV_REASS_IN_PROGRESS], 0);
}

/* RFC 8200 §4.5: "If the length of a fragment ... is not a multiple of 8 octets and the M
 * flag of that fragment is 1, then that fragment must be discarded and an ICMP Parameter
 * Problem, Code 0, message should be sent ..., pointing to the Payload Length field". */
/* RFC 6946 §4: an atomic fragment is processed "in isolation from any other packets/
 * fragments, even if such packets/fragments contain the same set {IPv6 Source Address,
 * IPv6 Destination Address, Fragment Identification}": one with the Identification of a
 * datagram in progress leaves that datagram as it was, and it completes later. */
static void ipv6_atomic_fragment_isolated_from_a_datagram_of_its_identification(void **state)
{
	(void)state;
	input6(8, 0, 1232, true);
	input6(8, 0, 64, false);
	assert_int_equal(delivered, 1);
	assert_int_equal(srv.ctr.v[SRV_REASS_ATOMIC], 1);
	assert_int_equal(srv.ctr.v[SRV_REASS_IN_PROGRESS], 1);
	input6(8, 1232, 64, false);
	assert_int_equal(delivered, 3);
	assert_int_equal(srv.ctr.v[SRV_REASS_DATAGRAMS], 1);
	assert_int_equal(srv.ctr.v[SRV_DROP_FRAGMENT], 0);
}

/* An atomic fragment nobody owns, behind a Destination Options header: the node gets the
 * packet without its Fragment header, the Destination Options header naming what the
 * Fragment header named, the Payload Length 8 octets shorter. */
static void ipv6_unowned_atomic_fragment_rebuilt_without_its_fragment_header(void **state)
{
	(void)state;
	flt_del_listen_fam(srv.flt, WIRE_IPPROTO_UDP, PORT, FLT_FAM_V4 | FLT_FAM_V6, relay.id);
	with_dstopts = true;
	input6(9, 0, 64, false);
	assert_int_equal(for_node, 1);
	assert_int_equal(whole_len, 14 + 40 + 8 + 64);
	const uint8_t *ip = whole + 14;
	assert_int_equal(ip[6], 60);                    /* still Destination Options first */
	assert_int_equal(ip[40], 17);                   /* which now names UDP */
	assert_int_equal(ip[4] << 8 | ip[5], 8 + 64);
	assert_int_equal(ip[48 + 4] << 8 | ip[48 + 5], 64);
}

/* An Ethernet/IPv6 packet from the peer to the node: the extension headers in ext (xlen
 * octets, their Next Header fields set; the first one's type is first), then a UDP header
 * to PORT and len - 8 octets of data. Returns the frame length. */
static size_t chain6(uint8_t *f, uint8_t first, const uint8_t *ext, size_t xlen, uint16_t len)
{
	size_t n = 14 + 40 + xlen + len;
	uint16_t plen = (uint16_t)(xlen + len);
	uint8_t *ip = f + 14, *u = ip + 40 + xlen;

	fragment6(f, 1, 0, 0, false);          /* Ethernet and the addresses */
	memset(ip + 40, 0, xlen + len);
	ip[4] = (uint8_t)(plen >> 8);
	ip[5] = (uint8_t)plen;
	ip[6] = first;
	memcpy(ip + 40, ext, xlen);
	u[0] = 0x9c; u[1] = 0x40;
	u[2] = 0; u[3] = PORT;
	u[4] = (uint8_t)(len >> 8); u[5] = (uint8_t)len;
	return n;
}

static void input_chain6(uint8_t first, const uint8_t *ext, size_t xlen, uint16_t len)
{
	static uint8_t f[2048];
	struct flt_pkt p;
	size_t n = chain6(f, first, ext, xlen, len);

	assert_int_equal(flt_parse(f, n, &p), 0);
	srv__reass_input(&srv, f, n, &p);
}

/* RFC 6946 §4: an atomic fragment is processed "in isolation" - and so is the packet it
 * carries when that is an atomic fragment again (a Fragment header with offset 0 and M
 * clear behind another): both Fragment headers go, the node gets the UDP datagram. Before,
 * the inner one was removed and the outer one was left: the node dropped the packet as a
 * fragment (Linux and the processes' lwIP answer it). */
static void ipv6_atomic_fragment_in_an_atomic_fragment_processed_whole(void **state)
{
	(void)state;
	static const uint8_t ext[] = { 44, 0, 0, 0, 0, 0, 0x7b, 0,     /* offset 0, M 0 */
				       17, 0, 0, 0, 0, 0, 0x7b, 0 };
	flt_del_listen_fam(srv.flt, WIRE_IPPROTO_UDP, PORT, FLT_FAM_V4 | FLT_FAM_V6, relay.id);
	input_chain6(44, ext, sizeof(ext), 64);
	assert_int_equal(for_node, 1);
	assert_int_equal(srv.ctr.v[SRV_REASS_ATOMIC], 2);
	assert_int_equal(whole_len, 14 + 40 + 64);
	const uint8_t *ip = whole + 14;
	assert_int_equal(ip[6], 17);
	assert_int_equal(ip[4] << 8 | ip[5], 64);
	assert_int_equal(ip[40 + 3], PORT);
	assert_int_equal(srv.ctr.v[SRV_REASS_IN_PROGRESS], 0);
}

/* The same with a Destination Options header between the two, and the outer Fragment
 * header's Reserved octet not zero. RFC 8200 §4.5: "8-bit reserved field. Initialized to
 * zero for transmission; ignored on reception." A Fragment header is 8 octets whatever
 * that octet says; read as a Hdr Ext Len, it made the rebuilt packet's Destination Options
 * header the upper layer's. */
static void ipv6_fragment_header_reserved_octet_ignored_when_rebuilding(void **state)
{
	(void)state;
	static const uint8_t ext[] = { 60, 0xff, 0, 0, 0, 0, 0x7c, 0,  /* Reserved 0xff */
				       44, 0, 1, 4, 0, 0, 0, 0,        /* PadN */
				       17, 0, 0, 0, 0, 0, 0x7c, 0 };
	flt_del_listen_fam(srv.flt, WIRE_IPPROTO_UDP, PORT, FLT_FAM_V4 | FLT_FAM_V6, relay.id);
	input_chain6(44, ext, sizeof(ext), 64);
	assert_int_equal(for_node, 1);
	assert_int_equal(whole_len, 14 + 40 + 8 + 64);
	const uint8_t *ip = whole + 14;
	assert_int_equal(ip[6], 60);                    /* Destination Options first */
	assert_int_equal(ip[40], 17);                   /* naming UDP */
	assert_int_equal(ip[4] << 8 | ip[5], 8 + 64);
	assert_int_equal(ip[48 + 3], PORT);
}

/* The owner of the UDP port gets the packet without either Fragment header. */
static void ipv6_atomic_fragment_in_an_atomic_fragment_delivered_to_the_owner(void **state)
{
	(void)state;
	static const uint8_t ext[] = { 44, 0, 0, 0, 0, 0, 0x7d, 0,
				       17, 0, 0, 0, 0, 0, 0x7d, 0 };
	input_chain6(44, ext, sizeof(ext), 64);
	assert_int_equal(delivered, 1);
	assert_int_equal(for_node, 0);
}

/* A datagram nobody owns whose first fragment came behind an atomic Fragment header (RFC
 * 6946 §4: that one is processed in isolation, and what it carries is the first fragment):
 * once whole, the node gets it without either Fragment header. Before, the rebuilt packet
 * kept the outer one and the node dropped it as a fragment. */
static void ipv6_unowned_datagram_whose_first_fragment_was_wrapped_rebuilt_without_either(void **state)
{
	(void)state;
	static uint8_t f[2048];
	uint8_t ext[16] = { 44, 0, 0, 0, 0, 0, 0x7f, 0,                /* atomic */
			    17, 0, 0, 1, 0, 0, 0, 21 };                 /* offset 0, M 1, id 21 */
	struct flt_pkt p;

	flt_del_listen_fam(srv.flt, WIRE_IPPROTO_UDP, PORT, FLT_FAM_V4 | FLT_FAM_V6, relay.id);
	size_t n = chain6(f, 44, ext, sizeof(ext), 1232);
	f[14 + 40 + 16 + 4] = (1232 + 64) >> 8;         /* the whole datagram's UDP Length */
	f[14 + 40 + 16 + 5] = (1232 + 64) & 0xff;
	assert_int_equal(flt_parse(f, n, &p), 0);
	srv__reass_input(&srv, f, n, &p);
	input6(21, 1232, 64, false);
	assert_int_equal(for_node, 1);
	assert_int_equal(whole_len, 14 + 40 + 1232 + 64);
	const uint8_t *ip = whole + 14;
	assert_int_equal(ip[6], 17);
	assert_int_equal(ip[4] << 8 | ip[5], 1232 + 64);
	assert_int_equal(srv.ctr.v[SRV_REASS_IN_PROGRESS], 0);
}

/* The first fragment of datagram 22 (offset 0, M 1) whose fragmentable part begins with an
 * atomic Fragment header (Identification 23), then UDP: frame f, returns its length. RFC
 * 8200 §4: extension headers "must be processed strictly in the order they appear in the
 * packet", so the outer Fragment header is the one reassembly goes by (§4.5: the inner one
 * is part of the "Fragmentable Part"); the inner atomic fragment is processed in isolation
 * (RFC 6946 §4) once the datagram is whole. */
static size_t first_fragment_wrapping_an_atomic_one(uint8_t *f)
{
	static const uint8_t ext[16] = { 44, 0, 0, 1, 0, 0, 0, 22,   /* offset 0, M 1, id 22 */
					 17, 0, 0, 0, 0, 0, 0, 23 }; /* offset 0, M 0, id 23 */
	size_t n = chain6(f, 44, ext, sizeof(ext), 1232);

	f[14 + 40 + 16 + 4] = (1232 + 64) >> 8;         /* the whole datagram's UDP Length */
	f[14 + 40 + 16 + 5] = (1232 + 64) & 0xff;
	return n;
}

/* Its owner gets both fragments once the last one (offset 8 + 1232) came, as one datagram:
 * the processes' lwIP reassembles them by the outer header too. Before, the first fragment
 * was taken for the atomic fragment 23 (wire_ipv6_upper names the last Fragment header at
 * offset 0), rebuilt as a fragment nobody could own and dropped; the last waited 60 s. */
static void ipv6_first_fragment_wrapping_an_atomic_fragment_reassembled_by_the_outer_header(
	void **state)
{
	(void)state;
	static uint8_t f[2048];
	struct flt_pkt p;
	size_t n = first_fragment_wrapping_an_atomic_one(f);

	assert_int_equal(flt_parse(f, n, &p), 0);
	srv__reass_input(&srv, f, n, &p);
	assert_int_equal(srv.ctr.v[SRV_REASS_ATOMIC], 0);
	assert_int_equal(srv.ctr.v[SRV_REASS_IN_PROGRESS], 1);
	assert_int_equal(delivered, 0);
	input6(22, 8 + 1232, 64, false);
	assert_int_equal(delivered, 2);
	assert_int_equal(delivered_off[0], 0);
	assert_int_equal(delivered_off[1], 8 + 1232);
	assert_int_equal(srv.ctr.v[SRV_REASS_DATAGRAMS], 1);
	assert_int_equal(srv.ctr.v[SRV_REASS_IN_PROGRESS], 0);
	assert_int_equal(srv.ctr.v[SRV_DROP_FRAGMENT], 0);
}

/* Nobody owns it: the node gets the UDP datagram whole, without either Fragment header. */
static void ipv6_unowned_first_fragment_wrapping_an_atomic_fragment_rebuilt_whole(void **state)
{
	(void)state;
	static uint8_t f[2048];
	struct flt_pkt p;

	flt_del_listen_fam(srv.flt, WIRE_IPPROTO_UDP, PORT, FLT_FAM_V4 | FLT_FAM_V6, relay.id);
	size_t n = first_fragment_wrapping_an_atomic_one(f);
	assert_int_equal(flt_parse(f, n, &p), 0);
	srv__reass_input(&srv, f, n, &p);
	input6(22, 8 + 1232, 64, false);
	assert_int_equal(for_node, 1);
	assert_int_equal(whole_len, 14 + 40 + 1232 + 64);
	const uint8_t *ip = whole + 14;
	assert_int_equal(ip[6], 17);
	assert_int_equal(ip[4] << 8 | ip[5], 1232 + 64);
	assert_int_equal(ip[40 + 3], PORT);
	assert_int_equal(srv.ctr.v[SRV_REASS_ATOMIC], 1);   /* the inner one, once whole */
	assert_int_equal(srv.ctr.v[SRV_REASS_IN_PROGRESS], 0);
	assert_int_equal(srv.ctr.v[SRV_DROP_FRAGMENT], 0);
}

/* An atomic fragment whose Next Header is 59 and nothing after it. RFC 8200 §4.5: "If the
 * fragment is a whole datagram (that is, both the Fragment Offset field and the M flag are
 * zero), then it does not need any further reassembly and should be processed as a fully
 * reassembled packet"; §4.7: "The value 59 in the Next Header field of an IPv6 header or
 * any extension header indicates that there is nothing following that header." So it is a
 * well-formed packet with nothing in it: the node gets it as one with no Fragment header
 * (and ignores it, as it does any No Next Header packet), not counted a bad fragment.
 * Before, it was dropped as drop_reass_bad, a fragment that carries no data. */
/* An atomic fragment (offset 0, M 0, Identification id) whose Next Header is 59, with
 * tail octets after it, into the node: processed whole, handed to the node with no
 * Fragment header, not counted bad. */
static void atomic_no_next_header_is_whole(uint8_t id, size_t tail)
{
	const uint8_t ext[] = { 59, 0, 0, 0, 0, 0, 0, id };
	static uint8_t f[2048];
	struct flt_pkt p;
	size_t n = chain6(f, 44, ext, sizeof(ext), tail);

	assert_int_equal(flt_parse(f, n, &p), 0);
	srv__reass_input(&srv, f, n, &p);
	assert_int_equal(srv.ctr.v[SRV_DROP_REASS_BAD], 0);
	assert_int_equal(srv.ctr.v[SRV_REASS_ATOMIC], 1);
	assert_int_equal(for_node, 1);
	assert_int_equal(whole[14 + 6], 59);
	assert_int_equal(whole_len, 14 + 40 + tail);
}

static void ipv6_atomic_fragment_with_no_next_header_is_a_whole_packet_not_a_bad_fragment(
	void **state)
{
	(void)state;
	atomic_no_next_header_is_whole(24, 0);
	assert_int_equal(srv.ctr.v[SRV_DROP_FRAGMENT], 0);
	assert_int_equal(whole[14 + 4] << 8 | whole[14 + 5], 0);
	assert_int_equal(srv.ctr.v[SRV_REASS_IN_PROGRESS], 0);
}

/* The same with octets after it (§4.7: "those octets must be ignored"): the same path. */
static void ipv6_atomic_fragment_with_no_next_header_and_octets_after_it_a_whole_packet(
	void **state)
{
	(void)state;
	atomic_no_next_header_is_whole(25, 16);
}

static void ipv6_fragment_not_a_multiple_of_8_gets_parameter_problem_at_payload_length(void **state)
{
	(void)state;
	input6(8, 0, 1001, true);
	assert_int_equal(param_problems6, 1);
	assert_int_equal(param_pointer6, 4);
	assert_int_equal(srv.ctr.v[SRV_DROP_REASS_BAD], 1);
	assert_int_equal(srv.ctr.v[SRV_REASS_IN_PROGRESS], 0);
}

/* RFC 8200 §4.5: a fragment that would make the reassembled Payload Length exceed 65,535
 * "must be discarded and an ICMP Parameter Problem, Code 0, message should be sent ...,
 * pointing to the Fragment Offset field". */
static void ipv6_fragment_past_65535_gets_parameter_problem_at_fragment_offset(void **state)
{
	(void)state;
	input6(9, 65528 - 8, 16, true);       /* 8 + 65520 + 16 > 65535 */
	assert_int_equal(param_problems6, 1);
	assert_int_equal(param_pointer6, 40 + 2);
	input6(9, 65528 - 8 - 16, 16, true);  /* 8 + 65504 + 16 fits */
	assert_int_equal(param_problems6, 1);
	assert_int_equal(srv.ctr.v[SRV_REASS_IN_PROGRESS], 1);
}

/* RFC 8200 §4.5 checks each fragment against 65,535 with its own unfragmentable part; a
 * first fragment with a Destination Options header before its Fragment header and a last
 * one without it each pass, but together they make a packet whose Payload Length (8 +
 * 65,535) does not fit its 16 bits. Nobody owns it: it is dropped and counted, not handed
 * to the node with a Payload Length cut to 7. */
static void ipv6_unowned_datagram_past_65535_octets_dropped(void **state)
{
	(void)state;
	flt_del_listen_fam(srv.flt, WIRE_IPPROTO_UDP, PORT, FLT_FAM_V4 | FLT_FAM_V6, relay.id);
	with_dstopts = true;
	input6(20, 0, 1232, true);              /* 8 + 1232 fits */
	with_dstopts = false;
	uint32_t off = 1232;
	for (; off + 1232 < 65535; off += 1232)
		input6(20, off, 1232, true);
	input6(20, off, (uint16_t)(65535 - off), false);   /* its data ends at 65535: fits */
	assert_int_equal(param_problems6, 0);
	assert_int_equal(for_node, 0);
	assert_int_equal(srv.ctr.v[SRV_DROP_REASS_BAD], 1);
	assert_int_equal(srv.ctr.v[SRV_REASS_IN_PROGRESS], 0);
	assert_int_equal(srv.ctr.v[SRV_DROP_FRAGMENT], off / 1232 + 1);
}

/* RFC 8200 §4.5: abandoned after 60 s (IPv4's is 30 s here), Time Exceeded when the
 * first fragment came. */
static void ipv6_incomplete_datagram_expires_after_60_s_with_time_exceeded(void **state)
{
	(void)state;
	input6(10, 0, 1232, true);
	input6(11, 1232, 1232, true);         /* no first fragment */
	now_ms += 59999;
	srv__reass_tick(&srv);
	assert_int_equal(srv.ctr.v[SRV_DROP_REASS_TIMEOUT], 0);
	now_ms += 1;
	srv__reass_tick(&srv);
	assert_int_equal(srv.ctr.v[SRV_DROP_REASS_TIMEOUT], 2);
	assert_int_equal(time_exceeded6, 1);
	assert_int_equal(time_exceeded, 0);
}

/* RFC 5722 §4, written for IPv6. */
static void ipv6_overlap_drops_whole_datagram(void **state)
{
	(void)state;
	input6(12, 0, 1232, true);
	input6(12, 1224, 1232, true);
	assert_int_equal(srv.ctr.v[SRV_DROP_REASS_OVERLAP], 1);
	input6(12, 1232, 1232, true);
	input6(12, 2464, 544, false);
	assert_int_equal(delivered, 0);
}

/* The direct path: the key goes into dp_frag6 before the fragments go back into the TAP,
 * and leaves it after SRV_REASS_STEER_MS; a fragment of it that comes back to ulsd
 * meanwhile (its owner left) is dropped, not reassembled again. */
static void ipv6_direct_owner_gets_fragments_through_the_tap_and_steering(void **state)
{
	(void)state;
	input6(13, 0, 1232, true);
	input6(13, 1232, 64, false);
	assert_int_equal(steered6, 1);
	assert_int_equal(steered, 0);
	assert_int_equal(sent, 2);
	input6(13, 0, 1232, true);
	assert_int_equal(srv.ctr.v[SRV_DROP_REASS_UNSTEERED], 1);
	now_ms += 1000;
	srv__reass_tick(&srv);
	assert_int_equal(unsteered6, 1);
}

/* Deviation (reass.c): the steering program walks no extension header, so a direct-path
 * owner's datagram with one before its Fragment header is dropped and counted, never
 * written back into the TAP. */
static void ipv6_direct_datagram_with_an_extension_header_dropped_and_counted(void **state)
{
	(void)state;
	with_dstopts = true;
	input6(14, 0, 1232, true);
	input6(14, 1232, 64, false);
	assert_int_equal(srv.ctr.v[SRV_DROP_REASS_IPV6_DIRECT], 1);
	assert_int_equal(sent, 0);
	assert_int_equal(steered6, 0);
	assert_int_equal(srv.ctr.v[SRV_DROP_FRAGMENT], 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(fragments_in_order_delivered_to_owner_in_order,
						setup_relay, teardown),
		cmocka_unit_test_setup_teardown(fragments_out_of_order_delivered_sorted_by_offset,
						setup_relay, teardown),
		cmocka_unit_test_setup_teardown(
			overlap_drops_whole_datagram_and_later_fragments_do_not_complete_it,
			setup_relay, teardown),
		cmocka_unit_test_setup_teardown(exact_duplicate_dropped_alone, setup_relay, teardown),
		cmocka_unit_test_setup_teardown(same_offset_other_length_is_an_overlap, setup_relay,
						teardown),
		cmocka_unit_test_setup_teardown(data_past_the_last_fragment_is_bad, setup_relay,
						teardown),
		cmocka_unit_test_setup_teardown(
			incomplete_datagram_expires_with_time_exceeded_when_first_came, setup_relay,
			teardown),
		cmocka_unit_test_setup_teardown(flood_of_first_fragments_held_up_to_the_bound,
						setup_relay, teardown),
		cmocka_unit_test_setup_teardown(too_many_fragments_in_one_datagram_drop_it,
						setup_relay, teardown),
		cmocka_unit_test_setup_teardown(unowned_datagram_past_65535_octets_dropped, setup_relay,
						teardown),
		cmocka_unit_test_setup_teardown(ipv6_atomic_fragment_isolated_from_a_datagram_of_its_identification,
						setup_relay, teardown),
		cmocka_unit_test_setup_teardown(ipv6_unowned_atomic_fragment_rebuilt_without_its_fragment_header,
						setup_relay, teardown),
		cmocka_unit_test_setup_teardown(unowned_datagram_rebuilt_whole_for_the_node, setup_relay,
						teardown),
		cmocka_unit_test_setup_teardown(
			direct_owner_gets_fragments_through_the_tap_and_steering, setup_direct,
			teardown),
		cmocka_unit_test_setup_teardown(
			ipv6_fragments_out_of_order_delivered_to_owner_in_order, setup_relay,
			teardown),
		cmocka_unit_test_setup_teardown(ipv6_atomic_fragment_delivered_at_once, setup_relay,
						teardown),
		cmocka_unit_test_setup_teardown(
			ipv6_atomic_fragment_in_an_atomic_fragment_processed_whole, setup_relay,
			teardown),
		cmocka_unit_test_setup_teardown(
			ipv6_fragment_header_reserved_octet_ignored_when_rebuilding, setup_relay,
			teardown),
		cmocka_unit_test_setup_teardown(
			ipv6_atomic_fragment_in_an_atomic_fragment_delivered_to_the_owner,
			setup_relay, teardown),
		cmocka_unit_test_setup_teardown(
			ipv6_unowned_datagram_whose_first_fragment_was_wrapped_rebuilt_without_either,
			setup_relay, teardown),
		cmocka_unit_test_setup_teardown(
			ipv6_first_fragment_wrapping_an_atomic_fragment_reassembled_by_the_outer_header,
			setup_relay, teardown),
		cmocka_unit_test_setup_teardown(
			ipv6_unowned_first_fragment_wrapping_an_atomic_fragment_rebuilt_whole,
			setup_relay, teardown),
		cmocka_unit_test_setup_teardown(
			ipv6_atomic_fragment_with_no_next_header_is_a_whole_packet_not_a_bad_fragment,
			setup_relay, teardown),
		cmocka_unit_test_setup_teardown(
			ipv6_atomic_fragment_with_no_next_header_and_octets_after_it_a_whole_packet,
			setup_relay, teardown),
		cmocka_unit_test_setup_teardown(
			ipv6_fragment_not_a_multiple_of_8_gets_parameter_problem_at_payload_length,
			setup_relay, teardown),
		cmocka_unit_test_setup_teardown(
			ipv6_fragment_past_65535_gets_parameter_problem_at_fragment_offset,
			setup_relay, teardown),
		cmocka_unit_test_setup_teardown(ipv6_unowned_datagram_past_65535_octets_dropped,
						setup_relay, teardown),
		cmocka_unit_test_setup_teardown(
			ipv6_incomplete_datagram_expires_after_60_s_with_time_exceeded, setup_relay,
			teardown),
		cmocka_unit_test_setup_teardown(ipv6_overlap_drops_whole_datagram, setup_relay,
						teardown),
		cmocka_unit_test_setup_teardown(
			ipv6_direct_owner_gets_fragments_through_the_tap_and_steering, setup_direct,
			teardown),
		cmocka_unit_test_setup_teardown(
			ipv6_direct_datagram_with_an_extension_header_dropped_and_counted,
			setup_direct, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
