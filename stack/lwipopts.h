/* lwIP compile-time options for ulstack.
 *
 * Read first: RFC 7323 (window scale, timestamps), RFC 2018 (SACK), RFC 9293 §3.7.1 (MSS).
 *
 * lwIP's options are fixed at compile time, which is why ulstack builds lwIP's core itself
 * instead of linking Debian's liblwip (whose options are the GNU Hurd's). Large windows are
 * the default: every connection gets a 4 MiB receive window and a 4 MiB send buffer, and
 * memory comes from the C heap so that such a window can really fill.
 */
#ifndef ULS_LWIPOPTS_H
#define ULS_LWIPOPTS_H

/* One stack per process, driven by ulstack's own stack thread under one core lock
 * (stack/core.c). lwIP's sequential APIs (netconn, sockets) are not used: ulstack has its
 * own socket layer on the raw API. */
#define NO_SYS                          1
#define LWIP_TIMERS                     1
#define SYS_LIGHTWEIGHT_PROT            0
#define LWIP_NETCONN                    0
#define LWIP_SOCKET                     0
#define LWIP_NETIF_API                  0
#define LWIP_SINGLE_NETIF               1
#define LWIP_NETIF_STATUS_CALLBACK      0
#define LWIP_NETIF_LINK_CALLBACK        0

/* Every entry into lwIP must hold the core lock; this turns a forgotten lock into a crash
 * in development instead of silent corruption. */
void stk__assert_core_locked(void);
#define LWIP_ASSERT_CORE_LOCKED()       stk__assert_core_locked()

/* Memory: the C heap for everything. Pools sized for 4 MiB windows would need thousands
 * of static entries per connection; malloc sizes itself, and TCP's advertised window
 * bounds what a peer can make us hold. */
#define MEM_LIBC_MALLOC                 1
#define MEMP_MEM_MALLOC                 1
/* ... through size classes that keep freed frame buffers warm (stack/heap.c). */
#include <stddef.h>
void *stk__heap_alloc(size_t size);
void *stk__heap_calloc(size_t n, size_t size);
void stk__heap_free(void *p);
#define mem_clib_malloc                 stk__heap_alloc
#define mem_clib_calloc                 stk__heap_calloc
#define mem_clib_free                   stk__heap_free
#define MEM_ALIGNMENT                   8
#define MEM_USE_POOLS                   0

/* Protocols. */
#define LWIP_IPV4                       1
/* Dual stack (docs/ipv6.md): IPv6 compiled in, ip_addr_t the tagged union of both. Every
 * pcb the socket layer makes is still IPADDR_TYPE_V4 and the netif has no IPv6 address and
 * no output_ip6, so nothing IPv6 leaves a process yet. The node answers neighbour
 * discovery for its addresses (next step, as ulsd answers ARP): no MLD reports (and no
 * 100 ms MLD timer), no router solicitations, no duplicate address detection from each
 * process. */
#define LWIP_IPV6                       1
#define LWIP_IPV6_MLD                   0
#define LWIP_IPV6_SEND_ROUTER_SOLICIT   0
#define LWIP_IPV6_DUP_DETECT_ATTEMPTS   0
#define LWIP_IPV6_AUTOCONFIG            0
#define LWIP_IPV6_DHCP6                 0
/* IPv6 reassembly keeps its bookkeeping in the fragment header's 8 octets unless told to
 * copy the header out: a 64-bit pointer does not fit (lwIP asserts so every second). */
#define IPV6_FRAG_COPYHEADER            1
#define LWIP_ARP                        1
#define LWIP_ETHERNET                   1
#define ETHARP_SUPPORT_STATIC_ENTRIES   1
#define ARP_TABLE_SIZE                  64
#define ARP_QUEUEING                    1
#define ARP_QUEUE_LEN                   64
#define ETHARP_TABLE_MATCH_NETIF        0
#define LWIP_ICMP                       1
#define LWIP_RAW                        0
#define LWIP_UDP                        1
#define LWIP_TCP                        1
#define LWIP_DHCP                       0
#define LWIP_AUTOIP                     0
#define LWIP_IGMP                       0
#define LWIP_DNS                        0
#define LWIP_BROADCAST_PING             0

