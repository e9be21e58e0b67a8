/*
 * test_va_restore.c - va_restore, the O(n) rebuild of a fresh space (lib/restore.c): the
 * result equals n va_alloc_range calls at the same places (every block va_walk reports, the
 * stats, va_check: busy tree, busy hash and pending array), for random layouts over 1 to 4
 * nodes and the exact mode (one lock) including none, one, adjacent
 * areas, areas at both ends and a full space; the space works on afterwards (frees merge,
 * allocations find the gaps); bad input (unsorted, overlapping, misaligned, empty, outside)
 * and a space with anything in it (busy, lazy) are refused with nothing changed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "va_testutil.h"
#include "vaspace.h"

#define Q 4096ull

/* exact: one node, no pools, eager frees (the single-lock mode) */
static struct va_space *make_mode(uint64_t size, unsigned nodes, bool exact)
{
	struct va_config cfg = {.base = 16 * Q,
				.size = size,
				.quantum = Q,
				.nodes = exact ? 1 : nodes,
				.zone_size = 4 * Q,
				.no_pools = exact,
				.eager = exact,
				.no_thread = true};
	struct va_space *vs = NULL;

	assert_int_equal(va_create(&cfg, &vs), 0);
	return vs;
}

static struct va_space *make(uint64_t size, unsigned nodes)
{
	return make_mode(size, nodes, false);
}

struct blocks {
	struct va_block_info b[4096];
	size_t n;
};

static int collect(void *ctx, const struct va_block_info *b)
{
	struct blocks *s = ctx;

	if (s->n < 4096)
		s->b[s->n++] = *b;
	return 0;
}

