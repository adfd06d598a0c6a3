/* The shared connection table (netif/conntab.h): creation (ulsd), the seqlock's writer
 * (the process's stack) and reader (ulsd). */
#include "netif/conntab.h"
#include "netif/sys.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define READ_TRIES 8

int uls_conntab_create(uint32_t capacity, void **map)
{
	size_t len = uls_conntab_size(capacity);
	int fd = memfd_create("uls-conntab", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	int rc;

	if (fd < 0)
		return -errno;
	/* Sealed against shrinking: the process cannot make ulsd's mapping fault (SIGBUS). */
	if (ftruncate(fd, (off_t)len) < 0 ||
	    nif_sys.fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		rc = -errno;
		nif_sys.close(fd);
		return rc;
	}
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		rc = -errno;
		nif_sys.close(fd);
		return rc;
	}
	struct uls_conntab_hdr *h = p;
	h->magic = ULS_CONNTAB_MAGIC;
	h->version = ULS_CONNTAB_VERSION;
	h->entry_size = sizeof(struct uls_conntab_ent);
	h->capacity = capacity;
	*map = p;
	return fd;
}

int uls_conntab_check_header(const void *map, size_t len)
{
	const struct uls_conntab_hdr *h = map;

	if (len < sizeof(*h) || h->magic != ULS_CONNTAB_MAGIC ||
	    h->version != ULS_CONNTAB_VERSION || h->entry_size != sizeof(struct uls_conntab_ent) ||
	    uls_conntab_size(h->capacity) != len)
		return -EPROTO;
	return 0;
}

void uls_conntab_write_begin(struct uls_conntab_hdr *h)
{
	uint32_t s = __atomic_load_n(&h->seq, __ATOMIC_RELAXED);

	/* Odd: a reader that starts now, or was copying, retries. The fence keeps the
	 * entries' stores after this one. */
	__atomic_store_n(&h->seq, (s & 1u) ? s : s + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

void uls_conntab_write_end(struct uls_conntab_hdr *h, uint32_t count, uint32_t total,
			   uint64_t now_ns)
{
	/* ulsd reads these with atomic loads while we write (uls_conntab_snapshot): atomic
	 * stores too, or the pair is a data race (ThreadSanitizer, test_conntab) and a
	 * compiler may split a store; the seq store after them orders them. */
	__atomic_store_n(&h->count, count, __ATOMIC_RELAXED);
	__atomic_store_n(&h->total, total, __ATOMIC_RELAXED);
	__atomic_store_n(&h->published_ns, now_ns, __ATOMIC_RELAXED);
	uint32_t s = __atomic_load_n(&h->seq, __ATOMIC_RELAXED);
	__atomic_store_n(&h->seq, s + 1, __ATOMIC_RELEASE);  /* even again */
}

int uls_conntab_snapshot(const void *map, uint32_t capacity, struct uls_conntab_ent *out,
			 uint32_t *count, uint32_t *total, uint64_t *published_ns)
{
	const struct uls_conntab_hdr *h = map;
	const struct uls_conntab_ent *ents = (const void *)(h + 1);

	/* What ulsd wrote at creation (uls_conntab_create) and the process only reads: a
	 * process that changed it writes a layout ulsd does not know. */
	if (__atomic_load_n(&h->magic, __ATOMIC_RELAXED) != ULS_CONNTAB_MAGIC ||
	    __atomic_load_n(&h->version, __ATOMIC_RELAXED) != ULS_CONNTAB_VERSION ||
	    __atomic_load_n(&h->entry_size, __ATOMIC_RELAXED) != sizeof(struct uls_conntab_ent))
		return ULS_CONNTAB_BAD_VERSION;
	if (__atomic_load_n(&h->capacity, __ATOMIC_RELAXED) != capacity)
		return ULS_CONNTAB_BAD_HEADER;
	for (int t = 0; t < READ_TRIES; t++) {
		uint32_t s1 = __atomic_load_n(&h->seq, __ATOMIC_ACQUIRE);
		if (s1 & 1u)
			continue;  /* (the writer takes microseconds; a few tries suffice) */
		/* The process may write anything at any time: read each header field once. */
		uint32_t n = __atomic_load_n(&h->count, __ATOMIC_RELAXED);
		uint32_t tot = __atomic_load_n(&h->total, __ATOMIC_RELAXED);
		uint64_t ns = __atomic_load_n(&h->published_ns, __ATOMIC_RELAXED);
		if (n > capacity)
			return ULS_CONNTAB_BAD_HEADER;
		memcpy(out, ents, (size_t)n * sizeof(*out));
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&h->seq, __ATOMIC_RELAXED) != s1)
			continue;
		*count = n;
		*total = tot < n ? n : tot;
		*published_ns = ns;
		return ULS_CONNTAB_OK;
	}
	return ULS_CONNTAB_TORN;
}

/* An address of the family: IPv4 v4-mapped and not 0.0.0.0; IPv6 not v4-mapped, not ::
 * (RFC 4291 §2.5.2) and not multicast (ff00::/8, §2.7): neither names one end of a TCP
 * connection (RFC 9293 §3.9.1.1 refuses a multicast remote). */
static bool addr_ok(uint8_t family, const uint8_t a[16])
{
	static const uint8_t zero[16];

	if (family == AF_INET)
		return ctl_addr_is_v4mapped(a) && ctl_addr_v4(a) != 0;
	return family == AF_INET6 && !ctl_addr_is_v4mapped(a) && memcmp(a, zero, 16) != 0 &&
	       a[0] != 0xff;
}

bool uls_conntab_ent_ok(const struct uls_conntab_ent *e)
{
	return e->state > ULS_TCP_LISTEN && e->state < ULS_TCP_STATE_COUNT && e->lport != 0 &&
	       e->rport != 0 && addr_ok(e->family, e->rip) && addr_ok(e->family, e->lip) &&
	       e->snd_wscale <= 14 && e->rcv_wscale <= 14 &&
	       (e->flags & ~(ULS_CONNTAB_F_TIMESTAMPS | ULS_CONNTAB_F_SACK | ULS_CONNTAB_F_WSCALE)) == 0;
}

const char *uls_tcp_state_name(unsigned state)
{
	static const char *const names[ULS_TCP_STATE_COUNT] = {
		"CLOSED", "LISTEN", "SYN-SENT", "SYN-RECEIVED", "ESTABLISHED", "FIN-WAIT-1",
		"FIN-WAIT-2", "CLOSE-WAIT", "CLOSING", "LAST-ACK", "TIME-WAIT",
	};

	return state < ULS_TCP_STATE_COUNT ? names[state] : "UNKNOWN";
}
