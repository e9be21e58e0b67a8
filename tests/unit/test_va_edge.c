/*
 * test_va_edge.c - edge cases of libvaspace: fit types, alignment, windows, exhaustion,
 * congruent groups, every error code, lookup, owner tags, walk totals, release callback
 * counts (eager and lazy), drain before failure, pools, thresholds, the background thread.
 * va_check runs after every step.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "va_internal.h" /* the saturating counters */
#include "va_testutil.h"
#include "vaspace.h"

#define Q 4096ull

/* ---- helpers ------------------------------------------------------------------------- */

struct rel_log {
	unsigned calls;
	uint64_t bytes;
	uint64_t last_start, last_size;
};

static void on_release(void *ctx, uint64_t start, uint64_t size)
{
	struct rel_log *l = ctx;

	__atomic_add_fetch(&l->calls, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&l->bytes, size, __ATOMIC_RELAXED);
	__atomic_store_n(&l->last_start, start, __ATOMIC_RELAXED);
	__atomic_store_n(&l->last_size, size, __ATOMIC_RELAXED);
}

/* Exact mode: one node, no pools, eager, no thread. */
static struct va_space *make_exact(uint64_t base, uint64_t size, struct rel_log *log)
{
	struct va_config cfg = {.base = base,
				.size = size,
				.quantum = Q,
				.nodes = 1,
				.no_pools = true,
				.eager = true,
				.no_thread = true};
	struct va_space *vs = NULL;

	if (log) {
		cfg.release = on_release;
		cfg.release_ctx = log;
	}
	assert_int_equal(va_create(&cfg, &vs), 0);
	assert_non_null(vs);
	CHECK(vs);
	return vs;
}

static struct va_space *make_cfg(struct va_config *cfg)
{
	struct va_space *vs = NULL;

	assert_int_equal(va_create(cfg, &vs), 0);
	CHECK(vs);
	return vs;
}

static uint64_t alloc_ok(struct va_space *vs, uint64_t size, uint64_t align)
{
	uint64_t a = 0;

	assert_int_equal(va_alloc(vs, size, align, NULL, &a), 0);
	CHECK(vs);
	return a;
}

static void free_ok(struct va_space *vs, uint64_t addr)
{
	assert_int_equal(va_free(vs, addr, NULL), 0);
	CHECK(vs);
}

static struct va_stats stats(struct va_space *vs)
{
	struct va_stats st;

	va_get_stats(vs, &st);
	return st;
}

/* ---- creation ------------------------------------------------------------------------- */

static void test_create_errors(void **state)
{
	struct va_config cfg = {.size = 64 * Q};
	struct va_space *vs = NULL;

	(void)state;
	assert_int_equal(va_create(NULL, &vs), VA_EINVAL);
	assert_int_equal(va_create(&cfg, NULL), VA_EINVAL);
	cfg.quantum = 3000;
	assert_int_equal(va_create(&cfg, &vs), VA_EALIGN);
	cfg.quantum = Q;
	cfg.size = 0;
	assert_int_equal(va_create(&cfg, &vs), VA_EINVAL);
	cfg.size = Q + 1;
	assert_int_equal(va_create(&cfg, &vs), VA_EINVAL);
	cfg.size = 64 * Q;
	cfg.base = 100;
	assert_int_equal(va_create(&cfg, &vs), VA_EALIGN);
	cfg.base = UINT64_MAX - Q + 1;
	assert_int_equal(va_create(&cfg, &vs), VA_EINVAL);
	cfg.base = 0;
	cfg.nodes = 1u << 20;
	assert_int_equal(va_create(&cfg, &vs), VA_EINVAL);
	cfg.nodes = 0;
	cfg.zone_size = Q + 1;
	assert_int_equal(va_create(&cfg, &vs), VA_EINVAL);
	cfg.zone_size = 0;
	assert_null(vs);

	/* defaults: quantum 4096, one node per CPU */
	cfg = (struct va_config){.size = 64 * Q};
	assert_int_equal(va_create(&cfg, &vs), 0);
	CHECK(vs);
	assert_int_equal(stats(vs).quantum, 4096);
	assert_true(stats(vs).nodes >= 1);
	assert_int_equal(stats(vs).free_bytes, 64 * Q);
	assert_int_equal(stats(vs).largest_free, 64 * Q);
	va_destroy(vs);
	va_destroy(NULL);
}

/* ---- fit types -------------------------------------------------------------------------- */

static void test_basic_and_fit_types(void **state)
{
	struct rel_log log = {0};
	struct va_space *vs = make_exact(1 << 20, 16 * Q, &log);
	uint64_t base = 1 << 20, a, b, c, d;

	(void)state;
	/* left edge: lowest address, size rounded up to the quantum */
	a = alloc_ok(vs, 1, 0);
	assert_int_equal(a, base);
	assert_int_equal(stats(vs).busy_bytes, Q);
	/* no edge: alignment puts it in the middle of the free block */
	b = alloc_ok(vs, Q, 4 * Q);
	assert_int_equal(b, base + 4 * Q);
	assert_int_equal(stats(vs).free_blocks, 2);
	/* right edge: a window at the end of the space */
	assert_int_equal(va_alloc_range(vs, Q, 0, base + 15 * Q, base + 16 * Q, NULL, &c), 0);
	CHECK(vs);
	assert_int_equal(c, base + 15 * Q);
	/* full fit of the hole [base + Q, base + 4Q) */
	d = alloc_ok(vs, 3 * Q, 0);
	assert_int_equal(d, base + Q);
	assert_int_equal(stats(vs).free_blocks, 1);
	assert_int_equal(stats(vs).largest_free, 10 * Q);
	/* frees merge with both neighbours */
	free_ok(vs, d);
	free_ok(vs, a);
	assert_int_equal(stats(vs).free_blocks, 2);
	free_ok(vs, b);
	assert_int_equal(stats(vs).free_blocks, 1);
	free_ok(vs, c);
	assert_int_equal(stats(vs).free_blocks, 1);
	assert_int_equal(stats(vs).largest_free, 16 * Q);
	assert_int_equal(log.calls, 4);
	assert_int_equal(log.bytes, 6 * Q);
	va_destroy(vs);
}

static void test_full_fit_last_block(void **state)
{
	struct va_space *vs = make_exact(0, 16 * Q, NULL);
	uint64_t a, last;

	(void)state;
	for (unsigned i = 0; i < 15; i++)
		assert_int_equal(alloc_ok(vs, Q, 0), i * Q);
	last = alloc_ok(vs, Q, 0); /* the one remaining block, taken whole */
	assert_int_equal(last, 15 * Q);
	assert_int_equal(stats(vs).free_blocks, 0);
	assert_int_equal(stats(vs).largest_free, 0);
	assert_int_equal(va_alloc(vs, Q, 0, NULL, &a), VA_ENOSPC);
	CHECK(vs);
	free_ok(vs, 7 * Q);
	assert_int_equal(alloc_ok(vs, Q, 0), 7 * Q); /* a full fit in the middle */
	free_ok(vs, last);
	assert_int_equal(alloc_ok(vs, Q, 0), 15 * Q);
	assert_int_equal(stats(vs).fails, 1);
	va_destroy(vs);
}

/* ---- alignment -------------------------------------------------------------------------- */

static void test_alignment_half_space(void **state)
{
	uint64_t size = 256 * Q, half = size / 2, base = 64 * Q, a;
	struct va_space *vs = make_exact(base, size, NULL);

	(void)state;
	/* absolute alignment: the first multiple of half inside [base, base + size) */
	a = alloc_ok(vs, Q, half);
	assert_int_equal(a, half);
	a = alloc_ok(vs, Q, half);
	assert_int_equal(a, 2 * half);
	assert_int_equal(va_alloc(vs, Q, half, NULL, &a), VA_ENOSPC);
	CHECK(vs);
	free_ok(vs, half);
	free_ok(vs, 2 * half);
	/* a block of half the space aligned to half: exactly one place */
	a = alloc_ok(vs, half, half);
	assert_int_equal(a, half);
	assert_int_equal(va_alloc(vs, half, half, NULL, &a), VA_ENOSPC);
	CHECK(vs);
	/* the lower part still serves small aligned requests, lowest first */
	assert_int_equal(alloc_ok(vs, Q, 2 * Q), base);
	assert_int_equal(alloc_ok(vs, Q, 32 * Q), 96 * Q);
	/* alignment below the quantum is raised to it */
	assert_int_equal(alloc_ok(vs, 1, 16), base + Q);
	va_destroy(vs);
}

