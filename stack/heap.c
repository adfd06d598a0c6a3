/* lwIP's heap: blocks kept in size classes, so that frames reuse warm memory.
 *
 * lwIP allocates every pbuf, segment and pcb with mem_malloc, which is the C library's
 * malloc here (MEM_LIBC_MALLOC, lwipopts.h). A received frame is one pbuf of up to 1.5 KiB,
 * or up to 64 KiB with segmentation offload, and so is each segment a sender queues. glibc
 * gives the top of a heap back to the kernel when enough of it is free (trimming: brk or
 * madvise), and a stream's buffers come and go in exactly that pattern, so the next frame
 * faulted its pages in again. Measured (perf record -e page-faults, 8 streams, offload on):
 * 265,000 faults in 4 s, three quarters of them in the copy of a frame into its fresh
 * pbuf or of application data into a fresh segment; about one fault per 8 KiB received.
 *
 * Here a freed block of 512 bytes to 72 KiB goes onto its class's free list instead, and
 * the next allocation of that class takes it back, warm. What the lists hold is bounded
 * (HEAP_CACHE_MAX, per process); beyond it, and for other sizes, blocks go to the C
 * library. Classes are powers of two up to 4 KiB and multiples of 4 KiB above, so a
 * 64 KiB super-segment wastes at most 4 KiB of address space (and no resident memory:
 * untouched pages stay unfaulted).
 *
 * Only lwIP and our socket layer call these, all under the core lock, so the lists need no
 * lock of their own. A call without the core lock (none is known) still works: it
 * bypasses the lists, straight to the C library.
 */
#include "internal.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HEAP_CACHE_MAX (16u << 20)     /* bytes held on the free lists, per process */
#define SMALL_MAX 256u                  /* at or below: straight to malloc */
#define PAGE_CLASS_MAX (72u << 10)      /* the largest cached block */
#define NCLASSES (3u + PAGE_CLASS_MAX / 4096u)  /* 512, 1K, 2K, then 4K, 8K ... 72K */
#define UNCACHED 0xffu

/* Before every block: which class it belongs to. Sized to keep the block aligned for any
 * type, as malloc's are. */
struct blk {
	union {
		struct {
			uint32_t cls;
			uint32_t magic;
		} h;
		struct blk *next;       /* on a free list */
		max_align_t align;
	};
};

#define BLK_MAGIC 0x75686570u  /* "uhep" */

static struct {
	struct blk *free[NCLASSES];
	size_t cached;
} heap;

static unsigned class_of(size_t size)
{
	if (size <= SMALL_MAX || size > PAGE_CLASS_MAX)
		return UNCACHED;
	if (size <= 512)
		return 0;
	if (size <= 1024)
		return 1;
	if (size <= 2048)
		return 2;
	return 3 + (unsigned)((size - 1) / 4096);  /* 4K -> 3, 8K -> 4, ... 72K -> 20 */
}

static size_t class_size(unsigned cls)
{
	return cls < 3 ? (size_t)512 << cls : (size_t)(cls - 2) * 4096;
}

void *stk__heap_alloc(size_t size)
{
	unsigned cls = class_of(size);
	struct blk *b;

	if (cls != UNCACHED && stk__core_lock_mine() && heap.free[cls]) {
		b = heap.free[cls];
		heap.free[cls] = b->next;
		heap.cached -= class_size(cls);
	} else {
		size_t n = cls == UNCACHED ? size : class_size(cls);

		b = malloc(sizeof(*b) + n);
		if (!b)
			return NULL;
	}
	b->h.cls = cls;
	b->h.magic = BLK_MAGIC;
	return b + 1;
}

void *stk__heap_calloc(size_t n, size_t size)
{
	void *p;

	if (size && n > SIZE_MAX / size)
		return NULL;
	p = stk__heap_alloc(n * size);
	if (p)
		memset(p, 0, n * size);
	return p;
}

void stk__heap_free(void *p)
{
	struct blk *b;
	unsigned cls;

	if (!p)
		return;
	b = (struct blk *)p - 1;
	if (b->h.magic != BLK_MAGIC)
		stk__lwip_assert("heap block header intact", __FILE__, __LINE__);
	cls = b->h.cls;
	b->h.magic = 0;
	if (cls < NCLASSES && stk__core_lock_mine() && heap.cached + class_size(cls) <= HEAP_CACHE_MAX) {
		b->next = heap.free[cls];
		heap.free[cls] = b;
		heap.cached += class_size(cls);
		return;
	}
	free(b);
}

size_t stk__heap_cached(void)
{
	return heap.cached;
}
