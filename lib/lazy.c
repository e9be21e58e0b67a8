/*
 * lazy.c - lazy reclaim (seeds 000 and 002): frees wait on per-node lazy lists; a drain
 * takes every list, sorts by address, coalesces adjacent ranges, calls the release
 * callback once per coalesced run outside every allocator lock, then hands each block to
 * its home node's pool (if the class has room) or merges it into the free tree in chunks
 * of drain_chunk blocks per free-tree lock hold. Pools decay by a quarter per drain.
 * The background thread drains when woken past lazy_max and after idle_drain_ms without
 * frees; past 2 x lazy_max the freeing thread drains itself.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "va_internal.h"

static unsigned log2_ceil_u64(uint64_t x)
{
	return x <= 1 ? 0 : 64 - (unsigned)__builtin_clzll(x - 1);
}

/* Merge two start-sorted lists. */
static struct va_block *merge_sorted(struct va_block *a, struct va_block *b)
{
	struct va_block head, *t = &head;

	while (a && b) {
		if (a->start <= b->start) {
			t->next = a;
			a = a->next;
		} else {
			t->next = b;
			b = b->next;
		}
		t = t->next;
	}
	t->next = a ? a : b;
	return head.next;
}

/* Bottom-up merge sort of a next-linked list by start; no allocation, O(n log n). */
static struct va_block *sort_by_start(struct va_block *list)
{
	struct va_block *bins[64] = {0};
	int top = 0;

	while (list) {
		struct va_block *one = list;
		int i;

		list = list->next;
		one->next = NULL;
		for (i = 0; i < 64 && bins[i]; i++) {
			one = merge_sorted(bins[i], one);
			bins[i] = NULL;
		}
		if (i == 64)
			i = 63;
		bins[i] = one;
		if (i >= top)
			top = i + 1;
	}
	for (int i = 0; i < top; i++)
		if (bins[i])
			list = merge_sorted(bins[i], list);
	return list;
}

/* Make the scratch arrays hold n items (drain_lock held); false if memory is short. */
static bool scratch_reserve(struct va_space *vs, size_t n)
{
	struct drain_item *a, *b;
	size_t cap;

	if (n <= vs->scratch_cap)
		return true;
	cap = vs->scratch_cap ? vs->scratch_cap : 1024;
	while (cap < n)
		cap *= 2;
	a = realloc(vs->scratch, cap * sizeof(*a));
	if (!a)
		return false;
	vs->scratch = a;
	b = realloc(vs->scratch_tmp, cap * sizeof(*b));
	if (!b)
		return false;
	vs->scratch_tmp = b;
	vs->scratch_cap = cap;
	return true;
}

#define RADIX_BITS 11
#define RADIX_SIZE (1u << RADIX_BITS)

/*
 * LSD radix sort of the n scratch items by key (a quantum index, so only as many digits
 * as the space has quanta), then link the blocks in that order. Linear and cache-friendly:
 * a drain of many thousand blocks would spend most of its time in a comparison sort of
 * the list.
 */
static struct va_block *sort_items(struct va_space *vs, size_t n)
{
	struct drain_item *src = vs->scratch, *dst = vs->scratch_tmp, *t;
	unsigned bits = log2_ceil_u64(vs->size >> vs->qshift);
	size_t count[RADIX_SIZE];
	struct va_block *list = NULL;

	for (unsigned shift = 0; shift < bits && n > 1; shift += RADIX_BITS) {
		size_t sum = 0;

		memset(count, 0, sizeof(count));
		for (size_t k = 0; k < n; k++)
			count[(src[k].key >> shift) & (RADIX_SIZE - 1)]++;
		for (unsigned d = 0; d < RADIX_SIZE; d++) {
			size_t c = count[d];

			count[d] = sum;
			sum += c;
		}
		for (size_t k = 0; k < n; k++)
			dst[count[(src[k].key >> shift) & (RADIX_SIZE - 1)]++] = src[k];
		t = src;
		src = dst;
		dst = t;
	}
	for (size_t k = n; k-- > 0;) {
		src[k].b->next = list;
		list = src[k].b;
	}
	return list;
}

/* Merge a next-linked list into the free tree, at most drain_chunk blocks per lock hold. */
static void merge_into_tree(struct va_space *vs, struct va_block *list, struct va_bag *bag)
{
	while (list) {
		va_lock(&vs->free.lock);
		for (unsigned k = 0; list && k < vs->cfg.drain_chunk; k++) {
			struct va_block *b = list;

			list = list->next;
			ft_insert(&vs->free.tree, b, bag);
		}
		va_unlock(&vs->free.lock);
	}
}

