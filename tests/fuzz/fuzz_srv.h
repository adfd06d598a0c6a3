/* What the fuzz targets of ulsd share (fuzz_ulsd, fuzz_node; defined in fuzz_srv.c): one
 * struct srv with the fake TAP of tests/unit/faketap.c, IPv4 198.18.0.1/24 and IPv6
 * 2001:db8:0:1::1/64 (and its link-local address), time that the input moves, and one
 * round of the demux thread's loop over the frames injected. */
#ifndef ULS_TESTS_FUZZ_FUZZ_SRV_H
#define ULS_TESTS_FUZZ_FUZZ_SRV_H

#include <stdint.h>

#include "server/internal.h"

/* An oracle that fails names its line (libFuzzer's report then says which). */
#define CHECK(c) do { if (!(c)) fuzz_srv_fail(__FILE__, __LINE__, #c); } while (0)
_Noreturn void fuzz_srv_fail(const char *file, int line, const char *what);

extern uint64_t now_ms;  /* ulsd's clock (srv__now_ms), moved by the input */
extern struct srv srv;

void fuzz_srv_init(void);
void demux_round(void);  /* the demux thread's loop until the fake TAP has no frame left */

#endif
