/* Initial sequence numbers, RFC 6528 §3:
 *
 *   ISN = M + F(localip, localport, remoteip, remoteport, secretkey)
 *
 * "M is the 4 microsecond timer" and F is a pseudorandom function of the connection-id and
 * a secret. F here is SipHash-2-4 (a keyed PRF built for short inputs), with a 128-bit key
 * drawn from the kernel's CSPRNG once per process. RFC 9293 §3.4.1 MUST-8 requires the
 * clock-driven ISN; lwIP 2.1.3's own generator is a counter (iss += tcp_ticks).
 */
#include "hooks.h"
#include "internal.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

uint64_t stk__siphash24(const uint8_t key[16], const void *data, size_t len);

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void sipround(uint64_t v[4])
{
	v[0] += v[1]; v[1] = ROTL(v[1], 13); v[1] ^= v[0]; v[0] = ROTL(v[0], 32);
	v[2] += v[3]; v[3] = ROTL(v[3], 16); v[3] ^= v[2];
	v[0] += v[3]; v[3] = ROTL(v[3], 21); v[3] ^= v[0];
	v[2] += v[1]; v[1] = ROTL(v[1], 17); v[1] ^= v[2]; v[2] = ROTL(v[2], 32);
}

/* SipHash-2-4 (Aumasson & Bernstein, 2012), written from the paper's description. */
uint64_t stk__siphash24(const uint8_t key[16], const void *data, size_t len)
{
	const uint8_t *in = data;
	uint64_t k0 = le64(key), k1 = le64(key + 8);
	uint64_t v[4] = {
		k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull,
		k0 ^ 0x6c7967656e657261ull, k1 ^ 0x7465646279746573ull,
	};
	size_t full = len & ~(size_t)7;
	uint64_t m, b = (uint64_t)len << 56;

	for (size_t i = 0; i < full; i += 8) {
		m = le64(in + i);
		v[3] ^= m;
		sipround(v);
		sipround(v);
		v[0] ^= m;
	}
	for (size_t i = 0; i < (len & 7); i++)
		b |= (uint64_t)in[full + i] << (8 * i);
	v[3] ^= b;
	sipround(v);
	sipround(v);
	v[0] ^= b;
	v[2] ^= 0xff;
	for (int i = 0; i < 4; i++)
		sipround(v);
	return v[0] ^ v[1] ^ v[2] ^ v[3];
}

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
	return (u32_t)(m + stk__siphash24(secret, id, n));
}
