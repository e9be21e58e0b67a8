/*
 * objcache.c - block objects: carved from slabs, kept in caches, so no malloc or free
 * happens under an allocator lock and an object costs its 48 bytes and nothing more.
 *
 * Objects come from 64 KiB slabs (1364 objects after a 64-byte slab header), carved by
 * each thread from a slab of its own, so a busy range pays no malloc header and no
 * rounding. Each thread keeps a small array of spare objects; a process-wide depot (an
 * array too) moves them from threads that release many (the drain merges blocks and frees
 * their objects) to threads that need many (allocating threads split blocks). Arrays of
 * pointers, not lists through the objects, so moving an object never reads it: objects
 * released by one CPU and reused by another cost no cache miss until they are written.
 * Beyond the depot's array, spares wait on a list through the objects. Slabs are never
 * given back: the objects a process holds stay at the most it ever had in use at once.
 * Callers fill a bag before taking a lock and give it back after dropping it. Objects are
 * not tied to a space.
 */
#include <stdlib.h>
#include <string.h>

#include "va_internal.h"

#define TLS_CAP	    128	       /* objects a thread keeps */
#define DEPOT_BATCH 64	       /* objects taken from the depot at once beyond the need */
#define DEPOT_CAP   (1u << 18) /* objects the depot's array keeps; beyond, a list */
#define SLAB_BYTES  (64u << 10)
#define SLAB_OBJS   ((SLAB_BYTES - sizeof(struct slab)) / sizeof(struct va_block))

/* The first cache line of a slab: slabs are listed so they stay reachable. */
struct slab {
	struct slab *next;
} __attribute__((aligned(64)));

/* The spares an operation draws from and gives back to, kept between operations (see
 * objcache_bag): a filled bag per call, emptied after it, cost more than the tree work of an
 * exact-mode allocation. */
__thread struct va_bag va_tls_bag;

static __thread struct va_block *tls_objs[TLS_CAP];
static __thread unsigned tls_n;
static __thread bool tls_registered;
static __thread struct va_block *tls_carve; /* next object of this thread's slab */
static __thread unsigned tls_carve_left;

static pthread_mutex_t depot_lock = PTHREAD_MUTEX_INITIALIZER;
static struct va_block *depot[DEPOT_CAP];
static size_t depot_n;
static struct va_block *depot_more; /* spares beyond DEPOT_CAP, linked through next */
static size_t depot_more_n;
static struct slab *slabs;
static _Atomic uint64_t slab_bytes;

uint64_t objcache_bytes(void)
{
	return atomic_load_explicit(&slab_bytes, memory_order_relaxed);
}

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;
static bool key_ok;

/* Move objs to the depot; those beyond its array go on its list. */
static void depot_put(struct va_block **objs, size_t n)
{
	size_t k;

	pthread_mutex_lock(&depot_lock);
	k = DEPOT_CAP - depot_n < n ? DEPOT_CAP - depot_n : n;
	memcpy(&depot[depot_n], objs, k * sizeof(*objs));
	depot_n += k;
	for (; k < n; k++) {
		objs[k]->next = depot_more;
		depot_more = objs[k];
		depot_more_n++;
	}
	pthread_mutex_unlock(&depot_lock);
}

/* Refill the thread cache from the depot with up to n objects; returns how many. */
static unsigned depot_get(unsigned n)
{
	size_t k;

	if (n > TLS_CAP - tls_n)
		n = TLS_CAP - tls_n;
	pthread_mutex_lock(&depot_lock);
	k = depot_n < n ? depot_n : n;
	memcpy(&tls_objs[tls_n], &depot[depot_n - k], k * sizeof(*tls_objs));
	depot_n -= k;
	while (k < n && depot_more) {
		tls_objs[tls_n + k++] = depot_more;
		depot_more = depot_more->next;
		depot_more_n--;
	}
	pthread_mutex_unlock(&depot_lock);
	tls_n += (unsigned)k;
	return (unsigned)k;
}

/* A fresh object from this thread's slab (a new slab when it is used up), or NULL. */
static struct va_block *carve(void)
{
	if (!tls_carve_left) {
		struct slab *sl = aligned_alloc(64, SLAB_BYTES);

		if (!sl)
			return NULL;
		pthread_mutex_lock(&depot_lock);
		sl->next = slabs;
		slabs = sl;
		pthread_mutex_unlock(&depot_lock);
		atomic_fetch_add_explicit(&slab_bytes, SLAB_BYTES, memory_order_relaxed);
		tls_carve = (struct va_block *)(sl + 1);
		tls_carve_left = SLAB_OBJS;
	}
	tls_carve_left--;
	return tls_carve++;
}

/* Thread exit: hand the thread's cache and the rest of its slab to the depot. */
static void thread_exit(void *arg)
{
	struct va_block *b;

	(void)arg;
	depot_put(tls_objs, tls_n);
	tls_n = 0;
	while ((b = bag_take(&va_tls_bag))) {
		tls_objs[tls_n++] = b;
		if (tls_n == TLS_CAP) {
			depot_put(tls_objs, tls_n);
			tls_n = 0;
		}
	}
	depot_put(tls_objs, tls_n);
	tls_n = 0;
	while (tls_carve_left) {
		while (tls_carve_left && tls_n < TLS_CAP)
			tls_objs[tls_n++] = carve();
		depot_put(tls_objs, tls_n);
		tls_n = 0;
	}
}

static void make_key(void)
{
	key_ok = pthread_key_create(&exit_key, thread_exit) == 0;
}

static void register_thread(void)
{
	pthread_once(&key_once, make_key);
	if (key_ok)
		pthread_setspecific(exit_key, tls_objs);
	tls_registered = true;
}

/* Keep one object in the thread cache, spilling half the cache to the depot when full. */
static void keep(struct va_block *b)
{
	if (tls_n == TLS_CAP) {
		depot_put(&tls_objs[TLS_CAP / 2], TLS_CAP / 2);
		tls_n = TLS_CAP / 2;
	}
	tls_objs[tls_n++] = b;
}

int objcache_fill(struct va_bag *bag, unsigned want)
{
	if (!tls_registered)
		register_thread();
	while (bag->n < want) {
		if (!tls_n && !depot_get(want - bag->n + DEPOT_BATCH))
			break;
		while (bag->n < want && tls_n)
			bag_give(bag, tls_objs[--tls_n]);
	}
	while (bag->n < want) {
		struct va_block *b = carve();

		if (!b)
			return VA_ENOMEM;
		bag_give(bag, b);
	}
	return 0;
}

struct va_bag *objcache_bag_fill(unsigned want)
{
	return objcache_fill(&va_tls_bag, want) ? NULL : &va_tls_bag;
}

void objcache_bag_trim(struct va_bag *bag)
{
	struct va_bag extra = {0};

	while (bag->n > VA_BAG_KEEP / 2)
		bag_give(&extra, bag_take(bag));
	objcache_return(&extra);
}

void objcache_give(struct va_block *b)
{
	if (!tls_registered)
		register_thread();
	keep(b);
}

void objcache_return(struct va_bag *bag)
{
	struct va_block *b;

	if (!bag->n)
		return;
	if (!tls_registered)
		register_thread();
	while ((b = bag_take(bag)))
		keep(b);
}

void objcache_return_array(struct va_block **objs, size_t n)
{
	if (!n)
		return;
	if (!tls_registered)
		register_thread();
	while (n && tls_n < TLS_CAP)
		tls_objs[tls_n++] = objs[--n];
	if (n)
		depot_put(objs, n);
}