/* A smaller, luckily aligned hole below a big block must win (lowest address). */
static void test_alignment_lowest_hole(void **state)
{
	struct va_space *vs = make_exact(0, 64 * Q, NULL);
	uint64_t a;

	(void)state;
	for (unsigned i = 0; i < 20; i++)
		alloc_ok(vs, Q, 0);
	free_ok(vs, 8 * Q); /* hole [8Q, 10Q): 2 quanta, aligned to 8Q */
	free_ok(vs, 9 * Q);
	free_ok(vs, 2 * Q); /* hole [2Q, 3Q): too small */
	/* 2 quanta aligned to 8Q: the search length would be 9 quanta, the hole has 2 */
	a = alloc_ok(vs, 2 * Q, 8 * Q);
	assert_int_equal(a, 8 * Q);
	/* a misaligned hole of the right size is passed over for the next aligned spot */
	free_ok(vs, 11 * Q);
	free_ok(vs, 12 * Q);
	a = alloc_ok(vs, 2 * Q, 8 * Q);
	assert_int_equal(a, 24 * Q);
	va_destroy(vs);
}

/* ---- windows ---------------------------------------------------------------------------- */

static void test_windows(void **state)
{
	uint64_t base = 16 * Q, size = 64 * Q, end = base + size, a;
	struct va_space *vs = make_exact(base, size, NULL);

	(void)state;
	assert_int_equal(va_alloc_range(vs, Q, 0, base, base + Q, NULL, &a), 0);
	assert_int_equal(a, base);
	CHECK(vs);
	assert_int_equal(va_alloc_range(vs, Q, 0, end - Q, end, NULL, &a), 0);
	assert_int_equal(a, end - Q);
	CHECK(vs);
	/* both ends taken: windows there are full */
	assert_int_equal(va_alloc_range(vs, Q, 0, base, base + Q, NULL, &a), VA_ENOSPC);
	assert_int_equal(va_alloc_range(vs, Q, 0, end - Q, end, NULL, &a), VA_ENOSPC);
	/* a window smaller than the request */
	assert_int_equal(va_alloc_range(vs, 4 * Q, 0, base + 8 * Q, base + 11 * Q, NULL, &a),
			 VA_ENOSPC);
	/* an unaligned window start rounds up */
	assert_int_equal(va_alloc_range(vs, Q, 0, base + 8 * Q + 1, end, NULL, &a), 0);
	assert_int_equal(a, base + 9 * Q);
	CHECK(vs);
	/* window plus alignment */
	assert_int_equal(va_alloc_range(vs, Q, 8 * Q, base + Q, end, NULL, &a), 0);
	assert_int_equal(a, 24 * Q);
	CHECK(vs);
	/* windows outside the space, empty or inverted */
	assert_int_equal(va_alloc_range(vs, Q, 0, 0, base, NULL, &a), VA_ERANGE);
	assert_int_equal(va_alloc_range(vs, Q, 0, end, end + Q, NULL, &a), VA_ERANGE);
	assert_int_equal(va_alloc_range(vs, Q, 0, base + 4 * Q, base + 4 * Q, NULL, &a), VA_ERANGE);
	assert_int_equal(va_alloc_range(vs, Q, 0, base + 5 * Q, base + 4 * Q, NULL, &a), VA_ERANGE);
	/* a window overlapping the space is clipped to it */
	assert_int_equal(va_alloc_range(vs, Q, 0, 0, base + 2 * Q, NULL, &a), 0);
	assert_int_equal(a, base + Q);
	CHECK(vs);
	va_destroy(vs);
}

/* ---- exhaustion ------------------------------------------------------------------------- */

static void test_exhaustion_and_recovery(void **state)
{
	uint64_t n = 256, a, *addrs = calloc(n, sizeof(*addrs));
	struct va_config cfg = {.size = n * Q, .quantum = Q, .nodes = 3, .no_thread = true};
	struct va_space *vs = make_cfg(&cfg);
	unsigned got = 0;

	(void)state;
	assert_non_null(addrs);
	while (va_alloc(vs, Q, 0, NULL, &a) == 0) {
		assert_true(got < n);
		addrs[got++] = a;
	}
	CHECK(vs);
	assert_int_equal(got, n);
	assert_int_equal(stats(vs).busy_bytes, n * Q);
	for (unsigned i = 0; i < got; i++)
		assert_int_equal(va_free(vs, addrs[i], NULL), 0);
	CHECK(vs);
	/* everything is lazy or pooled; the whole space must come back in one piece */
	a = alloc_ok(vs, n * Q, 0);
	assert_int_equal(a, 0);
	assert_int_equal(stats(vs).lazy_bytes, 0);
	assert_int_equal(stats(vs).pooled_bytes, 0);
	free_ok(vs, a);
	va_drain(vs);
	CHECK(vs);
	assert_int_equal(stats(vs).free_bytes, n * Q);
	assert_int_equal(stats(vs).free_blocks, 1);
	va_destroy(vs);
	free(addrs);
}

/* ---- congruent groups ------------------------------------------------------------------- */

static void test_congruent(void **state)
{
	struct va_space *vs = make_exact(0, 64 * Q, NULL);
	uint64_t off[3] = {0, 4 * Q, 10 * Q}, sz[3] = {Q, 2 * Q, 2 * Q}, out[3], a;

	(void)state;
	/* highest base: the last area ends at the top of the space */
	assert_int_equal(va_alloc_congruent(vs, off, sz, 3, 0, NULL, out), 0);
	CHECK(vs);
	assert_int_equal(out[0], 52 * Q);
	assert_int_equal(out[1], 56 * Q);
	assert_int_equal(out[2], 62 * Q);
	assert_int_equal(stats(vs).busy_blocks, 3);
	assert_int_equal(stats(vs).allocs, 3);
	/* the gaps between the areas stay free and usable */
	assert_int_equal(va_alloc_range(vs, Q, 0, 53 * Q, 64 * Q, NULL, &a), 0);
	assert_int_equal(a, 53 * Q);
	CHECK(vs);
	/* with alignment and the top blocked: the next group goes below */
	assert_int_equal(va_alloc_congruent(vs, off, sz, 3, 8 * Q, NULL, out), 0);
	CHECK(vs);
	assert_int_equal(out[0], 40 * Q);
	assert_int_equal(out[2], 50 * Q);
	assert_int_equal(out[1], 44 * Q);
	/* free: [0, 40) [41, 44) [46, 50) [54, 56) [58, 62); busy 52, 53, 56-57, 62-63.
	 * Unaligned, the top candidate bases fail one area each until base 50 ... but area 0
	 * at 50 is busy now: area 0 must straddle nothing, so base drops to 38, where
	 * [38, 39) [42, 44) [48, 50) are all free */
	assert_int_equal(va_alloc_congruent(vs, off, sz, 3, 0, NULL, out), 0);
	CHECK(vs);
	assert_int_equal(out[0], 38 * Q);
	assert_int_equal(out[1], 42 * Q);
	assert_int_equal(out[2], 48 * Q);

	/* errors */
	assert_int_equal(va_alloc_congruent(vs, off, sz, 0, 0, NULL, out), VA_EINVAL);
	assert_int_equal(va_alloc_congruent(vs, NULL, sz, 3, 0, NULL, out), VA_EINVAL);
	assert_int_equal(va_alloc_congruent(vs, off, sz, 3, 0, NULL, NULL), VA_EINVAL);
	assert_int_equal(va_alloc_congruent(vs, off, sz, 3, 3 * Q, NULL, out), VA_EALIGN);
	{
		uint64_t bad_off[2] = {4 * Q, 0}, bad_sz[2] = {Q, Q};

		assert_int_equal(va_alloc_congruent(vs, bad_off, bad_sz, 2, 0, NULL, out),
				 VA_EINVAL);
		bad_off[0] = 0;
		bad_off[1] = Q / 2;
		assert_int_equal(va_alloc_congruent(vs, bad_off, bad_sz, 2, 0, NULL, out),
				 VA_EINVAL);
		bad_off[1] = 0;
		assert_int_equal(va_alloc_congruent(vs, bad_off, bad_sz, 2, 0, NULL, out),
				 VA_EINVAL); /* overlapping */
		bad_off[1] = Q;
		bad_sz[1] = 0;
		assert_int_equal(va_alloc_congruent(vs, bad_off, bad_sz, 2, 0, NULL, out),
				 VA_ESIZE);
		bad_sz[1] = 64 * Q;
		assert_int_equal(va_alloc_congruent(vs, bad_off, bad_sz, 2, 0, NULL, out),
				 VA_EOVERFLOW);
		bad_sz[1] = UINT64_MAX - Q + 1;
		assert_int_equal(va_alloc_congruent(vs, bad_off, bad_sz, 2, 0, NULL, out),
				 VA_EOVERFLOW);
		/* fits the space but not the free space: all or nothing */
		bad_sz[1] = 40 * Q;
		assert_int_equal(va_alloc_congruent(vs, bad_off, bad_sz, 2, 0, NULL, out),
				 VA_ENOSPC);
	}
	CHECK(vs);
	va_destroy(vs);
}

