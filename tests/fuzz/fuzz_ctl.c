/* libFuzzer target for the control protocol's validator (netif/ctl/ctl.c, ctl_check):
 * every message ulsd reads from a process, and every reply a process reads from ulsd,
 * goes through it before any field is used.
 *
 * Oracles besides the sanitizers: a refusal is one of the named reasons and leaves the
 * output untouched; an accepted message is copied exactly, has a known type, passes again,
 * and a message of any other length is refused for its size.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "netif/ctl/ctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctl_msg out, again;

	memset(&out, 0xa5, sizeof(out));
	int rc = ctl_check(data, (ssize_t)size, &out);
	if (size != CTL_MSG_SIZE)
		CHECK(rc == -CTL_BAD_SIZE);
	if (rc != 0) {
		CHECK(-rc >= CTL_BAD_SIZE && -rc < CTL_ERROR_END);
		CHECK(ctl_error_name(rc) != NULL);
		for (size_t i = 0; i < sizeof(out); i++)
			CHECK(((const uint8_t *)&out)[i] == 0xa5);
		return 0;
	}
	CHECK(memcmp(&out, data, sizeof(out)) == 0);
	CHECK(out.type >= CTL_HELLO && out.type < CTL_TYPE_MAX);
	CHECK(ctl_check(&out, sizeof(out), &again) == 0);
	return 0;
}
