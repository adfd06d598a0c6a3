/* libFuzzer target for the filter: flt_parse, flt_lookup_rx and flt_check_tx on
 * arbitrary bytes (see README.md for how to build and run it).
 *
 * Every input is tried twice: as it is, and with its IPv4 header checksum made right,
 * so that the fuzzer does not have to learn RFC 791 arithmetic before it can reach the
 * transport parsers. The rule table holds a fixed set of rules plus, for each input,
 * a connected rule for the input's own tuple, which must then win the lookup: that is
 * the oracle for the hash table, beyond "no crash, no out-of-bounds read".
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "filter/filter.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

static const uint8_t node_mac[WIRE_ETH_ALEN] = { 0x02, 0x75, 0x6c, 0x00, 0x00, 0x01 };

static struct flt_table *table(void)
{
	static struct flt_table *t;

	if (t)
		return t;
	t = flt_table_new();
	CHECK(t && flt_table_set_seed(t, 1) == 0);
	/* Owners 1-4 share TCP 80, owner 5 has TCP 22 and UDP 53, owner 6 two
	 * connections. */
	for (flt_owner_t o = 1; o <= 4; o++)
		CHECK(flt_add_listen(t, WIRE_IPPROTO_TCP, 80, o, true) == 0);
	CHECK(flt_add_listen(t, WIRE_IPPROTO_TCP, 22, 5, false) == 0);
	CHECK(flt_add_listen(t, WIRE_IPPROTO_UDP, 53, 5, false) == 0);
	CHECK(flt_add_connected(t, WIRE_IPPROTO_TCP, 50000, 0x0200a8c0, 443, 6) == 0);
	CHECK(flt_add_connected(t, WIRE_IPPROTO_UDP, 50001, 0x0200a8c0, 53, 6) == 0);
	return t;
}

static void fix_ipv4_checksum(uint8_t *f, size_t len)
{
	size_t hlen;
	uint32_t sum = 0;

	if (len < 34 || f[12] != 0x08 || f[13] != 0x00)
		return;
	hlen = (size_t)(f[14] & 0x0f) * 4;
	if (hlen < 20 || 14 + hlen > len)
		return;
	f[24] = f[25] = 0;
	for (size_t i = 0; i < hlen; i += 2)
		sum += (uint32_t)(f[14 + i] << 8 | f[15 + i]);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	f[24] = (uint8_t)(~sum >> 8);
	f[25] = (uint8_t)~sum;
}

static void one(struct flt_table *t, const uint8_t *f, size_t len)
{
	struct flt_pkt p;
	flt_owner_t owner;
	int ret = flt_parse(f, len, &p);

	if (ret < 0) {
		CHECK(-ret > FLT_REASON_NONE && -ret < FLT_DENY_SRC_MAC);
		flt_count_rx_drop(t, (enum flt_reason)-ret);
		return;
	}
	CHECK(ret == 0);
	CHECK(p.l3_off <= len && p.l4_off <= len && p.payload_off <= len);
	if (p.ethertype == WIRE_ETHERTYPE_IPV4)
		CHECK(p.l3_off + (size_t)p.ip.total <= len && p.ip.hlen >= 20);

	owner = flt_lookup_rx(t, &p);
	CHECK(owner == FLT_NO_OWNER || (owner >= 1 && owner <= 6));
	/* Whatever the input, the tx check answers, for the owner it was delivered to
	 * and for one it was not. */
	ret = flt_check_tx(t, &p, owner, p.ip.src, p.src_mac);
	CHECK(ret == 0 || (-ret >= FLT_DENY_SRC_MAC && -ret < FLT_REASON_END));
	ret = flt_check_tx(t, &p, 7, 0x0100a8c0, node_mac);
	CHECK(ret == 0 || (-ret >= FLT_DENY_SRC_MAC && -ret < FLT_REASON_END));

	/* Give the packet's own tuple a connected rule: it must win the lookup, and
	 * deleting it must restore the previous answer. */
	if (p.ethertype == WIRE_ETHERTYPE_IPV4 && p.has_ports && !p.ip.fragment &&
	    (p.ip.proto == WIRE_IPPROTO_TCP || p.ip.proto == WIRE_IPPROTO_UDP) &&
	    p.sport && p.dport && p.ip.src &&
	    flt_add_connected(t, p.ip.proto, p.dport, p.ip.src, p.sport, 100) == 0) {
		CHECK(flt_lookup_rx(t, &p) == 100);
		CHECK(flt_del_connected(t, p.ip.proto, p.dport, p.ip.src, p.sport, 100) == 0);
		CHECK(flt_lookup_rx(t, &p) == owner);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct flt_table *t = table();
	/* An exact-size heap copy, so a read one past the end is caught by ASan. */
	uint8_t *f = malloc(size ? size : 1);

	CHECK(f);
	memcpy(f, data, size);
	one(t, f, size);
	fix_ipv4_checksum(f, size);
	one(t, f, size);
	free(f);
	return 0;
}
