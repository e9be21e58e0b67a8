/*
 * test_va_model.c - randomized differential test of libvaspace against a simple
 * reference model (va_refmodel.h), with va_check after every step.
 *
 * Groups (one cmocka test each, several fixed seeds per group):
 *   exact_*   nodes = 1, no pools, eager, no thread: every address must equal the model's
 *             lowest fit (congruent: highest base); ENOSPC exactly when the model has no fit.
 *   lazy_*    several nodes, pools, small lazy_max, with and without the background thread:
 *             results must be free in the model, aligned, inside the window; failure only
 *             when the model (all non-busy space free) has no fit; stats agree.
 *   every group also checks release accounting: a freed quantum is released exactly once
 *             before it is handed out again, never while busy, and free/pooled blocks hold
 *             only released quanta.
 *   destroy_outstanding  va_destroy with busy, lazy and pooled blocks: no leak, no release
 *             after it returns.
 *   release_reentry  the release callback calls back into its own space and into another.
 * Environment: VAD_TEST_MODE=asan|tsan scales the operation count down; VA_TEST_FILTER selects
 * groups (cmocka pattern); VA_MODEL_TRACE=1 prints every operation.
 * A failure prints the group, seed and step; groups without the background thread are
 * deterministic, so re-running reproduces it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "vaspace.h"
#include "va_refmodel.h"

struct mode {
	const char *name;
	bool exact;
	uint64_t base, quantum;
	uint32_t nq; /* space size in quanta */
	unsigned nodes;
	uint64_t zone_q, lazy_max_q; /* 0 = library default */
	unsigned pool_max_quanta, pool_depth, drain_chunk, idle_drain_ms;
	bool no_pools, eager, no_thread;
	bool pool_heavy; /* mostly 1..4-quantum requests, unaligned, unwindowed: the pool path */
	unsigned ops;	 /* per seed, normal build */
	unsigned nseeds;
	uint64_t seeds[4];
};

struct run {
	const struct mode *mode;
	uint64_t seed, rng;
	unsigned step;
	char op[448]; /* the operation under test, for failure messages */
	struct va_space *vs;
	struct refmodel m;
	uint64_t allocs, frees; /* successful areas allocated / freed */
	uint64_t nospc;		/* ENOSPC results */
	uint64_t failed_calls;	/* every failed alloc or free call */
	uint64_t freed_bytes;	/* bytes of all successful frees */
	uint64_t last_drains;
	uintptr_t next_tag;
	uint64_t recent_freed[16];
	unsigned nrecent;
	bool trace;
	atomic_uint callbacks; /* release callbacks seen (some look at the space from inside) */
};

