/*
 * test_va_lazy_bound.c - the promise "past 2 x lazy_max the freeing thread drains itself",
 * read through va_get_stats: once a free has returned, lazy bytes are at most 2 x lazy_max,
 * plus one area for each other thread whose free is still under way. Lazy bytes reach the
 * shared counter in per-node batches, drain passes run beside new frees, pools decay
 * through the passes and va_release_free takes chunks out of the tree: none of it may
 * carry lazy bytes past the bound.
 */
#include <pthread.h>
#include <sched.h>
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

#include "vaspace.h"

#define Q      4096ull
#define ULL(x) ((unsigned long long)(x))

static unsigned scaled(unsigned n)
{
	const char *mode = getenv("VAD_TEST_MODE");

	if (mode && !strcmp(mode, "tsan"))
		return n / 8;
	if (mode && !strcmp(mode, "asan"))
		return n / 2;
	return n;
}

static uint64_t lazy_now(struct va_space *vs)
{
	struct va_stats st;

	va_get_stats(vs, &st);
	return st.lazy_bytes;
}

/* One thread, no background drain, areas of one quantum over four nodes (one-quantum
 * zones): every node holds a part of a batch the shared counter has not seen yet when the
 * counter reaches the threshold. Lazy bytes must still stay within 2 x lazy_max after
 * every free. */
static void test_bound_with_unflushed_batches(void **state)
{
	enum { N = 2000 };
	for (unsigned nodes = 1; nodes <= 8; nodes *= 2) {
		struct va_config cfg = {.size = 4 * N * Q,
					.quantum = Q,
					.nodes = nodes,
					.zone_size = Q,
					.lazy_max = 64 * Q,
					.no_pools = true,
					.no_thread = true};
		struct va_space *vs = NULL;
		static uint64_t a[N];
		uint64_t worst = 0;
		char msg[256];

		(void)state;
		assert_int_equal(va_create(&cfg, &vs), 0);
		for (unsigned i = 0; i < N; i++)
			assert_int_equal(va_alloc(vs, Q, 0, NULL, &a[i]), 0);
		for (unsigned i = 0; i < N; i++) {
			uint64_t l;

			assert_int_equal(va_free(vs, a[i], NULL), 0);
			l = lazy_now(vs);
			if (l > worst)
				worst = l;
			if (l > 2 * cfg.lazy_max)
				fail_msg("%u nodes: after %u frees lazy bytes are %llu, over 2 x "
					 "lazy_max (%llu)",
					 nodes, i + 1, ULL(l), ULL(2 * cfg.lazy_max));
		}
		assert_int_equal(va_check(vs, msg, sizeof(msg)), 0);
		print_message("%u nodes: worst lazy bytes %llu of 2 x lazy_max %llu\n", nodes,
			      ULL(worst), ULL(2 * cfg.lazy_max));
		va_destroy(vs);
	}
}

/* ---- frees beside drain passes ---------------------------------------------------------- */

#define FREERS 3

struct race {
	struct va_space *vs;
	uint64_t bound;		       /* 2 x lazy_max + (FREERS - 1) areas */
	atomic_uint_fast64_t progress; /* frees done, all threads */
	atomic_uint_fast64_t worst, slow_releases, violations;
	atomic_bool releasing_free; /* a thread runs va_release_free in a loop */
	atomic_bool stop;
	char first[200];
	pthread_mutex_t lock;
};

/* A slow release: a drain pass stays open while the freers go on (until they have freed
 * more, or for 1 ms at most: a freer may be waiting for this very pass). */
