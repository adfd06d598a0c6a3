/* What the application threads' driving (drive.c), the batching of a thread's sends
 * (txbatch.c) and the stack thread's park (park.c) share. Nothing here is installed. */
#ifndef ULS_STACK_DRIVE_H
#define ULS_STACK_DRIVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "sock.h"

#define RX_BUDGET 256        /* frames per round before timers run again */
#define GRACE_MS 2           /* the stack thread's park after the last driver's round */
/* The longest park while an application thread waits on the device: each park that runs
 * out with a thread still waiting there doubles the next (GRACE_MS, 4, 8), so that a
 * process whose threads sleep in their calls does not wake its stack thread 500 times a
 * second for nothing (park.c). */
#define PARK_LONG_MS 8
/* A park that ran out for a due timer while an application thread held the core lock left
 * the round to it (park.c); it looks again this soon in case no unlock took it. */
#define TIMER_RECHECK_MS 1
/* An idle park's limit (park.c: the driver stayed on the device through a whole
 * PARK_LONG_MS park without a round; its leaving wakes the park). */
#define PARK_IDLE_MS 3600000

/* Initial-exec TLS: uls_signal_note reads drive.c's from a signal handler. */
#define TLS __thread __attribute__((tls_model("initial-exec")))

/* uls_tx_batch: the sends this thread still expects before its next wait, and whether a
 * leave of this thread kept frames queued for a later flush since its last flush. */
extern TLS unsigned stk__tx_batch_left;
extern TLS bool stk__tx_deferred;

/* park.c: a thread kept frames back for a later flush (txbatch.c): the park that would
 * send them must end within GRACE_MS, and not lengthen. */
void stk__park_shorten(struct stk_node *n);

/* drive.c */
uint64_t stk__now_ns(void);  /* CLOCK_MONOTONIC */
/* Wait on c with the core lock (held), until deadline (ns, CLOCK_MONOTONIC; 0: none). */
int stk__cond_wait_until(pthread_cond_t *c, uint64_t deadline);
int stk__take_frames(struct stk_node *n);
void stk__round_after_wait(struct stk_node *n, int wrc);
int stk__timer_timeout(int64_t limit_ms);
void stk__hand_over(struct stk_node *n);  /* the device to the first blocked thread */
/* Drive the stack for s (NULL: the stack thread's own round) until deadline. */
void stk__drive(struct stk_node *n, struct stk_sock *s, uint64_t deadline);

/* txbatch.c: may this leave keep its call's frames for a later flush? */
bool stk__flush_deferred(struct stk_node *n);

/* park.c: do application threads drive now (the stack thread stays parked)? */
bool stk__apps_drive(const struct stk_node *n);

#endif
