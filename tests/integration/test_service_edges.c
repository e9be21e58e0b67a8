/*
 * test_service_edges.c - well-formed requests with edge values, straight on the wire:
 * sizes and alignments near 2^64 (rounding overflow), batch counts past max_batch,
 * zero sizes inside batches, offsets inside (not at the start of) ranges, absurd names
 * and tokens, a second hello, arenas the peer may not map. Every one gets its own error
 * code, nothing is half done, and the daemon's books stay balanced.
 */
#include <string.h>

#include "rawclient.h"
#include "vtassert.h"

#define PAGE	      4096u
#define REPLY_TIMEOUT vt_timeout_ms(5000)

VT_DAEMON_GROUP(group_setup, "max_batch = 64\n",
		"[arena default]\nsize = 256M\n\n"
		"[arena private]\nsize = 16M\nallow_uids = root\n")

static void raw_open(const struct vt_daemon *d, struct vt_raw *r)
{
	assert_int_equal(0, vt_raw_connect(r, d->socket_path));
	assert_int_equal(0, vt_raw_hello(r, "edges"));
}

/* Send an Alloc and return the response (caller frees). */
static Vad__Response *raw_alloc_req(struct vt_raw *r, uint64_t size, uint64_t align, uint32_t count,
				    const uint64_t *sizes, size_t n_sizes, const char *arena)
{
	struct vt_req q;
	vt_req_alloc(&q, arena, size, align, count);
	q.op.alloc.sizes = (uint64_t *)sizes;
	q.op.alloc.n_sizes = n_sizes;
	Vad__Response *resp = vt_raw_call(r, &q.req, REPLY_TIMEOUT);
	assert_non_null(resp);
	return resp;
}

/* The response must be the error want, with a sentence. */
static void expect_error(Vad__Response *resp, int want, const char *what)
{
	if ((int)resp->error != want)
		fail_msg("%s: %s (%s), expected %s", what, vt_error_name(resp->error),
			 resp->message ? resp->message : "", vt_error_name(want));
	if (!resp->message || !resp->message[0])
		fail_msg("%s: %s without a sentence", what, vt_error_name(resp->error));
	vt_raw_response_free(resp);
}

/* This connection holds nothing (all-or-nothing requests left no trace). */
static void expect_holds_nothing(struct vt_raw *r)
{
	struct vt_req q;
	Vad__Response *resp = vt_raw_call(r, vt_req_stats(&q, NULL), REPLY_TIMEOUT);
	assert_non_null(resp);
	assert_int_equal(VAD__ERROR__OK, resp->error);
	assert_int_equal(0, resp->stats->held_ranges);
	assert_int_equal(0, resp->stats->held_bytes);
	vt_raw_response_free(resp);
}

static void test_sizes_near_2_64(void **state)
{
	struct vt_daemon *d = *state;
	struct vt_raw r;
	raw_open(d, &r);
	static const uint64_t sizes[] = {
	    UINT64_MAX,		UINT64_MAX - PAGE + 2, /* rounds up past 2^64 */
	    1ull << 63,		(1ull << 63) + 1,
	    (256ull << 20) + 1, /* one byte more than the arena */
	};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char what[64];
		snprintf(what, sizeof(what), "alloc of %llu bytes", (unsigned long long)sizes[i]);
		expect_error(raw_alloc_req(&r, sizes[i], 0, 0, NULL, 0, NULL), VAD__ERROR__ESIZE,
			     what);
	}
	/* the whole arena is fine */
	Vad__Response *resp = raw_alloc_req(&r, 256ull << 20, 0, 0, NULL, 0, NULL);
	assert_int_equal(VAD__ERROR__OK, resp->error);
	uint64_t off = resp->alloc->offsets[0];
	assert_int_equal(256ull << 20, resp->alloc->sizes[0]);
	vt_raw_response_free(resp);
	assert_int_equal(0, vt_raw_free(&r, off));
	expect_holds_nothing(&r);
	vt_raw_close(&r);
}