static void slow_release(void *ctx, uint64_t start, uint64_t size)
{
	struct race *r = ctx;
	uint64_t p0 = atomic_load(&r->progress);
	struct timespec t0, t;

	(void)start;
	(void)size;
	atomic_fetch_add(&r->slow_releases, 1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		sched_yield();
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (atomic_load(&r->progress) < p0 + 4 &&
		 (t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 1000000L);
}

struct freer {
	struct race *r;
	unsigned id;
};

static void *freer_main(void *arg)
{
	struct freer *f = arg;
	struct race *r = f->r;
	enum { HELD = 512 };
	static __thread uint64_t a[HELD];
	unsigned rounds = scaled(40);

	va_set_home_node(f->id);
	for (unsigned round = 0; round < rounds && !atomic_load(&r->stop); round++) {
		for (unsigned i = 0; i < HELD; i++)
			if (va_alloc(r->vs, 4 * Q, 0, NULL, &a[i])) {
				pthread_mutex_lock(&r->lock);
				snprintf(r->first, sizeof(r->first), "va_alloc failed");
				pthread_mutex_unlock(&r->lock);
				atomic_fetch_add(&r->violations, 1);
				atomic_store(&r->stop, true);
				return NULL;
			}
		for (unsigned i = 0; i < HELD; i++) {
			uint64_t l, w;

			va_free(r->vs, a[i], NULL);
			atomic_fetch_add(&r->progress, 1);
			l = lazy_now(r->vs);
			w = atomic_load(&r->worst);
			while (l > w && !atomic_compare_exchange_weak(&r->worst, &w, l))
				;
			if (l > r->bound && atomic_fetch_add(&r->violations, 1) == 0) {
				pthread_mutex_lock(&r->lock);
				snprintf(r->first, sizeof(r->first),
					 "thread %u, round %u, free %u: lazy bytes %llu > %llu",
					 f->id, round, i, ULL(l), ULL(r->bound));
				pthread_mutex_unlock(&r->lock);
			}
		}
	}
	return NULL;
}

static void *release_free_main(void *arg)
{
	struct race *r = arg;

	while (!atomic_load(&r->stop))
		va_release_free(r->vs);
	return NULL;
}

/* Three threads free (areas of four quanta, on pools that decay through every pass) while
 * the background thread's passes are held open by a slow release callback; with and
 * without va_release_free running beside them. */
static void test_bound_beside_drain_passes(void **state)
{
	for (int with_release_free = 0; with_release_free < 2; with_release_free++) {
		struct race *r = calloc(1, sizeof(*r));
		struct va_config cfg = {.size = 1ull << 30,
					.quantum = Q,
					.nodes = 2,
					.lazy_max = 256 * Q,
					.pool_depth = 64,
					.idle_drain_ms = 1,
					.release = slow_release};
		pthread_t th[FREERS], rel;
		struct freer f[FREERS];
		char msg[256];

		(void)state;
		assert_non_null(r);
		pthread_mutex_init(&r->lock, NULL);
		cfg.release_ctx = r;
		r->bound = 2 * cfg.lazy_max + (FREERS - 1) * 4 * Q;
		assert_int_equal(va_create(&cfg, &r->vs), 0);
		if (with_release_free)
			assert_int_equal(pthread_create(&rel, NULL, release_free_main, r), 0);
		for (unsigned t = 0; t < FREERS; t++) {
			f[t] = (struct freer){.r = r, .id = t};
			assert_int_equal(pthread_create(&th[t], NULL, freer_main, &f[t]), 0);
		}
		for (unsigned t = 0; t < FREERS; t++)
			pthread_join(th[t], NULL);
		atomic_store(&r->stop, true);
		if (with_release_free)
			pthread_join(rel, NULL);
		assert_int_equal(va_check(r->vs, msg, sizeof(msg)), 0);
		print_message("%s va_release_free: worst lazy bytes %llu, bound %llu, %llu slow "
			      "releases\n",
			      with_release_free ? "with" : "without", ULL(atomic_load(&r->worst)),
			      ULL(r->bound), ULL(atomic_load(&r->slow_releases)));
		va_destroy(r->vs);
		if (atomic_load(&r->violations))
			fail_msg("%llu frees left lazy bytes past the bound; first: %s",
				 ULL(atomic_load(&r->violations)), r->first);
		assert_true(atomic_load(&r->slow_releases) > 0);
		pthread_mutex_destroy(&r->lock);
		free(r);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bound_with_unflushed_batches),
	    cmocka_unit_test(test_bound_beside_drain_passes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
