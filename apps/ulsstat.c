/* ulsstat: what a node is doing, like ss(8) -tinp: ulsd's counters (control messages,
 * demuxed frames, drops by reason), the direct data path's queues, the endpoint table,
 * and each process's TCP connections (state, queues, RTT, congestion window,
 * retransmissions, window scale, data path) from the table each process's stack publishes
 * (netif/conntab.h). Asking never stops a data path: ulsd copies the tables, it does not
 * ask the processes.
 *
 *   ulsstat [--ctl PATH] [--json | --prometheus] [--watch SECONDS [--count N]] [--output FILE]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "netif/opt/opt.h"
#include "netif/conntab.h"
#include "netif/ctl/ctl.h"
#include "apps/ulsstat.h"

#define MAX_RECORDS (1u << 22)  /* a bound on one answer: far beyond any node's */

/* --- asking ulsd ------------------------------------------------------------------- */

/* One STATS answer into s. Returns 0, or -1 with the reason in err. */
static int query(const char *ctl, struct snap *s, char *err, size_t errlen)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct timeval tv = { 5, 0 };
	struct ctl_msg m;
	int rc = -1;

	s->n = 0;
	memcpy(sun.sun_path, ctl, strlen(ctl));
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		snprintf(err, errlen, "%s: %s", ctl, strerror(errno));
		goto out;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ctl_init(&m, CTL_STATS, 1);
	if (send(fd, &m, sizeof(m), MSG_NOSIGNAL) != (ssize_t)sizeof(m)) {
		snprintf(err, errlen, "send: %s", strerror(errno));
		goto out;
	}
	for (;;) {
		uint8_t buf[CTL_MSG_SIZE + 1];
		ssize_t k = recv(fd, buf, sizeof(buf), 0);
		if (k <= 0) {
			snprintf(err, errlen, "%s", k == 0 ? "ulsd closed the connection" :
				 errno == EAGAIN ? "no answer from ulsd" : strerror(errno));
			goto out;
		}
		int bad = ctl_check(buf, k, &m);
		if (bad != 0) {
			snprintf(err, errlen, "malformed record from ulsd (%s, record %zu)",
				 ctl_error_name(bad), s->n + 1);
			goto out;
		}
		if (m.type == CTL_END) {
			if (m.status < 0) {
				snprintf(err, errlen, "ulsd refused the request: %s", strerror(-m.status));
				goto out;
			}
			break;
		}
		if (m.type != CTL_STAT_COUNTER && m.type != CTL_STAT_ENDPOINT &&
		    m.type != CTL_STAT_PROC && m.type != CTL_STAT_CONN) {
			snprintf(err, errlen, "unexpected record type %u from ulsd", m.type);
			goto out;
		}
		if (s->n == s->cap) {
			size_t cap = s->cap ? s->cap * 2 : 256;
			struct ctl_msg *p = cap <= MAX_RECORDS ? realloc(s->m, cap * sizeof(*p)) : NULL;
			if (!p) {
				snprintf(err, errlen, "answer too large (%zu records)", s->n);
				goto out;
			}
			s->m = p;
			s->cap = cap;
		}
		s->m[s->n++] = m;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

/* --- shared helpers ---------------------------------------------------------------- */

static const char *kind_name(unsigned k)
{
	switch (k) {
	case CTL_K_BOUND:     return "bound";
	case CTL_K_LISTEN:    return "listen";
	case CTL_K_CONNECTED: return "connected";
	case CTL_K_TIMEWAIT:  return "custody";
	default:                  return "unknown";
	}
}

/* A custody endpoint's state, by RFC 9293's names ("dead": its process died holding it). */
static const char *custody_name(unsigned c)
{
	switch (c) {
	case CTL_CUSTODY_DEAD:       return "dead";
	case CTL_CUSTODY_FIN_WAIT_2: return "FIN-WAIT-2";
	case CTL_CUSTODY_TIME_WAIT:  return "TIME-WAIT";
	default:                     return "unknown";
	}
}

static const char *proto_name(unsigned p)
{
	return p == IPPROTO_TCP ? "tcp" : p == IPPROTO_UDP ? "udp" : "?";
}

const char *stat__datapath_name(unsigned d)
{
	return d == CTL_DP_DIRECT ? "direct" : d == CTL_DP_RELAY ? "relay" : "none";
}

static const char *table_name(unsigned t)
{
	switch (t) {
	case CTL_TABLE_OK:   return "ok";
	case CTL_TABLE_TORN: return "torn";
	case CTL_TABLE_BAD:  return "bad";
	default:                 return "none";
	}
}

/* The process's name from /proc (empty when it is not visible from here). */
void stat__command_of(uint32_t pid, char *out, size_t len)
{
	char path[64];

	out[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	if (fgets(out, (int)len, f))
		out[strcspn(out, "\n")] = '\0';
	fclose(f);
}

/* A control message's 16-octet address (ctl.h): an IPv4 one (v4-mapped) as a.b.c.d, an
 * IPv6 one in brackets, as ss(8) prints them; "*" for none. */
static void addr_str(char *out, size_t len, const uint8_t ip[16])
{
	static const uint8_t zero[16];
	char a[INET6_ADDRSTRLEN] = "*";

	if (!memcmp(ip, zero, 16) || (ctl_addr_is_v4mapped(ip) && ctl_addr_v4(ip) == 0)) {
		snprintf(out, len, "*");
	} else if (ctl_addr_is_v4mapped(ip)) {
		uint32_t v4 = ctl_addr_v4(ip);
		inet_ntop(AF_INET, &v4, a, sizeof(a));
		snprintf(out, len, "%s", a);
	} else {
		inet_ntop(AF_INET6, ip, a, sizeof(a));
		snprintf(out, len, "[%s]", a);
	}
}

static void addr_port(char *out, size_t len, const uint8_t ip[16], uint16_t port)
{
	char a[INET6_ADDRSTRLEN + 2];

	addr_str(a, sizeof(a), ip);
	snprintf(out, len, "%s:%u", a, port);
}

/* A JSON string: printable ASCII as is, everything else escaped. */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* --- text ------------------------------------------------------------------------- */

static void print_text(FILE *f, const struct snap *s)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->m[i].type == CTL_STAT_COUNTER)
			fprintf(f, "%-28s %llu\n", s->m[i].u.counter.name,
				(unsigned long long)s->m[i].u.counter.value);
	fprintf(f, "\n%-5s %-22s %-22s %-8s %-9s %s\n", "Proto", "Local", "Remote", "PID", "State",
		"Datapath");
	for (size_t i = 0; i < s->n; i++) {
		const struct ctl_msg *e = &s->m[i];
		if (e->type != CTL_STAT_ENDPOINT)
			continue;
		char rip[INET6_ADDRSTRLEN + 2], local[32], remote[60];
		addr_str(rip, sizeof(rip), e->rip);
		snprintf(local, sizeof(local), e->family == AF_INET6 ? "[::]:%u" : "*:%u", e->lport);
		snprintf(remote, sizeof(remote), e->rport ? "%s:%u" : "%s:*", rip, e->rport);
		fprintf(f, "%-5s %-22s %-22s %-8u %-9s %s\n", proto_name(e->proto), local, remote,
			e->u.endpoint.pid, kind_name(e->u.endpoint.kind),
			stat__datapath_name(e->u.endpoint.datapath));
	}
	fprintf(f, "\n%-8s %-16s %-8s %-11s %-8s %s\n", "PID", "Process", "Datapath", "Connections",
		"Table", "Age");
	for (size_t i = 0; i < s->n; i++) {
		const struct ctl_msg *p = &s->m[i];
		if (p->type != CTL_STAT_PROC)
			continue;
		char cmd[64];
		stat__command_of(p->u.proc.pid, cmd, sizeof(cmd));
		char age[24] = "-";
		if (p->u.proc.age_ms != UINT32_MAX)
			snprintf(age, sizeof(age), "%u ms", p->u.proc.age_ms);
		fprintf(f, "%-8u %-16s %-8s %-11u %-8s %s%s\n", p->u.proc.pid, cmd[0] ? cmd : "-",
			stat__datapath_name(p->u.proc.datapath), p->u.proc.connections,
			table_name(p->u.proc.table), age,
			p->u.proc.connections > p->u.proc.listed ? " (not all listed)" : "");
	}
	fprintf(f, "\n%-12s %-9s %-9s %-21s %-21s %s\n", "State", "Recv-Q", "Send-Q", "Local",
		"Remote", "Process");
	for (size_t i = 0; i < s->n; i++) {
		const struct ctl_msg *c = &s->m[i];
		if (c->type != CTL_STAT_CONN)
			continue;
		const struct ctl_conn *k = &c->u.conn;
		char local[60], remote[60], cmd[64];
		addr_port(local, sizeof(local), k->lip, c->lport);
		addr_port(remote, sizeof(remote), c->rip, c->rport);
		stat__command_of(k->pid, cmd, sizeof(cmd));
		fprintf(f, "%-12s %-9u %-9u %-21s %-21s users:((\"%s\",pid=%u)) %s\n",
			uls_tcp_state_name(k->state), k->recv_queue, k->send_queue, local, remote,
			cmd[0] ? cmd : "?", k->pid, stat__datapath_name(k->datapath));
		fprintf(f, "\t rtt:%.3f/%.3f rto:%u mss:%u cwnd:%u ssthresh:%u retrans:%u snd_wnd:%u "
			"rcv_wnd:%u", k->rtt_us / 1000.0, k->rttvar_us / 1000.0, k->rto_us / 1000u,
			k->mss, k->cwnd, k->ssthresh, k->retransmits, k->snd_wnd, k->rcv_wnd);
		if (k->flags & ULS_CONNTAB_F_WSCALE)
			fprintf(f, " wscale:%u,%u", k->snd_wscale, k->rcv_wscale);
		fprintf(f, "%s%s\n", k->flags & ULS_CONNTAB_F_TIMESTAMPS ? " ts" : "",
			k->flags & ULS_CONNTAB_F_SACK ? " sack" : "");
	}
}

