/*
 * lazy.c - lazy reclaim: per-node lazy lists as in the 2023 vmap-lock series, one release
 * per coalesced run as in the 2024 combined-flush patch, merged back into the 2018
 * free-tree rework's tree.
 *
 * A free appends {start, end, object, home} to its node's dense lazy array. A drain copies
 * every node's array (and a quarter of every pool, which decays back to the tree; a
 * DRAIN_FULL pass takes every pool) into one batch, radix-sorts it by address, calls the
 * release callback once per coalesced run of freed blocks with no allocator lock held,
 * then hands each block to its home node's pool (if the class has room) or merges it into
 * the free tree, drain_chunk blocks per free-tree lock hold. Only the placing step touches
 * the block objects, once each. While it runs the batch is visible to va_walk/va_check as
 * lazy blocks (struct va_inflight).
 * The background thread drains when woken past lazy_max and after idle_drain_ms without
 * allocations or frees (then, once per such idle period, it also runs va_release_free);
 * past 2 x lazy_max the freeing thread drains itself. The background thread's passes
 * yield the CPU every DRAIN_YIELD_NS, between release calls and lock holds (drain_step).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "va_internal.h"

/* The space this thread is draining, so a release callback cannot start a nested drain. */
static __thread const struct va_space *tls_draining;

/*
 * A woken drain thread that had slept long is not preempted by the threads that wake on its
 * CPU (the scheduler lets it run out its slice): a worker answering requests waited in the
 * run queue for a whole pass, about 1 ms, while another CPU sat idle. So the background
 * thread offers the CPU every DRAIN_YIELD_NS, never with a lock held; sched_yield costs one
 * system call when nobody waits. A thread that drains itself (past 2 x lazy_max, va_drain)
 * does not yield: its caller waits for that drain.
 */
#define DRAIN_YIELD_NS 20000
static __thread bool tls_background;   /* this is a space's background drain thread */
static __thread uint64_t tls_yield_at; /* CLOCK_MONOTONIC ns of the next yield */

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A point in a pass where no allocator lock is held: step aside if it is time. */
static void drain_step(struct va_space *vs)
{
	if (!tls_background || mono_ns() < tls_yield_at)
		return;
	sched_yield();
	va_sat_add_atomic(&vs->drain_yields, 1);
	tls_yield_at = mono_ns() + DRAIN_YIELD_NS;
}

bool lazy_reserve(struct va_node *n)
{
	while (n->lazy_len == n->lazy_cap) {
		uint32_t want = n->lazy_cap ? n->lazy_cap * 2 : 256;
		struct lazy_item *p, *old;

		if (want <= n->lazy_cap)
			return false;
		va_unlock(n->lk);
		p = malloc(want * sizeof(*p));
		va_lock(n->lk);
		if (!p)
			return false;
		old = p;
		if (n->lazy_cap < want) {
			if (n->lazy_len)
				memcpy(p, n->lazy, n->lazy_len * sizeof(*p));
			old = n->lazy;
			n->lazy = p;
			n->lazy_cap = want;
		}
		va_unlock(n->lk);
		free(old);
		va_lock(n->lk);
	}
	return true;
}

/* Grow the batch arrays to n items (drain_lock held, no other lock). The checker reads the
 * batch, so the new array is swapped in under inflight.lock. */
static bool batch_reserve(struct va_space *vs, size_t n)
{
	struct lazy_item *a, *t, *old;
	size_t cap;

	if (n <= vs->scratch_cap)
		return true;
	cap = vs->scratch_cap ? vs->scratch_cap : 1024;
	while (cap < n)
		cap *= 2;
	a = malloc(cap * sizeof(*a));
	t = malloc(cap * sizeof(*t));
	if (!a || !t) {
		free(a);
		free(t);
		return false;
	}
	va_lock(vs->inflight.lk);
	if (vs->inflight.n)
		memcpy(a, vs->inflight.items, vs->inflight.n * sizeof(*a));
	old = vs->inflight.items;
	vs->inflight.items = a;
	va_unlock(vs->inflight.lk);
	free(old);
	free(vs->scratch_tmp);
	vs->scratch_tmp = t;
	vs->scratch_cap = cap;
	return true;
}

