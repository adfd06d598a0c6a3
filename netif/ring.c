/* Shared-memory frame rings (see ring.h). */
#include "netif/ring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "netif/frame.h"
#include "netif/vnet.h"
#include "netif/sys.h"

/* A receive ring should hold a whole TCP window (4 MiB, stack/lwipopts.h) of full-size
 * frames: a process whose stack thread is descheduled for a moment then loses nothing,
 * and lwIP's loss recovery (without NewReno or SACK-based recovery, docs/limits.md) is
 * expensive. 4096 slots of 1536 bytes at MTU 1500 are 6 MiB; larger MTUs get fewer slots
 * within 24 MiB.
 *
 * The process makes its rings resident when it maps them (nif_ring_populate()): every
 * slot is a whole frame's size, so a stream of small frames (the ACKs coming back to a
 * sender, the ACKs a receiver sends) touches a new page every two or three frames until
 * its ring wraps, which at a few hundred ACKs a second takes many seconds. Measured with
 * 64 concurrent streams (perf record -e page-faults): 17,000 faults a second, in steady
 * state, in the ring copies of ulsd and of the stacks. Like the buffer pools other
 * user-level stacks set up front, this costs memory: 12 MiB per process at MTU 1500, up to
 * 37 MiB at jumbo MTUs. The process pays for it, in parallel with the others, not ulsd:
 * ulsd's control thread serves every lease in turn, and zeroing 37 MiB for each of 64
 * processes joining at once made the last ones time out at MTU 9000. ulsd's own mapping
 * then takes only minor faults (the pages exist), once per page. */
#define RING_BYTES_TARGET (24u << 20)  /* per ring, before rounding to a power of two */
#define RING_SLOTS_MIN 64u
#define RING_SLOTS_MAX 4096u

int nif_ring_layout(unsigned mtu, struct nif_ring_layout *out)
{
	if (mtu < NIF_MTU_MIN || mtu > NIF_MTU_MAX)
		return -EINVAL;
	uint32_t slot = (uint32_t)(sizeof(struct nif_ring_slot) + mtu + WIRE_ETH_HLEN + 63) & ~63u;
	uint32_t n = RING_SLOTS_MAX;
	while (n > RING_SLOTS_MIN && (size_t)n * slot > RING_BYTES_TARGET)
		n /= 2;
	out->nslots = n;
	out->slot_size = slot;
	out->ring_bytes = ((sizeof(struct nif_ring_hdr) + (size_t)n * slot) + 4095) & ~(size_t)4095;
	out->total = 2 * out->ring_bytes;
	return 0;
}

/* Fault a ring mapping's pages in for writing now, not on the data path. Best effort: a
 * kernel without MADV_POPULATE_WRITE (before 5.14), or memory pressure, leaves them to be
 * faulted in on first use. */
void nif_ring_populate(void *base, const struct nif_ring_layout *l)
{
#ifdef MADV_POPULATE_WRITE
	(void)madvise(base, l->total, MADV_POPULATE_WRITE);
#else
	(void)base;
	(void)l;
#endif
}

int nif_ring_create(const struct nif_ring_layout *l, int *memfd)
{
	int fd = memfd_create("uls-rings", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	void *base;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)l->total) < 0 ||
	    nif_sys.fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		int err = -errno;
		nif_sys.close(fd);
		return err;
	}
	base = mmap(NULL, l->total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		int err = -errno;
		nif_sys.close(fd);
		return err;
	}
	for (unsigned i = 0; i < 2; i++) {
		struct nif_ring_hdr *h = (struct nif_ring_hdr *)((uint8_t *)base + i * l->ring_bytes);
		h->magic = NIF_RING_MAGIC;
		h->version = NIF_RING_VERSION;
		h->nslots = l->nslots;
		h->slot_size = l->slot_size;
		/* ulsd drains transmit rings only when signalled, so it is always "asleep" for
		 * them: every publish signals (one eventfd write per batch, not per frame). */
		atomic_store(&h->sleeping, i == 1 ? 1u : 0u);
	}
	munmap(base, l->total);
	*memfd = fd;
	return 0;
}

int nif_ring_map(int memfd, const struct nif_ring_layout *l, void **out)
{
	void *base = mmap(NULL, l->total, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);

	if (base == MAP_FAILED)
		return -errno;
	for (unsigned i = 0; i < 2; i++) {
		const struct nif_ring_hdr *h =
			(const struct nif_ring_hdr *)((uint8_t *)base + i * l->ring_bytes);
		if (h->magic != NIF_RING_MAGIC || h->version != NIF_RING_VERSION ||
		    h->nslots != l->nslots || h->slot_size != l->slot_size) {
			munmap(base, l->total);
			return -EPROTO;
		}
	}
	*out = base;
	return 0;
}

void nif_ring_unmap(void *base, const struct nif_ring_layout *l)
{
	if (base)
		munmap(base, l->total);
}

void nif_ring_attach(struct nif_ring *r, void *base, const struct nif_ring_layout *l,
		     unsigned i, int efd, bool producer)
{
	uint8_t *p = (uint8_t *)base + i * l->ring_bytes;

	memset(r, 0, sizeof(*r));
	r->hdr = (struct nif_ring_hdr *)p;
	r->slots = p + sizeof(struct nif_ring_hdr);
	/* Sizes come from the layout both sides agreed on, never from shared memory. */
	r->nslots = l->nslots;
	r->slot_size = l->slot_size;
	/* A frame may take several slots, but never more than half the ring. */
	size_t one = l->slot_size - sizeof(struct nif_ring_slot);
	size_t half = (size_t)l->nslots / 2 * l->slot_size - sizeof(struct nif_ring_slot);
	size_t max = one > NIF_OFF_FRAME_MAX ? one : NIF_OFF_FRAME_MAX;
	r->data_max = (uint32_t)(max < half ? max : half);
	r->span = 1;
	r->efd = efd;
	r->local = atomic_load_explicit(producer ? &r->hdr->prod : &r->hdr->cons,
					memory_order_relaxed);
	r->published = r->local;
}

