/* The library's own file descriptors: the lease, the rings, the readiness mirrors.
 *
 * Programs close descriptors they do not know about (daemons close everything above 2,
 * close_range(3, ~0U) before exec), and pick dup2() targets of their own. So libuls keeps
 * its descriptors high in the descriptor space, out of the way of the lowest-free rule
 * the program expects, and remembers which they are, so that the POSIX shim can refuse a
 * program's close() of one (as if it were not open) instead of pulling the stack's
 * ground away.
 */
#include "internal.h"
#include "netif/sys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#define PRIVFD_MAX (1u << 20)

static _Atomic(uint8_t *) marks;
static unsigned marks_len;
static int hide_base = -1;
static atomic_int highest = -1;
static pthread_mutex_t marks_lock = PTHREAD_MUTEX_INITIALIZER;

/* Sized once from the descriptor limit: a table that never moves can be read without a
 * lock by every call of the shim. */
static uint8_t *table(void)
{
	uint8_t *m = atomic_load(&marks);
	struct rlimit rl;

	if (m)
		return m;
	pthread_mutex_lock(&marks_lock);
	m = atomic_load(&marks);
	if (!m) {
		unsigned len = 65536;
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
			rlim_t want = rl.rlim_max == RLIM_INFINITY ? PRIVFD_MAX : rl.rlim_max;
			len = want > PRIVFD_MAX ? PRIVFD_MAX : want < 1024 ? 1024 : (unsigned)want;
			/* The upper quarter of the soft limit, so the program's own descriptors
			 * below FD_SETSIZE keep the numbers they would have had. */
			rlim_t cur = rl.rlim_cur == RLIM_INFINITY ? PRIVFD_MAX : rl.rlim_cur;
			hide_base = cur >= 256 ? (int)(cur - cur / 4) : -1;
		}
		m = calloc(len, 1);
		if (m) {
			marks_len = len;
			atomic_store(&marks, m);
		}
	}
	pthread_mutex_unlock(&marks_lock);
	return m;
}

/* Move fd high (when there is room) and mark it as the library's. Returns the descriptor
 * to use from now on; fd itself is closed if it moved. */
int stk__fd_hide(int fd)
{
	uint8_t *m = table();
	int nfd = -1;

	if (fd < 0)
		return fd;
	if (hide_base > fd)
		nfd = nif_sys.fcntl(fd, F_DUPFD_CLOEXEC, hide_base);
	if (nfd >= 0)
		nif_sys.close(fd);
	else
		nfd = fd;
	if (m && (unsigned)nfd < marks_len) {
		m[nfd] = 1;
		int h = atomic_load(&highest);
		while (nfd > h && !atomic_compare_exchange_weak(&highest, &h, nfd))
			;
	}
	return nfd;
}

/* Forget the mark, then close: in this order, because once closed the number may be
 * another thread's new descriptor (and marked again, if libuls made it). */
void stk__fd_close(int fd)
{
	uint8_t *m = atomic_load(&marks);

	if (fd < 0)
		return;
	if (m && (unsigned)fd < marks_len)
		m[fd] = 0;
	nif_sys.close(fd);
}

void stk__fd_unmark(int fd)
{
	uint8_t *m = atomic_load(&marks);

	if (m && fd >= 0 && (unsigned)fd < marks_len)
		m[fd] = 0;
}

int uls_fd_private(int fd)
{
	uint8_t *m = atomic_load(&marks);

	return m && fd >= 0 && (unsigned)fd < marks_len && m[fd];
}

/* The highest descriptor ever marked: close_range() over the whole space need not look
 * further. */
int uls_fd_private_max(void)
{
	return atomic_load(&highest);
}
