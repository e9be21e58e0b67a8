/*
 * impl_busywalk.c - baseline "busywalk": the 2010 vmalloc allocator (free_vmap_cache).
 *
 * Only busy areas are kept, in a red-black tree ordered by address. An allocation
 * walks the busy areas in address order, looking for a gap between two of them
 * that holds the request. Nick Piggin's and Minchan Kim's free_vmap_cache makes the
 * walk start from the area allocated last instead of from the start of the space,
 * unless the request is "more permissive" than the one that set the cache: smaller
 * than a hole seen below the cache (cached_hole_size), a lower vstart
 * (cached_vstart) or a smaller alignment (cached_align). Freeing an area at or below
 * the cache moves the cache to the area before it.
 *
 * Differences from the kernel, on purpose: frees are eager (the kernel kept freed
 * areas in the tree until a lazy purge); no guard page; one mutex stands for
 * vmap_area_lock; area objects are recycled through a free list so the baseline is
 * not charged for malloc. When a walk that started from the cache finds no room, the
 * search runs once more from vstart (the kernel purged and retried), so a failure
 * always means no gap exists. In exact mode the cache is never used and the walk is a
 * plain lowest-address first fit.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench_baseline.h"

struct busywalk {
	struct bench_baseline b; /* first: bench_baseline_counters reads it there */
	struct rb_root root;	 /* busy areas */
	/* The free_vmap_cache state. */
	struct rb_node *free_cache;
	uint64_t cached_hole_size, cached_vstart, cached_align;
	uint64_t nr_busy;
};

static int bw_create(const struct bench_space_cfg *cfg, void **out)
{
	struct busywalk *bw = calloc(1, sizeof(*bw));

	if (!bw)
		return VA_ENOMEM;
	bench_baseline_init(&bw->b, cfg, sizeof(struct bench_range));
	*out = bw;
	return VA_OK;
}

static void bw_destroy(void *h)
{
	struct busywalk *bw = h;

	bench_range_free_tree(&bw->root);
	bench_baseline_fini(&bw->b);
	free(bw);
}

static void insert_area(struct busywalk *bw, struct bench_range *a)
{
	bench_range_insert(&bw->root, a);
	bw->nr_busy++;
}

/*
 * Find the address for [addr, addr + size) the 2010 way. Returns VA_OK with *out set,
 * or VA_ENOSPC. use_cache = false forces the search from vstart.
 */
static int find_gap(struct busywalk *bw, uint64_t size, uint64_t align, bool use_cache,
		    bool *used_cache, uint64_t *out)
{
	uint64_t vstart = bw->b.vstart, vend = bw->b.vend, addr;
	struct bench_range *first = NULL;

	*used_cache = false;
	/* A more permissive request than the cached one invalidates the cache. */
	if (!use_cache || !bw->free_cache || size < bw->cached_hole_size ||
	    vstart < bw->cached_vstart || align < bw->cached_align) {
	nocache:
		bw->cached_hole_size = 0;
		bw->free_cache = NULL;
	}
	bw->cached_vstart = vstart;
	bw->cached_align = align;

	if (bw->free_cache) {
		first = bench_range_of(bw->free_cache);
		addr = bench_align_up(first->end, align);
		if (addr < vstart)
			goto nocache;
		*used_cache = true;
	} else {
		struct rb_node *n = bw->root.node;

		addr = bench_align_up(vstart, align);
		/* The lowest area ending above addr. */
		while (n) {
			struct bench_range *tmp = bench_range_of(n);

			if (tmp->end > addr) {
				first = tmp;
				if (tmp->start <= addr)
					break;
				n = n->left;
			} else {
				n = n->right;
			}
		}
		if (!first)
			goto found;
	}

	/* Walk busy areas in address order until the gap before one holds the request. */
	while (addr + size > first->start && addr + size <= vend) {
		if (addr + bw->cached_hole_size < first->start)
			bw->cached_hole_size = first->start - addr;
		if (first->end > addr)
			addr = bench_align_up(first->end, align);
		first = bench_range_of(rb_next(&first->rb));
		if (!first)
			break;
	}
found:
	if (addr < vstart || addr + size > vend || addr + size < addr)
		return VA_ENOSPC;
	*out = addr;
	return VA_OK;
}

static int bw_alloc(void *h, uint64_t size, uint64_t align, uint64_t *out)
{
	struct busywalk *bw = h;
	struct bench_range *a;
	bool used_cache;
	uint64_t addr;
	int rc;

	rc = bench_baseline_alloc_args(&bw->b, &size, &align, out);
	if (rc)
		return rc;
	pthread_mutex_lock(&bw->b.lock);
	rc = find_gap(bw, size, align, !bw->b.exact, &used_cache, &addr);
	if (rc == VA_ENOSPC && used_cache) /* the kernel purged and retried here */
		rc = find_gap(bw, size, align, false, &used_cache, &addr);
	if (rc == VA_OK) {
		a = bench_baseline_get(&bw->b);
		if (!a) {
			rc = VA_ENOMEM;
		} else {
			a->start = addr;
			a->end = addr + size;
			insert_area(bw, a);
			if (!bw->b.exact)
				bw->free_cache = &a->rb;
			bw->b.allocs++;
			*out = addr;
		}
	}
	if (rc)
		bw->b.fails++;
	pthread_mutex_unlock(&bw->b.lock);
	return rc;
}

