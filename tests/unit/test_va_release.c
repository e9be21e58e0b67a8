/*
 * test_va_release.c - va_release_free: the callback sees exactly the free tree's blocks,
 * coalesced; nothing allocated (or being allocated) is ever passed to release; va_check and
 * busy + free + lazy + pooled == size hold from other threads while it runs beside
 * allocations and frees; the idle timer runs it once the space is idle; with a zero callback
 * pooled blocks are zeroed in place and every reused range reads zeros.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "va_testutil.h"
#include "vaspace.h"

#define Q      4096ull
#define ULL(x) ((unsigned long long)(x))

static unsigned scaled(unsigned n)
{
	const char *mode = getenv("VAD_TEST_MODE");

	if (mode && !strcmp(mode, "tsan"))
		return n / 10;
	if (mode && !strcmp(mode, "asan"))
		return n / 2;
	return n;
}

/* ---- exactly the free blocks ---------------------------------------------------------- */

struct span {
	uint64_t start, size;
};

struct span_log {
	pthread_mutex_t lock;
	struct span s[4096];
	unsigned n;
	struct va_space *vs; /* for the nested call */
	uint64_t nested;     /* what a nested va_release_free returned */
};

static void log_release(void *ctx, uint64_t start, uint64_t size)
{
	struct span_log *l = ctx;

	pthread_mutex_lock(&l->lock);
	if (l->n < 4096)
		l->s[l->n++] = (struct span){start, size};
	pthread_mutex_unlock(&l->lock);
	if (l->vs)
		l->nested += va_release_free(l->vs); /* returns at once: vs is releasing */
}

static int collect_free(void *ctx, const struct va_block_info *b)
{
	struct span_log *l = ctx;

	if (b->kind == VA_BLOCK_FREE)
		l->s[l->n++] = (struct span){b->start, b->size};
	return 0;
}

