/* What tests/node/hostile.c (the lease, forged frames, the commands) shares with
 * hostile_rings.c (what it tries on its io_urings and its connection table). */
#ifndef ULS_TESTS_NODE_HOSTILE_H
#define ULS_TESTS_NODE_HOSTILE_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "netif/ctl/ctl.h"
#include "netif/qring.h"

/* The process's lease: the control socket, HELLO's answer, its device and, on the direct
 * path, its rings and queue. */
extern int hostile_ctl;
extern struct ctl_hello hostile_node;
extern struct nif_dev *hostile_dev;
extern struct nif_qring_prep hostile_qp;
extern bool hostile_direct;
extern unsigned hostile_queue;
extern uint32_t hostile_seq;  /* of the next control message */

int hostile_ctl_connect(const char *path);
/* Send m on the lease, wait for its reply into m; up to nfds descriptors come with it. */
int hostile_call_fds(struct ctl_msg *m, int *fds, int nfds, int *got);
int hostile_call(struct ctl_msg *m);
double hostile_since(const struct timespec *t0);  /* seconds */

/* The commands of hostile_rings.c (see hostile.c's top comment). */
int hostile_rings(uint32_t target);
int hostile_cancel(double seconds);
int hostile_badring(const char *path, const char *kind, int which);
int hostile_bad_conntab(const char *kind, double seconds);

#endif
