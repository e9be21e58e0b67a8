/*
 * test_service_sharing.c - ranges between processes: share/attach across processes, a
 * reused range reads as zeros, and a killed client's ranges come back.
 */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include <json-c/json.h>

#include "vtassert.h"

#define PAGE	      4096u
#define LINE_TIMEOUT  vt_timeout_ms(10000)
#define CHILD_TIMEOUT vt_timeout_ms(20000)

/* ---- 1. share between processes ------------------------------------------------- */

#define SHARE_SIZE  (3 * PAGE + 100)
#define SEED_FIRST  0xA11CE
#define SEED_SECOND 0xB0B

/* Process B: attach A's token, read what A wrote, keep reading after A freed, free. */
static void share_child_b(const char *socket_path, int from_a, int to_a)
{
	char line[256];
	VT_CHILD_CHECK(vt_pipe_recv(from_a, line, sizeof(line), LINE_TIMEOUT) > 0, "no token");
	char token[VAD_TOKEN_LEN + 1];
	VT_CHILD_CHECK(strlen(line) == VAD_TOKEN_LEN, "token \"%s\" is not %d characters", line,
		       VAD_TOKEN_LEN);
	memcpy(token, line, sizeof(token));

	vad_client *b;
	int rc = vad_connect(socket_path, "sharing-b", &b);
	VT_CHILD_CHECK(rc == 0, "vad_connect: %s", vad_strerror(rc));
	void *q = NULL;
	size_t size = 0;
	rc = vad_attach(b, token, &q, &size);
	VT_CHILD_CHECK(rc == 0, "vad_attach: %d %s", rc, vad_last_error(b));
	VT_CHILD_CHECK(size >= SHARE_SIZE, "attached size %zu < %u", size, SHARE_SIZE);
	VT_CHILD_CHECK(vad_size(b, q) == size, "vad_size %zu != %zu", vad_size(b, q), size);
	ssize_t bad = vt_check_pattern(q, SHARE_SIZE, SEED_FIRST);
	VT_CHILD_CHECK(bad < 0, "B reads a different byte at %zd than A wrote", bad);
	VT_CHILD_CHECK(vt_pipe_send(to_a, "attached") == 0, "pipe");

	/* A rewrites the range: the mapping is shared, B sees it at once. */
	VT_CHILD_CHECK(vt_pipe_recv(from_a, line, sizeof(line), LINE_TIMEOUT) > 0, "no rewrite");
	VT_CHILD_CHECK(strcmp(line, "rewritten") == 0, "unexpected \"%s\"", line);
	bad = vt_check_pattern(q, SHARE_SIZE, SEED_SECOND);
	VT_CHILD_CHECK(bad < 0, "B does not see A's rewrite at byte %zd", bad);
	VT_CHILD_CHECK(vt_pipe_send(to_a, "seen") == 0, "pipe");

	/* A freed its reference: B's still holds the range, so its bytes stay. */
	VT_CHILD_CHECK(vt_pipe_recv(from_a, line, sizeof(line), LINE_TIMEOUT) > 0, "no freed");
	VT_CHILD_CHECK(strcmp(line, "freed") == 0, "unexpected \"%s\"", line);
	bad = vt_check_pattern(q, SHARE_SIZE, SEED_SECOND);
	VT_CHILD_CHECK(bad < 0, "after A's free B reads a changed byte at %zd", bad);
	VT_CHILD_CHECK(vad_size(b, q) == size, "B lost its reference after A's free");
	struct vad_stats s;
	rc = vad_stats(b, &s);
	VT_CHILD_CHECK(rc == 0, "vad_stats: %s", vad_last_error(b));
	VT_CHILD_CHECK(s.held_ranges == 1 && s.held_bytes == size,
		       "B holds %llu ranges, %llu bytes; expected 1 and %zu",
		       (unsigned long long)s.held_ranges, (unsigned long long)s.held_bytes, size);
	rc = vad_free(b, q);
	VT_CHILD_CHECK(rc == 0, "B's vad_free: %d %s", rc, vad_last_error(b));
	vad_close(b);
	VT_CHILD_CHECK(vt_pipe_send(to_a, "done") == 0, "pipe");
	_exit(0);
}

