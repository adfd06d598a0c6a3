/* A library whose constructor registers fork handlers that use sockets (atfork.h), loaded
 * with LD_PRELOAD after the shim: the dynamic linker runs its constructor before the
 * shim's, as it does for a library the program links (tests/shim atfork.c). */
#include <pthread.h>

#include "atfork.h"

/* Found by the program with dlsym. */
__attribute__((visibility("default"))) struct atfork_state atfork_hook_state = {
	.u = -1, .ep = -1
};

__attribute__((constructor)) static void hook_init(void)
{
	atfork_st = &atfork_hook_state;
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}
