/*
 * check.c - freezing the space, the block walk and the invariant checker.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "va_internal.h"

void va_freeze(struct va_space *vs)
{
	va_lock(&vs->free.lock);
	for (unsigned i = 0; i < vs->nodes; i++)
		va_lock_in(&vs->free.lock, vs->node[i].lk);
	va_lock_in(&vs->free.lock, vs->inflight.lk);
}

void va_thaw(struct va_space *vs)
{
	va_unlock_in(&vs->free.lock, vs->inflight.lk);
	for (unsigned i = vs->nodes; i-- > 0;)
		va_unlock_in(&vs->free.lock, vs->node[i].lk);
	va_unlock(&vs->free.lock);
}

/* ---- walk ------------------------------------------------------------------------------- */

static int emit(int (*fn)(void *, const struct va_block_info *), void *ctx, uint64_t start,
		uint64_t end, enum va_block_kind kind, unsigned node, void *owner)
{
	struct va_block_info info = {
	    .start = start,
	    .size = end - start,
	    .kind = kind,
	    .node = node,
	    .owner = kind == VA_BLOCK_BUSY ? owner : NULL,
	};

	return fn(ctx, &info);
}

static int walk_frozen(struct va_space *vs, int (*fn)(void *, const struct va_block_info *),
		       void *ctx)
{
	struct va_inflight *in = &vs->inflight;
	int rc;

	for (struct va_block *b = ft_first(&vs->free.tree); b; b = ft_next(&vs->free.tree, b))
		if ((rc = emit(fn, ctx, b->start, b->end, VA_BLOCK_FREE, 0, NULL)))
			return rc;
	for (unsigned i = 0; i < vs->nodes; i++) {
		struct va_node *n = &vs->node[i];

		busy_settle(n); /* the tree then holds every busy block */
		for (struct rb_node *r = rb_first(&n->busy); r; r = rb_next(r)) {
			struct va_block *b = rb_entry(r, struct va_block, rb);

			if ((rc = emit(fn, ctx, b->start, b->end, VA_BLOCK_BUSY, i, b->owner)))
				return rc;
		}
		for (uint32_t k = 0; k < n->lazy_len; k++)
			if ((rc = emit(fn, ctx, n->lazy[k].start, n->lazy[k].end, VA_BLOCK_LAZY, i,
				       NULL)))
				return rc;
		for (unsigned c = 0; c < vs->pool_classes; c++)
			for (struct va_block *b = n->pool[c].head; b; b = b->next)
				if ((rc =
					 emit(fn, ctx, b->start, b->end, VA_BLOCK_POOLED, i, NULL)))
					return rc;
	}
	/* a drain batch or eager frees being released: still lazy; decaying pool blocks on
	 * their way to the tree: still pooled (in their home node) */
	for (size_t k = 0; k < in->n; k++) {
		const struct lazy_item *it = &in->items[k];
		bool decay = it->flags & LI_DECAY;

		if (!(it->flags & LI_PLACED) &&
		    (rc = emit(fn, ctx, it->start, it->end, decay ? VA_BLOCK_POOLED : VA_BLOCK_LAZY,
			       decay ? it->home : va_node_of(vs, it->start), NULL)))
			return rc;
	}
	for (struct va_block *b = in->eager; b; b = blk_list_next(b))
		if ((rc = emit(fn, ctx, b->start, b->end, VA_BLOCK_LAZY, va_node_of(vs, b->start),
			       NULL)))
			return rc;
	return 0;
}

int va_walk(struct va_space *vs, int (*fn)(void *ctx, const struct va_block_info *b), void *ctx)
{
	int rc;

	if (!vs || !fn)
		return VA_EINVAL;
	va_freeze(vs);
	rc = walk_frozen(vs, fn, ctx);
	va_thaw(vs);
	return rc;
}

/* ---- invariant checker ------------------------------------------------------------------ */

struct range {
	uint64_t start, end;
	unsigned kind;
};

struct checker {
	struct va_space *vs;
	struct range *r;
	size_t n, cap;
	char *msg;
	size_t len;
};

static int fail(struct checker *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct checker *c, const char *fmt, ...)
{
	va_list ap;

	if (c->msg && c->len) {
		va_start(ap, fmt);
		vsnprintf(c->msg, c->len, fmt, ap);
		va_end(ap);
	}
	return -1;
}

