/*
 * restore.c - va_restore: a space that holds nothing rebuilt with many busy areas
 * at once (a daemon restart brings back a million), in O(n): the areas are checked, the gaps
 * between them become the free blocks, and each node's busy tree and the free tree are built
 * balanced straight from the sorted lists (the middle element the root, each half a subtree,
 * the last level red when it is not full: every path then has as many black nodes), where n
 * placements cost a tree descent, a split and a rebalance each.
 *
 * Every busy block also goes into its node's busy hash (found by start in O(1)), grown to
 * its final size before the locks are taken; no block is left pending (every
 * block is in the tree already), and a block the hash has no room for is counted tree_only
 * (VA_ST_BUSY_TREE) as busy_insert would.
 *
 * What it relies on inside the library: struct va_block (rb, start, end; owner for busy
 * blocks, subtree_max for free ones; the state in rb's word), a node's busy tree,
 * busy_hint, busy hash, pending count, tree_only, busy_bytes, busy_blocks and allocs, the
 * free tree's root, span, bytes and blocks, va_node_of, busy_hash_grow / bh_insert,
 * objcache_fill / objcache_return, lazy_enter /
 * lazy_leave, va_freeze / va_thaw, and rbtree.h's node word (parent, colour, the block
 * state's bits).
 */
#include <stdlib.h>

#include "va_internal.h"

/* How many blocks ahead a bulk hash insert prefetches its slot. */
#define BH_AHEAD 16

/* The space holds nothing: one free block over all of it (as va_create made it, or all
 * freed and drained again), nothing busy, lazy, pooled or in flight. Frozen. */
static bool pristine(struct va_space *vs)
{
	struct va_block *b = ft_first(&vs->free.tree);

	if (vs->free.tree.blocks != 1 || !b || b->start != vs->base || b->end != vs->end ||
	    vs->inflight.n || vs->inflight.blocks || vs->inflight.eager ||
	    vs->inflight.decay_blocks)
		return false;
	for (unsigned i = 0; i < vs->nodes; i++) {
		const struct va_node *n = &vs->node[i];

		if (n->busy.node || n->busy_blocks || n->pend_len || n->hash.count ||
		    n->tree_only || n->lazy_len || n->pool_blocks)
			return false;
	}
	return true;
}

/* Link v[lo, hi) as a balanced subtree under parent; nodes at depth red_depth are red (none
 * if red_depth is beyond the tree). free_tree: also each block's subtree_max. */
static struct rb_node *build(struct va_block **v, size_t lo, size_t hi, struct rb_node *parent,
			     unsigned depth, unsigned red_depth, bool free_tree)
{
	if (lo >= hi)
		return NULL;
	size_t mid = lo + (hi - lo) / 2;
	struct va_block *b = v[mid];
	struct rb_node *n = &b->rb;

	rb_set_parent(n, parent);
	rb_set_red(n, depth == red_depth);
	n->left = build(v, lo, mid, n, depth + 1, red_depth, free_tree);
	n->right = build(v, mid + 1, hi, n, depth + 1, red_depth, free_tree);
	if (free_tree) {
		uint64_t m = blk_size(b);
		struct va_block *l = n->left ? rb_entry(n->left, struct va_block, rb) : NULL;
		struct va_block *r = n->right ? rb_entry(n->right, struct va_block, rb) : NULL;

		if (l && l->subtree_max > m)
			m = l->subtree_max;
		if (r && r->subtree_max > m)
			m = r->subtree_max;
		b->subtree_max = m;
	}
	return n;
}

/* The depth of the last level of a balanced tree of n nodes if it is not full, else one past
 * every depth. */
static unsigned red_depth_of(size_t n)
{
	unsigned levels = 0;

	while (levels < 64 && ((size_t)1 << levels) - 1 < n)
		levels++;
	return ((size_t)1 << levels) - 1 == n ? levels : levels - 1;
}

/* The areas are sorted, inside the space, quantum multiples, not empty, and do not overlap. */
static int check_areas(const struct va_space *vs, size_t n, const uint64_t *starts,
		       const uint64_t *sizes)
{
	uint64_t prev_end = vs->base;

	for (size_t i = 0; i < n; i++) {
		uint64_t s = starts[i], z = sizes[i];

		if (s < vs->base || s >= vs->end || z > vs->end - s)
			return VA_ERANGE;
		if (!z || (s - vs->base) & (vs->quantum - 1) || z & (vs->quantum - 1) ||
		    s < prev_end)
			return VA_EINVAL;
		prev_end = s + z;
	}
	return 0;
}

/* Build everything from the bag (frozen, pristine): the old free block goes back to bag. */
static void rebuild_frozen(struct va_space *vs, size_t n, const uint64_t *starts,
			   const uint64_t *sizes, void *const *owners, struct va_block **busy,
			   struct va_block **gaps, size_t *per_node, struct va_bag *bag)
{
	struct va_freetree *ft = &vs->free.tree;
	struct va_block *old = ft_first(ft);
	size_t n_gaps = 0;
	uint64_t at = vs->base;

