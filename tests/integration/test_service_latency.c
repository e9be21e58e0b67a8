/*
 * test_service_latency.c - the round trip a client pays: alloc+free pairs through
 * libvad against the real daemon, timed one by one, and the alloc latency the daemon
 * reports for them in its stats database. Prints the median and tail (figures, not
 * thresholds: those belong in the benchmarks) and checks that the two sides agree: the
 * daemon counted every alloc once, its percentiles are ordered, and no figure it reports
 * is longer than the client could have waited (each alloc the daemon timed happened inside
 * one round trip the client timed).
 */
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "vtassert.h"

#define PAGE 4096u

/* The daemon's histogram reports the middle of a bucket 1/4 of a power of two wide: at most
 * 1/8 above the longest value the bucket holds (latency.c: bucket_value). */
#define BUCKET_SLACK(ns) ((ns) + (ns) / 8)

/* What the client measured, warmup included (the daemon times those too). */
struct client_side {
	uint64_t pairs;	 /* alloc+free pairs made */
	uint64_t sum_ns; /* their round trips, summed */
	uint64_t max_ns; /* the longest one */
};

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

/* Time n alloc+free pairs of size bytes (the first warmup are not in the printed figures)
 * and add every pair to *cs. */
static void measure(vad_client *c, size_t size, int n, int warmup, const char *label,
		    struct client_side *cs)
{
	uint64_t *ns = calloc((size_t)n, sizeof(*ns));
	assert_non_null(ns);
	for (int i = -warmup; i < n; i++) {
		void *p;
		uint64_t t0 = vt_now_ns();
		VT_ASSERT_OK(c, vad_alloc(c, size, 0, &p));
		VT_ASSERT_OK(c, vad_free(c, p));
		uint64_t t = vt_now_ns() - t0;
		if (i >= 0)
			ns[i] = t;
		cs->pairs++;
		cs->sum_ns += t;
		if (t > cs->max_ns)
			cs->max_ns = t;
	}
	qsort(ns, (size_t)n, sizeof(*ns), cmp_u64);
	print_message("%s: alloc+free round trip over %d pairs (%s build): median %.1f us, "
		      "p90 %.1f us, p99 %.1f us, max %.1f us\n",
		      label, n, getenv("VAD_TEST_MODE") ? getenv("VAD_TEST_MODE") : "normal",
		      pct_us(ns, n, 50), pct_us(ns, n, 90), pct_us(ns, n, 99), pct_us(ns, n, 100));
	assert_true(ns[n / 2] > 0);
	free(ns);
}

/* One quantile the daemon reported over count allocs: its rank-th shortest value (rank as
 * latency.c computes it) is at least 8/9 of it, and so are the count - rank + 1 allocs from
 * there up. Their sum cannot exceed the round trips they happened in. */
static void assert_quantile_fits(const char *what, uint64_t reported, double p, uint64_t count,
				 const struct client_side *cs)
{
	uint64_t rank = (uint64_t)(p * (double)count);
	if (rank < 1)
		rank = 1;
	if (reported > BUCKET_SLACK(cs->max_ns))
		fail_msg("the daemon's alloc %s is %llu ns, yet no round trip the client made "
			 "took more than %llu ns",
			 what, (unsigned long long)reported, (unsigned long long)cs->max_ns);
	double at_least = (double)(count - rank + 1) * (double)reported * 8.0 / 9.0;
	if (at_least > (double)cs->sum_ns)
		fail_msg("the daemon's alloc %s of %llu ns over %llu allocs needs %.0f ns of "
			 "allocs, more than the %llu ns of round trips they happened in",
			 what, (unsigned long long)reported, (unsigned long long)count, at_least,
			 (unsigned long long)cs->sum_ns);
}

/* The stopped daemon's snapshots of arena "default": the allocs they timed add up to the
 * client's, and each row's figures are ordered and fit what the client measured. */
static void assert_daemon_latency_fits(const struct vt_daemon *d, const struct client_side *cs)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	assert_int_equal(SQLITE_OK, sqlite3_open_v2(d->stats_db, &db, SQLITE_OPEN_READONLY, NULL));
	assert_int_equal(SQLITE_OK,
			 sqlite3_prepare_v2(db,
					    "SELECT interval_allocs, alloc_p50_ns, alloc_p90_ns, "
					    "alloc_p99_ns, alloc_p999_ns, alloc_max_ns "
					    "FROM arena_snapshot WHERE arena = 'default' "
					    "ORDER BY snapshot_id",
					    -1, &st, NULL));
	uint64_t timed = 0;
	while (sqlite3_step(st) == SQLITE_ROW) {
		uint64_t v[6];
		for (int i = 0; i < 6; i++)
			v[i] = (uint64_t)sqlite3_column_int64(st, i);
		if (v[0] == 0)
			continue;
		print_message("daemon: %llu allocs timed: p50 %.1f us, p90 %.1f us, p99 %.1f us, "
			      "p99.9 %.1f us, max %.1f us\n",
			      (unsigned long long)v[0], (double)v[1] / 1e3, (double)v[2] / 1e3,
			      (double)v[3] / 1e3, (double)v[4] / 1e3, (double)v[5] / 1e3);
		timed += v[0];
		for (int i = 1; i < 5; i++)
			if (v[i] > v[i + 1])
				fail_msg("the daemon's alloc percentiles are out of order: %llu ns "
					 "before %llu ns",
					 (unsigned long long)v[i], (unsigned long long)v[i + 1]);
		assert_true(v[1] > 0);
		assert_quantile_fits("p50", v[1], 0.50, v[0], cs);
		assert_quantile_fits("p90", v[2], 0.90, v[0], cs);
		assert_quantile_fits("p99", v[3], 0.99, v[0], cs);
		assert_quantile_fits("max", v[5], 1.0, v[0], cs);
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	/* One alloc per pair, and nobody else allocated. */
	assert_int_equal(cs->pairs, timed);
}

static void test_alloc_free_round_trip(void **state)
{
	struct vt_daemon *d = *state;
	/* No periodic snapshot: the final one at the stop holds every alloc. */
	assert_int_equal(0, vt_daemon_setup(d, "stats_interval = 1h\n", NULL));
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "latency", &c));
	struct vad_stats before, after;
	VT_ASSERT_OK(c, vad_stats(c, &before));
	struct client_side cs = {0};
	int n = vt_scale(5000);
	measure(c, PAGE, n, vt_scale(200), "4 KiB", &cs);
	measure(c, 64 * PAGE, n, vt_scale(200), "256 KiB", &cs);
	VT_ASSERT_OK(c, vad_stats(c, &after));
	assert_int_equal(0, after.held_ranges);
	/* The daemon's own counters saw every request. */
	assert_int_equal(cs.pairs, after.allocs - before.allocs);
	assert_int_equal(cs.pairs, after.frees - before.frees);
	vad_close(c);
	assert_int_equal(0, vt_daemon_stop(d));
	assert_daemon_latency_fits(d, &cs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_alloc_free_round_trip, vt_fixture_blank_setup,
					    vt_fixture_daemon_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
