/* range_cache.c - range objects: slabs, a depot, per-thread caches; see registry.h. */
#include "registry.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Spare range objects a thread keeps without a lock: many pipelined batches of max_batch in
 * flight. Their pointers sit in an array (128 KiB, made at the thread's first use), so a batch
 * takes its objects in one step and starts loading all of them at once: a linked list of
 * spares made every alloc batch wait for one cold object after another. */
#define CACHE_KEEP 16384

/*
 * Range objects come from 64 KiB slabs, not from malloc one by one: 56 bytes each instead of
 * malloc's 64-byte chunk, and no per-object free() into the allocating worker's malloc arena.
 * Those frees (the reaper's, a million at a time) used to pile up in glibc's fastbins, and
 * the worker's next large allocation consolidated them all on its thread: 100 ms and more
 * with 4M ranges. A thread keeps up to CACHE_KEEP spares without a lock and trades them with
 * the depot DEPOT_BATCH at a time (its coldest half when it has too many). Slabs are kept for
 * the life of the process (a peak of 4M ranges keeps 224 MiB), listed so that nothing is lost.
 * A thread whose array cannot be made trades with the depot one object at a time.
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
	struct vad_range **spare; /* CACHE_KEEP slots, the most recently put on top; NULL: none */
	unsigned n;
	bool registered;
	bool exited; /* its thread is exiting: no array any more (a late put goes to the depot) */
};

static __thread struct obj_cache tl_cache;
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

/* Link objs[0..n) (n > 0) and put them on the depot's list. */
static void depot_put(struct vad_range *const *objs, size_t n)
{
	for (size_t i = 0; i + 1 < n; i++)
		objs[i]->next_free = objs[i + 1];
	pthread_mutex_lock(&depot.lock);
	objs[n - 1]->next_free = depot.free;
	depot.free = objs[0];
	depot.n_free += n;
	pthread_mutex_unlock(&depot.lock);
}

/* Take up to max objects from the depot into out; returns how many. */
static size_t depot_take(struct vad_range **out, size_t max)
{
	size_t k = 0;
	pthread_mutex_lock(&depot.lock);
	while (depot.free && k < max) {
		out[k++] = depot.free;
		depot.free = depot.free->next_free;
		depot.n_free--;
	}
	pthread_mutex_unlock(&depot.lock);
	return k;
}

/* A new slab, listed, its objects on the depot's list; false when out of memory. */
static bool depot_grow(void)
{
	struct range_slab *slab = malloc(sizeof(*slab));
	if (!slab)
		return false;
	size_t n = sizeof(slab->ranges) / sizeof(slab->ranges[0]);
	for (size_t i = 0; i + 1 < n; i++)
		slab->ranges[i].next_free = &slab->ranges[i + 1];
	pthread_mutex_lock(&depot.lock);
	slab->next = depot.slabs;
	depot.slabs = slab;
	slab->ranges[n - 1].next_free = depot.free;
	depot.free = &slab->ranges[0];
	depot.n_free += n;
	pthread_mutex_unlock(&depot.lock);
	return true;
}

/* Refill c's empty array from the depot, growing the depot by a slab when it is empty.
 * Returns false when out of memory. */
static bool cache_refill(struct obj_cache *c)
{
	c->n = (unsigned)depot_take(c->spare, DEPOT_BATCH);
	if (c->n)
		return true;
	if (!depot_grow())
		return false;
	c->n = (unsigned)depot_take(c->spare, DEPOT_BATCH);
	return c->n > 0;
}

static void cache_release(void *arg)
{
	struct obj_cache *c = arg;
	if (c->n)
		depot_put(c->spare, c->n);
	c->n = 0;
	free(c->spare);
	c->spare = NULL;
	c->exited = true;
}

static void cache_key_create(void)
{
	(void)pthread_key_create(&cache_key, cache_release);
}

/* The calling thread's cache, registered so that its spares go to the depot at thread
 * exit; its array made at first use (spare stays NULL when that fails, and is tried again;
 * never once the thread's exit gave the array back). */
static struct obj_cache *my_cache(void)
{
	struct obj_cache *c = &tl_cache;
	if (!c->registered) {
		pthread_once(&cache_once, cache_key_create);
		pthread_setspecific(cache_key, c);
		c->registered = true;
	}
	if (!c->spare && !c->exited)
		c->spare = malloc(CACHE_KEEP * sizeof(*c->spare));
	return c;
}

bool vad_range_get_batch(struct vad_range **out, size_t n)
{
	struct obj_cache *c = my_cache();
	size_t got = 0;
	while (got < n) {
		if (!c->spare) {
			/* No array: straight from the depot. */
			size_t k = depot_take(out + got, n - got);
			if (!k && !depot_grow())
				break;
			got += k;
			continue;
		}
		if (!c->n && !cache_refill(c))
			break;
		while (c->n && got < n)
			out[got++] = c->spare[--c->n];
	}
	if (got < n) {
		for (size_t i = 0; i < got; i++)
			vad_range_put(out[i]);
		return false;
	}
	for (size_t i = 0; i < n; i++)
		__builtin_prefetch(out[i], 1);
	for (size_t i = 0; i < n; i++)
		memset(out[i], 0, sizeof(*out[i]));
	return true;
}

struct vad_range *vad_range_get(void)
{
	struct vad_range *r;
	return vad_range_get_batch(&r, 1) ? r : NULL;
}

void vad_range_put_batch(struct vad_range *const *ranges, size_t n)
{
	struct obj_cache *c = my_cache();
	if (!c->spare) {
		if (n)
			depot_put(ranges, n);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (c->n == CACHE_KEEP) {
			/* The coldest half (the bottom of the array) goes to the depot. */
			depot_put(c->spare, CACHE_KEEP / 2);
			memmove(c->spare, c->spare + CACHE_KEEP / 2,
				(CACHE_KEEP - CACHE_KEEP / 2) * sizeof(*c->spare));
			c->n = CACHE_KEEP - CACHE_KEEP / 2;
		}
		c->spare[c->n++] = ranges[i];
	}
}

void vad_range_put(struct vad_range *r)
{
	vad_range_put_batch(&r, 1);
}
