/* SipHash-1-3 of two 64-bit words (Aumasson & Bernstein, "SipHash: a fast short-input PRF",
 * 2012; one compression round and three finalisation rounds, as the Linux kernel's hsiphash
 * and Rust's HashMap use for hash tables).
 *
 * One definition for both sides of the filter: ulsd's table (filter/table.c) and the
 * kernel's steering program (filter/datapath.bpf.c) must pick the same member of a shared
 * listening group bit for bit, so this header is compiled for the BPF target too and uses
 * only <linux/types.h>.
 */
#ifndef ULS_FILTER_SIPHASH_H
#define ULS_FILTER_SIPHASH_H

#include <linux/types.h>

#define FLT_SIP_ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))
#define FLT_SIPROUND                                                                   \
	do {                                                                           \
		v0 += v1; v1 = FLT_SIP_ROTL(v1, 13); v1 ^= v0; v0 = FLT_SIP_ROTL(v0, 32); \
		v2 += v3; v3 = FLT_SIP_ROTL(v3, 16); v3 ^= v2;                         \
		v0 += v3; v3 = FLT_SIP_ROTL(v3, 21); v3 ^= v0;                         \
		v2 += v1; v1 = FLT_SIP_ROTL(v1, 17); v1 ^= v2; v2 = FLT_SIP_ROTL(v2, 32); \
	} while (0)

static inline __u64 flt__siphash13(__u64 k0, __u64 k1, __u64 m0, __u64 m1)
{
	__u64 v0 = k0 ^ 0x736f6d6570736575ULL;
	__u64 v1 = k1 ^ 0x646f72616e646f6dULL;
	__u64 v2 = k0 ^ 0x6c7967656e657261ULL;
	__u64 v3 = k1 ^ 0x7465646279746573ULL;
	const __u64 b = (__u64)16 << 56;  /* message length in the last block */

	v3 ^= m0; FLT_SIPROUND; v0 ^= m0;
	v3 ^= m1; FLT_SIPROUND; v0 ^= m1;
	v3 ^= b; FLT_SIPROUND; v0 ^= b;
	v2 ^= 0xff;
	FLT_SIPROUND; FLT_SIPROUND; FLT_SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

#undef FLT_SIPROUND
#undef FLT_SIP_ROTL

/* A member's score in a listening group's rendezvous pick of a connection whose hash is h
 * (flt__group_pick; the steering program's pick_member): murmur3's 64-bit finaliser, a
 * cheap full-avalanche mix, of h and the member's id. */
static inline __u64 flt__pick_weight(__u64 h, __u64 member)
{
	__u64 k = h ^ (member * 0x9e3779b97f4a7c15ULL);

	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdULL;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ULL;
	k ^= k >> 33;
	return k;
}

#endif
