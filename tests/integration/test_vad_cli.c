/*
 * test_vad_cli.c - the daemon as a program: --version, --check-config on good and bad
 * files (exit 1 and FILE:LINE), usage errors, SIGHUP reloading limits, SIGTERM with
 * clients connected, kill -9 (clients see EGONE and keep their mappings; a new daemon
 * takes over the stale socket), a second daemon refusing a live socket, and the stats
 * database being written.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <sqlite3.h>

#include "socket_path.h"
#include "vtassert.h"

#define PAGE	    4096u
#define RUN_TIMEOUT vt_timeout_ms(20000)

/* Run BUILD/vad with args (NULL-terminated) and capture it. */
static void run_vad(struct vt_output *o, ...)
{
	char bin[PATH_MAX];
	snprintf(bin, sizeof(bin), "%s/vad", vt_build_dir());
	char *argv[16];
	int n = 0;
	argv[n++] = bin;
	va_list ap;
	va_start(ap, o);
	const char *a;
	while ((a = va_arg(ap, const char *)) && n < 15)
		argv[n++] = (char *)a;
	va_end(ap);
	argv[n] = NULL;
	assert_int_equal(0, vt_run(argv, NULL, RUN_TIMEOUT, o));
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_true(fputs(text, f) >= 0);
	assert_int_equal(0, fclose(f));
}

/* ---- command line ------------------------------------------------------------- */

static void test_version_and_usage(void **state)
{
	struct vt_output o;
	run_vad(&o, "--version", NULL);
	VT_ASSERT_EXIT(&o, 0, "vad --version");
	assert_true(vt_contains(o.out, VAD_VERSION_STRING));
	vt_output_free(&o);
	run_vad(&o, "-V", NULL);
	VT_ASSERT_EXIT(&o, 0, "vad -V");
	assert_true(vt_contains(o.out, VAD_VERSION_STRING));
	vt_output_free(&o);
	run_vad(&o, "--help", NULL);
	VT_ASSERT_EXIT(&o, 0, "vad --help");
	assert_true(vt_contains(o.out, "--check-config"));
	vt_output_free(&o);
	run_vad(&o, "--no-such-option", NULL);
	VT_ASSERT_EXIT(&o, 2, "vad --no-such-option");
	assert_true(o.err[0] != '\0');
	vt_output_free(&o);
	run_vad(&o, "-c", NULL);
	VT_ASSERT_EXIT(&o, 2, "vad -c (no file)");
	vt_output_free(&o);
}

static void test_check_config_good(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_init(d));
	assert_int_equal(0, vt_daemon_write_config(d, "quota_client = 64M\nlog_level = debug\n",
						   "[arena default]\nsize = 1G\n\n"
						   "[arena big]\nsize = 64G\nquantum = 2M\n"
						   "allow_uids = root, 65534\n"));
	struct vt_output o;
	run_vad(&o, "-c", d->conf_path, "--check-config", NULL);
	VT_ASSERT_EXIT(&o, 0, "vad --check-config (good)");
	assert_true(vt_contains(o.out, "big"));
	assert_true(vt_contains(o.out, "default"));
	vt_output_free(&o);
	/* --check-config does not start anything */
	assert_int_equal(-1, access(d->socket_path, F_OK));
}

struct bad_config {
	const char *text;
	int line; /* where the mistake is */
	const char *why;
};

static const struct bad_config bad_configs[] = {
    {"[vad]\nworkers = 2\nworkers_typo = 3\n", 3, "unknown key"},
    {"[vad]\n# comment\nworkers = banana\n", 3, "not a number"},
    {"[vad]\n\n[arena a]\nsize = 12Q\n", 4, "bad size unit"},
    {"[vad]\n[arena a]\nsize = 1G\nquantum = 12K\n", 4, "quantum not a power of two"},
    {"[vad]\nquota_client = -5\n", 2, "negative size"},
    {"[vad]\nstats_interval = soon\n", 2, "bad duration"},
    {"[vad]\nlog_level = chatty\n", 2, "unknown log level"},
    {"[vad]\n[arena a]\nsize = 1G\n[arena a]\nsize = 2G\n", 4, "duplicate arena"},
    {"[vad]\n[nonsense]\nx = 1\n", 2, "unknown section"},
    {"[vad]\n[arena a]\nsize = 1G\nallow_uids = no_such_user_xyz\n", 4, "unknown user"},
    {"[vad]\nsocket_mode = 999\n", 2, "bad octal mode"},
};

