/*
 * busyhash.c - busy areas found by their start in O(1): an open-addressing hash table per
 * node (linear probing, deletion by backward shift, so no tombstones).
 *
 * A slot is a 16-bit tag (0: empty) in one array and the block's object in another, so a
 * probe scans tags, two bytes each, and reads an object only when the tag matches. The
 * table is grown outside every lock (busy_hash_grow in node.c) once it is three quarters
 * full; under a lock an insert never allocates and refuses only when the table is 7/8
 * full or has no slots yet, and the caller then keeps the block in the busy tree alone.
 */
#include <stdlib.h>

#include "va_internal.h"

/* Multiplicative hash of the start in quanta: the slot from the top bits, the tag from
 * the low 16 bits (a bijection mod 2^16 of consecutive starts), never 0. */
static inline uint64_t bh_mix(uint64_t start, unsigned qshift)
{
	return (start >> qshift) * 0x9e3779b97f4a7c15ull;
}

static inline uint32_t bh_slot(const struct va_busy_hash *h, uint64_t mix)
{
	return (uint32_t)(mix >> (64 - h->shift_bits));
}

static inline uint16_t bh_tag(uint64_t mix)
{
	uint16_t t = (uint16_t)mix;

	return t ? t : 1;
}

bool bh_insert(struct va_busy_hash *h, struct va_block *b, unsigned qshift)
{
	uint64_t mix = bh_mix(b->start, qshift);
	uint32_t mask, i;

	if (h->count >= h->limit)
		return false;
	mask = h->cap - 1;
	for (i = bh_slot(h, mix); h->tag[i]; i = (i + 1) & mask)
		;
	h->tag[i] = bh_tag(mix);
	h->blk[i] = b;
	b->slot = i;
	h->count++;
	atomic_store_explicit(&h->count_pub, h->count, memory_order_relaxed);
	return true;
}

struct va_block *bh_find(const struct va_busy_hash *h, uint64_t start, unsigned qshift)
{
	uint64_t mix = bh_mix(start, qshift);
	uint16_t tag = bh_tag(mix);
	uint32_t mask, i;

	if (!h->cap)
		return NULL;
	mask = h->cap - 1;
	for (i = bh_slot(h, mix); h->tag[i]; i = (i + 1) & mask)
		if (h->tag[i] == tag && h->blk[i]->start == start)
			return h->blk[i];
	return NULL;
}

/* Empty slot i, then move back every entry after it that its probe may no longer reach
 * (Knuth's deletion for linear probing). */
static void bh_delete_slot(struct va_busy_hash *h, uint32_t i, unsigned qshift)
{
	uint32_t mask = h->cap - 1, j = i;

	for (;;) {
		j = (j + 1) & mask;
		if (!h->tag[j])
			break;
		uint32_t home = bh_slot(h, bh_mix(h->blk[j]->start, qshift));

		/* j's entry stays unless its home lies cyclically in (i, j] */
		if (i <= j ? (home > i && home <= j) : (home > i || home <= j))
			continue;
		h->tag[i] = h->tag[j];
		h->blk[i] = h->blk[j];
		h->blk[i]->slot = i;
		i = j;
	}
	h->tag[i] = 0;
	h->blk[i] = NULL;
	h->count--;
	atomic_store_explicit(&h->count_pub, h->count, memory_order_relaxed);
}

void bh_remove(struct va_busy_hash *h, const struct va_block *b, unsigned qshift)
{
	bh_delete_slot(h, b->slot, qshift);
}

bool bh_wants_grow(const struct va_busy_hash *h, size_t extra)
{
	uint64_t count = atomic_load_explicit(&h->count_pub, memory_order_relaxed);
	uint32_t cap = atomic_load_explicit(&h->cap_pub, memory_order_relaxed);

	return (count + extra + 1) * 4 > (uint64_t)cap * 3 && cap < (1u << 31);
}

int bh_alloc(struct va_busy_hash *t, uint32_t cap)
{
	t->tag = calloc(cap, sizeof(*t->tag));
	t->blk = calloc(cap, sizeof(*t->blk));
	if (!t->tag || !t->blk) {
		free(t->tag);
		free(t->blk);
		t->tag = NULL;
		t->blk = NULL;
		return VA_ENOMEM;
	}
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
		if (old.tag[i])
			bh_insert(fresh, old.blk[i], qshift);
	h->tag = fresh->tag;
	h->blk = fresh->blk;
	h->cap = fresh->cap;
	h->limit = fresh->limit;
	h->shift_bits = fresh->shift_bits;
	h->count = fresh->count;
	atomic_store_explicit(&h->count_pub, h->count, memory_order_relaxed);
	atomic_store_explicit(&h->cap_pub, h->cap, memory_order_relaxed);
	fresh->tag = old.tag;
	fresh->blk = old.blk;
	fresh->cap = old.cap;
	fresh->limit = old.limit;
}

void bh_free(struct va_busy_hash *h)
{
	free(h->tag);
	free(h->blk);
	h->tag = NULL;
	h->blk = NULL;
	h->cap = 0;
	h->limit = 0;
	h->count = 0;
}

uint64_t bh_bytes(const struct va_busy_hash *h)
{
	return (uint64_t)h->cap * (sizeof(*h->tag) + sizeof(*h->blk));
}
