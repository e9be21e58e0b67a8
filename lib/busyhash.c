/*
 * busyhash.c - busy areas found by their start in O(1): an open-addressing hash table per
 * node (linear probing, deletion by backward shift, so no tombstones).
 *
 * A slot is one 64-bit word: the block's object address shifted right by 6 (objects are
 * 64-byte aligned, and user addresses fit in 48 bits, so it takes 42 bits) and a 22-bit tag
 * from the start's hash above it; 0 is empty. A probe reads an object only when the tag
 * matches (one in four million otherwise). A block whose address does not fit 48 bits is
 * refused like one that finds the table full, and the caller keeps it in the busy tree
 * alone. The table is grown outside every lock (busy_hash_grow in node.c) once it is three
 * quarters full; under a lock an insert never allocates and refuses once it is 7/8 full.
 */
#include <stdlib.h>

#include "va_internal.h"

#define BH_PTR_BITS 42
#define BH_PTR_MASK ((1ull << BH_PTR_BITS) - 1)
#define BH_TAG_MASK ((1ull << (64 - BH_PTR_BITS)) - 1)

/* Multiplicative hash of the start in quanta: the slot from the top bits, the tag from the
 * low bits (a bijection mod 2^22 of consecutive starts). */
static inline uint64_t bh_mix(uint64_t start, unsigned qshift)
{
	return (start >> qshift) * 0x9e3779b97f4a7c15ull;
}

static inline uint32_t bh_slot(const struct va_busy_hash *h, uint64_t mix)
{
	return (uint32_t)(mix >> (64 - h->shift_bits));
}

static inline uint64_t bh_tag(uint64_t mix)
{
	return (mix & BH_TAG_MASK) << BH_PTR_BITS;
}

static inline struct va_block *bh_blk(uint64_t e)
{
	return (struct va_block *)(uintptr_t)((e & BH_PTR_MASK) << 6);
}

bool bh_insert(struct va_busy_hash *h, struct va_block *b, unsigned qshift)
{
	uint64_t mix = bh_mix(b->start, qshift), p = (uint64_t)(uintptr_t)b;
	uint32_t mask, i;

	if (h->count >= h->limit || (p >> 6) > BH_PTR_MASK || (p & 63))
		return false;
	mask = h->cap - 1;
	for (i = bh_slot(h, mix); h->slot[i]; i = (i + 1) & mask)
		;
	h->slot[i] = bh_tag(mix) | (p >> 6);
	b->slot = i;
	h->count++;
	atomic_store_explicit(&h->count_pub, h->count, memory_order_relaxed);
	return true;
}

void bh_prefetch(const struct va_busy_hash *h, uint64_t start, unsigned qshift)
{
	if (h->cap)
		__builtin_prefetch(&h->slot[bh_slot(h, bh_mix(start, qshift))], 1);
}

struct va_block *bh_find(const struct va_busy_hash *h, uint64_t start, unsigned qshift)
{
	uint64_t mix = bh_mix(start, qshift), tag = bh_tag(mix), e;
	uint32_t mask, i;

	if (!h->cap)
		return NULL;
	mask = h->cap - 1;
	for (i = bh_slot(h, mix); (e = h->slot[i]); i = (i + 1) & mask)
		if ((e & ~BH_PTR_MASK) == tag && bh_blk(e)->start == start)
			return bh_blk(e);
	return NULL;
}

/* Empty slot i, then move back every entry after it that its probe may no longer reach
 * (Knuth's deletion for linear probing). */
static void bh_delete_slot(struct va_busy_hash *h, uint32_t i, unsigned qshift)
{
	uint32_t mask = h->cap - 1, j = i;
	uint64_t e;

	for (;;) {
		j = (j + 1) & mask;
		e = h->slot[j];
		if (!e)
			break;
		uint32_t home = bh_slot(h, bh_mix(bh_blk(e)->start, qshift));

		/* j's entry stays unless its home lies cyclically in (i, j] */
		if (i <= j ? (home > i && home <= j) : (home > i || home <= j))
			continue;
		h->slot[i] = e;
		bh_blk(e)->slot = i;
		i = j;
	}
	h->slot[i] = 0;
	h->count--;
	atomic_store_explicit(&h->count_pub, h->count, memory_order_relaxed);
}

void bh_remove(struct va_busy_hash *h, const struct va_block *b, unsigned qshift)
{
	bh_delete_slot(h, b->slot, qshift);
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

int bh_alloc(struct va_busy_hash *t, uint32_t cap)
{
	t->slot = calloc(cap, sizeof(*t->slot));
	if (!t->slot)
		return VA_ENOMEM;
	t->cap = cap;
	t->limit = cap / 8 * 7;
	t->shift_bits = (unsigned)__builtin_ctz(cap);
	t->count = 0;
	atomic_store_explicit(&t->count_pub, 0, memory_order_relaxed);
	atomic_store_explicit(&t->cap_pub, cap, memory_order_relaxed);
	return 0;
}

void bh_move(struct va_busy_hash *h, struct va_busy_hash *fresh, unsigned qshift)
{
	struct va_busy_hash old = *h;

	for (uint32_t i = 0; i < old.cap; i++)
		if (old.slot[i])
			bh_insert(fresh, bh_blk(old.slot[i]), qshift);
	h->slot = fresh->slot;
	h->cap = fresh->cap;
	h->limit = fresh->limit;
	h->shift_bits = fresh->shift_bits;
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
