/* Declarations for the functions lwIP calls through its hooks (LWIP_HOOK_FILENAME). */
#ifndef ULS_STACK_HOOKS_H
#define ULS_STACK_HOOKS_H

#include "lwip/ip_addr.h"

u32_t stk__tcp_isn(const ip_addr_t *local_ip, u16_t local_port,
                   const ip_addr_t *remote_ip, u16_t remote_port);

/* Segmentation offload (stack/tso.c, stack/patches/0006). */
struct tcp_pcb;
struct netif;
u16_t stk__tso_size(const struct tcp_pcb *pcb);
u16_t stk__tso_unit(const struct tcp_pcb *pcb);
u32_t stk__tso_abc_limit(const struct tcp_pcb *pcb);
void stk__tso_output(const struct tcp_pcb *pcb);
int stk__tso_ip4_output_whole(const struct netif *netif, u8_t proto);

/* ICMP errors for TCP connections (stack/icmperr.c, stack/patches/0030). */
struct pbuf;
int stk__icmp_error_input(struct pbuf *p, struct netif *inp);

#endif