/* --- JSON ------------------------------------------------------------------------- */

/* The direct data path's per-queue counters, "queue.N.NAME" and
 * "queue.N.tx_dropped.REASON" (ulsd sends each queue's together), as one object per queue:
 * {"queue": N, "pid": P, "steered": ..., "tx_dropped": {"port": ..., ...}}. */
static void print_queues(FILE *f, const struct snap *s)
{
	long cur = -1;
	bool in_drops = false;

	for (size_t i = 0; i < s->n; i++) {
		const struct ctl_msg *m = &s->m[i];
		const char *nm = m->u.counter.name, *field;
		char *end;
		if (m->type != CTL_STAT_COUNTER || strncmp(nm, "queue.", 6) != 0)
			continue;
		long q = strtol(nm + 6, &end, 10);
		if (end == nm + 6 || *end != '.')
			continue;
		field = end + 1;
		if (q != cur) {
			if (cur >= 0)
				fprintf(f, "%s}, ", in_drops ? "}" : "");
			fprintf(f, "{\"queue\": %ld", q);
			cur = q;
			in_drops = false;
		}
		bool drop = !strncmp(field, "tx_dropped.", 11);
		if (drop && !in_drops) {
			fprintf(f, ", \"tx_dropped\": {");
			in_drops = true;
		} else if (drop) {
			fprintf(f, ", ");
		} else if (in_drops) {
			fprintf(f, "}, ");
			in_drops = false;
		} else {
			fprintf(f, ", ");
		}
		json_str(f, drop ? field + 11 : field);
		fprintf(f, ": %llu", (unsigned long long)m->u.counter.value);
	}
	if (cur >= 0)
		fprintf(f, "%s}", in_drops ? "}" : "");
}

