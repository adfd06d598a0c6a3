/* The node's port space: who holds which TCP and UDP port (ports.h). The connections that
 * ulsd keeps after their process died are custody.c's; this table only asks it whether a
 * tuple is free.
 *
 * Read first: RFC 6056 (port selection), RFC 9293 §3.4.2 (TIME-WAIT), Linux's bind(2)
 * semantics for SO_REUSEADDR and SO_REUSEPORT.
 *
 * A port is held by one or more leases, each with a reference count (a listener and the
 * connections accepted on it, a bound socket, a connect()ed socket). Several leases may
 * hold one port only when every one of them asked for SO_REUSEPORT and they run as the
 * same user (Linux's rule, which keeps one user from hijacking another's port).
 *
 * Each hold is in one or both families (FLT_FAM_*), as Linux's port space is: an AF_INET
 * socket holds the port in IPv4, an AF_INET6 socket with IPV6_V6ONLY in IPv6, and one
 * without it (the default) in both, so that an IPv4 socket and an IPv6-only one may hold
 * the same port while a dual-stack one conflicts with either (ipv6(7)).
 */
#include "server/ports.h"

#include <errno.h>
#include <stdio.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "filter/filter.h"
#include "netif/ctl/ctl.h"
#include "netif/wire/wire.h"
#include "server/custody.h"

#define PRIVILEGED_BELOW 1024

struct holder {
	uint32_t lease;
	uint32_t refs;
	uint8_t flags;
	uint8_t fams;       /* FLT_FAM_*: the families of its holds, together */
	uid_t uid;
	pid_t pid;
};

struct port {
	struct holder *h;
	uint32_t n;
};

struct srv_ports {
	struct flt_table *flt;
	const struct srv_custody_set *custody;
	uint64_t key[2];        /* RFC 6056 §3.3.3's secret key */
	uint32_t next[2];       /* and its next_ephemeral: [0] TCP, [1] UDP */
	struct port port[2][65536];   /* [0] TCP, [1] UDP */
	/* Which ports have a holder (bit p % 64 of word p / 64): a lease's end
	 * (srv__ports_drop_owner) visits these instead of all 131,070 ports, 2 MB of table
	 * read once per process that exits (profiled: the first user-space item of ulsd's
	 * CPU per lease, docs/benchmarks.md "What a ulstack process costs beyond its data"). */
	uint64_t held[2][65536 / 64];
};

struct srv_ports *srv__ports_new(struct flt_table *flt, const struct srv_custody_set *custody,
				 const uint64_t key[2])
{
	struct srv_ports *tab = calloc(1, sizeof(*tab));

	if (!tab)
		return NULL;
	tab->flt = flt;
	tab->custody = custody;
	tab->key[0] = key[0];
	tab->key[1] = key[1];
	return tab;
}

void srv__ports_free(struct srv_ports *tab)
{
	if (!tab)
		return;
	for (int pr = 0; pr < 2; pr++)
		for (uint32_t p = 0; p < 65536; p++)
			free(tab->port[pr][p].h);
	free(tab);
}

static struct port *port_of(struct srv_ports *tab, uint8_t proto, uint16_t p)
{
	return &tab->port[proto == IPPROTO_UDP][p];
}

static const struct port *cport_of(const struct srv_ports *tab, uint8_t proto, uint16_t p)
{
	return &tab->port[proto == IPPROTO_UDP][p];
}

static struct holder *holder_of(const struct port *pt, uint32_t lease)
{
	for (uint32_t i = 0; i < pt->n; i++)
		if (pt->h[i].lease == lease)
			return &pt->h[i];
	return NULL;
}

/* The held bit of pt, which is one of tab's ports. */
static void mark_held(struct srv_ports *tab, const struct port *pt, bool held)
{
	size_t i = (size_t)(pt - &tab->port[0][0]);
	uint64_t *w = &tab->held[i / 65536][(i % 65536) / 64], bit = 1ull << (i % 64);

	*w = held ? *w | bit : *w & ~bit;
}

