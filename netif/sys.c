/* The system-call table (sys.h): the C library's functions until a front end replaces
 * them. In libuls-preload.so these initial values are the shim's own interposers (the
 * preloaded library's definitions come first in the lookup scope), which is why the shim
 * fills the table before anything else runs. */
#include "netif/sys.h"

#include <fcntl.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <unistd.h>

struct nif_sys nif_sys = {
	.read = read, .write = write, .writev = writev, .close = close, .fcntl = fcntl,
	.ioctl = ioctl, .poll = poll, .socket = socket, .connect = connect, .send = send,
	.recv = recv, .sendmsg = sendmsg, .recvmsg = recvmsg, .shutdown = shutdown,
	.setsockopt = setsockopt, .if_nametoindex = if_nametoindex,
};
