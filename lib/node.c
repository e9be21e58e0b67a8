/*
 * node.c - nodes: per-node busy trees (areas found by address) and pools of ready blocks
 * by exact size class; the thread's home node. The busy and pool functions
 * expect the node's lock to be held.
 */
#include <stdlib.h>
#include <string.h>

#include "va_internal.h"

/* ---- home node ------------------------------------------------------------------------ */

static __thread unsigned tls_home;
static __thread bool tls_home_set;
static atomic_uint home_rr;

void va_set_home_node(unsigned n)
{
	tls_home = n;
	tls_home_set = true;
}

unsigned va_home_node(const struct va_space *vs)
{
	if (!tls_home_set) {
		tls_home = atomic_fetch_add_explicit(&home_rr, 1, memory_order_relaxed);
		tls_home_set = true;
	}
	return tls_home % vs->nodes;
}

/* ---- node lifetime -------------------------------------------------------------------- */

int node_init(struct va_node *n, unsigned pool_classes)
{
	memset(n, 0, sizeof(*n));
	n->lk = &n->lock;
	n->refill_cursor = UINT64_MAX;
	if (bh_alloc(&n->hash, 64))
		return VA_ENOMEM;
	if (pool_classes) {
		n->pool = calloc(pool_classes, sizeof(*n->pool));
		if (!n->pool) {
			bh_free(&n->hash);
			return VA_ENOMEM;
		}
	}
	va_spin_init(&n->lock);
	return 0;
}

static void free_subtree(struct rb_node *rn)
{
	while (rn) {
		struct rb_node *right = rn->right;

		free_subtree(rn->left);
		objcache_give(rb_entry(rn, struct va_block, rb));
		rn = right;
	}
}

static void free_list(struct va_block *b)
{
	while (b) {
		struct va_block *next = b->next;

		objcache_give(b);
		b = next;
	}
}

void node_destroy(struct va_node *n, unsigned pool_classes)
{
	struct va_block *b;

	/* pending blocks are in the hash alone; the others in the tree */
	for (uint32_t i = 0; n->pend_len && (b = busy_next_pending(n, &i));) {
		objcache_give(b);
		n->pend_len--;
	}
	free_subtree(n->busy.node);
	n->busy.node = NULL;
	n->busy_hint = NULL;
	bh_free(&n->hash);
	for (uint32_t i = 0; i < n->lazy_len; i++)
		objcache_give(n->lazy[i].b);
	free(n->lazy);
	n->lazy = NULL;
	n->lazy_len = n->lazy_cap = 0;
	if (n->pool) {
		for (unsigned i = 0; i < pool_classes; i++)
			free_list(n->pool[i].head);
		free(n->pool);
		n->pool = NULL;
	}
}

/* ---- busy trees ------------------------------------------------------------------------- */

/*
 * Blocks of one allocation run are carved at consecutive addresses and inserted one after
 * the other, and frees come back in the same order, so each node keeps a hint: the block
 * inserted last, or the successor of the block removed last. An insert whose in-order
 * place is right beside the hint is linked there without a root-to-leaf descent (those
 * descents, cache misses on a tree of tens of thousands of blocks, were most of the cost);
 * a find of the hint's address needs no descent either. Anything else takes the usual path.
 */

static inline struct va_block *busy_blk(struct rb_node *rn)
{
	return rb_entry(rn, struct va_block, rb);
}

/*
 * If b's in-order place is next to the hint, set *parent and *link to the free child
 * pointer it goes into and return true. Ascending: b goes between the hint h and its
 * successor s; when b starts inside or at the end of h, s (which cannot overlap h) starts
 * at or after b, so s need not be found. Descending: b must start after h's predecessor.
 */
static bool hint_link(const struct va_node *n, const struct va_block *b, struct rb_node **parent,
		      struct rb_node ***link)
{
	struct va_block *h = n->busy_hint;
	struct rb_node *s;

	if (!h)
		return false;
	if (h->start < b->start) {
		if (h->rb.right) {
			for (s = h->rb.right; s->left; s = s->left)
				;
			if (busy_blk(s)->start < b->start)
				return false;
			*parent = s;
			*link = &s->left;
			return true;
		}
		if (b->start > h->end) {
			s = rb_next(&h->rb);
			if (s && busy_blk(s)->start < b->start)
				return false;
		}
		*parent = &h->rb;
		*link = &h->rb.right;
		return true;
	}
	if (b->start < h->start) {
		if (h->rb.left) {
			for (s = h->rb.left; s->right; s = s->right)
				;
			if (busy_blk(s)->start > b->start)
				return false;
			*parent = s;
			*link = &s->right;
			return true;
		}
		s = rb_prev(&h->rb);
		if (s && busy_blk(s)->start > b->start)
			return false;
		*parent = &h->rb;
		*link = &h->rb.left;
		return true;
	}
	return false;
}

