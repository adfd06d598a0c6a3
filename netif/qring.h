/* A process's own TAP queue on the direct data path, through two io_urings that ulsd
 * restricted to reads and writes of that queue (fixed file 0) and enabled
 * (docs/architecture.md, "The direct data path"). The process holds no TAP descriptor.
 *
 * Use: nif_qring_prepare() makes both rings, disabled; the process names their descriptors
 * in its HELLO; if ulsd answers "direct", nif_qring_open() turns them into a device,
 * otherwise nif_qring_discard() closes them.
 */
#ifndef ULS_NETIF_QRING_H
#define ULS_NETIF_QRING_H

#include <liburing.h>
#include <stdbool.h>

#include "netif/dev.h"

struct nif_qring_prep {
	struct io_uring ring[2];   /* [0] receive, [1] transmit */
	bool made;
	/* A provided-buffer ring (group 0) registered on the receive ring while that was the
	 * process's alone, for one multishot read of the queue (IORING_OP_READ_MULTISHOT,
	 * Linux 6.7): NULL where the kernel has not that opcode. mshot: use it; the caller
	 * clears it when ulsd did not allow the read (no CTL_HELLO_F_MSHOT in its reply), and
	 * the device then keeps one read per receive slot in flight instead. */
	struct io_uring_buf_ring *br;
	bool mshot;
	/* The receive ring runs its task work cooperatively (nif_qring_prepare). */
	bool coop;
	/* Reads per slot beyond the few that wait for a frame may be reads that do not wait
	 * (RWF_NOWAIT: netif/qring_rx.c, arm_reads); set by prepare, cleared by the caller
	 * for comparison (ULS_RX_NOWAIT=0). */
	bool nowait;
};

/* Not in liburing 2.3's header; the kernel's number since 6.7. */
#define NIF_IORING_OP_READ_MULTISHOT 49

/* Registers the rings' fork child handler, once; stk__fork_init calls it before it
 * registers libuls's own (stack/fork.c). */
void nif_qring_fork_init(void);
/* The receive ring is made with IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG where
 * the kernel has them (p->coop): a read's completion is task work of the thread that
 * submitted it, and a cooperative ring runs it when that thread next enters the kernel
 * instead of interrupting it with an IPI, which on a virtual machine cost the frame's
 * writer and its reader a VM exit each (netif/qring.c, prepare). */
int nif_qring_prepare(struct nif_qring_prep *p);
/* As nif_qring_prepare, with a receive ring of the interrupting kind (ULS_RX_COOP=0, for
 * comparison). */
int nif_qring_prepare_interrupting(struct nif_qring_prep *p);
int nif_qring_fd(const struct nif_qring_prep *p, int i);
/* The descriptor of ring i moved to fd (the caller dup'ed it elsewhere and closed it). */
void nif_qring_set_fd(struct nif_qring_prep *p, int i, int fd);
void nif_qring_discard(struct nif_qring_prep *p);
/* Takes the rings over (closed by the device's close). offload: the node's TAP carries a
 * virtio-net header (netif/vnet.h). hup_fd (the lease, not taken over) is watched for
 * hang-up: when ulsd goes away, wait() returns -ECONNRESET, once. wake_fd: a non-blocking
 * eventfd for wake(), the caller's (so that it can place it out of a program's way); taken
 * over on success. wake_in_ring: ulsd registered wake_fd as the receive ring's fixed file 1
 * (CTL_HELLO_F_WAKE), so a wait is one io_uring_enter that also submits the ring's reads. */
int nif_qring_open(struct nif_dev **out, struct nif_qring_prep *p, unsigned mtu, enum nif_offload offload,
		   int hup_fd, int wake_fd, bool wake_in_ring);
/* Receive buffers that closes left allocated because a read of them could not be
 * cancelled (a ulsd that does not allow IORING_OP_ASYNC_CANCEL): process-wide. */
uint64_t nif_qring_rx_leaked(void);

#endif
