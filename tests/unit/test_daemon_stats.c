/*
 * test_daemon_stats.c - the stats database (schema, snapshots, sessions, events, lifetime
 * counters across restarts, pruning, refusals) and the latency histograms behind it.
 * Snapshots are taken at start and at stop, so nothing here depends on timing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "arena.h"
#include "config.h"
#include "frame.h"
#include "latency.h"
#include "log.h"
#include "service.h"
#include "session.h"
#include "stats.h"
#include "stats_fields.h"

#define HOUR_MS (3600ull * 1000ull)

static char db_path[128];

static struct vad_service *new_service(void)
{
	struct vad_config cfg;
	vad_config_defaults(&cfg);
	cfg.nodes = 1;
	const char *names[2] = {"default", "second"};
	struct vad_arena **arenas = calloc(2, sizeof(*arenas));
	assert_non_null(arenas);
	char err[512] = "";
	for (unsigned i = 0; i < 2; i++) {
		struct vad_arena_conf c;
		memset(&c, 0, sizeof(c));
		snprintf(c.name, sizeof(c.name), "%s", names[i]);
		c.size = 16ull << 20;
		c.quantum = 4096;
		c.allow_any = true;
		if (vad_arena_open(&c, &cfg, i, &arenas[i], err, sizeof(err)) != 0)
			fail_msg("vad_arena_open: %s", err);
	}
	struct vad_service *svc;
	if (vad_service_create(&cfg, arenas, 2, &svc, err, sizeof(err)) != 0)
		fail_msg("vad_service_create: %s", err);
	return svc;
}

static void feed(struct vad_session *s, Vad__Request *req)
{
	uint8_t buf[512];
	size_t n = vad_frame_encode_request(req, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(vad_session_feed(s, buf, n), n);
	vad_session_output_done(s, vad_session_output_pending(s));
}

/* A session that says hello as name and allocates n ranges of the default arena. */
static struct vad_session *session_with_allocs(struct vad_service *svc, const char *name, int n)
{
	struct vad_peer p = {.pid = 77, .uid = 1000, .gid = 1000};
	struct vad_session *s = vad_session_new(svc, &p);
	assert_non_null(s);
	Vad__Hello h = VAD__HELLO__INIT;
	h.name = (char *)name;
	h.version = VAD_PROTOCOL_VERSION;
	Vad__Request q = VAD__REQUEST__INIT;
	q.op_case = VAD__REQUEST__OP_HELLO;
	q.hello = &h;
	feed(s, &q);
	for (int i = 0; i < n; i++) {
		Vad__Alloc a = VAD__ALLOC__INIT;
		a.arena = (char *)"";
		a.size = 4096;
		Vad__Request r = VAD__REQUEST__INIT;
		r.op_case = VAD__REQUEST__OP_ALLOC;
		r.alloc = &a;
		feed(s, &r);
	}
	assert_int_equal(__atomic_load_n(&s->allocs, __ATOMIC_RELAXED), n);
	return s;
}

/* Allocate n pages and write them, as a client would through its mapping (busy, so no
 * drain gives them back meanwhile). */
static void write_pages(struct vad_arena *a, size_t n)
{
	uint64_t off;
	assert_int_equal(va_alloc(a->vs, n * 4096, 0, NULL, &off), VA_OK);
	uint8_t *p = mmap(NULL, n * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, (off_t)off);
	assert_true(p != MAP_FAILED);
	memset(p, 0xab, n * 4096);
	munmap(p, n * 4096);
}