/* Move every node's lazy array into the batch; returns their bytes, which lazy_total now
 * counts in full (the part a node had not flushed yet is added here, under the node's lock,
 * so no lazy byte is ever outside both lazy_total and a node's unflushed count). A node
 * whose items do not fit (no memory) keeps them for the next drain. */
static uint64_t detach_lazy(struct va_space *vs)
{
	struct va_inflight *in = &vs->inflight;
	uint64_t flushed = 0;

	for (unsigned i = 0; i < vs->nodes; i++) {
		struct va_node *n = &vs->node[i];
		bool room = true;

		va_lock(n->lk);
		while (room && n->lazy_len > vs->scratch_cap - in->n) {
			size_t want = in->n + n->lazy_len + n->lazy_len / 2;

			va_unlock(n->lk);
			room = batch_reserve(vs, want);
			va_lock(n->lk);
		}
		if (room && n->lazy_len) {
			va_lock_in(n->lk, in->lk);
			memcpy(&in->items[in->n], n->lazy, n->lazy_len * sizeof(*n->lazy));
			in->n += n->lazy_len;
			in->bytes += n->lazy_bytes;
			in->blocks += n->lazy_len;
			va_unlock_in(n->lk, in->lk);
			atomic_fetch_add_explicit(&vs->lazy_total, n->lazy_unflushed,
						  memory_order_relaxed);
			flushed += n->lazy_bytes;
			n->lazy_len = 0;
			n->lazy_bytes = 0;
			n->lazy_unflushed = 0;
		}
		va_unlock(n->lk);
	}
	return flushed;
}

/* Move the decaying part of every pool (all of it for DRAIN_FULL) into the batch, bound for
 * the tree. They are not lazy: until the pass places them they stay pooled blocks
 * (va_get_stats, va_walk), and lazy_total does not count them (a long pass carrying them
 * beside new frees must not look like lazy bytes past 2 x lazy_max, nor make the freeing
 * threads drain). Without cfg.zero they were released before they were pooled; with it they
 * were only zeroed, still hold memory, and are released now, in runs with the freed blocks
 * beside them, so memory stays resident only while it is pooled. */
static void detach_decay(struct va_space *vs, enum drain_kind kind)
{
	struct va_inflight *in = &vs->inflight;
	const uint32_t decay_flags = LI_DECAY | LI_TO_TREE | (vs->cfg.zero ? 0 : LI_RELEASED);

	for (unsigned i = 0; i < vs->nodes; i++) {
		struct va_node *n = &vs->node[i];
		struct va_block *d, *next;
		bool room = true;

		va_lock(n->lk);
		/* a new demand period for every class (see place_in_pools) */
		for (unsigned c = 0; c < vs->pool_classes; c++) {
			n->pool[c].recent = n->pool[c].wanted;
			n->pool[c].wanted = 0;
		}
		while (room && n->pool_blocks > vs->scratch_cap - in->n) {
			size_t want = in->n + n->pool_blocks;

			va_unlock(n->lk);
			room = batch_reserve(vs, want);
			va_lock(n->lk);
		}
		d = room && n->pool_blocks ? pool_take_decay(n, vs->pool_classes, kind, vs->quantum)
					   : NULL;
		if (d) {
			va_lock_in(n->lk, in->lk);
			for (; d; d = next) {
				next = d->next;
				in->items[in->n++] = (struct lazy_item){.start = d->start,
									.end = d->end,
									.b = d,
									.home = i,
									.flags = decay_flags};
				in->decay_bytes += blk_size(d);
				in->decay_blocks++;
			}
			va_unlock_in(n->lk, in->lk);
		}
		va_unlock(n->lk);
	}
}

static unsigned log2_ceil_u64(uint64_t x)
{
	return x <= 1 ? 0 : 64 - (unsigned)__builtin_clzll(x - 1);
}

#define RADIX_MAX_BITS 11
#define SMALL_SORT     32 /* batches up to this size: insertion sort */

