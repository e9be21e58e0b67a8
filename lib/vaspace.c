/*
 * vaspace.c - the libvaspace API: creation and teardown, free, lookup, owner tags, drain,
 * stats, error strings (allocation is in alloc.c).
 *
 * Lock order (outermost first). A thread holding a lock may take only locks below it;
 * several node locks are taken by ascending index (or with trylock):
 *   1. drain_lock        one drain at a time (held across the release callbacks of a drain,
 *                        of a va_release_free chunk, and across an allocation's retry)
 *   2. free.lock         the free tree
 *   3. node[i].lock      a node's busy hash and tree, lazy array, pools and counters
 *   4. inflight.lock     blocks being released (a drain batch, eager frees)
 * Locks 2-4 are futex locks (struct va_spin, lock.c), the others pthread mutexes. Code takes
 * a node's and the in-flight table's lock through their lk pointers: in exact mode (one
 * node, no pools, eager) both point at free.lock, and a lock taken inside another through
 * va_lock_in is skipped when it is the same one.
 * Leaves, never held while taking another lock: ctl_lock (background thread control) and
 * the object depot lock (objcache.c). No allocator lock is held while the release callback
 * runs (drain_lock is not an allocator lock: nothing but drains takes it).
 *
 * A block moves between structures only while the locks of both ends are held, so
 * va_walk/va_check, which take locks 2-4, see each byte of the space exactly once.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "va_internal.h"

static unsigned log2_floor(uint64_t x)
{
	return x ? 63 - (unsigned)__builtin_clzll(x) : 0;
}

static unsigned online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : (unsigned)n;
}

static int fill_config(struct va_config *c)
{
	unsigned cpus = online_cpus();
	uint64_t end;

	if (!c->quantum)
		c->quantum = 4096;
	if (c->quantum & (c->quantum - 1))
		return VA_EALIGN;
	if (c->base % c->quantum)
		return VA_EALIGN;
	if (!c->size || c->size % c->quantum)
		return VA_EINVAL;
	if (__builtin_add_overflow(c->base, c->size, &end))
		return VA_EINVAL;
	if (!c->nodes)
		c->nodes = cpus;
	if (c->nodes > VA_MAX_NODES)
		return VA_EINVAL;
	if (!c->zone_size && __builtin_mul_overflow(c->quantum, 64, &c->zone_size))
		return VA_EINVAL;
	if (c->zone_size % c->quantum)
		return VA_EINVAL;
	/* 32 MiB per log2 CPUs with 4 KiB quanta, as the kernel's lazy_max_pages; counted in
	 * quanta (8192 each) so huge-page spaces do not drain on every free */
	if (!c->lazy_max &&
	    __builtin_mul_overflow(8192ull * (1 + log2_floor(cpus)), c->quantum, &c->lazy_max))
		c->lazy_max = UINT64_MAX / 4;
	if (!c->pool_max_quanta)
		c->pool_max_quanta = 256;
	if (c->pool_max_quanta > VA_MAX_POOL_QUANTA)
		return VA_EINVAL;
	if (!c->pool_depth)
		c->pool_depth = 64;
	if (!c->drain_chunk)
		c->drain_chunk = 64;
	if (!c->idle_drain_ms)
		c->idle_drain_ms = 1000;
	return 0;
}

/* The space's units and shards from its filled-in config: zones, pool classes, exact mode. */
static void set_geometry(struct va_space *vs)
{
	unsigned classes;

	vs->base = vs->cfg.base;
	vs->size = vs->cfg.size;
	vs->end = vs->base + vs->size;
	vs->quantum = vs->cfg.quantum;
	vs->qshift = log2_floor(vs->quantum);
	vs->nodes = vs->cfg.nodes;
	vs->zone = vs->cfg.zone_size;
	vs->zone_pow2 = !(vs->zone & (vs->zone - 1));
	vs->zone_shift = log2_floor(vs->zone);
	classes = vs->cfg.pool_max_quanta;
	if (classes > vs->size / vs->quantum)
		classes = (unsigned)(vs->size / vs->quantum);
	vs->pool_classes = vs->cfg.no_pools ? 0 : classes;
	vs->exact = vs->nodes == 1 && vs->cfg.no_pools && vs->cfg.eager;
	vs->can_recycle = vs->cfg.zero && vs->pool_classes && !vs->cfg.eager;
	atomic_init(&vs->recycle_every, vs->can_recycle && !vs->cfg.no_recycle ? 1u : 0u);
	if (!vs->pool_classes ||
	    __builtin_mul_overflow(vs->zone, (uint64_t)vs->nodes, &vs->affinity_span))
		vs->affinity_span = 0;
}

