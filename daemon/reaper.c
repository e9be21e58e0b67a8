/* reaper.c - the reaper thread: drops dying holders' holds a chunk at a time; see registry.h. */
#include "registry_internal.h"

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "latency.h"

/* A dying holder's slots in (arena, offset) order: freed in address order, the allocator
 * finds each busy block beside the last one (its busy tree's hint) and merges neighbours,
 * where hash order cost a tree descent and a cache miss per range. */
struct reap_key {
	uint64_t arena, offset, slot;
};

static int reap_key_cmp(const void *a, const void *b)
{
	const struct reap_key *x = a, *y = b;
	if (x->arena != y->arena)
		return x->arena < y->arena ? -1 : 1;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* The order to reap d in, or NULL (then slot order) when memory is short. Reaper only: d's
 * slots do not move (nothing inserts into or looks up a dying table). */
static struct reap_key *reap_order(struct vad_holder *d, size_t *n)
{
	pthread_mutex_lock(&d->lock);
	size_t used = d->used;
	pthread_mutex_unlock(&d->lock);
	struct reap_key *keys = used ? malloc(used * sizeof(*keys)) : NULL;
	if (!keys)
		return NULL;
	size_t k = 0;
	pthread_mutex_lock(&d->lock);
	for (size_t i = 0; i < d->cap && k < used; i++)
		if (d->holds[i].range)
			keys[k++] = (struct reap_key){d->holds[i].arena, d->holds[i].offset, i};
	pthread_mutex_unlock(&d->lock);
	qsort(keys, k, sizeof(*keys), reap_key_cmp);
	*n = k;
	return keys;
}

/* Drop up to RELEASE_CHUNK of dying holder d's holds, in the order of keys (n of them) or
 * else in slot order (no lookups happen on a dying table, so slots are simply emptied: no
 * backward shift). Returns whether d is empty. */
static bool reap_chunk(struct vad_registry *reg, struct vad_holder *d, const struct reap_key *keys,
		       size_t n)
{
	struct vad_range *dead[RELEASE_CHUNK];
	size_t n_dead = 0, done = 0;
	uint64_t refs = 0, bytes = 0;
	size_t end = keys ? n : d->cap;
	pthread_mutex_lock(&d->lock);
	for (; d->reap_pos < end && done < RELEASE_CHUNK; d->reap_pos++) {
		struct vad_hold *o = &d->holds[keys ? keys[d->reap_pos].slot : d->reap_pos];
		struct vad_range *r = o->range;
		if (!r)
			continue;
		uint64_t count = o->count, size = r->size, left;
		unsigned arena = (unsigned)o->arena;
		if (range_shared(r)) {
			left = __atomic_sub_fetch(&r->refs, count, __ATOMIC_ACQ_REL);
		} else {
			left = load64(&r->refs) - count;
			store64(&r->refs, left);
		}
		arena_add(&reg->arenas[arena], -(int64_t)count, -(int64_t)(count * size));
		o->count = 0;
		hold_record_count(reg, o); /* its record goes before the range can */
		o->range = NULL;
		d->used--;
		refs += count;
		bytes += count * size;
		done++;
		if (!left)
			dead[n_dead++] = r;
	}
	store64(&d->held_bytes, load64(&d->held_bytes) - bytes);
	store64(&d->held_refs, load64(&d->held_refs) - refs);
	/* Under d's lock: the check compares it with the dying holders' totals. */
	__atomic_sub_fetch(&reg->dying_refs, refs, __ATOMIC_RELAXED);
	bool empty = d->used == 0;
	pthread_mutex_unlock(&d->lock);
	uid_uncharge(d, refs, bytes);
	/* bury takes one arena per call: runs of one arena in slot order (the common case is a
	 * single arena, so one call). */
	for (size_t i = 0; i < n_dead;) {
		size_t j = i + 1;
		while (j < n_dead && dead[j]->arena == dead[i]->arena)
			j++;
		bury(reg, dead[i]->arena, dead + i, j - i);
		i = j;
	}
	return empty;
}

/* The reaper offers its CPU after this much work: each chunk's lock hold is short anyway,
 * and a yield on a loaded machine can cost the yielder milliseconds (one per chunk made a
 * teardown of 100k ranges take seconds instead of 0.1 s at load 6 on 2 CPUs). */
#define YIELD_NS 500000

/* Chunks between two looks at the allocators' lazy bytes (4 MiB of single pages). */
#define PACE_CHUNKS 16

/* Lazy bytes (in quanta) past which the reaper drains an arena itself: the allocator's
 * smallest default lazy_max (8192 quanta, one CPU). A free that finds lazy bytes past
 * 2 x lazy_max drains on its own thread and waits for any pass running meanwhile; the reaper
 * frees a million ranges in seconds, so without this every worker's frees would keep finding
 * the arena over that bound and wait out the reaper's drains (150 ms and more). Drained here,
 * at most one pace's worth above this, they never do. */
#define PACE_LAZY_QUANTA 8192

static void pace(struct vad_registry *reg)
{
	pthread_rwlock_rdlock(&reg->spaces_lock); /* no slot empties meanwhile */
	for (size_t i = 0; i < reg->n_arenas; i++) {
		struct va_space *vs = __atomic_load_n(&reg->vs[i], __ATOMIC_ACQUIRE);
		struct va_stats st;
		if (!vs)
			continue;
		va_get_stats(vs, &st);
		if (st.lazy_bytes >= PACE_LAZY_QUANTA * st.quantum)
			va_drain(vs);
	}
	pthread_rwlock_unlock(&reg->spaces_lock);
}

/* The registry is going and so is the process, whose allocators keep nothing
 * (vad_registry_discard): what is left to reap is only memory, freed wholesale by the
 * registry's end. Not before no worker runs (reaper_stop), so a check never sees holds
 * vanish without their accounting. */
static bool abandon(struct vad_registry *reg)
{
	return __atomic_load_n(&reg->discard, __ATOMIC_RELAXED) &&
	       __atomic_load_n(&reg->reaper_stop, __ATOMIC_RELAXED);
}

/* The reaper: takes the oldest dying holder and drops its holds a chunk at a time, yielding
 * the CPU between chunks (workers and clients share it); once stopping, at full speed. */
void *reaper_main(void *arg)
{
	struct vad_registry *reg = arg;
	pthread_setname_np(pthread_self(), "vad-reaper");
	pthread_mutex_lock(&reg->holders_lock);
	for (;;) {
		while (!reg->dying && !reg->reaper_stop)
			pthread_cond_wait(&reg->reaper_wake, &reg->holders_lock);
		struct vad_holder *d = reg->dying;
		if (!d)
			break; /* stopping with nothing left */
		pthread_mutex_unlock(&reg->holders_lock);
		bool empty;
		unsigned chunks = 0;
		size_t n_keys = 0;
		uint64_t yielded = vad_now_ns();
		/* Discarding, nothing goes back to the allocator: slot order is as good. */
		struct reap_key *keys = __atomic_load_n(&reg->discard, __ATOMIC_RELAXED)
					    ? NULL
					    : reap_order(d, &n_keys);
		do {
			if (abandon(reg))
				break; /* its table goes below, its ranges with the process */
			empty = reap_chunk(reg, d, keys, n_keys);
			if (!empty && keys && d->reap_pos >= n_keys) {
				/* Cannot happen (the keys cover every hold): finish in slot order.
				 */
				free(keys);
				keys = NULL;
				d->reap_pos = 0;
			}
			if (++chunks % PACE_CHUNKS == 0)
				pace(reg);
			if (!empty && !__atomic_load_n(&reg->reaper_stop, __ATOMIC_RELAXED) &&
			    vad_now_ns() - yielded > YIELD_NS) {
				sched_yield();
				yielded = vad_now_ns();
			}
		} while (!empty);
		free(keys);
		pthread_mutex_lock(&reg->holders_lock);
		reg->dying = d->next;
		if (d->next)
			d->next->prev = NULL;
		else
			reg->dying_tail = NULL;
		__atomic_sub_fetch(&reg->n_dying, 1, __ATOMIC_RELAXED);
		if (!reg->dying)
			pthread_cond_broadcast(&reg->reaper_idle);
		pthread_mutex_unlock(&reg->holders_lock);
		holder_release(reg, d);
		free(d);
		pthread_mutex_lock(&reg->holders_lock);
	}
	pthread_cond_broadcast(&reg->reaper_idle);
	pthread_mutex_unlock(&reg->holders_lock);
	return NULL;
}

void vad_registry_reap_wait(struct vad_registry *reg)
{
	pthread_mutex_lock(&reg->holders_lock);
	while (reg->dying)
		pthread_cond_wait(&reg->reaper_idle, &reg->holders_lock);
	pthread_mutex_unlock(&reg->holders_lock);
}

unsigned vad_registry_dying(struct vad_registry *reg, uint64_t *refs)
{
	if (refs)
		*refs = __atomic_load_n(&reg->dying_refs, __ATOMIC_RELAXED);
	return __atomic_load_n(&reg->n_dying, __ATOMIC_RELAXED);
}
