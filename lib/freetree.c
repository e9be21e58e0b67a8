/*
 * freetree.c - the free tree: free blocks in an address-ordered red-black tree augmented
 * with the largest block of each subtree (the 2018 free-tree rework; the augmented descent
 * is the 2019 augmented-tree work's). The rework also kept an address-ordered list for O(1)
 * neighbours; here the neighbours come from the tree: an insert's descent passes both of
 * them, and walks step with rb_next (O(1) amortised), so a record saves the list's two
 * words. The caller holds the free-tree lock for every function here.
 *
 * The highest free block, top, stays out of the rbtree (dlmalloc's "top chunk"): a space
 * fills from its low end, so the block above everything handed out is the largest by far and
 * is where most requests that no hole fits are carved, and most frees of recent areas merge
 * back. In the tree, each of those changes its size and with it the cached maximum of every
 * ancestor (a carve, and a merge after its free, each walked the whole path: 1,200 of the
 * 3,000 instructions of an exact-mode pair with 1M areas held). Outside it, they change two
 * words. Lowest-address first fit holds: top lies above every block in the tree, so it is
 * tried only when no block of the tree fits. Walks reach it after the tree's last block
 * (ft_next).
 */
#include <stdio.h>

#include "va_internal.h"

static inline struct va_block *to_blk(struct rb_node *n)
{
	return n ? rb_entry(n, struct va_block, rb) : NULL;
}

static inline uint64_t max_of(const struct rb_node *n)
{
	return n ? rb_entry(n, struct va_block, rb)->subtree_max : 0;
}

static bool ft_update(struct rb_node *n)
{
	struct va_block *b = to_blk(n);
	uint64_t m = blk_size(b), l = max_of(n->left), r = max_of(n->right);

	if (l > m)
		m = l;
	if (r > m)
		m = r;
	if (b->subtree_max == m)
		return false;
	b->subtree_max = m;
	return true;
}

static const struct rb_augment ft_aug = {.update = ft_update};

/* rb_propagate with ft_update inlined: a carve from or a merge into the largest free block
 * changes the maximum of every ancestor, so this loop runs the whole path on most exact-mode
 * operations, and the indirect call was a third of its cost. */
static inline void ft_propagate(struct rb_node *n)
{
	while (n && ft_update(n))
		n = rb_parent(n);
}

void ft_init(struct va_freetree *ft, uint64_t span_lo, uint64_t span_hi)
{
	ft->root.node = NULL;
	ft->top = NULL;
	ft->tree_last = NULL;
	ft->span_lo = span_lo;
	ft->span_hi = span_hi;
	ft->bytes = ft->blocks = 0;
}

/* Does an aligned [a, a + size) fit in b clipped to the window? */
static inline bool block_fits(const struct va_block *b, const struct va_fit_req *r, uint64_t *addr)
{
	uint64_t lo = b->start > r->vstart ? b->start : r->vstart;
	uint64_t hi = b->end < r->vend ? b->end : r->vend;
	uint64_t a;

	if (__builtin_add_overflow(lo, r->align - 1, &a))
		return false;
	a &= ~(r->align - 1);
	if (a >= hi || hi - a < r->size)
		return false;
	*addr = a;
	return true;
}

/*
 * Leftmost block of the subtree at n that fits. Subtrees whose largest block is smaller
 * than r->min_block are skipped whole, and so are blocks wholly outside the window. When
 * every block of at least the requested size fits (alignment at most the quantum, no
 * window edge inside the block), the first subtree not skipped holds the answer and the
 * walk is one O(log n) descent. Otherwise a block that is big enough but misaligned, or
 * clipped by the window, is passed over and the walk continues in address order, so the
 * result is still the lowest fitting address (a block of size + align - quantum or more
 * inside the window never fails, which bounds how far the walk goes).
 */
