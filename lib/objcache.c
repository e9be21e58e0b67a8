/*
 * objcache.c - spare block objects, so no malloc or free happens under an allocator lock.
 *
 * Each thread keeps a small array of spare objects; a process-wide depot (an array too)
 * moves them from threads that release many (the drain merges blocks and frees their
 * objects) to threads that need many (allocating threads split blocks). Arrays of pointers,
 * not lists through the objects, so moving an object never reads it: objects released by
 * one CPU and reused by another cost no cache miss until they are written. Callers fill a
 * bag before taking a lock and give it back after dropping it. Objects are not tied to a
 * space.
 */
#include <stdlib.h>
#include <string.h>

#include "va_internal.h"

#define TLS_CAP	    128	       /* objects a thread keeps */
#define DEPOT_BATCH 64	       /* objects taken from the depot at once beyond the need */
#define DEPOT_CAP   (1u << 18) /* objects the depot keeps (20 MiB); beyond this they are freed */

static __thread struct va_block *tls_objs[TLS_CAP];
static __thread unsigned tls_n;
static __thread bool tls_registered;

static pthread_mutex_t depot_lock = PTHREAD_MUTEX_INITIALIZER;
static struct va_block *depot[DEPOT_CAP];
static size_t depot_n;

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;
static bool key_ok;

/* Move objs to the depot; those that do not fit are freed. */
static void depot_put(struct va_block **objs, size_t n)
{
	size_t k;

	pthread_mutex_lock(&depot_lock);
	k = DEPOT_CAP - depot_n < n ? DEPOT_CAP - depot_n : n;
	memcpy(&depot[depot_n], objs, k * sizeof(*objs));
	depot_n += k;
	pthread_mutex_unlock(&depot_lock);
	for (; k < n; k++)
		free(objs[k]);
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
	pthread_mutex_unlock(&depot_lock);
	tls_n += (unsigned)k;
	return (unsigned)k;
}

/* Thread exit: hand the thread's cache to the depot. */
static void thread_exit(void *arg)
{
	(void)arg;
	depot_put(tls_objs, tls_n);
	tls_n = 0;
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
		struct va_block *b = malloc(sizeof(*b));

		if (!b)
			return VA_ENOMEM;
		bag_give(bag, b);
	}
	return 0;
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