static void test_check_config_bad(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_init(d));
	int failures = 0;
	for (size_t i = 0; i < sizeof(bad_configs) / sizeof(bad_configs[0]); i++) {
		const struct bad_config *b = &bad_configs[i];
		write_file(d->conf_path, b->text);
		struct vt_output o;
		run_vad(&o, "-c", d->conf_path, "--check-config", NULL);
		char where[PATH_MAX + 16];
		snprintf(where, sizeof(where), "%s:%d", d->conf_path, b->line);
		bool named = vt_contains(o.err, where) || vt_contains(o.out, where);
		if (o.exit_code != 1 || !named) {
			fprintf(stderr, "bad config %zu (%s), expected exit 1 and \"%s\":\n%s\n", i,
				b->why, where, b->text);
			vt_output_print("vad --check-config", &o);
			failures++;
		}
		vt_output_free(&o);
	}
	assert_int_equal(0, failures);

	/* A file that does not exist: exit 1, and the message names it. */
	struct vt_output o;
	run_vad(&o, "-c", "/nonexistent/vad.conf", "--check-config", NULL);
	VT_ASSERT_EXIT(&o, 1, "vad --check-config on a missing file");
	assert_true(vt_contains(o.err, "/nonexistent/vad.conf"));
	vt_output_free(&o);

	/* Every error of a file, each at its line, then their count; none is started. */
	write_file(d->conf_path, "[vad]\nworkers = many   # comment\nmax_batch = 0\n"
				 "[arena a]\nsize = 4GB\n");
	run_vad(&o, "-c", d->conf_path, "--check-config", NULL);
	VT_ASSERT_EXIT(&o, 1, "vad --check-config with three errors");
	char want[PATH_MAX + 64];
	static const int lines[] = {2, 3, 5};
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		snprintf(want, sizeof(want), "vad: %s:%d: ", d->conf_path, lines[i]);
		if (!vt_contains(o.err, want))
			fail_msg("no \"%s\" in:\n%s", want, o.err);
	}
	snprintf(want, sizeof(want), "vad: %s: 3 errors\n", d->conf_path);
	assert_true(vt_contains(o.err, want));
	vt_output_free(&o);

	/* Starting (not just checking) with a bad config fails the same way. */
	write_file(d->conf_path, bad_configs[1].text);
	run_vad(&o, "-c", d->conf_path, "--foreground", NULL);
	VT_ASSERT_EXIT(&o, 1, "vad with a bad config");
	vt_output_free(&o);
}

/* ---- signals -------------------------------------------------------------------- */

static const char *const small_arena = "[arena default]\nsize = 64M\n";

/* Poll until an allocation of size succeeds (the reload is asynchronous). */
static int alloc_eventually(vad_client *c, size_t size, void **out)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)vt_timeout_ms(5000) * 1000000u;
	int rc;
	while ((rc = vad_alloc(c, size, 0, out)) == VAD_EQUOTA && vt_now_ns() < deadline)
		vt_sleep_ms(20);
	return rc;
}

/* Wait until the daemon has logged n lines containing needle. */
static void wait_log_lines(const struct vt_daemon *d, const char *needle, int n)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)vt_timeout_ms(10000) * 1000000u;
	while (vt_daemon_log_count(d, needle) < n) {
		if (vt_now_ns() > deadline) {
			vt_daemon_print_log(d, 20);
			fail_msg("the daemon logged %d lines with \"%s\", not %d",
				 vt_daemon_log_count(d, needle), needle, n);
		}
		vt_sleep_ms(20);
	}
}

static void test_sighup_reloads_quota(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, "quota_client = 1M\n", small_arena));
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "reload", &c));
	void *p1, *p2, *p3;
	VT_ASSERT_OK(c, vad_alloc(c, 1024 * 1024, 0, &p1));
	VT_ASSERT_ERR(c, VAD_EQUOTA, vad_alloc(c, PAGE, 0, &p2));

	/* Raise the quota in the file and send SIGHUP. */
	assert_int_equal(0, vt_daemon_write_config(d, "quota_client = 2M\n", small_arena));
	assert_int_equal(0, vt_daemon_signal(d, SIGHUP));
	int rc = alloc_eventually(c, PAGE, &p2);
	if (rc != 0)
		fail_msg("after SIGHUP with quota_client = 2M: %d (%s)", rc, vad_last_error(c));
	/* The new limit, not no limit: 1M + 4K held, another 1M is too much. */
	VT_ASSERT_ERR(c, VAD_EQUOTA, vad_alloc(c, 1024 * 1024, 0, &p3));

	/* A broken file on SIGHUP: the daemon keeps running with the limits it has. */
	write_file(d->conf_path, "[vad]\nquota_client = lots\n");
	assert_int_equal(0, vt_daemon_signal(d, SIGHUP));
	wait_log_lines(d, "SIGHUP: ", 2); /* the second SIGHUP handled (refused) */
	assert_true(vt_daemon_alive(d));
	VT_ASSERT_OK(c, vad_alloc(c, PAGE, 0, &p3));
	VT_ASSERT_OK(c, vad_free(c, p3));
	VT_ASSERT_ERR(c, VAD_EQUOTA, vad_alloc(c, 1024 * 1024, 0, &p3));

	/* A reload request on a file with three errors refuses it naming each, and the count. */
	write_file(d->conf_path, "[vad]\nquota_client = lots\nworkers = x\n[arena a]\n");
	VT_ASSERT_ERR(c, VAD_EINVAL, vad_reload(c));
	const char *why = vad_last_error(c);
	char want[PATH_MAX + 32];
	static const int lines[] = {2, 3, 4};
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		snprintf(want, sizeof(want), "%s:%d: ", d->conf_path, lines[i]);
		if (!strstr(why, want))
			fail_msg("no \"%s\" in the refusal: %s", want, why);
	}
	snprintf(want, sizeof(want), "%s: 3 errors", d->conf_path);
	if (!strstr(why, want))
		fail_msg("no \"%s\" in the refusal: %s", want, why);

	/* vad_reload (the admin request) applies a lower quota at once; what is held stays. */
	assert_int_equal(0, vt_daemon_write_config(d, "quota_client = 512K\n", small_arena));
	char *detail = NULL;
	VT_ASSERT_OK(c, vad_reload_detail(c, &detail));
	assert_non_null(detail);
	free(detail);
	VT_ASSERT_ERR(c, VAD_EQUOTA, vad_alloc(c, PAGE, 0, &p3));
	assert_true(vad_size(c, p1) >= 1024 * 1024);
	VT_ASSERT_OK(c, vad_free(c, p1));
	VT_ASSERT_OK(c, vad_free(c, p2));
	VT_ASSERT_OK(c, vad_alloc(c, 256 * 1024, 0, &p3));
	VT_ASSERT_OK(c, vad_free(c, p3));
	vad_close(c);
	assert_int_equal(0, vt_daemon_stop(d));
}

