/* The C library's own functions, found once with dlsym(RTLD_NEXT). */
#include "shim.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct shim_real shim__real;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void *need(const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);

	if (!p) {
		/* Nothing can work without it; say which and stop rather than misbehave.
		 * (stdio: the library's own write() is interposed.) */
		fprintf(stderr, "ulstack: libuls-preload: the C library lacks %s\n", name);
		abort();
	}
	return p;
}

static void resolve(void)
{
#define R(name) shim__real.name = need(#name)
	R(socket); R(bind); R(listen); R(accept4); R(connect); R(read); R(write); R(readv);
	R(writev); R(sendto); R(recvfrom); R(sendmsg); R(recvmsg); R(sendmmsg); R(recvmmsg);
	R(shutdown); R(close); R(dup); R(dup2); R(dup3); R(fcntl); R(ioctl); R(getsockopt);
	R(setsockopt); R(getsockname); R(getpeername); R(poll); R(ppoll); R(select);
	R(pselect); R(epoll_ctl); R(sendfile); R(execve); R(sigaction);
	R(epoll_wait); R(epoll_pwait);
#undef R
	/* glibc 2.34 and later; older systems get ENOSYS from our fallback. */
	shim__real.close_range = dlsym(RTLD_NEXT, "close_range");
}

void *shim__next(const char *name)
{
	return need(name);
}

void shim__real_init(void)
{
	pthread_once(&once, resolve);
}