/* Insertion sort by start: for small batches, where a radix pass's counters cost more. */
static void insertion_sort(struct lazy_item *it, size_t n)
{
	for (size_t k = 1; k < n; k++) {
		struct lazy_item x = it[k];
		size_t j = k;

		for (; j && it[j - 1].start > x.start; j--)
			it[j] = it[j - 1];
		it[j] = x;
	}
}

/*
 * Sort the batch by address. An LSD radix sort by quantum index relative to the lowest
 * start, over only the bits the batch spans (a batch of frees in one region needs one or
 * two passes, not the whole space's three), with digits no wider than needed to cover
 * them in that many passes: linear and sequential in memory, where a comparison sort of a
 * list of block objects would take a cache miss per step. Small batches: insertion sort.
 */
static void sort_batch(struct va_space *vs)
{
	struct va_inflight *in = &vs->inflight;
	struct lazy_item *src, *dst, *t;
	size_t count[1u << RADIX_MAX_BITS], n = in->n;
	uint64_t lo = UINT64_MAX, hi = 0;
	unsigned bits, passes, digit;

	if (n < 2)
		return;
	va_lock(in->lk);
	src = in->items;
	if (n <= SMALL_SORT) {
		insertion_sort(src, n);
		va_unlock(in->lk);
		return;
	}
	for (size_t k = 0; k < n; k++) {
		lo = src[k].start < lo ? src[k].start : lo;
		hi = src[k].start > hi ? src[k].start : hi;
	}
	bits = log2_ceil_u64(((hi - lo) >> vs->qshift) + 1);
	passes = (bits + RADIX_MAX_BITS - 1) / RADIX_MAX_BITS;
	digit = passes ? (bits + passes - 1) / passes : 0;
	dst = vs->scratch_tmp;
	for (unsigned p = 0; p < passes; p++) {
		unsigned s = vs->qshift + p * digit, size = 1u << digit;
		uint64_t mask = size - 1;
		size_t sum = 0;

		memset(count, 0, size * sizeof(count[0]));
		for (size_t k = 0; k < n; k++)
			count[((src[k].start - lo) >> s) & mask]++;
		for (unsigned d = 0; d < size; d++) {
			size_t c = count[d];

			count[d] = sum;
			sum += c;
		}
		for (size_t k = 0; k < n; k++)
			dst[count[((src[k].start - lo) >> s) & mask]++] = src[k];
		t = src;
		src = dst;
		dst = t;
	}
	in->items = src;
	vs->scratch_tmp = dst;
	va_unlock(in->lk);
}

/* One release callback per run of adjacent freed blocks, no allocator lock held. The batch
 * is not changed meanwhile (the checker may read it too). */
static void release_batch(struct va_space *vs)
{
	const struct lazy_item *it = vs->inflight.items;
	size_t n = vs->inflight.n;

	for (size_t k = 0; k < n;) {
		uint64_t start, end;

		if (it[k].flags & (LI_RELEASED | LI_PLACED)) {
			k++;
			continue;
		}
		start = it[k].start;
		end = it[k].end;
		for (k++; k < n && !(it[k].flags & (LI_RELEASED | LI_PLACED)) && it[k].start == end;
		     k++)
			end = it[k].end;
		if (vs->cfg.release)
			vs->cfg.release(vs->cfg.release_ctx, start, end - start);
		va_sat_add_atomic(&vs->released_bytes, end - start);
		va_sat_add_atomic(&vs->release_calls, 1);
		drain_step(vs);
	}
}

/* Does a released block of q quanta belong in node hn's pool (hn->lock held)? Only classes
 * asked for since the drain before: a pool nobody allocates from would keep its blocks
 * out of the tree, fragmenting it, until it decays. */
static bool pool_wants(const struct va_space *vs, const struct va_node *hn, uint64_t q)
{
	const struct va_pool_class *c = &hn->pool[q - 1];

	return (c->recent || c->wanted) && c->count + c->chosen < vs->cfg.pool_depth;
}

/* With cfg.zero: mark (LI_WANT) the freed blocks their home pool wants now, under each
 * node's lock a chunk at a time, so only those are zeroed in place. */
