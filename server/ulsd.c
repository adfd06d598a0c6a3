/* ulsd: the per-node daemon. It owns the node's TAP device, demultiplexes every received
 * frame to the one process whose endpoint it matches, and is the connection server for
 * setup and teardown (see internal.h for its two threads).
 *
 *   ulsd --tap IFNAME --ip A.B.C.D/NN [--ip6 ADDR/NN] [--mac MAC] [--gw A.B.C.D] [--mtu N]
 *        --ctl PATH [-f]
 *
 * -f keeps it in the foreground and logs to stderr; otherwise it detaches and logs to
 * syslog. SIGTERM or SIGINT stops it cleanly.
 */
#include "server/internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <net/if.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "netif/opt/opt.h"
#include "netif/frame.h"
#include "netif/wire/wire.h"

static bool foreground;

uint64_t srv__now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* SYN shedding's key (netif/synshed.c: the fingerprints of shed SYNs, the known peers'
 * sets), drawn at start with the other secrets, where a failing getrandom stops ulsd. */
static uint8_t shed_key[16];

static void shed_draw_key(uint8_t key[16])
{
	memcpy(key, shed_key, sizeof(shed_key));
}

/* Where ulsd's messages and the device's (nif_set_log) go. */
static void log_sink(int level, const char *msg)
{
	if (foreground)
		fprintf(stderr, "ulsd: %s\n", msg);
	else
		syslog(level == 0 ? LOG_ERR : level == 1 ? LOG_WARNING : LOG_INFO, "%s", msg);
}

void srv__log(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	nif_vlog(log_sink, level, fmt, ap);
	va_end(ap);
}

/* Offloads are on unless --offload; ULS_TSO=0 (the same variable that libuls reads, so one
 * variable switches a whole testbed) turns segmentation offload off and keeps checksum
 * offload (--offload csum), as `ethtool -K tso off gso off` leaves a NIC's. A build with
 * latency stamps keeps them off: its breakdown follows frames one ring slot each. */
static void offload_default(bool *offload, bool *csum_only)
{
#ifdef ULS_BREAKDOWN
	*offload = *csum_only = false;
#else
	const char *e = getenv("ULS_TSO");

	*offload = true;
	*csum_only = e && !strcmp(e, "0");
#endif
}

/* A ulsd that was just killed may still hold the TAP for a moment: the kernel tears down its
 * io_uring, whose reads in flight keep the device's file open, after the process has gone
 * (seen as "Device or resource busy" when tests/node restarts ulsd under load); so may its
 * processes' queues, and one that keeps the device on the other virtio-net header setting
 * would leave the node unable to send (netif/tun.c). A busy TAP is tried again for up to
 * TAP_BUSY_WAIT_MS before ulsd gives up: 3 s did not always do on a loaded machine. */
#define TAP_BUSY_WAIT_MS 10000
#define TAP_BUSY_STEP_MS 50

static int open_tap(struct nif_tap **tap, const struct nif_tap_config *tc)
{
	int rc = nif_tap_open(tap, tc);

	for (int waited = 0; rc == -EBUSY && waited < TAP_BUSY_WAIT_MS; waited += TAP_BUSY_STEP_MS) {
		if (waited == 0)
			fprintf(stderr, "ulsd: TAP %s is busy; waiting up to %d ms\n", tc->ifname,
				TAP_BUSY_WAIT_MS);
		usleep(TAP_BUSY_STEP_MS * 1000);
		rc = nif_tap_open(tap, tc);
	}
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: ulsd --tap IFNAME --ip A.B.C.D/NN [--ip6 ADDR/NN] [--mac MAC]\n"
		   "            [--gw A.B.C.D] [--gw6 ADDR] [--mtu N] [--offload on|csum|off]\n"
		   "            [--datapath auto|direct|relay]\n"
		   "            --ctl PATH [-f]\n");
}

/* --datapath, default from ULS_DATAPATH (so one variable switches a whole testbed: the
 * suites' relay passes set it), else auto: direct where it can be had, the relay where
 * not (docs/architecture.md, "Fallback"). */