static void test_sigterm_with_clients(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, NULL, NULL));
	vad_client *c[4];
	void *p[4];
	for (int i = 0; i < 4; i++) {
		assert_int_equal(0, vt_connect(d, "doomed", &c[i]));
		VT_ASSERT_OK(c[i], vad_alloc(c[i], 16 * PAGE, 0, &p[i]));
		vt_fill_pattern(p[i], 16 * PAGE, (uint64_t)i);
	}
	char token[VAD_TOKEN_LEN + 1];
	VT_ASSERT_OK(c[0], vad_share(c[0], p[0], token));
	/* SIGTERM with sessions, ranges and a share token alive: a clean exit 0. */
	assert_int_equal(0, vt_daemon_stop(d));
	assert_int_equal(-1, access(d->socket_path, F_OK)); /* it removed its socket */
	for (int i = 0; i < 4; i++) {
		void *q;
		VT_ASSERT_ERR(c[i], VAD_EGONE, vad_alloc(c[i], PAGE, 0, &q));
		/* the client's mapping outlives the daemon */
		assert_true(vt_check_pattern(p[i], 16 * PAGE, (uint64_t)i) < 0);
		vad_close(c[i]);
	}
}

/* SIGTERM while clients are busy: the daemon exits 0 without a sanitizer report, and
 * every client call in flight or later ends in EGONE (or succeeded before), never a hang
 * or a crash. */
struct busy_client {
	const char *socket_path;
	int final_rc;
	int ops;
	char error[256];
};

static void *busy_client_run(void *arg)
{
	struct busy_client *b = arg;
	vad_client *c;
	int rc = vad_connect(b->socket_path, "busy", &c);
	if (rc != 0) {
		snprintf(b->error, sizeof(b->error), "vad_connect: %d", rc);
		return NULL;
	}
	for (;;) {
		void *p;
		rc = vad_alloc(c, PAGE * (1 + b->ops % 8), 0, &p);
		if (rc == 0) {
			memset(p, 0x3C, PAGE);
			rc = vad_free(c, p);
		}
		if (rc != 0)
			break;
		__atomic_store_n(&b->ops, b->ops + 1, __ATOMIC_RELEASE);
	}
	b->final_rc = rc;
	/* once gone, always gone */
	void *p;
	rc = vad_alloc(c, PAGE, 0, &p);
	if (rc != VAD_EGONE)
		snprintf(b->error, sizeof(b->error), "after the daemon left: %d, expected EGONE",
			 rc);
	vad_close(c);
	return NULL;
}

static void test_sigterm_under_load(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, NULL, NULL));
	enum { N = 4 };
	struct busy_client b[N];
	pthread_t t[N];
	for (int i = 0; i < N; i++) {
		b[i] = (struct busy_client){.socket_path = d->socket_path};
		assert_int_equal(0, pthread_create(&t[i], NULL, busy_client_run, &b[i]));
	}
	/* Every client busy (some rounds done, more in flight) before the SIGTERM. */
	uint64_t deadline = vt_now_ns() + (uint64_t)vt_timeout_ms(10000) * 1000000u;
	for (int i = 0; i < N; i++)
		while (__atomic_load_n(&b[i].ops, __ATOMIC_ACQUIRE) < 10 && vt_now_ns() < deadline)
			vt_sleep_ms(5);
	assert_int_equal(0, vt_daemon_stop(d));
	for (int i = 0; i < N; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < N; i++) {
		if (b[i].error[0])
			fail_msg("client %d: %s", i, b[i].error);
		if (b[i].final_rc != VAD_EGONE)
			fail_msg("client %d stopped with %d (%s), expected EGONE", i, b[i].final_rc,
				 vad_strerror(b[i].final_rc));
		if (b[i].ops < 10)
			fail_msg(
			    "client %d did %d rounds, not the 10 waited for before the SIGTERM", i,
			    b[i].ops);
	}
}

/* The first column of the first row of sql on the SQLite file at path, or -1. */
static int64_t sqlite_int(const char *path, const char *sql)
{
	sqlite3 *db;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		fprintf(stderr, "sqlite3_open %s: %s\n", path, sqlite3_errmsg(db));
		sqlite3_close(db);
		return -1;
	}
	sqlite3_stmt *st;
	int64_t v = -1;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
		if (sqlite3_step(st) == SQLITE_ROW)
			v = sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
	} else {
		fprintf(stderr, "sqlite %s: %s: %s\n", path, sql, sqlite3_errmsg(db));
	}
	sqlite3_close(db);
	return v;
}