/* How lazy bytes reach the shared count and where the freeing thread drains itself. */
static void set_lazy_limits(struct va_space *vs)
{
	/* lazy bytes reach the shared counter in per-node batches (one shared cache line
	 * write per batch, not per free); small enough that thresholds stay within
	 * lazy_max / 8 */
	vs->lazy_flush = vs->cfg.lazy_max / (8ull * vs->nodes);
	if (vs->lazy_flush > (1u << 20))
		vs->lazy_flush = 1u << 20;
	if (vs->lazy_flush < vs->quantum)
		vs->lazy_flush = vs->quantum;
	vs->lazy_slack = vs->lazy_flush * vs->nodes;
	vs->lazy_self_at = vs->lazy_slack < vs->cfg.lazy_max
			       ? va_sat_add(vs->cfg.lazy_max, vs->cfg.lazy_max) - vs->lazy_slack
			       : vs->cfg.lazy_max;
}

/* The node array; on failure nodes_ready says how many va_destroy must tear down. */
static int create_nodes(struct va_space *vs)
{
	vs->node = aligned_alloc(VA_CACHELINE, sizeof(*vs->node) * vs->nodes);
	if (!vs->node)
		return VA_ENOMEM;
	memset(vs->node, 0, sizeof(*vs->node) * vs->nodes);
	for (unsigned i = 0; i < vs->nodes; i++) {
		if (node_init(&vs->node[i], vs->pool_classes)) {
			vs->nodes_ready = i;
			return VA_ENOMEM;
		}
	}
	vs->nodes_ready = vs->nodes;
	return 0;
}

/* The whole space starts as one free block. */
static int add_whole_space(struct va_space *vs)
{
	struct va_bag bag = {0};
	struct va_block *b;

	if (objcache_fill(&bag, 1))
		return VA_ENOMEM;
	b = bag_take(&bag);
	b->start = vs->base;
	b->end = vs->end;
	ft_insert(&vs->free.tree, b, &bag);
	return 0;
}

int va_create(const struct va_config *cfg, struct va_space **out)
{
	struct va_space *vs;
	int rc;

	if (!cfg || !out)
		return VA_EINVAL;
	vs = aligned_alloc(VA_CACHELINE, sizeof(*vs));
	if (!vs)
		return VA_ENOMEM;
	memset(vs, 0, sizeof(*vs));
	vs->cfg = *cfg;
	rc = fill_config(&vs->cfg);
	if (rc) {
		free(vs);
		return rc;
	}
	set_geometry(vs);
	set_lazy_limits(vs);
	ft_init(&vs->free.tree, vs->base, vs->end);
	vs->free.tree.quantum = vs->quantum;
	va_spin_init(&vs->free.lock);
	va_spin_init(&vs->inflight.lock);
	if (va_mutex_init(&vs->drain_lock)) {
		free(vs);
		return VA_ENOMEM;
	}
	vs->inflight.lk = &vs->inflight.lock;
	/* from here on va_destroy tears down whatever was made */
	if (create_nodes(vs)) {
		va_destroy(vs);
		return VA_ENOMEM;
	}
	if (vs->exact) {
		/* one node, nothing lazy or pooled: every operation takes the free tree's lock
		 * anyway, so the node and the in-flight table share it (a pair of alloc and
		 * eager free takes 3 lock round trips, not 6) */
		vs->node[0].lk = &vs->free.lock;
		vs->inflight.lk = &vs->free.lock;
	}
	if (add_whole_space(vs) || lazy_thread_start(vs)) {
		va_destroy(vs);
		return VA_ENOMEM;
	}
	*out = vs;
	return 0;
}

void va_destroy(struct va_space *vs)
{
	if (!vs)
		return;
	lazy_thread_stop(vs);
	ft_destroy(&vs->free.tree);
	if (vs->node) {
		for (unsigned i = 0; i < vs->nodes_ready; i++)
			node_destroy(&vs->node[i], vs->pool_classes);
		free(vs->node);
	}
	pthread_mutex_destroy(&vs->drain_lock);
	free(vs->inflight.items);
	free(vs->scratch_tmp);
	free(vs);
}

