/* range_cache.c - range objects: slabs, a depot, per-thread caches; see registry.h. */
#include "registry.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Spare range objects a thread keeps without a lock (768 KiB at most): many pipelined
 * batches of max_batch in flight. */
#define CACHE_KEEP 16384

/*
 * Range objects come from 64 KiB slabs, not from malloc one by one: 56 bytes each instead of
 * malloc's 64-byte chunk, and no per-object free() into the allocating worker's malloc arena.
 * Those frees (the reaper's, a million at a time) used to pile up in glibc's fastbins, and
 * the worker's next large allocation consolidated them all on its thread: 100 ms and more
 * with 4M ranges. A thread keeps up to CACHE_KEEP spares without a lock and trades them with
 * the depot DEPOT_BATCH at a time. Slabs are kept for the life of the process (a peak of 4M
 * ranges keeps 224 MiB), listed so that nothing is lost.
 */
#define SLAB_BYTES  (64u * 1024u)
#define DEPOT_BATCH 256u

struct range_slab {
	struct range_slab *next;
	struct vad_range ranges[(SLAB_BYTES - 64) / sizeof(struct vad_range)];
};

static struct {
	pthread_mutex_t lock;
	struct vad_range *free; /* linked through next_free */
	size_t n_free;
	struct range_slab *slabs;
} depot = {.lock = PTHREAD_MUTEX_INITIALIZER};

struct obj_cache {
	struct vad_range *ranges;
	unsigned n_ranges;
	bool registered;
};

static __thread struct obj_cache tl_cache;
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

/* Move n spares (all, if n is larger) from c to the depot. */
static void cache_to_depot(struct obj_cache *c, unsigned n)
{
	if (!n || !c->ranges)
		return;
	struct vad_range *first = c->ranges, *last = first;
	unsigned k = 1;
	while (k < n && last->next_free) {
		last = last->next_free;
		k++;
	}
	c->ranges = last->next_free;
	c->n_ranges -= k;
	pthread_mutex_lock(&depot.lock);
	last->next_free = depot.free;
	depot.free = first;
	depot.n_free += k;
	pthread_mutex_unlock(&depot.lock);
}

/* Refill an empty cache from the depot, or from a new slab. Returns false when out of
 * memory. */
static bool cache_refill(struct obj_cache *c)
{
	pthread_mutex_lock(&depot.lock);
	while (depot.free && c->n_ranges < DEPOT_BATCH) {
		struct vad_range *r = depot.free;
		depot.free = r->next_free;
		depot.n_free--;
		r->next_free = c->ranges;
		c->ranges = r;
		c->n_ranges++;
	}
	pthread_mutex_unlock(&depot.lock);
	if (c->ranges)
		return true;
	struct range_slab *slab = malloc(sizeof(*slab));
	if (!slab)
		return false;
	pthread_mutex_lock(&depot.lock);
	slab->next = depot.slabs;
	depot.slabs = slab;
	pthread_mutex_unlock(&depot.lock);
	size_t n = sizeof(slab->ranges) / sizeof(slab->ranges[0]);
	for (size_t i = 0; i < n; i++) {
		slab->ranges[i].next_free = c->ranges;
		c->ranges = &slab->ranges[i];
	}
	c->n_ranges += (unsigned)n;
	return true;
}

static void cache_release(void *arg)
{
	struct obj_cache *c = arg;
	cache_to_depot(c, c->n_ranges);
}

static void cache_key_create(void)
{
	(void)pthread_key_create(&cache_key, cache_release);
}

/* The calling thread's cache, registered so that its spares go to the depot at thread
 * exit. */
static struct obj_cache *my_cache(void)
{
	struct obj_cache *c = &tl_cache;
	if (!c->registered) {
		pthread_once(&cache_once, cache_key_create);
		pthread_setspecific(cache_key, c);
		c->registered = true;
	}
	return c;
}

struct vad_range *vad_range_get(void)
{
	struct obj_cache *c = my_cache();
	if (!c->ranges && !cache_refill(c))
		return NULL;
	struct vad_range *r = c->ranges;
	c->ranges = r->next_free;
	c->n_ranges--;
	memset(r, 0, sizeof(*r));
	return r;
}

void vad_range_put(struct vad_range *r)
{
	struct obj_cache *c = my_cache();
	r->next_free = c->ranges;
	c->ranges = r;
	c->n_ranges++;
	if (c->n_ranges > CACHE_KEEP)
		cache_to_depot(c, CACHE_KEEP / 2);
}