static bool is_counter(const struct ctl_msg *m)
{
	return m->type == CTL_STAT_COUNTER && strncmp(m->u.counter.name, "queue.", 6) != 0;
}

/* "drops": the counters that count a refusal, by reason */
static bool is_drop(const struct ctl_msg *m)
{
	const char *nm = m->u.counter.name;

	return m->type == CTL_STAT_COUNTER &&
	       (!strncmp(nm, "drop_", 5) || !strncmp(nm, "deny_", 5) || !strncmp(nm, "ctl_bad_", 8) ||
		!strncmp(nm, "direct_tx_dropped.", 18) || !strncmp(nm, "conntab_", 8));
}

static bool is_endpoint(const struct ctl_msg *m) { return m->type == CTL_STAT_ENDPOINT; }
static bool is_proc(const struct ctl_msg *m) { return m->type == CTL_STAT_PROC; }
static bool is_conn(const struct ctl_msg *m) { return m->type == CTL_STAT_CONN; }

static void json_counter(FILE *f, const struct ctl_msg *m)
{
	json_str(f, m->u.counter.name);
	fprintf(f, ": %llu", (unsigned long long)m->u.counter.value);
}

static void json_endpoint(FILE *f, const struct ctl_msg *e)
{
	char rip[INET6_ADDRSTRLEN + 2];

	addr_str(rip, sizeof(rip), e->rip);
	fprintf(f, "{\"proto\": \"%s\", \"local\": \"%s:%u\", \"remote\": \"%s:%u\", "
		"\"pid\": %u, \"state\": \"%s\", \"datapath\": \"%s\"",
		proto_name(e->proto), e->family == AF_INET6 ? "[::]" : "*", e->lport, rip, e->rport,
		e->u.endpoint.pid, kind_name(e->u.endpoint.kind),
		stat__datapath_name(e->u.endpoint.datapath));
	/* What the dead process left the connection in, and how many probes its peer got
	 * (server/custody.h). An older ulsd leaves both octets zero (they were padding): then
	 * nothing is claimed. */
	if (e->u.endpoint.kind == CTL_K_TIMEWAIT && e->u.endpoint.custody)
		fprintf(f, ", \"custody\": \"%s\", \"probes\": %u",
			custody_name(e->u.endpoint.custody), e->u.endpoint.probes);
	fputc('}', f);
}

