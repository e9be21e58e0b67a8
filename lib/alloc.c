/*
 * alloc.c - allocation: the pool fast path, pool refills in the home node's zones, first
 * fit in the free tree (exact lowest address, or the kernel's inflated O(log n) search),
 * congruent groups (pcpu_get_vm_areas). See vaspace.c for the lock order.
 */
#include "va_internal.h"

/* find_congruent gave up after its step budget (never returned to callers). */
#define VA_EAGAIN_INTERNAL (-100)

/* Blocks one pool miss carves, the caller's included, one every q quanta: about 64
 * quanta, at most 16 blocks and pool_depth + 1, and all inside one zone. */
static unsigned refill_count(const struct va_space *vs, unsigned q)
{
	uint64_t per_zone = vs->zone / ((uint64_t)q << vs->qshift);
	unsigned n = 64 / q;

	if (n > 16)
		n = 16;
	if (n > vs->cfg.pool_depth + 1)
		n = vs->cfg.pool_depth + 1;
	if (vs->affinity_span && n > per_zone)
		n = (unsigned)per_zone;
	return n ? n : 1;
}

/* A zero call for a dirty pool block taken, or a run of them: counted in its pool's node
 * (zeroed once the lock is dropped). */
static inline void count_zero(struct va_node *hn, uint64_t size)
{
	hn->zeroed_bytes += size;
	hn->zero_calls++;
}

static inline void uncount_zero(struct va_node *hn, uint64_t size)
{
	hn->zeroed_bytes -= size;
	hn->zero_calls--;
}

/* A block popped from home node hn's pool becomes busy in its address's node bn (both
 * locked; the same node in the common case). */
static void pool_hit(const struct va_space *vs, struct va_node *hn, struct va_node *bn,
		     struct va_block *b, void *owner)
{
	b->owner = owner;
	busy_insert(bn, b, vs->qshift);
	va_sat_inc(&hn->pool_hits);
	va_sat_inc(&hn->allocs);
}

/*
 * Pool fast path: pop a ready block of q quanta from the home pool and enter it in its
 * address's busy tree. Pool blocks mostly lie in the home node's own zones (see
 * refill_pool), so this is one lock. Another node's lock is taken in ascending order or
 * tried; if a lower node is busy the block goes back and the caller takes the slow path.
 */
static bool alloc_from_pool(struct va_space *vs, unsigned home, unsigned q, uint64_t align,
			    void *owner, uint64_t *out)
{
	struct va_node *hn = &vs->node[home], *bn;
	struct va_block *b;
	uint64_t start;
	bool dirty;
	unsigned j;

	va_lock(hn->lk);
	if (hn->pool[q - 1].wanted != UINT32_MAX) /* a demand sign: saturates */
		hn->pool[q - 1].wanted++;
	b = align > vs->quantum ? pool_pop_aligned(hn, q, align, vs->quantum)
				: pool_pop(hn, q, vs->quantum);
	if (!b) {
		va_unlock(hn->lk);
		return false;
	}
	start = b->start;
	dirty = blk_state(b) == VA_ST_POOLED_DIRTY;
	if (dirty)
		count_zero(hn, (uint64_t)q << vs->qshift);
	j = va_node_of(vs, start);
	if (j == home) {
		pool_hit(vs, hn, hn, b, owner);
	} else {
		bn = &vs->node[j];
		if (j > home) {
			va_lock(bn->lk);
		} else if (!va_spin_trylock(bn->lk)) {
			if (dirty)
				uncount_zero(hn, (uint64_t)q << vs->qshift);
			pool_push(hn, b, q, vs->cfg.pool_depth, vs->quantum, dirty);
			va_unlock(hn->lk);
			return false;
		}
		pool_hit(vs, hn, bn, b, owner);
		va_unlock(bn->lk);
	}
	va_unlock(hn->lk);
	if (dirty) /* freed straight into the pool: it reads zeros before it is handed out */
		vs->cfg.zero(vs->cfg.release_ctx, start, (uint64_t)q << vs->qshift);
	*out = start;
	return true;
}