static sqlite3 *open_db(void)
{
	sqlite3 *db;
	assert_int_equal(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	return db;
}

static int64_t query_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		fail_msg("%s: %s", sql, sqlite3_errmsg(db));
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	int64_t v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

static int setup(void **state)
{
	(void)state;
	vad_log_set_level(VAD_LOG_ERR);
	snprintf(db_path, sizeof(db_path), "/tmp/vad-test-stats-%d.db", (int)getpid());
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char p[160];
	unlink(db_path);
	snprintf(p, sizeof(p), "%s-wal", db_path);
	unlink(p);
	snprintf(p, sizeof(p), "%s-shm", db_path);
	unlink(p);
	return 0;
}

/* ---- latency ----------------------------------------------------------------------------- */

static void test_latency_quantiles(void **state)
{
	(void)state;
	struct vad_latency *l = aligned_alloc(64, sizeof(*l));
	assert_non_null(l);
	memset(l, 0, sizeof(*l));
	struct vad_latency_sum before, now;
	vad_latency_sum(l, &before);
	assert_int_equal(vad_latency_quantile(&before, NULL, 0.5, NULL), 0);

	vad_latency_set_shard(3);
	for (int i = 0; i < 1000; i++)
		vad_latency_record(l, 100);
	for (int i = 0; i < 10; i++)
		vad_latency_record(l, 10000);
	vad_latency_record(l, 2);
	vad_latency_sum(l, &now);
	uint64_t n;
	uint64_t p50 = vad_latency_quantile(&now, &before, 0.5, &n);
	assert_int_equal(n, 1011);
	assert_true(p50 >= 96 && p50 < 112); /* 100 lies in [96, 112) */
	uint64_t p999 = vad_latency_quantile(&now, &before, 0.999, NULL);
	assert_true(p999 >= 8192 && p999 < 12288);
	assert_int_equal(vad_latency_quantile(&now, &before, 0.0001, NULL), 2);

	/* Only what happened since "before" counts. */
	vad_latency_sum(l, &before);
	vad_latency_set_shard(5);
	vad_latency_record(l, 1u << 20);
	vad_latency_sum(l, &now);
	uint64_t p = vad_latency_quantile(&now, &before, 0.5, &n);
	assert_int_equal(n, 1);
	assert_true(p >= (1u << 20) && p < (5u << 18));
	free(l);
}

/* ---- stats database ---------------------------------------------------------------------- */

static void test_snapshots_and_lifetime(void **state)
{
	(void)state;
	/* First run: 5 allocations, one session alive at shutdown. */
	struct vad_service *svc = new_service();
	struct vad_stats_writer *w;
	char err[512];
	if (vad_stats_start(svc, db_path, HOUR_MS, 30 * 24 * HOUR_MS, &w, err, sizeof(err)) != 0)
		fail_msg("vad_stats_start: %s", err);
	struct vad_session *s = session_with_allocs(svc, "writer", 5);
	write_pages(svc->arenas[1], 3);
	vad_service_event(svc, "reload", "limits changed");
	vad_stats_stop(w);
	vad_session_free(s);
	vad_service_destroy(svc);

	sqlite3 *db = open_db();
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM snapshot"), 2);
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM snapshot WHERE final = 1"), 1);
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM arena_snapshot"), 4);
	assert_int_equal(query_int(db, "SELECT busy_bytes FROM arena_snapshot a JOIN snapshot s"
				       " ON a.snapshot_id = s.id WHERE s.final = 1 AND"
				       " a.arena = 'default'"),
			 5 * 4096);
	assert_int_equal(query_int(db, "SELECT interval_allocs FROM arena_snapshot a JOIN snapshot"
				       " s ON a.snapshot_id = s.id WHERE s.final = 1 AND"
				       " a.arena = 'default'"),
			 5);
	assert_true(
	    query_int(db, "SELECT alloc_p50_ns FROM arena_snapshot a JOIN snapshot s ON"
			  " a.snapshot_id = s.id WHERE s.final = 1 AND a.arena = 'default'") > 0);
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM session_snapshot WHERE name ="
				       " 'writer' AND held_bytes = 20480 AND allocs = 5"),
			 1);
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM event WHERE kind = 'start'"), 1);
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM event WHERE kind = 'stop'"), 1);
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM event WHERE kind = 'reload' AND"
				       " detail = 'limits changed'"),
			 1);
	assert_int_equal(query_int(db, "SELECT allocs FROM lifetime WHERE name = 'default'"), 5);
	assert_int_equal(query_int(db, "SELECT starts FROM lifetime WHERE name = 'vad'"), 1);
	assert_int_equal(query_int(db, "SELECT value FROM meta WHERE key = 'schema_version'"),
			 VAD_STATS_SCHEMA_VERSION);
	assert_int_equal(query_int(db, "PRAGMA user_version"), VAD_STATS_SCHEMA_VERSION);
	/* Resident bytes: the 3 pages written, in the final snapshot; none at the start, none
	 * where ranges were allocated but never touched. */
	assert_int_equal(query_int(db, "SELECT resident_bytes FROM arena_snapshot a JOIN snapshot s"
				       " ON a.snapshot_id = s.id WHERE s.final = 1 AND"
				       " a.arena = 'second'"),
			 3 * 4096);
	assert_int_equal(query_int(db, "SELECT resident_bytes FROM arena_snapshot a JOIN snapshot s"
				       " ON a.snapshot_id = s.id WHERE s.final = 0 AND"
				       " a.arena = 'second'"),
			 0);
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM arena_snapshot WHERE arena = 'default'"
				       " AND resident_bytes = 0"),
			 2);
	/* commit = touch arenas commit nothing (commit = reserve: test_service_memory) */
	assert_int_equal(query_int(db,
				   "SELECT COUNT(*) FROM arena_snapshot WHERE committed_bytes = 0"
				   " AND commit_failures = 0"),
			 query_int(db, "SELECT COUNT(*) FROM arena_snapshot"));
	/* The session alive at the stop was ended by it. */
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM session WHERE name = 'writer' AND"
				       " end_state = 'daemon-stop' AND peak_bytes = 20480 AND"
				       " allocs = 5 AND disconnect_ms IS NOT NULL"),
			 1);
	sqlite3_close(db);

	/* Second run on the same file: lifetime counters go on from where they were. */
	svc = new_service();
	if (vad_stats_start(svc, db_path, HOUR_MS, 30 * 24 * HOUR_MS, &w, err, sizeof(err)) != 0)
		fail_msg("vad_stats_start: %s", err);
	s = session_with_allocs(svc, "again", 3);
	vad_session_free(s);
	vad_stats_stop(w);
	vad_service_destroy(svc);

	db = open_db();
	assert_int_equal(query_int(db, "SELECT allocs FROM lifetime WHERE name = 'default'"), 8);
	assert_int_equal(query_int(db, "SELECT frees FROM lifetime WHERE name = 'default'"), 3);
	assert_int_equal(query_int(db, "SELECT starts FROM lifetime WHERE name = 'vad'"), 2);
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM snapshot"), 4);
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM event WHERE kind = 'start'"), 2);
	sqlite3_close(db);

	/* Third run keeping 1 ms: the older runs' rows are pruned. */
	usleep(5000);
	svc = new_service();
	if (vad_stats_start(svc, db_path, HOUR_MS, 1, &w, err, sizeof(err)) != 0)
		fail_msg("vad_stats_start: %s", err);
	usleep(5000);
	vad_stats_stop(w);
	vad_service_destroy(svc);
	db = open_db();
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM snapshot"), 1);
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM arena_snapshot"), 2);
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM session_snapshot"), 0);
	assert_int_equal(query_int(db, "SELECT starts FROM lifetime WHERE name = 'vad'"), 3);
	sqlite3_close(db);
}

