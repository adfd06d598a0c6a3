/* The process's connection table for ulsstat (netif/conntab.h; docs/architecture.md,
 * "What ulsstat sees of a process's connections").
 *
 * On a node, ulsd hands the process a shared table at its lease's start (CTL_CONNTAB).
 * While the process has TCP connections an lwIP timer rewrites it every
 * ULS_CONNTAB_PERIOD_MS, with the core lock held as every timer is: state, queues, RTT,
 * congestion window, retransmissions of each connection, from lwIP's pcb lists. Nobody
 * ever waits for it: ulsd copies the table under its sequence lock whenever ulsstat asks,
 * so a query costs the data path nothing, and the publication costs one walk of the pcb
 * list per period (lwIP's fast timer walks it as often). With no connections
 * the timer stops, after writing an empty table; the next connection starts it again.
 */
#include "sock.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lwip/priv/tcp_priv.h"
#include "lwip/timeouts.h"
#include "netif/conntab.h"
#include "netif/sys.h"

static struct uls_conntab_hdr *tab;
static size_t tab_len;
static bool armed;
static bool final;      /* the last table is written: nothing after it (stk__conntab_last) */

/* The descriptor ulsd sent with its CONNTAB reply (core lock held, before the node is up).
 * Closed here; the mapping stays. */
int stk__conntab_map(int fd)
{
	struct stat st;
	int rc = 0;

	if (fstat(fd, &st) < 0 || st.st_size < (off_t)sizeof(struct uls_conntab_hdr) ||
	    st.st_size > (off_t)uls_conntab_size(ULS_CONNTAB_CAPACITY * 16u)) {
		nif_sys.close(fd);
		return -EPROTO;
	}
	void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		rc = -errno;
	nif_sys.close(fd);
	if (rc < 0)
		return rc;
	rc = uls_conntab_check_header(p, (size_t)st.st_size);
	if (rc < 0) {
		munmap(p, (size_t)st.st_size);
		return rc;
	}
	tab = p;
	tab_len = (size_t)st.st_size;
	return 0;
}

/* RFC 9293 state, in lwIP's numbering (conntab.h mirrors it). */
_Static_assert((int)ULS_TCP_TIME_WAIT == (int)TIME_WAIT &&
	       (int)ULS_TCP_ESTABLISHED == (int)ESTABLISHED, "conntab states are lwIP's");