static int bw_free(void *h, uint64_t addr)
{
	struct busywalk *bw = h;
	struct bench_range *a;

	if (addr < bw->b.vstart || addr >= bw->b.vend)
		return VA_ERANGE;
	pthread_mutex_lock(&bw->b.lock);
	a = bench_range_containing(&bw->root, addr);
	if (!a || a->start != addr) {
		pthread_mutex_unlock(&bw->b.lock);
		return a ? VA_ENOTSTART : VA_EDOUBLEFREE;
	}
	/* __free_vmap_area's cache maintenance. */
	if (bw->free_cache) {
		if (a->end < bw->cached_vstart) {
			bw->free_cache = NULL;
		} else if (a->start <= bench_range_of(bw->free_cache)->start) {
			/* cached_hole_size and cached_align are left alone, as in the kernel */
			bw->free_cache = rb_prev(&a->rb);
		}
	}
	rb_erase(&bw->root, &a->rb, NULL);
	bw->nr_busy--;
	bw->b.frees++;
	bench_baseline_put(&bw->b, a);
	pthread_mutex_unlock(&bw->b.lock);
	return VA_OK;
}

/* The highest busy area starting below e overlaps [s, e) if it ends above s. */
static bool bw_conflict(void *h, uint64_t s, uint64_t e, uint64_t *new_end)
{
	struct busywalk *bw = h;
	struct bench_range *below = bench_range_below(&bw->root, e);

	if (!below || below->end <= s)
		return false;
	*new_end = below->start;
	return true;
}

static int bw_alloc_congruent(void *h, const uint64_t *offs, const uint64_t *sizes, unsigned n,
			      uint64_t align, uint64_t *out)
{
	struct busywalk *bw = h;
	struct bench_range **areas;
	uint64_t base;
	int rc;

	rc = bench_baseline_congruent_args(&bw->b, offs, sizes, n, &align, out);
	if (rc)
		return rc;
	areas = calloc(n, sizeof(*areas));
	if (!areas)
		return VA_ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		areas[i] = malloc(sizeof(**areas));
		if (!areas[i]) {
			while (i--)
				free(areas[i]);
			free(areas);
			return VA_ENOMEM;
		}
	}
	pthread_mutex_lock(&bw->b.lock);
	rc = bench_congruent_search(bw, bw_conflict, bw->b.vstart, bw->b.vend, offs, sizes, n,
				    align, &base);
	if (rc == VA_OK) {
		for (unsigned i = 0; i < n; i++) {
			areas[i]->start = base + offs[i];
			areas[i]->end = areas[i]->start + sizes[i];
			insert_area(bw, areas[i]);
			out[i] = areas[i]->start;
		}
		bw->b.allocs += n;
	} else {
		bw->b.fails++;
	}
	pthread_mutex_unlock(&bw->b.lock);
	if (rc)
		for (unsigned i = 0; i < n; i++)
			free(areas[i]);
	free(areas);
	return rc;
}

static int bw_check(void *h, char *msg, size_t msg_len)
{
	struct busywalk *bw = h;
	struct rb_node *n;
	uint64_t count = 0, prev_end = bw->b.vstart;
	int rc = VA_OK;

	pthread_mutex_lock(&bw->b.lock);
	if (bench_range_tree_check(&bw->root)) {
		snprintf(msg, msg_len, "busywalk: red-black tree rules broken");
		rc = VA_ECORRUPT;
	}
	for (n = rb_first(&bw->root); n && !rc; n = rb_next(n)) {
		struct bench_range *a = bench_range_of(n);

		if (a->start < prev_end || a->end <= a->start || a->end > bw->b.vend) {
			snprintf(msg, msg_len,
				 "busywalk: area [%#llx, %#llx) overlaps or is out of range",
				 (unsigned long long)a->start, (unsigned long long)a->end);
			rc = VA_ECORRUPT;
		}
		prev_end = a->end;
		count++;
	}
	if (!rc && count != bw->nr_busy) {
		snprintf(msg, msg_len, "busywalk: %llu areas in the tree, %llu counted",
			 (unsigned long long)count, (unsigned long long)bw->nr_busy);
		rc = VA_ECORRUPT;
	}
	pthread_mutex_unlock(&bw->b.lock);
	return rc;
}

const struct bench_impl_ops bench_impl_busywalk = {
    .name = "busywalk",
    .desc = "2010 busy-area tree walked from a cached hole (free_vmap_cache), eager free",
    .create = bw_create,
    .destroy = bw_destroy,
    .alloc = bw_alloc,
    .free = bw_free,
    .alloc_congruent = bw_alloc_congruent,
    .check = bw_check,
    .counters = bench_baseline_counters,
};
