/* TIME-WAIT custody of a dead process's TCP connections (custody.h).
 *
 * Read first: RFC 9293 §3.4.2 (TIME-WAIT, 2 MSL), §3.3.2 (what TIME-WAIT may send) and
 * §3.10.7.1 (RST for a connection that does not exist).
 */
#include "server/custody.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

bool srv__custody_holds_addr(const struct srv_custody_set *cs, uint16_t lport,
			     const struct flt_addr *rip, uint16_t rport)
{
	for (size_t i = 0; i < cs->n; i++) {
		const struct srv_custody *c = &cs->c[i];
		if (c->lport == lport && c->rport == rport && !memcmp(&c->rip, rip, sizeof(*rip)))
			return true;
	}
	return false;
}

bool srv__custody_holds(const struct srv_custody_set *cs, uint16_t lport, uint32_t rip,
			uint16_t rport)
{
	struct flt_addr a = flt_addr_v4(rip);

	return srv__custody_holds_addr(cs, lport, &a, rport);
}

int srv__custody_add(struct srv_custody_set *cs, uint64_t now, uint16_t lport, uint32_t rip,
		     uint16_t rport)
{
	struct flt_addr a = flt_addr_v4(rip);

	return srv__custody_add_addr(cs, now, lport, &a, rport);
}

static int add(struct srv_custody_set *cs, uint64_t now, uint16_t lport,
	       const struct flt_addr *rip, uint16_t rport, unsigned probes)
{
	if (srv__custody_holds_addr(cs, lport, rip, rport))
		return 0;
	if (cs->n == cs->cap) {
		size_t ncap = cs->cap ? cs->cap * 2 : 64;
		struct srv_custody *n = realloc(cs->c, sizeof(*n) * ncap);
		if (!n)
			return -ENOMEM;
		cs->c = n;
		cs->cap = ncap;
	}
	cs->c[cs->n++] = (struct srv_custody){
		.lport = lport, .rip = *rip, .rport = rport,
		.expires_ms = now + SRV_TIMEWAIT_MS, .next_probe_ms = now,
		.probes_left = probes,
	};
	return 0;
}

int srv__custody_add_addr(struct srv_custody_set *cs, uint64_t now, uint16_t lport,
			  const struct flt_addr *rip, uint16_t rport)
{
	return add(cs, now, lport, rip, rport, SRV_CUSTODY_PROBES);
}

int srv__custody_add_timewait(struct srv_custody_set *cs, uint64_t now, uint16_t lport,
			      const struct flt_addr *rip, uint16_t rport)
{
	return add(cs, now, lport, rip, rport, 0);
}

int srv__custody_tick(struct srv_custody_set *cs, uint64_t now, srv_custody_probe_fn *probe,
		      void *arg)
{
	uint64_t next = now + 1000;

	for (size_t i = 0; i < cs->n;) {
		struct srv_custody *c = &cs->c[i];
		if (c->expires_ms <= now) {
			cs->c[i] = cs->c[--cs->n];
			continue;
		}
		if (c->probes_left && c->next_probe_ms <= now) {
			probe(arg, c);
			c->probes_left--;
			c->next_probe_ms = now + SRV_CUSTODY_PROBE_GAP_MS;
		}
		if (c->probes_left && c->next_probe_ms < next)
			next = c->next_probe_ms;
		if (c->expires_ms < next)
			next = c->expires_ms;
		i++;
	}
	return (int)(next - now);
}

void srv__custody_free(struct srv_custody_set *cs)
{
	free(cs->c);
	*cs = (struct srv_custody_set){ 0 };
}
