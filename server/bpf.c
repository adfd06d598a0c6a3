/* The direct data path, ulsd's side (docs/architecture.md, "The direct data path").
 *
 * ulsd loads the steering program and the transmit check (filter/datapath.bpf.c), attaches
 * them to the node's TAP, and keeps their maps equal to its filter table: the table calls
 * back on every change (flt_table_set_observer), from the control thread with s->lock held.
 *
 * Queues: the TAP is multi-queue. Queue 0 is the one ulsd's relay reads (nif_tap_open's).
 * A process on the direct path gets a queue of its own, which ulsd opens and keeps open for
 * as long as it runs: tun renumbers queues when one detaches, so nothing is ever detached
 * except in recycle_queue, which controls the renumbering. The process never holds the
 * queue's descriptor (tun's ioctls check no capability once a file is attached): ulsd takes
 * the process's two io_urings (created disabled) with pidfd_getfd, registers restrictions
 * (reads and writes of fixed file 0 only), registers the queue as fixed file 0 and enables
 * them.
 */
#include "server/internal.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <linux/if_tun.h>
#include <liburing.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "filter/datapath.h"
#include "netif/qring.h"
#include "server/datapath.skel.h"

/* Linux 6.6's tcx; Debian 12's headers predate it (kernel-facts.md: attach type 46). */
#define ATTACH_TCX_INGRESS 46
#define ATTACH_TCX_EGRESS 47
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

/* Queue indexes: 0 is ulsd's; the last one the TAP can take stays free for recycling. */
#define Q_FIRST 1
#define Q_LIMIT (FLT_DP_QUEUES - 1)
#define Q_RETIRED UINT32_MAX  /* a queue that could not be renewed: never given out again */

struct srv_dp {
	struct uls_dp *skel;
	int link_fd;
	int syn_link_fd;             /* synguard's tcx egress link; -1: not attached */
	int fd_cfg, fd_conn, fd_listen, fd_lease_q, fd_q_owner, fd_qstat;
	int fd_conn6, fd_listen6;
	int qfd[FLT_DP_QUEUES];      /* ulsd's own reference to every queue; [0] is the TAP's */
	uint32_t qowner[FLT_DP_QUEUES];
	unsigned nq;                 /* queues attached */
	flt_owner_t all[FLT_GROUP_MAX], pick[FLT_GROUP_MAX];
	struct flt_dp_qstat gone;    /* the figures of processes' queues before their renewal */
	/* dp_qstat is per CPU: a lookup fills one struct per possible CPU. */
	unsigned ncpu;
	struct flt_dp_qstat *percpu;
};

static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char buf[512];

	if (level == LIBBPF_DEBUG)
		return 0;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	buf[strcspn(buf, "\n")] = '\0';
	srv__log(1, "libbpf: %s", buf);
	return 0;
}

/* The group of (proto, lport) in one family, into its map (gone: deleted). */
static void mirror_group(struct srv *s, int fd, uint8_t proto, uint16_t lport, unsigned fam)
{
	struct srv_dp *d = s->dp;
	struct flt_dp_listen_key k = { .lport = lport, .proto = proto };
	struct flt_dp_group *g = calloc(1, sizeof(*g));

	if (!g) {
		s->ctr.v[SRV_DP_MAP_ERRORS]++;
		return;
	}
	if (flt_group_get_fam(s->flt, proto, lport, fam, d->all, &g->n_all, d->pick,
			      &g->n_pick) < 0) {
		bpf_map_delete_elem(fd, &k);
	} else {
		memcpy(g->all, d->all, sizeof(g->all[0]) * g->n_all);
		memcpy(g->pick, d->pick, sizeof(g->pick[0]) * g->n_pick);
		if (bpf_map_update_elem(fd, &k, g, BPF_ANY) < 0)
			s->ctr.v[SRV_DP_MAP_ERRORS]++;
	}
	free(g);
}