static int add_holder(struct srv_ports *tab, struct port *pt, const struct srv_port_owner *l,
		      unsigned flags, unsigned fams)
{
	struct holder *h = realloc(pt->h, sizeof(*h) * (pt->n + 1));

	if (!h)
		return -ENOMEM;
	mark_held(tab, pt, true);
	pt->h = h;
	pt->h[pt->n++] = (struct holder){ .lease = l->id, .refs = 1, .flags = (uint8_t)flags,
					  .fams = (uint8_t)fams, .uid = l->uid, .pid = l->pid };
	return 0;
}

/* The parent of pid, from /proc (0 if it cannot be read). The field after the
 * parenthesised command name, which may itself contain ')' and spaces. */
static pid_t parent_of(pid_t pid)
{
	char path[64], buf[512];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *rp = strrchr(buf, ')');
	int ppid;
	char state;
	if (!rp || sscanf(rp + 1, " %c %d", &state, &ppid) != 2 || ppid <= 0)
		return 0;
	return (pid_t)ppid;
}

/* A fork child holds the very socket its parent bound: it joins the port when its
 * parent is one of the holders (nginx's workers change user after fork, so the user
 * cannot be the test), or when every holder is of its own user. */
static bool inherits(const struct port *pt, const struct srv_port_owner *l)
{
	pid_t ppid = parent_of(l->pid);
	bool same_uid = pt->n > 0;

	for (uint32_t i = 0; i < pt->n; i++) {
		if (ppid && pt->h[i].pid == ppid)
			return true;
		same_uid &= pt->h[i].uid == l->uid;
	}
	return same_uid;
}

/* Only holders in one of the families fams count: an IPv4 hold and an IPv6-only one never
 * meet. */
static bool may_share(const struct port *pt, const struct srv_port_owner *l, unsigned flags,
		      unsigned fams)
{
	bool meet = false;

	for (uint32_t i = 0; i < pt->n; i++)
		meet |= (pt->h[i].fams & fams) != 0;
	if (!meet)
		return true;
	if (flags & CTL_F_INHERIT)
		return inherits(pt, l);
	if (!(flags & CTL_F_REUSEPORT))
		return false;
	for (uint32_t i = 0; i < pt->n; i++)
		if ((pt->h[i].fams & fams) &&
		    (!(pt->h[i].flags & CTL_F_REUSEPORT) || pt->h[i].uid != l->uid))
			return false;
	return true;
}

/* RFC 6056 §3.3.3's F() input: the remote address and port (an IPv4 remote as before
 * IPv6, so that IPv4's port sequence did not change; an IPv6 one folded to 64 bits). */
static uint64_t dest_word(const struct flt_addr *rip, uint16_t rport)
{
	uint64_t a, b;

	if (flt_addr_is_v4(rip))
		return (uint64_t)flt_addr_v4_of(rip) << 16 | rport;
	memcpy(&a, rip->b, 8);
	memcpy(&b, rip->b + 8, 8);
	return (a ^ (b << 1 | b >> 63)) + rport;
}

/* RFC 6056 §3.3.3 (Algorithm 3, simple hash-based): the search starts at
 *
 *   offset = F(remote address, remote port, secret key),  port = min + (offset + next) % span
 *
 * where next counts the ports handed out. Connections to one destination get consecutive
 * ports, so a port comes back to the same destination only after the whole range has gone
 * by, long after the peer's TIME-WAIT for it ended; while the keyed offset keeps the ports
 * one destination sees unpredictable to others. Algorithm 1 (a random port each time),
 * which ulsd used before, picked a port whose last connection the server still held in
 * TIME-WAIT about once in three runs of tests/interop's nginx and wrk (about 150 closes
 * in 10 s); lwIP answers such a SYN with a reset, which wrk reports as a socket error. */
