/*
 * test_service_tenants.c - tenancy = uid: every uid gets an arena of its own. Two tenants run
 * as two real uids (forked children of this test, which must be root to switch uids): tenant
 * A writes a secret and shares it; tenant B cannot attach A's token, cannot name A's arena,
 * does not see it listed, and finds A's bytes in no file it was sent, mapped and searched
 * whole; B's writes over all of its own arena leave A's fresh ranges zero; a third uid past
 * max_tenants is refused with a sentence. The life of a tenant arena runs as the test's own
 * uid: opened on first use (its memfd appears in the daemon), closed once unused for its
 * tenant_idle (the memfd goes, the event is recorded, its figures stay in the history), and
 * opened again, fresh, on the next use.
 */
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "uid_peers.h"
#include "vtassert.h"

#define PAGE	     4096u
#define SECRET_SIZE  (1u << 20)
#define SECRET_SEED  0x5EC12E7
#define FRESH_RANGES 64
#define FRESH_SIZE   (64u << 10)
#define ARENA_SIZE   (64u << 20)
#define FIRST_ID     62000 /* ids are searched from here for ones no user or group has */
#define NEEDLE_LEN   64	   /* bytes of the secret searched for */

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- in the children ---------------------------------------------------------------- */

/* Tenant A: writes the secret into a range of its own and shares it; once B is done, its
 * fresh ranges must read as zeros. */
static void tenant_a_main(void *ctx, int in, int out)
{
	const struct vt_daemon *d = ctx;
	vad_client *c = vt_child_connect(d, "tenant-a");
	void *secret;
	int rc = vad_alloc(c, SECRET_SIZE, 0, &secret);
	VT_CHILD_CHECK(rc == 0, "alloc as tenant A: %s", vad_last_error(c));
	vt_fill_pattern(secret, SECRET_SIZE, SECRET_SEED);
	char token[VAD_TOKEN_LEN + 1], line[256];
	rc = vad_share(c, secret, token);
	VT_CHILD_CHECK(rc == 0, "share as tenant A: %s", vad_last_error(c));
	vt_child_send(out, "token %s", token);
	vt_child_expect(in, "check", line, sizeof(line));
	void *fresh[FRESH_RANGES];
	for (int i = 0; i < FRESH_RANGES; i++) {
		rc = vad_alloc(c, FRESH_SIZE, 0, &fresh[i]);
		VT_CHILD_CHECK(rc == 0, "fresh alloc %d as tenant A: %s", i, vad_last_error(c));
		const uint8_t *p = fresh[i];
		for (size_t k = 0; k < FRESH_SIZE; k++)
			VT_CHILD_CHECK(p[k] == 0, "byte %zu of tenant A's fresh range %d is 0x%02x",
				       k, i, p[k]);
	}
	VT_CHILD_CHECK(vt_check_pattern(secret, SECRET_SIZE, SECRET_SEED) < 0,
		       "tenant A's secret changed");
	vt_child_send(out, "zeros");
	vt_child_expect(in, "bye", line, sizeof(line));
	vad_close(c);
}

/* What searching a process's memfds looks for, and how many it searched. */
struct search {
	const uint8_t *needle;
	size_t len;
	int files;
};

/* vt_memfd_fn: map the memfd whole, read-only, and stop if it holds the needle. */
static int search_memfd(void *ctx, int fd, const char *link, const char *path)
{
	(void)path;
	struct search *q = ctx;
	struct stat st;
	VT_CHILD_CHECK(fstat(fd, &st) == 0 && st.st_size > 0, "fstat of %s", link);
	void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	VT_CHILD_CHECK(m != MAP_FAILED, "mapping %s: %s", link, strerror(errno));
	bool found = memmem(m, (size_t)st.st_size, q->needle, q->len) != NULL;
	munmap(m, (size_t)st.st_size);
	q->files++;
	return found;
}

/* Does any memfd this process holds contain needle? Each is mapped whole, read-only. */
static bool child_fds_contain(const uint8_t *needle, size_t len, int *n_files)
{
	struct search q = {.needle = needle, .len = len};
	int rc = vt_for_each_memfd(getpid(), search_memfd, &q);
	VT_CHILD_CHECK(rc >= 0, "cannot list /proc/self/fd");
	*n_files = q.files;
	return rc > 0;
}

/* What tenant B needs: the daemon, and A's uid (to name A's arena). */
struct tenant_b_args {
	const struct vt_daemon *d;
	unsigned a_uid;
};

/* Tenant B: everything it can call or map, searched for A's secret; then it writes over
 * all of its own arena. */