static int parse_datapath(const char *v, enum srv_datapath *out)
{
	if (!strcmp(v, "auto"))
		*out = SRV_DP_AUTO;
	else if (!strcmp(v, "direct"))
		*out = SRV_DP_DIRECT;
	else if (!strcmp(v, "relay"))
		*out = SRV_DP_RELAY;
	else
		return -EINVAL;
	return 0;
}

/* --ip: A.B.C.D/NN (netif/opt/opt.c) with a unicast address the node can own: not 0.0.0.0,
 * loopback (RFC 1122 3.2.1.3 (g)), multicast or class E (RFC 1112 4). 0 or -EINVAL. */
static int parse_node_ip(const char *s, uint32_t *ip, unsigned *plen)
{
	struct in_addr a;
	unsigned p;

	if (opt__parse_cidr(s, &a, &p) < 0)
		return -EINVAL;
	uint32_t h = ntohl(a.s_addr);
	if (h == 0 || (h >> 24) == 127 || (h >> 28) >= 0xe)
		return -EINVAL;
	*ip = a.s_addr;
	*plen = p;
	return 0;
}

/* --ip6: ADDR/NN with a global or unique-local unicast address (RFC 4291 §2.4): not
 * the unspecified or loopback address, not multicast, not link-local (the node's
 * link-local address is derived from its MAC). NN 1..128. 0 or -EINVAL. */
static int parse_node_ip6(const char *s, uint8_t ip6[16], unsigned *plen)
{
	static const uint8_t loopback[16] = { [15] = 1 };
	char buf[INET6_ADDRSTRLEN + 8], *slash, *end;
	unsigned long p;

	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	slash = strchr(buf, '/');
	if (!slash)
		return -EINVAL;
	*slash = 0;
	errno = 0;
	p = strtoul(slash + 1, &end, 10);
	if (!slash[1] || *end || errno || p < 1 || p > 128)
		return -EINVAL;
	if (inet_pton(AF_INET6, buf, ip6) != 1 || wire_ipv6_is_unspecified(ip6) ||
	    !memcmp(ip6, loopback, 16) || wire_ipv6_is_multicast(ip6) ||
	    (ip6[0] == 0xfe && (ip6[1] & 0xc0) == 0x80))
		return -EINVAL;
	*plen = (unsigned)p;
	return 0;
}

/* --gw6: the node's default IPv6 router, which every process gets (ctl.c, ROUTER6) and
 * sends what is not on-link to (RFC 4861 §5.2). A router is a neighbour: a link-local
 * address (§8.3: hosts know routers by those), or one within the node's prefix (RFC 5942
 * §4: only that is on-link); never multicast, unspecified, loopback or v4-mapped, nor one
 * of the node's own addresses. NULL when it is good, else why not. */
static const char *check_gw6(struct srv *s, const char *arg)
{
	static const uint8_t loopback[16] = { [15] = 1 };
	static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };
	uint8_t a[16];

	if (!s->has_ip6)
		return "needs --ip6 (the node's IPv6 address)";
	if (inet_pton(AF_INET6, arg, a) != 1)
		return "expected an IPv6 address";
	if (wire_ipv6_is_unspecified(a) || wire_ipv6_is_multicast(a) || !memcmp(a, loopback, 16) ||
	    !memcmp(a, v4mapped, 12))
		return "expected a unicast IPv6 address";
	if (!memcmp(a, s->ip6, 16) || !memcmp(a, s->ip6_ll, 16))
		return "the node's own address cannot be its router";
	bool ll = a[0] == 0xfe && (a[1] & 0xc0) == 0x80;
	unsigned whole = s->ip6_plen / 8, rest = s->ip6_plen % 8;
	bool onlink = !memcmp(a, s->ip6, whole) &&
		(rest == 0 || ((a[whole] ^ s->ip6[whole]) & (uint8_t)(0xff00u >> rest)) == 0);
	if (!ll && !onlink)
		return "not on the link: expected a link-local address or one within --ip6's prefix";
	memcpy(s->gw6, a, 16);
	s->has_gw6 = true;
	return NULL;
}