static int pick_ephemeral(struct srv_ports *tab, uint8_t proto, const struct flt_addr *rip,
			  uint16_t rport)
{
	uint32_t span = SRV_EPHEMERAL_HI - SRV_EPHEMERAL_LO + 1;
	uint32_t *next = &tab->next[proto == IPPROTO_UDP];
	uint32_t offset = (uint32_t)(flt_siphash(tab->key[0], tab->key[1],
						 rip ? dest_word(rip, rport) : 0, proto) % span);

	for (uint32_t i = 0; i < span; i++) {
		uint16_t p = (uint16_t)(SRV_EPHEMERAL_LO + (offset + (*next + i) % span) % span);
		if (port_of(tab, proto, p)->n == 0 &&
		    !(rip && srv__custody_holds_addr(tab->custody, p, rip, rport))) {
			*next += i + 1;
			return p;
		}
	}
	return -EADDRNOTAVAIL;
}

/* Join or add owner to the listening groups of fams, each family on its own (a family the
 * owner is in already is left as it is); all or none. */
static int listen_fams(struct srv_ports *tab, const struct srv_port_owner *l, uint8_t wproto,
		       uint16_t port, unsigned flags, unsigned fams)
{
	unsigned added = 0;

	for (unsigned f = FLT_FAM_V4; f <= FLT_FAM_V6; f <<= 1) {
		if (!(fams & f))
			continue;
		int rc = (flags & CTL_F_INHERIT) ?
			 flt_join_listen_fam(tab->flt, wproto, port, f, l->id) :
			 flt_add_listen_fam(tab->flt, wproto, port, f, l->id,
					    (flags & CTL_F_REUSEPORT) != 0);
		if (rc == -EEXIST)
			continue;
		if (rc < 0) {
			if (added)
				flt_del_listen_fam(tab->flt, wproto, port, added, l->id);
			return rc;
		}
		added |= f;
	}
	return 0;
}

int srv__port_bind(struct srv_ports *tab, const struct srv_port_owner *l, uint8_t proto,
		   uint16_t port, unsigned flags)
{
	return srv__port_bind_fam(tab, l, proto, port, flags, FLT_FAM_V4);
}

int srv__port_bind_fam(struct srv_ports *tab, const struct srv_port_owner *l, uint8_t proto,
		       uint16_t port, unsigned flags, unsigned fams)
{
	struct port *pt;
	struct holder *h;
	int rc;

	if (port == 0) {
		rc = pick_ephemeral(tab, proto, NULL, 0);
		if (rc < 0)
			return rc;
		port = (uint16_t)rc;
	} else if (port < PRIVILEGED_BELOW && l->uid != 0 &&
		   !((flags & CTL_F_INHERIT) && port_of(tab, proto, port)->n &&
		     inherits(port_of(tab, proto, port), l))) {
		/* A child that inherited a privileged port from its parent keeps it. */
		return -EACCES;
	}
	pt = port_of(tab, proto, port);
	h = holder_of(pt, l->id);
	if (h) {
		/* the same process binds it again (another socket): lwIP checks its own */
		h->refs++;
		h->flags |= (uint8_t)flags;
		h->fams |= (uint8_t)fams;
	} else if (pt->n && !may_share(pt, l, flags, fams)) {
		return -EADDRINUSE;
	} else if ((rc = add_holder(tab, pt, l, flags, fams)) < 0) {
		return rc;
	}
	if (proto == IPPROTO_UDP) {
		/* A bound UDP port receives at once, in the socket's families. */
		rc = listen_fams(tab, l, WIRE_IPPROTO_UDP, port, flags, fams);
		if (rc < 0) {
			srv__port_release(tab, l, proto, port);
			return rc;
		}
	}
	return port;
}

int srv__port_listen(struct srv_ports *tab, const struct srv_port_owner *l, uint16_t port,
		     unsigned flags, unsigned fams)
{
	struct holder *h = holder_of(port_of(tab, IPPROTO_TCP, port), l->id);

	if (!h)
		return -EPERM;
	int rc = listen_fams(tab, l, WIRE_IPPROTO_TCP, port, flags, fams);
	if (rc == 0)
		h->fams |= (uint8_t)fams;
	return rc;
}

int srv__port_connect(struct srv_ports *tab, const struct srv_port_owner *l, uint16_t lport,
		      uint32_t rip, uint16_t rport)
{
	struct flt_addr a = flt_addr_v4(rip);

	return srv__port_connect_addr(tab, l, lport, &a, rport);
}