static uint32_t u32_sat(uint64_t v)
{
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

static void fill(struct uls_conntab_ent *e, const struct tcp_pcb *pcb)
{
	const struct stk_sock *s = pcb->callback_arg;

	/* A connection still in SYN-RECEIVED carries its listener's argument (lwIP copies
	 * it): only a socket of its own has its receive queue. */
	if (s && s->tcp != pcb)
		s = NULL;
	memset(e, 0, sizeof(*e));
	/* Both addresses in the table's 16-octet form (netif/conntab.h): IPv4 v4-mapped. */
	if (IP_IS_V6(&pcb->remote_ip)) {
		e->family = AF_INET6;
		memcpy(e->rip, ip_2_ip6(&pcb->remote_ip)->addr, 16);
		memcpy(e->lip, ip_2_ip6(&pcb->local_ip)->addr, 16);
	} else {
		e->family = AF_INET;
		ctl_addr_set4(e->rip, ip_2_ip4(&pcb->remote_ip)->addr);
		ctl_addr_set4(e->lip, ip_2_ip4(&pcb->local_ip)->addr);
	}
	e->lport = pcb->local_port;
	e->rport = pcb->remote_port;
	e->state = (uint8_t)pcb->state;
	/* Kept in TIME-WAIT too: ulsd answers the peer's FIN from them after we are gone. */
	e->snd_nxt = pcb->snd_nxt;
	e->rcv_nxt = pcb->rcv_nxt;
	if (pcb->state == TIME_WAIT)
		return;  /* a TIME-WAIT pcb keeps only what tcp_pcb_purge left */
	/* What the application wrote that the peer has not acknowledged, as ss's Send-Q. */
	e->send_queue = pcb->snd_lbb - pcb->lastack;
	/* What arrived that the application has not read: our receive queue, and what lwIP
	 * holds because the socket refused it. */
	uint64_t rq = s ? s->rxq.bytes : 0;
	if (pcb->refused_data)
		rq += pcb->refused_data->tot_len;
	e->recv_queue = u32_sat(rq);
	/* RFC 6298 estimator (patch 0020): SRTT and RTTVAR in milliseconds, times 8 and 4.
	 * Deviation: so microsecond figures are whole milliseconds (timestamps tick in ms). */
	if (pcb->rtt_sampled) {
		e->rtt_us = u32_sat((uint64_t)(pcb->srtt8 > 0 ? pcb->srtt8 : 0) * 1000u / 8u);
		e->rttvar_us = u32_sat((uint64_t)(pcb->rttvar4 > 0 ? pcb->rttvar4 : 0) * 1000u / 4u);
	}
	e->rto_us = u32_sat((uint64_t)(pcb->rto > 0 ? pcb->rto : 0) * TCP_SLOW_INTERVAL * 1000u);
	e->cwnd = pcb->cwnd;
	e->ssthresh = pcb->ssthresh;
	e->retransmits = stk__ep_rexmits(pcb);
	e->mss = pcb->mss;
	e->snd_wnd = pcb->snd_wnd;
	e->rcv_wnd = pcb->rcv_wnd;
	if (pcb->flags & TF_WND_SCALE) {
		e->flags |= ULS_CONNTAB_F_WSCALE;
		e->snd_wscale = pcb->snd_scale;
		e->rcv_wscale = pcb->rcv_scale;
	}
	if (pcb->flags & TF_TIMESTAMP)
		e->flags |= ULS_CONNTAB_F_TIMESTAMPS;
#if LWIP_TCP_SACK_OUT
	if (pcb->flags & TF_SACK)
		e->flags |= ULS_CONNTAB_F_SACK;
#endif
}

/* Write the table; returns the number of connections (core lock held). */
static uint32_t publish(void)
{
	struct uls_conntab_ent *ents = (void *)(tab + 1);
	uint32_t cap = tab->capacity, n = 0, total = 0;
	struct timespec now;

	uls_conntab_write_begin(tab);
	/* Every live connection is counted; TIME-WAIT ones only while the table has room: a
	 * burst of short connections leaves 100,000 of them (docs/limits.md), and walking them
	 * all four times a second would cost more than everything else here. */
	for (const struct tcp_pcb *pcb = tcp_active_pcbs; pcb; pcb = pcb->next) {
		if (pcb->state <= LISTEN || pcb->remote_port == 0)
			continue;
		total++;
		if (n < cap)
			fill(&ents[n++], pcb);
	}
	for (const struct tcp_pcb *pcb = tcp_tw_pcbs; pcb && n < cap; pcb = pcb->next) {
		total++;
		fill(&ents[n++], pcb);
	}
	clock_gettime(CLOCK_MONOTONIC, &now);
	uls_conntab_write_end(tab, n, total, (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec);
	return total;
}

static void tick(void *arg)
{
	(void)arg;
	armed = false;
	if (!tab || final)
		return;
	if (publish() > 0 && stk__node.up) {
		armed = true;
		sys_timeout(ULS_CONNTAB_PERIOD_MS, tick, NULL);
	}
}

/* A connection appeared (core lock held): publish now, and every period from now on. */
void stk__conntab_kick(void)
{
	if (!tab || armed || !stk__node.up)
		return;
	armed = true;
	sys_timeout(ULS_CONNTAB_PERIOD_MS, tick, NULL);
}

/* The node stops (core lock held): the table a last time, after uls_node_stop let closed
 * connections finish, so that ulsd, which reads it when the lease ends, takes those left in
 * TIME-WAIT or FIN-WAIT-2 into custody without probing their peers (server/lease.c). Once:
 * uls_node_stop writes it before netif_remove aborts the FIN-WAIT-2 pcbs, and the lease's
 * end (stk__node_down_hook) after. */
void stk__conntab_last(void)
{
	if (tab && !final)
		publish();
	final = true;
}

/* The node stops, or a fork child lets go of its parent's node (core lock held): the
 * table is the parent's (a child maps its own with its own lease) or goes with the lease. */
void stk__conntab_close(void)
{
	if (armed)
		sys_untimeout(tick, NULL);
	armed = false;
	if (tab)
		munmap(tab, tab_len);
	tab = NULL;
	tab_len = 0;
	final = false;
}