/* IPv4 reassembly: a 64 KiB UDP datagram at MTU 1500 is ~45 fragments (lwIP's default of
 * 10 pbufs cannot hold one). */
#define IP_REASSEMBLY                   1
#define IP_FRAG                         1
#define IP_REASS_MAX_PBUFS              256
#define MEMP_NUM_REASSDATA              16
/* RFC 1122 §3.3.2: the reassembly timeout, 30 s as Linux; ULS_REASS_TIMEOUT=N seconds
 * (stack/tcpconf.c). Overlaps drop the whole datagram (patch 0050, RFC 5722 §4). */
#define IP_REASS_MAXAGE                 stk__ip_reass_maxage()
unsigned char stk__ip_reass_maxage(void);
/* IPv6 (RFC 8200 §4.5): 60 s, lwIP's default and Linux's; ULS_REASS_TIMEOUT sets it too
 * (tests watch datagrams expire). */
#define IPV6_REASS_MAXAGE               stk__ip6_reass_maxage()
unsigned char stk__ip6_reass_maxage(void);
#define LWIP_HOOK_IP4_REASS_NOTE(what)  stk__ip_reass_note(what)
#define IP_DEFAULT_TTL                  64

/* TCP: large windows (RFC 7323 §2). TCP_WND must fit in 16 bits after the shift:
 * 4 MiB <= 0xFFFF << 7. The shift is one constant for all connections (lwIP limit). */
#define LWIP_WND_SCALE                  1
#define TCP_RCV_SCALE                   7
#define TCP_WND                         (4U * 1024U * 1024U)
#define TCP_SND_BUF                     (4U * 1024U * 1024U)
/* The send queue counts pbufs (u16): at least 2 * SND_BUF / MSS for MSS 1460 (5746). */
#define TCP_SND_QUEUELEN                16384
#define MEMP_NUM_TCP_SEG                TCP_SND_QUEUELEN
/* Not a limit: MEMP_MEM_MALLOC takes pcbs from the heap without counting them. */
#define MEMP_NUM_TCP_PCB                1024
/* Connections are found through a hash of 65,536 buckets (lwIP patch 0101), not by
 * walking the lists: 10,000 connections, and a TIME-WAIT list of 100,000 after a burst of
 * short ones, cost every segment a list walk before (issue 18). 512 KiB of pointers per
 * process, faulted in only where used. */
#define TCP_PCB_HASH_BITS               16
#define MEMP_NUM_TCP_PCB_LISTEN         256
#define MEMP_NUM_UDP_PCB                256
#define MEMP_NUM_PBUF                   4096
#define PBUF_POOL_SIZE                  1024
/* lwIP derives the pool's buffer size from TCP_MSS, which overflows 16 bits here. ulstack
 * allocates received frames from the heap (PBUF_RAM), so the pool only serves lwIP's own
 * small allocations. */
#define PBUF_POOL_BUFSIZE               1536
#define MEMP_NUM_SYS_TIMEOUT            32

/* The largest MSS IPv4 allows; each connection uses min(this, netif MTU - 40), and the
 * SYN announces the same (RFC 9293 §3.7.1). */
#define TCP_MSS                         65495
#define TCP_CALCULATE_EFF_SEND_MSS      1
#define LWIP_TCP_TIMESTAMPS             1      /* RFC 7323 §3 */
#define LWIP_TCP_SACK_OUT               1      /* RFC 2018: SACK-permitted and SACK blocks */
#define LWIP_TCP_MAX_SACK_NUM           4
#define TCP_QUEUE_OOSEQ                 1
/* Out-of-order segments one connection keeps (patch 0128); the window alone let a peer
 * queue two million one-octet segments. A 4 MiB window of 1448-octet segments is 2,900.
 * Deviation: a peer with an MSS below 1024 whose out-of-order data fills the window has the
 * segments past the bound dropped and sends them again (RFC 2018 §8 allows it). */