static void choose_for_pools(struct va_space *vs)
{
	struct va_inflight *in = &vs->inflight;
	struct va_node *locked = NULL;
	unsigned held = 0;

	for (size_t k = 0; k < in->n; k++) {
		struct lazy_item *it = &in->items[k];
		uint64_t q = (it->end - it->start) >> vs->qshift;
		struct va_node *hn;

		if ((it->flags & (LI_TO_TREE | LI_RELEASED)) || q > vs->pool_classes)
			continue;
		hn = &vs->node[it->home % vs->nodes];
		if (locked != hn || held >= vs->cfg.drain_chunk) {
			if (locked) {
				va_unlock_in(locked->lk, in->lk);
				va_unlock(locked->lk);
			}
			locked = hn;
			held = 0;
			va_lock(hn->lk);
			va_lock_in(hn->lk, in->lk); /* the checker reads the flags */
		}
		held++;
		if (pool_wants(vs, hn, q)) {
			it->flags |= LI_WANT;
			hn->pool[q - 1].chosen++; /* room kept for it until place_in_pools */
		}
	}
	if (locked) {
		va_unlock_in(locked->lk, in->lk);
		va_unlock(locked->lk);
	}
}

/* Pass the m blocks of r to cfg.zero_many (in one call) or cfg.zero (one call each). */
static void zero_extents(struct va_space *vs, const struct va_extent *r, size_t m)
{
	uint64_t bytes = 0;

	for (size_t i = 0; i < m; i++)
		bytes += r[i].size;
	if (vs->cfg.zero_many) {
		vs->cfg.zero_many(vs->cfg.release_ctx, r, m);
		drain_step(vs);
	} else {
		for (size_t i = 0; i < m; i++) {
			vs->cfg.zero(vs->cfg.release_ctx, r[i].start, r[i].size);
			drain_step(vs);
		}
	}
	va_sat_add_atomic(&vs->zeroed_bytes, bytes);
	va_sat_add_atomic(&vs->zero_calls, m);
}

/* With cfg.zero: every block chosen for a pool reads zeros in place, no lock held; in
 * address order (the batch is sorted), VA_ZERO_MANY at a time. */
static void zero_chosen(struct va_space *vs)
{
	struct lazy_item *it = vs->inflight.items;
	size_t n = vs->inflight.n, m = 0;
	struct va_extent r[VA_ZERO_MANY];

	for (size_t k = 0; k < n; k++) {
		if (!(it[k].flags & LI_WANT))
			continue;
		r[m++] = (struct va_extent){it[k].start, it[k].end - it[k].start};
		if (m == VA_ZERO_MANY) {
			zero_extents(vs, r, m);
			m = 0;
		}
	}
	if (m)
		zero_extents(vs, r, m);
	va_lock(vs->inflight.lk); /* the checker reads the flags */
	for (size_t k = 0; k < n; k++)
		if (it[k].flags & LI_WANT)
			it[k].flags |= LI_ZEROED;
	va_unlock(vs->inflight.lk);
}

/* Released (or, with cfg.zero, zeroed) blocks of a pooled size go to their home pool while
 * the class has room and is in demand. */
static void place_in_pools(struct va_space *vs)
{
	struct va_inflight *in = &vs->inflight;
	struct va_node *locked = NULL;
	unsigned held = 0;

	for (size_t k = 0; k < in->n; k++) {
		struct lazy_item *it = &in->items[k];
		uint64_t size = it->end - it->start, q = size >> vs->qshift;
		struct va_node *hn;

		if ((it->flags & LI_TO_TREE) || q > vs->pool_classes)
			continue;
		if (k + 8 < in->n)
			__builtin_prefetch(in->items[k + 8].b, 1);
		hn = &vs->node[it->home % vs->nodes];
		if (locked != hn || held >= vs->cfg.drain_chunk) {
			if (locked) {
				va_unlock_in(locked->lk, in->lk);
				va_unlock(locked->lk);
				drain_step(vs);
			}
			locked = hn;
			held = 0;
			va_lock(hn->lk);
			va_lock_in(hn->lk, in->lk);
		}
		held++;
		if (it->flags & LI_WANT)
			hn->pool[q - 1].chosen--;
		/* with cfg.zero only blocks zeroed for a pool: the rest is not released yet */
		if ((vs->cfg.zero ? (it->flags & LI_ZEROED) != 0 : pool_wants(vs, hn, q)) &&
		    pool_push(hn, it->b, (unsigned)q, vs->cfg.pool_depth, vs->quantum, false)) {
			it->flags |= LI_PLACED;
			in->bytes -= size;
			in->blocks--;
		} else {
			it->flags |= LI_TO_TREE;
		}
	}
	if (locked) {
		va_unlock_in(locked->lk, in->lk);
		va_unlock(locked->lk);
	}
}

