/*
 * busyhash.c - busy areas found by their start in O(1): an open-addressing hash table per
 * node (linear probing, deletion by backward shift, so no tombstones).
 *
 * A slot is one 64-bit word: the block's object address shifted right by 4 (objects are
 * 16-byte aligned, and user addresses fit in 47 bits, so it takes 43 bits) and, above it,
 * the top 21 bits of the start's hash; 0 is empty. Those 21 bits give the entry's home slot
 * by multiply-shift range reduction (home = bits * cap >> 21), so the table may have any
 * size: it grows by 4/3 (three quarters full at most, 9/16 just after growing) where a
 * power of two doubled it (3/8 full just after), which cost up to 21 B per live range
 * where this costs at most 14 B. A deletion's backward shift and a growth's move read the
 * homes from the slots, never the objects. A probe reads an object only when the 21 bits
 * match, which an entry of another home never does (equal bits, equal home) and one of the
 * same home does about once in 2^21 / cap (a small table: almost never; near 2^21 slots, a
 * million busy areas in one node, a find reads about 0.2 other objects). Above 2^21 slots
 * homes are spaced cap / 2^21 apart, which linear probing fills like buckets of that many
 * slots. A block whose address does not fit 47 bits is refused
 * like one that finds the table full, and the caller keeps it in the busy tree alone. The
 * table is grown outside every lock (busy_hash_grow in node.c) once it is three quarters
 * full; under a lock an insert never allocates and refuses once it is 7/8 full.
 */
#include <stdlib.h>

#include "va_internal.h"

#define BH_PTR_BITS 43
#define BH_PTR_MASK ((1ull << BH_PTR_BITS) - 1)
#define BH_KEY_BITS (64 - BH_PTR_BITS)

/* The top BH_KEY_BITS of a multiplicative hash of the start in quanta. */
static inline uint64_t bh_key(uint64_t start, unsigned qshift)
{
	return ((start >> qshift) * 0x9e3779b97f4a7c15ull) >> BH_PTR_BITS;
}

/* Home slot of a key: multiply-shift range reduction onto [0, cap). */
static inline uint32_t bh_home(const struct va_busy_hash *h, uint64_t key)
{
	return (uint32_t)((key * h->cap) >> BH_KEY_BITS);
}

static inline uint32_t bh_step(const struct va_busy_hash *h, uint32_t i)
{
	return i + 1 == h->cap ? 0 : i + 1;
}

static inline struct va_block *bh_blk(uint64_t e)
{
	return (struct va_block *)(uintptr_t)((e & BH_PTR_MASK) << 4);
}

/* Enter a slot word (the caller checked the count) at the first empty slot from its home. */
static inline void bh_put(struct va_busy_hash *h, uint64_t e)
{
	uint32_t i;

	for (i = bh_home(h, e >> BH_PTR_BITS); h->slot[i]; i = bh_step(h, i))
		;
	h->slot[i] = e;
	h->count++;
}

bool bh_insert(struct va_busy_hash *h, struct va_block *b, unsigned qshift)
{
	uint64_t p = (uint64_t)(uintptr_t)b;

	if (h->count >= h->limit || (p >> 4) > BH_PTR_MASK || (p & 15))
		return false;
	bh_put(h, bh_key(b->start, qshift) << BH_PTR_BITS | p >> 4);
	atomic_store_explicit(&h->count_pub, h->count, memory_order_relaxed);
	return true;
}

void bh_prefetch(const struct va_busy_hash *h, uint64_t start, unsigned qshift)
{
	if (h->cap)
		__builtin_prefetch(&h->slot[bh_home(h, bh_key(start, qshift))], 1);
}

void bh_prefetch_block(const struct va_busy_hash *h, uint64_t start, unsigned qshift)
{
	uint64_t key = bh_key(start, qshift), e;
	uint32_t i;

	if (!h->cap)
		return;
	for (i = bh_home(h, key); (e = h->slot[i]); i = bh_step(h, i))
		if (e >> BH_PTR_BITS == key) {
			/* a 48-byte record may straddle two lines: fetch both ends */
			__builtin_prefetch(bh_blk(e), 1);
			__builtin_prefetch((const char *)bh_blk(e) + sizeof(struct va_block) - 1,
					   1);
			return;
		}
}

