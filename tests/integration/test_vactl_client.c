/*
 * test_vactl_client.c - vactl details beyond test_vactl.c: help for every command, the
 * free stub, alloc with units, refusals and a held, shared allocation that another
 * process attaches to, top's JSON samples, session's human lines and a quota refusal's
 * message.
 */
#include <signal.h>
#include <string.h>

#include <json-c/json.h>

#include "stats_fields.h"
#include "vtassert.h"

#define READ_TIMEOUT vt_timeout_ms(10000)

static const char *const arenas_conf = "[arena default]\n"
				       "size = 256M\n"
				       "\n"
				       "[arena small]\n"
				       "size = 16M\n"
				       "quantum = 64K\n";

VT_DAEMON_GROUP(group_setup, "quota_client = 8M\n", arenas_conf)

static uint64_t ju64(struct json_object *j, const char *path)
{
	uint64_t v = 0;
	if (vt_json_u64(j, path, &v) != 0)
		fail_msg("no unsigned number at \"%s\" in %s", path, json_object_to_json_string(j));
	return v;
}

static const char *jstr(struct json_object *j, const char *path)
{
	struct json_object *v = vt_json_path(j, path);
	if (!v || !json_object_is_type(v, json_type_string))
		fail_msg("no string at \"%s\" in %s", path, json_object_to_json_string(j));
	return json_object_get_string(v);
}

static const char *const commands[] = {
    "status", "top",   "arenas", "clients", "stats",   "purge", "reload",
    "check",  "alloc", "free",	 "session", "history", "map",	"latency",
};

