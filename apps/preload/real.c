/* The C library's own functions, found once with dlsym(RTLD_NEXT), for the shim and for
 * libuls: the stack's system-call table (netif/sys.h) gets them too, so that libuls never
 * calls back into this library's interposers. */
#include "shim.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netif/sys.h"

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

/* Every entry of libuls's table must lead out of this library: one left at its initial
 * value (netif/sys.c: the C library's name, which here is this library's interposer) would
 * call back into the shim. Checked once; a miss is a bug of this file, said and stopped. */
static void check_table(void)
{
	typedef void (*fn)(void);
	_Static_assert(sizeof(struct nif_sys) % sizeof(fn) == 0, "nif_sys: pointers only");
	fn e[sizeof(struct nif_sys) / sizeof(fn)];
	Dl_info self, at;

	memcpy(e, &nif_sys, sizeof(e));
	if (!dladdr((void *)shim__real_init, &self))
		return;
	for (size_t i = 0; i < sizeof(e) / sizeof(e[0]); i++) {
		if (e[i] && dladdr((void *)e[i], &at) && at.dli_fbase != self.dli_fbase)
			continue;
		fprintf(stderr, "ulstack: libuls-preload: entry %zu of libuls's system-call "
			"table (netif/sys.h) leads back into the shim\n", i);
		abort();
	}
}

static void resolve(void)
{
#define R(name) shim__real.name = need(#name)
	R(socket); R(bind); R(listen); R(accept4); R(connect); R(read); R(write); R(readv);
	R(writev); R(sendto); R(recvfrom); R(sendmsg); R(recvmsg); R(sendmmsg); R(recvmmsg);
	R(shutdown); R(close); R(dup); R(dup2); R(dup3); R(fcntl); R(ioctl); R(getsockopt);
	R(setsockopt); R(getsockname); R(getpeername); R(poll); R(ppoll); R(select);
	R(pselect); R(epoll_ctl); R(sendfile); R(execve); R(sigaction);
	R(epoll_wait); R(epoll_pwait); R(_exit);
#undef R
	/* glibc 2.34 and later; older systems get ENOSYS from our fallback. */
	shim__real.close_range = dlsym(RTLD_NEXT, "close_range");
	/* What pthread_atfork calls (glibc: libc_nonshared.a's pthread_atfork is a stub of
	 * every object that passes its own __dso_handle, so that dlclose drops its
	 * handlers). */
	shim__real.register_atfork = need("__register_atfork");
	/* Before libuls runs at all: every path into it starts with shim__real_init(). */
	nif_sys.read = shim__real.read;
	nif_sys.write = shim__real.write;
	nif_sys.writev = shim__real.writev;
	nif_sys.close = shim__real.close;
	nif_sys.fcntl = shim__real.fcntl;
	nif_sys.ioctl = shim__real.ioctl;
	nif_sys.poll = shim__real.poll;
	nif_sys.socket = shim__real.socket;
	nif_sys.connect = shim__real.connect;
	nif_sys.send = need("send");
	nif_sys.recv = need("recv");
	nif_sys.sendmsg = shim__real.sendmsg;
	nif_sys.recvmsg = shim__real.recvmsg;
	nif_sys.shutdown = shim__real.shutdown;
	nif_sys.setsockopt = shim__real.setsockopt;
	nif_sys.if_nametoindex = need("if_nametoindex");
	check_table();
}

void *shim__next(const char *name)
{
	return need(name);
}

void shim__real_init(void)
{
	pthread_once(&once, resolve);
}