/* ---- error codes ------------------------------------------------------------------------ */

static void test_error_codes(void **state)
{
	struct va_config cfg = {.base = 64 * Q,
				.size = 64 * Q,
				.quantum = Q,
				.nodes = 2,
				.no_thread = true,
				.lazy_max = 1ull << 40};
	struct va_space *vs = make_cfg(&cfg);
	uint64_t a, b, base = 64 * Q, end = 128 * Q;
	struct va_area area;
	const char *seen[16];
	int codes[] = {VA_OK,	       VA_EINVAL, VA_ESIZE,    VA_EOVERFLOW,
		       VA_EALIGN,      VA_ERANGE, VA_ENOSPC,   VA_ENOTSTART,
		       VA_EDOUBLEFREE, VA_ENOMEM, VA_ECORRUPT, VA_ENOTFOUND};

	(void)state;
	assert_int_equal(va_alloc(vs, 0, 0, NULL, &a), VA_ESIZE);
	assert_int_equal(va_alloc(vs, 65 * Q, 0, NULL, &a), VA_EOVERFLOW);
	assert_int_equal(va_alloc(vs, UINT64_MAX, 0, NULL, &a), VA_EOVERFLOW);
	assert_int_equal(va_alloc(vs, Q, 3 * Q, NULL, &a), VA_EALIGN);
	assert_int_equal(va_alloc(vs, Q, 0, NULL, NULL), VA_EINVAL);
	assert_int_equal(va_alloc(NULL, Q, 0, NULL, &a), VA_EINVAL);
	assert_int_equal(va_alloc_range(vs, Q, 0, 0, Q, NULL, &a), VA_ERANGE);
	CHECK(vs);
	a = alloc_ok(vs, 4 * Q, 0);
	assert_int_equal(va_free(vs, base - 1, NULL), VA_ERANGE);
	assert_int_equal(va_free(vs, end, NULL), VA_ERANGE);
	assert_int_equal(va_free(vs, a + 1, NULL), VA_ENOTSTART);
	assert_int_equal(va_free(vs, a + 3 * Q, NULL), VA_ENOTSTART);
	assert_int_equal(va_free(vs, a + 4 * Q, NULL), VA_EDOUBLEFREE); /* never allocated */
	assert_int_equal(va_free(NULL, a, NULL), VA_EINVAL);
	CHECK(vs);
	free_ok(vs, a);
	assert_int_equal(stats(vs).lazy_bytes, 4 * Q);
	assert_int_equal(va_free(vs, a, NULL), VA_EDOUBLEFREE); /* lazy */
	assert_int_equal(va_free(vs, a + Q, NULL), VA_EDOUBLEFREE);
	va_drain(vs);
	CHECK(vs);
	assert_int_equal(va_free(vs, a, NULL), VA_EDOUBLEFREE); /* free tree */
	/* pooled: a small allocation fills the home pool with ready blocks */
	va_set_home_node(0);
	b = alloc_ok(vs, Q, 0);
	assert_true(stats(vs).pooled_blocks > 0);
	assert_int_equal(va_free(vs, b + Q, NULL), VA_EDOUBLEFREE);
	assert_int_equal(va_lookup(vs, base - 1, &area), VA_ERANGE);
	assert_int_equal(va_lookup(vs, b + Q, &area), VA_ENOTFOUND);
	assert_int_equal(va_lookup(vs, b, NULL), VA_EINVAL);
	assert_int_equal(va_set_owner(vs, end, NULL), VA_ERANGE);
	assert_int_equal(va_set_owner(vs, b + 1, NULL), VA_ENOTSTART);
	assert_int_equal(va_set_owner(vs, b + Q, NULL), VA_ENOTFOUND);
	assert_int_equal(va_walk(vs, NULL, NULL), VA_EINVAL);
	assert_int_equal(va_check(NULL, NULL, 0), VA_EINVAL);
	CHECK(vs);
	/* exhaust: ENOSPC only after everything lazy and pooled is counted as free */
	assert_int_equal(va_alloc(vs, 64 * Q, 0, NULL, &a), VA_ENOSPC);
	assert_int_equal(stats(vs).pooled_bytes, 0);
	CHECK(vs);

	/* every code has its own sentence */
	for (unsigned i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		seen[i] = va_strerror(codes[i]);
		assert_non_null(seen[i]);
		for (unsigned j = 0; j < i; j++)
			assert_string_not_equal(seen[i], seen[j]);
	}
	assert_non_null(va_strerror(12345));
	va_destroy(vs);
}

/* ---- lookup and owners ------------------------------------------------------------------- */

static void test_lookup_and_owner(void **state)
{
	struct va_config cfg = {.size = 256 * Q,
				.quantum = Q,
				.nodes = 4,
				.zone_size = 4 * Q,
				.no_thread = true,
				.no_pools = true};
	struct va_space *vs = make_cfg(&cfg);
	int tag1, tag2;
	void *owner = NULL;
	struct va_area area;
	uint64_t a, b;

	(void)state;
	assert_int_equal(va_alloc(vs, 2 * Q, 0, &tag1, &a), 0);
	/* 20 quanta span five zones, so four nodes: found from any of its addresses */
	assert_int_equal(va_alloc(vs, 20 * Q, 0, &tag2, &b), 0);
	CHECK(vs);
	assert_int_equal(va_lookup(vs, a, &area), 0);
	assert_int_equal(area.start, a);
	assert_int_equal(area.size, 2 * Q);
	assert_ptr_equal(area.owner, &tag1);
	assert_int_equal(area.node, (a / (4 * Q)) % 4);
	assert_int_equal(va_lookup(vs, a + 2 * Q - 1, &area), 0);
	assert_int_equal(area.start, a);
	for (uint64_t x = b; x < b + 20 * Q; x += Q / 2) {
		assert_int_equal(va_lookup(vs, x, &area), 0);
		assert_int_equal(area.start, b);
		assert_int_equal(area.size, 20 * Q);
		assert_ptr_equal(area.owner, &tag2);
		assert_int_equal(area.node, (b / (4 * Q)) % 4);
		if (x != b)
			assert_int_equal(va_free(vs, x, NULL), VA_ENOTSTART);
	}
	assert_int_equal(va_lookup(vs, b + 20 * Q, &area), VA_ENOTFOUND);
	/* owner tags */
	assert_int_equal(va_set_owner(vs, b, &tag1), 0);
	assert_int_equal(va_lookup(vs, b + 5 * Q, &area), 0);
	assert_ptr_equal(area.owner, &tag1);
	assert_int_equal(va_set_owner(vs, b + 5 * Q, &tag2), VA_ENOTSTART);
	assert_int_equal(va_free(vs, b, &owner), 0);
	CHECK(vs);
	assert_ptr_equal(owner, &tag1);
	assert_int_equal(va_lookup(vs, b, &area), VA_ENOTFOUND);
	assert_int_equal(va_set_owner(vs, b, &tag2), VA_ENOTFOUND);
	assert_int_equal(va_free(vs, a, &owner), 0);
	assert_ptr_equal(owner, &tag1);
	CHECK(vs);
	va_destroy(vs);
}

/* ---- walk -------------------------------------------------------------------------------- */

struct walk_sum {
	uint64_t bytes[4], blocks[4];
	uint64_t last_free_end;
	bool order_ok;
	unsigned stop_after;
	unsigned seen;
};

static int walk_cb(void *ctx, const struct va_block_info *b)
{
	struct walk_sum *w = ctx;

	w->bytes[b->kind] += b->size;
	w->blocks[b->kind]++;
	if (b->kind == VA_BLOCK_FREE) {
		if (b->start < w->last_free_end)
			w->order_ok = false;
		w->last_free_end = b->start + b->size;
	}
	if (++w->seen == w->stop_after)
		return 42;
	return 0;
}

