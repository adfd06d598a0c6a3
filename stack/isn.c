/* Initial sequence numbers, RFC 6528 §3:
 *
 *   ISN = M + F(localip, localport, remoteip, remoteport, secretkey)
 *
 * "M is the 4 microsecond timer" and F is a pseudorandom function of the connection-id and
 * a secret. F here is SipHash-2-4 (a keyed PRF built for short inputs;
 * netif/siphash.c), with a 128-bit key
 * drawn from the kernel's CSPRNG once per process. RFC 9293 §3.4.1 MUST-8 requires the
 * clock-driven ISN; lwIP 2.1.3's own generator is a counter (iss += tcp_ticks).
 */
#include "hooks.h"
#include "internal.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

#include "netif/siphash.h"

static uint8_t secret[16];
static pthread_once_t secret_once = PTHREAD_ONCE_INIT;
static void secret_init(void);

/* A process on a node uses ulsd's secret, so that every process of the node numbers its
 * connections from the same function (RFC 6528 §3: one secret per host). */
void stk__isn_set_secret(const uint8_t s[16]);
void stk__isn_set_secret(const uint8_t s[16])
{
	pthread_once(&secret_once, secret_init);
	memcpy(secret, s, sizeof(secret));
}

static void secret_init(void)
{
	for (size_t i = 0; i < sizeof(secret); i += 4) {
		uint32_t r = stk__random32();
		memcpy(secret + i, &r, 4);
	}
}

u32_t stk__tcp_isn(const ip_addr_t *local_ip, u16_t local_port,
		   const ip_addr_t *remote_ip, u16_t remote_port)
{
	uint8_t id[36];
	size_t n;
	struct timespec ts;

	pthread_once(&secret_once, secret_init);
	if (IP_IS_V6(remote_ip) || IP_IS_V6(local_ip)) {
		/* RFC 6528 §3 names the connection-id: for IPv6 all 16 octets of each address
		 * (reading the union's first 4 would leave 96 bits of the peer out of F). */
		memcpy(id, ip_2_ip6(local_ip)->addr, 16);
		memcpy(id + 16, ip_2_ip6(remote_ip)->addr, 16);
		memcpy(id + 32, &local_port, 2);
		memcpy(id + 34, &remote_port, 2);
		n = 36;
	} else {
		memcpy(id, &ip_2_ip4(local_ip)->addr, 4);
		memcpy(id + 4, &ip_2_ip4(remote_ip)->addr, 4);
		memcpy(id + 8, &local_port, 2);
		memcpy(id + 10, &remote_port, 2);
		n = 12;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t m = ((uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u) / 4u;
	return (u32_t)(m + nif_siphash24(secret, id, n));
}