/* ---- free, lookup, owner ---------------------------------------------------------------- */

/* Why no busy area starts at addr: inside one (ENOTSTART) or not busy at all. */
static int classify_miss(struct va_space *vs, uint64_t addr, unsigned k)
{
	struct va_area area;

	if (busy_lookup_any(vs, addr, k, &area))
		return VA_ENOTSTART;
	return VA_EDOUBLEFREE;
}

/* Eager free: release and merge now. While it is released the block sits on the in-flight
 * list, so the checker still sees it, and no lock is held during the callback. */
static int free_eager(struct va_space *vs, uint64_t addr, void **owner_out)
{
	unsigned k = va_node_of(vs, addr);
	struct va_node *n = &vs->node[k];
	struct va_bag *bag;
	struct va_block *b;
	uint64_t size;

	va_lock(n->lk);
	b = busy_find(n, addr, vs->qshift);
	if (!b) {
		va_unlock(n->lk);
		return classify_miss(vs, addr, k);
	}
	busy_remove(n, b, vs->qshift);
	va_sat_inc(&n->frees);
	if (owner_out)
		*owner_out = b->owner;
	b->owner = NULL;
	blk_set_state(b, VA_ST_LAZY);
	size = blk_size(b);
	va_lock_in(n->lk, vs->inflight.lk);
	blk_list_push(&vs->inflight.eager, b);
	vs->inflight.bytes += size;
	vs->inflight.blocks++;
	va_unlock_in(n->lk, vs->inflight.lk);
	va_unlock(n->lk);

	if (vs->cfg.release)
		vs->cfg.release(vs->cfg.release_ctx, b->start, size);
	va_sat_add_atomic(&vs->released_bytes, size);
	va_sat_add_atomic(&vs->release_calls, 1);

	bag = objcache_bag(1); /* merges give objects into it (1: the thread is registered) */
	va_lock(&vs->free.lock);
	va_lock_in(&vs->free.lock, vs->inflight.lk);
	blk_list_del(&vs->inflight.eager, b);
	vs->inflight.bytes -= size;
	vs->inflight.blocks--;
	va_unlock_in(&vs->free.lock, vs->inflight.lk);
	ft_insert(&vs->free.tree, b, bag);
	va_unlock(&vs->free.lock);
	objcache_bag_done(bag);
	return 0;
}

/* Does pool class q of node p want one more block (p's lock held)? Asked for lately, room. */
static bool pool_class_open(const struct va_space *vs, const struct va_node *p, uint64_t q)
{
	const struct va_pool_class *pc = &p->pool[q - 1];

	return pc->count < vs->cfg.pool_depth && (pc->wanted | pc->recent);
}

/*
 * With cfg.zero and pools: a freed block of a pooled size whose class is asked for lately
 * and has room goes straight back into a pool, dirty, instead of through the lazy array, a
 * drain pass, its sort and a zero there: it is zeroed when it is taken (by the allocating
 * thread, outside the locks, before its address is handed out). Dirty or not, pooled memory
 * is released when it decays to the tree, so nothing a holder wrote reaches the tree or
 * another holder. false: the lazy path takes it.
 *
 * Which pool: first that of n, the node the address belongs to (its lock is held), so a
 * block goes to the threads whose zone it lies in and their later frees of it stay on their
 * own node (with two threads, random_size freed 4.5% of its blocks across nodes, every one
 * again on each reuse, and the node lines bouncing between the cores cost both threads 15%
 * more CPU per pair); then, if n's class is not asked for, the freeing thread's home node's
 * (where a drain would place it): otherwise a thread allocating from another node's zone
 * frees into a pool nobody asks of, and every such free goes lazy, calls a drain and comes
 * back to its home pool through it (with the background thread on, random_size with 1M held
 * ran 700 drains in 1M pairs and took 113 ns a pair where draining inline took 69). The
 * home node's lock is only tried.
 */
static bool recycle_locked(struct va_space *vs, struct va_node *n, struct va_block *b,
			   unsigned home, void **owner_out)
{
	uint64_t size = blk_size(b), q = size >> vs->qshift;
	struct va_node *p = n;

	if (q > vs->pool_classes)
		return false;
	if (!pool_class_open(vs, n, q)) {
		p = &vs->node[home];
		if (p == n || !va_spin_trylock(p->lk))
			return false;
		if (!pool_class_open(vs, p, q)) {
			va_spin_unlock(p->lk);
			return false;
		}
	}
	busy_remove(n, b, vs->qshift);
	if (owner_out)
		*owner_out = b->owner;
	pool_push(p, b, (unsigned)q, vs->cfg.pool_depth, vs->quantum, true);
	va_sat_inc(&n->frees);
	n->recycled++;
	if (p != n)
		va_spin_unlock(p->lk);
	return true;
}

