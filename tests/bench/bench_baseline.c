/*
 * bench_baseline.c - state and address-range trees shared by the two baselines.
 */
#include <string.h>

#include "bench_baseline.h"

void bench_range_insert(struct rb_root *root, struct bench_range *r)
{
	struct rb_node **link = &root->node, *parent = NULL;

	while (*link) {
		parent = *link;
		link = r->start < bench_range_of(parent)->start ? &parent->left : &parent->right;
	}
	rb_link(&r->rb, parent, link);
	rb_insert_fixup(root, &r->rb, NULL);
}

static void free_subtree(struct rb_node *n)
{
	while (n) {
		struct rb_node *left = n->left;

		free_subtree(n->right);
		free(bench_range_of(n));
		n = left;
	}
}

void bench_range_free_tree(struct rb_root *root)
{
	free_subtree(root->node);
	root->node = NULL;
}

int bench_range_tree_check(const struct rb_root *root)
{
	const char *why;

	if (root->node && rb_red(root->node))
		return -1;
	return rb_validate(root->node, NULL, &why) < 0 ? -1 : 0;
}

void bench_baseline_init(struct bench_baseline *b, const struct bench_space_cfg *cfg,
			 size_t obj_size)
{
	memset(b, 0, sizeof(*b));
	pthread_mutex_init(&b->lock, NULL);
	b->vstart = cfg->base;
	b->vend = cfg->base + cfg->size;
	b->quantum = cfg->quantum;
	b->exact = cfg->exact;
	b->obj_size = obj_size;
}

void bench_baseline_fini(struct bench_baseline *b)
{
	struct bench_range *r;

	while ((r = b->spare)) {
		b->spare = bench_range_of(r->rb.left);
		free(r);
	}
	pthread_mutex_destroy(&b->lock);
}

int bench_baseline_congruent_args(const struct bench_baseline *b, const uint64_t *offs,
				  const uint64_t *sizes, unsigned n, uint64_t *align,
				  const uint64_t *out)
{
	uint64_t span;
	int rc;

	if (*align == 0)
		*align = b->quantum;
	rc = bench_check_congruent(b->quantum, b->vend - b->vstart, offs, sizes, n, *align, &span);
	if (rc)
		return rc;
	if (!out)
		return VA_EINVAL;
	if (*align < b->quantum)
		*align = b->quantum;
	return VA_OK;
}

void bench_baseline_counters(void *h, struct bench_counters *out)
{
	struct bench_baseline *b = h;

	pthread_mutex_lock(&b->lock);
	*out = (struct bench_counters){
	    .allocs = b->allocs,
	    .frees = b->frees,
	    .fails = b->fails,
	};
	pthread_mutex_unlock(&b->lock);
}
