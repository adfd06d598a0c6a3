/* netif/qdisc.c: ulsd replaces the kernel's default root qdisc of its TAP (mq over 256
 * pfifo_fast, reset at every queue's renewal) by noqueue, and leaves a root an operator
 * chose. Each test makes a multi-queue TAP in a network namespace of its own (root only)
 * and brings it up, which is when the kernel attaches its default. */
#include <errno.h>
#include <linux/if.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "netif/tap.h"
#include "tests/unit/owntap.h"

#define TAP "ulsut10"

static unsigned tap_up(void)
{
	struct ifreq ifr = { 0 };
	int sd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	assert_true(sd >= 0);
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", TAP);
	assert_int_equal(ioctl(sd, SIOCGIFFLAGS, &ifr), 0);
	ifr.ifr_flags |= IFF_UP;
	assert_int_equal(ioctl(sd, SIOCSIFFLAGS, &ifr), 0);
	assert_int_equal(ioctl(sd, SIOCGIFINDEX, &ifr), 0);
	close(sd);
	assert_true(ifr.ifr_ifindex > 0);
	return (unsigned)ifr.ifr_ifindex;
}

static void test_the_kernels_default_root_is_replaced_by_noqueue_once(void **state)
{
	char kind[16];
	uint32_t handle = 1;
	(void)state;

	unsigned ifindex = tap_up();
	assert_int_equal(nif_qdisc_root(ifindex, kind, &handle), 0);
	assert_string_equal(kind, "mq");
	assert_int_equal(handle, 0);
	assert_int_equal(nif_tap_noqueue(ifindex), 1);
	assert_int_equal(nif_qdisc_root(ifindex, kind, &handle), 0);
	assert_string_equal(kind, "noqueue");
	assert_int_equal(nif_tap_noqueue(ifindex), 0);  /* noqueue already */
	assert_int_equal(nif_qdisc_root(ifindex, kind, &handle), 0);
	assert_string_equal(kind, "noqueue");
}

static void test_a_root_the_operator_chose_stays(void **state)
{
	char kind[16];
	uint32_t handle = 0;
	(void)state;

	unsigned ifindex = tap_up();
	assert_int_equal(nif_qdisc_set_root(ifindex, "mq", 0x00010000u), 0);  /* tc ... handle 1: */
	assert_int_equal(nif_tap_noqueue(ifindex), 0);
	assert_int_equal(nif_qdisc_root(ifindex, kind, &handle), 0);
	assert_string_equal(kind, "mq");
	assert_int_equal(handle, 0x00010000u);
}

static void test_an_unknown_interface_is_an_error_not_a_change(void **state)
{
	char kind[16];
	uint32_t handle;
	(void)state;

	unsigned ifindex = tap_up();
	assert_int_equal(nif_qdisc_root(ifindex + 1000, kind, &handle), -ENOENT);
	assert_true(nif_tap_noqueue(ifindex + 1000) < 0);
	assert_true(nif_qdisc_set_root(ifindex, "a-kind-name-too-long", 0) == -EINVAL);
}

static int setup(void **state)
{
	(void)state;
	return owntap_make(TAP, IFF_MULTI_QUEUE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_the_kernels_default_root_is_replaced_by_noqueue_once, setup),
		cmocka_unit_test_setup(test_a_root_the_operator_chose_stays, setup),
		cmocka_unit_test_setup(test_an_unknown_interface_is_an_error_not_a_change, setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
