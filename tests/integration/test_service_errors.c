/*
 * test_service_errors.c - every refusal has its own error code and a sentence, and the
 * daemon keeps serving afterwards: quotas, arena allow-lists, ENOTHELD, ETOKEN,
 * ENOARENA, ESIZE, EALIGN, ETOOBIG, EBUSY and admin operations as an unprivileged peer.
 */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "rawclient.h"
#include "vtassert.h"

#define PAGE	      4096u
#define CHILD_TIMEOUT vt_timeout_ms(20000)
#define MAX_BATCH     16

/* Most tests share one daemon: a 256M default arena, a root-only "private" arena. */
static const char *const shared_vad_extra = "max_batch = 16\n";
static const char *const shared_arenas = "[arena default]\n"
					 "size = 256M\n"
					 "\n"
					 "[arena private]\n"
					 "size = 16M\n"
					 "allow_uids = root\n";

VT_DAEMON_GROUP(group_setup, shared_vad_extra, shared_arenas)

/* The daemon still serves: a brand-new client allocates, writes and frees. */
static void assert_fresh_client_allocates(const struct vt_daemon *d)
{
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "fresh", &c));
	void *p;
	VT_ASSERT_OK(c, vad_alloc(c, 2 * PAGE, 0, &p));
	vt_fill_pattern(p, 2 * PAGE, 7);
	assert_true(vt_check_pattern(p, 2 * PAGE, 7) < 0);
	VT_ASSERT_OK(c, vad_free(c, p));
	vad_close(c);
}

/* The daemon's sentence for the last failure names what went wrong. */
static void assert_sentence(vad_client *c, const char *keyword)
{
	const char *msg = vad_last_error(c);
	assert_non_null(msg);
	if (!vt_contains(msg, keyword))
		fail_msg("error sentence \"%s\" does not mention \"%s\"", msg, keyword);
}

/* ---- refusals any client can provoke -------------------------------------------- */

static void test_unknown_arena(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "errors", &c));
	void *p;
	VT_ASSERT_ERR(c, VAD_ENOARENA, vad_alloc_in(c, "nosuch", PAGE, 0, &p));
	assert_sentence(c, "nosuch");
	vad_close(c);
	assert_fresh_client_allocates(d);
}

static void test_size_zero(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "errors", &c));
	void *p;
	VT_ASSERT_ERR(c, VAD_ESIZE, vad_alloc(c, 0, 0, &p));
	assert_sentence(c, "size");
	/* larger than the whole arena */
	VT_ASSERT_ERR(c, VAD_ESIZE, vad_alloc(c, (size_t)1 << 40, 0, &p));
	assert_sentence(c, "size");
	vad_close(c);
	assert_fresh_client_allocates(d);
}

static void test_bad_align(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "errors", &c));
	void *p;
	VT_ASSERT_ERR(c, VAD_EALIGN, vad_alloc(c, PAGE, 3, &p));
	assert_sentence(c, "align");
	VT_ASSERT_ERR(c, VAD_EALIGN, vad_alloc(c, PAGE, 3 * PAGE, &p));
	assert_sentence(c, "align");
	/* A good large alignment works and is honoured. */
	VT_ASSERT_OK(c, vad_alloc(c, PAGE, 1024 * 1024, &p));
	struct vad_range r;
	VT_ASSERT_OK(c, vad_range_info(c, p, &r));
	assert_int_equal(0, r.offset % (1024 * 1024));
	VT_ASSERT_OK(c, vad_free(c, p));
	vad_close(c);
	assert_fresh_client_allocates(d);
}