/* Where a refill of count blocks of size for node home goes (free.lock held): right after
 * the node's last refill if that zone still has room, else at the start of the lowest
 * zone of the node inside a free block big enough to hold one wherever it starts.
 * Returns the free block and sets *addr and *count, or NULL. */
static struct va_block *refill_spot(struct va_space *vs, unsigned home, uint64_t size,
				    unsigned *count, uint64_t *addr)
{
	struct va_node *hn = &vs->node[home];
	uint64_t cur = hn->refill_cursor, zone = vs->zone, skip, k;
	struct va_fit_req req;
	struct va_block *b;

	if (cur >= vs->base && cur < vs->end && va_node_of(vs, cur) == home) {
		uint64_t fit = (zone - cur % zone) / size; /* blocks left in cur's zone */

		if (fit > *count)
			fit = *count;
		b = fit ? ft_floor(&vs->free.tree, cur) : NULL;
		if (b && b->end > cur) {
			while (fit && b->end - cur < fit * size)
				fit--;
			if (fit) {
				*count = (unsigned)fit;
				*addr = cur;
				return b;
			}
		}
	}
	/* any free block this big holds a whole run in a zone of home, wherever it starts */
	if (__builtin_add_overflow(*count * size, vs->affinity_span - vs->quantum, &req.size) ||
	    req.size > vs->size)
		return NULL;
	req.min_block = req.size;
	req.align = vs->quantum;
	req.vstart = vs->base;
	req.vend = vs->end;
	b = ft_lowest_fit(&vs->free.tree, &req, addr);
	if (!b)
		return NULL;
	/* distance from b->start to the first zone start at or above it that belongs to home */
	skip = b->start % zone ? zone - b->start % zone : 0;
	k = (b->start / zone + (skip ? 1 : 0)) % vs->nodes;
	skip += ((home + vs->nodes - k) % vs->nodes) * zone;
	if (skip > blk_size(b) || blk_size(b) - skip < *count * size)
		return NULL;
	*addr = b->start + skip;
	return b;
}

/* Make [a, a + size) of a carved run a pooled block of home's class q, or give it back
 * to the tree if the class filled up meanwhile (hn->lock and free.lock held). */
static void refill_push(struct va_space *vs, struct va_node *hn, uint64_t a, uint64_t size,
			unsigned q, struct va_bag *bag)
{
	struct va_block *p = bag_take(bag);

	p->start = a;
	p->end = a + size;
	if (!pool_push(hn, p, q, vs->cfg.pool_depth, vs->quantum, false))
		ft_insert(&vs->free.tree, p, bag);
}

/*
 * A pool miss: carve a run of blocks in one of the home node's zones; the caller gets the
 * first, the home pool the rest (free.lock held, bag holds 2 x count + 1 objects). With an
 * alignment above the quantum the blocks start every stride (size rounded up to align)
 * at aligned addresses and the gaps between them go back to the tree. Returns the caller's
 * block, or NULL when no zone of the node has room.
 */
static struct va_block *refill_pool(struct va_space *vs, unsigned home, uint64_t size,
				    uint64_t align, unsigned count, struct va_bag *bag)
{
	struct va_node *hn = &vs->node[home];
	uint64_t stride = (size + align - 1) & ~(align - 1), a, end;
	unsigned q = (unsigned)(size >> vs->qshift);
	struct va_block *b, *first;

	b = refill_spot(vs, home, stride, &count, &a);
	if (!b)
		return NULL;
	if (a & (align - 1)) { /* the node's last refill ended unaligned: start further up */
		uint64_t zone_end = (a / vs->zone + 1) * vs->zone, lim;

		a = (a + align - 1) & ~(align - 1);
		lim = b->end < zone_end ? b->end : zone_end;
		while (count && (a >= lim || lim - a < count * stride))
			count--;
		if (!count)
			return NULL;
	}
	end = a + (count - 1) * stride + size;
	first = ft_carve(&vs->free.tree, b, a, end - a, bag);
	if (!first)
		return NULL;
	first->end = a + size;
	hn->refill_cursor = a + count * stride;
	va_lock_in(&vs->free.lock, hn->lk);
	for (unsigned i = count; i-- > 1;)
		refill_push(vs, hn, a + i * stride, size, q, bag);
	va_unlock_in(&vs->free.lock, hn->lk);
	for (unsigned i = 0; stride != size && i + 1 < count; i++) { /* the gaps: free again */
		struct va_block *g = bag_take(bag);

		g->start = a + i * stride + size;
		g->end = a + (i + 1) * stride;
		ft_insert(&vs->free.tree, g, bag);
	}
	return first;
}