static void test_help_everywhere(void **state)
{
	struct vt_output o;
	assert_int_equal(0, vt_vactl(NULL, NULL, &o, "--help", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl --help");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!vt_contains(o.out, commands[i]))
			fail_msg("vactl --help does not mention '%s'", commands[i]);
	assert_true(vt_contains(o.out, "Exit status"));
	assert_true(vt_contains(o.out, "--json"));
	vt_output_free(&o);
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		assert_int_equal(0, vt_vactl(NULL, NULL, &o, commands[i], "--help", NULL));
		VT_ASSERT_EXIT(&o, 0, commands[i]);
		char usage[64];
		snprintf(usage, sizeof(usage), "vactl [--socket PATH] [--json] %s", commands[i]);
		if (!vt_contains(o.out, usage))
			fail_msg("'vactl %s --help' has no usage line: %s", commands[i], o.out);
		vt_output_free(&o);
	}
	assert_int_equal(0, vt_vactl(NULL, NULL, &o, "help", "session", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl help session");
	assert_true(vt_contains(o.out, "attach TOKEN"));
	vt_output_free(&o);
	assert_int_equal(0, vt_vactl(NULL, NULL, &o, NULL));
	VT_ASSERT_EXIT(&o, 2, "vactl without a command");
	vt_output_free(&o);
}

static void test_free_is_usage(void **state)
{
	struct vt_daemon *d = *state;
	struct vt_output o;
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "free", "4096", NULL));
	VT_ASSERT_EXIT(&o, 2, "vactl free 4096");
	assert_true(vt_contains(o.err, "vactl session"));
	vt_output_free(&o);
}

static void test_alloc_units_and_refusals(void **state)
{
	struct vt_daemon *d = *state;
	struct vt_output o;
	assert_int_equal(0,
			 vt_vactl(d->socket_path, NULL, &o, "--json", "alloc", "1.5M", "3k", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl alloc 1.5M 3k");
	struct json_object *j = vt_json_parse(o.out);
	assert_non_null(j);
	assert_int_equal(3u << 19, ju64(j, "ranges.0.size"));
	assert_int_equal(4096, ju64(j, "ranges.1.size"));
	assert_int_equal(3072, ju64(j, "ranges.1.requested"));
	json_object_put(j);
	vt_output_free(&o);

	/* Human output names the arena, the offset and the size in units. */
	assert_int_equal(
	    0, vt_vactl(d->socket_path, NULL, &o, "alloc", "100K", "--arena", "small", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl alloc 100K --arena small");
	assert_true(vt_contains(o.out, "small"));
	assert_true(vt_contains(o.out, "128 KiB (131072 bytes)"));
	assert_true(vt_contains(o.out, "freed 1 range"));
	vt_output_free(&o);

	static const char *const usage[][4] = {
	    {"alloc", "1.5", NULL}, /* a fraction of a byte */
	    {"alloc", "4K", "--hold", "banana"},
	    {"alloc", "4K", "--align", "x"},
	    {"alloc", "-4K", NULL},
	};
	for (size_t i = 0; i < sizeof(usage) / sizeof(usage[0]); i++) {
		char *argv[8] = {"--socket", d->socket_path};
		int n = 2;
		for (int k = 0; k < 4 && usage[i][k]; k++)
			argv[n++] = (char *)usage[i][k];
		argv[n] = NULL;
		assert_int_equal(0, vt_vactl_argv(argv, NULL, &o));
		VT_ASSERT_EXIT(&o, 2, usage[i][1]);
		vt_output_free(&o);
	}

	/* Refusals exit 1, with the daemon's reason and a JSON error document. */
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "--json", "alloc", "4K", "--arena",
				     "nosuch", NULL));
	VT_ASSERT_EXIT(&o, 1, "vactl alloc --arena nosuch");
	j = vt_json_parse(o.out);
	assert_non_null(j);
	assert_string_equal("ENOARENA", jstr(j, "error"));
	json_object_put(j);
	assert_true(vt_contains(o.err, "nosuch"));
	vt_output_free(&o);
	/* An alignment that is not a power of two is a usage error, never sent; one too large
	 * for the arena is the daemon's refusal. */
	assert_int_equal(0,
			 vt_vactl(d->socket_path, NULL, &o, "alloc", "4K", "--align", "3K", NULL));
	VT_ASSERT_EXIT(&o, 2, "vactl alloc --align 3K");
	vt_output_free(&o);
	assert_int_equal(0,
			 vt_vactl(d->socket_path, NULL, &o, "alloc", "4K", "--align", "1T", NULL));
	VT_ASSERT_EXIT(&o, 1, "vactl alloc --align 1T");
	vt_output_free(&o);
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "alloc", "16M", NULL));
	VT_ASSERT_EXIT(&o, 1, "vactl alloc 16M over an 8M quota");
	if (strncmp(o.err, "vactl: quota exceeded: ", 23) != 0)
		fail_msg("quota refusal reads \"%s\"", o.err);
	vt_output_free(&o);
}

/* vactl holds two shared ranges; this process attaches to one while vactl runs. */
static void test_alloc_hold_and_share(void **state)
{
	struct vt_daemon *d = *state;
	struct vad_stats base;
	assert_int_equal(0, vt_stats(d, &base));
	struct vt_proc proc;
	assert_int_equal(0, vt_proc_vactl(&proc, "--socket", d->socket_path, "--json", "alloc",
					  "1M", "64K", "--share", "--hold", "forever", NULL));
	struct json_object *j = vt_proc_read_json(&proc, READ_TIMEOUT);
	assert_non_null(j);
	assert_string_equal("forever", jstr(j, "hold"));
	char token[VAD_TOKEN_LEN + 1];
	snprintf(token, sizeof(token), "%s", jstr(j, "ranges.0.token"));
	assert_int_equal(VAD_TOKEN_LEN, strlen(token));

	/* While vactl holds them, its session shows them. */
	struct vt_output o;
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "--json", "clients", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl clients");
	struct json_object *cl = vt_json_parse(o.out);
	assert_non_null(cl);
	struct json_object *arr = vt_json_path(cl, "clients");
	bool found = false;
	for (size_t i = 0; arr && i < json_object_array_length(arr); i++) {
		struct json_object *ci = json_object_array_get_idx(arr, i);
		if (ju64(ci, "pid") == (uint64_t)proc.pid) {
			found = true;
			assert_int_equal((1u << 20) + (64u << 10), ju64(ci, "held_bytes"));
			assert_int_equal(2, ju64(ci, "held_ranges"));
		}
	}
	assert_true(found);
	json_object_put(cl);
	vt_output_free(&o);

	vad_client *c;
	assert_int_equal(0, vt_connect(d, "attacher", &c));
	void *p;
	size_t size;
	VT_ASSERT_OK(c, vad_attach(c, token, &p, &size));
	assert_int_equal(1u << 20, size);
	struct vad_range r;
	VT_ASSERT_OK(c, vad_range_info(c, p, &r));
	assert_int_equal(ju64(j, "ranges.0.offset"), r.offset);
	memset(p, 0x5a, size);

	/* SIGTERM ends the hold: vactl frees its references and exits 0. */
	assert_int_equal(0, kill(proc.pid, SIGTERM));
	int code = vt_proc_finish(&proc, READ_TIMEOUT, &o);
	if (code != 0) {
		vt_output_print("vactl alloc --hold forever after SIGTERM", &o);
		fail_msg("exit %d", code);
	}
	assert_true(vt_contains(o.err, "disconnects"));
	vt_output_free(&o);
	/* Our reference keeps the range and its bytes. */
	assert_int_equal(0x5a, ((unsigned char *)p)[size - 1]);
	VT_ASSERT_OK(c, vad_free(c, p));
	vad_close(c);
	json_object_put(j);
	assert_int_equal(0,
			 vt_wait_busy(d, base.busy_bytes, UINT32_MAX, vt_timeout_ms(2000), NULL));
}

static void test_top_samples(void **state)
{
	struct vt_daemon *d = *state;
	struct vt_output o;
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "--json", "top", "--count", "2",
				     "--interval", "50ms", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl --json top --count 2");
	struct json_object *lines[4];
	int n = vt_json_lines(o.out, lines, 4);
	assert_int_equal(2, n);
	assert_int_equal(1, ju64(lines[0], "sample"));
	assert_int_equal(2, ju64(lines[1], "sample"));
	assert_true(ju64(lines[1], "requests") > ju64(lines[0], "requests"));
	assert_int_equal(256u << 20, ju64(lines[1], "arenas.0.size"));
	assert_non_null(vt_json_path(lines[1], "arenas.1.allocs_per_s"));
	for (int i = 0; i < n; i++)
		json_object_put(lines[i]);
	vt_output_free(&o);

	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "top", "--count", "1", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl top --count 1");
	assert_true(vt_contains(o.out, "ALLOC/S"));
	assert_true(vt_contains(o.out, "small"));
	vt_output_free(&o);
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "top", "--count", "0", NULL));
	VT_ASSERT_EXIT(&o, 2, "vactl top --count 0");
	vt_output_free(&o);
}