static void test_wrong_token(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "errors", &c));
	/* A real token exists, so the daemon has a table to look the wrong one up in. */
	void *p;
	VT_ASSERT_OK(c, vad_alloc(c, PAGE, 0, &p));
	char token[VAD_TOKEN_LEN + 1];
	VT_ASSERT_OK(c, vad_share(c, p, token));

	char wrong[VAD_TOKEN_LEN + 1];
	memcpy(wrong, token, sizeof(wrong));
	wrong[0] = wrong[0] == 'A' ? 'B' : 'A';
	wrong[VAD_TOKEN_LEN - 1] = wrong[VAD_TOKEN_LEN - 1] == 'z' ? 'y' : 'z';
	void *q = NULL;
	size_t size = 0;
	VT_ASSERT_ERR(c, VAD_ETOKEN, vad_attach(c, wrong, &q, &size));
	assert_sentence(c, "token");
	VT_ASSERT_ERR(c, VAD_ETOKEN, vad_attach(c, "short", &q, &size));
	VT_ASSERT_ERR(c, VAD_ETOKEN, vad_attach(c, "", &q, &size));
	/* The right token still works after the wrong ones. */
	VT_ASSERT_OK(c, vad_attach(c, token, &q, &size));
	assert_ptr_equal(p, q);
	VT_ASSERT_OK(c, vad_free(c, q));
	VT_ASSERT_OK(c, vad_free(c, p));
	vad_close(c);
	assert_fresh_client_allocates(d);
}

static void test_free_other_clients_range(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *a, *b;
	assert_int_equal(0, vt_connect(d, "owner", &a));
	assert_int_equal(0, vt_connect(d, "thief", &b));
	void *pa;
	VT_ASSERT_OK(a, vad_alloc(a, 4 * PAGE, 0, &pa));
	vt_fill_pattern(pa, 4 * PAGE, 99);
	struct vad_range r;
	VT_ASSERT_OK(a, vad_range_info(a, pa, &r));

	/* B points at A's range in its own mapping, but holds no reference. */
	void *pb;
	VT_ASSERT_OK(b, vad_pointer(b, r.arena, r.offset, &pb));
	VT_ASSERT_ERR(b, VAD_ENOTHELD, vad_free(b, pb));
	VT_ASSERT_ERR(b, VAD_ENOTHELD, vad_share(b, pb, (char[VAD_TOKEN_LEN + 1]){0}));

	/* The daemon itself refuses too, whatever a client library believes. */
	struct vt_raw raw;
	assert_int_equal(0, vt_raw_connect(&raw, d->socket_path));
	assert_int_equal(0, vt_raw_hello(&raw, "raw-thief"));
	assert_int_equal(VAD__ERROR__ENOTHELD, vt_raw_free(&raw, r.offset));
	vt_raw_close(&raw);

	/* A's range is untouched and still A's. */
	assert_true(vt_check_pattern(pa, 4 * PAGE, 99) < 0);
	assert_int_equal(4 * PAGE, vad_size(a, pa));
	VT_ASSERT_OK(a, vad_free(a, pa));
	/* A double free is refused the same way. */
	VT_ASSERT_ERR(a, VAD_ENOTHELD, vad_free(a, pa));
	vad_close(a);
	vad_close(b);
	assert_fresh_client_allocates(d);
}

static void test_batch_too_big(void **state)
{
	struct vt_daemon *d = *state;
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "errors", &c));
	size_t sizes[MAX_BATCH + 1];
	void *ptrs[MAX_BATCH + 1];
	for (size_t i = 0; i < MAX_BATCH + 1; i++)
		sizes[i] = PAGE;
	struct vad_stats before, after;
	VT_ASSERT_OK(c, vad_stats(c, &before));
	VT_ASSERT_ERR(c, VAD_ETOOBIG, vad_alloc_batch(c, MAX_BATCH + 1, sizes, 0, ptrs));
	/* All or nothing: nothing was allocated. */
	VT_ASSERT_OK(c, vad_stats(c, &after));
	assert_int_equal(before.held_ranges, after.held_ranges);
	/* The maximum itself is fine. */
	VT_ASSERT_OK(c, vad_alloc_batch(c, MAX_BATCH, sizes, 0, ptrs));
	VT_ASSERT_OK(c, vad_free_batch(c, MAX_BATCH, ptrs));
	vad_close(c);
	assert_fresh_client_allocates(d);
}

/* ---- refusals that depend on who the peer is ------------------------------------- */