static struct va_block *lowest_fit(struct rb_node *n, const struct va_fit_req *r, uint64_t *addr)
{
	while (n) {
		struct va_block *b = to_blk(n);

		if (b->subtree_max < r->min_block)
			return NULL;
		if (b->start >= r->vend) {
			n = n->left;
			continue;
		}
		if (b->end > r->vstart) {
			struct va_block *found = lowest_fit(n->left, r, addr);

			if (found)
				return found;
			if (blk_size(b) >= r->min_block && block_fits(b, r, addr))
				return b;
			if (b->end >= r->vend)
				return NULL;
		}
		n = n->right;
	}
	return NULL;
}

/* lowest_fit when every block of min_block bytes or more fits (the window holds the whole
 * tree, and the alignment is the quantum or min_block has room for any misalignment): one
 * descent, no backtracking, no recursion. */
static struct va_block *lowest_fit_plain(struct rb_node *n, uint64_t min_block)
{
	if (!n || to_blk(n)->subtree_max < min_block)
		return NULL;
	for (;;) {
		struct va_block *b = to_blk(n);

		if (n->left && to_blk(n->left)->subtree_max >= min_block)
			n = n->left;
		else if (blk_size(b) >= min_block)
			return b;
		else
			n = n->right; /* its subtree holds the fit: the maximum says so */
	}
}

/* top, if the request fits in it (the tree had no fit: top is above all of it). */
static struct va_block *top_fit(struct va_freetree *ft, const struct va_fit_req *r, uint64_t *addr)
{
	struct va_block *t = ft->top;

	return t && blk_size(t) >= r->min_block && block_fits(t, r, addr) ? t : NULL;
}

struct va_block *ft_lowest_fit(struct va_freetree *ft, const struct va_fit_req *r, uint64_t *addr)
{
	struct va_block *b;

	/* a window holding the whole space holds every free block */
	if (r->vstart <= ft->span_lo && r->vend >= ft->span_hi &&
	    (r->align <= ft->quantum || r->min_block - r->size >= r->align - ft->quantum)) {
		b = lowest_fit_plain(ft->root.node, r->min_block);
		if (b) {
			*addr = (b->start + r->align - 1) & ~(r->align - 1);
			return b;
		}
	} else {
		b = lowest_fit(ft->root.node, r, addr);
		if (b)
			return b;
	}
	return top_fit(ft, r, addr);
}

/* Highest block of the subtree at n holding size bytes below limit (mirror of lowest_fit). */
static struct va_block *highest_fit(struct rb_node *n, uint64_t limit, uint64_t size)
{
	while (n) {
		struct va_block *b = to_blk(n);

		if (b->subtree_max < size)
			return NULL;
		if (b->start < limit) {
			struct va_block *found = highest_fit(n->right, limit, size);
			uint64_t end = b->end < limit ? b->end : limit;

			if (found)
				return found;
			if (end - b->start >= size)
				return b;
		}
		n = n->left;
	}
	return NULL;
}

struct va_block *ft_highest_fit(struct va_freetree *ft, uint64_t limit, uint64_t size)
{
	struct va_block *t = ft->top;

	if (t && t->start < limit && (t->end < limit ? t->end : limit) - t->start >= size)
		return t;
	return highest_fit(ft->root.node, limit, size);
}

/* Link b (not overlapping anything) into the tree with no merging. */
static void link_plain(struct va_freetree *ft, struct va_block *b, struct rb_node *parent,
		       struct rb_node **link)
{
	blk_set_state(b, VA_ST_FREE);
	b->subtree_max = blk_size(b);
	rb_link(&b->rb, parent, link);
	rb_insert_fixup(&ft->root, &b->rb, &ft_aug);
	if (!ft->tree_last || b->start > ft->tree_last->start)
		ft->tree_last = b;
	ft->blocks++;
}

/* Find where b would be linked; false if it overlaps a free block. The descent passes b's
 * address-order neighbours: the last block it went right of (*prev) and left of (*next). */
static bool find_link(struct va_freetree *ft, const struct va_block *b, struct rb_node **parent,
		      struct rb_node ***link, struct va_block **prev, struct va_block **next)
{
	struct rb_node **l = &ft->root.node, *p = NULL;
	struct va_block *lo = NULL, *hi = NULL;

