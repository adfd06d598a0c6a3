/* What server/ctl.c's control thread uses of server/stats.c: the answer collected while
 * it holds the server's lock, and the STATS answer. */
#ifndef ULS_SERVER_STATS_H
#define ULS_SERVER_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include "netif/ctl/ctl.h"
#include "server/internal.h"

/* Between begin and end (lock held), answers without descriptors are collected
 * (srv__answer_add true) instead of sent; end says whether anything is to be sent (or was
 * lost), and srv__answer_send sends it on fd with the lock released. */
void srv__answer_begin(void);
bool srv__answer_add(const struct ctl_msg *m);
bool srv__answer_end(void);
void srv__answer_send(struct srv *s, int fd);

/* STATS (lock held, between begin and end): the records of the answer to seq; fd is the
 * asker's socket, whose send buffer is raised for them. */
void srv__stats(struct srv *s, int fd, uint32_t seq);

#endif