static const char *const kind_name[] = {"busy", "free", "lazy", "pooled"};

/* Record one range; checks what every block must satisfy. */
static int add_span(struct checker *c, uint64_t start, uint64_t end, unsigned kind)
{
	struct va_space *vs = c->vs;

	if (c->n == c->cap)
		return fail(c,
			    "more %s blocks than the counters say (a list loops or counts are off)",
			    kind_name[kind]);
	if (start >= end || start < vs->base || end > vs->end)
		return fail(c, "%s block [0x%llx, 0x%llx) is empty or outside the space",
			    kind_name[kind], (unsigned long long)start, (unsigned long long)end);
	if (start % vs->quantum || end % vs->quantum)
		return fail(c, "%s block [0x%llx, 0x%llx) is not quantum-aligned", kind_name[kind],
			    (unsigned long long)start, (unsigned long long)end);
	c->r[c->n].start = start;
	c->r[c->n].end = end;
	c->r[c->n].kind = kind;
	c->n++;
	return 0;
}

static int add_range(struct checker *c, const struct va_block *b, unsigned kind)
{
	return add_span(c, b->start, b->end, kind);
}

static int check_busy(struct checker *c, unsigned i)
{
	struct va_space *vs = c->vs;
	struct va_node *n = &vs->node[i];
	const char *why = NULL;
	uint64_t bytes = 0, blocks = 0, hashed = 0;
	const struct va_block *prev = NULL;
	bool hint_seen = false;
	uint64_t pending = 0;

	/* the pending blocks first (settling ends them): the hash's entries in that state */
	for (uint32_t k = 0; busy_next_pending(n, &k);)
		pending++;
	if (pending != n->pend_len)
		return fail(c, "node %u: %" PRIu64 " pending blocks, %" PRIu64 " counted", i,
			    pending, n->pend_len);
	busy_settle(n); /* the tree then holds every busy block */
	if (n->busy.node && rb_red(n->busy.node))
		return fail(c, "node %u: busy tree root is red", i);
	if (rb_validate(n->busy.node, NULL, &why) < 0)
		return fail(c, "node %u: busy tree: %s", i, why);
	for (struct rb_node *r = rb_first(&n->busy); r; r = rb_next(r)) {
		struct va_block *b = rb_entry(r, struct va_block, rb);

		bool in_hash = blk_state(b) == VA_ST_BUSY;

		if (!in_hash && blk_state(b) != VA_ST_BUSY_TREE)
			return fail(c, "node %u: a block in the busy tree is not marked busy", i);
		if (prev && prev->end > b->start)
			return fail(c, "node %u: busy tree out of order or overlapping at 0x%llx",
				    i, (unsigned long long)b->start);
		if (va_node_of(vs, b->start) != i)
			return fail(c, "busy area 0x%llx is in node %u, not its address's node",
				    (unsigned long long)b->start, i);
		if (add_range(c, b, VA_BLOCK_BUSY))
			return -1;
		if (in_hash && bh_find(&n->hash, b->start, vs->qshift) != b)
			return fail(c, "node %u: busy block 0x%llx is not found through the hash",
				    i, (unsigned long long)b->start);
		hashed += in_hash;
		bytes += blk_size(b);
		blocks++;
		prev = b;
		hint_seen |= b == n->busy_hint;
	}
	/* an insert links next to the hint and a find trusts it: it must be in this tree */
	if (n->busy_hint && !hint_seen)
		return fail(c, "node %u: busy hint 0x%llx is not a block of the busy tree", i,
			    (unsigned long long)n->busy_hint->start);
	if (hashed != n->hash.count || blocks - hashed != n->tree_only)
		return fail(c, "node %u: the hash holds %llu blocks, %llu are marked hashed", i,
			    (unsigned long long)n->hash.count, (unsigned long long)hashed);
	for (uint32_t k = 0; k < n->hash.cap; k++) {
		const struct va_block *hb = bh_at(&n->hash, k);

		if (hb && (blk_state(hb) != VA_ST_BUSY || va_node_of(vs, hb->start) != i))
			return fail(c, "node %u: hash slot %u holds a block that is not busy here",
				    i, k);
	}
	if (bytes != n->busy_bytes || blocks != n->busy_blocks)
		return fail(
		    c, "node %u: busy counters (%llu bytes, %llu blocks) != tree (%llu, %llu)", i,
		    (unsigned long long)n->busy_bytes, (unsigned long long)n->busy_blocks,
		    (unsigned long long)bytes, (unsigned long long)blocks);
	return 0;
}