/* The filter table changed: the same change in the maps. */
static void on_change(void *arg, enum flt_kind kind, uint8_t proto, uint16_t lport, uint32_t rip,
		      uint16_t rport, flt_owner_t owner)
{
	struct srv *s = arg;
	struct srv_dp *d = s->dp;

	if (kind == FLT_RULE_CONNECTED) {
		struct flt_dp_conn_key k = { .rip = rip, .lport = lport, .rport = rport,
					     .proto = proto };
		if (owner == FLT_NO_OWNER)
			bpf_map_delete_elem(d->fd_conn, &k);
		else if (bpf_map_update_elem(d->fd_conn, &k, &owner, BPF_ANY) < 0)
			s->ctr.v[SRV_DP_MAP_ERRORS]++;
		return;
	}
	mirror_group(s, d->fd_listen, proto, lport, FLT_FAM_V4);
}

/* An IPv6 rule changed (RFC 8200): dp_conn6 and dp_listen6. */
static void on_change6(void *arg, enum flt_kind kind, uint8_t proto, uint16_t lport,
		       const struct flt_addr *rip, uint16_t rport, flt_owner_t owner)
{
	struct srv *s = arg;
	struct srv_dp *d = s->dp;

	if (kind == FLT_RULE_CONNECTED) {
		struct flt_dp_conn6_key k = { .lport = lport, .rport = rport, .proto = proto };
		memcpy(k.rip, rip->b, sizeof(k.rip));
		if (owner == FLT_NO_OWNER)
			bpf_map_delete_elem(d->fd_conn6, &k);
		else if (bpf_map_update_elem(d->fd_conn6, &k, &owner, BPF_ANY) < 0)
			s->ctr.v[SRV_DP_MAP_ERRORS]++;
		return;
	}
	mirror_group(s, d->fd_listen6, proto, lport, FLT_FAM_V6);
}

/* Rules already in the table when the maps are made (a test may add them first). */
static int mirror_rule(const struct flt_rule *r, void *arg)
{
	struct srv *s = arg;

	if (r->kind == FLT_RULE_LISTEN && r->fam == FLT_FAM_V4)
		on_change(s, r->kind, r->proto, r->lport, 0, 0, 0);
	else if (r->kind == FLT_RULE_LISTEN)
		on_change6(s, r->kind, r->proto, r->lport, NULL, 0, 0);
	else if (r->fam == FLT_FAM_V4)
		on_change(s, r->kind, r->proto, r->lport, r->rip, r->rport, r->owner);
	else
		on_change6(s, r->kind, r->proto, r->lport, &r->rip6, r->rport, r->owner);
	return 0;
}

static int set_u32(int fd, uint32_t key, uint32_t v)
{
	return bpf_map_update_elem(fd, &key, &v, BPF_ANY) < 0 ? -errno : 0;
}

/* SYNs from unknown peers a process's queue takes per FLT_DP_SYN_WINDOW_NS before synguard
 * sheds the rest: ULS_SYN_BUDGET (SYN/s, at least one per window), 0 with ULS_SYN_SHED=0
 * (no shedding anywhere, as in the processes and the relay). */
static uint32_t syn_budget(void)
{
	const char *off = getenv("ULS_SYN_SHED"), *e = getenv("ULS_SYN_BUDGET");
	const uint64_t per_s = 1000000000ull / FLT_DP_SYN_WINDOW_NS;
	char *end;

	if (off && !strcmp(off, "0"))
		return 0;
	if (e && *e) {
		unsigned long long v = strtoull(e, &end, 10);
		if (!*end && v > 0 && v <= UINT32_MAX)
			return (uint32_t)((v + per_s - 1) / per_s);
		srv__log(1, "ULS_SYN_BUDGET=%s ignored: not a rate in SYN/s", e);
	}
	return FLT_DP_SYN_BUDGET_DEFAULT;
}

