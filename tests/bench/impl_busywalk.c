/*
 * impl_busywalk.c - baseline "busywalk": the 2010 vmalloc allocator (seed 004).
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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_impl.h"
#include "bench_rbtree.h"

struct bw_area {
	struct bench_rb_node rb;
	uint64_t start, end;
	struct bw_area *next_spare;
};

struct busywalk {
	pthread_mutex_t lock;
	struct bench_rb_root root;
	uint64_t vstart, vend, quantum;
	bool exact;
	/* The free_vmap_cache state. */
	struct bench_rb_node *free_cache;
	uint64_t cached_hole_size, cached_vstart, cached_align;
	struct bw_area *spare;
	uint64_t nr_busy, allocs, frees, fails;
};

static struct bw_area *rb_area(struct bench_rb_node *n)
{
	return n ? bench_rb_entry(n, struct bw_area, rb) : NULL;
}

static uint64_t align_up(uint64_t x, uint64_t align)
{
	return (x + align - 1) & ~(align - 1);
}

static int bw_create(const struct bench_space_cfg *cfg, void **out)
{
	struct busywalk *bw = calloc(1, sizeof(*bw));

	if (!bw)
		return VA_ENOMEM;
	pthread_mutex_init(&bw->lock, NULL);
	bw->vstart = cfg->base;
	bw->vend = cfg->base + cfg->size;
	bw->quantum = cfg->quantum;
	bw->exact = cfg->exact;
	*out = bw;
	return VA_OK;
}

static void free_subtree(struct bench_rb_node *n)
{
	while (n) {
		struct bench_rb_node *left = n->left;

		free_subtree(n->right);
		free(rb_area(n));
		n = left;
	}
}

static void bw_destroy(void *h)
{
	struct busywalk *bw = h;
	struct bw_area *a;

	free_subtree(bw->root.node);
	while ((a = bw->spare)) {
		bw->spare = a->next_spare;
		free(a);
	}
	pthread_mutex_destroy(&bw->lock);
	free(bw);
}

static struct bw_area *get_area(struct busywalk *bw)
{
	struct bw_area *a = bw->spare;

	if (a) {
		bw->spare = a->next_spare;
		return a;
	}
	return malloc(sizeof(*a));
}

static void put_area(struct busywalk *bw, struct bw_area *a)
{
	a->next_spare = bw->spare;
	bw->spare = a;
}

static void insert_area(struct busywalk *bw, struct bw_area *a)
{
	struct bench_rb_node **link = &bw->root.node, *parent = NULL;

	while (*link) {
		parent = *link;
		link = a->start < rb_area(parent)->start ? &parent->left : &parent->right;
	}
	bench_rb_insert(&bw->root, parent, link, &a->rb);
	bw->nr_busy++;
}

/*
 * Find the address for [addr, addr + size) the 2010 way. Returns VA_OK with *out set,
 * or VA_ENOSPC. use_cache = false forces the search from vstart.
 */
