/*
 * impl_listfit.c - baseline "listfit": the 2018 free-tree rework's RFC allocator (patch 1/2).
 *
 * Free space is kept as blocks in an address-ordered list, paired with a red-black
 * tree of the same blocks so that a free can find its neighbours and merge with them.
 * An allocation walks the list from the lowest block (first fit, O(number of free
 * blocks)) and splits the block it takes in one of the four ways of the RFC: full fit,
 * left edge, right edge, no edge. The RFC's marker is kept: the walk resumes from
 * last_free_area (the block the previous allocation came from) unless the request is
 * smaller than the largest leftover seen on skipped blocks (free_va_max_size), has a
 * lower vstart or a smaller alignment. Busy areas are kept in a second tree so free()
 * can learn an area's size from its address.
 *
 * Differences from the RFC, on purpose: eager free (the RFC kept the lazy purge), no
 * VMALLOC_MAX_PADDING size rounding, one mutex for vmap_area_lock, block objects
 * recycled through a free list. A walk that started from the marker and failed is
 * retried from the list head, so a failure means no block fits. Exact mode never uses
 * the marker.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench_baseline.h"

struct lf_block {
	struct bench_range r;	      /* first: the trees and the spare list hold it */
	struct lf_block *prev, *next; /* free list only */
};

struct listfit {
	struct bench_baseline b; /* first: bench_baseline_counters reads it there */
	struct rb_root free_root, busy_root;
	struct lf_block head; /* list sentinel: head.next is the lowest free block */
	/* The RFC's search marker. */
	struct lf_block *last_free_area;
	uint64_t last_alloc_vstart, last_alloc_align, free_va_max_size;
	uint64_t nr_free, nr_busy;
};

static struct lf_block *block_of(struct bench_range *r)
{
	return r ? rb_entry(r, struct lf_block, r) : NULL;
}

static struct lf_block *get_block(struct listfit *lf)
{
	return block_of(bench_baseline_get(&lf->b));
}

static void put_block(struct listfit *lf, struct lf_block *b)
{
	bench_baseline_put(&lf->b, &b->r);
}

static void tree_insert(struct rb_root *root, struct lf_block *b)
{
	bench_range_insert(root, &b->r);
}

static void list_insert_after(struct lf_block *pos, struct lf_block *b)
{
	b->prev = pos;
	b->next = pos->next;
	pos->next->prev = b;
	pos->next = b;
}

static void list_del(struct lf_block *b)
{
	b->prev->next = b->next;
	b->next->prev = b->prev;
}

static int lf_create(const struct bench_space_cfg *cfg, void **out)
{
	struct listfit *lf = calloc(1, sizeof(*lf));
	struct lf_block *all;

	if (!lf)
		return VA_ENOMEM;
	bench_baseline_init(&lf->b, cfg, sizeof(struct lf_block));
	lf->head.next = lf->head.prev = &lf->head;
	all = malloc(sizeof(*all));
	if (!all) {
		bench_baseline_fini(&lf->b);
		free(lf);
		return VA_ENOMEM;
	}
	all->r.start = lf->b.vstart;
	all->r.end = lf->b.vend;
	tree_insert(&lf->free_root, all);
	list_insert_after(&lf->head, all);
	lf->nr_free = 1;
	*out = lf;
	return VA_OK;
}

static void lf_destroy(void *h)
{
	struct listfit *lf = h;

	bench_range_free_tree(&lf->free_root);
	bench_range_free_tree(&lf->busy_root);
	bench_baseline_fini(&lf->b);
	free(lf);
}

/*
 * Take [s, e) out of free block b (which contains it): the RFC's four fit types.
 * Returns VA_ENOMEM if a no-edge split needs a block object and none can be had.
 */
static int carve(struct listfit *lf, struct lf_block *b, uint64_t s, uint64_t e)
{
	if (b->r.start == s && b->r.end == e) {
		/* Full fit: the block goes; the marker steps back if it pointed here. */
		if (lf->last_free_area == b)
			lf->last_free_area = b->prev != &lf->head ? b->prev : NULL;
		rb_erase(&lf->free_root, &b->r.rb, NULL);
		list_del(b);
		put_block(lf, b);
		lf->nr_free--;
	} else if (b->r.start == s) {
		b->r.start = e; /* left edge: tree order is unchanged */
	} else if (b->r.end == e) {
		b->r.end = s; /* right edge */
	} else {
		/* No edge: the left remainder needs a second object. */
		struct lf_block *left = get_block(lf);

		if (!left)
			return VA_ENOMEM;
		left->r.start = b->r.start;
		left->r.end = s;
		b->r.start = e;
		tree_insert(&lf->free_root, left);
		list_insert_after(b->prev, left);
		lf->nr_free++;
	}
	return VA_OK;
}