/* What lazy_free_locked did with an address. */
enum lazy_free_result {
	LF_DONE,  /* moved to the lazy array */
	LF_MISS,  /* no busy area starts there: classify it */
	LF_EAGER, /* no memory to grow the lazy array: release it now instead */
};

/*
 * Move the busy area starting at addr from node n's busy tree to its lazy array (n->lock
 * held; lazy_reserve may drop and retake it). Bytes that crossed the node's flush threshold
 * go to lazy_total at once and are also added to *flush, for lazy_flush_bytes once the lock
 * is dropped.
 */
static enum lazy_free_result lazy_free_locked(struct va_space *vs, struct va_node *n, uint64_t addr,
					      unsigned home, void **owner_out, uint64_t *flush)
{
	struct va_block *b = busy_find(n, addr, vs->qshift);
	uint64_t size;

	if (!b)
		return LF_MISS;
	unsigned every = atomic_load_explicit(&vs->recycle_every, memory_order_relaxed);
	if (every && (every == 1 || ++n->recycle_tick % every == 0) &&
	    recycle_locked(vs, n, b, home, owner_out))
		return LF_DONE;
	if (n->lazy_len == n->lazy_cap) {
		if (!lazy_reserve(n))
			return LF_EAGER;
		b = busy_find(n, addr, vs->qshift); /* the lock was dropped: look again */
		if (!b)
			return LF_MISS;
	}
	busy_remove(n, b, vs->qshift);
	if (owner_out)
		*owner_out = b->owner;
	b->owner = NULL;
	blk_set_state(b, VA_ST_LAZY);
	size = blk_size(b);
	/* home: the freeing thread's node, whose pools the drain may give the block back to
	 * (the record has no room to remember the allocating thread's; mostly they are one) */
	n->lazy[n->lazy_len++] =
	    (struct lazy_item){.start = b->start, .end = b->end, .b = b, .home = home};
	n->lazy_bytes += size;
	va_sat_inc(&n->frees);
	n->lazy_unflushed += size;
	if (n->lazy_unflushed >= vs->lazy_flush) {
		/* into the shared count now, under the node's lock: a drain taking this node's
		 * array meanwhile must find every byte counted (it subtracts them all) */
		atomic_fetch_add_explicit(&vs->lazy_total, n->lazy_unflushed, memory_order_relaxed);
		*flush += n->lazy_unflushed;
		n->lazy_unflushed = 0;
	}
	return LF_DONE;
}

/* After a free or a batch (no lock held; flush: the bytes it added to the shared count):
 * may wake or run a drain. A free that flushed nothing still looks at the total (a read of
 * a line written once per batch): while another thread's flush has it past the threshold
 * and that thread waits for a pass, this free must not return and leave its bytes on top. */
static void lazy_flush_bytes(struct va_space *vs, uint64_t flush)
{
	lazy_after_free(vs, atomic_load_explicit(&vs->lazy_total, memory_order_relaxed),
			flush != 0);
}

int va_free(struct va_space *vs, uint64_t addr, void **owner_out)
{
	size_t done;

	/* the lazy path of va_free_batch for one address, without the batch's loop */
	if (vs && !vs->cfg.eager && addr >= vs->base && addr < vs->end) {
		unsigned k = va_node_of(vs, addr);
		struct va_node *nd = &vs->node[k];
		unsigned home = va_home_node(vs); /* a division: outside the lock */
		enum lazy_free_result res;
		uint64_t flush = 0;
		int rc = 0;

		va_lock(nd->lk);
		res = lazy_free_locked(vs, nd, addr, home, owner_out, &flush);
		va_unlock(nd->lk);
		if (res == LF_MISS)
			rc = classify_miss(vs, addr, k);
		else if (res == LF_EAGER)
			rc = free_eager(vs, addr, owner_out);
		lazy_flush_bytes(vs, flush);
		return rc;
	}
	return va_free_batch(vs, 1, &addr, owner_out, &done);
}