static void test_walk_totals(void **state)
{
	struct va_config cfg = {
	    .size = 512 * Q, .quantum = Q, .nodes = 2, .no_thread = true, .lazy_max = 1ull << 40};
	struct va_space *vs = make_cfg(&cfg);
	struct walk_sum w = {.order_ok = true};
	uint64_t addrs[40];
	struct va_stats st;

	(void)state;
	va_set_home_node(1);
	for (unsigned i = 0; i < 40; i++)
		addrs[i] = alloc_ok(vs, (i % 5 + 1) * Q, 0);
	for (unsigned i = 0; i < 40; i += 3)
		free_ok(vs, addrs[i]);
	assert_int_equal(va_walk(vs, walk_cb, &w), 0);
	st = stats(vs);
	assert_true(w.order_ok);
	assert_int_equal(w.bytes[VA_BLOCK_BUSY], st.busy_bytes);
	assert_int_equal(w.bytes[VA_BLOCK_FREE], st.free_bytes);
	assert_int_equal(w.bytes[VA_BLOCK_LAZY], st.lazy_bytes);
	assert_int_equal(w.bytes[VA_BLOCK_POOLED], st.pooled_bytes);
	assert_int_equal(w.blocks[VA_BLOCK_BUSY], st.busy_blocks);
	assert_int_equal(w.blocks[VA_BLOCK_FREE], st.free_blocks);
	assert_int_equal(w.blocks[VA_BLOCK_LAZY], st.lazy_blocks);
	assert_int_equal(w.blocks[VA_BLOCK_POOLED], st.pooled_blocks);
	assert_int_equal(st.busy_bytes + st.free_bytes + st.lazy_bytes + st.pooled_bytes, 512 * Q);
	assert_true(st.lazy_blocks == 14);
	assert_true(st.pooled_blocks > 0);
	/* a non-zero return stops the walk and is returned */
	memset(&w, 0, sizeof(w));
	w.stop_after = 3;
	assert_int_equal(va_walk(vs, walk_cb, &w), 42);
	assert_int_equal(w.seen, 3);
	CHECK(vs);
	va_destroy(vs);
}

/* ---- release callbacks --------------------------------------------------------------------- */

static void test_release_eager_vs_lazy(void **state)
{
	struct rel_log log = {0};
	struct va_space *vs = make_exact(0, 256 * Q, &log);
	struct va_config cfg = {.size = 256 * Q,
				.quantum = Q,
				.nodes = 3,
				.no_pools = true,
				.no_thread = true,
				.lazy_max = 1ull << 40,
				.release = on_release,
				.release_ctx = &log};
	uint64_t a[100];

	(void)state;
	/* eager: one callback per free */
	for (unsigned i = 0; i < 100; i++)
		a[i] = alloc_ok(vs, Q, 0);
	for (unsigned i = 0; i < 100; i++)
		free_ok(vs, a[i]);
	assert_int_equal(log.calls, 100);
	assert_int_equal(log.bytes, 100 * Q);
	assert_int_equal(stats(vs).release_calls, 100);
	va_destroy(vs);

	/* lazy: 100 adjacent areas on several nodes, one callback covering all of them */
	memset(&log, 0, sizeof(log));
	vs = make_cfg(&cfg);
	for (unsigned i = 0; i < 100; i++) {
		a[i] = alloc_ok(vs, Q, 0);
		assert_int_equal(a[i], i * Q);
	}
	for (unsigned i = 0; i < 100; i++)
		free_ok(vs, a[(i * 37) % 100]); /* any order */
	assert_int_equal(log.calls, 0);
	assert_int_equal(stats(vs).lazy_bytes, 100 * Q);
	assert_int_equal(stats(vs).lazy_blocks, 100);
	va_drain(vs);
	CHECK(vs);
	assert_int_equal(log.calls, 1);
	assert_int_equal(log.last_start, 0);
	assert_int_equal(log.last_size, 100 * Q);
	assert_int_equal(stats(vs).release_calls, 1);
	assert_int_equal(stats(vs).released_bytes, 100 * Q);
	assert_int_equal(stats(vs).lazy_bytes, 0);
	assert_int_equal(stats(vs).free_blocks, 1);
	assert_int_equal(stats(vs).drains, 1);
	/* two separate runs: two callbacks */
	for (unsigned i = 0; i < 10; i++)
		a[i] = alloc_ok(vs, Q, 0);
	free_ok(vs, a[0]);
	free_ok(vs, a[1]);
	free_ok(vs, a[5]);
	va_drain(vs);
	CHECK(vs);
	assert_int_equal(log.calls, 3);
	assert_int_equal(log.bytes, 103 * Q);
	va_destroy(vs);
}

/* Pooled blocks were released before they were pooled; reuse never releases twice. */
static void test_release_with_pools(void **state)
{
	struct rel_log log = {0};
	struct va_config cfg = {.size = 1024 * Q,
				.quantum = Q,
				.nodes = 2,
				.no_thread = true,
				.lazy_max = 1ull << 40,
				.release = on_release,
				.release_ctx = &log};
	struct va_space *vs = make_cfg(&cfg);
	uint64_t a[32];

	(void)state;
	va_set_home_node(0);
	for (unsigned round = 0; round < 4; round++) {
		for (unsigned i = 0; i < 32; i++)
			a[i] = alloc_ok(vs, (i % 3 + 1) * Q, 0);
		for (unsigned i = 0; i < 32; i++)
			free_ok(vs, a[i]);
		va_drain(vs);
		CHECK(vs);
		assert_int_equal(stats(vs).pooled_bytes, 0);
		assert_int_equal(stats(vs).lazy_bytes, 0);
		assert_int_equal(stats(vs).free_bytes, 1024 * Q);
	}
	assert_int_equal(log.bytes, 4 * (32 / 3 * 6 + 1 + 2) * Q);
	assert_int_equal(stats(vs).released_bytes, log.bytes);
	assert_true(stats(vs).pool_hits > 0);
	va_destroy(vs);
}

/* ---- drain before failure ------------------------------------------------------------------- */

static void test_drain_before_fail(void **state)
{
	struct rel_log log = {0};
	bool pools[2] = {false, true};

	(void)state;
	for (unsigned p = 0; p < 2; p++) {
		struct va_config cfg = {.size = 128 * Q,
					.quantum = Q,
					.nodes = 2,
					.no_pools = !pools[p],
					.lazy_max = 1ull << 40,
					.release = on_release,
					.release_ctx = &log};
		struct va_space *vs = make_cfg(&cfg);
		uint64_t a[128], x;
		unsigned n = 0;

		memset(&log, 0, sizeof(log));
		while (n < 128 && va_alloc(vs, Q, 0, NULL, &a[n]) == 0)
			n++;
		CHECK(vs);
		assert_int_equal(n, 128);
		assert_int_equal(va_alloc(vs, Q, 0, NULL, &x), VA_ENOSPC);
		for (unsigned i = 0; i < n; i++)
			free_ok(vs, a[i]);
		assert_int_equal(stats(vs).busy_bytes, 0);
		/* nothing is free in the tree yet; the allocation drains and succeeds */
		x = alloc_ok(vs, 128 * Q, 0);
		assert_int_equal(x, 0);
		assert_int_equal(log.bytes, 128 * Q);
		assert_int_equal(log.calls, 1);
		free_ok(vs, x);
		va_drain(vs);
		CHECK(vs);
		assert_int_equal(stats(vs).fails, 1);
		va_destroy(vs);
	}
}

/* ---- thresholds ---------------------------------------------------------------------------- */

static void test_sync_drain_past_twice_lazy_max(void **state)
{
	struct rel_log log = {0};
	struct va_config cfg = {.size = 256 * Q,
				.quantum = Q,
				.nodes = 2,
				.no_pools = true,
				.no_thread = true,
				.lazy_max = 8 * Q,
				.release = on_release,
				.release_ctx = &log};
	struct va_space *vs = make_cfg(&cfg);
	uint64_t a[40];

	(void)state;
	for (unsigned i = 0; i < 40; i++)
		a[i] = alloc_ok(vs, Q, 0);
	/* Between lazy_max and 2 x lazy_max nothing drains without the thread. Lazy bytes
	 * reach the shared count in per-node batches (one quantum each here), so the freeing
	 * thread drains once the count passes 2 x lazy_max less one batch per node (14
	 * quanta): what the nodes hold uncounted cannot then carry lazy bytes past 16. */
	for (unsigned i = 0; i < 14; i++)
		free_ok(vs, a[i]);
	assert_int_equal(stats(vs).drains, 0);
	assert_int_equal(stats(vs).lazy_bytes, 14 * Q);
	free_ok(vs, a[14]);
	assert_int_equal(stats(vs).drains, 1);
	assert_int_equal(stats(vs).lazy_bytes, 0);
	assert_int_equal(log.calls, 1);
	assert_int_equal(log.bytes, 15 * Q);
	for (unsigned i = 15; i < 40; i++) {
		free_ok(vs, a[i]);
		assert_true(stats(vs).lazy_bytes <= 16 * Q);
	}
	assert_int_equal(stats(vs).drains, 2);
	va_destroy(vs);
}