static void tree_insert(struct va_node *n, struct va_block *b)
{
	struct rb_node **link = &n->busy.node, *parent = NULL;

	if (!hint_link(n, b, &parent, &link)) {
		while (*link) {
			parent = *link;
			if (b->start < busy_blk(parent)->start)
				link = &parent->left;
			else
				link = &parent->right;
		}
	}
	rb_link(&b->rb, parent, link);
	rb_insert_fixup(&n->busy, &b->rb, NULL);
	n->busy_hint = b;
}

static void tree_remove(struct va_node *n, struct va_block *b)
{
	struct rb_node *next = rb_erase_next(&n->busy, &b->rb);

	n->busy_hint = next ? busy_blk(next) : NULL;
}

struct va_block *busy_next_pending(const struct va_node *n, uint32_t *i)
{
	for (; *i < n->hash.cap; (*i)++) {
		struct va_block *b = bh_at(&n->hash, *i);

		if (b && blk_state(b) == VA_ST_BUSY_PEND) {
			(*i)++;
			return b;
		}
	}
	return NULL;
}

void busy_settle(struct va_node *n)
{
	struct va_block *b;

	/* the pending blocks are the hash's entries not yet in the tree: a scan finds them */
	for (uint32_t i = 0; n->pend_len && (b = busy_next_pending(n, &i));) {
		blk_set_state(b, VA_ST_BUSY);
		tree_insert(n, b);
		n->pend_len--;
	}
}

/*
 * A busy block goes into the hash (a free finds it in O(1)), pending, not into the tree:
 * only lookups of interior addresses (va_lookup inside an area, telling a bad free's
 * ENOTSTART from EDOUBLEFREE), the walk and the checker need the tree, and they settle the
 * pending blocks into it first. A block enters the tree at most once, so the tree work is
 * never more than inserting every block at once, and none at all where nothing asks: a
 * daemon checks frees against its own registry, so only its admin views (check, map) settle.
 * Pending blocks are not bounded: a bound (1,024) sent every block that outlived 1,024
 * allocations through a tree insert and erase, a fifth of a daemon's CPU at 50 clients x 16
 * x 64 ranges in flight. Nor listed: a list's unlink read two other cold records per free;
 * a settle finds them by a scan of the hash instead. The price is one settle's latency:
 * the first interior lookup after n allocations scans the node's hash and inserts up to n
 * blocks under its lock (0.13 s for half a million).
 */
void busy_insert(struct va_node *n, struct va_block *b, unsigned qshift)
{
	n->busy_bytes += blk_size(b);
	n->busy_blocks++;
	if (!bh_insert(&n->hash, b, qshift)) {
		blk_set_state(b, VA_ST_BUSY_TREE);
		n->tree_only++;
		tree_insert(n, b);
		return;
	}
	blk_set_state(b, VA_ST_BUSY_PEND);
	n->pend_len++;
}

void busy_remove(struct va_node *n, struct va_block *b, unsigned qshift)
{
	enum va_state st = blk_state(b);

	n->busy_bytes -= blk_size(b);
	n->busy_blocks--;
	if (st == VA_ST_BUSY_TREE)
		n->tree_only--;
	else
		bh_remove(&n->hash, b, qshift);
	if (st == VA_ST_BUSY_PEND)
		n->pend_len--;
	else
		tree_remove(n, b);
}

struct va_block *busy_find(struct va_node *n, uint64_t addr, unsigned qshift)
{
	struct va_block *hit = bh_find(&n->hash, addr, qshift);
	struct rb_node *rn = n->busy.node;

	if (hit || !n->tree_only)
		return hit;
	/* some blocks found no room in the hash: they are in the tree alone */

	if (n->busy_hint && n->busy_hint->start == addr)
		return n->busy_hint;
	while (rn) {
		struct va_block *b = busy_blk(rn);

		if (addr < b->start)
			rn = rn->left;
		else if (addr > b->start)
			rn = rn->right;
		else
			return b;
	}
	return NULL;
}

struct va_block *busy_floor(struct va_node *n, uint64_t addr)
{
	struct rb_node *rn;
	struct va_block *best = NULL;

	busy_settle(n);
	rn = n->busy.node;
	while (rn) {
		struct va_block *b = rb_entry(rn, struct va_block, rb);

		if (b->start <= addr) {
			best = b;
			rn = rn->right;
		} else {
			rn = rn->left;
		}
	}
	return best;
}

/* What a lookup reports of busy block b of node k. */
static void busy_area(const struct va_block *b, unsigned k, struct va_area *out)
{
	out->start = b->start;
	out->size = blk_size(b);
	out->owner = b->owner;
	out->node = k;
}

