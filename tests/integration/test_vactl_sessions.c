/*
 * test_vactl_sessions.c - vactl sessions: the client sessions the daemon records in its stats
 * database (one kept open, one closed), read while the daemon runs and after it stopped; the
 * JSON parses and says how each session ended. Waits for snapshots by polling the file, so
 * nothing depends on timing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "vtassert.h"

#define WAIT_MS vt_timeout_ms(20000)

VT_DAEMON_GROUP(setup, "stats_interval = 200ms\n", NULL)

/* `vactl --json sessions --db DB --since all`, parsed; fails the test if it does not exit 0
 * or its output is not JSON. */
static struct json_object *sessions_json(const struct vt_daemon *d)
{
	struct vt_output o;
	assert_int_equal(0, vt_vactl(NULL, NULL, &o, "--json", "sessions", "--db", d->stats_db,
				     "--since", "all", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl --json sessions");
	struct json_object *j = vt_json_parse(o.out);
	if (!j)
		fail_msg("vactl sessions --json printed no JSON: %s", o.out);
	vt_output_free(&o);
	return j;
}

/* The session named name in j's sessions, or NULL. */
static struct json_object *find_session(struct json_object *j, const char *name)
{
	struct json_object *arr = vt_json_path(j, "sessions");
	assert_non_null(arr);
	assert_true(json_object_is_type(arr, json_type_array));
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		struct json_object *s = json_object_array_get_idx(arr, i);
		struct json_object *n = vt_json_path(s, "name");
		if (n && strcmp(json_object_get_string(n), name) == 0)
			return s;
	}
	return NULL;
}

static const char *end_of(struct json_object *s)
{
	struct json_object *e = s ? vt_json_path(s, "end") : NULL;
	return e ? json_object_get_string(e) : "";
}

/* Poll until the session name shows end state end (the stats thread took a snapshot that
 * saw it); returns the parsed document (the caller puts it), failing after WAIT_MS. */
static struct json_object *wait_end(const struct vt_daemon *d, const char *name, const char *end)
{
	for (int waited = 0;; waited += 50) {
		struct json_object *j = sessions_json(d);
		if (strcmp(end_of(find_session(j, name)), end) == 0)
			return j;
		if (waited >= WAIT_MS)
			fail_msg("session %s never showed end state %s: %s", name, end,
				 json_object_to_json_string(j));
		json_object_put(j);
		vt_sleep_ms(50);
	}
}

static uint64_t field(struct json_object *s, const char *key)
{
	uint64_t v = 0;
	if (vt_json_u64(s, key, &v) != 0)
		fail_msg("no number %s in %s", key, json_object_to_json_string(s));
	return v;
}

static void test_sessions_listed(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *keeper, *leaver;
	assert_int_equal(0, vt_connect(d, "keeper", &keeper));
	assert_int_equal(0, vt_connect(d, "leaver", &leaver));
	void *p;
	VT_ASSERT_OK(keeper, vad_alloc(keeper, 64 << 10, 0, &p));
	for (int i = 0; i < 3; i++)
		VT_ASSERT_OK(leaver, vad_alloc(leaver, 4096, 0, &p));

	/* Both connected once a snapshot saw them (the leaver's allocations too). */
	json_object_put(wait_end(d, "keeper", "connected"));
	struct json_object *j = wait_end(d, "leaver", "connected");
	struct json_object *s = find_session(j, "leaver");
	assert_int_equal(3, field(s, "allocs"));
	assert_int_equal(3 * 4096, field(s, "peak_bytes"));
	assert_int_equal(getpid(), field(s, "pid"));
	assert_int_equal(getuid(), field(s, "uid"));
	json_object_put(j);

	/* The leaver goes: the next snapshot marks it closed, the keeper stays connected. */
	vad_close(leaver);
	j = wait_end(d, "leaver", "closed");
	s = find_session(j, "leaver");
	assert_true(field(s, "disconnect_ms") >= field(s, "connect_ms"));
	assert_int_equal(3 * 4096, field(s, "peak_bytes"));
	s = find_session(j, "keeper");
	assert_string_equal("connected", end_of(s));
	assert_true(json_object_is_type(vt_json_path(s, "disconnect_ms"), json_type_null));
	assert_int_equal(1, field(s, "allocs"));
	assert_int_equal(64 << 10, field(s, "peak_bytes"));
	json_object_put(j);

	/* The table form names both. */
	struct vt_output o;
	assert_int_equal(0, vt_vactl(NULL, NULL, &o, "sessions", "--db", d->stats_db, NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl sessions");
	assert_true(vt_contains(o.out, "keeper"));
	assert_true(vt_contains(o.out, "leaver"));
	assert_true(vt_contains(o.out, "closed"));
	vt_output_free(&o);

	/* After the daemon stopped the file still reads; the keeper has ended by then. */
	assert_int_equal(0, vt_daemon_stop(d));
	j = sessions_json(d);
	s = find_session(j, "keeper");
	assert_non_null(s);
	assert_string_not_equal("connected", end_of(s));
	assert_string_equal("closed", end_of(find_session(j, "leaver")));
	json_object_put(j);
	vad_close(keeper);
}

/* A database the daemon never wrote is refused with the reason. */
static void test_sessions_no_db(void **state)
{
	(void)state;
	struct vt_output o;
	assert_int_equal(
	    0, vt_vactl(NULL, NULL, &o, "sessions", "--db", "/nonexistent/stats.db", NULL));
	VT_ASSERT_EXIT(&o, 1, "vactl sessions --db /nonexistent/stats.db");
	assert_true(vt_contains(o.err, "/nonexistent/stats.db"));
	vt_output_free(&o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_sessions_listed, setup,
					    vt_group_daemon_stop_if_running),
	    cmocka_unit_test(test_sessions_no_db),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