#define TCP_OOSEQ_MAX_SEGS              4096
#define TCP_LISTEN_BACKLOG              1
#define TCP_DEFAULT_LISTEN_BACKLOG      128
#define LWIP_TCP_KEEPALIVE              1
/* Per-connection slots: on a node, the tuple to release at ulsd when lwIP frees the
 * pcb (stack/endpoints.c); the input checks' state (stack/tcp_checks.c). */
#define LWIP_TCP_PCB_NUM_EXT_ARGS       3
#define TCP_MAXRTX                      12
/* SYN retransmissions: 6 as Linux (1 + 2 + ... + 64 s: connect gives up after 127 s);
 * ULS_SYN_RETRIES=N (1-12) changes it (stack/tcpconf.c). Deviation: RFC 1122 §4.2.3.5 asks
 * for at least 3 minutes; ULS_SYN_RETRIES=7 gives 255 s. */
#define TCP_SYNMAXRTX                   6
#define TCP_SYNMAXRTX_RUNTIME()         stk__syn_retries()
/* RFC 9293 §3.4.2: TIME-WAIT lasts 2 MSL, and lwIP's MSL is 60 s. Deviation: 30 s here, so
 * TIME-WAIT (and a pcb stuck in LAST-ACK) lasts 60 s, as Linux's TCP_TIMEWAIT_LEN and as
 * ulsd's custody of the tuples of a process that died (SRV_TIMEWAIT_MS; tests/unit/test_ports
 * checks that the two agree). PAWS (RFC 7323 §5) and RFC 6191 reopening (patch 0032) guard a
 * tuple's reuse; a client that closes first keeps its port half as long: 28,232
 * connections per 60 s to one server, as on Linux. */
#define TCP_MSL                         30000UL
#define LWIP_CALLBACK_API               1
#define LWIP_EVENT_API                  0
/* The TCP timer: delayed ACKs wait at most one tick, and the slow timer (two ticks)
 * is the RTO's unit. lwIP's 250 ms made a 500 ms RTO granularity, far coarser than a LAN
 * round trip (stack/patches/0004). Deviation: zero-window probes back off in slow ticks,
 * so they come at 0.15 s doubling to at most 6 s (lwIP's table), not Linux's 120 s. */
#define TCP_TMR_INTERVAL                25
/* The timer stops while no pcb has anything for it to time (patch 0127), as long as a
 * process has at most this many active pcbs: the check walks them before every sleep
 * while it is off. A process with more keeps the timer running, as lwIP does. */
#define TCP_TIMER_IDLE_MAX_PCBS         64

/* Checksums in software unless the node offloads them (stack/tso.c), always verified
 * (RFC 9293 §3.1 MUST-2, MUST-3). Without offload, TCP data is summed as tcp_write copies
 * it in, so a retransmission does not sum it again. */
#define CHECKSUM_GEN_IP                 1
#define CHECKSUM_GEN_TCP                1
#define CHECKSUM_GEN_UDP                1
#define CHECKSUM_GEN_ICMP               1
#define CHECKSUM_CHECK_IP               1
#define CHECKSUM_CHECK_TCP              1
#define CHECKSUM_CHECK_UDP              1
#define CHECKSUM_CHECK_ICMP             1
#define LWIP_CHECKSUM_ON_COPY           1
#include <stdint.h>
uint16_t nif_inet_chksum(const void *data, int len);
#define LWIP_CHKSUM                     nif_inet_chksum
/* Copy-and-sum that skips the sum when the node offloads TCP checksums (stack/tso.c). */
uint16_t stk__chksum_copy(void *dst, const void *src, uint16_t len);
#define LWIP_CHKSUM_COPY                stk__chksum_copy
#define LWIP_CHKSUM_ALGORITHM           0
/* lwIP's copies between pbufs and the application's buffers (pbuf_copy_partial,
 * pbuf_take) at any distance without the `rep movsb` stall (netif/copy.c). */
