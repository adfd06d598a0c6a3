/* ulsping's parts (apps/ulsping.c is the command line): the workers that measure round trips
 * (pingwork.c), the driver that runs them on a testbed it builds (pingdrive.c), and what
 * both share. The wire format and the driver's modes are described in apps/ulsping.c. */
#ifndef ULS_APPS_PING_H
#define ULS_APPS_PING_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>

#include "apps/netops.h"

#define PING_DEFAULT_COUNT 3000       /* seed 000: 3,000 round trips ... */
#define PING_DEFAULT_SKIP  50         /* ... the first 50 dropped */
#define PING_COUNT_MAX     10000000ull
#define PING_SIZE_MAX      (64ull << 20)
#define PING_SIZES_MAX     32
#define PING_MODES_MAX     3

/* The workers, on ops (kernel or ulstack). The server serves connections one at a time,
 * forever (its driver stops it by its PID); the client measures count round trips of size
 * bytes, the first skip not counted. bd_path: save the breakdown stamps there. Both return
 * the process's exit status (0 or 1). */
int bench__ping_server(const struct netops *ops, const union bench_addr *at,
		       const char *bd_path);
int bench__ping_client(const struct netops *ops, const union bench_addr *to,
		       unsigned long long size, unsigned long long count, unsigned long long skip,
		       const char *json, const char *bd_path);

/* The driver: every mode of modes[0..nmodes) ("perproc", "relay", "kernel") for every size,
 * on a testbed it builds and takes down; returns the exit status. family 6: the testbed
 * comes up with --ipv6 and every mode runs over IPv6. */
int bench__ping_drive(const char *const *modes, size_t nmodes, const unsigned long long *sizes,
		      size_t nsizes, const char *json, bool breakdown, int family);

#endif
