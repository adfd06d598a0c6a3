/* The node's port space: who holds which TCP and UDP port, and the connections that ulsd
 * keeps in custody after their process died.
 *
 * Read first: RFC 6056 (port selection), RFC 9293 §3.4.2 (TIME-WAIT), Linux's bind(2)
 * semantics for SO_REUSEADDR and SO_REUSEPORT.
 *
 * A port is held by one or more leases, each with a reference count (a listener and the
 * connections accepted on it, a bound socket, a connect()ed socket). Several leases may
 * hold one port only when every one of them asked for SO_REUSEPORT and they run as the
 * same user (Linux's rule, which keeps one user from hijacking another's port).
 */
#include "server/internal.h"

#include <errno.h>
#include <stdio.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "netif/ctl/ctl.h"

#define PRIVILEGED_BELOW 1024
#define PROBES           4
#define PROBE_GAP_MS     250

struct holder {
	uint32_t lease;
	uint32_t refs;
	uint8_t flags;
	uid_t uid;
	pid_t pid;
};

struct port {
	struct holder *h;
	uint32_t n;
};

/* [0] TCP, [1] UDP */
static struct port ports[2][65536];

static struct port *port_of(uint8_t proto, uint16_t p)
{
	return &ports[proto == IPPROTO_UDP][p];
}

static struct holder *holder_of(struct port *pt, uint32_t lease)
{
	for (uint32_t i = 0; i < pt->n; i++)
		if (pt->h[i].lease == lease)
			return &pt->h[i];
	return NULL;
}