/* One run of the daemon that allocates n ranges as "stats-client", holds them over a few
 * snapshot intervals, frees them and stops. */
static void stats_run(struct vt_daemon *d, int n)
{
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "stats-client", &c));
	void *p[8];
	for (int i = 0; i < n; i++)
		VT_ASSERT_OK(c, vad_alloc(c, PAGE, 0, &p[i]));
	/* Held until a periodic snapshot of this run (not the final one) has recorded them. */
	int64_t before = access(d->stats_db, F_OK) == 0
			     ? sqlite_int(d->stats_db, "SELECT coalesce(max(id), 0) FROM snapshot")
			     : 0;
	char sql[512];
	snprintf(sql, sizeof(sql),
		 "SELECT count(*) FROM session_snapshot ss JOIN snapshot s ON s.id = "
		 "ss.snapshot_id WHERE s.id > %lld AND s.final = 0 AND ss.name = 'stats-client' "
		 "AND ss.held_ranges = %d",
		 (long long)before, n);
	uint64_t deadline = vt_now_ns() + (uint64_t)vt_timeout_ms(30000) * 1000000u;
	while (access(d->stats_db, F_OK) != 0 || sqlite_int(d->stats_db, sql) < 1) {
		if (vt_now_ns() > deadline)
			fail_msg("no periodic snapshot of %d held ranges in %s", n, d->stats_db);
		vt_sleep_ms(20);
	}
	for (int i = 0; i < n; i++)
		VT_ASSERT_OK(c, vad_free(c, p[i]));
	vad_close(c);
	assert_int_equal(0, vt_daemon_stop(d));
}

/* Schema per daemon/stats.h (version 1). */
static void test_stats_database_written(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, "stats_interval = 200ms\n", NULL));
	stats_run(d, 3);
	int fd = open(d->stats_db, O_RDONLY);
	if (fd < 0)
		fail_msg("no stats database at %s (stats_db in the config): %s", d->stats_db,
			 strerror(errno));
	char magic[16];
	assert_int_equal(16, read(fd, magic, 16));
	close(fd);
	assert_memory_equal("SQLite format 3", magic, 16);
	const char *db = d->stats_db;
	/* Periodic snapshots while the client held its ranges, and one final one. */
	assert_true(sqlite_int(db, "SELECT count(*) FROM snapshot WHERE final = 0") >= 1);
	assert_int_equal(1, sqlite_int(db, "SELECT count(*) FROM snapshot WHERE final = 1"));
	assert_true(sqlite_int(db, "SELECT max(held_ranges) FROM session_snapshot "
				   "WHERE name = 'stats-client'") == 3);
	assert_true(sqlite_int(db, "SELECT max(busy_bytes) FROM arena_snapshot "
				   "WHERE arena = 'default'") >= 3 * PAGE);
	assert_true(sqlite_int(db, "SELECT count(*) FROM event WHERE kind = 'start'") == 1);
	assert_true(sqlite_int(db, "SELECT count(*) FROM event WHERE kind = 'stop'") == 1);
	int64_t allocs1 = sqlite_int(db, "SELECT allocs FROM lifetime WHERE name = 'default'");
	assert_true(allocs1 >= 3);

	/* Lifetime counters survive a restart and add up. */
	assert_int_equal(0, vt_daemon_start(d));
	stats_run(d, 2);
	int64_t allocs2 = sqlite_int(db, "SELECT allocs FROM lifetime WHERE name = 'default'");
	if (allocs2 < allocs1 + 2)
		fail_msg("lifetime allocs %lld after the second run, %lld after the first + 2",
			 (long long)allocs2, (long long)allocs1);
	assert_int_equal(2, sqlite_int(db, "SELECT starts FROM lifetime WHERE name = 'vad'"));
	assert_int_equal(2, sqlite_int(db, "SELECT count(*) FROM snapshot WHERE final = 1"));
}

static void test_sigkill_and_restart(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, NULL, NULL));
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "survivor", &c));
	void *p;
	VT_ASSERT_OK(c, vad_alloc(c, 4 * PAGE, 0, &p));
	vt_fill_pattern(p, 4 * PAGE, 5);

	assert_int_equal(0, vt_daemon_signal(d, SIGKILL));
	assert_int_equal(d->pid, waitpid(d->pid, NULL, 0));
	d->pid = 0;
	void *q;
	VT_ASSERT_ERR(c, VAD_EGONE, vad_alloc(c, PAGE, 0, &q));
	/* every later call says the same, nothing crashes */
	VT_ASSERT_ERR(c, VAD_EGONE, vad_free(c, p));
	struct vad_stats s;
	VT_ASSERT_ERR(c, VAD_EGONE, vad_stats(c, &s));
	assert_true(vt_check_pattern(p, 4 * PAGE, 5) < 0);
	vad_close(c);

	/* The stale socket file is still there; a new daemon takes it over. */
	assert_int_equal(0, access(d->socket_path, F_OK));
	assert_int_equal(0, vt_daemon_start(d));
	assert_int_equal(0, vt_connect(d, "after-restart", &c));
	VT_ASSERT_OK(c, vad_alloc(c, PAGE, 0, &q));
	/* a fresh arena: nothing of the old daemon's ranges is busy */
	VT_ASSERT_OK(c, vad_stats(c, &s));
	assert_int_equal(PAGE, s.busy_bytes);
	VT_ASSERT_OK(c, vad_free(c, q));
	vad_close(c);
	assert_int_equal(0, vt_daemon_stop(d));
}

