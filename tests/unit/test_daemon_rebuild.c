/* test_daemon_rebuild.c - the restore's ordering (daemon/radix_sort.c, persist_rebuild.c):
 * the radix sort against qsort on random, sorted, equal and wide keys (stable); the holds of
 * a state file put in (arena, offset, holder) order however they come (shuffled, two arenas,
 * shared places, offsets too wide for the radix key), and a file that is inconsistent as a
 * whole (a place recorded twice for one holder, two sizes for one place, overlapping ranges)
 * refused with a sentence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "persist_rebuild.h"
#include "radix_sort.h"

#define N 20000

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int by_key_then_val(const void *a, const void *b)
{
	const struct vad_sort_pair *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->val < y->val ? -1 : x->val > y->val;
}

/* Keys drawn by make; vals the original index, so stability shows as val order. */
static void radix_matches_qsort(uint64_t (*make)(size_t i))
{
	static struct vad_sort_pair a[N], tmp[N], want[N];
	for (size_t i = 0; i < N; i++)
		a[i] = want[i] = (struct vad_sort_pair){make(i), i};
	qsort(want, N, sizeof(want[0]), by_key_then_val);
	struct vad_sort_pair *got = vad_radix_sort(a, tmp, N);
	assert_memory_equal(got, want, sizeof(want));
}

static uint64_t random_key(size_t i)
{
	(void)i;
	return next();
}

static uint64_t page_key(size_t i)
{
	(void)i;
	return (next() % 100000) << 12; /* offsets: quantum multiples, many equal */
}

static uint64_t sorted_key(size_t i)
{
	return i * 4096;
}

static uint64_t equal_key(size_t i)
{
	(void)i;
	return 42;
}

static uint64_t top_bits_key(size_t i)
{
	(void)i;
	return next() & 0xff00000000000000ull; /* only the last digit differs */
}

static void test_radix_sort(void **state)
{
	(void)state;
	radix_matches_qsort(random_key);
	radix_matches_qsort(page_key);
	radix_matches_qsort(sorted_key);
	radix_matches_qsort(equal_key);
	radix_matches_qsort(top_bits_key);
	struct vad_sort_pair one = {7, 0}, spare;
	assert_ptr_equal(vad_radix_sort(&one, &spare, 1), &one);
	assert_ptr_equal(vad_radix_sort(NULL, NULL, 0), NULL);
}

static const char *const names[2] = {"default", "big"};

static int by_place(const void *a, const void *b)
{
	const struct vad_state_hold *x = a, *y = b;
	if (x->arena != y->arena)
		return x->arena < y->arena ? -1 : 1;
	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	return x->holder < y->holder ? -1 : x->holder > y->holder;
}

/* n holds over two arenas: place k of arena a at offset base + k * 8 KiB (size 4 KiB), every
 * 16th place shared by three holders; shuffled. */
static size_t make_holds(struct vad_state_hold *h, uint64_t base)
{
	size_t n = 0;
	for (uint32_t a = 0; a < 2; a++)
		for (uint64_t k = 0; k < 4000; k++)
			for (uint32_t holder = 1; holder <= (k % 16 ? 1u : 3u); holder++)
				h[n++] =
				    (struct vad_state_hold){.arena = a,
							    .holder = holder * 7 + (uint32_t)k % 5,
							    .count = 1,
							    .offset = base + k * 8192,
							    .size = 4096};
	for (size_t i = n; i > 1; i--) {
		size_t j = next() % i;
		struct vad_state_hold t = h[i - 1];
		h[i - 1] = h[j];
		h[j] = t;
	}
	return n;
}

static void sorts_to(struct vad_state_hold *h, size_t n)
{
	static struct vad_state_hold want[16000];
	memcpy(want, h, n * sizeof(*h));
	qsort(want, n, sizeof(*want), by_place);
	struct vad_state_hold *spare = NULL;
	char err[256] = "";
	assert_int_equal(vad_rebuild_sort(&h, n, &spare, names, 2, err, sizeof(err)), 0);
	assert_memory_equal(h, want, n * sizeof(*h));
	if (spare)
		free(h); /* the sorted copy; the caller's buffer is spare */
}

static void test_rebuild_sort(void **state)
{
	(void)state;
	static struct vad_state_hold buf[16000];
	size_t n = make_holds(buf, 0);
	struct vad_state_hold *h = malloc(n * sizeof(*h));
	assert_non_null(h);
	memcpy(h, buf, n * sizeof(*h));
	sorts_to(h, n); /* shuffled: the radix path */
	qsort(h, n, sizeof(*h), by_place);
	sorts_to(h, n); /* in order: nothing to do */
	n = make_holds(buf, 1ull << 50);
	memcpy(h, buf, n * sizeof(*h));
	sorts_to(h, n); /* offsets past the radix key: the qsort path */
	free(h);
}

static void refused(struct vad_state_hold *h, size_t n, const char *why)
{
	struct vad_state_hold *spare = NULL;
	char err[256] = "";
	assert_int_equal(vad_rebuild_sort(&h, n, &spare, names, 2, err, sizeof(err)), -1);
	if (!strstr(err, why)) {
		print_error("want '%s' in '%s'\n", why, err);
		fail();
	}
	assert_non_null(strstr(err, "arena default"));
	if (spare)
		free(h);
}

static void test_inconsistent(void **state)
{
	(void)state;
	struct vad_state_hold twice[3] = {
	    {.holder = 5, .count = 1, .offset = 8192, .size = 4096},
	    {.holder = 6, .count = 1, .offset = 0, .size = 4096},
	    {.holder = 5, .count = 2, .offset = 8192, .size = 4096},
	};
	refused(twice, 3, "one holder is recorded twice for one range");
	struct vad_state_hold sizes[2] = {
	    {.holder = 1, .count = 1, .offset = 4096, .size = 8192},
	    {.holder = 2, .count = 1, .offset = 4096, .size = 4096},
	};
	refused(sizes, 2, "two holds of one range disagree on its size");
	struct vad_state_hold overlap[2] = {
	    {.holder = 1, .count = 1, .offset = 8192, .size = 4096},
	    {.holder = 2, .count = 1, .offset = 0, .size = 12288},
	};
	refused(overlap, 2, "two ranges overlap");
	/* The same places in two arenas are no overlap. */
	struct vad_state_hold apart[2] = {
	    {.arena = 1, .holder = 1, .count = 1, .offset = 0, .size = 4096},
	    {.arena = 0, .holder = 1, .count = 1, .offset = 0, .size = 4096},
	};
	struct vad_state_hold *h = apart, *spare = NULL;
	char err[256];
	assert_int_equal(vad_rebuild_sort(&h, 2, &spare, names, 2, err, sizeof(err)), 0);
	assert_int_equal(h[0].arena, 0);
	if (spare)
		free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_radix_sort),
	    cmocka_unit_test(test_rebuild_sort),
	    cmocka_unit_test(test_inconsistent),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
