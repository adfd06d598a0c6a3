/* Declarations for the functions lwIP calls through its hooks (LWIP_HOOK_FILENAME). */
#ifndef ULS_STACK_HOOKS_H
#define ULS_STACK_HOOKS_H

#include "lwip/ip_addr.h"

u32_t stk__tcp_isn(const ip_addr_t *local_ip, u16_t local_port,
                   const ip_addr_t *remote_ip, u16_t remote_port);

#endif
