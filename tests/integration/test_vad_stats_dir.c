/*
 * test_vad_stats_dir.c - a stats database the daemon cannot use never stops the allocator:
 * a missing directory, a read-only one, and a file from a newer vad. Each time the daemon
 * serves clients anyway and its log says why it runs without stats.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "vtassert.h"

static int setup(void **state)
{
	struct vt_daemon *d = calloc(1, sizeof(*d));
	if (!d || vt_daemon_init(d) != 0)
		return -1;
	*state = d;
	return 0;
}

static int teardown(void **state)
{
	struct vt_daemon *d = *state;
	char ro[PATH_MAX + 8];
	snprintf(ro, sizeof(ro), "%s/ro", d->dir);
	chmod(ro, 0755); /* so the directory can be removed */
	vt_daemon_destroy(d);
	free(d);
	return 0;
}

/* Start with stats_db = db (as nobody when asked), check a client allocates, writes and frees,
 * and that the log holds "running without stats" and because. */
static void serves_without_stats(struct vt_daemon *d, const char *db, bool as_nobody,
				 const char *because)
{
	char extra[PATH_MAX + 64];
	snprintf(extra, sizeof(extra), "stats_db = %s\nstats_interval = 200ms\n", db);
	assert_int_equal(0, vt_daemon_write_config(d, extra, NULL));
	struct vt_start_opts opts = {.listen_fd = -1, .as_nobody = as_nobody};
	assert_int_equal(0, vt_daemon_start_opts(d, &opts));

	vad_client *c;
	assert_int_equal(0, vt_connect(d, "unbothered", &c));
	void *p;
	VT_ASSERT_OK(c, vad_alloc(c, 1 << 16, 0, &p));
	memset(p, 0x3c, 1 << 16);
	VT_ASSERT_OK(c, vad_free(c, p));
	vad_close(c);

	if (!vt_daemon_log_contains(d, "running without stats") || !vt_daemon_log_contains(d, db) ||
	    !vt_daemon_log_contains(d, because)) {
		vt_daemon_print_log(d, 40);
		fail_msg("the log does not say it runs without stats at %s (%s)", db, because);
	}
	assert_true(vt_daemon_alive(d));
	assert_int_equal(0, vt_daemon_stop(d));
}

static void test_missing_dir(void **state)
{
	struct vt_daemon *d = *state;
	char db[PATH_MAX + 32];
	snprintf(db, sizeof(db), "%s/no/such/dir/stats.db", d->dir);
	serves_without_stats(d, db, false, "cannot open");
	struct stat st;
	assert_int_equal(-1, stat(db, &st));
}

static void test_read_only_dir(void **state)
{
	struct vt_daemon *d = *state;
	/* root writes anywhere: then the daemon runs as nobody, for whom the directory is
	 * read only. */
	bool root = vt_is_root();
	if (root)
		assert_int_equal(0, chown(d->dir, 65534, 65534));
	char ro[PATH_MAX + 8], db[PATH_MAX + 32];
	snprintf(ro, sizeof(ro), "%s/ro", d->dir);
	snprintf(db, sizeof(db), "%s/stats.db", ro);
	assert_int_equal(0, mkdir(ro, 0555));
	assert_int_equal(0, chmod(ro, 0555));
	serves_without_stats(d, db, root, "cannot open");
	struct stat st;
	assert_int_equal(-1, stat(db, &st));
}

/* A file written by a newer vad is refused and left untouched. */
static void test_newer_schema(void **state)
{
	struct vt_daemon *d = *state;
	sqlite3 *db;
	assert_int_equal(SQLITE_OK, sqlite3_open(d->stats_db, &db));
	assert_int_equal(SQLITE_OK, sqlite3_exec(db,
						 "CREATE TABLE later(x INTEGER);"
						 "PRAGMA user_version = 9;",
						 NULL, NULL, NULL));
	sqlite3_close(db);
	serves_without_stats(d, d->stats_db, false, "newer");

	assert_int_equal(SQLITE_OK, sqlite3_open_v2(d->stats_db, &db, SQLITE_OPEN_READONLY, NULL));
	sqlite3_stmt *st;
	assert_int_equal(
	    SQLITE_OK, sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM sqlite_master", -1, &st, NULL));
	assert_int_equal(SQLITE_ROW, sqlite3_step(st));
	assert_int_equal(1, sqlite3_column_int(st, 0));
	sqlite3_finalize(st);
	sqlite3_close(db);
}

/* Poll until every path exists (the database and its WAL files appear with the first
 * snapshot). */
static void wait_files(const char *const *paths)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)vt_timeout_ms(20000) * 1000000u;
	for (const char *const *p = paths; *p; p++)
		while (access(*p, F_OK) != 0) {
			if (vt_now_ns() > deadline)
				fail_msg("%s never appeared", *p);
			vt_sleep_ms(20);
		}
}

