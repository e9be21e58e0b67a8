/* registry_restore.c - holds put back from a state file at start (persist.c); see registry.h. */
#include "registry_internal.h"

#include <stdlib.h>

int vad_registry_restore_hold(struct vad_registry *reg, struct vad_holder *h, struct vad_range *r,
			      uint32_t count, bool shared)
{
	if (vad_holder_find(h, r->arena, r->offset))
		return -1; /* one record per holder and range: the file said it twice */
	struct vad_hold *fresh, *old = NULL;
	size_t cap;
	if (table_prepare(h, 1, &fresh, &cap) < 0)
		return -2;
	uint64_t bytes = (uint64_t)count * r->size, now;
	pthread_mutex_lock(&h->lock);
	if (!arena_charge(&reg->arenas[r->arena], count, bytes, &now)) {
		pthread_mutex_unlock(&h->lock);
		free(fresh);
		return -1;
	}
	if (fresh)
		old = table_swap_locked(h, fresh, cap);
	if (shared && !r->tok)
		r->tok = &vad_token_none; /* its refs change atomically from now on */
	store64(&r->refs, load64(&r->refs) + count);
	struct vad_hold *o = slot_insert(h, r->arena, r->offset);
	o->count = count;
	o->range = r;
	o->rec = hold_record(reg, h, r, count);
	store64(&h->held_bytes, load64(&h->held_bytes) + bytes);
	store64(&h->held_refs, load64(&h->held_refs) + count);
	__atomic_add_fetch(&h->uid->held, bytes, __ATOMIC_RELAXED);
	__atomic_add_fetch(&h->uid->refs, count, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&h->lock);
	free(old);
	return 0;
}

int vad_registry_restore_reserve(struct vad_holder *h, size_t n)
{
	struct vad_hold *fresh;
	size_t cap;
	if (table_prepare(h, n, &fresh, &cap) < 0)
		return -1;
	if (!fresh)
		return 0;
	pthread_mutex_lock(&h->lock);
	struct vad_hold *old = table_swap_locked(h, fresh, cap);
	pthread_mutex_unlock(&h->lock);
	free(old);
	return 0;
}

int vad_holder_adopt(struct vad_registry *reg, struct vad_holder *dst, struct vad_holder *src)
{
	pthread_mutex_lock(&reg->holders_lock); /* the lock order: holders_lock, then holders */
	pthread_mutex_lock(&dst->lock);
	pthread_mutex_lock(&src->lock);
	if (dst->used || dst->uid != src->uid) {
		pthread_mutex_unlock(&src->lock);
		pthread_mutex_unlock(&dst->lock);
		pthread_mutex_unlock(&reg->holders_lock);
		return -1;
	}
	struct vad_hold *old = dst->holds;
	dst->holds = src->holds;
	dst->cap = src->cap;
	dst->used = src->used;
	store64(&dst->held_bytes, load64(&dst->held_bytes) + load64(&src->held_bytes));
	store64(&dst->held_refs, load64(&dst->held_refs) + load64(&src->held_refs));
	dst->state_holder = src->state_holder; /* its records (moved as they are) name it */
	src->holds = NULL;
	src->cap = src->used = 0;
	store64(&src->held_bytes, 0);
	store64(&src->held_refs, 0);
	pthread_mutex_unlock(&src->lock);
	pthread_mutex_unlock(&dst->lock);
	pthread_mutex_unlock(&reg->holders_lock);
	free(old);
	vad_holder_fini(reg, src); /* empty: only unlisted and released */
	return 0;
}
