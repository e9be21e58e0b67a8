/*
 * test_va_batch.c - va_alloc_batch and va_free_batch at their edges: all or nothing when an
 * area of the batch cannot be had (which index failed, nothing kept, counters), arguments,
 * mixed pool and non-pool areas, free runs across nodes, an invalid address in the middle
 * of a free batch, eager mode, and one drain per free batch. test_va_model.c checks the
 * batches against the reference model on random workloads; va_check runs after every step.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>

#include "va_testutil.h"
#include "vaspace.h"

#define Q 4096ull

struct rel_log {
	unsigned calls;
	uint64_t bytes;
};

static void on_release(void *ctx, uint64_t start, uint64_t size)
{
	struct rel_log *l = ctx;

	(void)start;
	__atomic_add_fetch(&l->calls, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&l->bytes, size, __ATOMIC_RELAXED);
}

static struct va_space *make(uint64_t size, unsigned nodes, bool eager, struct rel_log *log)
{
	struct va_config cfg = {.size = size,
				.quantum = Q,
				.nodes = nodes,
				.eager = eager,
				.no_thread = true,
				.release = log ? on_release : NULL,
				.release_ctx = log};
	struct va_space *vs = NULL;

	assert_int_equal(va_create(&cfg, &vs), 0);
	CHECK(vs);
	return vs;
}

static struct va_stats stats(struct va_space *vs)
{
	struct va_stats st;

	va_get_stats(vs, &st);
	return st;
}

/* A batch whose last area does not fit: VA_ENOSPC, its index, nothing kept. */
static void alloc_all_or_nothing(void **state)
{
	struct rel_log log = {0};
	struct va_space *vs = make(64 * Q, 2, false, &log);
	uint64_t sizes[5] = {Q, 2 * Q, Q, 3 * Q, 60 * Q}, addrs[5]; /* 67 quanta of 64 */
	void *owners[5] = {(void *)16, (void *)32, (void *)48, (void *)64, (void *)80};
	size_t failed = 99;

	(void)state;
	assert_int_equal(va_alloc_batch(vs, 5, sizes, 0, owners, addrs, &failed), VA_ENOSPC);
	assert_int_equal(failed, 4);
	CHECK(vs);
	struct va_stats st = stats(vs);
	assert_int_equal(st.busy_bytes, 0);
	assert_int_equal(st.allocs, 4); /* the four that fitted, given back */
	assert_int_equal(st.frees, 4);
	assert_int_equal(st.fails, 1);
	/* the space is whole again once the lazy areas are released */
	va_drain(vs);
	CHECK(vs);
	st = stats(vs);
	assert_int_equal(st.free_bytes, 64 * Q);
	assert_int_equal(st.largest_free, 64 * Q);
	va_destroy(vs);
}

/* The first area failing leaves nothing to undo; a bad size or alignment fails like va_alloc. */
static void alloc_errors(void **state)
{
	struct va_space *vs = make(64 * Q, 1, false, NULL);
	uint64_t sizes[3] = {Q, 0, Q}, addrs[3];
	size_t failed = 99;

	(void)state;
	assert_int_equal(va_alloc_batch(NULL, 1, sizes, 0, NULL, addrs, NULL), VA_EINVAL);
	assert_int_equal(va_alloc_batch(vs, 1, NULL, 0, NULL, addrs, NULL), VA_EINVAL);
	assert_int_equal(va_alloc_batch(vs, 1, sizes, 0, NULL, NULL, NULL), VA_EINVAL);
	assert_int_equal(va_alloc_batch(vs, 0, NULL, 0, NULL, NULL, NULL), 0);
	assert_int_equal(va_alloc_batch(vs, 3, sizes, 0, NULL, addrs, &failed), VA_ESIZE);
	assert_int_equal(failed, 1);
	assert_int_equal(va_alloc_batch(vs, 1, sizes, 3 * Q, NULL, addrs, &failed), VA_EALIGN);
	assert_int_equal(failed, 0);
	uint64_t huge = 65 * Q;
	assert_int_equal(va_alloc_batch(vs, 1, &huge, 0, NULL, addrs, &failed), VA_EOVERFLOW);
	assert_int_equal(failed, 0);
	CHECK(vs);
	assert_int_equal(stats(vs).busy_bytes, 0);
	va_destroy(vs);
}

/* Pool sizes, an aligned area and one too big for the pools in one batch: each area is where
 * it says, of its size, with its owner, disjoint from the others. */