/* One lazy item (or, in a drain batch, a decaying pool block): its object must agree with
 * it and be marked lazy (pooled). */
static int check_item(struct checker *c, const struct lazy_item *it, const char *where)
{
	bool decay = it->flags & LI_DECAY;
	unsigned st = it->b ? blk_state(it->b) : VA_ST_SPARE;

	if (!it->b || (decay ? st != VA_ST_POOLED && st != VA_ST_POOLED_DIRTY : st != VA_ST_LAZY))
		return fail(c, "%s: %s block 0x%llx has no object or it is not marked so", where,
			    decay ? "decaying pool" : "lazy", (unsigned long long)it->start);
	if (it->b->start != it->start || it->b->end != it->end)
		return fail(c, "%s: lazy block 0x%llx disagrees with its object", where,
			    (unsigned long long)it->start);
	return add_span(c, it->start, it->end, decay ? VA_BLOCK_POOLED : VA_BLOCK_LAZY);
}

static int check_lazy(struct checker *c, unsigned i)
{
	struct va_node *n = &c->vs->node[i];
	uint64_t bytes = 0;

	if (n->lazy_len > n->lazy_cap)
		return fail(c, "node %u: lazy array overflows", i);
	for (uint32_t k = 0; k < n->lazy_len; k++) {
		const struct lazy_item *it = &n->lazy[k];

		if (va_node_of(c->vs, it->start) != i)
			return fail(c, "lazy block 0x%llx is on node %u, not its address's node",
				    (unsigned long long)it->start, i);
		if (check_item(c, it, "lazy array"))
			return -1;
		bytes += it->end - it->start;
	}
	if (bytes != n->lazy_bytes || n->lazy_unflushed > n->lazy_bytes)
		return fail(c, "node %u: lazy counters do not match the array", i);
	return 0;
}

/* The drain batch and eager frees being released. */
static int check_inflight(struct checker *c)
{
	struct va_inflight *in = &c->vs->inflight;
	uint64_t bytes = 0, blocks = 0, dbytes = 0, dblocks = 0, gaps = 0;

	for (size_t k = 0; k < in->n; k++) {
		const struct lazy_item *it = &in->items[k];

		if (it->flags & LI_PLACED)
			continue;
		if (check_item(c, it, "drain batch"))
			return -1;
		if (it->flags & LI_DECAY) {
			dbytes += it->end - it->start;
			dblocks++;
		} else {
			bytes += it->end - it->start - it->gap;
			gaps += it->gap;
			blocks++;
		}
	}
	for (struct va_block *b = in->eager; b; b = blk_list_next(b)) {
		if (blk_state(b) != VA_ST_LAZY ||
		    (blk_list_next(b) && blk_list_prev(blk_list_next(b)) != b) ||
		    (b == in->eager && b->rb.left))
			return fail(c, "the eager in-flight list is inconsistent");
		if (add_range(c, b, VA_BLOCK_LAZY))
			return -1;
		bytes += blk_size(b);
		blocks++;
	}
	if (bytes != in->bytes || blocks != in->blocks)
		return fail(c, "in-flight counters do not match the blocks being released");
	if (gaps != in->gap_bytes)
		return fail(c, "the gaps joined to the drain batch do not match their counter");
	if (dbytes != in->decay_bytes || dblocks != in->decay_blocks)
		return fail(c, "decaying pool counters do not match the drain batch");
	return 0;
}