/* Fork a child that drops to nobody and runs fn; returns its exit code. */
static int run_as_nobody(const struct vt_daemon *d, void (*fn)(const struct vt_daemon *d))
{
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		VT_CHILD_CHECK(vt_become_nobody() == 0, "cannot drop privileges");
		fn(d);
		_exit(0);
	}
	return vt_wait_child(pid, CHILD_TIMEOUT);
}

static void nobody_allocs_in_private(const struct vt_daemon *d)
{
	vad_client *c;
	int rc = vad_connect(d->socket_path, "nobody", &c);
	VT_CHILD_CHECK(rc == 0, "vad_connect as nobody: %s", vad_last_error(NULL));
	void *p;
	rc = vad_alloc_in(c, "private", PAGE, 0, &p);
	VT_CHILD_CHECK(rc == VAD_EPERM, "alloc in private as nobody: %d (%s), expected EPERM", rc,
		       vad_last_error(c));
	VT_CHILD_CHECK(vt_contains(vad_last_error(c), "private"),
		       "sentence \"%s\" does not name the arena", vad_last_error(c));
	/* The open arena still works for nobody. */
	rc = vad_alloc(c, PAGE, 0, &p);
	VT_CHILD_CHECK(rc == 0, "alloc in default as nobody: %s", vad_last_error(c));
	memset(p, 1, PAGE);
	rc = vad_free(c, p);
	VT_CHILD_CHECK(rc == 0, "free as nobody: %s", vad_last_error(c));
	/* arenas lists "private" as not allowed for this peer */
	struct vad_arena_info *arenas;
	size_t n;
	rc = vad_arenas(c, &arenas, &n);
	VT_CHILD_CHECK(rc == 0, "vad_arenas: %s", vad_last_error(c));
	int seen = 0;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(arenas[i].name, "private") == 0) {
			seen = 1;
			VT_CHILD_CHECK(!arenas[i].allowed, "private is listed as allowed");
		}
	}
	free(arenas);
	VT_CHILD_CHECK(seen, "private is not listed at all");
	vad_close(c);
}

static void test_arena_not_allowed(void **state)
{
	struct vt_daemon *d = *state;
	if (!vt_is_root()) {
		print_message("skipped: switching to uid nobody needs root\n");
		skip();
	}
	assert_int_equal(0, run_as_nobody(d, nobody_allocs_in_private));
	/* root is on the list */
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "root", &c));
	void *p;
	VT_ASSERT_OK(c, vad_alloc_in(c, "private", PAGE, 0, &p));
	VT_ASSERT_OK(c, vad_free(c, p));
	vad_close(c);
	assert_fresh_client_allocates(d);
}

static void nobody_tries_admin(const struct vt_daemon *d)
{
	vad_client *c;
	int rc = vad_connect(d->socket_path, "nobody", &c);
	VT_CHILD_CHECK(rc == 0, "vad_connect as nobody: %s", vad_last_error(NULL));
	struct vad_session s;
	rc = vad_session_info(c, &s);
	VT_CHILD_CHECK(rc == 0 && !s.admin, "nobody is an admin (rc %d)", rc);
	uint64_t released;
	rc = vad_purge(c, &released);
	VT_CHILD_CHECK(rc == VAD_EPERM, "purge as nobody: %d (%s)", rc, vad_last_error(c));
	VT_CHILD_CHECK(vt_contains(vad_last_error(c), "admin"),
		       "the EPERM sentence \"%s\" does not say it is an admin operation",
		       vad_last_error(c));
	rc = vad_reload(c);
	VT_CHILD_CHECK(rc == VAD_EPERM, "reload as nobody: %d (%s)", rc, vad_last_error(c));
	struct vad_client_info *clients;
	size_t n;
	rc = vad_clients(c, &clients, &n);
	VT_CHILD_CHECK(rc == VAD_EPERM, "clients as nobody: %d (%s)", rc, vad_last_error(c));
	int ok;
	rc = vad_check(c, &ok, NULL);
	VT_CHILD_CHECK(rc == VAD_EPERM, "check as nobody: %d (%s)", rc, vad_last_error(c));
	/* the connection survives the refusals */
	void *p;
	rc = vad_alloc(c, PAGE, 0, &p);
	VT_CHILD_CHECK(rc == 0, "alloc after refusals: %s", vad_last_error(c));
	vad_close(c);
}