static void test_aligns_at_the_edges(void **state)
{
	struct vt_daemon *d = *state;
	struct vt_raw r;
	raw_open(d, &r);
	static const uint64_t bad[] = {3,	   PAGE + 1,	3 * PAGE, 1ull << 63,
				       UINT64_MAX, 512ull << 20 /* larger than the arena */};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char what[64];
		snprintf(what, sizeof(what), "align %llu", (unsigned long long)bad[i]);
		expect_error(raw_alloc_req(&r, PAGE, bad[i], 0, NULL, 0, NULL), VAD__ERROR__EALIGN,
			     what);
	}
	/* size + align - quantum must not overflow into a tiny search */
	expect_error(raw_alloc_req(&r, UINT64_MAX - PAGE, 1ull << 20, 0, NULL, 0, NULL),
		     VAD__ERROR__ESIZE, "huge size with a large align");
	/* an alignment as large as the arena is still valid for a small range */
	Vad__Response *resp = raw_alloc_req(&r, PAGE, 128ull << 20, 0, NULL, 0, NULL);
	assert_int_equal(VAD__ERROR__OK, resp->error);
	uint64_t off = resp->alloc->offsets[0];
	assert_int_equal(0, off % (128ull << 20));
	vt_raw_response_free(resp);
	assert_int_equal(0, vt_raw_free(&r, off));
	expect_holds_nothing(&r);
	vt_raw_close(&r);
}

static void test_batches_at_the_edges(void **state)
{
	struct vt_daemon *d = *state;
	struct vt_raw r;
	raw_open(d, &r);
	/* count past max_batch (64), and absurdly past it */
	expect_error(raw_alloc_req(&r, PAGE, 0, 65, NULL, 0, NULL), VAD__ERROR__ETOOBIG,
		     "count 65");
	expect_error(raw_alloc_req(&r, PAGE, 0, UINT32_MAX, NULL, 0, NULL), VAD__ERROR__ETOOBIG,
		     "count 2^32-1");
	uint64_t sizes[65];
	for (int i = 0; i < 65; i++)
		sizes[i] = PAGE;
	expect_error(raw_alloc_req(&r, 0, 0, 0, sizes, 65, NULL), VAD__ERROR__ETOOBIG, "65 sizes");
	/* one zero size spoils the whole batch; nothing is allocated */
	sizes[10] = 0;
	expect_error(raw_alloc_req(&r, 0, 0, 0, sizes, 64, NULL), VAD__ERROR__ESIZE,
		     "a batch with a zero size");
	sizes[10] = UINT64_MAX;
	expect_error(raw_alloc_req(&r, 0, 0, 0, sizes, 64, NULL), VAD__ERROR__ESIZE,
		     "a batch with a 2^64-1 size");
	expect_holds_nothing(&r);
	/* count 64 of one size works; count 0 means one */
	Vad__Response *resp = raw_alloc_req(&r, PAGE, 0, 64, NULL, 0, NULL);
	assert_int_equal(VAD__ERROR__OK, resp->error);
	assert_int_equal(64, resp->alloc->n_offsets);
	struct vt_req q;
	Vad__Response *fresp = vt_raw_call(
	    &r, vt_req_free(&q, NULL, resp->alloc->offsets, resp->alloc->n_offsets), REPLY_TIMEOUT);
	assert_non_null(fresp);
	assert_int_equal(VAD__ERROR__OK, fresp->error);
	assert_int_equal(64, fresp->free->freed);
	vt_raw_response_free(fresp);
	vt_raw_response_free(resp);
	resp = raw_alloc_req(&r, PAGE, 0, 0, NULL, 0, NULL);
	assert_int_equal(VAD__ERROR__OK, resp->error);
	assert_int_equal(1, resp->alloc->n_offsets);
	assert_int_equal(0, vt_raw_free(&r, resp->alloc->offsets[0]));
	vt_raw_response_free(resp);
	/* a free batch past max_batch is refused whole */
	uint64_t offs[65] = {0};
	fresp = vt_raw_call(&r, vt_req_free(&q, NULL, offs, 65), REPLY_TIMEOUT);
	assert_non_null(fresp);
	expect_error(fresp, VAD__ERROR__ETOOBIG, "free of 65 offsets");
	expect_holds_nothing(&r);
	vt_raw_close(&r);
}