/*
 * First fit (free.lock held). Exact mode: the lowest fitting address. Otherwise, with an
 * alignment above the quantum, first the kernel's search for a block of size + align -
 * quantum, which any block found satisfies (O(log n), where the exact search may pass over
 * many big-enough but misaligned fragments); the exact search only if that finds nothing.
 */
static struct va_block *find_fit(struct va_space *vs, const struct va_fit_req *req, uint64_t *addr)
{
	struct va_fit_req r = *req;
	struct va_block *b;

	uint64_t inflated;

	if (!vs->exact && r.align > vs->quantum &&
	    !__builtin_add_overflow(r.size, r.align - vs->quantum, &inflated) &&
	    inflated <= vs->size) {
		r.min_block = inflated;
		b = ft_lowest_fit(&vs->free.tree, &r, addr);
		if (b)
			return b;
	}
	r.min_block = r.size;
	return ft_lowest_fit(&vs->free.tree, &r, addr);
}

/* Carve up to count blocks of size from the start of free block b into the home pool
 * (free.lock held). Stops when b is used up or the pool class is full. */
static void refill_after(struct va_space *vs, struct va_block *b, uint64_t size, unsigned count,
			 unsigned home, struct va_bag *bag)
{
	struct va_node *hn = &vs->node[home];
	unsigned q = (unsigned)(size >> vs->qshift);

	va_lock_in(&vs->free.lock, hn->lk);
	while (count-- && hn->pool[q - 1].count < vs->cfg.pool_depth && blk_size(b) >= size) {
		struct va_block *p = ft_carve(&vs->free.tree, b, b->start, size, bag);

		if (!p)
			break;
		pool_push(hn, p, q, vs->cfg.pool_depth, vs->quantum, false);
		if (p == b)
			break; /* full fit: b itself went to the pool */
	}
	va_unlock(hn->lk);
}

/* Lowest first fit in the free tree; refill > 1 means a pool miss that refills the pool. */
static int alloc_from_tree(struct va_space *vs, const struct va_fit_req *req, unsigned home,
			   unsigned refill, void *owner, uint64_t *out)
{
	struct va_bag *bag;
	struct va_block *nb = NULL, *b;
	struct va_node *bn;
	uint64_t a;

	bag = objcache_bag(refill > 1 ? 2 * refill + 1 : 2);
	if (!bag)
		return VA_ENOMEM;
	va_lock(&vs->free.lock);
	if (refill > 1 && vs->affinity_span)
		nb = refill_pool(vs, home, req->size, req->align, refill, bag);
	if (!nb) {
		b = find_fit(vs, req, &a);
		if (!b) {
			va_unlock(&vs->free.lock);
			objcache_bag_done(bag);
			return VA_ENOSPC;
		}
		nb = ft_carve(&vs->free.tree, b, a, req->size, bag);
		/* no zone of the home node has room (a small space): refill from what follows */
		if (refill > 1 && req->align == vs->quantum && nb != b && b->start == a + req->size)
			refill_after(vs, b, req->size, refill - 1, home, bag);
	}
	a = nb->start;
	nb->owner = owner;
	bn = &vs->node[va_node_of(vs, a)];
	va_lock_in(&vs->free.lock, bn->lk);
	busy_insert(bn, nb, vs->qshift);
	va_sat_inc(&bn->allocs);
	va_unlock_in(&vs->free.lock, bn->lk);
	va_unlock(&vs->free.lock);
	objcache_bag_done(bag);
	*out = a;
	return 0;
}