static void test_admin_as_nobody(void **state)
{
	struct vt_daemon *d = *state;
	if (!vt_is_root()) {
		print_message("skipped: switching to uid nobody needs root\n");
		skip();
	}
	assert_int_equal(0, run_as_nobody(d, nobody_tries_admin));
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "root", &c));
	struct vad_session s;
	VT_ASSERT_OK(c, vad_session_info(c, &s));
	assert_true(s.admin);
	uint64_t released;
	VT_ASSERT_OK(c, vad_purge(c, &released));
	vad_close(c);
	assert_fresh_client_allocates(d);
}

/* After all of the above: nothing is held, the allocator is sound, and SIGTERM is clean. */
static void test_shared_daemon_survived(void **state)
{
	struct vt_daemon *d = *state;
	assert_fresh_client_allocates(d);
	assert_int_equal(0, vt_purge(d));
	struct vad_stats s;
	assert_int_equal(0, vt_wait_busy(d, 0, 1, vt_timeout_ms(2000), &s));
	assert_int_equal(0, vt_check_invariants(d));
	assert_int_equal(0, vt_daemon_stop(d));
}

/* ---- tests with their own daemon ------------------------------------------------ */

static void test_quota_client(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, "quota_client = 1M\n", NULL));
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "greedy", &c));
	void *p1, *p2, *p3;
	VT_ASSERT_OK(c, vad_alloc(c, 512 * 1024, 0, &p1));
	VT_ASSERT_OK(c, vad_alloc(c, 512 * 1024, 0, &p2));
	VT_ASSERT_ERR(c, VAD_EQUOTA, vad_alloc(c, PAGE, 0, &p3));
	assert_sentence(c, "quota");
	/* a batch that would cross the quota is refused whole */
	size_t sizes[2] = {PAGE, PAGE};
	void *ptrs[2];
	VT_ASSERT_ERR(c, VAD_EQUOTA, vad_alloc_batch(c, 2, sizes, 0, ptrs));
	/* Another client has its own quota. */
	assert_fresh_client_allocates(d);
	/* Freeing makes room again. */
	VT_ASSERT_OK(c, vad_free(c, p1));
	VT_ASSERT_OK(c, vad_alloc(c, PAGE, 0, &p3));
	VT_ASSERT_OK(c, vad_free(c, p3));
	VT_ASSERT_OK(c, vad_free(c, p2));
	vad_close(c);
	assert_int_equal(0, vt_daemon_stop(d));
}

/* An attached range counts against the attacher's quota like its own allocations, and
 * stops counting against the owner once the owner frees its reference. */
static void test_quota_counts_attached_ranges(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, "quota_client = 1M\n", NULL));
	vad_client *a, *b;
	assert_int_equal(0, vt_connect(d, "quota-a", &a));
	assert_int_equal(0, vt_connect(d, "quota-b", &b));
	void *pa, *pb, *q, *p;
	size_t size;
	VT_ASSERT_OK(a, vad_alloc(a, 768 * 1024, 0, &pa));
	char token[VAD_TOKEN_LEN + 1];
	VT_ASSERT_OK(a, vad_share(a, pa, token));
	VT_ASSERT_OK(b, vad_alloc(b, 512 * 1024, 0, &pb));
	VT_ASSERT_ERR(b, VAD_EQUOTA, vad_attach(b, token, &q, &size));
	assert_sentence(b, "quota");
	VT_ASSERT_OK(b, vad_free(b, pb));
	VT_ASSERT_OK(b, vad_attach(b, token, &q, &size));
	struct vad_stats s;
	VT_ASSERT_OK(b, vad_stats(b, &s));
	assert_int_equal(768 * 1024, s.held_bytes);
	/* B is at 768K of 1M now. */
	VT_ASSERT_ERR(b, VAD_EQUOTA, vad_alloc(b, 512 * 1024, 0, &p));
	/* A lets go: its quota is free again though B keeps the range alive. */
	VT_ASSERT_OK(a, vad_free(a, pa));
	VT_ASSERT_OK(a, vad_alloc(a, 1024 * 1024, 0, &p));
	VT_ASSERT_OK(a, vad_free(a, p));
	VT_ASSERT_OK(b, vad_free(b, q));
	vad_close(a);
	vad_close(b);
	assert_int_equal(0, vt_wait_busy(d, 0, 1, vt_timeout_ms(2000), NULL));
	assert_int_equal(0, vt_daemon_stop(d));
}

