/* What ulsstat's main and output formats (ulsstat.c) share with its Prometheus output
 * (statprom.c). */
#ifndef ULS_APPS_ULSSTAT_H
#define ULS_APPS_ULSSTAT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "netif/ctl/ctl.h"

/* One STATS answer: its records as ulsd sent them. */
struct snap {
	struct ctl_msg *m;
	size_t n, cap;
};

const char *stat__datapath_name(unsigned d);
void stat__command_of(uint32_t pid, char *out, size_t len);  /* /proc/PID/comm, or "" */
/* The snapshot in Prometheus's text format (node_exporter's textfile collector); 0 or
 * -ENOMEM. */
int stat__print_prometheus(FILE *f, const struct snap *s);

#endif