bool busy_lookup_start(struct va_space *vs, uint64_t addr, struct va_area *out)
{
	unsigned k = va_node_of(vs, addr);
	struct va_node *n = &vs->node[k];
	struct va_block *b;

	va_lock(n->lk);
	b = busy_find(n, addr, vs->qshift);
	if (b)
		busy_area(b, k, out);
	va_unlock(n->lk);
	return b != NULL;
}

bool busy_lookup_any(struct va_space *vs, uint64_t addr, unsigned first, struct va_area *out)
{
	for (unsigned i = 0; i < vs->nodes; i++) {
		unsigned k = (first + i) % vs->nodes;
		struct va_node *n = &vs->node[k];
		struct va_block *b;
		bool hit = false;

		va_lock(n->lk);
		b = busy_floor(n, addr);
		if (b && addr < b->end) {
			busy_area(b, k, out);
			hit = true;
		}
		va_unlock(n->lk);
		if (hit)
			return true;
	}
	return false;
}

int busy_hash_grow(struct va_space *vs, unsigned k, size_t extra)
{
	struct va_node *n = &vs->node[k];
	struct va_busy_hash fresh = {0};
	uint64_t cap;

	/* sized with the lock dropped (no malloc under an allocator lock); another thread may
	 * have grown it meanwhile, then this one gives its arrays back */
	va_lock(n->lk);
	cap = bh_grown_cap(n->hash.count + extra + 1);
	if ((n->hash.count + extra + 1) * 4 <= (uint64_t)n->hash.cap * 3 || cap <= n->hash.cap) {
		va_unlock(n->lk);
		return 0;
	}
	va_unlock(n->lk);
	if (bh_alloc(&fresh, (uint32_t)cap))
		return VA_ENOMEM;
	va_lock(n->lk);
	if (n->hash.cap < cap)
		bh_move(&n->hash, &fresh, vs->qshift);
	va_unlock(n->lk);
	bh_free(&fresh);
	return 0;
}

/* ---- pools ---------------------------------------------------------------------------- */

struct va_block *pool_pop(struct va_node *n, unsigned q, uint64_t quantum)
{
	struct va_pool_class *pc = &n->pool[q - 1];
	struct va_block *b = pc->head;

	if (!b)
		return NULL;
	pc->head = b->next;
	pc->count--;
	n->pool_bytes -= (uint64_t)q * quantum;
	n->pool_blocks--;
	return b;
}

struct va_block *pool_pop_aligned(struct va_node *n, unsigned q, uint64_t align, uint64_t quantum)
{
	struct va_pool_class *pc = &n->pool[q - 1];
	struct va_block **at = &pc->head, *b;

	/* a few from the top: aligned refills push aligned runs, so the top mostly fits */
	for (unsigned k = 0; (b = *at) && k < POOL_ALIGN_LOOK; k++, at = &b->next) {
		if (b->start & (align - 1))
			continue;
		*at = b->next;
		pc->count--;
		n->pool_bytes -= (uint64_t)q * quantum;
		n->pool_blocks--;
		return b;
	}
	return NULL;
}

bool pool_push(struct va_node *n, struct va_block *b, unsigned q, unsigned depth, uint64_t quantum,
	       bool dirty)
{
	struct va_pool_class *pc = &n->pool[q - 1];

	if (pc->count >= depth)
		return false;
	blk_set_state(b, dirty ? VA_ST_POOLED_DIRTY : VA_ST_POOLED);
	b->next = pc->head;
	pc->head = b;
	pc->count++;
	n->pool_bytes += (uint64_t)q * quantum;
	n->pool_blocks++;
	return true;
}

struct va_block *pool_take_decay(struct va_node *n, unsigned classes, enum drain_kind kind,
				 uint64_t quantum)
{
	struct va_block *out = NULL;

	for (unsigned i = 0; i < classes; i++) {
		struct va_pool_class *pc = &n->pool[i];
		uint32_t take, keep;
		struct va_block **cut, *tail;

		if (!pc->count)
			continue;
		/* a class asked for since the last drain keeps up to 3 blocks: it uses them
		 * soon, and each decayed block costs a release */
		take = kind == DRAIN_FULL ? pc->count
		       : pc->recent	  ? pc->count / 4
					  : (pc->count + 3) / 4;
		keep = pc->count - take;
		/* the stack's bottom holds the blocks pushed longest ago: cut there */
		cut = &pc->head;
		for (uint32_t k = 0; k < keep; k++)
			cut = &(*cut)->next;
		tail = *cut;
		*cut = NULL;
		pc->count = keep;
		n->pool_bytes -= (uint64_t)take * (i + 1) * quantum;
		n->pool_blocks -= take;
		while (tail) {
			struct va_block *next = tail->next;

			tail->next = out;
			out = tail;
			tail = next;
		}
	}
	return out;
}