/* First fit from the list head or from the marker. Returns the block and address. */
static struct lf_block *walk(struct listfit *lf, uint64_t size, uint64_t align, bool use_marker,
			     bool *used_marker, uint64_t *out)
{
	uint64_t vstart = lf->b.vstart, vend = lf->b.vend;
	struct lf_block *b = lf->last_free_area;

	*used_marker = true;
	if (!use_marker || !b || size < lf->free_va_max_size || vstart < lf->last_alloc_vstart ||
	    align < lf->last_alloc_align) {
		b = lf->head.next;
		lf->free_va_max_size = 0;
		lf->last_free_area = NULL;
		*used_marker = false;
	}
	for (; b != &lf->head; b = b->next) {
		uint64_t nva = bench_align_up(b->r.start > vstart ? b->r.start : vstart, align);

		if (nva + size < nva || nva + size > vend)
			break;
		if (nva + size > b->r.end) {
			/* Too small: remember the most it could have given. */
			if (nva < b->r.end && b->r.end - nva > lf->free_va_max_size)
				lf->free_va_max_size = b->r.end - nva;
			continue;
		}
		if (use_marker) {
			lf->last_free_area = b;
			lf->last_alloc_vstart = vstart;
			lf->last_alloc_align = align;
		}
		*out = nva;
		return b;
	}
	return NULL;
}

/* Record a busy area; returns VA_ENOMEM if no object can be had. */
static int add_busy(struct listfit *lf, uint64_t s, uint64_t e)
{
	struct lf_block *a = get_block(lf);

	if (!a)
		return VA_ENOMEM;
	a->r.start = s;
	a->r.end = e;
	tree_insert(&lf->busy_root, a);
	lf->nr_busy++;
	return VA_OK;
}

static int lf_alloc(void *h, uint64_t size, uint64_t align, uint64_t *out)
{
	struct listfit *lf = h;
	struct lf_block *b;
	bool used_marker;
	uint64_t addr;
	int rc;

	rc = bench_baseline_alloc_args(&lf->b, &size, &align, out);
	if (rc)
		return rc;
	pthread_mutex_lock(&lf->b.lock);
	b = walk(lf, size, align, !lf->b.exact, &used_marker, &addr);
	if (!b && used_marker) /* the RFC purged and retried here */
		b = walk(lf, size, align, false, &used_marker, &addr);
	if (!b) {
		rc = VA_ENOSPC;
	} else {
		rc = add_busy(lf, addr, addr + size);
		if (!rc)
			rc = carve(lf, b, addr, addr + size);
	}
	if (rc) {
		lf->b.fails++;
	} else {
		lf->b.allocs++;
		*out = addr;
	}
	pthread_mutex_unlock(&lf->b.lock);
	return rc;
}

/* The busy area containing addr, or NULL. */
static struct lf_block *lookup_busy(struct listfit *lf, uint64_t addr)
{
	return block_of(bench_range_containing(&lf->busy_root, addr));
}

/* The free block with the highest start below addr, or NULL. */
static struct lf_block *free_below(struct listfit *lf, uint64_t addr)
{
	return block_of(bench_range_below(&lf->free_root, addr));
}

/* Give [s, e) back to the free list, merging with both neighbours (RFC's merge). */
static void merge_free(struct listfit *lf, struct lf_block *va)
{
	uint64_t marker_start = lf->last_free_area ? lf->last_free_area->r.start : 0;
	struct lf_block *prev = free_below(lf, va->r.start);
	struct lf_block *next = prev ? prev->next : lf->head.next;
	bool merged = false;

	if (next != &lf->head && next->r.start == va->r.end) {
		next->r.start =
		    va->r.start; /* order unchanged: prev ends at or below va->r.start */
		put_block(lf, va);
		va = next;
		merged = true;
	}
	if (prev && prev->r.end == va->r.start) {
		prev->r.end = va->r.end;
		if (merged) {
			if (lf->last_free_area == va)
				lf->last_free_area = prev;
			rb_erase(&lf->free_root, &va->r.rb, NULL);
			list_del(va);
			put_block(lf, va);
			lf->nr_free--;
		} else {
			put_block(lf, va);
		}
		va = prev;
		merged = true;
	}
	if (!merged) {
		tree_insert(&lf->free_root, va);
		list_insert_after(prev ? prev : &lf->head, va);
		lf->nr_free++;
	}
	/* A merge or insert below the marker moves the marker down to it. */
	if (lf->last_free_area && va->r.start < marker_start)
		lf->last_free_area = va;
}

static int lf_free(void *h, uint64_t addr)
{
	struct listfit *lf = h;
	struct lf_block *a;

	if (addr < lf->b.vstart || addr >= lf->b.vend)
		return VA_ERANGE;
	pthread_mutex_lock(&lf->b.lock);
	a = lookup_busy(lf, addr);
	if (!a || a->r.start != addr) {
		pthread_mutex_unlock(&lf->b.lock);
		return a ? VA_ENOTSTART : VA_EDOUBLEFREE;
	}
	rb_erase(&lf->busy_root, &a->r.rb, NULL);
	lf->nr_busy--;
	lf->b.frees++;
	merge_free(lf, a); /* the busy object becomes the free block or is recycled */
	pthread_mutex_unlock(&lf->b.lock);
	return VA_OK;
}

