/*
 * test_vactl_units.c - vactl's human units: sizes and durations it accepts and refuses,
 * and how it prints them. Compiles client/vactl/units.c in directly (vactl is a program,
 * not a library); the rules are proto/units.c's, the same as vad.conf's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../client/vactl/units.c"

static void test_sizes_accepted(void **state)
{
	static const struct {
		const char *text;
		uint64_t bytes;
	} ok[] = {
	    {"0", 0},
	    {"4096", 4096},
	    {"4K", 4096},
	    {"4k", 4096},
	    {"4KiB", 4096},
	    {"4kb", 4096},
	    {"1.5M", 3u << 19},
	    {"64G", 64ull << 30},
	    {"2T", 2ull << 40},
	    {"1E", 1ull << 60},
	    {"18446744073709551615", UINT64_MAX},
	    {".5K", 512},
	    {"10B", 10},
	    {"4 K", 4096}, /* vad.conf's rule: what vactl prints ("4.0 KiB") parses back */
	    {"4.0 KiB", 4096},
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		uint64_t v = 1234;
		if (vactl_parse_size(ok[i].text, &v) != 0)
			fail_msg("'%s' refused", ok[i].text);
		if (v != ok[i].bytes)
			fail_msg("'%s' -> %llu, expected %llu", ok[i].text, (unsigned long long)v,
				 (unsigned long long)ok[i].bytes);
	}
}

static void test_sizes_refused(void **state)
{
	static const char *const bad[] = {
	    "",
	    "K",
	    "-1",
	    "4Q",
	    "4BB",
	    "4KK",
	    "1.5",
	    "0x10",
	    "1e3",
	    "16E",
	    "18446744073709551616",
	    " 4K",
	    "4K ",
	    "nan",
	    "inf",
	    ".",
	    "4.K.",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t v;
		if (vactl_parse_size(bad[i], &v) == 0)
			fail_msg("'%s' accepted as %llu", bad[i], (unsigned long long)v);
	}
	uint64_t v;
	assert_int_equal(-1, vactl_parse_size(NULL, &v));
}

static void test_durations(void **state)
{
	static const struct {
		const char *text;
		uint64_t ms;
	} ok[] = {
	    {"10", 10000},  {"10s", 10000},   {"250ms", 250},	{"1.5s", 1500},
	    {"5m", 300000}, {"2min", 120000}, {"2h", 7200000},	{"1d", 86400000},
	    {"0", 0},	    {"10 s", 10000},  {"10sec", 10000}, {"1w", 604800000},
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		uint64_t v = 1234;
		if (vactl_parse_duration(ok[i].text, &v) != 0 || v != ok[i].ms)
			fail_msg("'%s' -> %llu, expected %llu", ok[i].text, (unsigned long long)v,
				 (unsigned long long)ok[i].ms);
	}
	static const char *const bad[] = {"", "s", "10x", "-1s", "1e3", "0.5ms", "forever"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t v;
		if (vactl_parse_duration(bad[i], &v) == 0)
			fail_msg("'%s' accepted as %llu ms", bad[i], (unsigned long long)v);
	}
}

static void test_formatting(void **state)
{
	char b[32];
	assert_string_equal("0 B", vactl_fmt_size(0, b, sizeof(b)));
	assert_string_equal("1023 B", vactl_fmt_size(1023, b, sizeof(b)));
	assert_string_equal("1.0 KiB", vactl_fmt_size(1024, b, sizeof(b)));
	assert_string_equal("1.5 MiB", vactl_fmt_size(3u << 19, b, sizeof(b)));
	assert_string_equal("1.0 GiB", vactl_fmt_size(1u << 30, b, sizeof(b)));
	assert_string_equal("256 MiB", vactl_fmt_size(256u << 20, b, sizeof(b)));
	assert_string_equal("64 GiB", vactl_fmt_size(64ull << 30, b, sizeof(b)));
	assert_string_equal("16 EiB", vactl_fmt_size(UINT64_MAX, b, sizeof(b)));
	assert_string_equal("812ms", vactl_fmt_duration(812, b, sizeof(b)));
	assert_string_equal("4.5s", vactl_fmt_duration(4500, b, sizeof(b)));
	assert_string_equal("4m 12s", vactl_fmt_duration(252000, b, sizeof(b)));
	assert_string_equal("2h 03m", vactl_fmt_duration(7380000, b, sizeof(b)));
	assert_string_equal("3d 04h", vactl_fmt_duration((3 * 24 + 4) * 3600000ull, b, sizeof(b)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sizes_accepted),
	    cmocka_unit_test(test_sizes_refused),
	    cmocka_unit_test(test_durations),
	    cmocka_unit_test(test_formatting),
	};
	return cmocka_run_group_tests_name("vactl units", tests, NULL, NULL);
}