static void test_share_between_processes(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, NULL, NULL));

	int to_b[2], to_a[2];
	assert_int_equal(0, pipe(to_b));
	assert_int_equal(0, pipe(to_a));
	/* Fork before A connects so B does not inherit A's connection. */
	pid_t b = fork();
	assert_true(b >= 0);
	if (b == 0) {
		close(to_b[1]);
		close(to_a[0]);
		share_child_b(d->socket_path, to_b[0], to_a[1]);
	}
	close(to_b[0]);
	close(to_a[1]);

	struct vad_stats base, s;
	assert_int_equal(0, vt_stats(d, &base));

	vad_client *a;
	assert_int_equal(0, vt_connect(d, "sharing-a", &a));
	void *p;
	VT_ASSERT_OK(a, vad_alloc(a, SHARE_SIZE, 0, &p));
	size_t held = vad_size(a, p);
	assert_true(held >= SHARE_SIZE);
	vt_fill_pattern(p, SHARE_SIZE, SEED_FIRST);
	char token[VAD_TOKEN_LEN + 1];
	memset(token, 0, sizeof(token));
	VT_ASSERT_OK(a, vad_share(a, p, token));
	assert_int_equal(VAD_TOKEN_LEN, strlen(token));
	for (size_t i = 0; i < VAD_TOKEN_LEN; i++)
		assert_true(token[i] > ' ' && token[i] < 127);
	assert_int_equal(0, vt_pipe_send(to_b[1], token));

	char line[64];
	assert_true(vt_pipe_recv(to_a[0], line, sizeof(line), LINE_TIMEOUT) > 0);
	assert_string_equal("attached", line);

	/* Two holders, one range: busy counts it once. */
	assert_int_equal(0, vt_stats(d, &s));
	assert_int_equal(base.busy_bytes + held, s.busy_bytes);

	vt_fill_pattern(p, SHARE_SIZE, SEED_SECOND);
	assert_int_equal(0, vt_pipe_send(to_b[1], "rewritten"));
	assert_true(vt_pipe_recv(to_a[0], line, sizeof(line), LINE_TIMEOUT) > 0);
	assert_string_equal("seen", line);

	VT_ASSERT_OK(a, vad_free(a, p));
	assert_int_equal(0, vad_size(a, p));
	/* B still holds it: the range stays busy. */
	assert_int_equal(0, vt_stats(d, &s));
	assert_int_equal(base.busy_bytes + held, s.busy_bytes);
	assert_int_equal(0, vt_pipe_send(to_b[1], "freed"));

	assert_true(vt_pipe_recv(to_a[0], line, sizeof(line), LINE_TIMEOUT) > 0);
	assert_string_equal("done", line);
	assert_int_equal(0, vt_wait_child(b, CHILD_TIMEOUT));
	close(to_b[1]);
	close(to_a[0]);

	/* The last holder freed it: after a purge the range is back in the allocator. */
	assert_int_equal(0, vt_purge(d));
	assert_int_equal(0, vt_stats(d, &s));
	assert_int_equal(base.busy_bytes, s.busy_bytes);
	assert_int_equal(0, s.lazy_bytes);
	assert_int_equal(0, s.pooled_bytes);
	assert_int_equal(s.arena_bytes - s.busy_bytes, s.free_bytes);

	/* A's own view agrees: it holds nothing. */
	struct vad_stats mine;
	VT_ASSERT_OK(a, vad_stats(a, &mine));
	assert_int_equal(0, mine.held_bytes);
	assert_int_equal(0, mine.held_ranges);
	vad_close(a);
	assert_int_equal(0, vt_daemon_stop(d));
}

/* ---- 2. a reused range reads as zeros --------------------------------------------- */

/* The whole (1 MiB) arena: garbage written by a child that exits, then the parent's
 * allocation of the whole arena must be the same range and all zeros. */