static void test_session_human_lines(void **state)
{
	struct vt_daemon *d = *state;
	struct vt_output o;
	const char *script = "alloc 4K\n"
			     "write #1 hello\n"
			     "read #1 8\n"
			     "free #1\n"
			     "free #1\n"
			     "sleep 10ms\n"
			     "quit\n";
	assert_int_equal(0, vt_vactl(d->socket_path, script, &o, "session", NULL));
	VT_ASSERT_EXIT(&o, 1, "vactl session with a double free");
	static const char *const expect[] = {
	    "#1 arena=default offset=",
	    "wrote 5 bytes to #1",
	    "#1 text=\"hello\" zero=no",
	    "freed #1 arena=default",
	    "error: free: not held:",
	    "slept 10ms",
	    "bye",
	};
	const char *line = o.out;
	for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++) {
		if (!line || strncmp(line, expect[i], strlen(expect[i])) != 0)
			fail_msg("line %zu should start with \"%s\"; output:\n%s", i + 1, expect[i],
				 o.out);
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	vt_output_free(&o);
}

/* history reads the SQLite file the daemon writes, with or without the daemon. */
static void test_history(void **state)
{
	struct vt_daemon *d = *state;
	struct vt_output o;
	/* Oldest first: the daemon's start is the first event, whatever other events (a quota
	 * refusal of an earlier test, recorded by the stats thread when it gets to it) follow. */
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "--json", "history", "--db",
				     d->stats_db, "--since", "all", "--oldest-first", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl --json history");
	struct json_object *j = vt_json_parse(o.out);
	assert_non_null(j);
	char want_schema[16];
	snprintf(want_schema, sizeof(want_schema), "%d", VAD_STATS_SCHEMA_VERSION);
	assert_string_equal(want_schema, jstr(j, "schema_version"));
	assert_string_equal("start", jstr(j, "events.0.kind"));
	struct json_object *life = vt_json_path(j, "lifetime");
	assert_non_null(life);
	bool saw_default = false;
	for (size_t i = 0; i < json_object_array_length(life); i++)
		if (strcmp(jstr(json_object_array_get_idx(life, i), "name"), "default") == 0)
			saw_default = true;
	assert_true(saw_default);
	json_object_put(j);
	vt_output_free(&o);
	/* The table for people ends each arena with sparklines of its trends. */
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "history", "--db", d->stats_db,
				     "--since", "all", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl history");
	assert_true(vt_contains(o.out, "trends"));
	assert_true(vt_contains(o.out, "busy "));
	assert_true(vt_contains(o.out, "fragmentation "));
	assert_true(vt_contains(o.out, "alloc p99 "));
	assert_true(vt_contains(o.out, "failures "));
	assert_true(vt_contains(o.out, "\xe2\x96")); /* a block character, U+2581..U+2588 */
	vt_output_free(&o);
	assert_int_equal(
	    0, vt_vactl(NULL, NULL, &o, "history", "--db", "/nonexistent/stats.db", NULL));
	VT_ASSERT_EXIT(&o, 1, "vactl history --db /nonexistent/stats.db");
	assert_true(vt_contains(o.err, "/nonexistent/stats.db"));
	vt_output_free(&o);
	assert_int_equal(0, vt_vactl(NULL, NULL, &o, "history", "--since", "soon", NULL));
	VT_ASSERT_EXIT(&o, 2, "vactl history --since soon");
	vt_output_free(&o);
}

