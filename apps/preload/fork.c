/* fork under the shim (the rules are in docs/compatibility.md; exec is in exec.c).
 *
 * fork: libuls empties the child's stack (stack/fork.c); here every socket the child
 * inherited is adopted on its first use (a call on it, or being watched by poll, select
 * or epoll): libuls builds the child's own socket and its mirror is put under the same
 * descriptor numbers, so the child's readiness is no longer the parent's. A connection
 * is claimed: it moves to the child once the parent has closed its copy
 * (stack/handoff.c).
 */
#include "shim.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "uls.h"

static unsigned generation;
static pid_t self;  /* this process, as of its last fork: a vfork child is not it */

/* The table lock, then user-level epoll's locks (uepoll.c says why and in what order),
 * all given back in the parent and started afresh in the child (shim__table_reset). */
static void prepare(void)
{
	shim__table_lock();
	shim__uep_fork_prepare();
}

static void parent(void)
{
	shim__uep_fork_parent();
	shim__table_unlock();
}

static void child(void)
{
	generation++;
	shim__table_reset();
}

static void note_self_in_child(void)
{
	self = getpid();
}

static void register_self(void)
{
	pthread_atfork(NULL, NULL, note_self_in_child);
}

/* After libuls's own handlers, so that fork takes the table lock first and libuls's core
 * lock second (prepare handlers run in reverse order), the order every other path takes
 * them in. */
static void register_handlers(void)
{
	uls_fork_init();
	pthread_atfork(prepare, parent, child);
}

/* The shim's and libuls's fork handlers are registered before any other object's:
 * prepare handlers run last registered first, and parent and child handlers first
 * registered first (glibc, as POSIX specifies for pthread_atfork), so every handler of
 * the program and of its libraries runs outside the span in which fork holds the shim's
 * locks, and may use sockets. Registered late (this used to be at the first socket), a
 * program's prepare handler that sent on a socket, closed one or changed an epoll set
 * waited forever for a lock its own thread held, and so did its parent and child
 * handlers. Registering from the shim's constructor is not enough: the dynamic linker
 * runs the constructors of the libraries the program links, and of preloads listed
 * after this one, before ours (seen: tests/shim atfork "hook"). So pthread_atfork's
 * target, __register_atfork, is interposed: the first registration of any other object
 * registers the shim's handlers first. At load at the latest (shim_init). */
void shim__fork_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, register_handlers);
}

/* Hidden, one per object (crtbegin): what this library's pthread_atfork calls pass. */
extern void *__dso_handle __attribute__((visibility("hidden")));

SHIM_EXPORT int __register_atfork(void (*on_prepare)(void), void (*on_parent)(void),
				  void (*on_child)(void), void *dso)
{
	shim__real_init();
	/* This library's own calls (libuls's among them, inside register_handlers) pass
	 * straight on: libuls never calls back into the shim (tests/shim
	 * test_no_reentry.sh), and the once above is in progress. */
	if (dso != &__dso_handle)
		shim__fork_init();
	return shim__real.register_atfork(on_prepare, on_parent, on_child, dso);
}

/* Closed sockets still owe their peers the last data and FIN: let the stack finish,
 * briefly, before the process is gone (uls_node_stop lingers at most 3 s). */
__attribute__((destructor)) static void shim_fini(void)
{
	int hi = shim__maxfd();

	if (hi < 0)
		return;
	/* The last event-loop round's sends (uls_tx_batch) leave first, whatever the
	 * closes below make of the batch. */
	shim__flush_at_exit();
	/* The descriptors close now rather than at exit, so that a connection a fork child
	 * still holds goes to it (stack/handoff.c) and the others close as usual. */
	for (int fd = 0; fd <= hi; fd++)
		if (shim__uninstall(fd))
			shim__real.close(fd);
	uls_node_stop();
}