#include <stddef.h>
void nif_copy(void *dst, const void *src, size_t len);
#define MEMCPY(dst, src, len)           nif_copy(dst, src, len)

/* Counters: lwIP's own statistics feed ulstack's named counters (stack/counters.c). */
#define LWIP_STATS                      1
#define LWIP_STATS_DISPLAY              0
#define LINK_STATS                      1
#define ETHARP_STATS                    1
#define IP_STATS                        1
#define IPFRAG_STATS                    1
#define ICMP_STATS                      1
#define UDP_STATS                       1
#define TCP_STATS                       1
#define MEM_STATS                       0
#define MEMP_STATS                      0
#define SYS_STATS                       0

/* Randomness (ephemeral ports, ...) from the kernel's CSPRNG. */
uint32_t stk__random32(void);
#define LWIP_RAND()                     stk__random32()

/* RFC 6528 initial sequence numbers (stack/isn.c). */
struct ip_addr;
#define LWIP_HOOK_FILENAME              "hooks.h"
#define LWIP_HOOK_TCP_ISN(local_ip, local_port, remote_ip, remote_port) \
        stk__tcp_isn(local_ip, local_port, remote_ip, remote_port)

/* Segmentation offload on a node (stack/tso.c, stack/patches/0006): TCP segments of up to
 * 64 KiB with a partial checksum, cut into MSS-sized wire segments by the kernel. The
 * checksum switches are per netif so that TCP's can be left to the kernel, and skipped
 * on input for one packet whose checksum the kernel vouches for. */
#define LWIP_CHECKSUM_CTRL_PER_NETIF    1
#define LWIP_HOOK_TCP_TSO_SIZE(pcb)     stk__tso_size(pcb)
#define LWIP_HOOK_TCP_TSO_UNIT(pcb)     stk__tso_unit(pcb)
#define LWIP_HOOK_TCP_TSO_OUTPUT(pcb)   stk__tso_output(pcb)
#define LWIP_HOOK_TCP_ABC_LIMIT(pcb)    stk__tso_abc_limit(pcb)
#define LWIP_HOOK_IP4_OUTPUT_TSO(netif, proto) stk__tso_ip4_output_whole(netif, proto)
/* The same for TCP over IPv6 (stack/patches/0121). */
#define LWIP_HOOK_IP6_OUTPUT_TSO(netif, nexth) stk__tso_ip4_output_whole(netif, nexth)
/* One tcp_output() per connection per batch of received frames (stack/outbatch.c). */
#define LWIP_HOOK_TCP_OUTPUT_DEFER(pcb) stk__outbatch_defer(pcb)
#define LWIP_HOOK_TCP_FREE(pcb)         stk__outbatch_forget(pcb)

/* TCP input checks (stack/tcp_checks.c): RFC 9293 §3.10.7.4's order of checks, RFC 5961
 * and RFC 7323 PAWS run before lwIP's tcp_process(); our lwIP patches report what they
 * drop or trim through LWIP_HOOK_TCP_INPUT_NOTE. */
#define LWIP_HOOK_TCP_INPACKET_PCB(pcb, hdr, optlen, opt1len, opt2, p) \
        stk__tcp_inpacket(pcb, hdr, optlen, opt1len, opt2, p)
#define LWIP_HOOK_TCP_INPUT_NOTE(what)  stk__tcp_note(STK_TCP_NOTE_##what)
/* Loss-recovery events of the sending side, counted the same way (patches 0022-0029), and
 * per connection for ulsstat. Deviation: the hook takes no pcb argument, so this names the
 * `pcb` every call site of patches 0022-0023 has in scope (a site without one would not
 * compile). */
#define LWIP_HOOK_TCP_LOSS_NOTE(what)   stk__tcp_loss_note(pcb, STK_TCP_NOTE_##what)
/* ACKs the delayed-ACK timer sent (patch 0113), counted apart from those sent at once:
 * RFC 5681 section 4.2's "every second full-sized segment" is tested by this count. */
