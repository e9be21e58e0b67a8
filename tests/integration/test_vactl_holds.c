/*
 * test_vactl_holds.c - who holds what, through libvad and build/vactl against a real daemon:
 * a session's ranges listed with their offsets, sizes and shared flags, and paged when there
 * are many; live tokens listed without their strings for a non-admin (a peer running as
 * another uid) and with them for an admin who asks; per-uid use in vactl clients; vactl kill
 * of a session holding ranges gives back what only it held, leaves a shared range with its
 * other holder, makes the killed client's next call fail with VAD_EKILLED and the daemon's
 * sentence, is refused to a non-admin with EPERM, and is in vactl history.
 */
#include <string.h>

#include <json-c/json.h>

#include "uid_peers.h"
#include "vtassert.h"

#define PAGE	 4096u
#define FIRST_ID 61500 /* ids are searched from here for ones no user or group has */
#define MANY	 3000  /* ranges of the paging test: several pages of 64 KiB frames */
#define WAIT_MS	 vt_timeout_ms(20000)

struct fixture {
	struct vt_daemon d; /* first: vt_group_fixture_setup */
	unsigned peer_uid;
};

static int group_setup(void **state)
{
	unsigned id;
	if (vt_pick_unused_ids(FIRST_ID, &id, 1) != 0)
		return -1;
	int rc = VT_GROUP_FIXTURE_SETUP(state, struct fixture,
					/* even: sessions alternate between the two workers,
					 * so kills cross from one worker to the other */
					"stats_interval = 100ms\nquota_uid = 1G\n"
					"max_ranges_uid = 100000\nworker_balance = even\n",
					NULL);
	if (*state)
		((struct fixture *)*state)->peer_uid = id;
	return rc;
}

static uint64_t ju64(struct json_object *j, const char *path)
{
	uint64_t v = 0;
	if (vt_json_u64(j, path, &v) != 0)
		fail_msg("no unsigned number at \"%s\" in %s", path, json_object_to_json_string(j));
	return v;
}

static bool jbool(struct json_object *j, const char *path)
{
	struct json_object *v = vt_json_path(j, path);
	if (!v || !json_object_is_type(v, json_type_boolean))
		fail_msg("no boolean at \"%s\" in %s", path, json_object_to_json_string(j));
	return json_object_get_boolean(v);
}

/* Run vactl --json ARGS against d, which must exit want; its parsed output (put it). */
#define VACTL_JSON(d, want, ...) vactl_json((d), (want), __VA_ARGS__, NULL)
static struct json_object *vactl_json(const struct vt_daemon *d, int want, ...)
{
	char *args[16] = {"--socket", (char *)d->socket_path, "--json"};
	size_t n = 3;
	va_list ap;
	va_start(ap, want);
	for (char *a; n < 15 && (a = va_arg(ap, char *));)
		args[n++] = a;
	va_end(ap);
	args[n] = NULL;
	struct vt_output o;
	assert_int_equal(0, vt_vactl_argv(args, NULL, &o));
	VT_ASSERT_EXIT(&o, want, args[3]);
	struct json_object *j = vt_json_parse(o.out);
	assert_non_null(j);
	vt_output_free(&o);
	return j;
}

static uint64_t session_id(vad_client *c)
{
	struct vad_session s;
	VT_ASSERT_OK(c, vad_session_info(c, &s));
	return s.session_id;
}

static uint64_t offset_of(vad_client *c, void *p)
{
	struct vad_range r;
	VT_ASSERT_OK(c, vad_range_info(c, p, &r));
	return r.offset;
}

/* The row of list (a JSON array of ranges or tokens) whose offset is off, or NULL. */
static struct json_object *row_at(struct json_object *list, uint64_t off)
{
	for (size_t i = 0; i < json_object_array_length(list); i++) {
		struct json_object *r = json_object_array_get_idx(list, i);
		if (ju64(r, "offset") == off)
			return r;
	}
	return NULL;
}

/* ---- ranges ------------------------------------------------------------------------------- */

/* Three ranges of different sizes, one attached by a second session: vactl ranges lists each
 * with its offset and size, the attached one shared with two holders, the others not. */
