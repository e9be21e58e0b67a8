/*
 * test_service_latency.c - the round trip a client pays: alloc+free pairs through
 * libvad against the real daemon, timed one by one. Prints the median and tail (a
 * figure for the closing note, not a threshold); fails only if an operation fails.
 */
#include <stdlib.h>
#include <string.h>

#include "vtassert.h"

#define PAGE 4096u

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static double pct_us(const uint64_t *sorted, int n, double pct)
{
	int i = (int)(pct / 100.0 * (n - 1) + 0.5);
	return (double)sorted[i] / 1000.0;
}

/* Time n alloc+free pairs of size bytes (the first warmup are not counted). */
static void measure(vad_client *c, size_t size, int n, int warmup, const char *label)
{
	uint64_t *ns = calloc((size_t)n, sizeof(*ns));
	assert_non_null(ns);
	for (int i = -warmup; i < n; i++) {
		void *p;
		uint64_t t0 = vt_now_ns();
		VT_ASSERT_OK(c, vad_alloc(c, size, 0, &p));
		VT_ASSERT_OK(c, vad_free(c, p));
		uint64_t t1 = vt_now_ns();
		if (i >= 0)
			ns[i] = t1 - t0;
	}
	qsort(ns, (size_t)n, sizeof(*ns), cmp_u64);
	print_message("%s: alloc+free round trip over %d pairs (%s build): median %.1f us, "
		      "p90 %.1f us, p99 %.1f us, max %.1f us\n",
		      label, n, getenv("VAD_TEST_MODE") ? getenv("VAD_TEST_MODE") : "normal",
		      pct_us(ns, n, 50), pct_us(ns, n, 90), pct_us(ns, n, 99), pct_us(ns, n, 100));
	assert_true(ns[n / 2] > 0);
	free(ns);
}

static void test_alloc_free_round_trip(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "latency", &c));
	int n = vt_scale(5000);
	measure(c, PAGE, n, vt_scale(200), "4 KiB");
	measure(c, 64 * PAGE, n, vt_scale(200), "256 KiB");
	struct vad_stats s;
	VT_ASSERT_OK(c, vad_stats(c, &s));
	assert_int_equal(0, s.held_ranges);
	vad_close(c);
	assert_int_equal(0, vt_daemon_stop(d));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_alloc_free_round_trip, vt_fixture_daemon_setup,
					    vt_fixture_daemon_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