/* The stats database lists every session's name, pid and uid: it and its -wal/-shm files
 * are created 0600 whatever umask the daemon was started with, while the socket keeps the
 * socket_mode it was given. */
static void test_db_private(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_write_config(d, "stats_interval = 100ms\n", NULL));
	mode_t old = umask(022); /* what a shell usually hands down */
	int rc = vt_daemon_start(d);
	umask(old);
	assert_int_equal(0, rc);
	char wal[PATH_MAX + 8], shm[PATH_MAX + 8];
	snprintf(wal, sizeof(wal), "%s-wal", d->stats_db);
	snprintf(shm, sizeof(shm), "%s-shm", d->stats_db);
	const char *const files[] = {d->stats_db, wal, shm, NULL};
	wait_files(files);
	for (const char *const *f = files; *f; f++) {
		struct stat st;
		assert_int_equal(0, stat(*f, &st));
		if ((st.st_mode & 0777) != 0600)
			fail_msg("%s has mode %04o, not 0600", *f, (unsigned)(st.st_mode & 0777));
	}
	struct stat st;
	assert_int_equal(0, stat(d->socket_path, &st));
	assert_int_equal(0666, st.st_mode & 0777); /* the harness's socket_mode */
	assert_int_equal(0, vt_daemon_stop(d));
}

static int64_t count_rows(const char *path, const char *sql)
{
	sqlite3 *db;
	int64_t n = -1;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
		sqlite3_stmt *st;
		if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
		    sqlite3_step(st) == SQLITE_ROW)
			n = sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
	}
	sqlite3_close(db);
	return n;
}

static char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	assert_int_equal(0, fseek(f, 0, SEEK_END));
	long n = ftell(f);
	assert_true(n > 0);
	rewind(f);
	char *buf = malloc((size_t)n);
	assert_non_null(buf);
	assert_int_equal((size_t)n, fread(buf, 1, (size_t)n, f));
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* vactl reads the history of a real daemon; a file whose schema makes a view call a
 * function is refused (trusted_schema off) and left as it was. */
static void test_history_defensive(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_write_config(d, "stats_interval = 100ms\n", NULL));
	assert_int_equal(0, vt_daemon_start(d));
	uint64_t deadline = vt_now_ns() + (uint64_t)vt_timeout_ms(20000) * 1000000u;
	while (count_rows(d->stats_db, "SELECT COUNT(*) FROM snapshot") < 2) {
		if (vt_now_ns() > deadline)
			fail_msg("fewer than 2 snapshots in %s", d->stats_db);
		vt_sleep_ms(20);
	}
	assert_int_equal(0, vt_daemon_stop(d));

	struct vt_output o;
	assert_int_equal(0, vt_vactl(NULL, NULL, &o, "history", "--db", d->stats_db, NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl history");
	assert_true(vt_contains(o.out, "default"));
	vt_output_free(&o);

	/* a copy whose snapshot table became a view calling a function */
	char evil[PATH_MAX + 16];
	snprintf(evil, sizeof(evil), "%s/evil.db", d->dir);
	sqlite3 *db;
	assert_int_equal(SQLITE_OK, sqlite3_open(d->stats_db, &db));
	char sql[PATH_MAX + 64];
	snprintf(sql, sizeof(sql), "VACUUM INTO '%s'", evil);
	assert_int_equal(SQLITE_OK, sqlite3_exec(db, sql, NULL, NULL, NULL));
	sqlite3_close(db);
	assert_int_equal(SQLITE_OK, sqlite3_open(evil, &db));
	char *err = NULL;
	if (sqlite3_exec(db,
			 "ALTER TABLE snapshot RENAME TO snapshot_data;"
			 "CREATE VIEW snapshot AS SELECT * FROM snapshot_data"
			 " WHERE json_valid('{}');",
			 NULL, NULL, &err) != SQLITE_OK)
		fail_msg("making the evil copy: %s", err);
	sqlite3_close(db);
	size_t before_len, after_len;
	char *before = read_all(evil, &before_len);

	assert_int_equal(0, vt_vactl(NULL, NULL, &o, "history", "--db", evil, NULL));
	VT_ASSERT_EXIT(&o, 1, "vactl history on a file with a view calling a function");
	if (!vt_contains(o.err, "unsafe use of json_valid()")) {
		vt_output_print("vactl history", &o);
		fail_msg("vactl did not refuse the view's function call");
	}
	vt_output_free(&o);
	char *after = read_all(evil, &after_len);
	assert_int_equal(before_len, after_len);
	assert_memory_equal(before, after, before_len);
	free(before);
	free(after);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_missing_dir, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_read_only_dir, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_newer_schema, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_db_private, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_history_defensive, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