static void run_fail(struct run *r, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void run_fail(struct run *r, int line, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fail_msg("group %s seed %llu step %u (test line %d)\n  op: %s\n  %s", r->mode->name,
		 (unsigned long long)r->seed, r->step, line, r->op, msg);
}

#define CHECK(r, cond, ...)                                                                        \
	do {                                                                                       \
		if (!(cond))                                                                       \
			run_fail((r), __LINE__, __VA_ARGS__);                                      \
	} while (0)

#define ULL(x) ((unsigned long long)(x))

static uint64_t rnd(struct run *r)
{
	/* splitmix64: tiny, good enough, reproducible everywhere */
	uint64_t z = (r->rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t rnd_below(struct run *r, uint64_t n)
{
	return n ? rnd(r) % n : 0;
}

static unsigned log2u64(uint64_t x)
{
	return 63 - (unsigned)__builtin_clzll(x);
}

static const char *kind_name(enum va_block_kind k)
{
	switch (k) {
	case VA_BLOCK_BUSY:
		return "busy";
	case VA_BLOCK_FREE:
		return "free";
	case VA_BLOCK_LAZY:
		return "lazy";
	case VA_BLOCK_POOLED:
		return "pooled";
	}
	return "?";
}

struct released_range {
	uint64_t start, end, covered;
	int bad_kind; /* -1, or the kind of a block overlapping the range that is not lazy */
};

static int walk_released_range(void *ctx, const struct va_block_info *b)
{
	struct released_range *rr = ctx;
	uint64_t lo = b->start > rr->start ? b->start : rr->start;
	uint64_t hi = b->start + b->size < rr->end ? b->start + b->size : rr->end;

	if (lo < hi) {
		rr->covered += hi - lo;
		if (b->kind != VA_BLOCK_LAZY)
			rr->bad_kind = (int)b->kind;
	}
	return 0;
}

static void on_release(void *ctx, uint64_t start, uint64_t size)
{
	struct run *r = ctx;
	struct released_range rr = {start, start + size, 0, -1};

	rm_rel_released(&r->m, start, size);
	/*
	 * Every 4th call, look from inside the callback (allowed: it runs outside the allocator
	 * locks): the run being released must still be lazy, neither pooled nor free, or a
	 * concurrent allocation could get it before it is released.
	 */
	if (atomic_fetch_add(&r->callbacks, 1) % 4)
		return;
	va_walk(r->vs, walk_released_range, &rr);
	if (rr.bad_kind >= 0 || rr.covered != size) {
		pthread_mutex_lock(&r->m.rel_lock);
		rm_rel_fail(
		    &r->m,
		    "inside the release callback for [0x%llx, +0x%llx) va_walk shows it as "
		    "%s (0x%llx bytes of it seen); it must be lazy until the callback returns",
		    ULL(start), ULL(size), rr.bad_kind >= 0 ? kind_name(rr.bad_kind) : "lazy",
		    ULL(rr.covered));
		pthread_mutex_unlock(&r->m.rel_lock);
	}
}

static uint64_t space_end(const struct run *r)
{
	return r->m.base + r->m.size;
}

static uint64_t zone_bytes(const struct run *r)
{
	return (r->mode->zone_q ? r->mode->zone_q : 64) * r->m.quantum;
}

static void *new_tag(struct run *r)
{
	if (rnd_below(r, 20) == 0)
		return NULL;
	return (void *)(++r->next_tag * 16);
}

/* ---- checks ----------------------------------------------------------------------------- */

static void check_rel_errors(struct run *r)
{
	uint64_t errs;
	char msg[256];

	pthread_mutex_lock(&r->m.rel_lock);
	errs = r->m.rel_errors;
	memcpy(msg, r->m.rel_error, sizeof(msg));
	pthread_mutex_unlock(&r->m.rel_lock);
	CHECK(r, errs == 0, "release accounting: %s (%llu violations)", msg, ULL(errs));
}

static int cmp_range(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Release callbacks seen during the last call: without the background thread, the ranges of
 * one drain must be coalesced (no overlap, no two adjacent). */
static void check_release_log(struct run *r)
{
	uint64_t(*log)[2];
	size_t n = rm_rel_log_take(&r->m, &log);

	if (r->mode->no_thread && n > 1) {
		qsort(log, n, sizeof(*log), cmp_range);
		for (size_t i = 1; i < n; i++) {
			uint64_t prev_end = log[i - 1][0] + log[i - 1][1];

			if (log[i][0] <= prev_end) {
				uint64_t a0 = log[i - 1][0], a1 = log[i - 1][1];
				uint64_t b0 = log[i][0], b1 = log[i][1];

				free(log);
				CHECK(r, false,
				      "one call released [0x%llx, +0x%llx) and [0x%llx, +0x%llx): "
				      "%s runs must be coalesced into one callback",
				      ULL(a0), ULL(a1), ULL(b0), ULL(b1),
				      b0 < a0 + a1 ? "overlapping" : "adjacent");
			}
		}
	}
	free(log);
}

static void check_stats(struct run *r, bool after_drain)
{
	const struct mode *md = r->mode;
	struct refmodel *m = &r->m;
	uint64_t q = m->quantum, busy = m->busy_q * q, gaps, largest_q;
	uint64_t rel_bytes, rel_calls, pending_q;
	struct va_stats st;

	va_get_stats(r->vs, &st);
	pthread_mutex_lock(&m->rel_lock);
	rel_bytes = m->released_bytes;
	rel_calls = m->release_calls;
	pending_q = m->pending_q;
	pthread_mutex_unlock(&m->rel_lock);

	CHECK(r, st.size == m->size && st.quantum == q && st.nodes == md->nodes,
	      "stats size/quantum/nodes 0x%llx/0x%llx/%u, expected 0x%llx/0x%llx/%u", ULL(st.size),
	      ULL(st.quantum), st.nodes, ULL(m->size), ULL(q), md->nodes);
	CHECK(r, st.busy_bytes == busy, "stats busy_bytes 0x%llx, model 0x%llx", ULL(st.busy_bytes),
	      ULL(busy));
	CHECK(r, st.busy_blocks == m->nareas, "stats busy_blocks %llu, model %u",
	      ULL(st.busy_blocks), m->nareas);
	CHECK(r, st.allocs == r->allocs, "stats allocs %llu, expected %llu", ULL(st.allocs),
	      ULL(r->allocs));
	CHECK(r, st.frees == r->frees, "stats frees %llu, expected %llu", ULL(st.frees),
	      ULL(r->frees));
	CHECK(r, st.fails >= r->nospc && st.fails <= r->failed_calls,
	      "stats fails %llu, expected between %llu ENOSPC results and %llu failed calls",
	      ULL(st.fails), ULL(r->nospc), ULL(r->failed_calls));
	CHECK(r, st.drains >= r->last_drains, "stats drains went back from %llu to %llu",
	      ULL(r->last_drains), ULL(st.drains));
	r->last_drains = st.drains;
	if (md->no_pools)
		CHECK(r, st.pool_hits == 0 && st.pooled_bytes == 0 && st.pooled_blocks == 0,
		      "pools disabled but pool_hits %llu pooled_bytes 0x%llx pooled_blocks %llu",
		      ULL(st.pool_hits), ULL(st.pooled_bytes), ULL(st.pooled_blocks));
	if (md->eager) {
		CHECK(r, st.lazy_bytes == 0 && st.lazy_blocks == 0,
		      "eager mode but lazy_bytes 0x%llx lazy_blocks %llu", ULL(st.lazy_bytes),
		      ULL(st.lazy_blocks));
		CHECK(
		    r, pending_q == 0 && rel_bytes == r->freed_bytes,
		    "eager mode: %llu bytes freed, %llu released by callback, %llu quanta pending",
		    ULL(r->freed_bytes), ULL(rel_bytes), ULL(pending_q));
	}
	if (md->no_thread || after_drain) {
		CHECK(r, st.busy_bytes + st.free_bytes + st.lazy_bytes + st.pooled_bytes == m->size,
		      "busy 0x%llx + free 0x%llx + lazy 0x%llx + pooled 0x%llx != size 0x%llx",
		      ULL(st.busy_bytes), ULL(st.free_bytes), ULL(st.lazy_bytes),
		      ULL(st.pooled_bytes), ULL(m->size));
		CHECK(r, st.released_bytes == rel_bytes && st.release_calls == rel_calls,
		      "stats released_bytes 0x%llx release_calls %llu, callback saw 0x%llx in %llu "
		      "calls",
		      ULL(st.released_bytes), ULL(st.release_calls), ULL(rel_bytes),
		      ULL(rel_calls));
	}
	if (md->no_thread && !md->eager)
		CHECK(r, st.lazy_bytes == pending_q * q,
		      "stats lazy_bytes 0x%llx but 0x%llx bytes were freed and not yet released",
		      ULL(st.lazy_bytes), ULL(pending_q * q));
	if (md->exact || after_drain) {
		rm_gap_stats(m, &gaps, &largest_q);
		CHECK(r, st.lazy_bytes == 0 && st.pooled_bytes == 0,
		      "lazy_bytes 0x%llx pooled_bytes 0x%llx, expected none", ULL(st.lazy_bytes),
		      ULL(st.pooled_bytes));
		CHECK(r, st.free_bytes == m->size - busy, "free_bytes 0x%llx, model 0x%llx",
		      ULL(st.free_bytes), ULL(m->size - busy));
		CHECK(r, st.free_blocks == gaps && st.largest_free == largest_q * q,
		      "free_blocks %llu largest_free 0x%llx, model %llu runs, largest 0x%llx",
		      ULL(st.free_blocks), ULL(st.largest_free), ULL(gaps), ULL(largest_q * q));
	} else if (md->no_thread) {
		rm_gap_stats(m, &gaps, &largest_q);
		CHECK(r, st.largest_free <= largest_q * q,
		      "largest_free 0x%llx exceeds the largest non-busy run 0x%llx",
		      ULL(st.largest_free), ULL(largest_q * q));
	}
	if (after_drain) {
		CHECK(r, pending_q == 0,
		      "after va_drain %llu quanta were freed but never passed to the release "
		      "callback",
		      ULL(pending_q));
		CHECK(r, rel_bytes == r->freed_bytes,
		      "after va_drain the callback released 0x%llx bytes, 0x%llx were freed",
		      ULL(rel_bytes), ULL(r->freed_bytes));
	}
}

static void check_state(struct run *r)
{
	char msg[256] = "";
	int rc = va_check(r->vs, msg, sizeof(msg));

	CHECK(r, rc == 0, "va_check returned %d: %s", rc, msg);
	check_rel_errors(r);
	check_release_log(r);
	check_stats(r, false);
}

struct walk_buf {
	struct va_block_info *b;
	size_t n, cap;
	bool oom;
};

static int walk_collect(void *ctx, const struct va_block_info *bi)
{
	struct walk_buf *w = ctx;

	if (w->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 256;
		void *p = realloc(w->b, cap * sizeof(*w->b));

		if (!p) {
			w->oom = true;
			return 1;
		}
		w->b = p;
		w->cap = cap;
	}
	w->b[w->n++] = *bi;
	return 0;
}

static int walk_stop_at_first(void *ctx, const struct va_block_info *bi)
{
	(*(unsigned *)ctx)++;
	return 7;
}

static int cmp_block(const void *a, const void *b)
{
	const struct va_block_info *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Walk the space and compare every block with the model. */
static void check_walk(struct run *r)
{
	const struct mode *md = r->mode;
	struct refmodel *m = &r->m;
	uint64_t q = m->quantum, prev_free = 0, expect_start;
	uint64_t kind_bytes[4] = {0}, kind_blocks[4] = {0};
	unsigned pool_max = md->pool_max_quanta ? md->pool_max_quanta : 256, calls = 0;
	struct walk_buf w = {0};
	struct va_stats st;
	bool have_free = false;
	int rc;

	snprintf(r->op, sizeof(r->op), "va_walk");
	rc = va_walk(r->vs, walk_stop_at_first, &calls);
	CHECK(r, rc == 7 && calls == 1,
	      "va_walk with a callback returning 7: returned %d after %u calls", rc, calls);

	va_get_stats(r->vs, &st);
	rc = va_walk(r->vs, walk_collect, &w);
	if (w.oom)
		free(w.b);
	CHECK(r, !w.oom, "out of memory collecting the walk");
	CHECK(r, rc == 0, "va_walk returned %d", rc);

	for (size_t i = 0; i < w.n; i++) {
		struct va_block_info *b = &w.b[i];
		unsigned k = (unsigned)b->kind;
		char desc[160];

		snprintf(desc, sizeof(desc), "walk block %s [0x%llx, +0x%llx) node %u",
			 k < 4 ? kind_name(b->kind) : "bad-kind", ULL(b->start), ULL(b->size),
			 b->node);
		CHECK(r, k < 4, "%s: bad kind %u", desc, k);
		CHECK(r,
		      b->size && rm_in_space(m, b->start) && b->size <= space_end(r) - b->start &&
			  (b->start - m->base) % q == 0 && b->size % q == 0,
		      "%s: not a quantum-aligned range inside the space", desc);
		if (b->kind == VA_BLOCK_FREE) {
			CHECK(r, b->node == 0, "%s: free blocks report node 0", desc);
			CHECK(r, !have_free || b->start > prev_free,
			      "%s: free blocks not walked in address order", desc);
			have_free = true;
			prev_free = b->start;
		} else {
			CHECK(r, b->node < md->nodes, "%s: node out of range", desc);
		}
		if (md->exact)
			CHECK(r, b->kind == VA_BLOCK_BUSY || b->kind == VA_BLOCK_FREE,
			      "%s: exact mode has no lazy or pooled blocks", desc);
		if (b->kind == VA_BLOCK_POOLED)
			CHECK(r, b->size <= (uint64_t)pool_max * q,
			      "%s: pooled block larger than pool_max_quanta %u", desc, pool_max);
		if (b->kind == VA_BLOCK_BUSY) {
			uint32_t s = 0, len = 0;
			bool found = rm_find(m, b->start, &s, &len);

			CHECK(r, found && rm_addr(m, s) == b->start && (uint64_t)len * q == b->size,
			      "%s: the model has no busy area [0x%llx, +0x%llx)", desc,
			      ULL(b->start), ULL(b->size));
			CHECK(r, m->owner_at[s] == b->owner, "%s: owner %p, model %p", desc,
			      b->owner, m->owner_at[s]);
			if (m->base == 0)
				CHECK(
				    r, b->node == (b->start / zone_bytes(r)) % md->nodes,
				    "%s: busy areas belong to node (start / zone) %% nodes = %llu",
				    desc, ULL((b->start / zone_bytes(r)) % md->nodes));
		} else {
			/* release state of the quanta of a non-busy block */
			uint32_t q0 = rm_qi(m, b->start), n = (uint32_t)(b->size / q);

			pthread_mutex_lock(&m->rel_lock);
			for (uint32_t j = q0; j < q0 + n; j++) {
				uint8_t s = m->rel[j];
				bool ok =
				    b->kind == VA_BLOCK_LAZY
					? (s == RM_PENDING || (!md->no_thread && s == RM_READY))
					: s == RM_READY;

				if (!ok) {
					pthread_mutex_unlock(&m->rel_lock);
					CHECK(r, false, "%s: quantum 0x%llx is %s in the model",
					      desc, ULL(rm_addr(m, j)),
					      s == RM_BUSY	? "busy"
					      : s == RM_PENDING ? "freed but not yet released"
								: "already released");
				}
			}
			pthread_mutex_unlock(&m->rel_lock);
		}
		kind_bytes[k] += b->size;
		kind_blocks[k]++;
	}
	CHECK(r, kind_blocks[VA_BLOCK_BUSY] == m->nareas, "walk shows %llu busy blocks, model %u",
	      ULL(kind_blocks[VA_BLOCK_BUSY]), m->nareas);

	/* the blocks tile the space exactly; free blocks never touch */
	qsort(w.b, w.n, sizeof(*w.b), cmp_block);
	expect_start = m->base;
	for (size_t i = 0; i < w.n; i++) {
		CHECK(r, w.b[i].start == expect_start,
		      "walk: %s block at 0x%llx, expected the next block at 0x%llx (%s)",
		      kind_name(w.b[i].kind), ULL(w.b[i].start), ULL(expect_start),
		      w.b[i].start < expect_start ? "overlap" : "hole");
		CHECK(r, i == 0 || w.b[i].kind != VA_BLOCK_FREE || w.b[i - 1].kind != VA_BLOCK_FREE,
		      "walk: adjacent free blocks at 0x%llx and 0x%llx", ULL(w.b[i - 1].start),
		      ULL(w.b[i].start));
		expect_start += w.b[i].size;
	}
	CHECK(r, expect_start == space_end(r), "walk covers up to 0x%llx, space ends at 0x%llx",
	      ULL(expect_start), ULL(space_end(r)));
	free(w.b);

	if (md->no_thread) {
		CHECK(
		    r,
		    kind_bytes[VA_BLOCK_FREE] == st.free_bytes &&
			kind_bytes[VA_BLOCK_LAZY] == st.lazy_bytes &&
			kind_bytes[VA_BLOCK_POOLED] == st.pooled_bytes,
		    "walk bytes free/lazy/pooled 0x%llx/0x%llx/0x%llx, stats 0x%llx/0x%llx/0x%llx",
		    ULL(kind_bytes[VA_BLOCK_FREE]), ULL(kind_bytes[VA_BLOCK_LAZY]),
		    ULL(kind_bytes[VA_BLOCK_POOLED]), ULL(st.free_bytes), ULL(st.lazy_bytes),
		    ULL(st.pooled_bytes));
		CHECK(r,
		      kind_blocks[VA_BLOCK_FREE] == st.free_blocks &&
			  kind_blocks[VA_BLOCK_LAZY] == st.lazy_blocks &&
			  kind_blocks[VA_BLOCK_POOLED] == st.pooled_blocks,
		      "walk blocks free/lazy/pooled %llu/%llu/%llu, stats %llu/%llu/%llu",
		      ULL(kind_blocks[VA_BLOCK_FREE]), ULL(kind_blocks[VA_BLOCK_LAZY]),
		      ULL(kind_blocks[VA_BLOCK_POOLED]), ULL(st.free_blocks), ULL(st.lazy_blocks),
		      ULL(st.pooled_blocks));
	}
}

/* ---- operations --------------------------------------------------------------------------- */

static uint64_t gen_size(struct run *r)
{
	uint64_t nq = r->m.nq, q = r->m.quantum, k, x = rnd_below(r, 100), size;

	if (r->mode->pool_heavy && x < 95)
		return (x < 80 ? 1 + rnd_below(r, 4) : 5 + rnd_below(r, 12)) * q;
	if (x < 55)
		k = 1 + rnd_below(r, 8);
	else if (x < 80)
		k = 9 + rnd_below(r, 56);
	else if (x < 93)
		k = 65 + rnd_below(r, 448);
	else if (x < 99)
		k = 513 + rnd_below(r, nq / 4);
	else
		k = nq / 4 + rnd_below(r, nq - nq / 4 + 1);
	if (k > nq)
		k = nq;
	size = k * q;
	if (rnd_below(r, 4) == 0)
		size -= rnd_below(r, q); /* still rounds up to k quanta */
	return size;
}

static uint64_t gen_align(struct run *r)
{
	uint64_t q = r->m.quantum, x = rnd_below(r, 100);
	unsigned lq = log2u64(r->m.nq);

	if (x < 55 || (r->mode->pool_heavy && x < 90))
		return 0;
	if (x < 62)
		return 1ULL << rnd_below(r, log2u64(q) + 1); /* raised to the quantum */
	if (x < 72)
		return q;
	if (x < 95)
		return q << (1 + rnd_below(r, 6));
	if (x < 99)
		return q << (7 + rnd_below(r, lq > 9 ? lq - 9
						     : 1)); /* at most a quarter of the space */
	/* beyond the space, up to 2^63: only an aligned space start (or none) can fit */
	{
		unsigned lo = log2u64(r->m.size) + 1;

		return 1ULL << (lo + rnd_below(r, 64 - lo));
	}
}

static uint64_t round_q(const struct run *r, uint64_t size)
{
	return (size + r->m.quantum - 1) / r->m.quantum * r->m.quantum;
}

/* A [vstart, vend) window inside the space, sometimes not quantum-aligned, sometimes tight. */
static void gen_window(struct run *r, uint64_t rsize, uint64_t *vstart, uint64_t *vend)
{
	uint64_t q = r->m.quantum, end = space_end(r), x = rnd_below(r, 10);
	uint64_t s = r->m.base + rnd_below(r, r->m.nq) * q, e;

	if (rnd_below(r, 4) == 0)
		s += rnd_below(r, q);
	if (x == 0) {
		s = r->m.base;
		e = end;
	} else if (x < 4) {
		e = s + rsize + rnd_below(r, 4 * q); /* tight: a few quanta of slack at most */
	} else if (x < 7) {
		e = s + 1 + rnd_below(r, end - s);
	} else {
		e = end;
	}
	if (e > end)
		e = end;
	if (rnd_below(r, 4) == 0 && e - s > 1)
		e -= rnd_below(r, e - s - 1 < q ? e - s - 1 : q);
	*vstart = s;
	*vend = e;
}

/* Describe the first busy area overlapping [addr, addr + size) for a failure message. */
static void describe_overlap(struct run *r, uint64_t addr, uint64_t size, char *buf, size_t len)
{
	uint32_t q0 = rm_qi(&r->m, addr), n = (uint32_t)(size / r->m.quantum);

	snprintf(buf, len, "nothing");
	for (uint32_t i = q0; i < q0 + n; i++) {
		uint32_t a = r->m.area_of[i];

		if (a) {
			snprintf(buf, len, "model busy area [0x%llx, +0x%llx)",
				 ULL(rm_addr(&r->m, a - 1)),
				 ULL(r->m.len_at[a - 1] * r->m.quantum));
			return;
		}
	}
}

/* Common validation of one area the allocator handed out; inserts it into the model. */
static void accept_area(struct run *r, uint64_t addr, uint64_t rsize, uint64_t align,
			uint64_t vstart, uint64_t vend, void *owner)
{
	struct refmodel *m = &r->m;
	char what[128];

	CHECK(r, addr % align == 0, "returned 0x%llx, not aligned to 0x%llx", ULL(addr),
	      ULL(align));
	CHECK(r, addr >= vstart && addr <= vend && vend - addr >= rsize,
	      "returned [0x%llx, +0x%llx), outside the window [0x%llx, 0x%llx)", ULL(addr),
	      ULL(rsize), ULL(vstart), ULL(vend));
	CHECK(r, rm_in_space(m, addr) && rsize <= space_end(r) - addr,
	      "returned [0x%llx, +0x%llx), outside the space", ULL(addr), ULL(rsize));
	if (!rm_range_free(m, rm_qi(m, addr), (uint32_t)(rsize / m->quantum))) {
		describe_overlap(r, addr, rsize, what, sizeof(what));
		CHECK(r, false, "returned [0x%llx, +0x%llx), which overlaps %s", ULL(addr),
		      ULL(rsize), what);
	}
	if (!rm_rel_take(m, rm_qi(m, addr), (uint32_t)(rsize / m->quantum)))
		check_rel_errors(r);
	rm_insert(m, addr, (uint32_t)(rsize / m->quantum), owner);
	r->allocs++;
}

static void op_alloc(struct run *r, bool ranged)
{
	struct refmodel *m = &r->m;
	uint64_t size = gen_size(r), align = gen_align(r), rsize = round_q(r, size);
	uint64_t ralign = align < m->quantum ? m->quantum : align;
	uint64_t vstart = m->base, vend = space_end(r), addr = 0, expect = 0;
	void *owner = new_tag(r);
	bool fit;
	int rc;

	if (ranged)
		gen_window(r, rsize, &vstart, &vend);
	snprintf(r->op, sizeof(r->op), "%s(size=0x%llx, align=0x%llx, window=[0x%llx, 0x%llx))",
		 ranged ? "va_alloc_range" : "va_alloc", ULL(size), ULL(align), ULL(vstart),
		 ULL(vend));
	if (r->trace)
		printf("%u: %s\n", r->step, r->op);
	fit = rm_lowest_fit(m, rsize, ralign, vstart, vend, &expect);
	if (ranged)
		rc = va_alloc_range(r->vs, size, align, vstart, vend, owner, &addr);
	else
		rc = va_alloc(r->vs, size, align, owner, &addr);
	if (rc) {
		r->failed_calls++;
		/* an alignment larger than the space may be refused as "exceeds the space" */
		if (rc == VA_EOVERFLOW && ralign > m->size)
			return;
		CHECK(r, rc == VA_ENOSPC, "returned %d (%s), expected 0 or VA_ENOSPC", rc,
		      va_strerror(rc));
		r->nospc++;
		CHECK(r, !fit, "failed with VA_ENOSPC but [0x%llx, +0x%llx) is free in the model",
		      ULL(expect), ULL(rsize));
		return;
	}
	if (r->mode->exact)
		CHECK(r, fit && addr == expect,
		      "returned 0x%llx; the lowest fitting address is %s0x%llx", ULL(addr),
		      fit ? "" : "none, not even ", ULL(expect));
	accept_area(r, addr, rsize, ralign, vstart, vend, owner);
}

static void note_recent_free(struct run *r, uint64_t addr)
{
	r->recent_freed[r->nrecent++ % 16] = addr;
}

static void free_area(struct run *r, uint32_t q0)
{
	struct refmodel *m = &r->m;
	uint32_t len = m->len_at[q0];
	uint64_t addr = rm_addr(m, q0);
	void *owner = m->owner_at[q0], *got = (void *)1;
	bool want_owner = rnd_below(r, 4) != 0;
	int rc;

	snprintf(r->op, sizeof(r->op), "va_free(0x%llx) of [0x%llx, +0x%llx)", ULL(addr), ULL(addr),
		 ULL((uint64_t)len * m->quantum));
	if (r->trace)
		printf("%u: %s\n", r->step, r->op);
	rm_rel_pending(m, q0, len);
	rc = va_free(r->vs, addr, want_owner ? &got : NULL);
	if (rc)
		rm_rel_unpending(m, q0, len);
	CHECK(r, rc == 0, "returned %d (%s) freeing a busy area", rc, va_strerror(rc));
	if (want_owner)
		CHECK(r, got == owner, "owner_out %p, expected %p", got, owner);
	if (r->mode->eager) {
		uint64_t(*log)[2];
		size_t n = rm_rel_log_take(m, &log);
		bool exact_release =
		    n == 1 && log[0][0] == addr && log[0][1] == (uint64_t)len * m->quantum;
		uint64_t first[2] = {n ? log[0][0] : 0, n ? log[0][1] : 0};

		free(log);
		CHECK(r, exact_release,
		      "eager mode: expected one release callback for exactly the area, got %zu "
		      "(first [0x%llx, +0x%llx))",
		      n, ULL(first[0]), ULL(first[1]));
	}
	rm_remove(m, q0);
	r->frees++;
	r->freed_bytes += (uint64_t)len * m->quantum;
	note_recent_free(r, addr);
}

static void op_free(struct run *r)
{
	free_area(r, r->m.starts[rnd_below(r, r->m.nareas)]);
}

/* Expected va_free result for an address, from the model. */
static int expected_free_rc(struct run *r, uint64_t addr)
{
	uint32_t s, len;

	if (!rm_in_space(&r->m, addr))
		return VA_ERANGE;
	if (rm_find(&r->m, addr, &s, &len))
		return rm_addr(&r->m, s) == addr ? VA_OK : VA_ENOTSTART;
	return VA_EDOUBLEFREE;
}

/* Largest number of areas one batch operation of the test asks for. */
#define BATCH_MAX 24

/*
 * va_alloc_batch of up to BATCH_MAX areas, mostly pool sizes. Issued only when the model has
 * a free run far larger than the whole batch, so it must succeed in every mode (the
 * all-or-nothing failure path is tested in test_va_batch.c); in exact mode area i must be
 * the lowest fit once areas 0..i-1 are in place, as n calls of va_alloc would give.
 */
static void op_alloc_batch(struct run *r)
{
	struct refmodel *m = &r->m;
	uint64_t sizes[BATCH_MAX], rsizes[BATCH_MAX], expect[BATCH_MAX], addrs[BATCH_MAX];
	void *owners[BATCH_MAX];
	uint64_t align = rnd_below(r, 4) ? 0 : m->quantum << rnd_below(r, 3);
	uint64_t ralign = align < m->quantum ? m->quantum : align, need = 0, where;
	size_t n = 1 + rnd_below(r, BATCH_MAX), failed = SIZE_MAX;
	bool with_owners = rnd_below(r, 4) != 0;
	int rc;

	for (size_t i = 0; i < n; i++) {
		sizes[i] = rnd_below(r, 4) ? (1 + rnd_below(r, 4)) * m->quantum - rnd_below(r, 2)
					   : gen_size(r);
		rsizes[i] = round_q(r, sizes[i]);
		owners[i] = new_tag(r);
		need += rsizes[i] + ralign + zone_bytes(r);
	}
	if (!rm_lowest_fit(m, 2 * need, m->quantum, m->base, space_end(r), &where)) {
		op_alloc(r, false); /* too full for a batch that cannot fail */
		return;
	}
	snprintf(r->op, sizeof(r->op), "va_alloc_batch(n=%zu, first size=0x%llx, align=0x%llx)", n,
		 ULL(sizes[0]), ULL(align));
	if (r->trace)
		printf("%u: %s\n", r->step, r->op);
	if (r->mode->exact) {
		/* the sequential lowest fits, found with temporary areas in the model */
		for (size_t i = 0; i < n; i++) {
			CHECK(
			    r,
			    rm_lowest_fit(m, rsizes[i], ralign, m->base, space_end(r), &expect[i]),
			    "model: no fit for area %zu", i);
			rm_insert(m, expect[i], (uint32_t)(rsizes[i] / m->quantum), NULL);
		}
		for (size_t i = 0; i < n; i++)
			rm_remove(m, rm_qi(m, expect[i]));
	}
	rc = va_alloc_batch(r->vs, n, sizes, align, with_owners ? owners : NULL, addrs, &failed);
	CHECK(r, rc == 0, "returned %d (%s) at area %zu with a free run of 0x%llx bytes for 0x%llx",
	      rc, va_strerror(rc), failed, ULL(2 * need), ULL(need));
	for (size_t i = 0; i < n; i++) {
		if (r->mode->exact)
			CHECK(r, addrs[i] == expect[i],
			      "area %zu at 0x%llx; n calls of va_alloc would give 0x%llx", i,
			      ULL(addrs[i]), ULL(expect[i]));
		accept_area(r, addrs[i], rsizes[i], ralign, m->base, space_end(r),
			    with_owners ? owners[i] : NULL);
	}
}

/*
 * va_free_batch of distinct busy areas in random order (so runs change node), sometimes
 * with an invalid address at a random position: the areas before it are freed, it returns
 * what va_free would, the rest stay busy.
 */
static void op_free_batch(struct run *r)
{
	struct refmodel *m = &r->m;
	uint64_t addrs[BATCH_MAX + 1]; /* + 1: an invalid address after the areas */
	void *owners[BATCH_MAX + 1], *expect_owner[BATCH_MAX + 1];
	uint32_t q0[BATCH_MAX + 1];
	size_t n = 0, want = 1 + rnd_below(r, BATCH_MAX), bad_at = SIZE_MAX, done = SIZE_MAX;
	bool with_owners = rnd_below(r, 2) != 0;
	int expect = VA_OK, rc;

	for (size_t tries = 0; n < want && tries < 4 * BATCH_MAX && m->nareas; tries++) {
		uint32_t s = m->starts[rnd_below(r, m->nareas)];
		bool dup = false;

		for (size_t i = 0; i < n; i++)
			dup |= q0[i] == s;
		if (dup)
			continue;
		q0[n] = s;
		addrs[n] = rm_addr(m, s);
		expect_owner[n] = m->owner_at[s];
		n++;
	}
	if (rnd_below(r, 8) == 0) {
		/* an address inside an area (not its start), outside the space, or free */
		uint64_t bad = rnd_below(r, 2) ? space_end(r) + rnd_below(r, 1 << 20)
					       : m->base + rnd_below(r, m->size);

		uint32_t s0, len0;
		bool in_batch = false;

		/* not inside an area of this batch: freeing that first would change the answer */
		if (rm_find(m, bad, &s0, &len0))
			for (size_t i = 0; i < n; i++)
				in_batch |= q0[i] == s0;
		expect = in_batch ? VA_OK : expected_free_rc(r, bad);
		if (expect != VA_OK) {
			bad_at = rnd_below(r, n + 1);
			if (bad_at < n) {
				q0[bad_at] = UINT32_MAX;
				addrs[bad_at] = bad;
			} else {
				addrs[n++] = bad;
			}
		} else {
			expect = VA_OK;
		}
	}
	if (!n)
		return;
	snprintf(r->op, sizeof(r->op), "va_free_batch(n=%zu, first 0x%llx, bad at %zd)", n,
		 ULL(addrs[0]), bad_at == SIZE_MAX ? (ssize_t)-1 : (ssize_t)bad_at);
	if (r->trace)
		printf("%u: %s\n", r->step, r->op);
	size_t upto = bad_at == SIZE_MAX ? n : bad_at;
	for (size_t i = 0; i < upto; i++)
		rm_rel_pending(m, q0[i], m->len_at[q0[i]]);
	rc = va_free_batch(r->vs, n, addrs, with_owners ? owners : NULL, &done);
	if (rc)
		r->failed_calls++;
	CHECK(r, rc == expect && done == upto,
	      "returned %d (%s) after %zu areas; expected %d (%s) after %zu", rc, va_strerror(rc),
	      done, expect, va_strerror(expect), upto);
	for (size_t i = 0; i < upto; i++) {
		uint64_t len = m->len_at[q0[i]];

		if (with_owners)
			CHECK(r, owners[i] == expect_owner[i],
			      "owner of area %zu is %p, expected %p", i, owners[i],
			      expect_owner[i]);
		rm_remove(m, q0[i]);
		r->frees++;
		r->freed_bytes += len * m->quantum;
		note_recent_free(r, addrs[i]);
	}
	if (r->mode->eager) {
		/* eager: one release callback per area freed, for exactly that area */
		uint64_t(*log)[2];
		size_t nlog = rm_rel_log_take(m, &log), matched = 0;

		for (size_t i = 0; i < upto; i++)
			for (size_t j = 0; j < nlog; j++)
				if (log[j][0] == addrs[i]) {
					matched++;
					break;
				}
		free(log);
		CHECK(r, nlog == upto && matched == upto,
		      "eager mode: %zu release callbacks for %zu areas freed (%zu matched)", nlog,
		      upto, matched);
	}
}

static void op_bad_free(struct run *r)
{
	struct refmodel *m = &r->m;
	uint64_t addr, q = m->quantum;
	int expect, rc;

	switch (rnd_below(r, 4)) {
	case 0: {
		uint64_t outside[4] = {space_end(r), space_end(r) + rnd_below(r, 1ULL << 40),
				       UINT64_MAX,
				       m->base ? m->base - 1 - rnd_below(r, m->base) : 0};
		addr = outside[rnd_below(r, m->base ? 4 : 3)];
		break;
	}
	case 1: {
		uint32_t s;

		if (!m->nareas)
			return;
		s = m->starts[rnd_below(r, m->nareas)];
		if (m->len_at[s] > 1 && rnd_below(r, 2))
			addr = rm_addr(m, s) + (1 + rnd_below(r, m->len_at[s] - 1)) * q;
		else
			addr = rm_addr(m, s) + 1 + rnd_below(r, q - 1);
		break;
	}
	case 2:
		if (!r->nrecent)
			return;
		addr = r->recent_freed[rnd_below(r, r->nrecent < 16 ? r->nrecent : 16)];
		break;
	default:
		addr = m->base + rnd_below(r, m->size);
		break;
	}
	expect = expected_free_rc(r, addr);
	if (expect == VA_OK) { /* happened to hit an area start: a valid free */
		free_area(r, rm_qi(m, addr));
		return;
	}
	snprintf(r->op, sizeof(r->op), "invalid va_free(0x%llx)", ULL(addr));
	if (r->trace)
		printf("%u: %s\n", r->step, r->op);
	rc = va_free(r->vs, addr, NULL);
	r->failed_calls++;
	CHECK(r, rc == expect, "returned %d (%s), expected %d (%s)", rc, va_strerror(rc), expect,
	      va_strerror(expect));
}

static void op_bad_alloc(struct run *r)
{
	struct refmodel *m = &r->m;
	uint64_t q = m->quantum, end = space_end(r), addr = 0x5a5a, size = q, align = 0;
	uint64_t vstart = 0, vend = 0;
	bool ranged = false, null_out = false;
	int expect = 0, alt1 = 1, alt2 = 1, rc; /* alt*: other accepted codes (1 = none) */

	switch (rnd_below(r, 11)) {
	case 0:
		size = 0;
		expect = VA_ESIZE;
		break;
	case 1:
		size = UINT64_MAX;
		expect = VA_EOVERFLOW;
		break;
	case 2:
		size = UINT64_MAX - q + 2; /* rounding up to the quantum overflows */
		expect = VA_EOVERFLOW;
		break;
	case 3:
		size = m->size + 1 + rnd_below(r, 4 * m->size);
		expect = VA_EOVERFLOW;
		break;
	case 4:
		align = q * (3 + 2 * rnd_below(r, 8));
		expect = VA_EALIGN;
		break;
	case 5:
		align = q + 1 + rnd_below(r, q - 1);
		expect = VA_EALIGN;
		break;
	case 6:
		null_out = true;
		expect = VA_EINVAL;
		break;
	case 7:
		ranged = true;
		vstart = end + rnd_below(r, 1ULL << 30);
		vend = vstart + q + rnd_below(r, 1ULL << 30);
		expect = VA_ERANGE;
		break;
	case 8:
		ranged = true;
		if (m->base == 0)
			return;
		vstart = rnd_below(r, m->base);
		vend = vstart + 1 + rnd_below(r, m->base - vstart);
		expect = VA_ERANGE;
		break;
	case 9:
		/* malformed window inside the space: vend <= vstart; the header does not say
		 * which code, only that it fails */
		ranged = true;
		vstart = m->base + q + rnd_below(r, m->size - q);
		vend = vstart - rnd_below(r, q + 1);
		expect = VA_ERANGE;
		alt1 = VA_EINVAL;
		alt2 = VA_ENOSPC;
		break;
	default:
		/* a valid window smaller than the request */
		ranged = true;
		size = 2 * q + rnd_below(r, 8 * q);
		vstart = m->base + rnd_below(r, m->size - size);
		vend = vstart + size - 1 - rnd_below(r, q);
		expect = VA_ENOSPC;
		break;
	}
	snprintf(r->op, sizeof(r->op),
		 "invalid %s(size=0x%llx, align=0x%llx, window=[0x%llx, 0x%llx), out=%s)",
		 ranged ? "va_alloc_range" : "va_alloc", ULL(size), ULL(align), ULL(vstart),
		 ULL(vend), null_out ? "NULL" : "&addr");
	if (r->trace)
		printf("%u: %s\n", r->step, r->op);
	if (ranged)
		rc = va_alloc_range(r->vs, size, align, vstart, vend, NULL, &addr);
	else
		rc = va_alloc(r->vs, size, align, NULL, null_out ? NULL : &addr);
	CHECK(r, rc != 0, "succeeded with 0x%llx, expected %d (%s)", ULL(addr), expect,
	      va_strerror(expect));
	r->failed_calls++;
	if (rc == VA_ENOSPC)
		r->nospc++;
	CHECK(r, rc == expect || rc == alt1 || rc == alt2, "returned %d (%s), expected %d (%s)", rc,
	      va_strerror(rc), expect, va_strerror(expect));
}

static void op_lookup(struct run *r)
{
	struct refmodel *m = &r->m;
	uint64_t addr, x = rnd_below(r, 10);
	struct va_area a;
	uint32_t s, len;
	int rc;

	if (x < 5 && m->nareas) {
		s = m->starts[rnd_below(r, m->nareas)];
		addr = rm_addr(m, s) + rnd_below(r, (uint64_t)m->len_at[s] * m->quantum);
	} else if (x < 9) {
		addr = m->base + rnd_below(r, m->size);
	} else {
		addr = rnd_below(r, 2) || !m->base ? space_end(r) + rnd_below(r, 1ULL << 32)
						   : rnd_below(r, m->base);
	}
	snprintf(r->op, sizeof(r->op), "va_lookup(0x%llx)", ULL(addr));
	memset(&a, 0xa5, sizeof(a));
	rc = va_lookup(r->vs, addr, &a);
	if (!rm_in_space(m, addr)) {
		CHECK(r, rc == VA_ERANGE, "returned %d (%s), expected VA_ERANGE", rc,
		      va_strerror(rc));
		return;
	}
	if (!rm_find(m, addr, &s, &len)) {
		CHECK(r, rc == VA_ENOTFOUND,
		      "returned %d (%s) [0x%llx, +0x%llx), expected VA_ENOTFOUND", rc,
		      va_strerror(rc), ULL(a.start), ULL(a.size));
		return;
	}
	CHECK(r, rc == 0, "returned %d (%s), expected model area [0x%llx, +0x%llx)", rc,
	      va_strerror(rc), ULL(rm_addr(m, s)), ULL((uint64_t)len * m->quantum));
	CHECK(r, a.start == rm_addr(m, s) && a.size == (uint64_t)len * m->quantum,
	      "found [0x%llx, +0x%llx), model area [0x%llx, +0x%llx)", ULL(a.start), ULL(a.size),
	      ULL(rm_addr(m, s)), ULL((uint64_t)len * m->quantum));
	CHECK(r, a.owner == m->owner_at[s], "owner %p, model %p", a.owner, m->owner_at[s]);
	CHECK(r, a.node < r->mode->nodes, "node %u out of range", a.node);
	if (m->base == 0)
		CHECK(r, a.node == (a.start / zone_bytes(r)) % r->mode->nodes,
		      "node %u, expected (start / zone 0x%llx) %% nodes = %llu", a.node,
		      ULL(zone_bytes(r)), ULL((a.start / zone_bytes(r)) % r->mode->nodes));
}

static void op_set_owner(struct run *r)
{
	struct refmodel *m = &r->m;
	uint32_t s, len;
	uint64_t addr;
	void *tag = new_tag(r);
	int rc;

	if (!m->nareas)
		return;
	s = m->starts[rnd_below(r, m->nareas)];
	if (rnd_below(r, 4)) {
		addr = rm_addr(m, s);
		snprintf(r->op, sizeof(r->op), "va_set_owner(0x%llx, %p)", ULL(addr), tag);
		rc = va_set_owner(r->vs, addr, tag);
		CHECK(r, rc == 0, "returned %d (%s) on a busy area start", rc, va_strerror(rc));
		m->owner_at[s] = tag;
		return;
	}
	/* not an area start: inside an area, or non-busy space */
	addr = rnd_below(r, 2)
		   ? rm_addr(m, s) + 1 + rnd_below(r, (uint64_t)m->len_at[s] * m->quantum - 1)
		   : m->base + rnd_below(r, m->size);
	if (rm_find(m, addr, &s, &len) && rm_addr(m, s) == addr)
		return;
	snprintf(r->op, sizeof(r->op), "invalid va_set_owner(0x%llx, %p)", ULL(addr), tag);
	rc = va_set_owner(r->vs, addr, tag);
	CHECK(r, rc < 0, "returned %d on an address that is not an area start", rc);
}

static void op_congruent(struct run *r)
{
	struct refmodel *m = &r->m;
	uint64_t q = m->quantum, offsets[8], sizes[8], out[8], align, base = 0;
	bool big = rnd_below(r, 5) == 0; /* wide areas and gaps: more top-down backtracking */
	unsigned n = 1 + (unsigned)rnd_below(r, big ? 8 : 4);
	void *owner = new_tag(r);
	char desc[320];
	int len = 0, rc;
	bool fit;

	offsets[0] = 0;
	for (unsigned i = 0; i < n; i++) {
		if (i)
			offsets[i] = offsets[i - 1] + sizes[i - 1] + rnd_below(r, big ? 64 : 4) * q;
		sizes[i] = (1 + rnd_below(r, big ? 64 : 8)) * q;
		len += snprintf(desc + len, sizeof(desc) - (size_t)len, "%s+0x%llx:0x%llx",
				i ? " " : "", ULL(offsets[i]), ULL(sizes[i]));
	}
	align = q << rnd_below(r, big ? 7 : 5);
	snprintf(r->op, sizeof(r->op), "va_alloc_congruent(n=%u {%s}, align=0x%llx)", n, desc,
		 ULL(align));
	if (r->trace)
		printf("%u: %s\n", r->step, r->op);
	fit = rm_highest_congruent(m, offsets, sizes, n, align, &base);
	memset(out, 0, sizeof(out));
	rc = va_alloc_congruent(r->vs, offsets, sizes, n, align, owner, out);
	if (rc) {
		r->failed_calls++;
		CHECK(r, rc == VA_ENOSPC, "returned %d (%s), expected 0 or VA_ENOSPC", rc,
		      va_strerror(rc));
		r->nospc++;
		CHECK(r, !fit, "failed with VA_ENOSPC but base 0x%llx fits in the model",
		      ULL(base));
		return;
	}
	if (r->mode->exact)
		CHECK(r, fit && out[0] == base,
		      "returned base 0x%llx; the highest fitting base is %s0x%llx", ULL(out[0]),
		      fit ? "" : "none, not even ", ULL(base));
	CHECK(r, out[0] % align == 0, "base 0x%llx not aligned to 0x%llx", ULL(out[0]), ULL(align));
	for (unsigned i = 0; i < n; i++) {
		CHECK(r, out[i] == out[0] + offsets[i], "area %u at 0x%llx, expected base + 0x%llx",
		      i, ULL(out[i]), ULL(offsets[i]));
		accept_area(r, out[i], sizes[i], q, m->base, space_end(r), owner);
	}
}

static void op_drain(struct run *r)
{
	snprintf(r->op, sizeof(r->op), "va_drain()");
	if (r->trace)
		printf("%u: %s\n", r->step, r->op);
	va_drain(r->vs);
	check_state(r);
	check_stats(r, true);
	check_walk(r);
}

/* ---- driver ------------------------------------------------------------------------------- */

static unsigned scaled_ops(unsigned ops)
{
	const char *mode = getenv("VAD_TEST_MODE");

	if (mode && !strcmp(mode, "asan"))
		return ops / 3;
	if (mode && !strcmp(mode, "tsan"))
		return ops / 8;
	return ops;
}

static void run_seed(const struct mode *md, uint64_t seed)
{
	static const unsigned target_pct[4] = {25, 50, 75, 95};
	struct run *r = calloc(1, sizeof(*r));
	struct va_config cfg;
	unsigned ops = scaled_ops(md->ops);
	int rc;

	assert_non_null(r);
	r->mode = md;
	r->seed = seed;
	r->rng = seed * 0x2545f4914f6cdd1dULL + 1;
	r->trace = getenv("VA_MODEL_TRACE") != NULL;
	assert_true(rm_init(&r->m, md->base, (uint64_t)md->nq * md->quantum, md->quantum));

	memset(&cfg, 0, sizeof(cfg));
	cfg.base = md->base;
	cfg.size = (uint64_t)md->nq * md->quantum;
	cfg.quantum = md->quantum;
	cfg.nodes = md->nodes;
	cfg.zone_size = md->zone_q * md->quantum;
	cfg.lazy_max = md->lazy_max_q * md->quantum;
	cfg.pool_max_quanta = md->pool_max_quanta;
	cfg.pool_depth = md->pool_depth;
	cfg.drain_chunk = md->drain_chunk;
	cfg.idle_drain_ms = md->idle_drain_ms;
	cfg.no_pools = md->no_pools;
	cfg.eager = md->eager;
	cfg.no_thread = md->no_thread;
	cfg.no_idle_release = true; /* the model counts exactly what frees release */
	cfg.release = on_release;
	cfg.release_ctx = r;
	snprintf(r->op, sizeof(r->op), "va_create");
	rc = va_create(&cfg, &r->vs);
	CHECK(r, rc == 0 && r->vs, "va_create returned %d (%s)", rc, va_strerror(rc));
	va_set_home_node(0);
	check_state(r);
	check_walk(r);

	for (r->step = 1; r->step <= ops; r->step++) {
		struct refmodel *m = &r->m;
		unsigned x = (unsigned)rnd_below(r, 1000);
		unsigned target = target_pct[(r->step / 1500) % 4];
		bool want_alloc = m->busy_q * 100 < (uint64_t)m->nq * target
				      ? rnd_below(r, 100) < 65
				      : rnd_below(r, 100) < 30;

		if (x < 10)
			op_bad_alloc(r);
		else if (x < 40)
			op_bad_free(r);
		else if (x < 110)
			op_lookup(r);
		else if (x < 125)
			op_set_owner(r);
		else if (x < 135)
			op_congruent(r);
		else if (x < 139)
			op_drain(r);
		else if (x < 160 && !md->exact)
			va_set_home_node((unsigned)rnd_below(r, 2 * md->nodes));
		else if (x < 175)
			op_alloc_batch(r);
		else if (x < 190 && m->nareas)
			op_free_batch(r);
		else if (want_alloc || !m->nareas)
			op_alloc(r, rnd_below(r, md->pool_heavy ? 16 : 4) == 0);
		else
			op_free(r);
		check_state(r);
		if (r->step % 64 == 0)
			check_walk(r);
	}

	/* free everything, drain: the space must be whole again */
	while (r->m.nareas) {
		free_area(r, r->m.starts[rnd_below(r, r->m.nareas)]);
		check_rel_errors(r);
		check_release_log(r);
		if (r->m.nareas % 16 == 0)
			check_state(r);
	}
	op_drain(r);
	{
		struct va_stats st;

		va_get_stats(r->vs, &st);
		CHECK(r,
		      st.busy_bytes == 0 && st.free_bytes == r->m.size && st.free_blocks == 1 &&
			  st.largest_free == r->m.size,
		      "empty space after va_drain: busy 0x%llx free 0x%llx in %llu blocks, largest "
		      "0x%llx",
		      ULL(st.busy_bytes), ULL(st.free_bytes), ULL(st.free_blocks),
		      ULL(st.largest_free));
		CHECK(r, st.allocs == st.frees, "allocs %llu != frees %llu", ULL(st.allocs),
		      ULL(st.frees));
		print_message("group %s seed %llu: %u ops, %llu allocs, %llu ENOSPC, %llu drains, "
			      "%llu releases, %llu pool hits\n",
			      md->name, ULL(seed), ops, ULL(st.allocs), ULL(r->nospc),
			      ULL(st.drains), ULL(st.release_calls), ULL(st.pool_hits));
	}
	va_destroy(r->vs);
	rm_fini(&r->m);
	free(r);
}

static void run_group(void **state)
{
	const struct mode *md = *state;

	for (unsigned i = 0; i < md->nseeds; i++)
		run_seed(md, md->seeds[i]);
}

/* ---- teardown with everything outstanding --------------------------------------------- */

struct destroy_probe {
	atomic_uint_fast64_t calls;	    /* release callbacks so far */
	atomic_uint_fast64_t after_destroy; /* ... after va_destroy returned */
	atomic_bool destroyed;
};

static void on_release_probe(void *ctx, uint64_t start, uint64_t size)
{
	struct destroy_probe *p = ctx;

	atomic_fetch_add(&p->calls, 1);
	if (atomic_load(&p->destroyed))
		atomic_fetch_add(&p->after_destroy, 1);
}

/*
 * va_destroy with busy, lazy and pooled blocks and (in one case) the background thread
 * running: no leak (ASan checks at exit), no release callback from inside va_destroy when
 * there is no thread (lazy ranges are not released), none at all after it returns.
 */
static void destroy_outstanding(void **state)
{
	for (int with_thread = 0; with_thread < 2; with_thread++) {
		static struct destroy_probe probe;
		struct va_config cfg = {
		    .size = 4096 * 4096,
		    .nodes = 3,
		    .lazy_max = 64 * 4096,
		    .pool_max_quanta = 16,
		    .idle_drain_ms = 1,
		    .no_thread = !with_thread,
		    .release = on_release_probe,
		    .release_ctx = &probe,
		};
		struct va_space *vs = NULL;
		uint64_t addrs[600], before, seed = 99;
		struct va_stats st;
		unsigned n = 0;

		atomic_store(&probe.calls, 0);
		atomic_store(&probe.after_destroy, 0);
		atomic_store(&probe.destroyed, false);
		assert_int_equal(va_create(&cfg, &vs), 0);
		for (unsigned i = 0; i < 600; i++) {
			uint64_t z = (seed += 0x9e3779b97f4a7c15ULL) >> 40;

			va_set_home_node(i);
			if (va_alloc(vs, (1 + z % 24) * 4096, 0, &probe, &addrs[n]) == 0)
				n++;
		}
		/* free two thirds: some drain into pools and the tree, some stay lazy */
		for (unsigned i = 1; i < n; i += 3)
			assert_int_equal(va_free(vs, addrs[i], NULL), 0);
		for (unsigned i = 0; i < 40; i++) { /* refill pools from the released blocks */
			uint64_t a;

			va_set_home_node(i);
			va_alloc(vs, (1 + i % 4) * 4096, 0, &probe, &a);
		}
		for (unsigned i = 2; i < n; i += 3)
			assert_int_equal(va_free(vs, addrs[i], NULL), 0);
		va_get_stats(vs, &st);
		print_message("destroy_outstanding (%s thread): busy %llu lazy %llu pooled %llu "
			      "blocks\n",
			      with_thread ? "with" : "no", ULL(st.busy_blocks), ULL(st.lazy_blocks),
			      ULL(st.pooled_blocks));
		before = atomic_load(&probe.calls);
		va_destroy(vs);
		atomic_store(&probe.destroyed, true);
		if (!with_thread)
			assert_int_equal(atomic_load(&probe.calls), before);
		/* a release after va_destroy returned would be a use-after-free in the daemon */
		usleep(20 * 1000);
		assert_int_equal(atomic_load(&probe.after_destroy), 0);
	}
}

/* ---- calling back into the space from the release callback ------------------------------ */

struct reentry {
	struct va_space *vs;
	uint64_t keep;	/* an area that stays busy */
	int depth;	/* nesting of the callback (an eager free inside it releases again) */
	bool quiet;	/* stop calling back (the calls themselves leave lazy and pooled blocks) */
	unsigned calls; /* outermost callbacks checked */
	char err[320];	/* first problem seen inside the callback */
	struct va_space *other; /* a second space, drained from inside the first one's callback */
	uint64_t other_released;
};

static void on_release_other(void *ctx, uint64_t start, uint64_t size)
{
	((struct reentry *)ctx)->other_released += size;
}

static void reentry_checks(struct reentry *re, uint64_t start, uint64_t size)
{
	struct walk_buf w = {0};
	struct va_area a;
	uint64_t got, covered = 0, next = 0;
	char msg[256] = "";
	int rc;

	if ((rc = va_lookup(re->vs, start, &a)) != VA_ENOTFOUND) {
		snprintf(re->err, sizeof(re->err),
			 "va_lookup(0x%llx) of the range being released: %d", ULL(start), rc);
		return;
	}
	if ((rc = va_lookup(re->vs, re->keep, &a)) != 0 || a.start != re->keep) {
		snprintf(re->err, sizeof(re->err), "va_lookup of a busy area from the callback: %d",
			 rc);
		return;
	}
	if ((rc = va_check(re->vs, msg, sizeof(msg))) != 0) {
		snprintf(re->err, sizeof(re->err), "va_check from the callback: %d %s", rc, msg);
		return;
	}
	rc = va_walk(re->vs, walk_collect, &w);
	qsort(w.b, w.n, sizeof(*w.b), cmp_block);
	for (size_t i = 0; i < w.n && !rc; i++) {
		const struct va_block_info *b = &w.b[i];

		if (b->start != next)
			rc = -100;
		next = b->start + b->size;
		if (b->start < start + size && start < b->start + b->size) {
			if (b->kind != VA_BLOCK_LAZY)
				rc = -200 - (int)b->kind;
			covered += b->size;
		}
	}
	free(w.b);
	if (rc || covered != size) {
		snprintf(re->err, sizeof(re->err),
			 "va_walk from the callback releasing [0x%llx, +0x%llx): %s (%d)",
			 ULL(start), ULL(size),
			 rc == -100   ? "blocks do not tile the space"
			 : rc <= -200 ? "the range is reported busy, free or pooled, not lazy"
				      : "bad walk",
			 rc);
		return;
	}
	va_drain(re->vs); /* must not deadlock */
	rc = va_alloc_range(re->vs, size, 0, start, start + size, NULL, &got);
	if (rc != VA_ENOSPC) {
		snprintf(
		    re->err, sizeof(re->err),
		    "va_alloc_range over exactly the range being released returned %d (0x%llx); "
		    "expected VA_ENOSPC",
		    rc, ULL(got));
		return;
	}
	rc = va_alloc(re->vs, 4096, 0, NULL, &got);
	if (rc || (got >= start && got < start + size)) {
		snprintf(re->err, sizeof(re->err), "va_alloc from the callback: %d at 0x%llx", rc,
			 ULL(got));
		return;
	}
	if ((rc = va_free(re->vs, got, NULL)) != 0) {
		snprintf(re->err, sizeof(re->err), "va_free from the callback: %d", rc);
		return;
	}
	/* another space: a full drain from here must really drain it */
	if ((rc = va_alloc(re->other, 3 * 4096, 0, NULL, &got)) != 0 ||
	    (rc = va_free(re->other, got, NULL)) != 0) {
		snprintf(re->err, sizeof(re->err),
			 "alloc/free on another space from the callback: %d", rc);
		return;
	}
	{
		uint64_t before = re->other_released;
		struct va_stats st;

		va_drain(re->other);
		va_get_stats(re->other, &st);
		if (re->other_released != before + 3 * 4096 || st.lazy_bytes || st.pooled_bytes)
			snprintf(
			    re->err, sizeof(re->err),
			    "va_drain of another space from inside a release callback released "
			    "0x%llx bytes (expected 0x3000), left lazy 0x%llx pooled 0x%llx",
			    ULL(re->other_released - before), ULL(st.lazy_bytes),
			    ULL(st.pooled_bytes));
	}
}

static void on_release_reentry(void *ctx, uint64_t start, uint64_t size)
{
	struct reentry *re = ctx;

	if (re->depth++ == 0 && !re->err[0] && !re->quiet) {
		reentry_checks(re, start, size);
		re->calls++;
	}
	re->depth--;
}

/* The release callback runs outside every allocator lock: it may look up, check, walk, drain
 * (a no-op there), allocate and free; the range it is releasing is lazy, not allocatable. */
static void release_reentry(void **state)
{
	for (int eager = 0; eager < 2; eager++) {
		struct reentry re = {0};
		struct va_config cfg = {
		    .size = 1024 * 4096,
		    .nodes = eager ? 1 : 2,
		    .no_pools = eager,
		    .eager = eager,
		    .no_thread = true,
		    .lazy_max = 1024 * 4096,
		    .release = on_release_reentry,
		    .release_ctx = &re,
		};
		uint64_t addrs[24];
		char msg[256] = "";
		struct va_stats st;

		struct va_config other_cfg = {
		    .size = 256 * 4096,
		    .nodes = 2,
		    .no_thread = true,
		    .release = on_release_other,
		    .release_ctx = &re,
		};

		assert_int_equal(va_create(&cfg, &re.vs), 0);
		assert_int_equal(va_create(&other_cfg, &re.other), 0);
		assert_int_equal(va_alloc(re.vs, 4096, 0, NULL, &re.keep), 0);
		for (unsigned i = 0; i < 24; i++)
			assert_int_equal(va_alloc(re.vs, (1 + i % 5) * 4096, 0, NULL, &addrs[i]),
					 0);
		for (unsigned i = 0; i < 24; i++)
			assert_int_equal(va_free(re.vs, addrs[(i * 7) % 24], NULL), 0);
		va_drain(re.vs);
		if (re.err[0])
			fail_msg("%s mode: %s", eager ? "eager" : "lazy", re.err);
		assert_true(re.calls > 0);
		re.quiet = true;
		va_drain(re.vs);
		assert_int_equal(va_check(re.vs, msg, sizeof(msg)), 0);
		va_get_stats(re.vs, &st);
		if (st.busy_bytes != 4096 || st.free_bytes != cfg.size - 4096)
			fail_msg(
			    "%s mode, after the callbacks and va_drain: busy 0x%llx free 0x%llx "
			    "lazy 0x%llx pooled 0x%llx (%llu release calls); expected busy 0x1000 "
			    "and the rest free",
			    eager ? "eager" : "lazy", ULL(st.busy_bytes), ULL(st.free_bytes),
			    ULL(st.lazy_bytes), ULL(st.pooled_bytes), ULL(st.release_calls));
		va_destroy(re.vs);
		va_destroy(re.other);
	}
}

#define MIB (1024ULL * 1024)

/* exact mode: nodes = 1, no pools, eager, no thread */
static struct mode exact_base0 = {
    .name = "exact_base0",
    .exact = true,
    .base = 0,
    .quantum = 4096,
    .nq = 4096,
    .nodes = 1,
    .no_pools = true,
    .eager = true,
    .no_thread = true,
    .ops = 30000,
    .nseeds = 4,
    .seeds = {1, 2, 3, 7},
};
static struct mode exact_offset_base = {
    .name = "exact_offset_base",
    .exact = true,
    .base = 3 * MIB + 5 * 4096,
    .quantum = 4096,
    .nq = 6000,
    .nodes = 1,
    .no_pools = true,
    .eager = true,
    .no_thread = true,
    .ops = 30000,
    .nseeds = 2,
    .seeds = {4, 5},
};
static struct mode exact_huge_quantum = {
    .name = "exact_huge_quantum",
    .exact = true,
    .base = 6 * 2 * MIB,
    .quantum = 2 * MIB,
    .nq = 1024,
    .nodes = 1,
    .no_pools = true,
    .eager = true,
    .no_thread = true,
    .ops = 20000,
    .nseeds = 1,
    .seeds = {6},
};
/* lazy, pooled, several nodes, synchronous drains only (deterministic) */
static struct mode lazy_pooled_sync = {
    .name = "lazy_pooled_sync",
    .base = 0,
    .quantum = 4096,
    .nq = 8192,
    .nodes = 4,
    .zone_q = 16,
    .lazy_max_q = 64,
    .pool_max_quanta = 32,
    .pool_depth = 8,
    .drain_chunk = 7,
    .no_thread = true,
    .ops = 30000,
    .nseeds = 4,
    .seeds = {11, 12, 13, 17},
};
static struct mode lazy_default_pools_sync = {
    .name = "lazy_default_pools_sync",
    .base = 1 * MIB,
    .quantum = 4096,
    .nq = 8192,
    .nodes = 4,
    .lazy_max_q = 256,
    .no_thread = true,
    .ops = 30000,
    .nseeds = 1,
    .seeds = {14},
};
static struct mode lazy_nopools_sync = {
    .name = "lazy_nopools_sync",
    .base = 0,
    .quantum = 4096,
    .nq = 4096,
    .nodes = 3,
    .zone_q = 8,
    .lazy_max_q = 32,
    .no_pools = true,
    .no_thread = true,
    .ops = 30000,
    .nseeds = 1,
    .seeds = {15},
};
static struct mode eager_pooled_sync = {
    .name = "eager_pooled_sync",
    .base = 0,
    .quantum = 4096,
    .nq = 4096,
    .nodes = 2,
    .pool_max_quanta = 16,
    .pool_depth = 4,
    .eager = true,
    .no_thread = true,
    .ops = 20000,
    .nseeds = 1,
    .seeds = {16},
};
/* lazy, pooled, with the background drain thread (not deterministic) */
static struct mode lazy_pooled_thread = {
    .name = "lazy_pooled_thread",
    .base = 0,
    .quantum = 4096,
    .nq = 8192,
    .nodes = 4,
    .zone_q = 16,
    .lazy_max_q = 64,
    .pool_max_quanta = 32,
    .pool_depth = 8,
    .drain_chunk = 5,
    .idle_drain_ms = 1,
    .ops = 20000,
    .nseeds = 3,
    .seeds = {21, 22, 23},
};

/* odd shapes: 5 nodes, 3-quantum zones, 8 KiB quantum */
static struct mode lazy_odd_zones_sync = {
    .name = "lazy_odd_zones_sync",
    .base = 0,
    .quantum = 8192,
    .nq = 4096,
    .nodes = 5,
    .zone_q = 3,
    .lazy_max_q = 48,
    .pool_max_quanta = 12,
    .pool_depth = 5,
    .drain_chunk = 3,
    .no_thread = true,
    .ops = 20000,
    .nseeds = 1,
    .seeds = {51},
};
/* one-quantum zones over 7 nodes: every multi-quantum area spans several nodes */
static struct mode lazy_tiny_zones_sync = {
    .name = "lazy_tiny_zones_sync",
    .base = 0,
    .quantum = 4096,
    .nq = 4096,
    .nodes = 7,
    .zone_q = 1,
    .lazy_max_q = 40,
    .pool_max_quanta = 16,
    .pool_depth = 6,
    .no_thread = true,
    .ops = 20000,
    .nseeds = 1,
    .seeds = {61},
};
/* small requests over a small space with small pools: pool hits, refills, decay, full drains */
static struct mode lazy_pool_heavy_sync = {
    .name = "lazy_pool_heavy_sync",
    .base = 0,
    .quantum = 4096,
    .nq = 2048,
    .nodes = 4,
    .zone_q = 4,
    .lazy_max_q = 16,
    .pool_max_quanta = 8,
    .pool_depth = 16,
    .drain_chunk = 1,
    .no_thread = true,
    .pool_heavy = true,
    .ops = 20000,
    .nseeds = 2,
    .seeds = {31, 32},
};
static struct mode lazy_pool_heavy_thread = {
    .name = "lazy_pool_heavy_thread",
    .base = 64 * 4096,
    .quantum = 4096,
    .nq = 2048,
    .nodes = 3,
    .zone_q = 4,
    .lazy_max_q = 16,
    .pool_max_quanta = 8,
    .pool_depth = 16,
    .drain_chunk = 1,
    .idle_drain_ms = 1,
    .pool_heavy = true,
    .ops = 20000,
    .nseeds = 1,
    .seeds = {41},
};

int main(void)
{
#define GROUP(m)                                                                                   \
	{                                                                                          \
		.name = #m, .test_func = run_group, .initial_state = &(m)                          \
	}
	const struct CMUnitTest tests[] = {
	    GROUP(exact_base0),
	    GROUP(exact_offset_base),
	    GROUP(exact_huge_quantum),
	    GROUP(lazy_pooled_sync),
	    GROUP(lazy_default_pools_sync),
	    GROUP(lazy_nopools_sync),
	    GROUP(eager_pooled_sync),
	    GROUP(lazy_pooled_thread),
	    GROUP(lazy_pool_heavy_sync),
	    GROUP(lazy_pool_heavy_thread),
	    GROUP(lazy_odd_zones_sync),
	    GROUP(lazy_tiny_zones_sync),
	    cmocka_unit_test(destroy_outstanding),
	    cmocka_unit_test(release_reentry),
	};

	if (getenv("VA_TEST_FILTER"))
		cmocka_set_test_filter(getenv("VA_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