/* ---- migration ----------------------------------------------------------------------------- */

/* The version-1 fixture, found from this file's place in the tree (tests run from the root). */
static void load_fixture(const char *name)
{
	char path[512], dir[256];
	snprintf(dir, sizeof(dir), "%s", __FILE__);
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	else
		snprintf(dir, sizeof(dir), ".");
	snprintf(path, sizeof(path), "%s/../fixtures/%s", dir, name);
	FILE *f = fopen(path, "r");
	if (!f)
		fail_msg("cannot open the fixture %s (run the tests from the source root)", path);
	static char sql[64 * 1024];
	size_t n = fread(sql, 1, sizeof(sql) - 1, f);
	fclose(f);
	assert_true(n > 0 && n < sizeof(sql) - 1);
	sql[n] = '\0';
	sqlite3 *db;
	assert_int_equal(sqlite3_open(db_path, &db), SQLITE_OK);
	char *msg = NULL;
	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
		fail_msg("%s: %s", path, msg ? msg : "?");
	sqlite3_close(db);
}

static void test_migrate_from_v1(void **state)
{
	(void)state;
	load_fixture("stats-v1.sql");
	sqlite3 *db = open_db();
	assert_int_equal(query_int(db, "PRAGMA user_version"), 0);
	sqlite3_close(db);

	/* retention 0: keep the fixture's old rows. */
	struct vad_service *svc = new_service();
	struct vad_stats_writer *w;
	char err[512];
	if (vad_stats_start(svc, db_path, HOUR_MS, 0, &w, err, sizeof(err)) != 0)
		fail_msg("vad_stats_start on a version-1 file: %s", err);
	struct vad_session *s = session_with_allocs(svc, "after", 2);
	vad_stats_stop(w);
	vad_session_free(s);
	vad_service_destroy(svc);

	db = open_db();
	assert_int_equal(query_int(db, "PRAGMA user_version"), VAD_STATS_SCHEMA_VERSION);
	assert_int_equal(query_int(db, "SELECT value FROM meta WHERE key = 'schema_version'"),
			 VAD_STATS_SCHEMA_VERSION);
	/* The old rows are intact... */
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM snapshot WHERE id <= 2"), 2);
	assert_int_equal(query_int(db, "SELECT busy_bytes FROM arena_snapshot WHERE"
				       " snapshot_id = 1 AND arena = 'default'"),
			 40960);
	assert_int_equal(query_int(db, "SELECT alloc_p999_ns FROM arena_snapshot WHERE"
				       " snapshot_id = 1 AND arena = 'default'"),
			 9000);
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM arena_snapshot WHERE"
				       " snapshot_id <= 2 AND alloc_max_ns IS NULL"),
			 4);
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM session_snapshot WHERE"
				       " snapshot_id <= 2"),
			 3);
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM event WHERE id <= 2"), 2);
	/* ...their sessions rebuilt from the snapshots... */
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM session WHERE name = 'stays' AND"
				       " end_state = 'daemon-stop' AND peak_bytes = 32768 AND"
				       " allocs = 12 AND disconnect_ms = 1700000010000"),
			 1);
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM session WHERE name = 'left' AND"
				       " end_state = 'unrecorded' AND peak_bytes = 8192"),
			 1);
	/* ...lifetime counters go on from the old ones... */
	assert_int_equal(query_int(db, "SELECT allocs FROM lifetime WHERE name = 'default'"), 44);
	assert_int_equal(query_int(db, "SELECT starts FROM lifetime WHERE name = 'vad'"), 2);
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM event WHERE kind = 'start'"), 2);
	/* ...and the new snapshots are written in the new layout. */
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM snapshot"), 4);
	assert_true(query_int(db, "SELECT alloc_max_ns FROM arena_snapshot a JOIN snapshot s ON"
				  " a.snapshot_id = s.id WHERE s.id = 4 AND a.arena = 'default'") >=
		    query_int(db, "SELECT alloc_p50_ns FROM arena_snapshot a JOIN snapshot s ON"
				  " a.snapshot_id = s.id WHERE s.id = 4 AND a.arena = 'default'"));
	assert_true(query_int(db, "SELECT alloc_max_ns FROM arena_snapshot WHERE"
				  " snapshot_id = 4 AND arena = 'default'") > 0);
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM session WHERE name = 'after' AND"
				       " end_state = 'daemon-stop' AND allocs = 2"),
			 1);
	sqlite3_close(db);

	/* Opening it again (already the current version) changes nothing in the layout. */
	svc = new_service();
	if (vad_stats_start(svc, db_path, HOUR_MS, 0, &w, err, sizeof(err)) != 0)
		fail_msg("vad_stats_start on a version-3 file: %s", err);
	vad_stats_stop(w);
	vad_service_destroy(svc);
	db = open_db();
	assert_int_equal(query_int(db, "PRAGMA user_version"), VAD_STATS_SCHEMA_VERSION);
	assert_int_equal(query_int(db, "SELECT allocs FROM lifetime WHERE name = 'default'"), 44);
	assert_int_equal(query_int(db, "SELECT starts FROM lifetime WHERE name = 'vad'"), 3);
	sqlite3_close(db);
}