static void test_ranges_listed(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *a, *b;
	assert_int_equal(0, vt_connect(d, "holder-a", &a));
	assert_int_equal(0, vt_connect(d, "holder-b", &b));
	void *p[3];
	static const size_t sizes[3] = {PAGE, 3 * PAGE, 16 * PAGE};
	for (int i = 0; i < 3; i++)
		VT_ASSERT_OK(a, vad_alloc(a, sizes[i], 0, &p[i]));
	char token[VAD_TOKEN_LEN + 1];
	VT_ASSERT_OK(a, vad_share(a, p[1], token));
	void *q;
	size_t qsize;
	VT_ASSERT_OK(b, vad_attach(b, token, &q, &qsize));

	char id[32];
	snprintf(id, sizeof(id), "%llu", (unsigned long long)session_id(a));
	struct json_object *j = VACTL_JSON(d, 0, "ranges", id);
	assert_int_equal(session_id(a), ju64(j, "session_id"));
	assert_int_equal(3, ju64(j, "total"));
	assert_false(jbool(j, "truncated"));
	struct json_object *list = vt_json_path(j, "ranges");
	assert_int_equal(3, json_object_array_length(list));
	for (int i = 0; i < 3; i++) {
		struct json_object *r = row_at(list, offset_of(a, p[i]));
		assert_non_null(r);
		assert_int_equal(sizes[i], ju64(r, "size"));
		assert_int_equal(1, ju64(r, "refs"));
		assert_int_equal(i == 1 ? 2 : 1, ju64(r, "holders"));
		assert_true(jbool(r, "shared") == (i == 1));
	}
	json_object_put(j);

	/* By name too, and the attaching session sees the one range it holds, shared. */
	j = VACTL_JSON(d, 0, "ranges", "holder-b");
	list = vt_json_path(j, "ranges");
	assert_int_equal(1, json_object_array_length(list));
	assert_int_equal(offset_of(a, p[1]), ju64(json_object_array_get_idx(list, 0), "offset"));
	assert_true(jbool(json_object_array_get_idx(list, 0), "shared"));
	json_object_put(j);

	/* A session nobody has: a sentence, exit 1. */
	j = VACTL_JSON(d, 1, "ranges", "no-such-client");
	assert_string_equal("EINVAL", json_object_get_string(vt_json_path(j, "error")));
	json_object_put(j);

	VT_ASSERT_OK(b, vad_free(b, q));
	for (int i = 0; i < 3; i++)
		VT_ASSERT_OK(a, vad_free(a, p[i]));
	vad_close(a);
	vad_close(b);
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t u = *(const uint64_t *)x, v = *(const uint64_t *)y;
	return u < v ? -1 : u > v;
}

/* MANY ranges come back over several pages, each exactly once, with their sizes; --limit
 * stops early and says so. */
static void test_ranges_paged(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *a, *admin;
	assert_int_equal(0, vt_connect(d, "many", &a));
	assert_int_equal(0, vt_connect(d, "lister", &admin));
	void **p = calloc(MANY, sizeof(*p));
	size_t *sizes = calloc(MANY, sizeof(*sizes));
	assert_non_null(p);
	assert_non_null(sizes);
	for (size_t i = 0; i < MANY; i++)
		sizes[i] = PAGE * (1 + i % 3);
	for (size_t i = 0; i < MANY; i += 500)
		VT_ASSERT_OK(a, vad_alloc_batch(a, 500, sizes + i, 0, p + i));
	char id[32];
	snprintf(id, sizeof(id), "%llu", (unsigned long long)session_id(a));
	struct vad_held_list *l;
	VT_ASSERT_OK(admin, vad_session_ranges(admin, id, 0, &l));
	assert_int_equal(MANY, l->n);
	assert_int_equal(MANY, l->total);
	assert_false(l->truncated);
	/* Every range once: sort both sides by offset and compare. */
	uint64_t *want = calloc(MANY, sizeof(*want)), *got = calloc(MANY, sizeof(*got));
	assert_non_null(want);
	assert_non_null(got);
	for (size_t i = 0; i < MANY; i++) {
		want[i] = offset_of(a, p[i]) << 2 | (sizes[i] / PAGE);
		got[i] = l->ranges[i].offset << 2 | (l->ranges[i].size / PAGE);
		assert_string_equal("default", l->ranges[i].arena);
	}
	qsort(want, MANY, sizeof(*want), cmp_u64);
	qsort(got, MANY, sizeof(*got), cmp_u64);
	assert_memory_equal(want, got, MANY * sizeof(*want));
	free(l);

	VT_ASSERT_OK(admin, vad_session_ranges(admin, id, 10, &l));
	assert_int_equal(10, l->n);
	assert_true(l->truncated);
	free(l);
	struct json_object *j = VACTL_JSON(d, 0, "ranges", id, "--limit", "700");
	assert_int_equal(700, json_object_array_length(vt_json_path(j, "ranges")));
	assert_true(jbool(j, "truncated"));
	json_object_put(j);

	for (size_t i = 0; i < MANY; i += 500)
		VT_ASSERT_OK(a, vad_free_batch(a, 500, p + i));
	free(want);
	free(got);
	free(p);
	free(sizes);
	vad_close(a);
	vad_close(admin);
}