/* Round size up to the quantum and align up to it; validate both. */
static int normalise(const struct va_space *vs, uint64_t size, uint64_t align, uint64_t *s_out,
		     uint64_t *a_out)
{
	uint64_t s;

	if (!size)
		return VA_ESIZE;
	if (align & (align - 1))
		return VA_EALIGN;
	if (__builtin_add_overflow(size, vs->quantum - 1, &s))
		return VA_EOVERFLOW;
	s &= ~(vs->quantum - 1);
	if (s > vs->size)
		return VA_EOVERFLOW;
	*s_out = s;
	*a_out = align < vs->quantum ? vs->quantum : align;
	return 0;
}

/* pool_tried: the caller's fast path found the home pool empty already (va_alloc). */
static int alloc_common(struct va_space *vs, uint64_t size, uint64_t align, uint64_t vstart,
			uint64_t vend, void *owner, uint64_t *out_addr, bool pool_tried)
{
	struct va_fit_req req;
	unsigned home, q = 0, stride_q = 0;
	uint64_t first;
	bool poolable;
	int rc;

	if (!vs || !out_addr)
		return VA_EINVAL;
	rc = normalise(vs, size, align, &req.size, &req.align);
	if (rc)
		return rc;
	if (vstart >= vend || vend <= vs->base || vstart >= vs->end)
		return VA_ERANGE;
	req.vstart = vstart < vs->base ? vs->base : vstart;
	req.vend = vend > vs->end ? vs->end : vend;
	req.min_block = req.size;
	home = va_home_node(vs);
	/* no aligned address of the window can hold it: fail without draining */
	if (__builtin_add_overflow(req.vstart, req.align - 1, &first) ||
	    (first &= ~(req.align - 1)) >= req.vend || req.vend - first < req.size) {
		va_sat_add_atomic(&vs->fails, 1);
		return VA_ENOSPC;
	}
	/* an alignment up to the zone's can be pooled too: refills then carve aligned runs */
	poolable = vs->pool_classes &&
		   (req.align == vs->quantum ||
		    (vs->affinity_span && vs->zone_pow2 && req.align <= vs->zone)) &&
		   req.vstart == vs->base && req.vend == vs->end &&
		   (req.size >> vs->qshift) <= vs->pool_classes;
	if (poolable) {
		q = (unsigned)(req.size >> vs->qshift);
		stride_q =
		    (unsigned)(((req.size + req.align - 1) & ~(req.align - 1)) >> vs->qshift);
	}

	/* the retry runs with drain_lock held, so no va_release_free chunk is out of the tree */
	const struct va_space *outer = NULL;
	bool held = false;

	for (int attempt = 0; attempt < 2; attempt++) {
		if (poolable && !(pool_tried && !attempt) &&
		    alloc_from_pool(vs, home, q, req.align, owner, out_addr)) {
			rc = 0;
			break;
		}
		rc = alloc_from_tree(vs, &req, home, poolable ? refill_count(vs, stride_q) : 0,
				     owner, out_addr);
		if (rc != VA_ENOSPC || attempt)
			break;
		held = lazy_drain_hold(vs, &outer);
	}
	if (held)
		lazy_leave(vs, outer);
	if (rc == VA_ENOSPC)
		va_sat_add_atomic(&vs->fails, 1);
	if (!rc)
		busy_hash_check(vs, *out_addr);
	return rc;
}

