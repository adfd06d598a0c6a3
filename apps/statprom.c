/* ulsstat --prometheus: a node's snapshot in Prometheus's text exposition format, for
 * node_exporter's textfile collector. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/ulsstat.h"
#include "netif/conntab.h"

/* --- Prometheus text format (node_exporter's textfile collector) ------------------- */

/* Samples are collected first and printed family by family: the format wants each
 * family's samples together, after its one HELP and TYPE line. */
struct sample {
	char family[96];
	const char *type, *help;
	char labels[256];
	double value;
};

struct samples {
	struct sample *v;
	size_t n, cap;
	bool oom;
};

/* A metric name from a counter name: [a-zA-Z0-9_] kept, everything else '_'. */
static void metric_name(char *out, size_t len, const char *prefix, const char *name,
			const char *suffix)
{
	size_t k = (size_t)snprintf(out, len, "%s", prefix);
	for (; *name && k + 1 < len; name++)
		out[k++] = (*name >= 'a' && *name <= 'z') || (*name >= 'A' && *name <= 'Z') ||
			   (*name >= '0' && *name <= '9') ? *name : '_';
	out[k < len ? k : len - 1] = '\0';
	if (k < len)
		snprintf(out + k, len - k, "%s", suffix);
}

/* A label value, escaped as the format says (backslash, quote, newline). */
static void label_value(char *out, size_t len, const char *v)
{
	size_t k = 0;

	for (; *v && k + 3 < len; v++) {
		if (*v == '\\' || *v == '"') {
			out[k++] = '\\';
			out[k++] = *v;
		} else if (*v == '\n') {
			out[k++] = '\\';
			out[k++] = 'n';
		} else {
			out[k++] = *v;
		}
	}
	out[k] = '\0';
}

static void add(struct samples *ss, const char *family, const char *type, const char *help,
		const char *labels, double value)
{
	/* A sample twice (two counter names that read alike as metric names) would make the
	 * whole file invalid for the collector: the first stays. */
	for (size_t i = 0; i < ss->n; i++)
		if (!strcmp(ss->v[i].family, family) && !strcmp(ss->v[i].labels, labels))
			return;
	if (ss->n == ss->cap) {
		size_t cap = ss->cap ? ss->cap * 2 : 256;
		struct sample *p = realloc(ss->v, cap * sizeof(*p));
		if (!p) {
			ss->oom = true;
			return;
		}
		ss->v = p;
		ss->cap = cap;
	}
	struct sample *x = &ss->v[ss->n++];
	snprintf(x->family, sizeof(x->family), "%s", family);
	x->type = type;
	x->help = help;
	snprintf(x->labels, sizeof(x->labels), "%s", labels);
	x->value = value;
}

static bool is_gauge(const char *counter)
{
	static const char *const gauges[] = { "custody_connections", "reass_in_progress",
					      "reass_bytes_held", "reass_peak" };
	for (size_t i = 0; i < sizeof(gauges) / sizeof(gauges[0]); i++)
		if (!strcmp(counter, gauges[i]))
			return true;
	return false;
}

struct proc_sum {
	uint32_t pid;
	double sendq, recvq, rexmits;
	unsigned states[ULS_TCP_STATE_COUNT];
};

