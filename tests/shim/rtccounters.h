/* For test programs run under ulsrun: print the run-to-completion counters (rtc_*) and
 * mirror_tokens_skipped as " name=value" pairs on stdout, read through the uls_counters that
 * libuls-preload.so exports (dlsym: the programs do not link libuls). Nothing when the
 * program runs without the preload library. */
#ifndef ULS_TESTS_SHIM_RTCCOUNTERS_H
#define ULS_TESTS_SHIM_RTCCOUNTERS_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct counter {  /* uls.h's struct uls_counter */
	const char *name;
	uint64_t value;
};

static void print_counters(void)
{
	int (*get)(struct counter *, size_t) =
		(int (*)(struct counter *, size_t))dlsym(RTLD_DEFAULT, "uls_counters");
	static struct counter c[512];

	if (!get)
		return;
	int n = get(c, 512);
	for (int i = 0; i < n && i < 512; i++)
		if (strncmp(c[i].name, "rtc_", 4) == 0 ||
		    strcmp(c[i].name, "mirror_tokens_skipped") == 0)
			printf(" %s=%llu", c[i].name, (unsigned long long)c[i].value);
}

#endif