int va_alloc(struct va_space *vs, uint64_t size, uint64_t align, void *owner, uint64_t *out_addr)
{
	bool tried = false;

	if (!vs)
		return VA_EINVAL;
	/* a pool hit of a size the pools keep at the quantum's alignment: alloc_common's first
	 * step, without its checks and window arithmetic */
	if (out_addr && vs->pool_classes && size &&
	    size - 1 < ((uint64_t)vs->pool_classes << vs->qshift) && align <= vs->quantum &&
	    !(align & (align - 1))) {
		unsigned q = (unsigned)((size + vs->quantum - 1) >> vs->qshift);

		if (alloc_from_pool(vs, va_home_node(vs), q, vs->quantum, owner, out_addr)) {
			busy_hash_check(vs, *out_addr);
			return 0;
		}
		tried = true;
	}
	return alloc_common(vs, size, align, vs->base, vs->end, owner, out_addr, tried);
}

int va_alloc_range(struct va_space *vs, uint64_t size, uint64_t align, uint64_t vstart,
		   uint64_t vend, void *owner, uint64_t *out_addr)
{
	return alloc_common(vs, size, align, vstart, vend, owner, out_addr, false);
}

/* ---- batches ---------------------------------------------------------------------- */

/* Pool class (1..pool_classes) of an area of size bytes aligned to align, or 0 when it must
 * take va_alloc's path (no pools, a stronger alignment, a size the pools do not keep, or a
 * bad argument that path reports). */
static unsigned pool_class_of(const struct va_space *vs, uint64_t size, uint64_t align)
{
	if (!vs->pool_classes || align > vs->quantum || (align & (align - 1)) || !size ||
	    size > vs->size)
		return 0;
	uint64_t q = (size + vs->quantum - 1) >> vs->qshift;
	return q <= vs->pool_classes ? (unsigned)q : 0;
}

/* Runs of adjacent areas a pool run must zero (at most 64, one per area at worst). */
struct zero_runs {
	unsigned n;
	uint64_t start[64], end[64];
};

/*
 * Gather the areas of a pool run marked in dirty (bit k: out[k]) into runs of adjacent
 * areas, ascending or descending (a run's blocks were mostly carved and freed together),
 * each counted as one zero call: the daemon's zero asks the kernel where the file has data,
 * a syscall a call, which per area cost more than the rest of a batch's pool hit.
 */
static void plan_zero_runs(const struct va_space *vs, struct va_node *hn, uint64_t dirty,
			   const uint64_t *out, const uint64_t *sizes, uint64_t align,
			   struct zero_runs *zr)
{
	zr->n = 0;
	for (; dirty; dirty &= dirty - 1) {
		unsigned k = (unsigned)__builtin_ctzll(dirty);
		uint64_t size = (uint64_t)pool_class_of(vs, sizes[k], align) << vs->qshift;
		unsigned r = zr->n - 1;

		if (zr->n && out[k] == zr->end[r]) {
			zr->end[r] += size;
		} else if (zr->n && out[k] + size == zr->start[r]) {
			zr->start[r] = out[k];
		} else {
			zr->start[zr->n] = out[k];
			zr->end[zr->n++] = out[k] + size;
		}
	}
	for (unsigned r = 0; r < zr->n; r++)
		count_zero(hn, zr->end[r] - zr->start[r]);
}

/*
 * A run of pool hits for areas 0..n under one hold of the home node's lock: as many as the
 * home pools can serve. Stops at the first area that is not poolable, whose class is empty,
 * or whose block lies in another node's zone (the single path knows how to lock that node).
 * Returns how many were allocated.
 */