static void json_proc(FILE *f, const struct ctl_msg *p)
{
	char cmd[64];

	stat__command_of(p->u.proc.pid, cmd, sizeof(cmd));
	fprintf(f, "{\"pid\": %u, \"command\": ", p->u.proc.pid);
	json_str(f, cmd);
	fprintf(f, ", \"datapath\": \"%s\", \"connections\": %u, \"listed\": %u, "
		"\"refused\": %u, \"table\": \"%s\", \"table_age_ms\": ",
		stat__datapath_name(p->u.proc.datapath), p->u.proc.connections, p->u.proc.listed,
		p->u.proc.refused, table_name(p->u.proc.table));
	if (p->u.proc.age_ms == UINT32_MAX)
		fprintf(f, "null}");
	else
		fprintf(f, "%u}", p->u.proc.age_ms);
}

static void json_conn(FILE *f, const struct ctl_msg *c)
{
	const struct ctl_conn *k = &c->u.conn;
	char local[60], remote[60];

	addr_port(local, sizeof(local), k->lip, c->lport);
	addr_port(remote, sizeof(remote), c->rip, c->rport);
	fprintf(f, "{\"pid\": %u, \"state\": \"%s\", \"local\": \"%s\", \"remote\": \"%s\", "
		"\"send_queue\": %u, \"recv_queue\": %u, \"rtt_us\": %u, \"rttvar_us\": %u, "
		"\"rto_us\": %u, \"cwnd\": %u, \"ssthresh\": %u, \"retransmits\": %u, "
		"\"mss\": %u, \"snd_wnd\": %u, \"rcv_wnd\": %u, ",
		k->pid, uls_tcp_state_name(k->state), local, remote,
		k->send_queue, k->recv_queue, k->rtt_us, k->rttvar_us, k->rto_us, k->cwnd,
		k->ssthresh, k->retransmits, k->mss, k->snd_wnd, k->rcv_wnd);
	if (k->flags & ULS_CONNTAB_F_WSCALE)
		fprintf(f, "\"snd_wscale\": %u, \"rcv_wscale\": %u, ", k->snd_wscale, k->rcv_wscale);
	else
		fprintf(f, "\"snd_wscale\": null, \"rcv_wscale\": null, ");
	fprintf(f, "\"timestamps\": %s, \"sack\": %s, \"datapath\": \"%s\"}",
		k->flags & ULS_CONNTAB_F_TIMESTAMPS ? "true" : "false",
		k->flags & ULS_CONNTAB_F_SACK ? "true" : "false", stat__datapath_name(k->datapath));
}

/* The records of s that want() selects, each printed by one(), separated by ", ". */
static void json_list(FILE *f, const struct snap *s, bool (*want)(const struct ctl_msg *),
		      void (*one)(FILE *f, const struct ctl_msg *m))
{
	const char *sep = "";

	for (size_t i = 0; i < s->n; i++) {
		if (!want(&s->m[i]))
			continue;
		fputs(sep, f);
		one(f, &s->m[i]);
		sep = ", ";
	}
}

static void print_json(FILE *f, const struct snap *s)
{
	fprintf(f, "{\"counters\": {");
	json_list(f, s, is_counter, json_counter);
	fprintf(f, "}, \"drops\": {");
	json_list(f, s, is_drop, json_counter);
	fprintf(f, "}, \"queues\": [");
	print_queues(f, s);
	fprintf(f, "], \"endpoints\": [");
	json_list(f, s, is_endpoint, json_endpoint);
	fprintf(f, "], \"processes\": [");
	json_list(f, s, is_proc, json_proc);
	fprintf(f, "], \"connections\": [");
	json_list(f, s, is_conn, json_conn);
	fprintf(f, "]}\n");
}

/* --- main ------------------------------------------------------------------------- */

enum format { TEXT, JSON, PROMETHEUS };

static void usage(FILE *f)
{
	fprintf(f, "usage: ulsstat [--ctl PATH] [--json | --prometheus] [--watch SECONDS [--count N]]\n"
		   "               [--output FILE]\n"
		   "PATH defaults to $ULS_CTL. --watch asks again every SECONDS (0.1 to 86400) and\n"
		   "refreshes the screen (text), or prints one document per refresh; --count stops\n"
		   "after N refreshes. --output writes each refresh to FILE instead, replacing it\n"
		   "atomically (for node_exporter's textfile collector).\n");
}