static void test_background_thread(void **state)
{
	struct rel_log log = {0};
	struct va_config cfg = {.size = 256 * Q,
				.quantum = Q,
				.nodes = 2,
				.no_pools = true,
				.lazy_max = 8 * Q,
				.idle_drain_ms = 20,
				.no_idle_release = true, /* counts only what frees release */
				.release = on_release,
				.release_ctx = &log};
	struct va_space *vs = make_cfg(&cfg);
	uint64_t a[12];

	(void)state;
	for (unsigned i = 0; i < 12; i++)
		a[i] = alloc_ok(vs, Q, 0);
	/* past lazy_max: the background thread drains */
	for (unsigned i = 0; i < 10; i++)
		free_ok(vs, a[i]);
	WAIT_FOR(stats(vs).drains >= 1 && stats(vs).lazy_bytes == 0);
	CHECK(vs);
	/* below lazy_max: the idle timer drains the leftovers */
	free_ok(vs, a[10]);
	WAIT_FOR(stats(vs).lazy_bytes == 0);
	CHECK(vs);
	assert_int_equal(__atomic_load_n(&log.bytes, __ATOMIC_RELAXED), 11 * Q);
	/* destroy with lazy blocks outstanding releases nothing more */
	free_ok(vs, a[11]);
	va_destroy(vs);
}

/* A release that takes 20 us, like a punch in a large file. */
static void on_slow_release(void *ctx, uint64_t start, uint64_t size)
{
	struct timespec ts = {.tv_nsec = 20000};

	on_release(ctx, start, size);
	nanosleep(&ts, NULL);
}

/* Free every other one of n quantum blocks: n / 2 runs that do not coalesce. */
static void free_every_other(struct va_space *vs, const uint64_t *a, unsigned n)
{
	for (unsigned i = 0; i < n; i += 2)
		free_ok(vs, a[i]);
}

/* The background thread offers its CPU every 20 us of a pass (so a worker that wakes on
 * its CPU does not wait out the whole pass); a thread that drains for itself does not. */
static void test_background_drain_yields(void **state)
{
	enum { N = 400 };
	struct rel_log log = {0};
	struct va_config cfg = {.size = 1024 * Q,
				.quantum = Q,
				.nodes = 1,
				.no_pools = true,
				.lazy_max = 150 * Q,
				.idle_drain_ms = 20,
				.no_idle_release = true, /* counts only what frees release */
				.release = on_slow_release,
				.release_ctx = &log};
	uint64_t a[N];
	struct va_space *vs = make_cfg(&cfg);

	(void)state;
	for (unsigned i = 0; i < N; i++)
		a[i] = alloc_ok(vs, Q, 0);
	/* 200 separate runs of 20 us each: at least 4 ms of passes in the background */
	free_every_other(vs, a, N);
	WAIT_FOR(stats(vs).lazy_bytes == 0);
	CHECK(vs);
	assert_int_equal(stats(vs).release_calls, N / 2);
	assert_true(stats(vs).drain_yields >= 10);
	va_destroy(vs);

	/* no background thread: the same passes, run by the freeing thread, never yield */
	memset(&log, 0, sizeof(log));
	cfg.no_thread = true;
	vs = make_cfg(&cfg);
	for (unsigned i = 0; i < N; i++)
		a[i] = alloc_ok(vs, Q, 0);
	free_every_other(vs, a, N);
	va_drain(vs);
	CHECK(vs);
	assert_int_equal(stats(vs).lazy_bytes, 0);
	assert_int_equal(stats(vs).release_calls, N / 2);
	assert_int_equal(stats(vs).drain_yields, 0);
	va_destroy(vs);
}

/* Pools: small allocations are served from the home pool; pools decay on drains. */
static void test_pools(void **state)
{
	struct va_config cfg = {.size = 4096 * Q,
				.quantum = Q,
				.nodes = 2,
				.no_thread = true,
				.lazy_max = 1ull << 40,
				.pool_depth = 8};
	struct va_space *vs = make_cfg(&cfg);
	uint64_t a[40], before;
	struct va_stats st;

	(void)state;
	va_set_home_node(1);
	/* a pool miss carves one block for the caller and up to pool_depth for the pool */
	for (unsigned i = 0; i < 40; i++)
		a[i] = alloc_ok(vs, Q, 0);
	st = stats(vs);
	assert_true(st.pool_hits > 0);
	assert_int_equal(st.allocs, 40);
	assert_true(st.pooled_blocks > 0);
	assert_true(st.pooled_blocks <= 8);
	for (unsigned i = 0; i < 40; i++)
		free_ok(vs, a[i]);
	/* a partial drain (threshold path) keeps pools; a full drain empties them */
	before = stats(vs).pooled_blocks;
	assert_true(before > 0);
	va_drain(vs);
	CHECK(vs);
	assert_int_equal(stats(vs).pooled_blocks, 0);
	/* an aligned or windowed request never comes from a pool */
	before = stats(vs).pool_hits;
	alloc_ok(vs, Q, 2 * Q);
	assert_int_equal(stats(vs).pool_hits, before);
	va_destroy(vs);
}

/* ---- release callback re-entry ------------------------------------------------------------- */

struct reenter {
	struct va_space *vs;
	unsigned calls, failures;
	uint64_t lazy_seen;
};

static int count_lazy(void *ctx, const struct va_block_info *b)
{
	struct reenter *r = ctx;

	if (b->kind == VA_BLOCK_LAZY)
		r->lazy_seen += b->size;
	return 0;
}

/* The callback runs outside every allocator lock: it may check, walk, drain (a no-op from
 * inside a drain), look up and get stats without deadlocking; the range it releases is
 * still lazy. */
static void on_release_reenter(void *ctx, uint64_t start, uint64_t size)
{
	struct reenter *r = ctx;
	struct va_stats st;
	struct va_area area;
	char msg[256];

	r->calls++;
	if (va_check(r->vs, msg, sizeof(msg)))
		r->failures++;
	r->lazy_seen = 0;
	if (va_walk(r->vs, count_lazy, r) || r->lazy_seen < size)
		r->failures++;
	va_drain(r->vs);
	va_get_stats(r->vs, &st);
	if (st.lazy_bytes < size)
		r->failures++;
	if (va_lookup(r->vs, start, &area) != VA_ENOTFOUND)
		r->failures++;
}

static void test_release_reentry(void **state)
{
	(void)state;
	for (int eager = 0; eager < 2; eager++) {
		struct reenter r = {0};
		struct va_config cfg = {.size = 256 * Q,
					.quantum = Q,
					.nodes = 2,
					.no_pools = eager,
					.eager = eager,
					.no_thread = true,
					.lazy_max = 1ull << 40,
					.release = on_release_reenter,
					.release_ctx = &r};
		uint64_t a[8];

		r.vs = make_cfg(&cfg);
		for (unsigned i = 0; i < 8; i++)
			a[i] = alloc_ok(r.vs, (i % 3 + 1) * Q, 0);
		for (unsigned i = 0; i < 8; i += 2)
			free_ok(r.vs, a[i]);
		va_drain(r.vs);
		CHECK(r.vs);
		assert_int_equal(r.calls, eager ? 4 : stats(r.vs).release_calls);
		assert_true(r.calls > 0);
		assert_int_equal(r.failures, 0);
		assert_int_equal(stats(r.vs).lazy_bytes, 0);
		va_destroy(r.vs);
	}
}

/* A request no aligned address of the window can hold fails at once, without draining;
 * with base 0 any alignment fits at 0. */
static void test_impossible_alignment(void **state)
{
	struct va_config cfg = {.base = 1ull << 30,
				.size = 256 * Q,
				.quantum = Q,
				.nodes = 2,
				.no_thread = true,
				.lazy_max = 1ull << 40};
	struct va_space *vs = make_cfg(&cfg);
	uint64_t a;

	(void)state;
	a = alloc_ok(vs, Q, 0);
	free_ok(vs, a); /* something lazy that a drain would release */
	assert_int_equal(va_alloc(vs, Q, 1ull << 40, NULL, &a), VA_ENOSPC);
	assert_int_equal(va_alloc(vs, Q, 1ull << 63, NULL, &a), VA_ENOSPC);
	assert_int_equal(stats(vs).drains, 0);
	assert_int_equal(stats(vs).fails, 2);
	CHECK(vs);
	/* the base itself is aligned to 2^30 */
	assert_int_equal(alloc_ok(vs, Q, 1ull << 30), 1ull << 30);
	va_destroy(vs);

	vs = make_exact(0, 64 * Q, NULL);
	assert_int_equal(alloc_ok(vs, Q, 1ull << 63), 0);
	assert_int_equal(va_alloc(vs, Q, 1ull << 63, NULL, &a), VA_ENOSPC);
	CHECK(vs);
	va_destroy(vs);
}

