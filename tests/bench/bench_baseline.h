/*
 * bench_baseline.h - state and address-range trees shared by the two baselines.
 *
 * busywalk and listfit both keep [start, end) ranges in lib/rbtree.h trees ordered by
 * start, recycle range objects through a spare list instead of malloc, and hold the
 * same space description, lock and counters. The tree searches are inline: they sit on
 * the baselines' measured paths, where they were static functions before.
 */
#ifndef BENCH_BASELINE_H
#define BENCH_BASELINE_H

#include <pthread.h>
#include <stdlib.h>

#include "bench_impl.h"
#include "rbtree.h"

/* An address range in a tree ordered by start; the first member of each baseline's object. */
struct bench_range {
	struct rb_node rb;
	uint64_t start, end;
};

/* What both baselines keep; the first member of their handle (counters reads it there). */
struct bench_baseline {
	pthread_mutex_t lock;
	uint64_t vstart, vend, quantum;
	bool exact;
	struct bench_range *spare; /* recycled objects, linked through rb.left */
	size_t obj_size;	   /* size of one object, for get when spare is empty */
	uint64_t allocs, frees, fails;
};

/* The range of a tree node, or NULL for NULL. */
static inline struct bench_range *bench_range_of(const struct rb_node *n)
{
	return n ? rb_entry(n, struct bench_range, rb) : NULL;
}

static inline uint64_t bench_align_up(uint64_t x, uint64_t align)
{
	return (x + align - 1) & ~(align - 1);
}

/* The range of the tree containing addr, or NULL. */
static inline struct bench_range *bench_range_containing(const struct rb_root *root, uint64_t addr)
{
	const struct rb_node *n = root->node;

	while (n) {
		struct bench_range *r = bench_range_of(n);

		if (addr < r->start)
			n = n->left;
		else if (addr >= r->end)
			n = n->right;
		else
			return r;
	}
	return NULL;
}

/* The range of the tree with the highest start below addr, or NULL. */
static inline struct bench_range *bench_range_below(const struct rb_root *root, uint64_t addr)
{
	const struct rb_node *n = root->node;
	struct bench_range *below = NULL;

	while (n) {
		struct bench_range *r = bench_range_of(n);

		if (r->start < addr) {
			below = r;
			n = n->right;
		} else {
			n = n->left;
		}
	}
	return below;
}

/* Link r into the tree by its start and rebalance. */
void bench_range_insert(struct rb_root *root, struct bench_range *r);

/* Free every object of the tree (each range the first member of a malloc'd object). */
void bench_range_free_tree(struct rb_root *root);

/* 0 if the tree keeps the red-black rules (black root included), else -1. */
int bench_range_tree_check(const struct rb_root *root);

/* Set up b for cfg with objects of obj_size bytes; every counter starts at 0. */
void bench_baseline_init(struct bench_baseline *b, const struct bench_space_cfg *cfg,
			 size_t obj_size);

/* Free the spare objects and destroy the lock. */
void bench_baseline_fini(struct bench_baseline *b);

/* A recycled object, or a new one from malloc; NULL if there is no memory. */
static inline struct bench_range *bench_baseline_get(struct bench_baseline *b)
{
	struct bench_range *r = b->spare;

	if (r) {
		b->spare = bench_range_of(r->rb.left);
		return r;
	}
	return malloc(b->obj_size);
}

/* Keep r (in no tree) for reuse. */
static inline void bench_baseline_put(struct bench_baseline *b, struct bench_range *r)
{
	r->rb.left = b->spare ? &b->spare->rb : NULL;
	b->spare = r;
}

/* Argument checks of alloc: bench_normalize on *size and *align, then out. Returns VA_OK
 * or the VA_E* code to return. */
static inline int bench_baseline_alloc_args(const struct bench_baseline *b, uint64_t *size,
					    uint64_t *align, const uint64_t *out)
{
	int rc = bench_normalize(b->quantum, b->vend - b->vstart, size, align);

	if (rc)
		return rc;
	return out ? VA_OK : VA_EINVAL;
}

/*
 * Argument checks of alloc_congruent: raise align to the quantum and check the request
 * (bench_check_congruent) and out. Returns VA_OK or the VA_E* code to return.
 */
int bench_baseline_congruent_args(const struct bench_baseline *b, const uint64_t *offs,
				  const uint64_t *sizes, unsigned n, uint64_t *align,
				  const uint64_t *out);

/* The counters op of a handle whose first member is a struct bench_baseline. */
void bench_baseline_counters(void *h, struct bench_counters *out);

#endif
