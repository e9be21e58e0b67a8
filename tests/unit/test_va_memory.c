/*
 * test_va_memory.c - the allocator's memory per busy range: 1M single-quantum ranges in one
 * space, measured as the growth of the process's resident memory (what the daemon pays
 * per live range on the allocator's side), and as the growth of the slab bytes the object
 * cache holds (va_stats.object_bytes). Resident memory is bounded at 64 B (the 48 B a block
 * object takes, the busy hash's slots and the arrays' slack) and only in the plain build
 * (sanitizers add their own overhead); the slab bytes, which no sanitizer changes, at 50 B
 * (48 B and a slab header per 1364 objects) in every build.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "vaspace.h"

#define Q 4096ull

/* Resident bytes of this process, from /proc/self/statm. */
static uint64_t rss_bytes(void)
{
	unsigned long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	assert_non_null(f);
	assert_int_equal(fscanf(f, "%lu %lu", &size, &resident), 2);
	fclose(f);
	return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static bool plain_build(void)
{
	const char *mode = getenv("VAD_TEST_MODE");

	return !mode || !strcmp(mode, "normal");
}

static void test_bytes_per_busy_range(void **state)
{
	const uint64_t n = plain_build() ? 1000000 : 200000;
	struct va_config cfg = {.size = n * Q + 1024 * Q, .quantum = Q, .nodes = 2};
	struct va_space *vs = NULL;
	uint64_t before, after, addr, per_range, obj_per_range;
	struct va_stats st, st0;
	char msg[256];

	(void)state;
	assert_int_equal(va_create(&cfg, &vs), 0);
	va_set_home_node(0);
	va_get_stats(vs, &st0);
	before = rss_bytes();
	for (uint64_t i = 0; i < n; i++)
		assert_int_equal(va_alloc(vs, Q, 0, NULL, &addr), 0);
	after = rss_bytes();
	va_get_stats(vs, &st);
	assert_int_equal(st.busy_blocks, n);
	per_range = (after - before) / n;
	obj_per_range = (st.object_bytes - st0.object_bytes) / n;
	print_message("%llu busy ranges of one quantum: resident memory +%llu bytes, %llu bytes "
		      "per range; block objects +%llu bytes, %llu per range\n",
		      (unsigned long long)n, (unsigned long long)(after - before),
		      (unsigned long long)per_range,
		      (unsigned long long)(st.object_bytes - st0.object_bytes),
		      (unsigned long long)obj_per_range);
	if (n <= 1000000) /* the check walks every block: only where it is quick */
		assert_int_equal(va_check(vs, msg, sizeof(msg)), 0);
	va_destroy(vs);
	if (obj_per_range > 50)
		fail_msg("block objects take %llu bytes per busy range, over 50",
			 (unsigned long long)obj_per_range);
	/* 48 B of block object, and the busy hash's slots (8 B each, between 9/16 and 3/4
	 * full: 10.7 to 14.3 B per busy range), and the lazy array's slack */
	if (plain_build() && per_range > 64)
		fail_msg("%llu bytes per busy range, over 64", (unsigned long long)per_range);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bytes_per_busy_range),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