static void test_second_daemon_refused(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, NULL, NULL));
	/* Same config, same socket: the second one must not steal a live socket. */
	struct vt_output o;
	run_vad(&o, "-c", d->conf_path, "--foreground", NULL);
	if (o.exit_code == 0 || o.exit_code == -1) {
		vt_output_print("second vad", &o);
		fail_msg("a second daemon on a live socket exited %d", o.exit_code);
	}
	assert_true(vt_contains(o.err, d->socket_path));
	vt_output_free(&o);
	/* The first one still serves on it. */
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "first", &c));
	void *p;
	VT_ASSERT_OK(c, vad_alloc(c, PAGE, 0, &p));
	VT_ASSERT_OK(c, vad_free(c, p));
	vad_close(c);
	assert_int_equal(0, vt_daemon_stop(d));
}

/* The names of pid's threads, each in brackets, into names. */
static void thread_names(pid_t pid, char *names, size_t cap)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	names[0] = 0;
	DIR *dir = opendir(path);
	assert_non_null(dir);
	for (struct dirent *e; (e = readdir(dir));) {
		if (e->d_name[0] == '.')
			continue;
		char comm_path[384], comm[32] = "";
		snprintf(comm_path, sizeof(comm_path), "%s/%s/comm", path, e->d_name);
		FILE *f = fopen(comm_path, "r");
		if (f && fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = 0;
		if (f)
			fclose(f);
		size_t len = strlen(names);
		snprintf(names + len, cap - len, "[%s]", comm);
	}
	closedir(dir);
}

/* Every thread says what it is in /proc (top -H, ps -L): the listener keeps the program's
 * name, the workers, the allocator's drain thread and the stats writer have their own (each
 * names itself as it starts, so give them a moment). */
static void test_threads_named(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, "workers = 2\n", NULL));
	static const char *const want[] = {"[vad]", "[vad-worker0]", "[vad-worker1]", "[va-drain]",
					   "[vad-stats]"};
	char names[512];
	uint64_t end = vt_now_ns() + (uint64_t)vt_timeout_ms(5000) * 1000000u;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]);) {
		thread_names(d->pid, names, sizeof(names));
		if (vt_contains(names, want[i])) {
			i++;
			continue;
		}
		if (vt_now_ns() > end)
			fail_msg("no thread %s among %s", want[i], names);
		vt_sleep_ms(20);
	}
	assert_int_equal(0, vt_daemon_stop(d));
}

static void nobody_cannot_connect(const struct vt_daemon *d)
{
	vad_client *c;
	int rc = vad_connect(d->socket_path, "nobody", &c);
	VT_CHILD_CHECK(rc == VAD_ECONNECT, "nobody connected to a 0600 root socket (rc %d)", rc);
	VT_CHILD_CHECK(vt_contains(vad_last_error(NULL), d->socket_path),
		       "the sentence \"%s\" does not name the socket", vad_last_error(NULL));
}

static void test_socket_mode(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, "socket_mode = 0600\n", NULL));
	struct stat st;
	assert_int_equal(0, stat(d->socket_path, &st));
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(0600, st.st_mode & 0777);
	if (vt_is_root()) {
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			VT_CHILD_CHECK(vt_become_nobody() == 0, "cannot drop privileges");
			nobody_cannot_connect(d);
			_exit(0);
		}
		assert_int_equal(0, vt_wait_child(pid, RUN_TIMEOUT));
	} else {
		print_message("not root: skipping the nobody half\n");
	}
	assert_int_equal(0, vt_daemon_stop(d));
}

/* ---- systemd integration -------------------------------------------------------- */

/* A listening Unix socket at path, as systemd would create it for vad.socket. */
static int listening_socket(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	assert_true(strlen(path) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	assert_int_equal(0, bind(fd, (struct sockaddr *)&sa, sizeof(sa)));
	assert_int_equal(0, chmod(path, 0666));
	assert_int_equal(0, listen(fd, 64));
	return fd;
}

static void test_socket_activation(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_init(d));
	assert_int_equal(0, vt_daemon_write_config(d, NULL, NULL));
	int lfd = listening_socket(d->socket_path);
	struct vt_start_opts opts = {.listen_fd = lfd};
	assert_int_equal(0, vt_daemon_start_opts(d, &opts));
	close(lfd);
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "activated", &c));
	void *p;
	VT_ASSERT_OK(c, vad_alloc(c, PAGE, 0, &p));
	VT_ASSERT_OK(c, vad_free(c, p));
	vad_close(c);
	assert_true(vt_daemon_log_contains(d, "activation"));
	assert_int_equal(0, vt_daemon_stop(d));
	/* systemd owns an activated socket: the daemon leaves it in place */
	assert_int_equal(0, access(d->socket_path, F_OK));
}

/* Read notify datagrams until one contains want (or timeout); the messages seen so far
 * are appended to log. */
static bool notify_wait(int fd, const char *want, int timeout_ms, char *log, size_t log_len)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)timeout_ms * 1000000u;
	for (;;) {
		uint64_t now = vt_now_ns();
		if (now >= deadline)
			return false;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, (int)((deadline - now) / 1000000u) + 1) <= 0)
			continue;
		char buf[1024];
		ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		size_t used = strlen(log);
		snprintf(log + used, log_len - used, "[%s]", buf);
		if (strstr(buf, want))
			return true;
	}
}