static void test_offsets_inside_ranges(void **state)
{
	struct vt_daemon *d = *state;
	struct vt_raw r;
	raw_open(d, &r);
	Vad__Response *resp = raw_alloc_req(&r, 4 * PAGE, 0, 0, NULL, 0, NULL);
	assert_int_equal(VAD__ERROR__OK, resp->error);
	uint64_t off = resp->alloc->offsets[0];
	vt_raw_response_free(resp);
	/* Only the start of a range names it. */
	assert_int_equal(VAD__ERROR__ENOTHELD, vt_raw_free(&r, off + PAGE));
	assert_int_equal(VAD__ERROR__ENOTHELD, vt_raw_free(&r, off + 1));
	struct vt_req q;
	resp = vt_raw_call(&r, vt_req_share(&q, NULL, off + PAGE), REPLY_TIMEOUT);
	assert_non_null(resp);
	expect_error(resp, VAD__ERROR__ENOTHELD, "share of an offset inside a range");
	/* The range is intact: freeing its start works once. */
	assert_int_equal(VAD__ERROR__OK, vt_raw_free(&r, off));
	assert_int_equal(VAD__ERROR__ENOTHELD, vt_raw_free(&r, off));
	expect_holds_nothing(&r);
	vt_raw_close(&r);
}

static void test_absurd_names_and_tokens(void **state)
{
	struct vt_daemon *d = *state;
	/* A 60000-character client name: accepted (perhaps shortened) or refused, never
	 * fatal; clients listing still works. */
	struct vt_raw r;
	assert_int_equal(0, vt_raw_connect(&r, d->socket_path));
	char *name = malloc(60001);
	assert_non_null(name);
	memset(name, 'n', 60000);
	name[60000] = '\0';
	struct vt_req q;
	Vad__Response *resp = vt_raw_call(&r, vt_req_hello(&q, name), REPLY_TIMEOUT);
	assert_non_null(resp);
	bool hello_ok = resp->error == VAD__ERROR__OK;
	vt_raw_response_free(resp);
	free(name);
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "lister", &c));
	struct vad_client_info *clients;
	size_t n;
	VT_ASSERT_OK(c, vad_clients(c, &clients, &n));
	assert_true(n >= 1);
	free(clients);
	if (hello_ok) {
		/* the long-named session works */
		uint64_t off;
		assert_int_equal(0, vt_raw_alloc(&r, PAGE, &off));
		assert_int_equal(0, vt_raw_free(&r, off));
	}
	vt_raw_close(&r);

	/* Tokens: far too long, binary, empty. */
	raw_open(d, &r);
	char *longtok = malloc(50001);
	assert_non_null(longtok);
	memset(longtok, 'A', 50000);
	longtok[50000] = '\0';
	const char *tokens[] = {longtok, "\x01\x02\x03\xff", "", "../../../../etc/passwd"};
	for (size_t i = 0; i < sizeof(tokens) / sizeof(tokens[0]); i++) {
		Vad__Response *aresp = vt_raw_call(&r, vt_req_attach(&q, tokens[i]), REPLY_TIMEOUT);
		if (!aresp)
			fail_msg("no reply to attach with token %zu", i);
		expect_error(aresp, VAD__ERROR__ETOKEN, "attach with an absurd token");
	}
	free(longtok);
	expect_holds_nothing(&r);
	vt_raw_close(&r);
	VT_ASSERT_OK(c, vad_stats(c, &(struct vad_stats){0}));
	vad_close(c);
}

