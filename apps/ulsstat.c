/* ulsstat: what a node's ulsd is doing: its counters (control messages, demuxed frames,
 * drops by reason), the direct data path's queues, and its endpoint table (with each
 * owner's data path), like ss(8).
 *
 *   ulsstat --ctl PATH [--json]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "netif/ctlproto.h"

struct rec {
	struct uls_ctl_msg m;
};

static const char *kind_name(unsigned k)
{
	switch (k) {
	case ULS_CTL_K_BOUND:     return "bound";
	case ULS_CTL_K_LISTEN:    return "listen";
	case ULS_CTL_K_CONNECTED: return "connected";
	case ULS_CTL_K_TIMEWAIT:  return "custody";
	default:                  return "unknown";
	}
}

static const char *proto_name(unsigned p)
{
	return p == IPPROTO_TCP ? "tcp" : p == IPPROTO_UDP ? "udp" : "?";
}

static const char *datapath_name(unsigned d)
{
	return d == ULS_CTL_DP_DIRECT ? "direct" : d == ULS_CTL_DP_RELAY ? "relay" : "none";
}

/* The direct data path's per-queue counters, "queue.N.NAME" and
 * "queue.N.tx_dropped.REASON" (ulsd sends each queue's together), as one object per queue:
 * {"queue": N, "pid": P, "steered": ..., "tx_dropped": {"port": ..., ...}}. */
static void print_queues(const struct rec *recs, size_t n)
{
	long cur = -1;
	bool in_drops = false;

	for (size_t i = 0; i < n; i++) {
		const struct uls_ctl_msg *m = &recs[i].m;
		const char *nm = m->u.counter.name, *field;
		char *end;
		if (m->type != ULS_CTL_STAT_COUNTER || strncmp(nm, "queue.", 6) != 0)
			continue;
		long q = strtol(nm + 6, &end, 10);
		if (end == nm + 6 || *end != '.')
			continue;
		field = end + 1;
		if (q != cur) {
			if (cur >= 0)
				printf("%s}, ", in_drops ? "}" : "");
			printf("{\"queue\": %ld", q);
			cur = q;
			in_drops = false;
		}
		bool drop = !strncmp(field, "tx_dropped.", 11);
		if (drop && !in_drops) {
			printf(", \"tx_dropped\": {");
			in_drops = true;
		} else if (drop) {
			printf(", ");
		} else if (in_drops) {
			printf("}, ");
			in_drops = false;
		} else {
			printf(", ");
		}
		printf("\"%s\": %llu", drop ? field + 11 : field, (unsigned long long)m->u.counter.value);
	}
	if (cur >= 0)
		printf("%s}", in_drops ? "}" : "");
}

