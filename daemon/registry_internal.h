/*
 * registry_internal.h - what the registry's own files share (registry.c, range_cache.c,
 * holds.c, quotas.c, reaper.c, tokens.c, registry_check.c, registry_owners.c); nothing else
 * includes it.
 * The lock order and the rules on who writes what are in registry.h.
 */
#ifndef VAD_REGISTRY_INTERNAL_H
#define VAD_REGISTRY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "registry.h"
#include "state.h"

/* References dropped per holder lock hold in a batch, and ranges per va_free_batch. */
#define RELEASE_CHUNK 64

/* ---- a holder's table (holds.c) ---- */

/* Put a key known to be absent into h's table (room made beforehand); count 0, no range. */
struct vad_hold *slot_insert(struct vad_holder *h, uint64_t arena, uint64_t offset);

/* Empty slot o of h's table (backward shift: other slots move). */
void slot_delete(struct vad_holder *h, struct vad_hold *o);

/* Ranges of a batch whose table slots and state records are loaded together: one at a time,
 * each range's were cache misses in a row; started together they overlap. */
#define BATCH_AHEAD 64

/* The index where a key of hash hv (vad_hold_hash)'s probe starts in h's table (which has
 * slots). A batch hashes its keys once, loads their slots together, then probes from them. */
static inline size_t slot_home(const struct vad_holder *h, uint64_t hv)
{
	return (size_t)hv & (h->cap - 1);
}

/* The hash of o's key (o in h's table): the 32 bits o keeps, unless the table is bigger. */
static inline uint64_t slot_hash(const struct vad_holder *h, const struct vad_hold *o)
{
	return h->cap <= (1ull << 32) ? o->hash : vad_hold_hash(o->arena, o->offset);
}

/* vad_holder_find for a key of hash hv (vad_hold_hash). */
struct vad_hold *slot_find_from(struct vad_holder *h, uint64_t hv, uint64_t arena, uint64_t offset);

/* slot_insert for a key of hash hv (vad_hold_hash). */
struct vad_hold *slot_insert_at(struct vad_holder *h, uint64_t hv, uint64_t arena, uint64_t offset);

_Static_assert(sizeof(struct vad_hold) == 32, "two holds to a cache line");

/* The slot after home when home is the last slot of its cache line (NULL otherwise, or at the
 * table's end): a probe, an insert or a delete's backward shift looks at the slot after the
 * home, so a prefetch of the home's line wants that line too. The table is 64-byte aligned.
 * (Callers prefetch the slots themselves: GCC takes a function that only prefetches for a
 * const one and drops every call to it.) */
static inline const struct vad_hold *slot_next_line(const struct vad_holder *h, size_t home)
{
	return (home & 1) && home + 1 < h->cap ? &h->holds[home + 1] : NULL;
}

/* Start loading slot home of h's table for writing, and the next line when home ends its own
 * (slot_next_line): what a probe from home reads first. A macro: as an inline function GCC
 * dropped its prefetches (see slot_next_line). */
#define slot_prefetch(h, home)                                                                     \
	do {                                                                                       \
		size_t slot_prefetch_i_ = (home);                                                  \
		const struct vad_hold *slot_prefetch_next_ =                                       \
		    slot_next_line((h), slot_prefetch_i_);                                         \
		__builtin_prefetch(&(h)->holds[slot_prefetch_i_], 1);                              \
		if (slot_prefetch_next_)                                                           \
			__builtin_prefetch(slot_prefetch_next_, 1);                                \
	} while (0)

/* Move h's entries into fresh (cap slots) with h's lock held; returns the old table to free. */
struct vad_hold *table_swap_locked(struct vad_holder *h, struct vad_hold *fresh, size_t cap);

/* A bigger table for h before adding extra entries, made without a lock: 0 (*fresh NULL if
 * none is needed), or -1 when out of memory. */