/* One drain pass; drain_lock held. */
static void drain_pass(struct va_space *vs, bool full)
{
	struct va_block *list = NULL, *to_tree = NULL, *last = NULL, *decayed = NULL;
	struct va_node *locked = NULL;
	struct va_bag bag = {0};
	uint64_t detached = 0;
	size_t nitems = 0;
	bool use_array = true;

	/* 1. take every node's lazy list; note each block's start in the scratch array */
	for (unsigned i = 0; i < vs->nodes; i++) {
		struct va_node *n = &vs->node[i];
		struct va_block *h, *next;
		uint64_t cnt;

		va_lock(&n->lazy.lock);
		h = n->lazy.head;
		cnt = n->lazy.blocks;
		detached += n->lazy.bytes;
		n->lazy.head = NULL;
		n->lazy.bytes = 0;
		n->lazy.blocks = 0;
		va_unlock(&n->lazy.lock);
		if (!h)
			continue;
		if (use_array && !scratch_reserve(vs, nitems + cnt)) {
			/* no memory for the array: fall back to sorting the list */
			use_array = false;
			for (size_t k = 0; k < nitems; k++) {
				vs->scratch[k].b->next = list;
				list = vs->scratch[k].b;
			}
		}
		for (struct va_block *b = h; b; b = next) {
			next = b->next;
			if (use_array && nitems < vs->scratch_cap) {
				vs->scratch[nitems].key = (b->start - vs->base) >> vs->qshift;
				vs->scratch[nitems].b = b;
				nitems++;
			} else {
				b->next = list;
				list = b;
			}
		}
	}
	if (use_array && !list) {
		list = sort_items(vs, nitems);
	} else {
		for (size_t k = 0; use_array && k < nitems; k++) {
			vs->scratch[k].b->next = list;
			list = vs->scratch[k].b;
		}
		list = sort_by_start(list);
	}

	/* 2. coalesce, release once per run (no allocator lock held) */
	for (struct va_block *b = list; b;) {
		uint64_t start = b->start, end = b->end;
		struct va_block *c = b->next;

		while (c && c->start == end) {
			end = c->end;
			c = c->next;
		}
		if (vs->cfg.release)
			vs->cfg.release(vs->cfg.release_ctx, start, end - start);
		atomic_fetch_add_explicit(&vs->released_bytes, end - start, memory_order_relaxed);
		atomic_fetch_add_explicit(&vs->release_calls, 1, memory_order_relaxed);
		b = c;
	}

	/* 3. pools decay (or empty, when full) */
	for (unsigned i = 0; vs->pool_classes && i < vs->nodes; i++) {
		struct va_node *n = &vs->node[i];
		struct va_block *d, *next;

		va_lock(&n->pool.lock);
		d = pool_take_decay(n, vs->pool_classes, full, vs->quantum);
		va_unlock(&n->pool.lock);
		for (; d; d = next) {
			next = d->next;
			d->next = decayed;
			decayed = d;
		}
	}

	/* 4. released blocks go to their home pool if there is room, else toward the tree;
	 * adjacent tree-bound blocks are joined now, outside the lock */
	while (list) {
		struct va_block *b = list;
		uint64_t q = blk_size(b) >> vs->qshift;

		list = list->next;
		b->next = NULL;
		if (!full && q <= vs->pool_classes) {
			struct va_node *hn = &vs->node[b->home % vs->nodes];

			/* consecutive blocks mostly share a home: keep its pool locked */
			if (locked != hn) {
				if (locked)
					va_unlock(&locked->pool.lock);
				locked = hn;
				va_lock(&hn->pool.lock);
			}
			if (pool_push(hn, b, (unsigned)q, vs->cfg.pool_depth, vs->quantum))
				continue;
		}
		if (last && last->end == b->start) {
			last->end = b->end;
			bag_give(&bag, b);
			continue;
		}
		if (last)
			last->next = b;
		else
			to_tree = b;
		last = b;
	}
	if (locked)
		va_unlock(&locked->pool.lock);
	if (last)
		last->next = decayed;
	else
		to_tree = decayed;

	/* 5. merge into the free tree in bounded chunks */
	merge_into_tree(vs, to_tree, &bag);

	atomic_fetch_sub_explicit(&vs->lazy_total, detached, memory_order_relaxed);
	atomic_fetch_add_explicit(&vs->drains, 1, memory_order_relaxed);
	objcache_return(&bag);
}