static int find_gap(struct busywalk *bw, uint64_t size, uint64_t align, bool use_cache,
		    bool *used_cache, uint64_t *out)
{
	uint64_t vstart = bw->vstart, vend = bw->vend, addr;
	struct bw_area *first = NULL;

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
		first = rb_area(bw->free_cache);
		addr = align_up(first->end, align);
		if (addr < vstart)
			goto nocache;
		*used_cache = true;
	} else {
		struct bench_rb_node *n = bw->root.node;

		addr = align_up(vstart, align);
		/* The lowest area ending above addr. */
		while (n) {
			struct bw_area *tmp = rb_area(n);

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
			addr = align_up(first->end, align);
		first = rb_area(bench_rb_next(&first->rb));
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
	struct bw_area *a;
	bool used_cache;
	uint64_t addr;
	int rc;

	rc = bench_normalize(bw->quantum, bw->vend - bw->vstart, &size, &align);
	if (rc)
		return rc;
	if (!out)
		return VA_EINVAL;
	pthread_mutex_lock(&bw->lock);
	rc = find_gap(bw, size, align, !bw->exact, &used_cache, &addr);
	if (rc == VA_ENOSPC && used_cache) /* the kernel purged and retried here */
		rc = find_gap(bw, size, align, false, &used_cache, &addr);
	if (rc == VA_OK) {
		a = get_area(bw);
		if (!a) {
			rc = VA_ENOMEM;
		} else {
			a->start = addr;
			a->end = addr + size;
			insert_area(bw, a);
			if (!bw->exact)
				bw->free_cache = &a->rb;
			bw->allocs++;
			*out = addr;
		}
	}
	if (rc)
		bw->fails++;
	pthread_mutex_unlock(&bw->lock);
	return rc;
}

/* The busy area containing addr, or NULL. */
static struct bw_area *lookup(struct busywalk *bw, uint64_t addr)
{
	struct bench_rb_node *n = bw->root.node;

	while (n) {
		struct bw_area *a = rb_area(n);

		if (addr < a->start)
			n = n->left;
		else if (addr >= a->end)
			n = n->right;
		else
			return a;
	}
	return NULL;
}

static int bw_free(void *h, uint64_t addr)
{
	struct busywalk *bw = h;
	struct bw_area *a;

	if (addr < bw->vstart || addr >= bw->vend)
		return VA_ERANGE;
	pthread_mutex_lock(&bw->lock);
	a = lookup(bw, addr);
	if (!a || a->start != addr) {
		pthread_mutex_unlock(&bw->lock);
		return a ? VA_ENOTSTART : VA_EDOUBLEFREE;
	}
	/* __free_vmap_area's cache maintenance. */
	if (bw->free_cache) {
		if (a->end < bw->cached_vstart) {
			bw->free_cache = NULL;
		} else if (a->start <= rb_area(bw->free_cache)->start) {
			/* cached_hole_size and cached_align are left alone, as in the kernel */
			bw->free_cache = bench_rb_prev(&a->rb);
		}
	}
	bench_rb_erase(&bw->root, &a->rb);
	bw->nr_busy--;
	bw->frees++;
	put_area(bw, a);
	pthread_mutex_unlock(&bw->lock);
	return VA_OK;
}

/* The highest busy area starting below e overlaps [s, e) if it ends above s. */
static bool bw_conflict(void *h, uint64_t s, uint64_t e, uint64_t *new_end)
{
	struct busywalk *bw = h;
	struct bench_rb_node *n = bw->root.node;
	struct bw_area *below = NULL;

	while (n) {
		struct bw_area *a = rb_area(n);

		if (a->start < e) {
			below = a;
			n = n->right;
		} else {
			n = n->left;
		}
	}
	if (!below || below->end <= s)
		return false;
	*new_end = below->start;
	return true;
}

static int bw_alloc_congruent(void *h, const uint64_t *offs, const uint64_t *sizes, unsigned n,
			      uint64_t align, uint64_t *out)
{
	struct busywalk *bw = h;
	struct bw_area **areas;
	uint64_t span, base;
	int rc;

	if (align == 0)
		align = bw->quantum;
	rc =
	    bench_check_congruent(bw->quantum, bw->vend - bw->vstart, offs, sizes, n, align, &span);
	if (rc)
		return rc;
	if (!out)
		return VA_EINVAL;
	if (align < bw->quantum)
		align = bw->quantum;
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
	pthread_mutex_lock(&bw->lock);
	rc = bench_congruent_search(bw, bw_conflict, bw->vstart, bw->vend, offs, sizes, n, align,
				    &base);
	if (rc == VA_OK) {
		for (unsigned i = 0; i < n; i++) {
			areas[i]->start = base + offs[i];
			areas[i]->end = areas[i]->start + sizes[i];
			insert_area(bw, areas[i]);
			out[i] = areas[i]->start;
		}
		bw->allocs += n;
	} else {
		bw->fails++;
	}
	pthread_mutex_unlock(&bw->lock);
	if (rc)
		for (unsigned i = 0; i < n; i++)
			free(areas[i]);
	free(areas);
	return rc;
}

static int bw_check(void *h, char *msg, size_t msg_len)
{
	struct busywalk *bw = h;
	struct bench_rb_node *n;
	uint64_t count = 0, prev_end = bw->vstart;
	int rc = VA_OK;

	pthread_mutex_lock(&bw->lock);
	if (bench_rb_check(&bw->root)) {
		snprintf(msg, msg_len, "busywalk: red-black tree rules broken");
		rc = VA_ECORRUPT;
	}
	for (n = bench_rb_first(&bw->root); n && !rc; n = bench_rb_next(n)) {
		struct bw_area *a = rb_area(n);

		if (a->start < prev_end || a->end <= a->start || a->end > bw->vend) {
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
	pthread_mutex_unlock(&bw->lock);
	return rc;
}

static void bw_counters(void *h, struct bench_counters *out)
{
	struct busywalk *bw = h;

	pthread_mutex_lock(&bw->lock);
	*out = (struct bench_counters){
	    .allocs = bw->allocs,
	    .frees = bw->frees,
	    .fails = bw->fails,
	};
	pthread_mutex_unlock(&bw->lock);
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
    .counters = bw_counters,
};