static int check_pools(struct checker *c, unsigned i)
{
	struct va_space *vs = c->vs;
	struct va_node *n = &vs->node[i];
	uint64_t bytes = 0, blocks = 0;

	for (unsigned k = 0; k < vs->pool_classes; k++) {
		uint32_t count = 0;

		for (struct va_block *b = n->pool[k].head; b; b = b->next) {
			if (blk_state(b) != VA_ST_POOLED && blk_state(b) != VA_ST_POOLED_DIRTY)
				return fail(c, "node %u: a pooled block is not marked pooled", i);
			if (blk_size(b) != (uint64_t)(k + 1) * vs->quantum)
				return fail(
				    c, "node %u: block 0x%llx in pool class %u has the wrong size",
				    i, (unsigned long long)b->start, k + 1);
			if (add_range(c, b, VA_BLOCK_POOLED))
				return -1;
			count++;
			bytes += blk_size(b);
		}
		if (count != n->pool[k].count)
			return fail(c, "node %u: pool class %u count is wrong", i, k + 1);
		if (count > vs->cfg.pool_depth)
			return fail(c, "node %u: pool class %u is deeper than pool_depth", i,
				    k + 1);
		blocks += count;
	}
	if (bytes != n->pool_bytes || blocks != n->pool_blocks)
		return fail(c, "node %u: pool counters do not match the pools", i);
	return 0;
}

static int cmp_range(const void *a, const void *b)
{
	const struct range *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Every check on a frozen space. */
static int check_frozen(struct checker *c)
{
	struct va_space *vs = c->vs;
	uint64_t total = 0;

	if (ft_check(&vs->free.tree, vs->quantum, c->msg, c->len))
		return -1;
	for (struct va_block *b = ft_first(&vs->free.tree); b; b = ft_next(&vs->free.tree, b))
		if (add_range(c, b, VA_BLOCK_FREE))
			return -1;
	for (unsigned i = 0; i < vs->nodes; i++)
		if (check_busy(c, i) || check_lazy(c, i) || check_pools(c, i))
			return -1;
	if (check_inflight(c))
		return -1;
	qsort(c->r, c->n, sizeof(*c->r), cmp_range);
	for (size_t k = 0; k < c->n; k++) {
		if (k && c->r[k - 1].end > c->r[k].start)
			return fail(
			    c, "%s block [0x%llx, 0x%llx) overlaps %s block [0x%llx, 0x%llx)",
			    kind_name[c->r[k - 1].kind], (unsigned long long)c->r[k - 1].start,
			    (unsigned long long)c->r[k - 1].end, kind_name[c->r[k].kind],
			    (unsigned long long)c->r[k].start, (unsigned long long)c->r[k].end);
		total = va_sat_add(total, c->r[k].end - c->r[k].start);
	}
	if (total != vs->size)
		return fail(c, "busy + free + lazy + pooled = 0x%llx bytes, the space has 0x%llx",
			    (unsigned long long)total, (unsigned long long)vs->size);
	return 0;
}

/* Block count by the counters (frozen). */
static size_t counted_blocks(struct va_space *vs)
{
	size_t n = vs->free.tree.blocks + vs->inflight.blocks + vs->inflight.decay_blocks;

	for (unsigned i = 0; i < vs->nodes; i++)
		n += vs->node[i].busy_blocks + vs->node[i].lazy_len + vs->node[i].pool_blocks;
	return n;
}

int va_check(struct va_space *vs, char *msg, size_t msg_len)
{
	struct checker c = {.vs = vs, .msg = msg, .len = msg_len};
	struct va_stats st;
	int rc;

	if (msg && msg_len)
		msg[0] = '\0';
	if (!vs)
		return VA_EINVAL;
	/* size the array outside the freeze (no malloc under the locks); retry if it grew */
	va_get_stats(vs, &st);
	c.cap = st.busy_blocks + st.free_blocks + st.lazy_blocks + st.pooled_blocks;
	for (int tries = 0;; tries++) {
		c.cap += c.cap / 4 + 1024;
		c.r = malloc(c.cap * sizeof(*c.r));
		if (!c.r) {
			fail(&c, "out of memory while checking");
			return VA_ENOMEM;
		}
		va_freeze(vs);
		if (counted_blocks(vs) <= c.cap || tries == 3)
			break;
		c.cap = counted_blocks(vs);
		va_thaw(vs);
		free(c.r);
	}
	c.n = 0;
	rc = check_frozen(&c) ? VA_ECORRUPT : 0;
	va_thaw(vs);
	free(c.r);
	return rc;
}