/* ---- tokens and a non-admin peer ------------------------------------------------------------ */

/* The peer (another uid): shares a range of its own, sees only its own token and no token
 * string, is refused token strings, another uid's session and kill. */
static void peer_main(void *ctx, int in, int out)
{
	const struct vt_daemon *d = ctx;
	char buf[256];
	vad_client *c = vt_child_connect(d, "peer");
	void *p;
	VT_CHILD_CHECK(vad_alloc(c, 2 * PAGE, 0, &p) == 0, "alloc: %s", vad_last_error(c));
	char token[VAD_TOKEN_LEN + 1];
	struct vad_share_opts so = {.single_use = 1, .ttl_ms = 600000};
	VT_CHILD_CHECK(vad_share_opts(c, p, &so, token) == 0, "share: %s", vad_last_error(c));
	struct vad_range r;
	vad_range_info(c, p, &r);
	vt_child_send(out, "shared %llu", (unsigned long long)r.offset);
	const char *admin_id = vt_child_expect(in, "admin", buf, sizeof(buf));

	struct vad_token_list *l;
	int rc = vad_tokens(c, 0, 0, &l);
	VT_CHILD_CHECK(rc == 0, "tokens: %s", vad_last_error(c));
	VT_CHILD_CHECK(l->n == 1, "a non-admin sees %zu tokens, expected its own one", l->n);
	VT_CHILD_CHECK(l->tokens[0].offset == r.offset && l->tokens[0].size == 2 * PAGE &&
			   l->tokens[0].single_use && l->tokens[0].expires &&
			   l->tokens[0].ttl_left_ms > 0 && l->tokens[0].ttl_left_ms <= 600000 &&
			   l->tokens[0].uid == getuid() && l->tokens[0].holders == 1,
		       "its token is listed wrong");
	VT_CHILD_CHECK(l->tokens[0].token[0] == '\0', "a non-admin was shown a token string");
	free(l);
	rc = vad_tokens(c, 1, 0, &l);
	VT_CHILD_CHECK(rc == VAD_EPERM && vt_contains(vad_last_error(c), "administrator"),
		       "--show-tokens as a non-admin: %d (%s)", rc, vad_last_error(c));
	struct vad_held_list *h;
	rc = vad_session_ranges(c, admin_id, 0, &h);
	VT_CHILD_CHECK(rc == VAD_EINVAL && vt_contains(vad_last_error(c), "of your uid"),
		       "another uid's ranges: %d (%s)", rc, vad_last_error(c));
	rc = vad_session_ranges(c, "peer", 0, &h);
	VT_CHILD_CHECK(rc == 0 && h->n == 1 && h->ranges[0].shared, "its own ranges: %d (%s)", rc,
		       vad_last_error(c));
	free(h);
	rc = vad_kill(c, admin_id, NULL);
	VT_CHILD_CHECK(rc == VAD_EPERM && vt_contains(vad_last_error(c), "kill"),
		       "kill as a non-admin: %d (%s)", rc, vad_last_error(c));
	vt_child_send(out, "done");
	vt_child_expect(in, "bye", buf, sizeof(buf));
	vad_close(c);
}