static void test_quota_uid(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, "quota_uid = 1M\n", NULL));
	vad_client *a, *b;
	assert_int_equal(0, vt_connect(d, "uid-a", &a));
	assert_int_equal(0, vt_connect(d, "uid-b", &b));
	void *pa, *pb, *p;
	VT_ASSERT_OK(a, vad_alloc(a, 512 * 1024, 0, &pa));
	VT_ASSERT_OK(b, vad_alloc(b, 512 * 1024, 0, &pb));
	/* Both sessions are one uid: together they are at the quota. */
	VT_ASSERT_ERR(a, VAD_EQUOTA, vad_alloc(a, PAGE, 0, &p));
	assert_sentence(a, "quota");
	VT_ASSERT_ERR(b, VAD_EQUOTA, vad_alloc(b, PAGE, 0, &p));
	/* A client that disconnects gives its share of the uid quota back. */
	vad_close(b);
	struct vad_stats s;
	assert_int_equal(0, vt_wait_busy(d, 512 * 1024, UINT32_MAX, vt_timeout_ms(1000), &s));
	VT_ASSERT_OK(a, vad_alloc(a, PAGE, 0, &p));
	VT_ASSERT_OK(a, vad_free(a, p));
	VT_ASSERT_OK(a, vad_free(a, pa));
	vad_close(a);
	assert_int_equal(0, vt_daemon_stop(d));
}

static void nobody_allocs_half(const struct vt_daemon *d)
{
	vad_client *c;
	int rc = vad_connect(d->socket_path, "nobody-quota", &c);
	VT_CHILD_CHECK(rc == 0, "connect: %s", vad_last_error(NULL));
	void *p;
	rc = vad_alloc(c, 512 * 1024, 0, &p);
	VT_CHILD_CHECK(rc == 0, "nobody's own uid quota is untouched, yet: %d (%s)", rc,
		       vad_last_error(c));
	rc = vad_alloc(c, 768 * 1024, 0, &p);
	VT_CHILD_CHECK(rc == VAD_EQUOTA, "nobody past its uid quota: %d", rc);
	vad_close(c);
}

/* quota_uid is per uid: root at its limit does not limit nobody. */
static void test_quota_uid_is_per_uid(void **state)
{
	struct vt_daemon *d = *state;
	if (!vt_is_root()) {
		print_message("skipped: switching to uid nobody needs root\n");
		skip();
	}
	assert_int_equal(0, vt_daemon_setup(d, "quota_uid = 1M\n", NULL));
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "root-quota", &c));
	void *p, *q;
	VT_ASSERT_OK(c, vad_alloc(c, 1024 * 1024, 0, &p));
	VT_ASSERT_ERR(c, VAD_EQUOTA, vad_alloc(c, PAGE, 0, &q));
	assert_int_equal(0, run_as_nobody(d, nobody_allocs_half));
	VT_ASSERT_OK(c, vad_free(c, p));
	vad_close(c);
	assert_int_equal(0, vt_daemon_stop(d));
}

/* Connect, retrying while the daemon is still counting a connection that just closed
 * (the harness's own probes close asynchronously). */
static int connect_when_room(const struct vt_daemon *d, const char *name, vad_client **out)
{
	uint64_t deadline = vt_now_ns() + (uint64_t)vt_timeout_ms(2000) * 1000000u;
	int rc;
	while ((rc = vad_connect(d->socket_path, name, out)) == VAD_EBUSY && vt_now_ns() < deadline)
		vt_sleep_ms(10);
	return rc;
}