/* Each partial drain moves the oldest quarter of every pool back to the tree; the freed
 * block itself goes to its home pool (its class is in demand). */
static void test_pool_decay(void **state)
{
	struct va_config cfg = {.size = 4096 * Q,
				.quantum = Q,
				.nodes = 1,
				.no_thread = true,
				.lazy_max = Q / 4,
				.pool_depth = 8};
	struct va_space *vs = make_cfg(&cfg);
	uint64_t a;

	(void)state;
	va_set_home_node(0);
	a = alloc_ok(vs, Q, 0); /* a pool miss: 1 block for us, 8 for the pool */
	assert_int_equal(stats(vs).pooled_blocks, 8);
	free_ok(vs, a); /* past 2 x lazy_max: drains here */
	assert_int_equal(stats(vs).drains, 1);
	assert_int_equal(stats(vs).lazy_bytes, 0);
	assert_int_equal(stats(vs).pooled_blocks, 8 - 2 + 1);
	assert_int_equal(stats(vs).released_bytes, Q);
	va_drain(vs);
	CHECK(vs);
	assert_int_equal(stats(vs).pooled_blocks, 0);
	assert_int_equal(stats(vs).free_blocks, 1);
	va_destroy(vs);
}

/* A class asked for since the last drain keeps its last 3 blocks through a partial drain (a
 * quarter rounded down decays); a class nobody asked for loses a quarter rounded up, so an
 * idle pool still empties. */
static void test_pool_decay_keeps_demanded(void **state)
{
	struct va_config cfg = {.size = 4096 * Q,
				.quantum = Q,
				.nodes = 1,
				.no_thread = true,
				.lazy_max = Q / 4,
				.pool_depth = 8};
	struct va_space *vs = make_cfg(&cfg);
	uint64_t a, b[5];

	(void)state;
	va_set_home_node(0);
	a = alloc_ok(vs, Q, 0); /* a pool miss: 1 block for us, 8 for the pool */
	for (int i = 0; i < 5; i++)
		b[i] = alloc_ok(vs, Q, 0); /* pool hits: 3 left, the class in demand */
	assert_int_equal(stats(vs).pooled_blocks, 3);
	free_ok(vs, b[0]); /* drains here: none of the 3 decays, the freed block joins them */
	assert_int_equal(stats(vs).drains, 1);
	assert_int_equal(stats(vs).pooled_blocks, 4);
	free_ok(vs, b[1]); /* no allocation since: one of 4 decays, the freed block goes too */
	assert_int_equal(stats(vs).drains, 2);
	assert_int_equal(stats(vs).pooled_blocks, 3);
	for (int i = 2; i < 5; i++) /* still no demand: each drain takes one of the last 3 */
		free_ok(vs, b[i]);
	assert_int_equal(stats(vs).drains, 5);
	assert_int_equal(stats(vs).pooled_blocks, 0);
	CHECK(vs);
	free_ok(vs, a);
	va_drain(vs);
	assert_int_equal(stats(vs).free_blocks, 1);
	CHECK(vs);
	va_destroy(vs);
}

/* ---- busy index: hinted inserts and finds, lookups across nodes ------------------------- */

/* The i-th slot (of n) visited by order kind: ascending, descending, outside-in zigzag,
 * a stride, middle-out, or a fixed shuffle (perm). */
static unsigned visit(unsigned kind, unsigned n, unsigned i, const unsigned *perm)
{
	switch (kind) {
	case 0:
		return i;
	case 1:
		return n - 1 - i;
	case 2:
		return i % 2 ? n - 1 - i / 2 : i / 2;
	case 3:
		return (i * 37) % n;
	case 4:
		return i % 2 ? n / 2 - 1 - i / 2 : n / 2 + i / 2;
	default:
		return perm[i];
	}
}