/* An item leaves the batch's counters: lazy (freed, released by this pass) or decaying. */
static inline void unplace(struct va_inflight *in, const struct lazy_item *it)
{
	uint64_t size = it->end - it->start;

	if (it->flags & LI_DECAY) {
		in->decay_bytes -= size;
		in->decay_blocks--;
	} else {
		in->bytes -= size - it->gap;
		in->blocks--;
		in->gap_bytes -= it->gap;
	}
}

/* Everything not pooled merges into the free tree: adjacent blocks become one (the first
 * object takes the run, the others are spare), drain_chunk blocks per lock hold. */
static void place_in_tree(struct va_space *vs, struct va_bag *bag)
{
	struct va_inflight *in = &vs->inflight;
	struct va_block **extras = (struct va_block **)vs->scratch_tmp;
	size_t k = 0, n = in->n, nextra = 0;

	while (k < n) {
		size_t k0;

		while (k < n && (in->items[k].flags & LI_PLACED))
			k++;
		if (k == n)
			break;
		k0 = k;
		va_lock(&vs->free.lock);
		va_lock_in(&vs->free.lock, in->lk);
		for (unsigned cnt = 0; k < n && cnt < vs->cfg.drain_chunk;) {
			struct lazy_item *it = &in->items[k];
			struct va_block *b0;
			uint64_t start, end;

			if (it->flags & LI_PLACED) {
				k++;
				continue;
			}
			if (k + 4 < n)
				__builtin_prefetch(in->items[k + 4].b, 1);
			b0 = it->b;
			start = it->start;
			end = it->end;
			it->flags |= LI_PLACED;
			unplace(in, it);
			for (k++, cnt++;
			     k < n && cnt < vs->cfg.drain_chunk &&
			     !(in->items[k].flags & LI_PLACED) && in->items[k].start == end;
			     k++, cnt++) {
				end = in->items[k].end;
				in->items[k].flags |= LI_PLACED | LI_EXTRA;
				unplace(in, &in->items[k]);
			}
			b0->start = start;
			b0->end = end;
			ft_insert(&vs->free.tree, b0, bag);
		}
		va_unlock_in(&vs->free.lock, in->lk);
		va_unlock(&vs->free.lock);
		/* the objects of merged blocks become spares: collected as pointers in the
		 * (now unused) sort buffer, so they are not touched */
		for (size_t j = k0; j < k; j++)
			if (in->items[j].flags & LI_EXTRA)
				extras[nextra++] = in->items[j].b;
		drain_step(vs);
	}
	objcache_return_array(extras, nextra);
}

/* A freed item still to be released and placed in the tree (not pooled, not decaying). */
static inline bool tree_bound(const struct lazy_item *it)
{
	return !(it->flags & (LI_RELEASED | LI_PLACED));
}

/*
 * With cfg.zero: between two freed blocks bound for the tree, a gap that is one whole free block
 * (the space between aligned pool blocks, say) leaves the tree and joins the first block, so the
 * two are released as one run: one callback where there were two (a second punch of space released
 * before is harmless). free.lock and inflight.lock are held for drain_chunk gaps at a time; the
 * gap's bytes count as in flight (lazy) meanwhile, as a va_release_free chunk's do, so every byte
 * is still in one place. Its object is spare.
 */