static void test_too_many_clients(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, "max_clients = 3\n", NULL));
	vad_client *c[3];
	for (int i = 0; i < 3; i++) {
		int crc = connect_when_room(d, "crowd", &c[i]);
		if (crc != 0)
			fail_msg("client %d of max_clients 3: %d (%s)", i, crc, vad_strerror(crc));
	}
	/* On the wire: the daemon says EBUSY (unasked, id 0) and closes. */
	struct vt_raw raw;
	assert_int_equal(0, vt_raw_connect(&raw, d->socket_path));
	Vad__Response *resp = NULL;
	enum vt_raw_result res = vt_raw_recv(&raw, &resp, vt_timeout_ms(5000));
	if (res != VT_RAW_RESPONSE)
		fail_msg("connection past max_clients: no EBUSY frame (%s)",
			 res == VT_RAW_CLOSED ? "closed silently" : "nothing at all");
	assert_int_equal(VAD__ERROR__EBUSY, resp->error);
	vt_raw_response_free(resp);
	assert_true(vt_raw_wait_closed(&raw, vt_timeout_ms(5000)));
	vt_raw_close(&raw);
	/* Through libvad: vad_connect reports it as EBUSY with the daemon's sentence. */
	vad_client *extra = NULL;
	int rc = vad_connect(d->socket_path, "one-too-many", &extra);
	if (rc != VAD_EBUSY)
		fail_msg("connection past max_clients: %d (%s), expected EBUSY", rc,
			 vad_strerror(rc));
	assert_true(vt_contains(vad_last_error(NULL), "client"));
	/* The crowd is unaffected. */
	void *p;
	VT_ASSERT_OK(c[0], vad_alloc(c[0], PAGE, 0, &p));
	VT_ASSERT_OK(c[0], vad_free(c[0], p));
	/* One leaves: a newcomer gets in (the daemon notices the close asynchronously). */
	vad_close(c[2]);
	rc = connect_when_room(d, "newcomer", &extra);
	if (rc != 0)
		fail_msg("no room after a client left: %d (%s)", rc, vad_strerror(rc));
	VT_ASSERT_OK(extra, vad_alloc(extra, PAGE, 0, &p));
	VT_ASSERT_OK(extra, vad_free(extra, p));
	vad_close(extra);
	vad_close(c[0]);
	vad_close(c[1]);
	assert_int_equal(0, vt_daemon_stop(d));
}

static void test_arena_full(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, NULL, "[arena default]\nsize = 1M\n"));
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "filler", &c));
	void *half1, *half2, *p;
	VT_ASSERT_OK(c, vad_alloc(c, 512 * 1024, 0, &half1));
	VT_ASSERT_OK(c, vad_alloc(c, 512 * 1024, 0, &half2));
	VT_ASSERT_ERR(c, VAD_ENOSPC, vad_alloc(c, PAGE, 0, &p));
	assert_true(vad_last_error(c)[0] != '\0');
	/* Free half: a range that fits comes back (the allocation drains the lazy list
	 * itself when it finds no room); one larger than what is free still does not. */
	VT_ASSERT_OK(c, vad_free(c, half1));
	VT_ASSERT_ERR(c, VAD_ENOSPC, vad_alloc(c, 768 * 1024, 0, &p));
	VT_ASSERT_OK(c, vad_alloc(c, 512 * 1024, 0, &p));
	VT_ASSERT_OK(c, vad_free(c, p));
	VT_ASSERT_OK(c, vad_free(c, half2));
	/* All of it again, in one piece. */
	VT_ASSERT_OK(c, vad_alloc(c, 1024 * 1024, 0, &p));
	VT_ASSERT_OK(c, vad_free(c, p));
	struct vad_stats s;
	VT_ASSERT_OK(c, vad_stats(c, &s));
	assert_true(s.fails >= 2);
	vad_close(c);
	assert_int_equal(0, vt_check_invariants(d));
	assert_int_equal(0, vt_daemon_stop(d));
}