int srv__dp_init(struct srv *s)
{
	struct srv_dp *d;
	struct flt_dp_cfg cfg = { .node_ip = s->ip, .mtu = s->mtu, .csum_only = s->csum_only };
	uint32_t zero = 0;
	int rc, prog;

	if (!nif_tap_multiqueue(s->tap))
		return -EOPNOTSUPP;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->link_fd = -1;
	d->syn_link_fd = -1;
	libbpf_set_print(libbpf_log);
	d->skel = uls_dp__open_and_load();
	if (!d->skel) {
		rc = errno ? -errno : -EINVAL;
		free(d);
		return rc;
	}
	d->fd_cfg = bpf_map__fd(d->skel->maps.dp_cfg);
	d->fd_conn = bpf_map__fd(d->skel->maps.dp_conn);
	d->fd_listen = bpf_map__fd(d->skel->maps.dp_listen);
	d->fd_conn6 = bpf_map__fd(d->skel->maps.dp_conn6);
	d->fd_listen6 = bpf_map__fd(d->skel->maps.dp_listen6);
	d->fd_lease_q = bpf_map__fd(d->skel->maps.dp_lease_q);
	d->fd_q_owner = bpf_map__fd(d->skel->maps.dp_q_owner);
	d->fd_qstat = bpf_map__fd(d->skel->maps.dp_qstat);
	rc = libbpf_num_possible_cpus();
	d->ncpu = rc > 0 ? (unsigned)rc : 0;
	d->percpu = d->ncpu ? calloc(d->ncpu, sizeof(*d->percpu)) : NULL;
	if (!d->percpu) {
		rc = rc < 0 ? rc : -ENOMEM;
		goto fail;
	}
	cfg.ifindex = if_nametoindex(s->tap_name);
	memcpy(cfg.node_mac, s->mac, 6);
	if (s->has_ip6) {
		cfg.has_ip6 = 1;
		memcpy(cfg.node_ip6, s->ip6, 16);
		memcpy(cfg.node_ll6, s->ip6_ll, 16);
	}
	uint64_t k0, k1;
	flt_table_key(s->flt, &k0, &k1);
	cfg.k0 = k0;
	cfg.k1 = k1;
	cfg.syn_budget = syn_budget();
	if (!cfg.ifindex || bpf_map_update_elem(d->fd_cfg, &zero, &cfg, BPF_ANY) < 0) {
		rc = -errno;
		goto fail;
	}
	/* Steering first: with more than one queue and no program, tun spreads frames by
	 * flow hash, so no other queue may exist before it is in place. */
	prog = bpf_program__fd(d->skel->progs.steer);
	if (ioctl(nif_tap_fd(s->tap), TUNSETSTEERINGEBPF, &prog) < 0) {
		rc = -errno;
		goto fail;
	}
	d->link_fd = bpf_link_create(bpf_program__fd(d->skel->progs.txcheck), (int)cfg.ifindex,
				     ATTACH_TCX_INGRESS, NULL);
	if (d->link_fd < 0) {
		rc = d->link_fd;
		int none = -1;
		ioctl(nif_tap_fd(s->tap), TUNSETSTEERINGEBPF, &none);
		goto fail;
	}
	/* SYN shedding below the processes (filter/datapath_syn.bpf.h). Without it (a
	 * kernel without tcx egress) the processes shed for themselves, as before. */
	if (cfg.syn_budget) {
		d->syn_link_fd = bpf_link_create(bpf_program__fd(d->skel->progs.synguard),
						 (int)cfg.ifindex, ATTACH_TCX_EGRESS, NULL);
		if (d->syn_link_fd < 0)
			srv__log(1, "synguard not attached (%s): processes shed SYNs themselves",
				 strerror(-d->syn_link_fd));
	}
	s->dp_kshed = d->syn_link_fd >= 0;
	/* The kernel's default qdiscs (mq, 256 pfifo_fast) hold nothing on a TAP but are
	 * all reset at every queue's renewal (recycle_queue): noqueue instead, unless the
	 * operator chose a root of their own (netif/qdisc.c). */
	rc = nif_tap_noqueue(cfg.ifindex);
	if (rc > 0)
		srv__log(2, "%s: the kernel's default qdisc replaced by noqueue", s->tap_name);
	else if (rc < 0)
		srv__log(1, "%s: qdisc left as it is (%s)", s->tap_name, strerror(-rc));
	for (unsigned i = 0; i < FLT_DP_QUEUES; i++)
		d->qfd[i] = -1;
	d->qfd[0] = nif_tap_fd(s->tap);
	d->nq = 1;
	s->dp = d;
	/* The programs steer and check IPv6 (dp_conn6, dp_listen6, the transmit check's
	 * IPv6 rules): processes that carry IPv6 may take the direct path (ctl.c). */
	s->dp_ip6 = s->has_ip6;
	flt_table_set_observer(s->flt, on_change, s);
	flt_table_set_observer6(s->flt, on_change6, s);
	flt_foreach(s->flt, mirror_rule, s);
	return 0;
fail:
	uls_dp__destroy(d->skel);
	free(d->percpu);
	free(d);
	return rc;
}

