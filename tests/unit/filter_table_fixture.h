/* The fixture of the filter table's tests (test_filter_table.c, test_filter_table6.c): an
 * empty table with a fixed hash seed, and frames built, parsed and looked up or checked. */
#ifndef ULS_TESTS_UNIT_FILTER_TABLE_FIXTURE_H
#define ULS_TESTS_UNIT_FILTER_TABLE_FIXTURE_H

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "filter/filter.h"
#include "tests/unit/filter_frames.h"

#define TCP WIRE_IPPROTO_TCP
#define UDP WIRE_IPPROTO_UDP

static inline int setup(void **state)
{
	struct flt_table *t = flt_table_new();

	if (!t || flt_table_set_seed(t, 42) < 0)
		return -1;
	*state = t;
	return 0;
}

static inline int teardown(void **state)
{
	flt_table_free(*state);
	return 0;
}

/* Build, parse and look up a frame. */
static inline flt_owner_t rx(struct flt_table *t, const struct fspec *s)
{
	struct frame f;
	struct flt_pkt p;

	build(&f, s);
	assert_int_equal(flt_parse(f.b, f.len, &p), 0);
	return flt_lookup_rx(t, &p);
}

/* Build, parse and check a frame that owner wants to send from the node. The template
 * is turned around: from the node's MAC and address to the peer. */
static inline int tx(struct flt_table *t, flt_owner_t owner, struct fspec s)
{
	struct frame f;
	struct flt_pkt p;

	if (!s.src_mac)
		s.src_mac = node_mac;
	if (!s.dst_mac)
		s.dst_mac = peer_mac;
	if (!s.src)
		s.src = NODE_IP;
	if (!s.dst)
		s.dst = PEER_IP;
	build(&f, &s);
	assert_int_equal(flt_parse(f.b, f.len, &p), 0);
	return flt_check_tx(t, &p, owner, NODE_IP, node_mac);
}

#endif