static struct nif_ring_slot *slot_at(const struct nif_ring *r, uint32_t idx)
{
	return (struct nif_ring_slot *)(r->slots + (size_t)(idx & (r->nslots - 1)) * r->slot_size);
}

/* Slots a frame of len bytes takes. */
static uint32_t span_of(const struct nif_ring *r, size_t len)
{
	return (uint32_t)((sizeof(struct nif_ring_slot) + len + r->slot_size - 1) / r->slot_size);
}

uint8_t *nif_ring_prod_slot(struct nif_ring *r, size_t len)
{
	uint32_t cons = atomic_load_explicit(&r->hdr->cons, memory_order_acquire);
	uint32_t used = r->local - cons;

	if (len > r->data_max)
		return NULL;
	uint32_t n = span_of(r, len), pos = r->local & (r->nslots - 1);
	uint32_t pad = pos + n > r->nslots ? r->nslots - pos : 0;
	/* A consumer that writes a wild index can make the ring look full or empty to us, but
	 * never make us write outside it: slot_at() masks the index, and a frame never runs
	 * past the last slot. */
	if (used > r->nslots || r->nslots - used < pad + n)
		return NULL;
	if (pad) {
		slot_at(r, r->local)->len = NIF_RING_PAD;
		r->local += pad;
	}
	return slot_at(r, r->local)->data;
}

void nif_ring_prod_commit(struct nif_ring *r, size_t len, uint32_t off)
{
	struct nif_ring_slot *s = slot_at(r, r->local);

	s->len = (uint32_t)len;
	s->offload = off;
	r->local += span_of(r, len);
}

bool nif_ring_prod_publish(struct nif_ring *r)
{
	if (r->local == r->published)
		return false;
	atomic_store_explicit(&r->hdr->prod, r->local, memory_order_release);
	r->published = r->local;
	/* Order the publish before reading `sleeping` (pairs with prepare_sleep). */
	atomic_thread_fence(memory_order_seq_cst);
	return atomic_load_explicit(&r->hdr->sleeping, memory_order_relaxed) != 0;
}

void nif_ring_signal(struct nif_ring *r)
{
	uint64_t one = 1;

	/* EAGAIN: the counter is already non-zero, a wake-up is pending anyway. */
	if (nif_sys.write(r->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		return;
}

const uint8_t *nif_ring_cons_peek(struct nif_ring *r, size_t *len, uint32_t *off,
				  uint64_t *bad)
{
	for (;;) {
		uint32_t prod = atomic_load_explicit(&r->hdr->prod, memory_order_acquire);
		uint32_t avail = prod - r->local;
		if (avail == 0 || avail > r->nslots)
			return NULL;  /* empty, or a producer index we cannot trust */
		struct nif_ring_slot *s = slot_at(r, r->local);
		/* The producer is the other side (for ulsd, a process it trusts for nothing),
		 * and may rewrite the slot while we look: its length and offload word are
		 * read once, atomically, into locals that alone are checked and used. A plain
		 * read let the compiler read s->len again after the bounds check (it does not
		 * today, objdump of -O2; nothing forbade it): a length changed in between
		 * would reach the caller unchecked. */
		uint32_t l = __atomic_load_n(&s->len, __ATOMIC_RELAXED);
		uint32_t pos = r->local & (r->nslots - 1);
		r->span = 1;
		if (l == NIF_RING_PAD && pos != 0 && r->nslots - pos <= avail) {
			r->span = r->nslots - pos;  /* the rest of the ring is padding */
			nif_ring_cons_release(r);
			continue;
		}
		if (l >= WIRE_ETH_HLEN && l <= r->data_max) {
			uint32_t n = span_of(r, l);
			if (n <= avail && pos + n <= r->nslots) {
				r->span = n;
				*len = l;
				*off = __atomic_load_n(&s->offload, __ATOMIC_RELAXED);
				return s->data;
			}
		}
		(*bad)++;
		nif_ring_cons_release(r);
	}
}

void nif_ring_cons_release(struct nif_ring *r)
{
	r->local += r->span;
	r->span = 1;
	atomic_store_explicit(&r->hdr->cons, r->local, memory_order_release);
}

bool nif_ring_cons_prepare_sleep(struct nif_ring *r)
{
	atomic_store_explicit(&r->hdr->sleeping, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&r->hdr->prod, memory_order_acquire) != r->local) {
		atomic_store_explicit(&r->hdr->sleeping, 0, memory_order_relaxed);
		return false;
	}
	return true;
}

bool nif_ring_cons_ready(const struct nif_ring *r)
{
	return atomic_load_explicit(&r->hdr->prod, memory_order_acquire) != r->local;
}

void nif_ring_cons_awake(struct nif_ring *r)
{
	atomic_store_explicit(&r->hdr->sleeping, 0, memory_order_relaxed);
}

#ifdef ULS_BREAKDOWN
uint64_t *nif_ring_stamps_at(struct nif_ring *r, uint32_t idx)
{
	return slot_at(r, idx)->stamp;
}

/* Acquire: the consumer wrote a slot's stamps before it released the slot. */
uint32_t nif_ring_prod_consumed(const struct nif_ring *r)
{
	return atomic_load_explicit(&r->hdr->cons, memory_order_acquire);
}
#endif