/*
 * [s, e) is free if one free block holds it. Otherwise the highest busy run
 * overlapping it starts at the end of the free block below e (or, if that block
 * reaches e but starts above s, at the end of the block before it).
 */
static bool lf_conflict(void *h, uint64_t s, uint64_t e, uint64_t *new_end)
{
	struct listfit *lf = h;
	struct lf_block *b = free_below(lf, e);

	if (!b) {
		*new_end = lf->b.vstart; /* everything below e is busy */
		return true;
	}
	if (b->r.end < e) {
		*new_end = b->r.end;
		return true;
	}
	if (b->r.start <= s)
		return false;
	*new_end = b->prev != &lf->head ? b->prev->r.end : lf->b.vstart;
	return true;
}

static int lf_alloc_congruent(void *h, const uint64_t *offs, const uint64_t *sizes, unsigned n,
			      uint64_t align, uint64_t *out)
{
	struct listfit *lf = h;
	uint64_t base;
	int rc;

	rc = bench_baseline_congruent_args(&lf->b, offs, sizes, n, &align, out);
	if (rc)
		return rc;
	pthread_mutex_lock(&lf->b.lock);
	rc = bench_congruent_search(lf, lf_conflict, lf->b.vstart, lf->b.vend, offs, sizes, n,
				    align, &base);
	for (unsigned i = 0; i < n && rc == VA_OK; i++) {
		uint64_t s = base + offs[i], e = s + sizes[i];

		rc = add_busy(lf, s, e);
		if (!rc)
			rc = carve(lf, free_below(lf, e), s, e);
		if (!rc)
			out[i] = s;
		/* an ENOMEM half way leaves earlier areas allocated; the bench never sees it */
	}
	if (rc)
		lf->b.fails++;
	else
		lf->b.allocs += n;
	pthread_mutex_unlock(&lf->b.lock);
	return rc;
}

static int lf_check(void *h, char *msg, size_t msg_len)
{
	struct listfit *lf = h;
	struct lf_block *b;
	struct rb_node *n;
	uint64_t count = 0, prev_end = lf->b.vstart, busy = 0, free_bytes = 0;
	int rc = VA_OK;

	pthread_mutex_lock(&lf->b.lock);
	if (bench_range_tree_check(&lf->free_root) || bench_range_tree_check(&lf->busy_root)) {
		snprintf(msg, msg_len, "listfit: red-black tree rules broken");
		rc = VA_ECORRUPT;
	}
	n = rb_first(&lf->free_root);
	for (b = lf->head.next; b != &lf->head && !rc; b = b->next, n = rb_next(n)) {
		if (n != &b->r.rb || b->r.start >= b->r.end || (count && b->r.start <= prev_end) ||
		    b->r.start < prev_end || b->r.end > lf->b.vend) {
			snprintf(msg, msg_len, "listfit: free block [%#llx, %#llx) out of order",
				 (unsigned long long)b->r.start, (unsigned long long)b->r.end);
			rc = VA_ECORRUPT;
		}
		prev_end = b->r.end;
		free_bytes += b->r.end - b->r.start;
		count++;
	}
	if (!rc && (count != lf->nr_free || n)) {
		snprintf(msg, msg_len, "listfit: free list and tree disagree");
		rc = VA_ECORRUPT;
	}
	count = 0;
	prev_end = lf->b.vstart;
	for (n = rb_first(&lf->busy_root); n && !rc; n = rb_next(n)) {
		struct lf_block *a = block_of(bench_range_of(n));

		if (a->r.start < prev_end || a->r.start >= a->r.end) {
			snprintf(msg, msg_len, "listfit: busy areas overlap");
			rc = VA_ECORRUPT;
		}
		prev_end = a->r.end;
		busy += a->r.end - a->r.start;
		count++;
	}
	if (!rc && (count != lf->nr_busy || busy + free_bytes != lf->b.vend - lf->b.vstart)) {
		snprintf(msg, msg_len, "listfit: busy %llu + free %llu bytes != space",
			 (unsigned long long)busy, (unsigned long long)free_bytes);
		rc = VA_ECORRUPT;
	}
	pthread_mutex_unlock(&lf->b.lock);
	return rc;
}

const struct bench_impl_ops bench_impl_listfit = {
    .name = "listfit",
    .desc = "2018 RFC: first-fit walk of an address-ordered free list (with its marker)",
    .create = lf_create,
    .destroy = lf_destroy,
    .alloc = lf_alloc,
    .free = lf_free,
    .alloc_congruent = lf_alloc_congruent,
    .check = lf_check,
    .counters = bench_baseline_counters,
};
