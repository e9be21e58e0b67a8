/*
 * release.c - va_release_free: pass the free tree's blocks to the release callback, so
 * free space a client wrote into goes back to the system.
 *
 * A chunk of at most RELEASE_CHUNK_BLOCKS blocks and release_chunk_bytes() bytes leaves the
 * free tree at a time (a bigger block is cut), sits on the in-flight list (va_walk and
 * va_check see it as lazy, lazy_total counts it) while the callback runs with no allocator
 * lock held, then merges back. The chunk is out only while drain_lock is held, as a drain
 * pass is: an allocation that finds no room takes drain_lock for its retry, so it never
 * fails because a chunk is out; frees past 2 x lazy_max wait for one chunk at most (the
 * threads waiting for drain_lock go first between two chunks: lazy_let_waiters_in).
 */
#include "va_internal.h"

#define RELEASE_CHUNK_BLOCKS 64
#define RELEASE_CHUNK_MAX    (64ull << 20)

/* Bytes one chunk may take: at most lazy_max less what the nodes may hold unflushed, so a
 * chunk (counted in lazy_total) on top of at most lazy_max lazy bytes stays within the
 * 2 x lazy_max bound; at least one quantum. */
static uint64_t release_chunk_bytes(const struct va_space *vs)
{
	uint64_t cap = RELEASE_CHUNK_MAX, slack = vs->lazy_slack;

	if (vs->cfg.lazy_max > slack && vs->cfg.lazy_max - slack < cap)
		cap = vs->cfg.lazy_max - slack;
	cap &= ~(vs->quantum - 1);
	return cap < vs->quantum ? vs->quantum : cap;
}

/*
 * Count up to cap bytes of chunk in lazy_total before taking them (drain_lock held), where
 * they leave lazy_total at most lazy_self_at: a free that adds its bytes after this sees
 * the chunk and drains (waiting for this chunk), one that added before is in the sum here.
 * With no room, a drain pass makes some. Returns the bytes counted (a quantum at least).
 */
static uint64_t reserve_chunk(struct va_space *vs, uint64_t cap)
{
	uint64_t old = atomic_load_explicit(&vs->lazy_total, memory_order_relaxed);

	for (unsigned passes = 0;;) {
		uint64_t room = vs->lazy_self_at > old ? vs->lazy_self_at - old : 0, want;

		want = (room < cap ? room : cap) & ~(vs->quantum - 1);
		if (want < vs->quantum) {
			if (passes++ < 4) {
				lazy_pass_if_over(vs);
				old = atomic_load_explicit(&vs->lazy_total, memory_order_relaxed);
				continue;
			}
			want = vs->quantum; /* frees outrun the passes: one quantum at a time */
		}
		if (atomic_compare_exchange_weak_explicit(&vs->lazy_total, &old, old + want,
							  memory_order_relaxed,
							  memory_order_relaxed))
			return want;
	}
}

/* Take up to one chunk of free space at or above *cursor out of the tree onto the in-flight
 * list (free.lock and inflight.lock held). Returns the pieces taken; *cursor moves past
 * them. bag holds at least 2 objects (a cut inside a block needs two). */
static unsigned take_chunk(struct va_space *vs, uint64_t *cursor, uint64_t cap,
			   struct va_block **pieces, uint64_t *bytes_out, struct va_bag *bag)
{
	struct va_freetree *ft = &vs->free.tree;
	struct va_inflight *in = &vs->inflight;
	struct va_block *b = ft_floor(ft, *cursor);
	uint64_t bytes = 0;
	unsigned n = 0;

	if (!b)
		b = ft_first(ft);
	else if (b->end <= *cursor)
		b = ft_next(ft, b);
	while (b && n < RELEASE_CHUNK_BLOCKS && bytes < cap && bag->n >= 2) {
		struct va_block *next = ft_next(ft, b), *p;
		uint64_t s = b->start > *cursor ? b->start : *cursor, end = b->end, e = end;

		if (e - s > cap - bytes)
			e = s + (cap - bytes);
		p = ft_carve(ft, b, s, e - s, bag);
		if (!p)
			break;
		blk_set_state(p, VA_ST_LAZY);
		blk_list_push(&in->eager, p);
		in->bytes += e - s;
		in->blocks++;
		pieces[n++] = p;
		bytes += e - s;
		*cursor = e;
		if (e != end)
			break; /* the chunk is full; the rest of b waits for the next one */
		b = next;
	}
	*bytes_out = bytes;
	return n;
}

/* Merge the pieces back into the tree (free.lock and inflight.lock taken here). */
static void put_back(struct va_space *vs, struct va_block **pieces, unsigned n, uint64_t bytes,
		     struct va_bag *bag)
{
	struct va_inflight *in = &vs->inflight;

	va_lock(&vs->free.lock);
	va_lock_in(&vs->free.lock, in->lk);
	for (unsigned i = 0; i < n; i++) {
		struct va_block *p = pieces[i];

		blk_list_del(&in->eager, p);
		in->bytes -= blk_size(p);
		in->blocks--;
		ft_insert(&vs->free.tree, p, bag);
	}
	va_unlock_in(&vs->free.lock, in->lk);
	va_unlock(&vs->free.lock);
	atomic_fetch_sub_explicit(&vs->lazy_total, bytes, memory_order_relaxed);
}

uint64_t va_release_free(struct va_space *vs)
{
	struct va_block *pieces[RELEASE_CHUNK_BLOCKS];
	uint64_t cursor, total = 0, cap;

	if (!vs || !vs->cfg.release)
		return 0;
	cap = release_chunk_bytes(vs);
	cursor = vs->base;
	while (cursor < vs->end && !atomic_load_explicit(&vs->stopping, memory_order_relaxed)) {
		const struct va_space *outer;
		struct va_bag bag = {0};
		uint64_t bytes, want;
		unsigned n;

		if (objcache_fill(&bag, 2))
			break;
		if (!lazy_enter(vs, &outer)) {
			objcache_return(&bag);
			break; /* called from a release callback of vs: that drain is running */
		}
		want = reserve_chunk(vs, cap);
		va_lock(&vs->free.lock);
		va_lock_in(&vs->free.lock, vs->inflight.lk);
		n = take_chunk(vs, &cursor, want, pieces, &bytes, &bag);
		va_unlock_in(&vs->free.lock, vs->inflight.lk);
		va_unlock(&vs->free.lock);
		atomic_fetch_sub_explicit(&vs->lazy_total, want - bytes, memory_order_relaxed);
		for (unsigned i = 0; i < n; i++) {
			vs->cfg.release(vs->cfg.release_ctx, pieces[i]->start, blk_size(pieces[i]));
			va_sat_add_atomic(&vs->free_released_bytes, blk_size(pieces[i]));
			va_sat_add_atomic(&vs->free_release_calls, 1);
			lazy_step(vs);
		}
		put_back(vs, pieces, n, bytes, &bag);
		lazy_leave(vs, outer);
		objcache_return(&bag);
		lazy_let_waiters_in(vs); /* frees past the bound wait for one chunk, not many */
		total += bytes;
		if (!n)
			break;
	}
	return total;
}
