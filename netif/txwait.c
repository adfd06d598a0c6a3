/* The bounded wait for transmit space on an io_uring (see txwait.h).
 *
 * A sender that finds every transmit buffer in flight holds a lock (the stack's core lock,
 * or ulsd's device lock), so an untimed wait would stop the whole process if no write
 * completed (issue 13: no input may hang a process). Writes to a TAP should not wait at
 * all (tun's send buffer is unlimited unless TUNSETSNDBUF, which ulsd does not use), but
 * that is not counted on: a write can wait on its file (tests/unit/test_qring makes one),
 * and a submission the kernel refused (-EAGAIN, -ENOMEM) leaves entries in the ring that
 * a wait with nothing to submit never completes, so every slice submits again.
 */
#include "netif/txwait.h"

#include <errno.h>

#define TX_WAIT_MS 500
#define TX_WAIT_SLICE_MS 10

bool nif__tx_wait(struct io_uring *ring, bool (*reap)(void *arg), void *arg)
{
	for (int t = 0; t < TX_WAIT_MS / TX_WAIT_SLICE_MS; t++) {
		struct __kernel_timespec ts = { .tv_nsec = TX_WAIT_SLICE_MS * 1000 * 1000 };
		struct io_uring_cqe *cqe;

		io_uring_submit(ring);
		int rc = io_uring_wait_cqe_timeout(ring, &cqe, &ts);
		if (reap(arg))
			return true;
		if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EAGAIN)
			return false;
	}
	return false;
}