static void test_sd_notify(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_init(d));
	assert_int_equal(0, vt_daemon_write_config(d, NULL, NULL));
	char notify_path[PATH_MAX];
	snprintf(notify_path, sizeof(notify_path), "%s/notify", d->dir);
	int nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(nfd >= 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, notify_path, strlen(notify_path) + 1);
	assert_int_equal(0, bind(nfd, (struct sockaddr *)&sa, sizeof(sa)));
	char env_notify[PATH_MAX + 16];
	snprintf(env_notify, sizeof(env_notify), "NOTIFY_SOCKET=%s", notify_path);
	const char *env[] = {env_notify, "WATCHDOG_USEC=400000", NULL};
	struct vt_start_opts opts = {.env = env, .listen_fd = -1};
	assert_int_equal(0, vt_daemon_start_opts(d, &opts));

	char seen[8192] = "";
	int t = vt_timeout_ms(10000);
	if (!notify_wait(nfd, "READY=1", t, seen, sizeof(seen)))
		fail_msg("no READY=1 (got %s)", seen);
	/* the watchdog is fed at a fraction of WATCHDOG_USEC */
	if (!notify_wait(nfd, "WATCHDOG=1", t, seen, sizeof(seen)))
		fail_msg("no WATCHDOG=1 with WATCHDOG_USEC set (got %s)", seen);
	assert_int_equal(0, vt_daemon_signal(d, SIGHUP));
	if (!notify_wait(nfd, "RELOADING=1", t, seen, sizeof(seen)))
		fail_msg("no RELOADING=1 after SIGHUP (got %s)", seen);
	if (!notify_wait(nfd, "READY=1", t, seen, sizeof(seen)))
		fail_msg("no READY=1 after the reload (got %s)", seen);
	assert_int_equal(0, vt_daemon_signal(d, SIGTERM));
	if (!notify_wait(nfd, "STOPPING=1", t, seen, sizeof(seen)))
		fail_msg("no STOPPING=1 after SIGTERM (got %s)", seen);
	/* it already got SIGTERM; reap it as a clean stop */
	int status;
	assert_int_equal(d->pid, waitpid(d->pid, &status, 0));
	d->pid = 0;
	assert_true(WIFEXITED(status));
	assert_int_equal(0, WEXITSTATUS(status));
	assert_true(strstr(seen, "STATUS=") != NULL);
	close(nfd);
}

/* ---- an unprivileged daemon ------------------------------------------------------ */

static void as_uid_purge(const struct vt_daemon *d, uid_t uid, int want)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		VT_CHILD_CHECK(setgroups(0, NULL) == 0 && setgid(uid) == 0 && setuid(uid) == 0,
			       "cannot become uid %u", (unsigned)uid);
		vad_client *c;
		int rc = vad_connect(d->socket_path, "uid-probe", &c);
		VT_CHILD_CHECK(rc == 0, "uid %u: connect: %s", (unsigned)uid, vad_last_error(NULL));
		void *p;
		rc = vad_alloc(c, PAGE, 0, &p);
		VT_CHILD_CHECK(rc == 0, "uid %u: alloc: %s", (unsigned)uid, vad_last_error(c));
		strcpy(p, "unprivileged");
		uint64_t released;
		rc = vad_purge(c, &released);
		VT_CHILD_CHECK(rc == want, "uid %u: purge returned %d, expected %d", (unsigned)uid,
			       rc, want);
		vad_close(c);
		_exit(0);
	}
	assert_int_equal(0, vt_wait_child(pid, RUN_TIMEOUT));
}

/* vad.service runs as its own user: everything works without root, the daemon's uid and
 * root are admins, any other uid is not. */
static void test_daemon_as_nobody(void **state)
{
	struct vt_daemon *d = *state;
	if (!vt_is_root()) {
		print_message("skipped: running the daemon as nobody needs root\n");
		skip();
	}
	assert_int_equal(0, vt_daemon_init(d));
	assert_int_equal(0, chown(d->dir, 65534, 65534));
	assert_int_equal(0, vt_daemon_write_config(d, "stats_interval = 200ms\n", NULL));
	struct vt_start_opts opts = {.listen_fd = -1, .as_nobody = true};
	assert_int_equal(0, vt_daemon_start_opts(d, &opts));
	struct stat st;
	assert_int_equal(0, stat(d->socket_path, &st));
	assert_int_equal(65534, st.st_uid);

	vad_client *c;
	assert_int_equal(0, vt_connect(d, "root-client", &c));
	void *p;
	VT_ASSERT_OK(c, vad_alloc(c, 8 * PAGE, 0, &p));
	vt_fill_pattern(p, 8 * PAGE, 3);
	char token[VAD_TOKEN_LEN + 1];
	VT_ASSERT_OK(c, vad_share(c, p, token));
	uint64_t released;
	VT_ASSERT_OK(c, vad_purge(c, &released)); /* root is always an admin */
	as_uid_purge(d, 65534, VAD_OK);		  /* the daemon's own uid */
	as_uid_purge(d, 1, VAD_EPERM);		  /* anyone else */
	void *q;
	size_t size;
	VT_ASSERT_OK(c, vad_attach(c, token, &q, &size));
	VT_ASSERT_OK(c, vad_free(c, q));
	assert_true(vt_check_pattern(p, 8 * PAGE, 3) < 0);
	VT_ASSERT_OK(c, vad_free(c, p));
	vad_close(c);
	assert_int_equal(0, vt_check_invariants(d));
	assert_int_equal(0, vt_daemon_stop(d));
	/* it could write its stats database as nobody */
	assert_int_equal(0, stat(d->stats_db, &st));
	assert_int_equal(65534, st.st_uid);
}