static void test_whole_arena_reuse_reads_zero(void **state)
{
	struct vt_daemon *d = *state;
	const size_t arena = 1024 * 1024;
	assert_int_equal(0, vt_daemon_setup(d, NULL, "[arena default]\nsize = 1M\n"));

	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		vad_client *c;
		int rc = vad_connect(d->socket_path, "garbage-writer", &c);
		VT_CHILD_CHECK(rc == 0, "vad_connect: %s", vad_strerror(rc));
		void *p;
		rc = vad_alloc(c, arena, 0, &p);
		VT_CHILD_CHECK(rc == 0, "vad_alloc(1M): %d %s", rc, vad_last_error(c));
		memset(p, 0xA5, arena);
		rc = vad_free(c, p);
		VT_CHILD_CHECK(rc == 0, "vad_free: %d %s", rc, vad_last_error(c));
		vad_close(c);
		_exit(0);
	}
	assert_int_equal(0, vt_wait_child(child, CHILD_TIMEOUT));

	/* No purge: an allocation that finds no room must drain the lazy list itself. */
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "zero-reader", &c));
	void *p;
	VT_ASSERT_OK(c, vad_alloc(c, arena, 0, &p));
	ssize_t nz = vt_first_nonzero(p, arena);
	if (nz >= 0)
		fail_msg("reused range has byte 0x%02x at %zd: data passed between clients",
			 ((uint8_t *)p)[nz], nz);
	/* And once more within one client: write, free, reallocate. */
	memset(p, 0x5A, arena);
	VT_ASSERT_OK(c, vad_free(c, p));
	VT_ASSERT_OK(c, vad_alloc(c, arena, 0, &p));
	nz = vt_first_nonzero(p, arena);
	if (nz >= 0)
		fail_msg("reallocated range has byte 0x%02x at %zd", ((uint8_t *)p)[nz], nz);
	VT_ASSERT_OK(c, vad_free(c, p));
	vad_close(c);
	assert_int_equal(0, vt_daemon_stop(d));
}

static const size_t reuse_sizes[] = {PAGE, 5 * PAGE, 300 * PAGE, 1000 * PAGE, 3 * PAGE};
#define N_REUSE (sizeof(reuse_sizes) / sizeof(reuse_sizes[0]))

/* A child writes garbage into ranges of several sizes and shares them; the parent
 * attaches (to learn where they are in its own mapping and to see the garbage), both
 * drop them, an admin purge returns them, and the parent's new ranges of the same sizes
 * overlap the old ones and read as zeros. */
