/* Leases: one per process, from its HELLO to the end of its control connection.
 *
 * A lease owns the process's ring pair and eventfds (relay path) or its TAP queue (direct
 * path, bpf.c). When the connection ends, for any
 * reason (exit, crash, kill -9), the control thread reclaims what the process held: its
 * filter rules and ports are dropped at once, and its TCP connections go into custody so
 * their peers are reset within a second (ports.c, reply.c). The ring memory is freed by the
 * demux thread, the only thread that touches rings, once it has stopped watching them.
 */
#include "server/internal.h"

#include "netif/conntab.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

int srv__leases_add(struct srv_leases *t, struct srv_lease **out)
{
	struct srv_lease *l;
	uint32_t id = 0;

	for (uint32_t i = 0; i < SRV_MAX_LEASES - 1; i++) {
		uint32_t cand = 1 + (t->next_id + i) % (SRV_MAX_LEASES - 1);
		if (!t->by_id[cand]) {
			id = cand;
			break;
		}
	}
	if (!id)
		return -EMFILE;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->id = id;
	l->fd = l->memfd = l->rx_efd = l->tx_efd = -1;
	l->dp_ring[0] = l->dp_ring[1] = -1;
	t->by_id[id] = l;
	t->next_id = id;
	*out = l;
	return 0;
}

void srv__leases_remove(struct srv_leases *t, const struct srv_lease *l)
{
	if (l->id < SRV_MAX_LEASES && t->by_id[l->id] == l)
		t->by_id[l->id] = NULL;
}

int srv__lease_new(struct srv *s, int fd, pid_t pid, uid_t uid, struct srv_lease **out)
{
	struct srv_lease *l;
	int rc = srv__leases_add(&s->leases, &l);

	if (rc < 0)
		return rc;
	l->fd = fd;
	l->pid = pid;
	l->uid = uid;
	s->ctr.v[SRV_LEASES_OPENED]++;
	*out = l;
	return 0;
}

/* The relay path's ring pair: a lease that is not direct gets it before HELLO's reply. */
int srv__lease_rings(struct srv *s, struct srv_lease *l)
{
	int rc = nif_ring_layout(s->mtu, &l->layout);

	if (rc == 0)
		rc = nif_ring_create(&l->layout, &l->memfd);
	if (rc == 0)
		rc = nif_ring_map(l->memfd, &l->layout, &l->rings);
	if (rc == 0) {
		l->rx_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		l->tx_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (l->rx_efd < 0 || l->tx_efd < 0)
			rc = -errno;
	}
	if (rc < 0)
		return rc;
	nif_ring_attach(&l->rx, l->rings, &l->layout, 0, l->rx_efd, true);
	nif_ring_attach(&l->tx, l->rings, &l->layout, 1, l->tx_efd, false);
	l->has_rings = true;
	s->leases.changed = true;
	nif_tap_wake(s->tap);  /* the demux thread starts watching its transmit ring now */
	return 0;
}

struct end_ctx {
	struct srv *s;
	uint32_t owner;
	uint64_t now;
	/* The FIN-WAIT-2 and TIME-WAIT entries of the process's connection table as it left
	 * it, sorted (srv__tw_sort; NULL: no table, or not readable) */
	struct uls_conntab_ent *tab;
	uint32_t ntab;
	/* what this lease's end put in custody (the log line) */
	uint32_t custody, timewait, finwait2;
};

/* The order of srv__tw_sort and srv__tw_find: local port, remote port, remote address. */
static int tw_cmp(const void *a, const void *b)
{
	const struct uls_conntab_ent *x = a, *y = b;

	if (x->lport != y->lport)
		return x->lport < y->lport ? -1 : 1;
	if (x->rport != y->rport)
		return x->rport < y->rport ? -1 : 1;
	return memcmp(x->rip, y->rip, sizeof(x->rip));
}

/* Keep only the FIN-WAIT-2 and TIME-WAIT entries of tab[0..n), at its front, sorted for
 * srv__tw_find; returns their count. A lease's end asks once per connected TCP rule of the
 * process whether it left that tuple in one of them: searching the whole table (up to
 * ULS_CONNTAB_CAPACITY entries) each time, under ulsd's lock, cost N x M compares for N
 * rules and M entries; sorting once and searching in halves costs O((N + M) log M). */
uint32_t srv__tw_sort(struct uls_conntab_ent *tab, uint32_t n)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < n; i++) {
		if (tab[i].state != ULS_TCP_TIME_WAIT && tab[i].state != ULS_TCP_FIN_WAIT_2)
			continue;
		if (k != i)
			tab[k] = tab[i];
		k++;
	}
	qsort(tab, k, sizeof(*tab), tw_cmp);
	return k;
}

/* The entry of (lport, rip, rport) among tw[0..n), the output of srv__tw_sort, or NULL.
 * rip is 16 octets, an IPv4 address v4-mapped as the table holds it (netif/conntab.h). */
const struct uls_conntab_ent *srv__tw_find(const struct uls_conntab_ent *tw, uint32_t n,
					   uint16_t lport, const uint8_t rip[16], uint16_t rport)
{
	struct uls_conntab_ent key;

	key.lport = lport;
	key.rport = rport;
	memcpy(key.rip, rip, sizeof(key.rip));
	return n ? bsearch(&key, tw, n, sizeof(*tw), tw_cmp) : NULL;
}