static size_t alloc_run_from_pool(struct va_space *vs, unsigned home, size_t n,
				  const uint64_t *sizes, uint64_t align, void *const *owners,
				  uint64_t *out)
{
	struct va_node *hn = &vs->node[home];
	struct va_block *got[64];
	struct zero_runs zr;
	uint64_t dirty = 0; /* bit j: area j was freed straight into the pool, zero it */
	size_t j = 0, m;

	if (n > 64)
		n = 64; /* one lock hold covers at most 64 areas (the dirty mask's bits) */
	va_lock(hn->lk);
	/* pop the run first, then enter it in the hash: each insert's random slot is fetched
	 * while the others are popped, not one miss after another */
	for (; j < n; j++) {
		unsigned q = pool_class_of(vs, sizes[j], align);
		struct va_block *b;

		if (!q)
			break;
		b = pool_pop(hn, q, vs->quantum);
		if (!b)
			break; /* the single path counts the wish and refills */
		if (va_node_of(vs, b->start) != home) {
			pool_push(hn, b, q, vs->cfg.pool_depth, vs->quantum,
				  blk_state(b) == VA_ST_POOLED_DIRTY);
			break;
		}
		bh_prefetch(&hn->hash, b->start, vs->qshift);
		if (hn->pool[q - 1].wanted != UINT32_MAX) /* a demand sign: saturates */
			hn->pool[q - 1].wanted++;
		if (blk_state(b) == VA_ST_POOLED_DIRTY)
			dirty |= 1ull << j;
		got[j] = b;
	}
	for (m = 0; m < j; m++) {
		pool_hit(vs, hn, hn, got[m], owners ? owners[m] : NULL);
		out[m] = got[m]->start;
	}
	plan_zero_runs(vs, hn, dirty, out, sizes, align, &zr);
	va_unlock(hn->lk);
	for (unsigned r = 0; r < zr.n; r++)
		vs->cfg.zero(vs->cfg.release_ctx, zr.start[r], zr.end[r] - zr.start[r]);
	return j;
}

int va_alloc_batch(struct va_space *vs, size_t n, const uint64_t *sizes, uint64_t align,
		   void *const *owners, uint64_t *out_addrs, size_t *failed)
{
	size_t i = 0;
	unsigned home;
	int rc = 0;

	if (!vs || (n && (!sizes || !out_addrs)))
		return VA_EINVAL;
	home = va_home_node(vs);
	/* room in the home node's hash for the runs of pool hits, taken before any lock (at
	 * most 4096 ahead: each run of 64 checks again after it) */
	size_t ahead = n < 4096 ? n : 4096;

	if (ahead > 1 && bh_wants_grow(&vs->node[home].hash, ahead))
		busy_hash_grow(vs, home, ahead);
	while (i < n) {
		if (pool_class_of(vs, sizes[i], align)) {
			size_t got = alloc_run_from_pool(vs, home, n - i, sizes + i, align,
							 owners ? owners + i : NULL, out_addrs + i);

			if (got)
				busy_hash_check(vs, out_addrs[i + got - 1]);
			i += got;
			if (i == n)
				break;
		}
		/* a miss, another node's block or an area the pools do not keep */
		rc = alloc_common(vs, sizes[i], align, vs->base, vs->end, owners ? owners[i] : NULL,
				  &out_addrs[i], false);
		if (rc)
			break;
		i++;
	}
	if (rc) {
		/* All or nothing: what this batch got goes back (lazily, as frees). */
		if (i)
			va_free_batch(vs, i, out_addrs, NULL, NULL);
		if (failed)
			*failed = i;
	}
	return rc;
}

/* ---- congruent groups ---------------------------------------------------------------- */

/*
 * Highest base (multiple of align) such that every area fits in a free block (free.lock
 * held). Walks down from the top: for each area, the free block at or below its last byte
 * must contain it; if not, base drops so the area ends in the highest free block below
 * that can hold it (skipping smaller holes in O(log n)). Each step strictly lowers base,
 * so the walk ends; but lazily freed sets above leave many holes to pass, so after budget
 * steps it gives up (VA_EAGAIN_INTERNAL) and the caller drains first.
 */
