/* One of the process's stack counters by name (uls_counters), for unit tests that check a
 * count (test_mirror, test_synshed); a name the stack does not have fails the test. */
#ifndef ULS_TESTS_UNIT_COUNTER_FIXTURE_H
#define ULS_TESTS_UNIT_COUNTER_FIXTURE_H

#include <stdint.h>
#include <string.h>

#include "uls.h"

static __attribute__((unused)) uint64_t counter(const char *name)
{
	static struct uls_counter c[512];
	int n = uls_counters(c, 512);

	for (int i = 0; i < n && i < 512; i++)
		if (strcmp(c[i].name, name) == 0)
			return c[i].value;
	fail_msg("no counter %s", name);
	return 0;
}

#endif
