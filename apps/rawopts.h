/* ulsraw's command line (apps/ulsraw.c describes the options). */
#ifndef ULS_APPS_RAWOPTS_H
#define ULS_APPS_RAWOPTS_H

#include <stdint.h>

#include "netif/frame.h"

#define RAW_MTU_MAX     65521   /* drivers/net/tun.c: max_mtu = 65535 - ETH_HLEN */
#define RAW_SECONDS_MIN 0.1
#define RAW_SECONDS_MAX 600.0

enum raw_role { RAW_RECV, RAW_SEND };

struct raw_opts {
	enum raw_role role;
	const char *tap;
	unsigned mtu;              /* 0: the device's */
	uint8_t mac[WIRE_ETH_ALEN];
	uint8_t dst[WIRE_ETH_ALEN];
	double seconds;
	unsigned streams;
	const char *json;
};

/* Fill o from the command line (argv[1] is the role word). Returns 0, 2 (bad arguments:
 * said on stderr) or -1 (help was printed). */
int bench__raw_parse_args(int argc, char **argv, struct raw_opts *o);

#endif