static void tenant_b_main(void *ctx, int in, int out)
{
	const struct tenant_b_args *args = ctx;
	const struct vt_daemon *d = args->d;
	unsigned a_uid = args->a_uid;
	char line[256], a_arena[64];
	const char *token = vt_child_expect(in, "token", line, sizeof(line));
	snprintf(a_arena, sizeof(a_arena), "default@%u", a_uid);
	vad_client *c = vt_child_connect(d, "tenant-b");
	void *p;
	size_t size;
	int rc = vad_attach(c, token, &p, &size);
	VT_CHILD_CHECK(rc == VAD_EPERM, "attach of tenant A's token as B: %d (%s), expected EPERM",
		       rc, vad_last_error(c));
	VT_CHILD_CHECK(vt_contains(vad_last_error(c), "another tenant"),
		       "the refusal \"%s\" does not say the range is another tenant's",
		       vad_last_error(c));
	rc = vad_pointer(c, a_arena, 0, &p);
	VT_CHILD_CHECK(rc == VAD_EPERM, "vad_pointer in %s as B: %d (%s), expected EPERM", a_arena,
		       rc, vad_last_error(c));
	struct vad_arena_map *map = NULL;
	rc = vad_walk(c, a_arena, 0, &map);
	VT_CHILD_CHECK(rc == VAD_EPERM, "vad_walk of %s as B: %d, expected EPERM", a_arena, rc);
	struct vad_arena_info *info = NULL;
	size_t n_info = 0;
	rc = vad_arenas(c, &info, &n_info);
	VT_CHILD_CHECK(rc == 0, "vad_arenas as B: %s", vad_last_error(c));
	for (size_t i = 0; i < n_info; i++)
		VT_CHILD_CHECK(strcmp(info[i].name, a_arena) != 0, "B's arena list shows %s",
			       a_arena);
	free(info);
	struct vad_daemon_stats *st = NULL;
	rc = vad_stats_detail(c, NULL, &st);
	VT_CHILD_CHECK(rc == 0, "stats as B: %s", vad_last_error(c));
	for (size_t i = 0; i < st->n_arenas; i++)
		VT_CHILD_CHECK(strcmp(st->arenas[i].name, a_arena) != 0, "B's stats show %s",
			       a_arena);
	free(st);

	/* Its own arena, mapped whole: the default section gives B its own tenant arena. */
	void *base;
	rc = vad_pointer(c, "default", 0, &base);
	VT_CHILD_CHECK(rc == 0, "vad_pointer in default as B: %s", vad_last_error(c));
	void *mine;
	rc = vad_alloc(c, PAGE, 0, &mine);
	VT_CHILD_CHECK(rc == 0, "alloc as B: %s", vad_last_error(c));

	uint8_t *needle = malloc(SECRET_SIZE);
	VT_CHILD_CHECK(needle, "out of memory");
	vt_fill_pattern(needle, SECRET_SIZE, SECRET_SEED);
	int n_files = 0;
	VT_CHILD_CHECK(!child_fds_contain(needle + SECRET_SIZE / 2, NEEDLE_LEN, &n_files),
		       "a file tenant B was sent holds tenant A's secret");
	VT_CHILD_CHECK(n_files >= 1, "tenant B holds no arena file to search");
	VT_CHILD_CHECK(memmem(base, ARENA_SIZE, needle + SECRET_SIZE / 2, NEEDLE_LEN) == NULL,
		       "tenant B's mapping holds tenant A's secret");
	free(needle);
	memset(base, 0xEE, ARENA_SIZE); /* the attack on a shared arena: dirty all free space */
	vt_child_send(out, "written %d", n_files);
	vt_child_expect(in, "bye", line, sizeof(line));
	vad_close(c);
}

/* A third uid, past max_tenants: refused with a sentence naming the limit. */
static void tenant_c_main(void *ctx, int in, int out)
{
	const struct vt_daemon *d = ctx;
	char line[64];
	vt_child_expect(in, "go", line, sizeof(line));
	vad_client *c = vt_child_connect(d, "tenant-c");
	void *p;
	int rc = vad_alloc(c, PAGE, 0, &p);
	VT_CHILD_CHECK(rc == VAD_EQUOTA, "alloc past max_tenants: %d (%s), expected EQUOTA", rc,
		       vad_last_error(c));
	VT_CHILD_CHECK(vt_contains(vad_last_error(c), "max_tenants"),
		       "the refusal \"%s\" does not name max_tenants", vad_last_error(c));
	vad_close(c);
	vt_child_send(out, "refused");
}

/* ---- in the test -------------------------------------------------------------------- */