/* The connection table a process's stack writes a last time when it stops, after its
 * closed connections finished (stack/conntab.c, stk__conntab_last): copied before the
 * lease's table is unmapped. A process killed before that left an older copy (at most
 * ULS_CONNTAB_PERIOD_MS old while it had connections); whatever the table says only
 * spares a peer the probes, and a peer that still holds the connection gets a RST for its
 * next segment all the same. */
static void read_last_table(struct end_ctx *c, const struct srv_lease *l)
{
	uint32_t total;
	uint64_t published;

	if (!l->conntab)
		return;
	c->tab = malloc(sizeof(*c->tab) * l->conntab_cap);
	if (c->tab && uls_conntab_snapshot(l->conntab, l->conntab_cap, c->tab, &c->ntab, &total,
					   &published) != ULS_CONNTAB_OK)
		c->ntab = 0;
	if (c->tab)
		c->ntab = srv__tw_sort(c->tab, c->ntab);
}

static int take_custody(const struct flt_rule *r, void *arg)
{
	struct end_ctx *c = arg;
	int rc;

	if (r->owner != c->owner || r->kind != FLT_RULE_CONNECTED || r->proto != WIRE_IPPROTO_TCP)
		return 0;
	/* Both families: the tuple stays reserved for 2 MSL (RFC 9293 §3.4.2). */
	const struct uls_conntab_ent *e = srv__tw_find(c->tab, c->ntab, r->lport, r->rip6.b,
						       r->rport);
	if (e && e->state == ULS_TCP_TIME_WAIT) {
		rc = srv__custody_add_timewait(&c->s->custody, c->now, r->lport, &r->rip6, r->rport,
					       e->snd_nxt, e->rcv_nxt);
		if (rc == 0) {
			c->s->ctr.v[SRV_CUSTODY_TIMEWAIT]++;
			c->timewait++;
		}
	} else if (e) {
		/* FIN-WAIT-2: the process's FIN was acknowledged and it exited, as Linux lets
		 * an orphaned socket do; ulsd waits for the peer's FIN (custody.h). */
		rc = srv__custody_add_finwait2(&c->s->custody, c->now, r->lport, &r->rip6, r->rport,
					       e->snd_nxt, e->rcv_nxt);
		if (rc == 0) {
			c->s->ctr.v[SRV_CUSTODY_FINWAIT2]++;
			c->finwait2++;
		}
	} else {
		rc = srv__custody_add_addr(&c->s->custody, c->now, r->lport, &r->rip6, r->rport);
	}
	if (rc < 0)
		c->s->ctr.v[SRV_DROP_CUSTODY_NO_MEMORY]++;  /* its peer's next segment gets a RST */
	else
		c->custody++;
	return 0;
}

static uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* The process is gone (control thread, lock held). */
void srv__lease_end(struct srv *s, struct srv_lease *l)
{
	struct end_ctx c = { s, l->id, srv__now_ms(), NULL, 0, 0, 0, 0 };
	uint64_t t0, t1;

	if (l->dead)
		return;
	t0 = mono_us();
	/* What the process queued before it went (its last FINs and RSTs) still leaves under
	 * its rules. The demux thread cannot be in the ring: we hold the lock. */
	srv__drain_tx(s, l);
	l->dead = true;
	/* The direct path's map entries go first: from here on the kernel steers its frames
	 * to ulsd, which answers them from custody. */
	srv__dp_lease_end(s, l);
	t1 = mono_us();
	read_last_table(&c, l);
	flt_foreach(s->flt, take_custody, &c);
	free(c.tab);
	t1 = mono_us() - t1;
	flt_del_owner(s->flt, l->id);
	srv__ports_drop_owner(s->ports, SRV_OWNER(l));
	srv__lease_conntab_close(l);
	close(l->fd);
	l->fd = -1;
	s->ctr.v[SRV_LEASES_CLOSED]++;
	s->leases.changed = true;
	srv__custody_run(s);  /* first probes now, not at the next tick */
	nif_tap_wake(s->tap);  /* the demux thread unwatches and frees it */
	/* What a big lease's end costs ulsd, all of it under its lock (docs/limits.md). */
	if (c.custody)
		srv__log(2, "lease %u: %u connections to custody (%u in TIME-WAIT, %u in "
			 "FIN-WAIT-2) in %llu us, %llu us of it taking custody", l->id, c.custody,
			 c.timewait, c.finwait2,
			 (unsigned long long)(mono_us() - t0), (unsigned long long)t1);
}

/* The process's connection table: unmapped when the lease ends (control thread, lock
 * held: STATS reads it there, under the same lock). */
void srv__lease_conntab_close(struct srv_lease *l)
{
	if (l->conntab)
		munmap(l->conntab, uls_conntab_size(l->conntab_cap));
	l->conntab = NULL;
}

/* Demux thread (lock held): the lease is dead and unwatched. */
void srv__lease_free(struct srv *s, struct srv_lease *l)
{
	srv__leases_remove(&s->leases, l);
	srv__lease_conntab_close(l);
	if (l->rings)
		nif_ring_unmap(l->rings, &l->layout);
	if (l->memfd >= 0)
		close(l->memfd);
	if (l->rx_efd >= 0)
		close(l->rx_efd);
	if (l->tx_efd >= 0)
		close(l->tx_efd);
	if (l->fd >= 0)
		close(l->fd);
	free(l);
}