static void alloc_mixed(void **state)
{
	struct va_space *vs = make(1 << 30, 2, false, NULL);
	enum { N = 200 };
	uint64_t sizes[N], addrs[N];
	void *owners[N];

	(void)state;
	for (unsigned i = 0; i < N; i++) {
		sizes[i] = i % 50 == 7 ? 300 * Q : (1 + i % 5) * Q - (i % 3);
		owners[i] = (void *)(uintptr_t)(16 * (i + 1));
	}
	assert_int_equal(va_alloc_batch(vs, N, sizes, 0, owners, addrs, NULL), 0);
	CHECK(vs);
	for (unsigned i = 0; i < N; i++) {
		struct va_area a;
		uint64_t want = (sizes[i] + Q - 1) & ~(Q - 1);

		assert_int_equal(va_lookup(vs, addrs[i], &a), 0);
		assert_int_equal(a.start, addrs[i]);
		assert_int_equal(a.size, want);
		assert_ptr_equal(a.owner, owners[i]);
	}
	assert_int_equal(stats(vs).busy_blocks, N);
	/* aligned batch: every address a multiple of the alignment */
	uint64_t asz[4] = {Q, Q, 2 * Q, Q}, aaddr[4];
	assert_int_equal(va_alloc_batch(vs, 4, asz, 16 * Q, NULL, aaddr, NULL), 0);
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(aaddr[i] % (16 * Q), 0);
	CHECK(vs);
	assert_int_equal(va_free_batch(vs, N, addrs, NULL, NULL), 0);
	assert_int_equal(va_free_batch(vs, 4, aaddr, NULL, NULL), 0);
	CHECK(vs);
	assert_int_equal(stats(vs).busy_bytes, 0);
	va_destroy(vs);
}

/* Areas of several nodes interleaved in one free batch: all freed, owners returned in order. */
static void free_across_nodes(void **state)
{
	struct va_space *vs = make(1 << 28, 4, false, NULL);
	enum { N = 64 };
	uint64_t sizes[N], addrs[N], shuffled[N];
	void *owners[N], *got[N];

	(void)state;
	for (unsigned i = 0; i < N; i++) {
		sizes[i] = 70 * Q; /* past a 64-quantum zone: consecutive areas change node */
		owners[i] = (void *)(uintptr_t)(16 * (i + 1));
	}
	assert_int_equal(va_alloc_batch(vs, N, sizes, 0, owners, addrs, NULL), 0);
	for (unsigned i = 0; i < N; i++)
		shuffled[i] = addrs[(i * 37) % N];
	size_t done = 0;
	assert_int_equal(va_free_batch(vs, N, shuffled, got, &done), 0);
	assert_int_equal(done, N);
	for (unsigned i = 0; i < N; i++)
		assert_ptr_equal(got[i], owners[(i * 37) % N]);
	CHECK(vs);
	struct va_stats st = stats(vs);
	assert_int_equal(st.busy_bytes, 0);
	assert_int_equal(st.frees, N);
	va_destroy(vs);
}

/* An invalid address stops the batch there with va_free's code; the rest stay busy. */
static void free_stops_at_error(void **state)
{
	struct va_space *vs = make(1 << 24, 2, false, NULL);
	uint64_t sizes[6] = {Q, 2 * Q, Q, Q, 4 * Q, Q}, addrs[6], batch[6];
	size_t done = 99;

	(void)state;
	assert_int_equal(va_alloc_batch(vs, 6, sizes, 0, NULL, addrs, NULL), 0);
	/* inside area 4 (not yet freed), not its start */
	memcpy(batch, addrs, sizeof(batch));
	batch[2] = addrs[4] + Q;
	assert_int_equal(va_free_batch(vs, 6, batch, NULL, &done), VA_ENOTSTART);
	assert_int_equal(done, 2);
	assert_int_equal(stats(vs).busy_blocks, 4);
	/* area 0 again: freed twice */
	batch[0] = addrs[2];
	batch[1] = addrs[0];
	assert_int_equal(va_free_batch(vs, 2, batch, NULL, &done), VA_EDOUBLEFREE);
	assert_int_equal(done, 1);
	/* outside the space */
	batch[0] = addrs[3];
	batch[1] = 1ull << 40;
	assert_int_equal(va_free_batch(vs, 2, batch, NULL, &done), VA_ERANGE);
	assert_int_equal(done, 1);
	CHECK(vs);
	assert_int_equal(stats(vs).busy_blocks, 2);
	assert_int_equal(va_free_batch(vs, 2, addrs + 4, NULL, &done), 0);
	assert_int_equal(done, 2);
	assert_int_equal(va_free_batch(NULL, 1, addrs, NULL, &done), VA_EINVAL);
	assert_int_equal(done, 0);
	assert_int_equal(va_free_batch(vs, 0, NULL, NULL, &done), 0);
	CHECK(vs);
	assert_int_equal(stats(vs).busy_bytes, 0);
	va_destroy(vs);
}

/* Eager mode: a batch frees (and releases) each area at once, one callback per area. */
static void free_eager(void **state)
{
	struct rel_log log = {0};
	struct va_space *vs = make(1 << 24, 1, true, &log);
	uint64_t sizes[8] = {Q, Q, 2 * Q, Q, Q, 3 * Q, Q, Q}, addrs[8];

	(void)state;
	assert_int_equal(va_alloc_batch(vs, 8, sizes, 0, NULL, addrs, NULL), 0);
	assert_int_equal(va_free_batch(vs, 8, addrs, NULL, NULL), 0);
	assert_int_equal(log.calls, 8);
	assert_int_equal(log.bytes, 11 * Q);
	CHECK(vs);
	struct va_stats st = stats(vs);
	assert_int_equal(st.busy_bytes, 0);
	assert_int_equal(st.lazy_bytes, 0);
	assert_int_equal(st.free_bytes + st.pooled_bytes, 1 << 24);
	va_destroy(vs);
}