/* Version 2 -> 3 (resident_bytes): the old rows keep every value and get NULL, the new ones
 * the arena's allocated bytes; sessions and lifetime counters go on. */
static void test_migrate_from_v2(void **state)
{
	(void)state;
	load_fixture("stats-v2.sql");
	sqlite3 *db = open_db();
	assert_int_equal(query_int(db, "PRAGMA user_version"), 2);
	sqlite3_close(db);

	struct vad_service *svc = new_service();
	struct vad_stats_writer *w;
	char err[512];
	if (vad_stats_start(svc, db_path, HOUR_MS, 0, &w, err, sizeof(err)) != 0)
		fail_msg("vad_stats_start on a version-2 file: %s", err);
	write_pages(svc->arenas[1], 5);
	vad_stats_stop(w);
	vad_service_destroy(svc);

	db = open_db();
	assert_int_equal(query_int(db, "PRAGMA user_version"), VAD_STATS_SCHEMA_VERSION);
	assert_int_equal(query_int(db, "SELECT value FROM meta WHERE key = 'schema_version'"),
			 VAD_STATS_SCHEMA_VERSION);
	/* old rows: intact, resident unknown */
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM arena_snapshot WHERE"
				       " snapshot_id <= 2 AND resident_bytes IS NULL"),
			 4);
	assert_int_equal(query_int(db, "SELECT alloc_max_ns FROM arena_snapshot WHERE"
				       " snapshot_id = 1 AND arena = 'default'"),
			 12000);
	assert_int_equal(query_int(db, "SELECT busy_bytes FROM arena_snapshot WHERE"
				       " snapshot_id = 2 AND arena = 'default'"),
			 8192);
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM session WHERE name = 'left' AND"
				       " end_state = 'closed'"),
			 1);
	/* new rows: the start snapshot (nothing written yet) and the final one (5 pages) */
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM snapshot"), 4);
	assert_int_equal(query_int(db, "SELECT resident_bytes FROM arena_snapshot WHERE"
				       " snapshot_id = 3 AND arena = 'second'"),
			 0);
	assert_int_equal(query_int(db, "SELECT resident_bytes FROM arena_snapshot WHERE"
				       " snapshot_id = 4 AND arena = 'second'"),
			 5 * 4096);
	assert_int_equal(query_int(db, "SELECT resident_bytes FROM arena_snapshot WHERE"
				       " snapshot_id = 4 AND arena = 'default'"),
			 0);
	assert_int_equal(query_int(db, "SELECT allocs FROM lifetime WHERE name = 'default'"), 42);
	assert_int_equal(query_int(db, "SELECT starts FROM lifetime WHERE name = 'vad'"), 2);
	sqlite3_close(db);
}

