/*
 * test_daemon_cpu_idle.c - the balancer's idle-CPU reading (cpu_idle.c): parsing /proc/stat
 * text against an affinity mask, and sampling the real file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sched.h>
#include <string.h>
#include <time.h>

#include "cpu_idle.h"

/* Two CPUs plus the aggregate line, then the lines that follow the cpu lines. */
static const char stat_two[] =
    "cpu  300 10 100 900 20 5 5 0 0 0\n"
    "cpu0 100 0 50 400 10 2 3 0 7 0\n"
    "cpu1 200 10 50 500 10 3 2 0 0 0\n"
    "intr 123456 1 2 3\n"
    "ctxt 99\n"
    "cpu9 1 1 1 1000000 1 1 1 1\n"; /* not a cpu line of the header: never counted */

static cpu_set_t set_of(int a, int b)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	if (a >= 0)
		CPU_SET(a, &s);
	if (b >= 0)
		CPU_SET(b, &s);
	return s;
}

static void test_parse_sums_allowed_cpus(void **state)
{
	(void)state;
	uint64_t idle, total;
	unsigned cpus;
	cpu_set_t both = set_of(0, 1), one = set_of(1, -1);
	assert_int_equal(0, vad_cpu_idle_parse(stat_two, &both, &idle, &total, &cpus));
	assert_int_equal(cpus, 2);
	/* idle + iowait of cpu0 and cpu1; guest (7 on cpu0) is already inside user */
	assert_int_equal(idle, 400 + 10 + 500 + 10);
	assert_int_equal(total, (100 + 0 + 50 + 400 + 10 + 2 + 3 + 0) +
				    (200 + 10 + 50 + 500 + 10 + 3 + 2 + 0));
	assert_int_equal(0, vad_cpu_idle_parse(stat_two, &one, &idle, &total, &cpus));
	assert_int_equal(cpus, 1);
	assert_int_equal(idle, 510);
	assert_int_equal(total, 775);
	/* the cpu9 line after intr is past the cpu lines: not read even when allowed */
	cpu_set_t nine = set_of(9, -1);
	assert_int_equal(-1, vad_cpu_idle_parse(stat_two, &nine, &idle, &total, &cpus));
}

static void test_parse_refuses_what_it_cannot_count(void **state)
{
	(void)state;
	uint64_t idle, total;
	unsigned cpus;
	cpu_set_t other = set_of(5, -1), both = set_of(0, 1);
	/* no allowed CPU among the lines */
	assert_int_equal(-1, vad_cpu_idle_parse(stat_two, &other, &idle, &total, &cpus));
	assert_int_equal(cpus, 0);
	/* empty text, or text without cpu lines */
	assert_int_equal(-1, vad_cpu_idle_parse("", &both, &idle, &total, &cpus));
	assert_int_equal(-1, vad_cpu_idle_parse("intr 1 2\nctxt 3\n", &both, &idle, &total, &cpus));
	/* an old kernel's four fields: no iowait, nothing past idle */
	assert_int_equal(0, vad_cpu_idle_parse("cpu0 1 2 3 4\n", &both, &idle, &total, &cpus));
	assert_int_equal(idle, 4);
	assert_int_equal(total, 10);
	/* the last line without a newline still counts; a huge cpu number is skipped */
	assert_int_equal(0, vad_cpu_idle_parse("cpu99999999999 1 1 1 1\ncpu1 0 0 0 7", &both, &idle,
					       &total, &cpus));
	assert_int_equal(cpus, 1);
	assert_int_equal(idle, 7);
}

static void test_sample_real_stat(void **state)
{
	(void)state;
	struct vad_cpu_idle ci;
	if (vad_cpu_idle_open(&ci) < 0)
		skip(); /* no /proc/stat here: the balancer spreads without it */
	cpu_set_t allowed;
	assert_int_equal(0, sched_getaffinity(0, sizeof(allowed), &allowed));
	double cpus = CPU_COUNT(&allowed);
	/* Spin for a few ticks so some time passes on every CPU. */
	double got = -1;
	for (int tries = 0; tries < 50 && got < 0; tries++) {
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do
			clock_gettime(CLOCK_MONOTONIC, &t);
		while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 30000000L);
		got = vad_cpu_idle_sample(&ci);
	}
	assert_true(got >= 0);
	assert_true(got <= cpus + 1e-9);
	/* This thread spun the whole time: the machine cannot have been entirely idle. */
	assert_true(got < cpus);
	vad_cpu_idle_close(&ci);
	assert_int_equal(ci.fd, -1);
	/* closed: unknown, and closing again is harmless */
	assert_true(vad_cpu_idle_sample(&ci) < 0);
	vad_cpu_idle_close(&ci);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_sums_allowed_cpus),
	    cmocka_unit_test(test_parse_refuses_what_it_cannot_count),
	    cmocka_unit_test(test_sample_real_stat),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