/*
 * A batch's frees find their blocks through random hash slots and then read random block
 * records: two dependent cache misses each, most of a batch free's time once the busy tree
 * is off the path. So the loop runs two stages ahead: the slot of the free FREE_AHEAD
 * places on, and the record of the one FREE_AHEAD / 2 places on (its slot fetched by then).
 * Only addresses of the locked node are looked at (another node's table may be changing).
 */
#define FREE_AHEAD 16

static inline void prefetch_free(struct va_space *vs, struct va_node *nd, unsigned k, uint64_t addr,
				 bool block)
{
	if (addr < vs->base || addr >= vs->end || va_node_of(vs, addr) != k)
		return;
	if (block)
		bh_prefetch_block(&nd->hash, addr, vs->qshift);
	else
		bh_prefetch(&nd->hash, addr, vs->qshift);
}

int va_free_batch(struct va_space *vs, size_t n, const uint64_t *addrs, void **owners_out,
		  size_t *done)
{
	enum lazy_free_result res = LF_DONE;
	uint64_t flush = 0;
	size_t i = 0;
	unsigned home;
	int rc = 0;

	if (!vs || (n && !addrs)) {
		rc = VA_EINVAL;
		goto out;
	}
	home = va_home_node(vs); /* the freeing thread's node, once per batch */
	while (i < n) {
		uint64_t addr = addrs[i];
		unsigned k;
		struct va_node *nd;

		if (addr < vs->base || addr >= vs->end) {
			rc = VA_ERANGE;
			break;
		}
		if (vs->cfg.eager) {
			rc = free_eager(vs, addr, owners_out ? &owners_out[i] : NULL);
			if (rc)
				break;
			i++;
			continue;
		}
		/* one lock hold for the run of addresses in this node */
		k = va_node_of(vs, addr);
		nd = &vs->node[k];
		va_lock(nd->lk);
		for (size_t j = i; j < n && j < i + FREE_AHEAD; j++)
			prefetch_free(vs, nd, k, addrs[j], j < i + FREE_AHEAD / 2);
		for (;;) {
			if (i + FREE_AHEAD < n)
				prefetch_free(vs, nd, k, addrs[i + FREE_AHEAD], false);
			if (i + FREE_AHEAD / 2 < n)
				prefetch_free(vs, nd, k, addrs[i + FREE_AHEAD / 2], true);
			res = lazy_free_locked(vs, nd, addr, home,
					       owners_out ? &owners_out[i] : NULL, &flush);
			if (res != LF_DONE)
				break;
			if (++i == n)
				break;
			addr = addrs[i];
			if (addr < vs->base || addr >= vs->end || va_node_of(vs, addr) != k)
				break;
		}
		va_unlock(nd->lk);
		if (res == LF_MISS) {
			rc = classify_miss(vs, addr, k);
			break;
		}
		if (res == LF_EAGER) {
			rc = free_eager(vs, addr, owners_out ? &owners_out[i] : NULL);
			if (rc)
				break;
			i++;
			res = LF_DONE;
		}
	}
	/* after the whole batch: one drain at most, over every run it freed */
	lazy_flush_bytes(vs, flush);
out:
	if (done)
		*done = i;
	return rc;
}

int va_lookup(struct va_space *vs, uint64_t addr, struct va_area *out)
{
	if (!vs || !out)
		return VA_EINVAL;
	if (addr < vs->base || addr >= vs->end)
		return VA_ERANGE;
	if (busy_lookup_start(vs, addr, out) ||
	    busy_lookup_any(vs, addr, va_node_of(vs, addr), out))
		return 0;
	return VA_ENOTFOUND;
}

int va_set_owner(struct va_space *vs, uint64_t addr, void *owner)
{
	struct va_node *n;
	struct va_block *b;
	unsigned k;

	if (!vs)
		return VA_EINVAL;
	if (addr < vs->base || addr >= vs->end)
		return VA_ERANGE;
	k = va_node_of(vs, addr);
	n = &vs->node[k];
	va_lock(n->lk);
	b = busy_find(n, addr, vs->qshift);
	if (b)
		b->owner = owner;
	va_unlock(n->lk);
	if (b)
		return 0;
	return classify_miss(vs, addr, k) == VA_ENOTSTART ? VA_ENOTSTART : VA_ENOTFOUND;
}

void va_drain(struct va_space *vs)
{
	if (vs)
		lazy_drain_full(vs);
}

/* ---- stats and errors ------------------------------------------------------------------- */