int table_prepare(const struct vad_holder *h, size_t extra, struct vad_hold **fresh, size_t *cap);

/* Shrink h's table once it is big and mostly empty. Owner thread, no lock held. */
void table_maybe_shrink(struct vad_holder *h);

/* ---- the state file (state.h): every hold recorded, in place ---- */

/* Does the state file keep what lies in arena slot `arena` (and is it not frozen)? */
static inline bool state_keeps(const struct vad_registry *reg, unsigned arena)
{
	return reg->state && arena < reg->state_arenas &&
	       __atomic_load_n(&reg->state_keep[arena], __ATOMIC_RELAXED) &&
	       !__atomic_load_n(&reg->state_frozen, __ATOMIC_RELAXED);
}

/* Record h's new hold of count references on r; its record number (0: not recorded). With h's
 * lock held. Frozen (stopping), nothing changes in the file any more: a range freed then may be
 * granted again to another session, and the two must not both be found by the next daemon. */
static inline uint32_t hold_record(struct vad_registry *reg, const struct vad_holder *h,
				   const struct vad_range *r, uint32_t count)
{
	if (!state_keeps(reg, r->arena))
		return 0;
	return vad_state_put(reg->state, r->arena, r->offset, r->size, h->state_holder,
			     (uint32_t)h->uid->uid, count);
}

/* The hold o's count changed (0: it is gone); before the allocator can get the range back. */
static inline void hold_record_count(struct vad_registry *reg, struct vad_hold *o)
{
	if (!o->rec || __atomic_load_n(&reg->state_frozen, __ATOMIC_ACQUIRE))
		return;
	if (o->count)
		vad_state_set_count(reg->state, o->rec, o->count);
	else
		vad_state_drop(reg->state, o->rec);
}

/* ---- ranges and holders (registry.c) ---- */

/* Give n dead ranges of one arena back to the allocator, their tokens first. No lock held. */
void bury(struct vad_registry *reg, unsigned arena, struct vad_range *const *dead, size_t n);

/* Free what is left of an empty, unlisted holder: lock, table, its share of the uid. */
void holder_release(struct vad_registry *reg, struct vad_holder *h);

/* ---- share tokens (tokens.c, dead_tokens.c) ---- */

/* What a shared range's tok points at once its token died: the range stays shared (other
 * sessions may hold it) but has no live token. Never in the token table. */
extern struct vad_token_entry vad_token_none;

/* Has r ever been shared, so that other sessions may hold it (its refs change atomically)?
 * Any thread: tok goes from NULL to non-NULL only by r's sole holder, and never back while
 * r lives. */
static inline bool range_shared(const struct vad_range *r)
{
	return __atomic_load_n(&r->tok, __ATOMIC_RELAXED) != NULL;
}

/* Remember that token (VAD_TOKEN_CHARS characters) died, and why, forgetting the oldest one
 * when the ring is full. token_lock held. */
void dead_token_add(struct vad_dead_tokens *d, const char *token, enum vad_token_death why);

/* Why token died, or VAD_TOKEN_ALIVE if it is not remembered. token_lock held. */
enum vad_token_death dead_token_find(const struct vad_dead_tokens *d, const char *token);

/* Check the ring and its hash against each other: 0, or -1 with a sentence in msg. */
int dead_token_check(const struct vad_dead_tokens *d, char *msg, size_t msg_len);

/* Clear t's record in the state file (t dies, or a single use is being spent), before the
 * effect can be seen. token_lock held. */
void token_unrecord(struct vad_registry *reg, struct vad_token_entry *t);

/* Each live token with a record matches it, and the state file has no other token record
 * (not checked once frozen). token_lock held. 0, or -1 with a sentence in msg. */
int token_records_check(struct vad_registry *reg, char *msg, size_t msg_len);

/* ---- teardown (reaper.c) ---- */

/* The reaper thread's body (arg: the registry); started by the first hand-over. */
void *reaper_main(void *arg);

#endif