static void test_second_hello(void **state)
{
	struct vt_daemon *d = *state;
	struct vt_raw r;
	raw_open(d, &r);
	uint64_t off;
	assert_int_equal(0, vt_raw_alloc(&r, PAGE, &off));
	/* A second hello is refused or harmless; it never drops what the session holds. */
	struct vt_req q;
	Vad__Response *resp = vt_raw_call(&r, vt_req_hello(&q, "again"), REPLY_TIMEOUT);
	assert_non_null(resp);
	vt_raw_response_free(resp);
	assert_int_equal(VAD__ERROR__OK, vt_raw_free(&r, off));
	expect_holds_nothing(&r);
	vt_raw_close(&r);
}

static void nobody_maps_private(const struct vt_daemon *d)
{
	struct vt_raw r;
	VT_CHILD_CHECK(vt_raw_connect(&r, d->socket_path) == 0, "connect");
	VT_CHILD_CHECK(vt_raw_hello(&r, "nobody") == 0, "hello");
	struct vt_req q;
	Vad__Response *resp = vt_raw_call(&r, vt_req_map_arena(&q, "private"), REPLY_TIMEOUT);
	VT_CHILD_CHECK(resp != NULL, "no reply to map_arena");
	VT_CHILD_CHECK(resp->error == VAD__ERROR__EPERM, "map of a root-only arena as nobody: %s",
		       vt_error_name(resp->error));
	VT_CHILD_CHECK(r.fds_received == 0, "the daemon passed the fd anyway");
	vt_raw_response_free(resp);
	/* nor through stats of that arena */
	resp = vt_raw_call(&r, vt_req_stats(&q, "private"), REPLY_TIMEOUT);
	VT_CHILD_CHECK(resp != NULL, "no reply to stats");
	VT_CHILD_CHECK(resp->error == VAD__ERROR__EPERM, "stats of a root-only arena as nobody: %s",
		       vt_error_name(resp->error));
	vt_raw_response_free(resp);
	vt_raw_close(&r);
}

/* A share token is a grant from a holder, but it must not open an arena the peer may not
 * map at all: attaching a range of a root-only arena as nobody is refused. */
static void nobody_attaches_private(const struct vt_daemon *d, const char *token)
{
	vad_client *c;
	int rc = vad_connect(d->socket_path, "nobody", &c);
	VT_CHILD_CHECK(rc == 0, "connect: %s", vad_last_error(NULL));
	void *q;
	size_t size;
	rc = vad_attach(c, token, &q, &size);
	VT_CHILD_CHECK(rc == VAD_EPERM, "attach to a root-only arena's range as nobody: %d (%s)",
		       rc, vad_last_error(c));
	vad_close(c);
}

static void test_private_arena_stays_private(void **state)
{
	struct vt_daemon *d = *state;
	if (!vt_is_root()) {
		print_message("skipped: switching to uid nobody needs root\n");
		skip();
	}
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "root", &c));
	void *p;
	VT_ASSERT_OK(c, vad_alloc_in(c, "private", PAGE, 0, &p));
	char token[VAD_TOKEN_LEN + 1];
	VT_ASSERT_OK(c, vad_share(c, p, token));
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		VT_CHILD_CHECK(vt_become_nobody() == 0, "cannot drop privileges");
		nobody_maps_private(d);
		nobody_attaches_private(d, token);
		_exit(0);
	}
	assert_int_equal(0, vt_wait_child(pid, vt_timeout_ms(20000)));
	VT_ASSERT_OK(c, vad_free(c, p));
	vad_close(c);
}

static void test_books_balanced(void **state)
{
	struct vt_daemon *d = *state;
	assert_int_equal(0, vt_purge(d));
	struct vad_stats s;
	assert_int_equal(0, vt_wait_busy(d, 0, 1, vt_timeout_ms(2000), &s));
	assert_int_equal(0, s.lazy_bytes);
	assert_int_equal(s.arena_bytes, s.free_bytes);
	assert_int_equal(0, vt_check_invariants(d));
	assert_int_equal(0, vt_daemon_stop(d));
}