static void absorb_gaps(struct va_space *vs, struct va_bag *bag)
{
	struct va_inflight *in = &vs->inflight;
	size_t n = in->n, k = 0;

	while (k + 1 < n) {
		va_lock(&vs->free.lock);
		va_lock_in(&vs->free.lock, in->lk);
		for (unsigned cnt = 0; k + 1 < n && cnt < vs->cfg.drain_chunk; k++) {
			struct lazy_item *it = &in->items[k], *nx = &in->items[k + 1];
			struct va_block *g;

			/* a decaying block's bytes count as pooled: it takes no gap */
			if (!tree_bound(it) || (it->flags & LI_DECAY) || !tree_bound(nx) ||
			    it->end >= nx->start)
				continue;
			cnt++;
			g = ft_floor(&vs->free.tree, it->end);
			if (!g || g->start != it->end || g->end != nx->start)
				continue;
			g = ft_carve(&vs->free.tree, g, g->start, blk_size(g), bag);
			if (!g)
				continue;
			/* free space, already released: it stays out of the lazy counters */
			in->gap_bytes += blk_size(g);
			it->gap += blk_size(g);
			it->end = g->end;
			it->b->end =
			    g->end; /* a lazy object is in no tree: its range is only read */
			bag_give(bag, g);
		}
		va_unlock_in(&vs->free.lock, in->lk);
		va_unlock(&vs->free.lock);
		drain_step(vs);
	}
}

/* One drain pass; drain_lock held. */
static void drain_pass(struct va_space *vs, enum drain_kind kind)
{
	struct va_bag bag = {0};
	uint64_t flushed;

	tls_yield_at = mono_ns() + DRAIN_YIELD_NS;
	flushed = detach_lazy(vs);
	if (vs->pool_classes)
		detach_decay(vs, kind);
	sort_batch(vs);
	if (vs->cfg.zero && vs->pool_classes && kind == DRAIN_DECAY) {
		/* pooled blocks read zeros in place; only the tree's part is released */
		choose_for_pools(vs);
		zero_chosen(vs);
		place_in_pools(vs);
		absorb_gaps(vs, &bag);
		release_batch(vs);
	} else {
		release_batch(vs);
		if (vs->pool_classes && kind == DRAIN_DECAY)
			place_in_pools(vs);
	}
	place_in_tree(vs, &bag);
	va_lock(vs->inflight.lk);
	vs->inflight.n = 0;
	va_unlock(vs->inflight.lk);
	atomic_fetch_sub_explicit(&vs->lazy_total, flushed, memory_order_relaxed);
	va_sat_add_atomic(&vs->drains, 1);
	objcache_return(&bag);
}

bool lazy_enter(struct va_space *vs, const struct va_space **outer)
{
	*outer = tls_draining;
	if (*outer == vs)
		return false;
	atomic_fetch_add_explicit(&vs->drain_asked, 1, memory_order_relaxed);
	va_lock(&vs->drain_lock);
	atomic_fetch_add_explicit(&vs->drain_granted, 1, memory_order_relaxed);
	tls_draining = vs;
	return true;
}

void lazy_let_waiters_in(struct va_space *vs)
{
	uint64_t asked = atomic_load_explicit(&vs->drain_asked, memory_order_relaxed);

	/* only those already waiting: later arrivals do not extend the wait */
	while (atomic_load_explicit(&vs->drain_granted, memory_order_relaxed) < asked &&
	       !atomic_load_explicit(&vs->stopping, memory_order_relaxed))
		sched_yield();
}

void lazy_leave(struct va_space *vs, const struct va_space *outer)
{
	tls_draining = outer;
	va_unlock(&vs->drain_lock);
}

void lazy_pass_if_over(struct va_space *vs)
{
	if (atomic_load_explicit(&vs->lazy_total, memory_order_relaxed) > vs->cfg.lazy_max)
		drain_pass(vs, DRAIN_DECAY);
}

void lazy_step(struct va_space *vs)
{
	drain_step(vs);
}

/* One pass of kind, unless this thread is already draining vs (a release callback). */
static void drain_guarded(struct va_space *vs, enum drain_kind kind)
{
	const struct va_space *outer;

	if (!lazy_enter(vs, &outer))
		return;
	drain_pass(vs, kind);
	lazy_leave(vs, outer);
}

