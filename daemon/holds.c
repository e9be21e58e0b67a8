/* holds.c - a holder's open-addressing table of holds (linear probing); see registry.h. */
#include "registry_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Smallest table: a session's first. */
#define TABLE_MIN 16

struct vad_hold *slot_find_from(struct vad_holder *h, uint64_t hv, uint64_t arena, uint64_t offset)
{
	if (!h->cap)
		return NULL;
	size_t mask = h->cap - 1;
	for (size_t i = slot_home(h, hv);; i = (i + 1) & mask) {
		struct vad_hold *o = &h->holds[i];
		if (!o->range)
			return NULL; /* load <= 1/2: an empty slot always ends the probe */
		if (o->offset == offset && o->arena == arena)
			return o;
	}
}

struct vad_hold *vad_holder_find(struct vad_holder *h, unsigned arena, uint64_t offset)
{
	return h->cap ? slot_find_from(h, vad_hold_hash(arena, offset), arena, offset) : NULL;
}

/* Put a key known to be absent into the first free slot of its probe sequence. */
struct vad_hold *slot_insert_at(struct vad_holder *h, uint64_t hv, uint64_t arena, uint64_t offset)
{
	size_t mask = h->cap - 1, i = slot_home(h, hv);
	while (h->holds[i].range)
		i = (i + 1) & mask;
	struct vad_hold *o = &h->holds[i];
	o->arena = arena;
	o->offset = offset;
	o->count = 0;
	o->rec = 0;
	o->hash = (uint32_t)hv;
	h->used++;
	return o;
}

struct vad_hold *slot_insert(struct vad_holder *h, uint64_t arena, uint64_t offset)
{
	return slot_insert_at(h, vad_hold_hash(arena, offset), arena, offset);
}

/* Empty slot o by backward shift: each later entry of the cluster whose home does not lie
 * cyclically after the hole moves into it, so probes never need tombstones. */
void slot_delete(struct vad_holder *h, struct vad_hold *o)
{
	size_t mask = h->cap - 1, hole = (size_t)(o - h->holds), j = hole;
	for (;;) {
		j = (j + 1) & mask;
		struct vad_hold *next = &h->holds[j];
		if (!next->range)
			break;
		size_t home = slot_home(h, slot_hash(h, next));
		/* next may fill the hole iff the hole lies within [home, j) cyclically. */
		if (((j - home) & mask) >= ((j - hole) & mask)) {
			h->holds[hole] = *next;
			hole = j;
		}
	}
	h->holds[hole].range = NULL;
	h->used--;
}

/* A zeroed table of cap slots, or NULL. */
static struct vad_hold *table_alloc(size_t cap)
{
	struct vad_hold *t = aligned_alloc(64, cap * sizeof(*t));
	if (t)
		memset(t, 0, cap * sizeof(*t));
	return t;
}

/* Smallest table size holding n entries at load at most 1/4 (so that a fresh table takes
 * twice its entries before it grows again). */
static size_t table_size_for(size_t n)
{
	size_t cap = TABLE_MIN;
	while (cap / 4 < n)
		cap *= 2;
	return cap;
}

/* Move h's entries into the empty table fresh of cap slots, with h's lock held. Returns the
 * old table (free it after unlocking). */
struct vad_hold *table_swap_locked(struct vad_holder *h, struct vad_hold *fresh, size_t cap)
{
	struct vad_hold *old = h->holds;
	size_t old_cap = h->cap;
	h->holds = fresh;
	h->cap = cap;
	h->used = 0;
	for (size_t i = 0; i < old_cap; i++) {
		if (!old[i].range)
			continue;
		/* h has the new size already: the old 32 bits serve unless it is bigger */
		struct vad_hold *o =
		    slot_insert_at(h, slot_hash(h, &old[i]), old[i].arena, old[i].offset);
		o->count = old[i].count;
		o->range = old[i].range;
		o->rec = old[i].rec;
	}
	return old;
}

/* A table for h to switch to before adding extra entries, allocated without any lock (only
 * the owner thread changes h->used, so it is stable here). Returns 0 with *fresh NULL when
 * the current table suffices, 0 with *fresh and *cap set, or -1 when out of memory. */
int table_prepare(const struct vad_holder *h, size_t extra, struct vad_hold **fresh, size_t *cap)
{
	*fresh = NULL;
	if (extra > SIZE_MAX / 8 - h->used)
		return -1;
	if ((h->used + extra) * 2 <= h->cap)
		return 0;
	/* Double (or more, for a big batch) up to load 1/2: a table that was full at 1/2 is then
	 * at 1/4. Sizing for 1/4 from the new count instead quadrupled a table just past half
	 * full: a million holds in 4M slots of 32 bytes, 128 bytes per hold. */
	*cap = h->cap ? h->cap * 2 : TABLE_MIN;
	while (*cap / 2 < h->used + extra)
		*cap *= 2;
	if (*cap > SIZE_MAX / sizeof(struct vad_hold))
		return -1;
	*fresh = table_alloc(*cap);
	return *fresh ? 0 : -1;
}

/* Give memory back once h's table is big and mostly empty (below 1/8): a smaller table is
 * built without the lock and swapped in under it. Never below VAD_HOLDS_KEEP_SLOTS, so a
 * session whose holdings swing between none and a few thousand (a pipelined burst of allocs,
 * then their frees) keeps its table instead of shrinking and growing it every burst. Owner
 * thread, no lock held. When memory is short the big table simply stays. */
void table_maybe_shrink(struct vad_holder *h)
{
	if (h->cap <= VAD_HOLDS_KEEP_SLOTS || h->used >= h->cap / 8)
		return;
	size_t cap = table_size_for(h->used);
	if (cap < VAD_HOLDS_KEEP_SLOTS)
		cap = VAD_HOLDS_KEEP_SLOTS;
	struct vad_hold *fresh = table_alloc(cap), *old;
	if (!fresh)
		return;
	pthread_mutex_lock(&h->lock);
	old = table_swap_locked(h, fresh, cap);
	pthread_mutex_unlock(&h->lock);
	free(old);
}

void vad_holder_for_each(struct vad_holder *h, void (*fn)(void *ctx, const struct vad_hold *o),
			 void *ctx)
{
	for (size_t i = 0; i < h->cap; i++)
		if (h->holds[i].range)
			fn(ctx, &h->holds[i]);
}

size_t vad_holder_count(const struct vad_holder *h)
{
	return h->used;
}

size_t vad_holder_capacity(const struct vad_holder *h)
{
	return h->cap;
}