static int find_congruent(struct va_space *vs, const uint64_t *off, const uint64_t *sz, unsigned n,
			  uint64_t align, uint64_t budget, uint64_t *base_out)
{
	uint64_t last_end = off[n - 1] + sz[n - 1];
	uint64_t base = (vs->end - last_end) & ~(align - 1);
	unsigned i = n;

	while (i-- > 0) {
		if (!budget--)
			return VA_EAGAIN_INTERNAL;
		uint64_t a = base + off[i], e = a + sz[i], limit;
		struct va_block *b;

		if (a < vs->base)
			return VA_ENOSPC;
		b = ft_floor(&vs->free.tree, e - 1);
		if (b && b->start <= a && b->end >= e)
			continue;
		/* area i must end below e - 1 (or below b's start if it straddles b) */
		limit = b && b->end >= e ? b->start : e - 1;
		b = ft_highest_fit(&vs->free.tree, limit, sz[i]);
		if (!b)
			return VA_ENOSPC;
		limit = b->end < limit ? b->end : limit;
		if (limit < off[i] + sz[i])
			return VA_ENOSPC;
		base = (limit - off[i] - sz[i]) & ~(align - 1);
		i = n; /* recheck every area at the lower base */
	}
	*base_out = base;
	return 0;
}

static int congruent_args(const struct va_space *vs, const uint64_t *off, const uint64_t *sz,
			  unsigned n, uint64_t align)
{
	if (!n || !off || !sz || n > (1u << 24))
		return VA_EINVAL;
	if (align & (align - 1))
		return VA_EALIGN;
	for (unsigned i = 0; i < n; i++) {
		uint64_t e;

		if (!sz[i])
			return VA_ESIZE;
		if (off[i] % vs->quantum || sz[i] % vs->quantum)
			return VA_EINVAL;
		if (__builtin_add_overflow(off[i], sz[i], &e))
			return VA_EOVERFLOW;
		if (e > vs->size)
			return VA_EOVERFLOW;
		if (i && off[i] < off[i - 1] + sz[i - 1])
			return VA_EINVAL;
	}
	return 0;
}

int va_alloc_congruent(struct va_space *vs, const uint64_t *offsets, const uint64_t *sizes,
		       unsigned n, uint64_t align, void *owner, uint64_t *out_addrs)
{
	int rc;

	if (!vs || !out_addrs)
		return VA_EINVAL;
	rc = congruent_args(vs, offsets, sizes, n, align);
	if (rc)
		return rc;
	if (align < vs->quantum)
		align = vs->quantum;

	const struct va_space *outer = NULL;
	bool held = false; /* the retry holds drain_lock, as in alloc_common */

	for (int attempt = 0; attempt < 2; attempt++) {
		struct va_bag bag = {0};
		uint64_t base;

		rc = objcache_fill(&bag, 2 * n);
		if (rc)
			break;
		va_lock(&vs->free.lock);
		rc = find_congruent(vs, offsets, sizes, n, align,
				    attempt ? UINT64_MAX : 64 + 8ull * n, &base);
		if (!rc) {
			for (unsigned i = 0; i < n; i++) {
				uint64_t a = base + offsets[i];
				struct va_block *b = ft_floor(&vs->free.tree, a);
				struct va_block *nb =
				    ft_carve(&vs->free.tree, b, a, sizes[i], &bag);
				struct va_node *bn = &vs->node[va_node_of(vs, a)];

				nb->owner = owner;
				va_lock_in(&vs->free.lock, bn->lk);
				busy_insert(bn, nb, vs->qshift);
				va_sat_inc(&bn->allocs);
				va_unlock_in(&vs->free.lock, bn->lk);
				out_addrs[i] = a;
			}
			va_unlock(&vs->free.lock);
			objcache_return(&bag);
			for (unsigned i = 0; i < n; i++)
				busy_hash_check(vs, out_addrs[i]);
			break;
		}
		va_unlock(&vs->free.lock);
		objcache_return(&bag);
		if (attempt == 0)
			held = lazy_drain_hold(vs, &outer);
	}
	if (held)
		lazy_leave(vs, outer);
	if (rc == VA_ENOSPC || rc == VA_EAGAIN_INTERNAL) {
		va_sat_add_atomic(&vs->fails, 1);
		return VA_ENOSPC;
	}
	return rc;
}