/* As drain_guarded, but the pass runs only if lazy_total is still over lazy_max once
 * drain_lock is ours (another thread's pass may have drained meanwhile). */
static void drain_guarded_if_over(struct va_space *vs)
{
	const struct va_space *outer;

	if (!lazy_enter(vs, &outer))
		return;
	lazy_pass_if_over(vs);
	lazy_leave(vs, outer);
}

void lazy_drain_full(struct va_space *vs)
{
	drain_guarded(vs, DRAIN_FULL);
}

/* The background thread's drain: lazy blocks to pools and tree, a quarter of each pool
 * back to the tree. */
static void lazy_drain_decay(struct va_space *vs)
{
	drain_guarded(vs, DRAIN_DECAY);
}

bool lazy_drain_hold(struct va_space *vs, const struct va_space **outer)
{
	if (!lazy_enter(vs, outer))
		return false;
	drain_pass(vs, DRAIN_FULL);
	return true;
}

void lazy_after_free(struct va_space *vs, uint64_t lazy_now, bool flushed)
{
	if (lazy_now > vs->lazy_self_at) {
		/* the freeing thread drains itself (or waits for the pass that does); another
		 * drain may have done it meanwhile */
		drain_guarded_if_over(vs);
		return;
	}
	if (!flushed || lazy_now <= vs->cfg.lazy_max)
		return;
	if (vs->has_thread && !atomic_exchange_explicit(&vs->kick, true, memory_order_acq_rel)) {
		va_lock(&vs->ctl_lock);
		pthread_cond_signal(&vs->ctl_cond);
		va_unlock(&vs->ctl_lock);
	}
}

/* ---- background thread ------------------------------------------------------------------ */

/* Allocations and frees so far: a sum that only serves to see whether it changed, so it may
 * wrap (a saturated sum would stop changing). */
static uint64_t total_activity(struct va_space *vs)
{
	uint64_t f = 0;

	for (unsigned i = 0; i < vs->nodes; i++) {
		va_lock(vs->node[i].lk);
		f += vs->node[i].frees + vs->node[i].allocs;
		va_unlock(vs->node[i].lk);
	}
	return f;
}

/* Anything for an idle drain to do: lazy blocks, or pools to decay. */
static bool has_leftovers(struct va_space *vs)
{
	bool any = false;

	for (unsigned i = 0; !any && i < vs->nodes; i++) {
		va_lock(vs->node[i].lk);
		any = vs->node[i].lazy_len || vs->node[i].pool_blocks;
		va_unlock(vs->node[i].lk);
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
	uint64_t seen = total_activity(vs);
	bool released = false; /* va_release_free ran in this idle period */

	/* This thread's passes step aside every DRAIN_YIELD_NS (drain_step). */
	tls_background = true;
	pthread_setname_np(pthread_self(), "va-drain"); /* for top -H and ps -L */

	va_lock(&vs->ctl_lock);
	while (!vs->stop) {
		if (!atomic_load_explicit(&vs->kick, memory_order_acquire)) {
			struct timespec ts;
			int rc;

			deadline_after_ms(&ts, vs->cfg.idle_drain_ms);
			rc = pthread_cond_timedwait(&vs->ctl_cond, &vs->ctl_lock, &ts);
			if (vs->stop)
				break;
			if (rc == ETIMEDOUT &&
			    !atomic_load_explicit(&vs->kick, memory_order_acquire)) {
				uint64_t f = total_activity(vs);
				bool idle = f == seen;

				seen = f;
				if (!idle)
					released = false;
				va_unlock(&vs->ctl_lock);
				if (idle && has_leftovers(vs))
					lazy_drain_decay(vs);
				/* once per idle period: free space a client wrote into */
				if (idle && !released && !vs->cfg.no_idle_release) {
					va_release_free(vs);
					released = true;
				}
				va_lock(&vs->ctl_lock);
			}
			continue;
		}
		atomic_store_explicit(&vs->kick, false, memory_order_release);
		va_unlock(&vs->ctl_lock);
		lazy_drain_decay(vs);
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
	atomic_store_explicit(&vs->stopping, true, memory_order_relaxed);
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