#define LWIP_HOOK_TCP_TIMER_NOTE(what)  stk__tcp_note(STK_TCP_NOTE_##what)
/* RFC 9438 CUBIC congestion control (stack/cubic.c, patch 0040): ssthresh at a congestion
 * event and cwnd in congestion avoidance; slow start and loss recovery stay lwIP's with
 * patches 0006 and 0021-0023. */
#include "cubic.h"
#define LWIP_TCP_CC_PCB_STATE           struct stk_cubic cubic; struct stk_cubic cubic_undo;
#define LWIP_HOOK_TCP_CC_LOSS(pcb, flight) \
        ((tcpwnd_size_t)stk__cubic_loss(&(pcb)->cubic, (pcb)->cwnd, (flight), (pcb)->mss))
#define LWIP_HOOK_TCP_CC_TIMEOUT(pcb)   stk__cubic_timeout(&(pcb)->cubic)
/* A spurious timeout (patch 0130, RFC 5682) puts back the CUBIC state the timeout found:
 * RFC 9438 section 4.9 restores W_max, K and the epoch with cwnd and ssthresh. */
#define LWIP_HOOK_TCP_CC_UNDO_SAVE(pcb) ((pcb)->cubic_undo = (pcb)->cubic)
#define LWIP_HOOK_TCP_CC_UNDO(pcb)      ((pcb)->cubic = (pcb)->cubic_undo)
#define LWIP_HOOK_TCP_CC_AVOID(pcb, acked) \
        ((tcpwnd_size_t)stk__cubic_ack(&(pcb)->cubic, (pcb)->cwnd, (acked), (pcb)->mss, \
                                       sys_now(), (pcb)->rtt_sampled ? \
                                       (u32_t)((pcb)->srtt8 >> 3) : 0))
/* RFC 9293 §3.7.1 leaves a floor to the implementation. Deviation: an MSS option below 48
 * is raised to 48 (Linux's net.ipv4.tcp_min_snd_mss default), so a segment always has
 * room for the 12-byte timestamp option and data (patch 0010). */
#define TCP_MSS_FLOOR                   48
/* ICMP errors reach TCP (stack/icmperr.c, stack/patches/0030): RFC 1122 §4.2.3.9,
 * RFC 5927, RFC 1191. */
#define LWIP_HOOK_ICMP_ERROR_INPUT(p, inp) stk__icmp_error_input(p, inp)
/* ICMPv6 errors reach TCP and UDP (stack/icmp6err.c, stack/patches/0106): RFC 4443 §3,
 * RFC 8201, RFC 5927. */
#define LWIP_HOOK_ICMP6_ERROR_INPUT(p, inp) stk__icmp6_error_input(p, inp)
/* IPv6 next hops (stack/core.c): RFC 4861 §5.2 next-hop determination with the node's
 * static default router (--gw6), and RFC 5942 §4's on-link rule for a static address's
 * configured prefix (patch 0107). */
#define LWIP_HOOK_ND6_GET_GW(netif, dest) stk__nd6_gateway(netif, dest)
#define LWIP_HOOK_ND6_STATIC_ONLINK(netif, i, dest) stk__nd6_static_onlink(netif, i, dest)
/* SYN floods (stack/syncookie.c, stack/patches/0090): RFC 4987 §3.1 a bounded number of
 * half-open connections per listener, §3.6 SYN cookies beyond it. */
#define LWIP_HOOK_TCP_SYN_ADMIT(lpcb)   stk__syn_admit(lpcb)
#define LWIP_HOOK_TCP_SYNCOOKIE_MAKE(lpcb, c) stk__syncookie_make(lpcb, c)
#define LWIP_HOOK_TCP_SYNCOOKIE_CHECK(lpcb, c) stk__syncookie_check(lpcb, c)
/* A good cookie while the accept queue is full: dropped without a reset (patch 0100). */
#define LWIP_HOOK_TCP_SYNCOOKIE_ACCEPTQ_FULL(lpcb) stk__syncookie_acceptq_full(lpcb)

#define LWIP_DEBUG                      0
#define LWIP_PERF                       0

#endif