static void test_default_max_batch(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_daemon_setup(d, NULL, NULL));
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "batcher", &c));
	enum { MAX = 1024 }; /* the documented default of max_batch */
	size_t *sizes = calloc(MAX + 1, sizeof(*sizes));
	void **ptrs = calloc(MAX + 1, sizeof(*ptrs));
	assert_non_null(sizes);
	assert_non_null(ptrs);
	for (size_t i = 0; i <= MAX; i++)
		sizes[i] = PAGE * (1 + i % 4);
	VT_ASSERT_ERR(c, VAD_ETOOBIG, vad_alloc_batch(c, MAX + 1, sizes, 0, ptrs));
	VT_ASSERT_OK(c, vad_alloc_batch(c, MAX, sizes, 0, ptrs));
	for (size_t i = 0; i < MAX; i++)
		*(uint64_t *)ptrs[i] = i;
	for (size_t i = 0; i < MAX; i++)
		assert_int_equal(i, *(uint64_t *)ptrs[i]);
	struct vad_stats s;
	VT_ASSERT_OK(c, vad_stats(c, &s));
	assert_int_equal(MAX, s.held_ranges);
	VT_ASSERT_OK(c, vad_free_batch(c, MAX, ptrs));
	VT_ASSERT_OK(c, vad_stats(c, &s));
	assert_int_equal(0, s.held_ranges);
	free(sizes);
	free(ptrs);
	vad_close(c);
	assert_int_equal(0, vt_daemon_stop(d));
}

static void nobody_purges(const struct vt_daemon *d)
{
	vad_client *c;
	int rc = vad_connect(d->socket_path, "nobody-admin", &c);
	VT_CHILD_CHECK(rc == 0, "vad_connect as nobody: %s", vad_last_error(NULL));
	struct vad_session s;
	rc = vad_session_info(c, &s);
	VT_CHILD_CHECK(rc == 0 && s.admin, "a member of admin_group is not an admin");
	uint64_t released;
	rc = vad_purge(c, &released);
	VT_CHILD_CHECK(rc == 0, "purge as admin_group member: %d (%s)", rc, vad_last_error(c));
	vad_close(c);
}

static void test_admin_group(void **state)
{
	struct vt_daemon *d = *state;
	if (!vt_is_root()) {
		print_message("skipped: switching to uid nobody needs root\n");
		skip();
	}
	/* nobody's primary group is 65534 (nogroup) */
	assert_int_equal(0, vt_daemon_setup(d, "admin_group = 65534\n", NULL));
	assert_int_equal(0, run_as_nobody(d, nobody_purges));
	assert_int_equal(0, vt_daemon_stop(d));
}

int main(void)
{
	const struct CMUnitTest shared[] = {
	    cmocka_unit_test(test_unknown_arena),
	    cmocka_unit_test(test_size_zero),
	    cmocka_unit_test(test_bad_align),
	    cmocka_unit_test(test_wrong_token),
	    cmocka_unit_test(test_free_other_clients_range),
	    cmocka_unit_test(test_batch_too_big),
	    cmocka_unit_test(test_arena_not_allowed),
	    cmocka_unit_test(test_admin_as_nobody),
	    cmocka_unit_test(test_shared_daemon_survived),
	};
	const struct CMUnitTest own[] = {
	    VT_OWN_DAEMON_TEST(test_quota_client),
	    VT_OWN_DAEMON_TEST(test_quota_counts_attached_ranges),
	    VT_OWN_DAEMON_TEST(test_quota_uid),
	    VT_OWN_DAEMON_TEST(test_quota_uid_is_per_uid),
	    VT_OWN_DAEMON_TEST(test_too_many_clients),
	    VT_OWN_DAEMON_TEST(test_arena_full),
	    VT_OWN_DAEMON_TEST(test_default_max_batch),
	    VT_OWN_DAEMON_TEST(test_admin_group),
	};
	int failed = cmocka_run_group_tests_name("shared daemon", shared, group_setup,
						 vt_group_daemon_stop_if_running);
	failed += cmocka_run_group_tests_name("own daemon", own, NULL, NULL);
	return failed ? 1 : 0;
}