/* A queue for a new process: a free one, or one more. */
static int queue_get(struct srv *s)
{
	struct srv_dp *d = s->dp;

	for (unsigned q = Q_FIRST; q < d->nq; q++)
		if (!d->qowner[q])
			return (int)q;
	if (d->nq >= Q_LIMIT)
		return -ENOSPC;
	int fd = nif_tap_queue_open(s->tap);
	if (fd < 0)
		return fd;
	d->qfd[d->nq] = fd;
	return (int)d->nq++;
}

/* Replace queue q's file by a fresh one at the same index: the fresh queue is attached
 * last, then the old one detached, and tun moves the last queue into the hole. Detaching
 * waits for frames in flight (synchronize_net) and drops the old queue's unread frames, so
 * the next owner can never read one of the previous owner's, and a ring somebody still holds
 * on the old file reaches nothing. */
static int recycle_queue(struct srv *s, unsigned q)
{
	struct srv_dp *d = s->dp;
	int nf = nif_tap_queue_open(s->tap), rc;

	if (nf < 0)
		return nf;
	rc = nif_tap_queue_detach(d->qfd[q]);
	if (rc < 0) {
		nif_tap_queue_detach(nf);
		close(nf);
		return rc;
	}
	close(d->qfd[q]);
	d->qfd[q] = nf;
	return 0;
}

static int io_register(int fd, unsigned op, const void *arg, unsigned n)
{
	return syscall(__NR_io_uring_register, fd, op, arg, n) < 0 ? -errno : 0;
}

/* Take the process's ring and tie it to queue qfd: restrictions first (refused with EBADFD
 * for a ring already enabled, EBUSY for one that has restrictions), then the queue as fixed
 * file 0 (EBUSY if files are registered). The caller enables it once both rings are taken:
 * a ring stays unusable (disabled) until then, so a lease refused at its second ring never
 * had a moment in which its first could read the queue. Returns ulsd's descriptor of the
 * ring, kept to unregister the queue when the lease ends. */