void lazy_drain(struct va_space *vs, bool full)
{
	va_lock(&vs->drain_lock);
	drain_pass(vs, full);
	va_unlock(&vs->drain_lock);
}

void lazy_after_free(struct va_space *vs, uint64_t lazy_now)
{
	uint64_t max = vs->cfg.lazy_max;

	if (lazy_now <= max)
		return;
	if (lazy_now - max > max) {
		/* the freeing thread drains itself; another drain may have done it meanwhile */
		va_lock(&vs->drain_lock);
		if (atomic_load_explicit(&vs->lazy_total, memory_order_relaxed) > max)
			drain_pass(vs, false);
		va_unlock(&vs->drain_lock);
		return;
	}
	if (vs->has_thread && !atomic_exchange_explicit(&vs->kick, true, memory_order_acq_rel)) {
		va_lock(&vs->ctl_lock);
		pthread_cond_signal(&vs->ctl_cond);
		va_unlock(&vs->ctl_lock);
	}
}

/* ---- background thread ------------------------------------------------------------------ */

static uint64_t total_frees(struct va_space *vs)
{
	uint64_t f = 0;

	for (unsigned i = 0; i < vs->nodes; i++)
		f += atomic_load_explicit(&vs->node[i].stat.frees, memory_order_relaxed);
	return f;
}

static bool has_leftovers(struct va_space *vs)
{
	bool any = atomic_load_explicit(&vs->lazy_total, memory_order_relaxed) != 0;

	for (unsigned i = 0; !any && vs->pool_classes && i < vs->nodes; i++) {
		va_lock(&vs->node[i].pool.lock);
		any = vs->node[i].pool.blocks != 0;
		va_unlock(&vs->node[i].pool.lock);
	}
	return any;
}

static void deadline_after_ms(struct timespec *ts, unsigned ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static void *drain_thread(void *arg)
{
	struct va_space *vs = arg;
	uint64_t seen_frees = total_frees(vs);

	va_lock(&vs->ctl_lock);
	while (!vs->stop) {
		if (!atomic_load_explicit(&vs->kick, memory_order_acquire)) {
			struct timespec ts;
			int rc;

			deadline_after_ms(&ts, vs->cfg.idle_drain_ms);
			rc = pthread_cond_timedwait(&vs->ctl_cond, &vs->ctl_lock, &ts);
			if (vs->stop)
				break;
			if (rc == ETIMEDOUT && !atomic_load_explicit(&vs->kick, memory_order_acquire)) {
				uint64_t f = total_frees(vs);
				bool idle = f == seen_frees;

				seen_frees = f;
				va_unlock(&vs->ctl_lock);
				if (idle && has_leftovers(vs))
					lazy_drain(vs, false);
				va_lock(&vs->ctl_lock);
			}
			continue;
		}
		atomic_store_explicit(&vs->kick, false, memory_order_release);
		va_unlock(&vs->ctl_lock);
		lazy_drain(vs, false);
		va_lock(&vs->ctl_lock);
	}
	va_unlock(&vs->ctl_lock);
	return NULL;
}

int lazy_thread_start(struct va_space *vs)
{
	pthread_condattr_t attr;

	if (va_mutex_init(&vs->ctl_lock))
		return -1;
	if (pthread_condattr_init(&attr))
		return -1;
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	if (pthread_cond_init(&vs->ctl_cond, &attr)) {
		pthread_condattr_destroy(&attr);
		return -1;
	}
	pthread_condattr_destroy(&attr);
	vs->ctl_ready = true;
	if (vs->cfg.no_thread)
		return 0;
	if (pthread_create(&vs->thread, NULL, drain_thread, vs))
		return -1;
	vs->has_thread = true;
	return 0;
}

void lazy_thread_stop(struct va_space *vs)
{
	if (vs->has_thread) {
		va_lock(&vs->ctl_lock);
		vs->stop = true;
		pthread_cond_signal(&vs->ctl_cond);
		va_unlock(&vs->ctl_lock);
		pthread_join(vs->thread, NULL);
		vs->has_thread = false;
	}
	if (vs->ctl_ready) {
		pthread_cond_destroy(&vs->ctl_cond);
		pthread_mutex_destroy(&vs->ctl_lock);
		vs->ctl_ready = false;
	}
}