	ft_init(ft, ft->span_lo, ft->span_hi);
	bag_give(bag, old);
	/* Busy blocks grouped by node (each group in address order), gaps in address order. */
	size_t *next = per_node + vs->nodes, sum = 0;
	for (unsigned k = 0; k < vs->nodes; k++) {
		next[k] = sum;
		sum += per_node[k];
	}
	for (size_t i = 0; i <= n; i++) {
		uint64_t s = i < n ? starts[i] : vs->end;

		if (s > at) {
			struct va_block *g = bag_take(bag);

			g->rb.parent_colour = 0;
			blk_set_state(g, VA_ST_FREE);
			g->start = at;
			g->end = s;
			gaps[n_gaps++] = g;
			ft->bytes += s - at;
		}
		if (i == n)
			break;
		struct va_block *b = bag_take(bag);
		unsigned k = va_node_of(vs, starts[i]);

		b->rb.parent_colour = 0;
		blk_set_state(b, VA_ST_BUSY_TREE); /* straight into the tree: never pending */
		b->start = starts[i];
		b->end = starts[i] + sizes[i];
		b->owner = owners ? owners[i] : NULL;
		busy[next[k]++] = b;
		at = b->end;
	}
	/* The free tree. */
	ft->blocks = n_gaps;
	/* the highest gap is top (freetree.c), the others the tree */
	if (n_gaps) {
		ft->top = gaps[n_gaps - 1];
		ft->top->subtree_max = blk_size(ft->top);
		ft->tree_last = n_gaps > 1 ? gaps[n_gaps - 2] : NULL;
		ft->root.node = build(gaps, 0, n_gaps - 1, NULL, 0, red_depth_of(n_gaps - 1), true);
	}
	/* Each node's busy tree. */
	size_t first = 0;
	for (unsigned k = 0; k < vs->nodes; k++) {
		struct va_node *nd = &vs->node[k];
		size_t cnt = per_node[k];

		nd->busy.node = build(busy, first, first + cnt, NULL, 0, red_depth_of(cnt), false);
		nd->busy_hint = cnt ? busy[first + cnt - 1] : NULL;
		nd->busy_blocks = cnt;
		nd->busy_bytes = 0;
		nd->tree_only = 0;
		for (size_t i = first; i < first + cnt; i++) {
			struct va_block *b = busy[i];

			nd->busy_bytes += blk_size(b);
			if (i + BH_AHEAD < first + cnt)
				bh_prefetch(&nd->hash, busy[i + BH_AHEAD]->start, vs->qshift);
			/* a full hash (its growth failed) leaves the block in the tree alone */
			if (bh_insert(&nd->hash, b, vs->qshift))
				blk_set_state(b, VA_ST_BUSY);
			else
				nd->tree_only++;
		}
		nd->allocs += cnt;
		first += cnt;
	}
}

int va_restore(struct va_space *vs, size_t n, const uint64_t *starts, const uint64_t *sizes,
	       void *const *owners)
{
	if (!vs || (n && (!starts || !sizes)))
		return VA_EINVAL;
	int rc = check_areas(vs, n, starts, sizes);

	if (rc)
		return rc;
	if (n > (size_t)UINT32_MAX / 2 - 1)
		return VA_EOVERFLOW; /* objcache_fill counts in unsigned */
	size_t *per_node = calloc(2 * (size_t)vs->nodes, sizeof(*per_node));
	struct va_block **busy = malloc((n ? n : 1) * sizeof(*busy));
	struct va_block **gaps = malloc((n + 1) * sizeof(*gaps));
	struct va_bag bag = {0};

	/* One object per area and per gap between them (the old free block comes back). */
	size_t n_gaps = 0;
	for (size_t i = 0; i <= n; i++)
		n_gaps +=
		    (i < n ? starts[i] : vs->end) > (i ? starts[i - 1] + sizes[i - 1] : vs->base);
	rc = VA_ENOMEM;
	if (!per_node || !busy || !gaps || objcache_fill(&bag, (unsigned)(n + n_gaps)) != 0)
		goto out;
	for (size_t i = 0; i < n; i++)
		per_node[va_node_of(vs, starts[i])]++;
	/* Each node's hash sized for its areas now (it allocates: no lock may be held). Had it
	 * no memory, the areas it has no room for stay in the busy tree alone, as in
	 * busy_insert. */
	for (unsigned k = 0; k < vs->nodes; k++)
		if (per_node[k])
			(void)busy_hash_grow(vs, k, per_node[k]);
	/* No drain or release pass (the idle thread's) runs while the space is rebuilt. */
	const struct va_space *outer;
	bool entered = lazy_enter(vs, &outer);

	va_freeze(vs);
	rc = VA_EINVAL;
	if (entered && pristine(vs)) {
		rebuild_frozen(vs, n, starts, sizes, owners, busy, gaps, per_node, &bag);
		rc = 0;
	}
	va_thaw(vs);
	if (entered)
		lazy_leave(vs, outer);
out:
	objcache_return(&bag);
	free(per_node);
	free(busy);
	free(gaps);
	return rc;
}
