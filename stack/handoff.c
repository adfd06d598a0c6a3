/* A connection moves to the process that goes on using it after fork().
 *
 * After fork() both processes hold the socket, but only the parent's stack has the
 * connection (fork.c). The sshd and inetd pattern is: the parent closes its copy, the
 * child goes on. So when the parent closes a connected socket that existed at a fork, it
 * does not close the connection while another process may still hold the socket: it
 * parks it (the pcb keeps running: ACKs, retransmissions, data queued for the reader)
 * and watches the socket's readiness mirror (mirror.c), whose end A the other holders
 * share and whose end B only the parent has:
 *
 *   B hangs up          nobody else holds the socket: close the connection as usual.
 *   'C' arrives on B    a holder claims it (uls_claim_wait wrote it into A). The parent
 *                       packs the connection's state into a memfd, tells ulsd HANDOFF
 *                       with a random nonce (ulsd holds the tuple's frames back from
 *                       both), sends 'H' and the memfd through B, and forgets the pcb
 *                       without a word on the wire.
 *
 * The child reads the memfd (uls_claim), presents the nonce to ulsd in CLAIM (the tuple's
 * filter rule and port reference become its own), and rebuilds the pcb: the sequence
 * space, windows, scaling, timestamps, MSS and congestion state as they were; the bytes
 * the parent's application had not read are queued for its reader; the bytes sent but
 * not acknowledged and the bytes not yet sent are queued again from SND.UNA, so the peer
 * gets every byte (some twice, which TCP discards: RFC 9293 §3.10.7.4).
 *
 * Deviation: two processes cannot use one connection at the same time. The child's first
 * call on an inherited connection waits until the parent has closed its copy (a signal
 * interrupts the wait with EINTR); the parent keeps using it meanwhile.
 */
#include "sock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lwip/priv/tcp_priv.h"
#include "lwip/timeouts.h"

#include "hoffstate.h"
#include "netif/ctl/ctl.h"
#include "netif/sys.h"

#define WATCH_MIN_MS 1
#define WATCH_MAX_MS 20    /* the longest a claim waits to be seen */

#define KEEP_FLAGS (TF_NODELAY | TF_WND_SCALE | TF_TIMESTAMP | TF_SACK)

/* ---- The parent: parking, watching, giving ------------------------------------------ */

static struct stk_sock **parked;
static size_t nparked, parked_cap;
static u32_t watch_ms;
static bool watching;

static void watch(void *arg);

static void arm(u32_t ms)
{
	if (!watching) {
		watching = true;
		sys_timeout(ms, watch, NULL);
	}
}

/* At fork, in the parent: the connections whose mirrors the child now holds too. */
static void mark(struct stk_sock *s)
{
	if (s->type == SOCK_STREAM && s->state == STK_S_CONNECTED && s->mirror)
		s->forked = true;
}

void stk__handoff_forked(void)
{
	stk__sockets_each(mark);
}

bool stk__handoff_park(struct stk_sock *s)
{
	if (!s->forked || !s->tcp || !stk__node.running || s->wr_shut || s->rd_shut ||
	    (s->tcp->state != ESTABLISHED && s->tcp->state != CLOSE_WAIT))
		return false;
	if (nparked == parked_cap) {
		size_t ncap = parked_cap ? parked_cap * 2 : 8;
		struct stk_sock **n = realloc(parked, sizeof(*n) * ncap);
		if (!n)
			return false;
		parked = n;
		parked_cap = ncap;
	}
	if (stk__mirror_park(s) < 0)
		return false;
	s->parked = true;
	parked[nparked++] = s;
	watch_ms = WATCH_MIN_MS;
	if (watching) {
		sys_untimeout(watch, NULL);
		watching = false;
	}
	arm(0);  /* a claim may be waiting already */
	return true;
}

/* In a fork child: the parked connections are the parent's (and so are the claims that
 * reach them). Forget them, closing only this process's copies of their descriptors. */
void stk__handoff_forget(void)
{
	if (watching)
		sys_untimeout(watch, NULL);
	watching = false;
	for (size_t i = 0; i < nparked; i++) {
		struct stk_sock *s = parked[i];
		stk__mirror_free(s);
		stk__rxq_clear(&s->rxq);
		free(s->acq);
		free(s);
	}
	nparked = 0;
}

bool stk__handoff_pending(void)
{
	return nparked > 0;
}

