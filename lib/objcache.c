/*
 * objcache.c - spare block objects, so no malloc or free happens under an allocator lock.
 *
 * Each thread keeps a small cache; a process-wide depot moves objects in batches from
 * threads that release many (the drain thread merges blocks) to threads that need many
 * (allocating threads split blocks). Callers fill a bag before taking a lock and give
 * the bag back after dropping it. Objects are not tied to a space.
 */
#include <stdlib.h>

#include "va_internal.h"

#define TLS_CAP 64	 /* objects a thread keeps */
#define DEPOT_BATCH 32	 /* objects moved between a thread and the depot at once */
#define DEPOT_CAP (1u << 18) /* objects the depot keeps (20 MiB); beyond this they are freed */

static __thread struct va_bag tls_cache;
static __thread bool tls_registered;

static pthread_mutex_t depot_lock = PTHREAD_MUTEX_INITIALIZER;
static struct va_bag depot;

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;
static bool key_ok;

/* Move up to max objects from src to dst. */
static void bag_move(struct va_bag *dst, struct va_bag *src, unsigned max)
{
	struct va_block *b;

	while (max-- && (b = bag_take(src)))
		bag_give(dst, b);
}

static void free_all(struct va_bag *bag)
{
	struct va_block *b;

	while ((b = bag_take(bag)))
		free(b);
}

/* Thread exit: hand the thread's cache to the depot (or free it). */
static void thread_exit(void *arg)
{
	struct va_bag rest = {0};

	(void)arg;
	pthread_mutex_lock(&depot_lock);
	bag_move(&depot, &tls_cache, DEPOT_CAP > depot.n ? DEPOT_CAP - depot.n : 0);
	pthread_mutex_unlock(&depot_lock);
	bag_move(&rest, &tls_cache, ~0u);
	free_all(&rest);
}

static void make_key(void)
{
	key_ok = pthread_key_create(&exit_key, thread_exit) == 0;
}

static void register_thread(void)
{
	pthread_once(&key_once, make_key);
	if (key_ok)
		pthread_setspecific(exit_key, &tls_cache);
	tls_registered = true;
}

int objcache_fill(struct va_bag *bag, unsigned want)
{
	if (bag->n >= want)
		return 0;
	if (!tls_registered)
		register_thread();
	bag_move(bag, &tls_cache, want - bag->n);
	if (bag->n < want) {
		unsigned need = want - bag->n;

		pthread_mutex_lock(&depot_lock);
		bag_move(&tls_cache, &depot, need + DEPOT_BATCH);
		pthread_mutex_unlock(&depot_lock);
		bag_move(bag, &tls_cache, need);
	}
	while (bag->n < want) {
		struct va_block *b = malloc(sizeof(*b));

		if (!b)
			return VA_ENOMEM;
		bag_give(bag, b);
	}
	return 0;
}

void objcache_return(struct va_bag *bag)
{
	if (!bag->n)
		return;
	if (!tls_registered)
		register_thread();
	bag_move(&tls_cache, bag, TLS_CAP > tls_cache.n ? TLS_CAP - tls_cache.n : 0);
	if (bag->n) {
		pthread_mutex_lock(&depot_lock);
		if (depot.n + bag->n <= DEPOT_CAP) {
			/* splice the whole bag: no object is touched */
			bag->tail->next = depot.head;
			if (!depot.head)
				depot.tail = bag->tail;
			depot.head = bag->head;
			depot.n += bag->n;
			*bag = (struct va_bag){0};
		} else {
			bag_move(&depot, bag, DEPOT_CAP > depot.n ? DEPOT_CAP - depot.n : 0);
		}
		pthread_mutex_unlock(&depot_lock);
		free_all(bag);
	}
}