static void test_purged_range_reuse_reads_zero(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, NULL, NULL));

	int to_child[2], to_parent[2];
	assert_int_equal(0, pipe(to_child));
	assert_int_equal(0, pipe(to_parent));
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		close(to_child[1]);
		close(to_parent[0]);
		vad_client *c;
		int rc = vad_connect(d->socket_path, "garbage-writer", &c);
		VT_CHILD_CHECK(rc == 0, "vad_connect: %s", vad_strerror(rc));
		void *ptrs[N_REUSE];
		for (size_t i = 0; i < N_REUSE; i++) {
			rc = vad_alloc(c, reuse_sizes[i], 0, &ptrs[i]);
			VT_CHILD_CHECK(rc == 0, "vad_alloc(%zu): %s", reuse_sizes[i],
				       vad_last_error(c));
			memset(ptrs[i], 0xC3, reuse_sizes[i]);
			char token[VAD_TOKEN_LEN + 1];
			rc = vad_share(c, ptrs[i], token);
			VT_CHILD_CHECK(rc == 0, "vad_share: %s", vad_last_error(c));
			VT_CHILD_CHECK(vt_pipe_send(to_parent[1], token) == 0, "pipe");
		}
		char line[64];
		VT_CHILD_CHECK(vt_pipe_recv(to_child[0], line, sizeof(line), LINE_TIMEOUT) > 0,
			       "parent never said release");
		for (size_t i = 0; i < N_REUSE; i++) {
			rc = vad_free(c, ptrs[i]);
			VT_CHILD_CHECK(rc == 0, "vad_free: %s", vad_last_error(c));
		}
		vad_close(c);
		_exit(0);
	}
	close(to_child[0]);
	close(to_parent[1]);

	vad_client *c;
	assert_int_equal(0, vt_connect(d, "zero-reader", &c));
	uint8_t *old[N_REUSE];
	for (size_t i = 0; i < N_REUSE; i++) {
		char token[128];
		assert_true(vt_pipe_recv(to_parent[0], token, sizeof(token), LINE_TIMEOUT) > 0);
		void *q;
		size_t size;
		VT_ASSERT_OK(c, vad_attach(c, token, &q, &size));
		assert_true(size >= reuse_sizes[i]);
		old[i] = q;
		/* The garbage is really there, so zeros later prove a release happened. */
		assert_int_equal(0xC3, old[i][0]);
		assert_int_equal(0xC3, old[i][reuse_sizes[i] - 1]);
		VT_ASSERT_OK(c, vad_free(c, q));
	}
	assert_int_equal(0, vt_pipe_send(to_child[1], "release"));
	assert_int_equal(0, vt_wait_child(child, CHILD_TIMEOUT));
	close(to_child[1]);
	close(to_parent[0]);

	assert_int_equal(0, vt_purge(d));
	int overlaps = 0;
	void *fresh[N_REUSE];
	for (size_t i = 0; i < N_REUSE; i++) {
		VT_ASSERT_OK(c, vad_alloc(c, reuse_sizes[i], 0, &fresh[i]));
		uint8_t *p = fresh[i];
		ssize_t nz = vt_first_nonzero(p, reuse_sizes[i]);
		if (nz >= 0)
			fail_msg("new range %zu (%zu bytes) has byte 0x%02x at %zd", i,
				 reuse_sizes[i], p[nz], nz);
		for (size_t j = 0; j < N_REUSE; j++)
			if (p < old[j] + reuse_sizes[j] && old[j] < p + reuse_sizes[i])
				overlaps++;
	}
	/* First fit on a purged arena must reuse the space the child had. */
	if (overlaps == 0)
		fail_msg("no new range reused the purged space; the zero check proved nothing");
	for (size_t i = 0; i < N_REUSE; i++)
		VT_ASSERT_OK(c, vad_free(c, fresh[i]));
	vad_close(c);
	assert_int_equal(0, vt_daemon_stop(d));
}

/* ---- 3. kill -9 of a client holding ranges ----------------------------------------- */

#define KILL_RANGES	8
#define KILL_RANGE_SIZE (1024 * 1024)