	while (*l) {
		struct va_block *t = to_blk(*l);

		p = *l;
		if (b->end <= t->start) {
			hi = t;
			l = &p->left;
		} else if (b->start >= t->end) {
			lo = t;
			l = &p->right;
		} else {
			return false;
		}
	}
	*parent = p;
	*link = l;
	*prev = lo;
	*next = hi;
	return true;
}

/* Make b (free space above every free block) top; the old top, if any, goes into the tree as
 * its highest block. */
static void push_top(struct va_freetree *ft, struct va_block *b)
{
	struct va_block *old = ft->top;

	if (old) {
		/* above every block of the tree: it goes rightmost */
		struct rb_node *parent = NULL, **link = &ft->root.node;

		while (*link) {
			parent = *link;
			link = &parent->right;
		}
		old->subtree_max = blk_size(old);
		rb_link(&old->rb, parent, link);
		rb_insert_fixup(&ft->root, &old->rb, &ft_aug);
		ft->tree_last = old;
	}
	blk_set_state(b, VA_ST_FREE);
	b->subtree_max = blk_size(b);
	ft->top = b;
	ft->blocks++;
}

/* Erase b, the tree's highest block, from the tree; its predecessor becomes the highest. */
static void erase_tree_last(struct va_freetree *ft, struct va_block *b)
{
	struct rb_node *p = rb_prev(&b->rb);

	rb_erase(&ft->root, &b->rb, &ft_aug);
	ft->tree_last = p ? to_blk(p) : NULL;
}

/* top is gone (carved whole): the tree's highest block leaves the tree and becomes top. */
static void pop_top(struct va_freetree *ft)
{
	struct va_block *t = ft->tree_last;

	ft->top = t;
	if (t) {
		erase_tree_last(ft, t);
		t->subtree_max = blk_size(t);
	}
}

/* ft_insert of b ending at or above top's start: b becomes or joins top. false if it
 * overlaps. */
static bool insert_at_top(struct va_freetree *ft, struct va_block *b, struct va_bag *bag)
{
	struct va_block *t = ft->top, *last;

	if (b->start >= t->end) {
		ft->bytes += blk_size(b);
		if (b->start == t->end) {
			t->end = b->end;
			t->subtree_max = blk_size(t);
			bag_give(bag, b);
		} else {
			push_top(ft, b);
		}
		return true;
	}
	if (b->end != t->start) {
		bag_give(bag, b); /* overlaps top */
		return false;
	}
	/* b ends where top starts: top grows down, over the tree's highest block too if b
	 * closes the gap between them */
	last = ft->tree_last;
	if (last && last->end > b->start) {
		bag_give(bag, b); /* overlaps the tree's highest block */
		return false;
	}
	ft->bytes += blk_size(b);
	if (last && last->end == b->start) {
		erase_tree_last(ft, last);
		ft->blocks--;
		t->start = last->start;
		bag_give(bag, last);
	} else {
		t->start = b->start;
	}
	t->subtree_max = blk_size(t);
	bag_give(bag, b);
	return true;
}

bool ft_insert(struct va_freetree *ft, struct va_block *b, struct va_bag *bag)
{
	struct rb_node *parent, **link;
	struct va_block *next, *prev;
	bool mprev, mnext;

	if (!ft->top) {
		ft->bytes += blk_size(b);
		push_top(ft, b);
		return true;
	}
	if (b->end >= ft->top->start)
		return insert_at_top(ft, b, bag);
	/* below top and not touching it: the tree's insert, with merges inside the tree */
	if (!find_link(ft, b, &parent, &link, &prev, &next)) {
		bag_give(bag, b);
		return false;
	}
	mprev = prev && prev->end == b->start;
	mnext = next && next->start == b->end;
	ft->bytes += blk_size(b);

	if (mprev && mnext) {
		/* fix prev's cached maxima before erasing: a rotation inside the erase may
		 * recompute prev without touching its ancestors */
		prev->end = next->end;
		ft_propagate(&prev->rb);
		rb_erase(&ft->root, &next->rb, &ft_aug);
		if (ft->tree_last == next)
			ft->tree_last = prev; /* prev absorbed next */
		ft->blocks--;
		bag_give(bag, next);
		bag_give(bag, b);
	} else if (mprev) {
		prev->end = b->end;
		ft_propagate(&prev->rb);
		bag_give(bag, b);
	} else if (mnext) {
		next->start = b->start;
		ft_propagate(&next->rb);
		bag_give(bag, b);
	} else {
		link_plain(ft, b, parent, link);
	}
	return true;
}

