/* What user-level epoll's instances (uepoll.c) share with its wait (uepwait.c). */
#ifndef ULS_PRELOAD_UEPOLL_H
#define ULS_PRELOAD_UEPOLL_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

#include "shim.h"

#define KCHECK_NS 1000000  /* kernel descriptors asked at least this often when busy */
#define UEP_BATCH 1024     /* ready sockets taken from the stack per look, at most */
#define REPORTABLE (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLERR | EPOLLHUP)

struct uep_item {
	int fd;                /* the program's descriptor number */
	struct shim_file *f;   /* the socket (the registration is the pair's, as Linux's) */
	uint32_t events;       /* as given, EPOLLERR | EPOLLHUP added */
	epoll_data_t data;
	struct uls_epi *epi;   /* its registration on the instance's ready list */
	bool disarmed;         /* EPOLLONESHOT: reported, until EPOLL_CTL_MOD */
};

struct uep {
	pthread_mutex_t lock;
	int epfd;
	bool dead;             /* closed, or fell back to the mirrors */
	struct uls_rl *rl;     /* the ready list (the stack's) */
	struct uep_item **v;   /* the registrations; each is its ready list entry's cookie */
	unsigned n, cap;
	unsigned nkernel;      /* kernel descriptors added (an upper bound: close drops them) */
	int64_t kcheck_ns;     /* when the kernel instance was last asked */
	unsigned gen;          /* the fork generation its sockets were counted lazy in */
	unsigned sleepers;     /* threads waiting in the kernel on its sockets' mirrors */
	int wakefd;            /* eventfd that ends their wait (epoll_ctl), or -1 */
	struct uep *next_free;  /* in the pool of freed instances (reg_lock) */
	/* The table's reference and each call's inside, and UEP_DEAD while the instance is
	 * not in the table's hands (new, or freed into the pool). Last: the one member a
	 * reused instance keeps (see uep__get). */
	_Atomic uint64_t refs;
};

#define UEP_DEAD (UINT64_C(1) << 63)

/* uepoll.c */
int64_t uep__now_ns(void);
struct uep *uep__get(int epfd);      /* the live instance of epfd, counted in; or NULL */
void uep__put(struct uep *u);
void uep__lock(struct uep *u, sigset_t *old);    /* signals held while locked */
void uep__unlock(struct uep *u, const sigset_t *old);
void uep__kick(struct uep *u);       /* end the waits of u's sleepers */
void uep__watch(int sd, int lazy, int armed);
void uep__fallback(int epfd);        /* the instance goes to the mirrors for good */
void uep__kernel_first(void);

#endif