static void test_tokens_by_who_asks(void **state)
{
	struct fixture *f = *state;
	struct vt_daemon *d = &f->d;
	if (!vt_is_root()) {
		print_message("skipped: running a peer as another uid needs root\n");
		skip();
	}
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "root-sharer", &c));
	void *p;
	VT_ASSERT_OK(c, vad_alloc(c, PAGE, 0, &p));
	char token[VAD_TOKEN_LEN + 1];
	VT_ASSERT_OK(c, vad_share(c, p, token));

	struct vt_peer peer;
	vt_peer_start(f->peer_uid, NULL, 0, peer_main, d, &peer);
	char buf[256], line[64];
	uint64_t peer_off = strtoull(vt_peer_expect(&peer, "shared", buf, sizeof(buf)), NULL, 10);
	snprintf(line, sizeof(line), "admin %llu", (unsigned long long)session_id(c));
	vt_peer_send(&peer, line);
	vt_peer_expect(&peer, "done", buf, sizeof(buf));

	/* The admin sees both, without strings unless it asks. */
	struct json_object *j = VACTL_JSON(d, 0, "tokens");
	struct json_object *list = vt_json_path(j, "tokens");
	assert_int_equal(2, ju64(j, "total"));
	assert_int_equal(2, json_object_array_length(list));
	assert_null(vt_json_find(j, "token"));
	struct json_object *mine = row_at(list, offset_of(c, p));
	struct json_object *theirs = row_at(list, peer_off);
	assert_non_null(mine);
	assert_non_null(theirs);
	assert_int_equal(0, ju64(mine, "uid"));
	assert_int_equal(f->peer_uid, ju64(theirs, "uid"));
	assert_true(jbool(theirs, "single_use"));
	assert_false(jbool(mine, "single_use"));
	assert_null(vt_json_path(mine, "ttl_left_ms")); /* never expires: null */
	json_object_put(j);
	j = VACTL_JSON(d, 0, "tokens", "--show-tokens");
	mine = row_at(vt_json_path(j, "tokens"), offset_of(c, p));
	assert_non_null(mine);
	assert_string_equal(token, json_object_get_string(vt_json_path(mine, "token")));
	json_object_put(j);
	assert_true(vt_daemon_log_contains(d, "lists share token strings"));

	/* clients: the uid's use against quota_uid and max_ranges_uid. */
	j = VACTL_JSON(d, 0, "clients");
	struct json_object *cl = vt_json_path(j, "clients");
	bool seen = false;
	for (size_t i = 0; i < json_object_array_length(cl); i++) {
		struct json_object *x = json_object_array_get_idx(cl, i);
		if (ju64(x, "uid") != f->peer_uid)
			continue;
		seen = true;
		assert_int_equal(2 * PAGE, ju64(x, "uid_held_bytes"));
		assert_int_equal(1, ju64(x, "uid_held_ranges"));
		assert_int_equal(1u << 30, ju64(x, "uid_quota_bytes"));
		assert_int_equal(100000, ju64(x, "uid_max_ranges"));
	}
	assert_true(seen);
	json_object_put(j);

	vt_peer_send(&peer, "bye");
	vt_peer_finish(&peer, "the peer listing tokens");
	VT_ASSERT_OK(c, vad_free(c, p));
	vad_close(c);
}

/* ---- kill ----------------------------------------------------------------------------------- */