/*
 * The four ways the area [a, a + size) (A below) can sit in the free block b, named as in
 * mm/vmalloc.c; L and R are what stays free on its left and right:
 *
 * FL_FIT_TYPE, full fit: A is the whole block.
 *
 *     |<--------- b --------->|
 *     |           A           |
 *     |-----------------------|
 *   b leaves the tree, and its object becomes the area (no object taken).
 *
 * LE_FIT_TYPE, left-edge fit: A starts where b starts.
 *
 *     |<--------- b --------->|
 *     |     A     |     R     |
 *     |-----------|-----------|
 *   b keeps R in place (b->start moves up to a + size); one new object for the area.
 *
 * RE_FIT_TYPE, right-edge fit: A ends where b ends.
 *
 *     |<--------- b --------->|
 *     |     L     |     A     |
 *     |-----------|-----------|
 *   b keeps L in place (b->end moves down to a); one new object for the area.
 *
 * NE_FIT_TYPE, no-edge fit: A lies strictly inside b.
 *
 *     |<------------ b ------------>|
 *     |    L    |    A    |    R    |
 *     |---------|---------|---------|
 *   b keeps R in place (b->start moves up to a + size); a second new object takes L and is
 *   linked into the tree; one more for the area (so bag must hold two).
 *
 * In every fit but the full one b keeps its place in address order, so shrinking it costs
 * one propagation of the cached maxima above it, not an erase and an insert.
 */
struct va_block *ft_carve(struct va_freetree *ft, struct va_block *b, uint64_t a, uint64_t size,
			  struct va_bag *bag)
{
	struct va_block *nb, *left = NULL, *lo, *hi;
	struct rb_node *parent = NULL, **link = NULL;
	bool top = b == ft->top;

	if (a == b->start && a + size == b->end) {
		/* FL_FIT_TYPE: the free block object itself becomes the area (top's place goes
		 * to the tree's highest block) */
		if (top)
			pop_top(ft);
		else if (b == ft->tree_last)
			erase_tree_last(ft, b);
		else
			rb_erase(&ft->root, &b->rb, &ft_aug);
		ft->blocks--;
		ft->bytes -= size;
		return b;
	}
	if (a == b->start || a + size == b->end) {
		/* LE_FIT_TYPE or RE_FIT_TYPE: the free block shrinks in place */
		nb = bag_take(bag);
		if (!nb)
			return NULL;
		if (a == b->start)
			b->start += size;
		else
			b->end = a;
	} else {
		/* NE_FIT_TYPE: the block keeps its right part, a new object takes the left */
		if (bag->n < 2)
			return NULL;
		nb = bag_take(bag);
		left = bag_take(bag);
		left->start = b->start;
		left->end = a;
		b->start = a + size;
	}
	/* top is outside the tree: no ancestors' maxima to fix */
	if (top)
		b->subtree_max = blk_size(b);
	else
		ft_propagate(&b->rb);
	/* left lies in the gap b just left, so it cannot overlap */
	if (left && find_link(ft, left, &parent, &link, &lo, &hi))
		link_plain(ft, left, parent, link);
	ft->bytes -= size;
	nb->start = a;
	nb->end = a + size;
	return nb;
}

struct va_block *ft_floor(struct va_freetree *ft, uint64_t addr)
{
	struct rb_node *n = ft->root.node;
	struct va_block *best = NULL;

	if (ft->top && ft->top->start <= addr)
		return ft->top;
	while (n) {
		struct va_block *b = to_blk(n);

		if (b->start <= addr) {
			best = b;
			n = n->right;
		} else {
			n = n->left;
		}
	}
	return best;
}

