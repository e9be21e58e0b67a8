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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_missing_dir, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_read_only_dir, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_newer_schema, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