/* Poll vactl history until an event of kind shows up whose detail contains needle. */
static bool history_has(const struct vt_daemon *d, const char *kind, const char *needle)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)WAIT_MS * 1000000u;
	do {
		struct vt_output o;
		assert_int_equal(0, vt_vactl(NULL, NULL, &o, "--json", "history", "--db",
					     d->stats_db, "--since", "all", NULL));
		struct json_object *j = o.exit_code == 0 ? vt_json_parse(o.out) : NULL;
		struct json_object *ev = j ? vt_json_path(j, "events") : NULL;
		bool found = false;
		for (size_t i = 0; ev && i < json_object_array_length(ev); i++) {
			struct json_object *e = json_object_array_get_idx(ev, i);
			const char *k = json_object_get_string(vt_json_path(e, "kind"));
			const char *det = json_object_get_string(vt_json_path(e, "detail"));
			found |= k && strcmp(k, kind) == 0 && vt_contains(det, needle);
		}
		if (j)
			json_object_put(j);
		vt_output_free(&o);
		if (found)
			return true;
		vt_sleep_ms(50);
	} while (vt_now_ns() < deadline);
	return false;
}

/* A session holding ranges, one of them shared with a second session, is killed: what only it
 * held goes back, the shared range stays with the other holder (its bytes intact), the
 * registry is consistent, the killed client's every later call fails with VAD_EKILLED and the
 * daemon's sentence, and the kill is in the history. */
static void test_kill_returns_ranges(void **state)
{
	struct vt_daemon *d = *state;
	struct vad_stats st;
	assert_int_equal(0, vt_stats(d, &st));
	uint64_t busy0 = st.busy_bytes;
	vad_client *victim, *other;
	assert_int_equal(0, vt_connect(d, "victim", &victim));
	assert_int_equal(0, vt_connect(d, "other", &other));
	void *p[8];
	for (int i = 0; i < 8; i++)
		VT_ASSERT_OK(victim, vad_alloc(victim, 4 * PAGE, 0, &p[i]));
	/* More than one chunk of holds: the teardown goes through the reaper. */
	static size_t one_page[1000];
	static void *bulk[1000];
	for (size_t i = 0; i < 1000; i++)
		one_page[i] = PAGE;
	VT_ASSERT_OK(victim, vad_alloc_batch(victim, 1000, one_page, 0, bulk));
	vt_fill_pattern(p[0], 4 * PAGE, 77);
	char token[VAD_TOKEN_LEN + 1];
	VT_ASSERT_OK(victim, vad_share(victim, p[0], token));
	void *q;
	size_t qsize;
	VT_ASSERT_OK(other, vad_attach(other, token, &q, &qsize));
	assert_int_equal(0, vt_wait_busy(d, busy0 + 1032 * PAGE, UINT32_MAX, WAIT_MS, &st));

	char id[32];
	uint64_t victim_id = session_id(victim);
	snprintf(id, sizeof(id), "%llu", (unsigned long long)victim_id);
	/* A non-admin is refused, and nothing happens. */
	if (vt_is_root()) {
		char bin[PATH_MAX];
		snprintf(bin, sizeof(bin), "%s/vactl", vt_build_dir());
		char *argv[] = {bin, "--socket", d->socket_path, "--json", "kill", id, NULL};
		struct vt_output o;
		assert_int_equal(0, vt_run_as_nobody(argv, NULL, WAIT_MS, &o));
		VT_ASSERT_EXIT(&o, 1, "vactl kill as nobody");
		struct json_object *j = vt_json_parse(o.out);
		assert_non_null(j);
		assert_string_equal("EPERM", json_object_get_string(vt_json_path(j, "error")));
		json_object_put(j);
		vt_output_free(&o);
		struct vad_range r;
		VT_ASSERT_OK(victim, vad_range_info(victim, p[1], &r));
		VT_ASSERT_OK(victim, vad_stats(victim, &st)); /* still connected */
	}

	struct json_object *j = VACTL_JSON(d, 0, "kill", id);
	assert_int_equal(victim_id, ju64(j, "session_id"));
	assert_int_equal(1032 * PAGE, ju64(j, "held_bytes"));
	assert_int_equal(1008, ju64(j, "held_ranges"));
	json_object_put(j);

	/* Only the shared range stays busy, held by the other session. */
	assert_int_equal(0, vt_wait_busy(d, busy0 + 4 * PAGE, UINT32_MAX, WAIT_MS, &st));
	assert_int_equal(-1, vt_check_pattern(q, qsize, 77));
	assert_int_equal(0, vt_check_invariants(d));

	/* The killed client learns why, on this call and the next. */
	void *x;
	for (int i = 0; i < 2; i++) {
		VT_ASSERT_ERR(victim, VAD_EKILLED, vad_alloc(victim, PAGE, 0, &x));
		assert_true(vt_contains(vad_last_error(victim),
					"disconnected by an administrator (vactl kill from uid"));
	}
	vad_close(victim);

	/* Killing it again: it is gone. */
	j = VACTL_JSON(d, 1, "kill", id);
	assert_string_equal("EINVAL", json_object_get_string(vt_json_path(j, "error")));
	json_object_put(j);

	VT_ASSERT_OK(other, vad_free(other, q));
	assert_int_equal(0, vt_wait_busy(d, busy0, UINT32_MAX, WAIT_MS, &st));
	vad_close(other);
	char needle[64];
	snprintf(needle, sizeof(needle), "session %s (pid", id);
	assert_true(history_has(d, "session-killed", needle));
	assert_true(vt_daemon_log_contains(d, "vactl kill: session"));
}