struct va_block *bh_find(struct va_busy_hash *h, uint64_t start, unsigned qshift)
{
	uint64_t key = bh_key(start, qshift), e;
	uint32_t i;

	if (!h->cap)
		return NULL;
	for (i = bh_home(h, key); (e = h->slot[i]); i = bh_step(h, i))
		if (e >> BH_PTR_BITS == key && bh_blk(e)->start == start) {
			h->found = i;
			return bh_blk(e);
		}
	return NULL;
}

/* Empty slot i, then move back every entry after it that its probe may no longer reach
 * (Knuth's deletion for linear probing); homes come from the slots. */
static void bh_delete_slot(struct va_busy_hash *h, uint32_t i)
{
	uint32_t j = i;
	uint64_t e;

	for (;;) {
		j = bh_step(h, j);
		e = h->slot[j];
		if (!e)
			break;
		uint32_t home = bh_home(h, e >> BH_PTR_BITS);

		/* j's entry stays unless its home lies cyclically in (i, j] */
		if (i <= j ? (home > i && home <= j) : (home > i || home <= j))
			continue;
		h->slot[i] = e;
		i = j;
	}
	h->slot[i] = 0;
	h->count--;
	atomic_store_explicit(&h->count_pub, h->count, memory_order_relaxed);
}

void bh_remove(struct va_busy_hash *h, const struct va_block *b, unsigned qshift)
{
	uint64_t want = (uint64_t)(uintptr_t)b >> 4;
	uint32_t i = h->found;

	/* a free has just found b (the record keeps no slot: 4 bytes it has no room for); else
	 * b is there, and the probe from its home reaches it */
	if (i >= h->cap || (h->slot[i] & BH_PTR_MASK) != want)
		for (i = bh_home(h, bh_key(b->start, qshift)); (h->slot[i] & BH_PTR_MASK) != want;
		     i = bh_step(h, i))
			;
	bh_delete_slot(h, i);
}

struct va_block *bh_at(const struct va_busy_hash *h, uint32_t i)
{
	return h->slot[i] ? bh_blk(h->slot[i]) : NULL;
}

bool bh_wants_grow(const struct va_busy_hash *h, size_t extra)
{
	uint64_t count = atomic_load_explicit(&h->count_pub, memory_order_relaxed);
	uint32_t cap = atomic_load_explicit(&h->cap_pub, memory_order_relaxed);

	return (count + extra + 1) * 4 > (uint64_t)cap * 3 && cap < (1u << 31);
}

uint32_t bh_grown_cap(uint64_t count)
{
	/* 9/16 full just after a growth, so growth is by 4/3 from three quarters full */
	uint64_t cap = count * 16 / 9 + 1;

	if (cap < 64)
		cap = 64;
	return cap > (1u << 31) ? 1u << 31 : (uint32_t)cap;
}

int bh_alloc(struct va_busy_hash *t, uint32_t cap)
{
	t->slot = calloc(cap, sizeof(*t->slot));
	if (!t->slot)
		return VA_ENOMEM;
	t->cap = cap;
	t->limit = (uint32_t)((uint64_t)cap * 7 / 8);
	t->count = 0;
	atomic_store_explicit(&t->count_pub, 0, memory_order_relaxed);
	atomic_store_explicit(&t->cap_pub, cap, memory_order_relaxed);
	return 0;
}

void bh_move(struct va_busy_hash *h, struct va_busy_hash *fresh, unsigned qshift)
{
	struct va_busy_hash old = *h;

	(void)qshift;
	/* the keys are in the slots: no object is read */
	for (uint32_t i = 0; i < old.cap; i++)
		if (old.slot[i])
			bh_put(fresh, old.slot[i]);
	h->slot = fresh->slot;
	h->cap = fresh->cap;
	h->limit = fresh->limit;
	h->count = fresh->count;
	atomic_store_explicit(&h->count_pub, h->count, memory_order_relaxed);
	atomic_store_explicit(&h->cap_pub, h->cap, memory_order_relaxed);
	fresh->slot = old.slot;
	fresh->cap = old.cap;
	fresh->limit = old.limit;
}

void bh_free(struct va_busy_hash *h)
{
	free(h->slot);
	h->slot = NULL;
	h->cap = 0;
	h->limit = 0;
	h->count = 0;
}

uint64_t bh_bytes(const struct va_busy_hash *h)
{
	return (uint64_t)h->cap * sizeof(*h->slot);
}