/* Whatever one vad_alloc_batch allocated, one vad_free_batch of the same ranges frees:
 * the free request (offsets as varints) must fit max_frame whenever the alloc request
 * (sizes) did. The daemon takes a max_frame too small for a max_batch batch (each key has
 * its own range, none depends on the other) and bounds each alloc batch by max_frame as
 * well: a batch whose reply or free request would not fit is refused with ETOOBIG. */
static void test_batch_allocated_is_batch_freeable(void **state)
{
	struct vt_daemon *d = *state;
	const char *extra = "max_frame = 4K\nmax_batch = 4096\n";
	const char *arenas = "[arena default]\nsize = 64G\n";
	assert_int_equal(0, vt_daemon_init(d));
	assert_int_equal(0, vt_daemon_write_config(d, extra, arenas));
	char bin[PATH_MAX];
	snprintf(bin, sizeof(bin), "%s/vad", vt_build_dir());
	char *argv[] = {bin, "-c", d->conf_path, "--check-config", NULL};
	struct vt_output o;
	assert_int_equal(0, vt_run(argv, NULL, vt_timeout_ms(20000), &o));
	if (o.exit_code != 0)
		vt_output_print("vad --check-config with max_frame 4K and max_batch 4096", &o);
	assert_int_equal(0, o.exit_code);
	vt_output_free(&o);
	assert_int_equal(0, vt_daemon_start(d));
	vad_client *c;
	assert_int_equal(0, vt_connect(d, "batcher", &c));
	enum { N = 900 };
	size_t *sizes = calloc(N, sizeof(*sizes));
	void **ptrs = calloc(N, sizeof(*ptrs));
	assert_non_null(sizes);
	assert_non_null(ptrs);
	for (int i = 0; i < N; i++)
		sizes[i] = 1 << 20;
	/* The largest batch the daemon accepts (halving from N) must also free in one go. */
	int n = N, rc;
	while ((rc = vad_alloc_batch(c, (size_t)n, sizes, 0, ptrs)) == VAD_ETOOBIG && n > 1)
		n /= 2;
	if (rc != 0)
		fail_msg("no batch of 1 MiB ranges was accepted: %d (%s)", rc, vad_last_error(c));
	print_message("largest accepted batch (halving from %d): %d ranges\n", N, n);
	/* 900 ranges do not fit one 4 KiB frame: max_frame, not max_batch (4096), is the bound. */
	assert_true(n < N);
	rc = vad_free_batch(c, (size_t)n, ptrs);
	if (rc != 0)
		fail_msg("vad_alloc_batch of %d ranges worked, vad_free_batch of the same "
			 "ranges failed: %d (%s)",
			 n, rc, vad_last_error(c));
	/* the connection is alive and holds nothing */
	struct vad_stats st;
	VT_ASSERT_OK(c, vad_stats(c, &st));
	assert_int_equal(0, st.held_ranges);
	free(sizes);
	free(ptrs);
	vad_close(c);
	assert_int_equal(0, vt_daemon_stop(d));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sizes_near_2_64),
	    cmocka_unit_test(test_aligns_at_the_edges),
	    cmocka_unit_test(test_batches_at_the_edges),
	    cmocka_unit_test(test_offsets_inside_ranges),
	    cmocka_unit_test(test_absurd_names_and_tokens),
	    cmocka_unit_test(test_second_hello),
	    cmocka_unit_test(test_private_arena_stays_private),
	    cmocka_unit_test(test_books_balanced),
	};
	const struct CMUnitTest own[] = {
	    VT_OWN_DAEMON_TEST(test_batch_allocated_is_batch_freeable),
	};
	int failed = cmocka_run_group_tests_name("edges", tests, group_setup,
						 vt_group_daemon_stop_if_running);
	failed += cmocka_run_group_tests_name("edges, own daemon", own, NULL, NULL);
	return failed ? 1 : 0;
}
