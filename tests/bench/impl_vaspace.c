/*
 * impl_vaspace.c - the product (lib/) under four configurations.
 *
 * "exact" is exact mode (nodes = 1, no pools, eager, no thread): lowest-address first fit.
 * "vaspace" is the default configuration the daemon runs: one node per CPU, pools,
 * lazy reclaim, background drain thread. "inline" is the same without the thread, every
 * drain run by the freeing thread: the background thread must never make the loop slower.
 * "globallock" is the same augmented free tree with nodes = 1 and no pools, so every allocation
 * takes the one free-tree lock: the baseline that shows what the nodes and pools buy. The release
 * callback only counts, standing in for the daemon's hole punching.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bench_impl.h"

/* The callbacks count per thread, each thread in a cache line of its own: one shared counter
 * bumped on every allocation by every thread was a third of a two-thread loop's time (the
 * line bounced between the cores), a cost the daemon's callbacks do not have. */
#define VS_COUNT_SLOTS 64

struct vs_count {
	atomic_uint_fast64_t release_calls; /* as seen by the callback */
	atomic_uint_fast64_t zero_calls;
} __attribute__((aligned(64)));

struct vs_handle {
	struct va_space *vs;
	struct vs_count count[VS_COUNT_SLOTS]; /* by thread: see vs_slot */
};

/* The calling thread's counter slot: 1 + its bench tid, or 0 for other threads (the
 * background drain, the main thread before thread_start). */
static __thread unsigned vs_slot;

static void count_release(void *ctx, uint64_t start, uint64_t size)
{
	struct vs_handle *vh = ctx;

	atomic_fetch_add_explicit(&vh->count[vs_slot].release_calls, 1, memory_order_relaxed);
}

enum vs_kind { VS_DEFAULT, VS_GLOBAL, VS_EXACT, VS_INLINE };

/* Stands in for the daemon's in-place memset of a block going to a pool. */
static void count_zero(void *ctx, uint64_t start, uint64_t size)
{
	struct vs_handle *vh = ctx;

	atomic_fetch_add_explicit(&vh->count[vs_slot].zero_calls, 1, memory_order_relaxed);
}

static int create_with(const struct bench_space_cfg *cfg, enum vs_kind kind, void **out)
{
	struct vs_handle *vh = aligned_alloc(_Alignof(struct vs_handle), sizeof(*vh));
	struct va_config vc = {
	    .base = cfg->base,
	    .size = cfg->size,
	    .quantum = cfg->quantum,
	    .release = count_release,
	    .zero = count_zero,
	};
	int rc;

	if (!vh)
		return VA_ENOMEM;
	memset(vh, 0, sizeof(*vh));
	vc.release_ctx = vh;
	if (kind == VS_INLINE)
		vc.no_thread = true;
	if (kind == VS_GLOBAL) {
		vc.nodes = 1;
		vc.no_pools = true;
	}
	if (cfg->exact || kind == VS_EXACT) {
		vc.nodes = 1;
		vc.no_pools = true;
		vc.eager = true;
		vc.no_thread = true;
	}
	rc = va_create(&vc, &vh->vs);
	if (rc) {
		free(vh);
		return rc;
	}
	*out = vh;
	return VA_OK;
}

static int vs_create(const struct bench_space_cfg *cfg, void **out)
{
	return create_with(cfg, VS_DEFAULT, out);
}

static int gl_create(const struct bench_space_cfg *cfg, void **out)
{
	return create_with(cfg, VS_GLOBAL, out);
}

static int in_create(const struct bench_space_cfg *cfg, void **out)
{
	return create_with(cfg, VS_INLINE, out);
}

static int ex_create(const struct bench_space_cfg *cfg, void **out)
{
	return create_with(cfg, VS_EXACT, out);
}

static void vs_destroy(void *h)
{
	struct vs_handle *vh = h;

	va_destroy(vh->vs);
	free(vh);
}

static int vs_alloc(void *h, uint64_t size, uint64_t align, uint64_t *addr)
{
	return va_alloc(((struct vs_handle *)h)->vs, size, align, NULL, addr);
}

static int vs_free(void *h, uint64_t addr)
{
	return va_free(((struct vs_handle *)h)->vs, addr, NULL);
}

static int vs_alloc_congruent(void *h, const uint64_t *offs, const uint64_t *sizes, unsigned n,
			      uint64_t align, uint64_t *out)
{
	return va_alloc_congruent(((struct vs_handle *)h)->vs, offs, sizes, n, align, NULL, out);
}

static void vs_thread_start(void *h, unsigned tid)
{
	vs_slot = 1 + tid % (VS_COUNT_SLOTS - 1);
	va_set_home_node(tid);
}

static void vs_quiesce(void *h)
{
	va_drain(((struct vs_handle *)h)->vs);
}

static int vs_check(void *h, char *msg, size_t msg_len)
{
	return va_check(((struct vs_handle *)h)->vs, msg, msg_len);
}

static void vs_counters(void *h, struct bench_counters *out)
{
	struct vs_handle *vh = h;
	struct va_stats st;
	uint64_t release_calls = 0, zero_calls = 0;

	va_get_stats(vh->vs, &st);
	for (unsigned i = 0; i < VS_COUNT_SLOTS; i++) {
		release_calls +=
		    atomic_load_explicit(&vh->count[i].release_calls, memory_order_relaxed);
		zero_calls += atomic_load_explicit(&vh->count[i].zero_calls, memory_order_relaxed);
	}
	*out = (struct bench_counters){
	    .has_va = true,
	    .allocs = st.allocs,
	    .frees = st.frees,
	    .fails = st.fails,
	    .drains = st.drains,
	    /* counted by our own callback: an independent reading of st.release_calls */
	    .release_calls = release_calls,
	    .released_bytes = st.released_bytes,
	    .pool_hits = st.pool_hits,
	    .zero_calls = zero_calls,
	};
}

/* The configurations differ only in name, description and create. */
#define VS_SHARED_OPS                                                                              \
	.destroy = vs_destroy, .alloc = vs_alloc, .free = vs_free,                                 \
	.alloc_congruent = vs_alloc_congruent, .thread_start = vs_thread_start,                    \
	.quiesce = vs_quiesce, .check = vs_check, .counters = vs_counters

const struct bench_impl_ops bench_impl_vaspace = {
    .name = "vaspace",
    .desc = "the product: nodes per CPU, pools, lazy reclaim, background drain",
    .create = vs_create,
    VS_SHARED_OPS,
};

const struct bench_impl_ops bench_impl_exact = {
    .name = "exact",
    .desc = "the product in exact mode: nodes = 1, no pools, eager (lowest first fit)",
    .create = ex_create,
    VS_SHARED_OPS,
};

const struct bench_impl_ops bench_impl_globallock = {
    .name = "globallock",
    .desc = "the product's free tree under its one lock: nodes = 1, no pools",
    .create = gl_create,
    VS_SHARED_OPS,
};

const struct bench_impl_ops bench_impl_inline = {
    .name = "inline",
    .desc = "the product's default without the background thread: every drain inline",
    .create = in_create,
    VS_SHARED_OPS,
};
