/* libFuzzer target for the reader of a process's connection table (netif/conntab.c): the
 * shared memory each process writes and ulsd copies when ulsstat asks (server/ctl.c,
 * STATS). The process may write anything there at any time.
 *
 * The input is the table as ulsd maps it: a header, then as many whole entries as fit
 * (ulsd's capacity is its own, not the header's). Oracles besides the sanitizers:
 *   - the reader's verdict is one of its named refusals; a header whose magic, version or
 *     entry size is not ulsd's is refused as another version, a capacity not ulsd's as a
 *     bad header; an odd sequence number never gives a copy (the writer is mid-write), a
 *     count over the capacity is refused;
 *   - a copy has count <= capacity, total >= count, and its entries are the table's;
 *   - an entry passes uls_conntab_ent_ok() exactly when a model of its rules says so, and
 *     every state has a name;
 *   - the process's own header check accepts the header ulsd writes for this capacity and
 *     refuses the input's header unless magic, version, entry size and size agree.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "netif/conntab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

/* AF_INET: ::ffff:a.b.c.d with a.b.c.d not 0; AF_INET6: none of ::ffff:0:0/96, ::,
 * ff00::/8. Written out octet by octet, not with the helpers the check uses. */
static bool model_addr_ok(uint8_t family, const uint8_t *a)
{
	bool mapped = true, zero = true, zero4 = true;

	for (int i = 0; i < 16; i++) {
		if (i < 12)
			mapped &= a[i] == (i >= 10 ? 0xff : 0);
		zero &= a[i] == 0;
		if (i >= 12)
			zero4 &= a[i] == 0;
	}
	if (family == 2)
		return mapped && !zero4;
	return family == 10 && !mapped && !zero && a[0] != 0xff;
}

static bool model_ent_ok(const struct uls_conntab_ent *e)
{
	return e->state >= ULS_TCP_SYN_SENT && e->state <= ULS_TCP_TIME_WAIT && e->lport &&
	       e->rport && model_addr_ok(e->family, e->rip) && model_addr_ok(e->family, e->lip) &&
	       e->snd_wscale < 15 && e->rcv_wscale < 15 && (e->flags | 0x07u) == 0x07u;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < sizeof(struct uls_conntab_hdr))
		return 0;
	uint32_t cap = (uint32_t)((size - sizeof(struct uls_conntab_hdr)) /
				  sizeof(struct uls_conntab_ent));
	size_t len = uls_conntab_size(cap);
	/* Aligned as ulsd's mapping is. */
	uint8_t *map = aligned_alloc(64, (len + 64 + 63) / 64 * 64);  /* a multiple of 64 */
	struct uls_conntab_ent *out = calloc(cap + 1, sizeof(*out));
	CHECK(map && out);
	memcpy(map, data, len);
	const struct uls_conntab_hdr *h = (const void *)map;
	const struct uls_conntab_ent *ents = (const void *)(h + 1);

	uint32_t count = 0xdeadbeef, total = 0xdeadbeef;
	uint64_t ns = 0;
	int rc = uls_conntab_snapshot(map, cap, out, &count, &total, &ns);
	CHECK(rc == ULS_CONNTAB_OK || rc == ULS_CONNTAB_TORN || rc == ULS_CONNTAB_BAD_HEADER ||
	      rc == ULS_CONNTAB_BAD_VERSION);
	if (h->magic != ULS_CONNTAB_MAGIC || h->version != ULS_CONNTAB_VERSION ||
	    h->entry_size != sizeof(struct uls_conntab_ent))
		CHECK(rc == ULS_CONNTAB_BAD_VERSION);
	else if (h->capacity != cap)
		CHECK(rc == ULS_CONNTAB_BAD_HEADER);
	else if (h->seq & 1u)
		CHECK(rc == ULS_CONNTAB_TORN);
	else if (h->count > cap)
		CHECK(rc == ULS_CONNTAB_BAD_HEADER);
	else
		CHECK(rc == ULS_CONNTAB_OK);
	if (rc == ULS_CONNTAB_OK) {
		CHECK(count == h->count && count <= cap && total >= count);
		CHECK(total == (h->total < count ? count : h->total) && ns == h->published_ns);
		CHECK(memcmp(out, ents, (size_t)count * sizeof(*out)) == 0);
		for (uint32_t i = 0; i < count; i++) {
			CHECK(uls_conntab_ent_ok(&out[i]) == model_ent_ok(&out[i]));
			CHECK(uls_tcp_state_name(out[i].state) != NULL);
		}
	} else {
		CHECK(count == 0xdeadbeef && total == 0xdeadbeef);
	}

	bool header_ok = h->magic == ULS_CONNTAB_MAGIC && h->version == ULS_CONNTAB_VERSION &&
			 h->entry_size == sizeof(struct uls_conntab_ent) && h->capacity == cap;
	CHECK((uls_conntab_check_header(map, len) == 0) == header_ok);
	struct uls_conntab_hdr *w = (void *)map;
	w->magic = ULS_CONNTAB_MAGIC;
	w->version = ULS_CONNTAB_VERSION;
	w->entry_size = sizeof(struct uls_conntab_ent);
	w->capacity = cap;
	CHECK(uls_conntab_check_header(map, len) == 0);
	CHECK(uls_conntab_check_header(map, len + 1) != 0);
	free(out);
	free(map);
	return 0;
}