static void test_killed_client_ranges_return(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, NULL, NULL));
	struct vad_stats base, s;
	/* a fresh daemon: nothing busy, only the polling connection (the harness's start-up
	 * probe may still be closing) */
	assert_int_equal(0, vt_wait_busy(d, 0, 1, vt_timeout_ms(2000), &base));

	int to_parent[2], to_child[2];
	assert_int_equal(0, pipe(to_parent));
	assert_int_equal(0, pipe(to_child));
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		close(to_parent[0]);
		close(to_child[1]);
		vad_client *c;
		int rc = vad_connect(d->socket_path, "doomed", &c);
		VT_CHILD_CHECK(rc == 0, "vad_connect: %s", vad_strerror(rc));
		for (int i = 0; i < KILL_RANGES; i++) {
			void *p;
			rc = vad_alloc(c, KILL_RANGE_SIZE, 0, &p);
			VT_CHILD_CHECK(rc == 0, "vad_alloc: %s", vad_last_error(c));
			memset(p, 0x77, KILL_RANGE_SIZE);
		}
		size_t sizes[4] = {PAGE, 2 * PAGE, 3 * PAGE, 4 * PAGE};
		void *batch[4];
		rc = vad_alloc_batch(c, 4, sizes, 0, batch);
		VT_CHILD_CHECK(rc == 0, "vad_alloc_batch: %s", vad_last_error(c));
		/* Attach the parent's shared range too: dying drops that reference only. */
		char token[128];
		VT_CHILD_CHECK(vt_pipe_recv(to_child[0], token, sizeof(token), LINE_TIMEOUT) > 0,
			       "no token");
		void *q;
		size_t qsize;
		rc = vad_attach(c, token, &q, &qsize);
		VT_CHILD_CHECK(rc == 0, "vad_attach: %s", vad_last_error(c));
		VT_CHILD_CHECK(vt_pipe_send(to_parent[1], "ready") == 0, "pipe");
		for (;;)
			pause();
	}
	close(to_parent[1]);
	close(to_child[0]);

	vad_client *keeper;
	assert_int_equal(0, vt_connect(d, "keeper", &keeper));
	void *kp;
	VT_ASSERT_OK(keeper, vad_alloc(keeper, 16 * PAGE, 0, &kp));
	vt_fill_pattern(kp, 16 * PAGE, 42);
	char token[VAD_TOKEN_LEN + 1];
	VT_ASSERT_OK(keeper, vad_share(keeper, kp, token));
	assert_int_equal(0, vt_pipe_send(to_child[1], token));

	char line[64];
	assert_true(vt_pipe_recv(to_parent[0], line, sizeof(line), LINE_TIMEOUT) > 0);
	assert_string_equal("ready", line);
	uint64_t held_by_child = KILL_RANGES * KILL_RANGE_SIZE + 10 * PAGE;
	/* the child, the keeper and the stats connection itself (earlier stats connections
	 * may still be closing: sessions end asynchronously) */
	assert_int_equal(0, vt_wait_busy(d, base.busy_bytes + held_by_child + 16 * PAGE,
					 base.clients + 2, vt_timeout_ms(2000), &s));

	assert_int_equal(0, kill(child, SIGKILL));
	assert_int_equal(128 + SIGKILL, vt_wait_child(child, CHILD_TIMEOUT));
	close(to_parent[0]);
	close(to_child[1]);

	/* Within a second its ranges are back; the keeper's shared range stays busy. */
	if (vt_wait_busy(d, base.busy_bytes + 16 * PAGE, base.clients + 1, vt_timeout_ms(1000),
			 &s) != 0)
		fail_msg("a killed client's ranges did not come back within %d ms",
			 vt_timeout_ms(1000));
	assert_true(vt_check_pattern(kp, 16 * PAGE, 42) < 0);

	/* vactl sees the same. */
	struct vt_output o;
	assert_int_equal(0, vt_vactl(d->socket_path, NULL, &o, "--json", "stats", NULL));
	VT_ASSERT_EXIT(&o, 0, "vactl --json stats");
	struct json_object *j = vt_json_parse(o.out);
	assert_non_null(j);
	uint64_t busy;
	if (vt_json_u64(j, "totals.busy_bytes", &busy) != 0) {
		vt_output_print("vactl --json stats", &o);
		fail_msg("vactl --json stats has no numeric totals.busy_bytes");
	}
	assert_int_equal(base.busy_bytes + 16 * PAGE, busy);
	json_object_put(j);
	vt_output_free(&o);

	VT_ASSERT_OK(keeper, vad_free(keeper, kp));
	vad_close(keeper);
	assert_int_equal(0,
			 vt_wait_busy(d, base.busy_bytes, base.clients, vt_timeout_ms(1000), NULL));
	assert_int_equal(0, vt_daemon_stop(d));
}

/* ---- token and reference semantics ------------------------------------------------ */

/* References count: attaching your own token twice gives three references to one range;
 * it stays until the last is freed. */
