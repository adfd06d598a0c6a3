/* lwIP architecture glue for Linux user space (see lwIP's doc "sys_arch.txt"). */
#ifndef ULS_ARCH_CC_H
#define ULS_ARCH_CC_H

#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

#define LWIP_TIMEVAL_PRIVATE 0
#define LWIP_ERRNO_STDINCLUDE 1

/* lwIP's diagnostics go through ulstack's log function, never straight to stdout. */
void stk__lwip_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void stk__lwip_assert(const char *msg, const char *file, int line);
#define LWIP_PLATFORM_DIAG(x)   do { stk__lwip_diag x; } while (0)
#define LWIP_PLATFORM_ASSERT(x) stk__lwip_assert((x), __FILE__, __LINE__)

#endif
