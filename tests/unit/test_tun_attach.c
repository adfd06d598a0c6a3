/* netif/tun.c: the first queue of a node's TAP, when a previous owner's queue outlives it.
 * tun sets a device's features (IFF_VNET_HDR) from the first queue only; a queue of the
 * previous owner that is still open, even detached, keeps its setting. The test process
 * moves into a network namespace of its own (root only) and makes its TAP there. */
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <cmocka.h>

#include "netif/tun.h"
#include "tests/unit/owntap.h"

#define TAP "ulsut9"

/* A queue of TAP as another owner would open it; detached if asked. */
static int other_owner_queue(bool vnet_hdr, bool detach)
{
	struct ifreq ifr = { 0 };
	int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);

	assert_true(fd >= 0);
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", TAP);
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_MULTI_QUEUE | (vnet_hdr ? IFF_VNET_HDR : 0);
	assert_int_equal(ioctl(fd, TUNSETIFF, &ifr), 0);
	if (detach) {
		struct ifreq q = { .ifr_flags = IFF_DETACH_QUEUE };
		assert_int_equal(ioctl(fd, TUNSETQUEUE, &q), 0);
	}
	return fd;
}

static bool has_vnet_hdr(int fd)
{
	struct ifreq ifr = { 0 };

	assert_int_equal(ioctl(fd, TUNGETIFF, &ifr), 0);
	return ifr.ifr_flags & IFF_VNET_HDR;
}

/* The setting each queue asks for is the device's once the other owner's queue is gone,
 * and busy while it stays, in both directions. */
static void check(bool old_hdr, bool offload, bool detach)
{
	bool mq = true;
	int old = other_owner_queue(old_hdr, detach);

	assert_int_equal(nif__tun_attach(TAP, offload, true, &mq), -EBUSY);
	close(old);
	int fd = nif__tun_attach(TAP, offload, true, &mq);
	assert_true(fd >= 0);
	assert_true(mq);
	assert_int_equal(has_vnet_hdr(fd), offload);
	close(fd);
}

static void test_a_detached_queue_with_a_header_keeps_a_node_without_offload_busy(void **state)
{
	(void)state;
	check(true, false, true);
}

static void test_an_attached_queue_without_a_header_keeps_a_node_with_offload_busy(void **state)
{
	(void)state;
	check(false, true, false);
}

static void test_a_previous_owner_with_the_same_setting_is_no_obstacle(void **state)
{
	(void)state;
	bool mq = true;
	int old = other_owner_queue(true, true);
	int fd = nif__tun_attach(TAP, true, true, &mq);

	assert_true(fd >= 0);
	assert_true(has_vnet_hdr(fd));
	close(fd);
	close(old);
}

static int setup(void **state)
{
	(void)state;
	return owntap_make(TAP, IFF_MULTI_QUEUE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_detached_queue_with_a_header_keeps_a_node_without_offload_busy),
		cmocka_unit_test(test_an_attached_queue_without_a_header_keeps_a_node_with_offload_busy),
		cmocka_unit_test(test_a_previous_owner_with_the_same_setting_is_no_obstacle),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