static int add_holder(struct port *pt, struct srv_lease *l, unsigned flags)
{
	struct holder *h = realloc(pt->h, sizeof(*h) * (pt->n + 1));

	if (!h)
		return -ENOMEM;
	pt->h = h;
	pt->h[pt->n++] = (struct holder){ .lease = l->id, .refs = 1, .flags = (uint8_t)flags,
					  .uid = l->uid, .pid = l->pid };
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
static bool inherits(const struct port *pt, const struct srv_lease *l)
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

static bool may_share(const struct port *pt, const struct srv_lease *l, unsigned flags)
{
	if (flags & CTL_F_INHERIT)
		return inherits(pt, l);
	if (!(flags & CTL_F_REUSEPORT))
		return false;
	for (uint32_t i = 0; i < pt->n; i++)
		if (!(pt->h[i].flags & CTL_F_REUSEPORT) || pt->h[i].uid != l->uid)
			return false;
	return true;
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
static int pick_ephemeral(struct srv *s, uint8_t proto, uint32_t rip, uint16_t rport)
{
	uint32_t span = SRV_EPHEMERAL_HI - SRV_EPHEMERAL_LO + 1;
	uint32_t *next = &s->port_next[proto == IPPROTO_UDP];
	uint32_t offset = (uint32_t)(flt_siphash(s->port_key[0], s->port_key[1],
						 (uint64_t)rip << 16 | rport, proto) % span);

	for (uint32_t i = 0; i < span; i++) {
		uint16_t p = (uint16_t)(SRV_EPHEMERAL_LO + (offset + (*next + i) % span) % span);
		if (port_of(proto, p)->n == 0 && !(rip && srv__custody_holds(s, p, rip, rport))) {
			*next += i + 1;
			return p;
		}
	}
	return -EADDRNOTAVAIL;
}

int srv__port_bind(struct srv *s, struct srv_lease *l, uint8_t proto, uint16_t port,
		  unsigned flags)
{
	struct port *pt;
	struct holder *h;
	int rc;

	if (port == 0) {
		rc = pick_ephemeral(s, proto, 0, 0);
		if (rc < 0)
			return rc;
		port = (uint16_t)rc;
	} else if (port < PRIVILEGED_BELOW && l->uid != 0 &&
		   !((flags & CTL_F_INHERIT) && port_of(proto, port)->n &&
		     inherits(port_of(proto, port), l))) {
		/* A child that inherited a privileged port from its parent keeps it. */
		return -EACCES;
	}
	pt = port_of(proto, port);
	h = holder_of(pt, l->id);
	if (h) {
		/* the same process binds it again (another socket): lwIP checks its own */
		h->refs++;
		h->flags |= (uint8_t)flags;
	} else if (pt->n && !may_share(pt, l, flags)) {
		return -EADDRINUSE;
	} else if ((rc = add_holder(pt, l, flags)) < 0) {
		return rc;
	}
	if (proto == IPPROTO_UDP) {
		/* A bound UDP port receives at once. */
		rc = (flags & CTL_F_INHERIT) ?
		     flt_join_listen(s->flt, WIRE_IPPROTO_UDP, port, l->id) :
		     flt_add_listen(s->flt, WIRE_IPPROTO_UDP, port, l->id,
				    (flags & CTL_F_REUSEPORT) != 0);
		if (rc < 0 && rc != -EEXIST) {
			srv__port_release(s, l, proto, port);
			return rc;
		}
	}
	return port;
}

int srv__port_connect(struct srv *s, struct srv_lease *l, uint16_t lport, uint32_t rip,
		     uint16_t rport)
{
	struct port *pt;
	struct holder *h;
	int rc;

	if (lport == 0) {
		rc = pick_ephemeral(s, IPPROTO_TCP, rip, rport);
		if (rc < 0)
			return rc;
		lport = (uint16_t)rc;
		pt = port_of(IPPROTO_TCP, lport);
		if ((rc = add_holder(pt, l, 0)) < 0)
			return rc;
	} else {
		pt = port_of(IPPROTO_TCP, lport);
		h = holder_of(pt, l->id);
		if (!h)
			return -EINVAL;  /* connect from a port this process does not hold */
		if (srv__custody_holds(s, lport, rip, rport))
			return -EADDRINUSE;
		h->refs++;
	}
	rc = flt_add_connected(s->flt, WIRE_IPPROTO_TCP, lport, rip, rport, l->id);
	if (rc < 0) {
		srv__port_release(s, l, IPPROTO_TCP, lport);
		return rc == -EEXIST ? -EADDRINUSE : rc;
	}
	return lport;
}

bool srv__port_held(struct srv *s, struct srv_lease *l, uint8_t proto, uint16_t port)
{
	(void)s;
	return holder_of(port_of(proto, port), l->id) != NULL;
}

/* One more reference on a port the lease holds (a connection accepted on its listener). */
int srv__port_ref(struct srv *s, struct srv_lease *l, uint8_t proto, uint16_t port)
{
	struct holder *h = holder_of(port_of(proto, port), l->id);

	(void)s;
	if (!h)
		return -EPERM;
	h->refs++;
	return 0;
}

/* A connection handed over to this lease (handoff.c): one more reference on its port,
 * held already or not. Sharing rules do not apply: the connection exists, and its tuple
 * stays unique through the filter rule. */
int srv__port_take(struct srv *s, struct srv_lease *l, uint8_t proto, uint16_t port)
{
	struct port *pt = port_of(proto, port);
	struct holder *h = holder_of(pt, l->id);

	(void)s;
	if (h) {
		h->refs++;
		return 0;
	}
	return add_holder(pt, l, 0);
}

void srv__port_release(struct srv *s, struct srv_lease *l, uint8_t proto, uint16_t port)
{
	struct port *pt = port_of(proto, port);

	for (uint32_t i = 0; i < pt->n; i++) {
		if (pt->h[i].lease != l->id)
			continue;
		if (--pt->h[i].refs == 0) {
			flt_del_listen(s->flt, proto == IPPROTO_UDP ? WIRE_IPPROTO_UDP : WIRE_IPPROTO_TCP,
				       port, l->id);
			pt->h[i] = pt->h[--pt->n];
			if (pt->n == 0) {
				free(pt->h);
				pt->h = NULL;
			}
		}
		return;
	}
}

/* The lease ended: let go of every port it held (the filter rules are removed by the
 * caller with flt_del_owner). */
void srv__ports_drop_lease(struct srv *s, struct srv_lease *l)
{
	(void)s;
	for (int pr = 0; pr < 2; pr++) {
		for (uint32_t p = 1; p < 65536; p++) {
			struct port *pt = &ports[pr][p];
			for (uint32_t i = 0; i < pt->n; i++) {
				if (pt->h[i].lease != l->id)
					continue;
				pt->h[i] = pt->h[--pt->n];
				if (pt->n == 0) {
					free(pt->h);
					pt->h = NULL;
				}
				break;
			}
		}
	}
}

bool srv__custody_holds(struct srv *s, uint16_t lport, uint32_t rip, uint16_t rport)
{
	for (size_t i = 0; i < s->ncustody; i++) {
		const struct srv_custody *c = &s->custody[i];
		if (c->lport == lport && c->rip == rip && c->rport == rport)
			return true;
	}
	return false;
}

void srv__custody_add(struct srv *s, uint16_t lport, uint32_t rip, uint16_t rport)
{
	uint64_t now = srv__now_ms();

	if (srv__custody_holds(s, lport, rip, rport))
		return;
	if (s->ncustody == s->custody_cap) {
		size_t ncap = s->custody_cap ? s->custody_cap * 2 : 64;
		struct srv_custody *n = realloc(s->custody, sizeof(*n) * ncap);
		if (!n)
			return;  /* no custody: the peer still gets RSTs for its next segment */
		s->custody = n;
		s->custody_cap = ncap;
	}
	s->custody[s->ncustody++] = (struct srv_custody){
		.lport = lport, .rip = rip, .rport = rport,
		.expires_ms = now + SRV_TIMEWAIT_MS, .next_probe_ms = now, .probes_left = PROBES,
	};
}

/* Send due probes and forget expired custody; returns ms until the next due event. */
int srv__custody_tick(struct srv *s)
{
	uint64_t now = srv__now_ms(), next = now + 1000;

	for (size_t i = 0; i < s->ncustody;) {
		struct srv_custody *c = &s->custody[i];
		if (c->expires_ms <= now) {
			s->custody[i] = s->custody[--s->ncustody];
			continue;
		}
		if (c->probes_left && c->next_probe_ms <= now) {
			srv__send_probe(s, c);
			c->probes_left--;
			c->next_probe_ms = now + PROBE_GAP_MS;
		}
		if (c->probes_left && c->next_probe_ms < next)
			next = c->next_probe_ms;
		if (c->expires_ms < next)
			next = c->expires_ms;
		i++;
	}
	return (int)(next - now);
}
