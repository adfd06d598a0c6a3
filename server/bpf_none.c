/* ulsd built without the direct data path (no clang, bpftool or libbpf at configure time):
 * every process is on the relay path. */
#include "server/internal.h"

#include <errno.h>

int srv__dp_init(struct srv *s)
{
	(void)s;
	return -EOPNOTSUPP;
}

int srv__dp_lease_direct(struct srv *s, struct srv_lease *l, const int32_t ring_fd[2],
			 int32_t wake_fd, bool mshot)
{
	(void)s; (void)l; (void)ring_fd; (void)wake_fd; (void)mshot;
	return -EOPNOTSUPP;
}

void srv__dp_lease_end(struct srv *s, struct srv_lease *l)
{
	(void)s; (void)l;
}

void srv__dp_stats(struct srv *s, srv_dp_stat_fn *fn, void *arg)
{
	(void)s; (void)fn; (void)arg;
}

int srv__dp_frag_steer(struct srv *s, uint32_t src, uint16_t id, uint8_t proto, uint32_t owner)
{
	(void)s; (void)src; (void)id; (void)proto; (void)owner;
	return -EOPNOTSUPP;
}

int srv__dp_frag6_steer(struct srv *s, const uint8_t src[16], uint32_t id, uint32_t owner)
{
	(void)s; (void)src; (void)id; (void)owner;
	return -EOPNOTSUPP;
}

int srv__dp_neighbour(struct srv *s, uint32_t ip, uint8_t mac[6])
{
	(void)s; (void)ip; (void)mac;
	return -ENOENT;
}

int srv__dp_neighbour6(struct srv *s, const uint8_t ip[16], uint8_t mac[6])
{
	(void)s; (void)ip; (void)mac;
	return -ENOENT;
}
