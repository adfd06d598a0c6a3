/* lwIP's core, initialised once for a group of tests that call into it directly (test_rxq,
 * test_timers): under the core lock, as the stack thread initialises it. */
#ifndef ULS_TESTS_UNIT_LWIP_FIXTURE_H
#define ULS_TESTS_UNIT_LWIP_FIXTURE_H

#include "internal.h"

#include "lwip/init.h"

static int lwip_group_setup(void **state)
{
	(void)state;
	stk__lock();
	lwip_init();
	stk__unlock();
	return 0;
}

#endif