struct check_ctx {
	struct va_freetree *ft;
	uint64_t quantum;
	const struct va_block *last;
	uint64_t blocks, bytes;
	char *msg;
	size_t len;
};

static int check_fail(struct check_ctx *c, const struct va_block *b, const char *what)
{
	if (b)
		snprintf(c->msg, c->len, "free tree: %s (block [0x%llx, 0x%llx))", what,
			 (unsigned long long)b->start, (unsigned long long)b->end);
	else
		snprintf(c->msg, c->len, "free tree: %s", what);
	return -1;
}

static int check_walk(struct check_ctx *c, struct rb_node *n)
{
	struct va_block *b;
	uint64_t m;

	if (!n)
		return 0;
	if (check_walk(c, n->left))
		return -1;
	b = to_blk(n);
	if (blk_state(b) != VA_ST_FREE)
		return check_fail(c, b, "a block in the tree is not marked free");
	if (b->start >= b->end)
		return check_fail(c, b, "an empty or inverted block");
	if (b->start % c->quantum || b->end % c->quantum)
		return check_fail(c, b, "a block is not quantum-aligned");
	if (c->last && c->last->end > b->start)
		return check_fail(c, b, "blocks out of order or overlapping");
	if (c->last && c->last->end == b->start)
		return check_fail(c, b, "two adjacent free blocks were not merged");
	m = blk_size(b);
	if (max_of(n->left) > m)
		m = max_of(n->left);
	if (max_of(n->right) > m)
		m = max_of(n->right);
	if (b->subtree_max != m)
		return check_fail(c, b, "a cached subtree maximum is wrong");
	c->last = b;
	c->blocks++;
	c->bytes += blk_size(b);
	return check_walk(c, n->right);
}

int ft_check(struct va_freetree *ft, uint64_t quantum, char *msg, size_t len)
{
	struct check_ctx c = {.ft = ft, .quantum = quantum, .msg = msg, .len = len};
	const char *why = NULL;

	if (ft->root.node && rb_red(ft->root.node))
		return check_fail(&c, NULL, "the root is red");
	if (rb_validate(ft->root.node, NULL, &why) < 0)
		return check_fail(&c, NULL, why);
	if (check_walk(&c, ft->root.node))
		return -1;
	if (ft->root.node && !ft->top)
		return check_fail(&c, NULL, "blocks in the tree but no top");
	if (ft->tree_last != c.last)
		return check_fail(&c, ft->tree_last,
				  "the tree's highest block is not the one kept");
	if (ft->top) {
		const struct va_block *t = ft->top;

		if (blk_state(t) != VA_ST_FREE)
			return check_fail(&c, t, "top is not marked free");
		if (t->start >= t->end || t->start % quantum || t->end % quantum)
			return check_fail(&c, t, "top is empty, inverted or not quantum-aligned");
		if (c.last && c.last->end >= t->start)
			return check_fail(&c, t,
					  "top overlaps or touches the tree's highest block");
		c.last = t;
		c.blocks++;
		c.bytes += blk_size(t);
	}
	if (c.last && (c.last->end > ft->span_hi || ft_first(ft)->start < ft->span_lo))
		return check_fail(&c, NULL, "a block lies outside the space");
	if (c.blocks != ft->blocks || c.bytes != ft->bytes)
		return check_fail(&c, NULL, "block or byte counters do not match the tree");
	return 0;
}

/* Post-order, so no object is read after it is given back. */
static void give_subtree(struct rb_node *n)
{
	while (n) {
		struct rb_node *right = n->right;

		give_subtree(n->left);
		objcache_give(to_blk(n));
		n = right;
	}
}

void ft_destroy(struct va_freetree *ft)
{
	give_subtree(ft->root.node);
	ft->root.node = NULL;
	ft->tree_last = NULL;
	if (ft->top)
		objcache_give(ft->top);
	ft->top = NULL;
	ft->bytes = ft->blocks = 0;
}