static void test_tenants_cannot_reach_each_other(void **state)
{
	struct vt_daemon *d = *state;
	if (!vt_is_root()) {
		print_message("skipped: tenants A, B and C run as other uids, which needs root\n");
		skip();
	}
	unsigned ids[3]; /* tenants A, B and C */
	if (vt_pick_unused_ids(FIRST_ID, ids, 3) != 0)
		fail_msg("no unused uids from %u", FIRST_ID);
	assert_int_equal(0, vt_daemon_init(d));
	assert_int_equal(0, vt_daemon_write_config(d, NULL,
						   "[arena default]\nsize = 64M\ntenancy = uid\n"
						   "max_tenants = 2\n"));
	assert_int_equal(0, vt_daemon_start(d));

	struct vt_peer a, b, c;
	struct tenant_b_args b_args = {.d = d, .a_uid = ids[0]};
	vt_peer_start(ids[0], NULL, 0, tenant_a_main, d, &a);
	char line[256], sent[96];
	const char *token = vt_peer_expect(&a, "token", line, sizeof(line));
	vt_peer_start(ids[1], NULL, 0, tenant_b_main, &b_args, &b);
	snprintf(sent, sizeof(sent), "token %s", token);
	vt_peer_send(&b, sent);
	const char *files = vt_peer_expect(&b, "written", line, sizeof(line));
	printf("tenant B searched %s arena file(s) it was sent: none holds A's secret\n", files);
	vt_peer_send(&a, "check");
	vt_peer_expect(&a, "zeros", line, sizeof(line));

	/* A and B fill max_tenants = 2: a third uid is refused while they stay. */
	vt_peer_start(ids[2], NULL, 0, tenant_c_main, d, &c);
	vt_peer_send(&c, "go");
	vt_peer_expect(&c, "refused", line, sizeof(line));
	vt_peer_finish(&c, "tenant C");
	vt_peer_send(&a, "bye");
	vt_peer_send(&b, "bye");
	vt_peer_finish(&a, "tenant A");
	vt_peer_finish(&b, "tenant B");
	assert_int_equal(0, vt_check_invariants(d));
	assert_int_equal(0, vt_daemon_stop(d));
}

/* Does the daemon hold the memfd of arena ("vad:ARENA")? */
static bool daemon_has_memfd(const struct vt_daemon *d, const char *arena)
{
	char name[96];
	snprintf(name, sizeof(name), "vad:%s", arena);
	return vt_memfd_named(d->pid, name) >= 0;
}

/* Rows of the stats database matching sql with one text parameter; -1 while unreadable. */
static int db_count(const struct vt_daemon *d, const char *sql, const char *param)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	int n = -1;
	if (sqlite3_open_v2(d->stats_db, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		sqlite3_close(db);
		return -1;
	}
	sqlite3_busy_timeout(db, 5000);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_text(st, 1, param, -1, SQLITE_TRANSIENT);
		if (sqlite3_step(st) == SQLITE_ROW)
			n = sqlite3_column_int(st, 0);
		sqlite3_finalize(st);
	}
	sqlite3_close(db);
	return n;
}

/* Run build/vactl with args (NULL-terminated) against d; its output in o (exit code too). */
static void run_vactl(const struct vt_daemon *d, struct vt_output *o, ...)
{
	char bin[PATH_MAX];
	char *argv[16];
	size_t n = 0;
	snprintf(bin, sizeof(bin), "%s/vactl", vt_build_dir());
	argv[n++] = bin;
	argv[n++] = "--socket";
	argv[n++] = (char *)d->socket_path;
	va_list ap;
	va_start(ap, o);
	for (const char *a; (a = va_arg(ap, const char *)) && n < 15;)
		argv[n++] = (char *)a;
	va_end(ap);
	argv[n] = NULL;
	assert_int_equal(0, vt_run(argv, NULL, vt_timeout_ms(30000), o));
}

/* vactl cmd [arg] exits 0 and prints every one of the NULL-terminated words. */
static void vactl_shows(const struct vt_daemon *d, const char *cmd, const char *arg, ...)
{
	struct vt_output o;
	if (arg)
		run_vactl(d, &o, cmd, arg, NULL);
	else
		run_vactl(d, &o, cmd, NULL);
	if (o.exit_code != 0)
		fail_msg("vactl %s %s exited %d: %s", cmd, arg ? arg : "", o.exit_code, o.err);
	va_list ap;
	va_start(ap, arg);
	for (const char *w; (w = va_arg(ap, const char *));)
		if (!strstr(o.out, w))
			fail_msg("vactl %s %s does not show '%s':\n%s", cmd, arg ? arg : "", w,
				 o.out);
	va_end(ap);
	vt_output_free(&o);
}

