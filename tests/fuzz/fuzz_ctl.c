/* libFuzzer target for the control protocol's validator (netif/ctlproto.c, uls_ctl_check):
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

#include "netif/ctlproto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct uls_ctl_msg out, again;

	memset(&out, 0xa5, sizeof(out));
	int rc = uls_ctl_check(data, (ssize_t)size, &out);
	if (size != ULS_CTL_MSG_SIZE)
		CHECK(rc == -ULS_CTL_BAD_SIZE);
	if (rc != 0) {
		CHECK(-rc >= ULS_CTL_BAD_SIZE && -rc < ULS_CTL_ERROR_END);
		CHECK(uls_ctl_error_name(rc) != NULL);
		for (size_t i = 0; i < sizeof(out); i++)
			CHECK(((const uint8_t *)&out)[i] == 0xa5);
		return 0;
	}
	CHECK(memcmp(&out, data, sizeof(out)) == 0);
	CHECK(out.type >= ULS_CTL_HELLO && out.type < ULS_CTL_TYPE_MAX);
	CHECK(uls_ctl_check(&out, sizeof(out), &again) == 0);
	return 0;
}