/* Lifetime counters carried over from a file near 2^64 stop there instead of wrapping. */
static void test_lifetime_saturates(void **state)
{
	(void)state;
	struct vad_service *svc = new_service();
	struct vad_stats_writer *w;
	char err[512];
	if (vad_stats_start(svc, db_path, HOUR_MS, 0, &w, err, sizeof(err)) != 0)
		fail_msg("vad_stats_start: %s", err);
	vad_stats_stop(w);
	vad_service_destroy(svc);
	sqlite3 *rw;
	assert_int_equal(sqlite3_open(db_path, &rw), SQLITE_OK);
	/* -2 as stored is 2^64 - 2 as read back: one more start and 5 allocs must not wrap */
	assert_int_equal(sqlite3_exec(rw,
				      "UPDATE lifetime SET allocs = -2 WHERE name = 'default';"
				      "UPDATE lifetime SET starts = -1 WHERE name = 'vad';",
				      NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(rw);

	svc = new_service();
	if (vad_stats_start(svc, db_path, HOUR_MS, 0, &w, err, sizeof(err)) != 0)
		fail_msg("vad_stats_start: %s", err);
	struct vad_session *s = session_with_allocs(svc, "many", 5);
	vad_stats_stop(w);
	vad_session_free(s);
	vad_service_destroy(svc);
	sqlite3 *db = open_db();
	assert_int_equal(query_int(db, "SELECT allocs FROM lifetime WHERE name = 'default'"), -1);
	assert_int_equal(query_int(db, "SELECT starts FROM lifetime WHERE name = 'vad'"), -1);
	sqlite3_close(db);
}

/* A file from a newer vad (user_version above ours) is refused and left as it was. */
static void test_newer_version_refused(void **state)
{
	(void)state;
	sqlite3 *db;
	assert_int_equal(sqlite3_open(db_path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
				      "CREATE TABLE future(x INTEGER); PRAGMA user_version = 7;",
				      NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	struct vad_service *svc = new_service();
	struct vad_stats_writer *w = NULL;
	char err[512] = "";
	assert_int_equal(vad_stats_start(svc, db_path, HOUR_MS, HOUR_MS, &w, err, sizeof(err)), 1);
	assert_non_null(w);
	assert_non_null(strstr(err, "version 7"));
	assert_non_null(strstr(err, "newer"));
	vad_stats_stop(w);
	vad_service_destroy(svc);
	db = open_db();
	assert_int_equal(query_int(db, "PRAGMA user_version"), 7);
	assert_int_equal(query_int(db, "SELECT COUNT(*) FROM sqlite_master"), 1);
	sqlite3_close(db);
}

static void test_refusals(void **state)
{
	(void)state;
	struct vad_service *svc = new_service();
	struct vad_stats_writer *w = NULL;
	char err[512] = "";
	assert_int_equal(vad_stats_start(svc, "/nonexistent-dir/x/stats.db", HOUR_MS, HOUR_MS, &w,
					 err, sizeof(err)),
			 1);
	assert_non_null(w);
	assert_non_null(strstr(err, "/nonexistent-dir/x/stats.db"));
	vad_stats_stop(w);

	/* A database from a future vad is left alone. */
	sqlite3 *db;
	assert_int_equal(sqlite3_open(db_path, &db), SQLITE_OK);
	assert_int_equal(
	    sqlite3_exec(db,
			 "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
			 "INSERT INTO meta VALUES('schema_version', '99');",
			 NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(vad_stats_start(svc, db_path, HOUR_MS, HOUR_MS, &w, err, sizeof(err)), 1);
	assert_non_null(strstr(err, "version 99"));
	vad_stats_stop(w);

	/* Not a database at all. */
	teardown(NULL);
	FILE *f = fopen(db_path, "w");
	assert_non_null(f);
	fputs("this is not an SQLite file, just some text long enough to have a header........", f);
	fclose(f);
	assert_int_equal(vad_stats_start(svc, db_path, HOUR_MS, HOUR_MS, &w, err, sizeof(err)), 1);
	assert_non_null(strstr(err, db_path));
	vad_stats_stop(w);
	vad_service_destroy(svc);
}

/* A database that cannot be opened at start is retried: once its directory exists, the
 * writer opens it, records the start and writes snapshots. */
static void test_retry_until_openable(void **state)
{
	(void)state;
	char dir[] = "/tmp/vad-stats-retry-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char sub[sizeof(dir) + 8], path[sizeof(dir) + 32];
	snprintf(sub, sizeof(sub), "%s/later", dir);
	snprintf(path, sizeof(path), "%s/stats.db", sub);
	struct vad_service *svc = new_service();
	struct vad_stats_writer *w = NULL;
	char err[512] = "";
	assert_int_equal(vad_stats_start(svc, path, 100, HOUR_MS, &w, err, sizeof(err)), 1);
	assert_non_null(w);
	assert_int_equal(mkdir(sub, 0700), 0);
	/* Retries come every second here (the interval, clamped to 1-30 s). */
	bool opened = false;
	for (int i = 0; i < 100 && !opened; i++) {
		usleep(100000);
		sqlite3 *db = NULL;
		if (access(path, F_OK) == 0 &&
		    sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
			/* The writer may hold the file while it creates it: busy is "not yet". */
			sqlite3_busy_timeout(db, 1000);
			sqlite3_stmt *st;
			if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) ==
			    SQLITE_OK) {
				opened = sqlite3_step(st) == SQLITE_ROW &&
					 sqlite3_column_int64(st, 0) == VAD_STATS_SCHEMA_VERSION;
				sqlite3_finalize(st);
			}
		}
		sqlite3_close(db);
	}
	assert_true(opened);
	vad_stats_stop(w);
	vad_service_destroy(svc);
	sqlite3 *db;
	assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_true(query_int(db, "SELECT COUNT(*) FROM event WHERE kind = 'start'") >= 1);
	sqlite3_close(db);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* table's columns in the file, in order, each with its type, as one string. */
static void table_columns(sqlite3 *db, const char *table, char *out, size_t cap)
{
	char sql[128];
	snprintf(sql, sizeof(sql), "PRAGMA table_info(%s)", table);
	sqlite3_stmt *st;
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	out[0] = '\0';
	while (sqlite3_step(st) == SQLITE_ROW) {
		size_t used = strlen(out);
		snprintf(out + used, cap - used, ", %s %s", sqlite3_column_text(st, 1),
			 sqlite3_column_text(st, 2));
	}
	sqlite3_finalize(st);
}

/* No row of table has NULL in column (every column of the tables is bound by name). */
static void assert_no_nulls(sqlite3 *db, const char *table, const char *column)
{
	char sql[160];
	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM %s WHERE %s IS NULL", table, column);
	if (query_int(db, sql) != 0)
		fail_msg("%s.%s is NULL in a row just written", table, column);
	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM %s", table);
	assert_true(query_int(db, sql) > 0);
}

/* A new file's columns are the tables of stats_fields.h, and a snapshot fills every one. */
static void test_columns_match_the_tables(void **state)
{
	(void)state;
	struct vad_service *svc = new_service();
	struct vad_stats_writer *w;
	char err[512];
	if (vad_stats_start(svc, db_path, HOUR_MS, 30 * 24 * HOUR_MS, &w, err, sizeof(err)) != 0)
		fail_msg("vad_stats_start: %s", err);
	struct vad_session *s = session_with_allocs(svc, "columns", 2);
	vad_stats_stop(w);
	vad_session_free(s);
	vad_service_destroy(svc);

	sqlite3 *db = open_db();
	char got[2048];
#define COLUMN_TEXT(name, type, ...) ", " #name " " #type
	table_columns(db, "arena_snapshot", got, sizeof(got));
	assert_string_equal(
	    got, ", snapshot_id INTEGER, arena TEXT" VAD_STATS_ARENA_COLUMNS(COLUMN_TEXT));
	table_columns(db, "session_snapshot", got, sizeof(got));
	assert_string_equal(
	    got,
	    ", snapshot_id INTEGER, session_id INTEGER" VAD_STATS_SESSION_COLUMNS(COLUMN_TEXT));
	table_columns(db, "lifetime", got, sizeof(got));
	assert_string_equal(
	    got, ", name TEXT" VAD_STATS_LIFETIME_COLUMNS(COLUMN_TEXT) ", updated_ms INTEGER");
#undef COLUMN_TEXT
#define ARENA_NO_NULLS(name, ...)    assert_no_nulls(db, "arena_snapshot", #name);
#define SESSION_NO_NULLS(name, ...)  assert_no_nulls(db, "session_snapshot", #name);
#define LIFETIME_NO_NULLS(name, ...) assert_no_nulls(db, "lifetime", #name);
	VAD_STATS_ARENA_COLUMNS(ARENA_NO_NULLS)
	VAD_STATS_SESSION_COLUMNS(SESSION_NO_NULLS)
	VAD_STATS_LIFETIME_COLUMNS(LIFETIME_NO_NULLS)
#undef LIFETIME_NO_NULLS
#undef SESSION_NO_NULLS
#undef ARENA_NO_NULLS
	assert_int_equal(query_int(db, "PRAGMA user_version"), VAD_STATS_SCHEMA_VERSION);
	sqlite3_close(db);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_latency_quantiles),
	    cmocka_unit_test_setup_teardown(test_snapshots_and_lifetime, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_migrate_from_v1, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_newer_version_refused, setup, teardown),
	    cmocka_unit_test(test_retry_until_openable),
	    cmocka_unit_test_setup_teardown(test_migrate_from_v2, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lifetime_saturates, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_columns_match_the_tables, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