/* ---- the default socket path and the admin group --------------------------------- */

/* vad --print-socket: --socket, else the config's socket, else the rule every client
 * follows (proto/socket_path.h). */
static void test_print_socket(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_init(d));
	struct vt_output o;

	/* the harness runs programs without VAD_SOCKET: env(1) sets it for vad alone */
	char bin[PATH_MAX + 8];
	snprintf(bin, sizeof(bin), "%s/vad", vt_build_dir());
	char *env_argv[] = {"/usr/bin/env",
			    "VAD_SOCKET=/srv/from-env/vad.sock",
			    bin,
			    "-c",
			    "/dev/null",
			    "--print-socket",
			    NULL};
	assert_int_equal(0, vt_run(env_argv, NULL, RUN_TIMEOUT, &o));
	VT_ASSERT_EXIT(&o, 0, "VAD_SOCKET=... vad --print-socket");
	assert_string_equal(o.out, "/srv/from-env/vad.sock\n");
	vt_output_free(&o);
	run_vad(&o, "-c", "/dev/null", "-s", "/srv/option/vad.sock", "--print-socket", NULL);
	VT_ASSERT_EXIT(&o, 0, "vad -s PATH --print-socket");
	assert_string_equal(o.out, "/srv/option/vad.sock\n");
	vt_output_free(&o);
	write_file(d->conf_path, "[vad]\nsocket = /srv/config/vad.sock\n");
	run_vad(&o, "-c", d->conf_path, "--print-socket", NULL);
	VT_ASSERT_EXIT(&o, 0, "vad -c CONF --print-socket");
	assert_string_equal(o.out, "/srv/config/vad.sock\n");
	vt_output_free(&o);

	char want[PATH_MAX + 16];
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	if (geteuid() != 0 && xdg && xdg[0] == '/')
		snprintf(want, sizeof(want), "%s%svad.sock\n", xdg,
			 xdg[strlen(xdg) - 1] == '/' ? "" : "/");
	else
		snprintf(want, sizeof(want), "/run/vad/vad.sock\n");
	run_vad(&o, "-c", "/dev/null", "--print-socket", NULL);
	VT_ASSERT_EXIT(&o, 0, "vad --print-socket, no VAD_SOCKET");
	assert_string_equal(o.out, want);
	vt_output_free(&o);
	/* --check-config names the default path and where it comes from */
	run_vad(&o, "-c", "/dev/null", "--check-config", NULL);
	VT_ASSERT_EXIT(&o, 0, "vad --check-config");
	want[strlen(want) - 1] = '\0';
	assert_true(vt_contains(o.out, want));
	assert_true(vt_contains(o.out, "the default path"));
	/* and the stats database that socket's daemon would write, not a placeholder */
	char db[PATH_MAX + 64];
	assert_int_equal(0, vad_socket_stats_db(want, db, sizeof(db) - 48));
	strcat(db, ", the default for that socket");
	if (!vt_contains(o.out, db))
		fail_msg("--check-config does not say stats_db %s:\n%s", db, o.out);
	vt_output_free(&o);
}

/* Did the daemon warn about admin_group? Asked once it logged that it listens (the socket
 * may accept before: an activated one from the start), which it does after the check. */
static bool warned_admin_group(const struct vt_daemon *d)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)RUN_TIMEOUT * 1000000u;
	while (!vt_daemon_log_contains(d, "listening on")) {
		if (vt_now_ns() > deadline) {
			vt_daemon_print_log(d, 20);
			fail_msg("the daemon never logged that it listens");
		}
		vt_sleep_ms(10);
	}
	return vt_daemon_log_contains(d, "is the group of the socket");
}

/* admin_group equal to the group that may connect: every client would be an admin. */
static void test_admin_group_is_socket_group(void **state)
{
	struct vt_daemon *d = *state;
	char extra[128];
	snprintf(extra, sizeof(extra), "socket_mode = 0660\nadmin_group = %u\n",
		 (unsigned)getegid());
	assert_int_equal(0, vt_daemon_setup(d, extra, NULL));
	struct stat st;
	assert_int_equal(0, stat(d->socket_path, &st));
	if (st.st_gid != getegid()) {
		assert_int_equal(0, vt_daemon_stop(d));
		print_message("the socket's group is not ours (a setgid directory?): skipped\n");
		skip();
	}
	if (!warned_admin_group(d)) {
		vt_daemon_print_log(d, 20);
		fail_msg("no warning that admin_group %u is the socket's group",
			 (unsigned)getegid());
	}
	assert_true(vt_daemon_log_contains(d, "vad-admin"));
	assert_int_equal(0, vt_daemon_stop(d));
	assert_int_equal(0, truncate(d->log_path, 0));

	/* the same group on a socket only its owner may use: nothing to warn about */
	snprintf(extra, sizeof(extra), "socket_mode = 0600\nadmin_group = %u\n",
		 (unsigned)getegid());
	assert_int_equal(0, vt_daemon_write_config(d, extra, NULL));
	assert_int_equal(0, vt_daemon_start(d));
	assert_false(warned_admin_group(d));
	assert_int_equal(0, vt_daemon_stop(d));
}