static int cmp_span(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* A fragmented space: the callback gets each free block once, as the tree holds it
 * (coalesced: adjacent frees arrive as one run), and the return value is their sum. */
static void test_release_free_exact_blocks(void **state)
{
	enum { N = 600 };
	static struct span_log log, want;
	struct va_config cfg = {.base = 32 * Q,
				.size = 4096 * Q,
				.quantum = Q,
				.nodes = 3,
				.no_thread = true,
				.release = log_release,
				.release_ctx = &log};
	struct va_space *vs = NULL;
	uint64_t a[N], total = 0, ret;
	struct va_stats before, after;

	(void)state;
	pthread_mutex_init(&log.lock, NULL);
	assert_int_equal(va_create(&cfg, &vs), 0);
	for (unsigned i = 0; i < N; i++)
		assert_int_equal(va_alloc(vs, (1 + i % 5) * Q, 0, NULL, &a[i]), 0);
	/* runs of two or three neighbours freed, others kept: holes of several sizes */
	for (unsigned i = 0; i < N; i++)
		if (i % 7 == 1 || i % 7 == 2 || i % 11 == 3)
			assert_int_equal(va_free(vs, a[i], NULL), 0);
	va_drain(vs); /* every lazy block into the tree, pools emptied */
	CHECK(vs);
	va_get_stats(vs, &before);
	assert_true(before.free_blocks > 50);
	want.n = 0;
	assert_int_equal(va_walk(vs, collect_free, &want), 0);
	log.n = 0;
	log.vs = vs;
	ret = va_release_free(vs);
	log.vs = NULL;
	CHECK(vs);
	va_get_stats(vs, &after);
	qsort(log.s, log.n, sizeof(log.s[0]), cmp_span);
	assert_int_equal(log.n, want.n);
	for (unsigned i = 0; i < log.n; i++) {
		if (log.s[i].start != want.s[i].start || log.s[i].size != want.s[i].size)
			fail_msg("release %u: [0x%llx, +0x%llx), free block [0x%llx, +0x%llx)", i,
				 ULL(log.s[i].start), ULL(log.s[i].size), ULL(want.s[i].start),
				 ULL(want.s[i].size));
		if (i && log.s[i - 1].start + log.s[i - 1].size >= log.s[i].start)
			fail_msg("releases %u and %u touch: not coalesced", i - 1, i);
		total += log.s[i].size;
	}
	assert_int_equal(ret, total);
	assert_int_equal(total, before.free_bytes);
	assert_int_equal(log.nested, 0);
	/* the blocks are back, merged as before; counters say what was released */
	assert_int_equal(after.free_bytes, before.free_bytes);
	assert_int_equal(after.free_blocks, before.free_blocks);
	assert_int_equal(after.lazy_bytes, 0);
	assert_int_equal(after.free_released_bytes - before.free_released_bytes, total);
	assert_int_equal(after.free_release_calls - before.free_release_calls, log.n);
	/* nobody freed these bytes: reclaim's counters stay as they were */
	assert_int_equal(after.released_bytes, before.released_bytes);
	assert_int_equal(after.release_calls, before.release_calls);
	/* without a callback there is nothing to pass */
	va_destroy(vs);
	cfg.release = NULL;
	assert_int_equal(va_create(&cfg, &vs), 0);
	assert_int_equal(va_release_free(vs), 0);
	assert_int_equal(va_release_free(NULL), 0);
	va_destroy(vs);
}

/* A free block bigger than a chunk is cut: pieces of at most a chunk, which together are
 * the block, and the block is whole again afterwards. */
static void test_release_free_cuts_big_blocks(void **state)
{
	static struct span_log log;
	struct va_config cfg = {.size = 1ull << 30, /* one free block of 1 GiB */
				.quantum = Q,
				.nodes = 2,
				.no_thread = true,
				.release = log_release,
				.release_ctx = &log};
	struct va_space *vs = NULL;
	struct va_stats st;
	uint64_t sum = 0;

	(void)state;
	pthread_mutex_init(&log.lock, NULL);
	log.n = 0;
	assert_int_equal(va_create(&cfg, &vs), 0);
	assert_int_equal(va_release_free(vs), 1ull << 30);
	CHECK(vs);
	assert_true(log.n >= 16); /* 64 MiB at most per chunk */
	for (unsigned i = 0; i < log.n; i++) {
		assert_int_equal(log.s[i].start, sum);
		assert_true(log.s[i].size <= 64ull << 20);
		sum += log.s[i].size;
	}
	assert_int_equal(sum, 1ull << 30);
	va_get_stats(vs, &st);
	assert_int_equal(st.free_blocks, 1);
	assert_int_equal(st.largest_free, 1ull << 30);
	va_destroy(vs);
}

/* ---- beside allocations and frees ---------------------------------------------------------- */

#define THREADS	  3
#define Q_FREE	  0u
#define Q_RELEASE 0xffffu /* inside a release callback */

struct race {
	struct va_space *vs;
	uint64_t base, size;
	_Atomic uint32_t *q; /* per quantum: Q_FREE, owner thread + 1, or Q_RELEASE */
	atomic_bool stop;
	atomic_uint errors;
	atomic_uint_fast64_t releases, release_free_calls, checks;
	char first[256];
	pthread_mutex_t err_lock;
};

static void race_fail(struct race *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void race_fail(struct race *r, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&r->err_lock);
	if (atomic_fetch_add(&r->errors, 1) == 0) {
		va_start(ap, fmt);
		vsnprintf(r->first, sizeof(r->first), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&r->err_lock);
	atomic_store(&r->stop, true);
}

/* Drains' releases and va_release_free's alike: no quantum may be owned, and none may be
 * handed out while the callback runs (an allocation then finds Q_RELEASE). */
static void race_release(void *ctx, uint64_t start, uint64_t size)
{
	struct race *r = ctx;
	uint64_t q0 = (start - r->base) / Q, n = size / Q;

	atomic_fetch_add(&r->releases, 1);
	for (uint64_t i = q0; i < q0 + n; i++) {
		uint32_t expect = Q_FREE;

		if (!atomic_compare_exchange_strong(&r->q[i], &expect, Q_RELEASE)) {
			race_fail(
			    r, "release of [0x%llx, +0x%llx) covers quantum 0x%llx, which is %s",
			    ULL(start), ULL(size), ULL(r->base + i * Q),
			    expect == Q_RELEASE ? "being released twice at once" : "allocated");
			for (uint64_t j = q0; j < i; j++)
				atomic_store(&r->q[j], Q_FREE);
			return;
		}
	}
	sched_yield(); /* give allocators a chance to race the callback */
	for (uint64_t i = q0; i < q0 + n; i++)
		atomic_store(&r->q[i], Q_FREE);
}

struct racer {
	struct race *r;
	unsigned id;
	uint64_t rng;
};

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	return z ^ (z >> 27);
}

static void *racer_main(void *arg)
{
	struct racer *me = arg;
	struct race *r = me->r;
	enum { HELD = 48 };
	uint64_t addr[HELD] = {0}, len[HELD] = {0};
	unsigned iters = scaled(60000);

	for (unsigned it = 0; it < iters && !atomic_load(&r->stop); it++) {
		unsigned k = (unsigned)(rnd(&me->rng) % HELD);

		if (len[k]) {
			for (uint64_t i = (addr[k] - r->base) / Q, e = i + len[k] / Q; i < e; i++)
				atomic_store(&r->q[i], Q_FREE);
			if (va_free(r->vs, addr[k], NULL))
				race_fail(r, "va_free(0x%llx) failed", ULL(addr[k]));
			len[k] = 0;
			continue;
		}
		len[k] = (1 + rnd(&me->rng) % 6) * Q;
		if (va_alloc(r->vs, len[k], 0, NULL, &addr[k])) {
			len[k] = 0; /* the space is full: fine, try again later */
			continue;
		}
		for (uint64_t i = (addr[k] - r->base) / Q, e = i + len[k] / Q; i < e; i++) {
			uint32_t expect = Q_FREE;

			if (!atomic_compare_exchange_strong(&r->q[i], &expect, me->id + 1)) {
				race_fail(r,
					  "thread %u got [0x%llx, +0x%llx), quantum 0x%llx is %s",
					  me->id, ULL(addr[k]), ULL(len[k]), ULL(r->base + i * Q),
					  expect == Q_RELEASE ? "being released" : "owned");
				break;
			}
		}
	}
	for (unsigned k = 0; k < HELD; k++)
		if (len[k]) {
			for (uint64_t i = (addr[k] - r->base) / Q, e = i + len[k] / Q; i < e; i++)
				atomic_store(&r->q[i], Q_FREE);
			va_free(r->vs, addr[k], NULL);
		}
	return NULL;
}

static void *releaser_main(void *arg)
{
	struct race *r = arg;

	while (!atomic_load(&r->stop)) {
		va_release_free(r->vs);
		atomic_fetch_add(&r->release_free_calls, 1);
		sched_yield(); /* six threads share two CPUs: the racers must get theirs */
	}
	return NULL;
}

static void *checker_main(void *arg)
{
	struct race *r = arg;
	char msg[256];

	while (!atomic_load(&r->stop)) {
		struct va_stats st;

		if (va_check(r->vs, msg, sizeof(msg)))
			race_fail(r, "va_check while releasing: %s", msg);
		va_get_stats(r->vs, &st);
		if (st.busy_bytes + st.free_bytes + st.lazy_bytes + st.pooled_bytes != r->size)
			race_fail(r, "busy %llu + free %llu + lazy %llu + pooled %llu != size %llu",
				  ULL(st.busy_bytes), ULL(st.free_bytes), ULL(st.lazy_bytes),
				  ULL(st.pooled_bytes), ULL(r->size));
		atomic_fetch_add(&r->checks, 1);
		/* every check takes every lock: a pause between them leaves the racers room */
		struct timespec pause = {.tv_nsec = 200 * 1000};
		nanosleep(&pause, NULL);
	}
	return NULL;
}

/* Three threads allocate and free in a small space (ENOSPC retries included) while one runs
 * va_release_free in a loop and another checks every invariant. */
static void test_release_free_beside_allocations(void **state)
{
	struct race *r = calloc(1, sizeof(*r));
	struct racer w[THREADS];
	pthread_t th[THREADS], rel, chk;
	struct va_config cfg = {.base = 64 * Q,
				.size = 1024 * Q,
				.quantum = Q,
				.nodes = 2,
				.lazy_max = 64 * Q,
				.pool_max_quanta = 4,
				.pool_depth = 8,
				.idle_drain_ms = 1,
				.release = race_release};
	struct va_stats st;
	char msg[256];

	(void)state;
	assert_non_null(r);
	pthread_mutex_init(&r->err_lock, NULL);
	r->base = cfg.base;
	r->size = cfg.size;
	r->q = calloc(cfg.size / Q, sizeof(*r->q));
	assert_non_null(r->q);
	cfg.release_ctx = r;
	assert_int_equal(va_create(&cfg, &r->vs), 0);
	assert_int_equal(pthread_create(&rel, NULL, releaser_main, r), 0);
	assert_int_equal(pthread_create(&chk, NULL, checker_main, r), 0);
	for (unsigned t = 0; t < THREADS; t++) {
		w[t] = (struct racer){.r = r, .id = t, .rng = 77 * (t + 1)};
		assert_int_equal(pthread_create(&th[t], NULL, racer_main, &w[t]), 0);
	}
	for (unsigned t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	/* a few more passes after the racers, so the checker sees the releaser alone too */
	uint64_t more = atomic_load(&r->release_free_calls) + 3;

	WAIT_FOR(atomic_load(&r->release_free_calls) >= more || atomic_load(&r->errors));
	atomic_store(&r->stop, true);
	pthread_join(rel, NULL);
	pthread_join(chk, NULL);
	va_drain(r->vs);
	assert_int_equal(va_check(r->vs, msg, sizeof(msg)), 0);
	va_get_stats(r->vs, &st);
	print_message("%llu release calls, %llu va_release_free passes, %llu checks\n",
		      ULL(atomic_load(&r->releases)), ULL(atomic_load(&r->release_free_calls)),
		      ULL(atomic_load(&r->checks)));
	va_destroy(r->vs);
	if (atomic_load(&r->errors))
		fail_msg("%u failures, first: %s", atomic_load(&r->errors), r->first);
	assert_int_equal(st.busy_bytes, 0);
	assert_int_equal(st.free_bytes, cfg.size);
	assert_true(atomic_load(&r->release_free_calls) >= 3);
	assert_true(atomic_load(&r->checks) >= 1);
	free(r->q);
	free(r);
}

/* ---- the idle timer ----------------------------------------------------------------------- */

struct idle_log {
	atomic_uint_fast64_t whole; /* callbacks that covered the whole space, once armed */
	atomic_bool armed;	    /* the round's frees are done */
	uint64_t size;
};

static void idle_release(void *ctx, uint64_t start, uint64_t size)
{
	struct idle_log *l = ctx;

	if (atomic_load(&l->armed) && start == 0 && size == l->size)
		atomic_fetch_add(&l->whole, 1);
}

/* After activity stops the idle timer drains the leftovers and then passes the free space
 * (here the whole space, once everything is freed) to the release callback, once per idle
 * period: a new period starts only after more allocations or frees. */
static void test_idle_timer_releases_free_space(void **state)
{
	static struct idle_log log;
	struct va_config cfg = {.size = 512 * Q,
				.quantum = Q,
				.nodes = 2,
				.no_pools = true,
				.idle_drain_ms = 10,
				.release = idle_release,
				.release_ctx = &log};
	struct va_space *vs = NULL;
	uint64_t a[8];

	(void)state;
	log.size = cfg.size;
	assert_int_equal(va_create(&cfg, &vs), 0);
	for (int round = 1; round <= 2; round++) {
		atomic_store(&log.armed, false); /* an idle tick before the allocations: not it */
		for (unsigned i = 0; i < 8; i++)
			assert_int_equal(va_alloc(vs, 3 * Q, 0, NULL, &a[i]), 0);
		for (unsigned i = 0; i < 8; i++)
			assert_int_equal(va_free(vs, a[i], NULL), 0);
		atomic_store(&log.whole, 0);
		atomic_store(&log.armed, true);
		/* the freed areas stay lazy until the idle drain releases them (one run, not the
		 * whole space); only then is the space one free block, which the idle release
		 * passes whole */
		WAIT_FOR(atomic_load(&log.whole) >= 1);
		CHECK(vs);
	}
	va_destroy(vs);
}

/* ---- pooled blocks zeroed in place ---------------------------------------------------- */

#define ZQ 4096 /* quanta in the space */

struct dirt {
	uint8_t dirty[ZQ];    /* a quantum written by its holder, not yet released or zeroed */
	uint8_t resident[ZQ]; /* ... not yet released (zeroing keeps its memory) */
	uint8_t held[ZQ];     /* a quantum of an area some test holds: never zeroed */
	uint64_t releases, zeros, zeroed_quanta;
	uint64_t many_calls; /* zero_many calls */
};

static void dirt_clean(struct dirt *d, uint64_t start, uint64_t size)
{
	for (uint64_t q = start / Q; q < (start + size) / Q; q++)
		d->dirty[q] = 0;
}

static void dirt_release(void *ctx, uint64_t start, uint64_t size)
{
	struct dirt *d = ctx;

	d->releases++;
	dirt_clean(d, start, size);
	for (uint64_t q = start / Q; q < (start + size) / Q; q++)
		d->resident[q] = 0;
}

/* va_walk: a free block holds no memory a holder wrote (only pools keep it, zeroed). */
static int free_not_resident(void *ctx, const struct va_block_info *b)
{
	const struct dirt *d = ctx;

	if (b->kind != VA_BLOCK_FREE)
		return 0;
	for (uint64_t q = b->start / Q; q < (b->start + b->size) / Q; q++)
		if (d->resident[q])
			fail_msg("free quantum %llu still holds a holder's memory", ULL(q));
	return 0;
}

static void dirt_zero(void *ctx, uint64_t start, uint64_t size)
{
	struct dirt *d = ctx;

	d->zeros++;
	d->zeroed_quanta += size / Q;
	for (uint64_t q = start / Q; q < (start + size) / Q; q++)
		if (d->held[q])
			fail_msg("zero of [%llu, %llu) reaches quantum %llu, which is held",
				 ULL(start), ULL(start + size), ULL(q));
	dirt_clean(d, start, size);
}

/* zero_many: the blocks come sorted, apart, at most VA_ZERO_MANY, each zeroed as dirt_zero
 * would. */
static void dirt_zero_many(void *ctx, const struct va_extent *r, size_t n)
{
	struct dirt *d = ctx;

	d->many_calls++;
	if (n == 0 || n > VA_ZERO_MANY)
		fail_msg("zero_many got %zu blocks", n);
	for (size_t i = 0; i < n; i++) {
		if (i && r[i].start < r[i - 1].start + r[i - 1].size)
			fail_msg("zero_many: block %zu at %llu is not after [%llu, +%llu)", i,
				 ULL(r[i].start), ULL(r[i - 1].start), ULL(r[i - 1].size));
		dirt_zero(d, r[i].start, r[i].size);
	}
}

/* With no_recycle nothing is zeroed on the allocating path: that zero call is a failure. */
static void zero_forbidden(void *ctx, uint64_t start, uint64_t size)
{
	fail_msg("zero called for [%llu, +%llu) with no_recycle and zero_many", ULL(start),
		 ULL(size));
}

/* With a zero callback, blocks a drain pools are zeroed instead of released, only the
 * tree's share is released (pool blocks too, when they decay to it), every range handed out
 * reads zeros (no holder's writes), and no free block holds memory. With zero_many and
 * no_recycle (the daemon's way) the drain zeroes them in sorted batches, and no free goes
 * straight back to a pool. */
static void zero_pooled_in_place(bool many)
{
	static struct dirt d;
	struct va_config cfg = {
	    .size = ZQ * Q,
	    .nodes = 1,
	    .lazy_max = 64 * Q,
	    .no_thread = true,
	    .release = dirt_release,
	    .zero = many ? zero_forbidden : dirt_zero,
	    .zero_many = many ? dirt_zero_many : NULL,
	    .no_recycle = many,
	    .release_ctx = &d,
	};
	uint64_t live[200], sizes[200], frees = 0, rng = 12345;
	unsigned n = 0;
	struct va_space *vs;
	struct va_stats st;

	memset(&d, 0, sizeof(d));
	assert_int_equal(va_create(&cfg, &vs), 0);
	for (unsigned step = 0; step < scaled(40000); step++) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		if (n < 200 && (n == 0 || (rng >> 33) % 2)) {
			uint64_t q = (rng >> 40) % 8 + 1, a;

			if (va_alloc(vs, q * Q, 0, NULL, &a))
				continue;
			for (uint64_t k = a / Q; k < a / Q + q; k++) {
				if (d.dirty[k])
					fail_msg("step %u: quantum %llu handed out unzeroed", step,
						 ULL(k));
				d.dirty[k] = 1; /* the holder writes into every quantum */
				d.resident[k] = 1;
			}
			live[n] = a;
			sizes[n++] = q;
		} else {
			unsigned i = (unsigned)((rng >> 40) % n);

			assert_int_equal(va_free(vs, live[i], NULL), 0);
			frees++;
			live[i] = live[--n];
			sizes[i] = sizes[n];
		}
		if (step % 1000 == 0) {
			CHECK(vs);
			assert_int_equal(va_walk(vs, free_not_resident, &d), 0);
		}
	}
	va_get_stats(vs, &st);
	assert_true(d.zeros > 0);
	if (many) {
		assert_int_equal(st.recycled, 0);
		assert_true(d.many_calls > 0);
		assert_true(d.many_calls < d.zeros); /* batches, not a call per block */
	} else {
		assert_true(st.recycled > 0); /* frees went straight back to pools too */
		assert_int_equal(d.many_calls, 0);
	}
	assert_int_equal(st.zero_calls, d.zeros);
	assert_int_equal(st.zeroed_bytes, d.zeroed_quanta * Q);
	/* the pooled share is zeroed, not released: fewer release calls than zero calls */
	assert_true(d.releases < d.zeros);
	assert_true(st.release_calls <= frees);
	va_drain(vs); /* every pool back to the tree: nothing stays resident */
	assert_int_equal(va_walk(vs, free_not_resident, &d), 0);
	CHECK(vs);
	va_destroy(vs);
}

static void test_zero_pooled_in_place(void **state)
{
	(void)state;
	zero_pooled_in_place(false);
}

static void test_zero_many_in_drain(void **state)
{
	(void)state;
	zero_pooled_in_place(true);
}

/* One node, no thread, d's release and zero callbacks (d cleared first). */
static struct va_space *dirt_space(struct dirt *d)
{
	struct va_config cfg = {
	    .size = ZQ * Q,
	    .nodes = 1,
	    .no_thread = true,
	    .release = dirt_release,
	    .zero = dirt_zero,
	    .release_ctx = d,
	};
	struct va_space *vs = NULL;

	memset(d, 0, sizeof(*d));
	assert_int_equal(va_create(&cfg, &vs), 0);
	return vs;
}

/* Frees of a class in demand go straight back to the pool, dirty; a batch allocation that
 * takes them zeroes each before it returns, single allocations too, and va_check counts
 * them as pooled meanwhile. */
static void test_recycled_blocks_zeroed_when_taken(void **state)
{
	static struct dirt d;
	uint64_t sizes[16], addrs[16];
	struct va_space *vs;
	struct va_stats st;

	(void)state;
	vs = dirt_space(&d);
	for (unsigned i = 0; i < 16; i++)
		sizes[i] = (i % 3 + 1) * Q;
	for (unsigned round = 0; round < 50; round++) {
		if (round % 2)
			assert_int_equal(va_alloc_batch(vs, 16, sizes, 0, NULL, addrs, NULL), 0);
		else
			for (unsigned i = 0; i < 16; i++)
				assert_int_equal(va_alloc(vs, sizes[i], 0, NULL, &addrs[i]), 0);
		for (unsigned i = 0; i < 16; i++)
			for (uint64_t k = addrs[i] / Q; k < (addrs[i] + sizes[i]) / Q; k++) {
				if (d.dirty[k])
					fail_msg("round %u: quantum %llu handed out unzeroed",
						 round, ULL(k));
				d.dirty[k] = 1;
				d.resident[k] = 1;
			}
		CHECK(vs);
		assert_int_equal(va_free_batch(vs, 16, addrs, NULL, NULL), 0);
		CHECK(vs);
		assert_int_equal(va_walk(vs, free_not_resident, &d), 0);
	}
	va_get_stats(vs, &st);
	assert_true(st.recycled >= 16 * 45); /* all but the first rounds' frees */
	assert_int_equal(st.zero_calls, d.zeros);
	assert_true(st.pooled_blocks >= 16); /* the last round's (dirty), beside refills */
	va_drain(vs);
	assert_int_equal(va_walk(vs, free_not_resident, &d), 0);
	CHECK(vs);
	va_destroy(vs);
}

/* A block allocated by a thread of node 0 at an address of node 1's zone goes back into node
 * 0's pool when freed (its home's, where its class is in demand), dirty, and is zeroed when
 * node 0 takes it again; before, node 1's pool, which nobody asked of, refused it and it
 * went lazy (and with it a drain per few thousand such frees). */
static void test_recycled_into_home_pool(void **state)
{
	static struct dirt d;
	struct va_config cfg = {
	    .size = ZQ * Q,
	    .nodes = 2,
	    .zone_size = 64 * Q,
	    .no_thread = true,
	    .release = dirt_release,
	    .zero = dirt_zero,
	    .release_ctx = &d,
	};
	struct va_space *vs;
	struct va_stats before, after;
	uint64_t first, away, again;

	(void)state;
	memset(&d, 0, sizeof(d));
	va_set_home_node(0);
	assert_int_equal(va_create(&cfg, &vs), 0);
	/* a pooled allocation: node 0's one-quantum class is in demand */
	assert_int_equal(va_alloc(vs, Q, 0, NULL, &first), 0);
	/* the same size in zone 1, which belongs to node 1 */
	assert_int_equal(va_alloc_range(vs, Q, 0, 64 * Q, 128 * Q, NULL, &away), 0);
	assert_int_equal(away / (64 * Q) % 2, 1);
	d.dirty[away / Q] = d.resident[away / Q] = 1;
	CHECK(vs);
	va_get_stats(vs, &before);
	assert_int_equal(va_free(vs, away, NULL), 0);
	va_get_stats(vs, &after);
	CHECK(vs);
	assert_int_equal(after.recycled, before.recycled + 1);
	assert_int_equal(after.lazy_blocks, before.lazy_blocks);
	assert_int_equal(after.pooled_blocks, before.pooled_blocks + 1);
	/* node 0 takes it back first (its pool is a stack), zeroed */
	assert_int_equal(va_alloc(vs, Q, 0, NULL, &again), 0);
	assert_int_equal(again, away);
	if (d.dirty[again / Q])
		fail_msg("the recycled block was handed out unzeroed");
	CHECK(vs);
	assert_int_equal(va_free(vs, again, NULL), 0);
	assert_int_equal(va_free(vs, first, NULL), 0);
	va_drain(vs);
	CHECK(vs);
	va_destroy(vs);
}

/* Mark or unmark the quanta of n areas as held. */
static void dirt_hold(struct dirt *d, size_t n, const uint64_t *addrs, const uint64_t *sizes,
		      uint8_t held)
{
	for (size_t i = 0; i < n; i++)
		for (uint64_t k = addrs[i] / Q; k < (addrs[i] + sizes[i]) / Q; k++)
			d->held[k] = held;
}

/* A batch that takes recycled blocks back zeroes each run of adjacent ones in one call:
 * far fewer calls than areas, never a byte of an area someone else holds (areas held
 * throughout sit between the batch's), and every area handed out reads zeros. */
static void test_recycled_runs_zeroed_together(void **state)
{
	enum { B = 48, KEEP = 8 };
	static struct dirt d;
	uint64_t sizes[B], addrs[B], keep[KEEP];
	uint64_t handed_dirty = 0, zeros_before;
	struct va_space *vs;

	(void)state;
	vs = dirt_space(&d);
	for (unsigned i = 0; i < B; i++)
		sizes[i] = Q;
	zeros_before = d.zeros;
	for (unsigned round = 0; round < 40; round++) {
		assert_int_equal(va_alloc_batch(vs, B, sizes, 0, NULL, addrs, NULL), 0);
		for (unsigned i = 0; i < B; i++) {
			if (d.dirty[addrs[i] / Q])
				fail_msg("round %u: quantum %llu handed out unzeroed", round,
					 ULL(addrs[i] / Q));
			handed_dirty += round > 0;
			d.dirty[addrs[i] / Q] = 1;
			d.resident[addrs[i] / Q] = 1;
		}
		dirt_hold(&d, B, addrs, sizes, 1);
		if (round == 0) {
			/* every fifth area stays held from now on, written, inside the runs */
			for (unsigned i = 0; i < KEEP; i++) {
				keep[i] = addrs[i * 5 + 2];
				addrs[i * 5 + 2] = addrs[B - 1 - i];
			}
			assert_int_equal(va_free_batch(vs, B - KEEP, addrs, NULL, NULL), 0);
			dirt_hold(&d, B - KEEP, addrs, sizes, 0);
			continue;
		}
		assert_int_equal(va_free_batch(vs, B, addrs, NULL, NULL), 0);
		dirt_hold(&d, B, addrs, sizes, 0);
		CHECK(vs);
	}
	/* without runs there would be a call per recycled area */
	assert_true(d.zeros - zeros_before < handed_dirty / 2);
	assert_int_equal(va_free_batch(vs, KEEP, keep, NULL, NULL), 0);
	CHECK(vs);
	va_destroy(vs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_recycled_blocks_zeroed_when_taken),
	    cmocka_unit_test(test_recycled_runs_zeroed_together),
	    cmocka_unit_test(test_recycled_into_home_pool),
	    cmocka_unit_test(test_release_free_exact_blocks),
	    cmocka_unit_test(test_release_free_cuts_big_blocks),
	    cmocka_unit_test(test_release_free_beside_allocations),
	    cmocka_unit_test(test_idle_timer_releases_free_space),
	    cmocka_unit_test(test_zero_pooled_in_place),
	    cmocka_unit_test(test_zero_many_in_drain),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