int srv__port_connect_addr(struct srv_ports *tab, const struct srv_port_owner *l,
			   uint16_t lport, const struct flt_addr *rip, uint16_t rport)
{
	struct port *pt;
	struct holder *h;
	int rc;

	if (lport == 0) {
		rc = pick_ephemeral(tab, IPPROTO_TCP, rip, rport);
		if (rc < 0)
			return rc;
		lport = (uint16_t)rc;
		pt = port_of(tab, IPPROTO_TCP, lport);
		if ((rc = add_holder(tab, pt, l, 0, flt_addr_is_v4(rip) ? FLT_FAM_V4 : FLT_FAM_V6)) < 0)
			return rc;
	} else {
		pt = port_of(tab, IPPROTO_TCP, lport);
		h = holder_of(pt, l->id);
		if (!h)
			return -EINVAL;  /* connect from a port this process does not hold */
		if (srv__custody_holds_addr(tab->custody, lport, rip, rport))
			return -EADDRINUSE;
		h->refs++;
	}
	rc = flt_add_connected_addr(tab->flt, WIRE_IPPROTO_TCP, lport, rip, rport, l->id);
	if (rc < 0) {
		srv__port_release(tab, l, IPPROTO_TCP, lport);
		return rc == -EEXIST ? -EADDRINUSE : rc;
	}
	return lport;
}

bool srv__port_held(const struct srv_ports *tab, const struct srv_port_owner *l, uint8_t proto,
		    uint16_t port)
{
	return holder_of(cport_of(tab, proto, port), l->id) != NULL;
}

/* One more reference on a port the lease holds (a connection accepted on its listener). */
int srv__port_ref(struct srv_ports *tab, const struct srv_port_owner *l, uint8_t proto,
		  uint16_t port)
{
	struct holder *h = holder_of(port_of(tab, proto, port), l->id);

	if (!h)
		return -EPERM;
	h->refs++;
	return 0;
}

/* A connection handed over to this lease (handoff.c): one more reference on its port,
 * held already or not. Sharing rules do not apply: the connection exists, and its tuple
 * stays unique through the filter rule. */
int srv__port_take(struct srv_ports *tab, const struct srv_port_owner *l, uint8_t proto,
		   uint16_t port)
{
	struct port *pt = port_of(tab, proto, port);
	struct holder *h = holder_of(pt, l->id);

	if (h) {
		h->refs++;
		return 0;
	}
	return add_holder(tab, pt, l, 0, FLT_FAM_V4);
}

static void drop_holder(struct srv_ports *tab, struct port *pt, uint32_t i)
{
	pt->h[i] = pt->h[--pt->n];
	if (pt->n == 0) {
		free(pt->h);
		pt->h = NULL;
		mark_held(tab, pt, false);
	}
}

void srv__port_release(struct srv_ports *tab, const struct srv_port_owner *l, uint8_t proto,
		       uint16_t port)
{
	struct port *pt = port_of(tab, proto, port);

	for (uint32_t i = 0; i < pt->n; i++) {
		if (pt->h[i].lease != l->id)
			continue;
		if (--pt->h[i].refs == 0) {
			flt_del_listen_fam(tab->flt, proto == IPPROTO_UDP ? WIRE_IPPROTO_UDP :
					   WIRE_IPPROTO_TCP, port, pt->h[i].fams ? pt->h[i].fams :
					   FLT_FAM_V4, l->id);
			drop_holder(tab, pt, i);
		}
		return;
	}
}

void srv__ports_drop_owner(struct srv_ports *tab, const struct srv_port_owner *l)
{
	for (int pr = 0; pr < 2; pr++) {
		for (uint32_t w = 0; w < 65536 / 64; w++) {
			for (uint64_t bits = tab->held[pr][w]; bits; bits &= bits - 1) {
				struct port *pt = &tab->port[pr][w * 64 + (uint32_t)__builtin_ctzll(bits)];
				for (uint32_t i = 0; i < pt->n; i++) {
					if (pt->h[i].lease == l->id) {
						drop_holder(tab, pt, i);
						break;
					}
				}
			}
		}
	}
}