static int memfd_put(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t w = nif_sys.write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -EIO;
		p = (const uint8_t *)p + w;
		n -= (size_t)w;
	}
	return 0;
}

/* The segment of either queue holding sequence number seq, or NULL. The two queues are
 * not simply one after the other: tcp_rexmit() moves the first unacknowledged segment to
 * the head of the unsent queue. */
static struct tcp_seg *seg_at(struct tcp_pcb *pcb, u32_t seq)
{
	struct tcp_seg *queues[2] = { pcb->unacked, pcb->unsent };

	for (int q = 0; q < 2; q++)
		for (struct tcp_seg *seg = queues[q]; seg; seg = seg->next) {
			u32_t start = lwip_ntohl(seg->tcphdr->seqno);
			if (seg->len && TCP_SEQ_LEQ(start, seq) && TCP_SEQ_LT(seq, start + seg->len))
				return seg;
		}
	return NULL;
}

/* The bytes from SND.UNA to the end of what the application wrote, appended to fd. */
static int put_tx(int fd, struct tcp_pcb *pcb, uint32_t *len)
{
	uint8_t buf[4096];

	for (u32_t from = pcb->lastack; from != pcb->snd_lbb;) {
		struct tcp_seg *seg = seg_at(pcb, from);
		if (!seg)
			return -EPROTO;  /* a hole in what lwIP holds: cannot happen */
		u32_t off = from - lwip_ntohl(seg->tcphdr->seqno);
		u16_t hdr = (u16_t)(seg->p->tot_len - seg->len);
		u16_t n = (u16_t)LWIP_MIN(sizeof(buf), seg->len - off);
		pbuf_copy_partial(seg->p, buf, n, (u16_t)(hdr + off));
		if (memfd_put(fd, buf, n) < 0)
			return -EIO;
		from += n;
		*len += n;
	}
	return 0;
}