static int take_ring(int pidfd, int remote_fd, int qfd, int efd, bool mshot)
{
	static const struct io_uring_restriction res[] = {
		{ .opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = IORING_OP_READ },
		{ .opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = IORING_OP_WRITE },
		{ .opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = IORING_OP_READV },
		{ .opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = IORING_OP_WRITEV },
		/* For the process's close (netif/qring.c rx_cancel): its reads would otherwise
		 * write into memory it frees until the lease ends and this descriptor goes. A
		 * cancellation reaches only requests of the ring it is submitted on, so the
		 * process can end nothing but its own reads and writes. */
		{ .opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = IORING_OP_ASYNC_CANCEL },
		{ .opcode = IORING_RESTRICTION_SQE_FLAGS_ALLOWED, .sqe_flags = IOSQE_FIXED_FILE },
		{ .opcode = IORING_RESTRICTION_SQE_FLAGS_REQUIRED, .sqe_flags = IOSQE_FIXED_FILE },
		/* For ulsd at the lease's end; the process gains nothing by dropping its queue. */
		{ .opcode = IORING_RESTRICTION_REGISTER_OP, .register_op = IORING_UNREGISTER_FILES },
	};
	/* The receive ring of a process that asked for the multishot read: the same, plus
	 * that opcode and buffer selection, still of fixed files only. The read stays a read
	 * of the process's own queue into the process's own memory (buffers it registered
	 * on the ring before handing it over, which needs no register operation here);
	 * buffer selection does nothing for a write (the kernel refuses the pair).
	 * docs/architecture.md, "The direct data path". */
	static const struct io_uring_restriction res_mshot[] = {
		{ .opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = IORING_OP_READ },
		{ .opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = IORING_OP_WRITE },
		{ .opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = IORING_OP_READV },
		{ .opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = IORING_OP_WRITEV },
		{ .opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = NIF_IORING_OP_READ_MULTISHOT },
		{ .opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = IORING_OP_ASYNC_CANCEL },
		{ .opcode = IORING_RESTRICTION_SQE_FLAGS_ALLOWED,
		  .sqe_flags = IOSQE_FIXED_FILE | IOSQE_BUFFER_SELECT },
		{ .opcode = IORING_RESTRICTION_SQE_FLAGS_REQUIRED, .sqe_flags = IOSQE_FIXED_FILE },
		{ .opcode = IORING_RESTRICTION_REGISTER_OP, .register_op = IORING_UNREGISTER_FILES },
	};
	const struct io_uring_restriction *set = mshot ? res_mshot : res;
	unsigned nset = mshot ? sizeof(res_mshot) / sizeof(res_mshot[0])
			      : sizeof(res) / sizeof(res[0]);
	char path[64], link[64];
	int fd = (int)syscall(SYS_pidfd_getfd, pidfd, remote_fd, 0), rc;

	if (fd < 0)
		return -errno;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	if (n < 0 || (link[n] = '\0', strcmp(link, "anon_inode:[io_uring]") != 0)) {
		rc = -EBADF;
		goto fail;
	}
	rc = io_register(fd, IORING_REGISTER_RESTRICTIONS, set, nset);
	if (rc == 0) {
		int files[2] = { qfd, efd };
		rc = io_register(fd, IORING_REGISTER_FILES, files, efd >= 0 ? 2 : 1);
	}
	if (rc == 0)
		return fd;
fail:
	close(fd);
	return rc;
}

static int peer_pidfd(int sock, pid_t pid)
{
	int pidfd = -1;
	socklen_t len = sizeof(pidfd);

	/* The pidfd of the process that connected, where the kernel has SO_PEERPIDFD (6.5);
	 * else pidfd_open of the pid SO_PEERCRED gave, which names the same process as long
	 * as the lease is open (its connection is still there). */
	if (getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0 && pidfd >= 0)
		return pidfd;
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	return pidfd < 0 ? -errno : pidfd;
}

/* The process's wake-up eventfd, named in its HELLO, as ulsd's descriptor; -1 when it
 * named none or the descriptor is not an eventfd (the lease goes on without: the process
 * then waits on its ring with poll(2)). */