/* Two sessions with one name: kill by that name is refused as ambiguous, naming both; by pid
 * (of this process: both) likewise; by id it works. A session cannot kill itself. Once one
 * twin is killed the name is the other's at once, before the first one's worker has closed
 * it: the last round repeats that race. */
static void test_kill_names(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *a, *b, *admin;
	assert_int_equal(0, vt_connect(d, "twin", &a));
	assert_int_equal(0, vt_connect(d, "twin", &b));
	assert_int_equal(0, vt_connect(d, "killer", &admin));
	VT_ASSERT_ERR(admin, VAD_EINVAL, vad_kill(admin, "twin", NULL));
	assert_true(vt_contains(vad_last_error(admin), "2 sessions have the name 'twin'"));
	char pid[32], id[32];
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	VT_ASSERT_ERR(admin, VAD_EINVAL, vad_kill(admin, pid, NULL));
	assert_true(vt_contains(vad_last_error(admin), "have the pid"));
	snprintf(id, sizeof(id), "%llu", (unsigned long long)session_id(admin));
	VT_ASSERT_ERR(admin, VAD_EINVAL, vad_kill(admin, id, NULL));
	assert_true(vt_contains(vad_last_error(admin), "is the one asking"));
	snprintf(id, sizeof(id), "%llu", (unsigned long long)session_id(b));
	struct vad_killed k;
	VT_ASSERT_OK(admin, vad_kill(admin, id, &k));
	assert_string_equal("twin", k.name);
	assert_int_equal(getpid(), k.pid);
	struct vad_stats st;
	VT_ASSERT_ERR(b, VAD_EKILLED, vad_stats(b, &st));
	VT_ASSERT_OK(admin, vad_kill(admin, "twin", &k)); /* one twin left: unambiguous */
	assert_int_equal(session_id(a), k.session_id);
	VT_ASSERT_ERR(a, VAD_EKILLED, vad_stats(a, &st));
	vad_close(a);
	vad_close(b);
	for (int round = 0; round < 50; round++) {
		assert_int_equal(0, vt_connect(d, "triplet", &a));
		assert_int_equal(0, vt_connect(d, "triplet", &b));
		snprintf(id, sizeof(id), "%llu", (unsigned long long)session_id(b));
		VT_ASSERT_OK(admin, vad_kill(admin, id, &k));
		VT_ASSERT_OK(admin, vad_kill(admin, "triplet", &k));
		assert_int_equal(session_id(a), k.session_id);
		vad_close(a);
		vad_close(b);
	}
	vad_close(admin);
}

/* ---- config -------------------------------------------------------------------------------- */

/* "CONF:LINE" of the line of d's config file that sets key. */
static void file_line_of(const struct vt_daemon *d, const char *key, char *out, size_t len)
{
	FILE *f = fopen(d->conf_path, "r");
	assert_non_null(f);
	char line[512];
	int n = 0;
	out[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		n++;
		if (strncmp(line, key, strlen(key)) == 0 && line[strlen(key)] == ' ')
			snprintf(out, len, "%s:%d", d->conf_path, n);
	}
	fclose(f);
	assert_true(out[0] != '\0');
}