static void test_admin_group_of_its_own(void **state)
{
	struct vt_daemon *d = *state;
	gid_t other = getegid() == 65534 ? 0 : 65534;
	char extra[128];
	snprintf(extra, sizeof(extra), "socket_mode = 0660\nadmin_group = %u\n", (unsigned)other);
	assert_int_equal(0, vt_daemon_setup(d, extra, NULL));
	assert_false(warned_admin_group(d));
	assert_int_equal(0, vt_daemon_stop(d));
}

/* Under socket activation the group is the one systemd gave the socket file (SocketGroup=),
 * not the daemon's: the daemon looks at the file the passed socket is bound to. */
static void test_admin_group_activated_socket(void **state)
{
	struct vt_daemon *d = *state;
	if (!vt_is_root()) {
		print_message("not root: cannot give the socket another group; skipped\n");
		skip();
	}
	assert_int_equal(0, vt_daemon_init(d));
	assert_int_equal(0, vt_daemon_write_config(d, "admin_group = 65534\n", NULL));
	int lfd = listening_socket(d->socket_path);
	assert_int_equal(0, chown(d->socket_path, 0, 65534));
	assert_int_equal(0, chmod(d->socket_path, 0660));
	struct vt_start_opts opts = {.listen_fd = lfd};
	assert_int_equal(0, vt_daemon_start_opts(d, &opts));
	close(lfd);
	if (!warned_admin_group(d)) {
		vt_daemon_print_log(d, 20);
		fail_msg("no warning for admin_group 65534 on an activated socket of group 65534");
	}
	assert_int_equal(0, vt_daemon_stop(d));
}

/* The daemon's log on a file (not the journal) spells levels out, and a low open file limit
 * is explained in the terms of how vad was started: ulimit in a shell, LimitNOFILE= under
 * systemd (INVOCATION_ID set). */
static void test_fd_limit_hint(void **state)
{
	struct vt_daemon *d = *state;
	unsetenv("INVOCATION_ID");
	unsetenv("JOURNAL_STREAM");
	assert_int_equal(0, vt_daemon_init(d));
	assert_int_equal(0, vt_daemon_write_config(d, "max_clients = 64\n", NULL));
	static const char *const systemd_env[] = {"INVOCATION_ID=0123456789abcdef", NULL};
	for (int under_systemd = 0; under_systemd < 2; under_systemd++) {
		struct vt_start_opts opts = {
		    .listen_fd = -1, .nofile = 256, .env = under_systemd ? systemd_env : NULL};
		assert_int_equal(0, vt_daemon_start_opts(d, &opts));
		assert_int_equal(0, vt_daemon_stop(d));
		/* 64 clients x 33 fds + 64 = 2176 */
		bool hint =
		    vt_daemon_log_contains(d, "vad: warning: the open file limit 256 is low");
		bool right =
		    vt_daemon_log_contains(d, under_systemd ? "(LimitNOFILE=2176 in the unit)"
							    : "(ulimit -n 2176 in the shell");
		bool wrong = vt_daemon_log_contains(d, under_systemd ? "ulimit" : "LimitNOFILE");
		bool prefixed =
		    vt_daemon_log_contains(d, "<4>") || vt_daemon_log_contains(d, "<6>");
		if (!hint || !right || wrong || prefixed) {
			vt_daemon_print_log(d, 20);
			fail_msg("%s: hint %d, right form %d, wrong form %d, journal prefixes %d",
				 under_systemd ? "INVOCATION_ID set" : "a shell", hint, right,
				 wrong, prefixed);
		}
		assert_int_equal(0, truncate(d->log_path, 0));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_version_and_usage),
	    VT_OWN_DAEMON_TEST(test_check_config_good),
	    VT_OWN_DAEMON_TEST(test_check_config_bad),
	    VT_OWN_DAEMON_TEST(test_sighup_reloads_quota),
	    VT_OWN_DAEMON_TEST(test_sigterm_with_clients),
	    VT_OWN_DAEMON_TEST(test_sigterm_under_load),
	    VT_OWN_DAEMON_TEST(test_stats_database_written),
	    VT_OWN_DAEMON_TEST(test_sigkill_and_restart),
	    VT_OWN_DAEMON_TEST(test_socket_mode),
	    VT_OWN_DAEMON_TEST(test_second_daemon_refused),
	    VT_OWN_DAEMON_TEST(test_threads_named),
	    VT_OWN_DAEMON_TEST(test_socket_activation),
	    VT_OWN_DAEMON_TEST(test_sd_notify),
	    VT_OWN_DAEMON_TEST(test_daemon_as_nobody),
	    VT_OWN_DAEMON_TEST(test_print_socket),
	    VT_OWN_DAEMON_TEST(test_admin_group_is_socket_group),
	    VT_OWN_DAEMON_TEST(test_admin_group_of_its_own),
	    VT_OWN_DAEMON_TEST(test_admin_group_activated_socket),
	    VT_OWN_DAEMON_TEST(test_fd_limit_hint),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