static int by_start(const void *a, const void *b)
{
	const struct va_block_info *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Every block of vs in address order (node left out: the home node differs by thread). */
static void snapshot(struct va_space *vs, struct blocks *s)
{
	s->n = 0;
	assert_int_equal(va_walk(vs, collect, s), 0);
	qsort(s->b, s->n, sizeof(s->b[0]), by_start);
	for (size_t i = 0; i < s->n; i++)
		s->b[i].node = 0;
}

/* A random sorted layout of n areas in a space of q quanta (gaps of 0 to 3 quanta). */
static size_t layout(unsigned seed, uint64_t base, uint64_t q, uint64_t *starts, uint64_t *sizes,
		     size_t max)
{
	srand(seed);
	uint64_t at = base + (uint64_t)(rand() % 2) * Q, end = base + q * Q;
	size_t n = 0;

	while (n < max) {
		uint64_t z = (uint64_t)(1 + rand() % 4) * Q;

		if (at + z > end)
			break;
		starts[n] = at;
		sizes[n++] = z;
		at += z + (uint64_t)(rand() % 4) * Q;
	}
	return n;
}

static void same_as_alloc_range(void **state)
{
	(void)state;
	static uint64_t starts[1024], sizes[1024];
	static void *owners[1024];
	static struct blocks a, b;

	for (unsigned seed = 0; seed < 40; seed++) {
		unsigned nodes = 1 + seed % 4;
		uint64_t q = 64 + seed * 29;
		size_t n = layout(seed, 16 * Q, q, starts, sizes, seed % 7 == 0 ? seed / 7 : 1024);
		for (size_t i = 0; i < n; i++)
			owners[i] = (void *)(uintptr_t)(16 * (i + 1));
		bool exact = seed % 8 == 4; /* a third of the one-node layouts */
		struct va_space *x = make_mode(q * Q, nodes, exact),
				*y = make_mode(q * Q, nodes, exact);

		assert_int_equal(va_restore(x, n, starts, sizes, owners), 0);
		CHECK(x);
		for (size_t i = 0; i < n; i++) {
			uint64_t got = 0;

			assert_int_equal(va_alloc_range(y, sizes[i], 0, starts[i],
							starts[i] + sizes[i], owners[i], &got),
					 0);
			assert_int_equal(got, starts[i]);
		}
		snapshot(x, &a);
		snapshot(y, &b);
		assert_int_equal(a.n, b.n);
		assert_memory_equal(a.b, b.b, a.n * sizeof(a.b[0]));
		struct va_stats sx, sy;

		va_get_stats(x, &sx);
		va_get_stats(y, &sy);
		assert_int_equal(sx.busy_bytes, sy.busy_bytes);
		assert_int_equal(sx.busy_blocks, sy.busy_blocks);
		assert_int_equal(sx.free_bytes, sy.free_bytes);
		assert_int_equal(sx.free_blocks, sy.free_blocks);
		assert_int_equal(sx.largest_free, sy.largest_free);
		assert_int_equal(sx.allocs, sy.allocs);
		for (size_t i = 0; i < n; i++) {
			struct va_area area;

			assert_int_equal(va_lookup(x, starts[i] + sizes[i] - 1, &area), 0);
			assert_int_equal(area.start, starts[i]);
			assert_ptr_equal(area.owner, owners[i]);
		}
		/* It works on: every other area freed, the gaps filled by allocations. */
		for (size_t i = 0; i < n; i += 2) {
			void *owner = NULL;

			assert_int_equal(va_free(x, starts[i], &owner), 0);
			assert_ptr_equal(owner, owners[i]);
		}
		va_drain(x);
		CHECK(x);
		uint64_t addr;
		while (va_alloc(x, Q, 0, NULL, &addr) == 0)
			;
		CHECK(x);
		va_get_stats(x, &sx);
		assert_int_equal(sx.free_bytes, 0);
		va_destroy(x);
		va_destroy(y);
	}
}

static void full_and_empty(void **state)
{
	(void)state;
	uint64_t starts[1] = {16 * Q}, sizes[1] = {64 * Q};
	struct va_space *vs = make(64 * Q, 2);
	struct va_stats st;

	assert_int_equal(va_restore(vs, 1, starts, sizes, NULL), 0); /* the whole space */
	CHECK(vs);
	va_get_stats(vs, &st);
	assert_int_equal(st.free_blocks, 0);
	assert_int_equal(st.busy_bytes, 64 * Q);
	uint64_t addr;
	assert_int_equal(va_alloc(vs, Q, 0, NULL, &addr), VA_ENOSPC);
	va_destroy(vs);
	vs = make(64 * Q, 2);
	assert_int_equal(va_restore(vs, 0, NULL, NULL, NULL), 0); /* nothing: as created */
	CHECK(vs);
	va_get_stats(vs, &st);
	assert_int_equal(st.free_blocks, 1);
	assert_int_equal(st.free_bytes, 64 * Q);
	va_destroy(vs);
}

/* Refused with nothing changed: the space still allocates all of itself. */
static void refused(struct va_space *vs, size_t n, const uint64_t *starts, const uint64_t *sizes,
		    int want)
{
	struct va_stats st;

	assert_int_equal(va_restore(vs, n, starts, sizes, NULL), want);
	CHECK(vs);
	va_get_stats(vs, &st);
	assert_int_equal(st.busy_blocks, 0);
	assert_int_equal(st.free_blocks, 1);
}

static void bad_input(void **state)
{
	(void)state;
	struct va_space *vs = make(64 * Q, 2);
	uint64_t b = 16 * Q;
	uint64_t unsorted[2] = {b + 4 * Q, b}, overlap[2] = {b, b + Q}, two[2] = {Q, Q};
	uint64_t misaligned[1] = {b + 1}, one[1] = {Q}, zero[1] = {0}, at[1] = {b};
	uint64_t outside[1] = {b + 64 * Q}, below[1] = {0}, big[1] = {65 * Q};
	uint64_t tail[1] = {b + 63 * Q}, past[1] = {2 * Q};

	refused(vs, 2, unsorted, two, VA_EINVAL);
	refused(vs, 2, overlap, (uint64_t[]){2 * Q, Q}, VA_EINVAL);
	refused(vs, 1, misaligned, one, VA_EINVAL);
	refused(vs, 1, at, zero, VA_EINVAL);
	refused(vs, 1, at, (uint64_t[]){Q + 1}, VA_EINVAL);
	refused(vs, 1, outside, one, VA_ERANGE);
	refused(vs, 1, below, one, VA_ERANGE);
	refused(vs, 1, at, big, VA_ERANGE);
	refused(vs, 1, tail, past, VA_ERANGE);
	assert_int_equal(va_restore(NULL, 0, NULL, NULL, NULL), VA_EINVAL);
	assert_int_equal(va_restore(vs, 1, NULL, one, NULL), VA_EINVAL);
	/* A space with something in it is not rebuilt; emptied and drained again, it is. */
	uint64_t addr;
	assert_int_equal(va_alloc(vs, Q, 0, NULL, &addr), 0);
	assert_int_equal(va_restore(vs, 1, at, one, NULL), VA_EINVAL);
	CHECK(vs);
	assert_int_equal(va_free(vs, addr, NULL), 0);
	assert_int_equal(va_restore(vs, 1, at, one, NULL), VA_EINVAL); /* lazy: not empty */
	va_drain(vs);
	assert_int_equal(va_restore(vs, 1, (uint64_t[]){b + 8 * Q}, one, NULL), 0);
	CHECK(vs);
	va_destroy(vs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(same_as_alloc_range),
	    cmocka_unit_test(full_and_empty),
	    cmocka_unit_test(bad_input),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