int stat__print_prometheus(FILE *f, const struct snap *s)
{
	struct samples ss = { 0 };
	char fam[96], lab[256], v1[160], v2[64];

	/* ulsd's counters; the direct path's queues with their owner's pid as a label */
	uint32_t qpid[256] = { 0 };
	for (size_t i = 0; i < s->n; i++) {
		const struct ctl_msg *m = &s->m[i];
		unsigned q;
		int off = 0;
		if (m->type == CTL_STAT_COUNTER &&
		    sscanf(m->u.counter.name, "queue.%u.pid%n", &q, &off) == 1 && off &&
		    !m->u.counter.name[off] && q < 256)
			qpid[q] = (uint32_t)m->u.counter.value;
	}
	for (size_t i = 0; i < s->n; i++) {
		const struct ctl_msg *m = &s->m[i];
		const char *nm = m->u.counter.name;
		if (m->type != CTL_STAT_COUNTER)
			continue;
		unsigned q;
		int off = 0;
		if (sscanf(nm, "queue.%u.%n", &q, &off) == 1 && off && q < 256) {
			const char *field = nm + off;
			if (!strcmp(field, "pid"))
				continue;
			if (!strncmp(field, "tx_dropped.", 11)) {
				label_value(v1, sizeof(v1), field + 11);
				snprintf(lab, sizeof(lab), "queue=\"%u\",pid=\"%u\",reason=\"%s\"", q, qpid[q], v1);
				add(&ss, "uls_queue_tx_dropped_frames_total", "counter",
				    "Frames a direct-path queue's transmit check dropped, by reason", lab,
				    (double)m->u.counter.value);
				continue;
			}
			metric_name(fam, sizeof(fam), "uls_queue_", field, "_frames_total");
			snprintf(lab, sizeof(lab), "queue=\"%u\",pid=\"%u\"", q, qpid[q]);
			add(&ss, fam, "counter", "Frames of one direct-path TAP queue (ulsd)", lab,
			    (double)m->u.counter.value);
			continue;
		}
		bool gauge = is_gauge(nm);
		metric_name(fam, sizeof(fam), "uls_node_", nm, gauge ? "" : "_total");
		add(&ss, fam, gauge ? "gauge" : "counter", "A counter of the node's ulsd (ulsstat)", "",
		    (double)m->u.counter.value);
	}
	/* per process: its table's figures, and sums over its connections */
	size_t nproc = 0;
	struct proc_sum *ps = NULL;
	for (size_t i = 0; i < s->n; i++)
		nproc += s->m[i].type == CTL_STAT_PROC;
	ps = calloc(nproc ? nproc : 1, sizeof(*ps));
	if (!ps)
		return -ENOMEM;
	size_t k = 0;
	double conns = 0;
	for (size_t i = 0; i < s->n; i++) {
		const struct ctl_msg *m = &s->m[i];
		if (m->type == CTL_STAT_PROC) {
			ps[k].pid = m->u.proc.pid;
			k++;
			conns += m->u.proc.connections;
		} else if (m->type == CTL_STAT_CONN && k > 0 && ps[k - 1].pid == m->u.conn.pid) {
			/* ulsd sends a process's connections right after its STAT_PROC */
			struct proc_sum *p = &ps[k - 1];
			p->sendq += m->u.conn.send_queue;
			p->recvq += m->u.conn.recv_queue;
			p->rexmits += m->u.conn.retransmits;
			p->states[m->u.conn.state]++;
		}
	}
	add(&ss, "uls_node_processes", "gauge", "Processes holding a lease at the node's ulsd", "",
	    (double)nproc);
	add(&ss, "uls_node_tcp_connections", "gauge", "TCP connections of the node's processes", "",
	    conns);
	k = 0;
	for (size_t i = 0; i < s->n; i++) {
		const struct ctl_msg *m = &s->m[i];
		if (m->type != CTL_STAT_PROC)
			continue;
		const struct proc_sum *p = &ps[k++];
		bool again = false;
		for (size_t j = 0; j + 1 < k; j++)
			again |= ps[j].pid == p->pid;
		if (again)
			continue;  /* one set of figures per pid (the first) */
		char cmd[64];
		stat__command_of(m->u.proc.pid, cmd, sizeof(cmd));
		label_value(v1, sizeof(v1), cmd);
		snprintf(v2, sizeof(v2), "pid=\"%u\"", m->u.proc.pid);
		snprintf(lab, sizeof(lab), "%s,command=\"%s\",datapath=\"%s\"", v2, v1,
			 stat__datapath_name(m->u.proc.datapath));
		add(&ss, "uls_process_info", "gauge", "A process on the node (always 1)", lab, 1);
		add(&ss, "uls_process_tcp_connections", "gauge", "The process's TCP connections", v2,
		    m->u.proc.connections);
		for (unsigned st = ULS_TCP_SYN_SENT; st < ULS_TCP_STATE_COUNT; st++) {
			if (!p->states[st])
				continue;
			snprintf(lab, sizeof(lab), "%s,state=\"%s\"", v2, uls_tcp_state_name(st));
			add(&ss, "uls_process_tcp_connections_by_state", "gauge",
			    "The process's listed TCP connections by state", lab, p->states[st]);
		}
		add(&ss, "uls_process_send_queue_bytes", "gauge",
		    "Bytes written and not yet acknowledged, over the process's connections", v2, p->sendq);
		add(&ss, "uls_process_recv_queue_bytes", "gauge",
		    "Bytes received and not yet read, over the process's connections", v2, p->recvq);
		add(&ss, "uls_process_retransmits", "gauge",
		    "Retransmissions of the process's current connections", v2, p->rexmits);
		if (m->u.proc.age_ms != UINT32_MAX)
			add(&ss, "uls_process_conntab_age_seconds", "gauge",
			    "Time since the process last wrote its connection table", v2,
			    m->u.proc.age_ms / 1000.0);
		add(&ss, "uls_process_conntab_refused_entries", "gauge",
		    "Entries of the process's connection table refused as out of range", v2,
		    m->u.proc.refused);
	}
	free(ps);
	if (ss.oom) {
		free(ss.v);
		return -ENOMEM;
	}
	/* families in order of first appearance, each one's samples together */
	bool *done = calloc(ss.n ? ss.n : 1, sizeof(*done));
	if (!done) {
		free(ss.v);
		return -ENOMEM;
	}
	for (size_t i = 0; i < ss.n; i++) {
		if (done[i])
			continue;
		fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", ss.v[i].family, ss.v[i].help, ss.v[i].family,
			ss.v[i].type);
		for (size_t j = i; j < ss.n; j++) {
			if (done[j] || strcmp(ss.v[j].family, ss.v[i].family))
				continue;
			done[j] = true;
			fprintf(f, "%s", ss.v[j].family);
			if (ss.v[j].labels[0])
				fprintf(f, "{%s}", ss.v[j].labels);
			fprintf(f, " %.17g\n", ss.v[j].value);
		}
	}
	free(done);
	free(ss.v);
	return 0;
}

