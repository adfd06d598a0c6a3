/* Leases: one per process, from its HELLO to the end of its control connection (lease.c).
 *
 * The table (struct srv_leases) is an object of its own: ids, lookup, removal. What a lease
 * holds elsewhere (rings, rules, ports, custody) is set up and reclaimed by the srv__lease_*
 * functions of internal.h, which need the rest of ulsd. Its owner serialises calls (ulsd:
 * s->lock); a lease is freed only by the demux thread (lease.c says why).
 */
#ifndef ULS_SERVER_LEASE_H
#define ULS_SERVER_LEASE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "netif/ring.h"

#define SRV_MAX_LEASES      4096
/* The owner of a connected rule whose connection is in transit: never a lease id. */
#define SRV_IN_TRANSIT      SRV_MAX_LEASES

/* How many released tuples a lease remembers (struct srv_lease, released): a process
 * frees its connections one at a time, and a late RST follows its release at once. */
#define SRV_RELEASED_KEEP 8

struct srv_lease {
	uint32_t id;
	int fd;                 /* control connection */
	pid_t pid;
	uid_t uid;
	bool dead;              /* lease ended: the demux thread frees it */
	bool watched;           /* its tx eventfd is in the demux thread's wait */
	bool rx_pending;        /* frames delivered since the last publish */
	int memfd, rx_efd, tx_efd;
	void *rings;
	struct nif_ring_layout layout;
	struct nif_ring rx;     /* we produce: frames for the process */
	struct nif_ring tx;     /* we consume: frames from the process */
	uint64_t rx_frames, rx_bytes, tx_frames, tx_bytes, rx_ring_full, tx_denied;
	uint64_t bad_slots;
	/* The direct data path (bpf.c): the process reads and writes its own TAP queue
	 * through two io_urings ulsd enabled; it has no rings to ulsd. */
	bool direct;
	unsigned queue;
	int dp_ring[2];         /* ulsd's descriptors of its io_urings, -1: none */
	bool dp_wake;           /* the process's wake-up eventfd is the receive ring's file 1 */
	bool dp_mshot;          /* the receive ring may read the queue multishot */
	bool has_rings;         /* the relay's ring pair and eventfds exist */
	/* A checked frame of its tx ring is being sent by the demux thread without s->lock
	 * (demux.c, send_held): nobody else consumes the ring until it is cleared. */
	bool tx_held;
	/* The connection table the process writes (netif/conntab.h), mapped by the control
	 * thread; NULL until the process asks for it (CTL_CONNTAB). */
	void *conntab;
	uint32_t conntab_cap;
	/* The TCP tuples the process released last (CTL_RELEASE, ctl.c), a ring: a RST it
	 * sends on one of them afterwards answers a segment steered to it before ulsd took
	 * the tuple back (demux.c, late_rst). */
	struct srv_released {
		uint8_t rip[16];        /* remote address, IPv4 v4-mapped (struct flt_addr) */
		uint16_t lport, rport;
	} released[SRV_RELEASED_KEEP];
	unsigned released_next;
};

struct srv_leases {
	struct srv_lease *by_id[SRV_MAX_LEASES];   /* id 0 unused */
	uint32_t next_id;
	bool changed;           /* the demux thread must sync its watches (demux.c) */
};

/* A new lease with the next free id (ids are not given again at once), its descriptors -1.
 * 0, -EMFILE (table full) or -ENOMEM. */
int srv__leases_add(struct srv_leases *t, struct srv_lease **out);
/* The lease of id if it is live (not ended), else NULL; any id, owners included. Inline:
 * the demux thread asks once per frame. */
static inline struct srv_lease *srv__leases_live(const struct srv_leases *t, uint64_t id)
{
	struct srv_lease *l = id < SRV_MAX_LEASES ? t->by_id[id] : NULL;

	return l && !l->dead ? l : NULL;
}
/* Forget l (its memory is the caller's). */
void srv__leases_remove(struct srv_leases *t, const struct srv_lease *l);

#endif
