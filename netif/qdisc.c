/* The TAP's root queueing discipline, over rtnetlink (netif/tap.h, nif_tap_noqueue).
 *
 * A multi-queue TAP gets the kernel's default when it comes up: mq, with a pfifo_fast
 * under each of its 256 transmit queues. tun never stops a queue (a full queue's ring drops
 * the frame itself, tun_net_xmit), so those qdiscs hold nothing; but each time a queue
 * detaches (ulsd renews a process's queue at its lease's end, server/bpf.c recycle_queue)
 * netif_set_real_num_tx_queues resets the qdiscs of every queue above the new count, and
 * pfifo_fast's reset was ulsd's largest item per process (perf: 43 of ulsd's 165 samples
 * in the TUN ioctls, docs/benchmarks.md "second round"). noqueue has none to reset, and a
 * frame to a process's queue no longer passes a qdisc on its way.
 */
#include "netif/tap.h"
#include "netif/sys.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct qd_req {
	struct nlmsghdr nh;
	struct tcmsg tc;
	char attrs[64];
};

static int nl_open(void)
{
	/* Through nif_sys (sys.h): this file is part of libnif, which libuls links, and the
	 * shim interposes these names. No bind: the kernel gives the socket its port id at
	 * its first send (netlink's autobind), which is all an explicit bind to 0 did. */
	int fd = nif_sys.socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	struct timeval tv = { 2, 0 };  /* the kernel answers at once; never hang ulsd's start */

	if (fd < 0)
		return -errno;
	if (nif_sys.setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
		int rc = -errno;
		nif_sys.close(fd);
		return rc;
	}
	return fd;
}

/* The root qdisc of ifindex: its kind (NUL-terminated) and handle. 0, -ENOENT (none
 * listed), or -errno. */
static int root_of(int fd, unsigned ifindex, char kind[16], uint32_t *handle)
{
	struct qd_req q = {
		.nh = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct tcmsg)), .nlmsg_type = RTM_GETQDISC,
			.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = 1 },
		.tc = { .tcm_family = AF_UNSPEC, .tcm_ifindex = (int)ifindex },
	};
	static char buf[65536];  /* a dump's messages fit in 32 KiB; init only, one caller */
	bool found = false;

	if (nif_sys.send(fd, &q, q.nh.nlmsg_len, 0) < 0)
		return -errno;
	for (int rounds = 0; rounds < 4096; rounds++) {  /* bounded: a dump of every qdisc */
		ssize_t n = nif_sys.recv(fd, buf, sizeof(buf), 0);
		if (n < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_DONE)
				return found ? 0 : -ENOENT;
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);
				return h->nlmsg_len < NLMSG_LENGTH(sizeof(*e)) ? -EPROTO :
				       e->error ? e->error : -EPROTO;
			}
			if (h->nlmsg_type != RTM_NEWQDISC ||
			    h->nlmsg_len < NLMSG_LENGTH(sizeof(struct tcmsg)))
				continue;
			const struct tcmsg *t = NLMSG_DATA(h);
			if ((unsigned)t->tcm_ifindex != ifindex || t->tcm_parent != TC_H_ROOT)
				continue;
			int alen = (int)h->nlmsg_len - (int)NLMSG_LENGTH(sizeof(*t));
			for (struct rtattr *a = (struct rtattr *)((char *)t + NLMSG_ALIGN(sizeof(*t)));
			     RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
				size_t len = RTA_PAYLOAD(a);
				if (a->rta_type != TCA_KIND || len == 0 || len > 16)
					continue;
				memcpy(kind, RTA_DATA(a), len);
				kind[len - 1] = '\0';
				*handle = t->tcm_handle;
				found = true;
			}
		}
	}
	return -EPROTO;
}

int nif_qdisc_set_root(unsigned ifindex, const char *kind, uint32_t handle)
{
	struct qd_req q = {
		.nh = { .nlmsg_type = RTM_NEWQDISC, .nlmsg_seq = 2,
			.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE },
		.tc = { .tcm_family = AF_UNSPEC, .tcm_ifindex = (int)ifindex,
			.tcm_parent = TC_H_ROOT, .tcm_handle = handle },
	};
	size_t klen = strlen(kind) + 1;
	struct rtattr *a = (struct rtattr *)q.attrs;
	char buf[512];
	int fd, rc;

	if (klen > 16)
		return -EINVAL;
	a->rta_type = TCA_KIND;
	a->rta_len = (unsigned short)RTA_LENGTH(klen);
	memcpy(RTA_DATA(a), kind, klen);
	q.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct tcmsg)) + RTA_ALIGN(a->rta_len);
	fd = nl_open();
	if (fd < 0)
		return fd;
	rc = nif_sys.send(fd, &q, q.nh.nlmsg_len, 0) < 0 ? -errno : -EPROTO;
	if (rc == -EPROTO) {
		ssize_t n = nif_sys.recv(fd, buf, sizeof(buf), 0);
		const struct nlmsghdr *h = (const struct nlmsghdr *)buf;
		if (n < 0)
			rc = errno == EAGAIN ? -ETIMEDOUT : -errno;
		else if (NLMSG_OK(h, (size_t)n) && h->nlmsg_type == NLMSG_ERROR &&
			 h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct nlmsgerr)))
			rc = ((const struct nlmsgerr *)NLMSG_DATA(h))->error;  /* 0: done */
	}
	nif_sys.close(fd);
	return rc;
}

int nif_qdisc_root(unsigned ifindex, char kind[16], uint32_t *handle)
{
	int fd = nl_open(), rc;

	if (fd < 0)
		return fd;
	rc = root_of(fd, ifindex, kind, handle);
	nif_sys.close(fd);
	return rc;
}

int nif_tap_noqueue(unsigned ifindex)
{
	char kind[16];
	uint32_t handle;
	int rc = nif_qdisc_root(ifindex, kind, &handle);

	if (rc < 0)
		return rc;
	/* The kernel's default has handle 0; a root an operator added (tc qdisc add/replace)
	 * has one of its own (8001: ...) and stays. */
	if (handle != 0 || (strcmp(kind, "mq") != 0 && strcmp(kind, "pfifo_fast") != 0))
		return 0;
	rc = nif_qdisc_set_root(ifindex, "noqueue", 0);
	return rc < 0 ? rc : 1;
}