/* Everything the taker needs, in a sealed memfd; -errno if the state cannot be moved. */
static int pack(struct stk_sock *s, uint64_t nonce)
{
	struct tcp_pcb *pcb = s->tcp;

	struct stk_hoff_state h = {
		.magic = STK_HOFF_MAGIC, .version = STK_HOFF_VERSION, .nonce = nonce,
		.sock_family = (uint8_t)s->family, .v6only = s->family == AF_INET6 && s->v6only,
		.local_port = pcb->local_port, .remote_port = pcb->remote_port,
		.state = (uint8_t)pcb->state, .prio = pcb->prio, .so_options = pcb->so_options,
		.tos = pcb->tos, .ttl = pcb->ttl, .snd_scale = pcb->snd_scale,
		.rcv_scale = pcb->rcv_scale, .flags = pcb->flags & KEEP_FLAGS,
		.rcv_nxt = pcb->rcv_nxt, .rcv_wnd = pcb->rcv_wnd, .rcv_ann_wnd = pcb->rcv_ann_wnd,
		.rcv_ann_right_edge = pcb->rcv_ann_right_edge, .lastack = pcb->lastack,
		.snd_nxt = pcb->snd_nxt, .in_recovery = (pcb->flags & TF_INFR) != 0,
		.snd_wl1 = pcb->snd_wl1, .snd_wl2 = pcb->snd_wl2, .snd_lbb = pcb->snd_lbb,
		.snd_wnd = pcb->snd_wnd, .snd_wnd_max = pcb->snd_wnd_max, .cwnd = pcb->cwnd,
		.ssthresh = pcb->ssthresh, .ts_recent = pcb->ts_recent,
		.ts_lastacksent = pcb->ts_lastacksent, .keep_idle = pcb->keep_idle,
		.keep_intvl = pcb->keep_intvl, .keep_cnt = pcb->keep_cnt, .mss = pcb->mss,
		.sa = pcb->sa, .sv = pcb->sv, .rto = pcb->rto, .rx_eof = s->rx_eof, .cork = s->cork,
		.rcv_wnd_cap = pcb->rcv_wnd_cap, .user_timeout = pcb->user_timeout,
		.snd_buf_cap = s->opts.snd_buf_cap,
	};
	int fd, rc;

	/* Either family's ends in the 16-octet form (hoffstate.h); a dual-stack socket's
	 * IPv4 connection has IPv4 ends (its pcb is IPv4). */
	if (IP_IS_V6(&pcb->remote_ip)) {
		h.family = AF_INET6;
		memcpy(h.local_ip, ip_2_ip6(&pcb->local_ip)->addr, 16);
		memcpy(h.remote_ip, ip_2_ip6(&pcb->remote_ip)->addr, 16);
	} else {
		h.family = AF_INET;
		ctl_addr_set4(h.local_ip, ip_2_ip4(&pcb->local_ip)->addr);
		ctl_addr_set4(h.remote_ip, ip_2_ip4(&pcb->remote_ip)->addr);
	}
	if (pcb->refused_data)
		return -EAGAIN;  /* lwIP still owes the reader data: not a state to move */
	/* Among the library's descriptors (privfd.c) while it is ours: a program closing
	 * descriptors meanwhile must not take it. */
	fd = memfd_create("uls-handoff", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	fd = stk__fd_hide(fd);
	if (lseek(fd, (off_t)sizeof(h), SEEK_SET) < 0)
		goto io;
	if (s->rxq.bytes) {
		/* Peeked, not taken: an export that exec gives back leaves the socket as it was. */
		uint8_t *rx = malloc(s->rxq.bytes);
		if (!rx)
			goto io;
		size_t n = stk__rxq_read(&s->rxq, rx, s->rxq.bytes, true);
		int w = memfd_put(fd, rx, n);
		free(rx);
		if (w < 0)
			goto io;
		h.rx_len = (uint32_t)n;
	}
	if ((rc = put_tx(fd, pcb, &h.tx_len)) < 0) {
		stk__fd_close(fd);
		return rc;
	}
	if (pwrite(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		goto io;
	if (nif_sys.fcntl(fd, F_ADD_SEALS,
			  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
		goto io;
	return fd;
io:
	stk__fd_close(fd);
	return -EIO;
}

/* What the taker must show ulsd: 64 random bits, never zero. */
static uint64_t new_nonce(void)
{
	return ((uint64_t)stk__random32() << 32 | stk__random32()) | 1;
}

static void unpark(size_t i)
{
	struct stk_sock *s = parked[i];

	parked[i] = parked[--nparked];
	s->parked = false;
}

/* Nobody took it: the close the application asked for, now. */
static void finish(size_t i)
{
	struct stk_sock *s = parked[i];

	unpark(i);
	stk__stream_close(s);
	stk__sock_release(s);
}

/* A holder claimed the connection. Returns false if the socket stays parked. */
static bool give(size_t i)
{
	struct stk_sock *s = parked[i];
	uint64_t nonce = new_nonce();
	int fd = -ENOTCONN;

	if (s->tcp && (s->tcp->state == ESTABLISHED || s->tcp->state == CLOSE_WAIT))
		fd = pack(s, nonce);
	if (fd == -EAGAIN)
		return false;  /* lwIP still holds refused data for the reader: next tick */
	if (fd >= 0) {
		/* The frames this stack queued must leave while the tuple is still its own. */
		stk__node.dev->ops->tx_flush(stk__node.dev);
		int rc = stk__ep_handoff(s->tcp, nonce);
		if (rc < 0) {
			stk__fd_close(fd);
			fd = rc;
		}
	}
	if (fd < 0) {
		/* The claimer learns it gets nothing; the connection closes here. */
		stk__log(1, "a connection could not move to the process that claimed it: %s "
			 "(local port %u, remote port %u)", strerror(-fd),
			 s->tcp ? s->tcp->local_port : 0, s->tcp ? s->tcp->remote_port : 0);
		stk__count(STK_CNT_HANDOFF_FAIL);
		stk__mirror_give(s, -1);
		finish(i);
		return true;
	}
	int sent = stk__mirror_give(s, fd);
	stk__fd_close(fd);
	if (sent < 0) {
		/* The claimer stopped waiting (a signal interrupted it; it claims again on its
		 * next call): the connection comes back here and stays parked. */
		if (stk__ep_claim(s->tcp->local_port, &s->tcp->remote_ip, s->tcp->remote_port,
				  nonce) == 0)
			return false;
		stk__log(1, "a connection could not come back from its handoff");
		stk__stream_forget(s);  /* ulsd keeps it in transit, then resets it */
		unpark(i);
		stk__sock_release(s);
		return true;
	}
	stk__stream_forget(s);
	stk__count(STK_CNT_HANDOFF_OUT);
	unpark(i);
	stk__sock_release(s);
	return true;
}

static void watch(void *arg)
{
	(void)arg;
	watching = false;
	for (size_t i = 0; i < nparked;) {
		struct stk_sock *s = parked[i];
		switch (stk__mirror_watch(s)) {
		case STK_MIRROR_CLAIMED:
			if (give(i))
				continue;
			break;
		case STK_MIRROR_ALONE:
			finish(i);
			continue;
		case STK_MIRROR_SHARED:
			if (!s->tcp) {
				/* Reset or timed out while parked: nothing left to give. */
				finish(i);
				continue;
			}
			break;
		}
		i++;
	}
	if (nparked) {
		arm(watch_ms);
		watch_ms = watch_ms * 2 > WATCH_MAX_MS ? WATCH_MAX_MS : watch_ms * 2;
	}
}

/* ---- The child: claiming ------------------------------------------------------------ */

/* Send 'C' into A with fd attached, within timeout_ms (< 0: no limit). */
static int send_claim(int a, int fd, int timeout_ms)
{
	char c = 'C', cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &c, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };

	memset(cbuf, 0, sizeof(cbuf));
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	/* A may be full: the parent fills it to show it unwritable. */
	for (;;) {
		if (nif_sys.sendmsg(a, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) == 1)
			return 0;
		if (errno != EAGAIN)
			return errno == EINTR ? -EINTR : -ENOTCONN;
		struct pollfd p = { .fd = a, .events = POLLOUT };
		int n = nif_sys.poll(&p, 1, timeout_ms);
		if (n < 0)
			return errno == EINTR ? -EINTR : -ENOTCONN;
		if (n == 0)
			return -ETIMEDOUT;
	}
}

/* The claim carries a reply socket of the claimer's own, so that the answer never passes
 * through A, whose readiness bytes are the parent's as long as it uses the socket.
 * Deviation: a signal always ends the wait with EINTR, SA_RESTART or not (the caller's
 * next call claims again). */
int uls_claim_wait(int fd, int timeout_ms)
{
	char c, cbuf[CMSG_SPACE(sizeof(int))];
	int sv[2], rc;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	rc = send_claim(fd, sv[1], timeout_ms);
	nif_sys.close(sv[1]);
	if (rc == 0)
		rc = -ENOTCONN;
	else
		goto out;
	for (int flags = 0, stop = 0;;) {
		struct iovec iov = { &c, 1 };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
		struct pollfd p = { .fd = sv[0], .events = POLLIN };
		ssize_t n = -1;
		int ready = flags || timeout_ms < 0 ? 1 : nif_sys.poll(&p, 1, timeout_ms);
		if (ready == 0)
			errno = ETIMEDOUT;
		else if (ready > 0)
			n = nif_sys.recvmsg(sv[0], &mh, MSG_CMSG_CLOEXEC | flags);
		if (n < 0 && !flags && (errno == EINTR || errno == ETIMEDOUT)) {
			/* Stop the parent's answer first (its send fails from now on, and it
			 * keeps the connection), then take one that came before. */
			stop = -errno;
			nif_sys.shutdown(sv[0], SHUT_RD);
			flags = MSG_DONTWAIT;
			continue;
		}
		if (n <= 0 && flags) {
			rc = stop;  /* nothing came: the claim can be made again */
			break;
		}
		if (n <= 0) {
			rc = -ENOTCONN;  /* the parent let go without giving it */
			break;
		}
		int got = -1;
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
		    cm->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(&got, CMSG_DATA(cm), sizeof(int));
		if (c == 'H' && got >= 0)
			rc = got;
		else if (got >= 0)
			nif_sys.close(got);
		if (c == 'H' || c == 'N')
			break;
	}
out:
	nif_sys.close(sv[0]);
	return rc;
}

/* Read and check the state into *h; returns the mapping (caller unmaps *size bytes), whose
 * data follows the header, or NULL. */
static const uint8_t *map_state(int fd, size_t *size, struct stk_hoff_state *h)
{
	struct stat st;

	if (fstat(fd, &st) < 0 || st.st_size < (off_t)sizeof(*h) || st.st_size > (off_t)STK_HOFF_MAX)
		return NULL;
	/* Only a sealed memfd: its contents cannot change under us. */
	int seals = nif_sys.fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_WRITE) || !(seals & F_SEAL_SHRINK))
		return NULL;
	void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED)
		return NULL;
	int rc = stk__hoff_parse(p, (size_t)st.st_size, h);
	if (rc < 0) {
		stk__log(1, "a connection's handed-over state was refused: %s",
			 stk__hoff_reason_name(rc));
		munmap(p, (size_t)st.st_size);
		return NULL;
	}
	*size = (size_t)st.st_size;
	return p;
}

/* An address of the state in lwIP's form (the state's check made it one of family). */
static void to_ip(const struct stk_hoff_state *h, const uint8_t a[16], ip_addr_t *ip)
{
	if (h->family == AF_INET6) {
		ip_addr_set_zero_ip6(ip);
		memcpy(ip_2_ip6(ip)->addr, a, 16);
		ip6_addr_assign_zone(ip_2_ip6(ip), IP6_UNICAST, &stk__node.netif);
	} else {
		ip_addr_set_ip4_u32(ip, ctl_addr_v4(a));
	}
}

/* Whether a is one of this node's addresses of the state's family: the IPv4 one, or a
 * valid IPv6 one of the netif (the global or the link-local). */
static bool is_local(const struct stk_hoff_state *h, const ip_addr_t *a)
{
	const struct netif *n = &stk__node.netif;

	if (h->family == AF_INET)
		return ip4_addr_cmp(ip_2_ip4(a), netif_ip4_addr(n));
	for (int i = 0; i < LWIP_IPV6_NUM_ADDRESSES; i++)
		if (ip6_addr_isvalid(netif_ip6_addr_state(n, i)) &&
		    ip6_addr_cmp_zoneless(ip_2_ip6(a), netif_ip6_addr(n, i)))
			return true;
	return false;
}

static void restore(struct tcp_pcb *pcb, const struct stk_hoff_state *h)
{
	to_ip(h, h->local_ip, &pcb->local_ip);
	to_ip(h, h->remote_ip, &pcb->remote_ip);
	pcb->local_port = h->local_port;
	pcb->remote_port = h->remote_port;
	pcb->state = (enum tcp_state)h->state;
	pcb->prio = h->prio;
	pcb->so_options = h->so_options;
	pcb->tos = h->tos;
	pcb->ttl = h->ttl;
	pcb->flags = (tcpflags_t)(h->flags & KEEP_FLAGS);
	pcb->snd_scale = h->snd_scale;
	pcb->rcv_scale = h->rcv_scale;
	pcb->rcv_nxt = h->rcv_nxt;
	pcb->rcv_wnd = h->rcv_wnd;
	pcb->rcv_ann_wnd = h->rcv_ann_wnd;
	/* Not through tcp_set_rcv_wnd_cap: the window that was announced stays (0137). */
	pcb->rcv_wnd_cap = h->rcv_wnd_cap ? stk__rcv_wnd_cap(h->rcv_wnd_cap) : 0;
	pcb->rcv_ann_right_edge = h->rcv_ann_right_edge;
	pcb->mss = h->mss;
	pcb->sa = h->sa;
	pcb->sv = h->sv;
	pcb->rto = h->rto;
	pcb->cwnd = h->cwnd;
	pcb->ssthresh = h->ssthresh;
	if (h->in_recovery && pcb->cwnd > pcb->ssthresh)
		pcb->cwnd = pcb->ssthresh;  /* fast recovery ends here: RFC 5681 §3.2 step 6 */
	/* Sending starts again at SND.UNA (queue_tx queues every byte from there), and the
	 * pcb is put in the state lwIP itself is in after a retransmission timeout
	 * (tcp_rexmit_rto_prepare): SND.NXT stays where the giver had got, so that the
	 * peer's ACKs up to it are accepted, and segments it acknowledges are freed from the
	 * unsent queue. No RTT sample is taken on what is sent again (RFC 6298 §3, Karn). */
	pcb->lastack = h->lastack;
	pcb->snd_lbb = h->lastack;
	pcb->rttest = 0;
	pcb->snd_wl1 = h->snd_wl1;
	pcb->snd_wl2 = h->snd_wl2;
	pcb->snd_wnd = h->snd_wnd;
	pcb->snd_wnd_max = h->snd_wnd_max;
	pcb->ts_recent = h->ts_recent;
	pcb->ts_lastacksent = h->ts_lastacksent;
	pcb->keep_idle = h->keep_idle;
	pcb->keep_intvl = h->keep_intvl;
	pcb->keep_cnt = h->keep_cnt;
	pcb->user_timeout = LWIP_MIN(h->user_timeout, (u32_t)INT_MAX);
	pcb->tmr = tcp_ticks;
	pcb->netif_idx = NETIF_NO_INDEX;
}

/* Queue bytes for the reader as pbufs of at most 64 KiB (their lengths are 16 bits). */
static int queue_rx(struct stk_sock *s, const uint8_t *p, size_t len)
{
	while (len) {
		u16_t n = (u16_t)LWIP_MIN(len, 0xfff0u);
		struct pbuf *b = pbuf_alloc(PBUF_RAW, n, PBUF_RAM);
		if (!b)
			return -ENOMEM;
		pbuf_take(b, p, n);
		if (stk__rxq_push(&s->rxq, b, NULL, 0) < 0) {
			pbuf_free(b);
			return -ENOMEM;
		}
		p += n;
		len -= n;
	}
	return 0;
}

static int queue_tx(struct tcp_pcb *pcb, const uint8_t *p, size_t len)
{
	while (len) {
		u16_t n = (u16_t)LWIP_MIN(len, 0xffffu);
		if (tcp_write(pcb, p, n, TCP_WRITE_FLAG_COPY | (len > n ? TCP_WRITE_FLAG_MORE : 0)) !=
		    ERR_OK)
			return -ENOMEM;
		p += n;
		len -= n;
	}
	return 0;
}

static int claim(struct stk_sock *s, const struct stk_hoff_state *h, const uint8_t *data)
{
	ip_addr_t lip, rip;
	int rc;

	/* The socket is the giver's (after fork) or was made from the state (uls_import):
	 * the same family and V6ONLY, or the state belongs to another socket. */
	if (h->sock_family != s->family || h->v6only != (s->family == AF_INET6 && s->v6only))
		return -EAFNOSUPPORT;
	to_ip(h, h->local_ip, &lip);
	to_ip(h, h->remote_ip, &rip);
	if (!is_local(h, &lip))
		return -EADDRNOTAVAIL;  /* a state from another node, or from before a renumbering */
	rc = stk__ep_claim(h->local_port, &rip, h->remote_port, h->nonce);
	if (rc < 0)
		return rc;
	/* From here the tuple's frames come to this process. */
	struct tcp_pcb *pcb = tcp_new_ip_type(h->family == AF_INET6 ? IPADDR_TYPE_V6 : IPADDR_TYPE_V4);
	if (!pcb) {
		stk__ep_release(h->local_port, &rip, h->remote_port);
		return -ENOMEM;
	}
	restore(pcb, h);
	TCP_REG_ACTIVE(pcb);
	stk__stream_adopted(s, pcb);  /* callbacks, and RELEASE at its end */
	s->rx_eof = h->rx_eof;
	s->cork = h->cork;
	s->opts.snd_buf_cap = h->snd_buf_cap ? stk__snd_buf_cap(h->snd_buf_cap) : 0;
	if (queue_rx(s, data, h->rx_len) < 0 || queue_tx(pcb, data + h->rx_len, h->tx_len) < 0) {
		/* Some bytes cannot be kept: the connection cannot go on intact, and the peer
		 * must not take it for a clean end (RST, not FIN). */
		stk__stream_abort(s);
		return -ENOMEM;
	}
	pcb->snd_nxt = h->snd_nxt;
	if (h->snd_nxt != h->lastack) {
		tcp_set_flags(pcb, TF_RTO);
		pcb->rto_end = h->snd_nxt;
	}
	tcp_ack_now(pcb);
	tcp_output(pcb);
	stk__count(STK_CNT_HANDOFF_IN);
	return 0;
}

/* Take the connection whose state state_fd holds into s (core lock held); closes
 * state_fd. */
static int claim_state(struct stk_sock *s, int state_fd)
{
	size_t size = 0;
	struct stk_hoff_state h;
	const uint8_t *p = map_state(state_fd, &size, &h);
	int rc = !p ? -EPROTO : !stk__node.up || stk__node.lost ? -ENETDOWN :
		claim(s, &h, p + sizeof(h));

	nif_sys.close(state_fd);
	if (p)
		munmap((void *)p, size);
	return rc;
}

int uls_claim(int sd, int state_fd)
{
	int rc;

	stk__lock();
	struct stk_sock *s = stk__sock_enter(sd);
	if (!s) {
		rc = -EBADF;
	} else if (!s->inherited || !s->inh_connected || s->type != SOCK_STREAM) {
		rc = -EINVAL;
	} else if (state_fd == -EINTR || state_fd == -ETIMEDOUT) {
		/* The wait ended early: the call says so, the next one waits again. */
		s->err = state_fd;
		rc = state_fd;
	} else {
		rc = state_fd < 0 ? state_fd : claim_state(s, state_fd);
		state_fd = -1;
		s->inherited = false;
		if (rc < 0) {
			/* Deviation: the connection stayed with the other process. */
			stk__log(1, "an inherited connection could not be taken over: %s",
				 strerror(-rc));
			s->state = STK_S_DEAD;
			s->err = -ENOTCONN;
			stk__count(STK_CNT_HANDOFF_FAIL);
		}
	}
	if (s)
		stk__sock_leave(s);
	stk__unlock();
	if (state_fd >= 0)
		nif_sys.close(state_fd);
	return rc;
}

/* ---- exec: the same state, for the program that replaces this one ------------------ */

int uls_export(int sd, uint64_t *nonce)
{
	int rc;

	stk__lock();
	struct stk_sock *s = stk__sock_enter(sd);
	if (!s)
		rc = -EBADF;
	else if (s->type != SOCK_STREAM || s->state != STK_S_CONNECTED || !s->tcp ||
		 s->inherited || s->wr_shut || s->rd_shut ||
		 (s->tcp->state != ESTABLISHED && s->tcp->state != CLOSE_WAIT))
		rc = -ENOTCONN;
	else if (!stk__leased())
		rc = -EOPNOTSUPP;
	else
		rc = 0;
	if (rc == 0) {
		*nonce = new_nonce();
		rc = pack(s, *nonce);
	}
	if (rc >= 0) {
		stk__node.dev->ops->tx_flush(stk__node.dev);
		int c = stk__ep_handoff(s->tcp, *nonce);
		if (c < 0) {
			stk__fd_close(rc);
			rc = c;
		}
	}
	if (rc >= 0) {
		stk__fd_unmark(rc);  /* the caller's now, to pass across exec and close */
		stk__count(STK_CNT_HANDOFF_OUT);
	}
	if (s)
		stk__sock_leave(s);
	stk__unlock();
	return rc;
}

int uls_export_undo(int sd, uint64_t nonce)
{
	int rc;

	stk__lock();
	struct stk_sock *s = stk__sock_enter(sd);
	if (!s || !s->tcp) {
		rc = -EBADF;
	} else {
		rc = stk__ep_claim(s->tcp->local_port, &s->tcp->remote_ip, s->tcp->remote_port,
				   nonce);
	}
	if (s)
		stk__sock_leave(s);
	stk__unlock();
	return rc;
}

/* The socket's family and V6ONLY as the state says, read before anything is taken (a
 * state refused here is refused again, and logged, by claim_state). */
static void import_family(int state_fd, int *family, bool *v6only)
{
	struct stk_hoff_state h;

	*family = AF_INET;
	*v6only = false;
	if (pread(state_fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) && h.magic == STK_HOFF_MAGIC &&
	    h.version == STK_HOFF_VERSION && h.sock_family == AF_INET6) {
		*family = AF_INET6;
		*v6only = h.v6only != 0;
	}
}

int uls_import(int state_fd)
{
	int family;
	bool v6only;

	import_family(state_fd, &family, &v6only);
	int sd = uls_socket_af(family, SOCK_STREAM);

	if (sd < 0) {
		nif_sys.close(state_fd);
		return sd;
	}
	stk__lock();
	struct stk_sock *s = stk__sock_enter(sd);
	int rc = -EBADF;
	if (s) {
		if (s->tcp)
			tcp_close(s->tcp);  /* a fresh pcb, in no list yet */
		s->tcp = NULL;
		s->v6only = v6only;
		rc = claim_state(s, state_fd);
		stk__sock_leave(s);
	}
	stk__unlock();
	if (rc < 0) {
		stk__log(1, "a connection passed across exec could not be taken over: %s",
			 strerror(-rc));
		uls_close(sd);
		return rc;
	}
	return sd;
}