static void usage(FILE *f)
{
	fprintf(f, "usage: ulsstat [--ctl PATH] [--json]\n"
		   "PATH defaults to $ULS_CTL.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "ctl", required_argument, NULL, 'c' }, { "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	const char *ctl = getenv("ULS_CTL");
	bool json = false;
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'c')
			ctl = optarg;
		else if (c == 'j')
			json = true;
		else if (c == 'h') {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	if (optind != argc || !ctl || !*ctl || strlen(ctl) >= sizeof(sun.sun_path)) {
		usage(stderr);
		return 2;
	}
	memcpy(sun.sun_path, ctl, strlen(ctl));
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	struct timeval tv = { 5, 0 };
	if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		fprintf(stderr, "ulsstat: %s: %s\n", ctl, strerror(errno));
		return 1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct uls_ctl_msg m;
	uls_ctl_init(&m, ULS_CTL_STATS, 1);
	if (send(fd, &m, sizeof(m), 0) != (ssize_t)sizeof(m)) {
		fprintf(stderr, "ulsstat: send: %s\n", strerror(errno));
		return 1;
	}
	struct rec *recs = NULL;
	size_t n = 0, cap = 0;
	for (;;) {
		uint8_t buf[ULS_CTL_MSG_SIZE + 1];
		ssize_t k = recv(fd, buf, sizeof(buf), 0);
		if (k <= 0) {
			fprintf(stderr, "ulsstat: %s\n", k == 0 ? "ulsd closed the connection" :
				errno == EAGAIN ? "no answer from ulsd" : strerror(errno));
			return 1;
		}
		if (uls_ctl_check(buf, k, &m) != 0) {
			fprintf(stderr, "ulsstat: malformed record from ulsd\n");
			return 1;
		}
		if (m.type == ULS_CTL_END)
			break;
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			recs = realloc(recs, cap * sizeof(*recs));
			if (!recs)
				return 1;
		}
		recs[n++].m = m;
	}
	close(fd);
	if (json) {
		printf("{\"counters\": {");
		int first = 1;
		for (size_t i = 0; i < n; i++)
			if (recs[i].m.type == ULS_CTL_STAT_COUNTER &&
			    strncmp(recs[i].m.u.counter.name, "queue.", 6) != 0) {
				printf("%s\"%s\": %llu", first ? "" : ", ", recs[i].m.u.counter.name,
				       (unsigned long long)recs[i].m.u.counter.value);
				first = 0;
			}
		/* "drops": the counters that count a refusal, by reason */
		printf("}, \"drops\": {");
		first = 1;
		for (size_t i = 0; i < n; i++) {
			const char *nm = recs[i].m.u.counter.name;
			if (recs[i].m.type == ULS_CTL_STAT_COUNTER &&
			    (!strncmp(nm, "drop_", 5) || !strncmp(nm, "deny_", 5) ||
			     !strncmp(nm, "ctl_bad_", 8) || !strncmp(nm, "direct_tx_dropped.", 18))) {
				printf("%s\"%s\": %llu", first ? "" : ", ", nm,
				       (unsigned long long)recs[i].m.u.counter.value);
				first = 0;
			}
		}
		printf("}, \"queues\": [");
		print_queues(recs, n);
		printf("], \"endpoints\": [");
		first = 1;
		for (size_t i = 0; i < n; i++) {
			const struct uls_ctl_msg *e = &recs[i].m;
			if (e->type != ULS_CTL_STAT_ENDPOINT)
				continue;
			char rip[INET_ADDRSTRLEN] = "*";
			if (e->rip)
				inet_ntop(AF_INET, &e->rip, rip, sizeof(rip));
			printf("%s{\"proto\": \"%s\", \"local\": \"*:%u\", \"remote\": \"%s:%u\", "
			       "\"pid\": %u, \"state\": \"%s\", \"datapath\": \"%s\"}", first ? "" : ", ",
			       proto_name(e->proto), e->lport, rip, e->rport, e->u.endpoint.pid,
			       kind_name(e->u.endpoint.kind), datapath_name(e->u.endpoint.datapath));
			first = 0;
		}
		printf("]}\n");
	} else {
		for (size_t i = 0; i < n; i++)
			if (recs[i].m.type == ULS_CTL_STAT_COUNTER)
				printf("%-28s %llu\n", recs[i].m.u.counter.name,
				       (unsigned long long)recs[i].m.u.counter.value);
		printf("\n%-5s %-22s %-22s %-8s %-9s %s\n", "Proto", "Local", "Remote", "PID", "State",
		       "Datapath");
		for (size_t i = 0; i < n; i++) {
			const struct uls_ctl_msg *e = &recs[i].m;
			if (e->type != ULS_CTL_STAT_ENDPOINT)
				continue;
			char rip[INET_ADDRSTRLEN] = "*", local[32], remote[40];
			if (e->rip)
				inet_ntop(AF_INET, &e->rip, rip, sizeof(rip));
			snprintf(local, sizeof(local), "*:%u", e->lport);
			snprintf(remote, sizeof(remote), e->rport ? "%s:%u" : "%s:*", rip, e->rport);
			printf("%-5s %-22s %-22s %-8u %-9s %s\n", proto_name(e->proto), local, remote,
			       e->u.endpoint.pid, kind_name(e->u.endpoint.kind),
			       datapath_name(e->u.endpoint.datapath));
		}
	}
	free(recs);
	return 0;
}