static int take_eventfd(int pidfd, int remote_fd)
{
	char path[64], link[64];
	int fd;

	if (remote_fd < 0 || (fd = (int)syscall(SYS_pidfd_getfd, pidfd, remote_fd, 0)) < 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	if (n < 0 || (link[n] = '\0', strcmp(link, "anon_inode:[eventfd]") != 0)) {
		close(fd);
		return -1;
	}
	return fd;
}

int srv__dp_lease_direct(struct srv *s, struct srv_lease *l, const int32_t ring_fd[2],
			 int32_t wake_fd, bool mshot)
{
	struct srv_dp *d = s->dp;
	int q, pidfd, efd, rc = 0;

	if (!d)
		return -EOPNOTSUPP;
	q = queue_get(s);
	if (q < 0)
		return q;
	pidfd = peer_pidfd(l->fd, l->pid);
	if (pidfd < 0)
		return pidfd;
	/* The receive ring (0) gets the wake-up eventfd as file 1: its registration holds
	 * the file, so ulsd's descriptor goes at once. */
	efd = take_eventfd(pidfd, wake_fd);
	for (int i = 0; i < 2; i++) {
		int fd = take_ring(pidfd, ring_fd[i], d->qfd[q], i == 0 ? efd : -1,
				   i == 0 && mshot);
		if (fd < 0) {
			rc = fd;
			break;
		}
		l->dp_ring[i] = fd;
	}
	if (efd >= 0)
		close(efd);
	close(pidfd);
	for (int i = 0; rc == 0 && i < 2; i++)
		rc = io_register(l->dp_ring[i], IORING_REGISTER_ENABLE_RINGS, NULL, 0);
	if (rc == 0)
		rc = set_u32(d->fd_q_owner, (uint32_t)q, l->id);
	if (rc == 0)
		rc = set_u32(d->fd_lease_q, l->id, (uint32_t)q);
	if (rc < 0) {
		bool exposed = false;
		set_u32(d->fd_q_owner, (uint32_t)q, 0);
		for (int i = 0; i < 2; i++) {
			if (l->dp_ring[i] >= 0) {
				exposed = true;
				io_register(l->dp_ring[i], IORING_UNREGISTER_FILES, NULL, 0);
				close(l->dp_ring[i]);
				l->dp_ring[i] = -1;
			}
		}
		/* A ring that had the queue as its file could have been enabled by the process
		 * itself meanwhile (a ring is not restricted before it is enabled) and have
		 * reads in flight holding the queue's file: the queue is renewed like one whose
		 * lease ended, so that the next owner's frames never reach them. */
		if (exposed && recycle_queue(s, (unsigned)q) < 0) {
			d->qowner[q] = Q_RETIRED;
			s->ctr.v[SRV_DP_QUEUES_RETIRED]++;
		} else if (exposed) {
			s->ctr.v[SRV_DP_QUEUES_RECYCLED]++;
		}
		return rc;
	}
	d->qowner[q] = l->id;
	l->dp_wake = efd >= 0;
	l->dp_mshot = mshot;
	l->direct = true;
	l->queue = (unsigned)q;
	return 0;
}

static void qstat_add(struct flt_dp_qstat *to, const struct flt_dp_qstat *st)
{
	to->steered += st->steered;
	to->steered_gso += st->steered_gso;
	to->tx_pass += st->tx_pass;
	to->tx_pass_gso += st->tx_pass_gso;
	for (unsigned r = 0; r < FLT_DP_REASONS; r++)
		to->tx_drop[r] += st->tx_drop[r];
	to->syn_shed += st->syn_shed;
	to->syn_readmitted += st->syn_readmitted;
	to->syn_known_peer += st->syn_known_peer;
	to->syn_suspended += st->syn_suspended;
}

/* Queue q's figures, summed over the CPUs (the programs count per CPU: an atomic add on a
 * line the other CPU writes too cost every frame a transfer of that line). 0 or -errno. */
static int qstat_read(struct srv_dp *d, uint32_t q, struct flt_dp_qstat *sum)
{
	if (bpf_map_lookup_elem(d->fd_qstat, &q, d->percpu) < 0)
		return -errno;
	memset(sum, 0, sizeof(*sum));
	for (unsigned i = 0; i < d->ncpu; i++)
		qstat_add(sum, &d->percpu[i]);
	return 0;
}

/* A queue's figures are its owner's: at the lease's end they move into the node's totals
 * and the queue starts again from zero. Its map entries already point elsewhere, so only a
 * write its rings had in flight can still count, and counts there after the read are
 * lost (not wrong). */
static void fold_qstat(struct srv_dp *d, unsigned q)
{
	struct flt_dp_qstat st;
	uint32_t key = q;

	if (qstat_read(d, key, &st) < 0)
		return;
	memset(d->percpu, 0, sizeof(*d->percpu) * d->ncpu);
	bpf_map_update_elem(d->fd_qstat, &key, d->percpu, BPF_ANY);
	qstat_add(&d->gone, &st);
	/* synguard's budget and judgement of the queue start again with its next owner. */
	struct flt_dp_synq sq = { 0 };
	bpf_map_update_elem(bpf_map__fd(d->skel->maps.dp_synq), &key, &sq, BPF_ANY);
}

/* The lease ended (control thread, lock held), before its filter rules go: its frames
 * reach ulsd (custody, RST) from now on, anything its queue still writes is dropped, and its
 * queue is renewed before anyone else gets it. */
void srv__dp_lease_end(struct srv *s, struct srv_lease *l)
{
	struct srv_dp *d = s->dp;
	unsigned q = l->queue;

	if (!d || !l->direct)
		return;
	set_u32(d->fd_lease_q, l->id, 0);
	set_u32(d->fd_q_owner, q, 0);
	for (int i = 0; i < 2; i++) {
		if (l->dp_ring[i] >= 0) {
			io_register(l->dp_ring[i], IORING_UNREGISTER_FILES, NULL, 0);
			close(l->dp_ring[i]);
			l->dp_ring[i] = -1;
		}
	}
	fold_qstat(d, q);
	if (recycle_queue(s, q) < 0) {
		d->qowner[q] = Q_RETIRED;
		s->ctr.v[SRV_DP_QUEUES_RETIRED]++;
		srv__log(1, "queue %u could not be renewed: not used again", q);
	} else {
		d->qowner[q] = 0;
		s->ctr.v[SRV_DP_QUEUES_RECYCLED]++;
	}
	l->direct = false;
}

/* ulsstat: per queue (ulsd's queue 0 and every queue a process holds) its owner's pid and
 * figures, then the node's totals over every process's queue, past owners included. */
void srv__dp_stats(struct srv *s, srv_dp_stat_fn *fn, void *arg)
{
	struct srv_dp *d = s->dp;
	static const char *const reason[FLT_DP_REASONS] = {
		[FLT_DP_NO_OWNER] = "no_owner", [FLT_DP_SRC_MAC] = "src_mac",
		[FLT_DP_SRC_IP] = "src_ip", [FLT_DP_ARP] = "arp", [FLT_DP_PROTO] = "proto",
		[FLT_DP_PORT] = "port", [FLT_DP_SHARED_PEER] = "shared_peer",
		[FLT_DP_ICMP] = "icmp", [FLT_DP_SIZE] = "size",
	};
	struct flt_dp_qstat tot;
	unsigned used = 0;
	uint64_t dropped = 0;
	char name[48];

	if (!d)
		return;
	tot = d->gone;
	for (unsigned q = 0; q < d->nq; q++) {
		struct flt_dp_qstat st;
		uint32_t key = q;
		const struct srv_lease *l = NULL;
		if (q > 0 && (d->qowner[q] == 0 || d->qowner[q] == Q_RETIRED))
			continue;
		if (qstat_read(d, key, &st) < 0)
			continue;
		if (q > 0) {
			qstat_add(&tot, &st);
			used++;
			if (d->qowner[q] < SRV_MAX_LEASES)
				l = s->leases.by_id[d->qowner[q]];
		}
		snprintf(name, sizeof(name), "queue.%u.pid", q);
		fn(arg, name, l ? (uint64_t)l->pid : 0);
		snprintf(name, sizeof(name), "queue.%u.steered", q);
		fn(arg, name, st.steered);
		snprintf(name, sizeof(name), "queue.%u.steered_gso", q);
		fn(arg, name, st.steered_gso);
		if (q == 0)
			continue;  /* ulsd's queue: its writes are not checked */
		snprintf(name, sizeof(name), "queue.%u.tx_passed", q);
		fn(arg, name, st.tx_pass);
		snprintf(name, sizeof(name), "queue.%u.tx_passed_gso", q);
		fn(arg, name, st.tx_pass_gso);
		for (unsigned r = 1; r < FLT_DP_REASONS; r++) {
			snprintf(name, sizeof(name), "queue.%u.tx_dropped.%s", q, reason[r]);
			fn(arg, name, st.tx_drop[r]);
		}
		snprintf(name, sizeof(name), "queue.%u.syn_shed", q);
		fn(arg, name, st.syn_shed);
	}
	fn(arg, "direct_queues", d->nq - 1);
	fn(arg, "direct_queues_in_use", used);
	fn(arg, "direct_steered", tot.steered);
	fn(arg, "direct_steered_gso", tot.steered_gso);
	fn(arg, "direct_tx_passed", tot.tx_pass);
	fn(arg, "direct_tx_passed_gso", tot.tx_pass_gso);
	for (unsigned r = 1; r < FLT_DP_REASONS; r++) {
		snprintf(name, sizeof(name), "direct_tx_dropped.%s", reason[r]);
		fn(arg, name, tot.tx_drop[r]);
		dropped += tot.tx_drop[r];
	}
	fn(arg, "direct_tx_dropped", dropped);
	fn(arg, "direct_syn_guard", s->dp_kshed);
	fn(arg, "direct_syn_shed", tot.syn_shed);
	fn(arg, "direct_syn_shed_readmitted", tot.syn_readmitted);
	fn(arg, "direct_syn_shed_known_peer", tot.syn_known_peer);
	fn(arg, "direct_syn_shed_suspended", tot.syn_suspended);
}

int srv__dp_neighbour(struct srv *s, uint32_t ip, uint8_t mac[6])
{
	struct flt_dp_neigh nb;

	if (!s->dp || bpf_map_lookup_elem(bpf_map__fd(s->dp->skel->maps.dp_neigh), &ip, &nb) < 0)
		return -ENOENT;
	memcpy(mac, nb.mac, 6);
	return 0;
}

/* The same for an IPv6 peer (dp_neigh6, filled from the handshakes steer6 sees). */
int srv__dp_neighbour6(struct srv *s, const uint8_t ip[16], uint8_t mac[6])
{
	struct flt_dp_neigh nb;
	uint8_t k[16];

	memcpy(k, ip, 16);
	if (!s->dp || bpf_map_lookup_elem(bpf_map__fd(s->dp->skel->maps.dp_neigh6), k, &nb) < 0)
		return -ENOENT;
	memcpy(mac, nb.mac, 6);
	return 0;
}

int srv__dp_frag6_steer(struct srv *s, const uint8_t src[16], uint32_t id, uint32_t owner)
{
	struct flt_dp_frag6_key k;
	int fd;

	if (!s->dp)
		return -EOPNOTSUPP;
	memset(&k, 0, sizeof(k));
	memcpy(k.src, src, 16);
	k.id = htonl(id);
	fd = bpf_map__fd(s->dp->skel->maps.dp_frag6);
	if (!owner)
		return bpf_map_delete_elem(fd, &k) < 0 ? -errno : 0;
	return bpf_map_update_elem(fd, &k, &owner, BPF_ANY) < 0 ? -errno : 0;
}

int srv__dp_frag_steer(struct srv *s, uint32_t src, uint16_t id, uint8_t proto, uint32_t owner)
{
	struct flt_dp_frag_key k = { .src = src, .id = id, .proto = proto };
	int fd;

	if (!s->dp)
		return -EOPNOTSUPP;
	fd = bpf_map__fd(s->dp->skel->maps.dp_frag);
	if (!owner)
		return bpf_map_delete_elem(fd, &k) < 0 ? -errno : 0;
	return bpf_map_update_elem(fd, &k, &owner, BPF_ANY) < 0 ? -errno : 0;
}