/* The control socket: refuse to take over one a running ulsd still answers on. */
/* 0 if nobody answers on the control socket's path, -EADDRINUSE if another ulsd does. */
static int ctl_taken(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	memcpy(sun.sun_path, path, strlen(path));
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0) {
		close(fd);
		return -EADDRINUSE;
	}
	/* A socket file nobody listens on is a dead ulsd's: it goes now, not when this ulsd
	 * is ready to answer (open_ctl, seconds later at load: the BPF programs load
	 * first), so that whoever waits for the path to appear does not take it for ours
	 * and get ECONNREFUSED meanwhile (docs/deployment.md). */
	if (errno == ECONNREFUSED)
		unlink(path);
	close(fd);
	return 0;
}

static int open_ctl(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd;

	memcpy(sun.sun_path, path, strlen(path));   /* length checked by ctl_taken() */
	unlink(path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 || listen(fd, 128) < 0) {
		int err = -errno;
		close(fd);
		return err;
	}
	/* Any local user may run programs on the node; privileged ports still need root
	 * (ports.c, by SO_PEERCRED). */
	chmod(path, 0666);
	return fd;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "tap", required_argument, NULL, 't' }, { "ip", required_argument, NULL, 'i' },
		{ "mac", required_argument, NULL, 'm' }, { "gw", required_argument, NULL, 'g' },
		{ "mtu", required_argument, NULL, 'u' }, { "ctl", required_argument, NULL, 'c' },
		{ "foreground", no_argument, NULL, 'f' }, { "help", no_argument, NULL, 'h' },
		{ "offload", required_argument, NULL, 'o' },
		{ "datapath", required_argument, NULL, 'd' },
		{ "ip6", required_argument, NULL, '6' },
		{ "gw6", required_argument, NULL, 'G' },
		{ NULL, 0, NULL, 0 },
	};
	static struct srv s;
	bool have_ip = false, have_mac = false;
	const char *gw6_arg = NULL;
	uint64_t port_key[2];   /* RFC 6056 §3.3.3's secret key (ports.c) */
	unsigned mtu = 0;
	int c;

	pthread_mutex_init(&s.lock, NULL);
	pthread_mutex_init(&s.tx_lock, NULL);
	pthread_cond_init(&s.tx_released, NULL);
	s.datapath = SRV_DP_AUTO;
	offload_default(&s.offload, &s.csum_only);
	s.trace = getenv("ULSD_TRACE") && !strcmp(getenv("ULSD_TRACE"), "1");
	s.rx_mshot = !(getenv("ULSD_RX_MULTISHOT") && !strcmp(getenv("ULSD_RX_MULTISHOT"), "0"));
	if (getenv("ULS_DATAPATH") && *getenv("ULS_DATAPATH") &&
	    parse_datapath(getenv("ULS_DATAPATH"), &s.datapath) < 0) {
		fprintf(stderr, "ulsd: bad ULS_DATAPATH '%s': auto, direct or relay\n",
			getenv("ULS_DATAPATH"));
		return 2;
	}
	while ((c = getopt_long(argc, argv, "fh", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (strlen(optarg) >= sizeof(s.tap_name) || !*optarg) {
				fprintf(stderr, "ulsd: bad --tap '%s'\n", optarg);
				return 2;
			}
			strcpy(s.tap_name, optarg);
			break;
		case 'i':
			if (parse_node_ip(optarg, &s.ip, &s.prefix_len) < 0) {
				opt__bad("ulsd", "ip", optarg, "expected a unicast A.B.C.D/NN, NN 1..30");
				return 2;
			}
			have_ip = true;
			break;
		case '6':
			if (parse_node_ip6(optarg, s.ip6, &s.ip6_plen) < 0) {
				opt__bad("ulsd", "ip6", optarg,
					 "expected a global or unique-local ADDR/NN, NN 1..128");
				return 2;
			}
			s.has_ip6 = true;
			break;
		case 'm':
			if (!nif_mac_parse(optarg, s.mac) || (s.mac[0] & 1)) {
				fprintf(stderr, "ulsd: bad --mac '%s': expected a unicast aa:bb:cc:dd:ee:ff\n", optarg);
				return 2;
			}
			have_mac = true;
			break;
		case 'g': {
			struct in_addr a;
			if (inet_pton(AF_INET, optarg, &a) != 1) {
				fprintf(stderr, "ulsd: bad --gw '%s'\n", optarg);
				return 2;
			}
			s.gw = a.s_addr;
			break;
		}
		case 'G':
			/* Checked once --ip6 and the MAC are known (check_gw6). */
			gw6_arg = optarg;
			break;
		case 'u':
			if (opt__uint("ulsd", "mtu", optarg, NIF_MTU_MIN, NIF_MTU_MAX, &mtu) < 0)
				return 2;
			break;
		case 'c':
			s.ctl_path = optarg;
			break;
		case 'o':
			static const char *const modes[] = { "on", "csum", "off" };
			int w = opt__word("ulsd", "offload", optarg, modes, 3);
			if (w < 0)
				return 2;
			s.offload = w != 2;
			s.csum_only = w == 1;
			break;
		case 'd':
			if (parse_datapath(optarg, &s.datapath) < 0) {
				opt__bad("ulsd", "datapath", optarg, "auto, direct or relay");
				return 2;
			}
			break;
		case 'f':
			foreground = true;
			break;
		default:
			return opt__help_or_bad(c, usage);
		}
	}
	if (optind != argc || !s.tap_name[0] || !have_ip || !s.ctl_path) {
		usage(stderr);
		return 2;
	}
#ifdef ULS_BREAKDOWN
	if (s.offload) {
		fprintf(stderr, "ulsd: --offload on or csum needs a build without --enable-breakdown\n");
		return 2;
	}
#endif
	if (!have_mac) {
		uint32_t a = ntohl(s.ip);
		uint8_t m[6] = { 0x02, 0x75, 0x6c, (uint8_t)(a >> 16), (uint8_t)(a >> 8), (uint8_t)a };
		memcpy(s.mac, m, 6);
	}
	/* RFC 4862 §5.3 / RFC 4291 §2.5.6: the link-local address every IPv6 interface has.
	 * Both addresses go through duplicate address detection once the threads run
	 * (reply6.c, srv__dad_start below). */
	if (s.has_ip6)
		wire_ipv6_link_local(s.ip6_ll, s.mac);
	if (gw6_arg) {
		const char *why = check_gw6(&s, gw6_arg);
		if (why) {
			opt__bad("ulsd", "gw6", gw6_arg, why);
			return 2;
		}
	}
	if (getrandom(s.isn_secret, sizeof(s.isn_secret), 0) != (ssize_t)sizeof(s.isn_secret) ||
	    getrandom(port_key, sizeof(port_key), 0) != (ssize_t)sizeof(port_key) ||
	    getrandom(shed_key, sizeof(shed_key), 0) != (ssize_t)sizeof(shed_key)) {
		fprintf(stderr, "ulsd: getrandom: %s\n", strerror(errno));
		return 1;
	}
	nif_synshed_init(&s.shed, srv__now_ms, shed_draw_key,
			 getenv("ULS_SYN_SHED") && !strcmp(getenv("ULS_SYN_SHED"), "0"));
	if (!foreground)
		openlog("ulsd", LOG_PID, LOG_DAEMON);
	nif_set_log(log_sink);

	struct nif_tap_config tc = { .ifname = s.tap_name, .mtu = (unsigned)mtu,
				     .offload = s.offload, .csum_only = s.csum_only };
	int rc = open_tap(&s.tap, &tc);
	if (rc < 0) {
		fprintf(stderr, "ulsd: cannot open TAP %s: %s\n", s.tap_name, strerror(-rc));
		return 1;
	}
	s.mtu = nif_tap_mtu(s.tap);
	s.tap_index = if_nametoindex(s.tap_name);
	s.flt = flt_table_new();
	if (s.flt && s.has_ip6)
		flt_table_set_node_ip6(s.flt, s.ip6, s.ip6_ll);  /* processes may send from them */
	s.ports = s.flt ? srv__ports_new(s.flt, &s.custody, port_key) : NULL;
	if (!s.ports || srv__reass_init(&s) < 0) {
		fprintf(stderr, "ulsd: out of memory\n");
		return 1;
	}
	rc = ctl_taken(s.ctl_path);
	if (!s.flt || rc < 0) {
		fprintf(stderr, "ulsd: control socket %s: %s\n", s.ctl_path,
			rc == -EADDRINUSE ? "another ulsd answers there" : strerror(-rc));
		return 1;
	}
	if (s.datapath != SRV_DP_RELAY) {
		rc = srv__dp_init(&s);
		/* EAGAIN is transient: the verifier gives up on a program when a signal is
		 * pending, and libbpf's own retries can run out on a loaded machine (a ulsd
		 * restarted mid-run then served every process on the relay for good). */
		for (int tries = 0; rc == -EAGAIN && tries < 20; tries++) {
			usleep(100000);
			rc = srv__dp_init(&s);
		}
		if (rc < 0 && s.datapath == SRV_DP_DIRECT) {
			fprintf(stderr, "ulsd: --datapath direct: %s\n", strerror(-rc));
			return 1;
		}
		if (rc < 0)
			srv__log(1, "direct data path unavailable (%s): every process on the relay",
				strerror(-rc));
	}
	/* The control socket appears only now, when it is answered: loading the data path's
	 * program (srv__dp_init, the kernel's verifier in this thread) took 8-16 s on a machine
	 * at load 20-30 (0.5 s quiet), and a program or ulsstat that found the socket earlier
	 * waited on it past its 5 s (CALL_TIMEOUT_S in stack/lease.c) and failed. Whoever
	 * waits for ulsd (the testbed, the package test) waits for the socket. */
	int lfd = open_ctl(s.ctl_path);
	if (lfd < 0) {
		fprintf(stderr, "ulsd: control socket %s: %s\n", s.ctl_path, strerror(-lfd));
		return 1;
	}
	if (!foreground && daemon(0, 0) < 0) {
		fprintf(stderr, "ulsd: daemon: %s\n", strerror(errno));
		return 1;
	}
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);

	srv__dad_start(&s);   /* before the threads: nobody else reads s yet */
	pthread_t demux;
	if (pthread_create(&demux, NULL, srv__demux_thread, &s) != 0) {
		fprintf(stderr, "ulsd: cannot start the demux thread\n");
		return 1;
	}
	pthread_setname_np(demux, "ulsd-demux");
	char ipbuf[INET_ADDRSTRLEN], ip6buf[INET6_ADDRSTRLEN];
	inet_ntop(AF_INET, &s.ip, ipbuf, sizeof(ipbuf));
	if (s.has_ip6) {
		inet_ntop(AF_INET6, s.ip6, ip6buf, sizeof(ip6buf));
		srv__log(2, "IPv6 %s/%u", ip6buf, s.ip6_plen);
	}
	srv__log(2, "node %s/%u on %s, MTU %u, control socket %s (%s, offload %s, data path %s)",
		ipbuf, s.prefix_len, s.tap_name, s.mtu, s.ctl_path,
		nif_tap_uses_io_uring(s.tap) ? "io_uring" : "read/write", !s.offload ? "off" : s.csum_only ? "csum" : "on",
		s.datapath == SRV_DP_RELAY ? "relay" : s.dp ? "direct" : "relay (no BPF)");
	rc = srv__ctl_run(&s, lfd);
	if (rc < 0)
		srv__log(0, "control thread: %s", strerror(-rc));
	srv__stop(&s);
	nif_tap_wake(s.tap);
	pthread_join(demux, NULL);
	close(lfd);
	unlink(s.ctl_path);
	srv__log(2, "stopped");
	return rc < 0 ? 1 : 0;
}
