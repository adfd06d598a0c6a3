/* The node's port space: who holds which TCP and UDP port (ports.c).
 *
 * An object: every function takes the table. It works with two objects it is given at
 * srv__ports_new and does not own: the filter table (a bound UDP port and a connected tuple
 * get their rule there, and lose it on release) and the custody set (a tuple in custody is
 * not handed out again, custody.h). Its owner serialises calls (ulsd: s->lock).
 */
#ifndef ULS_SERVER_PORTS_H
#define ULS_SERVER_PORTS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define SRV_EPHEMERAL_LO    32768   /* Linux's default ip_local_port_range */
#define SRV_EPHEMERAL_HI    60999

struct flt_table;
struct srv_custody_set;
struct srv_ports;

/* Who asks: a process's lease id, user and pid (SO_PEERCRED). */
struct srv_port_owner {
	uint32_t id;
	uid_t uid;
	pid_t pid;
};

/* key: RFC 6056 §3.3.3's secret key. NULL without memory. */
struct srv_ports *srv__ports_new(struct flt_table *flt, const struct srv_custody_set *custody,
				 const uint64_t key[2]);
/* Frees the holders of every port (the filter rules stay: they are the table's). */
void srv__ports_free(struct srv_ports *pt);

/* Each returns the port, 0 or -errno as bind(2) and connect(2) would. */
int srv__port_bind(struct srv_ports *pt, const struct srv_port_owner *o, uint8_t proto,
		   uint16_t port, unsigned flags);
int srv__port_connect(struct srv_ports *pt, const struct srv_port_owner *o, uint16_t lport,
		      uint32_t rip, uint16_t rport);
/* The same in the families fams (FLT_FAM_*: an AF_INET6 socket holds the port in both
 * unless IPV6_V6ONLY), and a remote of either family (filter.h, IPv4 v4-mapped). */
int srv__port_bind_fam(struct srv_ports *pt, const struct srv_port_owner *o, uint8_t proto,
		       uint16_t port, unsigned flags, unsigned fams);
struct flt_addr;
int srv__port_connect_addr(struct srv_ports *pt, const struct srv_port_owner *o,
			   uint16_t lport, const struct flt_addr *rip, uint16_t rport);
/* TCP: the lease's listener on port, which it holds, takes new connections of fams
 * (CTL_F_INHERIT: joins the group it inherited; CTL_F_REUSEPORT: shares it). -EPERM if
 * the lease does not hold the port, else flt_add_listen_fam's errors. */
int srv__port_listen(struct srv_ports *pt, const struct srv_port_owner *o, uint16_t port,
		     unsigned flags, unsigned fams);
void srv__port_release(struct srv_ports *pt, const struct srv_port_owner *o, uint8_t proto,
		       uint16_t port);
bool srv__port_held(const struct srv_ports *pt, const struct srv_port_owner *o, uint8_t proto,
		    uint16_t port);
int srv__port_ref(struct srv_ports *pt, const struct srv_port_owner *o, uint8_t proto,
		  uint16_t port);
int srv__port_take(struct srv_ports *pt, const struct srv_port_owner *o, uint8_t proto,
		   uint16_t port);
/* The owner is gone: let go of every port it held (the caller removes its filter rules
 * with flt_del_owner). */
void srv__ports_drop_owner(struct srv_ports *pt, const struct srv_port_owner *o);

#endif