static inline uint64_t ld(_Atomic uint64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

unsigned va_set_recycle(struct va_space *vs, unsigned every)
{
	every = vs->can_recycle ? every : 0;
	atomic_store_explicit(&vs->recycle_every, every, memory_order_relaxed);
	return every;
}

unsigned va_recycle_every(const struct va_space *vs)
{
	return atomic_load_explicit(&vs->recycle_every, memory_order_relaxed);
}

void va_get_stats(struct va_space *vs, struct va_stats *out)
{
	if (!out)
		return;
	memset(out, 0, sizeof(*out));
	if (!vs)
		return;
	out->size = vs->size;
	out->quantum = vs->quantum;
	out->nodes = vs->nodes;
	/* one still picture (every lock, as va_walk): busy + free + lazy + pooled == size even
	 * while drains and va_release_free move blocks */
	va_freeze(vs);
	for (unsigned i = 0; i < vs->nodes; i++) {
		struct va_node *n = &vs->node[i];

		/* occupancy sums stay within the space's size; the counters saturate */
		out->pooled_bytes = va_sat_add(out->pooled_bytes, n->pool_bytes);
		out->pooled_blocks = va_sat_add(out->pooled_blocks, n->pool_blocks);
		out->busy_bytes = va_sat_add(out->busy_bytes, n->busy_bytes);
		out->busy_blocks = va_sat_add(out->busy_blocks, n->busy_blocks);
		out->lazy_bytes = va_sat_add(out->lazy_bytes, n->lazy_bytes);
		out->lazy_blocks = va_sat_add(out->lazy_blocks, n->lazy_len);
		out->allocs = va_sat_add(out->allocs, n->allocs);
		out->frees = va_sat_add(out->frees, n->frees);
		out->pool_hits = va_sat_add(out->pool_hits, n->pool_hits);
		out->zeroed_bytes = va_sat_add(out->zeroed_bytes, n->zeroed_bytes);
		out->zero_calls = va_sat_add(out->zero_calls, n->zero_calls);
		out->recycled = va_sat_add(out->recycled, n->recycled);
	}
	out->lazy_bytes = va_sat_add(out->lazy_bytes, vs->inflight.bytes);
	out->lazy_blocks = va_sat_add(out->lazy_blocks, vs->inflight.blocks);
	out->pooled_bytes = va_sat_add(out->pooled_bytes, vs->inflight.decay_bytes);
	out->pooled_blocks = va_sat_add(out->pooled_blocks, vs->inflight.decay_blocks);
	/* a drain's joined gaps are free space out of the tree for the pass */
	out->free_bytes = vs->free.tree.bytes + vs->inflight.gap_bytes;
	out->free_blocks = vs->free.tree.blocks;
	out->largest_free = ft_largest(&vs->free.tree);
	va_thaw(vs);
	out->fails = ld(&vs->fails);
	out->drains = ld(&vs->drains);
	out->released_bytes = ld(&vs->released_bytes);
	out->release_calls = ld(&vs->release_calls);
	out->zeroed_bytes = va_sat_add(out->zeroed_bytes, ld(&vs->zeroed_bytes));
	out->zero_calls = va_sat_add(out->zero_calls, ld(&vs->zero_calls));
	out->free_released_bytes = ld(&vs->free_released_bytes);
	out->free_release_calls = ld(&vs->free_release_calls);
	out->drain_yields = ld(&vs->drain_yields);
	out->object_bytes = objcache_bytes();
}

const char *va_strerror(int err)
{
	switch (err) {
	case VA_OK:
		return "Success.";
	case VA_EINVAL:
		return "An argument is malformed.";
	case VA_ESIZE:
		return "The size is zero.";
	case VA_EOVERFLOW:
		return "The size or alignment overflows or exceeds the space.";
	case VA_EALIGN:
		return "The alignment is not a power of two.";
	case VA_ERANGE:
		return "The address or window lies outside the space.";
	case VA_ENOSPC:
		return "No free block can hold the request.";
	case VA_ENOTSTART:
		return "The address is inside a busy area but not at its start.";
	case VA_EDOUBLEFREE:
		return "The address is not allocated (already freed or never allocated).";
	case VA_ENOMEM:
		return "Out of memory for bookkeeping.";
	case VA_ECORRUPT:
		return "The allocator's invariants are broken.";
	case VA_ENOTFOUND:
		return "No busy area contains the address.";
	}
	return "Unknown error code.";
}