/* One refresh: to a temporary file renamed over `output`, or to stdout. */
static int emit(enum format fmt, const struct snap *s, const char *output, bool clear,
		const char *ctl, double watch)
{
	char tmp[4096];
	FILE *f = stdout;

	if (output) {
		if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%d", output, (int)getpid()) >= sizeof(tmp))
			return -ENAMETOOLONG;
		f = fopen(tmp, "w");
		if (!f)
			return -errno;
	}
	if (clear)
		fputs("\033[H\033[2J", f);
	if (fmt == TEXT && watch > 0) {
		char when[32];
		time_t t = time(NULL);
		strftime(when, sizeof(when), "%H:%M:%S", localtime(&t));
		fprintf(f, "ulsstat --ctl %s, every %g s, at %s\n\n", ctl, watch, when);
	}
	int rc = 0;
	if (fmt == JSON)
		print_json(f, s);
	else if (fmt == PROMETHEUS)
		rc = stat__print_prometheus(f, s);
	else
		print_text(f, s);
	if (output) {
		if (fclose(f) != 0 && rc == 0)
			rc = -errno;
		if (rc == 0 && rename(tmp, output) < 0)
			rc = -errno;
		if (rc < 0)
			unlink(tmp);
	} else if (fflush(f) != 0 && rc == 0) {
		rc = -errno;
	}
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "ctl", required_argument, NULL, 'c' }, { "json", no_argument, NULL, 'j' },
		{ "prometheus", no_argument, NULL, 'p' }, { "watch", required_argument, NULL, 'w' },
		{ "count", required_argument, NULL, 'n' }, { "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	const char *ctl = getenv("ULS_CTL"), *output = NULL;
	enum format fmt = TEXT;
	double watch = 0;
	long count = -1;
	int c, nfmt = 0;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			ctl = optarg;
			break;
		case 'j':
			fmt = JSON;
			nfmt++;
			break;
		case 'p':
			fmt = PROMETHEUS;
			nfmt++;
			break;
		case 'w':
			if (opt__seconds("ulsstat", "watch", optarg, 0.1, 86400, &watch) < 0)
				return 2;
			break;
		case 'n': {
			unsigned long long v;
			if (opt__num("ulsstat", "count", optarg, 1, 1000000000, &v) < 0)
				return 2;
			count = (long)v;
			break;
		}
		case 'o':
			output = optarg;
			break;
		default:
			return opt__help_or_bad(c, usage);
		}
	}
	if (opt__no_operands("ulsstat", argc, argv, optind) < 0) {
		usage(stderr);
		return 2;
	}
	if (nfmt > 1) {
		fprintf(stderr, "ulsstat: --json and --prometheus exclude each other\n");
		return 2;
	}
	if (count > 0 && watch == 0) {
		fprintf(stderr, "ulsstat: --count needs --watch\n");
		return 2;
	}
	if (output && !*output) {
		fprintf(stderr, "ulsstat: --output needs a file name\n");
		return 2;
	}
	struct sockaddr_un sun;
	if (!ctl || !*ctl || strlen(ctl) >= sizeof(sun.sun_path)) {
		fprintf(stderr, "ulsstat: no control socket: give --ctl PATH or set ULS_CTL "
			"(at most %zu bytes)\n", sizeof(sun.sun_path) - 1);
		return 2;
	}
	/* Refreshing in place: only a terminal gets the escape sequence. */
	bool clear = watch > 0 && fmt == TEXT && !output && isatty(STDOUT_FILENO);
	struct snap s = { 0 };
	char err[256];
	int status = 0;
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (long round = 0; count < 0 || round < count; round++) {
		if (query(ctl, &s, err, sizeof(err)) < 0) {
			fprintf(stderr, "ulsstat: %s\n", err);
			status = 1;
		} else {
			int rc = emit(fmt, &s, output, clear, ctl, watch);
			status = 0;
			if (rc < 0) {
				fprintf(stderr, "ulsstat: %s: %s\n", output ? output : "output", strerror(-rc));
				status = 1;
			}
		}
		if (watch == 0 || (count > 0 && round + 1 >= count))
			break;
		/* the next refresh on a fixed schedule, so that a slow answer does not drift it */
		long ns = (long)((watch - (long)watch) * 1e9);
		next.tv_sec += (time_t)watch + (next.tv_nsec + ns) / 1000000000L;
		next.tv_nsec = (next.tv_nsec + ns) % 1000000000L;
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
			;
	}
	free(s.m);
	return status;
}