/* Is arena listed by vad_arenas (through a fresh connection, which does not pin it)? */
static bool arena_listed(const struct vt_daemon *d, const char *arena)
{
	vad_client *c;
	if (vt_connect(d, "lister", &c) != 0)
		fail_msg("cannot connect");
	struct vad_arena_info *info = NULL;
	size_t n = 0;
	VT_ASSERT_OK(c, vad_arenas(c, &info, &n));
	bool found = false;
	for (size_t i = 0; i < n; i++)
		found |= strcmp(info[i].name, arena) == 0;
	free(info);
	vad_close(c);
	return found;
}

static void test_tenant_arena_opens_closes_and_reopens(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_init(d));
	assert_int_equal(0, vt_daemon_write_config(d, "stats_interval = 100ms\n",
						   "[arena default]\nsize = 64M\ntenancy = uid\n"
						   "tenant_idle = 300ms\n"));
	assert_int_equal(0, vt_daemon_start(d));
	char arena[64];
	snprintf(arena, sizeof(arena), "default@%u", (unsigned)getuid());
	assert_false(daemon_has_memfd(d, arena));
	assert_false(arena_listed(d, arena)); /* connecting alone opens nothing */

	vad_client *c;
	assert_int_equal(0, vt_connect(d, "tenant", &c));
	void *p;
	VT_ASSERT_OK(c, vad_alloc(c, SECRET_SIZE, 0, &p));
	vt_fill_pattern(p, SECRET_SIZE, SECRET_SEED);
	assert_true(daemon_has_memfd(d, arena));
	assert_true(arena_listed(d, arena));
	struct vad_range range;
	VT_ASSERT_OK(c, vad_range_info(c, p, &range));
	assert_string_equal("default", range.arena); /* its clients name the section */
	void *by_full_name;			     /* or, the same arena, its NAME@ID */
	VT_ASSERT_OK(c, vad_pointer(c, arena, range.offset, &by_full_name));
	assert_int_equal(0, memcmp(by_full_name, p, PAGE));
	/* Operators see it by name and tenant. */
	vactl_shows(d, "arenas", NULL, arena, "one arena per uid", "(1 open)", NULL);
	vactl_shows(d, "stats", arena, arena, NULL);
	vactl_shows(d, "map", arena, arena, NULL);
	vad_close(c);

	/* Unused now: closed within its tenant_idle plus a sweep, however loaded the machine. */
	uint64_t deadline = now_ms() + (uint64_t)vt_timeout_ms(30000);
	while (daemon_has_memfd(d, arena) && now_ms() < deadline)
		vt_sleep_ms(20);
	assert_false(daemon_has_memfd(d, arena));
	assert_false(arena_listed(d, arena));
	/* Its figures stay in the history, and the closing is an event. */
	const char *rows = "SELECT COUNT(*) FROM arena_snapshot WHERE arena = ?";
	const char *events = "SELECT COUNT(*) FROM event WHERE kind = 'tenant-closed' AND "
			     "detail LIKE '%' || ? || '%'";
	while ((db_count(d, rows, arena) < 1 || db_count(d, events, arena) < 1) &&
	       now_ms() < deadline)
		vt_sleep_ms(20);
	assert_true(db_count(d, rows, arena) >= 1);
	assert_int_equal(1, db_count(d, events, arena));
	assert_true(vt_daemon_log_contains(d, "closed after"));
	char db_arg[PATH_MAX + 8];
	snprintf(db_arg, sizeof(db_arg), "--db=%s", d->stats_db);
	struct vt_output o;
	run_vactl(d, &o, "history", db_arg, "--arena", arena, "--since", "all", NULL);
	assert_int_equal(0, o.exit_code);
	if (!strstr(o.out, arena) || !strstr(o.out, "tenant-closed"))
		fail_msg("vactl history --arena %s lacks its rows or its closing:\n%s", arena,
			 o.out);
	vt_output_free(&o);

	/* The next use opens it again, fresh: no byte of the old one is there. */
	assert_int_equal(0, vt_connect(d, "tenant-again", &c));
	void *base;
	VT_ASSERT_OK(c, vad_pointer(c, "default", 0, &base));
	assert_true(daemon_has_memfd(d, arena));
	uint8_t *needle = malloc(SECRET_SIZE);
	assert_non_null(needle);
	vt_fill_pattern(needle, SECRET_SIZE, SECRET_SEED);
	assert_null(memmem(base, ARENA_SIZE, needle, NEEDLE_LEN));
	free(needle);
	vad_close(c);
	assert_int_equal(0, vt_check_invariants(d));
	assert_int_equal(0, vt_daemon_stop(d));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_tenants_cannot_reach_each_other,
					    vt_fixture_blank_setup, vt_fixture_daemon_teardown),
	    cmocka_unit_test_setup_teardown(test_tenant_arena_opens_closes_and_reopens,
					    vt_fixture_blank_setup, vt_fixture_daemon_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