/* The {value, source} row of key in section of vactl config --json. */
static struct json_object *section_row(struct json_object *j, const char *section, const char *key)
{
	struct json_object *keys = vt_json_path(j, "keys");
	for (size_t i = 0; keys && i < json_object_array_length(keys); i++) {
		struct json_object *k = json_object_array_get_idx(keys, i);
		if (strcmp(json_object_get_string(vt_json_path(k, "key")), key) == 0 &&
		    strcmp(json_object_get_string(vt_json_path(k, "section")), section) == 0)
			return k;
	}
	fail_msg("vactl config has no key %s in section %s", key, section);
	return NULL;
}

static struct json_object *config_row(struct json_object *j, const char *key)
{
	return section_row(j, "vad", key);
}

static const char *jtext(struct json_object *j, const char *path)
{
	const char *s = json_object_get_string(vt_json_path(j, path));
	assert_non_null(s);
	return s;
}

/* vactl config: a key the file sets comes from its line, one it leaves from its default; a
 * reload that changes a key makes it the reload's; a non-admin is refused. */
static void test_config_sources(void **state)
{
	struct vt_daemon *d = *state;
	char where[PATH_MAX + 32], want[PATH_MAX + 48];
	struct json_object *j = VACTL_JSON(d, 0, "config");
	assert_string_equal(d->conf_path, jtext(j, "path"));
	file_line_of(d, "quota_uid", where, sizeof(where));
	assert_string_equal("1.0 GiB", jtext(config_row(j, "quota_uid"), "value"));
	assert_string_equal(where, jtext(config_row(j, "quota_uid"), "source"));
	assert_string_equal("64 KiB", jtext(config_row(j, "max_frame"), "value"));
	assert_string_equal("default", jtext(config_row(j, "max_frame"), "source"));
	assert_false(jbool(j, "truncated"));
	/* The arena section's keys: size from its line, quantum its default. */
	file_line_of(d, "size", where, sizeof(where));
	assert_string_equal("256 MiB", jtext(section_row(j, "arena default", "size"), "value"));
	assert_string_equal(where, jtext(section_row(j, "arena default", "size"), "source"));
	assert_string_equal("default", jtext(section_row(j, "arena default", "quantum"), "source"));
	json_object_put(j);

	assert_int_equal(0,
			 vt_daemon_write_config(d,
						"stats_interval = 100ms\nquota_uid = 2G\n"
						"max_ranges_uid = 100000\nworker_balance = even\n",
						NULL));
	j = VACTL_JSON(d, 0, "reload");
	json_object_put(j);
	j = VACTL_JSON(d, 0, "config");
	file_line_of(d, "quota_uid", where, sizeof(where));
	snprintf(want, sizeof(want), "reload %s", where);
	assert_string_equal("2.0 GiB", jtext(config_row(j, "quota_uid"), "value"));
	assert_string_equal(want, jtext(config_row(j, "quota_uid"), "source"));
	assert_string_equal("default", jtext(config_row(j, "max_frame"), "source"));
	json_object_put(j);

	if (vt_is_root()) {
		char bin[PATH_MAX];
		snprintf(bin, sizeof(bin), "%s/vactl", vt_build_dir());
		char *argv[] = {bin, "--socket", d->socket_path, "--json", "config", NULL};
		struct vt_output o;
		assert_int_equal(0, vt_run_as_nobody(argv, NULL, WAIT_MS, &o));
		VT_ASSERT_EXIT(&o, 1, "vactl config as nobody");
		assert_true(vt_contains(o.out, "EPERM"));
		vt_output_free(&o);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ranges_listed),      cmocka_unit_test(test_ranges_paged),
	    cmocka_unit_test(test_tokens_by_who_asks), cmocka_unit_test(test_kill_returns_ranges),
	    cmocka_unit_test(test_kill_names),	       cmocka_unit_test(test_config_sources),
	};
	return cmocka_run_group_tests_name("vactl holds", tests, group_setup, vt_group_daemon_stop);
}
