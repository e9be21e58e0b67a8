/*
 * test_vactl_screen.c - the pieces of vactl's live views that need no daemon: latency
 * quantiles from two readings of a cumulative histogram (bounds missing from one reading,
 * coarser readings, no requests), and tables fitted to a width (columns dropped least wanted
 * first, names shortened with '~', "... N more" rows, control bytes shown as '?'). Compiles
 * client/vactl/lathist.c and screen.c in directly (vactl is a program, not a library).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../client/vactl/lathist.c"
#include "../../client/vactl/screen.c"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void test_quantiles_since_start(void **state)
{
	/* 100 requests: 50 below 1000 ns, 49 more below 2000, the last below 8000 */
	static const uint64_t below[] = {1000, 2000, 8000}, count[] = {50, 99, 100};
	struct vactl_hist now = {N(below), below, count};
	struct vactl_lat l;
	vactl_lat_between(&now, NULL, &l);
	assert_int_equal(100, l.count);
	assert_int_equal(1000, l.p50_ns);
	assert_int_equal(2000, l.p99_ns);
	assert_int_equal(8000, l.max_ns);
}

static void test_quantiles_between_readings(void **state)
{
	/* before: 1000 requests all below 1000 ns; after: 10 more, all between 4000 and 8000 ns.
	 * The new reading lists bound 8000, which the old one lacks (its count there is the one at
	 * 1000); the old lists 1000 only. */
	static const uint64_t ob[] = {1000}, oc[] = {1000};
	static const uint64_t nb[] = {1000, 4000, 8000}, nc[] = {1000, 1000, 1010};
	struct vactl_hist old = {N(ob), ob, oc}, now = {N(nb), nb, nc};
	struct vactl_lat l;
	vactl_lat_between(&now, &old, &l);
	assert_int_equal(10, l.count);
	assert_int_equal(8000, l.p50_ns);
	assert_int_equal(8000, l.p99_ns);
	assert_int_equal(8000, l.max_ns);
}

static void test_bound_only_in_old_reading(void **state)
{
	/* the old reading is finer (bound 1500 that the new one does not send): the count below
	 * 2000 in the old one is the one at 1500 */
	static const uint64_t ob[] = {1000, 1500}, oc[] = {10, 20};
	static const uint64_t nb[] = {1000, 2000, 3000}, nc[] = {10, 120, 220};
	struct vactl_hist old = {N(ob), ob, oc}, now = {N(nb), nb, nc};
	struct vactl_lat l;
	vactl_lat_between(&now, &old, &l);
	assert_int_equal(200, l.count);
	assert_int_equal(2000, l.p50_ns); /* 100 of the 200 were below 2000 */
	assert_int_equal(3000, l.p99_ns);
	assert_int_equal(3000, l.max_ns);
}

static void test_no_requests(void **state)
{
	static const uint64_t b[] = {1000, 2000}, c[] = {5, 7};
	struct vactl_hist h = {N(b), b, c}, empty = {0, NULL, NULL};
	struct vactl_lat l;
	vactl_lat_between(&h, &h, &l);
	assert_int_equal(0, l.count);
	assert_int_equal(0, l.p50_ns);
	assert_int_equal(0, l.max_ns);
	vactl_lat_between(&empty, NULL, &l);
	assert_int_equal(0, l.count);
	vactl_lat_between(&h, &empty, &l); /* an empty old reading: since start */
	assert_int_equal(7, l.count);
	assert_int_equal(1000, l.p50_ns);
	assert_int_equal(2000, l.p99_ns);
}

static const struct vactl_fit_col cols[] = {
    {"NAME", 0},
    {"WANTED", 90},
    {"SPARE", 10},
    {"MIDDLE", 50},
};

static struct vactl_fit *table(void)
{
	struct vactl_fit *t = vactl_fit_new(N(cols), cols, 8);
	const char *r1[] = {"a-very-long-name-indeed", "1", "22222222", "333"};
	const char *r2[] = {"short", "4", "5", NULL};
	vactl_fit_row(t, r1);
	vactl_fit_row(t, r2);
	return t;
}

static void test_fit_unlimited(void **state)
{
	struct vactl_screen s;
	vactl_screen_init(&s, 0, 0);
	vactl_fit_emit(table(), &s, -1, "rows");
	assert_int_equal(3, s.n);
	assert_string_equal("NAME                     WANTED     SPARE  MIDDLE", s.lines[0]);
	assert_string_equal("a-very-long-name-indeed       1  22222222     333", s.lines[1]);
	assert_string_equal("short                         4         5       -", s.lines[2]);
	vactl_screen_free(&s);
}

static void test_fit_drops_and_shortens(void **state)
{
	struct vactl_screen s;
	/* 30 columns: the name is shortened to 8, then SPARE (least wanted) goes; then the name
	 * gets back what is left */
	vactl_screen_init(&s, 30, 0);
	vactl_fit_emit(table(), &s, -1, "rows");
	assert_int_equal(3, s.n);
	assert_string_equal("NAME            WANTED  MIDDLE", s.lines[0]);
	assert_string_equal("a-very-long-n~       1     333", s.lines[1]);
	assert_string_equal("short                4       -", s.lines[2]);
	vactl_screen_free(&s);

	/* 12 columns: only the name is left (never dropped), as wide as the screen */
	vactl_screen_init(&s, 12, 0);
	vactl_fit_emit(table(), &s, -1, "rows");
	assert_string_equal("NAME        ", s.lines[0]);
	assert_string_equal("a-very-long~", s.lines[1]);
	/* 4 columns: the name shorter than its minimum */
	vactl_screen_free(&s);
	vactl_screen_init(&s, 4, 0);
	vactl_fit_emit(table(), &s, -1, "rows");
	assert_string_equal("a-v~", s.lines[1]);
	vactl_screen_free(&s);
}

static void test_fit_more_rows(void **state)
{
	struct vactl_screen s;
	vactl_screen_init(&s, 80, 0);
	vactl_fit_emit(table(), &s, 2, "rows"); /* the heading and the "more" line */
	assert_int_equal(2, s.n);
	assert_non_null(strstr(s.lines[0], "NAME"));
	assert_string_equal("... 2 more rows", s.lines[1]);
	vactl_screen_free(&s);
	vactl_screen_init(&s, 80, 0);
	vactl_fit_emit(table(), &s, 0, "rows");
	assert_int_equal(0, s.n);
	vactl_screen_free(&s);
}

static void test_screen_lines(void **state)
{
	struct vactl_screen s;
	vactl_screen_init(&s, 10, 2);
	vactl_screen_line(&s, "%s", "evil\033]0;title\007name");
	vactl_screen_line(&s, "%d", 12);
	vactl_screen_line(&s, "%s", "a third line does not fit");
	assert_int_equal(2, s.n);
	assert_int_equal(0, vactl_screen_left(&s));
	assert_string_equal("evil?]0;ti", s.lines[0]);
	assert_string_equal("12", s.lines[1]);
	vactl_screen_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_quantiles_since_start),
	    cmocka_unit_test(test_quantiles_between_readings),
	    cmocka_unit_test(test_bound_only_in_old_reading),
	    cmocka_unit_test(test_no_requests),
	    cmocka_unit_test(test_fit_unlimited),
	    cmocka_unit_test(test_fit_drops_and_shortens),
	    cmocka_unit_test(test_fit_more_rows),
	    cmocka_unit_test(test_screen_lines),
	};
	return cmocka_run_group_tests_name("vactl live view pieces", tests, NULL, NULL);
}