static void test_references_count(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, NULL, NULL));
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "refs", &c));
	void *p, *q1, *q2;
	size_t size;
	VT_ASSERT_OK(c, vad_alloc(c, 2 * PAGE, 0, &p));
	char token[VAD_TOKEN_LEN + 1];
	VT_ASSERT_OK(c, vad_share(c, p, token));
	VT_ASSERT_OK(c, vad_attach(c, token, &q1, &size));
	VT_ASSERT_OK(c, vad_attach(c, token, &q2, &size));
	assert_ptr_equal(p, q1);
	assert_ptr_equal(p, q2);
	struct vad_range r;
	VT_ASSERT_OK(c, vad_range_info(c, p, &r));
	assert_int_equal(3, r.refs);
	struct vad_stats s;
	assert_int_equal(0, vt_stats(d, &s));
	assert_int_equal(2 * PAGE, s.busy_bytes);
	VT_ASSERT_OK(c, vad_free(c, p));
	VT_ASSERT_OK(c, vad_free(c, p));
	assert_int_equal(2 * PAGE, vad_size(c, p));
	assert_int_equal(0, vt_stats(d, &s));
	assert_int_equal(2 * PAGE, s.busy_bytes);
	VT_ASSERT_OK(c, vad_free(c, p));
	assert_int_equal(0, vad_size(c, p));
	VT_ASSERT_ERR(c, VAD_ENOTHELD, vad_free(c, p));
	assert_int_equal(0, vt_stats(d, &s));
	assert_int_equal(0, s.busy_bytes);
	vad_close(c);
	assert_int_equal(0, vt_daemon_stop(d));
}

/* A token dies with its range: once the last holder frees it, the token attaches to
 * nothing, even after the same offset is handed to someone else. Otherwise an old token
 * would open another client's data. */
static void test_token_dies_with_its_range(void **state)
{
	struct vt_daemon *d = *state;
	/* The range is the whole arena, so the newcomer must get the very same offset. */
	assert_int_equal(0, vt_daemon_setup(d, NULL, "[arena default]\nsize = 32K\n"));
	vad_client *owner, *stranger, *newcomer;
	assert_int_equal(0, vt_connect(d, "owner", &owner));
	assert_int_equal(0, vt_connect(d, "stranger", &stranger));
	void *p, *q;
	size_t size;
	VT_ASSERT_OK(owner, vad_alloc(owner, 8 * PAGE, 0, &p));
	struct vad_range before;
	VT_ASSERT_OK(owner, vad_range_info(owner, p, &before));
	char token[VAD_TOKEN_LEN + 1];
	VT_ASSERT_OK(owner, vad_share(owner, p, token));
	VT_ASSERT_OK(owner, vad_free(owner, p));
	VT_ASSERT_ERR(stranger, VAD_ETOKEN, vad_attach(stranger, token, &q, &size));

	/* The same offset, reused after a purge, by another client. */
	assert_int_equal(0, vt_purge(d));
	assert_int_equal(0, vt_connect(d, "newcomer", &newcomer));
	VT_ASSERT_OK(newcomer, vad_alloc(newcomer, 8 * PAGE, 0, &q));
	struct vad_range after;
	VT_ASSERT_OK(newcomer, vad_range_info(newcomer, q, &after));
	assert_int_equal(before.offset, after.offset);
	strcpy(q, "newcomer's secret");
	void *stolen = NULL;
	int rc = vad_attach(stranger, token, &stolen, &size);
	if (rc == 0)
		fail_msg("an old token attached to a range reused by another client (it reads "
			 "\"%.20s\")",
			 (char *)stolen);
	assert_int_equal(VAD_ETOKEN, rc);
	/* and the owner cannot resurrect it either */
	VT_ASSERT_ERR(owner, VAD_ETOKEN, vad_attach(owner, token, &stolen, &size));
	VT_ASSERT_OK(newcomer, vad_free(newcomer, q));
	vad_close(newcomer);
	vad_close(stranger);
	vad_close(owner);
	assert_int_equal(0, vt_daemon_stop(d));
}