/* map draws the arena from a walk; --json lists the blocks, --svg writes a picture. */
static void test_map(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "mapped", &c));
	void *p;
	VT_ASSERT_OK(c, vad_alloc_in(c, "small", 5 * 64 * 1024, 0, &p));
	struct vad_range r;
	VT_ASSERT_OK(c, vad_range_info(c, p, &r));
	struct vt_output o;
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "--json", "map", "small", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl --json map small");
	struct json_object *j = vt_json_parse(o.out);
	assert_non_null(j);
	assert_string_equal("small", jstr(j, "arena"));
	assert_int_equal(16u << 20, ju64(j, "size"));
	assert_true(ju64(j, "busy_bytes") >= 5 * 64 * 1024);
	struct json_object *blocks = vt_json_path(j, "blocks");
	assert_non_null(blocks);
	bool found = false;
	uint64_t sum = 0;
	for (size_t i = 0; i < json_object_array_length(blocks); i++) {
		struct json_object *b = json_object_array_get_idx(blocks, i);
		sum += ju64(b, "size");
		if (ju64(b, "offset") == r.offset) {
			found = true;
			assert_string_equal("busy", jstr(b, "kind"));
			assert_int_equal(5 * 64 * 1024, ju64(b, "size"));
		}
	}
	assert_true(found);
	assert_int_equal(16u << 20, sum); /* the blocks tile the arena */
	json_object_put(j);
	vt_output_free(&o);

	char svg[PATH_MAX];
	snprintf(svg, sizeof(svg), "%s/map.svg", d->dir);
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "map", "--width", "32", "--rows",
				     "2", "--svg", svg, NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl map --svg");
	assert_true(vt_contains(o.out, "arena default"));
	assert_true(vt_contains(o.out, "|"));
	vt_output_free(&o);
	FILE *f = fopen(svg, "r");
	assert_non_null(f);
	char head[256] = ""; /* an XML declaration, then the root */
	size_t got = fread(head, 1, sizeof(head) - 1, f);
	fclose(f);
	head[got] = '\0';
	assert_memory_equal("<?xml", head, 5);
	assert_true(vt_contains(head, "<svg"));
	unlink(svg);

	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "map", "nosuch", NULL));
	VT_ASSERT_EXIT(&o, 1, "vactl map nosuch");
	vt_output_free(&o);
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "map", "--width", "0", NULL));
	VT_ASSERT_EXIT(&o, 2, "vactl map --width 0");
	vt_output_free(&o);
	VT_ASSERT_OK(c, vad_free(c, p));
	vad_close(c);
}

/* A daemon that accepts but never answers (stopped): vactl gives up after --timeout. */
static void test_timeout(void **state)
{
	struct vt_daemon *d = *state;
	struct vt_output o;
	assert_int_equal(0, vt_daemon_signal(d, SIGSTOP));
	int ran = vt_vactl(d->socket_path, NULL, &o, "--json", "--timeout", "1s", "status", NULL);
	assert_int_equal(0, vt_daemon_signal(d, SIGCONT));
	assert_int_equal(0, ran);
	VT_ASSERT_EXIT(&o, 3, "vactl --timeout 1s status with the daemon stopped");
	assert_true(vt_contains(o.err, "no answer from the daemon"));
	struct json_object *j = vt_json_parse(o.out);
	assert_non_null(j);
	assert_string_equal("ETIMEOUT", jstr(j, "error"));
	json_object_put(j);
	vt_output_free(&o);
	/* Waiting on purpose does not count: a session sleeps past its timeout. */
	assert_int_equal(0, vt_vactl(d->socket_path, "sleep 1200ms\nstats\n", &o, "--timeout", "1s",
				     "session", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl --timeout 1s session sleeping 1.2s");
	vt_output_free(&o);
	assert_int_equal(0,
			 vt_vactl(d->socket_path, NULL, &o, "--timeout", "soon", "status", NULL));
	VT_ASSERT_EXIT(&o, 2, "vactl --timeout soon");
	vt_output_free(&o);
}

static void test_daemon_stops_clean(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_check_invariants(d));
	assert_int_equal(0, vt_daemon_stop(d));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_help_everywhere),
	    cmocka_unit_test(test_free_is_usage),
	    cmocka_unit_test(test_alloc_units_and_refusals),
	    cmocka_unit_test(test_alloc_hold_and_share),
	    cmocka_unit_test(test_top_samples),
	    cmocka_unit_test(test_session_human_lines),
	    cmocka_unit_test(test_history),
	    cmocka_unit_test(test_map),
	    cmocka_unit_test(test_timeout),
	    cmocka_unit_test(test_daemon_stops_clean),
	};
	return cmocka_run_group_tests_name("vactl client details", tests, group_setup,
					   vt_group_daemon_stop_if_running);
}