static void shuffle(unsigned *perm, unsigned n, uint64_t *rng)
{
	for (unsigned i = 0; i < n; i++)
		perm[i] = i;
	for (unsigned i = n - 1; i > 0; i--) {
		unsigned j;

		*rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
		j = (unsigned)((*rng >> 33) % (i + 1));
		unsigned t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
}

#define HINT_SLOTS 96
#define HINT_SLOT  (4 * Q)

/* Every quantum (and a byte inside it) of the space looked up against the slot model. */
static void hint_verify(struct va_space *vs, uint64_t base, const bool *busy, const uint64_t *size)
{
	for (uint64_t x = base; x < base + HINT_SLOTS * HINT_SLOT; x += Q / 2) {
		unsigned s = (unsigned)((x - base) / HINT_SLOT);
		uint64_t start = base + s * HINT_SLOT;
		struct va_area area;
		int rc = va_lookup(vs, x, &area);

		if (busy[s] && x < start + size[s]) {
			assert_int_equal(rc, 0);
			assert_int_equal(area.start, start);
			assert_int_equal(area.size, size[s]);
			if (x != start) {
				assert_int_equal(va_free(vs, x, NULL), VA_ENOTSTART);
				assert_int_equal(va_set_owner(vs, x, NULL), VA_ENOTSTART);
			}
		} else {
			assert_int_equal(rc, VA_ENOTFOUND);
			assert_int_equal(va_free(vs, x, NULL), VA_EDOUBLEFREE);
		}
	}
	CHECK(vs);
}

static void hint_insert(struct va_space *vs, uint64_t base, unsigned s, uint64_t size, bool *busy)
{
	uint64_t start = base + s * HINT_SLOT, a = 0;
	struct va_area area;

	assert_false(busy[s]);
	assert_int_equal(va_alloc_range(vs, size, 0, start, start + size, &busy[s], &a), 0);
	assert_int_equal(a, start);
	busy[s] = true;
	CHECK(vs);
	/* the new area is found by its start (the hint) and its neighbours still are */
	assert_int_equal(va_lookup(vs, start + size - 1, &area), 0);
	assert_int_equal(area.start, start);
	assert_ptr_equal(area.owner, &busy[s]);
	if (s && busy[s - 1])
		assert_int_equal(va_set_owner(vs, start - HINT_SLOT, &busy[s - 1]), 0);
	if (s + 1 < HINT_SLOTS && busy[s + 1])
		assert_int_equal(va_set_owner(vs, start + HINT_SLOT, &busy[s + 1]), 0);
}

static void hint_remove(struct va_space *vs, uint64_t base, unsigned s, bool *busy)
{
	uint64_t start = base + s * HINT_SLOT;
	void *owner = NULL;

	assert_true(busy[s]);
	assert_int_equal(va_free(vs, start, &owner), 0);
	assert_ptr_equal(owner, &busy[s]);
	busy[s] = false;
	CHECK(vs);
	assert_int_equal(va_free(vs, start, NULL), VA_EDOUBLEFREE);
	assert_int_equal(va_set_owner(vs, start, NULL), VA_ENOTFOUND);
	CHECK(vs);
}

/*
 * The busy tree links an insert next to the last inserted block (or the successor of the
 * last removed one) when that is its place, else descends. Insert and free areas in every
 * pair of orders (ascending, descending, zigzag, stride, middle-out, shuffled), touching or
 * with gaps, and a half free / refill in between: after every step va_check verifies order,
 * colours and the hint, and every address is looked up against a model.
 */
static void test_busy_hint_orders(void **state)
{
	const uint64_t base = 1ull << 32;
	uint64_t rng = 7, size[HINT_SLOTS];
	unsigned perm[HINT_SLOTS];
	bool busy[HINT_SLOTS] = {0};

	(void)state;
	for (unsigned touching = 0; touching < 2; touching++) {
		for (unsigned s = 0; s < HINT_SLOTS; s++)
			size[s] = touching ? HINT_SLOT : (1 + s % 3) * Q;
		for (unsigned ins = 0; ins < 6; ins++) {
			for (unsigned del = 0; del < 6; del++) {
				struct va_space *vs =
				    make_exact(base, HINT_SLOTS * HINT_SLOT, NULL);

				shuffle(perm, HINT_SLOTS, &rng);
				for (unsigned i = 0; i < HINT_SLOTS; i++)
					hint_insert(vs, base, visit(ins, HINT_SLOTS, i, perm),
						    size[visit(ins, HINT_SLOTS, i, perm)], busy);
				hint_verify(vs, base, busy, size);
				/* every other slot of the removal order goes, then comes back */
				for (unsigned i = 0; i < HINT_SLOTS; i += 2)
					hint_remove(vs, base, visit(del, HINT_SLOTS, i, perm),
						    busy);
				hint_verify(vs, base, busy, size);
				for (unsigned i = 0; i < HINT_SLOTS; i++) {
					unsigned s = visit(ins, HINT_SLOTS, i, perm);

					if (!busy[s])
						hint_insert(vs, base, s, size[s], busy);
				}
				for (unsigned i = 0; i < HINT_SLOTS; i++)
					hint_remove(vs, base, visit(del, HINT_SLOTS, i, perm),
						    busy);
				hint_verify(vs, base, busy, size);
				assert_int_equal(stats(vs).busy_blocks, 0);
				va_destroy(vs);
			}
		}
	}
}

/*
 * Areas of 1..11 quanta with gaps over 4-quantum zones of 3 nodes, so most span zones of
 * other nodes: va_lookup of every address must find the area containing it (kept in its
 * start's node) or report none, whatever nodes hold blocks below the address; a free of a
 * non-start is VA_ENOTSTART. Inserted and freed in shuffled orders.
 */
static void test_busy_lookup_across_zones(void **state)
{
	enum { MAXA = 64 };
	const uint64_t zone = 4 * Q, space = 400 * Q;
	struct va_config cfg = {.size = space,
				.quantum = Q,
				.nodes = 3,
				.zone_size = zone,
				.no_pools = true,
				.eager = true,
				.no_thread = true};
	uint64_t start[MAXA], size[MAXA], rng = 11, cur = 0;
	bool live[MAXA] = {0};
	unsigned perm[MAXA], n = 0;
	struct va_space *vs;

	(void)state;
	while (n < MAXA) {
		uint64_t gap, len;

		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		gap = (rng >> 33) % 3 * Q;
		len = (1 + (rng >> 40) % 11) * Q;
		if (cur + gap + len > space)
			break;
		start[n] = cur + gap;
		size[n++] = len;
		cur += gap + len;
	}
	for (int round = 0; round < 3; round++) {
		vs = make_cfg(&cfg);
		shuffle(perm, n, &rng);
		for (unsigned i = 0; i < n; i++) {
			unsigned k = perm[i];
			uint64_t a = 0;

			assert_int_equal(
			    va_alloc_range(vs, size[k], 0, start[k], start[k] + size[k], NULL, &a),
			    0);
			assert_int_equal(a, start[k]);
			live[k] = true;
			CHECK(vs);
		}
		for (int phase = 0; phase < 2; phase++) {
			unsigned k = 0;

			for (uint64_t x = 0; x < space; x += Q / 4) {
				struct va_area area;
				int rc = va_lookup(vs, x, &area);

				while (k < n && start[k] + size[k] <= x)
					k++;
				if (k < n && live[k] && x >= start[k]) {
					assert_int_equal(rc, 0);
					assert_int_equal(area.start, start[k]);
					assert_int_equal(area.size, size[k]);
					assert_int_equal(area.node, (start[k] / zone) % 3);
					if (x % Q == 0 && x != start[k])
						assert_int_equal(va_free(vs, x, NULL),
								 VA_ENOTSTART);
				} else {
					assert_int_equal(rc, VA_ENOTFOUND);
					if (x % Q == 0)
						assert_int_equal(va_free(vs, x, NULL),
								 VA_EDOUBLEFREE);
				}
			}
			CHECK(vs);
			/* then a shuffled half goes and the lookups run again */
			for (unsigned i = 0; phase == 0 && i < n; i += 2) {
				free_ok(vs, start[perm[i]]);
				live[perm[i]] = false;
			}
		}
		for (unsigned i = 1; i < n; i += 2) {
			free_ok(vs, start[perm[i]]);
			live[perm[i]] = false;
		}
		assert_int_equal(stats(vs).busy_blocks, 0);
		va_destroy(vs);
	}
}

/*
 * Pool allocations come at consecutive addresses, so inserts mostly take the hint; frees in
 * the same order, reversed, and interleaved between two threads' worth of homes leave the
 * hint on successors and stale neighbours. Every area is still found by its start.
 */
static void test_busy_hint_pools(void **state)
{
	enum { N = 300 };
	struct va_config cfg = {.size = 8192 * Q, .quantum = Q, .nodes = 2, .no_thread = true};
	struct va_space *vs = make_cfg(&cfg);
	uint64_t a[N];
	struct va_area area;

	(void)state;
	for (int round = 0; round < 4; round++) {
		for (unsigned i = 0; i < N; i++) {
			va_set_home_node(i / 16 % 2);
			a[i] = alloc_ok(vs, (1 + round % 2) * Q, 0);
		}
		for (unsigned i = 0; i < N; i++) {
			assert_int_equal(va_lookup(vs, a[i], &area), 0);
			assert_int_equal(area.start, a[i]);
		}
		for (unsigned i = 0; i < N; i++) {
			unsigned k = round == 0 ? i : round == 1 ? N - 1 - i : (i * 7) % N;

			free_ok(vs, a[k]);
			assert_int_equal(va_free(vs, a[k], NULL), VA_EDOUBLEFREE);
		}
		assert_int_equal(stats(vs).busy_blocks, 0);
	}
	va_set_home_node(0);
	va_destroy(vs);
}

/* Every byte and count accumulator saturates instead of wrapping (requirement: a sum past
 * 2^64, e.g. released bytes of a long-lived daemon or stats summed over nodes, reads as
 * UINT64_MAX, never as a small number). */
static void test_counters_saturate(void **state)
{
	_Atomic uint64_t a = UINT64_MAX - 3;
	uint64_t c = UINT64_MAX - 1;

	(void)state;
	assert_true(va_sat_add(1, 2) == 3);
	assert_true(va_sat_add(UINT64_MAX - 1, 1) == UINT64_MAX);
	assert_true(va_sat_add(UINT64_MAX - 1, 5) == UINT64_MAX);
	assert_true(va_sat_add(UINT64_MAX, UINT64_MAX) == UINT64_MAX);
	va_sat_inc(&c);
	assert_true(c == UINT64_MAX);
	va_sat_inc(&c);
	assert_true(c == UINT64_MAX);
	va_sat_add_atomic(&a, 2);
	assert_true(atomic_load(&a) == UINT64_MAX - 1);
	va_sat_add_atomic(&a, 1ull << 40);
	assert_true(atomic_load(&a) == UINT64_MAX);
	va_sat_add_atomic(&a, 1);
	assert_true(atomic_load(&a) == UINT64_MAX);
}

/* The highest free block lives outside the tree (top): every way into and out of that place
 * keeps exact lowest-address fit, the counts and the largest block right. */
static void test_top_block_transitions(void **state)
{
	struct va_space *vs = make_exact(0, 64 * Q, NULL);
	uint64_t a, b, c, d, e;
	struct va_stats st;

	(void)state;
	assert_int_equal(va_alloc(vs, 8 * Q, 0, NULL, &a), 0); /* carved from top's start */
	assert_int_equal(a, 0);
	assert_int_equal(va_alloc(vs, 8 * Q, 0, NULL, &b), 0);
	assert_int_equal(b, 8 * Q);
	assert_int_equal(va_free(vs, a, NULL), 0); /* [0, 8) into the tree, below top */
	CHECK(vs);
	assert_int_equal(va_alloc_range(vs, 8 * Q, 0, 56 * Q, 64 * Q, NULL, &c), 0); /* top's end */
	assert_int_equal(c, 56 * Q);
	assert_int_equal(va_alloc_range(vs, 4 * Q, 0, 30 * Q, 34 * Q, NULL, &d), 0); /* inside */
	assert_int_equal(d, 30 * Q);
	CHECK(vs);
	va_get_stats(vs, &st);
	assert_int_equal(st.free_blocks, 3); /* [0, 8) [16, 30) and top [34, 56) */
	assert_int_equal(st.largest_free, 22 * Q);
	/* 9 quanta: [0, 8) is too small, [16, 30) holds them */
	assert_int_equal(va_alloc(vs, 9 * Q, 0, NULL, &e), 0);
	assert_int_equal(e, 16 * Q); /* the tree's block, below top, wins */
	assert_int_equal(va_free(vs, e, NULL), 0);
	/* all of top: the tree's highest block, [16, 30), becomes top */
	assert_int_equal(va_alloc(vs, 22 * Q, 0, NULL, &e), 0);
	assert_int_equal(e, 34 * Q);
	CHECK(vs);
	va_get_stats(vs, &st);
	assert_int_equal(st.free_blocks, 2);
	assert_int_equal(st.largest_free, 14 * Q);
	assert_int_equal(va_free(vs, d, NULL), 0); /* just above top: top grows up */
	assert_int_equal(va_free(vs, c, NULL), 0); /* a gap above top: it becomes top */
	CHECK(vs);
	va_get_stats(vs, &st);
	assert_int_equal(st.free_blocks, 3);	   /* [0, 8) [16, 34) and top [56, 64) */
	assert_int_equal(va_free(vs, e, NULL), 0); /* closes [34, 56): three blocks join */
	CHECK(vs);
	va_get_stats(vs, &st);
	assert_int_equal(st.free_blocks, 2);
	assert_int_equal(st.largest_free, 48 * Q);
	assert_int_equal(va_free(vs, b, NULL), 0); /* [8, 16) joins [0, 8) and top */
	CHECK(vs);
	va_get_stats(vs, &st);
	assert_int_equal(st.free_blocks, 1);
	assert_int_equal(st.largest_free, 64 * Q);
	assert_int_equal(va_free(vs, b, NULL), VA_EDOUBLEFREE);
	CHECK(vs);
	va_destroy(vs);
}

/* Exact mode, the same aligned request again and again among frees at, below and above its
 * fits and small areas that leave misaligned holes: every result is the lowest fit a bitmap
 * of the space says. */
static void test_repeated_aligned_lowest_fit(void **state)
{
	enum { QN = 512, SMALL = 48 };
	struct va_space *vs = make_exact(0, QN * Q, NULL);
	uint8_t busy[QN] = {0};
	uint64_t mine[64], small[SMALL];
	unsigned n_mine = 0, n_small = 0, rng = 7;

	(void)state;
	for (unsigned step = 0; step < 4000; step++) {
		rng = rng * 1103515245u + 12345u;
		unsigned pick = (rng >> 16) % 8;

		if (pick < 4) { /* the repeated request: 5 quanta aligned to 8 */
			uint64_t a, expect = UINT64_MAX;

			for (uint64_t c = 0; c + 5 <= QN && expect == UINT64_MAX; c += 8) {
				unsigned k = 0;

				while (k < 5 && !busy[c + k])
					k++;
				if (k == 5)
					expect = c * Q;
			}
			int rc = va_alloc(vs, 5 * Q, 8 * Q, NULL, &a);
			if (expect == UINT64_MAX) {
				assert_int_equal(rc, VA_ENOSPC);
				continue;
			}
			assert_int_equal(rc, 0);
			if (a != expect)
				fail_msg("step %u: got quantum %llu, the lowest fit is %llu", step,
					 (unsigned long long)(a / Q),
					 (unsigned long long)(expect / Q));
			memset(&busy[a / Q], 1, 5);
			if (n_mine < 64) {
				mine[n_mine++] = a;
			} else {
				assert_int_equal(va_free(vs, a, NULL), 0);
				memset(&busy[a / Q], 0, 5);
			}
		} else if (pick < 6 && n_mine) { /* free one of them: a fit at or below the last */
			unsigned i = (rng >> 8) % n_mine;

			assert_int_equal(va_free(vs, mine[i], NULL), 0);
			memset(&busy[mine[i] / Q], 0, 5);
			mine[i] = mine[--n_mine];
		} else if (pick < 7 && n_small < SMALL) { /* small areas make misaligned holes */
			uint64_t a, sz = 1 + (rng >> 20) % 3;

			if (va_alloc(vs, sz * Q, 0, NULL, &a) == 0) {
				memset(&busy[a / Q], 1, sz);
				small[n_small++] = a | sz;
			}
		} else if (n_small) {
			unsigned i = (rng >> 8) % n_small;
			uint64_t a = small[i] & ~(Q - 1), sz = small[i] & (Q - 1);

			assert_int_equal(va_free(vs, a, NULL), 0);
			memset(&busy[a / Q], 0, sz);
			small[i] = small[--n_small];
		}
		if (step % 64 == 0)
			CHECK(vs);
	}
	CHECK(vs);
	va_destroy(vs);
}

/* Busy blocks on the nodes' pending lists (not settled into a busy tree). */
static uint64_t pending_blocks(const struct va_space *vs)
{
	uint64_t n = 0;

	for (unsigned k = 0; k < vs->nodes; k++)
		n += vs->node[k].pend_len;
	return n;
}

/*
 * Thousands of busy blocks stay on the pending lists, with no bound: lookups by start find
 * them through the hashes without settling, an interior lookup settles the nodes it asks, and
 * batch frees in shuffled order across nodes (whose loop prefetches blocks ahead) free each
 * one once, stop at an interior address with VA_ENOTSTART and at a freed one with
 * VA_EDOUBLEFREE, reporting how many went before.
 */
static void test_long_pending_list(void **state)
{
	enum { N = 5000 };
	struct va_config cfg = {.base = 1ull << 32,
				.size = 4ull * N * 4 * Q,
				.quantum = Q,
				.nodes = 3,
				.zone_size = 4 * Q,
				.no_thread = true};
	struct va_space *vs = make_cfg(&cfg);
	static uint64_t sizes[N], addrs[N], perm_addrs[N];
	unsigned perm[N];
	uint64_t rng = 11;
	struct va_area area;
	size_t done = 0;

	(void)state;
	for (unsigned i = 0; i < N; i++)
		sizes[i] = (1 + i % 4) * Q;
	for (unsigned i = 0; i < N; i += 100)
		assert_int_equal(va_alloc_batch(vs, 100, sizes + i, 0, NULL, addrs + i, NULL), 0);
	assert_int_equal(pending_blocks(vs), N);
	for (unsigned i = 0; i < N; i++) {
		assert_int_equal(va_lookup(vs, addrs[i], &area), 0);
		assert_int_equal(area.start, addrs[i]);
		assert_int_equal(area.size, sizes[i]);
	}
	assert_int_equal(pending_blocks(vs), N); /* by start: no settle */
	assert_int_equal(va_lookup(vs, addrs[N - 1] + Q / 2, &area), 0);
	assert_int_equal(area.start, addrs[N - 1]);
	/* inside an area: the nodes it asked settled (the first one holds it) */
	assert_true(pending_blocks(vs) < N);
	CHECK(vs);
	assert_int_equal(pending_blocks(vs), 0); /* the checker settles every node */

	shuffle(perm, N, &rng);
	for (unsigned i = 0; i < N; i++)
		perm_addrs[i] = addrs[perm[i]];
	/* an interior address at 1000: the 1000 before it are freed */
	perm_addrs[1000] += Q / 2;
	assert_int_equal(va_free_batch(vs, N, perm_addrs, NULL, &done), VA_ENOTSTART);
	assert_int_equal(done, 1000);
	perm_addrs[1000] -= Q / 2;
	/* one of those again at 2000: 1000 more are freed first */
	perm_addrs[2000] = perm_addrs[5];
	assert_int_equal(va_free_batch(vs, N - 1000, perm_addrs + 1000, NULL, &done),
			 VA_EDOUBLEFREE);
	assert_int_equal(done, 1000);
	perm_addrs[2000] = addrs[perm[2000]];
	assert_int_equal(va_free_batch(vs, N - 2000, perm_addrs + 2000, NULL, &done), 0);
	assert_int_equal(done, N - 2000);
	assert_int_equal(stats(vs).busy_blocks, 0);
	CHECK(vs);
	va_destroy(vs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_long_pending_list),
	    cmocka_unit_test(test_repeated_aligned_lowest_fit),
	    cmocka_unit_test(test_top_block_transitions),
	    cmocka_unit_test(test_create_errors),
	    cmocka_unit_test(test_basic_and_fit_types),
	    cmocka_unit_test(test_full_fit_last_block),
	    cmocka_unit_test(test_alignment_half_space),
	    cmocka_unit_test(test_alignment_lowest_hole),
	    cmocka_unit_test(test_windows),
	    cmocka_unit_test(test_exhaustion_and_recovery),
	    cmocka_unit_test(test_congruent),
	    cmocka_unit_test(test_error_codes),
	    cmocka_unit_test(test_lookup_and_owner),
	    cmocka_unit_test(test_walk_totals),
	    cmocka_unit_test(test_release_eager_vs_lazy),
	    cmocka_unit_test(test_release_with_pools),
	    cmocka_unit_test(test_drain_before_fail),
	    cmocka_unit_test(test_sync_drain_past_twice_lazy_max),
	    cmocka_unit_test(test_background_thread),
	    cmocka_unit_test(test_background_drain_yields),
	    cmocka_unit_test(test_pools),
	    cmocka_unit_test(test_release_reentry),
	    cmocka_unit_test(test_impossible_alignment),
	    cmocka_unit_test(test_pool_decay),
	    cmocka_unit_test(test_pool_decay_keeps_demanded),
	    cmocka_unit_test(test_busy_hint_orders),
	    cmocka_unit_test(test_busy_lookup_across_zones),
	    cmocka_unit_test(test_busy_hint_pools),
	    cmocka_unit_test(test_counters_saturate),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