/* Tokens are distinct, printable and do not encode the offset guessably. */
static void test_tokens_are_unguessable(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, NULL, NULL));
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "tokens", &c));
	enum { N = 64 };
	char tokens[N][VAD_TOKEN_LEN + 1];
	void *ptrs[N];
	for (int i = 0; i < N; i++) {
		VT_ASSERT_OK(c, vad_alloc(c, PAGE, 0, &ptrs[i]));
		VT_ASSERT_OK(c, vad_share(c, ptrs[i], tokens[i]));
		assert_int_equal(VAD_TOKEN_LEN, strlen(tokens[i]));
		for (int k = 0; k < VAD_TOKEN_LEN; k++)
			assert_true(tokens[i][k] > ' ' && tokens[i][k] < 127);
	}
	/* the same range shared twice: both tokens work */
	char again[VAD_TOKEN_LEN + 1];
	VT_ASSERT_OK(c, vad_share(c, ptrs[0], again));
	int differing_positions = 0;
	for (int k = 0; k < VAD_TOKEN_LEN; k++) {
		bool all_same = true;
		for (int i = 1; i < N; i++) {
			assert_true(strcmp(tokens[i], tokens[i - 1]) != 0);
			if (tokens[i][k] != tokens[0][k])
				all_same = false;
		}
		differing_positions += !all_same;
	}
	/* Adjacent ranges differ by a page; a counter or an offset would leave most
	 * positions constant across 64 tokens. */
	if (differing_positions < VAD_TOKEN_LEN * 3 / 4)
		fail_msg("only %d of %d token characters vary across %d shares: guessable",
			 differing_positions, VAD_TOKEN_LEN, N);
	void *q;
	size_t size;
	VT_ASSERT_OK(c, vad_attach(c, again, &q, &size));
	VT_ASSERT_OK(c, vad_free(c, q));
	for (int i = 0; i < N; i++)
		VT_ASSERT_OK(c, vad_free(c, ptrs[i]));
	vad_close(c);
	assert_int_equal(0, vt_daemon_stop(d));
}

/* ---- freed memory goes back to the system ------------------------------------------ */

#define BIG (32u * 1024 * 1024)

/* Poll the arena's allocated blocks until they are at most want bytes. */
static int64_t wait_resident_at_most(const struct vt_daemon *d, int64_t want, int timeout_ms)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)timeout_ms * 1000000u;
	int64_t r;
	while ((r = vt_arena_resident_bytes(d)) > want && vt_now_ns() < deadline)
		vt_sleep_ms(20);
	return r;
}

static void test_freed_memory_returns_to_system(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, NULL, NULL));
	int64_t base = vt_arena_resident_bytes(d);
	if (base < 0)
		fail_msg("cannot find the daemon's memfd arena in /proc/%d/fd", (int)d->pid);
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "big", &c));

	/* With an explicit purge. */
	void *p;
	VT_ASSERT_OK(c, vad_alloc(c, BIG, 0, &p));
	memset(p, 0x11, BIG);
	assert_true(vt_arena_resident_bytes(d) >= base + BIG);
	VT_ASSERT_OK(c, vad_free(c, p));
	assert_int_equal(0, vt_purge(d));
	int64_t after = vt_arena_resident_bytes(d);
	if (after > base)
		fail_msg("after free and purge the arena still uses %lld bytes (%lld before)",
			 (long long)after, (long long)base);

	/* Without one: the idle drain gives it back by itself. */
	VT_ASSERT_OK(c, vad_alloc(c, BIG, 0, &p));
	memset(p, 0x22, BIG);
	VT_ASSERT_OK(c, vad_free(c, p));
	after = wait_resident_at_most(d, base, vt_timeout_ms(10000));
	if (after > base)
		fail_msg("%lld bytes still allocated %d ms after the free (idle drain)",
			 (long long)(after - base), vt_timeout_ms(10000));
	vad_close(c);
	assert_int_equal(0, vt_daemon_stop(d));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    VT_OWN_DAEMON_TEST(test_share_between_processes),
	    VT_OWN_DAEMON_TEST(test_whole_arena_reuse_reads_zero),
	    VT_OWN_DAEMON_TEST(test_purged_range_reuse_reads_zero),
	    VT_OWN_DAEMON_TEST(test_references_count),
	    VT_OWN_DAEMON_TEST(test_token_dies_with_its_range),
	    VT_OWN_DAEMON_TEST(test_tokens_are_unguessable),
	    VT_OWN_DAEMON_TEST(test_freed_memory_returns_to_system),
	    VT_OWN_DAEMON_TEST(test_killed_client_ranges_return),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