/* Frees past lazy_max in one batch: a single drain after the batch, not one per node run. */
static void one_drain_per_batch(void **state)
{
	struct rel_log log = {0};
	struct va_config cfg = {.size = 1 << 26,
				.quantum = Q,
				.nodes = 2,
				.lazy_max = 16 * Q,
				.no_pools = true,
				.no_thread = true,
				.release = on_release,
				.release_ctx = &log};
	struct va_space *vs = NULL;
	enum { N = 256 };
	uint64_t sizes[N], addrs[N];

	(void)state;
	assert_int_equal(va_create(&cfg, &vs), 0);
	for (unsigned i = 0; i < N; i++)
		sizes[i] = Q;
	assert_int_equal(va_alloc_batch(vs, N, sizes, 0, NULL, addrs, NULL), 0);
	uint64_t drains0 = stats(vs).drains;
	assert_int_equal(va_free_batch(vs, N, addrs, NULL, NULL), 0);
	CHECK(vs);
	struct va_stats st = stats(vs);
	assert_true(st.drains - drains0 <= 1);
	assert_int_equal(st.busy_bytes, 0);
	va_drain(vs);
	assert_int_equal(stats(vs).free_bytes, 1 << 26);
	va_destroy(vs);
}

/* ---- threads ------------------------------------------------------------------------- */

struct batch_worker {
	struct va_space *vs;
	unsigned id, rounds;
	uint64_t *handoff; /* areas this thread allocated for the next thread to free */
	size_t handoff_n;
	int errors;
};

/* Alternating batches of pool sizes and larger areas; every area tagged with the thread; the
 * tags read back on free must be the thread's own. */
static void *batch_worker_main(void *arg)
{
	struct batch_worker *w = arg;
	enum { N = 48 };
	uint64_t sizes[N], addrs[N];
	void *owners[N], *got[N];

	va_set_home_node(w->id);
	for (unsigned r = 0; r < w->rounds; r++) {
		for (unsigned i = 0; i < N; i++) {
			sizes[i] = (i + r) % 9 == 0 ? (40 + i) * Q : (1 + (i + r) % 4) * Q;
			owners[i] = (void *)(uintptr_t)(16 * (w->id + 1));
		}
		if (va_alloc_batch(w->vs, N, sizes, 0, owners, addrs, NULL)) {
			w->errors++;
			continue;
		}
		if (va_free_batch(w->vs, N, addrs, got, NULL))
			w->errors++;
		for (unsigned i = 0; i < N; i++)
			if (got[i] != owners[i])
				w->errors++;
	}
	/* leave some for another thread to free */
	for (unsigned i = 0; i < N; i++)
		sizes[i] = Q;
	if (va_alloc_batch(w->vs, N, sizes, 0, NULL, w->handoff, NULL) == 0)
		w->handoff_n = N;
	return NULL;
}

/* Threads with different home nodes batch at once (TSan checks the locking), then each
 * frees what its neighbour left: the space must be consistent and empty. */
static void threads_batch(void **state)
{
	enum { T = 4 };
	const char *mode = getenv("VAD_TEST_MODE");
	unsigned rounds = mode && strcmp(mode, "normal") ? 300 : 2000;
	struct va_config cfg = {.size = 1 << 30, .quantum = Q, .nodes = 3, .lazy_max = 256 * Q};
	struct va_space *vs = NULL;
	struct batch_worker w[T];
	uint64_t handoff[T][48];
	pthread_t th[T];

	(void)state;
	assert_int_equal(va_create(&cfg, &vs), 0);
	for (unsigned i = 0; i < T; i++) {
		w[i] = (struct batch_worker){
		    .vs = vs, .id = i, .rounds = rounds, .handoff = handoff[i]};
		assert_int_equal(pthread_create(&th[i], NULL, batch_worker_main, &w[i]), 0);
	}
	for (unsigned i = 0; i < T; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	for (unsigned i = 0; i < T; i++) {
		assert_int_equal(w[i].errors, 0);
		assert_int_equal(w[i].handoff_n, 48);
	}
	CHECK(vs);
	for (unsigned i = 0; i < T; i++)
		assert_int_equal(va_free_batch(vs, 48, handoff[(i + 1) % T], NULL, NULL), 0);
	CHECK(vs);
	struct va_stats st = stats(vs);
	assert_int_equal(st.busy_bytes, 0);
	assert_int_equal(st.allocs, st.frees);
	va_drain(vs);
	assert_int_equal(stats(vs).free_bytes, 1 << 30);
	va_destroy(vs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(alloc_all_or_nothing), cmocka_unit_test(alloc_errors),
	    cmocka_unit_test(alloc_mixed),	    cmocka_unit_test(free_across_nodes),
	    cmocka_unit_test(free_stops_at_error),  cmocka_unit_test(free_eager),
	    cmocka_unit_test(one_drain_per_batch),  cmocka_unit_test(threads_batch),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
