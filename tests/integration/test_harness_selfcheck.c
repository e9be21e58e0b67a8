/*
 * test_harness_selfcheck.c - the integration harness can fail: a daemon whose log holds
 * a sanitizer report, one that dies, one that exits non-zero all make vt_daemon_stop
 * fail; exit codes, output capture, timeouts and JSON helpers report what happened.
 */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include <json-c/json.h>

#include "vtassert.h"

static void append_to_log(const struct vt_daemon *d, const char *line)
{
	FILE *f = fopen(d->log_path, "a");
	assert_non_null(f);
	fputs(line, f);
	fclose(f);
}

static void test_stop_catches_sanitizer_reports(void **state)
{
	static const char *const reports[] = {
	    "==1==ERROR: AddressSanitizer: heap-use-after-free on address 0x1\n",
	    "daemon/x.c:1:2: runtime error: signed integer overflow\n",
	    "WARNING: ThreadSanitizer: data race (pid=1)\n",
	    "==1==ERROR: LeakSanitizer: detected memory leaks\n",
	};
	for (size_t i = 0; i < sizeof(reports) / sizeof(reports[0]); i++) {
		struct vt_daemon *d = *state;
		assert_int_equal(0, vt_daemon_setup(d, NULL, NULL));
		append_to_log(d, reports[i]);
		if (vt_daemon_stop(d) == 0)
			fail_msg("vt_daemon_stop passed a log with \"%s\"", reports[i]);
		vt_daemon_destroy(d);
	}
}

static void test_stop_catches_a_dead_daemon(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, NULL, NULL));
	assert_int_equal(0, vt_daemon_signal(d, SIGKILL));
	/* A killed process is reaped only once the kernel has run its exit: on a loaded
	 * machine that can take a while, so wait for it (bounded) rather than a fixed 50 ms. */
	for (int i = 0; i < 500 && vt_daemon_alive(d); i++)
		vt_sleep_ms(20);
	assert_false(vt_daemon_alive(d));
	assert_int_equal(-1, vt_daemon_stop(d));
}

static void test_start_reports_a_bad_config(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_init(d));
	assert_int_equal(0, vt_daemon_write_config(d, "workers = banana\n", NULL));
	assert_int_equal(-1, vt_daemon_start(d));
	assert_int_equal(0, d->pid);
	assert_true(WIFEXITED(d->exit_status));
	assert_int_equal(1, WEXITSTATUS(d->exit_status));
}

static void test_config_overrides_defaults(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_init(d));
	assert_int_equal(0, vt_daemon_write_config(d, "workers = 3\nsocket_mode = 0600\n",
						   "[arena x]\nsize = 8M\n"));
	FILE *f = fopen(d->conf_path, "r");
	assert_non_null(f);
	char text[4096];
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	/* each key once, the override winning */
	assert_non_null(strstr(text, "workers = 3"));
	assert_null(strstr(text, "workers = 2"));
	assert_non_null(strstr(text, "socket_mode = 0600"));
	assert_null(strstr(text, "socket_mode = 0666"));
	assert_non_null(strstr(text, "[arena x]"));
	assert_null(strstr(text, "[arena default]"));
	assert_non_null(strstr(text, d->socket_path));
}

static void test_run_captures(void **state)
{
	char *argv[] = {"/bin/sh", "-c", "cat; echo to-err >&2; exit 7", NULL};
	struct vt_output o;
	assert_int_equal(0, vt_run(argv, "from stdin\n", 5000, &o));
	assert_int_equal(7, o.exit_code);
	assert_string_equal("from stdin\n", o.out);
	assert_string_equal("to-err\n", o.err);
	vt_output_free(&o);
	char *sleeper[] = {"/bin/sh", "-c", "sleep 30", NULL};
	assert_int_equal(-1, vt_run(sleeper, NULL, 200, &o));
	vt_output_free(&o);
	char *killed[] = {"/bin/sh", "-c", "kill -9 $$", NULL};
	assert_int_equal(0, vt_run(killed, NULL, 5000, &o));
	assert_int_equal(128 + SIGKILL, o.exit_code);
	vt_output_free(&o);
}

static void test_json_helpers(void **state)
{
	struct json_object *j = vt_json_parse("{\"a\": {\"b\": [1, {\"c\": 18446744073709551615}]},"
					      " \"neg\": -1}");
	assert_non_null(j);
	uint64_t v;
	assert_int_equal(0, vt_json_u64(j, "a.b.0", &v));
	assert_int_equal(1, v);
	assert_int_equal(0, vt_json_u64(j, "a.b.1.c", &v));
	assert_true(v == UINT64_MAX);
	assert_int_equal(-1, vt_json_u64(j, "a.b.2", &v));
	assert_int_equal(-1, vt_json_u64(j, "neg", &v));
	assert_non_null(vt_json_find(j, "c"));
	json_object_put(j);
	assert_null(vt_json_parse("{not json"));
	struct json_object *lines[4];
	assert_int_equal(2, vt_json_lines("{\"x\":1}\n\n{\"y\":2}\n", lines, 4));
	json_object_put(lines[0]);
	json_object_put(lines[1]);
	assert_int_equal(-1, vt_json_lines("{\"x\":1}\nnope\n", lines, 4));
}

static void test_patterns(void **state)
{
	uint8_t buf[1000];
	vt_fill_pattern(buf, sizeof(buf), 1);
	assert_int_equal(-1, vt_check_pattern(buf, sizeof(buf), 1));
	assert_int_equal(0, vt_check_pattern(buf, sizeof(buf), 2) >= 0 ? 0 : -1);
	buf[999] ^= 1;
	assert_int_equal(999, vt_check_pattern(buf, sizeof(buf), 1));
	memset(buf, 0, sizeof(buf));
	assert_int_equal(-1, vt_first_nonzero(buf, sizeof(buf)));
	buf[500] = 1;
	assert_int_equal(500, vt_first_nonzero(buf, sizeof(buf)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    VT_OWN_DAEMON_TEST(test_stop_catches_sanitizer_reports),
	    VT_OWN_DAEMON_TEST(test_stop_catches_a_dead_daemon),
	    VT_OWN_DAEMON_TEST(test_start_reports_a_bad_config),
	    VT_OWN_DAEMON_TEST(test_config_overrides_defaults),
	    cmocka_unit_test(test_run_captures),
	    cmocka_unit_test(test_json_helpers),
	    cmocka_unit_test(test_patterns),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