/* Give the child its own socket behind every number naming f. */
int shim__adopt(int fd, struct shim_file *f, int timeout_ms)
{
	sigset_t old;
	int rc, nfd = -1;

	shim__table_lock();
	/* Another thread is claiming this connection: its result is ours. */
	while (f->gen != generation && f->claiming == generation + 1)
		shim__table_wait_claim();
	if (f->gen == generation) {
		shim__table_unlock();
		return 0;
	}
	shim__enter(&old);
	rc = uls_adopt(f->sd);
	if (rc == ULS_ADOPT_CLAIM && timeout_ms == SHIM_NO_CLAIM) {
		shim__leave(&old);
		shim__table_unlock();
		return 0;  /* not for this call: the socket stays inherited */
	}
	if (rc == ULS_ADOPT_CLAIM) {
		/* A connection: it moves here once the parent has closed its copy. The wait
		 * is open to signals, like any blocking socket call, and holds no lock: the
		 * program's other threads and sockets go on meanwhile. */
		unsigned gen = generation;
		f->claiming = gen + 1;
		shim__leave(&old);
		shim__table_unlock();
		/* On a number of its own: fd itself is in the table, and libuls's calls on
		 * it would come back here. */
		int dfd = shim__real.fcntl(fd, F_DUPFD_CLOEXEC, 0);
		int state = dfd < 0 ? -ENOTCONN : uls_claim_wait(dfd, timeout_ms);
		if (dfd >= 0)
			shim__real.close(dfd);
		shim__table_lock();
		shim__enter(&old);
		f->claiming = 0;
		shim__table_claim_done();
		if (generation != gen || f->gen == generation) {
			/* A fork meanwhile (this is the child now), or a signal handler's call
			 * adopted it. */
			if (state >= 0)
				shim__real.close(state);
			shim__leave(&old);
			shim__table_unlock();
			return 0;
		}
		rc = uls_claim(f->sd, state);
		if (rc == -EINTR || rc == -ETIMEDOUT) {
			shim__leave(&old);
			shim__table_unlock();
			return rc;  /* this call reports it; the next one claims again */
		}
		/* A claim that failed leaves the socket not connected (ENOTCONN): the child
		 * still gets a mirror of its own, which shows it closed, instead of the
		 * parent's readiness. */
		if (rc < 0)
			rc = -ENOTCONN;
	}
	if (rc == 0 || rc == -ENOTCONN)
		nfd = uls_socket_fd(f->sd, SOCK_CLOEXEC);
	if (rc == 0 && f->active)
		uls_accepting(f->sd);
	shim__leave(&old);
	if (nfd >= 0) {
		int hi = shim__maxfd();
		for (int n = 0; n <= hi; n++) {
			if (!shim__table_at(n, f))
				continue;
			int cloexec = shim__real.fcntl(n, F_GETFD);
			shim__real.dup3(nfd, n, cloexec >= 0 && (cloexec & FD_CLOEXEC) ? O_CLOEXEC : 0);
		}
		shim__real.close(nfd);
		/* Release: other threads' lookups read it without the table lock
		 * (shim__file_current). */
		__atomic_store_n(&f->gen, generation, __ATOMIC_RELEASE);
	}
	shim__table_unlock();
	return rc == -ENOTCONN ? 0 : rc;
}

/* Before a call on fds, or before the kernel watches them. A listener watched counts as
 * one this process accepts on. */
void shim__adopt_set(const int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct shim_file *f = shim__get(fds[i]);
		if (!f)
			continue;
		if (!shim__file_current(f))
			shim__adopt(fds[i], f, -1);
		if (f->listening && !f->active) {
			sigset_t old;
			f->active = true;
			shim__enter(&old);
			uls_accepting(f->sd);
			shim__leave(&old);
		}
		shim__put(f);
	}
}

/* Is this the process whose memory this is (not a vfork child running in it)? */
bool shim__own_memory(void)
{
	return getpid() == self;
}

/* At load, and in every fork child, from the first fork on (registered at load: it
 * takes no lock, so its order among the fork handlers does not matter). */
void shim__fork_note_self(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	self = getpid();
	pthread_once(&once, register_self);
}

unsigned shim__generation(void)
{
	return generation;
}

/* _exit(2) and _Exit(2): the process ends without its destructors, so shim_fini's
 * flush does not run; frames the stack queued for a later flush (an event loop's round,
 * uls_tx_batch) would die with its rings, although the program's send() took their data
 * and Linux would have handed them to the device inside that call. They leave here. (What
 * the peer has not acknowledged yet is lost all the same: the stack that would resend it
 * ends with the process, and ulsd answers for the connection from then on.) Not in a
 * vfork child: the stack is the parent's. Signals are held while the flush holds the core
 * lock, as on every path into the stack (stack/sigdefer.c): a handler that used a socket
 * there would wait for that lock forever. */
void shim__flush_at_exit(void)
{
	if (shim__maxfd() < 0 || !shim__own_memory())
		return;
	sigset_t old;
	shim__enter(&old);
	uls_tx_flush_exit();
	shim__leave(&old);
}

SHIM_EXPORT void _exit(int status)
{
	shim__real_init();
	shim__flush_at_exit();
	if (shim__real._exit)
		shim__real._exit(status);
	syscall(SYS_exit_group, status);  /* the C library's _exit was not found */
	__builtin_unreachable();
}

SHIM_EXPORT void _Exit(int status)
{
	_exit(status);
}
